/*
 * half_avx2.h - float16 and bfloat16 conversions of eight elements with
 * AVX2 and F16C: the one set of vector conversions, shared by the
 * half-precision reductions (reduce_half_avx2.c) and the casting codecs
 * (compress/cast_kernels.c). They give the bits of the scalar conversions
 * in half_convert.h:
 *  - vcvtph2ps is exact, and quiets a signalling NaN by setting the quiet
 *    bit and keeping the payload, as gw__f16_widen does;
 *  - vcvtps2ph with an explicit round-to-nearest-even immediate (so MXCSR's
 *    mode does not matter) rounds like gw__f16_round, overflows to infinity
 *    from 65520 on, and keeps the top ten payload bits of a NaN with the
 *    quiet bit set; DAZ can only turn a float below 2^-126 into a zero of
 *    the same sign, which is what rounding gives anyway;
 *  - the bfloat16 rounding is gw__bf16_round written in vector form.
 *
 * Everything carries GCC's target attribute instead of the files being
 * built with -mavx2, so that the compiler cannot move these instructions
 * into code that runs on every CPU: call them only where
 * gw__half_isa_best() (reduce_half.h, the one CPU-feature check) says
 * GW_HALF_ISA_AVX2.
 */
#ifndef GW_COLLECTIVES_HALF_AVX2_H
#define GW_COLLECTIVES_HALF_AVX2_H

#include "collectives/reduce_half.h"

#if GW__HALF_HAVE_AVX2

#include <immintrin.h>
#include <stdint.h>

#define GW__AVX2 __attribute__((target("avx2,f16c")))
#define GW__AVX2_INLINE __attribute__((target("avx2,f16c"), always_inline)) static inline

/* Eight elements per vector: a __m128i of halves, a __m256 of floats. */
#define GW__LANES 8

/* ---- conversions of eight elements ---------------------------------------- */

GW__AVX2_INLINE __m256 gw__f16x8_widen(__m128i h) { return _mm256_cvtph_ps(h); }

GW__AVX2_INLINE __m128i gw__f16x8_narrow(__m256 f)
{
    return _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
}

/* NaN lanes of x, a vector of float bit patterns: all ones, else zero. */
GW__AVX2_INLINE __m256i gw__nan_mask8(__m256i x)
{
    __m256i mag = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    return _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
}

/* gw__bf16_widen: move to the top half and quiet a NaN. */
GW__AVX2_INLINE __m256 gw__bf16x8_widen(__m128i h)
{
    __m256i x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    __m256i quiet = _mm256_and_si256(gw__nan_mask8(x), _mm256_set1_epi32(0x00400000));
    return _mm256_castsi256_ps(_mm256_or_si256(x, quiet));
}

/* gw__bf16_round, leaving each result in the low half of its 32-bit lane:
 * add half an ulp minus one plus the lowest kept bit (ties to even) and
 * truncate; a NaN keeps its top bits and is quieted instead, since the add
 * could carry its payload into the exponent or the sign. */
GW__AVX2_INLINE __m256i gw__bf16x8_round(__m256 f)
{
    __m256i x = _mm256_castps_si256(f);
    __m256i top = _mm256_srli_epi32(x, 16);
    __m256i odd = _mm256_and_si256(top, _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), odd);
    r = _mm256_srli_epi32(r, 16);
    __m256i q = _mm256_or_si256(top, _mm256_set1_epi32(0x0040));
    return _mm256_blendv_epi8(r, q, gw__nan_mask8(x));
}

/* Every lane of gw__bf16x8_round is below 2^16, so the saturating pack only
 * narrows. */
GW__AVX2_INLINE __m128i gw__bf16x8_narrow(__m256 f)
{
    __m256i r = gw__bf16x8_round(f);
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

GW__AVX2_INLINE __m256 gw__halfx8_widen(__m128i h, int is_bf16)
{
    return is_bf16 ? gw__bf16x8_widen(h) : gw__f16x8_widen(h);
}

GW__AVX2_INLINE __m128i gw__halfx8_narrow(__m256 f, int is_bf16)
{
    return is_bf16 ? gw__bf16x8_narrow(f) : gw__f16x8_narrow(f);
}

GW__AVX2_INLINE __m128i gw__load8(const uint16_t *p)
{
    return _mm_loadu_si128((const __m128i *)(const void *)p);
}

GW__AVX2_INLINE void gw__store8(uint16_t *p, __m128i v)
{
    _mm_storeu_si128((__m128i *)(void *)p, v);
}

#endif /* GW__HALF_HAVE_AVX2 */
#endif
