/*
 * test_api_more.c - the collectives that move blocks (api_more.c) on one
 * rank, where every call is a local copy: results in and out of place, the
 * non-blocking forms, and every argument a rank can check alone (NULL
 * buffers and arrays, overflowing counts and displacements, a root out of
 * range, an unknown dtype, a v-form's own entries disagreeing), each of
 * which fails and breaks the communicator as api.c's calls do.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "gradwire.h"
#include "tests/collectives/single_rank.h"

Test(api_more, one_rank_copies_in_and_out_of_place)
{
    gw_comm_t *comm = single_rank_comm();
    int32_t in[6] = {1, -2, 3, -4, 5, 6}, out[8];
    memset(out, 0, sizeof(out));
    cr_expect_eq(gw_alltoall(comm, in, out, 6, GW_INT32), GW_OK);
    cr_expect_arr_eq(in, out, sizeof(in));
    cr_expect_eq(gw_alltoall(comm, out, out, 6, GW_INT32), GW_OK);
    cr_expect_arr_eq(in, out, sizeof(in));
    size_t sc[1] = {4}, sd[1] = {2}, rc[1] = {4}, rd[1] = {3};
    memset(out, 0, sizeof(out));
    cr_expect_eq(gw_alltoallv(comm, in, sc, sd, out, rc, rd, GW_INT32), GW_OK);
    cr_expect_arr_eq(in + 2, out + 3, 4 * sizeof(int32_t));
    cr_expect_eq(out[2], 0);
    cr_expect_eq(out[7], 0);
    cr_expect_eq(gw_alltoallv(comm, out, NULL, NULL, out, rc, rd, GW_INT32), GW_OK);
    cr_expect_arr_eq(in + 2, out + 3, 4 * sizeof(int32_t));
    memset(out, 0, sizeof(out));
    cr_expect_eq(gw_gather(comm, in, out, 6, GW_INT32, 0), GW_OK);
    cr_expect_arr_eq(in, out, sizeof(in));
    memset(out, 0, sizeof(out));
    cr_expect_eq(gw_scatter(comm, in, out, 6, GW_INT32, 0), GW_OK);
    cr_expect_arr_eq(in, out, sizeof(in));
    memset(out, 0, sizeof(out));
    size_t cnt[1] = {5}, dsp[1] = {1};
    cr_expect_eq(gw_allgatherv(comm, in, out, 5, cnt, dsp, GW_INT32), GW_OK);
    cr_expect_arr_eq(in, out + 1, 5 * sizeof(int32_t));
    cr_expect_eq(gw_allgatherv(comm, out + 1, out, 5, cnt, dsp, GW_INT32), GW_OK);
    cr_expect_arr_eq(in, out + 1, 5 * sizeof(int32_t));
    /* Nothing to move: NULL buffers are fine. */
    size_t zero[1] = {0};
    cr_expect_eq(gw_alltoall(comm, NULL, NULL, 0, GW_FLOAT32), GW_OK);
    cr_expect_eq(gw_alltoallv(comm, NULL, zero, zero, NULL, zero, zero, GW_FLOAT32), GW_OK);
    cr_expect_eq(gw_gather(comm, NULL, NULL, 0, GW_FLOAT32, 0), GW_OK);
    cr_expect_eq(gw_allgatherv(comm, NULL, NULL, 0, zero, zero, GW_FLOAT32), GW_OK);
    gw_comm_destroy(comm);
}

Test(api_more, non_blocking_forms_complete)
{
    gw_comm_t *comm = single_rank_comm();
    int32_t in[4] = {7, 8, 9, 10}, out[5][4];
    memset(out, 0, sizeof(out));
    size_t c[1] = {4}, d[1] = {0};
    gw_handle_t *h[11];
    cr_assert_eq(gw_ialltoall(comm, in, out[0], 4, GW_INT32, &h[0]), GW_OK);
    cr_assert_eq(gw_ialltoallv(comm, in, c, d, out[1], c, d, GW_INT32, &h[1]), GW_OK);
    cr_assert_eq(gw_igather(comm, in, out[2], 4, GW_INT32, 0, &h[2]), GW_OK);
    cr_assert_eq(gw_iscatter(comm, in, out[3], 4, GW_INT32, 0, &h[3]), GW_OK);
    cr_assert_eq(gw_iallgatherv(comm, in, out[4], 4, c, d, GW_INT32, &h[4]), GW_OK);
    int32_t b[4], r[4], g[4], rs[4];
    cr_assert_eq(gw_ibroadcast(comm, in, b, 4, GW_INT32, 0, &h[5]), GW_OK);
    cr_assert_eq(gw_ireduce(comm, in, r, 4, GW_INT32, GW_SUM, 0, &h[6]), GW_OK);
    cr_assert_eq(gw_iallgather(comm, in, g, 4, GW_INT32, &h[7]), GW_OK);
    cr_assert_eq(gw_ireduce_scatter(comm, in, rs, 4, GW_INT32, GW_MAX, &h[8]), GW_OK);
    cr_assert_eq(gw_ibarrier(comm, &h[9]), GW_OK);
    cr_assert_eq(gw_iallreduce(comm, in, in, 4, GW_INT32, GW_SUM, &h[10]), GW_OK);
    for (int k = 10; k >= 0; k--)
        cr_expect_eq(gw_wait(h[k]), GW_OK, "handle %d", k);
    for (int k = 0; k < 5; k++)
        cr_expect_arr_eq(out[k], in, sizeof(in), "call %d", k);
    cr_expect_arr_eq(b, in, sizeof(in));
    cr_expect_arr_eq(r, in, sizeof(in));
    cr_expect_arr_eq(g, in, sizeof(in));
    cr_expect_arr_eq(rs, in, sizeof(in));
    /* NULL handles are refused at once. */
    cr_expect_eq(gw_ialltoall(comm, in, out[0], 4, GW_INT32, NULL), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw_ibarrier(comm, NULL), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw_ibarrier(NULL, &h[0]), GW_ERR_INVALID_ARG);
    gw_comm_destroy(comm);
}

Test(api_more, bad_arguments_fail_and_break_the_communicator)
{
    float x[8] = {0};
    size_t one[1] = {1}, two[1] = {2}, at0[1] = {0}, huge[1] = {SIZE_MAX / 2};
    cr_expect_eq(gw_alltoall(NULL, x, x, 1, GW_FLOAT32), GW_ERR_INVALID_ARG);
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_alltoall(comm, NULL, x, 1, GW_FLOAT32));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_alltoall(comm, x, x, 1, (gw_dtype_t)42));
    EXPECT_FAIL(GW_ERR_OVERFLOW, gw_alltoall(comm, x, x, SIZE_MAX / 2, GW_FLOAT32));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_alltoallv(comm, x, NULL, at0, x + 4, one, at0, GW_FLOAT32));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_alltoallv(comm, x, one, at0, x + 4, one, NULL, GW_FLOAT32));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_alltoallv(comm, x, one, at0, NULL, one, at0, GW_FLOAT32));
    EXPECT_FAIL(GW_ERR_OVERFLOW, gw_alltoallv(comm, x, one, huge, x + 4, one, at0, GW_FLOAT32));
    EXPECT_FAIL(GW_ERR_MISMATCH, gw_alltoallv(comm, x, one, at0, x + 4, two, at0, GW_FLOAT32));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_gather(comm, x, x + 4, 1, GW_FLOAT32, 1));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_gather(comm, x, NULL, 1, GW_FLOAT32, 0));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_scatter(comm, x, x + 4, 1, GW_FLOAT32, -1));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_scatter(comm, NULL, x + 4, 1, GW_FLOAT32, 0));
    EXPECT_FAIL(GW_ERR_OVERFLOW, gw_scatter(comm, x, x, SIZE_MAX / 4 + 1, GW_FLOAT32, 0));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_allgatherv(comm, x, x + 4, 1, NULL, at0, GW_FLOAT32));
    EXPECT_FAIL(GW_ERR_MISMATCH, gw_allgatherv(comm, x, x + 4, 2, one, at0, GW_FLOAT32));
    EXPECT_FAIL(GW_ERR_OVERFLOW, gw_allgatherv(comm, x, x + 4, 1, one, huge, GW_FLOAT32));
    /* A non-blocking call reports its argument error when it completes. */
    gw_comm_t *comm = single_rank_comm();
    gw_handle_t *h;
    cr_assert_eq(gw_igather(comm, x, x + 4, 1, GW_FLOAT32, 3, &h), GW_OK);
    cr_expect_eq(gw_wait(h), GW_ERR_INVALID_ARG);
    gw_comm_destroy(comm);
}
