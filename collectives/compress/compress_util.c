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
 * which path a rank took; elsewhere the reference conversion is used.
 * bfloat16 rounding is a few integer operations that the compiler
 * vectorises on its own.
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
__attribute__((target("avx,f16c"))) static void encode_half_f16c(uint16_t *dst, const float *src,
                                                                 size_t n, float scale)
{
    size_t i = 0;
    __m256 s = _mm256_set1_ps(scale);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(src + i), s);
        _mm_storeu_si128((__m128i *)(void *)(dst + i),
                         _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; i++)
        dst[i] = gw__float_to_half(src[i] * scale);
}

__attribute__((target("avx,f16c"))) static void decode_half_f16c(float *dst, const uint16_t *src,
                                                                 size_t n, float scale)
{
    size_t i = 0;
    __m256 s = _mm256_set1_ps(scale);
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtph_ps(h), s));
    }
    for (; i < n; i++)
        dst[i] = gw__half_to_float(src[i]) * scale;
}

static int have_f16c(void)
{
    return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
}
#endif

void gw__cz_encode_half(uint16_t *dst, const float *src, size_t n, float scale)
{
#ifdef GW_CZ_HAVE_F16C_PATH
    if (have_f16c()) {
        encode_half_f16c(dst, src, n, scale);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = gw__float_to_half(src[i] * scale);
}

void gw__cz_decode_half(float *dst, const uint16_t *src, size_t n, float scale)
{
#ifdef GW_CZ_HAVE_F16C_PATH
    if (have_f16c()) {
        decode_half_f16c(dst, src, n, scale);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = gw__half_to_float(src[i]) * scale;
}

/* ---- bfloat16 ------------------------------------------------------------- */

/* Round to nearest even on the bit pattern: add 0x7fff plus the lowest kept
 * bit, then truncate. Exact for every finite input (a value that rounds up
 * past the largest bfloat16 becomes infinity, as the reference does). */
GW__CZ_HOT void gw__cz_encode_bf16(uint16_t *dst, const float *src, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) {
        float v = src[i] * scale;
        uint32_t u;
        memcpy(&u, &v, 4);
        u += 0x7fffu + ((u >> 16) & 1u);
        dst[i] = (uint16_t)(u >> 16);
    }
}

GW__CZ_HOT void gw__cz_decode_bf16(float *dst, const uint16_t *src, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        float v;
        memcpy(&v, &u, 4);
        dst[i] = v * scale;
    }
}
