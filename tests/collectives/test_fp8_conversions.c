/*
 * test_fp8_conversions.c - float <-> OCP FP8 (E4M3, E5M2) against a
 * reference written here from the format's definition, independently of
 * fp8_convert.h's bit tricks.
 *
 * The reference decodes a code with ldexp from its sign, exponent and
 * mantissa fields, and rounds a float by searching the sorted table of
 * every finite non-negative value for the two neighbours, comparing with
 * their exact midpoint (in double, where every midpoint is exact), ties to
 * the even code. Overflow is modelled as one more code past the largest
 * finite one (E4M3: 480, which is NaN; E5M2: 65536, infinity), so the same
 * rule decides that 464 rounds to 448 but anything above it to NaN, and
 * that 61440 rounds to E5M2's infinity: what torch's float8_e4m3fn and
 * float8_e5m2 conversions do.
 *
 * Checked: all 256 codes of each format widen to the reference value and
 * come back to themselves (a NaN to its sign's canonical NaN); every
 * midpoint between neighbouring codes, and the floats one ulp either side,
 * round as the reference says; so do a million floats spread over every
 * exponent and the specials.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

#include "collectives/reduce_kernels.h"
#include "kernel_test_util.h"

typedef struct fmt {
    const char *name;
    int ebits, mbits, bias;
    int ieee;         /* exponent all ones is inf/NaN (E5M2) */
    uint8_t max_code; /* the largest finite positive code */
    uint8_t overflow; /* what a too-large magnitude gives */
    float (*widen)(uint8_t);
    uint8_t (*round)(float);
} fmt_t;

static const fmt_t e4m3 = {"e4m3", 4, 3, 7, 0, 0x7e, 0x7f, gw__e4m3_to_float, gw__float_to_e4m3};
static const fmt_t e5m2 = {"e5m2", 5, 2, 15, 1, 0x7b, 0x7c, gw__e5m2_to_float, gw__float_to_e5m2};

static int ref_is_nan(const fmt_t *f, uint8_t c)
{
    int e = (c >> f->mbits) & ((1 << f->ebits) - 1), m = c & ((1 << f->mbits) - 1);
    if (f->ieee)
        return e == (1 << f->ebits) - 1 && m != 0;
    return e == (1 << f->ebits) - 1 && m == (1 << f->mbits) - 1;
}

/* The magnitude the fields of a code would have as an ordinary number
 * (for the first special code: the value that overflow rounds to). */
static double ref_magnitude(const fmt_t *f, uint8_t c)
{
    int e = (c >> f->mbits) & ((1 << f->ebits) - 1), m = c & ((1 << f->mbits) - 1);
    if (e == 0)
        return ldexp(m, 1 - f->bias - f->mbits);
    return ldexp((1 << f->mbits) + m, e - f->bias - f->mbits);
}

/* The value of a code, from the fields (NaN for NaN codes). */
static double ref_decode(const fmt_t *f, uint8_t c)
{
    int e = (c >> f->mbits) & ((1 << f->ebits) - 1);
    double v;
    if (ref_is_nan(f, c))
        return NAN;
    if (f->ieee && e == (1 << f->ebits) - 1)
        v = INFINITY;
    else
        v = ref_magnitude(f, c & 0x7f);
    return (c >> 7) ? -v : v;
}

/* Round x to the nearest code, ties to the even code, by search. */
static uint8_t ref_round(const fmt_t *f, float x)
{
    uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x))
        return 0x7f | sign;
    double a = fabs((double)x);
    /* values[k] for codes 0..max_code, then the overflow "code". */
    double values[130];
    int n = f->max_code + 1;
    for (int k = 0; k < n; k++)
        values[k] = ref_decode(f, (uint8_t)k);
    values[n] = ref_magnitude(f, (uint8_t)n); /* 480 (E4M3), 65536 (E5M2) */
    if (a >= values[n])
        return f->overflow | sign;
    int k = 0;
    while (k + 1 <= n && values[k + 1] <= a)
        k++;
    if (values[k] == a)
        return (uint8_t)k | sign;
    double mid = (values[k] + values[k + 1]) / 2;
    int up = a > mid || (a == mid && (k & 1));
    int code = k + up;
    return (uint8_t)(code == n ? f->overflow : code) | sign;
}

static void check_round(const fmt_t *f, float x)
{
    uint8_t got = f->round(x), want = ref_round(f, x);
    cr_assert_eq(got, want, "%s: %a (0x%08x) rounds to 0x%02x, want 0x%02x", f->name, (double)x,
                 fbits(x), got, want);
}

static void every_code_round_trips(const fmt_t *f)
{
    for (int c = 0; c < 256; c++) {
        float w = f->widen((uint8_t)c);
        double want = ref_decode(f, (uint8_t)c);
        if (ref_is_nan(f, (uint8_t)c)) {
            cr_assert(isnan(w), "%s 0x%02x widens to %g, not NaN", f->name, c, (double)w);
            cr_assert_eq(f->round(w), (uint8_t)(0x7f | (c & 0x80)),
                         "%s NaN 0x%02x comes back as 0x%02x", f->name, c, f->round(w));
            continue;
        }
        cr_assert((double)w == want && !signbit(w) == !signbit(want),
                  "%s 0x%02x widens to %a, want %a", f->name, c, (double)w, want);
        cr_assert_eq(f->round(w), c, "%s 0x%02x -> %a -> 0x%02x", f->name, c, (double)w,
                     f->round(w));
    }
}

Test(fp8, e4m3_all_codes_round_trip) { every_code_round_trips(&e4m3); }

Test(fp8, e5m2_all_codes_round_trip) { every_code_round_trips(&e5m2); }

/* Midpoints between neighbouring codes are where rounding goes wrong: each
 * one, and the floats just below and above it. */
static void midpoints(const fmt_t *f)
{
    for (int k = 0; k <= f->max_code; k++) {
        double lo = ref_decode(f, (uint8_t)k);
        double hi = ref_magnitude(f, (uint8_t)(k + 1));
        float mid = (float)((lo + hi) / 2); /* exact: few significant bits */
        cr_assert_eq((double)mid, (lo + hi) / 2);
        float probes[] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY), (float)lo, (float)hi};
        for (size_t p = 0; p < sizeof probes / sizeof probes[0]; p++) {
            check_round(f, probes[p]);
            check_round(f, -probes[p]);
        }
    }
}

Test(fp8, e4m3_midpoints_tie_to_even) { midpoints(&e4m3); }

Test(fp8, e5m2_midpoints_tie_to_even) { midpoints(&e5m2); }

static void spread(const fmt_t *f)
{
    /* Every exponent of float, many mantissas (a stride prime to 2^32),
     * plus random patterns. */
    for (uint64_t u = 0; u <= 0xffffffffu; u += 4093)
        check_round(f, bitsf((uint32_t)u));
    uint64_t s = 7;
    for (int i = 0; i < 200000; i++)
        check_round(f, bitsf((uint32_t)rng_next(&s)));
    /* Around the format's range, densely. */
    for (int i = 0; i < 200000; i++) {
        uint64_t r = rng_next(&s);
        float x = ldexpf(1.0f + (float)(r & 0xffffff) / 16777216.0f, (int)(r >> 40) % 40 - 24);
        check_round(f, (r >> 63) ? -x : x);
    }
}

Test(fp8, e4m3_rounding_matches_reference, .timeout = 120) { spread(&e4m3); }

Test(fp8, e5m2_rounding_matches_reference, .timeout = 120) { spread(&e5m2); }

/* The rules spelled out: non-saturating overflow, specials, subnormals. */
Test(fp8, known_values)
{
    cr_assert_eq(gw__float_to_e4m3(448.0f), 0x7e);
    cr_assert_eq(gw__float_to_e4m3(464.0f), 0x7e, "the tie goes to even 448");
    cr_assert_eq(gw__float_to_e4m3(nextafterf(464.0f, 1000.0f)), 0x7f, "past 464: NaN");
    cr_assert_eq(gw__float_to_e4m3(480.0f), 0x7f);
    cr_assert_eq(gw__float_to_e4m3(INFINITY), 0x7f, "E4M3 has no infinity");
    cr_assert_eq(gw__float_to_e4m3(-INFINITY), 0xff);
    cr_assert_eq(gw__float_to_e4m3(-0.0f), 0x80);
    cr_assert_eq(gw__float_to_e4m3(ldexpf(1.0f, -9)), 0x01, "least subnormal");
    cr_assert_eq(gw__float_to_e4m3(ldexpf(1.0f, -10)), 0x00, "half of it: tie to even 0");
    cr_assert_eq(gw__float_to_e4m3(ldexpf(3.0f, -10)), 0x02, "1.5 steps: tie to even 2");
    cr_assert_eq(gw__float_to_e4m3(1.0f), 0x38);
    cr_assert_eq(gw__float_to_e5m2(57344.0f), 0x7b);
    cr_assert_eq(gw__float_to_e5m2(61440.0f), 0x7c, "the tie goes to even: infinity");
    cr_assert_eq(gw__float_to_e5m2(nextafterf(61440.0f, 0.0f)), 0x7b);
    cr_assert_eq(gw__float_to_e5m2(-INFINITY), 0xfc);
    cr_assert_eq(gw__float_to_e5m2(NAN), 0x7f);
    cr_assert_eq(gw__float_to_e5m2(ldexpf(1.0f, -16)), 0x01);
    cr_assert_eq(gw__float_to_e5m2(1.0f), 0x3c);
    cr_assert(isnan(gw__e4m3_to_float(0xff)) && signbit(gw__e4m3_to_float(0xff)));
    cr_assert_eq(gw__e4m3_to_float(0x7e), 448.0f);
    cr_assert_eq(gw__e5m2_to_float(0x7c), INFINITY);
}
