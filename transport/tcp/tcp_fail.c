/*
 * tcp_fail.c - the failure path of the TCP transport.
 *
 * The first failure breaks the transport for good: the base
 * (transport/base.c) logs it once, at ERROR, naming the peer by rank and
 * listening address (gw__tcp_describe_peer), and keeps it as the status
 * every later call returns; every pending request completes with it
 * (gw__tcp_fail_pending, which also marks frames left half written). The
 * helpers here turn what the sockets report (an errno, EOF, a hang-up)
 * into that one message and status. A peer that aborted is reported with
 * the status, origin and culprit it sent, even when its close after the
 * abort broke the connection before we read the ABORT frame in the normal
 * course.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/tcp/tcp_internal.h"

void gw__tcp_fail_pending(gw_transport_t *base, gw_status_t st)
{
    gw_tcp_t *t = gw__tcp_of(base);
    for (int i = 0; i < t->base.size; i++) {
        gw_tcp_peer_t *p = &t->peers[i];
        if (i == t->base.rank || !p->socks)
            continue;
        gw__req_queue_fail(&p->sq_head, &p->sq_tail, st);
        gw__req_queue_fail(&p->rq_head, &p->rq_tail, st);
        gw__req_queue_fail(&p->aq_head, &p->aq_tail, st);
        for (int k = 0; k < t->nsocks; k++) {
            gw_tcp_sock_t *s = &p->socks[k];
            /* abort() and close() may write a frame only where the peer
             * expects a header, so remember a frame left half written. */
            if ((s->sreq || s->s_receipt) && s->s_hdr_done > 0)
                s->s_midframe = 1;
            s->sreq = NULL;
            s->s_receipt = 0;
            s->rreq = NULL;
        }
    }
}

void gw__tcp_describe_peer(const gw_transport_t *base, int peer, char *buf, size_t cap)
{
    const gw_tcp_t *t = gw__container_of(base, gw_tcp_t, base);
    snprintf(buf, cap, "rank %d (%s)", peer, t->peers[peer].addr_str);
}

/* The connection to p broke. If p aborted, its ABORT frame may still wait
 * unread on one of its sockets (Linux keeps received data readable after a
 * reset, and p's close after the abort often causes one): then p's status is
 * the better report. Only sockets at a header boundary can hold it. */
static int find_abort(gw_tcp_t *t, gw_tcp_peer_t *p, gw_tcp_hdr_t *abort_hdr)
{
    for (int k = 0; k < t->nsocks; k++) {
        gw_tcp_sock_t *s = &p->socks[k];
        if (s->fd < 0 || s->rreq || s->r_held || s->eof)
            continue;
        while (s->rb_len - s->rb_pos < GW_TCP_HDR_SIZE)
            if (gw__tcp_rb_fill(t, s) <= 0)
                break;
        if (s->rb_len - s->rb_pos < GW_TCP_HDR_SIZE)
            continue;
        gw_tcp_hdr_t h;
        gw__tcp_hdr_decode(s->rb + s->rb_pos, &h);
        s->rb_pos += GW_TCP_HDR_SIZE;
        if (h.magic == GW_TCP_FRAME_MAGIC && h.type == GW_TCP_ABORT) {
            *abort_hdr = h;
            return 1;
        }
    }
    return 0;
}

gw_status_t gw__tcp_peer_aborted(gw_tcp_t *t, const gw_tcp_peer_t *p, const gw_tcp_hdr_t *h)
{
    gw_abort_info_t got = {
        .status = gw__transport_abort_status(h->status),
        .origin = gw__transport_abort_rank((int64_t)h->total, t->base.size),
        .culprit = gw__transport_abort_rank((int64_t)h->offset, t->base.size),
    };
    return gw__transport_peer_aborted(&t->base, p->rank, &got);
}

/* A send or receive failed with errno err. */
gw_status_t gw__tcp_sock_errno(gw_tcp_t *t, gw_tcp_peer_t *p, gw_tcp_sock_t *s, int err,
                               const char *op)
{
    s->dead = 1;
    gw_tcp_hdr_t ah;
    if (find_abort(t, p, &ah))
        return gw__tcp_peer_aborted(t, p, &ah);
    errno = err;
    if (p->goodbye || s->goodbye)
        return gw__tcp_peer_fail(t, p, GW_ERR_REMOTE,
                                 "already closed its communicator (%s on socket %d: %m)", op,
                                 s->idx);
    if (err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == ECONNABORTED ||
        err == EHOSTUNREACH || err == ENETUNREACH || err == ENETDOWN)
        return gw__tcp_peer_fail(t, p, GW_ERR_REMOTE,
                                 "broke the connection (%s on socket %d: %m): it probably died", op,
                                 s->idx);
    return gw__tcp_peer_fail(t, p, GW_ERR_SYSTEM, "%s on socket %d: %m", op, s->idx);
}

gw_status_t gw__tcp_sock_eof(gw_tcp_t *t, gw_tcp_peer_t *p, gw_tcp_sock_t *s)
{
    s->dead = 1;
    gw_tcp_hdr_t ah;
    if (find_abort(t, p, &ah))
        return gw__tcp_peer_aborted(t, p, &ah);
    if (p->goodbye)
        return gw__tcp_peer_fail(
            t, p, GW_ERR_REMOTE,
            "already closed its communicator (socket %d closed in the middle of "
            "a message)",
            s->idx);
    return gw__tcp_peer_fail(t, p, GW_ERR_REMOTE,
                             "closed the connection without goodbye (socket %d): it probably died",
                             s->idx);
}

/* A socket we are not reading (its next header waits for a receive) got an
 * error or hang-up: the connection is gone. */
gw_status_t gw__tcp_idle_sock_error(gw_tcp_t *t, gw_tcp_peer_t *p, gw_tcp_sock_t *s)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0)
        return gw__tcp_sock_errno(t, p, s, err, "poll");
    s->dead = 1;
    gw_tcp_hdr_t ah;
    if (find_abort(t, p, &ah))
        return gw__tcp_peer_aborted(t, p, &ah);
    return gw__tcp_peer_fail(t, p, GW_ERR_REMOTE,
                             "hung up the connection (socket %d): it probably died", s->idx);
}
