/*
 * ib_test_util.h - the harness of the verbs transport's device tests
 * (test_ib_live.c, test_ib_lazy.c): n transports in one process, one
 * thread per rank, opened and connected together, each running a body.
 * Skips the test where no active RDMA port exists (here: everywhere but
 * scripts/rxe-vm, which runs them over Soft-RoCE).
 */
#ifndef GW_TESTS_IB_TEST_UTIL_H
#define GW_TESTS_IB_TEST_UTIL_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/clock.h"
#include "transport/ib/ib_internal.h"

#define MAXR 4
#define DEADLINE_MS 30000

typedef struct rank {
    int rank, size;
    gw_logger_t lg;
    gw_transport_t *t;
    const uint8_t *all;
    gw_status_t connect_st;
    int (*body)(struct rank *r);
    int result;
    const void *arg;
} rank_t;

typedef struct job {
    int n;
    rank_t r[MAXR];
    uint8_t all[MAXR * GW_TRANSPORT_ADDR_MAX];
} job_t;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", r->rank, __FILE__, __LINE__, \
                    #cond);                                                                    \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

static inline void *connect_thread(void *arg)
{
    rank_t *r = arg;
    r->connect_st = r->t->ops->connect(r->t, r->all);
    return NULL;
}

static inline void *body_thread(void *arg)
{
    rank_t *r = arg;
    r->result = r->body(r);
    return NULL;
}

/* Open and connect n ranks, those in lazy_mask (bit r for rank r) to
 * connect pairs on first use (params.lazy), with the transports'
 * timeout_ms, rank r with GW_IB_HCA=hca[r] where hca is given (the
 * variable keeps the last one); skips the test when there is no RDMA here. With check set,
 * every connect() must succeed; otherwise the caller looks at connect_st. */
static inline void job_open_connect_hca(job_t *j, int n, const char *cm, unsigned lazy_mask,
                                        int check, int timeout_ms, const char *const *hca)
{
    memset(j, 0, sizeof(*j));
    j->n = n;
    setenv("GW_IB_CM", cm, 1);
    const char *dbg = getenv("GW_TEST_DEBUG");
    for (int i = 0; i < n; i++) {
        rank_t *r = &j->r[i];
        if (hca && hca[i]) /* this rank's ports (and so its rails) */
            setenv("GW_IB_HCA", hca[i], 1);
        r->rank = i;
        r->size = n;
        r->lg.level = !dbg ? GW_LOG_ERROR : strcmp(dbg, "trace") == 0 ? GW_LOG_TRACE : GW_LOG_INFO;
        r->lg.rank = i;
        r->lg.file = stderr;
        strcpy(r->lg.host, "live");
        gw_transport_params_t p;
        memset(&p, 0, sizeof(p));
        p.rank = i;
        p.size = n;
        p.log = &r->lg;
        p.timeout_ms = timeout_ms;
        p.nsocks = 1;
        p.lazy = (lazy_mask >> i) & 1;
        for (int k = 0; k < 16; k++)
            p.job_id[k] = (uint8_t)(0x40 + k);
        struct sockaddr_in *lo = (struct sockaddr_in *)&p.default_addr;
        lo->sin_family = AF_INET;
        lo->sin_addr.s_addr = htonl(0x7f000001);
        p.default_addr_len = sizeof(*lo);
        gw_status_t st = gw__ib_transport_ops.open(&p, &r->t, j->all + i * GW_TRANSPORT_ADDR_MAX);
        if (st == GW_ERR_NOT_FOUND || st == GW_ERR_UNSUPPORTED) {
            for (int k = 0; k < i; k++)
                j->r[k].t->ops->close(j->r[k].t);
            cr_skip_test("no usable RDMA port here (%s); run under scripts/rxe-vm",
                         gw_status_name(st));
        }
        cr_assert_eq(st, GW_OK, "open of rank %d: %s", i, gw_status_name(st));
    }
    pthread_t th[MAXR];
    for (int i = 0; i < n; i++) {
        j->r[i].all = j->all;
        pthread_create(&th[i], NULL, connect_thread, &j->r[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; check && i < n; i++)
        cr_assert_eq(j->r[i].connect_st, GW_OK, "connect of rank %d: %s", i,
                     gw_status_name(j->r[i].connect_st));
}

/* The same, every rank with the process's GW_IB_HCA. */
static inline void job_open_connect_ms(job_t *j, int n, const char *cm, unsigned lazy_mask,
                                       int check, int timeout_ms)
{
    job_open_connect_hca(j, n, cm, lazy_mask, check, timeout_ms, NULL);
}

/* The same with the transports' timeout_ms of 20 s. */
static inline void job_open_connect(job_t *j, int n, const char *cm, unsigned lazy_mask, int check)
{
    job_open_connect_ms(j, n, cm, lazy_mask, check, 20000);
}

/* Open and connect n ranks that connect every pair in connect(). */
static inline void job_start(job_t *j, int n, const char *cm) { job_open_connect(j, n, cm, 0, 1); }

static inline void job_run(job_t *j, int (*body)(rank_t *), const void *arg)
{
    pthread_t th[MAXR];
    for (int i = 0; i < j->n; i++) {
        j->r[i].body = body;
        j->r[i].arg = arg;
        pthread_create(&th[i], NULL, body_thread, &j->r[i]);
    }
    for (int i = 0; i < j->n; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < j->n; i++)
        cr_assert_eq(j->r[i].result, 0, "rank %d failed (see its output)", i);
}

static inline void job_end(job_t *j)
{
    for (int i = 0; i < j->n; i++)
        if (j->r[i].t)
            j->r[i].t->ops->close(j->r[i].t);
}

static inline void post(rank_t *r, gw_request_t *q, gw_req_kind_t kind, int peer, void *buf,
                        size_t len, uint64_t seq, uint32_t sig)
{
    memset(q, 0, sizeof(*q));
    q->peer = peer;
    q->buf = buf;
    q->len = len;
    q->tag.seq = seq;
    q->tag.sig = sig;
    gw_status_t st = kind == GW_REQ_SEND ? r->t->ops->isend(r->t, q) : r->t->ops->irecv(r->t, q);
    (void)st; /* failures show in q->status */
}

/* Drive progress until every request completed or the deadline passed;
 * returns the first failure (or the transport's). */
static inline gw_status_t wait_all(rank_t *r, gw_request_t *q, int n, const gw_msg_tag_t *current)
{
    int64_t end = gw__now_ms() + DEADLINE_MS;
    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++) {
            if (!q[i].complete)
                pending = 1;
            else if (q[i].status != GW_OK)
                return q[i].status;
        }
        if (!pending)
            return GW_OK;
        if (gw__now_ms() > end)
            return GW_ERR_TIMEOUT;
        gw_status_t st = r->t->ops->progress(r->t, current, 10);
        if (st != GW_OK)
            return st;
    }
}

/* The end of a request that must fail with GW_ERR_MISMATCH on both ends:
 * its wait's status; an end that detected the mismatch aborts with it, as
 * the communicator does, and one whose request completed (an eager sender)
 * makes progress until the peer's abort reaches it. */
static inline gw_status_t mismatch_outcome(rank_t *r, gw_request_t *q, const gw_msg_tag_t *current)
{
    gw_status_t st = wait_all(r, q, 1, current);
    if (st == GW_ERR_MISMATCH) {
        gw__transport_abort(r->t, st);
    } else if (st == GW_OK) {
        int64_t end = gw__now_ms() + DEADLINE_MS;
        while (st == GW_OK && gw__now_ms() < end)
            st = r->t->ops->progress(r->t, NULL, 10);
    }
    return st;
}

/* A buffer freed and mapped again at the same address (what free() and
 * malloc() of a large block do): transport b registers the old mapping,
 * a registers the new one, then b asks for the range again. Returns 1
 * when b registered it anew (a new key), 0 when it handed out its
 * registration of the old mapping, which the mark on the memory, set
 * again by a, no longer tells from the new one (ib_mr_caches.c). */
static inline int remap_seen_by_b(gw_ib_t *a, gw_ib_t *b)
{
    size_t len = 64 * 4096;
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(p, MAP_FAILED);
    memset(p, 1, len);
    gw_ib_mr_entry_t *e;
    cr_assert_eq(gw__ib_mr_cache_get(&b->mrc, p, len, &e), 0);
    uint32_t old_lkey = e->lkey;
    gw__ib_mr_cache_put(&b->mrc, e);
    uint64_t regs = b->mrc.regs;
    uint8_t *q =
        mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    cr_assert_eq(q, p);
    memset(p, 2, len);
    cr_assert_eq(gw__ib_mr_cache_get(&a->mrc, p, len, &e), 0);
    gw__ib_mr_cache_put(&a->mrc, e);
    cr_assert_eq(gw__ib_mr_cache_get(&b->mrc, p, len, &e), 0);
    int seen = e->lkey != old_lkey && b->mrc.regs == regs + 1;
    gw__ib_mr_cache_put(&b->mrc, e);
    munmap(p, len);
    return seen;
}

#endif
