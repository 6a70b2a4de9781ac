/*
 * mem_transport.c - see mem_transport.h. One mutex guards the whole fabric:
 * the tests run a handful of threads, and a single lock keeps the matching
 * rules (in-order per pair, exact tag and length) obviously right. Each rank
 * has its own condition variable, signalled when a message arrives for it,
 * when one of its rendezvous sends was delivered, or when a peer aborts or
 * closes. Requests are only ever written by their owner's thread (inside its
 * own progress, isend or abort), never by the peer's.
 */
#include "mem_transport.h"

#include "common/container_of.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct memt_msg {
    struct memt_msg *next; /* in its pair's FIFO */
    gw_msg_tag_t tag;
    size_t len;
    /* Rendezvous mode: the payload stays in the sender's buffer until the
     * receiver copies it; the sender keeps the message on its list of
     * unfinished sends and completes the request once `delivered`. */
    const void *src;
    gw_request_t *req;
    int delivered;
    struct memt_msg *send_next;
    unsigned char data[]; /* eager mode: the copied payload */
} memt_msg_t;

typedef struct memt_queue {
    memt_msg_t *head, *tail;
} memt_queue_t;

struct memt_fabric {
    int size;
    int rendezvous;
    pthread_mutex_t lock;
    pthread_cond_t *cond; /* [rank]: wakes that rank's progress() */
    memt_queue_t *queues; /* [src * size + dst] */
    gw_status_t *aborted; /* [rank]: reason that rank aborted, GW_OK if not */
    int *closed;          /* [rank]: the rank closed its instance */
    size_t messages;
};

typedef struct memt {
    gw_transport_t base; /* first: the algorithms see only this */
    memt_fabric_t *fab;
    gw_request_t **recv_head, **recv_tail; /* [peer]: posted receives in order */
    memt_msg_t *sends;                     /* rendezvous: sends not yet completed */
    gw_status_t failed;
} memt_t;

memt_fabric_t *memt_fabric_create(int size, int rendezvous)
{
    memt_fabric_t *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->size = size;
    f->rendezvous = rendezvous;
    f->cond = calloc((size_t)size, sizeof(*f->cond));
    f->queues = calloc((size_t)size * (size_t)size, sizeof(*f->queues));
    f->aborted = calloc((size_t)size, sizeof(*f->aborted));
    f->closed = calloc((size_t)size, sizeof(*f->closed));
    if (!f->cond || !f->queues || !f->aborted || !f->closed)
        goto err_free;
    pthread_mutex_init(&f->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    for (int i = 0; i < size; i++)
        pthread_cond_init(&f->cond[i], &attr);
    pthread_condattr_destroy(&attr);
    return f;
err_free:
    free(f->cond);
    free(f->queues);
    free(f->aborted);
    free(f->closed);
    free(f);
    return NULL;
}

void memt_fabric_destroy(memt_fabric_t *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->size * f->size; i++) {
        memt_msg_t *m = f->queues[i].head;
        while (m) {
            memt_msg_t *next = m->next;
            free(m);
            m = next;
        }
    }
    for (int i = 0; i < f->size; i++)
        pthread_cond_destroy(&f->cond[i]);
    pthread_mutex_destroy(&f->lock);
    free(f->cond);
    free(f->queues);
    free(f->aborted);
    free(f->closed);
    free(f);
}

size_t memt_messages(memt_fabric_t *f)
{
    pthread_mutex_lock(&f->lock);
    size_t n = f->messages;
    pthread_mutex_unlock(&f->lock);
    return n;
}

static memt_t *memt_of(gw_transport_t *t) { return gw__container_of(t, memt_t, base); }

/* Take an undelivered rendezvous message out of its FIFO. Lock held. */
static void unqueue(memt_fabric_t *f, int src, memt_msg_t *msg)
{
    memt_queue_t *q = &f->queues[src * f->size + msg->req->peer];
    memt_msg_t *prev = NULL;
    for (memt_msg_t *x = q->head; x; prev = x, x = x->next) {
        if (x != msg)
            continue;
        if (prev)
            prev->next = x->next;
        else
            q->head = x->next;
        if (q->tail == x)
            q->tail = prev;
        return;
    }
}

/* Forget our unfinished rendezvous sends, so that no peer reads a buffer
 * that may go away. With `st` != GW_OK the requests are failed too (they
 * still belong to a running collective then); at close they may be gone
 * and are not touched. Lock held. */
static void drop_sends(memt_t *m, gw_status_t st)
{
    while (m->sends) {
        memt_msg_t *msg = m->sends;
        m->sends = msg->send_next;
        if (!msg->delivered)
            unqueue(m->fab, m->base.rank, msg);
        if (st != GW_OK) {
            msg->req->status = st;
            msg->req->complete = 1;
        }
        free(msg);
    }
}

/* Fail every pending request and remember the error. Caller holds the lock.
 * The requests are still owned by a running collective when this happens
 * (inside its progress or abort call), so writing them is safe; afterwards
 * the transport forgets them. */
static void fail_all(memt_t *m, gw_status_t st)
{
    if (m->failed == GW_OK)
        m->failed = st;
    for (int p = 0; p < m->fab->size; p++) {
        for (gw_request_t *r = m->recv_head[p]; r;) {
            gw_request_t *next = r->next;
            r->status = st;
            r->complete = 1;
            r = next;
        }
        m->recv_head[p] = m->recv_tail[p] = NULL;
    }
    drop_sends(m, st);
}

static gw_status_t memt_open_stub(const gw_transport_params_t *params, gw_transport_t **out,
                                  uint8_t addr[GW_TRANSPORT_ADDR_MAX])
{
    (void)params;
    (void)out;
    (void)addr;
    return GW_ERR_UNSUPPORTED; /* instances come from memt_open() */
}

static gw_status_t memt_connect(gw_transport_t *t, const uint8_t *all_addrs)
{
    (void)t;
    (void)all_addrs;
    return GW_OK; /* the fabric connects everyone from the start */
}

static gw_status_t memt_isend(gw_transport_t *t, gw_request_t *req)
{
    memt_t *m = memt_of(t);
    memt_fabric_t *f = m->fab;
    size_t copy = f->rendezvous ? 0 : req->len;
    memt_msg_t *msg = calloc(1, sizeof(*msg) + copy);
    if (!msg)
        return GW_ERR_NO_MEMORY;
    msg->tag = req->tag;
    msg->len = req->len;
    msg->req = req;
    if (f->rendezvous)
        msg->src = req->buf;
    else if (copy > 0)
        memcpy(msg->data, req->buf, copy);
    pthread_mutex_lock(&f->lock);
    if (m->failed != GW_OK) {
        gw_status_t st = m->failed;
        pthread_mutex_unlock(&f->lock);
        free(msg);
        return st;
    }
    memt_queue_t *q = &f->queues[t->rank * f->size + req->peer];
    if (q->tail)
        q->tail->next = msg;
    else
        q->head = msg;
    q->tail = msg;
    f->messages++;
    if (f->rendezvous) {
        msg->send_next = m->sends;
        m->sends = msg;
    } else {
        req->bytes_done = req->len;
        req->status = GW_OK;
        req->complete = 1;
    }
    pthread_cond_signal(&f->cond[req->peer]);
    pthread_mutex_unlock(&f->lock);
    return GW_OK;
}

static gw_status_t memt_irecv(gw_transport_t *t, gw_request_t *req)
{
    memt_t *m = memt_of(t);
    pthread_mutex_lock(&m->fab->lock);
    gw_status_t st = m->failed;
    if (st == GW_OK) {
        req->next = NULL;
        if (m->recv_tail[req->peer])
            m->recv_tail[req->peer]->next = req;
        else
            m->recv_head[req->peer] = req;
        m->recv_tail[req->peer] = req;
    }
    pthread_mutex_unlock(&m->fab->lock);
    return st;
}

/* One matching pass over every peer. Returns the error that breaks the
 * transport (GW_OK if none) and sets *did when something completed. */
static gw_status_t match_pass(memt_t *m, const gw_msg_tag_t *current, int *did)
{
    memt_fabric_t *f = m->fab;
    int me = m->base.rank;
    for (memt_msg_t **pp = &m->sends; *pp;) {
        memt_msg_t *msg = *pp;
        if (!msg->delivered) {
            pp = &msg->send_next;
            continue;
        }
        *pp = msg->send_next;
        msg->req->bytes_done = msg->len;
        msg->req->status = GW_OK;
        msg->req->complete = 1;
        free(msg);
        *did = 1;
    }
    for (int p = 0; p < f->size; p++) {
        if (p == me)
            continue;
        if (f->aborted[p] != GW_OK) {
            GW_ERROR(m->base.log, "memt", "rank %d aborted: %s", p, gw_status_str(f->aborted[p]));
            return f->aborted[p];
        }
        memt_queue_t *q = &f->queues[p * f->size + me];
        while (m->recv_head[p] && q->head) {
            gw_request_t *r = m->recv_head[p];
            memt_msg_t *msg = q->head;
            if (msg->tag.seq != r->tag.seq || msg->tag.sig != r->tag.sig || msg->len != r->len) {
                GW_ERROR(m->base.log, "memt",
                         "message from rank %d (seq %llu, sig %08x, %zu bytes) does not match "
                         "the receive posted for it (seq %llu, sig %08x, %zu bytes)",
                         p, (unsigned long long)msg->tag.seq, msg->tag.sig, msg->len,
                         (unsigned long long)r->tag.seq, r->tag.sig, r->len);
                return GW_ERR_MISMATCH;
            }
            if (msg->len > 0)
                memcpy(r->buf, f->rendezvous ? msg->src : msg->data, msg->len);
            q->head = msg->next;
            if (!q->head)
                q->tail = NULL;
            if (f->rendezvous) {
                msg->delivered = 1; /* the sender completes and frees it */
                pthread_cond_signal(&f->cond[p]);
            } else {
                free(msg);
            }
            m->recv_head[p] = r->next;
            if (!m->recv_head[p])
                m->recv_tail[p] = NULL;
            r->bytes_done = r->len;
            r->status = GW_OK;
            r->complete = 1;
            *did = 1;
        }
        if (!m->recv_head[p] && q->head && current && gw__tag_conflicts(&q->head->tag, current)) {
            GW_ERROR(m->base.log, "memt",
                     "rank %d sent a message of collective #%llu (sig %08x) while we are in "
                     "#%llu (sig %08x)",
                     p, (unsigned long long)q->head->tag.seq, q->head->tag.sig,
                     (unsigned long long)current->seq, current->sig);
            return GW_ERR_MISMATCH;
        }
        if (m->recv_head[p] && !q->head && f->closed[p]) {
            GW_ERROR(m->base.log, "memt", "rank %d closed while we wait for its data", p);
            return GW_ERR_REMOTE;
        }
    }
    return GW_OK;
}

static gw_status_t memt_progress(gw_transport_t *t, const gw_msg_tag_t *current, int wait_ms)
{
    memt_t *m = memt_of(t);
    memt_fabric_t *f = m->fab;
    pthread_mutex_lock(&f->lock);
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += wait_ms / 1000;
    deadline.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    gw_status_t st = m->failed;
    while (st == GW_OK) {
        int did = 0;
        st = match_pass(m, current, &did);
        if (st != GW_OK) {
            fail_all(m, st);
            break;
        }
        if (did || wait_ms <= 0)
            break;
        if (pthread_cond_timedwait(&f->cond[t->rank], &f->lock, &deadline) == ETIMEDOUT)
            wait_ms = 0; /* one last pass, then report "nothing happened" */
    }
    pthread_mutex_unlock(&f->lock);
    return st;
}

static gw_status_t memt_abort(gw_transport_t *t, const gw_abort_info_t *why)
{
    gw_status_t reason = why ? why->status : GW_ERR_ABORTED;
    memt_t *m = memt_of(t);
    memt_fabric_t *f = m->fab;
    pthread_mutex_lock(&f->lock);
    if (f->aborted[t->rank] == GW_OK)
        f->aborted[t->rank] = reason == GW_OK ? GW_ERR_ABORTED : reason;
    fail_all(m, f->aborted[t->rank]);
    for (int i = 0; i < f->size; i++)
        pthread_cond_broadcast(&f->cond[i]);
    pthread_mutex_unlock(&f->lock);
    return GW_OK;
}

static void memt_close(gw_transport_t *t)
{
    if (!t)
        return;
    memt_t *m = memt_of(t);
    memt_fabric_t *f = m->fab;
    pthread_mutex_lock(&f->lock);
    drop_sends(m, GW_OK);
    f->closed[t->rank] = 1;
    for (int i = 0; i < f->size; i++)
        pthread_cond_broadcast(&f->cond[i]);
    pthread_mutex_unlock(&f->lock);
    free(m->recv_head);
    free(m->recv_tail);
    free(m);
}

static gw_status_t memt_mem_reg(gw_transport_t *t, void *buf, size_t len, void **handle)
{
    (void)t;
    (void)buf;
    (void)len;
    (void)handle;
    return GW_ERR_UNSUPPORTED; /* payloads are copied: nothing to register */
}

static gw_status_t memt_mem_dereg(gw_transport_t *t, void *handle)
{
    (void)t;
    (void)handle;
    return GW_ERR_UNSUPPORTED;
}

static const gw_transport_ops_t memt_ops = {
    .size = sizeof(gw_transport_ops_t),
    .open = memt_open_stub,
    .connect = memt_connect,
    .isend = memt_isend,
    .irecv = memt_irecv,
    .progress = memt_progress,
    .mem_reg = memt_mem_reg,
    .mem_dereg = memt_mem_dereg,
    .abort = memt_abort,
    .close = memt_close,
};

gw_status_t memt_open(memt_fabric_t *fab, int rank, const gw_logger_t *log, gw_transport_t **out)
{
    memt_t *m = calloc(1, sizeof(*m));
    if (!m)
        return GW_ERR_NO_MEMORY;
    m->recv_head = calloc((size_t)fab->size, sizeof(*m->recv_head));
    m->recv_tail = calloc((size_t)fab->size, sizeof(*m->recv_tail));
    if (!m->recv_head || !m->recv_tail) {
        free(m->recv_head);
        free(m->recv_tail);
        free(m);
        return GW_ERR_NO_MEMORY;
    }
    m->base.ops = &memt_ops;
    m->base.name = "mem";
    m->base.log = log;
    m->base.rank = rank;
    m->base.size = fab->size;
    m->fab = fab;
    *out = &m->base;
    return GW_OK;
}
