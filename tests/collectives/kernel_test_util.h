/*
 * kernel_test_util.h - helpers shared by the tests of the reduction kernels
 * (test_reduce_kernels.c) and of the half-precision conversions
 * (test_half_conversions.c): bit views of floats, NaN tests on raw half and
 * bfloat16 patterns, and a seeded generator. static inline, so each test
 * executable gets its own copy and nothing is linked twice.
 */
#ifndef GW_TESTS_KERNEL_TEST_UTIL_H
#define GW_TESTS_KERNEL_TEST_UTIL_H

#include <stdint.h>
#include <string.h>

static inline uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static inline double bitsd(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static inline int half_is_nan(uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }

static inline int bf16_is_nan(uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }

/* xorshift64*: a seeded generator, so failures reproduce. */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

#endif
