/*
 * cast_kernels.c - the fused float <-> 16-bit passes of the casting codecs
 * (cast_ring.h lists them; cast_ring.c uses them).
 *
 * The conversions matter for speed: the casting codecs convert every
 * element twice per call. They are the library's one set of conversions:
 * the scalar ones of half_convert.h, in loops the compiler vectorises, and
 * on CPUs with AVX2 and F16C the eight-lane ones of half_avx2.h, chosen by
 * the one CPU-feature check the reduce kernels use (gw__half_isa_best).
 * Both round to nearest, ties to even, and keep subnormals, so results do
 * not depend on which path a rank took. The per-hop sum of the ring is the
 * reduce kernel itself (gw__reduce with GW_SUM).
 *
 * Each conversion is fused with what surrounds it into one pass over the
 * data, because at 64 MiB, far beyond the caches, a pass costs what its
 * memory traffic costs: measured on one core of the development machine
 * (Xeon, AVX-512, CPU time of the thread), forming x and its maximum (read
 * g and the residual, write x) runs at 3.7 GB/s of input, the cast of x
 * with its residual at 6.6 GB/s once fused (4.2 as three loops through a
 * temporary block), and both fused into one pass at 3.0 GB/s: 2.4 GB/s for
 * the two-pass encoding, 3.0 for the single pass.
 *
 * Every vector loop does per element exactly what the scalar loop does, in
 * the same order, with the same IEEE operations, and leaves the last
 * n % 8 elements to the scalar loop.
 */
#include "collectives/compress/cast_ring.h"
#include "collectives/half_avx2.h"
#include "collectives/half_convert.h"

/* ---- one element at a time ------------------------------------------------ */

static inline uint16_t round16(float v, int bf16)
{
    return bf16 ? gw__bf16_round(v) : gw__f16_round(v);
}

static inline float widen16(uint16_t h, int bf16)
{
    return bf16 ? gw__bf16_widen(h) : gw__f16_widen(h);
}

static inline void encode_rest_scalar(uint16_t *h, float *x, size_t n, float scale, float unscale,
                                      int bf16)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t b = round16(x[i] * scale, bf16);
        h[i] = b;
        x[i] -= widen16(b, bf16) * unscale;
    }
}

static inline void decode_avg_scalar(float *dst, const uint16_t *src, size_t n, float unscale,
                                     float d, int bf16)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = (widen16(src[i], bf16) * unscale) / d;
}

/* v = x as step 1 forms it, then its cast and residual. */
static inline void prep_one(uint16_t *h, float *x, float v, float scale, float unscale, int bf16)
{
    uint16_t b = round16(v * scale, bf16);
    *h = b;
    *x = v - widen16(b, bf16) * unscale;
}

static inline uint32_t prep_encode_scalar(uint16_t *h, float *x, const float *g, const float *res,
                                          size_t n, float scale, float unscale, int bf16)
{
    int32_t m = 0; /* |x| bit patterns are below 2^31: a signed max is enough */
    if (res) {
        for (size_t i = 0; i < n; i++) {
            float v = gw__cz_plus_residual(g[i], res[i]);
            int32_t a = (int32_t)gw__cz_absbits(v);
            m = a > m ? a : m;
            prep_one(&h[i], &x[i], v, scale, unscale, bf16);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            int32_t a = (int32_t)gw__cz_absbits(g[i]);
            m = a > m ? a : m;
            prep_one(&h[i], &x[i], g[i], scale, unscale, bf16);
        }
    }
    return (uint32_t)m;
}

/* ---- eight at a time -------------------------------------------------------- */

#if GW__HALF_HAVE_AVX2
GW__AVX2 static void encode_rest_avx2(uint16_t *h, float *x, size_t n, float scale, float unscale,
                                      int bf16)
{
    size_t i = 0;
    const __m256 s = _mm256_set1_ps(scale), u = _mm256_set1_ps(unscale);
    for (; i + GW__LANES <= n; i += GW__LANES) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m128i hv = gw__halfx8_narrow(_mm256_mul_ps(v, s), bf16);
        gw__store8(h + i, hv);
        _mm256_storeu_ps(x + i, _mm256_sub_ps(v, _mm256_mul_ps(gw__halfx8_widen(hv, bf16), u)));
    }
    encode_rest_scalar(h + i, x + i, n - i, scale, unscale, bf16);
}

GW__AVX2 static void decode_avg_avx2(float *dst, const uint16_t *src, size_t n, float unscale,
                                     float d, int bf16)
{
    size_t i = 0;
    const __m256 u = _mm256_set1_ps(unscale), dv = _mm256_set1_ps(d);
    for (; i + GW__LANES <= n; i += GW__LANES) {
        __m256 w = gw__halfx8_widen(gw__load8(src + i), bf16);
        _mm256_storeu_ps(dst + i, _mm256_div_ps(_mm256_mul_ps(w, u), dv));
    }
    decode_avg_scalar(dst + i, src + i, n - i, unscale, d, bf16);
}

/* Step 1's x = g + res (res skipped where it is zero) and the cast, in one
 * pass, with the integer maximum of |x|'s bit patterns. */
GW__AVX2 static uint32_t prep_encode_avx2(uint16_t *h, float *x, const float *g, const float *res,
                                          size_t n, float scale, float unscale, int bf16)
{
    size_t i = 0;
    const __m256 s = _mm256_set1_ps(scale), u = _mm256_set1_ps(unscale);
    const __m256 zero = _mm256_setzero_ps();
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
    __m256i mx = _mm256_setzero_si256();
    for (; i + GW__LANES <= n; i += GW__LANES) {
        __m256 v = _mm256_loadu_ps(g + i);
        if (res) {
            __m256 r = _mm256_loadu_ps(res + i);
            v = _mm256_blendv_ps(v, _mm256_add_ps(v, r), _mm256_cmp_ps(r, zero, _CMP_NEQ_UQ));
        }
        mx = _mm256_max_epi32(mx, _mm256_and_si256(_mm256_castps_si256(v), abs_mask));
        __m128i hv = gw__halfx8_narrow(_mm256_mul_ps(v, s), bf16);
        gw__store8(h + i, hv);
        _mm256_storeu_ps(x + i, _mm256_sub_ps(v, _mm256_mul_ps(gw__halfx8_widen(hv, bf16), u)));
    }
    uint32_t lanes[GW__LANES];
    _mm256_storeu_si256((__m256i *)(void *)lanes, mx);
    uint32_t m =
        prep_encode_scalar(h + i, x + i, g + i, res ? res + i : NULL, n - i, scale, unscale, bf16);
    for (int k = 0; k < GW__LANES; k++)
        m = lanes[k] > m ? lanes[k] : m;
    return m;
}
#endif

/* ---- the entry points: one dispatch ----------------------------------------- */

static int have_avx2(void)
{
#if GW__HALF_HAVE_AVX2
    return gw__half_isa_best() == GW_HALF_ISA_AVX2;
#else
    return 0;
#endif
}

static void encode_rest(uint16_t *h, float *x, size_t n, float scale, float unscale, int bf16)
{
#if GW__HALF_HAVE_AVX2
    if (have_avx2()) {
        encode_rest_avx2(h, x, n, scale, unscale, bf16);
        return;
    }
#endif
    encode_rest_scalar(h, x, n, scale, unscale, bf16);
}

static void decode_avg(float *dst, const uint16_t *src, size_t n, float unscale, float d, int bf16)
{
#if GW__HALF_HAVE_AVX2
    if (have_avx2()) {
        decode_avg_avx2(dst, src, n, unscale, d, bf16);
        return;
    }
#endif
    decode_avg_scalar(dst, src, n, unscale, d, bf16);
}

static uint32_t prep_encode(uint16_t *h, float *x, const float *g, const float *res, size_t n,
                            float scale, float unscale, int bf16)
{
#if GW__HALF_HAVE_AVX2
    if (have_avx2())
        return prep_encode_avx2(h, x, g, res, n, scale, unscale, bf16);
#endif
    return prep_encode_scalar(h, x, g, res, n, scale, unscale, bf16);
}

void gw__cz_encode_half_rest(uint16_t *h, float *x, size_t n, float scale, float unscale)
{
    encode_rest(h, x, n, scale, unscale, 0);
}

void gw__cz_encode_bf16_rest(uint16_t *h, float *x, size_t n, float scale, float unscale)
{
    encode_rest(h, x, n, scale, unscale, 1);
}

void gw__cz_decode_half_avg(float *dst, const uint16_t *src, size_t n, float unscale, float d)
{
    decode_avg(dst, src, n, unscale, d, 0);
}

void gw__cz_decode_bf16_avg(float *dst, const uint16_t *src, size_t n, float unscale, float d)
{
    decode_avg(dst, src, n, unscale, d, 1);
}

uint32_t gw__cz_prep_encode_half(uint16_t *h, float *x, const float *g, const float *res, size_t n,
                                 float scale, float unscale)
{
    return prep_encode(h, x, g, res, n, scale, unscale, 0);
}

uint32_t gw__cz_prep_encode_bf16(uint16_t *h, float *x, const float *g, const float *res, size_t n,
                                 float scale, float unscale)
{
    return prep_encode(h, x, g, res, n, scale, unscale, 1);
}
