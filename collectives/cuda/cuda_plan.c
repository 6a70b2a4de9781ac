/*
 * cuda_plan.c - what the GPU kernels decide on the host, in plain C.
 *
 * Launch sizes. Every element-wise kernel of collectives/cuda loops over
 * its grid (each thread steps by the number of threads launched), so the
 * grid can be capped: past a few blocks per SM more blocks only add
 * scheduling. The plan is the same for every kernel, so one function and
 * its test cover them all.
 *
 * Top-k sampling. The GPU selection (topk.cu) follows the CPU's
 * (collectives/compress/topk_select.c) step for step: the same choice
 * between exact selection and a sampled threshold, the same sample indices
 * from the same random stream, the same rank of the threshold in the
 * sample and the same retries. The constants are repeated here (the CPU
 * file keeps them static); tests/cuda/test_cuda_plan.c checks the rule
 * against the CPU selection's reported path, so the two cannot drift
 * apart unnoticed. As on the CPU the answer is the exact top k either way:
 * sampling only changes the cost.
 *
 * PowerSGD's products. cuBLAS is column-major and codec_powersgd.c's
 * matrices are row-major; a row-major C = A B is the column-major
 * C^T = B^T A^T, so each product swaps its operands and keeps the
 * transpositions. The arguments are computed here so that their shapes are
 * tested without cuBLAS.
 */
#include "collectives/cuda/cuda_plan.h"

#include <limits.h>
#include <stdlib.h>

#include "collectives/compress/codec.h"

/* topk_select.c's constants (see there). */
#define SMALL_N 65536
#define EXACT_FRACTION 8
#define SAMPLE_MIN 4096
#define SAMPLE_HITS 256
#define ATTEMPTS 3

gw_status_t gw__cuda_plan_launch(size_t count, uint32_t per_thread, gw__cuda_launch_t *out)
{
    if (per_thread == 0 || !out)
        return GW_ERR_INVALID_ARG;
    size_t per_block = (size_t)per_thread * GW_CUDA_BLOCK;
    size_t grid = count / per_block + (count % per_block != 0);
    out->block = GW_CUDA_BLOCK;
    out->grid = (uint32_t)(grid > GW_CUDA_MAX_GRID ? GW_CUDA_MAX_GRID : grid);
    return GW_OK;
}

uint32_t gw__cuda_vector_width(size_t esize)
{
    return esize == 0 || esize > 16 ? 1u : (uint32_t)(16 / esize);
}

int gw__cuda_vector_ok(const void *out, const void *a, const void *b)
{
    return (((uintptr_t)out | (uintptr_t)a | (uintptr_t)b) & 15u) == 0;
}

gw_status_t gw__cuda_topk_plan(size_t n, size_t k, gw__cuda_topk_plan_t *out)
{
    if (!out || k < 1 || k >= n)
        return GW_ERR_INVALID_ARG;
    size_t s = (size_t)((double)SAMPLE_HITS * (double)n / (double)k);
    s = s < SAMPLE_MIN ? SAMPLE_MIN : s;
    out->exact = n < SMALL_N || k > n / EXACT_FRACTION || s > n / 4;
    out->sample = s;
    out->want = (size_t)(1.3 * (double)s * (double)k / (double)n) + 8;
    out->cap = 2 * k + 1024;
    out->attempts = ATTEMPTS;
    return GW_OK;
}

size_t gw__cuda_topk_sample_index(uint32_t key, size_t j, size_t n)
{
    return (size_t)(((uint64_t)gw__cz_rand32(key ^ 0x5bd1e995u, (uint32_t)j) * n) >> 32);
}

static int cmp_u32(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    return (a > b) - (a < b);
}

uint32_t gw__cuda_rank_value(uint32_t *a, size_t n, size_t nth)
{
    qsort(a, n, sizeof *a, cmp_u32);
    return a[nth];
}

static int fits_int(size_t rows, size_t cols, int r)
{
    return r >= 1 && rows >= 1 && cols >= 1 && rows <= INT_MAX && cols <= INT_MAX;
}

gw_status_t gw__cuda_psgd_gemm_p(size_t rows, size_t cols, int r, gw__cuda_gemm_t *out)
{
    if (!out || !fits_int(rows, cols, r))
        return out && r >= 1 && rows && cols ? GW_ERR_UNSUPPORTED : GW_ERR_INVALID_ARG;
    /* P^T (r x rows) = Q^T (r x cols) M^T (cols x rows): the row-major Q
     * and M read as column-major are exactly Q^T and M^T. */
    *out = (gw__cuda_gemm_t){.transa = 0,
                             .transb = 0,
                             .m = r,
                             .n = (int)rows,
                             .k = (int)cols,
                             .lda = r,
                             .ldb = (int)cols,
                             .ldc = r};
    return GW_OK;
}

gw_status_t gw__cuda_psgd_gemm_q(size_t rows, size_t cols, int r, gw__cuda_gemm_t *out)
{
    if (!out || !fits_int(rows, cols, r))
        return out && r >= 1 && rows && cols ? GW_ERR_UNSUPPORTED : GW_ERR_INVALID_ARG;
    /* Q^T (r x cols) = P^T (r x rows) M (rows x cols): P read as
     * column-major is P^T; M read so is M^T, hence transposed. */
    *out = (gw__cuda_gemm_t){.transa = 0,
                             .transb = 1,
                             .m = r,
                             .n = (int)cols,
                             .k = (int)rows,
                             .lda = r,
                             .ldb = (int)cols,
                             .ldc = r};
    return GW_OK;
}
