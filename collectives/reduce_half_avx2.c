/*
 * reduce_half_avx2.c - float16 and bfloat16 reductions with AVX2 and F16C.
 *
 * The portable kernels (reduce_kernels.c) widen a block of each operand to
 * float, run the float loop and round the block back, with conversions
 * spelled as integer arithmetic that SSE2 does a few lanes at a time. Here
 * every step takes sixteen elements in registers, in one pass:
 *  - float16 sum and product: F16C's vcvtph2ps widens eight halves in one
 *    instruction, one AVX addition or multiplication follows (no FMA: each
 *    result is one rounding of one exact operation, as in the portable
 *    path), and vcvtps2ph rounds the eight floats back;
 *  - bfloat16 sum and product: bfloat16 is the top half of a float, so AVX2
 *    unpacks widen it and integer adds and shifts round it back;
 *  - min and max of either type pick among the 16-bit patterns without any
 *    float at all (see pick16).
 *
 * The results are bit for bit those of the portable kernels, which the tests
 * check exhaustively: the conversions (half_avx2.h, shared with the casting
 * codecs) round and quiet NaNs exactly as the scalar ones do, and each
 * operation is the same IEEE operation.
 *
 * Loads and stores are unaligned and never go past count: the last count %
 * 16 elements go through small zero-padded buffers. Each step reads its
 * elements of a and b before it writes out's, so out may alias a or b
 * exactly, as the contract allows.
 *
 * Everything here carries GCC's target attribute instead of the file being
 * built with -mavx2, so that the compiler cannot move these instructions
 * into code that runs on every CPU; only gw__reduce's check of the CPU
 * (gw__half_isa_best, reduce_kernels.c) leads here. The bulk conversions at
 * the end serve the average's division and the tests.
 */
#include "collectives/reduce_half.h"

#if GW__HALF_HAVE_AVX2

#include <string.h>

#include "collectives/half_avx2.h"

/* ---- sum and product ------------------------------------------------------- */

/*
 * x + y or x * y, where a NaN x gives x: the compiler may swap the operands
 * of a commutative operation, and for two NaNs the hardware returns the
 * first one's, so the rule of the portable kernels (a's NaN first) is
 * applied explicitly. Whether that NaN is quiet here does not matter: both
 * roundings to 16 bits quiet it.
 */
GW__AVX2_INLINE __m256 arith(__m256 x, __m256 y, gw_op_t op)
{
    __m256 r = op == GW_SUM ? _mm256_add_ps(x, y) : _mm256_mul_ps(x, y);
    return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/*
 * Sixteen float16 elements: two groups of eight through vcvtph2ps, the
 * operation and vcvtps2ph.
 */
GW__AVX2_INLINE void f16_arith16(uint16_t *o, const uint16_t *a, const uint16_t *b, gw_op_t op)
{
    for (int h = 0; h < 2; h++) {
        size_t k = (size_t)h * GW__LANES;
        __m256 r = arith(gw__f16x8_widen(gw__load8(a + k)), gw__f16x8_widen(gw__load8(b + k)), op);
        gw__store8(o + k, gw__f16x8_narrow(r));
    }
}

/*
 * Sixteen bfloat16 elements. Interleaving zeros below each element widens
 * them (elements 0-3 and 8-11 in one vector, 4-7 and 12-15 in the other, as
 * AVX2 unpacks within 128-bit lanes) and the saturating pack puts the
 * rounded halves back in order. A signalling NaN is not quieted on the way
 * in: the addition or multiplication quiets it and keeps its payload, which
 * gives the bits that widening with bf16_to_float would have given.
 */
GW__AVX2_INLINE void bf16_arith16(uint16_t *o, const uint16_t *a, const uint16_t *b, gw_op_t op)
{
    __m256i va = _mm256_loadu_si256((const __m256i *)(const void *)a);
    __m256i vb = _mm256_loadu_si256((const __m256i *)(const void *)b);
    __m256i zero = _mm256_setzero_si256();
    __m256 lo = arith(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, va)),
                      _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, vb)), op);
    __m256 hi = arith(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, va)),
                      _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, vb)), op);
    __m256i r = _mm256_packus_epi32(gw__bf16x8_round(lo), gw__bf16x8_round(hi));
    _mm256_storeu_si256((__m256i *)(void *)o, r);
}

/* ---- min and max ------------------------------------------------------------ */

/*
 * IEEE minimum/maximum need no float at all. Widening is exact and keeps
 * the order, signs and NaNs, and rounding gives back the very element that
 * the float operator picked, quieted if it is a NaN. So this picks among
 * the 16-bit patterns directly, sixteen at a time, with the ordering of
 * reduce_kernels.c: flipping the magnitude bits of negative numbers makes
 * the patterns order like the values (with -0 below +0) as signed integers;
 * then a NaN in b, and last a NaN in a, is taken as it is, so that a's NaN
 * wins; and a NaN result gets its quiet bit (0x0200 in float16, 0x0040 in
 * bfloat16), as the round trip through float would set it.
 */
GW__AVX2_INLINE __m256i order_key16(__m256i u)
{
    return _mm256_xor_si256(u, _mm256_srli_epi16(_mm256_srai_epi16(u, 15), 1));
}

GW__AVX2_INLINE __m256i nan_mask16(__m256i u, int is_bf16)
{
    __m256i mag = _mm256_and_si256(u, _mm256_set1_epi16(0x7fff));
    return _mm256_cmpgt_epi16(mag, _mm256_set1_epi16(is_bf16 ? 0x7f80 : 0x7c00));
}

GW__AVX2_INLINE void pick16(uint16_t *o, const uint16_t *a, const uint16_t *b, int is_bf16,
                            int want_min)
{
    __m256i ua = _mm256_loadu_si256((const __m256i *)(const void *)a);
    __m256i ub = _mm256_loadu_si256((const __m256i *)(const void *)b);
    __m256i ka = order_key16(ua), kb = order_key16(ub);
    /* min keeps a where ka <= kb, max where ka >= kb: b where the other
     * one is strictly greater. */
    __m256i take_b = want_min ? _mm256_cmpgt_epi16(ka, kb) : _mm256_cmpgt_epi16(kb, ka);
    __m256i r = _mm256_blendv_epi8(ua, ub, take_b);
    r = _mm256_blendv_epi8(r, ub, nan_mask16(ub, is_bf16));
    r = _mm256_blendv_epi8(r, ua, nan_mask16(ua, is_bf16));
    __m256i quiet = _mm256_set1_epi16(is_bf16 ? 0x0040 : 0x0200);
    r = _mm256_or_si256(r, _mm256_and_si256(nan_mask16(r, is_bf16), quiet));
    _mm256_storeu_si256((__m256i *)(void *)o, r);
}

/* ---- kernels ---------------------------------------------------------------- */

#define GROUP 16 /* elements per step: 32 bytes of each operand */

GW__AVX2_INLINE void step(uint16_t *o, const uint16_t *a, const uint16_t *b, int is_bf16,
                          gw_op_t op)
{
    if (op == GW_MIN || op == GW_MAX)
        pick16(o, a, b, is_bf16, op == GW_MIN);
    else if (is_bf16)
        bf16_arith16(o, a, b, op);
    else
        f16_arith16(o, a, b, op);
}

/*
 * The whole loop for one (dtype, op), inlined into one small function per
 * pair below, where dtype and op are constants, so that each loop body is
 * straight-line code. The last count % 16 elements go through zero-padded
 * buffers. Each step reads its 16 elements of a and b before it writes
 * out's, which is all that exact aliasing needs.
 */
GW__AVX2_INLINE void reduce_loop(uint16_t *o, const uint16_t *a, const uint16_t *b, size_t n,
                                 int is_bf16, gw_op_t op)
{
    size_t i = 0;
    for (; n - i >= GROUP; i += GROUP)
        step(o + i, a + i, b + i, is_bf16, op);
    if (i == n)
        return;
    uint16_t ta[GROUP] = {0}, tb[GROUP] = {0}, to[GROUP];
    size_t rest = (n - i) * sizeof(uint16_t);
    memcpy(ta, a + i, rest);
    memcpy(tb, b + i, rest);
    step(to, ta, tb, is_bf16, op);
    memcpy(o + i, to, rest);
}

typedef void (*half_fn)(uint16_t *o, const uint16_t *a, const uint16_t *b, size_t n);

#define GW__KERNEL(name, IS_BF16, OP)                                                      \
    static GW__AVX2 void name(uint16_t *o, const uint16_t *a, const uint16_t *b, size_t n) \
    {                                                                                      \
        reduce_loop(o, a, b, n, IS_BF16, OP);                                              \
    }
GW__KERNEL(sum_f16, 0, GW_SUM)
GW__KERNEL(prod_f16, 0, GW_PROD)
GW__KERNEL(min_f16, 0, GW_MIN)
GW__KERNEL(max_f16, 0, GW_MAX)
GW__KERNEL(sum_bf16, 1, GW_SUM)
GW__KERNEL(prod_bf16, 1, GW_PROD)
GW__KERNEL(min_bf16, 1, GW_MIN)
GW__KERNEL(max_bf16, 1, GW_MAX)
#undef GW__KERNEL

/* Indexed [is_bf16][op] for op in GW_SUM..GW_MAX. */
static const half_fn kernels[2][GW_MAX + 1] = {
    {sum_f16, prod_f16, min_f16, max_f16},
    {sum_bf16, prod_bf16, min_bf16, max_bf16},
};

void gw__reduce_half_avx2(void *out, const void *a, const void *b, size_t count, gw_dtype_t dtype,
                          gw_op_t op)
{
    kernels[dtype == GW_BFLOAT16][op](out, a, b, count);
}

/* ---- bulk conversions ------------------------------------------------------- */

GW__AVX2_INLINE void widen_loop(float *out, const uint16_t *in, size_t n, int is_bf16)
{
    size_t i = 0;
    for (; n - i >= GW__LANES; i += GW__LANES)
        _mm256_storeu_ps(out + i, gw__halfx8_widen(gw__load8(in + i), is_bf16));
    if (i == n)
        return;
    uint16_t t[GW__LANES] = {0};
    float f[GW__LANES];
    memcpy(t, in + i, (n - i) * sizeof(uint16_t));
    _mm256_storeu_ps(f, gw__halfx8_widen(gw__load8(t), is_bf16));
    memcpy(out + i, f, (n - i) * sizeof(float));
}

GW__AVX2_INLINE void narrow_loop(uint16_t *out, const float *in, size_t n, int is_bf16)
{
    size_t i = 0;
    for (; n - i >= GW__LANES; i += GW__LANES)
        gw__store8(out + i, gw__halfx8_narrow(_mm256_loadu_ps(in + i), is_bf16));
    if (i == n)
        return;
    float f[GW__LANES] = {0};
    uint16_t t[GW__LANES];
    memcpy(f, in + i, (n - i) * sizeof(float));
    gw__store8(t, gw__halfx8_narrow(_mm256_loadu_ps(f), is_bf16));
    memcpy(out + i, t, (n - i) * sizeof(uint16_t));
}

GW__AVX2 void gw__half_widen_avx2(float *out, const uint16_t *in, size_t count, gw_dtype_t dtype)
{
    if (dtype == GW_BFLOAT16)
        widen_loop(out, in, count, 1);
    else
        widen_loop(out, in, count, 0);
}

GW__AVX2 void gw__half_narrow_avx2(uint16_t *out, const float *in, size_t count, gw_dtype_t dtype)
{
    if (dtype == GW_BFLOAT16)
        narrow_loop(out, in, count, 1);
    else
        narrow_loop(out, in, count, 0);
}

#endif /* GW__HALF_HAVE_AVX2 */
