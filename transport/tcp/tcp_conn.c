/*
 * tcp_conn.c - one connection of the TCP transport, made and proven, from
 * either end; which connections are made, and when, is tcp_mesh.c's.
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
 * handshake played back) is a stranger: it is closed and the job carries
 * on; the first strangers are logged at WARN with their address and why,
 * the rest counted and summed up once a second (transport/sock_strangers.c,
 * as the bootstrap root does), so a flood of connections is not a flood
 * of log lines. Only a proven
 * connection holds a rank's socket slot, so an impostor's claim never
 * shuts the real rank out. A rank of this job that uses another number of
 * sockets per peer is a configuration error, reported at once on both
 * ends rather than as a time-out, but only once it proved the key.
 *
 * A refused connection is retried with growing sleeps (10 ms doubling up to
 * 1 s, as every dialler in sock.h) when connecting eagerly: every rank
 * listens before the bootstrap exchange, so a refusal is more likely a
 * firewall or a dead peer than a slow one, but retrying costs nothing until
 * the deadline, whose error names each peer still missing. Connecting
 * lazily, a refusal fails at once (gw__tcp_refused): every rank listens
 * until it closes, so its port refuses only once it is gone.
 *
 * A hello whose socket index is GW_TCP_KNOCK is a knock (tcp_mesh.c): a
 * lower rank asks us to dial it. The hello is followed by its proof of the
 * key over it, and its nonce holds the sender's knock counter
 * (transport/sock_auth.c): we act on it only when the proof is right and
 * the counter above the last one we acted on from that rank, so neither a
 * stranger who read the job id nor a knock played back moves us. Then we
 * dial the lower rank's published address, where it proves itself again;
 * a dial made for a knock alone never fails the transport (tcp_mesh.c).
 *
 * Peers whose address blob is all zero are served by another transport
 * (transport.h): they get no sockets, we neither dial nor expect them, and
 * a hello that claims to come from one of them is a stranger's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/byteorder.h"
#include "common/clock.h"
#include "transport/sock.h"
#include "transport/tcp/tcp_mesh.h"

static const gw_logger_t *lg_of(const mesh_t *m) { return m->t->base.log; }

void gw__tcp_make_hello(const gw_tcp_t *t, int from, int to, int idx,
                        uint8_t out[GW_TCP_HELLO_SIZE])
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

/* Connecting lazily, every rank listens from open() to close(): a refused
 * connection means that the peer's transport is gone (it died, aborted or
 * closed its communicator), which no retry mends. */
gw_status_t gw__tcp_refused(gw_tcp_t *t, const gw_tcp_peer_t *p)
{
    return gw__tcp_peer_fail(t, p, GW_ERR_REMOTE,
                             "refused our connection, so its transport no longer listens: "
                             "it probably died (or aborted, or closed its communicator)");
}

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

gw_status_t gw__tcp_out_step(mesh_t *m, out_conn_t *o, short revents)
{
    gw_tcp_t *t = m->t;
    if (o->state == OUT_DIAL) {
        const gw_tcp_peer_t *p = &t->peers[o->peer];
        const char *what;
        int st = gw__sock_dial_step(&o->dial, (const struct sockaddr *)&p->addr, p->addr_len,
                                    revents, out_prep, m, &what);
        if (st == GW_SOCK_FAILED && t->lazy && errno == ECONNREFUSED)
            return gw__tcp_dial_give_up(m, &t->peers[o->peer], "it refused our connection")
                       ? GW_OK
                       : gw__tcp_refused(t, p);
        if (st == GW_SOCK_FAILED)
            out_retry(m, o, what);
        if (st != GW_SOCK_CONNECTED)
            return GW_OK;
        uint8_t hello[GW_TCP_HELLO_SIZE];
        gw__tcp_make_hello(t, t->base.rank, o->peer, o->idx, hello);
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
    gw__tcp_peer_ready(m, &t->peers[o->peer]);
    return GW_OK;
}

/* ---- accepting side -------------------------------------------------------- */

void gw__tcp_in_drop(mesh_t *m, in_conn_t *c, int kind, const char *why)
{
    if (gw__sock_stranger(&m->strangers, kind))
        GW_WARN(lg_of(m), GW_TCP_SUBSYS,
                "closing a connection from %s to our port %s: %s (a stranger, not a rank of "
                "this job; carrying on)",
                c->addr, m->t->local_str, why);
    else
        GW_TRACE(lg_of(m), GW_TCP_SUBSYS, "closing a connection from %s to our port %s: %s",
                 c->addr, m->t->local_str, why);
    close(c->fd);
    c->fd = -1;
    gw__sock_shake_wipe(&c->sh);
}

void gw__tcp_in_accept(mesh_t *m)
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
            gw__tcp_in_drop(m, &m->ins[0], TCP_DROP_EVICTED,
                            "too many connections that are not yet admitted");
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
    } else if (h.sock_idx == GW_TCP_KNOCK && h.id.to == (uint32_t)t->base.rank &&
               h.id.from < (uint32_t)t->base.rank && t->peers[h.id.from].socks && t->mesh) {
        /* A lower rank says it needs us: its proof comes next, and
         * only then do we act on it (in_knock). */
        c->from = h.id.from;
        c->knock = 1;
        gw__sock_shake_knock(&c->sh);
        return GW_OK;
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
            gw__tcp_make_hello(t, t->base.rank, (int)c->from, (int)h.sock_idx, reply);
            return gw__sock_shake_reply(&c->sh, lg_of(m), GW_TCP_SUBSYS, reply, sizeof(reply));
        }
        snprintf(why, sizeof(why), "it repeats rank %u's socket %u", (unsigned)h.id.from,
                 (unsigned)h.sock_idx);
    }
    gw__tcp_in_drop(m, c, TCP_DROP_CLAIM, why);
    return GW_OK;
}

/* A knock proved the key: act on it when it is fresh (its counter is above
 * the last one we acted on from its sender), else it is a replay. The
 * connection has done its work either way. */
static gw_status_t in_knock(mesh_t *m, in_conn_t *c)
{
    gw_tcp_t *t = m->t;
    gw_tcp_peer_t *p = &t->peers[c->from];
    if (!gw__sock_knock_fresh(&p->knock_seen, c->sh.theirs)) {
        char why[96];
        snprintf(why, sizeof(why), "replayed (a knock in rank %u's name that is not fresh)",
                 (unsigned)c->from);
        gw__tcp_in_drop(m, c, TCP_DROP_PROOF, why);
        return GW_OK;
    }
    GW_TRACE(lg_of(m), GW_TCP_SUBSYS, "rank %u knocked (from %s): dialling it", (unsigned)c->from,
             c->addr);
    close(c->fd);
    c->fd = -1;
    gw__sock_shake_wipe(&c->sh);
    return gw__tcp_knocked(t, (int)c->from);
}

gw_status_t gw__tcp_in_step(mesh_t *m, in_conn_t *c)
{
    gw_tcp_t *t = m->t;
    for (;;) {
        int ev = gw__sock_shake_step(c->fd, &c->sh);
        switch (ev) {
        case GW_SHAKE_AGAIN:
            return GW_OK;
        case GW_SHAKE_FAILED: {
            int io = c->sh.io;
            int kind = io != GW_SOCK_IO_DONE                            ? TCP_DROP_CLOSED
                       : strncmp(c->sh.why, "it sent garbage", 15) == 0 ? TCP_DROP_GARBAGE
                                                                        : TCP_DROP_PROOF;
            gw__tcp_in_drop(m, c, kind,
                            io == GW_SOCK_IO_EOF     ? "it closed before completing the handshake"
                            : io == GW_SOCK_IO_ERROR ? "the handshake failed on its socket"
                                                     : c->sh.why);
            return GW_OK;
        }
        case GW_SHAKE_KNOCK:
            return in_knock(m, c);
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
                gw__tcp_in_drop(m, c, TCP_DROP_CLAIM, why);
                return GW_OK;
            }
            c->proven = 1;
            gw__sock_shake_admit(&c->sh);
            continue;
        default: /* GW_SHAKE_DONE */
            gw__sock_shake_wipe(&c->sh);
            t->peers[c->from].socks[c->idx].fd = c->fd;
            c->fd = -1;
            gw__tcp_peer_ready(m, &t->peers[c->from]);
            return GW_OK;
        }
    }
}
