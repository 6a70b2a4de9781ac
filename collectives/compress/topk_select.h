/*
 * topk_select.h - selection of the k largest magnitudes (topk_select.c),
 * shared by the top-k codec and its tests.
 */
#ifndef GW_COMPRESS_TOPK_SELECT_H
#define GW_COMPRESS_TOPK_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "gradwire.h"

/* Memory the selection may use, grown on demand (the caller frees buf). */
typedef struct gw__cz_arena {
    void *buf;
    size_t len;
} gw__cz_arena_t;

/* Write to idx[0..k), in increasing order, the indices of k elements of
 * x[0..n) (finite, n < 2^32, 1 <= k <= n) with the largest magnitudes: every
 * element left out is no larger in magnitude than every element taken; ties
 * at the boundary go to the lower indices. key seeds the sampling. *path
 * (may be NULL) tells how it went: 0 exact selection over everything, 1
 * sampled threshold, 2 sampled threshold needing a second scan.
 * GW_ERR_NO_MEMORY when the arena cannot grow. */
gw_status_t gw__cz_topk_select(const float *x, size_t n, size_t k, uint32_t key,
                               gw__cz_arena_t *arena, uint32_t *idx, int *path);

/* The value of rank `nth` (0-based, ascending) of a[0..n), reordering a
 * (expected linear time; pivots from key). */
uint32_t gw__cz_select_nth(uint32_t *a, size_t n, size_t nth, uint32_t key);

#endif
