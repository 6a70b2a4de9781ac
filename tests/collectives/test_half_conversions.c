/*
 * test_half_conversions.c - the float16 and bfloat16 conversions that the
 * reduction kernels (tested in test_reduce_kernels.c) and the codecs use.
 *
 * The conversions are checked exhaustively against references written
 * independently of the implementation (ldexp/nearbyint in double), including
 * every rounding tie between two adjacent half/bfloat16 values, then on
 * edge cases and two million random float bit patterns. Every check runs
 * each way a conversion can be made: the scalar functions, and the bulk
 * conversions of reduce_half.h on every instruction set this CPU has
 * (portable, AVX2), which the half-precision kernels are built from.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "collectives/reduce_half.h"
#include "collectives/reduce_kernels.h"
#include "kernel_test_util.h"

/* ---- references ----------------------------------------------------------- */

/* The value of a half from its fields, computed in double (exact). */
static double half_ref_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f;
    int m = h & 0x3ff;
    double v;
    if (e == 0x1f)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp(m, -24);
    else
        v = ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

/*
 * Round |x| (finite) to a format with `bits` significand bits and the given
 * least subnormal exponent, to nearest even, in double. Returns the rounded
 * magnitude (infinity handling is left to the caller).
 */
static double round_ref(double ax, int bits, int min_quantum_exp)
{
    if (ax == 0)
        return 0;
    int e;
    frexp(ax, &e); /* ax = m * 2^e, 0.5 <= m < 1 */
    int qexp = e - bits;
    if (qexp < min_quantum_exp)
        qexp = min_quantum_exp;
    return ldexp(nearbyint(ldexp(ax, -qexp)), qexp);
}

/* ---- the ways to convert ---------------------------------------------------- */

/* WAY_SCALAR: gw__half_to_float and friends, one element at a time; 0 and
 * up: the bulk conversions on that gw_half_isa_t. */
#define WAY_SCALAR (-1)

static int way_runs(int way)
{
    return way == WAY_SCALAR || gw__half_isa_supported((gw_half_isa_t)way);
}

static const char *way_name(int way)
{
    return way == WAY_SCALAR ? "scalar" : gw__half_isa_name((gw_half_isa_t)way);
}

/* Every way this CPU can run. */
#define FOR_EACH_WAY(w)                                  \
    for (int w = WAY_SCALAR; w < GW_HALF_ISA_COUNT; w++) \
        if (way_runs(w))

static void widen_way(int way, gw_dtype_t dt, float *out, const uint16_t *in, size_t n)
{
    if (way != WAY_SCALAR) {
        cr_assert_eq(gw__half_widen_isa(out, in, n, dt, (gw_half_isa_t)way), GW_OK);
        return;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = dt == GW_FLOAT16 ? gw__half_to_float(in[i]) : gw__bf16_to_float(in[i]);
}

static void narrow_way(int way, gw_dtype_t dt, uint16_t *out, const float *in, size_t n)
{
    if (way != WAY_SCALAR) {
        cr_assert_eq(gw__half_narrow_isa(out, in, n, dt, (gw_half_isa_t)way), GW_OK);
        return;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = dt == GW_FLOAT16 ? gw__float_to_half(in[i]) : gw__float_to_bf16(in[i]);
}

/* One element, the given way (the bulk ways take their tail path). */
static uint16_t narrow1(int way, gw_dtype_t dt, float f)
{
    uint16_t h;
    narrow_way(way, dt, &h, &f, 1);
    return h;
}

static float widen1(int way, gw_dtype_t dt, uint16_t h)
{
    float f;
    widen_way(way, dt, &f, &h, 1);
    return f;
}

/* ---- conversions: exhaustive ---------------------------------------------- */

Test(conversions, half_to_float_exhaustive_and_round_trip, .timeout = 60)
{
    static uint16_t in[65536], back[65536];
    float *f = malloc(sizeof(float) * 65536);
    cr_assert_not_null(f);
    for (uint32_t i = 0; i < 65536; i++)
        in[i] = (uint16_t)i;
    FOR_EACH_WAY(w)
    {
        widen_way(w, GW_FLOAT16, f, in, 65536);
        narrow_way(w, GW_FLOAT16, back, f, 65536);
        for (uint32_t i = 0; i < 65536; i++) {
            uint16_t h = in[i];
            if (half_is_nan(h)) {
                cr_assert(isnan(f[i]), "%s: half 0x%04x should widen to NaN", way_name(w), h);
                cr_assert(fbits(f[i]) & 0x00400000u, "%s: half 0x%04x should widen to a quiet NaN",
                          way_name(w), h);
                cr_assert_eq(!!signbit(f[i]), !!(h & 0x8000), "%s: half 0x%04x NaN lost its sign",
                             way_name(w), h);
                cr_assert_eq(back[i], h | 0x0200u, "%s: half NaN 0x%04x came back as 0x%04x",
                             way_name(w), h, back[i]);
                continue;
            }
            double want = half_ref_value(h);
            cr_assert(fbits(f[i]) == fbits((float)want), "%s: half 0x%04x -> %a, want %a",
                      way_name(w), h, (double)f[i], want);
            cr_assert_eq(back[i], h, "%s: half 0x%04x -> %a -> 0x%04x", way_name(w), h,
                         (double)f[i], back[i]);
        }
    }
    free(f);
}

Test(conversions, bf16_to_float_exhaustive_and_round_trip, .timeout = 60)
{
    static uint16_t in[65536], back[65536];
    float *f = malloc(sizeof(float) * 65536);
    cr_assert_not_null(f);
    for (uint32_t i = 0; i < 65536; i++)
        in[i] = (uint16_t)i;
    FOR_EACH_WAY(w)
    {
        widen_way(w, GW_BFLOAT16, f, in, 65536);
        narrow_way(w, GW_BFLOAT16, back, f, 65536);
        for (uint32_t i = 0; i < 65536; i++) {
            uint16_t h = in[i];
            if (bf16_is_nan(h)) {
                cr_assert(isnan(f[i]), "%s: bf16 0x%04x should widen to NaN", way_name(w), h);
                cr_assert_eq(fbits(f[i]), ((uint32_t)h << 16) | 0x00400000u,
                             "%s: bf16 NaN 0x%04x widened to 0x%08x", way_name(w), h, fbits(f[i]));
                cr_assert_eq(back[i], h | 0x0040u, "%s: bf16 NaN 0x%04x came back as 0x%04x",
                             way_name(w), h, back[i]);
                continue;
            }
            cr_assert_eq(fbits(f[i]), (uint32_t)h << 16, "%s: bf16 0x%04x widened to 0x%08x",
                         way_name(w), h, fbits(f[i]));
            cr_assert_eq(back[i], h, "%s: bf16 0x%04x -> 0x%08x -> 0x%04x", way_name(w), h,
                         fbits(f[i]), back[i]);
        }
    }
    free(f);
}

/* Floats to round and the pattern each must give, checked on every way. */
typedef struct cases {
    float *x;
    uint16_t *want, *got;
    size_t n;
} cases_t;

static cases_t cases_new(size_t cap)
{
    cases_t c = {malloc(cap * sizeof(float)), malloc(cap * 2), malloc(cap * 2), 0};
    cr_assert(c.x && c.want && c.got);
    return c;
}

static void cases_add(cases_t *c, float x, uint16_t want)
{
    c->x[c->n] = x;
    c->want[c->n] = want;
    c->n++;
}

static void cases_check(cases_t *c, gw_dtype_t dt, const char *what)
{
    FOR_EACH_WAY(w)
    {
        narrow_way(w, dt, c->got, c->x, c->n);
        for (size_t i = 0; i < c->n; i++)
            cr_assert_eq(c->got[i], c->want[i], "%s %s: %a (0x%08x) -> 0x%04x, want 0x%04x",
                         way_name(w), what, (double)c->x[i], fbits(c->x[i]), c->got[i], c->want[i]);
    }
    free(c->x);
    free(c->want);
    free(c->got);
}

/*
 * For every pair of adjacent non-negative finite halves lo, lo + 1 (the last
 * pair is 65504 and the 65536 that infinity stands for): the midpoint goes
 * to the even one, one float ulp either side goes to the nearer one. Covers
 * zero/least subnormal, subnormal/normal, every binade and the overflow
 * boundary 65520, on both signs.
 */
Test(conversions, float_to_half_every_tie, .timeout = 60)
{
    cases_t c = cases_new(0x7c00u * 6);
    for (uint32_t lo = 0; lo < 0x7c00u; lo++) {
        uint16_t hi = (uint16_t)(lo + 1);
        double vlo = half_ref_value((uint16_t)lo);
        double vhi = hi == 0x7c00u ? 65536.0 : half_ref_value(hi);
        float mid = (float)((vlo + vhi) / 2); /* 12 significant bits: exact */
        cr_assert_eq((double)mid, (vlo + vhi) / 2);
        uint16_t even = (lo & 1) ? hi : (uint16_t)lo;
        float below = nextafterf(mid, 0.0f);
        float above = nextafterf(mid, INFINITY);
        for (int neg = 0; neg < 2; neg++) {
            uint16_t s = neg ? 0x8000u : 0;
            float sg = neg ? -1.0f : 1.0f;
            cases_add(&c, sg * mid, even | s);
            cases_add(&c, sg * below, (uint16_t)(lo | s));
            cases_add(&c, sg * above, hi | s);
        }
    }
    cases_check(&c, GW_FLOAT16, "tie");
}

Test(conversions, float_to_bf16_every_tie, .timeout = 60)
{
    cases_t c = cases_new(0x7f80u * 6);
    for (uint32_t lo = 0; lo < 0x7f80u; lo++) {
        uint16_t hi = (uint16_t)(lo + 1);
        /* Adjacent bf16 patterns are adjacent floats with 16 zero bits; the
         * midpoint is the pattern with only bit 15 set below them. */
        float mid = bitsf((lo << 16) | 0x8000u);
        uint16_t even = (lo & 1) ? hi : (uint16_t)lo;
        float below = nextafterf(mid, 0.0f);
        float above = nextafterf(mid, INFINITY);
        for (int neg = 0; neg < 2; neg++) {
            uint16_t s = neg ? 0x8000u : 0;
            float sg = neg ? -1.0f : 1.0f;
            cases_add(&c, sg * mid, even | s);
            cases_add(&c, sg * below, (uint16_t)(lo | s));
            cases_add(&c, sg * above, hi | s);
        }
    }
    cases_check(&c, GW_BFLOAT16, "tie");
}

/* Reference rounding in double for arbitrary float bit patterns. */
static void check_float_to_half(const char *way, float x, uint16_t got)
{
    if (isnan(x)) {
        uint16_t want =
            (uint16_t)(((fbits(x) >> 16) & 0x8000u) | 0x7e00u | ((fbits(x) >> 13) & 0x3ffu));
        cr_assert_eq(got, want, "%s: NaN 0x%08x -> 0x%04x, want 0x%04x", way, fbits(x), got, want);
        return;
    }
    double r = round_ref(fabs((double)x), 11, -24);
    uint16_t want_sign = signbit(x) ? 0x8000u : 0;
    cr_assert_eq(got & 0x8000u, want_sign, "%s: %a -> 0x%04x has the wrong sign", way, (double)x,
                 got);
    if (r >= 65536.0) {
        cr_assert_eq(got & 0x7fffu, 0x7c00u, "%s: %a -> 0x%04x, want infinity", way, (double)x,
                     got);
        return;
    }
    double back = fabs(half_ref_value(got));
    cr_assert(back == r, "%s: %a -> 0x%04x (%a), want %a", way, (double)x, got, back, r);
}

static void check_float_to_bf16(const char *way, float x, uint16_t got)
{
    if (isnan(x)) {
        cr_assert_eq(got, (uint16_t)((fbits(x) >> 16) | 0x0040u), "%s: NaN 0x%08x -> 0x%04x", way,
                     fbits(x), got);
        return;
    }
    double r = round_ref(fabs((double)x), 8, -133);
    uint32_t want = r >= 0x1p128 ? 0x7f800000u : fbits((float)r);
    want |= signbit(x) ? 0x80000000u : 0;
    cr_assert_eq(want & 0xffffu, 0u);
    cr_assert_eq(got, (uint16_t)(want >> 16), "%s: 0x%08x -> 0x%04x, want 0x%04x", way, fbits(x),
                 got, (unsigned)(want >> 16));
}

Test(conversions, float_to_half_and_bf16_random_and_edges, .timeout = 120)
{
    static const float edges[] = {0.0f,          -0.0f,     65504.0f,  65519.99609375f,
                                  65520.0f,      65536.0f,  1e10f,     INFINITY,
                                  -INFINITY,     0x1p-24f,  0x1p-25f,  0x1.000002p-25f,
                                  0x1.8p-25f,    0x1p-26f,  0x1p-14f,  0x1.ff8p-15f,
                                  0x1.ffcp-15f,  0x1p-149f, 0x1p-126f, 0x1.fffffep-127f,
                                  3.4028235e38f, 1.0f,      2049.0f,   2051.0f,
                                  -2051.0f};
    const size_t nedges = sizeof edges / sizeof edges[0], n = nedges + ((size_t)1 << 21);
    float *x = malloc(n * sizeof(float));
    uint16_t *h = malloc(n * 2), *bf = malloc(n * 2);
    cr_assert(x && h && bf);
    for (size_t i = 0; i < nedges; i++)
        x[i] = edges[i];
    uint64_t s = 0x9e3779b97f4a7c15ULL;
    for (size_t i = nedges; i < n; i++) {
        uint32_t u = (uint32_t)rng_next(&s);
        /* Half the samples land near the half range where rounding happens. */
        if (i & 1)
            u = (u & 0x807fffffu) | ((uint32_t)(100 + (u >> 23) % 45) << 23);
        x[i] = bitsf(u);
    }
    FOR_EACH_WAY(w)
    {
        narrow_way(w, GW_FLOAT16, h, x, n);
        narrow_way(w, GW_BFLOAT16, bf, x, n);
        for (size_t i = 0; i < n; i++) {
            check_float_to_half(way_name(w), x[i], h[i]);
            check_float_to_bf16(way_name(w), x[i], bf[i]);
        }
        cr_assert_eq(narrow1(w, GW_FLOAT16, 65504.0f), 0x7bffu);
        cr_assert_eq(narrow1(w, GW_FLOAT16, 65519.99609375f), 0x7bffu);
        cr_assert_eq(narrow1(w, GW_FLOAT16, 65520.0f), 0x7c00u);
        cr_assert_eq(narrow1(w, GW_FLOAT16, -65520.0f), 0xfc00u);
        cr_assert_eq(narrow1(w, GW_FLOAT16, 0x1p-25f), 0x0000u);
        cr_assert_eq(narrow1(w, GW_FLOAT16, 0x1.000002p-25f), 0x0001u);
        cr_assert_eq(narrow1(w, GW_FLOAT16, 0x1.8p-24f), 0x0002u);   /* 1.5 ulp: tie to even 2 */
        cr_assert_eq(narrow1(w, GW_FLOAT16, 0x1.ffcp-15f), 0x0400u); /* up to the least normal */
        cr_assert_eq(narrow1(w, GW_FLOAT16, 2049.0f), 0x6800u);      /* tie, down to even 2048 */
        cr_assert_eq(narrow1(w, GW_FLOAT16, 2051.0f), 0x6802u);      /* tie, up to even 2052 */
    }
    free(x);
    free(h);
    free(bf);
}

Test(conversions, nan_stays_quiet_nan_with_sign, .timeout = 10)
{
    FOR_EACH_WAY(w)
    {
        /* A NaN whose payload sits only in the low bits must not round to inf. */
        cr_assert_eq(narrow1(w, GW_BFLOAT16, bitsf(0x7f800001u)), 0x7fc0u, "%s", way_name(w));
        cr_assert_eq(narrow1(w, GW_BFLOAT16, bitsf(0xff800001u)), 0xffc0u, "%s", way_name(w));
        /* no carry into the sign */
        cr_assert_eq(narrow1(w, GW_BFLOAT16, bitsf(0x7fffffffu)), 0x7fffu, "%s", way_name(w));
        cr_assert_eq(narrow1(w, GW_BFLOAT16, bitsf(0xffffffffu)), 0xffffu, "%s", way_name(w));
        cr_assert_eq(narrow1(w, GW_BFLOAT16, bitsf(0x7fc00000u)), 0x7fc0u, "%s", way_name(w));
        cr_assert_eq(narrow1(w, GW_FLOAT16, bitsf(0x7f800001u)), 0x7e00u, "%s", way_name(w));
        cr_assert_eq(narrow1(w, GW_FLOAT16, bitsf(0xff800001u)), 0xfe00u, "%s", way_name(w));
        /* payload kept, quieted */
        cr_assert_eq(narrow1(w, GW_FLOAT16, bitsf(0x7fa00000u)), 0x7f00u, "%s", way_name(w));
        cr_assert_eq(narrow1(w, GW_FLOAT16, INFINITY), 0x7c00u, "%s", way_name(w));
        cr_assert_eq(narrow1(w, GW_BFLOAT16, -INFINITY), 0xff80u, "%s", way_name(w));
        cr_assert_eq(fbits(widen1(w, GW_FLOAT16, 0x7c01u)), 0x7fc02000u, "%s", way_name(w));
        cr_assert_eq(fbits(widen1(w, GW_FLOAT16, 0xfc00u)), 0xff800000u, "%s", way_name(w));
        cr_assert_eq(fbits(widen1(w, GW_BFLOAT16, 0xff81u)), 0xffc10000u, "%s", way_name(w));
    }
}

/* ---- bulk conversions: lengths, offsets, bounds ------------------------------ */

/*
 * Every count from 0 to 40 at every offset from 0 to 16 elements (the bulk
 * ways work in groups of eight and handle the rest apart), against the
 * scalar functions, and nothing written past the end.
 */
Test(conversions, bulk_any_count_and_offset, .timeout = 60)
{
    enum { MAXN = 40, MAXOFF = 16, LEN = MAXN + MAXOFF + 1 };
    uint64_t s = 99;
    for (gw_dtype_t dt = GW_FLOAT16; dt <= GW_BFLOAT16; dt++) {
        for (int w = 0; w < GW_HALF_ISA_COUNT; w++) {
            if (!way_runs(w))
                continue;
            for (size_t off = 0; off <= MAXOFF; off++) {
                for (size_t n = 0; n <= MAXN; n++) {
                    uint16_t h[LEN], h2[LEN];
                    float f[LEN];
                    for (size_t i = 0; i < LEN; i++) {
                        h[i] = (uint16_t)rng_next(&s);
                        h2[i] = 0xa5a5u;
                        f[i] = -7.0f;
                    }
                    widen_way(w, dt, f + off, h + off, n);
                    narrow_way(w, dt, h2 + off, f + off, n);
                    for (size_t i = 0; i < LEN; i++) {
                        int inside = i >= off && i < off + n;
                        float fw =
                            dt == GW_FLOAT16 ? gw__half_to_float(h[i]) : gw__bf16_to_float(h[i]);
                        uint16_t hw =
                            dt == GW_FLOAT16 ? gw__float_to_half(fw) : gw__float_to_bf16(fw);
                        cr_assert_eq(fbits(f[i]), inside ? fbits(fw) : fbits(-7.0f),
                                     "%s %s widen off %zu n %zu: element %zu", gw_dtype_name(dt),
                                     way_name(w), off, n, i);
                        cr_assert_eq(h2[i], inside ? hw : 0xa5a5u,
                                     "%s %s narrow off %zu n %zu: element %zu", gw_dtype_name(dt),
                                     way_name(w), off, n, i);
                    }
                }
            }
        }
    }
}
