/*
 * engine_host.c - a copy engine over ordinary memory, for tests: the
 * staging pipeline's logic runs against it on machines without a GPU.
 *
 * Regions of ordinary memory are declared "device memory" (pointer_device
 * says so for any address inside one). Copies are not performed when they
 * are issued: each stream keeps a queue of its copies and event records,
 * and a queue runs only as far as an event that someone queries (after
 * opts.query_delay queries that say "not yet") or waits for. A stream that
 * waits for another stream's event first runs that stream up to it. So
 * copies happen as late as the interface allows, streams complete in
 * whatever order the caller looks at them, and a pipeline that reads a
 * pinned buffer, or reuses one, before an event said its copy was done
 * reads or clobbers data that is not there yet: the results are wrong and
 * a test sees it. The log records every issue, every copy performed and
 * every event found done, in order, so tests can also check how the
 * pipeline overlapped its copies with the network.
 *
 * opts.fail_copy makes the n-th copy fail when it runs; the event behind
 * it then reports GW_ERR_SYSTEM with an error naming the copy.
 *
 * Reductions (reduce, finish_avg) are queued and deferred like copies and
 * computed, when their stream runs, by the CPU kernels themselves
 * (gw__reduce, gw__reduce_finish_avg): the stand-in for the CUDA kernels,
 * which are bitwise those (checked on a GPU by tests/cuda). A caller that
 * reads a reduction's output before waiting for an event behind it reads
 * the old data; one that reduced on the host instead leaves no reduction
 * in the log. dmabuf_fd exports declared device memory as a memfd when
 * opts.dmabuf is set, and refuses otherwise, naming why, as a driver
 * without dmabuf support does.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "collectives/device/copy_engine.h"
#include "collectives/reduce_kernels.h"

enum { OP_D2H, OP_H2D, OP_RECORD, OP_WAIT, OP_REDUCE, OP_AVG };

struct host_event;

typedef struct host_op {
    int kind;
    void *dst;
    const void *src;
    size_t len;
    struct host_event *ev; /* RECORD, WAIT */
    uint64_t gen;          /* RECORD: the record it completes; WAIT: the one it waits for */
    const void *b;         /* REDUCE: the second operand (src is the first) */
    size_t count;          /* REDUCE, AVG */
    gw_dtype_t dtype;
    gw_op_t op;
    int nranks; /* AVG */
} host_op_t;

typedef struct host_stream {
    host_op_t *ops;
    size_t n, cap, head; /* ops[head..n) still queued */
    gw_status_t failed;  /* sticky: a copy on this stream failed */
} host_stream_t;

typedef struct host_event {
    host_stream_t *stream; /* of the last record; NULL: never recorded */
    uint64_t gen;          /* records so far */
    uint64_t done_gen;     /* the latest record that ran */
    int complete, queries;
    gw_status_t failed;
} host_event_t;

typedef struct host_region {
    const char *lo;
    size_t len;
    int dev;
} host_region_t;

typedef struct host_engine {
    pthread_mutex_t lock;
    gw_host_engine_opts_t opts;
    host_region_t regions[64];
    int nregions;
    int copies;  /* performed so far */
    int reduces; /* reductions performed so far */
    size_t live_allocs;
    size_t allocs; /* every host_alloc so far */
    gw_host_log_entry_t *log;
    size_t nlog, caplog;
    char err[160];
} host_engine_t;

static void log_op(host_engine_t *e, gw_host_op_t op, const void *dst, const void *src, size_t len)
{
    if (e->nlog == e->caplog) {
        size_t cap = e->caplog ? 2 * e->caplog : 256;
        gw_host_log_entry_t *p = realloc(e->log, cap * sizeof(*p));
        if (!p)
            return; /* the log is best effort; the copies are not */
        e->log = p;
        e->caplog = cap;
    }
    e->log[e->nlog++] = (gw_host_log_entry_t){op, dst, src, len};
}

static gw_status_t push(host_engine_t *e, host_stream_t *s, host_op_t op)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        host_op_t *p = realloc(s->ops, cap * sizeof(*p));
        if (!p) {
            snprintf(e->err, sizeof(e->err), "host engine: out of memory for a stream's queue");
            return GW_ERR_NO_MEMORY;
        }
        s->ops = p;
        s->cap = cap;
    }
    s->ops[s->n++] = op;
    return GW_OK;
}

static void run_until(host_engine_t *e, host_stream_t *s, const host_event_t *ev, uint64_t gen);

/* Run one queued op. */
static void run_op(host_engine_t *e, host_stream_t *s, host_op_t *op)
{
    switch (op->kind) {
    case OP_D2H:
    case OP_H2D:
        e->copies++;
        if (s->failed == GW_OK && e->opts.fail_copy == e->copies) {
            snprintf(e->err, sizeof(e->err), "host engine: copy #%d of %zu bytes failed (injected)",
                     e->copies, op->len);
            s->failed = GW_ERR_SYSTEM;
        }
        if (s->failed == GW_OK) {
            memcpy(op->dst, op->src, op->len);
            log_op(e, op->kind == OP_D2H ? GW_HOST_DONE_D2H : GW_HOST_DONE_H2D, op->dst, op->src,
                   op->len);
        }
        break;
    case OP_REDUCE:
    case OP_AVG:
        e->reduces++;
        if (s->failed == GW_OK && e->opts.fail_reduce == e->reduces) {
            snprintf(e->err, sizeof(e->err), "host engine: reduction #%d failed (injected)",
                     e->reduces);
            s->failed = GW_ERR_SYSTEM;
        }
        if (op->kind == OP_AVG) {
            if (s->failed == GW_OK)
                gw__reduce_finish_avg(op->dst, op->count, op->dtype, op->nranks);
            break;
        }
        if (s->failed == GW_OK) {
            gw__reduce(op->dst, op->src, op->b, op->count, op->dtype, op->op);
            log_op(e, GW_HOST_DONE_REDUCE, op->dst, op->src, op->len);
        }
        break;
    case OP_RECORD:
        if (op->gen > op->ev->done_gen)
            op->ev->done_gen = op->gen;
        if (op->ev->gen == op->gen && op->ev->stream == s) {
            op->ev->complete = 1;
            op->ev->failed = s->failed;
        }
        break;
    case OP_WAIT: /* as CUDA: the record the event had when the wait was queued */
        if (op->ev->stream && op->ev->done_gen < op->gen)
            run_until(e, op->ev->stream, op->ev, op->gen);
        break;
    }
}

/* Run s's queue up to and including the record of ev's generation gen (all
 * of it when ev is NULL). */
static void run_until(host_engine_t *e, host_stream_t *s, const host_event_t *ev, uint64_t gen)
{
    while (s->head < s->n) {
        host_op_t op = s->ops[s->head++];
        run_op(e, s, &op);
        if (ev && op.kind == OP_RECORD && op.ev == ev && op.gen == gen)
            break;
    }
    if (s->head == s->n)
        s->head = s->n = 0;
}

static gw_status_t pointer_device(void *eng, const void *ptr, int *device)
{
    host_engine_t *e = eng;
    pthread_mutex_lock(&e->lock);
    *device = -1;
    for (int i = 0; i < e->nregions; i++) {
        const host_region_t *r = &e->regions[i];
        if ((const char *)ptr >= r->lo && (const char *)ptr < r->lo + r->len)
            *device = r->dev;
    }
    pthread_mutex_unlock(&e->lock);
    return GW_OK;
}

static gw_status_t device_count(void *eng, int *count)
{
    (void)eng;
    *count = 1;
    return GW_OK;
}

static gw_status_t device_name(void *eng, int device, char *buf, size_t cap)
{
    (void)eng;
    snprintf(buf, cap, "host memory %d", device);
    return GW_OK;
}

static gw_status_t set_device(void *eng, int device)
{
    (void)eng;
    (void)device;
    return GW_OK;
}

static gw_status_t host_alloc(void *eng, size_t len, void **out)
{
    host_engine_t *e = eng;
    void *p = malloc(len ? len : 1);
    if (!p) {
        snprintf(e->err, sizeof(e->err), "host engine: cannot allocate %zu bytes", len);
        return GW_ERR_NO_MEMORY;
    }
    pthread_mutex_lock(&e->lock);
    e->live_allocs++;
    e->allocs++;
    pthread_mutex_unlock(&e->lock);
    *out = p;
    return GW_OK;
}

static void host_free(void *eng, void *ptr)
{
    host_engine_t *e = eng;
    if (!ptr)
        return;
    pthread_mutex_lock(&e->lock);
    e->live_allocs--;
    pthread_mutex_unlock(&e->lock);
    free(ptr);
}

static gw_status_t stream_create(void *eng, void **out)
{
    host_engine_t *e = eng;
    host_stream_t *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(e->err, sizeof(e->err), "host engine: out of memory for a stream");
        return GW_ERR_NO_MEMORY;
    }
    *out = s;
    return GW_OK;
}

static void stream_destroy(void *eng, void *stream)
{
    host_engine_t *e = eng;
    host_stream_t *s = stream;
    if (!s)
        return;
    /* As cudaStreamDestroy: what is queued still runs. */
    pthread_mutex_lock(&e->lock);
    run_until(e, s, NULL, 0);
    pthread_mutex_unlock(&e->lock);
    free(s->ops);
    free(s);
}

static gw_status_t copy(host_engine_t *e, int kind, void *dst, const void *src, size_t len,
                        host_stream_t *s)
{
    pthread_mutex_lock(&e->lock);
    log_op(e, kind == OP_D2H ? GW_HOST_ISSUE_D2H : GW_HOST_ISSUE_H2D, dst, src, len);
    gw_status_t st = push(e, s, (host_op_t){.kind = kind, .dst = dst, .src = src, .len = len});
    pthread_mutex_unlock(&e->lock);
    return st;
}

static gw_status_t copy_d2h(void *eng, void *dst, const void *src, size_t len, void *stream)
{
    return copy(eng, OP_D2H, dst, src, len, stream);
}

static gw_status_t copy_h2d(void *eng, void *dst, const void *src, size_t len, void *stream)
{
    return copy(eng, OP_H2D, dst, src, len, stream);
}

/* A reduction on stream (NULL: the idle default stream, so at once). */
static gw_status_t queue_math(host_engine_t *e, host_op_t op, host_stream_t *s)
{
    pthread_mutex_lock(&e->lock);
    gw_status_t st = GW_OK;
    if (op.kind == OP_REDUCE)
        log_op(e, GW_HOST_ISSUE_REDUCE, op.dst, op.src, op.len);
    if (s)
        st = push(e, s, op);
    else {
        host_stream_t now = {0};
        run_op(e, &now, &op);
        st = now.failed;
    }
    pthread_mutex_unlock(&e->lock);
    return st;
}

static gw_status_t reduce(void *eng, void *out, const void *a, const void *b, size_t count,
                          gw_dtype_t dtype, gw_op_t op, void *stream)
{
    host_engine_t *e = eng;
    size_t esize = gw_dtype_size(dtype);
    if (esize == 0 || (unsigned)op >= GW_OP_COUNT) {
        snprintf(e->err, sizeof(e->err), "host engine: reduce of dtype %d, op %d refused",
                 (int)dtype, (int)op);
        return GW_ERR_INVALID_ARG;
    }
    return queue_math(e,
                      (host_op_t){.kind = OP_REDUCE,
                                  .dst = out,
                                  .src = a,
                                  .b = b,
                                  .len = count * esize,
                                  .count = count,
                                  .dtype = dtype,
                                  .op = op},
                      stream);
}

static gw_status_t finish_avg(void *eng, void *buf, size_t count, gw_dtype_t dtype, int nranks,
                              void *stream)
{
    return queue_math(
        eng,
        (host_op_t){.kind = OP_AVG, .dst = buf, .count = count, .dtype = dtype, .nranks = nranks},
        stream);
}

static gw_status_t dmabuf_fd(void *eng, const void *ptr, size_t len, int *fd, uint64_t *offset)
{
    host_engine_t *e = eng;
    int dev = -1;
    pointer_device(eng, ptr, &dev);
    pthread_mutex_lock(&e->lock);
    log_op(e, GW_HOST_DMABUF, NULL, ptr, len);
    pthread_mutex_unlock(&e->lock);
    if (dev < 0) {
        snprintf(e->err, sizeof(e->err), "host engine: %p is not device memory", ptr);
        return GW_ERR_UNSUPPORTED;
    }
    if (!e->opts.dmabuf) {
        snprintf(e->err, sizeof(e->err),
                 "host engine: dmabuf export refused (CUDA_ERROR_NOT_SUPPORTED stand-in)");
        return GW_ERR_UNSUPPORTED;
    }
    *fd = memfd_create("gw-host-dmabuf", MFD_CLOEXEC);
    if (*fd < 0) {
        snprintf(e->err, sizeof(e->err), "host engine: memfd_create failed");
        return GW_ERR_SYSTEM;
    }
    *offset = 0;
    return GW_OK;
}

static gw_status_t event_create(void *eng, void **out)
{
    host_engine_t *e = eng;
    host_event_t *ev = calloc(1, sizeof(*ev));
    if (!ev) {
        snprintf(e->err, sizeof(e->err), "host engine: out of memory for an event");
        return GW_ERR_NO_MEMORY;
    }
    ev->complete = 1; /* as CUDA's: an event never recorded is complete */
    *out = ev;
    return GW_OK;
}

static void event_destroy(void *eng, void *event)
{
    (void)eng;
    free(event);
}

static gw_status_t event_record(void *eng, void *event, void *stream)
{
    host_engine_t *e = eng;
    host_event_t *ev = event;
    pthread_mutex_lock(&e->lock);
    ev->gen++;
    if (!stream) { /* an idle default stream: complete at once */
        ev->stream = NULL;
        ev->complete = 1;
        ev->failed = GW_OK;
        pthread_mutex_unlock(&e->lock);
        return GW_OK;
    }
    ev->stream = stream;
    ev->complete = 0;
    ev->queries = 0;
    ev->failed = GW_OK;
    log_op(e, GW_HOST_RECORD, NULL, NULL, 0);
    gw_status_t st = push(e, stream, (host_op_t){.kind = OP_RECORD, .ev = ev, .gen = ev->gen});
    pthread_mutex_unlock(&e->lock);
    return st;
}

/* Complete ev (the lock held): run its stream up to its record. */
static gw_status_t complete(host_engine_t *e, host_event_t *ev)
{
    if (!ev->complete) {
        run_until(e, ev->stream, ev, ev->gen);
        log_op(e, GW_HOST_EVENT_DONE, NULL, NULL, 0);
    }
    return ev->failed;
}

static gw_status_t event_query(void *eng, void *event, int *done)
{
    host_engine_t *e = eng;
    host_event_t *ev = event;
    gw_status_t st = GW_OK;
    pthread_mutex_lock(&e->lock);
    if (!ev->complete && ev->queries < e->opts.query_delay) {
        ev->queries++;
        *done = 0;
    } else {
        st = complete(e, ev);
        *done = 1;
    }
    pthread_mutex_unlock(&e->lock);
    return st;
}

static gw_status_t event_wait(void *eng, void *event)
{
    host_engine_t *e = eng;
    pthread_mutex_lock(&e->lock);
    gw_status_t st = complete(e, event);
    pthread_mutex_unlock(&e->lock);
    return st;
}

static gw_status_t stream_wait_event(void *eng, void *stream, void *event)
{
    host_engine_t *e = eng;
    if (!stream)
        return event_wait(eng, event); /* the default stream: wait right away */
    pthread_mutex_lock(&e->lock);
    host_event_t *ev = event;
    gw_status_t st = push(e, stream, (host_op_t){.kind = OP_WAIT, .ev = ev, .gen = ev->gen});
    pthread_mutex_unlock(&e->lock);
    return st;
}

static const char *error(void *eng) { return ((host_engine_t *)eng)->err; }

static void destroy(void *eng)
{
    host_engine_t *e = eng;
    pthread_mutex_destroy(&e->lock);
    free(e->log);
    free(e);
}

static const gw_copy_engine_ops_t host_engine_ops = {
    .size = sizeof(gw_copy_engine_ops_t),
    .name = "host",
    .pointer_device = pointer_device,
    .device_count = device_count,
    .device_name = device_name,
    .set_device = set_device,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .copy_d2h = copy_d2h,
    .copy_h2d = copy_h2d,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .event_query = event_query,
    .event_wait = event_wait,
    .stream_wait_event = stream_wait_event,
    .error = error,
    .destroy = destroy,
    .reduce = reduce,
    .finish_avg = finish_avg,
    .dmabuf_fd = dmabuf_fd,
};

gw_status_t gw__host_engine_create(const gw_host_engine_opts_t *opts, gw_copy_engine_t *out)
{
    host_engine_t *e = calloc(1, sizeof(*e));
    if (!e)
        return GW_ERR_NO_MEMORY;
    pthread_mutex_init(&e->lock, NULL);
    if (opts)
        e->opts = *opts;
    snprintf(e->err, sizeof(e->err), "no error");
    out->ops = &host_engine_ops;
    out->impl = e;
    return GW_OK;
}

gw_status_t gw__host_engine_declare(gw_copy_engine_t *eng, const void *ptr, size_t len, int dev)
{
    host_engine_t *e = eng->impl;
    pthread_mutex_lock(&e->lock);
    gw_status_t st = GW_ERR_INVALID_ARG;
    if (e->nregions < (int)(sizeof(e->regions) / sizeof(e->regions[0]))) {
        e->regions[e->nregions++] = (host_region_t){ptr, len, dev};
        st = GW_OK;
    }
    pthread_mutex_unlock(&e->lock);
    return st;
}

void gw__host_engine_log(gw_copy_engine_t *eng, const gw_host_log_entry_t **entries, size_t *n)
{
    host_engine_t *e = eng->impl;
    *entries = e->log;
    *n = e->nlog;
}

size_t gw__host_engine_live_allocs(gw_copy_engine_t *eng)
{
    return ((host_engine_t *)eng->impl)->live_allocs;
}

size_t gw__host_engine_allocs(gw_copy_engine_t *eng)
{
    return ((host_engine_t *)eng->impl)->allocs;
}
