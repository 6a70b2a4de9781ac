/*
 * psgd_gemm.c - the two matrix products of a PowerSGD step
 * (codec_powersgd.c), written here so that libgradwire.so needs no BLAS.
 *
 * Why not BLAS: a BLAS linked into the communication library starts its own
 * thread pool in every process that loads it, beside the one of the
 * framework (torch) that already has its own BLAS; and BLAS kernels round
 * differently from one CPU to the next. PowerSGD's products are thin (r,
 * the rank of the approximation, is a handful of columns), so they are
 * bound by reading M once from memory, which a simple blocked loop does as
 * well as a tuned GEMM.
 *
 * The two products, with M rows x cols (row-major, the gradient), Q cols x r
 * and P rows x r:
 *
 *   P = M Q     each element is a dot product of a row of M with a column
 *               of Q. Q is transposed first (qt, r x cols), so both vectors
 *               are contiguous. The row of M is read once per column of Q
 *               while it sits in cache, and the dot product keeps LANES
 *               partial sums: element j goes to sum j % LANES, in order of
 *               j, and the partial sums are added in a fixed tree at the end.
 *
 *   Q = M^T P   each element is a sum over the rows of M. M is walked once,
 *               row by row, in blocks of BLOCK columns: for each row i and
 *               each k < r, row k of the (transposed) result block gains
 *               p[i][k] times the row's block of M (an axpy on contiguous
 *               memory). The result block, r x BLOCK floats, stays in the
 *               first-level cache while all rows pass; every element adds
 *               its terms in order of i.
 *
 * Determinism: every element's sum has one order of operations fixed by the
 * code above, whatever the CPU: the partial sums are explicit, so the
 * vectoriser (the loops are built for AVX2 and for the baseline, GW__CZ_HOT)
 * only runs independent lanes side by side and never reassociates, and the
 * ISO C build keeps GCC from contracting into FMAs. So a product's bits
 * depend on its inputs only, never on the CPU, which BLAS does not promise:
 * a rank's residual (error feedback) is the same on a rerun anywhere.
 */
#include "collectives/compress/psgd_gemm.h"

#include <string.h>

#include "collectives/compress/codec.h"

enum { LANES = 8, BLOCK = 512 };

/* The dot product of a and b (n floats), LANES partial sums in a fixed order. */
static inline float dot(const float *a, const float *b, size_t n)
{
    float s[LANES] = {0};
    size_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++)
            s[l] += a[j + l] * b[j + l];
    for (int l = 0; j < n; j++, l++)
        s[l] += a[j] * b[j];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

GW__CZ_HOT void gw__psgd_gemm_mq(float *p, const float *m, const float *q, float *qt, size_t rows,
                                 size_t cols, int r)
{
    const size_t rr = (size_t)r;
    for (size_t j = 0; j < cols; j++)
        for (size_t k = 0; k < rr; k++)
            qt[k * cols + j] = q[j * rr + k];
    for (size_t i = 0; i < rows; i++)
        for (size_t k = 0; k < rr; k++)
            p[i * rr + k] = dot(m + i * cols, qt + k * cols, cols);
}

GW__CZ_HOT void gw__psgd_gemm_mtp(float *qt, const float *m, const float *p, size_t rows,
                                  size_t cols, int r)
{
    const size_t rr = (size_t)r;
    for (size_t j0 = 0; j0 < cols; j0 += BLOCK) {
        size_t len = cols - j0 < BLOCK ? cols - j0 : BLOCK;
        for (size_t k = 0; k < rr; k++)
            memset(qt + k * cols + j0, 0, len * sizeof(float));
        for (size_t i = 0; i < rows; i++) {
            const float *mi = m + i * cols + j0;
            for (size_t k = 0; k < rr; k++) {
                float pik = p[i * rr + k];
                float *out = qt + k * cols + j0;
                for (size_t j = 0; j < len; j++)
                    out[j] += pik * mi[j];
            }
        }
    }
}
