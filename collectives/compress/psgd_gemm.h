/*
 * psgd_gemm.h - PowerSGD's two rank-local matrix products
 * (collectives/compress/psgd_gemm.c), the project's own kernels so that
 * libgradwire.so links no BLAS.
 */
#ifndef GW_COLLECTIVES_COMPRESS_PSGD_GEMM_H
#define GW_COLLECTIVES_COMPRESS_PSGD_GEMM_H

#include <stddef.h>

/* p = m q: m is rows x cols, q is cols x r, p is rows x r, all row-major.
 * qt is scratch of r x cols floats (q transposed). */
void gw__psgd_gemm_mq(float *p, const float *m, const float *q, float *qt, size_t rows, size_t cols,
                      int r);

/* qt = (m^T p)^T: m is rows x cols and p rows x r (row-major); qt, r x cols,
 * receives the product transposed (column k of m^T p is row k of qt). */
void gw__psgd_gemm_mtp(float *qt, const float *m, const float *p, size_t rows, size_t cols, int r);

#endif
