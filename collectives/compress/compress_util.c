/*
 * compress_util.c - helpers every codec shares: work buffers kept in the
 * state, the key mixer for random streams, and the float <-> 16-bit array
 * conversions.
 *
 * The conversions matter for speed: the casting codecs convert every element
 * twice per call, and gw__float_to_half, one function call per element, does
 * about 0.5 GB/s. On x86-64 CPUs with F16C (every one since 2012) the
 * hardware converts eight floats per instruction with the same rounding
 * (to nearest, ties to even, subnormals kept), so results do not depend on
 * which path a rank took; elsewhere the reference conversion is used (the
 * choice is made at run time with __builtin_cpu_supports). bfloat16
 * rounding is a few integer operations that the compiler vectorises on its
 * own (GW__CZ_HOT builds an AVX2 and a baseline clone).
 *
 * Each conversion is fused with what surrounds it into one pass over the
 * data (codec.h lists them), because at 64 MiB, far beyond the caches, a
 * pass costs what its memory traffic costs: measured on one core of the
 * development machine (Xeon, AVX-512, CPU time of the thread), forming x
 * and its maximum (read g and the residual, write x) runs at 3.7 GB/s of
 * input, the cast of x with its residual at 6.6 GB/s once fused (4.2 as
 * three loops through a temporary block), and both fused into one pass at
 * 3.0 GB/s: 2.4 GB/s for the two-pass encoding, 3.0 for the single pass.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/compress/codec.h"
#include "common/clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GW_CZ_HAVE_F16C_PATH 1
#endif

gw_status_t gw__cz_work(gw__cz_call_t *call, int slot, size_t len, void **out)
{
    gw_compress_state_t *st = call->st;
    if (len <= st->work_len[slot] && st->work[slot]) {
        *out = st->work[slot];
        return GW_OK;
    }
    void *p = NULL;
    size_t alloc = len ? len : 1;
    if (posix_memalign(&p, 64, alloc) != 0) {
        GW_ERROR(&call->comm->log, "compress", "cannot allocate %zu bytes of codec work memory",
                 len);
        return GW_ERR_NO_MEMORY;
    }
    free(st->work[slot]);
    st->work[slot] = p;
    st->work_len[slot] = alloc;
    *out = p;
    return GW_OK;
}

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t gw__cz_mix(uint64_t a, uint64_t b) { return splitmix(splitmix(a) ^ b); }

int64_t gw__cz_now(void) { return gw__now_ns(); }

int64_t gw__cz_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- IEEE half ------------------------------------------------------------ */

#ifdef GW_CZ_HAVE_F16C_PATH
/* The fused loops below do per element exactly what the scalar versions
 * further down do, in the same order, with the same IEEE operations; F16C
 * rounds like gw__float_to_half, so both give the same bits. */
__attribute__((target("avx,f16c"))) static void encode_half_rest_f16c(uint16_t *h, float *x,
                                                                      size_t n, float scale,
                                                                      float unscale)
{
    size_t i = 0;
    const __m256 s = _mm256_set1_ps(scale), u = _mm256_set1_ps(unscale);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m128i hv = _mm256_cvtps_ph(_mm256_mul_ps(v, s),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(void *)(h + i), hv);
        __m256 t = _mm256_mul_ps(_mm256_cvtph_ps(hv), u);
        _mm256_storeu_ps(x + i, _mm256_sub_ps(v, t));
    }
    for (; i < n; i++) {
        h[i] = gw__float_to_half(x[i] * scale);
        x[i] -= gw__half_to_float(h[i]) * unscale;
    }
}

__attribute__((target("avx,f16c"))) static void decode_half_avg_f16c(float *dst,
                                                                     const uint16_t *src,
                                                                     size_t n, float unscale,
                                                                     float d)
{
    size_t i = 0;
    const __m256 u = _mm256_set1_ps(unscale), dv = _mm256_set1_ps(d);
    for (; i + 8 <= n; i += 8) {
        __m128i hv = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        _mm256_storeu_ps(dst + i, _mm256_div_ps(_mm256_mul_ps(_mm256_cvtph_ps(hv), u), dv));
    }
    for (; i < n; i++)
        dst[i] = (gw__half_to_float(src[i]) * unscale) / d;
}

__attribute__((target("avx,f16c"))) static void add_half_f16c(uint16_t *own, const uint16_t *in,
                                                              size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(in + i)));
        __m256 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(own + i)));
        _mm_storeu_si128((__m128i *)(void *)(own + i),
                         _mm256_cvtps_ph(_mm256_add_ps(a, b),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; i++)
        own[i] = gw__float_to_half(gw__half_to_float(in[i]) + gw__half_to_float(own[i]));
}

/* Step 1's x = g + res (res skipped where it is zero) and the cast, in one
 * pass; the integer maximum of |x|'s bit patterns needs AVX2. */
__attribute__((target("avx2,f16c"))) static uint32_t
prep_encode_half_avx2(uint16_t *h, float *x, const float *g, const float *res, size_t n,
                      float scale, float unscale)
{
    size_t i = 0;
    const __m256 s = _mm256_set1_ps(scale), u = _mm256_set1_ps(unscale);
    const __m256 zero = _mm256_setzero_ps();
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
    __m256i mx = _mm256_setzero_si256();
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(g + i);
        if (res) {
            __m256 r = _mm256_loadu_ps(res + i);
            v = _mm256_blendv_ps(v, _mm256_add_ps(v, r), _mm256_cmp_ps(r, zero, _CMP_NEQ_UQ));
        }
        mx = _mm256_max_epi32(mx, _mm256_and_si256(_mm256_castps_si256(v), abs_mask));
        __m128i hv = _mm256_cvtps_ph(_mm256_mul_ps(v, s),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(void *)(h + i), hv);
        _mm256_storeu_ps(x + i, _mm256_sub_ps(v, _mm256_mul_ps(_mm256_cvtph_ps(hv), u)));
    }
    uint32_t lanes[8], m = 0;
    _mm256_storeu_si256((__m256i *)(void *)lanes, mx);
    for (int k = 0; k < 8; k++)
        m = lanes[k] > m ? lanes[k] : m;
    for (; i < n; i++) {
        float v = res && res[i] != 0.0f ? g[i] + res[i] : g[i];
        uint32_t a = gw__cz_absbits(v);
        m = a > m ? a : m;
        h[i] = gw__float_to_half(v * scale);
        x[i] = v - gw__half_to_float(h[i]) * unscale;
    }
    return m;
}

static int have_f16c(void)
{
    return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
}
#endif

void gw__cz_encode_half_rest(uint16_t *h, float *x, size_t n, float scale, float unscale)
{
#ifdef GW_CZ_HAVE_F16C_PATH
    if (have_f16c()) {
        encode_half_rest_f16c(h, x, n, scale, unscale);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) {
        h[i] = gw__float_to_half(x[i] * scale);
        x[i] -= gw__half_to_float(h[i]) * unscale;
    }
}

void gw__cz_decode_half_avg(float *dst, const uint16_t *src, size_t n, float unscale, float d)
{
#ifdef GW_CZ_HAVE_F16C_PATH
    if (have_f16c()) {
        decode_half_avg_f16c(dst, src, n, unscale, d);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = (gw__half_to_float(src[i]) * unscale) / d;
}

void gw__cz_add_half(uint16_t *own, const uint16_t *in, size_t n)
{
#ifdef GW_CZ_HAVE_F16C_PATH
    if (have_f16c()) {
        add_half_f16c(own, in, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        own[i] = gw__float_to_half(gw__half_to_float(in[i]) + gw__half_to_float(own[i]));
}

uint32_t gw__cz_prep_encode_half(uint16_t *h, float *x, const float *g, const float *res,
                                 size_t n, float scale, float unscale)
{
#ifdef GW_CZ_HAVE_F16C_PATH
    if (have_f16c() && __builtin_cpu_supports("avx2"))
        return prep_encode_half_avx2(h, x, g, res, n, scale, unscale);
#endif
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        float v = res && res[i] != 0.0f ? g[i] + res[i] : g[i];
        uint32_t a = gw__cz_absbits(v);
        m = a > m ? a : m;
        h[i] = gw__float_to_half(v * scale);
        x[i] = v - gw__half_to_float(h[i]) * unscale;
    }
    return m;
}

/* ---- bfloat16 ------------------------------------------------------------- */

/* bfloat16 as plain loops the compiler vectorises (both clones round
 * alike: integer operations and IEEE multiplies, adds, divides).
 *
 * Round to nearest even on the bit pattern: add 0x7fff plus the lowest kept
 * bit, then truncate. Exact for every finite input (a value that rounds up
 * past the largest bfloat16 becomes infinity, as the reference does). */
static inline uint16_t bf16_round(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float bf16_widen(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float v;
    memcpy(&v, &u, 4);
    return v;
}

GW__CZ_HOT void gw__cz_encode_bf16_rest(uint16_t *h, float *x, size_t n, float scale,
                                        float unscale)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t b = bf16_round(x[i] * scale);
        h[i] = b;
        x[i] -= bf16_widen(b) * unscale;
    }
}

GW__CZ_HOT void gw__cz_decode_bf16_avg(float *dst, const uint16_t *src, size_t n, float unscale,
                                       float d)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = (bf16_widen(src[i]) * unscale) / d;
}

GW__CZ_HOT void gw__cz_add_bf16(uint16_t *own, const uint16_t *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        own[i] = bf16_round(bf16_widen(in[i]) + bf16_widen(own[i]));
}

/* Written with bit masks rather than ?: so that it vectorises, like
 * add_residual in compress_api.c. */
GW__CZ_HOT static uint32_t prep_encode_bf16_res(uint16_t *h, float *x, const float *g,
                                                const float *res, size_t n, float scale,
                                                float unscale)
{
    int32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        float s = g[i] + res[i];
        uint32_t gb, sb, vb;
        memcpy(&gb, &g[i], 4);
        memcpy(&sb, &s, 4);
        uint32_t use = 0u - (uint32_t)(res[i] != 0.0f);
        vb = (sb & use) | (gb & ~use);
        float v;
        memcpy(&v, &vb, 4);
        int32_t a = (int32_t)(vb & 0x7fffffffu);
        m = a > m ? a : m;
        uint16_t b = bf16_round(v * scale);
        h[i] = b;
        x[i] = v - bf16_widen(b) * unscale;
    }
    return (uint32_t)m;
}

GW__CZ_HOT static uint32_t prep_encode_bf16_plain(uint16_t *h, float *x, const float *g,
                                                  size_t n, float scale, float unscale)
{
    int32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        float v = g[i];
        int32_t a = (int32_t)gw__cz_absbits(v);
        m = a > m ? a : m;
        uint16_t b = bf16_round(v * scale);
        h[i] = b;
        x[i] = v - bf16_widen(b) * unscale;
    }
    return (uint32_t)m;
}

uint32_t gw__cz_prep_encode_bf16(uint16_t *h, float *x, const float *g, const float *res,
                                 size_t n, float scale, float unscale)
{
    return res ? prep_encode_bf16_res(h, x, g, res, n, scale, unscale)
               : prep_encode_bf16_plain(h, x, g, n, scale, unscale);
}
