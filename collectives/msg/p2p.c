/*
 * p2p.c - point-to-point messaging for the collective algorithms.
 *
 * Algorithms never talk to the transport directly: they post sends and
 * receives here, which stamps each with the tag of the collective in progress
 * (so a rank that disagrees about the collective is caught by the transport),
 * and they wait here, which turns "no progress for timeout_ms" into
 * GW_ERR_TIMEOUT and any failure into the communicator's sticky error, so the
 * algorithms themselves stay free of error bookkeeping beyond `return`.
 *
 * Bytes are counted here, where sends are posted (comm->bytes_sent), so
 * that the compressed calls measure their traffic exactly whatever
 * algorithm carried it.
 *
 * The pipelined algorithms keep a window of requests per link (gw__stream_t,
 * p2p.h): the bookkeeping of posting, reaping in order and waiting for the
 * next completion is the same for all of them and lives at the end of this
 * file.
 */
#include "collectives/msg/p2p.h"

#include <stdio.h>
#include <string.h>

#include "collectives/comm/flight_recorder.h"
#include "collectives/msg/match.h"
#include "common/clock.h"

/* How long one progress call may sleep in poll() when nothing is ready. The
 * transport wakes up as soon as a socket is ready, so this only bounds how
 * often the timeout is checked. */
#define GW_P2P_POLL_MS 100

static gw_status_t post(gw_comm_t *comm, gw_req_kind_t kind, int peer, void *buf, size_t len,
                        unsigned flags, gw_request_t *req)
{
    if (comm->failed != GW_OK)
        return comm->failed;
    if (peer < 0 || peer >= comm->size || peer == comm->rank) {
        GW_ERROR(&comm->log, "coll", "internal error: message to invalid peer %d", peer);
        return gw__comm_fail(comm, GW_ERR_INVALID_ARG);
    }
    memset(req, 0, sizeof(*req));
    req->kind = kind;
    req->peer = gw__comm_to_root(comm, peer); /* the transport's rank (comm.h) */
    req->tag = comm->tag;
    req->buf = buf;
    req->len = len;
    req->flags = flags;
    gw_transport_t *t = comm->transport;
    gw_status_t st = kind == GW_REQ_SEND ? t->ops->isend(t, req) : t->ops->irecv(t, req);
    if (st != GW_OK)
        return gw__comm_fail(comm, st);
    if (kind == GW_REQ_SEND)
        comm->bytes_sent += len;
    gw__fr_post(comm->fr, peer, kind == GW_REQ_SEND, len);
    return GW_OK;
}

gw_status_t gw__p2p_isend(gw_comm_t *comm, int peer, const void *buf, size_t len, gw_request_t *req)
{
    /* The transport never writes through a send buffer; the cast only lets
     * one request type serve both directions. */
    return post(comm, GW_REQ_SEND, peer, (void *)(uintptr_t)buf, len, 0, req);
}

gw_status_t gw__p2p_isend_public(gw_comm_t *comm, int peer, const void *buf, size_t len,
                                 unsigned flags, gw_request_t *req)
{
    if (comm->p2p_send == GW_P2P_SEND_SYNC)
        flags |= GW_REQ_RECEIPT;
    return post(comm, GW_REQ_SEND, peer, (void *)(uintptr_t)buf, len, flags, req);
}

gw_status_t gw__p2p_irecv(gw_comm_t *comm, int peer, void *buf, size_t len, gw_request_t *req)
{
    return post(comm, GW_REQ_RECV, peer, buf, len, 0, req);
}

gw_status_t gw__p2p_irecv_announced(gw_comm_t *comm, int peer, void *buf, size_t len,
                                    gw_request_t *req)
{
    return post(comm, GW_REQ_RECV, peer, buf, len, GW_REQ_ANNOUNCE, req);
}

/* One round of progress; sleeps up to wait_ms when nothing is ready. */
static gw_status_t progress(gw_comm_t *comm, int wait_ms)
{
    if (comm->failed != GW_OK)
        return comm->failed;
    if (gw__comm_abort_requested(comm))
        return gw__comm_fail(comm, GW_ERR_ABORTED);
    gw_transport_t *t = comm->transport;
    gw_status_t st = t->ops->progress(t, &comm->tag, wait_ms);
    if (st != GW_OK)
        return gw__comm_fail(comm, st);
    /* Tagged messages whose headers arrived are taken in (match.c). */
    return comm->match ? gw__match_pump(comm) : GW_OK;
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

static gw_status_t stalled(gw_comm_t *comm, gw_request_t *const *reqs, int n, int64_t idle_ms)
{
    /* A point-to-point call waits with the empty tag (tag.h): it is not a
     * collective, and "collective #0" would send the reader looking for one. */
    char what[48] = "point-to-point call";
    if (comm->tag.seq != 0)
        snprintf(what, sizeof(what), "collective #%llu", (unsigned long long)comm->tag.seq);
    int culprit = -1;
    for (int i = 0; i < n; i++) {
        const gw_request_t *r = reqs[i];
        if (r && !r->complete && r->peer < 0) {
            /* A tagged receive from GW_ANY_SOURCE that nothing matched. */
            GW_ERROR(&comm->log, "coll",
                     "%s: no message for %d ms for a receive from any rank (GW_ANY_SOURCE); "
                     "the senders may be hung or much slower (GW_TIMEOUT_MS raises the limit)",
                     what, comm->timeout_ms);
            break;
        }
        if (r && !r->complete) {
            culprit = r->peer;
            if (r->kind == GW_REQ_SEND && (r->flags & GW_REQ_RECEIPT) && r->bytes_done == 0 &&
                r->len > 0) {
                /* Connections are made on first use (GW_CONNECT=lazy): a
                 * peer that posts nothing for us never connects, so the
                 * message waits here, not in its socket. */
                GW_ERROR(&comm->log, "coll",
                         "%s: no receipt for %d ms from rank %d for the %zu-byte message for "
                         "it, which has not left: it has posted neither the matching receive "
                         "nor anything else for this rank (or is hung; GW_TIMEOUT_MS raises "
                         "the limit)",
                         what, comm->timeout_ms, gw__comm_from_root(comm, r->peer), r->len);
                break;
            }
            if (r->kind == GW_REQ_SEND && (r->flags & GW_REQ_RECEIPT) && r->bytes_done == r->len) {
                GW_ERROR(&comm->log, "coll",
                         "%s: no receipt for %d ms from rank %d for the %zu-byte message sent "
                         "to it: it has not posted the matching receive (or is hung; "
                         "GW_TIMEOUT_MS raises the limit)",
                         what, comm->timeout_ms, gw__comm_from_root(comm, r->peer), r->len);
                break;
            }
            GW_ERROR(&comm->log, "coll",
                     "%s: no progress for %d ms while waiting to %s %zu bytes "
                     "%s rank %d (%zu done); the peer may be hung or much slower "
                     "(GW_TIMEOUT_MS raises the limit)",
                     what, comm->timeout_ms, r->kind == GW_REQ_SEND ? "send" : "receive", r->len,
                     r->kind == GW_REQ_SEND ? "to" : "from", gw__comm_from_root(comm, r->peer),
                     r->bytes_done);
            break;
        }
    }
    /* The peer we wait for may itself wait for another: the referee asks
     * the ranks and blames the one at the end of the chain (blame.c). */
    gw_comm_blame_t b = {.status = GW_ERR_TIMEOUT,
                         .culprit = culprit, /* a request's peer: a root rank (comm.h) */
                         .origin = gw__comm_to_root(comm, comm->rank),
                         .kind = GW_BLAME_TIMEOUT,
                         .waiting_on = culprit,
                         .stalled_ms = idle_ms};
    return gw__comm_fail_with(comm, &b);
}

/* The first completed request of reqs[0..n), or -1 when none is (NULL
 * entries skipped); a failed one fails the communicator. */
static gw_status_t first_complete(gw_comm_t *comm, gw_request_t *const *reqs, int n, int *idx)
{
    *idx = -1;
    for (int i = 0; i < n; i++) {
        if (reqs[i] && reqs[i]->complete) {
            if (reqs[i]->status != GW_OK)
                return request_failed(comm, reqs[i]);
            if (*idx < 0)
                *idx = i;
        }
    }
    return GW_OK;
}

static int all_complete(gw_request_t *const *reqs, int n)
{
    for (int i = 0; i < n; i++)
        if (reqs[i] && !reqs[i]->complete)
            return 0;
    return 1;
}

static gw_status_t wait_reqs_(gw_comm_t *comm, gw_request_t *const *reqs, int n, int any, int *idx);

/* The wait, recorded as a step of the call in progress (flight_recorder.h):
 * started, waiting for the first peer whose request is still open. */
static gw_status_t wait_reqs(gw_comm_t *comm, gw_request_t *const *reqs, int n, int any, int *idx)
{
    if (!comm->fr)
        return wait_reqs_(comm, reqs, n, any, idx);
    int peer = -1;
    for (int i = 0; i < n && peer < 0; i++)
        if (reqs[i] && !reqs[i]->complete)
            peer = gw__comm_from_root(comm, reqs[i]->peer);
    gw__fr_wait(comm->fr, peer);
    gw_status_t st = wait_reqs_(comm, reqs, n, any, idx);
    gw__fr_waited(comm->fr);
    return st;
}

/* Progress until one request of reqs completed (any) or all of them did,
 * failing after timeout_ms in which no request moved a byte. A wait that
 * lasts looks at the bootstrap's watch every GW_COMM_WATCH_MS (blame.c).
 * Times are on the coarse clock: a small message's wait reads it twice,
 * and the precise clock's 25 ns a reading was a tenth of a 2-rank
 * allreduce of 16 bytes over shared memory. */
static gw_status_t wait_reqs_(gw_comm_t *comm, gw_request_t *const *reqs, int n, int any, int *idx)
{
    int64_t last_progress = gw__now_coarse_ms();
    int64_t next_watch = last_progress + GW_COMM_WATCH_MS;
    size_t last_moved = bytes_moved(reqs, n);
    for (;;) {
        gw_status_t st = first_complete(comm, reqs, n, idx);
        if (st != GW_OK)
            return st;
        if (any ? *idx >= 0 : all_complete(reqs, n))
            return any ? GW_OK : comm->failed;
        if ((st = progress(comm, GW_P2P_POLL_MS)) != GW_OK)
            return st;
        size_t moved = bytes_moved(reqs, n);
        int64_t now = gw__now_coarse_ms();
        if (moved != last_moved) {
            last_moved = moved;
            last_progress = now;
        } else if (now - last_progress >= comm->timeout_ms) {
            return stalled(comm, reqs, n, now - last_progress);
        }
        if (now >= next_watch) {
            next_watch = now + GW_COMM_WATCH_MS;
            if ((st = gw__comm_watch(comm, reqs, n, now - last_progress)) != GW_OK)
                return st;
        }
    }
}

gw_status_t gw__p2p_waitall(gw_comm_t *comm, gw_request_t *const *reqs, int n)
{
    int idx;
    return wait_reqs(comm, reqs, n, 0, &idx);
}

gw_status_t gw__p2p_waitany(gw_comm_t *comm, gw_request_t *const *reqs, int n, int *idx)
{
    return wait_reqs(comm, reqs, n, 1, idx);
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

/* ---- request windows ------------------------------------------------------ */

gw_status_t gw__stream_send(gw_comm_t *comm, gw__stream_t *s, const void *buf, size_t len)
{
    gw_status_t st = gw__p2p_isend(comm, s->peer, buf, len, &s->req[s->posted % GW__STREAM_DEPTH]);
    if (st == GW_OK)
        s->posted++;
    return st;
}

gw_status_t gw__stream_recv(gw_comm_t *comm, gw__stream_t *s, void *buf, size_t len)
{
    gw_status_t st = gw__p2p_irecv(comm, s->peer, buf, len, &s->req[s->posted % GW__STREAM_DEPTH]);
    if (st == GW_OK)
        s->posted++;
    return st;
}

gw_status_t gw__stream_reap(gw_comm_t *comm, gw__stream_t *s, int *moved)
{
    while (s->done < s->posted && s->req[s->done % GW__STREAM_DEPTH].complete) {
        gw_status_t st = s->req[s->done % GW__STREAM_DEPTH].status;
        if (st != GW_OK)
            return gw__comm_fail(comm, st);
        s->done++;
        *moved = 1;
    }
    return GW_OK;
}

gw_status_t gw__streams_reap(gw_comm_t *comm, gw__stream_t *const *s, int n, int *moved)
{
    for (int i = 0; i < n; i++) {
        gw_status_t st = gw__stream_reap(comm, s[i], moved);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

/* Requests waited for at once: enough for every algorithm (a binomial
 * tree node has at most 32 streams). Waiting for fewer would still be
 * correct, since progress moves every request, only less prompt. */
#define MAX_WAIT (40 * GW__STREAM_DEPTH)

gw_status_t gw__streams_wait(gw_comm_t *comm, gw__stream_t *const *s, int n, const char *what)
{
    gw_request_t *wait[MAX_WAIT];
    int nwait = 0;
    for (int i = 0; i < n; i++) {
        if (s[i]->peer < 0)
            continue;
        for (size_t m = s[i]->done; m < s[i]->posted && nwait < MAX_WAIT; m++)
            if (!s[i]->req[m % GW__STREAM_DEPTH].complete)
                wait[nwait++] = &s[i]->req[m % GW__STREAM_DEPTH];
    }
    if (nwait == 0) {
        GW_ERROR(&comm->log, "coll", "internal error: %s stalled", what);
        return gw__comm_fail(comm, GW_ERR_PROTOCOL);
    }
    int idx;
    return gw__p2p_waitany(comm, wait, nwait, &idx);
}
