/*
 * test_algorithms.c - the collective algorithms, run by one thread per rank
 * over the in-memory transport (mem_transport.c), called directly through
 * their gw__ entry points.
 *
 * Every case checks the result against a serial reference computed here
 * (inputs are chosen so that the reference is exact: integer-valued floats,
 * wrapping integers), that every rank holds bitwise the same result (also
 * for random non-integer floats and NaN payloads, where only agreement is
 * defined), that sendbuf is untouched out of place, and that nothing is
 * written where it must not be. Small chunk sizes push even short buffers
 * through many pipeline steps. Scratch memory is freed before each call so
 * that AddressSanitizer sees exactly the size each algorithm asked for.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collectives/coll.h"
#include "common/clock.h"
#include "mem_transport.c"

#define MAXN 16

typedef struct job job_t;

/* One rank: its thread's communicator and the failures it noticed. */
typedef struct ctx {
    job_t *job;
    int rank;
    gw_comm_t comm;
    int nerr;
    char err[1024];
} ctx_t;

typedef void (*body_fn)(ctx_t *c, const void *arg);

struct job {
    int n;
    memt_fabric_t *fab;
    pthread_barrier_t bar;
    body_fn body;
    const void *arg;
    ctx_t ctx[MAXN];
    const void *shared[MAXN]; /* each rank's published result */
    atomic_int counter;       /* for the barrier test */
};

/* Record a failure (the first few are kept) and go on: asserting from a
 * worker thread would skip the other ranks' cleanup. */
static void note(ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(ctx_t *c, const char *fmt, ...)
{
    if (c->nerr++ >= 4)
        return;
    size_t used = strlen(c->err);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + used, sizeof(c->err) - used, fmt, ap);
    va_end(ap);
    used = strlen(c->err);
    if (used + 2 < sizeof(c->err))
        strcat(c->err, "; ");
}

#define CHECK(c, cond, ...)                                                                \
    do {                                                                                   \
        if (!(cond))                                                                       \
            note((c), __VA_ARGS__);                                                        \
    } while (0)

static void *thread_main(void *p)
{
    ctx_t *c = p;
    c->job->body(c, c->job->arg);
    return NULL;
}

/* Run body on n threads, one per rank, over a fresh fabric (rendezvous or
 * eager, see mem_transport.h), then report every rank's failures. */
static void job_run(int n, int timeout_ms, int rendezvous, body_fn body, const void *arg)
{
    cr_assert(n >= 2 && n <= MAXN);
    job_t *job = calloc(1, sizeof(*job));
    cr_assert_not_null(job);
    job->n = n;
    job->body = body;
    job->arg = arg;
    job->fab = memt_fabric_create(n, rendezvous);
    cr_assert_not_null(job->fab);
    pthread_barrier_init(&job->bar, NULL, (unsigned)n);
    for (int r = 0; r < n; r++) {
        ctx_t *c = &job->ctx[r];
        c->job = job;
        c->rank = r;
        gw_comm_t *comm = &c->comm;
        comm->rank = r;
        comm->size = n;
        gw__logger_init(&comm->log, r);
        comm->timeout_ms = timeout_ms;
        comm->algo = GW_ALGO_AUTO;
        comm->failed = GW_OK;
        comm->chunk_bytes = 4096;
        cr_assert_eq(memt_open(job->fab, r, &comm->log, &comm->transport), GW_OK);
    }
    pthread_t th[MAXN];
    for (int r = 0; r < n; r++)
        cr_assert_eq(pthread_create(&th[r], NULL, thread_main, &job->ctx[r]), 0);
    for (int r = 0; r < n; r++)
        pthread_join(th[r], NULL);
    char msg[MAXN][1100];
    int bad[MAXN];
    for (int r = 0; r < n; r++) {
        ctx_t *c = &job->ctx[r];
        bad[r] = c->nerr;
        snprintf(msg[r], sizeof(msg[r]), "n=%d (%s) rank %d: %d failures: %s", n,
                 rendezvous ? "rendezvous" : "eager", r, c->nerr, c->err);
        if (c->comm.transport)
            c->comm.transport->ops->close(c->comm.transport);
        free(c->comm.scratch);
        gw__logger_fini(&c->comm.log);
    }
    memt_fabric_destroy(job->fab);
    pthread_barrier_destroy(&job->bar);
    free(job);
    for (int r = 0; r < n; r++)
        cr_expect_eq(bad[r], 0, "%s", msg[r]);
}

static void sync_all(ctx_t *c) { pthread_barrier_wait(&c->job->bar); }

/* Stamp the next collective's tag, as the API layer does. */
static void begin(ctx_t *c, int kind, size_t count, gw_dtype_t dt, gw_op_t op, int root)
{
    uint32_t h = 2166136261u;
    uint64_t parts[5] = {(uint64_t)kind, count, (uint64_t)dt, (uint64_t)op, (uint64_t)root};
    for (int i = 0; i < 5; i++) {
        h ^= (uint32_t)(parts[i] * 0x9e3779b97f4a7c15ull >> 32);
        h *= 16777619u;
    }
    c->comm.seq++;
    c->comm.tag.seq = c->comm.seq;
    c->comm.tag.sig = h;
    /* Fresh scratch of exactly the requested size for every call. */
    free(c->comm.scratch);
    c->comm.scratch = NULL;
    c->comm.scratch_len = 0;
}

/* ---- data: deterministic pseudo-random inputs and exact references ---- */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Element i of rank's stream `seed`: distinct inputs for seed < 2^20,
 * rank < 2^8, i < 2^36, and mix() is a bijection. */
static uint64_t rnd(uint64_t seed, int rank, size_t i)
{
    return mix(seed << 44 ^ (uint64_t)rank << 36 ^ (uint64_t)i);
}

static uint16_t half_from_int(int v)
{
    /* Exact for |v| <= 2048, all the tests need. */
    if (v == 0)
        return 0;
    uint16_t sign = v < 0 ? 0x8000 : 0;
    unsigned a = (unsigned)(v < 0 ? -v : v);
    int e = 0;
    while ((a >> (e + 1)) != 0)
        e++;
    unsigned mant = (a << (10 - e)) & 0x3ff;
    return (uint16_t)(sign | (unsigned)(e + 15) << 10 | mant);
}

static double half_to_double(uint16_t h)
{
    int sign = h >> 15, e = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (e == 0)
        v = ldexp(mant, -24);
    else if (e == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexp(mant + 1024, e - 25);
    return sign ? -v : v;
}

static uint16_t bf16_from_float(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); /* exact for the small integers used */
}

static double bf16_to_double(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int is_float(gw_dtype_t dt)
{
    return dt == GW_FLOAT32 || dt == GW_FLOAT64 || dt == GW_FLOAT16 || dt == GW_BFLOAT16;
}

static void put_f(gw_dtype_t dt, void *buf, size_t i, double v)
{
    switch (dt) {
    case GW_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case GW_FLOAT64: ((double *)buf)[i] = v; break;
    case GW_FLOAT16: ((uint16_t *)buf)[i] = half_from_int((int)v); break;
    case GW_BFLOAT16: ((uint16_t *)buf)[i] = bf16_from_float((float)v); break;
    default: break;
    }
}

static double get_f(gw_dtype_t dt, const void *buf, size_t i)
{
    switch (dt) {
    case GW_FLOAT32: return ((const float *)buf)[i];
    case GW_FLOAT64: return ((const double *)buf)[i];
    case GW_FLOAT16: return half_to_double(((const uint16_t *)buf)[i]);
    case GW_BFLOAT16: return bf16_to_double(((const uint16_t *)buf)[i]);
    default: return 0;
    }
}

static void put_i(gw_dtype_t dt, void *buf, size_t i, uint64_t v)
{
    switch (dt) {
    case GW_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case GW_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case GW_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case GW_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
    default: break;
    }
}

static int64_t get_i(gw_dtype_t dt, const void *buf, size_t i)
{
    switch (dt) {
    case GW_INT8: return ((const int8_t *)buf)[i];
    case GW_UINT8: return ((const uint8_t *)buf)[i];
    case GW_INT32: return ((const int32_t *)buf)[i];
    case GW_INT64: return ((const int64_t *)buf)[i];
    default: return 0;
    }
}

/* A float input for an exact test: integers whose sums (16 ranks of them)
 * stay exact even in bfloat16, small factors for products, and arbitrary
 * values for min and max (which are exact anyway). */
static double exact_float(gw_op_t op, uint64_t x)
{
    if (op == GW_SUM)
        return (double)(int)(x % 33) - 16;
    if (op == GW_PROD)
        return (double)(int)(x % 7) - 3;
    return ((double)(int64_t)(x >> 11) - (double)(1ll << 52)) / 1024.0;
}

/* Element i of rank's input for an exact test of (dt, op). */
static void gen_exact(gw_dtype_t dt, gw_op_t op, uint64_t seed, int rank, size_t i, void *buf)
{
    uint64_t x = rnd(seed, rank, i);
    if (is_float(dt))
        put_f(dt, buf, i, exact_float(op, x));
    else
        put_i(dt, buf, i, x);
}

/* The reference: fold element i over the ranks, in double for floats (the
 * inputs make that exact) and in the dtype's wrapping arithmetic for
 * integers. */
static void ref_exact(gw_dtype_t dt, gw_op_t op, uint64_t seed, int n, size_t i, double *fv,
                      int64_t *iv)
{
    double f = 0;
    int64_t v = 0;
    unsigned char one[8];
    for (int r = 0; r < n; r++) {
        uint64_t x = rnd(seed, r, i);
        if (is_float(dt)) {
            put_f(dt, one, 0, exact_float(op, x));
            double e = get_f(dt, one, 0);
            if (r == 0)
                f = e;
            else if (op == GW_SUM)
                f += e;
            else if (op == GW_PROD)
                f *= e;
            else if (op == GW_MIN)
                f = e < f ? e : f;
            else
                f = e > f ? e : f;
        } else {
            put_i(dt, one, 0, x);
            int64_t e = get_i(dt, one, 0);
            uint64_t w;
            if (r == 0)
                w = (uint64_t)e;
            else if (op == GW_SUM)
                w = (uint64_t)v + (uint64_t)e;
            else if (op == GW_PROD)
                w = (uint64_t)v * (uint64_t)e;
            else if (op == GW_MIN)
                w = (uint64_t)(e < v ? e : v);
            else
                w = (uint64_t)(e > v ? e : v);
            put_i(dt, one, 0, w); /* wrap to the dtype */
            v = get_i(dt, one, 0);
        }
    }
    *fv = f;
    *iv = v;
}

typedef struct combo {
    gw_dtype_t dt;
    gw_op_t op;
} combo_t;

static const combo_t exact_combos[] = {
    {GW_FLOAT32, GW_SUM}, {GW_INT32, GW_SUM},    {GW_INT32, GW_PROD},   {GW_INT32, GW_MIN},
    {GW_INT32, GW_MAX},   {GW_INT64, GW_SUM},    {GW_INT64, GW_PROD},   {GW_INT64, GW_MIN},
    {GW_INT64, GW_MAX},   {GW_FLOAT16, GW_SUM},  {GW_BFLOAT16, GW_SUM}, {GW_FLOAT64, GW_PROD},
    {GW_FLOAT64, GW_MIN}, {GW_FLOAT64, GW_MAX},  {GW_INT8, GW_SUM},     {GW_UINT8, GW_MAX},
};
#define NCOMBOS (sizeof(exact_combos) / sizeof(exact_combos[0]))

/* Compare buf (count elements) with the reference; report the first miss. */
static void check_exact(ctx_t *c, const char *what, const void *buf, size_t count,
                        gw_dtype_t dt, gw_op_t op, uint64_t seed)
{
    int n = c->comm.size;
    for (size_t i = 0; i < count; i++) {
        double fv;
        int64_t iv;
        ref_exact(dt, op, seed, n, i, &fv, &iv);
        if (is_float(dt) ? get_f(dt, buf, i) != fv : get_i(dt, buf, i) != iv) {
            note(c, "%s: element %zu is %g/%lld, expected %g/%lld", what, i, get_f(dt, buf, i),
                 (long long)get_i(dt, buf, i), fv, (long long)iv);
            return;
        }
    }
}

/* Publish this rank's result and compare it bitwise with rank 0's. */
static void check_agree(ctx_t *c, const char *what, const void *buf, size_t bytes)
{
    c->job->shared[c->rank] = buf;
    sync_all(c);
    if (c->rank != 0 && bytes > 0 && memcmp(buf, c->job->shared[0], bytes) != 0)
        note(c, "%s: %zu bytes differ from rank 0's", what, bytes);
    sync_all(c);
}

/* ---------------------------------- allreduce ---------------------------------- */

typedef gw_status_t (*allreduce_fn)(gw_comm_t *, const void *, void *, size_t, gw_dtype_t,
                                    gw_op_t);

typedef struct ar_arg {
    allreduce_fn fn;
    const char *name;
    const size_t *counts;
    int ncounts;
    size_t chunk_bytes;
    int all_combos; /* else: a representative subset */
    int alternate;  /* in place for every other case only, to save time */
} ar_arg_t;

static void allreduce_case(ctx_t *c, const ar_arg_t *a, size_t count, gw_dtype_t dt, gw_op_t op,
                           int in_place, uint64_t seed)
{
    size_t es = gw_dtype_size(dt), bytes = count * es;
    unsigned char *in = malloc(bytes + 1), *orig = malloc(bytes + 1), *out = malloc(bytes + 1);
    for (size_t i = 0; i < count; i++)
        gen_exact(dt, op, seed, c->rank, i, in);
    memcpy(orig, in, bytes);
    memset(out, 0xa5, bytes);
    if (in_place)
        memcpy(out, in, bytes);
    c->comm.chunk_bytes = a->chunk_bytes;
    begin(c, GW_COLL_ALLREDUCE, count, dt, op, 0);
    /* count 0 passes NULL buffers, as the API allows. */
    const void *sbuf = count == 0 ? NULL : in_place ? (const void *)out : (const void *)in;
    void *rbuf = count == 0 ? NULL : out;
    gw_status_t st = a->fn(&c->comm, sbuf, rbuf, count, dt, op);
    char what[128];
    snprintf(what, sizeof(what), "%s %s/%s count %zu %s", a->name, gw_dtype_name(dt),
             gw_op_name(op), count, in_place ? "in place" : "out of place");
    CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
    if (st == GW_OK) {
        if (!in_place)
            CHECK(c, memcmp(in, orig, bytes) == 0, "%s: sendbuf was modified", what);
        if (c->rank == 0)
            check_exact(c, what, out, count, dt, op, seed);
    }
    check_agree(c, what, out, st == GW_OK ? bytes : 0);
    free(in);
    free(orig);
    free(out);
}

static void allreduce_exact_body(ctx_t *c, const void *arg)
{
    const ar_arg_t *a = arg;
    static const combo_t subset[] = {{GW_FLOAT32, GW_SUM}, {GW_INT64, GW_PROD},
                                     {GW_FLOAT16, GW_SUM}};
    const combo_t *combos = a->all_combos ? exact_combos : subset;
    size_t ncombos = a->all_combos ? NCOMBOS : sizeof(subset) / sizeof(subset[0]);
    uint64_t seed = 1;
    /* Every combination in place and out of place; when alternating, each
     * combination still sees both across the counts. */
    for (int k = 0; k < a->ncounts; k++)
        for (size_t j = 0; j < ncombos; j++)
            for (int in_place = 0; in_place < 2; in_place++)
                if (!a->alternate || (int)((j + (size_t)k) % 2) == in_place)
                    allreduce_case(c, a, a->counts[k], combos[j].dt, combos[j].op, in_place,
                                   seed++);
}

/* Random non-integer floats and NaN payloads: only agreement is defined. */
static void allreduce_agree_body(ctx_t *c, const void *arg)
{
    const ar_arg_t *a = arg;
    static const gw_dtype_t dts[] = {GW_FLOAT32, GW_FLOAT64, GW_BFLOAT16, GW_FLOAT16};
    for (int k = 0; k < a->ncounts; k++) {
        size_t count = a->counts[k];
        /* Long buffers only in the two wide types, to save time. */
        for (int d = 0; d < (count > 1023 ? 2 : 4); d++) {
            gw_dtype_t dt = dts[d];
            size_t es = gw_dtype_size(dt);
            unsigned char *buf = malloc(count * es + 1);
            for (size_t i = 0; i < count; i++) {
                uint64_t x = rnd(77 + (uint64_t)d, c->rank, i);
                double v = (double)(x >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
                if (dt == GW_FLOAT16 || dt == GW_BFLOAT16) {
                    /* Any bit pattern but NaN/Inf: random mantissas. */
                    uint16_t h = (uint16_t)(x & 0xbfff);
                    memcpy(buf + i * 2, &h, 2);
                } else if (dt == GW_FLOAT32) {
                    float f = (float)v;
                    /* NaNs with rank-specific payloads on two ranks per element. */
                    if (i % 5 == 0 && (c->rank == (int)(i % (size_t)c->comm.size) ||
                                       c->rank == (int)((i + 1) % (size_t)c->comm.size))) {
                        uint32_t u = 0x7fc00000u | (uint32_t)(c->rank + 1) << 4 | (uint32_t)(i & 7);
                        memcpy(&f, &u, 4);
                    }
                    memcpy(buf + i * 4, &f, 4);
                } else {
                    memcpy(buf + i * 8, &v, 8);
                }
            }
            c->comm.chunk_bytes = a->chunk_bytes;
            begin(c, GW_COLL_ALLREDUCE, count, dt, GW_SUM, 0);
            gw_status_t st = a->fn(&c->comm, buf, buf, count, dt, GW_SUM);
            char what[96];
            snprintf(what, sizeof(what), "%s random %s sum count %zu", a->name,
                     gw_dtype_name(dt), count);
            CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
            if (st == GW_OK && dt == GW_FLOAT32)
                for (size_t i = 0; i < count; i += 5)
                    CHECK(c, isnan(((float *)(void *)buf)[i]), "%s: element %zu lost its NaN",
                          what, i);
            check_agree(c, what, buf, st == GW_OK ? count * es : 0);
            free(buf);
        }
    }
}

static const int test_ns[] = {2, 3, 4, 5, 7, 8};
#define NNS (sizeof(test_ns) / sizeof(test_ns[0]))

static void allreduce_suite(allreduce_fn fn, const char *name)
{
    static const size_t small[] = {0, 1, 7, 1023};
    static const size_t large[] = {65537};
    ar_arg_t exact = {fn, name, small, 4, 256, 1, 1};
    ar_arg_t big = {fn, name, large, 1, 4096, 0, 0};
    static const size_t agree_counts[] = {1023, 65537};
    ar_arg_t agree = {fn, name, agree_counts, 2, 4096, 0, 0};
    for (size_t k = 0; k < NNS; k++) {
        /* Small buffers in both modes; the rest in the stricter one. */
        job_run(test_ns[k], 10000, 0, allreduce_exact_body, &exact);
        job_run(test_ns[k], 10000, 1, allreduce_exact_body, &exact);
        job_run(test_ns[k], 10000, 1, allreduce_exact_body, &big);
        job_run(test_ns[k], 10000, 1, allreduce_agree_body, &agree);
    }
}

Test(allreduce, ring, .timeout = 120) { allreduce_suite(gw__allreduce_ring, "ring"); }
Test(allreduce, tree, .timeout = 120) { allreduce_suite(gw__allreduce_tree, "tree"); }
Test(allreduce, rd, .timeout = 120) { allreduce_suite(gw__allreduce_rd, "rd"); }

/* Every rank count from 2 to 16 (tree shapes, folds of non-powers of two),
 * with buffers shorter than, equal to and longer than a chunk. */
Test(allreduce, every_size, .timeout = 120)
{
    static const size_t counts[] = {0, 5, 37, 300};
    static const allreduce_fn fns[] = {gw__allreduce_ring, gw__allreduce_tree, gw__allreduce_rd};
    static const char *const names[] = {"ring", "tree", "rd"};
    for (int n = 2; n <= 16; n++)
        for (int f = 0; f < 3; f++) {
            ar_arg_t a = {fns[f], names[f], counts, 4, 64, 0, 1};
            job_run(n, 10000, 1, allreduce_exact_body, &a);
        }
}

/* ---------------------------------- broadcast ---------------------------------- */

typedef struct sized_arg {
    const size_t *counts;
    int ncounts;
    size_t chunk_bytes; /* for counts up to 1023; 4 KiB beyond, to keep the run short */
} sized_arg_t;

static size_t chunk_for(const sized_arg_t *a, size_t count)
{
    return count > 1023 ? 4096 : a->chunk_bytes;
}

static void broadcast_body(ctx_t *c, const void *arg)
{
    const sized_arg_t *a = arg;
    static const gw_dtype_t dts[] = {GW_INT32, GW_FLOAT16, GW_UINT8};
    int n = c->comm.size;
    for (int k = 0; k < a->ncounts; k++)
        for (int root = 0; root < n; root++) {
            int d = (root + k) % 3;
            size_t count = a->counts[k], bytes = count * gw_dtype_size(dts[d]);
            uint64_t seed = 1000 + (uint64_t)(k * 97 + d * 31 + root);
            unsigned char *buf = malloc(bytes + 1);
            for (size_t i = 0; i < bytes; i++)
                buf[i] = c->rank == root ? (unsigned char)rnd(seed, root, i) : 0xa5;
            c->comm.chunk_bytes = chunk_for(a, count);
            begin(c, GW_COLL_BROADCAST, count, dts[d], GW_SUM, root);
            gw_status_t st = gw__broadcast_tree(&c->comm, count ? buf : NULL, count, dts[d],
                                                root);
            char what[96];
            snprintf(what, sizeof(what), "broadcast %s count %zu root %d",
                     gw_dtype_name(dts[d]), count, root);
            CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
            for (size_t i = 0; st == GW_OK && i < bytes; i++) {
                if (buf[i] != (unsigned char)rnd(seed, root, i)) {
                    note(c, "%s: byte %zu differs from the root's", what, i);
                    break;
                }
            }
            sync_all(c); /* the next root must not overtake anyone */
            free(buf);
        }
}

Test(broadcast, every_root, .timeout = 60)
{
    /* 128-byte chunks: 7 elements fit one chunk (binomial tree), 100 make
     * one to four (tree or chain, depending on n and the dtype), 1023 and
     * more make many (chain). */
    static const size_t counts[] = {0, 1, 7, 100, 1023, 65537};
    sized_arg_t a = {counts, 6, 128};
    for (size_t k = 0; k < NNS; k++)
        job_run(test_ns[k], 10000, 1, broadcast_body, &a);
}

/* ----------------------------------- reduce ------------------------------------ */

static void reduce_body(ctx_t *c, const void *arg)
{
    const sized_arg_t *a = arg;
    static const combo_t combos[] = {{GW_INT32, GW_SUM},   {GW_FLOAT64, GW_MAX},
                                     {GW_FLOAT16, GW_SUM}, {GW_INT64, GW_PROD},
                                     {GW_FLOAT32, GW_SUM}, {GW_INT8, GW_MIN}};
    int n = c->comm.size;
    uint64_t seed = 5000;
    const size_t ncombos = sizeof(combos) / sizeof(combos[0]);
    /* Every root for every count; the dtype/op pairs rotate over the roots. */
    for (int k = 0; k < a->ncounts; k++)
        for (int root = 0; root < n; root++) {
            size_t j = ((size_t)root + (size_t)k) % ncombos;
            gw_dtype_t dt = combos[j].dt;
            gw_op_t op = combos[j].op;
            size_t count = a->counts[k], bytes = count * gw_dtype_size(dt);
            int in_place = (root + k) % 2 == 1 && c->rank == root;
            /* Non-roots pass NULL, or (every other case) a sentinel buffer
             * that must stay untouched. */
            int sentinel = (root / 2 + k) % 2 == 0;
            seed++;
            unsigned char *in = malloc(bytes + 1), *orig = malloc(bytes + 1);
            unsigned char *out = malloc(bytes + 1);
            for (size_t i = 0; i < count; i++)
                gen_exact(dt, op, seed, c->rank, i, in);
            memcpy(orig, in, bytes);
            memset(out, 0x5a, bytes);
            if (in_place)
                memcpy(out, in, bytes);
            void *rbuf = c->rank == root || sentinel ? out : NULL;
            const void *sbuf = in_place ? (const void *)out : (const void *)in;
            if (count == 0)
                sbuf = rbuf = NULL;
            c->comm.chunk_bytes = chunk_for(a, count);
            begin(c, GW_COLL_REDUCE, count, dt, op, root);
            gw_status_t st = gw__reduce_tree(&c->comm, sbuf, rbuf, count, dt, op, root);
            char what[128];
            snprintf(what, sizeof(what), "reduce %s/%s count %zu root %d%s",
                     gw_dtype_name(dt), gw_op_name(op), count, root,
                     in_place ? " in place" : "");
            CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
            if (st == GW_OK) {
                if (!in_place)
                    CHECK(c, memcmp(in, orig, bytes) == 0, "%s: sendbuf was modified", what);
                if (c->rank == root) {
                    check_exact(c, what, out, count, dt, op, seed);
                } else {
                    for (size_t i = 0; i < bytes; i++)
                        if (out[i] != 0x5a) {
                            note(c, "%s: non-root recvbuf written at byte %zu", what, i);
                            break;
                        }
                }
            }
            sync_all(c);
            free(in);
            free(orig);
            free(out);
        }
}

Test(reduce, every_root, .timeout = 60)
{
    static const size_t counts[] = {0, 1, 7, 1023, 20000};
    sized_arg_t a = {counts, 5, 256};
    for (size_t k = 0; k < NNS; k++)
        job_run(test_ns[k], 10000, 1, reduce_body, &a);
}

/* ---------------------------------- allgather ---------------------------------- */

static void allgather_body(ctx_t *c, const void *arg)
{
    const sized_arg_t *a = arg;
    int n = c->comm.size;
    static const gw_dtype_t dts[] = {GW_INT32, GW_FLOAT64, GW_UINT8};
    for (int k = 0; k < a->ncounts; k++)
        for (int d = 0; d < 3; d++)
            for (int in_place = 0; in_place < 2; in_place++) {
                gw_dtype_t dt = dts[d];
                size_t m = a->counts[k], bytes = m * gw_dtype_size(dt);
                uint64_t seed = 9000 + (uint64_t)(k * 7 + d * 2 + in_place);
                unsigned char *in = malloc(bytes + 1), *orig = malloc(bytes + 1);
                unsigned char *out = malloc((size_t)n * bytes + 1);
                for (size_t i = 0; i < bytes; i++)
                    in[i] = (unsigned char)rnd(seed, c->rank, i);
                memcpy(orig, in, bytes);
                memset(out, 0xa5, (size_t)n * bytes);
                const void *sbuf = in;
                if (in_place) {
                    memcpy(out + (size_t)c->rank * bytes, in, bytes);
                    sbuf = out + (size_t)c->rank * bytes;
                }
                c->comm.chunk_bytes = chunk_for(a, m);
                begin(c, GW_COLL_ALLGATHER, m, dt, GW_SUM, 0);
                gw_status_t st = gw__allgather_ring(&c->comm, m ? sbuf : NULL, m ? out : NULL, m,
                                                    dt);
                char what[96];
                snprintf(what, sizeof(what), "allgather %s count %zu%s", gw_dtype_name(dt), m,
                         in_place ? " in place" : "");
                CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
                if (st == GW_OK) {
                    CHECK(c, memcmp(in, orig, bytes) == 0, "%s: sendbuf was modified", what);
                    for (int r = 0; r < n; r++)
                        for (size_t i = 0; i < bytes; i++)
                            if (out[(size_t)r * bytes + i] != (unsigned char)rnd(seed, r, i)) {
                                note(c, "%s: block %d byte %zu wrong", what, r, i);
                                r = n;
                                break;
                            }
                }
                sync_all(c);
                free(in);
                free(orig);
                free(out);
            }
}

Test(allgather, in_and_out_of_place, .timeout = 60)
{
    static const size_t counts[] = {0, 1, 7, 1023, 20000};
    sized_arg_t a = {counts, 5, 256};
    for (size_t k = 0; k < NNS; k++)
        job_run(test_ns[k], 10000, 1, allgather_body, &a);
}

/* -------------------------------- reduce-scatter -------------------------------- */

static void reduce_scatter_body(ctx_t *c, const void *arg)
{
    const sized_arg_t *a = arg;
    static const combo_t combos[] = {{GW_INT32, GW_SUM},   {GW_FLOAT32, GW_SUM},
                                     {GW_FLOAT64, GW_MIN}, {GW_INT64, GW_PROD},
                                     {GW_FLOAT16, GW_SUM}, {GW_BFLOAT16, GW_SUM}};
    int n = c->comm.size;
    uint64_t seed = 13000;
    for (int k = 0; k < a->ncounts; k++)
        for (size_t j = 0; j < sizeof(combos) / sizeof(combos[0]); j++)
            for (int in_place = 0; in_place < 2; in_place++) {
                gw_dtype_t dt = combos[j].dt;
                gw_op_t op = combos[j].op;
                size_t m = a->counts[k], es = gw_dtype_size(dt), total = (size_t)n * m;
                seed++;
                unsigned char *in = malloc(total * es + 1), *orig = malloc(total * es + 1);
                unsigned char *out = malloc(m * es + 1);
                for (size_t i = 0; i < total; i++)
                    gen_exact(dt, op, seed, c->rank, i, in);
                memcpy(orig, in, total * es);
                memset(out, 0xa5, m * es);
                void *rbuf = in_place ? in + (size_t)c->rank * m * es : out;
                c->comm.chunk_bytes = chunk_for(a, m);
                begin(c, GW_COLL_REDUCE_SCATTER, m, dt, op, 0);
                gw_status_t st =
                    gw__reduce_scatter_ring(&c->comm, m ? in : NULL, m ? rbuf : NULL, m, dt, op);
                char what[128];
                snprintf(what, sizeof(what), "reduce_scatter %s/%s count %zu%s",
                         gw_dtype_name(dt), gw_op_name(op), m, in_place ? " in place" : "");
                CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
                if (st == GW_OK) {
                    /* Everything but our own block of sendbuf stays as it was
                     * (all of it out of place). */
                    for (int b = 0; b < n; b++) {
                        if (in_place && b == c->rank)
                            continue;
                        size_t off = (size_t)b * m * es;
                        CHECK(c, memcmp(in + off, orig + off, m * es) == 0,
                              "%s: block %d of sendbuf was modified", what, b);
                    }
                    /* Check against the reference of our block: element i of
                     * the result is element rank * m + i of the inputs. */
                    for (size_t i = 0; i < m; i++) {
                        double fv;
                        int64_t iv;
                        ref_exact(dt, op, seed, n, (size_t)c->rank * m + i, &fv, &iv);
                        if (is_float(dt) ? get_f(dt, rbuf, i) != fv : get_i(dt, rbuf, i) != iv) {
                            note(c, "%s: element %zu is %g/%lld, expected %g/%lld", what, i,
                                 get_f(dt, rbuf, i), (long long)get_i(dt, rbuf, i), fv,
                                 (long long)iv);
                            break;
                        }
                    }
                }
                sync_all(c);
                free(in);
                free(orig);
                free(out);
            }
}

Test(reduce_scatter, in_and_out_of_place, .timeout = 60)
{
    static const size_t counts[] = {0, 1, 7, 1023, 5000};
    sized_arg_t a = {counts, 5, 256};
    for (size_t k = 0; k < NNS; k++)
        job_run(test_ns[k], 10000, 1, reduce_scatter_body, &a);
}

/* ----------------------------------- barrier ----------------------------------- */

static void barrier_body(ctx_t *c, const void *arg)
{
    (void)arg;
    int n = c->comm.size;
    for (int round = 1; round <= 20; round++) {
        /* One rank per round arrives late; nobody may leave before it came. */
        if (round % n == c->rank)
            usleep(2000);
        atomic_fetch_add(&c->job->counter, 1);
        begin(c, GW_COLL_BARRIER, 0, GW_UINT8, GW_SUM, 0);
        gw_status_t st = gw__barrier_dissemination(&c->comm);
        CHECK(c, st == GW_OK, "barrier round %d: %s", round, gw_status_name(st));
        int seen = atomic_load(&c->job->counter);
        CHECK(c, seen >= round * n, "barrier round %d: left after %d arrivals, expected %d",
              round, seen, round * n);
        sync_all(c); /* nobody starts the next round before all checked */
    }
}

Test(barrier, waits_for_everyone, .timeout = 60)
{
    for (int n = 2; n <= 9; n++)
        job_run(n, 10000, 1, barrier_body, NULL);
}

/* ------------------------------------ errors ------------------------------------ */

typedef struct fault_arg {
    int kind;  /* which collective */
    int fault; /* FAULT_* */
    gw_status_t expect;
    size_t count; /* elements (reduce-scatter: count / 8 per rank) */
} fault_arg_t;

enum { FAULT_COUNT, FAULT_OP, FAULT_ABSENT, FAULT_CLOSED };
enum { K_RING, K_TREE, K_RD, K_ALLGATHER, K_REDUCE_SCATTER, K_BARRIER, K_COUNT };
static const char *const kind_names[] = {"ring", "tree", "rd", "allgather", "reduce_scatter",
                                         "barrier"};

static gw_status_t run_kind(ctx_t *c, int kind, size_t count, gw_op_t op, void *buf, void *out)
{
    switch (kind) {
    case K_RING:
        begin(c, GW_COLL_ALLREDUCE, count, GW_INT32, op, 0);
        return gw__allreduce_ring(&c->comm, buf, out, count, GW_INT32, op);
    case K_TREE:
        begin(c, GW_COLL_ALLREDUCE, count, GW_INT32, op, 0);
        return gw__allreduce_tree(&c->comm, buf, out, count, GW_INT32, op);
    case K_RD:
        begin(c, GW_COLL_ALLREDUCE, count, GW_INT32, op, 0);
        return gw__allreduce_rd(&c->comm, buf, out, count, GW_INT32, op);
    case K_ALLGATHER:
        begin(c, GW_COLL_ALLGATHER, count, GW_INT32, op, 0);
        return gw__allgather_ring(&c->comm, buf, out, count, GW_INT32);
    case K_REDUCE_SCATTER:
        begin(c, GW_COLL_REDUCE_SCATTER, count / 8, GW_INT32, op, 0);
        return gw__reduce_scatter_ring(&c->comm, buf, out, count / 8, GW_INT32, op);
    default:
        begin(c, GW_COLL_BARRIER, count, GW_UINT8, op, 0);
        return gw__barrier_dissemination(&c->comm);
    }
}

static void fault_body(ctx_t *c, const void *arg)
{
    const fault_arg_t *a = arg;
    int n = c->comm.size, odd = c->rank == n - 1;
    size_t count = a->count;
    int32_t *buf = calloc(count + 8, sizeof(int32_t));
    int32_t *out = calloc((count + 8) * (size_t)n, sizeof(int32_t));
    /* The failures are the point here; keep their log lines out of the
     * test output. */
    c->comm.log.level = GW_LOG_NONE;
    if (odd && (a->fault == FAULT_ABSENT || a->fault == FAULT_CLOSED)) {
        if (a->fault == FAULT_CLOSED) {
            c->comm.transport->ops->close(c->comm.transport);
            c->comm.transport = NULL;
        }
        sync_all(c); /* stay away until the others have given up */
    } else {
        if (odd && a->fault == FAULT_COUNT)
            count += 8;
        gw_op_t op = odd && a->fault == FAULT_OP ? GW_MAX : GW_SUM;
        int64_t t0 = gw__now_ms();
        gw_status_t st = run_kind(c, a->kind, count, op, buf, out);
        int64_t took = gw__now_ms() - t0;
        CHECK(c, st == a->expect, "%s: got %s, expected %s", kind_names[a->kind],
              gw_status_name(st), gw_status_name(a->expect));
        CHECK(c, c->comm.failed == st, "%s: comm->failed is %s after %s", kind_names[a->kind],
              gw_status_name(c->comm.failed), gw_status_name(st));
        /* Mismatches and closed peers are reported at once, not by timeout. */
        if (a->fault != FAULT_ABSENT)
            CHECK(c, took < c->comm.timeout_ms / 2, "%s: took %lld ms", kind_names[a->kind],
                  (long long)took);
        /* A failed communicator stays failed. */
        gw_status_t again = run_kind(c, a->kind, count, op, buf, out);
        CHECK(c, again == st, "%s: second call gave %s", kind_names[a->kind],
              gw_status_name(again));
        if (a->fault == FAULT_ABSENT || a->fault == FAULT_CLOSED)
            sync_all(c);
    }
    free(buf);
    free(out);
}

Test(errors, mismatched_arguments_fail_every_rank, .timeout = 60)
{
    for (int kind = 0; kind < K_COUNT; kind++)
        for (int n = 2; n <= 5; n++) {
            fault_arg_t op = {kind, FAULT_OP, GW_ERR_MISMATCH, 800};
            job_run(n, 10000, n % 2, fault_body, &op);
            /* Empty buffers still exchange (zero-length) messages, so a
             * disagreement is caught there too. */
            fault_arg_t empty = {kind, FAULT_OP, GW_ERR_MISMATCH, 0};
            job_run(n, 10000, (n + 1) % 2, fault_body, &empty);
            if (kind != K_BARRIER) {
                fault_arg_t count = {kind, FAULT_COUNT, GW_ERR_MISMATCH, 800};
                job_run(n, 10000, (n + 1) % 2, fault_body, &count);
            }
        }
}

Test(errors, absent_rank_times_out, .timeout = 60)
{
    for (int kind = 0; kind < K_COUNT; kind++) {
        fault_arg_t a = {kind, FAULT_ABSENT, GW_ERR_TIMEOUT, 800};
        job_run(4, 300, kind % 2, fault_body, &a);
    }
}

Test(errors, closed_peer_fails_fast, .timeout = 60)
{
    for (int kind = 0; kind < K_COUNT; kind++) {
        fault_arg_t a = {kind, FAULT_CLOSED, GW_ERR_REMOTE, 800};
        job_run(3, 10000, kind % 2, fault_body, &a);
    }
}
