/*
 * test_half_conversions.c - the float16 and bfloat16 conversions that the
 * reduction kernels (tested in test_reduce_kernels.c) and the codecs use.
 *
 * The conversions are checked exhaustively against references written
 * independently of the implementation (ldexp/nearbyint in double), including
 * every rounding tie between two adjacent half/bfloat16 values, then on
 * edge cases and two million random float bit patterns.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

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

/* ---- conversions: exhaustive ---------------------------------------------- */

Test(conversions, half_to_float_exhaustive_and_round_trip, .timeout = 60)
{
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = gw__half_to_float(h);
        uint16_t back = gw__float_to_half(f);
        if (half_is_nan(h)) {
            cr_assert(isnan(f), "half 0x%04x should widen to NaN", h);
            cr_assert(fbits(f) & 0x00400000u, "half 0x%04x should widen to a quiet NaN", h);
            cr_assert_eq(!!signbit(f), !!(h & 0x8000), "half 0x%04x NaN lost its sign", h);
            cr_assert_eq(back, h | 0x0200u, "half NaN 0x%04x came back as 0x%04x", h, back);
            continue;
        }
        double want = half_ref_value(h);
        cr_assert(fbits(f) == fbits((float)want), "half 0x%04x -> %a, want %a", h, (double)f,
                  want);
        cr_assert_eq(back, h, "half 0x%04x -> %a -> 0x%04x", h, (double)f, back);
    }
}

Test(conversions, bf16_to_float_exhaustive_and_round_trip, .timeout = 60)
{
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = gw__bf16_to_float(h);
        uint16_t back = gw__float_to_bf16(f);
        if (bf16_is_nan(h)) {
            cr_assert(isnan(f), "bf16 0x%04x should widen to NaN", h);
            cr_assert_eq(fbits(f), ((uint32_t)h << 16) | 0x00400000u,
                         "bf16 NaN 0x%04x widened to 0x%08x", h, fbits(f));
            cr_assert_eq(back, h | 0x0040u, "bf16 NaN 0x%04x came back as 0x%04x", h, back);
            continue;
        }
        cr_assert_eq(fbits(f), (uint32_t)h << 16, "bf16 0x%04x widened to 0x%08x", h, fbits(f));
        cr_assert_eq(back, h, "bf16 0x%04x -> 0x%08x -> 0x%04x", h, fbits(f), back);
    }
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
            uint16_t got = gw__float_to_half(sg * mid);
            cr_assert_eq(got, even | s, "tie %a -> 0x%04x, want 0x%04x", (double)(sg * mid),
                         got, even | s);
            got = gw__float_to_half(sg * below);
            cr_assert_eq(got, lo | s, "%a -> 0x%04x, want 0x%04x", (double)(sg * below), got,
                         lo | s);
            got = gw__float_to_half(sg * above);
            cr_assert_eq(got, hi | s, "%a -> 0x%04x, want 0x%04x", (double)(sg * above), got,
                         hi | s);
        }
    }
}

Test(conversions, float_to_bf16_every_tie, .timeout = 60)
{
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
            uint16_t got = gw__float_to_bf16(sg * mid);
            cr_assert_eq(got, even | s, "tie 0x%08x -> 0x%04x, want 0x%04x", fbits(sg * mid),
                         got, even | s);
            cr_assert_eq(gw__float_to_bf16(sg * below), lo | s, "below tie 0x%08x",
                         fbits(sg * below));
            cr_assert_eq(gw__float_to_bf16(sg * above), hi | s, "above tie 0x%08x",
                         fbits(sg * above));
        }
    }
}

/* Reference rounding in double for arbitrary float bit patterns. */
static void check_float_to_half(float x)
{
    uint16_t got = gw__float_to_half(x);
    if (isnan(x)) {
        uint16_t want = (uint16_t)(((fbits(x) >> 16) & 0x8000u) | 0x7e00u |
                                   ((fbits(x) >> 13) & 0x3ffu));
        cr_assert_eq(got, want, "NaN 0x%08x -> 0x%04x, want 0x%04x", fbits(x), got, want);
        return;
    }
    double r = round_ref(fabs((double)x), 11, -24);
    uint16_t want_sign = signbit(x) ? 0x8000u : 0;
    cr_assert_eq(got & 0x8000u, want_sign, "%a -> 0x%04x has the wrong sign", (double)x, got);
    if (r >= 65536.0) {
        cr_assert_eq(got & 0x7fffu, 0x7c00u, "%a -> 0x%04x, want infinity", (double)x, got);
        return;
    }
    double back = fabs(half_ref_value(got));
    cr_assert(back == r, "%a -> 0x%04x (%a), want %a", (double)x, got, back, r);
}

static void check_float_to_bf16(float x)
{
    uint16_t got = gw__float_to_bf16(x);
    if (isnan(x)) {
        cr_assert_eq(got, (uint16_t)((fbits(x) >> 16) | 0x0040u), "NaN 0x%08x -> 0x%04x",
                     fbits(x), got);
        return;
    }
    double r = round_ref(fabs((double)x), 8, -133);
    uint32_t want = r >= 0x1p128 ? 0x7f800000u : fbits((float)r);
    want |= signbit(x) ? 0x80000000u : 0;
    cr_assert_eq(want & 0xffffu, 0u);
    cr_assert_eq(got, (uint16_t)(want >> 16), "0x%08x -> 0x%04x, want 0x%04x", fbits(x), got,
                 (unsigned)(want >> 16));
}

Test(conversions, float_to_half_and_bf16_random_and_edges, .timeout = 120)
{
    static const float edges[] = {
        0.0f, -0.0f, 65504.0f, 65519.99609375f, 65520.0f, 65536.0f, 1e10f, INFINITY,
        -INFINITY, 0x1p-24f, 0x1p-25f, 0x1.000002p-25f, 0x1.8p-25f, 0x1p-26f, 0x1p-14f,
        0x1.ff8p-15f, 0x1.ffcp-15f, 0x1p-149f, 0x1p-126f, 0x1.fffffep-127f, 3.4028235e38f,
        1.0f, 2049.0f, 2051.0f, -2051.0f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        check_float_to_half(edges[i]);
        check_float_to_bf16(edges[i]);
    }
    cr_assert_eq(gw__float_to_half(65504.0f), 0x7bffu);
    cr_assert_eq(gw__float_to_half(65519.99609375f), 0x7bffu);
    cr_assert_eq(gw__float_to_half(65520.0f), 0x7c00u);
    cr_assert_eq(gw__float_to_half(-65520.0f), 0xfc00u);
    cr_assert_eq(gw__float_to_half(0x1p-25f), 0x0000u);
    cr_assert_eq(gw__float_to_half(0x1.000002p-25f), 0x0001u);
    cr_assert_eq(gw__float_to_half(0x1.8p-24f), 0x0002u); /* 1.5 ulp: tie to even 2 */
    cr_assert_eq(gw__float_to_half(0x1.ffcp-15f), 0x0400u); /* rounds up to the least normal */
    cr_assert_eq(gw__float_to_half(2049.0f), 0x6800u);      /* tie, down to even 2048 */
    cr_assert_eq(gw__float_to_half(2051.0f), 0x6802u);      /* tie, up to even 2052 */

    uint64_t s = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < 1 << 21; i++) {
        uint32_t u = (uint32_t)rng_next(&s);
        /* Half the samples land near the half range where rounding happens. */
        if (i & 1)
            u = (u & 0x807fffffu) | ((uint32_t)(100 + (u >> 23) % 45) << 23);
        check_float_to_half(bitsf(u));
        check_float_to_bf16(bitsf(u));
    }
}

Test(conversions, nan_stays_quiet_nan_with_sign, .timeout = 10)
{
    /* A NaN whose payload sits only in the low bits must not round to inf. */
    cr_assert_eq(gw__float_to_bf16(bitsf(0x7f800001u)), 0x7fc0u);
    cr_assert_eq(gw__float_to_bf16(bitsf(0xff800001u)), 0xffc0u);
    cr_assert_eq(gw__float_to_bf16(bitsf(0x7fffffffu)), 0x7fffu); /* no carry into the sign */
    cr_assert_eq(gw__float_to_bf16(bitsf(0xffffffffu)), 0xffffu);
    cr_assert_eq(gw__float_to_bf16(bitsf(0x7fc00000u)), 0x7fc0u);
    cr_assert_eq(gw__float_to_half(bitsf(0x7f800001u)), 0x7e00u);
    cr_assert_eq(gw__float_to_half(bitsf(0xff800001u)), 0xfe00u);
    cr_assert_eq(gw__float_to_half(bitsf(0x7fa00000u)), 0x7f00u); /* payload kept, quieted */
    cr_assert_eq(gw__float_to_half(INFINITY), 0x7c00u);
    cr_assert_eq(gw__float_to_bf16(-INFINITY), 0xff80u);
    cr_assert_eq(fbits(gw__half_to_float(0x7c01u)), 0x7fc02000u);
    cr_assert_eq(fbits(gw__half_to_float(0xfc00u)), 0xff800000u);
    cr_assert_eq(fbits(gw__bf16_to_float(0xff81u)), 0xffc10000u);
}
