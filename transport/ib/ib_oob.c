/*
 * ib_oob.c - connecting without librdmacm: queue pair numbers, PSNs and the
 * readiness of both ends exchanged over TCP, as NCCL does over its socket
 * bootstrap (GW_IB_CM=oob, and the default where librdmacm cannot be used:
 * InfiniBand without IPoIB, or no librdmacm).
 *
 * At open() every rank listens on a TCP port on the interface that routes to
 * the bootstrap root (or GW_SOCKET_IFNAME), and publishes it in its address
 * blob next to its LID, GID, GID index and active MTU. connect() creates all
 * QPs (INIT, receives posted), then for every pair the higher rank dials
 * the lower one; over that socket each side sends a hello {job id, ranks,
 * nonce, QPs per peer, first PSN, QP numbers} and proves the job's
 * data-plane key over both hellos (the handshake of the TCP transport,
 * transport/sock_auth.c); only once both proofs crossed does each side move
 * its QPs to RTR and RTS, with the numbers of a peer that is known to be a
 * rank of this job, and send one READY byte; a pair is up when both READY
 * bytes crossed, so nothing is ever written to a QP whose remote end is not
 * yet ready to receive. Everything runs in one poll() loop under one
 * deadline. Connections that do not complete the handshake (garbage, a
 * hello of another job, an impostor that knows the job id but not the
 * token, a recorded hello played back) are strangers: dropped, the first
 * ones logged at WARN with their address and why, the rest counted and
 * summed up once a second (transport/sock_strangers.c, as the TCP
 * transport and the bootstrap root do), so a flood of connections is not
 * a flood of log lines; nothing they say touches a QP or stops the job. When 64 connections wait unproven, the one that has
 * waited longest is dropped to make room, so that strangers, silent or
 * not, cannot lock a rank out. Dialling, its retries
 * (10 ms doubling up to 1 s) and the transfers are the socket module's
 * (transport/sock.h), shared with the TCP transport and the bootstrap.
 *
 * The socket stays open afterwards with nothing on it: when the peer's
 * process dies the kernel closes it, and progress() sees the EOF at once
 * instead of waiting for RDMA retries to run out.
 *
 * Connecting on first use (ib_lazy.c), the same mesh lives on after
 * connect() with the listener open: a pair's QPs are created, and the
 * dial to a lower rank starts, with the pair's first request; a hello
 * from a higher rank creates ours for it before we answer. A knock is a
 * hello for GW_IB_KNOCK_QP QPs followed by its proof of the key, sent on a
 * connection closed at once: the higher rank that reads it checks the
 * proof and that its counter is fresh (ib_oob_knock.c), and dials us; a
 * dial that only answers a knock fails nothing (ib_lazy.c). progress() moves all of it in
 * mesh_round() without waiting, and wakes for the listener; a pair is up,
 * and its requests posted, only once both READY bytes crossed. A knock
 * that finds no listener (connection refused) fails the pair at once,
 * naming the peer.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/ib/ib_oob.h"

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

void gw__ib_oob_hello_head(const gw_ib_t *t, int peer, gw_ib_hello_t *h)
{
    memset(h, 0, sizeof(*h));
    h->id.magic = GW_IB_HELLO_MAGIC;
    h->version = GW_IB_PROTOCOL_VERSION;
    memcpy(h->id.job_id, t->job_id, 16);
    h->id.from = (uint32_t)t->base.rank;
    h->id.to = (uint32_t)peer;
}

static void make_hello(mesh_t *m, int peer, uint8_t out[GW_IB_HELLO_SIZE])
{
    gw_ib_t *t = m->t;
    gw_ib_hello_t h;
    gw__ib_oob_hello_head(t, peer, &h);
    h.nqps = (uint32_t)t->nqps;
    h.psn = m->peer_psn[peer];
    for (int k = 0; k < t->nqps; k++)
        h.qpn[k] = t->peers[peer].qp[k]->qp_num;
    h.blk = (uint64_t)(uintptr_t)t->peers[peer].blk;
    h.blk_rkey = gw__ib_blk_rkey(t, &t->peers[peer]);
    gw__ib_hello_encode(&h, out);
}

static void out_retry(mesh_t *m, conn_t *c, const char *what)
{
    int pause = gw__sock_dial_failed(&c->s, what);
    GW_TRACE(gw__ib_oob_log(m), GW_IB_SUBSYS, "out-of-band connection to %s: %s; retrying in %d ms",
             m->t->peers[c->peer].desc, c->s.why, pause);
    gw__sock_shake_wipe(&c->sh);
    c->phase = P_DIAL;
}

void gw__ib_oob_drop(mesh_t *m, conn_t *c, int kind, const char *why)
{
    if (gw__sock_stranger(&m->strangers, kind))
        GW_WARN(gw__ib_oob_log(m), GW_IB_SUBSYS,
                "dropping an out-of-band connection from %s: %s (a stranger, not a rank of this "
                "job; carrying on)",
                c->addr, why);
    else
        GW_TRACE(gw__ib_oob_log(m), GW_IB_SUBSYS, "dropping an out-of-band connection from %s: %s",
                 c->addr, why);
    close(c->s.fd);
    c->s.fd = -1;
    c->phase = P_DONE;
    gw__sock_shake_wipe(&c->sh);
}

/* Dial c's peer (when its attempt is due, or finish connect() as revents
 * says); once connected, the handshake starts with our hello. */
static gw_status_t out_dial(mesh_t *m, conn_t *c, short revents)
{
    const struct sockaddr *sa = (const struct sockaddr *)&m->t->peers[c->peer].addr.sa;
    socklen_t sl =
        sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    const char *what;
    int st = gw__sock_dial_step(&c->s, sa, sl, revents, NULL, NULL, &what);
    if (st == GW_SOCK_FAILED && m->t->lazy && errno == ECONNREFUSED &&
        gw__ib_dial_give_up(m->t, &m->t->peers[c->peer], "it refused our connection"))
        return GW_OK;
    if (st == GW_SOCK_FAILED && m->t->lazy && errno == ECONNREFUSED)
        /* Connecting on first use, the peer has listened since before the
         * address exchange: a refusal means it is gone. */
        return gw__ib_peer_fail(m->t, &m->t->peers[c->peer], GW_ERR_REMOTE,
                                "no longer listens at its out-of-band address (our connection "
                                "was refused): it closed its communicator or died");
    if (st == GW_SOCK_FAILED)
        out_retry(m, c, what);
    if (st != GW_SOCK_CONNECTED)
        return GW_OK;
    uint8_t hello[GW_IB_HELLO_SIZE];
    make_hello(m, c->peer, hello);
    c->phase = P_SHAKE;
    return gw__sock_shake_dial(&c->sh, gw__ib_oob_log(m), GW_IB_SUBSYS, m->t->data_key,
                               GW_IB_HELLO_MAGIC, hello, sizeof(hello), GW_IB_HELLO_SIZE);
}

/* What a hello says about who sent it, apart from its proof. */
static int hello_valid(const gw_ib_t *t, const gw_ib_hello_t *h)
{
    return h->id.magic == GW_IB_HELLO_MAGIC && h->version == GW_IB_PROTOCOL_VERSION &&
           memcmp(h->id.job_id, t->job_id, 16) == 0 && h->id.to == (uint32_t)t->base.rank &&
           h->id.from < (uint32_t)t->base.size && h->id.from != (uint32_t)t->base.rank &&
           t->peers[h->id.from].active;
}

/* Dialler: the peer's answer, before its proof is checked. */
static gw_status_t on_reply(mesh_t *m, conn_t *c)
{
    gw_ib_t *t = m->t;
    gw_ib_peer_t *p = &t->peers[c->peer];
    gw_ib_hello_t h;
    gw__ib_hello_decode(c->sh.theirs, &h);
    if (!hello_valid(t, &h) || h.id.from != (uint32_t)c->peer) {
        GW_ERROR(gw__ib_oob_log(m), GW_IB_SUBSYS,
                 "%s answered our out-of-band hello with a wrong one (magic 0x%08x, rank %u -> "
                 "%u): is a process of another job listening there?",
                 p->desc, (unsigned)h.id.magic, (unsigned)h.id.from, (unsigned)h.id.to);
        return GW_ERR_PROTOCOL;
    }
    if (gw__sock_shake_confirm(&c->sh) != 0) {
        GW_ERROR(gw__ib_oob_log(m), GW_IB_SUBSYS,
                 "%s answered out of band with a %s: the process listening there is not a rank "
                 "of this job",
                 p->desc, c->sh.why);
        return GW_ERR_AUTH;
    }
    if (h.nqps != (uint32_t)t->nqps) {
        /* Genuine: let our proof go out so that it reports the same. */
        (void)gw__sock_shake_step(c->s.fd, &c->sh);
        GW_ERROR(gw__ib_oob_log(m), GW_IB_SUBSYS,
                 "%s uses %u QPs per peer, this rank %d (GW_IB_QPS)", p->desc, (unsigned)h.nqps,
                 t->nqps);
        return GW_ERR_CONFIG;
    }
    return GW_OK;
}

/* Acceptor: a hello, before its sender proved anything. Nothing it says
 * may stop the job or hold a rank's place: that waits for the proof. */
static gw_status_t on_hello(mesh_t *m, conn_t *c)
{
    gw_ib_t *t = m->t;
    gw_ib_hello_t h;
    char why[128];
    gw__ib_hello_decode(c->sh.theirs, &h);
    if (t->lazy && h.nqps == GW_IB_KNOCK_QP && hello_valid(t, &h) &&
        h.id.from < (uint32_t)t->base.rank) {
        /* A knock: its proof of the key comes next (sock_auth.c), and
         * only a proven, fresh one makes us dial (on_knock). */
        c->claim = h.id.from;
        gw__sock_shake_knock(&c->sh);
        return GW_OK;
    }
    if (!hello_valid(t, &h) || h.id.from < (uint32_t)t->base.rank) {
        snprintf(why, sizeof(why), "invalid hello (magic 0x%08x, version %u, rank %u -> %u)",
                 (unsigned)h.id.magic, (unsigned)h.version, (unsigned)h.id.from, (unsigned)h.id.to);
        gw__ib_oob_drop(m, c, h.id.magic == GW_IB_HELLO_MAGIC ? OOB_DROP_CLAIM : OOB_DROP_GARBAGE,
                        why);
        return GW_OK;
    }
    if (t->peers[h.id.from].oob_fd >= 0 || t->peers[h.id.from].qp_up) {
        snprintf(why, sizeof(why), "it claims to be rank %u, which is connected already",
                 (unsigned)h.id.from);
        gw__ib_oob_drop(m, c, OOB_DROP_CLAIM, why);
        return GW_OK;
    }
    c->claim = h.id.from;
    c->bad_nqps = h.nqps != (uint32_t)t->nqps;
    gw_status_t st = gw__ib_oob_peer_qps(m, (int)c->claim); /* lazily: made now, for our answer */
    if (st != GW_OK)
        return st;
    uint8_t reply[GW_IB_HELLO_SIZE];
    make_hello(m, (int)c->claim, reply);
    return gw__sock_shake_reply(&c->sh, gw__ib_oob_log(m), GW_IB_SUBSYS, reply, sizeof(reply));
}

/* Acceptor: the sender proved the key. */
static gw_status_t on_proven(mesh_t *m, conn_t *c)
{
    gw_ib_t *t = m->t;
    gw_ib_peer_t *p = &t->peers[c->claim];
    if (c->bad_nqps) {
        gw_ib_hello_t h;
        gw__ib_hello_decode(c->sh.theirs, &h);
        GW_ERROR(gw__ib_oob_log(m), GW_IB_SUBSYS,
                 "%s uses %u QPs per peer, this rank %d (GW_IB_QPS)", p->desc, (unsigned)h.nqps,
                 t->nqps);
        return GW_ERR_CONFIG;
    }
    for (int i = 0; i < m->n; i++) {
        const conn_t *o = &m->c[i];
        if (o != c && !o->out && o->peer == (int)c->claim && o->s.fd >= 0) {
            char why[96];
            snprintf(why, sizeof(why), "it repeats rank %u's connection", (unsigned)c->claim);
            gw__ib_oob_drop(m, c, OOB_DROP_CLAIM, why);
            return GW_OK;
        }
    }
    if (p->oob_fd >= 0 || p->qp_up) {
        GW_ERROR(gw__ib_oob_log(m), GW_IB_SUBSYS, "%s connected out of band twice", p->desc);
        return GW_ERR_PROTOCOL;
    }
    c->peer = (int)c->claim;
    gw__sock_shake_admit(&c->sh);
    return GW_OK;
}

/* Both proofs crossed: bring the pair's QPs up and say READY. */
static gw_status_t on_shaken(mesh_t *m, conn_t *c)
{
    gw_ib_t *t = m->t;
    gw_ib_peer_t *p = &t->peers[c->peer];
    gw_ib_hello_t h;
    gw__ib_hello_decode(c->sh.theirs, &h);
    gw__sock_shake_wipe(&c->sh);
    p->rblk = h.blk; /* where we write CTS entries and eager messages */
    p->rblk_rkey = h.blk_rkey;
    for (int k = 0; k < t->nqps; k++) {
        gw_status_t st = gw__ib_qp_connect(t, p, k, h.qpn[k], h.psn, m->peer_psn[c->peer]);
        if (st != GW_OK)
            return st;
    }
    c->byte = READY_BYTE;
    c->done = 0;
    c->phase = P_SEND;
    return GW_OK;
}

static gw_status_t on_ready(mesh_t *m, conn_t *c)
{
    gw_ib_peer_t *p = &m->t->peers[c->peer];
    if (c->byte != READY_BYTE) {
        GW_ERROR(gw__ib_oob_log(m), GW_IB_SUBSYS, "%s sent 0x%02x instead of READY out of band",
                 p->desc, c->byte);
        return GW_ERR_PROTOCOL;
    }
    p->oob_fd = c->s.fd; /* kept: its EOF tells us the peer died */
    c->s.fd = -1;
    c->phase = P_DONE;
    p->qp_up = m->t->nqps; /* both READY bytes crossed: requests may go */
    m->pending--;
    return GW_OK;
}

/* Acceptor: a knock proved the key. Dial its sender (ib_lazy.c) when its
 * counter is above the last we acted on from that rank; else it is a
 * knock played back, and moves nobody. */
static gw_status_t on_knock(mesh_t *m, conn_t *c)
{
    gw_ib_t *t = m->t;
    if (!gw__sock_knock_fresh(&t->peers[c->claim].knock_seen, c->sh.theirs)) {
        char why[96];
        snprintf(why, sizeof(why), "replayed (a knock in rank %u's name that is not fresh)",
                 (unsigned)c->claim);
        gw__ib_oob_drop(m, c, OOB_DROP_PROOF, why);
        return GW_OK;
    }
    close(c->s.fd);
    c->s.fd = -1;
    c->phase = P_DONE;
    gw__sock_shake_wipe(&c->sh);
    return gw__ib_knocked_by(t, (int)c->claim);
}

/* The handshake on c moved: act on what it reports. */
static gw_status_t shake(mesh_t *m, conn_t *c)
{
    for (;;) {
        gw_status_t st = GW_OK;
        switch (gw__sock_shake_step(c->s.fd, &c->sh)) {
        case GW_SHAKE_AGAIN:
            return GW_OK;
        case GW_SHAKE_HELLO:
            st = on_hello(m, c);
            break;
        case GW_SHAKE_REPLY:
            st = on_reply(m, c);
            break;
        case GW_SHAKE_PROVEN:
            st = on_proven(m, c);
            break;
        case GW_SHAKE_KNOCK:
            return on_knock(m, c);
        case GW_SHAKE_DONE:
            return on_shaken(m, c);
        default: /* GW_SHAKE_FAILED */
            if (c->out) {
                /* The peer dropped us (its log says why) or the socket
                 * broke: a real rank admits us on the next attempt. */
                if (c->sh.io == GW_SOCK_IO_DONE)
                    errno = EPROTO;
                out_retry(m, c, c->sh.why);
            } else {
                int io = c->sh.io;
                int kind = io != GW_SOCK_IO_DONE                            ? OOB_DROP_CLOSED
                           : strncmp(c->sh.why, "it sent garbage", 15) == 0 ? OOB_DROP_GARBAGE
                                                                            : OOB_DROP_PROOF;
                gw__ib_oob_drop(
                    m, c, kind,
                    c->sh.io == GW_SOCK_IO_EOF     ? "it closed before completing the handshake"
                    : c->sh.io == GW_SOCK_IO_ERROR ? "the handshake failed on its socket"
                                                   : c->sh.why);
            }
            return GW_OK;
        }
        if (st != GW_OK || c->phase != P_SHAKE)
            return st;
    }
}

/* Move c as far as its socket allows. */
gw_status_t gw__ib_oob_step(mesh_t *m, conn_t *c, short revents)
{
    for (;;) {
        int r;
        gw_status_t st;
        switch (c->phase) {
        case P_DIAL:
            if ((st = out_dial(m, c, revents)) != GW_OK || c->phase == P_DIAL)
                return st;
            continue;
        case P_SHAKE:
            if ((st = shake(m, c)) != GW_OK || c->phase == P_SHAKE || c->phase == P_DIAL ||
                c->phase == P_DONE)
                return st;
            continue;
        case P_SEND:
            r = gw__sock_io_buf(c->s.fd, &c->byte, 1, &c->done, 1);
            if (r == GW_SOCK_IO_AGAIN)
                return GW_OK;
            if (r != GW_SOCK_IO_DONE)
                goto broken;
            c->phase = P_RECV_READY;
            c->done = 0;
            continue;
        case P_RECV_READY:
            r = gw__sock_io_buf(c->s.fd, &c->byte, 1, &c->done, 0);
            if (r == GW_SOCK_IO_AGAIN)
                return GW_OK;
            if (r != GW_SOCK_IO_DONE) {
                if (r == GW_SOCK_IO_EOF)
                    errno = ECONNRESET;
                goto broken;
            }
            return on_ready(m, c);
        case P_DONE:
            return GW_OK;
        }
    }
broken:
    if (m->t->lazy)
        return gw__ib_peer_fail(m->t, &m->t->peers[c->peer], GW_ERR_REMOTE,
                                "out-of-band connection broke during setup: %m");
    GW_ERROR(gw__ib_oob_log(m), GW_IB_SUBSYS,
             "out-of-band connection with %s broke during setup: %m", m->t->peers[c->peer].desc);
    return GW_ERR_REMOTE;
}
