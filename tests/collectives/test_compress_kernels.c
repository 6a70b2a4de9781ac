/*
 * test_compress_kernels.c - the codecs' building blocks on their own: the
 * fast 16-bit conversions against the library's reference conversions
 * (reduce_kernels.c), and the sampled top-k selection against a full sort.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
        float probes[6] = {a, mid, nextafterf(mid, 0), nextafterf(mid, INFINITY),
                           nextafterf(a, INFINITY), nextafterf(b, 0)};
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

Test(compress_kernels, half_encode_matches_reference)
{
    size_t cap = 1 << 20;
    float *v = malloc(cap * 4);
    uint16_t *h = malloc(cap * 2);
    size_t n = half_probe(v, cap);
    /* Odd lengths and offsets exercise the vector loop's tail. */
    gw__cz_encode_half(h, v, n - 3, 1.0f);
    gw__cz_encode_half(h + n - 3, v + n - 3, 3, 1.0f);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(h[i], gw__float_to_half(v[i]), "float %a: 0x%04x, reference 0x%04x",
                     (double)v[i], h[i], gw__float_to_half(v[i]));
    /* With a power-of-two scale. */
    gw__cz_encode_half(h, v, 1000, 0x1p-3f);
    for (size_t i = 0; i < 1000; i++)
        cr_assert_eq(h[i], gw__float_to_half(v[i] * 0x1p-3f));
    free(v);
    free(h);
}

Test(compress_kernels, half_decode_matches_reference)
{
    uint16_t *h = malloc(65536 * 2);
    float *f = malloc(65536 * 4);
    size_t n = 0;
    for (uint32_t u = 0; u < 65536; u++)
        if ((u & 0x7c00u) != 0x7c00u) /* finite */
            h[n++] = (uint16_t)u;
    gw__cz_decode_half(f, h, n, 1.0f);
    for (size_t i = 0; i < n; i++)
        cr_assert(memcmp(&f[i], &(float){gw__half_to_float(h[i])}, 4) == 0, "half 0x%04x", h[i]);
    gw__cz_decode_half(f, h, n, 4.0f);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(f[i], gw__half_to_float(h[i]) * 4.0f);
    free(h);
    free(f);
}

Test(compress_kernels, bf16_matches_reference)
{
    size_t cap = 1 << 20;
    float *v = malloc(cap * 4);
    uint16_t *h = malloc(cap * 2);
    size_t n = 0;
    /* Every bf16 value, its midpoints (ties) and their neighbours. */
    for (uint32_t b = 0; b < 0x7f7f && n + 8 <= cap; b += 7) {
        float a = from_bits(b << 16), mid = from_bits((b << 16) | 0x8000u);
        float probes[4] = {a, mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
        for (int k = 0; k < 4; k++) {
            v[n++] = probes[k];
            v[n++] = -probes[k];
        }
    }
    gw__cz_encode_bf16(h, v, n, 1.0f);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(h[i], gw__float_to_bf16(v[i]), "float %a: 0x%04x, reference 0x%04x",
                     (double)v[i], h[i], gw__float_to_bf16(v[i]));
    float *back = malloc(n * 4);
    gw__cz_decode_bf16(back, h, n, 1.0f);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(back[i], gw__bf16_to_float(h[i]));
    free(back);
    free(v);
    free(h);
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
    check_select(x, n, 4000, 1);  /* 1%: the sampled threshold */
    check_select(x, n, 400, -1);  /* 0.1%: exact, too few elements for a sample */
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
