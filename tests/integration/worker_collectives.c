/*
 * worker_collectives.c - one rank of the collectives integration test.
 *
 * Started by `gradwire launch -n N`, it runs every requested collective over
 * the real library and transport, checks each result against a serial
 * reference computed locally (every rank can generate every rank's input),
 * and writes one line per call with a hash of its output to OUTDIR/rank<R>,
 * so the test can check that all ranks ended with bitwise identical bytes.
 *
 * Inputs are chosen so that the exact result is independent of reduction
 * order in every dtype: small integers for sum (no rounding even in fp16),
 * signed powers of two for prod, anything for min/max, and for avg values
 * whose sum is a multiple of the rank count. A second pass with random
 * floats checks cross-rank agreement where order does matter.
 *
 * The collectives that move blocks (alltoall, alltoallv, scatter, gather)
 * leave each rank with its own blocks: they are checked against the
 * reference but not hashed; allgatherv is hashed like allgather.
 *
 * Usage: worker_collectives OUTDIR [counts] [algos] [dtypes] [ops] [colls]
 *   comma lists; "all" or "-" selects everything.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradwire.h"

typedef struct {
    gw_comm_t *comm;
    int rank, size;
    FILE *out;
    int failures;
} ctx_t;

/* ---- element access through double (exact for the values we use) ---- */

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Exact for the values this test stores (integers and powers of two that fit). */
static uint16_t float_to_half_exact(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    uint16_t sign = (uint16_t)((b >> 16) & 0x8000);
    int exp = (int)((b >> 23) & 0xff) - 127 + 15;
    uint32_t man = b & 0x7fffff;
    if (f == 0)
        return sign;
    if (exp <= 0) { /* subnormal half */
        man |= 0x800000;
        return (uint16_t)(sign | (man >> (14 - exp)));
    }
    return (uint16_t)(sign | (exp << 10) | (man >> 13));
}

static double get(const void *buf, size_t i, gw_dtype_t dt)
{
    switch (dt) {
    case GW_FLOAT32:
        return ((const float *)buf)[i];
    case GW_FLOAT64:
        return ((const double *)buf)[i];
    case GW_FLOAT16:
        return half_to_float(((const uint16_t *)buf)[i]);
    case GW_BFLOAT16: {
        uint32_t b = (uint32_t)((const uint16_t *)buf)[i] << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    case GW_INT8:
        return ((const int8_t *)buf)[i];
    case GW_UINT8:
        return ((const uint8_t *)buf)[i];
    case GW_INT32:
        return ((const int32_t *)buf)[i];
    case GW_INT64:
        return (double)((const int64_t *)buf)[i];
    default:
        return NAN;
    }
}

static void set(void *buf, size_t i, gw_dtype_t dt, double v)
{
    switch (dt) {
    case GW_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    case GW_FLOAT64:
        ((double *)buf)[i] = v;
        break;
    case GW_FLOAT16:
        ((uint16_t *)buf)[i] = float_to_half_exact((float)v);
        break;
    case GW_BFLOAT16: {
        float f = (float)v;
        uint32_t b;
        memcpy(&b, &f, 4);
        ((uint16_t *)buf)[i] = (uint16_t)(b >> 16);
        break;
    }
    case GW_INT8:
        ((int8_t *)buf)[i] = (int8_t)v;
        break;
    case GW_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    case GW_INT32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case GW_INT64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    default:
        break;
    }
}

static int is_int(gw_dtype_t dt) { return dt >= GW_INT8; }
static int is_unsigned(gw_dtype_t dt) { return dt == GW_UINT8; }

/* Deterministic small-integer pattern. */
static uint32_t mix(uint32_t a, uint32_t b)
{
    uint32_t h = a * 0x9E3779B1u ^ (b + 0x7F4A7C15u + (a << 6) + (a >> 2));
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    return h;
}

/* Input of rank r at index i for op (see the file comment). */
static double input(int r, int n, size_t i, gw_dtype_t dt, gw_op_t op)
{
    uint32_t h = mix((uint32_t)r * 7919u + 1, (uint32_t)i);
    switch (op) {
    case GW_SUM:
        return is_unsigned(dt) ? (double)(h % 4) : (double)((int)(h % 7) - 3);
    case GW_PROD: {
        static const double pos[] = {1, 2, 1, 0.5}, ints[] = {1, 2, 1, -1};
        if (is_int(dt))
            return is_unsigned(dt) ? (double)(1 + h % 2) : ints[h % 4];
        return ((h >> 8) & 1 ? -1 : 1) * pos[h % 4];
    }
    case GW_MIN:
    case GW_MAX:
        return is_unsigned(dt) ? (double)(h % 200) : (double)((int)(h % 201) - 100);
    case GW_AVG: {
        /* base + d_r with sum_r d_r = 0: the sum is n * base exactly, and
         * |n * base| <= 127 keeps int8 sums exact modulo 256. */
        uint32_t b = mix(17, (uint32_t)i);
        double base = is_unsigned(dt) ? (double)(3 + b % 20) : (double)((int)(b % 31) - 15);
        double d = 0;
        if (r < n - (n % 2))
            d = (r % 2 == 0) ? 1 : -1;
        return base + d;
    }
    default:
        return 0;
    }
}

/* The exact result of reducing every rank's input at index i, stored into
 * one element of dtype at out (integers wrap as two's complement). */
static void reference(int n, size_t i, gw_dtype_t dt, gw_op_t op, void *out)
{
    double acc = input(0, n, i, dt, op);
    for (int r = 1; r < n; r++) {
        double x = input(r, n, i, dt, op);
        switch (op) {
        case GW_SUM:
        case GW_AVG:
            acc += x;
            break;
        case GW_PROD:
            acc *= x;
            break;
        case GW_MIN:
            acc = x < acc ? x : acc;
            break;
        case GW_MAX:
            acc = x > acc ? x : acc;
            break;
        default:
            break;
        }
    }
    if (op == GW_AVG)
        acc /= n;
    if (is_int(dt)) {
        int64_t v = (int64_t)acc; /* exact: |acc| <= 2^8 * 8 */
        switch (dt) {
        case GW_INT8:
            *(int8_t *)out = (int8_t)(uint8_t)(uint64_t)v;
            return;
        case GW_UINT8:
            *(uint8_t *)out = (uint8_t)(uint64_t)v;
            return;
        case GW_INT32:
            *(int32_t *)out = (int32_t)v;
            return;
        default:
            *(int64_t *)out = v;
            return;
        }
    }
    set(out, 0, dt, acc);
}

static void fill(void *buf, int r, int n, size_t count, gw_dtype_t dt, gw_op_t op)
{
    for (size_t i = 0; i < count; i++)
        set(buf, i, dt, input(r, n, i, dt, op));
}

static uint64_t fnv(const void *p, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= ((const uint8_t *)p)[i];
        h *= 1099511628211ull;
    }
    return h;
}

#define CANARY 0xA5

static int canary_ok(const uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != CANARY)
            return 0;
    return 1;
}

static void fail(ctx_t *c, const char *what)
{
    if (c->failures++ < 20)
        fprintf(stderr, "rank %d: FAIL %s\n", c->rank, what);
}

/* Compare count elements of got against the reference for op. */
static void check_reduced(ctx_t *c, const char *label, const void *got, size_t count, gw_dtype_t dt,
                          gw_op_t op, size_t first_index)
{
    size_t es = gw_dtype_size(dt);
    uint8_t want[8];
    for (size_t i = 0; i < count; i++) {
        reference(c->size, first_index + i, dt, op, want);
        if (memcmp(want, (const uint8_t *)got + i * es, es) != 0) {
            char msg[256];
            snprintf(msg, sizeof(msg), "%s: element %zu is %g, expected %g", label, first_index + i,
                     get(got, i, dt), get(want, 0, dt));
            fail(c, msg);
            return;
        }
    }
}

static int selected(const char *list, const char *name)
{
    if (!list || strcmp(list, "all") == 0 || strcmp(list, "-") == 0)
        return 1;
    size_t len = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t l = comma ? (size_t)(comma - p) : strlen(p);
        if (l == len && strncmp(p, name, len) == 0)
            return 1;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

static void record(ctx_t *c, const char *label, const void *buf, size_t bytes)
{
    fprintf(c->out, "%s %016llx\n", label, (unsigned long long)fnv(buf, bytes));
}

static int report(ctx_t *c, const char *label, gw_status_t st)
{
    if (st == GW_OK)
        return 1;
    char msg[256];
    snprintf(msg, sizeof(msg), "%s: %s", label, gw_status_str(st));
    fail(c, msg);
    return 0;
}

/* Allreduce with exact checking, in place and out of place. */
static void test_allreduce(ctx_t *c, size_t count, gw_algo_t algo, gw_dtype_t dt, gw_op_t op)
{
    size_t es = gw_dtype_size(dt), bytes = count * es, pad = 64;
    uint8_t *send = malloc(bytes + pad), *recv = malloc(bytes + pad), *orig = malloc(bytes + 1);
    char label[128];
    gw_comm_set_algo(c->comm, algo);
    for (int inplace = 0; inplace < 2; inplace++) {
        snprintf(label, sizeof(label), "allreduce %s %s %s %zu %s", gw_algo_name(algo),
                 gw_dtype_name(dt), gw_op_name(op), count, inplace ? "in" : "out");
        memset(send, CANARY, bytes + pad);
        memset(recv, CANARY, bytes + pad);
        fill(send, c->rank, c->size, count, dt, op);
        memcpy(orig, send, bytes);
        void *dst = inplace ? send : recv;
        if (!report(c, label, gw_allreduce(c->comm, send, dst, count, dt, op)))
            continue;
        check_reduced(c, label, dst, count, dt, op, 0);
        if (!canary_ok((uint8_t *)dst + bytes, pad))
            fail(c, "allreduce wrote past the end of the receive buffer");
        if (!inplace && memcmp(orig, send, bytes) != 0)
            fail(c, "allreduce out of place modified the send buffer");
        record(c, label, dst, bytes);
    }
    free(send);
    free(recv);
    free(orig);
}

/* Random floats: only cross-rank agreement (and closeness) can be checked. */
static void test_allreduce_random(ctx_t *c, size_t count, gw_algo_t algo, gw_dtype_t dt)
{
    size_t es = gw_dtype_size(dt), bytes = count * es;
    uint8_t *buf = malloc(bytes + 1);
    for (size_t i = 0; i < count; i++) {
        uint32_t h = mix((uint32_t)c->rank + 99, (uint32_t)i);
        double v = ((double)h / 4294967296.0 - 0.5) * 3.7;
        set(buf, i, dt, (float)v); /* exactness not needed */
        if (dt == GW_FLOAT64)
            ((double *)buf)[i] = v;
    }
    char label[128];
    snprintf(label, sizeof(label), "allreduce-random %s %s %zu", gw_algo_name(algo),
             gw_dtype_name(dt), count);
    gw_comm_set_algo(c->comm, algo);
    if (report(c, label, gw_allreduce(c->comm, buf, buf, count, dt, GW_SUM)))
        record(c, label, buf, bytes);
    free(buf);
}

static void test_broadcast(ctx_t *c, size_t count, gw_dtype_t dt)
{
    size_t es = gw_dtype_size(dt), bytes = count * es;
    uint8_t *send = malloc(bytes + 1), *recv = malloc(bytes + 1);
    char label[128];
    for (int root = 0; root < c->size; root++) {
        fill(send, root, c->size, count, dt, GW_MIN);
        memset(recv, CANARY, bytes);
        snprintf(label, sizeof(label), "broadcast %s %zu root %d", gw_dtype_name(dt), count, root);
        int inplace = root % 2;
        void *src = c->rank == root ? (inplace ? recv : send) : NULL;
        if (c->rank == root && inplace)
            memcpy(recv, send, bytes);
        if (!report(c, label, gw_broadcast(c->comm, src, recv, count, dt, root)))
            continue;
        uint8_t *want = malloc(bytes + 1);
        fill(want, root, c->size, count, dt, GW_MIN);
        if (memcmp(want, recv, bytes) != 0)
            fail(c, label);
        free(want);
        record(c, label, recv, bytes);
    }
    free(send);
    free(recv);
}

static void test_reduce(ctx_t *c, size_t count, gw_dtype_t dt, gw_op_t op)
{
    size_t es = gw_dtype_size(dt), bytes = count * es;
    uint8_t *send = malloc(bytes + 1), *recv = malloc(bytes + 1);
    char label[128];
    /* In place (the root passes its input as recvbuf) and out of place. */
    for (int root = 0; root < 2 * c->size; root++) {
        const int inplace = root >= c->size, r = root % c->size;
        fill(send, c->rank, c->size, count, dt, op);
        memset(recv, CANARY, bytes + 1);
        snprintf(label, sizeof(label), "reduce %s %s %zu root %d %s", gw_dtype_name(dt),
                 gw_op_name(op), count, r, inplace ? "in" : "out");
        uint8_t *dst = inplace && c->rank == r ? send : recv;
        if (!report(c, label, gw_reduce(c->comm, send, dst, count, dt, op, r)))
            continue;
        if (c->rank == r)
            check_reduced(c, label, dst, count, dt, op, 0);
        else if (!canary_ok(recv, bytes))
            fail(c, "reduce wrote the receive buffer on a non-root rank");
    }
    free(send);
    free(recv);
}

static void test_allgather(ctx_t *c, size_t count, gw_dtype_t dt)
{
    size_t es = gw_dtype_size(dt), block = count * es, bytes = block * (size_t)c->size;
    uint8_t *send = malloc(block + 1), *recv = malloc(bytes + 1), *want = malloc(bytes + 1);
    for (int r = 0; r < c->size; r++)
        fill(want + (size_t)r * block, r, c->size, count, dt, GW_MAX);
    char label[128];
    for (int inplace = 0; inplace < 2; inplace++) {
        snprintf(label, sizeof(label), "allgather %s %zu %s", gw_dtype_name(dt), count,
                 inplace ? "in" : "out");
        memset(recv, CANARY, bytes);
        fill(send, c->rank, c->size, count, dt, GW_MAX);
        const void *src = send;
        if (inplace) {
            memcpy(recv + (size_t)c->rank * block, send, block);
            src = recv + (size_t)c->rank * block;
        }
        if (!report(c, label, gw_allgather(c->comm, src, recv, count, dt)))
            continue;
        if (memcmp(want, recv, bytes) != 0)
            fail(c, label);
        record(c, label, recv, bytes);
    }
    free(send);
    free(recv);
    free(want);
}

static void test_reduce_scatter(ctx_t *c, size_t count, gw_dtype_t dt, gw_op_t op)
{
    size_t es = gw_dtype_size(dt), block = count * es, total = count * (size_t)c->size;
    uint8_t *send = malloc(total * es + 1), *recv = malloc(block + 1);
    char label[128];
    for (int inplace = 0; inplace < 2; inplace++) {
        snprintf(label, sizeof(label), "reduce_scatter %s %s %zu %s", gw_dtype_name(dt),
                 gw_op_name(op), count, inplace ? "in" : "out");
        fill(send, c->rank, c->size, total, dt, op);
        void *dst = inplace ? send + (size_t)c->rank * block : recv;
        if (!report(c, label, gw_reduce_scatter(c->comm, send, dst, count, dt, op)))
            continue;
        check_reduced(c, label, dst, count, dt, op, (size_t)c->rank * count);
    }
    free(send);
    free(recv);
}

/* ---- the collectives that move blocks (api_more.c) -------------------- */

/* Element i of the block rank a sends to rank b (alltoall, alltoallv),
 * exact in every dtype. */
static double pair_value(ctx_t *c, int a, int b, size_t i, gw_dtype_t dt)
{
    return input(a, c->size, (size_t)b * 65537 + i, dt, GW_MAX);
}

/* Checks that count elements at got are pair_value(a, b, ...). */
static int pair_ok(ctx_t *c, const uint8_t *got, int a, int b, size_t count, gw_dtype_t dt)
{
    size_t es = gw_dtype_size(dt);
    uint8_t want[8];
    for (size_t i = 0; i < count; i++) {
        set(want, 0, dt, pair_value(c, a, b, i, dt));
        if (memcmp(want, got + i * es, es) != 0)
            return 0;
    }
    return 1;
}

static void test_alltoall(ctx_t *c, size_t count, gw_dtype_t dt)
{
    const int n = c->size;
    size_t es = gw_dtype_size(dt), block = count * es, bytes = block * (size_t)n, pad = 64;
    uint8_t *send = malloc(bytes + pad), *recv = malloc(bytes + pad);
    char label[128];
    for (int inplace = 0; inplace < 2; inplace++) {
        snprintf(label, sizeof(label), "alltoall %s %zu %s", gw_dtype_name(dt), count,
                 inplace ? "in" : "out");
        memset(send, CANARY, bytes + pad);
        memset(recv, CANARY, bytes + pad);
        uint8_t *src = inplace ? recv : send;
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < count; i++)
                set(src + (size_t)j * block, i, dt, pair_value(c, c->rank, j, i, dt));
        if (!report(c, label, gw_alltoall(c->comm, src, recv, count, dt)))
            continue;
        for (int j = 0; j < n; j++)
            if (!pair_ok(c, recv + (size_t)j * block, j, c->rank, count, dt))
                fail(c, label);
        if (!canary_ok(recv + bytes, pad))
            fail(c, "alltoall wrote past the end of the receive buffer");
    }
    free(send);
    free(recv);
}

/* alltoallv's elements from rank a to rank b: uneven, zero for some pairs
 * at every count; symmetric (a, b and b, a alike) for the in-place form. */
static size_t pair_count(size_t count, int a, int b, int symmetric)
{
    if (symmetric && a > b) {
        int t = a;
        a = b;
        b = t;
    }
    return (count + 3 * (size_t)a + 5 * (size_t)b) % (count + 2);
}

static void test_alltoallv(ctx_t *c, size_t count, gw_dtype_t dt)
{
    const int n = c->size;
    size_t es = gw_dtype_size(dt), pad = 64;
    size_t *sc = calloc((size_t)n, sizeof(size_t)), *sd = calloc((size_t)n, sizeof(size_t));
    size_t *rc = calloc((size_t)n, sizeof(size_t)), *rd = calloc((size_t)n, sizeof(size_t));
    char label[128];
    for (int inplace = 0; inplace < 2; inplace++) {
        /* Send blocks in rank order with a gap of 2, receive blocks in
         * reverse order with a gap of 1: displacements matter. */
        size_t sext = 0, rext = 0;
        for (int j = 0; j < n; j++) {
            sc[j] = pair_count(count, c->rank, j, inplace);
            sd[j] = sext;
            sext += sc[j] + 2;
        }
        for (int j = n - 1; j >= 0; j--) {
            rc[j] = pair_count(count, j, c->rank, inplace);
            rd[j] = rext;
            rext += rc[j] + 1;
        }
        if (inplace) { /* one layout for both: the receive one */
            memcpy(sd, rd, (size_t)n * sizeof(size_t));
            sext = rext;
        }
        snprintf(label, sizeof(label), "alltoallv %s %zu %s", gw_dtype_name(dt), count,
                 inplace ? "in" : "out");
        uint8_t *send = malloc(sext * es + pad), *recv = malloc(rext * es + pad);
        memset(send, CANARY, sext * es + pad);
        memset(recv, CANARY, rext * es + pad);
        uint8_t *src = inplace ? recv : send;
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < sc[j]; i++)
                set(src + sd[j] * es, i, dt, pair_value(c, c->rank, j, i, dt));
        gw_status_t st = inplace ? gw_alltoallv(c->comm, recv, NULL, NULL, recv, rc, rd, dt)
                                 : gw_alltoallv(c->comm, send, sc, sd, recv, rc, rd, dt);
        if (report(c, label, st)) {
            for (int j = 0; j < n; j++) {
                if (!pair_ok(c, recv + rd[j] * es, j, c->rank, rc[j], dt))
                    fail(c, label);
                /* The gap after each block is never written. */
                if (!canary_ok(recv + (rd[j] + rc[j]) * es, es))
                    fail(c, "alltoallv wrote between the receive blocks");
            }
            if (!canary_ok(recv + rext * es, pad))
                fail(c, "alltoallv wrote past the end of the receive buffer");
        }
        free(send);
        free(recv);
    }
    free(sc);
    free(sd);
    free(rc);
    free(rd);
}

static void test_gather(ctx_t *c, size_t count, gw_dtype_t dt)
{
    const int n = c->size;
    size_t es = gw_dtype_size(dt), block = count * es, bytes = block * (size_t)n, pad = 64;
    uint8_t *send = malloc(block + 1), *recv = malloc(bytes + pad);
    char label[128];
    for (int root = 0; root < n; root++) {
        int inplace = root % 2;
        snprintf(label, sizeof(label), "gather %s %zu root %d %s", gw_dtype_name(dt), count, root,
                 inplace ? "in" : "out");
        memset(recv, CANARY, bytes + pad);
        const void *src = send;
        fill(send, c->rank, n, count, dt, GW_MAX);
        if (inplace && c->rank == root) {
            memcpy(recv + (size_t)root * block, send, block);
            src = recv + (size_t)root * block;
        }
        if (!report(c, label,
                    gw_gather(c->comm, src, c->rank == root ? recv : NULL, count, dt, root)))
            continue;
        if (c->rank != root) {
            if (!canary_ok(recv, bytes + pad))
                fail(c, "gather wrote a receive buffer off the root");
            continue;
        }
        uint8_t *want = malloc(block + 1);
        for (int j = 0; j < n; j++) {
            fill(want, j, n, count, dt, GW_MAX);
            if (memcmp(want, recv + (size_t)j * block, block) != 0)
                fail(c, label);
        }
        free(want);
        if (!canary_ok(recv + bytes, pad))
            fail(c, "gather wrote past the end of the receive buffer");
    }
    free(send);
    free(recv);
}

static void test_scatter(ctx_t *c, size_t count, gw_dtype_t dt)
{
    const int n = c->size;
    size_t es = gw_dtype_size(dt), block = count * es, bytes = block * (size_t)n, pad = 64;
    uint8_t *send = malloc(bytes + 1), *recv = malloc(block + pad), *want = malloc(block + 1);
    char label[128];
    for (int root = 0; root < n; root++) {
        int inplace = root % 2;
        snprintf(label, sizeof(label), "scatter %s %zu root %d %s", gw_dtype_name(dt), count, root,
                 inplace ? "in" : "out");
        memset(recv, CANARY, block + pad);
        /* Block j of root's buffer: rank j's pattern as root would send it. */
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < count; i++)
                set(send + (size_t)j * block, i, dt, pair_value(c, root, j, i, dt));
        void *dst = recv;
        if (inplace && c->rank == root)
            dst = send + (size_t)root * block;
        if (!report(c, label,
                    gw_scatter(c->comm, c->rank == root ? send : NULL, dst, count, dt, root)))
            continue;
        if (!pair_ok(c, dst, root, c->rank, count, dt))
            fail(c, label);
        if (dst == recv && !canary_ok(recv + block, pad))
            fail(c, "scatter wrote past the end of the receive buffer");
    }
    free(send);
    free(recv);
    free(want);
}

static void test_allgatherv(ctx_t *c, size_t count, gw_dtype_t dt)
{
    const int n = c->size;
    size_t es = gw_dtype_size(dt), pad = 64, ext = 0;
    size_t *rc = calloc((size_t)n, sizeof(size_t)), *rd = calloc((size_t)n, sizeof(size_t));
    /* Uneven counts (some zero), blocks in reverse rank order with gaps. */
    for (int j = n - 1; j >= 0; j--) {
        rc[j] = (count + 3 * (size_t)j) % (count + 2);
        rd[j] = ext;
        ext += rc[j] + 1;
    }
    uint8_t *send = malloc(rc[c->rank] * es + 1), *recv = malloc(ext * es + pad);
    char label[128];
    for (int inplace = 0; inplace < 2; inplace++) {
        snprintf(label, sizeof(label), "allgatherv %s %zu %s", gw_dtype_name(dt), count,
                 inplace ? "in" : "out");
        memset(recv, CANARY, ext * es + pad);
        fill(send, c->rank, n, rc[c->rank], dt, GW_MAX);
        const void *src = send;
        if (inplace) {
            memcpy(recv + rd[c->rank] * es, send, rc[c->rank] * es);
            src = recv + rd[c->rank] * es;
        }
        if (!report(c, label, gw_allgatherv(c->comm, src, recv, rc[c->rank], rc, rd, dt)))
            continue;
        uint8_t *want = malloc(count * es + 2 * es * (size_t)n + 1);
        for (int j = 0; j < n; j++) {
            fill(want, j, n, rc[j], dt, GW_MAX);
            if (memcmp(want, recv + rd[j] * es, rc[j] * es) != 0)
                fail(c, label);
            if (!canary_ok(recv + (rd[j] + rc[j]) * es, es))
                fail(c, "allgatherv wrote between the receive blocks");
        }
        free(want);
        if (!canary_ok(recv + ext * es, pad))
            fail(c, "allgatherv wrote past the end of the receive buffer");
        record(c, label, recv, ext * es);
    }
    free(send);
    free(recv);
    free(rc);
    free(rd);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s OUTDIR [counts] [algos] [dtypes] [ops] [colls]\n", argv[0]);
        return 2;
    }
    const char *counts = argc > 2 ? argv[2] : "0,1,7,1023";
    const char *algos = argc > 3 ? argv[3] : "all";
    const char *dtypes = argc > 4 ? argv[4] : "all";
    const char *ops = argc > 5 ? argv[5] : "all";
    const char *colls = argc > 6 ? argv[6] : "all";

    ctx_t c = {0};
    gw_status_t st = gw_comm_init_env(&c.comm);
    if (st != GW_OK) {
        fprintf(stderr, "gw_comm_init_env: %s\n", gw_status_str(st));
        return 1;
    }
    c.rank = gw_comm_rank(c.comm);
    c.size = gw_comm_size(c.comm);
    char path[4096];
    snprintf(path, sizeof(path), "%s/rank%d", argv[1], c.rank);
    c.out = fopen(path, "w");
    if (!c.out) {
        perror(path);
        return 1;
    }

    for (const char *p = counts; p && *p;) {
        size_t count = strtoull(p, NULL, 10);
        /* The dtypes and ops up to int64 and avg: this reference knows
         * those; the 8-bit floats, uint32/64, bitwise ops and premul_sum
         * are checked by tests/collectives/test_dtype_ops.c and the
         * algorithm tests' exact combinations. */
        for (int d = 0; d <= GW_INT64; d++) {
            gw_dtype_t dt = (gw_dtype_t)d;
            if (!selected(dtypes, gw_dtype_name(dt)))
                continue;
            for (int o = 0; o <= GW_AVG; o++) {
                gw_op_t op = (gw_op_t)o;
                if (!selected(ops, gw_op_name(op)))
                    continue;
                for (int a = GW_ALGO_RING; a < GW_ALGO_COUNT; a++)
                    if (selected(colls, "allreduce") && selected(algos, gw_algo_name(a)))
                        test_allreduce(&c, count, (gw_algo_t)a, dt, op);
                if (selected(colls, "reduce"))
                    test_reduce(&c, count, dt, op);
                if (selected(colls, "reduce_scatter"))
                    test_reduce_scatter(&c, count, dt, op);
            }
            if (selected(colls, "broadcast"))
                test_broadcast(&c, count, dt);
            if (selected(colls, "allgather"))
                test_allgather(&c, count, dt);
            if (selected(colls, "alltoall"))
                test_alltoall(&c, count, dt);
            if (selected(colls, "alltoallv"))
                test_alltoallv(&c, count, dt);
            if (selected(colls, "gather"))
                test_gather(&c, count, dt);
            if (selected(colls, "scatter"))
                test_scatter(&c, count, dt);
            if (selected(colls, "allgatherv"))
                test_allgatherv(&c, count, dt);
            if (dt <= GW_BFLOAT16 && selected(colls, "random"))
                for (int a = GW_ALGO_RING; a < GW_ALGO_COUNT; a++)
                    if (selected(algos, gw_algo_name(a)))
                        test_allreduce_random(&c, count, (gw_algo_t)a, dt);
        }
        if (selected(colls, "barrier"))
            report(&c, "barrier", gw_barrier(c.comm));
        const char *comma = strchr(p, ',');
        p = comma ? comma + 1 : NULL;
    }
    fclose(c.out);
    gw_comm_destroy(c.comm);
    if (c.failures) {
        fprintf(stderr, "rank %d: %d failures\n", c.rank, c.failures);
        return 1;
    }
    return 0;
}
