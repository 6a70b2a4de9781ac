/*
 * tcp_fail.c - the failure path of the TCP transport.
 *
 * The first failure breaks the transport for good: it is logged once, at
 * ERROR, naming the peer (rank and listening address) and what happened;
 * every pending request completes with it; and every later call returns it.
 * The helpers here turn what the sockets report (an errno, EOF, a hang-up)
 * into that one message and status. A peer that aborted is reported with
 * the status it sent, even when its close after the abort broke the
 * connection before we read the ABORT frame in the normal course.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/tcp/tcp_internal.h"

static void fail_queue(gw_request_t **head, gw_request_t **tail, gw_status_t st)
{
    gw_request_t *r = *head;
    while (r) {
        gw_request_t *next = r->next;
        r->next = NULL;
        gw__tcp_complete(r, st);
        r = next;
    }
    *head = *tail = NULL;
}

gw_status_t gw__tcp_fail(gw_tcp_t *t, gw_status_t st, const char *fmt, ...)
{
    if (t->failed != GW_OK)
        return t->failed;
    if (fmt && t->base.log && t->base.log->level >= GW_LOG_ERROR) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        GW_ERROR(t->base.log, GW_TCP_SUBSYS, "%s", msg);
    }
    t->failed = st;
    for (int i = 0; i < t->base.size; i++) {
        gw_tcp_peer_t *p = &t->peers[i];
        if (i == t->base.rank || !p->socks)
            continue;
        fail_queue(&p->sq_head, &p->sq_tail, st);
        fail_queue(&p->rq_head, &p->rq_tail, st);
        for (int k = 0; k < t->nsocks; k++) {
            gw_tcp_sock_t *s = &p->socks[k];
            /* abort() and close() may write a frame only where the peer
             * expects a header, so remember a frame left half written. */
            if (s->sreq && s->s_hdr_done > 0)
                s->s_midframe = 1;
            s->sreq = NULL;
            s->rreq = NULL;
        }
    }
    return st;
}

gw_status_t gw__tcp_peer_fail(gw_tcp_t *t, const gw_tcp_peer_t *p, gw_status_t st, const char *fmt,
                              ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return gw__tcp_fail(t, st, "rank %d (%s) %s", p->rank, p->addr_str, msg);
}

/* An ABORT frame carries the peer's status; anything we do not know as a
 * failure status still means the peer aborted. */
gw_status_t gw__tcp_abort_status(int32_t wire)
{
    gw_status_t st = (gw_status_t)wire;
    if (wire <= 0 || strcmp(gw_status_name(st), "GW_UNKNOWN_STATUS") == 0)
        return GW_ERR_ABORTED;
    return st;
}

/* The connection to p broke. If p aborted, its ABORT frame may still wait
 * unread on one of its sockets (Linux keeps received data readable after a
 * reset, and p's close after the abort often causes one): then p's status is
 * the better report. Only sockets at a header boundary can hold it. */
static int find_abort(gw_tcp_peer_t *p, int nsocks, gw_status_t *st)
{
    for (int k = 0; k < nsocks; k++) {
        gw_tcp_sock_t *s = &p->socks[k];
        if (s->fd < 0 || s->rreq || s->r_held || s->eof)
            continue;
        while (s->r_got < GW_TCP_HDR_SIZE) {
            ssize_t n = recv(s->fd, s->r_buf + s->r_got, GW_TCP_HDR_SIZE - s->r_got, MSG_DONTWAIT);
            if (n <= 0)
                break;
            s->r_got += (size_t)n;
        }
        if (s->r_got < GW_TCP_HDR_SIZE)
            continue;
        s->r_got = 0;
        gw_tcp_hdr_t h;
        gw__tcp_hdr_decode(s->r_buf, &h);
        if (h.magic == GW_TCP_FRAME_MAGIC && h.type == GW_TCP_ABORT) {
            *st = gw__tcp_abort_status(h.status);
            return 1;
        }
    }
    return 0;
}

gw_status_t gw__tcp_peer_aborted(gw_tcp_t *t, const gw_tcp_peer_t *p, gw_status_t st)
{
    return gw__tcp_fail(t, st, "rank %d (%s) aborted: %s", p->rank, p->addr_str, gw_status_str(st));
}

/* A send or receive failed with errno err. */
gw_status_t gw__tcp_sock_errno(gw_tcp_t *t, gw_tcp_peer_t *p, gw_tcp_sock_t *s, int err,
                               const char *op)
{
    s->dead = 1;
    gw_status_t ast;
    if (find_abort(p, t->nsocks, &ast))
        return gw__tcp_peer_aborted(t, p, ast);
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
    gw_status_t ast;
    if (find_abort(p, t->nsocks, &ast))
        return gw__tcp_peer_aborted(t, p, ast);
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
    gw_status_t ast;
    if (find_abort(p, t->nsocks, &ast))
        return gw__tcp_peer_aborted(t, p, ast);
    return gw__tcp_peer_fail(t, p, GW_ERR_REMOTE,
                             "hung up the connection (socket %d): it probably died", s->idx);
}
