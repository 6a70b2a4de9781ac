/*
 * rank_threads.h - one thread per rank over the in-memory transport
 * (mem_transport.c), with communicators built by hand so that internal gw__
 * entry points can be called directly: the harness under the algorithm tests
 * (algo_test_util.h) and the compression tests (test_compress_harness.h).
 *
 * Worker threads never assert (that would skip the other ranks' cleanup and
 * leave them waiting); they note failures, which threads_run reports at the
 * end. check_agree compares every rank's result bitwise with rank 0's.
 * Header-only, every function static inline.
 */
#ifndef GW_TESTS_RANK_THREADS_H
#define GW_TESTS_RANK_THREADS_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/coll.h"
#include "mem_transport.c"

#define MAXN 16

typedef struct job job_t;

/* One rank: its thread's communicator and the failures it noticed. */
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
    atomic_int counter; /* for the barrier test */
};

/* Record a failure (the first few are kept) and go on. */
static inline void note(ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void note(ctx_t *c, const char *fmt, ...)
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

#define CHECK(c, cond, ...)         \
    do {                            \
        if (!(cond))                \
            note((c), __VA_ARGS__); \
    } while (0)

static inline void *rank_thread_main(void *p)
{
    ctx_t *c = p;
    c->job->body(c, c->job->arg);
    return NULL;
}

/* How threads_run builds the communicators. */
typedef struct threads_opts {
    int timeout_ms;
    int rendezvous;    /* mem_transport: receiver-driven instead of eager */
    int tuning;        /* load the cost model's defaults (as gw_comm_init does) */
    const char *label; /* in failure reports, e.g. "rendezvous" */
    /* Host ids of the ranks (n entries): the communicators get the topology
     * (core/topo.h) that gw_comm_init would build from them. NULL: none,
     * and the algorithms use rank order. */
    const uint64_t *host_ids;
} threads_opts_t;

/* Run body on n threads, one per rank (n = 1: a communicator of one rank,
 * no transport), over a fresh fabric, then report every rank's failures. */
static inline void threads_run(int n, const threads_opts_t *o, body_fn body, const void *arg)
{
    cr_assert(n >= 1 && n <= MAXN);
    job_t *job = calloc(1, sizeof(*job));
    cr_assert_not_null(job);
    job->n = n;
    job->body = body;
    job->arg = arg;
    if (n > 1) {
        job->fab = memt_fabric_create(n, o->rendezvous);
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
        comm->timeout_ms = o->timeout_ms;
        comm->algo = GW_ALGO_AUTO;
        comm->failed = GW_OK;
        if (o->tuning)
            gw__tuning_defaults(&comm->tuning, n > 1 ? "tcp" : "self");
        comm->chunk_bytes = 4096;
        if (n > 1)
            cr_assert_eq(memt_open(job->fab, r, &comm->log, &comm->transport), GW_OK);
        if (o->host_ids)
            cr_assert_eq(gw__topo_build(o->host_ids, n, &comm->topo), GW_OK);
    }
    pthread_t th[MAXN];
    for (int r = 0; r < n; r++)
        cr_assert_eq(pthread_create(&th[r], NULL, rank_thread_main, &job->ctx[r]), 0);
    for (int r = 0; r < n; r++)
        pthread_join(th[r], NULL);
    char msg[MAXN][2200];
    int bad[MAXN];
    for (int r = 0; r < n; r++) {
        ctx_t *c = &job->ctx[r];
        bad[r] = c->nerr;
        snprintf(msg[r], sizeof(msg[r]), "n=%d%s%s%s rank %d: %d failures: %s", n,
                 o->label ? " (" : "", o->label ? o->label : "", o->label ? ")" : "", r, c->nerr,
                 c->err);
        if (c->comm.transport)
            c->comm.transport->ops->close(c->comm.transport);
        free(c->comm.scratch);
        gw__topo_free(&c->comm.topo);
        gw__logger_fini(&c->comm.log);
    }
    if (job->fab)
        memt_fabric_destroy(job->fab);
    pthread_barrier_destroy(&job->bar);
    free(job);
    for (int r = 0; r < n; r++)
        cr_expect_eq(bad[r], 0, "%s", msg[r]);
}

static inline void sync_all(ctx_t *c) { pthread_barrier_wait(&c->job->bar); }

/* Publish buf and compare it bitwise with rank 0's. */
static inline void check_agree(ctx_t *c, const char *what, const void *buf, size_t bytes)
{
    c->job->shared[c->rank] = buf;
    sync_all(c);
    if (c->rank != 0 && bytes > 0 && memcmp(buf, c->job->shared[0], bytes) != 0)
        note(c, "%s: %zu bytes differ from rank 0's", what, bytes);
    sync_all(c);
}

#endif /* GW_TESTS_RANK_THREADS_H */
