/*
 * test_compress_kernels.c - the codecs' building blocks on their own: the
 * fused 16-bit conversions (F16C or vectorised, chosen at run time) against
 * the library's scalar reference conversions (half_convert.h), bit for
 * bit; int8's stochastic rounding against its scalar definition; and the
 * sampled top-k selection against a full sort.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/compress/cast_ring.h"
#include "collectives/compress/codec.h"
#include "collectives/compress/topk_select.h"

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Floats around every half value: the value itself, the midpoints to its
 * neighbours (ties) and one float ulp either side of them, plus random
 * finite floats across the whole range. */
static size_t half_probe(float *v, size_t cap)
{
    size_t n = 0;
    for (uint32_t h = 0; h < 0x7c00 && n + 12 <= cap; h++) {
        float a = gw__half_to_float((uint16_t)h), b = gw__half_to_float((uint16_t)(h + 1));
        float mid = (float)(((double)a + (double)b) / 2);
        float probes[6] = {a,
                           mid,
                           nextafterf(mid, 0),
                           nextafterf(mid, INFINITY),
                           nextafterf(a, INFINITY),
                           nextafterf(b, 0)};
        for (int k = 0; k < 6; k++) {
            v[n++] = probes[k];
            v[n++] = -probes[k];
        }
    }
    for (uint64_t i = 0; n < cap; i++) {
        uint32_t u = (uint32_t)mix64(i);
        if ((u & 0x7f800000u) != 0x7f800000u)
            v[n++] = from_bits(u);
    }
    return n;
}

static int same_bits(float a, float b) { return memcmp(&a, &b, 4) == 0; }

/* encode_half_rest: h = half(x * scale), x -= float(h) * unscale, against
 * the reference conversions, element by element, with odd lengths and
 * offsets so that the vector loop's tail is exercised. */
Test(compress_kernels, half_encode_rest_matches_reference)
{
    size_t cap = 1 << 20;
    float *v = malloc(cap * 4), *x = malloc(cap * 4);
    uint16_t *h = malloc(cap * 2);
    size_t n = half_probe(v, cap);
    static const float scales[][2] = {{1.0f, 1.0f}, {0x1p-3f, 0x1p3f}, {0x1p5f, 0x1p-5f}};
    for (size_t sc = 0; sc < 3; sc++) {
        const float s = scales[sc][0], u = scales[sc][1];
        memcpy(x, v, n * 4);
        gw__cz_encode_half_rest(h, x, n - 3, s, u);
        gw__cz_encode_half_rest(h + n - 3, x + n - 3, 3, s, u);
        for (size_t i = 0; i < n; i++) {
            uint16_t want = gw__float_to_half(v[i] * s);
            cr_assert_eq(h[i], want, "float %a scale %a: 0x%04x, reference 0x%04x", (double)v[i],
                         (double)s, h[i], want);
            if (want == 0x7c00 || want == 0xfc00)
                continue; /* overflowed: the residual is -inf, as in the reference */
            cr_assert(same_bits(x[i], v[i] - gw__half_to_float(want) * u),
                      "float %a scale %a: residual %a", (double)v[i], (double)s, (double)x[i]);
        }
    }
    free(v);
    free(x);
    free(h);
}

Test(compress_kernels, half_decode_avg_and_add_match_reference)
{
    uint16_t *h = malloc(65536 * 2), *own = malloc(65536 * 2);
    float *f = malloc(65536 * 4);
    size_t n = 0;
    for (uint32_t u = 0; u < 65536; u++)
        if ((u & 0x7c00u) != 0x7c00u) /* finite */
            h[n++] = (uint16_t)u;
    gw__cz_decode_half_avg(f, h, n, 1.0f, 1.0f);
    for (size_t i = 0; i < n; i++)
        cr_assert(same_bits(f[i], gw__half_to_float(h[i])), "half 0x%04x", h[i]);
    gw__cz_decode_half_avg(f, h, n - 5, 4.0f, 3.0f);
    for (size_t i = 0; i < n - 5; i++)
        cr_assert(same_bits(f[i], (gw__half_to_float(h[i]) * 4.0f) / 3.0f), "half 0x%04x", h[i]);
    /* One ring hop: own = half(float(in) + float(own)), sums kept finite. */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if ((h[i] & 0x7fffu) < 0x7400u) /* |value| < 2^14 */
            h[m++] = h[i];
    uint16_t *in = malloc(m * 2);
    for (size_t i = 0; i < m; i++) {
        in[i] = h[i];
        own[i] = h[(i * 7919 + 13) % m];
    }
    uint16_t *want = malloc(m * 2);
    for (size_t i = 0; i < m; i++)
        want[i] = gw__float_to_half(gw__half_to_float(in[i]) + gw__half_to_float(own[i]));
    gw__reduce(own, in, own, m, GW_FLOAT16, GW_SUM); /* the hop of cast_ring.c */
    for (size_t i = 0; i < m; i++)
        cr_assert_eq(own[i], want[i], "0x%04x + ...: 0x%04x, reference 0x%04x", in[i], own[i],
                     want[i]);
    free(in);
    free(want);
    free(h);
    free(own);
    free(f);
}

/* Gradients and residuals for the one-pass step 1 + encoding: the probe
 * values, a residual that is zero (either sign) for a third of them. */
static void prep_inputs(const float *v, size_t n, float *g, float *res)
{
    for (size_t i = 0; i < n; i++) {
        g[i] = v[i];
        uint64_t k = mix64(i) % 3;
        res[i] = k == 0 ? (i & 1 ? -0.0f : 0.0f) : v[(i * 31 + 7) % n] * (k == 1 ? 1e-3f : 0.5f);
    }
}

typedef uint32_t (*prep_fn)(uint16_t *, float *, const float *, const float *, size_t, float,
                            float);

static void check_prep(prep_fn fn, uint16_t (*round16)(float), float (*widen)(uint16_t),
                       const float *g, const float *res, size_t n, float s, float u)
{
    float *x = malloc(n * 4);
    uint16_t *h = malloc(n * 2);
    uint32_t m = fn(h, x, g, res, n - 5, s, u);
    uint32_t m2 = fn(h + n - 5, x + n - 5, g + n - 5, res ? res + n - 5 : NULL, 5, s, u);
    m = m2 > m ? m2 : m;
    uint32_t want_max = 0;
    for (size_t i = 0; i < n; i++) {
        float v = res && res[i] != 0.0f ? g[i] + res[i] : g[i];
        if (gw__cz_absbits(v) > want_max)
            want_max = gw__cz_absbits(v);
    }
    cr_assert_eq(m, want_max, "largest |x|: 0x%08x, reference 0x%08x", m, want_max);
    for (size_t i = 0; i < n; i++) {
        float v = res && res[i] != 0.0f ? g[i] + res[i] : g[i];
        uint16_t want = round16(v * s);
        cr_assert_eq(h[i], want, "x %a: 0x%04x, reference 0x%04x", (double)v, h[i], want);
        if ((want & 0x7fffu) == 0x7c00u || (want & 0x7fffu) == 0x7f80u)
            continue; /* overflowed to infinity */
        cr_assert(same_bits(x[i], v - widen(want) * u), "x %a: residual %a, reference %a",
                  (double)v, (double)x[i], (double)(v - widen(want) * u));
    }
    free(x);
    free(h);
}

Test(compress_kernels, half_prep_encode_matches_two_passes)
{
    size_t cap = 1 << 19;
    float *v = malloc(cap * 4), *g = malloc(cap * 4), *res = malloc(cap * 4);
    size_t n = half_probe(v, cap);
    for (size_t i = 0; i < n; i++)
        v[i] = ldexpf(v[i], -16); /* keep x = g + res far from overflow */
    prep_inputs(v, n, g, res);
    check_prep(gw__cz_prep_encode_half, gw__float_to_half, gw__half_to_float, g, res, n, 0x1p16f,
               0x1p-16f);
    check_prep(gw__cz_prep_encode_half, gw__float_to_half, gw__half_to_float, g, NULL, n, 0x1p16f,
               0x1p-16f);
    check_prep(gw__cz_prep_encode_half, gw__float_to_half, gw__half_to_float, g, res, n, 0x1p14f,
               0x1p-14f);
    free(v);
    free(g);
    free(res);
}

/* Every bf16 value (a sample of them), its midpoints (ties) and their
 * neighbours. */
static size_t bf16_probe(float *v, size_t cap)
{
    size_t n = 0;
    for (uint32_t b = 0; b < 0x7f7f && n + 8 <= cap; b += 7) {
        float a = from_bits(b << 16), mid = from_bits((b << 16) | 0x8000u);
        float probes[4] = {a, mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
        for (int k = 0; k < 4; k++) {
            v[n++] = probes[k];
            v[n++] = -probes[k];
        }
    }
    return n;
}

Test(compress_kernels, bf16_kernels_match_reference)
{
    size_t cap = 1 << 20;
    float *v = malloc(cap * 4), *x = malloc(cap * 4);
    uint16_t *h = malloc(cap * 2);
    size_t n = bf16_probe(v, cap);
    memcpy(x, v, n * 4);
    gw__cz_encode_bf16_rest(h, x, n - 3, 1.0f, 1.0f);
    gw__cz_encode_bf16_rest(h + n - 3, x + n - 3, 3, 1.0f, 1.0f);
    for (size_t i = 0; i < n; i++) {
        uint16_t want = gw__float_to_bf16(v[i]);
        cr_assert_eq(h[i], want, "float %a: 0x%04x, reference 0x%04x", (double)v[i], h[i], want);
        if ((want & 0x7fffu) != 0x7f80u)
            cr_assert(same_bits(x[i], v[i] - gw__bf16_to_float(want)), "float %a: residual %a",
                      (double)v[i], (double)x[i]);
    }
    float *back = malloc(n * 4);
    gw__cz_decode_bf16_avg(back, h, n, 0x1p-2f, 3.0f);
    for (size_t i = 0; i < n; i++)
        cr_assert(same_bits(back[i], (gw__bf16_to_float(h[i]) * 0x1p-2f) / 3.0f), "bf16 0x%04x",
                  h[i]);
    /* Hops, sums of neighbours kept finite. */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if ((h[i] & 0x7fffu) < 0x7e00u)
            h[m++] = h[i];
    uint16_t *own = malloc(m * 2), *want = malloc(m * 2);
    for (size_t i = 0; i < m; i++) {
        own[i] = h[(i * 7919 + 13) % m];
        want[i] = gw__float_to_bf16(gw__bf16_to_float(h[i]) + gw__bf16_to_float(own[i]));
    }
    gw__reduce(own, h, own, m, GW_BFLOAT16, GW_SUM); /* the hop of cast_ring.c */
    for (size_t i = 0; i < m; i++)
        cr_assert_eq(own[i], want[i], "hop %zu: 0x%04x, reference 0x%04x", i, own[i], want[i]);
    /* Step 1 and the encoding in one pass. */
    float *g = malloc(n * 4), *res = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        v[i] = ldexpf(v[i], -8);
    prep_inputs(v, n, g, res);
    check_prep(gw__cz_prep_encode_bf16, gw__float_to_bf16, gw__bf16_to_float, g, res, n, 1.0f,
               1.0f);
    check_prep(gw__cz_prep_encode_bf16, gw__float_to_bf16, gw__bf16_to_float, g, NULL, n, 0.5f,
               2.0f);
    free(g);
    free(res);
    free(own);
    free(want);
    free(back);
    free(v);
    free(x);
    free(h);
}

/* The int8 codec's stochastic rounding against its definition, element by
 * element: random values, the bucket maximum itself (exactly +-L), zeros of
 * either sign, tiny values and values a hair off each level. */
static void int8_reference(float *x, int8_t *q, uint32_t len, float m, int levels, uint32_t key)
{
    const float fl = (float)levels;
    for (uint32_t i = 0; i < len; i++) {
        float v = (x[i] / m) * fl;
        int32_t w = (int32_t)floorf(v);
        float frac = v - (float)w;
        float u = (float)(gw__cz_rand32(key, i) >> 8) * 0x1p-24f;
        w += u < frac;
        q[i] = (int8_t)w;
        x[i] -= m * ((float)w / fl);
    }
}

Test(compress_kernels, int8_quantize_matches_reference)
{
    const uint32_t n = 100003;
    float *v = malloc(n * 4), *a = malloc(n * 4), *b = malloc(n * 4);
    int8_t *qa = malloc(n), *qb = malloc(n);
    static const float maxima[] = {1.0f, 0.3f, 7.5e-6f, 3.0e30f};
    static const int levels[] = {63, 42, 15, 1};
    for (size_t mi = 0; mi < 4; mi++) {
        const float m = maxima[mi];
        for (size_t li = 0; li < 4; li++) {
            const int L = levels[li];
            for (uint32_t i = 0; i < n; i++) {
                uint64_t r = mix64(i + 1000 * mi);
                float t = (float)((double)(r >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
                switch (r % 7) {
                case 0:
                    t = (r & 8) ? 1.0f : -1.0f;
                    break;
                case 1:
                    t = (r & 8) ? 0.0f : -0.0f;
                    break;
                case 2:
                    t = ldexpf(t, -60);
                    break;
                case 3:
                    t = nextafterf((float)((int)(r % (uint64_t)(2 * L + 1)) - L) / (float)L,
                                   (r & 16) ? 2.0f : -2.0f);
                    t = fmaxf(-1.0f, fminf(1.0f, t));
                    break;
                default:
                    break;
                }
                v[i] = t * m;
                if (fabsf(v[i]) > m)
                    v[i] = copysignf(m, v[i]);
            }
            memcpy(a, v, n * 4);
            memcpy(b, v, n * 4);
            gw__cz_int8_quantize(a, qa, n - 3, m, L, 0xabcdu + (uint32_t)li);
            gw__cz_int8_quantize(a + n - 3, qa + n - 3, 3, m, L, 77);
            int8_reference(b, qb, n - 3, m, L, 0xabcdu + (uint32_t)li);
            int8_reference(b + n - 3, qb + n - 3, 3, m, L, 77);
            for (uint32_t i = 0; i < n; i++) {
                cr_assert_eq(qa[i], qb[i], "m %g L %d x %a: level %d, reference %d", (double)m, L,
                             (double)v[i], qa[i], qb[i]);
                cr_assert(same_bits(a[i], b[i]), "m %g L %d x %a: residual %a, reference %a",
                          (double)m, L, (double)v[i], (double)a[i], (double)b[i]);
            }
        }
    }
    free(v);
    free(a);
    free(b);
    free(qa);
    free(qb);
}

/* ---- top-k selection ---- */

static const float *sort_x;

/* Larger magnitude first; ties by lower index. */
static int by_magnitude(const void *a, const void *b)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    float x = fabsf(sort_x[i]), y = fabsf(sort_x[j]);
    if (x != y)
        return x > y ? -1 : 1;
    return (i > j) - (i < j);
}

static int by_index(const void *a, const void *b)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    return (i > j) - (i < j);
}

/* The reference: a full sort. */
static void topk_by_sort(const float *x, size_t n, size_t k, uint32_t *idx)
{
    uint32_t *all = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        all[i] = (uint32_t)i;
    sort_x = x;
    qsort(all, n, 4, by_magnitude);
    memcpy(idx, all, k * 4);
    qsort(idx, k, 4, by_index);
    free(all);
}

static void check_select(const float *x, size_t n, size_t k, int want_path)
{
    uint32_t *got = malloc(k * 4 + 4), *want = malloc(k * 4 + 4);
    gw__cz_arena_t arena = {NULL, 0};
    int path = -1;
    cr_assert_eq(gw__cz_topk_select(x, n, k, 12345, &arena, got, &path), GW_OK);
    topk_by_sort(x, n, k, want);
    for (size_t j = 0; j < k; j++)
        cr_assert_eq(got[j], want[j], "n %zu k %zu: index %zu is %u, the sort says %u", n, k, j,
                     got[j], want[j]);
    if (want_path >= 0)
        cr_assert_eq(path, want_path, "n %zu k %zu: path %d", n, k, path);
    free(arena.buf);
    free(got);
    free(want);
}

Test(compress_kernels, topk_select_equals_full_sort, .timeout = 60)
{
    size_t n = 400003;
    float *x = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        uint64_t h = mix64(i);
        x[i] = (float)((double)(h >> 11) / 9007199254740992.0 - 0.5) * (h & 1 ? 1e-3f : 1.0f);
    }
    check_select(x, n, 4000, 1);   /* 1%: the sampled threshold */
    check_select(x, n, 400, -1);   /* 0.1%: exact, too few elements for a sample */
    check_select(x, n, 40000, -1); /* 10% */
    check_select(x, n, 100000, 0); /* 25%: exact over everything */
    check_select(x, n, 1, -1);
    check_select(x, n, n, 0);
    check_select(x, 1000, 10, 0); /* small */
    free(x);
    /* 0.1% of a larger buffer is sampled too. */
    n = 2000003;
    x = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((double)(mix64(i) >> 11) / 9007199254740992.0 - 0.5);
    check_select(x, n, 2000, 1);
    /* Many ties at the boundary: values from a handful of levels. */
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(int)(mix64(i) % 9) - 4.0f;
    check_select(x, n, 4000, -1);
    /* All equal. */
    for (size_t i = 0; i < n; i++)
        x[i] = 0.5f;
    check_select(x, n, 3000, -1);
    free(x);
}

Test(compress_kernels, select_nth)
{
    size_t n = 10007;
    uint32_t *a = malloc(n * 4), *b = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint32_t)(mix64(i) % 1000);
    uint32_t *sorted = malloc(n * 4);
    memcpy(sorted, b, n * 4);
    qsort(sorted, n, 4, by_index); /* by_index compares the values as uint32 */
    static const size_t nths[] = {0, 1, 17, 5003, 10005, 10006};
    for (size_t t = 0; t < sizeof(nths) / sizeof(nths[0]); t++) {
        memcpy(a, b, n * 4);
        cr_assert_eq(gw__cz_select_nth(a, n, nths[t], 7), sorted[nths[t]]);
    }
    free(a);
    free(b);
    free(sorted);
}
