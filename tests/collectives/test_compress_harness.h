/*
 * test_compress_harness.h - one thread per rank over the in-memory transport
 * (mem_transport.c), with communicators built by hand as in
 * test_algorithms.c, for the gradient-compression tests. Header-only: each
 * test_compress*.c includes it once.
 *
 * Worker threads never assert (that would skip the other ranks' cleanup and
 * leave them waiting); they note failures, which job_run reports at the end.
 */
#ifndef GW_TESTS_COMPRESS_HARNESS_H
#define GW_TESTS_COMPRESS_HARNESS_H

#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/coll.h"
#include "collectives/compress/codec.h"
#include "mem_transport.c"

#define MAXN 8

typedef struct job job_t;

typedef struct ctx {
    job_t *job;
    int rank;
    gw_comm_t comm;
    int nerr;
    char err[2048];
} ctx_t;

typedef void (*body_fn)(ctx_t *c, const void *arg);

struct job {
    int n;
    memt_fabric_t *fab;
    pthread_barrier_t bar;
    body_fn body;
    const void *arg;
    ctx_t ctx[MAXN];
    const void *shared[MAXN]; /* what each rank published */
    const void *shared2[MAXN];
};

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

/* Run body on n threads (n = 1: a communicator of one rank, no transport). */
static void job_run(int n, body_fn body, const void *arg)
{
    cr_assert(n >= 1 && n <= MAXN);
    job_t *job = calloc(1, sizeof(*job));
    cr_assert_not_null(job);
    job->n = n;
    job->body = body;
    job->arg = arg;
    if (n > 1) {
        job->fab = memt_fabric_create(n, 1);
        cr_assert_not_null(job->fab);
    }
    pthread_barrier_init(&job->bar, NULL, (unsigned)n);
    for (int r = 0; r < n; r++) {
        ctx_t *c = &job->ctx[r];
        c->job = job;
        c->rank = r;
        gw_comm_t *comm = &c->comm;
        comm->rank = r;
        comm->size = n;
        gw__logger_init(&comm->log, r);
        comm->timeout_ms = 20000;
        comm->algo = GW_ALGO_AUTO;
        comm->failed = GW_OK;
        gw__tuning_defaults(&comm->tuning, n > 1 ? "tcp" : "self");
        comm->chunk_bytes = 4096;
        if (n > 1)
            cr_assert_eq(memt_open(job->fab, r, &comm->log, &comm->transport), GW_OK);
    }
    pthread_t th[MAXN];
    for (int r = 0; r < n; r++)
        cr_assert_eq(pthread_create(&th[r], NULL, thread_main, &job->ctx[r]), 0);
    for (int r = 0; r < n; r++)
        pthread_join(th[r], NULL);
    char msg[MAXN][2100];
    int bad[MAXN];
    for (int r = 0; r < n; r++) {
        ctx_t *c = &job->ctx[r];
        bad[r] = c->nerr;
        snprintf(msg[r], sizeof(msg[r]), "n=%d rank %d: %d failures: %s", n, r, c->nerr, c->err);
        if (c->comm.transport)
            c->comm.transport->ops->close(c->comm.transport);
        free(c->comm.scratch);
        gw__logger_fini(&c->comm.log);
    }
    if (job->fab)
        memt_fabric_destroy(job->fab);
    pthread_barrier_destroy(&job->bar);
    free(job);
    for (int r = 0; r < n; r++)
        cr_expect_eq(bad[r], 0, "%s", msg[r]);
}

static void sync_all(ctx_t *c) { pthread_barrier_wait(&c->job->bar); }

/* Publish buf and compare it bitwise with rank 0's. */
static inline void check_agree(ctx_t *c, const char *what, const void *buf, size_t bytes)
{
    c->job->shared[c->rank] = buf;
    sync_all(c);
    if (c->rank != 0 && bytes > 0 && memcmp(buf, c->job->shared[0], bytes) != 0)
        note(c, "%s: %zu bytes differ from rank 0's", what, bytes);
    sync_all(c);
}

/* ---- inputs ---- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A gradient-like value: roughly normal (sum of four uniforms), with a
 * per-element scale spread over a few decades, distinct per (seed, rank, i). */
static inline float grad(uint64_t seed, int rank, size_t i)
{
    uint64_t h = mix64(seed * 0x100000001b3ull ^ (uint64_t)rank << 40 ^ (uint64_t)i);
    double s = 0;
    for (int k = 0; k < 4; k++)
        s += (double)((h >> (16 * k)) & 0xffff) / 65536.0 - 0.5;
    double decade = pow(10.0, -(double)(mix64(h) % 3));
    return (float)(s * decade);
}

static inline gw_compress_config_t config(gw_codec_t codec)
{
    gw_compress_config_t cfg;
    gw_compress_config_init(&cfg);
    cfg.codec = codec;
    cfg.min_elements = 0;
    cfg.bucket_elements = 256;
    cfg.topk_ratio = 0.05;
    cfg.powersgd_rank = 2;
    return cfg;
}

/* A rows x cols shape for count elements: PowerSGD wants a matrix. */
static inline void shape_of(size_t count, size_t *rows, size_t *cols)
{
    size_t c = 1;
    for (size_t d = 2; d * d <= count; d++)
        if (count % d == 0)
            c = d;
    *rows = count / c;
    *cols = c;
}

static const gw_codec_t all_codecs[] = {GW_CODEC_NONE, GW_CODEC_FP16, GW_CODEC_BF16,
                                        GW_CODEC_INT8, GW_CODEC_SIGN, GW_CODEC_TOPK,
                                        GW_CODEC_POWERSGD};
#define NCODECS (sizeof(all_codecs) / sizeof(all_codecs[0]))

#endif
