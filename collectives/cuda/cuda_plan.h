/*
 * cuda_plan.h - the host-side decisions of the GPU kernels (cuda_plan.c),
 * in plain C so that CI tests them without a GPU: how many blocks a
 * launch gets, how the top-k threshold is sampled (the same rule as the
 * CPU's topk_select.c), and the cuBLAS arguments of PowerSGD's products.
 */
#ifndef GW_COLLECTIVES_CUDA_PLAN_H
#define GW_COLLECTIVES_CUDA_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "gradwire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Threads per block of every element-wise kernel, and the most blocks one
 * launch gets: the kernels loop over the grid (grid-stride), so a capped
 * grid still covers any count, and 8192 blocks of 256 threads keep every
 * SM of an H200 (132 SMs, 2048 threads each) full several times over. */
#define GW_CUDA_BLOCK 256u
#define GW_CUDA_MAX_GRID 8192u

typedef struct gw__cuda_launch {
    uint32_t grid, block;
} gw__cuda_launch_t;

/* The launch for `count` items of which each thread takes `per_thread` per
 * pass: block = GW_CUDA_BLOCK, grid = ceil(count / (per_thread * block))
 * capped at GW_CUDA_MAX_GRID and at least 1. GW_ERR_INVALID_ARG for
 * per_thread 0; count 0 gives grid 0 (launch nothing). */
gw_status_t gw__cuda_plan_launch(size_t count, uint32_t per_thread, gw__cuda_launch_t *out);

/* Elements per 16-byte vector for a dtype's size (16 / esize), and whether
 * all three pointers allow the vector path (16-byte aligned). */
uint32_t gw__cuda_vector_width(size_t esize);
int gw__cuda_vector_ok(const void *out, const void *a, const void *b);

/*
 * The top-k threshold by sampling, as topk_select.c decides it: exact
 * selection over all n (exact = 1) for k >= n / 8, n < 65536, or a sample
 * larger than n / 4; otherwise a sample of `sample` magnitudes at the
 * indices gw__cuda_topk_sample_index gives, the threshold at rank
 * `want` from the top of the sample (doubled for each retry, at most
 * `attempts` tries while want <= sample), and at most `cap` candidates
 * before the exact path takes over. Requires 1 <= k < n.
 */
typedef struct gw__cuda_topk_plan {
    int exact;
    size_t sample, want, cap;
    int attempts;
} gw__cuda_topk_plan_t;

gw_status_t gw__cuda_topk_plan(size_t n, size_t k, gw__cuda_topk_plan_t *out);

/* Index of sample element j of n, for the selection's key (the CPU's
 * gw__cz_rand32(key ^ 0x5bd1e995, j) * n >> 32). */
size_t gw__cuda_topk_sample_index(uint32_t key, size_t j, size_t n);

/* The value of rank `nth` (0-based, ascending) of a[0..n), reordering a:
 * a sort, whose answer is the one value topk_select.c's quickselect finds
 * (the value at a rank does not depend on how it is found). */
uint32_t gw__cuda_rank_value(uint32_t *a, size_t n, size_t nth);

/*
 * One cublasSgemm for a row-major product C (m x n) = op(A) op(B) with
 * op(A) m x k: cuBLAS is column-major, so it computes C^T = op(B)^T op(A)^T
 * with A and B swapped. transa/transb: 0 no transpose, 1 transpose, in
 * cuBLAS's order (of its first and second operands).
 */
typedef struct gw__cuda_gemm {
    int transa, transb;
    int m, n, k;
    int lda, ldb, ldc;
} gw__cuda_gemm_t;

/* PowerSGD's two products for the rows x cols matrix M and rank r (all
 * row-major, as codec_powersgd.c keeps them):
 *  P (rows x r) = M Q, Q cols x r:    first operand Q, second M;
 *  Q (cols x r) = M^T P, P rows x r:  first operand P, second M.
 * GW_ERR_UNSUPPORTED when a side exceeds cuBLAS's int. */
gw_status_t gw__cuda_psgd_gemm_p(size_t rows, size_t cols, int r, gw__cuda_gemm_t *out);
gw_status_t gw__cuda_psgd_gemm_q(size_t rows, size_t cols, int r, gw__cuda_gemm_t *out);

#ifdef __cplusplus
}
#endif

#endif
