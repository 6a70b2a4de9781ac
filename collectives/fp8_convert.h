/*
 * fp8_convert.h - float <-> OCP FP8 (E4M3 and E5M2) for one element, as
 * branch-free inline functions that loops vectorise: the conversions of
 * every 8-bit float reduction (reduce_kernels.c) and the reference that
 * gw__fp8_to_float and gw__float_to_fp8 (reduce_kernels.h) export.
 *
 * The formats (OCP 8-bit Floating Point Specification, v1.0):
 *  - E4M3 ("e4m3fn" in torch): sign, 4 exponent bits (bias 7), 3 mantissa
 *    bits. No infinities; S.1111.111 is NaN (0x7f and 0xff), so the
 *    exponent 15 codes 0x78..0x7e are ordinary numbers, up to 448.
 *    Subnormals are m * 2^-9.
 *  - E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like:
 *    exponent 31 is infinity (mantissa 0) or NaN. It is exactly the top
 *    byte of an IEEE binary16, which is how it is widened.
 *
 * Rounding from float is to nearest, ties to even, bit for bit what torch
 * does (c10's fp8e4m3fn_from_fp32_value and fp8e5m2_from_fp32_value), so
 * that a gradwire reduction equals torch's float computation cast back.
 * Overflow is not saturating: an E4M3 result past 464 (the midpoint
 * between 448 and the 480 the format cannot hold) is NaN, and an E5M2
 * result from 61440 on is infinity. Saturating to 448 would hide an
 * overflowed sum as a plausible number; a NaN makes it visible to the
 * loss-scaling logic that training with fp8 relies on. NaN in gives the
 * canonical NaN of its sign (0x7f / 0xff): neither format has room for a
 * float's payload.
 *
 * Subnormal results use the float adder, as half_convert.h's
 * gw__f16_round does: adding 2^14 (E4M3) or 2^7 (E5M2), whose ulp is the
 * format's subnormal step, rounds |f| to a multiple of that step in the
 * current rounding mode (to nearest even, unless the program changed it
 * with fesetround()).
 */
#ifndef GW_COLLECTIVES_FP8_CONVERT_H
#define GW_COLLECTIVES_FP8_CONVERT_H

#include <stdint.h>

#include "collectives/half_convert.h"

static inline float gw__e4m3_widen(uint8_t c)
{
    uint32_t sign = (uint32_t)(c & 0x80u) << 24;
    uint32_t em = c & 0x7fu; /* exponent and mantissa */
    /* Normal numbers: move the fields into place and rebias 7 -> 127. */
    uint32_t bits = (em << 20) + (120u << 23);
    /* Subnormals are em * 2^-9: the int-to-float conversion (exact)
     * normalises, and 2^-9 is applied on the exponent field. */
    uint32_t sub = gw__f32_bits((float)(int32_t)em) - (9u << 23);
    bits = gw__select_u32(em < 0x08u, sub, bits);
    bits = gw__select_u32(em == 0, 0, bits);
    bits = gw__select_u32(em == 0x7fu, 0x7fc00000u, bits); /* the one NaN */
    return gw__f32_from_bits(bits | sign);
}

static inline float gw__e5m2_widen(uint8_t c) { return gw__f16_widen((uint16_t)(c << 8)); }

static inline uint8_t gw__e4m3_round(float f)
{
    uint32_t x = gw__f32_bits(f);
    uint32_t sign = (x >> 24) & 0x80u;
    x &= 0x7fffffffu;
    /* Normal results: add half an ulp (minus one, plus the lowest kept bit
     * for ties to even) and truncate; a carry bumps the exponent, and a
     * carry into S.1111.111 is the NaN that overflow gives. */
    uint32_t odd = (x >> 20) & 1u;
    uint32_t normal = (x - (120u << 23) + 0x7ffffu + odd) >> 20;
    int small = x < (121u << 23);      /* below 2^-6, the least normal E4M3 */
    const uint32_t magic = 141u << 23; /* 2^14 */
    float t = gw__f32_from_bits(x) + gw__f32_from_bits(gw__select_u32(small, magic, 0));
    uint32_t o = gw__select_u32(small, gw__f32_bits(t) - magic, normal);
    o = gw__select_u32(x >= 0x43f00000u, 0x7fu, o); /* 480, infinity and NaN */
    return (uint8_t)(o | sign);
}

static inline uint8_t gw__e5m2_round(float f)
{
    uint32_t x = gw__f32_bits(f);
    uint32_t sign = (x >> 24) & 0x80u;
    x &= 0x7fffffffu;
    uint32_t odd = (x >> 21) & 1u;
    uint32_t normal = (x - (112u << 23) + 0xfffffu + odd) >> 21;
    int small = x < (113u << 23);      /* below 2^-14, the least normal E5M2 */
    const uint32_t magic = 134u << 23; /* 2^7 */
    float t = gw__f32_from_bits(x) + gw__f32_from_bits(gw__select_u32(small, magic, 0));
    uint32_t o = gw__select_u32(small, gw__f32_bits(t) - magic, normal);
    o = gw__select_u32(x >= 0x47800000u, 0x7cu, o); /* 2^16 and up: infinity */
    o = gw__select_u32(x > 0x7f800000u, 0x7fu, o);  /* NaN */
    return (uint8_t)(o | sign);
}

#endif
