/*
 * test_reduce_kernels.c - the dtype x op reduction loops and the final
 * division of GW_AVG (the half-precision conversions they build on are
 * tested in test_half_conversions.c).
 *
 * The kernels are checked element by element against a plain scalar
 * reference on random inputs (with NaN, infinities and signed zeros mixed
 * in), for odd counts that exercise vector bodies and scalar tails, and
 * under every aliasing the contract allows. float16 and bfloat16 run through
 * gw__reduce and through every instruction set of reduce_half.h that this
 * CPU has (portable, AVX2), which must agree bit for bit; every half and
 * bfloat16 pattern is also reduced with a set of special operands on each.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/reduce_half.h"
#include "collectives/reduce_kernels.h"
#include "kernel_test_util.h"

/* ---- kernels: scalar reference -------------------------------------------- */

static const gw_dtype_t all_dtypes[] = {GW_FLOAT32,     GW_FLOAT64,     GW_FLOAT16, GW_BFLOAT16,
                                        GW_INT8,        GW_UINT8,       GW_INT32,   GW_INT64,
                                        GW_FLOAT8_E4M3, GW_FLOAT8_E5M2, GW_UINT32,  GW_UINT64};
static const gw_op_t all_ops[] = {GW_SUM,  GW_PROD, GW_MIN,  GW_MAX,       GW_AVG,
                                  GW_BAND, GW_BOR,  GW_BXOR, GW_PREMUL_SUM};

static int is_bitwise(gw_op_t op) { return op == GW_BAND || op == GW_BOR || op == GW_BXOR; }

static int is_float_dtype(gw_dtype_t dt)
{
    return dt == GW_FLOAT32 || dt == GW_FLOAT64 || dt == GW_FLOAT16 || dt == GW_BFLOAT16 ||
           dt == GW_FLOAT8_E4M3 || dt == GW_FLOAT8_E5M2;
}

/* IEEE 754-2019 minimum/maximum written the obvious way. */
#define REF_MINMAX(T)              \
    static T ref_min_##T(T a, T b) \
    {                              \
        if (isnan(a))              \
            return a;              \
        if (isnan(b))              \
            return b;              \
        if (a != b)                \
            return a < b ? a : b;  \
        return signbit(a) ? a : b; \
    }                              \
    static T ref_max_##T(T a, T b) \
    {                              \
        if (isnan(a))              \
            return a;              \
        if (isnan(b))              \
            return b;              \
        if (a != b)                \
            return a > b ? a : b;  \
        return signbit(a) ? b : a; \
    }
REF_MINMAX(float)
REF_MINMAX(double)

static float ref_float(gw_op_t op, float a, float b)
{
    switch (op) {
    case GW_SUM:
    case GW_AVG:
    case GW_PREMUL_SUM:
        return a + b;
    case GW_PROD:
        return a * b;
    case GW_MIN:
        return ref_min_float(a, b);
    default:
        return ref_max_float(a, b);
    }
}

static double ref_double(gw_op_t op, double a, double b)
{
    switch (op) {
    case GW_SUM:
    case GW_AVG:
    case GW_PREMUL_SUM:
        return a + b;
    case GW_PROD:
        return a * b;
    case GW_MIN:
        return ref_min_double(a, b);
    default:
        return ref_max_double(a, b);
    }
}

/* Integers: the compiler's overflow builtins give the wrapped result. */
#define REF_INT(T)                                  \
    static T ref_##T(gw_op_t op, T a, T b)          \
    {                                               \
        T r;                                        \
        switch (op) {                               \
        case GW_SUM:                                \
        case GW_AVG:                                \
        case GW_PREMUL_SUM:                         \
            (void)__builtin_add_overflow(a, b, &r); \
            return r;                               \
        case GW_BAND:                               \
            return (T)(a & b);                      \
        case GW_BOR:                                \
            return (T)(a | b);                      \
        case GW_BXOR:                               \
            return (T)(a ^ b);                      \
        case GW_PROD:                               \
            (void)__builtin_mul_overflow(a, b, &r); \
            return r;                               \
        case GW_MIN:                                \
            return a < b ? a : b;                   \
        default:                                    \
            return a > b ? a : b;                   \
        }                                           \
    }
REF_INT(int8_t)
REF_INT(uint8_t)
REF_INT(int32_t)
REF_INT(int64_t)
REF_INT(uint32_t)
REF_INT(uint64_t)

/* Half-precision sum and product: a NaN in a gives a's NaN, else IEEE (a
 * NaN in b gives b's). The float operation alone may return either NaN. */
static float ref_half_op(gw_op_t op, float x, float y)
{
    float r = ref_float(op, x, y);
    if ((op == GW_SUM || op == GW_PROD || op == GW_AVG || op == GW_PREMUL_SUM) && isnan(x))
        return x;
    return r;
}

/* Reference of element i, as raw bytes in *out (size of dtype). */
static void ref_elem(gw_dtype_t dt, gw_op_t op, const void *a, const void *b, size_t i, void *out)
{
    switch (dt) {
    case GW_FLOAT32: {
        float r = ref_float(op, ((const float *)a)[i], ((const float *)b)[i]);
        memcpy(out, &r, sizeof r);
        break;
    }
    case GW_FLOAT64: {
        double r = ref_double(op, ((const double *)a)[i], ((const double *)b)[i]);
        memcpy(out, &r, sizeof r);
        break;
    }
    case GW_FLOAT16: {
        float x = gw__half_to_float(((const uint16_t *)a)[i]);
        float y = gw__half_to_float(((const uint16_t *)b)[i]);
        uint16_t r = gw__float_to_half(ref_half_op(op, x, y));
        memcpy(out, &r, sizeof r);
        break;
    }
    case GW_BFLOAT16: {
        float x = gw__bf16_to_float(((const uint16_t *)a)[i]);
        float y = gw__bf16_to_float(((const uint16_t *)b)[i]);
        uint16_t r = gw__float_to_bf16(ref_half_op(op, x, y));
        memcpy(out, &r, sizeof r);
        break;
    }
#define REF_INT_CASE(DT, T)                                      \
    case DT: {                                                   \
        T r = ref_##T(op, ((const T *)a)[i], ((const T *)b)[i]); \
        memcpy(out, &r, sizeof r);                               \
        break;                                                   \
    }
        REF_INT_CASE(GW_INT8, int8_t)
        REF_INT_CASE(GW_UINT8, uint8_t)
        REF_INT_CASE(GW_INT32, int32_t)
        REF_INT_CASE(GW_INT64, int64_t)
        REF_INT_CASE(GW_UINT32, uint32_t)
        REF_INT_CASE(GW_UINT64, uint64_t)
#undef REF_INT_CASE
    case GW_FLOAT8_E4M3: {
        float x = gw__e4m3_to_float(((const uint8_t *)a)[i]);
        float y = gw__e4m3_to_float(((const uint8_t *)b)[i]);
        uint8_t r = gw__float_to_e4m3(ref_half_op(op, x, y));
        memcpy(out, &r, sizeof r);
        break;
    }
    case GW_FLOAT8_E5M2: {
        float x = gw__e5m2_to_float(((const uint8_t *)a)[i]);
        float y = gw__e5m2_to_float(((const uint8_t *)b)[i]);
        uint8_t r = gw__float_to_e5m2(ref_half_op(op, x, y));
        memcpy(out, &r, sizeof r);
        break;
    }
    default:
        cr_assert_fail("unknown dtype %d", (int)dt);
    }
}

/* Whether the raw element is a NaN (always false for integers). */
static int elem_is_nan(gw_dtype_t dt, const void *p)
{
    uint32_t u32;
    uint64_t u64;
    uint16_t u16;
    switch (dt) {
    case GW_FLOAT32:
        memcpy(&u32, p, 4);
        return isnan(bitsf(u32));
    case GW_FLOAT64:
        memcpy(&u64, p, 8);
        return isnan(bitsd(u64));
    case GW_FLOAT16:
        memcpy(&u16, p, 2);
        return half_is_nan(u16);
    case GW_BFLOAT16:
        memcpy(&u16, p, 2);
        return bf16_is_nan(u16);
    case GW_FLOAT8_E4M3:
        return (*(const uint8_t *)p & 0x7fu) == 0x7fu;
    case GW_FLOAT8_E5M2:
        return (*(const uint8_t *)p & 0x7fu) > 0x7cu;
    default:
        return 0;
    }
}

/* Random elements. Floats mix raw bit patterns (every class, NaN payloads
 * included), small "nice" numbers (so equal pairs and exact arithmetic come
 * up) and explicit specials. */
static void fill_random(gw_dtype_t dt, void *buf, size_t n, uint64_t *s)
{
    size_t es = gw_dtype_size(dt);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng_next(s);
        unsigned kind = (unsigned)(r >> 60); /* 0..15 */
        uint64_t v = rng_next(s);
        switch (dt) {
        case GW_FLOAT32: {
            static const uint32_t sp[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                          0x7fc00000u, 0xffc00001u, 0x7f800123u, 0x00000001u};
            float f = kind < 8    ? bitsf((uint32_t)v)
                      : kind < 13 ? (float)((int)(v % 17) - 8) * 0.5f
                                  : bitsf(sp[v % 8]);
            memcpy((char *)buf + i * es, &f, es);
            break;
        }
        case GW_FLOAT64: {
            static const uint64_t sp[] = {0,
                                          0x8000000000000000ULL,
                                          0x7ff0000000000000ULL,
                                          0xfff0000000000000ULL,
                                          0x7ff8000000000000ULL,
                                          0xfff8000000000abcULL,
                                          0x7ff0000000000001ULL,
                                          1};
            double d = kind < 8    ? bitsd(v)
                       : kind < 13 ? (double)((int)(v % 17) - 8) * 0.25
                                   : bitsd(sp[v % 8]);
            memcpy((char *)buf + i * es, &d, es);
            break;
        }
        case GW_FLOAT16:
        case GW_BFLOAT16: {
            uint16_t h = (uint16_t)v;
            if (kind >= 10) { /* nice numbers: small multiples of 1/4 */
                float f = (float)((int)(v % 33) - 16) * 0.25f;
                h = dt == GW_FLOAT16 ? gw__float_to_half(f) : gw__float_to_bf16(f);
            }
            memcpy((char *)buf + i * es, &h, es);
            break;
        }
        case GW_FLOAT8_E4M3:
        case GW_FLOAT8_E5M2: {
            uint8_t c = (uint8_t)v;
            if (kind >= 10) { /* nice numbers: small multiples of 1/4 */
                float f = (float)((int)(v % 33) - 16) * 0.25f;
                c = dt == GW_FLOAT8_E4M3 ? gw__float_to_e4m3(f) : gw__float_to_e5m2(f);
            }
            memcpy((char *)buf + i * es, &c, es);
            break;
        }
        default:
            /* Integers: full range, plus small values for exact products. */
            if (kind >= 12)
                v = (uint64_t)((int64_t)(v % 7) - 3);
            memcpy((char *)buf + i * es, &v, es); /* little-endian low bytes */
            break;
        }
    }
}

enum alias_mode { ALIAS_NONE, ALIAS_OUT_A, ALIAS_OUT_B, ALIAS_ALL, ALIAS_COUNT };
static const char *const alias_names[] = {"out-of-place", "out==a", "out==b", "out==a==b"};

/* ISA_AUTO: through gw__reduce; else through gw__reduce_half_isa. */
#define ISA_AUTO (-1)

static const char *isa_name(int isa)
{
    return isa == ISA_AUTO ? "auto" : gw__half_isa_name((gw_half_isa_t)isa);
}

static int is_half(gw_dtype_t dt) { return dt == GW_FLOAT16 || dt == GW_BFLOAT16; }

static void check_kernel(gw_dtype_t dt, gw_op_t op, size_t n, enum alias_mode mode, uint64_t seed,
                         int isa)
{
    size_t es = gw_dtype_size(dt);
    size_t bytes = n * es + 1; /* never malloc(0); one guard byte */
    unsigned char *a = malloc(bytes), *b = malloc(bytes), *out = malloc(bytes);
    unsigned char *a0 = malloc(bytes), *b0 = malloc(bytes), *want = malloc(bytes);
    cr_assert(a && b && out && a0 && b0 && want);
    uint64_t s = seed;
    fill_random(dt, a, n, &s);
    fill_random(dt, b, n, &s);
    if (mode == ALIAS_ALL)
        memcpy(b, a, n * es);
    memcpy(a0, a, n * es);
    memcpy(b0, b, n * es);
    for (size_t i = 0; i < n; i++)
        ref_elem(dt, op, a, b, i, want + i * es);
    memset(out, 0xa5, bytes);

    void *o = out;
    const void *pa = a, *pb = b;
    if (mode == ALIAS_OUT_A) {
        o = a;
    } else if (mode == ALIAS_OUT_B) {
        o = b;
    } else if (mode == ALIAS_ALL) {
        o = a;
        pb = a;
    }
    if (isa == ISA_AUTO) {
        gw__reduce(o, pa, pb, n, dt, op);
    } else {
        gw_status_t st = gw__reduce_half_isa(o, pa, pb, n, dt, op, (gw_half_isa_t)isa);
        cr_assert_eq(st, GW_OK, "%s on %s: %s", gw_dtype_name(dt), isa_name(isa),
                     gw_status_name(st));
    }

    const unsigned char *got = o;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *g = got + i * es, *w = want + i * es;
        /* A float32/float64 sum or product with NaN must be NaN; which NaN
         * bits two NaN operands give is the hardware's choice. min/max and
         * the half-precision kernels pick bits exactly. */
        int loose = (dt == GW_FLOAT32 || dt == GW_FLOAT64) &&
                    (op == GW_SUM || op == GW_PROD || op == GW_AVG || op == GW_PREMUL_SUM) &&
                    elem_is_nan(dt, w);
        int ok = loose ? elem_is_nan(dt, g) : memcmp(g, w, es) == 0;
        if (!ok) {
            uint64_t gv = 0, wv = 0, av = 0, bv = 0;
            memcpy(&gv, g, es);
            memcpy(&wv, w, es);
            memcpy(&av, a0 + i * es, es);
            memcpy(&bv, b0 + i * es, es);
            cr_assert_fail("%s %s n=%zu %s (%s): element %zu: a=0x%llx b=0x%llx: got "
                           "0x%llx, want 0x%llx",
                           gw_dtype_name(dt), gw_op_name(op), n, alias_names[mode], isa_name(isa),
                           i, (unsigned long long)av, (unsigned long long)bv,
                           (unsigned long long)gv, (unsigned long long)wv);
        }
    }
    /* Operands that are not the output must be left alone. */
    if (mode == ALIAS_NONE || mode == ALIAS_OUT_B)
        cr_assert(memcmp(a, a0, n * es) == 0, "a was modified (%s)", alias_names[mode]);
    if (mode == ALIAS_NONE || mode == ALIAS_OUT_A)
        cr_assert(memcmp(b, b0, n * es) == 0, "b was modified (%s)", alias_names[mode]);
    if (mode == ALIAS_NONE)
        cr_assert_eq(out[n * es], 0xa5, "wrote past the end");
    free(a);
    free(b);
    free(out);
    free(a0);
    free(b0);
    free(want);
}

/* Counts below, at and across the 16-element steps of the AVX2 kernels. */
Test(kernels, every_dtype_op_count_and_aliasing, .timeout = 120)
{
    static const size_t counts[] = {0, 1, 7, 16, 33, 1023, 4099};
    uint64_t seed = 1;
    for (size_t d = 0; d < sizeof all_dtypes / sizeof all_dtypes[0]; d++) {
        gw_dtype_t dt = all_dtypes[d];
        int last_isa = is_half(dt) ? GW_HALF_ISA_COUNT - 1 : ISA_AUTO;
        for (int isa = ISA_AUTO; isa <= last_isa; isa++) {
            if (isa != ISA_AUTO && !gw__half_isa_supported((gw_half_isa_t)isa))
                continue;
            for (size_t o = 0; o < sizeof all_ops / sizeof all_ops[0]; o++)
                for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
                    if (!(is_bitwise(all_ops[o]) && is_float_dtype(dt)) &&
                        (isa == ISA_AUTO || !is_bitwise(all_ops[o])))
                        for (int m = 0; m < ALIAS_COUNT; m++)
                            check_kernel(dt, all_ops[o], counts[c], (enum alias_mode)m,
                                         seed++ * 0x9e3779b97f4a7c15ULL, isa);
        }
    }
}

Test(kernels, count_zero_touches_nothing, .timeout = 10)
{
    for (size_t d = 0; d < sizeof all_dtypes / sizeof all_dtypes[0]; d++) {
        for (size_t o = 0; o < sizeof all_ops / sizeof all_ops[0]; o++)
            gw__reduce(NULL, NULL, NULL, 0, all_dtypes[d], all_ops[o]);
        gw__reduce_finish_avg(NULL, 0, all_dtypes[d], 4);
    }
}

/* ---- kernels: named cases ------------------------------------------------- */

static float red_f32(gw_op_t op, float a, float b)
{
    float r;
    gw__reduce(&r, &a, &b, 1, GW_FLOAT32, op);
    return r;
}

static double red_f64(gw_op_t op, double a, double b)
{
    double r;
    gw__reduce(&r, &a, &b, 1, GW_FLOAT64, op);
    return r;
}

/* One half-precision element through gw__reduce, checked to be the same on
 * every instruction set this CPU has. */
static uint16_t red_u16(gw_dtype_t dt, gw_op_t op, uint16_t a, uint16_t b)
{
    uint16_t r;
    gw__reduce(&r, &a, &b, 1, dt, op);
    for (int isa = 0; isa < GW_HALF_ISA_COUNT; isa++) {
        uint16_t ri = 0;
        gw_status_t st = gw__reduce_half_isa(&ri, &a, &b, 1, dt, op, (gw_half_isa_t)isa);
        if (st == GW_ERR_UNSUPPORTED)
            continue;
        cr_assert_eq(st, GW_OK);
        cr_assert_eq(ri, r, "%s %s(0x%04x, 0x%04x): %s gives 0x%04x, gw__reduce 0x%04x",
                     gw_dtype_name(dt), gw_op_name(op), a, b, gw__half_isa_name(isa), ri, r);
    }
    return r;
}

Test(kernels, signed_zero_min_max, .timeout = 10)
{
    cr_assert_eq(fbits(red_f32(GW_MIN, -0.0f, 0.0f)), 0x80000000u);
    cr_assert_eq(fbits(red_f32(GW_MIN, 0.0f, -0.0f)), 0x80000000u);
    cr_assert_eq(fbits(red_f32(GW_MAX, -0.0f, 0.0f)), 0u);
    cr_assert_eq(fbits(red_f32(GW_MAX, 0.0f, -0.0f)), 0u);
    cr_assert_eq(dbits(red_f64(GW_MIN, 0.0, -0.0)), 0x8000000000000000ULL);
    cr_assert_eq(dbits(red_f64(GW_MIN, -0.0, 0.0)), 0x8000000000000000ULL);
    cr_assert_eq(dbits(red_f64(GW_MAX, -0.0, 0.0)), 0u);
    cr_assert_eq(dbits(red_f64(GW_MAX, 0.0, -0.0)), 0u);
    for (int dt = GW_FLOAT16; dt <= GW_BFLOAT16; dt++) {
        cr_assert_eq(red_u16(dt, GW_MIN, 0x0000u, 0x8000u), 0x8000u);
        cr_assert_eq(red_u16(dt, GW_MIN, 0x8000u, 0x0000u), 0x8000u);
        cr_assert_eq(red_u16(dt, GW_MAX, 0x0000u, 0x8000u), 0x0000u);
        cr_assert_eq(red_u16(dt, GW_MAX, 0x8000u, 0x0000u), 0x0000u);
    }
}

Test(kernels, nan_and_inf_propagation, .timeout = 10)
{
    float qa = bitsf(0x7fc00001u), qb = bitsf(0xffc00002u);
    for (int op = GW_SUM; op <= GW_MAX; op++) {
        cr_assert(isnan(red_f32(op, qa, 1.0f)), "%s(NaN, 1)", gw_op_name(op));
        cr_assert(isnan(red_f32(op, 1.0f, qb)), "%s(1, NaN)", gw_op_name(op));
        cr_assert(isnan(red_f32(op, INFINITY, qb)), "%s(inf, NaN)", gw_op_name(op));
        cr_assert(isnan(red_f64(op, NAN, -INFINITY)), "%s(NaN, -inf)", gw_op_name(op));
        cr_assert(isnan(red_f64(op, 2.0, NAN)), "%s(2, NaN)", gw_op_name(op));
    }
    /* min/max give a's NaN if a is NaN, else b's: bit-exact. */
    cr_assert_eq(fbits(red_f32(GW_MIN, qa, qb)), 0x7fc00001u);
    cr_assert_eq(fbits(red_f32(GW_MAX, qb, qa)), 0xffc00002u);
    cr_assert_eq(fbits(red_f32(GW_MIN, -INFINITY, qb)), 0xffc00002u);
    cr_assert_eq(fbits(red_f32(GW_MAX, INFINITY, qb)), 0xffc00002u);
    cr_assert_eq(dbits(red_f64(GW_MAX, bitsd(0x7ff8000000000005ULL), INFINITY)),
                 0x7ff8000000000005ULL);
    /* Infinities. */
    cr_assert(isnan(red_f32(GW_SUM, INFINITY, -INFINITY)));
    cr_assert(isnan(red_f32(GW_PROD, INFINITY, 0.0f)));
    cr_assert_eq(red_f32(GW_SUM, INFINITY, 1e30f), INFINITY);
    cr_assert_eq(red_f32(GW_SUM, 3e38f, 3e38f), INFINITY);
    cr_assert_eq(red_f64(GW_PROD, -INFINITY, 2.0), -INFINITY);
    cr_assert_eq(red_f32(GW_MIN, -INFINITY, -1e38f), -INFINITY);
    cr_assert_eq(red_f32(GW_MAX, INFINITY, 1e38f), INFINITY);
    cr_assert_eq(red_f64(GW_MIN, INFINITY, 5.0), 5.0);

    /* float16: 0x7d00 is a signalling NaN with payload; it comes out quiet. */
    cr_assert_eq(red_u16(GW_FLOAT16, GW_MIN, 0x7d00u, 0x3c00u), 0x7f00u);
    cr_assert_eq(red_u16(GW_FLOAT16, GW_MAX, 0x3c00u, 0xfe01u), 0xfe01u);
    cr_assert_eq(red_u16(GW_FLOAT16, GW_MAX, 0x7e00u, 0xfe01u), 0x7e00u);
    cr_assert(half_is_nan(red_u16(GW_FLOAT16, GW_SUM, 0x7e00u, 0x3c00u)));
    cr_assert(half_is_nan(red_u16(GW_FLOAT16, GW_SUM, 0x7c00u, 0xfc00u)));
    cr_assert(half_is_nan(red_u16(GW_FLOAT16, GW_PROD, 0x7c00u, 0x0000u)));
    cr_assert_eq(red_u16(GW_FLOAT16, GW_SUM, 0x7bffu, 0x7bffu), 0x7c00u); /* overflow */
    cr_assert_eq(red_u16(GW_FLOAT16, GW_MIN, 0xfc00u, 0xfbffu), 0xfc00u);
    /* bfloat16. */
    cr_assert_eq(red_u16(GW_BFLOAT16, GW_MIN, 0x7f81u, 0x3f80u), 0x7fc1u);
    cr_assert_eq(red_u16(GW_BFLOAT16, GW_MAX, 0x3f80u, 0xffc1u), 0xffc1u);
    cr_assert(bf16_is_nan(red_u16(GW_BFLOAT16, GW_SUM, 0x7f80u, 0xff80u)));
    cr_assert(bf16_is_nan(red_u16(GW_BFLOAT16, GW_PROD, 0xffc0u, 0x3f80u)));
    cr_assert_eq(red_u16(GW_BFLOAT16, GW_SUM, 0x7f7fu, 0x7f7fu), 0x7f80u);
    cr_assert_eq(red_u16(GW_BFLOAT16, GW_MAX, 0x7f80u, 0x7f7fu), 0x7f80u);
    /* Half-precision sum and product: a's NaN (quieted) wins over b's. */
    cr_assert_eq(red_u16(GW_FLOAT16, GW_SUM, 0x7c01u, 0xff08u), 0x7e01u);
    cr_assert_eq(red_u16(GW_FLOAT16, GW_PROD, 0xfe01u, 0x7d00u), 0xfe01u);
    cr_assert_eq(red_u16(GW_FLOAT16, GW_SUM, 0x3c00u, 0x7d00u), 0x7f00u);
    cr_assert_eq(red_u16(GW_BFLOAT16, GW_SUM, 0x7f81u, 0xffc1u), 0x7fc1u);
    cr_assert_eq(red_u16(GW_BFLOAT16, GW_PROD, 0xff82u, 0x7fc0u), 0xffc2u);
    cr_assert_eq(red_u16(GW_BFLOAT16, GW_SUM, 0x3f80u, 0x7f81u), 0x7fc1u);
}

Test(kernels, float16_sum_rounds_to_nearest_even, .timeout = 10)
{
    /* 2048 + 1 = 2049 is a tie between 2048 and 2050: even is 2048. */
    cr_assert_eq(red_u16(GW_FLOAT16, GW_SUM, 0x6800u, 0x3c00u), 0x6800u);
    /* 2050 + 1 = 2051: tie between 2050 and 2052, even is 2052. */
    cr_assert_eq(red_u16(GW_FLOAT16, GW_SUM, 0x6801u, 0x3c00u), 0x6802u);
    /* 65504 + 8 stays below the 65520 overflow threshold. */
    cr_assert_eq(red_u16(GW_FLOAT16, GW_SUM, 0x7bffu, 0x4800u), 0x7bffu);
    /* Subnormal + subnormal is exact: 2^-24 + 2^-24 = 2^-23. */
    cr_assert_eq(red_u16(GW_FLOAT16, GW_SUM, 0x0001u, 0x0001u), 0x0002u);
    /* bfloat16: 256 + 1 = 257 is a tie between 256 and 258: 256. */
    cr_assert_eq(red_u16(GW_BFLOAT16, GW_SUM, 0x4380u, 0x3f80u), 0x4380u);
    cr_assert_eq(red_u16(GW_BFLOAT16, GW_SUM, 0x4381u, 0x3f80u), 0x4382u);
}

/* ---- half precision: every pattern, every instruction set ---------------- */

/* Operands that every float16 and bfloat16 pattern is reduced with, on
 * either side: zeros, subnormals, extremes, infinities, quiet and
 * signalling NaNs with payloads and signs, ones and rounding ties of both
 * formats; then random patterns. */
static const uint16_t half_operands[] = {
    0x0000u, 0x8000u, 0x0001u, 0x8001u, 0x03ffu, 0x0400u, 0x83ffu, 0x3c00u, 0xbc00u,
    0x3c01u, 0x6800u, 0x7bffu, 0xfbffu, 0x7c00u, 0xfc00u, 0x7c01u, 0x7d00u, 0x7e00u,
    0xfe01u, 0x7fffu, 0xffffu, 0x0080u, 0x807fu, 0x3f80u, 0xbf80u, 0x4380u, 0x7f7fu,
    0xff7fu, 0x7f80u, 0xff80u, 0x7f81u, 0x7fc0u, 0xffc1u, 0x7fbfu};
#define NRANDOM_OPERANDS 16

Test(kernels, half_every_pattern_on_every_isa, .timeout = 120)
{
    const size_t n = 65536, nfixed = sizeof half_operands / sizeof half_operands[0];
    uint16_t *all = malloc(n * 2), *other = malloc(n * 2), *want = malloc(n * 2);
    uint16_t *got = malloc(n * 2);
    cr_assert(all && other && want && got);
    for (size_t i = 0; i < n; i++)
        all[i] = (uint16_t)i;
    for (gw_dtype_t dt = GW_FLOAT16; dt <= GW_BFLOAT16; dt++) {
        uint64_t s = 7;
        for (gw_op_t op = GW_SUM; op <= GW_MAX; op++) {
            for (size_t k = 0; k < nfixed + NRANDOM_OPERANDS; k++) {
                uint16_t v = k < nfixed ? half_operands[k] : (uint16_t)rng_next(&s);
                for (size_t i = 0; i < n; i++)
                    other[i] = v;
                for (int swap = 0; swap < 2; swap++) {
                    const uint16_t *a = swap ? other : all, *b = swap ? all : other;
                    for (size_t i = 0; i < n; i++)
                        ref_elem(dt, op, a, b, i, &want[i]);
                    for (int isa = 0; isa < GW_HALF_ISA_COUNT; isa++) {
                        if (!gw__half_isa_supported((gw_half_isa_t)isa))
                            continue;
                        memset(got, 0, n * 2);
                        cr_assert_eq(gw__reduce_half_isa(got, a, b, n, dt, op, (gw_half_isa_t)isa),
                                     GW_OK);
                        for (size_t i = 0; i < n; i++)
                            if (got[i] != want[i])
                                cr_assert_fail("%s %s on %s: a=0x%04x b=0x%04x: got 0x%04x, "
                                               "want 0x%04x",
                                               gw_dtype_name(dt), gw_op_name(op),
                                               gw__half_isa_name((gw_half_isa_t)isa), a[i], b[i],
                                               got[i], want[i]);
                    }
                }
            }
        }
    }
    free(all);
    free(other);
    free(want);
    free(got);
}

Test(kernels, half_isa_choice_and_errors, .timeout = 10)
{
    gw_half_isa_t best = gw__half_isa_best();
    cr_assert(gw__half_isa_supported(GW_HALF_ISA_PORTABLE));
    cr_assert(gw__half_isa_supported(best));
    cr_assert(!gw__half_isa_supported(GW_HALF_ISA_COUNT));
    cr_assert_str_eq(gw__half_isa_name(GW_HALF_ISA_PORTABLE), "portable");
    cr_assert_str_eq(gw__half_isa_name(GW_HALF_ISA_AVX2), "avx2");
    cr_assert_str_eq(gw__half_isa_name(GW_HALF_ISA_COUNT), "unknown");
#if GW__HALF_HAVE_AVX2
    /* gw__reduce must take the fast kernels wherever the CPU has them. */
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    cr_assert_eq(best, avx2 ? GW_HALF_ISA_AVX2 : GW_HALF_ISA_PORTABLE);
    if (!avx2)
        cr_log_warn("this CPU lacks AVX2 or F16C: the AVX2 kernels are not tested");
#endif
    uint16_t a[3] = {0x3c00u, 0x4000u, 0x4200u}, b[3] = {0x3c00u, 0x3c00u, 0x3c00u};
    uint16_t out[3] = {0x5555u, 0x5555u, 0x5555u};
    float f[3] = {1.0f, 2.0f, 3.0f};
    cr_assert_eq(gw__reduce_half_isa(out, a, b, 3, GW_FLOAT32, GW_SUM, GW_HALF_ISA_PORTABLE),
                 GW_ERR_INVALID_ARG);
    cr_assert_eq(gw__reduce_half_isa(out, a, b, 3, GW_FLOAT16, GW_OP_COUNT, GW_HALF_ISA_PORTABLE),
                 GW_ERR_INVALID_ARG);
    cr_assert_eq(gw__reduce_half_isa(out, a, b, 3, GW_BFLOAT16, GW_SUM, GW_HALF_ISA_COUNT),
                 GW_ERR_UNSUPPORTED);
    cr_assert_eq(gw__half_narrow_isa(out, f, 3, GW_INT8, GW_HALF_ISA_PORTABLE), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw__half_narrow_isa(out, f, 3, GW_FLOAT16, GW_HALF_ISA_COUNT), GW_ERR_UNSUPPORTED);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(out[i], 0x5555u, "out[%d] was written by a failed call", i);
    cr_assert_eq(gw__half_widen_isa(f, a, 3, GW_FLOAT64, GW_HALF_ISA_PORTABLE), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw__half_widen_isa(f, a, 3, GW_FLOAT16, GW_HALF_ISA_COUNT), GW_ERR_UNSUPPORTED);
    cr_assert(f[0] == 1.0f && f[1] == 2.0f && f[2] == 3.0f, "f was written by a failed call");
    /* GW_AVG reduces as GW_SUM; count 0 is a no-op, even with NULL buffers. */
    cr_assert_eq(gw__reduce_half_isa(out, a, b, 3, GW_FLOAT16, GW_AVG, best), GW_OK);
    cr_assert(out[0] == 0x4000u && out[1] == 0x4200u && out[2] == 0x4400u);
    cr_assert_eq(gw__reduce_half_isa(NULL, NULL, NULL, 0, GW_BFLOAT16, GW_MAX, best), GW_OK);
}

Test(kernels, integer_wraparound, .timeout = 10)
{
    int8_t a8 = 127, b8 = 1, r8;
    gw__reduce(&r8, &a8, &b8, 1, GW_INT8, GW_SUM);
    cr_assert_eq(r8, -128);
    a8 = -128;
    b8 = -1;
    gw__reduce(&r8, &a8, &b8, 1, GW_INT8, GW_SUM);
    cr_assert_eq(r8, 127);
    a8 = -128;
    gw__reduce(&r8, &a8, &b8, 1, GW_INT8, GW_PROD);
    cr_assert_eq(r8, -128);
    uint8_t u1 = 255, u2 = 1, ur;
    gw__reduce(&ur, &u1, &u2, 1, GW_UINT8, GW_SUM);
    cr_assert_eq(ur, 0);
    u2 = 255;
    gw__reduce(&ur, &u1, &u2, 1, GW_UINT8, GW_PROD);
    cr_assert_eq(ur, 1);
    int32_t a32 = 65536, r32;
    gw__reduce(&r32, &a32, &a32, 1, GW_INT32, GW_PROD);
    cr_assert_eq(r32, 0);
    a32 = INT32_MAX;
    int32_t b32 = 1;
    gw__reduce(&r32, &a32, &b32, 1, GW_INT32, GW_SUM);
    cr_assert_eq(r32, INT32_MIN);
    int64_t a64 = INT64_MAX, b64 = 1, r64;
    gw__reduce(&r64, &a64, &b64, 1, GW_INT64, GW_SUM);
    cr_assert_eq(r64, INT64_MIN);
    a64 = INT64_MIN;
    b64 = -1;
    gw__reduce(&r64, &a64, &b64, 1, GW_INT64, GW_PROD);
    cr_assert_eq(r64, INT64_MIN);
    a64 = INT64_MIN;
    gw__reduce(&r64, &a64, &b64, 1, GW_INT64, GW_SUM);
    cr_assert_eq(r64, INT64_MAX);
}

/* ---- average -------------------------------------------------------------- */

Test(average, integers_truncate_toward_zero, .timeout = 10)
{
    int32_t v32[] = {-7, 7, -1, 1, -6, INT32_MIN, INT32_MAX};
    int32_t w32[] = {-3, 3, 0, 0, -3, INT32_MIN / 2, INT32_MAX / 2};
    gw__reduce_finish_avg(v32, 7, GW_INT32, 2);
    for (int i = 0; i < 7; i++)
        cr_assert_eq(v32[i], w32[i], "int32[%d] = %d, want %d", i, v32[i], w32[i]);
    int8_t v8[] = {-5, 5, -128, 127, -2};
    int8_t w8[] = {-1, 1, -42, 42, 0};
    gw__reduce_finish_avg(v8, 5, GW_INT8, 3);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(v8[i], w8[i], "int8[%d] = %d, want %d", i, v8[i], w8[i]);
    uint8_t u8[] = {255, 4};
    gw__reduce_finish_avg(u8, 2, GW_UINT8, 4);
    cr_assert_eq(u8[0], 63);
    cr_assert_eq(u8[1], 1);
    int64_t v64[] = {-9, INT64_MIN, INT64_MAX};
    gw__reduce_finish_avg(v64, 3, GW_INT64, 4);
    cr_assert_eq(v64[0], -2);
    cr_assert_eq(v64[1], INT64_MIN / 4);
    cr_assert_eq(v64[2], INT64_MAX / 4);
}

Test(average, floats_divide_and_round, .timeout = 10)
{
    float f[] = {1.0f, -3.0f, NAN, INFINITY, -0.0f};
    gw__reduce_finish_avg(f, 5, GW_FLOAT32, 3);
    cr_assert_eq(fbits(f[0]), fbits(1.0f / 3.0f));
    cr_assert_eq(f[1], -1.0f);
    cr_assert(isnan(f[2]));
    cr_assert_eq(f[3], INFINITY);
    cr_assert_eq(fbits(f[4]), 0x80000000u);
    double d[] = {1.0, -10.0};
    gw__reduce_finish_avg(d, 2, GW_FLOAT64, 4);
    cr_assert_eq(d[0], 0.25);
    cr_assert_eq(d[1], -2.5);
    /* float16: 1/3 rounded to nearest even in half is 0x3555. */
    uint16_t h[] = {0x3c00u, 0x0001u, 0x0003u, 0x7e00u};
    gw__reduce_finish_avg(h, 4, GW_FLOAT16, 3);
    cr_assert_eq(h[0], 0x3555u);
    cr_assert_eq(h[1], 0x0000u); /* 2^-24 / 3 rounds to zero */
    cr_assert_eq(h[2], 0x0001u);
    cr_assert(half_is_nan(h[3]));
    uint16_t bf[] = {0x3f80u, 0x4040u}; /* 1, 3 */
    gw__reduce_finish_avg(bf, 2, GW_BFLOAT16, 3);
    cr_assert_eq(bf[0], gw__float_to_bf16(1.0f / 3.0f));
    cr_assert_eq(bf[1], 0x3f80u);
}

/* finish_avg against the reference for every dtype and a few rank counts. */
Test(average, every_dtype_matches_reference, .timeout = 60)
{
    static const int nranks[] = {1, 2, 3, 7, 64};
    uint64_t s = 42;
    for (size_t d = 0; d < sizeof all_dtypes / sizeof all_dtypes[0]; d++) {
        gw_dtype_t dt = all_dtypes[d];
        size_t es = gw_dtype_size(dt), n = 1027;
        for (size_t k = 0; k < sizeof nranks / sizeof nranks[0]; k++) {
            int nr = nranks[k];
            unsigned char *buf = malloc(n * es), *orig = malloc(n * es);
            cr_assert(buf && orig);
            fill_random(dt, buf, n, &s);
            memcpy(orig, buf, n * es);
            gw__reduce_finish_avg(buf, n, dt, nr);
            for (size_t i = 0; i < n; i++) {
                unsigned char want[8];
                const void *p = orig + i * es;
                switch (dt) {
#define AVG_CASE(DT, T, EXPR)       \
    case DT: {                      \
        T x;                        \
        memcpy(&x, p, sizeof x);    \
        T r = EXPR;                 \
        memcpy(want, &r, sizeof r); \
        break;                      \
    }
                    AVG_CASE(GW_FLOAT32, float, x / (float)nr)
                    AVG_CASE(GW_FLOAT64, double, x / nr)
                    AVG_CASE(GW_FLOAT16, uint16_t,
                             gw__float_to_half(gw__half_to_float(x) / (float)nr))
                    AVG_CASE(GW_BFLOAT16, uint16_t,
                             gw__float_to_bf16(gw__bf16_to_float(x) / (float)nr))
                    AVG_CASE(GW_INT8, int8_t, (int8_t)(x / nr))
                    AVG_CASE(GW_UINT8, uint8_t, (uint8_t)(x / nr))
                    AVG_CASE(GW_INT32, int32_t, x / nr)
                    AVG_CASE(GW_INT64, int64_t, x / nr)
                    AVG_CASE(GW_UINT32, uint32_t, x / (uint32_t)nr)
                    AVG_CASE(GW_UINT64, uint64_t, x / (uint64_t)nr)
                    AVG_CASE(GW_FLOAT8_E4M3, uint8_t,
                             gw__float_to_e4m3(gw__e4m3_to_float(x) / (float)nr))
                    AVG_CASE(GW_FLOAT8_E5M2, uint8_t,
                             gw__float_to_e5m2(gw__e5m2_to_float(x) / (float)nr))
#undef AVG_CASE
                default:
                    cr_assert_fail("unknown dtype");
                }
                int ok = elem_is_nan(dt, want) ? elem_is_nan(dt, buf + i * es)
                                               : memcmp(want, buf + i * es, es) == 0;
                cr_assert(ok, "%s avg over %d ranks, element %zu differs", gw_dtype_name(dt), nr,
                          i);
            }
            free(buf);
            free(orig);
        }
    }
}

/* The combinations that do not exist: bitwise ops on float dtypes leave
 * the output untouched (the API layer refuses them before; see
 * test_dtype_ops.c), and gw__reduce_supported says so. */
Test(kernels, bitwise_on_floats_is_not_a_kernel, .timeout = 10)
{
    for (size_t d = 0; d < sizeof all_dtypes / sizeof all_dtypes[0]; d++)
        for (size_t o = 0; o < sizeof all_ops / sizeof all_ops[0]; o++) {
            gw_dtype_t dt = all_dtypes[d];
            gw_op_t op = all_ops[o];
            int want = !(is_bitwise(op) && is_float_dtype(dt));
            cr_assert_eq(gw__reduce_supported(dt, op), want, "%s %s", gw_dtype_name(dt),
                         gw_op_name(op));
            if (want)
                continue;
            unsigned char a[16], b[16], out[16];
            memset(a, 0x3c, sizeof a);
            memset(b, 0x41, sizeof b);
            memset(out, 0xa5, sizeof out);
            gw__reduce(out, a, b, 16 / gw_dtype_size(dt), dt, op);
            for (size_t i = 0; i < sizeof out; i++)
                cr_assert_eq(out[i], 0xa5, "%s %s wrote", gw_dtype_name(dt), gw_op_name(op));
        }
}

/* Bitwise ops on known values, and unsigned 32/64-bit sum wrapping. */
Test(kernels, bitwise_and_unsigned_known_values, .timeout = 10)
{
    uint32_t a32[] = {0xf0f0f0f0u, 0xffffffffu}, b32[] = {0x0ff00ff0u, 2u}, r32[2];
    gw__reduce(r32, a32, b32, 2, GW_UINT32, GW_BAND);
    cr_assert_eq(r32[0], 0x00f000f0u);
    gw__reduce(r32, a32, b32, 2, GW_UINT32, GW_BOR);
    cr_assert_eq(r32[0], 0xfff0fff0u);
    gw__reduce(r32, a32, b32, 2, GW_UINT32, GW_BXOR);
    cr_assert_eq(r32[0], 0xff00ff00u);
    gw__reduce(r32, a32, b32, 2, GW_UINT32, GW_SUM);
    cr_assert_eq(r32[1], 1u);
    gw__reduce(r32, a32, b32, 2, GW_UINT32, GW_MAX);
    cr_assert_eq(r32[1], 0xffffffffu); /* unsigned compare, not signed */
    uint64_t a64 = 0xffffffffffffffffULL, b64 = 3, r64;
    gw__reduce(&r64, &a64, &b64, 1, GW_UINT64, GW_MIN);
    cr_assert_eq(r64, 3u);
    int8_t ai = -1, bi = 0x5a, ri;
    gw__reduce(&ri, &ai, &bi, 1, GW_INT8, GW_BXOR);
    cr_assert_eq((uint8_t)ri, 0xa5u);
    int64_t al = INT64_MIN, bl = 1, rl;
    gw__reduce(&rl, &al, &bl, 1, GW_INT64, GW_BOR);
    cr_assert_eq(rl, INT64_MIN + 1);
}

/* premul_sum's first step: x * factor rounded once, the factor rounded to
 * float first (double for float64); integers untouched. */
Test(kernels, premul_scale, .timeout = 10)
{
    float f[] = {3.0f, -0.5f, NAN};
    gw__reduce_scale(f, f, 3, GW_FLOAT32, 0.25);
    cr_assert_eq(f[0], 0.75f);
    cr_assert_eq(f[1], -0.125f);
    cr_assert(isnan(f[2]));
    double d = 1.0;
    gw__reduce_scale(&d, &d, 1, GW_FLOAT64, 0.1);
    cr_assert_eq(d, 0.1);       /* a float factor would give 0.100000001490116 */
    uint16_t h = 0x3c00u, hout; /* 1.0 in float16 */
    gw__reduce_scale(&hout, &h, 1, GW_FLOAT16, 1.0 / 3.0);
    cr_assert_eq(hout, gw__float_to_half((float)(1.0 / 3.0)));
    cr_assert_eq(h, 0x3c00u, "the input is not modified out of place");
    uint8_t e = gw__float_to_e4m3(448.0f), eout;
    gw__reduce_scale(&eout, &e, 1, GW_FLOAT8_E4M3, 2.0);
    cr_assert_eq(eout & 0x7fu, 0x7fu, "448 * 2 overflows E4M3 to NaN, not 448");
    uint8_t g = gw__float_to_e5m2(3.0f), gout;
    gw__reduce_scale(&gout, &g, 1, GW_FLOAT8_E5M2, 0.5);
    cr_assert_eq(gw__e5m2_to_float(gout), 1.5f);
    int32_t i = 7;
    gw__reduce_scale(&i, &i, 1, GW_INT32, 2.0);
    cr_assert_eq(i, 7);
}
