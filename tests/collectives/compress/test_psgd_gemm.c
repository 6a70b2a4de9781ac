/*
 * test_psgd_gemm.c - PowerSGD's own matrix products (psgd_gemm.c): close to
 * a double-precision reference, and bit for bit the order of operations the
 * file documents (LANES partial sums for M Q, sums in row order for M^T P),
 * written here once more in plain scalar C. The shapes cover a row shorter
 * than the lanes, tails after the lanes and after a column block, and r = 1.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/compress/psgd_gemm.h"

/* A float sum of n terms is within n units of float rounding of the sum of
 * their magnitudes. */
#define TOL_TERMS (rows + cols)

static float value(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((int32_t)(*s >> 40) - (1 << 23)) * 0x1p-23f;
}

static float *random_matrix(size_t n, uint64_t seed)
{
    float *v = malloc(n * sizeof(float));
    cr_assert_not_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = value(&seed);
    return v;
}

/* The documented order of M Q's dot products: element j in partial sum
 * j % 8, then ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)). */
static float scalar_dot(const float *m, const float *q, size_t cols, size_t stride)
{
    volatile float s[8] = {0};
    for (size_t j = 0; j < cols; j++)
        s[j % 8] = s[j % 8] + m[j] * q[j * stride];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static void check_shape(size_t rows, size_t cols, int r)
{
    const size_t rr = (size_t)r;
    float *m = random_matrix(rows * cols, rows * 31 + cols);
    float *q = random_matrix(cols * rr, cols * 7 + rr);
    float *pm = random_matrix(rows * rr, rows + 5);
    float *p = malloc(rows * rr * sizeof(float));
    float *qt = malloc(cols * rr * sizeof(float));
    float *mtp = malloc(cols * rr * sizeof(float));
    cr_assert(p && qt && mtp);

    gw__psgd_gemm_mq(p, m, q, qt, rows, cols, r);
    for (size_t i = 0; i < rows; i++) {
        for (size_t k = 0; k < rr; k++) {
            double ref = 0, mag = 0;
            for (size_t j = 0; j < cols; j++) {
                ref += (double)m[i * cols + j] * q[j * rr + k];
                mag += fabs((double)m[i * cols + j] * q[j * rr + k]);
            }
            float got = p[i * rr + k];
            cr_assert(fabs(got - ref) <= (double)TOL_TERMS * 0x1p-23 * mag + 1e-30,
                      "%zux%zu r=%d: (MQ)[%zu][%zu] = %.9g, reference %.9g", rows, cols, r, i, k,
                      (double)got, ref);
            float want = scalar_dot(m + i * cols, q + k, cols, rr);
            cr_assert(memcmp(&got, &want, sizeof got) == 0,
                      "%zux%zu r=%d: (MQ)[%zu][%zu] = %a, the documented order gives %a", rows,
                      cols, r, i, k, (double)got, (double)want);
        }
    }

    gw__psgd_gemm_mtp(mtp, m, pm, rows, cols, r);
    for (size_t j = 0; j < cols; j++) {
        for (size_t k = 0; k < rr; k++) {
            volatile float want = 0;
            double ref = 0, mag = 0;
            for (size_t i = 0; i < rows; i++) {
                want = want + pm[i * rr + k] * m[i * cols + j];
                ref += (double)pm[i * rr + k] * m[i * cols + j];
                mag += fabs((double)pm[i * rr + k] * m[i * cols + j]);
            }
            float got = mtp[k * cols + j], w = want;
            cr_assert(fabs(got - ref) <= (double)TOL_TERMS * 0x1p-23 * mag + 1e-30,
                      "%zux%zu r=%d: (M^T P)[%zu][%zu] = %.9g, reference %.9g", rows, cols, r, j, k,
                      (double)got, ref);
            cr_assert(memcmp(&got, &w, sizeof got) == 0,
                      "%zux%zu r=%d: (M^T P)[%zu][%zu] = %a, rows in order give %a", rows, cols, r,
                      j, k, (double)got, (double)w);
        }
    }
    free(m);
    free(q);
    free(pm);
    free(p);
    free(qt);
    free(mtp);
}

Test(psgd_gemm, shapes)
{
    check_shape(1, 1, 1);
    check_shape(3, 5, 2);
    check_shape(17, 8, 4);
    check_shape(9, 1031, 3);
    check_shape(64, 600, 1);
    check_shape(33, 129, 8);
}
