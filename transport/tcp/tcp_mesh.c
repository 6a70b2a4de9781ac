/*
 * tcp_mesh.c - which connections the TCP transport makes, and when.
 *
 * Every pair of ranks is joined by nsocks connections (GW_NSOCKS data
 * sockets and the control one that carries receipts, tcp.c), all opened by
 * the higher rank: rank i dials j < i and accepts from j > i. So each
 * connection is opened exactly once, and nobody waits for a connection
 * that it should have opened itself. How one is made and proven is
 * tcp_conn.c's.
 *
 * Lazily (gw_transport_params_t.lazy: GW_CONNECT=lazy, the communicator's
 * default), connect() only reads the addresses: a pair is connected when
 * the first request for it is posted, so a ring opens two peers'
 * connections, not size - 1, and a job of thousands of ranks holds a few
 * sockets per rank instead of thousands. Every rank listens from open() to
 * close(). The first request for a lower rank starts the dials; the first
 * for a higher rank sends it a knock (one hello saying "dial me" with its
 * proof of the key, closed at once, tcp_conn.c), since that rank may not
 * need us yet (it may be about to send, or
 * never post the receive our send waits for) and only a connection lets
 * our message leave and shows that it is alive. The accepting side takes
 * connections, and knocks, in its progress loop: progress() polls the
 * listener with the data sockets, and while connections are being made it
 * moves them at least every millisecond. Nobody waits for anyone in a
 * cycle: dials go from higher to lower ranks only, and a rank accepts
 * whenever it makes progress, whatever it waits for. A peer that refuses
 * (it no longer listens: dead or closed) fails the transport at once,
 * naming it; one that we dial in vain (stopped, unreachable) fails it after
 * timeout_ms; one that we wait for is the caller's time-out (p2p.c) or the
 * referee's verdict. A dial that only answers a knock is different: while
 * no request of ours waits for that peer, its refusal or its time-out fails
 * nothing (the peer may be busy outside gradwire for longer than
 * timeout_ms, and it is not ours to blame); the dial is given up with a
 * WARN and made again when a request or a knock needs it. Once a peer's connections are all up it joins
 * progress()'s poll set, sized for every TCP peer at connect().
 *
 * Eagerly, connect() dials every lower rank and waits for every higher one
 * in one poll() loop under one deadline (connects in flight, handshakes in
 * both directions, accepts), so a slow peer delays nobody else's
 * connections and the call finishes or fails within timeout_ms, naming
 * each peer still missing; then the listener closes.
 *
 * Peers whose address blob is all zero are served by another transport
 * (transport.h): they get no sockets, we neither dial nor expect them, and
 * a hello that claims to come from one of them is a stranger's.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "transport/sock.h"
#include "transport/tcp/tcp_mesh.h"

/* ---- peers coming up ------------------------------------------------------- */

/* Once every connection of p is up (dialled or accepted), p joins
 * progress()'s poll set, whose arrays connect() sized for every TCP peer. */
void gw__tcp_peer_ready(mesh_t *m, gw_tcp_peer_t *p)
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
    if (p->knock_listed) {
        p->knock_listed = 0;
        for (int i = 0; i < m->nawaiting; i++)
            if (m->awaiting[i] == p->rank) {
                m->awaiting[i] = m->awaiting[--m->nawaiting];
                break;
            }
    }
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
static gw_status_t dial_peer(mesh_t *m, gw_tcp_peer_t *p, int for_knock)
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
    p->dial_for_knock = for_knock;
    m->dialing[m->ndialing++] = p->rank;
    return GW_OK;
}

/* Close and forget p's connections under way (the handshakes hold the
 * key, so their state is wiped before it is freed). */
static void drop_outs(const gw_tcp_t *t, gw_tcp_peer_t *p)
{
    for (int k = 0; p->outs && k < t->nsocks; k++)
        if (p->outs[k].dial.fd >= 0)
            close(p->outs[k].dial.fd);
    if (p->outs)
        explicit_bzero(p->outs, (size_t)t->nsocks * sizeof(*p->outs));
    free(p->outs);
    p->outs = NULL;
}

/* Stop dialling p: its connections under way are closed and forgotten. */
static void dial_stop(mesh_t *m, gw_tcp_peer_t *p)
{
    drop_outs(m->t, p);
    p->dial_for_knock = 0;
    for (int i = 0; i < m->ndialing; i++)
        if (m->dialing[i] == p->rank) {
            m->dialing[i] = m->dialing[--m->ndialing];
            break;
        }
}

int gw__tcp_dial_give_up(mesh_t *m, gw_tcp_peer_t *p, const char *why)
{
    if (!p->dial_for_knock || p->sq_head || p->rq_head || p->aq_head)
        return 0;
    GW_WARN(m->t->base.log, GW_TCP_SUBSYS,
            "rank %d (%s) knocked, but dialling it back failed: %s; no message of ours waits "
            "for it, so the job goes on (dialled again when one does)",
            p->rank, p->addr_str, why);
    dial_stop(m, p);
    return 1;
}

/* p was knocked on (or could not be): wait for its dial, and knock again
 * if it does not come soon. */
static void await_dial(mesh_t *m, gw_tcp_peer_t *p)
{
    p->knocked = 1;
    /* 250 ms, doubling up to 4 s: a peer busy elsewhere for long (or many
     * ranks waiting for one) does not fill its listener with knocks. */
    p->knock_gap = p->knock_gap ? 2 * p->knock_gap : GW_TCP_KNOCK_AGAIN_MS;
    if (p->knock_gap > 16 * GW_TCP_KNOCK_AGAIN_MS)
        p->knock_gap = 16 * GW_TCP_KNOCK_AGAIN_MS;
    p->knock_at = gw__now_ms() + p->knock_gap;
    if (!p->knock_listed && !p->up) {
        p->knock_listed = 1;
        m->awaiting[m->nawaiting++] = p->rank;
    }
}

/* The knock on p's port is connected: send it (one hello, sock_idx
 * GW_TCP_KNOCK, which fits any socket buffer) and close. */
static void knock_send(mesh_t *m, gw_tcp_peer_t *p)
{
    gw_tcp_t *t = m->t;
    uint8_t hello[GW_TCP_HELLO_SIZE];
    gw__tcp_make_hello(t, t->base.rank, p->rank, (int)GW_TCP_KNOCK, hello);
    if (gw__sock_send_knock(p->knock_fd, t->data_key, hello, sizeof(hello), &p->knock_sent) != 0)
        GW_TRACE(t->base.log, GW_TCP_SUBSYS, "knocking on rank %d's port %s: %m", p->rank,
                 p->addr_str);
    close(p->knock_fd);
    p->knock_fd = -1;
    await_dial(m, p);
}

/* How the knock's connect() ended (err: 0 or its errno): sent, refused
 * (the peer is gone), or given up on (we wait for the peer to dial us, as
 * we would have anyway). */
static gw_status_t knock_result(mesh_t *m, gw_tcp_peer_t *p, int err)
{
    gw_tcp_t *t = m->t;
    for (int i = 0; i < m->nknocking; i++)
        if (m->knocking[i] == p->rank) {
            m->knocking[i] = m->knocking[--m->nknocking];
            break;
        }
    if (err == 0) {
        knock_send(m, p);
        return GW_OK;
    }
    close(p->knock_fd);
    p->knock_fd = -1;
    await_dial(m, p);
    if (err == ECONNREFUSED)
        return gw__tcp_refused(t, p);
    errno = err;
    GW_TRACE(t->base.log, GW_TCP_SUBSYS, "knocking on rank %d's port %s: %m", p->rank, p->addr_str);
    return GW_OK;
}

/* Ask p, a higher rank, to dial us: it may have nothing to send us yet
 * (a receive of ours, a send it has not reached), and only then does a
 * message of ours leave, and a dead p shows at once (refused). */
static gw_status_t knock(mesh_t *m, gw_tcp_peer_t *p)
{
    p->knock_fd = gw__sock_open(p->addr.ss_family);
    if (p->knock_fd < 0) {
        await_dial(m, p); /* and knock again later */
        return GW_OK;
    }
    int st = gw__sock_connect(p->knock_fd, (const struct sockaddr *)&p->addr, p->addr_len);
    if (st == GW_SOCK_CONNECTED) {
        knock_send(m, p);
        return GW_OK;
    }
    m->knocking[m->nknocking++] = p->rank;
    return st == GW_SOCK_FAILED ? knock_result(m, p, errno) : GW_OK;
}

gw_status_t gw__tcp_want_peer(gw_tcp_t *t, int peer)
{
    gw_tcp_peer_t *p = &t->peers[peer];
    if (!t->mesh || p->up || p->outs)
        return GW_OK; /* connected or under way */
    if (peer > t->base.rank)
        return p->knocked || p->knock_fd >= 0 ? GW_OK : knock(t->mesh, p);
    GW_TRACE(t->base.log, GW_TCP_SUBSYS, "first message for rank %d (%s): connecting", peer,
             p->addr_str);
    return dial_peer(t->mesh, p, 0);
}

gw_status_t gw__tcp_knocked(gw_tcp_t *t, int peer)
{
    gw_tcp_peer_t *p = &t->peers[peer];
    if (!t->mesh || p->up || p->outs || peer >= t->base.rank || !p->socks)
        return GW_OK; /* connected or under way */
    return dial_peer(t->mesh, p, 1);
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
        if (now < p->dial_deadline)
            continue;
        char why[192];
        snprintf(why, sizeof(why), "no connection within %d ms (%s)", t->timeout_ms,
                 dial_why(p, t->nsocks));
        if (gw__tcp_dial_give_up(m, p, why)) {
            i--; /* p left the list: its place holds another */
            continue;
        }
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
                gw_status_t st = gw__tcp_out_step(m, o, 0);
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
    int ndone = np; /* entries of the dialled sockets end here */
    int nknock = m->nknocking;
    int knocking[nknock > 0 ? nknock : 1];
    memcpy(knocking, m->knocking, (size_t)nknock * sizeof(int));
    for (int i = 0; i < nknock; i++)
        m->pfds[np++] = (struct pollfd){.fd = t->peers[knocking[i]].knock_fd, .events = POLLOUT};
    int nknocks_end = np;
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
                gw_status_t st = gw__tcp_out_step(m, &p->outs[k], rev);
                if (st != GW_OK)
                    return st;
            }
        }
    }
    for (int i = 0; i < nknock; i++) {
        gw_tcp_peer_t *p = &t->peers[knocking[i]];
        short rev = m->pfds[ndone + i].revents;
        int err = rev && p->knock_fd >= 0 ? gw__sock_connect_result(p->knock_fd, rev) : -1;
        if (err >= 0) {
            gw_status_t st = knock_result(m, p, err);
            if (st != GW_OK)
                return st;
        }
    }
    now = gw__now_ms();
    for (int i = 0; i < nin; i++) {
        in_conn_t *c = &m->ins[i];
        if (m->pfds[nknocks_end + i].revents && c->fd >= 0) {
            gw_status_t st = gw__tcp_in_step(m, c);
            if (st != GW_OK)
                return st;
        }
        if (c->fd >= 0 && !c->proven && now - c->since > t->timeout_ms)
            gw__tcp_in_drop(m, c, TCP_DROP_CLOSED, "it never completed the handshake");
    }
    /* Forget the connections handed over or dropped. */
    int k = 0;
    for (int i = 0; i < m->nin; i++)
        if (m->ins[i].fd >= 0)
            m->ins[k++] = m->ins[i];
    m->nin = k;
    if (m->pfds[0].revents & POLLIN)
        gw__tcp_in_accept(m);
    return GW_OK;
}

int gw__tcp_mesh_busy(const gw_tcp_t *t)
{
    return t->mesh && (t->mesh->ndialing > 0 || t->mesh->nknocking > 0 || t->mesh->nin > 0);
}

int gw__tcp_mesh_awaiting(const gw_tcp_t *t) { return t->mesh && t->mesh->nawaiting > 0; }

gw_status_t gw__tcp_mesh_knock_again(gw_tcp_t *t)
{
    mesh_t *m = t->mesh;
    int64_t now = gw__now_ms();
    for (int i = 0; m && i < m->nawaiting; i++) {
        gw_tcp_peer_t *p = &t->peers[m->awaiting[i]];
        if (p->up || p->knock_fd >= 0 || now < p->knock_at)
            continue;
        gw_status_t st = knock(m, p);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

gw_status_t gw__tcp_mesh_progress(gw_tcp_t *t)
{
    mesh_t *m = t->mesh;
    if (!m)
        return GW_OK;
    gw_status_t st = mesh_round(m, 0);
    int64_t now = gw__now_ms();
    if (st == GW_OK)
        st = check_dial_deadlines(m, now);
    gw__sock_strangers_summary(&m->strangers, now, 0, NULL);
    return st;
}

void gw__tcp_mesh_free(gw_tcp_t *t)
{
    mesh_t *m = t->mesh;
    if (!m)
        return;
    gw__sock_strangers_summary(&m->strangers, gw__now_ms(), 1, NULL);
    for (int i = 0; i < m->nin; i++)
        if (m->ins[i].fd >= 0)
            close(m->ins[i].fd);
    for (int i = 0; i < m->ndialing; i++)
        drop_outs(t, &t->peers[m->dialing[i]]);
    for (int i = 0; i < m->nknocking; i++) {
        gw_tcp_peer_t *p = &t->peers[m->knocking[i]];
        if (p->knock_fd >= 0)
            close(p->knock_fd);
        p->knock_fd = -1;
    }
    if (m->ins)
        explicit_bzero(m->ins, (size_t)m->cap_in * sizeof(*m->ins));
    free(m->ins);
    free(m->knocking);
    free(m->awaiting);
    free(m->pfds);
    free(m->dialing);
    free(m);
    t->mesh = NULL;
}

/* Whether two listening addresses are on one host: the same IP address. */
static int same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                      &((const struct sockaddr_in *)b)->sin_addr, sizeof(struct in_addr)) == 0;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
    return 0;
}

/* Read every peer's address; the count of TCP peers, of lower ones and of
 * those that listen on our own address (this host). */
static gw_status_t read_addrs(gw_tcp_t *t, const uint8_t *all_addrs, int *npeers, int *nlower,
                              int *nlocal)
{
    static const uint8_t zero[GW_TRANSPORT_ADDR_MAX];
    *npeers = *nlower = *nlocal = 0;
    struct sockaddr_storage mine;
    socklen_t mine_len;
    int know_mine = gw__tcp_addr_decode(all_addrs + (size_t)t->base.rank * GW_TRANSPORT_ADDR_MAX,
                                        &mine, &mine_len) == GW_OK;
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
        *nlocal += know_mine && same_host(&p->addr, &mine);
    }
    return GW_OK;
}

/* A rank whose host runs more TCP ranks than it has CPUs does not spin
 * before a wait sleeps (GW_TCP_SPIN_US, tcp_progress.c): the peer it waits
 * for may need the very core it would spin on. */
static void decide_spin(gw_tcp_t *t, int nlocal)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (t->spin_ns <= 0 || cpus <= 0 || nlocal + 1 <= cpus)
        return;
    t->spin_ns = 0;
    GW_INFO(t->base.log, GW_TCP_SUBSYS,
            "%d ranks on this host over TCP and %ld CPUs: waits sleep without spinning first "
            "(GW_TCP_SPIN_US)",
            nlocal + 1, cpus);
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
        static const char *const drop_kinds[TCP_DROP_KINDS] = {
            "closed or silent", "garbage", "wrong proof or replay", "not for us", "evicted"};
        int higher = (npeers - nlower) * t->nsocks;
        m->t = t;
        m->strangers = (gw_sock_strangers_t){.log = t->base.log,
                                             .subsys = GW_TCP_SUBSYS,
                                             .where = t->local_str,
                                             .kind_names = drop_kinds,
                                             .nkinds = TCP_DROP_KINDS};
        m->npeers = npeers;
        m->cap_in = (higher < GW_TCP_MAX_ADMITTING ? higher : GW_TCP_MAX_ADMITTING) + MAX_STRANGERS;
        m->dialing = calloc((size_t)(nlower ? nlower : 1), sizeof(*m->dialing));
        m->knocking = calloc((size_t)(npeers - nlower + 1), sizeof(*m->knocking));
        m->awaiting = calloc((size_t)(npeers - nlower + 1), sizeof(*m->awaiting));
        m->ins = calloc((size_t)m->cap_in, sizeof(*m->ins));
        m->pfds = calloc((size_t)(1 + nlower * t->nsocks + (npeers - nlower) + m->cap_in),
                         sizeof(*m->pfds));
    }
    t->mesh = m;
    if (!t->pfds || !t->pfd_socks || !t->pfd_peers || !m || !m->dialing || !m->knocking ||
        !m->awaiting || !m->ins || !m->pfds) {
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
            st = dial_peer(m, &t->peers[r], 0);
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
        gw__tcp_in_drop(m, &m->ins[i], TCP_DROP_CLOSED, "it never completed the handshake");
    m->nin = 0;
    gw__tcp_mesh_free(t);
    close(t->listen_fd);
    t->listen_fd = -1;
    return st;
}

gw_status_t gw__tcp_connect(gw_transport_t *base, const uint8_t *all_addrs)
{
    gw_status_t st =
        gw__transport_connect_check(base, all_addrs, base && gw__tcp_of(base)->listen_fd < 0);
    if (st != GW_OK)
        return st;
    gw_tcp_t *t = gw__tcp_of(base);
    int npeers, nlower, nlocal;
    int64_t start = gw__now_ms();
    st = read_addrs(t, all_addrs, &npeers, &nlower, &nlocal);
    if (st == GW_OK) {
        decide_spin(t, nlocal);
        st = alloc_mesh(t, npeers, nlower);
    }
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
