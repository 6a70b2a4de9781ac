/*
 * half_convert.h - float <-> float16 and bfloat16 for one element, as
 * inline functions that loops vectorise: the conversions of every
 * half-precision reduction (reduce_kernels.c) and of the casting codecs
 * (compress/cast_kernels.c), and the reference the exported gw__half_to_float
 * and friends (reduce_kernels.h) are built on. Round to nearest, ties to
 * even; NaN stays NaN (quieted, payload kept); overflow goes to infinity.
 * The eight-lane AVX2/F16C versions, which give the same bits, are in
 * half_avx2.h.
 */
#ifndef GW_COLLECTIVES_HALF_CONVERT_H
#define GW_COLLECTIVES_HALF_CONVERT_H

#include <stdint.h>
#include <string.h>

static inline uint32_t gw__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float gw__f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/*
 * The conversions are branch-free so that the block loops below vectorise.
 * Selections are spelled as masks rather than ?: because GCC's jump
 * threading turns correlated ?: chains into a control flow that the
 * vectoriser gives up on, and because (under the default -ftrapping-math) it
 * will not speculate a floating-point operation that the source only needs
 * on one side of a condition. So every element does every operation and only
 * the inputs and results are selected.
 */
static inline uint32_t gw__select_u32(int cond, uint32_t if_true, uint32_t if_false)
{
    uint32_t m = 0u - (uint32_t)cond;
    return (if_true & m) | (if_false & ~m);
}

static inline float gw__f16_widen(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu; /* exponent and mantissa */
    /* Normal numbers: move the fields into place and rebias 15 -> 127. */
    uint32_t bits = (em << 13) + (112u << 23);
    /* Infinity and NaN: exponent 31 must become 255, not 143. */
    bits += gw__select_u32(em >= 0x7c00u, 112u << 23, 0);
    /* NaN: keep the payload, set the quiet bit. */
    bits |= gw__select_u32(em > 0x7c00u, 0x00400000u, 0);
    /* Subnormals are em * 2^-24: the int-to-float conversion (exact) does
     * the normalising, and 2^-24 is applied on the exponent field. */
    uint32_t sub = gw__f32_bits((float)(int32_t)em) - (24u << 23);
    bits = gw__select_u32(em < 0x0400u, sub, bits);
    bits = gw__select_u32(em == 0, 0, bits);
    return gw__f32_from_bits(bits | sign);
}

/*
 * Normal results round by adding half an ulp (minus one, plus the lowest kept
 * bit, which makes ties go to even) before truncating; a carry out of the
 * mantissa correctly bumps the exponent, up to infinity from 65520 on.
 * Subnormal results use the float adder itself: adding 0.5f, whose ulp is
 * 2^-24 (the half subnormal step), rounds |f| to a multiple of 2^-24 in the
 * current rounding mode, which is round-to-nearest-even unless a program
 * changed it with fesetround(). Denormals-are-zero cannot hurt: a float that
 * small rounds to a zero half anyway. Other elements add 0 instead, so that
 * the addition is unconditional (see above).
 */
static inline uint16_t gw__f16_round(float f)
{
    uint32_t x = gw__f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    uint32_t odd = (x >> 13) & 1u;
    uint32_t normal = (x - (112u << 23) + 0xfffu + odd) >> 13;
    int small = x < 0x38800000u; /* below 2^-14, the least normal half */
    float t =
        gw__f32_from_bits(x) + gw__f32_from_bits(gw__select_u32(small, 0x3f000000u, 0)); /* 0.5f */
    uint32_t o = gw__select_u32(small, gw__f32_bits(t) - 0x3f000000u, normal);
    o = gw__select_u32(x >= 0x47800000u, 0x7c00u, o);                       /* 2^16 and up */
    o = gw__select_u32(x > 0x7f800000u, 0x7e00u | ((x >> 13) & 0x3ffu), o); /* quiet NaN */
    return (uint16_t)(o | sign);
}

static inline float gw__bf16_widen(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    bits |= gw__select_u32((h & 0x7fffu) > 0x7f80u, 0x00400000u, 0); /* quiet a NaN */
    return gw__f32_from_bits(bits);
}

/* The rounding add would carry a NaN with a small payload into infinity (or
 * a negative NaN into +0), so NaN is handled separately. */
static inline uint16_t gw__bf16_round(float f)
{
    uint32_t x = gw__f32_bits(f);
    uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    r = gw__select_u32((x & 0x7fffffffu) > 0x7f800000u, (x >> 16) | 0x0040u, r);
    return (uint16_t)r;
}

#endif
