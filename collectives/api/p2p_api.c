/*
 * p2p_api.c - the public point-to-point calls: gw_send, gw_recv and
 * gw_sendrecv, built on the same gw__p2p_* layer as the collectives.
 *
 * Tags. The transports match messages per pair of ranks in posting order
 * and check each message's tag against its receive, and, while a rank is in
 * a collective, they check messages (and, for RDMA, receivers' clear-to-send
 * entries) that nobody claimed yet against that collective's tag. A
 * point-to-point message therefore carries the sequence number the next
 * collective will have (comm->seq + 1) and a signature of its own kind,
 * count and dtype (gw__tag_p2p and gw__sig_p2p, tag.c): a peer still busy
 * with the previous collective sees a message "from the future" and leaves
 * it alone, while a peer that starts
 * the next collective instead of receiving it sees the same sequence number
 * with another signature and fails with GW_ERR_MISMATCH, as it should.
 * While a point-to-point call waits, no collective is in progress, so the
 * tag it hands to progress() is the empty tag (sequence 0), which no
 * message conflicts with: messages of other peers' next collective may
 * arrive meanwhile, and that is fine.
 *
 * Receipts. Under GW_P2P_SEND_SYNC, the default, every send posted here
 * asks for one (gw__p2p_isend_public, GW_REQ_RECEIPT in transport.h): it
 * completes only once the receiver's transport has matched it against the
 * receive and accepted it, so a mismatch fails the sender's own call, with
 * the receiver's verdict (its abort carries status and culprit), instead
 * of the call after it. Under GW_P2P_SEND_STANDARD (gw_comm_set_p2p_send)
 * they ask for none, as the collectives' sends never do: a send completes
 * when its buffer may be reused, and the receiver's verdict on it reaches
 * the sender with the receiver's abort, in a later call. A handle that
 * completed keeps its outcome even when the communicator fails afterwards
 * (finish()): the message was delivered (sync) or handed over (standard).
 *
 * Non-blocking calls. gw_isend and gw_irecv post the same request as the
 * blocking calls, inside a heap handle, and return; nothing runs in the
 * background: the transport moves data whenever this rank waits or tests
 * (any handle, or a blocking point-to-point call), so a window of messages
 * is in flight together and a receiver's clear-to-send for the next message
 * is out before the current one has landed. The handles sit on the
 * communicator's p2p_pending list until completed: a collective started
 * meanwhile would share their sequence number, so it is refused
 * (gw__p2p_check_idle), and gw_comm_destroy completes leftovers with
 * GW_ERR_ABORTED.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/api/api.h"
#include "collectives/device/device.h"
#include "collectives/msg/match.h"
#include "collectives/msg/p2p.h"
#include "common/clock.h"

/* Check one side's arguments; fail the communicator on bad ones (the peer
 * is waiting for a message that will never come). any: peer may be
 * GW_ANY_SOURCE (a tagged receive). */
static gw_status_t check_any(gw_comm_t *comm, const char *fn, const void *buf, size_t count,
                             gw_dtype_t dtype, int peer, int any, size_t *nbytes)
{
    size_t esize = gw_dtype_size(dtype);
    gw_status_t st = GW_ERR_INVALID_ARG;
    if (esize == 0) {
        GW_ERROR(&comm->log, "api", "%s: unknown dtype %d", fn, (int)dtype);
        goto fail;
    }
    if (!(any && peer == GW_ANY_SOURCE) && (peer < 0 || peer >= comm->size || peer == comm->rank)) {
        GW_ERROR(&comm->log, "api",
                 "%s: peer %d is not another rank of this communicator "
                 "(rank %d of %d)",
                 fn, peer, comm->rank, comm->size);
        goto fail;
    }
    if (__builtin_mul_overflow(count, esize, nbytes) || *nbytes > (size_t)PTRDIFF_MAX) {
        GW_ERROR(&comm->log, "api", "%s: %zu elements of %s overflow the address space", fn, count,
                 gw_dtype_name(dtype));
        st = GW_ERR_OVERFLOW;
        goto fail;
    }
    if (count > 0 && !buf) {
        GW_ERROR(&comm->log, "api", "%s: buffer is NULL with count %zu", fn, count);
        goto fail;
    }
    return GW_OK;
fail:
    return gw__comm_fail(comm, st);
}

static gw_status_t check(gw_comm_t *comm, const char *fn, const void *buf, size_t count,
                         gw_dtype_t dtype, int peer, size_t *nbytes)
{
    return check_any(comm, fn, buf, count, dtype, peer, 0, nbytes);
}

/* Common entry: the communicator is usable and owned by this thread. */
static gw_status_t enter(gw_comm_t *comm)
{
    if (gw__comm_abort_requested(comm))
        return gw__comm_fail(comm, GW_ERR_ABORTED);
    return comm->failed;
}

static gw_status_t wait_reqs(gw_comm_t *comm, gw_request_t *const *reqs, int n)
{
    /* The empty tag while waiting: see the top of the file. */
    gw__tag_clear(comm);
    gw_status_t st = gw__p2p_waitall(comm, reqs, n);
    return st == GW_OK ? GW_OK : gw__comm_fail(comm, st);
}

/* One message: check the arguments, stamp the tag, post the request. */
/* A device buffer travels through its pinned copy, *pinned (NULL: none;
 * collectives/device/staging_p2p.c), which the caller unstages. */
static gw_status_t post_one(gw_comm_t *comm, const char *fn, gw_req_kind_t kind, void *buf,
                            size_t count, gw_dtype_t dtype, int peer, gw_request_t *req,
                            void **pinned)
{
    size_t nbytes;
    *pinned = NULL;
    gw_status_t st = enter(comm);
    if (st == GW_OK)
        st = check(comm, fn, buf, count, dtype, peer, &nbytes);
    if (st == GW_OK)
        st = gw__device_p2p_stage(comm, kind == GW_REQ_SEND, buf, nbytes, &buf, pinned);
    if (st != GW_OK)
        return st;
    gw__tag_p2p(comm, gw__comm_sig_p2p(comm, count, dtype));
    st = kind == GW_REQ_SEND ? gw__p2p_isend_public(comm, peer, buf, nbytes, 0, req)
                             : gw__p2p_irecv(comm, peer, buf, nbytes, req);
    if (st != GW_OK) {
        gw__device_p2p_release(comm, *pinned);
        *pinned = NULL;
    }
    return st;
}

static gw_status_t sendrecv_claimed(gw_comm_t *comm, const void *sendbuf, size_t sendcount, int dst,
                                    void *recvbuf, size_t recvcount, int src, gw_dtype_t dtype)
{
    size_t sbytes, rbytes;
    gw_status_t st = enter(comm);
    if (st == GW_OK)
        st = check(comm, "gw_sendrecv", sendbuf, sendcount, dtype, dst, &sbytes);
    if (st == GW_OK)
        st = check(comm, "gw_sendrecv", recvbuf, recvcount, dtype, src, &rbytes);
    if (st != GW_OK)
        return st;
    void *spin = NULL, *rpin = NULL, *suse, *ruse;
    if ((st = gw__device_p2p_stage(comm, 1, (void *)(uintptr_t)sendbuf, sbytes, &suse, &spin)) !=
            GW_OK ||
        (st = gw__device_p2p_stage(comm, 0, recvbuf, rbytes, &ruse, &rpin)) != GW_OK)
        goto out;
    gw_request_t sreq, rreq;
    /* Each direction carries its own count in its signature. */
    gw__tag_p2p(comm, gw__comm_sig_p2p(comm, recvcount, dtype));
    if ((st = gw__p2p_irecv(comm, src, ruse, rbytes, &rreq)) != GW_OK)
        goto out;
    gw__tag_p2p(comm, gw__comm_sig_p2p(comm, sendcount, dtype));
    if ((st = gw__p2p_isend_public(comm, dst, suse, sbytes, 0, &sreq)) != GW_OK)
        goto out;
    gw_request_t *reqs[2] = {&sreq, &rreq};
    st = wait_reqs(comm, reqs, 2);
out:
    st = gw__device_p2p_unstage(comm, 0, recvbuf, rpin, rbytes, st);
    return gw__device_p2p_unstage(comm, 1, NULL, spin, sbytes, st);
}

/* Every public call: queued non-blocking collectives run first and the
 * progress thread stops, then this thread claims the transport for the
 * call (gw_comm_abort from another thread may hold it for a moment). */
static void claim(gw_comm_t *comm)
{
    gw__async_stop(comm); /* the root's thread, which sub-communicators share */
    gw__comm_drive_begin(comm);
}

/* gw_send and gw_recv: one message, waited for. */
static gw_status_t blocking_one(gw_comm_t *comm, const char *fn, gw_req_kind_t kind, void *buf,
                                size_t count, gw_dtype_t dtype, int peer)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    if (comm->group) /* queued until gw_group_end (group.c) */
        return gw__group_add_p2p(comm, kind == GW_REQ_SEND, buf, count, dtype, peer);
    gw_status_t st = gw__comm_enter(comm, fn);
    if (st != GW_OK)
        return st;
    claim(comm);
    gw_request_t req;
    void *pinned;
    st = post_one(comm, fn, kind, buf, count, dtype, peer, &req, &pinned);
    if (st == GW_OK) {
        gw_request_t *reqs[1] = {&req};
        st = wait_reqs(comm, reqs, 1);
        /* Completed in the round that then failed: delivered all the same
         * (see finish()). */
        if (st != GW_OK && req.complete && req.status == GW_OK)
            st = GW_OK;
        st = gw__device_p2p_unstage(comm, kind == GW_REQ_SEND, buf, pinned, req.len, st);
    }
    gw__comm_drive_end(comm);
    gw__comm_leave(comm);
    return st;
}

gw_status_t gw_send(gw_comm_t *comm, const void *buf, size_t count, gw_dtype_t dtype, int peer)
{
    /* The transport never writes through a send buffer. */
    return blocking_one(comm, "gw_send", GW_REQ_SEND, (void *)(uintptr_t)buf, count, dtype, peer);
}

gw_status_t gw_recv(gw_comm_t *comm, void *buf, size_t count, gw_dtype_t dtype, int peer)
{
    return blocking_one(comm, "gw_recv", GW_REQ_RECV, buf, count, dtype, peer);
}

gw_status_t gw_sendrecv(gw_comm_t *comm, const void *sendbuf, size_t sendcount, int dst,
                        void *recvbuf, size_t recvcount, int src, gw_dtype_t dtype)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    if (comm->group) { /* two messages of the group (group.c) */
        gw_status_t st =
            gw__group_add_p2p(comm, 1, (void *)(uintptr_t)sendbuf, sendcount, dtype, dst);
        return st != GW_OK ? st : gw__group_add_p2p(comm, 0, recvbuf, recvcount, dtype, src);
    }
    gw_status_t st = gw__comm_enter(comm, "gw_sendrecv");
    if (st != GW_OK)
        return st;
    claim(comm);
    st = sendrecv_claimed(comm, sendbuf, sendcount, dst, recvbuf, recvcount, src, dtype);
    gw__comm_drive_end(comm);
    gw__comm_leave(comm);
    return st;
}

/* ---- non-blocking ------------------------------------------------------ */

/* A posted point-to-point handle (plain or tagged) joins the
 * communicator's pending list: whatever it staged is copied back to dst
 * (len bytes) when it completes. */
static void track_pending(gw_comm_t *comm, gw_handle_t *h, void *dst, size_t len)
{
    h->staged_dst = dst;
    h->staged_len = len;
    h->comm = comm;
    h->is_p2p = 1;
    atomic_init(&h->done, 0);
    h->last_moved_ms = gw__now_ms();
    h->next = comm->p2p_pending;
    comm->p2p_pending = h;
    comm->p2p_npending++;
}

static void unlink_pending(gw_comm_t *comm, gw_handle_t *h)
{
    for (gw_handle_t **p = &comm->p2p_pending; *p; p = &(*p)->next) {
        if (*p == h) {
            *p = h->next;
            comm->p2p_npending--;
            return;
        }
    }
}

static gw_status_t post_claimed(gw_comm_t *comm, const char *fn, gw_req_kind_t kind, void *buf,
                                size_t count, gw_dtype_t dtype, int peer, gw_handle_t **handle)
{
    gw_handle_t *h = calloc(1, sizeof(*h));
    if (!h) {
        GW_ERROR(&comm->log, "api", "%s: out of memory for the handle", fn);
        return gw__comm_fail(comm, GW_ERR_NO_MEMORY);
    }
    gw_status_t st = post_one(comm, fn, kind, buf, count, dtype, peer, &h->req, &h->staged);
    if (st != GW_OK) {
        free(h);
        return st;
    }
    track_pending(comm, h, buf, h->req.len);
    *handle = h;
    return GW_OK;
}

static gw_status_t post_handle(gw_comm_t *comm, const char *fn, gw_req_kind_t kind, void *buf,
                               size_t count, gw_dtype_t dtype, int peer, gw_handle_t **handle)
{
    if (!comm || !handle)
        return GW_ERR_INVALID_ARG;
    *handle = NULL;
    gw_status_t st = gw__group_refuse(comm, fn);
    if (st != GW_OK)
        return st;
    st = gw__comm_enter(comm, fn);
    if (st != GW_OK)
        return st;
    claim(comm);
    st = post_claimed(comm, fn, kind, buf, count, dtype, peer, handle);
    gw__comm_drive_end(comm);
    gw__comm_leave(comm);
    return st;
}

gw_status_t gw_isend(gw_comm_t *comm, const void *buf, size_t count, gw_dtype_t dtype, int peer,
                     gw_handle_t **handle)
{
    /* The transport never writes through a send buffer. */
    return post_handle(comm, "gw_isend", GW_REQ_SEND, (void *)(uintptr_t)buf, count, dtype, peer,
                       handle);
}

gw_status_t gw_irecv(gw_comm_t *comm, void *buf, size_t count, gw_dtype_t dtype, int peer,
                     gw_handle_t **handle)
{
    return post_handle(comm, "gw_irecv", GW_REQ_RECV, buf, count, dtype, peer, handle);
}

/* ---- tagged (collectives/msg/match.c) ------------------------------------ */

/* Check, stage and post one tagged message in a new handle. peer is the
 * destination of a send, the source (or GW_ANY_SOURCE) of a receive. */
static gw_status_t post_tagged(gw_comm_t *comm, const char *fn, gw_req_kind_t kind, void *buf,
                               size_t count, gw_dtype_t dtype, int peer, int tag,
                               gw_msg_status_t *out, gw_handle_t **handle)
{
    size_t nbytes;
    gw_status_t st = enter(comm);
    if (st == GW_OK)
        st = check_any(comm, fn, buf, count, dtype, peer, kind == GW_REQ_RECV, &nbytes);
    if (st == GW_OK && (tag < 0 && !(kind == GW_REQ_RECV && tag == GW_ANY_TAG))) {
        GW_ERROR(&comm->log, "api", "%s: tag %d is negative%s", fn, tag,
                 kind == GW_REQ_RECV ? " and not GW_ANY_TAG" : "");
        st = gw__comm_fail(comm, GW_ERR_INVALID_ARG);
    }
    if (st != GW_OK)
        return st;
    gw_handle_t *h = calloc(1, sizeof(*h));
    if (!h) {
        GW_ERROR(&comm->log, "api", "%s: out of memory for the handle", fn);
        return gw__comm_fail(comm, GW_ERR_NO_MEMORY);
    }
    void *use;
    st = gw__device_p2p_stage(comm, kind == GW_REQ_SEND, buf, nbytes, &use, &h->staged);
    if (st != GW_OK) {
        free(h);
        return st;
    }
    uint32_t sig = gw__comm_sig_p2p(comm, count, dtype);
    if (kind == GW_REQ_SEND) {
        st = gw__match_send(comm, peer, tag, use, nbytes, sig, &h->req);
    } else {
        h->tagged.is_recv = 1;
        h->tagged.source = peer;
        h->tagged.tag = tag;
        h->tagged.count = count;
        h->tagged.sig = sig;
        h->tagged.buf = use;
        h->tagged.out = out;
        h->req.len = nbytes;
        st = gw__match_recv(comm, h);
    }
    if (st != GW_OK) {
        gw__match_forget(comm, h);
        gw__device_p2p_release(comm, h->staged);
        free(h);
        return st;
    }
    track_pending(comm, h, buf, nbytes);
    *handle = h;
    return GW_OK;
}

static gw_status_t tagged_handle(gw_comm_t *comm, const char *fn, gw_req_kind_t kind, void *buf,
                                 size_t count, gw_dtype_t dtype, int peer, int tag,
                                 gw_msg_status_t *out, gw_handle_t **handle)
{
    if (!comm || !handle)
        return GW_ERR_INVALID_ARG;
    *handle = NULL;
    gw_status_t st = gw__group_refuse(comm, fn);
    if (st != GW_OK)
        return st;
    st = gw__comm_enter(comm, fn);
    if (st != GW_OK)
        return st;
    claim(comm);
    st = post_tagged(comm, fn, kind, buf, count, dtype, peer, tag, out, handle);
    gw__comm_drive_end(comm);
    gw__comm_leave(comm);
    return st;
}

gw_status_t gw_isend_tagged(gw_comm_t *comm, const void *buf, size_t count, gw_dtype_t dtype,
                            int peer, int tag, gw_handle_t **handle)
{
    /* The transport never writes through a send buffer. */
    return tagged_handle(comm, "gw_isend_tagged", GW_REQ_SEND, (void *)(uintptr_t)buf, count, dtype,
                         peer, tag, NULL, handle);
}

gw_status_t gw_irecv_tagged(gw_comm_t *comm, void *buf, size_t count, gw_dtype_t dtype, int source,
                            int tag, gw_msg_status_t *status, gw_handle_t **handle)
{
    return tagged_handle(comm, "gw_irecv_tagged", GW_REQ_RECV, buf, count, dtype, source, tag,
                         status, handle);
}

gw_status_t gw_send_tagged(gw_comm_t *comm, const void *buf, size_t count, gw_dtype_t dtype,
                           int peer, int tag)
{
    gw_handle_t *h;
    gw_status_t st = tagged_handle(comm, "gw_send_tagged", GW_REQ_SEND, (void *)(uintptr_t)buf,
                                   count, dtype, peer, tag, NULL, &h);
    return st != GW_OK ? st : gw_wait(h);
}

gw_status_t gw_recv_tagged(gw_comm_t *comm, void *buf, size_t count, gw_dtype_t dtype, int source,
                           int tag, gw_msg_status_t *status)
{
    gw_handle_t *h;
    gw_status_t st = tagged_handle(comm, "gw_recv_tagged", GW_REQ_RECV, buf, count, dtype, source,
                                   tag, status, &h);
    return st != GW_OK ? st : gw_wait(h);
}

/* The handle's outcome once its request is complete or the communicator
 * failed; releases it. */
static gw_status_t finish(gw_handle_t *h, gw_status_t st)
{
    gw_comm_t *comm = h->comm;
    /* A message that completed was delivered (a send: and accepted), even
     * when the communicator failed afterwards, in the same progress round
     * or later: its outcome stands, and the failure is the next call's. */
    if (h->req.complete)
        st = h->req.status == GW_OK ? GW_OK : gw__comm_fail(comm, h->req.status);
    if (h->tagged.is_recv) {
        gw__match_forget(comm, h);
        if (st == GW_OK && h->tagged.out)
            *h->tagged.out = h->tagged.got;
    }
    st = gw__device_p2p_unstage(comm, h->req.kind == GW_REQ_SEND, h->staged_dst, h->staged,
                                h->staged_len, st);
    unlink_pending(comm, h);
    free(h);
    return st;
}

static gw_status_t test_claimed(gw_handle_t *h, int *done);
static gw_status_t wait_claimed(gw_handle_t *h);

/* A handle that gw_comm_destroy completed: its status, without touching the
 * freed communicator. */
static gw_status_t abandoned(gw_handle_t *h)
{
    gw_status_t st = h->status;
    free(h);
    return st;
}

gw_status_t gw__p2p_handle_test(gw_handle_t *h, int *done)
{
    if (atomic_load(&h->done)) {
        *done = 1;
        return abandoned(h);
    }
    gw_comm_t *comm = h->comm;
    gw__comm_drive_begin(comm);
    gw_status_t st = test_claimed(h, done);
    gw__comm_drive_end(comm);
    return st;
}

gw_status_t gw__p2p_handle_wait(gw_handle_t *h)
{
    if (atomic_load(&h->done))
        return abandoned(h);
    gw_comm_t *comm = h->comm;
    gw__comm_drive_begin(comm);
    gw_status_t st = wait_claimed(h);
    gw__comm_drive_end(comm);
    return st;
}

static gw_status_t test_claimed(gw_handle_t *h, int *done)
{
    gw_comm_t *comm = h->comm;
    *done = 0;
    if (!h->req.complete) {
        gw__tag_clear(comm);
        gw_status_t st = comm->failed == GW_OK ? gw__p2p_poll(comm) : comm->failed;
        if (st != GW_OK) {
            *done = 1;
            return finish(h, st);
        }
    }
    if (h->req.complete) {
        *done = 1;
        return finish(h, GW_OK);
    }
    /* A peer that stopped moving data fails a rank that only tests, as a
     * wait would after GW_TIMEOUT_MS; and a rank that keeps testing answers
     * the referee and takes its verdict, as a waiting one does (blame.c). */
    size_t moved = h->req.bytes_done;
    int64_t now = gw__now_ms();
    if (now >= comm->watch_due_ms) {
        comm->watch_due_ms = now + GW_COMM_WATCH_MS;
        gw_request_t *reqs[1] = {&h->req};
        gw_status_t st = gw__comm_watch(comm, reqs, 1, now - h->last_moved_ms);
        if (st != GW_OK) {
            *done = 1;
            return finish(h, st);
        }
    }
    if (moved != h->last_moved) {
        h->last_moved = moved;
        h->last_moved_ms = now;
    } else if (now - h->last_moved_ms >= comm->timeout_ms) {
        int unreceipted = h->req.kind == GW_REQ_SEND && h->req.bytes_done == h->req.len;
        if (h->req.peer < 0) /* a tagged receive from GW_ANY_SOURCE, nothing matched */
            GW_ERROR(&comm->log, "api",
                     "gw_test: no message for %d ms for a %zu-byte receive from any rank "
                     "(GW_ANY_SOURCE); the senders may be hung (GW_TIMEOUT_MS raises the limit)",
                     comm->timeout_ms, h->req.len);
        else
            GW_ERROR(&comm->log, "api",
                     "gw_test: no progress for %d ms on a %zu-byte %s rank %d (%zu done%s); the "
                     "peer may be hung (GW_TIMEOUT_MS raises the limit)",
                     comm->timeout_ms, h->req.len,
                     h->req.kind == GW_REQ_SEND ? "send to" : "receive from",
                     gw__comm_from_root(comm, h->req.peer), h->req.bytes_done,
                     unreceipted ? ", no receipt: it has not posted the matching receive" : "");
        *done = 1;
        gw_comm_blame_t b = {.status = GW_ERR_TIMEOUT,
                             .culprit = h->req.peer, /* root ranks, as blame speaks */
                             .origin = gw__comm_to_root(comm, comm->rank),
                             .kind = GW_BLAME_TIMEOUT,
                             .waiting_on = h->req.peer,
                             .stalled_ms = now - h->last_moved_ms};
        return finish(h, gw__comm_fail_with(comm, &b));
    }
    return GW_OK;
}

static gw_status_t wait_claimed(gw_handle_t *h)
{
    if (h->req.complete)
        return finish(h, GW_OK);
    gw_request_t *reqs[1] = {&h->req};
    gw_status_t st = h->comm->failed;
    if (st == GW_OK)
        st = wait_reqs(h->comm, reqs, 1);
    return finish(h, st);
}

gw_status_t gw__p2p_check_idle(gw_comm_t *comm, const char *what)
{
    if (comm->p2p_npending == 0)
        return GW_OK;
    GW_ERROR(&comm->log, "api",
             "%s was started while %d gw_isend/gw_irecv (or tagged) handle%s of this rank %s "
             "not complete: wait for them first (messages and collectives must not overlap)",
             what, comm->p2p_npending, comm->p2p_npending == 1 ? "" : "s",
             comm->p2p_npending == 1 ? "is" : "are");
    /* No progress thread runs while messages are pending (posting them
     * stopped it), so this thread may claim the transport. */
    gw__comm_drive_begin(comm);
    gw_status_t st = gw__comm_fail(comm, GW_ERR_INVALID_ARG);
    gw__comm_drive_end(comm);
    return st;
}

void gw__p2p_abandon(gw_comm_t *comm)
{
    if (comm->p2p_npending > 0)
        GW_WARN(&comm->log, "api",
                "gw_comm_destroy: %d gw_isend/gw_irecv (or tagged) handle%s never completed; %s "
                "GW_ERR_ABORTED",
                comm->p2p_npending, comm->p2p_npending == 1 ? "" : "s",
                comm->p2p_npending == 1 ? "it returns" : "they return");
    while (comm->p2p_pending) {
        gw_handle_t *h = comm->p2p_pending;
        comm->p2p_pending = h->next;
        h->status = GW_ERR_ABORTED;
        gw__device_p2p_release(comm, h->staged);
        h->staged = NULL;
        atomic_store(&h->done, 1);
    }
    comm->p2p_npending = 0;
    gw__match_free(comm);
}
