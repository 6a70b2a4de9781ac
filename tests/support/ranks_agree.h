/*
 * ranks_agree.h - the check the integration tests make after a job whose
 * workers each wrote DIR/rankR (worker_collectives, worker_compress): every
 * rank wrote its file, and every file equals rank 0's byte for byte.
 * Criterion assertions, so include it in test files only.
 */
#ifndef GW_TESTS_SUPPORT_RANKS_AGREE_H
#define GW_TESTS_SUPPORT_RANKS_AGREE_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/run.h"

/* Ranks 0..n-1's files in dir exist and equal rank 0's, which must not be
 * empty unless allow_empty. Returns rank 0's contents (free it). */
static inline char *expect_ranks_agree(const char *dir, int n, int allow_empty)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/rank0", dir);
    char *first = read_file(path);
    cr_assert_not_null(first, "rank 0 wrote no results");
    cr_assert(allow_empty || strlen(first) > 0, "rank 0 wrote an empty result file");
    for (int rank = 1; rank < n; rank++) {
        snprintf(path, sizeof(path), "%s/rank%d", dir, rank);
        char *other = read_file(path);
        cr_assert_not_null(other, "rank %d wrote no results", rank);
        cr_assert_str_eq(other, first, "rank %d's results differ bitwise from rank 0's", rank);
        free(other);
    }
    return first;
}

#endif
