/*
 * powersgd.cu - PowerSGD's steps on the GPU (collectives/compress/
 * codec_powersgd.c): the two products through cuBLAS, Gram-Schmidt,
 * the transposes and the reconstruction.
 *
 * Products. P = M Q and Q = M^T P are cublasSgemm calls whose column-major
 * arguments cuda_plan.c derives from the row-major shapes (and tests). As
 * on the CPU, BLAS only computes rank-local products: cuBLAS and OpenBLAS
 * round differently, so these are within float rounding of the CPU's, and
 * what every rank must agree on bit for bit happens after the allreduce.
 *
 * Gram-Schmidt. orthonormalise's algorithm exactly (each projection twice,
 * double sums, a column that keeps no more than 1e-4 of its norm becomes
 * zero), in one block, because P is small (rows x r, r a handful): every
 * dot product and norm is a block-wide sum in double, over a fixed stride
 * and a fixed tree, so the same GPU model always gives the same bits, but
 * not the CPU's left-to-right sums: within a few float ulps of them.
 *
 * Reconstruction. out = P^ Qavg^T and m -= P^ Qloc^T as reconstruct does
 * it: each element is p[i][0] q[0][j], then + p[i][k] q[k][j] for k in
 * order, in float, one rounding per operation (no FMA): the CPU's bits.
 */
#include <cublas_v2.h>
#include <new>

#include "collectives/cuda/cuda_device.cuh"
#include "collectives/cuda/cuda_kernels.h"

struct gw__cuda_blas {
    cublasHandle_t handle;
};

namespace
{

constexpr unsigned GS_THREADS = 1024;
constexpr double DEPENDENT = 1e-4;

gw_status_t blas_status(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS:
        return GW_OK;
    case CUBLAS_STATUS_ALLOC_FAILED:
        return GW_ERR_NO_MEMORY;
    case CUBLAS_STATUS_INVALID_VALUE:
        return GW_ERR_INVALID_ARG;
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return GW_ERR_UNSUPPORTED;
    default:
        return GW_ERR_SYSTEM;
    }
}

cublasOperation_t op_of(int trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

gw_status_t gemm(gw__cuda_blas_t *blas, const gw__cuda_gemm_t *g, const float *a, const float *b,
                 float *c, void *stream)
{
    const float one = 1.0f, zero = 0.0f;
    gw_status_t st = blas_status(cublasSetStream(blas->handle, gw__cuda_stream(stream)));
    if (st != GW_OK)
        return st;
    return blas_status(cublasSgemm(blas->handle, op_of(g->transa), op_of(g->transb), g->m, g->n,
                                   g->k, &one, a, g->lda, b, g->ldb, &zero, c, g->ldc));
}

/* The block-wide sum of each thread's v, in a fixed tree; every thread
 * gets the total. */
__device__ double block_sum(double v, double *part)
{
    part[threadIdx.x] = v;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            part[threadIdx.x] = __dadd_rn(part[threadIdx.x], part[threadIdx.x + half]);
        __syncthreads();
    }
    double total = part[0];
    __syncthreads();
    return total;
}

__device__ double column_norm(const float *p, size_t rows, size_t ld, int j, double *part)
{
    double s = 0;
    for (size_t i = threadIdx.x; i < rows; i += blockDim.x) {
        double v = (double)p[i * ld + (size_t)j];
        s = __dadd_rn(s, __dmul_rn(v, v));
    }
    return sqrt(block_sum(s, part));
}

__global__ void orthonormalise_kernel(float *p, size_t rows, int r)
{
    __shared__ double part[GS_THREADS];
    const size_t ld = (size_t)r;
    for (int j = 0; j < r; j++) {
        double before = column_norm(p, rows, ld, j, part);
        for (int pass = 0; pass < 2; pass++) {
            for (int c = 0; c < j; c++) {
                double d = 0;
                for (size_t i = threadIdx.x; i < rows; i += blockDim.x)
                    d = __dadd_rn(
                        d, __dmul_rn((double)p[i * ld + (size_t)j], (double)p[i * ld + (size_t)c]));
                d = block_sum(d, part);
                for (size_t i = threadIdx.x; i < rows; i += blockDim.x)
                    p[i * ld + (size_t)j] = (float)__dsub_rn(
                        (double)p[i * ld + (size_t)j], __dmul_rn(d, (double)p[i * ld + (size_t)c]));
                __syncthreads();
            }
        }
        double norm = column_norm(p, rows, ld, j, part);
        bool keep = norm > 0 && norm > DEPENDENT * before;
        for (size_t i = threadIdx.x; i < rows; i += blockDim.x)
            p[i * ld + (size_t)j] =
                keep ? (float)__ddiv_rn((double)p[i * ld + (size_t)j], norm) : 0.0f;
        __syncthreads();
    }
}

__global__ void transpose_kernel(float *t, const float *q, size_t cols, int r, float divisor)
{
    const size_t rr = (size_t)r;
    GWD_FOR(e, cols * rr)
    {
        size_t i = e / rr, k = e % rr;
        t[k * cols + i] = __fdiv_rn(q[e], divisor);
    }
}

__device__ __forceinline__ float product(const float *pi, const float *q, size_t j, size_t cols,
                                         int r)
{
    float t = __fmul_rn(pi[0], q[j]);
    for (int k = 1; k < r; k++)
        t = __fadd_rn(t, __fmul_rn(pi[k], q[(size_t)k * cols + j]));
    return t;
}

__global__ void reconstruct_kernel(float *out, float *m, const float *p, const float *qa,
                                   const float *ql, size_t rows, size_t cols, int r)
{
    GWD_FOR(e, rows * cols)
    {
        size_t i = e / cols, j = e % cols;
        const float *pi = p + i * (size_t)r;
        out[e] = product(pi, qa, j, cols, r);
        if (m)
            m[e] = __fsub_rn(m[e], product(pi, ql, j, cols, r));
    }
}

} // namespace

extern "C" gw_status_t gw__cuda_blas_create(gw__cuda_blas_t **out)
{
    if (!out)
        return GW_ERR_INVALID_ARG;
    gw__cuda_blas_t *b = new (std::nothrow) gw__cuda_blas_t;
    if (!b)
        return GW_ERR_NO_MEMORY;
    gw_status_t st = blas_status(cublasCreate(&b->handle));
    if (st != GW_OK) {
        delete b;
        return st;
    }
    *out = b;
    return GW_OK;
}

extern "C" void gw__cuda_blas_destroy(gw__cuda_blas_t *blas)
{
    if (!blas)
        return;
    cublasDestroy(blas->handle);
    delete blas;
}

extern "C" gw_status_t gw__cuda_psgd_project_p(gw__cuda_blas_t *blas, const float *m,
                                               const float *q, float *p, size_t rows, size_t cols,
                                               int r, void *stream)
{
    gw__cuda_gemm_t g;
    if (!blas || !m || !q || !p)
        return GW_ERR_INVALID_ARG;
    gw_status_t st = gw__cuda_psgd_gemm_p(rows, cols, r, &g);
    return st == GW_OK ? gemm(blas, &g, q, m, p, stream) : st;
}

extern "C" gw_status_t gw__cuda_psgd_project_q(gw__cuda_blas_t *blas, const float *m,
                                               const float *p, float *ql, size_t rows, size_t cols,
                                               int r, void *stream)
{
    gw__cuda_gemm_t g;
    if (!blas || !m || !p || !ql)
        return GW_ERR_INVALID_ARG;
    gw_status_t st = gw__cuda_psgd_gemm_q(rows, cols, r, &g);
    return st == GW_OK ? gemm(blas, &g, p, m, ql, stream) : st;
}

extern "C" gw_status_t gw__cuda_psgd_orthonormalise(float *p, size_t rows, int r, void *stream)
{
    if (!p || r < 1 || rows == 0)
        return GW_ERR_INVALID_ARG;
    orthonormalise_kernel<<<1, GS_THREADS, 0, gw__cuda_stream(stream)>>>(p, rows, r);
    return gw__cuda_launched();
}

extern "C" gw_status_t gw__cuda_psgd_transpose(float *t, const float *q, size_t cols, int r,
                                               float divisor, void *stream)
{
    if (!t || !q || r < 1)
        return GW_ERR_INVALID_ARG;
    GW_CUDA_PLAN(plan, cols * (size_t)r, 1);
    transpose_kernel<<<plan.grid, plan.block, 0, gw__cuda_stream(stream)>>>(t, q, cols, r, divisor);
    return gw__cuda_launched();
}

extern "C" gw_status_t gw__cuda_psgd_reconstruct(float *out, float *m, const float *p,
                                                 const float *qa, const float *ql, size_t rows,
                                                 size_t cols, int r, void *stream)
{
    if (!out || !p || !qa || (m && !ql) || r < 1)
        return GW_ERR_INVALID_ARG;
    GW_CUDA_PLAN(plan, rows * cols, 1);
    reconstruct_kernel<<<plan.grid, plan.block, 0, gw__cuda_stream(stream)>>>(out, m, p, qa, ql,
                                                                              rows, cols, r);
    return gw__cuda_launched();
}
