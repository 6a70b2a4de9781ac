/*
 * test_dtype_ops.c - the dtypes and ops added to the public calls (8-bit
 * floats, uint32/uint64, bitwise and/or/xor, premul_sum) on real ranks,
 * and the combinations the API refuses, each with the error it promises.
 *
 * The values are chosen so that every result is exact in the dtype
 * whatever order the ranks' contributions are added in, so a rank can
 * compute the expected bits alone.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "collectives/reduce_kernels.h"
#include "forked_ranks.h"
#include "tests/collectives/single_rank.h"

#define N 40

static void ops_body(fr_rank_t *r, const void *arg)
{
    (void)arg;
    const int n = r->size;
    gw_status_t st;
    /* Bitwise ops: rank r sets bit r (and the or/and/xor of those). */
    uint64_t u64[N], want64 = 0;
    uint32_t u32[N];
    int8_t i8[N];
    for (int i = 0; i < N; i++) {
        u64[i] = (1ULL << (r->rank + 40)) | (uint64_t)i;
        u32[i] = 0xffff0000u | (1u << r->rank);
        i8[i] = (int8_t)(1 << r->rank);
    }
    for (int k = 0; k < n; k++)
        want64 |= 1ULL << (k + 40);
    st = gw_allreduce(r->comm, u64, u64, N, GW_UINT64, GW_BOR);
    FR_CHECK(r, st == GW_OK, "uint64 bor: %s", gw_status_name(st));
    FR_CHECK(r, u64[3] == (want64 | 3u), "uint64 bor: 0x%llx", (unsigned long long)u64[3]);
    st = gw_allreduce(r->comm, u32, u32, N, GW_UINT32, GW_BAND);
    FR_CHECK(r, st == GW_OK && u32[7] == (n == 1 ? 0xffff0001u : 0xffff0000u), "uint32 band 0x%x",
             u32[7]);
    st = gw_allreduce(r->comm, i8, i8, N, GW_INT8, GW_BXOR);
    FR_CHECK(r, st == GW_OK && i8[0] == (int8_t)((1 << n) - 1), "int8 bxor %d", i8[0]);
    /* uint32 sum wraps, max compares unsigned. */
    uint32_t big = 0xfffffff0u + (uint32_t)r->rank, mx;
    st = gw_allreduce(r->comm, &big, &mx, 1, GW_UINT32, GW_MAX);
    FR_CHECK(r, st == GW_OK && mx == 0xfffffff0u + (uint32_t)(n - 1), "uint32 max 0x%x", mx);

    /* float8: small integers, exact in both formats. */
    uint8_t e4[N], e5[N];
    for (int i = 0; i < N; i++) {
        e4[i] = gw__float_to_e4m3((float)(r->rank + 1) * 0.5f);
        e5[i] = gw__float_to_e5m2((float)(r->rank + 1));
    }
    float tri = (float)(n * (n + 1) / 2);
    st = gw_allreduce(r->comm, e4, e4, N, GW_FLOAT8_E4M3, GW_SUM);
    FR_CHECK(r, st == GW_OK && gw__e4m3_to_float(e4[N - 1]) == tri * 0.5f, "e4m3 sum %g",
             (double)gw__e4m3_to_float(e4[N - 1]));
    st = gw_allreduce(r->comm, e5, e5, N, GW_FLOAT8_E5M2, GW_MAX);
    FR_CHECK(r, st == GW_OK && gw__e5m2_to_float(e5[0]) == (float)n, "e5m2 max %g",
             (double)gw__e5m2_to_float(e5[0]));
    /* E4M3 overflow is NaN (non-saturating): 448 on every rank. */
    uint8_t big8 = gw__float_to_e4m3(448.0f), sum8 = 0;
    st = gw_allreduce(r->comm, &big8, &sum8, 1, GW_FLOAT8_E4M3, GW_SUM);
    FR_CHECK(r, st == GW_OK && (n == 1 ? sum8 == big8 : (sum8 & 0x7f) == 0x7f),
             "448 summed over %d ranks: 0x%02x", n, sum8);

    /* premul_sum: rank r scales by (r + 1); sendbuf stays untouched. */
    float x[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i + r->rank);
    st = gw_allreduce_premul(r->comm, x, y, N, GW_FLOAT32, r->rank + 1.0);
    float w = 0;
    for (int k = 0; k < n; k++)
        w += (float)(k + 1) * (float)(5 + k);
    FR_CHECK(r, st == GW_OK && y[5] == w, "premul float32: %g want %g", (double)y[5], (double)w);
    FR_CHECK(r, x[5] == (float)(5 + r->rank), "premul modified sendbuf");
    /* In place, bfloat16, factor 1/n: the average of 2, 4, ... */
    uint16_t bf[N];
    for (int i = 0; i < N; i++)
        bf[i] = gw__float_to_bf16(2.0f * (float)(r->rank + 1));
    st = gw_allreduce_premul(r->comm, bf, bf, N, GW_BFLOAT16, 0.5);
    FR_CHECK(r, st == GW_OK && gw__bf16_to_float(bf[1]) == tri, "premul bf16 %g",
             (double)gw__bf16_to_float(bf[1]));
    /* Reduce-scatter premul: n blocks of 2, factor 2. */
    double ds[16], dr[2];
    for (int i = 0; i < 2 * n; i++)
        ds[i] = i;
    st = gw_reduce_scatter_premul(r->comm, ds, dr, 2, GW_FLOAT64, 2.0);
    FR_CHECK(r, st == GW_OK && dr[1] == 2.0 * n * (2 * r->rank + 1), "premul rs %g", dr[1]);
}

/* Compression of float16 and bfloat16 gradients: bitwise what widening
 * them, compressing as float32 and rounding the average back gives, over
 * three steps (so the residual carries over), for a lossy codec. */
static void compress_half_body(fr_rank_t *r, const void *arg)
{
    (void)arg;
    enum { M = 300 };
    const gw_dtype_t dts[] = {GW_FLOAT16, GW_BFLOAT16};
    for (int d = 0; d < 2; d++) {
        gw_dtype_t dt = dts[d];
        gw_compress_config_t cfg = GW_COMPRESS_CONFIG_INITIALIZER;
        cfg.codec = GW_CODEC_INT8;
        gw_compress_state_t *sh = NULL, *sf = NULL;
        FR_CHECK(r, gw_compress_state_create(&cfg, M, 1, &sh) == GW_OK, "state");
        FR_CHECK(r, gw_compress_state_create(&cfg, M, 1, &sf) == GW_OK, "state");
        for (int step = 0; step < 3; step++) {
            uint16_t h[M], hout[M];
            float f[M], fout[M];
            for (int i = 0; i < M; i++) {
                float v = (float)((i * 37 + r->rank * 11 + step * 5) % 101 - 50) / 16.0f;
                h[i] = dt == GW_FLOAT16 ? gw__float_to_half(v) : gw__float_to_bf16(v);
                f[i] = dt == GW_FLOAT16 ? gw__half_to_float(h[i]) : gw__bf16_to_float(h[i]);
            }
            gw_status_t st = gw_allreduce_compressed_dtype(r->comm, sh, h, hout, M, dt);
            FR_CHECK(r, st == GW_OK, "%s compressed: %s", gw_dtype_name(dt), gw_status_name(st));
            st = gw_allreduce_compressed(r->comm, sf, f, fout, M);
            FR_CHECK(r, st == GW_OK, "float32 compressed: %s", gw_status_name(st));
            int bad = 0;
            for (int i = 0; i < M; i++) {
                uint16_t want =
                    dt == GW_FLOAT16 ? gw__float_to_half(fout[i]) : gw__float_to_bf16(fout[i]);
                bad += hout[i] != want;
            }
            FR_CHECK(r, bad == 0, "%s step %d: %d elements differ from the float32 path",
                     gw_dtype_name(dt), step, bad);
        }
        gw_compress_state_destroy(sh);
        gw_compress_state_destroy(sf);
    }
}

/* Another dtype is refused, in a job of its own: the refusal fails the
 * communicator and tells the peers (a rank that refuses a collective the
 * others make must not leave them waiting), and as the last call of the
 * job above it once failed a peer still finishing the float32 call before
 * it (CI, 2 cores), and after a barrier the barrier: that the news of a
 * refusal can fail a collective the peer is still finishing is a known
 * limit (docs/guide/troubleshooting.md). Here it is the only call: every
 * rank refuses it or hears of the first refusal, GW_ERR_INVALID_ARG both
 * ways. */
static void compress_refused_body(fr_rank_t *r, const void *arg)
{
    (void)arg;
    gw_compress_config_t cfg = GW_COMPRESS_CONFIG_INITIALIZER;
    gw_compress_state_t *s = NULL;
    FR_CHECK(r, gw_compress_state_create(&cfg, 4, 1, &s) == GW_OK, "state");
    double x[4] = {0};
    FR_CHECK(r,
             gw_allreduce_compressed_dtype(r->comm, s, x, x, 4, GW_FLOAT64) == GW_ERR_INVALID_ARG,
             "float64 compression is refused");
    gw_compress_state_destroy(s);
}

Test(dtype_ops, float64_compression_is_refused, .timeout = 60)
{
    fr_run("tcp", 3, compress_refused_body, NULL);
}

Test(dtype_ops, compression_takes_half_inputs, .timeout = 60)
{
    fr_run("tcp", 3, compress_half_body, NULL);
}

Test(dtype_ops, every_new_combination_tcp, .timeout = 60) { fr_run("tcp", 3, ops_body, NULL); }

Test(dtype_ops, every_new_combination_shm, .timeout = 60) { fr_run("shm", 2, ops_body, NULL); }

Test(dtype_ops, refused_combinations)
{
    float f[4] = {1, 2, 3, 4};
    uint16_t h[4] = {0};
    uint8_t e[4] = {0};
    int32_t i[4] = {0};
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_allreduce(comm, f, f, 4, GW_FLOAT32, GW_BAND));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_allreduce(comm, h, h, 4, GW_BFLOAT16, GW_BOR));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_allreduce(comm, e, e, 4, GW_FLOAT8_E4M3, GW_BXOR));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_reduce_scatter(comm, f, f, 4, GW_FLOAT64, GW_BXOR));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_allreduce(comm, f, f, 4, GW_FLOAT32, GW_PREMUL_SUM));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_allreduce_premul(comm, i, i, 4, GW_INT32, 2.0));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_allreduce_premul(comm, f, f, 4, GW_FLOAT32, NAN));
    EXPECT_FAIL(GW_ERR_INVALID_ARG, gw_allreduce_premul(comm, f, f, 4, GW_FLOAT32, INFINITY));
    /* One rank: premul scales, bitwise ops on integers pass. */
    gw_comm_t *comm = single_rank_comm();
    float o[4];
    cr_expect_eq(gw_allreduce_premul(comm, f, o, 4, GW_FLOAT32, 0.5), GW_OK);
    cr_expect_eq(o[3], 2.0f);
    cr_expect_eq(gw_reduce_premul(comm, f, f, 4, GW_FLOAT32, 3.0, 0), GW_OK);
    cr_expect_eq(f[1], 6.0f);
    cr_expect_eq(gw_allreduce(comm, i, i, 4, GW_INT32, GW_BXOR), GW_OK);
    gw_comm_destroy(comm);
}

Test(dtype_ops, names_parse_back)
{
    for (int d = 0; d < GW_DTYPE_COUNT; d++) {
        gw_dtype_t got;
        cr_expect_eq(gw_dtype_parse(gw_dtype_name((gw_dtype_t)d), &got), GW_OK);
        cr_expect_eq(got, d);
        cr_expect_neq(gw_dtype_size((gw_dtype_t)d), 0u);
    }
    for (int o = 0; o < GW_OP_COUNT; o++) {
        gw_op_t got;
        cr_expect_eq(gw_op_parse(gw_op_name((gw_op_t)o), &got), GW_OK);
        cr_expect_eq(got, o);
    }
    gw_dtype_t d;
    cr_expect_eq(gw_dtype_parse("float8_e4m3fn", &d), GW_OK);
    cr_expect_eq(d, GW_FLOAT8_E4M3);
    cr_expect_eq(gw_dtype_size(GW_FLOAT8_E5M2), 1u);
    cr_expect_eq(gw_dtype_size(GW_UINT64), 8u);
    cr_expect_str_eq(gw_op_name(GW_PREMUL_SUM), "premul_sum");
}
