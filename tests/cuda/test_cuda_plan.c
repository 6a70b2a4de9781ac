/*
 * test_cuda_plan.c - the host-side decisions of the GPU kernels
 * (collectives/cuda/cuda_plan.c), which run without a GPU: launch sizes,
 * the top-k sampling rule (emulated here step by step as topk.cu takes it,
 * and compared with the CPU selection's answer and path), and the cuBLAS
 * arguments of PowerSGD's products (run through a column-major reference
 * gemm, as cuBLAS would read them, and compared with the row-major
 * products codec_powersgd.c means).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/compress/codec.h"
#include "collectives/compress/topk_select.h"
#include "collectives/cuda/cuda_plan.h"

/* ---- launch sizes ------------------------------------------------------------ */

Test(cuda_plan, launch_covers_count_and_caps_the_grid)
{
    gw__cuda_launch_t p;
    cr_assert_eq(gw__cuda_plan_launch(10, 0, &p), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw__cuda_plan_launch(0, 1, &p), GW_OK);
    cr_assert_eq(p.grid, 0, "nothing to launch for no elements");
    const size_t counts[] = {1, 255, 256, 257, 1000, 65537, 2097152, 2097153, (size_t)1 << 34};
    const uint32_t per[] = {1, 4, 16};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        for (size_t q = 0; q < sizeof per / sizeof *per; q++) {
            cr_assert_eq(gw__cuda_plan_launch(counts[c], per[q], &p), GW_OK);
            cr_assert_eq(p.block, GW_CUDA_BLOCK);
            cr_assert(p.grid >= 1 && p.grid <= GW_CUDA_MAX_GRID);
            size_t per_block = (size_t)per[q] * p.block;
            if (p.grid < GW_CUDA_MAX_GRID) {
                /* Uncapped: the fewest blocks that cover count. */
                cr_assert((size_t)p.grid * per_block >= counts[c], "count %zu per %u: grid %u",
                          counts[c], per[q], p.grid);
                cr_assert((size_t)(p.grid - 1) * per_block < counts[c]);
            } else {
                cr_assert((size_t)GW_CUDA_MAX_GRID * per_block <= counts[c] + per_block);
            }
        }
    }
}

Test(cuda_plan, vector_width_and_alignment)
{
    cr_assert_eq(gw__cuda_vector_width(1), 16);
    cr_assert_eq(gw__cuda_vector_width(2), 8);
    cr_assert_eq(gw__cuda_vector_width(4), 4);
    cr_assert_eq(gw__cuda_vector_width(8), 2);
    _Alignas(16) char buf[64];
    cr_assert(gw__cuda_vector_ok(buf, buf + 16, buf + 32));
    cr_assert(!gw__cuda_vector_ok(buf, buf + 4, buf + 32));
    cr_assert(!gw__cuda_vector_ok(buf + 8, buf, buf));
}

/* ---- top-k ---------------------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Random floats; with `ties`, magnitudes from a few values only. */
static void fill(float *x, size_t n, uint64_t seed, int ties)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = mix64(seed + i);
        float v = ties ? (float)(r % 7) : (float)((int64_t)(r >> 11) - (1ll << 52)) * 0x1p-52f;
        x[i] = (r >> 63) ? -v : v;
    }
}

typedef struct pair {
    uint32_t key, idx;
} pair_t;

static int by_magnitude_then_index(const void *pa, const void *pb)
{
    const pair_t *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key > b->key ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

static int by_u32(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    return (a > b) - (a < b);
}

/* The first k of cand by (magnitude desc, index asc), sorted ascending:
 * what topk.cu's two stable radix sorts give. */
static void top_of(const float *x, const uint32_t *cand, size_t m, size_t k, uint32_t *idx)
{
    pair_t *p = malloc(m * sizeof *p);
    cr_assert_not_null(p);
    for (size_t j = 0; j < m; j++)
        p[j] = (pair_t){gw__cz_absbits(x[cand[j]]), cand[j]};
    qsort(p, m, sizeof *p, by_magnitude_then_index);
    for (size_t j = 0; j < k; j++)
        idx[j] = p[j].idx;
    qsort(idx, k, sizeof *idx, by_u32);
    free(p);
}

/* topk.cu's algorithm on the host, with its plan; returns its path. */
static int gpu_emulated(const float *x, size_t n, size_t k, uint32_t key, uint32_t *idx)
{
    gw__cuda_topk_plan_t pl;
    cr_assert_eq(gw__cuda_topk_plan(n, k, &pl), GW_OK);
    uint32_t *cand = malloc(n * sizeof *cand);
    cr_assert_not_null(cand);
    int path = 0;
    if (!pl.exact) {
        uint32_t *sample = malloc(pl.sample * sizeof *sample);
        cr_assert_not_null(sample);
        for (size_t j = 0; j < pl.sample; j++)
            sample[j] = gw__cz_absbits(x[gw__cuda_topk_sample_index(key, j, n)]);
        (void)gw__cuda_rank_value(sample, pl.sample, 0);
        size_t want = pl.want;
        for (int attempt = 0; attempt < pl.attempts && want <= pl.sample; attempt++, want *= 2) {
            uint32_t t = sample[pl.sample - want];
            size_t m = 0;
            for (size_t i = 0; i < n; i++)
                if (gw__cz_absbits(x[i]) >= t)
                    cand[m++] = (uint32_t)i;
            if (m > pl.cap)
                break;
            if (m < k)
                continue;
            top_of(x, cand, m, k, idx);
            path = attempt == 0 ? 1 : 2;
            break;
        }
        free(sample);
    }
    if (path == 0) {
        for (size_t i = 0; i < n; i++)
            cand[i] = (uint32_t)i;
        top_of(x, cand, n, k, idx);
    }
    free(cand);
    return path;
}

static void check_topk(size_t n, size_t k, uint64_t seed, int ties)
{
    float *x = malloc(n * sizeof *x);
    uint32_t *want = malloc(k * sizeof *want), *got = malloc(k * sizeof *got);
    cr_assert(x && want && got);
    fill(x, n, seed, ties);
    gw__cz_arena_t arena = {0};
    int cpu_path = -1;
    uint32_t key = (uint32_t)mix64(seed ^ 0xabcdef);
    cr_assert_eq(gw__cz_topk_select(x, n, k, key, &arena, want, &cpu_path), GW_OK);
    int gpu_path = gpu_emulated(x, n, k, key, got);
    cr_assert_eq(gpu_path, cpu_path, "n %zu k %zu ties %d: GPU path %d, CPU path %d", n, k, ties,
                 gpu_path, cpu_path);
    cr_assert_arr_eq(got, want, k * sizeof *got, "n %zu k %zu ties %d: different indices", n, k,
                     ties);
    free(arena.buf);
    free(x);
    free(want);
    free(got);
}

Test(cuda_plan, topk_sampling_gives_the_cpu_answer_and_path, .timeout = 120)
{
    /* Exact (small n, large k), sampled, and sampled with many ties (which
     * overflow the candidates and go exact). */
    check_topk(1000, 10, 1, 0);
    check_topk(100000, 20000, 2, 0);
    check_topk(100000, 100, 3, 0);
    check_topk(1 << 20, 1 << 10, 4, 0);
    check_topk(1 << 20, 10485, 5, 0);
    check_topk(300001, 3000, 6, 1);
    check_topk(262147, 1, 7, 0);
}

Test(cuda_plan, topk_plan_rejects_bad_sizes)
{
    gw__cuda_topk_plan_t pl;
    cr_assert_eq(gw__cuda_topk_plan(10, 0, &pl), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw__cuda_topk_plan(10, 10, &pl), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw__cuda_topk_plan(1 << 20, 1 << 10, &pl), GW_OK);
    cr_assert(!pl.exact);
    cr_assert_eq(pl.sample, 262144);
    cr_assert_eq(pl.want, (size_t)(1.3 * 256) + 8);
}

Test(cuda_plan, rank_value_is_the_cpu_selection)
{
    enum { N = 5001 };
    static uint32_t a[N], b[N];
    for (size_t i = 0; i < N; i++)
        a[i] = (uint32_t)(mix64(i) % 1000);
    for (size_t nth = 0; nth < N; nth += 613) {
        memcpy(b, a, sizeof a);
        uint32_t cpu = gw__cz_select_nth(b, N, nth, 99);
        memcpy(b, a, sizeof a);
        cr_assert_eq(gw__cuda_rank_value(b, N, nth), cpu, "rank %zu", nth);
    }
}

/* ---- PowerSGD's products ---------------------------------------------------------- */

/* C = op(A) op(B), column-major, as cublasSgemm with alpha 1, beta 0. */
static void gemm_colmajor(const gw__cuda_gemm_t *g, const float *a, const float *b, float *c)
{
    for (int i = 0; i < g->m; i++)
        for (int j = 0; j < g->n; j++) {
            double s = 0;
            for (int l = 0; l < g->k; l++) {
                float av = g->transa ? a[l + (size_t)i * g->lda] : a[i + (size_t)l * g->lda];
                float bv = g->transb ? b[j + (size_t)l * g->ldb] : b[l + (size_t)j * g->ldb];
                s += (double)av * bv;
            }
            c[i + (size_t)j * g->ldc] = (float)s;
        }
}

Test(cuda_plan, powersgd_gemm_arguments_give_the_row_major_products)
{
    const size_t rows = 7, cols = 5;
    const int r = 3;
    float m[7 * 5], q[5 * 3], p[7 * 3], want_p[7 * 3], ql[5 * 3], want_q[5 * 3];
    for (size_t i = 0; i < rows * cols; i++)
        m[i] = (float)(mix64(i) % 17) - 8;
    for (size_t i = 0; i < cols * (size_t)r; i++)
        q[i] = (float)(mix64(100 + i) % 11) - 5;
    /* P = M Q and Q = M^T P, row-major. */
    for (size_t i = 0; i < rows; i++)
        for (int j = 0; j < r; j++) {
            double s = 0;
            for (size_t l = 0; l < cols; l++)
                s += (double)m[i * cols + l] * q[l * (size_t)r + (size_t)j];
            want_p[i * (size_t)r + (size_t)j] = (float)s;
        }
    gw__cuda_gemm_t g;
    cr_assert_eq(gw__cuda_psgd_gemm_p(rows, cols, r, &g), GW_OK);
    gemm_colmajor(&g, q, m, p); /* first operand Q, second M */
    cr_assert_arr_eq(p, want_p, sizeof p);
    for (size_t i = 0; i < cols; i++)
        for (int j = 0; j < r; j++) {
            double s = 0;
            for (size_t l = 0; l < rows; l++)
                s += (double)m[l * cols + i] * p[l * (size_t)r + (size_t)j];
            want_q[i * (size_t)r + (size_t)j] = (float)s;
        }
    cr_assert_eq(gw__cuda_psgd_gemm_q(rows, cols, r, &g), GW_OK);
    gemm_colmajor(&g, p, m, ql); /* first operand P, second M */
    cr_assert_arr_eq(ql, want_q, sizeof ql);
    cr_assert_eq(gw__cuda_psgd_gemm_p((size_t)1 << 31, cols, r, &g), GW_ERR_UNSUPPORTED);
    cr_assert_eq(gw__cuda_psgd_gemm_q(rows, cols, 0, &g), GW_ERR_INVALID_ARG);
}
