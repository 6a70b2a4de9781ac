/*
 * algo_test_util.h - the harness of the collective algorithm tests
 * (test_algorithms.c, test_algorithms_collectives.c,
 * test_algorithms_errors.c): one thread per rank over the in-memory
 * transport (mem_transport.c), with communicators built by hand so that the
 * algorithms are called directly through their gw__ entry points.
 *
 * Inputs are deterministic pseudo-random streams chosen so that a serial
 * reference computed here is exact (integer-valued floats, wrapping
 * integers); check_exact compares a result with it and check_agree compares
 * every rank's result bitwise with rank 0's. begin() frees the scratch
 * memory before each call so that AddressSanitizer sees exactly the size
 * each algorithm asked for.
 *
 * Worker threads never assert (that would skip the other ranks' cleanup and
 * leave them waiting); they note failures, which job_run reports at the end.
 * Header-only, with every function static inline: each test file uses a
 * different part of it, and an unused static function would be a warning.
 */
#ifndef GW_TESTS_ALGO_TEST_UTIL_H
#define GW_TESTS_ALGO_TEST_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collectives/coll.h"
#include "common/clock.h"
#include "rank_threads.h"

/* Run body on n threads, one per rank, over a fresh fabric (rendezvous or
 * eager, see mem_transport.h), then report every rank's failures. */
static inline void job_run(int n, int timeout_ms, int rendezvous, body_fn body, const void *arg)
{
    cr_assert(n >= 2 && n <= MAXN);
    threads_opts_t o = {.timeout_ms = timeout_ms,
                        .rendezvous = rendezvous,
                        .label = rendezvous ? "rendezvous" : "eager"};
    threads_run(n, &o, body, arg);
}

/* Stamp the next collective's tag with the API layer's own code (tag.c). */
static inline void begin(ctx_t *c, int kind, size_t count, gw_dtype_t dt, gw_op_t op, int root)
{
    gw__coll_begin(&c->comm, (gw_coll_kind_t)kind, count, dt, op, root, GW_ALGO_AUTO);
    /* Fresh scratch of exactly the requested size for every call. */
    free(c->comm.scratch);
    c->comm.scratch = NULL;
    c->comm.scratch_len = 0;
}

/* ---- data: deterministic pseudo-random inputs and exact references ---- */

static inline uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Element i of rank's stream `seed`: distinct inputs for seed < 2^20,
 * rank < 2^8, i < 2^36, and mix() is a bijection. */
static inline uint64_t rnd(uint64_t seed, int rank, size_t i)
{
    return mix(seed << 44 ^ (uint64_t)rank << 36 ^ (uint64_t)i);
}

static inline uint16_t half_from_int(int v)
{
    /* Exact for |v| <= 2048, all the tests need. */
    if (v == 0)
        return 0;
    uint16_t sign = v < 0 ? 0x8000 : 0;
    unsigned a = (unsigned)(v < 0 ? -v : v);
    int e = 0;
    while ((a >> (e + 1)) != 0)
        e++;
    unsigned mant = (a << (10 - e)) & 0x3ff;
    return (uint16_t)(sign | (unsigned)(e + 15) << 10 | mant);
}

static inline double half_to_double(uint16_t h)
{
    int sign = h >> 15, e = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (e == 0)
        v = ldexp(mant, -24);
    else if (e == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexp(mant + 1024, e - 25);
    return sign ? -v : v;
}

static inline uint16_t bf16_from_float(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); /* exact for the small integers used */
}

static inline double bf16_to_double(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline int is_float(gw_dtype_t dt)
{
    return dt == GW_FLOAT32 || dt == GW_FLOAT64 || dt == GW_FLOAT16 || dt == GW_BFLOAT16 ||
           dt == GW_FLOAT8_E4M3 || dt == GW_FLOAT8_E5M2;
}

static inline void put_f(gw_dtype_t dt, void *buf, size_t i, double v)
{
    switch (dt) {
    case GW_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    case GW_FLOAT64:
        ((double *)buf)[i] = v;
        break;
    case GW_FLOAT16:
        ((uint16_t *)buf)[i] = half_from_int((int)v);
        break;
    case GW_BFLOAT16:
        ((uint16_t *)buf)[i] = bf16_from_float((float)v);
        break;
    case GW_FLOAT8_E4M3:
        ((uint8_t *)buf)[i] = gw__float_to_e4m3((float)v);
        break;
    case GW_FLOAT8_E5M2:
        ((uint8_t *)buf)[i] = gw__float_to_e5m2((float)v);
        break;
    default:
        break;
    }
}

static inline double get_f(gw_dtype_t dt, const void *buf, size_t i)
{
    switch (dt) {
    case GW_FLOAT32:
        return ((const float *)buf)[i];
    case GW_FLOAT64:
        return ((const double *)buf)[i];
    case GW_FLOAT16:
        return half_to_double(((const uint16_t *)buf)[i]);
    case GW_BFLOAT16:
        return bf16_to_double(((const uint16_t *)buf)[i]);
    case GW_FLOAT8_E4M3:
        return gw__e4m3_to_float(((const uint8_t *)buf)[i]);
    case GW_FLOAT8_E5M2:
        return gw__e5m2_to_float(((const uint8_t *)buf)[i]);
    default:
        return 0;
    }
}

static inline void put_i(gw_dtype_t dt, void *buf, size_t i, uint64_t v)
{
    switch (dt) {
    case GW_INT8:
        ((int8_t *)buf)[i] = (int8_t)v;
        break;
    case GW_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    case GW_INT32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case GW_INT64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case GW_UINT32:
        ((uint32_t *)buf)[i] = (uint32_t)v;
        break;
    case GW_UINT64:
        ((uint64_t *)buf)[i] = v;
        break;
    default:
        break;
    }
}

static inline int64_t get_i(gw_dtype_t dt, const void *buf, size_t i)
{
    switch (dt) {
    case GW_INT8:
        return ((const int8_t *)buf)[i];
    case GW_UINT8:
        return ((const uint8_t *)buf)[i];
    case GW_INT32:
        return ((const int32_t *)buf)[i];
    case GW_INT64:
        return ((const int64_t *)buf)[i];
    case GW_UINT32:
        return ((const uint32_t *)buf)[i];
    case GW_UINT64: /* the bits, as int64 */
        return (int64_t)((const uint64_t *)buf)[i];
    default:
        return 0;
    }
}

/* A float input for an exact test: integers whose sums (16 ranks of them)
 * stay exact even in bfloat16, small factors for products, and arbitrary
 * values for min and max (which are exact anyway). */
static inline double exact_float(gw_dtype_t dt, gw_op_t op, uint64_t x)
{
    if (gw_dtype_size(dt) == 1) /* the 8-bit floats (min, max): in range */
        return (double)(int)(x % 33) - 16;
    if (op == GW_SUM)
        return (double)(int)(x % 33) - 16;
    if (op == GW_PROD)
        return (double)(int)(x % 7) - 3;
    return ((double)(int64_t)(x >> 11) - (double)(1ll << 52)) / 1024.0;
}

/* Element i of rank's input for an exact test of (dt, op). */
static inline void gen_exact(gw_dtype_t dt, gw_op_t op, uint64_t seed, int rank, size_t i,
                             void *buf)
{
    uint64_t x = rnd(seed, rank, i);
    if (is_float(dt))
        put_f(dt, buf, i, exact_float(dt, op, x));
    else
        put_i(dt, buf, i, x);
}

/* The reference: fold element i over the ranks, in double for floats (the
 * inputs make that exact) and in the dtype's wrapping arithmetic for
 * integers. */
static inline void ref_exact(gw_dtype_t dt, gw_op_t op, uint64_t seed, int n, size_t i, double *fv,
                             int64_t *iv)
{
    double f = 0;
    int64_t v = 0;
    unsigned char one[8];
    for (int r = 0; r < n; r++) {
        uint64_t x = rnd(seed, r, i);
        if (is_float(dt)) {
            put_f(dt, one, 0, exact_float(dt, op, x));
            double e = get_f(dt, one, 0);
            if (r == 0)
                f = e;
            else if (op == GW_SUM)
                f += e;
            else if (op == GW_PROD)
                f *= e;
            else if (op == GW_MIN)
                f = e < f ? e : f;
            else
                f = e > f ? e : f;
        } else {
            put_i(dt, one, 0, x);
            int64_t e = get_i(dt, one, 0);
            uint64_t w;
            if (r == 0)
                w = (uint64_t)e;
            else if (op == GW_SUM)
                w = (uint64_t)v + (uint64_t)e;
            else if (op == GW_PROD)
                w = (uint64_t)v * (uint64_t)e;
            else if (op == GW_BAND)
                w = (uint64_t)v & (uint64_t)e;
            else if (op == GW_BOR)
                w = (uint64_t)v | (uint64_t)e;
            else if (op == GW_BXOR)
                w = (uint64_t)v ^ (uint64_t)e;
            else if (dt == GW_UINT32 || dt == GW_UINT64) /* unsigned order */
                w = op == GW_MIN ? ((uint64_t)e < (uint64_t)v ? (uint64_t)e : (uint64_t)v)
                                 : ((uint64_t)e > (uint64_t)v ? (uint64_t)e : (uint64_t)v);
            else if (op == GW_MIN)
                w = (uint64_t)(e < v ? e : v);
            else
                w = (uint64_t)(e > v ? e : v);
            put_i(dt, one, 0, w); /* wrap to the dtype */
            v = get_i(dt, one, 0);
        }
    }
    *fv = f;
    *iv = v;
}

typedef struct combo {
    gw_dtype_t dt;
    gw_op_t op;
} combo_t;

static const combo_t exact_combos[] = {
    {GW_FLOAT32, GW_SUM},
    {GW_INT32, GW_SUM},
    {GW_INT32, GW_PROD},
    {GW_INT32, GW_MIN},
    {GW_INT32, GW_MAX},
    {GW_INT64, GW_SUM},
    {GW_INT64, GW_PROD},
    {GW_INT64, GW_MIN},
    {GW_INT64, GW_MAX},
    {GW_FLOAT16, GW_SUM},
    {GW_BFLOAT16, GW_SUM},
    {GW_FLOAT64, GW_PROD},
    {GW_FLOAT64, GW_MIN},
    {GW_FLOAT64, GW_MAX},
    {GW_INT8, GW_SUM},
    {GW_UINT8, GW_MAX},
    /* The dtypes and ops of issue 33 through every algorithm. */
    {GW_UINT64, GW_BXOR},
    {GW_UINT32, GW_BAND},
    {GW_INT8, GW_BOR},
    {GW_UINT32, GW_MAX},
    {GW_UINT64, GW_SUM},
    {GW_FLOAT8_E4M3, GW_MIN},
    {GW_FLOAT8_E5M2, GW_MAX},
};
#define NCOMBOS (sizeof(exact_combos) / sizeof(exact_combos[0]))

/* Compare buf (count elements) with the reference; report the first miss. */
static inline void check_exact(ctx_t *c, const char *what, const void *buf, size_t count,
                               gw_dtype_t dt, gw_op_t op, uint64_t seed)
{
    int n = c->comm.size;
    for (size_t i = 0; i < count; i++) {
        double fv;
        int64_t iv;
        ref_exact(dt, op, seed, n, i, &fv, &iv);
        if (is_float(dt) ? get_f(dt, buf, i) != fv : get_i(dt, buf, i) != iv) {
            note(c, "%s: element %zu is %g/%lld, expected %g/%lld", what, i, get_f(dt, buf, i),
                 (long long)get_i(dt, buf, i), fv, (long long)iv);
            return;
        }
    }
}

/* The rank counts most tests run at: powers of two and not. */
static const int test_ns[] = {2, 3, 4, 5, 7, 8};
#define NNS (sizeof(test_ns) / sizeof(test_ns[0]))

#endif
