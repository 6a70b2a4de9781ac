/*
 * single_rank.h - a communicator of one rank for the tests of what a rank
 * checks or does alone (arguments, refusals, local copies), and the check
 * that a call on a fresh one fails and leaves it failed.
 */
#ifndef GW_TESTS_SINGLE_RANK_H
#define GW_TESTS_SINGLE_RANK_H

#include <criterion/criterion.h>
#include <stdlib.h>

#include "gradwire.h"

/* Rank 0 of 1, from the environment as a launcher would give it. */
static inline gw_comm_t *single_rank_comm(void)
{
    gw_comm_t *comm = NULL;
    setenv("GW_RANK", "0", 1);
    setenv("GW_SIZE", "1", 1);
    unsetenv("GW_TRANSPORT");
    cr_assert_eq(gw_comm_init_env(&comm), GW_OK);
    return comm;
}

/* One call on a fresh communicator must fail with want, and the
 * communicator stays failed afterwards. */
#define EXPECT_FAIL(want, call)                                                                   \
    do {                                                                                          \
        gw_comm_t *comm = single_rank_comm();                                                     \
        cr_expect_eq((call), (want), "%s", #call);                                                \
        cr_expect_eq(gw_barrier(comm), (want), "after %s the communicator is not failed", #call); \
        gw_comm_destroy(comm);                                                                    \
    } while (0)

#endif
