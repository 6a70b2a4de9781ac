/*
 * ib_oob.c - connect() without librdmacm: queue pair numbers, PSNs and the
 * readiness of both ends exchanged over TCP, as NCCL does over its socket
 * bootstrap (GW_IB_CM=oob, and the default where librdmacm cannot be used:
 * InfiniBand without IPoIB, or no librdmacm).
 *
 * At open() every rank listens on a TCP port on the interface that routes to
 * the bootstrap root (or GW_SOCKET_IFNAME), and publishes it in its address
 * blob next to its LID, GID, GID index and active MTU. connect() creates all
 * QPs (INIT, receives posted), then for every pair the higher rank dials
 * the lower one; over that socket each side sends a hello {job id, ranks,
 * QPs per peer, first PSN, QP numbers}; each side, once it has the other's
 * hello, moves its QPs to RTR and RTS and sends one READY byte; a pair is up
 * when both READY bytes crossed, so nothing is ever written to a QP whose
 * remote end is not yet ready to receive. Everything runs in one poll() loop
 * under one deadline. Connections without a valid hello for this job are
 * strangers: logged at WARN and dropped; when 64 connections wait without a
 * hello, the one that has waited longest is dropped to make room, so that
 * strangers, silent or not, cannot lock a rank out. Dialling, its retries
 * (10 ms doubling up to 1 s) and the transfers are the socket module's
 * (transport/sock.h), shared with the TCP transport and the bootstrap.
 *
 * The socket stays open afterwards with nothing on it: when the peer's
 * process dies the kernel closes it, and progress() sees the EOF at once
 * instead of waiting for RDMA retries to run out.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/clock.h"
#include "transport/ib/ib_internal.h"
#include "transport/sock.h"

#define MAX_STRANGERS 64
#define READY_BYTE 0x52

gw_status_t gw__ib_oob_listen(gw_ib_t *t, const gw_transport_params_t *params, char *desc,
                              size_t desc_cap)
{
    const gw_logger_t *lg = t->base.log;
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    char why[160], str[64];
    gw_status_t st = gw__sock_pick_addr(lg, GW_IB_SUBSYS, params->ifname, &params->default_addr,
                                        params->default_addr_len, &ss, &sl, why, sizeof(why));
    if (st != GW_OK)
        return st;
    gw__sock_addr_str((const struct sockaddr *)&ss, str, sizeof(str));
    t->listen_fd = gw__sock_open(ss.ss_family);
    if (t->listen_fd < 0) {
        GW_ERROR(lg, GW_IB_SUBSYS, "socket() for the out-of-band listener on %s: %m", str);
        return GW_ERR_SYSTEM;
    }
    long backlog = (long)t->base.size + 64;
    if (bind(t->listen_fd, (const struct sockaddr *)&ss, sl) != 0 ||
        listen(t->listen_fd, backlog > 65535 ? 65535 : (int)backlog) != 0) {
        GW_ERROR(lg, GW_IB_SUBSYS, "out-of-band listener on %s (%s): %m", str, why);
        return GW_ERR_SYSTEM;
    }
    sl = sizeof(ss);
    if (getsockname(t->listen_fd, (struct sockaddr *)&ss, &sl) != 0) {
        GW_ERROR(lg, GW_IB_SUBSYS, "getsockname() of the out-of-band listener: %m");
        return GW_ERR_SYSTEM;
    }
    memcpy(&t->local.sa, &ss, sizeof(ss));
    gw__sock_addr_str((const struct sockaddr *)&ss, str, sizeof(str));
    snprintf(desc, desc_cap, "out of band via TCP %s (%s)", str, why);
    return GW_OK;
}

typedef enum phase {
    P_DIAL,       /* out: waiting to retry connect(), or connect() in progress */
    P_SEND,       /* sending buf[done..len) */
    P_RECV_HELLO, /* receiving the peer's hello */
    P_RECV_READY, /* receiving the peer's READY byte */
    P_DONE,
} phase_t;

typedef struct conn {
    gw_sock_dial_t s; /* the socket; the rest serves only the connections we dial */
    int peer;         /* -1: incoming, not identified yet */
    int out;          /* we dialled */
    phase_t phase;
    phase_t after_send;
    uint8_t buf[GW_IB_HELLO_SIZE + 1];
    size_t len, done;
    uint64_t accepted; /* incoming: its place in the order of accepts */
} conn_t;

typedef struct mesh {
    gw_ib_t *t;
    conn_t *c;
    int n, cap;
    uint32_t *peer_psn; /* our first PSN towards each rank */
    int pending;        /* peers not done */
    uint64_t accepts;   /* connections accepted so far */
} mesh_t;

static const gw_logger_t *lg_of(const mesh_t *m) { return m->t->base.log; }

static void make_hello(mesh_t *m, int peer, uint8_t out[GW_IB_HELLO_SIZE])
{
    gw_ib_t *t = m->t;
    gw_ib_hello_t h;
    memset(&h, 0, sizeof(h));
    h.id.magic = GW_IB_HELLO_MAGIC;
    h.version = GW_IB_PROTOCOL_VERSION;
    memcpy(h.id.job_id, t->job_id, 16);
    h.id.from = (uint32_t)t->base.rank;
    h.id.to = (uint32_t)peer;
    h.nqps = (uint32_t)t->nqps;
    h.psn = m->peer_psn[peer];
    for (int k = 0; k < t->nqps; k++)
        h.qpn[k] = t->peers[peer].qp[k]->qp_num;
    gw__ib_hello_encode(&h, out);
}

static void out_retry(mesh_t *m, conn_t *c, const char *what)
{
    int pause = gw__sock_dial_failed(&c->s, what);
    GW_TRACE(lg_of(m), GW_IB_SUBSYS, "out-of-band connection to %s: %s; retrying in %d ms",
             m->t->peers[c->peer].desc, c->s.why, pause);
    c->phase = P_DIAL;
}

/* Dial c's peer (when its attempt is due, or finish connect() as revents
 * says); once connected, send our hello. */
static void out_dial(mesh_t *m, conn_t *c, short revents)
{
    const struct sockaddr *sa = (const struct sockaddr *)&m->t->peers[c->peer].addr.sa;
    socklen_t sl =
        sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    const char *what;
    int st = gw__sock_dial_step(&c->s, sa, sl, revents, NULL, NULL, &what);
    if (st == GW_SOCK_FAILED)
        out_retry(m, c, what);
    if (st != GW_SOCK_CONNECTED)
        return;
    make_hello(m, c->peer, c->buf);
    c->len = GW_IB_HELLO_SIZE;
    c->done = 0;
    c->phase = P_SEND;
    c->after_send = P_RECV_HELLO;
}

/* A hello received on c: check it and bring the pair's QPs up. */
static gw_status_t on_hello(mesh_t *m, conn_t *c)
{
    gw_ib_t *t = m->t;
    gw_ib_hello_t h;
    gw__ib_hello_decode(c->buf, &h);
    int valid = h.id.magic == GW_IB_HELLO_MAGIC && h.version == GW_IB_PROTOCOL_VERSION &&
                memcmp(h.id.job_id, t->job_id, 16) == 0 && h.id.to == (uint32_t)t->base.rank &&
                h.id.from < (uint32_t)t->base.size && h.id.from != (uint32_t)t->base.rank &&
                t->peers[h.id.from].active;
    if (c->out && (!valid || h.id.from != (uint32_t)c->peer)) {
        GW_ERROR(lg_of(m), GW_IB_SUBSYS,
                 "%s answered our out-of-band hello with a wrong one (magic 0x%08x, rank %u -> "
                 "%u): is a process of another job listening there?",
                 t->peers[c->peer].desc, (unsigned)h.id.magic, (unsigned)h.id.from,
                 (unsigned)h.id.to);
        return GW_ERR_PROTOCOL;
    }
    if (!c->out) {
        if (!valid || h.id.from < (uint32_t)t->base.rank) {
            GW_WARN(lg_of(m), GW_IB_SUBSYS,
                    "dropping an out-of-band connection with an invalid hello (magic 0x%08x, "
                    "rank %u -> %u)",
                    (unsigned)h.id.magic, (unsigned)h.id.from, (unsigned)h.id.to);
            close(c->s.fd);
            c->s.fd = -1;
            c->phase = P_DONE;
            return GW_OK;
        }
        c->peer = (int)h.id.from;
        if (t->peers[c->peer].oob_fd >= 0 || t->peers[c->peer].qp_up) {
            GW_ERROR(lg_of(m), GW_IB_SUBSYS, "%s connected out of band twice",
                     t->peers[c->peer].desc);
            return GW_ERR_PROTOCOL;
        }
    }
    gw_ib_peer_t *p = &t->peers[c->peer];
    if (h.nqps != (uint32_t)t->nqps) {
        GW_ERROR(lg_of(m), GW_IB_SUBSYS, "%s uses %u QPs per peer, this rank %d (GW_IB_QPS)",
                 p->desc, (unsigned)h.nqps, t->nqps);
        return GW_ERR_CONFIG;
    }
    for (int k = 0; k < t->nqps; k++) {
        gw_status_t st = gw__ib_qp_connect(t, p, k, h.qpn[k], h.psn, m->peer_psn[c->peer]);
        if (st != GW_OK)
            return st;
    }
    p->qp_up = t->nqps;
    c->len = 0;
    if (!c->out) {
        make_hello(m, c->peer, c->buf);
        c->len = GW_IB_HELLO_SIZE;
    }
    c->buf[c->len++] = READY_BYTE;
    c->done = 0;
    c->phase = P_SEND;
    c->after_send = P_RECV_READY;
    return GW_OK;
}

static gw_status_t on_ready(mesh_t *m, conn_t *c)
{
    gw_ib_peer_t *p = &m->t->peers[c->peer];
    if (c->buf[0] != READY_BYTE) {
        GW_ERROR(lg_of(m), GW_IB_SUBSYS, "%s sent 0x%02x instead of READY out of band", p->desc,
                 c->buf[0]);
        return GW_ERR_PROTOCOL;
    }
    p->oob_fd = c->s.fd; /* kept: its EOF tells us the peer died */
    c->s.fd = -1;
    c->phase = P_DONE;
    m->pending--;
    return GW_OK;
}

/* Move c as far as its socket allows. */
static gw_status_t step(mesh_t *m, conn_t *c, short revents)
{
    for (;;) {
        int r;
        switch (c->phase) {
        case P_DIAL:
            out_dial(m, c, revents);
            if (c->phase == P_DIAL)
                return GW_OK;
            continue;
        case P_SEND:
            r = gw__sock_io_buf(c->s.fd, c->buf, c->len, &c->done, 1);
            if (r == GW_SOCK_IO_AGAIN)
                return GW_OK;
            if (r != GW_SOCK_IO_DONE)
                goto broken;
            c->phase = c->after_send;
            c->done = 0;
            continue;
        case P_RECV_HELLO:
        case P_RECV_READY: {
            size_t want = c->phase == P_RECV_HELLO ? GW_IB_HELLO_SIZE : 1;
            r = gw__sock_io_buf(c->s.fd, c->buf, want, &c->done, 0);
            if (r == GW_SOCK_IO_AGAIN)
                return GW_OK;
            if (r != GW_SOCK_IO_DONE) {
                if (r == GW_SOCK_IO_EOF)
                    errno = ECONNRESET;
                goto broken;
            }
            c->done = 0;
            gw_status_t st = c->phase == P_RECV_HELLO ? on_hello(m, c) : on_ready(m, c);
            if (st != GW_OK || c->phase == P_DONE)
                return st;
            continue;
        }
        case P_DONE:
            return GW_OK;
        }
    }
broken:
    if (c->out && c->phase != P_RECV_READY && !m->t->peers[c->peer].qp_up) {
        out_retry(m, c, c->phase == P_SEND ? "send" : "recv");
        return GW_OK;
    }
    if (c->peer < 0) { /* a stranger that went away */
        close(c->s.fd);
        c->s.fd = -1;
        c->phase = P_DONE;
        return GW_OK;
    }
    GW_ERROR(lg_of(m), GW_IB_SUBSYS, "out-of-band connection with %s broke during setup: %m",
             m->t->peers[c->peer].desc);
    return GW_ERR_REMOTE;
}

static gw_status_t accept_new(mesh_t *m)
{
    for (;;) {
        int fd = gw__sock_accept(m->t->listen_fd, NULL, 0);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
                return GW_OK;
            GW_ERROR(lg_of(m), GW_IB_SUBSYS, "accept() on the out-of-band listener: %m");
            return GW_ERR_SYSTEM;
        }
        /* The slot of an incoming connection that is over (a stranger
         * dropped, a peer handed over) serves again: otherwise strangers
         * that came and went would use the table up, and a rank that
         * connects after them would be turned away until the deadline. */
        int live = 0;
        conn_t *c = NULL, *oldest = NULL;
        for (int i = 0; i < m->n; i++) {
            conn_t *o = &m->c[i];
            if (!o->out && o->peer < 0 && o->s.fd >= 0) {
                live++;
                if (!oldest || o->accepted < oldest->accepted)
                    oldest = o;
            }
            if (!c && !o->out && o->s.fd < 0 && o->phase == P_DONE)
                c = o;
        }
        if (!c && m->n < m->cap)
            c = &m->c[m->n++];
        if (live >= MAX_STRANGERS) {
            /* Unidentified connections that say nothing would hold every
             * slot until the deadline: the one that has waited longest
             * makes room, as in the TCP transport. A rank dropped this way
             * sees EOF and dials again. Its slot is left for a later
             * accept: poll() may have reported events on its socket. */
            GW_WARN(lg_of(m), GW_IB_SUBSYS, "too many unidentified out-of-band connections");
            close(oldest->s.fd);
            oldest->s.fd = -1;
            oldest->phase = P_DONE;
        }
        if (!c) { /* not expected: the table has room for every rank and MAX_STRANGERS more */
            close(fd);
            continue;
        }
        memset(c, 0, sizeof(*c));
        c->accepted = m->accepts++;
        gw__sock_dial_init(&c->s);
        c->s.fd = fd;
        c->peer = -1;
        c->phase = P_RECV_HELLO;
    }
}

static gw_status_t create_qps(gw_ib_t *t, mesh_t *m)
{
    for (int r = 0; r < t->base.size; r++) {
        if (!t->peers[r].active)
            continue;
        gw_ib_peer_t *p = &t->peers[r];
        for (int k = 0; k < t->nqps; k++) {
            gw_status_t st = gw__ib_qp_create(t, p, k);
            if (st == GW_OK)
                st = gw__ib_qp_post_recvs(t, p, k, GW_IB_WQ_DEPTH);
            if (st != GW_OK)
                return st;
        }
        uint32_t psn = 0;
        if (getrandom(&psn, sizeof(psn), 0) != (ssize_t)sizeof(psn))
            psn = (uint32_t)gw__now_ns() ^ ((uint32_t)r << 16);
        m->peer_psn[r] = psn & 0xffffff;
    }
    return GW_OK;
}

static void report_missing(mesh_t *m)
{
    gw_ib_t *t = m->t;
    for (int r = 0; r < t->base.size; r++) {
        if (!t->peers[r].active || t->peers[r].oob_fd >= 0)
            continue;
        const char *why = "";
        for (int i = 0; i < m->n; i++)
            if (m->c[i].out && m->c[i].peer == r && m->c[i].s.why[0])
                why = m->c[i].s.why;
        GW_ERROR(lg_of(m), GW_IB_SUBSYS,
                 "no out-of-band connection with %s after %d ms%s%s (is it alive, and does a "
                 "firewall let TCP through?)",
                 t->peers[r].desc, t->timeout_ms, why[0] ? ": last error: " : "", why);
    }
}

gw_status_t gw__ib_oob_connect(gw_ib_t *t)
{
    mesh_t m;
    memset(&m, 0, sizeof(m));
    m.t = t;
    m.cap = t->base.size + MAX_STRANGERS + 8;
    m.c = calloc((size_t)m.cap, sizeof(*m.c));
    m.peer_psn = calloc((size_t)t->base.size, sizeof(*m.peer_psn));
    struct pollfd *pfds = calloc((size_t)m.cap + 1, sizeof(*pfds));
    gw_status_t st = GW_ERR_NO_MEMORY;
    if (!m.c || !m.peer_psn || !pfds)
        goto out;
    if ((st = create_qps(t, &m)) != GW_OK)
        goto out;
    m.pending = 0;
    for (int r = 0; r < t->base.size; r++)
        m.pending += t->peers[r].active;
    for (int r = 0; r < t->base.rank; r++) {
        if (!t->peers[r].active)
            continue;
        conn_t *c = &m.c[m.n++];
        gw__sock_dial_init(&c->s);
        c->peer = r;
        c->out = 1;
        c->phase = P_DIAL;
    }
    int64_t deadline = gw__now_ms() + t->timeout_ms;
    while (m.pending > 0) {
        for (int i = 0; i < m.n; i++)
            if ((st = step(&m, &m.c[i], 0)) != GW_OK)
                goto out;
        if (m.pending == 0)
            break;
        int np = 0;
        pfds[np++] = (struct pollfd){.fd = t->listen_fd, .events = POLLIN};
        int64_t now = gw__now_ms(), wake = deadline;
        for (int i = 0; i < m.n; i++) {
            conn_t *c = &m.c[i];
            short ev = c->phase == P_SEND                                     ? POLLOUT
                       : c->phase == P_RECV_HELLO || c->phase == P_RECV_READY ? POLLIN
                                                                              : 0;
            if (c->phase == P_DIAL)
                ev = gw__sock_dial_events(&c->s);
            if (c->phase == P_DIAL && c->s.fd < 0 && c->s.retry.at < wake)
                wake = c->s.retry.at;
            pfds[np++] = (struct pollfd){.fd = ev ? c->s.fd : -1, .events = ev};
        }
        if (now >= deadline) {
            report_missing(&m);
            st = GW_ERR_TIMEOUT;
            goto out;
        }
        int rc = poll(pfds, (nfds_t)np, (int)(wake > now ? wake - now : 0));
        if (rc < 0 && errno != EINTR) {
            GW_ERROR(lg_of(&m), GW_IB_SUBSYS, "poll() while connecting out of band: %m");
            st = GW_ERR_SYSTEM;
            goto out;
        }
        if (rc <= 0)
            continue;
        if (pfds[0].revents && (st = accept_new(&m)) != GW_OK)
            goto out;
        for (int i = 0; i + 1 < np; i++)
            if (pfds[i + 1].revents && (st = step(&m, &m.c[i], pfds[i + 1].revents)) != GW_OK)
                goto out;
    }
    st = GW_OK;
out:
    for (int i = 0; m.c && i < m.n; i++)
        if (m.c[i].s.fd >= 0)
            close(m.c[i].s.fd);
    /* The listener is not needed any more; strangers get refused. */
    if (st == GW_OK && t->listen_fd >= 0) {
        close(t->listen_fd);
        t->listen_fd = -1;
    }
    free(m.c);
    free(m.peer_psn);
    free(pfds);
    return st;
}
