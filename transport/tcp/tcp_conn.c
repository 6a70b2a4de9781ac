/*
 * tcp_conn.c - connect(): the full mesh of the TCP transport.
 *
 * Every pair of ranks is joined by nsocks connections (GW_NSOCKS data
 * sockets and the control one that carries receipts, tcp.c), all opened by the
 * higher rank: rank i connects to every j < i and accepts from every j > i.
 * So each connection is opened exactly once, and nobody waits for a
 * connection that it should have opened itself. Everything happens in one
 * poll() loop under one deadline (connects in flight, handshakes in both
 * directions, accepts), so a slow peer delays nobody else's connections and
 * the call finishes or fails within timeout_ms.
 *
 * The connecting side sends a hello {magic, version, job id, from, to,
 * nonce, socket index, data sockets} (layout in tcp_wire.c); the accepting side
 * checks what it says and answers with its own hello and nonce and its
 * proof of the job's data-plane key; the connecting side checks both and
 * answers with its proof; the accepting side checks that and admits the
 * connection with one byte (the handshake is the socket module's,
 * transport/sock_auth.c, shared with the verbs out-of-band set-up). So both
 * ends know the connection is the one they meant, and that the other end
 * knows the job token: the job id, which is no secret, admits nobody.
 * Anything that connects to our port without completing this (a port
 * scanner, a health check, a rank of another job that reuses an address,
 * an impostor that learnt the job id and claims a rank, a recorded
 * handshake played back) is a stranger: it is logged at WARN with its
 * address and why, and closed, and the job carries on. Only a proven
 * connection holds a rank's socket slot, so an impostor's claim never
 * shuts the real rank out. A rank of this job that uses another number of
 * sockets per peer is a configuration error, reported at once on both
 * ends rather than as a time-out, but only once it proved the key.
 *
 * A refused connection is retried with growing sleeps (10 ms doubling up to
 * 1 s, as every dialler in sock.h). Every rank listens before the bootstrap
 * exchange, so a refusal is more likely a firewall or a dead peer than a
 * slow one, but retrying costs nothing until the deadline, whose error names
 * each peer still missing.
 *
 * Peers whose address blob is all zero are served by another transport
 * (transport.h): they get no sockets, we neither dial nor expect them, and
 * a hello that claims to come from one of them is a stranger's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/byteorder.h"
#include "common/clock.h"
#include "transport/sock.h"
#include "transport/tcp/tcp_internal.h"

#define MAX_STRANGERS 64 /* connections not yet admitted, kept at once */

/* OUT_DIAL: waiting for the next attempt, or for connect() (see dial). */
typedef enum out_state { OUT_DIAL, OUT_SHAKE, OUT_DONE } out_state_t;

typedef struct out_conn {
    gw_sock_dial_t dial;
    int peer, idx;
    out_state_t state;
    gw_sock_shake_t sh;
} out_conn_t;

typedef struct in_conn {
    int fd; /* -1 once handed over or dropped */
    char addr[64];
    gw_sock_shake_t sh;
    int proven;      /* it proved the key and is being admitted */
    int bad_nsocks;  /* its hello's sockets per peer differ from ours */
    uint32_t nsocks; /* ... which are these */
    uint32_t from, idx;
} in_conn_t;

typedef struct mesh {
    gw_tcp_t *t;
    out_conn_t *outs;
    int nout;
    in_conn_t *ins;
    int nin, cap_in;
    int in_expected, in_done;
    struct pollfd *pfds;
    gw_sock_seen_t seen; /* dialler nonces seen, to name replays */
} mesh_t;

static const gw_logger_t *lg_of(const mesh_t *m) { return m->t->base.log; }

static void make_hello(const gw_tcp_t *t, int from, int to, int idx, uint8_t out[GW_TCP_HELLO_SIZE])
{
    gw_tcp_hello_t h = {
        .id = {.magic = GW_TCP_HELLO_MAGIC, .from = (uint32_t)from, .to = (uint32_t)to},
        .version = GW_TCP_PROTOCOL_VERSION,
        .sock_idx = (uint32_t)idx,
        .nsocks = (uint32_t)t->ndata};
    memcpy(h.id.job_id, t->job_id, sizeof(h.id.job_id));
    gw__tcp_hello_encode(&h, out);
}

/* ---- connecting side ------------------------------------------------------- */

/* Record why an attempt failed (errno is that failure) and try again later. */
static void out_retry(mesh_t *m, out_conn_t *o, const char *what)
{
    int pause = gw__sock_dial_failed(&o->dial, what);
    GW_TRACE(lg_of(m), GW_TCP_SUBSYS, "socket %d to rank %d at %s: %s; retrying in %d ms", o->idx,
             o->peer, m->t->peers[o->peer].addr_str, o->dial.why, pause);
    gw__sock_shake_wipe(&o->sh);
    o->state = OUT_DIAL;
}

/* Buffers are set before connect() (see gw__tcp_set_bufs). */
static void out_prep(void *arg, int fd)
{
    const mesh_t *m = arg;
    gw__tcp_set_bufs(lg_of(m), &m->t->bufs, fd);
}

/* Check the accepting side's answer: it must be the rank we dialled, in this
 * job, and prove the key. Anything else at that address will not get
 * better by retrying. */
static gw_status_t out_check_reply(mesh_t *m, out_conn_t *o)
{
    gw_tcp_t *t = m->t;
    const gw_tcp_peer_t *p = &t->peers[o->peer];
    gw_tcp_hello_t h;
    gw__tcp_hello_decode(o->sh.theirs, &h);
    if (h.id.magic != GW_TCP_HELLO_MAGIC || h.version != GW_TCP_PROTOCOL_VERSION ||
        memcmp(h.id.job_id, t->job_id, sizeof(h.id.job_id)) != 0 ||
        h.id.from != (uint32_t)o->peer || h.id.to != (uint32_t)t->base.rank ||
        h.sock_idx != (uint32_t)o->idx) {
        GW_ERROR(lg_of(m), GW_TCP_SUBSYS,
                 "rank %d's address %s answered our hello with a wrong one (magic 0x%08x, "
                 "version %u, rank %u -> %u, socket %u of %u): is a process of another job "
                 "listening there?",
                 o->peer, p->addr_str, (unsigned)h.id.magic, (unsigned)h.version,
                 (unsigned)h.id.from, (unsigned)h.id.to, (unsigned)h.sock_idx, (unsigned)h.nsocks);
        return GW_ERR_PROTOCOL;
    }
    if (gw__sock_shake_confirm(&o->sh) != 0) {
        GW_ERROR(lg_of(m), GW_TCP_SUBSYS,
                 "rank %d's address %s answered as rank %d but with a %s: the process "
                 "listening there is not a rank of this job",
                 o->peer, p->addr_str, o->peer, o->sh.why);
        return GW_ERR_AUTH;
    }
    if (h.nsocks != (uint32_t)t->ndata) {
        /* The peer is genuine: let our proof go out, so that it reports the
         * same configuration error instead of timing out. */
        (void)gw__sock_shake_step(o->dial.fd, &o->sh);
        GW_ERROR(lg_of(m), GW_TCP_SUBSYS,
                 "rank %d (%s) uses %u sockets per peer but this rank uses %d: set the same "
                 "GW_NSOCKS on every rank",
                 o->peer, p->addr_str, (unsigned)h.nsocks, t->ndata);
        return GW_ERR_CONFIG;
    }
    return GW_OK;
}

static gw_status_t out_step(mesh_t *m, out_conn_t *o, short revents)
{
    gw_tcp_t *t = m->t;
    if (o->state == OUT_DIAL) {
        const gw_tcp_peer_t *p = &t->peers[o->peer];
        const char *what;
        int st = gw__sock_dial_step(&o->dial, (const struct sockaddr *)&p->addr, p->addr_len,
                                    revents, out_prep, m, &what);
        if (st == GW_SOCK_FAILED)
            out_retry(m, o, what);
        if (st != GW_SOCK_CONNECTED)
            return GW_OK;
        uint8_t hello[GW_TCP_HELLO_SIZE];
        make_hello(t, t->base.rank, o->peer, o->idx, hello);
        gw_status_t gst =
            gw__sock_shake_dial(&o->sh, lg_of(m), GW_TCP_SUBSYS, t->data_key, GW_TCP_HELLO_MAGIC,
                                hello, sizeof(hello), GW_TCP_HELLO_SIZE);
        if (gst != GW_OK)
            return gst;
        o->state = OUT_SHAKE;
    }
    for (;;) {
        int ev = gw__sock_shake_step(o->dial.fd, &o->sh);
        if (ev == GW_SHAKE_AGAIN)
            return GW_OK;
        if (ev == GW_SHAKE_REPLY) {
            gw_status_t st = out_check_reply(m, o);
            if (st != GW_OK)
                return st;
            continue;
        }
        if (ev == GW_SHAKE_FAILED) {
            /* The peer dropped us (its log says why) or the socket broke:
             * a real rank admits us on the next attempt. */
            if (o->sh.io == GW_SOCK_IO_DONE)
                errno = EPROTO;
            out_retry(m, o, o->sh.why);
            return GW_OK;
        }
        break; /* GW_SHAKE_DONE */
    }
    gw__sock_shake_wipe(&o->sh);
    t->peers[o->peer].socks[o->idx].fd = o->dial.fd;
    o->dial.fd = -1;
    o->state = OUT_DONE;
    return GW_OK;
}

/* ---- accepting side -------------------------------------------------------- */

static void in_drop(mesh_t *m, in_conn_t *c, const char *why)
{
    GW_WARN(lg_of(m), GW_TCP_SUBSYS,
            "closing a connection from %s to our port %s: %s (a stranger, not a rank of this "
            "job; carrying on)",
            c->addr, m->t->local_str, why);
    close(c->fd);
    c->fd = -1;
    gw__sock_shake_wipe(&c->sh);
}

static void in_accept(mesh_t *m)
{
    for (;;) {
        char addr[sizeof(m->ins[0].addr)];
        int fd = gw__sock_accept(m->t->listen_fd, addr, sizeof(addr));
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                GW_WARN(lg_of(m), GW_TCP_SUBSYS, "accept() on %s: %m", m->t->local_str);
            return;
        }
        if (m->nin == m->cap_in) {
            /* Too many connections not yet admitted: drop the oldest. A
             * real rank dropped this way sees EOF and connects again. */
            in_drop(m, &m->ins[0], "too many connections that are not yet admitted");
            memmove(&m->ins[0], &m->ins[1], (size_t)(m->nin - 1) * sizeof(m->ins[0]));
            m->nin--;
        }
        in_conn_t *c = &m->ins[m->nin++];
        memset(c, 0, sizeof(*c));
        c->fd = fd;
        memcpy(c->addr, addr, sizeof(c->addr));
        gw__sock_shake_accept(&c->sh, m->t->data_key, GW_TCP_HELLO_MAGIC, GW_TCP_HELLO_SIZE,
                              &m->seen);
    }
}

/* A socket already handed over, or proven and being admitted: only those
 * hold a slot, so that an impostor's unproven claim to rank r's socket
 * never shuts out rank r itself. */
static int in_duplicate(const mesh_t *m, const in_conn_t *c)
{
    const gw_tcp_peer_t *p = &m->t->peers[c->from];
    if (p->socks[c->idx].fd >= 0)
        return 1;
    for (int i = 0; i < m->nin; i++) {
        const in_conn_t *o = &m->ins[i];
        if (o != c && o->fd >= 0 && o->proven && o->from == c->from && o->idx == c->idx)
            return 1;
    }
    return 0;
}

/* Check a complete hello (its ids only: the proof comes next): GW_OK with
 * our answer queued, GW_OK with c dropped (a stranger), or a fatal error. */
static gw_status_t in_check_hello(mesh_t *m, in_conn_t *c)
{
    gw_tcp_t *t = m->t;
    gw_tcp_hello_t h;
    char why[160];
    gw__tcp_hello_decode(c->sh.theirs, &h);
    if (h.version != GW_TCP_PROTOCOL_VERSION) {
        snprintf(why, sizeof(why), "it speaks gradwire TCP protocol version %u, we speak %u",
                 (unsigned)h.version, GW_TCP_PROTOCOL_VERSION);
    } else if (memcmp(h.id.job_id, t->job_id, sizeof(h.id.job_id)) != 0) {
        snprintf(why, sizeof(why), "it belongs to another job (job id differs)");
    } else if (h.id.to != (uint32_t)t->base.rank || h.id.from <= (uint32_t)t->base.rank ||
               h.id.from >= (uint32_t)t->base.size) {
        snprintf(why, sizeof(why), "it claims to be rank %u connecting to rank %u",
                 (unsigned)h.id.from, (unsigned)h.id.to);
    } else if (!t->peers[h.id.from].socks) {
        snprintf(why, sizeof(why),
                 "it claims to be rank %u, which this job does not connect over TCP",
                 (unsigned)h.id.from);
    } else if (h.nsocks == (uint32_t)t->ndata && h.sock_idx >= (uint32_t)t->nsocks) {
        snprintf(why, sizeof(why), "its socket index %u is out of range", (unsigned)h.sock_idx);
    } else {
        c->from = h.id.from;
        /* Another number of sockets is a configuration error, but only
         * once the sender proved the key: an impostor must not be able to
         * stop the job with a hello. */
        c->bad_nsocks = h.nsocks != (uint32_t)t->ndata;
        c->nsocks = h.nsocks;
        c->idx = c->bad_nsocks ? 0 : h.sock_idx;
        if (c->bad_nsocks || !in_duplicate(m, c)) {
            uint8_t reply[GW_TCP_HELLO_SIZE];
            make_hello(t, t->base.rank, (int)c->from, (int)h.sock_idx, reply);
            return gw__sock_shake_reply(&c->sh, lg_of(m), GW_TCP_SUBSYS, reply, sizeof(reply));
        }
        snprintf(why, sizeof(why), "it repeats rank %u's socket %u", (unsigned)h.id.from,
                 (unsigned)h.sock_idx);
    }
    in_drop(m, c, why);
    return GW_OK;
}

static gw_status_t in_step(mesh_t *m, in_conn_t *c)
{
    gw_tcp_t *t = m->t;
    for (;;) {
        int ev = gw__sock_shake_step(c->fd, &c->sh);
        switch (ev) {
        case GW_SHAKE_AGAIN:
            return GW_OK;
        case GW_SHAKE_FAILED:
            in_drop(m, c,
                    c->sh.io == GW_SOCK_IO_EOF     ? "it closed before completing the handshake"
                    : c->sh.io == GW_SOCK_IO_ERROR ? "the handshake failed on its socket"
                                                   : c->sh.why);
            return GW_OK;
        case GW_SHAKE_HELLO: {
            gw_status_t st = in_check_hello(m, c);
            if (st != GW_OK || c->fd < 0)
                return st;
            continue;
        }
        case GW_SHAKE_PROVEN:
            if (c->bad_nsocks) {
                GW_ERROR(lg_of(m), GW_TCP_SUBSYS,
                         "rank %u (%s) uses %u sockets per peer but this rank uses %d: set the "
                         "same GW_NSOCKS on every rank",
                         (unsigned)c->from, c->addr, (unsigned)c->nsocks, t->ndata);
                return GW_ERR_CONFIG;
            }
            if (in_duplicate(m, c)) {
                char why[96];
                snprintf(why, sizeof(why), "it repeats rank %u's socket %u", (unsigned)c->from,
                         (unsigned)c->idx);
                in_drop(m, c, why);
                return GW_OK;
            }
            c->proven = 1;
            gw__sock_shake_admit(&c->sh);
            continue;
        default: /* GW_SHAKE_DONE */
            gw__sock_shake_wipe(&c->sh);
            t->peers[c->from].socks[c->idx].fd = c->fd;
            c->fd = -1;
            m->in_done++;
            return GW_OK;
        }
    }
}

/* ---- the loop ------------------------------------------------------------ */

static gw_status_t report_timeout(mesh_t *m, int timeout_ms)
{
    gw_tcp_t *t = m->t;
    char msg[1536];
    size_t n = 0;
    msg[0] = '\0';
    int last_peer = -1;
    for (int i = 0; i < m->nout; i++) {
        const out_conn_t *o = &m->outs[i];
        if (o->state == OUT_DONE || o->peer == last_peer)
            continue; /* one entry per peer */
        last_peer = o->peer;
        const char *why = o->state != OUT_DIAL ? "connected, but the handshake did not finish"
                          : o->dial.fd >= 0    ? "connect() got no answer"
                          : o->dial.why[0]     ? o->dial.why
                                               : "not tried";
        int w = snprintf(msg + n, sizeof(msg) - n, "%scould not connect to rank %d at %s (%s)",
                         n ? "; " : "", o->peer, t->peers[o->peer].addr_str, why);
        if (w > 0 && (size_t)w < sizeof(msg) - n)
            n += (size_t)w;
    }
    int first = 1;
    for (int j = t->base.rank + 1; j < t->base.size; j++) {
        if (!t->peers[j].socks)
            continue; /* served by another transport */
        int have = 0;
        for (int k = 0; k < t->nsocks; k++)
            have += t->peers[j].socks[k].fd >= 0;
        if (have == t->nsocks)
            continue;
        int w = snprintf(msg + n, sizeof(msg) - n, "%s%d (%s)",
                         first ? (n ? "; ranks that never connected to us: "
                                    : "ranks that never connected to us: ")
                               : ", ",
                         j, t->peers[j].addr_str);
        if (w > 0 && (size_t)w < sizeof(msg) - n)
            n += (size_t)w;
        first = 0;
    }
    GW_ERROR(lg_of(m), GW_TCP_SUBSYS, "connecting the mesh timed out after %d ms: %s", timeout_ms,
             msg);
    return GW_ERR_TIMEOUT;
}

static int mesh_done(const mesh_t *m)
{
    for (int i = 0; i < m->nout; i++)
        if (m->outs[i].state != OUT_DONE)
            return 0;
    return m->in_done == m->in_expected;
}

static gw_status_t mesh_round(mesh_t *m, int64_t deadline)
{
    gw_tcp_t *t = m->t;
    int64_t now = gw__now_ms();
    int64_t wake = deadline;
    int np = 0;
    m->pfds[np++] = (struct pollfd){.fd = t->listen_fd, .events = POLLIN};
    for (int i = 0; i < m->nout; i++) {
        out_conn_t *o = &m->outs[i];
        int waiting = o->state == OUT_DIAL && o->dial.fd < 0;
        if (waiting && o->dial.retry.at <= now) {
            gw_status_t st = out_step(m, o, 0);
            if (st != GW_OK)
                return st;
            waiting = o->state == OUT_DIAL && o->dial.fd < 0;
        }
        if (waiting && o->dial.retry.at < wake)
            wake = o->dial.retry.at;
        short ev = o->state == OUT_DIAL    ? gw__sock_dial_events(&o->dial)
                   : o->state == OUT_SHAKE ? gw__sock_shake_events(&o->sh)
                                           : 0;
        m->pfds[np++] = (struct pollfd){.fd = ev ? o->dial.fd : -1, .events = ev};
    }
    int nin = m->nin; /* accepts during this round join the next one */
    for (int i = 0; i < nin; i++)
        m->pfds[np++] =
            (struct pollfd){.fd = m->ins[i].fd, .events = gw__sock_shake_events(&m->ins[i].sh)};
    int timeout = wake > now ? (int)(wake - now) : 0;
    int n = poll(m->pfds, (nfds_t)np, timeout);
    if (n < 0) {
        if (errno == EINTR)
            return GW_OK;
        GW_ERROR(lg_of(m), GW_TCP_SUBSYS, "poll() while connecting: %m");
        return GW_ERR_SYSTEM;
    }
    for (int i = 0; i < m->nout; i++) {
        short rev = m->pfds[1 + i].revents;
        if (rev) {
            gw_status_t st = out_step(m, &m->outs[i], rev);
            if (st != GW_OK)
                return st;
        }
    }
    for (int i = 0; i < nin; i++) {
        if (m->pfds[1 + m->nout + i].revents && m->ins[i].fd >= 0) {
            gw_status_t st = in_step(m, &m->ins[i]);
            if (st != GW_OK)
                return st;
        }
    }
    /* Forget the connections handed over or dropped. */
    int k = 0;
    for (int i = 0; i < m->nin; i++)
        if (m->ins[i].fd >= 0)
            m->ins[k++] = m->ins[i];
    m->nin = k;
    if (m->pfds[0].revents & POLLIN)
        in_accept(m);
    return GW_OK;
}

/* The mesh is up: tune the sockets and lay out progress()'s poll set. */
static gw_status_t finish(gw_tcp_t *t, int npeers)
{
    int n = npeers * t->nsocks;
    t->pfds = calloc((size_t)(n ? n : 1), sizeof(*t->pfds));
    t->pfd_socks = calloc((size_t)(n ? n : 1), sizeof(*t->pfd_socks));
    t->pfd_peers = calloc((size_t)(n ? n : 1), sizeof(*t->pfd_peers));
    if (!t->pfds || !t->pfd_socks || !t->pfd_peers) {
        GW_ERROR(t->base.log, GW_TCP_SUBSYS, "out of memory for %d poll entries", n);
        return GW_ERR_NO_MEMORY;
    }
    int i = 0;
    for (int r = 0; r < t->base.size; r++) {
        if (r == t->base.rank || !t->peers[r].socks)
            continue;
        for (int k = 0; k < t->nsocks; k++) {
            gw__tcp_tune_established(t->base.log, t->peers[r].socks[k].fd, r, k);
            t->pfd_socks[i] = &t->peers[r].socks[k];
            t->pfd_peers[i] = &t->peers[r];
            i++;
        }
    }
    t->npfds = n;
    return GW_OK;
}

gw_status_t gw__tcp_connect(gw_transport_t *base, const uint8_t *all_addrs)
{
    gw_tcp_t *t = gw__tcp_of(base);
    if (!t || !all_addrs)
        return GW_ERR_INVALID_ARG;
    if (t->base.failed != GW_OK)
        return t->base.failed;
    if (t->base.connected || t->listen_fd < 0) {
        GW_ERROR(t->base.log, GW_TCP_SUBSYS, "connect() called twice");
        return GW_ERR_INVALID_ARG;
    }
    int rank = t->base.rank, size = t->base.size;
    static const uint8_t zero[GW_TRANSPORT_ADDR_MAX];
    int npeers = 0, nlower = 0;
    for (int r = 0; r < size; r++) {
        if (r == rank)
            continue;
        gw_tcp_peer_t *p = &t->peers[r];
        if (memcmp(all_addrs + (size_t)r * GW_TRANSPORT_ADDR_MAX, zero, sizeof(zero)) == 0) {
            free(p->socks); /* another transport's peer */
            p->socks = NULL;
            snprintf(p->addr_str, sizeof(p->addr_str), "not connected over TCP");
            continue;
        }
        npeers++;
        nlower += r < rank;
        if (gw__tcp_addr_decode(all_addrs + (size_t)r * GW_TRANSPORT_ADDR_MAX, &p->addr,
                                &p->addr_len) != GW_OK) {
            GW_ERROR(t->base.log, GW_TCP_SUBSYS,
                     "the address of rank %d is not a gradwire TCP address (version %u): do all "
                     "ranks run the same gradwire and transport?",
                     r, GW_TCP_PROTOCOL_VERSION);
            return gw__tcp_fail(t, GW_ERR_PROTOCOL, NULL);
        }
        gw__sock_addr_str((const struct sockaddr *)&p->addr, p->addr_str, sizeof(p->addr_str));
    }

    mesh_t m = {.t = t, .nout = nlower * t->nsocks, .in_expected = (npeers - nlower) * t->nsocks};
    m.cap_in = m.in_expected + MAX_STRANGERS;
    m.outs = calloc((size_t)(m.nout ? m.nout : 1), sizeof(*m.outs));
    m.ins = calloc((size_t)m.cap_in, sizeof(*m.ins));
    m.pfds = calloc((size_t)(1 + m.nout + m.cap_in), sizeof(*m.pfds));
    gw_status_t st = GW_OK;
    if (!m.outs || !m.ins || !m.pfds) {
        GW_ERROR(t->base.log, GW_TCP_SUBSYS, "out of memory for %d connections", m.cap_in);
        st = GW_ERR_NO_MEMORY;
        goto out_free;
    }
    for (int i = 0, peer = -1; i < m.nout; i++) {
        if (i % t->nsocks == 0) /* the next lower rank that we dial */
            for (peer++; !t->peers[peer].socks; peer++)
                ;
        m.outs[i] = (out_conn_t){.peer = peer, .idx = i % t->nsocks, .state = OUT_DIAL};
        gw__sock_dial_init(&m.outs[i].dial);
    }
    int timeout_ms = t->timeout_ms;
    int64_t start = gw__now_ms(), deadline = start + timeout_ms;
    while (!mesh_done(&m)) {
        if (gw__now_ms() >= deadline) {
            st = report_timeout(&m, timeout_ms);
            break;
        }
        st = mesh_round(&m, deadline);
        if (st != GW_OK)
            break;
    }
    if (st == GW_OK)
        st = finish(t, npeers);
    if (st == GW_OK) {
        t->base.connected = 1;
        GW_INFO(t->base.log, GW_TCP_SUBSYS,
                "connected to %d peers with %d socket%s each in %lld ms", npeers, t->nsocks,
                t->nsocks == 1 ? "" : "s", (long long)(gw__now_ms() - start));
    }
    for (int i = 0; i < m.nin; i++)
        if (m.ins[i].fd >= 0) {
            if (st == GW_OK)
                in_drop(&m, &m.ins[i], "it never completed the handshake");
            else
                close(m.ins[i].fd);
        }
    for (int i = 0; i < m.nout; i++)
        if (m.outs[i].dial.fd >= 0)
            close(m.outs[i].dial.fd);
    /* No more connections are expected: later ones would only queue up. */
    close(t->listen_fd);
    t->listen_fd = -1;
out_free:
    if (m.ins) /* the handshakes hold the key */
        explicit_bzero(m.ins, (size_t)m.cap_in * sizeof(*m.ins));
    if (m.outs)
        explicit_bzero(m.outs, (size_t)(m.nout ? m.nout : 1) * sizeof(*m.outs));
    free(m.pfds);
    free(m.ins);
    free(m.outs);
    if (st != GW_OK)
        return gw__tcp_fail(t, st, NULL);
    return GW_OK;
}
