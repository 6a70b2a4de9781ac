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

/* One connection we dial: peer->outs holds nsocks of them while we dial. */
struct gw_tcp_out {
    gw_sock_dial_t dial;
    int peer, idx;
    out_state_t state;
    gw_sock_shake_t sh;
};
typedef struct gw_tcp_out out_conn_t;

typedef struct in_conn {
    int fd; /* -1 once handed over or dropped */
    char addr[64];
    int64_t since; /* accepted at (ms): a handshake that lasts is dropped */
    gw_sock_shake_t sh;
    int proven;      /* it proved the key and is being admitted */
    int bad_nsocks;  /* its hello's sockets per peer differ from ours */
    uint32_t nsocks; /* ... which are these */
    uint32_t from, idx;
} in_conn_t;

/* What connects peers, for the transport's life when it connects lazily
 * (gw_tcp_t.mesh), for connect() alone when it connects eagerly. */
typedef struct gw_tcp_mesh {
    gw_tcp_t *t;
    int *dialing; /* peers whose connections we dial now (their outs) */
    int ndialing;
    in_conn_t *ins; /* accepted connections not yet admitted */
    int nin, cap_in;
    struct pollfd *pfds; /* listener, the dialled sockets, then the accepted ones */
    int npeers, nup;     /* peers over TCP, and those fully connected */
    gw_sock_seen_t seen; /* dialler nonces seen, to name replays */
} mesh_t;

static void peer_ready(mesh_t *m, gw_tcp_peer_t *p);

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
    peer_ready(m, &t->peers[o->peer]);
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
        c->since = gw__now_ms();
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
            peer_ready(m, &t->peers[c->from]);
            return GW_OK;
        }
    }
}

/* ---- peers coming up ------------------------------------------------------- */

/* Once every connection of p is up (dialled or accepted), p joins
 * progress()'s poll set, whose arrays connect() sized for every TCP peer. */
static void peer_ready(mesh_t *m, gw_tcp_peer_t *p)
{
    gw_tcp_t *t = m->t;
    for (int k = 0; k < t->nsocks; k++)
        if (p->socks[k].fd < 0)
            return;
    for (int k = 0; k < t->nsocks; k++) {
        gw__tcp_tune_established(t->base.log, p->socks[k].fd, p->rank, k);
        t->pfd_socks[t->npfds] = &p->socks[k];
        t->pfd_peers[t->npfds] = p;
        t->npfds++;
    }
    p->up = 1;
    m->nup++;
    if (p->outs) {
        explicit_bzero(p->outs, (size_t)t->nsocks * sizeof(*p->outs));
        free(p->outs);
        p->outs = NULL;
        for (int i = 0; i < m->ndialing; i++)
            if (m->dialing[i] == p->rank) {
                m->dialing[i] = m->dialing[--m->ndialing];
                break;
            }
    }
    GW_TRACE(t->base.log, GW_TCP_SUBSYS, "rank %d (%s) connected, %d socket%s (%d of %d peers)",
             p->rank, p->addr_str, t->nsocks, t->nsocks == 1 ? "" : "s", m->nup, m->npeers);
}

/* Start dialling p's connections (p is a lower rank than ours). */
static gw_status_t dial_peer(mesh_t *m, gw_tcp_peer_t *p)
{
    gw_tcp_t *t = m->t;
    p->outs = calloc((size_t)t->nsocks, sizeof(*p->outs));
    if (!p->outs) {
        GW_ERROR(t->base.log, GW_TCP_SUBSYS, "out of memory for the connections to rank %d",
                 p->rank);
        return GW_ERR_NO_MEMORY;
    }
    for (int k = 0; k < t->nsocks; k++) {
        p->outs[k] = (out_conn_t){.peer = p->rank, .idx = k, .state = OUT_DIAL};
        gw__sock_dial_init(&p->outs[k].dial);
    }
    p->dial_deadline = gw__now_ms() + t->timeout_ms;
    m->dialing[m->ndialing++] = p->rank;
    return GW_OK;
}

gw_status_t gw__tcp_want_peer(gw_tcp_t *t, int peer)
{
    gw_tcp_peer_t *p = &t->peers[peer];
    if (!t->mesh || p->up || p->outs || peer > t->base.rank)
        return GW_OK; /* connected, under way, or the peer dials us */
    GW_TRACE(t->base.log, GW_TCP_SUBSYS, "first message for rank %d (%s): connecting", peer,
             p->addr_str);
    return dial_peer(t->mesh, p);
}

/* ---- the loop ------------------------------------------------------------ */

/* Why a connection to p did not come up, for the error. */
static const char *dial_why(const gw_tcp_peer_t *p, int nsocks)
{
    for (int k = 0; p->outs && k < nsocks; k++) {
        const out_conn_t *o = &p->outs[k];
        if (o->state == OUT_DONE)
            continue;
        return o->state != OUT_DIAL ? "connected, but the handshake did not finish"
               : o->dial.fd >= 0    ? "connect() got no answer"
               : o->dial.why[0]     ? o->dial.why
                                    : "not tried";
    }
    return "connected";
}

/* Eager connect() timed out: name every peer still missing. */
static gw_status_t report_timeout(mesh_t *m, int timeout_ms)
{
    gw_tcp_t *t = m->t;
    char msg[1536];
    size_t n = 0;
    msg[0] = '\0';
    for (int i = 0; i < m->ndialing; i++) {
        const gw_tcp_peer_t *p = &t->peers[m->dialing[i]];
        int w = snprintf(msg + n, sizeof(msg) - n, "%scould not connect to rank %d at %s (%s)",
                         n ? "; " : "", p->rank, p->addr_str, dial_why(p, t->nsocks));
        if (w > 0 && (size_t)w < sizeof(msg) - n)
            n += (size_t)w;
    }
    int first = 1;
    for (int j = t->base.rank + 1; j < t->base.size; j++) {
        if (!t->peers[j].socks || t->peers[j].up)
            continue; /* served by another transport, or connected */
        int w = snprintf(msg + n, sizeof(msg) - n, "%s%d (%s)",
                         first ? (n ? "; ranks that never connected to us: "
                                    : "ranks that never connected to us: ")
                               : ", ",
                         j, t->peers[j].addr_str);
        if (w > 0 && (size_t)w < sizeof(msg) - n)
            n += (size_t)w;
        first = 0;
    }
    GW_ERROR(t->base.log, GW_TCP_SUBSYS, "connecting the mesh timed out after %d ms: %s",
             timeout_ms, msg);
    return GW_ERR_TIMEOUT;
}

/* A peer we dial lazily that did not answer in time: the transport fails
 * naming it (blamed as lost: it is dead, stopped or unreachable). */
static gw_status_t check_dial_deadlines(mesh_t *m, int64_t now)
{
    gw_tcp_t *t = m->t;
    for (int i = 0; i < m->ndialing; i++) {
        gw_tcp_peer_t *p = &t->peers[m->dialing[i]];
        if (now >= p->dial_deadline)
            return gw__tcp_peer_fail(t, p, GW_ERR_TIMEOUT,
                                     "could not be connected to within %d ms (%s): is it alive?",
                                     t->timeout_ms, dial_why(p, t->nsocks));
    }
    return GW_OK;
}

/* One round: start the dials that are due, poll the listener and every
 * connection being made for at most wait_ms, and move each on. */
static gw_status_t mesh_round(mesh_t *m, int wait_ms)
{
    gw_tcp_t *t = m->t;
    int64_t now = gw__now_ms();
    int64_t wake = now + (wait_ms > 0 ? wait_ms : 0);
    int np = 0;
    m->pfds[np++] = (struct pollfd){.fd = t->listen_fd, .events = POLLIN};
    int ndial = m->ndialing; /* peers that come up in this round leave the list */
    int dialing[ndial > 0 ? ndial : 1];
    memcpy(dialing, m->dialing, (size_t)ndial * sizeof(int));
    for (int i = 0; i < ndial; i++) {
        for (int k = 0; k < t->nsocks; k++) {
            if (!t->peers[dialing[i]].outs) { /* it came up: keep the entries aligned */
                m->pfds[np++] = (struct pollfd){.fd = -1};
                continue;
            }
            out_conn_t *o = &t->peers[dialing[i]].outs[k];
            int waiting = o->state == OUT_DIAL && o->dial.fd < 0;
            if (waiting && o->dial.retry.at <= now) {
                gw_status_t st = out_step(m, o, 0);
                if (st != GW_OK)
                    return st;
                if (!t->peers[dialing[i]].outs) {
                    m->pfds[np++] = (struct pollfd){.fd = -1};
                    continue;
                }
                waiting = o->state == OUT_DIAL && o->dial.fd < 0;
            }
            if (waiting && o->dial.retry.at < wake)
                wake = o->dial.retry.at;
            short ev = o->state == OUT_DIAL    ? gw__sock_dial_events(&o->dial)
                       : o->state == OUT_SHAKE ? gw__sock_shake_events(&o->sh)
                                               : 0;
            m->pfds[np++] = (struct pollfd){.fd = ev ? o->dial.fd : -1, .events = ev};
        }
    }
    int ndone = np;   /* entries of the dialled sockets end here */
    int nin = m->nin; /* accepts during this round join the next one */
    for (int i = 0; i < nin; i++)
        m->pfds[np++] =
            (struct pollfd){.fd = m->ins[i].fd, .events = gw__sock_shake_events(&m->ins[i].sh)};
    int timeout = wake > now ? (int)(wake - now) : 0;
    int n = poll(m->pfds, (nfds_t)np, timeout);
    if (n < 0) {
        if (errno == EINTR)
            return GW_OK;
        GW_ERROR(t->base.log, GW_TCP_SUBSYS, "poll() while connecting: %m");
        return GW_ERR_SYSTEM;
    }
    for (int i = 0, e = 1; i < ndial && e < ndone; i++) {
        gw_tcp_peer_t *p = &t->peers[dialing[i]];
        for (int k = 0; k < t->nsocks && e < ndone; k++, e++) {
            short rev = m->pfds[e].revents;
            if (rev && p->outs) {
                gw_status_t st = out_step(m, &p->outs[k], rev);
                if (st != GW_OK)
                    return st;
            }
        }
    }
    now = gw__now_ms();
    for (int i = 0; i < nin; i++) {
        in_conn_t *c = &m->ins[i];
        if (m->pfds[ndone + i].revents && c->fd >= 0) {
            gw_status_t st = in_step(m, c);
            if (st != GW_OK)
                return st;
        }
        if (c->fd >= 0 && !c->proven && now - c->since > t->timeout_ms)
            in_drop(m, c, "it never completed the handshake");
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

int gw__tcp_mesh_busy(const gw_tcp_t *t)
{
    return t->mesh && (t->mesh->ndialing > 0 || t->mesh->nin > 0);
}

gw_status_t gw__tcp_mesh_progress(gw_tcp_t *t)
{
    mesh_t *m = t->mesh;
    if (!m)
        return GW_OK;
    gw_status_t st = mesh_round(m, 0);
    if (st == GW_OK)
        st = check_dial_deadlines(m, gw__now_ms());
    return st;
}

void gw__tcp_mesh_free(gw_tcp_t *t)
{
    mesh_t *m = t->mesh;
    if (!m)
        return;
    for (int i = 0; i < m->nin; i++)
        if (m->ins[i].fd >= 0)
            close(m->ins[i].fd);
    for (int i = 0; i < m->ndialing; i++) {
        gw_tcp_peer_t *p = &t->peers[m->dialing[i]];
        for (int k = 0; p->outs && k < t->nsocks; k++)
            if (p->outs[k].dial.fd >= 0)
                close(p->outs[k].dial.fd);
        if (p->outs) /* the handshakes hold the key */
            explicit_bzero(p->outs, (size_t)t->nsocks * sizeof(*p->outs));
        free(p->outs);
        p->outs = NULL;
    }
    if (m->ins)
        explicit_bzero(m->ins, (size_t)m->cap_in * sizeof(*m->ins));
    free(m->ins);
    free(m->pfds);
    free(m->dialing);
    free(m);
    t->mesh = NULL;
}

/* Read every peer's address; the count of TCP peers and of lower ones. */
static gw_status_t read_addrs(gw_tcp_t *t, const uint8_t *all_addrs, int *npeers, int *nlower)
{
    static const uint8_t zero[GW_TRANSPORT_ADDR_MAX];
    *npeers = *nlower = 0;
    for (int r = 0; r < t->base.size; r++) {
        if (r == t->base.rank)
            continue;
        gw_tcp_peer_t *p = &t->peers[r];
        if (memcmp(all_addrs + (size_t)r * GW_TRANSPORT_ADDR_MAX, zero, sizeof(zero)) == 0) {
            free(p->socks); /* another transport's peer */
            p->socks = NULL;
            snprintf(p->addr_str, sizeof(p->addr_str), "not connected over TCP");
            continue;
        }
        (*npeers)++;
        *nlower += r < t->base.rank;
        if (gw__tcp_addr_decode(all_addrs + (size_t)r * GW_TRANSPORT_ADDR_MAX, &p->addr,
                                &p->addr_len) != GW_OK) {
            GW_ERROR(t->base.log, GW_TCP_SUBSYS,
                     "the address of rank %d is not a gradwire TCP address (version %u): do all "
                     "ranks run the same gradwire and transport?",
                     r, GW_TCP_PROTOCOL_VERSION);
            return GW_ERR_PROTOCOL;
        }
        gw__sock_addr_str((const struct sockaddr *)&p->addr, p->addr_str, sizeof(p->addr_str));
    }
    return GW_OK;
}

/* The mesh state and progress()'s poll arrays: one entry per connection
 * of every TCP peer and one for the listener (lazy connections). */
static gw_status_t alloc_mesh(gw_tcp_t *t, int npeers, int nlower)
{
    int n = npeers * t->nsocks + 1;
    t->pfds = calloc((size_t)n, sizeof(*t->pfds));
    t->pfd_socks = calloc((size_t)n, sizeof(*t->pfd_socks));
    t->pfd_peers = calloc((size_t)n, sizeof(*t->pfd_peers));
    mesh_t *m = calloc(1, sizeof(*m));
    if (m) {
        /* Connections being admitted at once: every higher peer's, up to a
         * bound (a real rank turned away connects again), and strangers. */
        int higher = (npeers - nlower) * t->nsocks;
        m->t = t;
        m->npeers = npeers;
        m->cap_in = (higher < GW_TCP_MAX_ADMITTING ? higher : GW_TCP_MAX_ADMITTING) + MAX_STRANGERS;
        m->dialing = calloc((size_t)(nlower ? nlower : 1), sizeof(*m->dialing));
        m->ins = calloc((size_t)m->cap_in, sizeof(*m->ins));
        m->pfds = calloc((size_t)(1 + nlower * t->nsocks + m->cap_in), sizeof(*m->pfds));
    }
    t->mesh = m;
    if (!t->pfds || !t->pfd_socks || !t->pfd_peers || !m || !m->dialing || !m->ins || !m->pfds) {
        GW_ERROR(t->base.log, GW_TCP_SUBSYS, "out of memory for the connections to %d peers",
                 npeers);
        return GW_ERR_NO_MEMORY;
    }
    return GW_OK;
}

/* Eager: dial every lower peer and wait for every higher one, all within
 * timeout_ms, then stop listening (no more connections are expected). */
static gw_status_t connect_all(gw_tcp_t *t)
{
    mesh_t *m = t->mesh;
    gw_status_t st = GW_OK;
    for (int r = 0; r < t->base.rank && st == GW_OK; r++)
        if (t->peers[r].socks)
            st = dial_peer(m, &t->peers[r]);
    int64_t deadline = gw__now_ms() + t->timeout_ms;
    while (st == GW_OK && m->nup < m->npeers) {
        int64_t left = deadline - gw__now_ms();
        if (left <= 0) {
            st = report_timeout(m, t->timeout_ms);
            break;
        }
        st = mesh_round(m, left < 100 ? (int)left : 100);
    }
    for (int i = 0; st == GW_OK && i < m->nin; i++)
        in_drop(m, &m->ins[i], "it never completed the handshake");
    m->nin = 0;
    gw__tcp_mesh_free(t);
    close(t->listen_fd);
    t->listen_fd = -1;
    return st;
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
    int npeers, nlower;
    int64_t start = gw__now_ms();
    gw_status_t st = read_addrs(t, all_addrs, &npeers, &nlower);
    if (st == GW_OK)
        st = alloc_mesh(t, npeers, nlower);
    if (st == GW_OK && !t->lazy)
        st = connect_all(t);
    if (st != GW_OK) {
        gw__tcp_mesh_free(t);
        return gw__tcp_fail(t, st, NULL);
    }
    t->base.connected = 1;
    if (t->lazy)
        GW_INFO(t->base.log, GW_TCP_SUBSYS,
                "%d peers over TCP, connected on first use with %d socket%s each", npeers,
                t->nsocks, t->nsocks == 1 ? "" : "s");
    else
        GW_INFO(t->base.log, GW_TCP_SUBSYS,
                "connected to %d peers with %d socket%s each in %lld ms", npeers, t->nsocks,
                t->nsocks == 1 ? "" : "s", (long long)(gw__now_ms() - start));
    return GW_OK;
}
