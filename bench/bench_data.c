/*
 * bench_data.c - input patterns for the collectives' checks, and their
 * exact results.
 *
 * The check must hold for every dtype, every op and every algorithm, and
 * algorithms reduce in different orders. So the inputs are integers small
 * enough that every partial result, in any order, is exact in the dtype:
 *
 *  - sum, avg, min, max: rank r holds m(i) + s_r * k_p(i), where m(i) and
 *    k_p(i) <= K <= m(i) are non-negative and p = r / 2 numbers a pair of
 *    ranks. s_r is +1 for even r and -1 for odd r (0 for the last rank when
 *    the rank count is odd), so the perturbations cancel pairwise: the sum is
 *    exactly n * m(i), and avg is exactly m(i) for integers and floats
 *    alike. Every value is at most B = (largest exact integer) / n, so no
 *    partial sum can leave the exact range. min and max are m(i) -+ the
 *    largest k_p(i) over the pairs.
 *  - prod: values are 1 or 2 (times -1 for signed types), with at most as
 *    many 2s per index as the dtype's powers of two allow, so the product is
 *    an exact power of two whatever the order.
 *  - premul_sum (float dtypes): as sum, every rank scaling by
 *    GW_BENCH_PREMUL_FACTOR (2), within half the exact range: 2 * n * m(i).
 *  - band, bor, bxor (integer dtypes): rank r sets bit (r + i) % 7 (bits
 *    that fit every integer dtype), so and is that bit for one rank and 0
 *    for more, or is the bits of every rank present, xor the bits set by
 *    an odd number of ranks.
 *
 * Inputs depend on the rank and the index, so results sent to the wrong
 * place or reduced over the wrong ranks show up as wrong elements. The
 * expected values come from closed forms, so the check costs O(count) and
 * not O(count * ranks).
 */
#include <math.h>
#include <string.h>

#include "bench.h"

struct pattern {
    int prod;
    int sign;      /* prod: the dtype is signed, so use -1 too */
    int64_t p2;    /* prod: rank r contributes a 2 at index i when (i + r) % p2 == 0 */
    int64_t k;     /* perturbation bound K */
    int64_t width; /* m(i) runs over [K, K + width) */
};

/* The largest integer M such that every integer in [-M, M] is exact. */
static int64_t exact_limit(gw_dtype_t dt)
{
    switch (dt) {
    case GW_FLOAT32:
        return (int64_t)1 << 24;
    case GW_FLOAT64:
        return (int64_t)1 << 53;
    case GW_FLOAT16:
        return 2048;
    case GW_BFLOAT16:
        return 256;
    case GW_INT8:
        return 127;
    case GW_UINT8:
        return 255;
    case GW_INT32:
    case GW_UINT32:
        return INT32_MAX;
    case GW_FLOAT8_E4M3:
        return 16; /* 4 significant bits */
    case GW_FLOAT8_E5M2:
        return 8; /* 3 significant bits */
    default:
        return (int64_t)1 << 62; /* int64; also keeps our own arithmetic in range */
    }
}

static int is_bitwise(gw_op_t op) { return op == GW_BAND || op == GW_BOR || op == GW_BXOR; }

static int is_float_dtype(gw_dtype_t dt)
{
    return dt == GW_FLOAT32 || dt == GW_FLOAT64 || dt == GW_FLOAT16 || dt == GW_BFLOAT16 ||
           dt == GW_FLOAT8_E4M3 || dt == GW_FLOAT8_E5M2;
}

int gw_bench_combo_exists(gw_dtype_t dtype, gw_op_t op)
{
    if (is_bitwise(op))
        return !is_float_dtype(dtype);
    return op != GW_PREMUL_SUM || is_float_dtype(dtype);
}

#define GW__BENCH_BITS 7

/* The largest e such that +-2^e is exact in the dtype (and in int64). */
static int prod_cap(gw_dtype_t dt)
{
    switch (dt) {
    case GW_FLOAT16:
        return 15;
    case GW_INT8:
        return 6;
    case GW_UINT8:
        return 7;
    case GW_INT32:
    case GW_UINT32:
        return 30;
    case GW_FLOAT8_E4M3:
        return 8; /* 256; 512 would be past 448 */
    default:
        return 60;
    }
}

static struct pattern pattern_for(gw_dtype_t dt, gw_op_t op, int n)
{
    struct pattern p;
    memset(&p, 0, sizeof(p));
    if (op == GW_PROD) {
        int cap = prod_cap(dt);
        p.prod = 1;
        p.sign = dt != GW_UINT8 && dt != GW_UINT32 && dt != GW_UINT64;
        p.p2 = (n + cap - 1) / cap;
        if (p.p2 < 2)
            p.p2 = 2;
        return p;
    }
    int64_t b = exact_limit(dt) / n / (op == GW_PREMUL_SUM ? 2 : 1);
    p.k = b / 2 < 3 ? b / 2 : 3;
    p.width = b - 2 * p.k + 1;
    return p;
}

static int64_t m_of(const struct pattern *p, size_t i)
{
    return p->k + (int64_t)(((uint64_t)i * 7 + 3) % (uint64_t)p->width);
}

/* How many r in [0, n) satisfy r % period == r0 (0 <= r0 < period). */
static int64_t count_congruent(int n, int64_t r0, int64_t period)
{
    return r0 < n ? 1 + (n - 1 - r0) / period : 0;
}

int64_t gw_bench_input(gw_dtype_t dtype, gw_op_t op, int rank, int nranks, size_t i)
{
    struct pattern p = pattern_for(dtype, op, nranks);
    if (p.prod) {
        int64_t v = ((uint64_t)i + (uint64_t)rank) % (uint64_t)p.p2 == 0 ? 2 : 1;
        return p.sign && ((uint64_t)i * 3 + (uint64_t)rank) % 4 == 1 ? -v : v;
    }
    if (is_bitwise(op))
        return (int64_t)1 << (((uint64_t)i + (uint64_t)rank) % GW__BENCH_BITS);
    int s = (nranks % 2 == 1 && rank == nranks - 1) ? 0 : (rank % 2 == 0 ? 1 : -1);
    int64_t k = (int64_t)(((uint64_t)i + (uint64_t)(rank / 2)) % (uint64_t)(p.k + 1));
    return m_of(&p, i) + s * k;
}

int64_t gw_bench_expected(gw_dtype_t dtype, gw_op_t op, int nranks, size_t i)
{
    struct pattern p = pattern_for(dtype, op, nranks);
    if (p.prod) {
        int64_t twos = count_congruent(nranks, (p.p2 - (int64_t)(i % (uint64_t)p.p2)) % p.p2, p.p2);
        int64_t negs =
            p.sign ? count_congruent(nranks, (int64_t)((1 + 3 * (4 - i % 4)) % 4), 4) : 0;
        int64_t v = (int64_t)1 << twos;
        return negs % 2 ? -v : v;
    }
    if (is_bitwise(op)) {
        int64_t v = op == GW_BAND ? (nranks == 1 ? (int64_t)1 << (i % GW__BENCH_BITS) : 0) : 0;
        for (int64_t bit = 0; op != GW_BAND && bit < GW__BENCH_BITS; bit++) {
            /* ranks r with (i + r) % BITS == bit */
            int64_t r0 = (bit - (int64_t)(i % GW__BENCH_BITS) + GW__BENCH_BITS) % GW__BENCH_BITS;
            int64_t c = count_congruent(nranks, r0, GW__BENCH_BITS);
            if (op == GW_BOR ? c > 0 : c % 2 == 1)
                v |= (int64_t)1 << bit;
        }
        return v;
    }
    int64_t m = m_of(&p, i);
    int64_t pairs = nranks / 2, kmax = 0;
    int64_t start = (int64_t)(i % (uint64_t)(p.k + 1));
    if (pairs > p.k)
        kmax = p.k; /* the pairs cover every residue */
    else if (pairs > 0)
        kmax = start + pairs - 1 <= p.k ? start + pairs - 1 : p.k;
    switch (op) {
    case GW_SUM:
        return m * nranks;
    case GW_PREMUL_SUM:
        return (int64_t)GW_BENCH_PREMUL_FACTOR * m * nranks;
    case GW_MIN:
        return m - kmax;
    case GW_MAX:
        return m + kmax;
    default:
        return m; /* GW_AVG: the sum is exactly nranks * m */
    }
}

/* Encode an integer that is exact in binary16 (no rounding needed). */
static uint16_t half_from_int(int64_t v)
{
    if (v == 0)
        return 0;
    uint16_t sign = v < 0 ? 0x8000 : 0;
    uint64_t a = (uint64_t)(v < 0 ? -v : v);
    int e = 63 - __builtin_clzll(a);
    uint16_t mant = (uint16_t)(((a << 10) >> e) & 0x3ff);
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | mant);
}

/* An integer as an 8-bit float with mbits mantissa bits and bias bias:
 * exact for the values the patterns use; larger ones (the poison) are
 * truncated, which keeps their sign, so they never equal what they poison. */
static uint8_t fp8_from_int(int64_t v, int mbits, int bias)
{
    if (v == 0)
        return 0;
    uint8_t sign = v < 0 ? 0x80 : 0;
    uint64_t a = (uint64_t)(v < 0 ? -v : v);
    int e = 63 - __builtin_clzll(a);
    if (e > 8)
        e = 8, a = (uint64_t)1 << 8; /* stay finite: 256 in both formats */
    uint8_t mant = (uint8_t)(((a << mbits) >> e) & ((1u << mbits) - 1));
    return (uint8_t)(sign | (uint8_t)((e + bias) << mbits) | mant);
}

static double fp8_to_double(uint8_t c, int mbits, int bias)
{
    int e = (c & 0x7f) >> mbits, m = c & ((1 << mbits) - 1);
    double v = e == 0 ? ldexp(m, 1 - bias - mbits) : ldexp(m + (1 << mbits), e - bias - mbits);
    return (c & 0x80) ? -v : v;
}

static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

static void store(void *buf, size_t i, gw_dtype_t dt, int64_t v)
{
    float f = (float)v;
    uint32_t bits;
    switch (dt) {
    case GW_FLOAT32:
        ((float *)buf)[i] = f;
        break;
    case GW_FLOAT64:
        ((double *)buf)[i] = (double)v;
        break;
    case GW_FLOAT16:
        ((uint16_t *)buf)[i] = half_from_int(v);
        break;
    case GW_BFLOAT16:
        memcpy(&bits, &f, sizeof(bits));
        ((uint16_t *)buf)[i] = (uint16_t)(bits >> 16); /* exact: low bits are 0 */
        break;
    case GW_INT8:
        ((int8_t *)buf)[i] = (int8_t)v;
        break;
    case GW_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    case GW_INT32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case GW_UINT32:
        ((uint32_t *)buf)[i] = (uint32_t)v;
        break;
    case GW_FLOAT8_E4M3:
        ((uint8_t *)buf)[i] = fp8_from_int(v, 3, 7);
        break;
    case GW_FLOAT8_E5M2:
        ((uint8_t *)buf)[i] = fp8_from_int(v, 2, 15);
        break;
    default: /* int64, uint64 */
        ((int64_t *)buf)[i] = v;
        break;
    }
}

/* 1 if buf[i] holds exactly v. */
static int equals(const void *buf, size_t i, gw_dtype_t dt, int64_t v)
{
    uint32_t bits;
    float f;
    switch (dt) {
    case GW_FLOAT32:
        return ((const float *)buf)[i] == (double)v;
    case GW_FLOAT64:
        return ((const double *)buf)[i] == (double)v;
    case GW_FLOAT16:
        return half_to_double(((const uint16_t *)buf)[i]) == (double)v;
    case GW_BFLOAT16:
        bits = (uint32_t)((const uint16_t *)buf)[i] << 16;
        memcpy(&f, &bits, sizeof(f));
        return f == (double)v;
    case GW_INT8:
        return ((const int8_t *)buf)[i] == v;
    case GW_UINT8:
        return ((const uint8_t *)buf)[i] == v;
    case GW_INT32:
        return ((const int32_t *)buf)[i] == v;
    case GW_UINT32:
        return (int64_t)((const uint32_t *)buf)[i] == v;
    case GW_FLOAT8_E4M3:
        return fp8_to_double(((const uint8_t *)buf)[i], 3, 7) == (double)v;
    case GW_FLOAT8_E5M2:
        return fp8_to_double(((const uint8_t *)buf)[i], 2, 15) == (double)v;
    default:
        return ((const int64_t *)buf)[i] == v;
    }
}

/* The value the check expects at index i of a buffer that w describes. */
static int64_t wanted(gw_dtype_t dt, gw_op_t op, int nranks, gw_bench_want_t w, size_t i)
{
    size_t at = w.first + i;
    return w.rank >= 0 ? gw_bench_input(dt, op, w.rank, nranks, at)
                       : gw_bench_expected(dt, op, nranks, at);
}

void gw_bench_fill_at(void *buf, size_t first, size_t count, gw_dtype_t dtype, gw_op_t op, int rank,
                      int nranks)
{
    for (size_t i = 0; i < count; i++)
        store(buf, i, dtype, gw_bench_input(dtype, op, rank, nranks, first + i));
}

void gw_bench_fill(void *buf, size_t count, gw_dtype_t dtype, gw_op_t op, int rank, int nranks)
{
    gw_bench_fill_at(buf, 0, count, dtype, op, rank, nranks);
}

int64_t gw_bench_count_wrong_want(const void *buf, size_t count, gw_dtype_t dtype, gw_op_t op,
                                  int nranks, gw_bench_want_t w)
{
    int64_t wrong = 0;
    for (size_t i = 0; i < count; i++)
        wrong += !equals(buf, i, dtype, wanted(dtype, op, nranks, w, i));
    return wrong;
}

int64_t gw_bench_count_wrong(const void *buf, size_t count, gw_dtype_t dtype, gw_op_t op,
                             int nranks)
{
    return gw_bench_count_wrong_want(buf, count, dtype, op, nranks, GW_BENCH_WANT_REDUCED);
}

void gw_bench_poison_want(void *buf, size_t count, gw_dtype_t dtype, gw_op_t op, int nranks,
                          gw_bench_want_t w)
{
    /* -v - 1 has the other sign than v (or is -1 for 0), so no rounding to
     * the dtype can make it equal v; for uint8 it wraps to 255 - v != v. */
    for (size_t i = 0; i < count; i++)
        store(buf, i, dtype, -wanted(dtype, op, nranks, w, i) - 1);
}

void gw_bench_poison(void *buf, size_t count, gw_dtype_t dtype, gw_op_t op, int nranks)
{
    gw_bench_poison_want(buf, count, dtype, op, nranks, GW_BENCH_WANT_REDUCED);
}
