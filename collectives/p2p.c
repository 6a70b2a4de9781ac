/*
 * p2p.c - point-to-point messaging for the collective algorithms.
 *
 * Algorithms never talk to the transport directly: they post sends and
 * receives here, which stamps each with the tag of the collective in progress
 * (so a rank that disagrees about the collective is caught by the transport),
 * and they wait here, which turns "no progress for timeout_ms" into
 * GW_ERR_TIMEOUT and any failure into the communicator's sticky error, so the
 * algorithms themselves stay free of error bookkeeping beyond `return`.
 */
#include <string.h>

#include "collectives/coll.h"
#include "common/clock.h"

/* How long one progress call may sleep in poll() when nothing is ready. The
 * transport wakes up as soon as a socket is ready, so this only bounds how
 * often the timeout is checked. */
#define GW_P2P_POLL_MS 100

static gw_status_t post(gw_comm_t *comm, gw_req_kind_t kind, int peer, void *buf, size_t len,
                        gw_request_t *req)
{
    if (comm->failed != GW_OK)
        return comm->failed;
    if (peer < 0 || peer >= comm->size || peer == comm->rank) {
        GW_ERROR(&comm->log, "coll", "internal error: message to invalid peer %d", peer);
        return gw__comm_fail(comm, GW_ERR_INVALID_ARG);
    }
    memset(req, 0, sizeof(*req));
    req->kind = kind;
    req->peer = peer;
    req->tag = comm->tag;
    req->buf = buf;
    req->len = len;
    gw_transport_t *t = comm->transport;
    gw_status_t st = kind == GW_REQ_SEND ? t->ops->isend(t, req) : t->ops->irecv(t, req);
    if (st != GW_OK)
        return gw__comm_fail(comm, st);
    return GW_OK;
}

gw_status_t gw__p2p_isend(gw_comm_t *comm, int peer, const void *buf, size_t len,
                          gw_request_t *req)
{
    /* The transport never writes through a send buffer; the cast only lets
     * one request type serve both directions. */
    return post(comm, GW_REQ_SEND, peer, (void *)(uintptr_t)buf, len, req);
}

gw_status_t gw__p2p_irecv(gw_comm_t *comm, int peer, void *buf, size_t len, gw_request_t *req)
{
    return post(comm, GW_REQ_RECV, peer, buf, len, req);
}

/* One round of progress; sleeps up to wait_ms when nothing is ready. */
static gw_status_t progress(gw_comm_t *comm, int wait_ms)
{
    if (comm->failed != GW_OK)
        return comm->failed;
    if (atomic_load(&comm->abort_requested))
        return gw__comm_fail(comm, GW_ERR_ABORTED);
    gw_transport_t *t = comm->transport;
    gw_status_t st = t->ops->progress(t, &comm->tag, wait_ms);
    if (st != GW_OK)
        return gw__comm_fail(comm, st);
    return GW_OK;
}

gw_status_t gw__p2p_poll(gw_comm_t *comm) { return progress(comm, 0); }

/* Sum of bytes moved by the requests, to tell progress from a stall. */
static size_t bytes_moved(gw_request_t *const *reqs, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        if (reqs[i])
            total += reqs[i]->bytes_done + (size_t)reqs[i]->complete;
    return total;
}

static gw_status_t request_failed(gw_comm_t *comm, const gw_request_t *req)
{
    /* The transport logged the cause where it detected it. */
    return gw__comm_fail(comm, req->status);
}

static gw_status_t stalled(gw_comm_t *comm, gw_request_t *const *reqs, int n)
{
    for (int i = 0; i < n; i++) {
        const gw_request_t *r = reqs[i];
        if (r && !r->complete) {
            GW_ERROR(&comm->log, "coll",
                     "collective #%llu: no progress for %d ms while waiting to %s %zu bytes "
                     "%s rank %d (%zu done); the peer may be hung or much slower "
                     "(GW_TIMEOUT_MS raises the limit)",
                     (unsigned long long)comm->tag.seq, comm->timeout_ms,
                     r->kind == GW_REQ_SEND ? "send" : "receive", r->len,
                     r->kind == GW_REQ_SEND ? "to" : "from", r->peer, r->bytes_done);
            break;
        }
    }
    return gw__comm_fail(comm, GW_ERR_TIMEOUT);
}

gw_status_t gw__p2p_waitall(gw_comm_t *comm, gw_request_t *const *reqs, int n)
{
    int64_t last_progress = gw__now_ms();
    size_t last_moved = bytes_moved(reqs, n);
    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++) {
            if (!reqs[i])
                continue;
            if (!reqs[i]->complete)
                pending = 1;
            else if (reqs[i]->status != GW_OK)
                return request_failed(comm, reqs[i]);
        }
        if (!pending)
            return comm->failed;
        gw_status_t st = progress(comm, GW_P2P_POLL_MS);
        if (st != GW_OK)
            return st;
        size_t moved = bytes_moved(reqs, n);
        int64_t now = gw__now_ms();
        if (moved != last_moved) {
            last_moved = moved;
            last_progress = now;
        } else if (now - last_progress >= comm->timeout_ms) {
            return stalled(comm, reqs, n);
        }
    }
}

gw_status_t gw__p2p_waitany(gw_comm_t *comm, gw_request_t *const *reqs, int n, int *idx)
{
    int64_t last_progress = gw__now_ms();
    size_t last_moved = bytes_moved(reqs, n);
    for (;;) {
        for (int i = 0; i < n; i++) {
            if (reqs[i] && reqs[i]->complete) {
                if (reqs[i]->status != GW_OK)
                    return request_failed(comm, reqs[i]);
                *idx = i;
                return GW_OK;
            }
        }
        gw_status_t st = progress(comm, GW_P2P_POLL_MS);
        if (st != GW_OK)
            return st;
        size_t moved = bytes_moved(reqs, n);
        int64_t now = gw__now_ms();
        if (moved != last_moved) {
            last_moved = moved;
            last_progress = now;
        } else if (now - last_progress >= comm->timeout_ms) {
            return stalled(comm, reqs, n);
        }
    }
}

gw_status_t gw__p2p_sendrecv(gw_comm_t *comm, int dst, const void *sbuf, size_t slen, int src,
                             void *rbuf, size_t rlen)
{
    gw_request_t sreq, rreq;
    gw_status_t st = gw__p2p_irecv(comm, src, rbuf, rlen, &rreq);
    if (st != GW_OK)
        return st;
    st = gw__p2p_isend(comm, dst, sbuf, slen, &sreq);
    if (st != GW_OK)
        return st;
    gw_request_t *reqs[2] = {&sreq, &rreq};
    return gw__p2p_waitall(comm, reqs, 2);
}
