/*
 * ib_lazy.c - which pairs the verbs transport connects, and when, when it
 * connects on first use (gw_transport_params_t.lazy: GW_CONNECT=lazy, the
 * communicator's default).
 *
 * connect() then only reads the addresses: a pair's QPs are made when the
 * first request for it is posted, so a ring connects two peers, not size -
 * 1, and a job of thousands of ranks holds a few QPs per rank, not
 * thousands. As in the eager set-up, the higher rank of a pair always
 * dials and the lower one accepts (ib_cm.c), so a pair is set up exactly
 * once and nobody waits in a cycle.
 *
 * The first request for a lower rank starts the dials (every QP of the
 * pair, with the retries of the eager set-up); the pair fails, naming the
 * peer and the last error, when it is not up within timeout_ms. The first
 * request for a higher rank sends it a knock, by which it learns to dial
 * us. A knock is needed because the higher rank may need nothing
 * from us yet (our receive waits for its send, which it has not reached;
 * or our send waits for a receive that it posts only later), and only a
 * connection lets a message leave. A knock carries its proof of the job's
 * key and a counter that must grow (out of band: transport/sock_auth.c;
 * through the RDMA CM: its request, ib_wire.c), so that neither a
 * stranger who read the job id nor a knock played back makes us dial;
 * the dial's connections then prove the key both ways as every connection
 * does. A knock that finds no
 * listener at the peer's address (it closed or died: the peer's kernel
 * refuses it) fails the pair at once, naming the peer, as does a dial
 * that is refused so; a knock that is delivered and
 * not answered is sent again after 250 ms, doubling up to 4 s, and the
 * caller's time-out (or the referee) decides about a peer that never
 * dials.
 *
 * A dial that only answers a knock is different: while no request of ours
 * waits for that peer, its refusal or its time-out fails nothing. The
 * knocker may be busy outside gradwire for longer than timeout_ms (its
 * send posted, then a long computation; disjoint groups of a job), and it
 * is not ours to blame: the dial is stopped with a WARN (before any QP of
 * the pair moved) and made again when a request of ours, or its next
 * knock, needs it. The TCP transport does the same (tcp_mesh.c).
 *
 * Until a pair is up its requests wait in their queues: ib_post.c posts
 * nothing for a peer whose QPs are not all connected. progress() moves
 * the pairs being connected in each call (connection events, retries,
 * knocks, deadlines), and while some are it sleeps at most until the next
 * of those is due. Connections from higher ranks are accepted whenever
 * this rank makes progress, whatever it waits for.
 *
 * Both set-ups do this alike: through the RDMA CM (ib_cm.c, knocks in
 * ib_cm_knock.c: a connect request for QP GW_IB_KNOCK_QP, which the
 * listener rejects) and out of band (ib_oob.c: a hello for GW_IB_KNOCK_QP
 * QPs on a TCP connection closed at once).
 */
#include <stdint.h>
#include <stdio.h>

#include "common/clock.h"
#include "transport/ib/ib_internal.h"

#define KNOCK_AGAIN_MS 250
#define KNOCK_GAP_MAX_MS (16 * KNOCK_AGAIN_MS)

/* p was knocked on (or could not be yet): wait for its dial, and knock
 * again if it does not come soon. */
static void knock_later(gw_ib_peer_t *p)
{
    p->knock_gap = p->knock_gap ? 2 * p->knock_gap : KNOCK_AGAIN_MS;
    if (p->knock_gap > KNOCK_GAP_MAX_MS)
        p->knock_gap = KNOCK_GAP_MAX_MS;
    p->knock_at = gw__now_ms() + p->knock_gap;
}

static int rdmacm(const gw_ib_t *t) { return t->cm_mode == GW_IB_CM_RDMACM; }

static gw_status_t knock(gw_ib_t *t, gw_ib_peer_t *p)
{
    knock_later(p);
    return rdmacm(t) ? gw__ib_cm_knock(t, p) : gw__ib_oob_knock(t, p);
}

/* A failure of the set-up (logged where it happened) breaks the transport,
 * as every failure does: sticky, and every pending request completes. */
static gw_status_t sticky(gw_ib_t *t, gw_status_t st)
{
    if (st != GW_OK && t->base.failed == GW_OK)
        return gw__ib_fail(t, st, NULL);
    return t->base.failed;
}

static gw_status_t start(gw_ib_t *t, gw_ib_peer_t *p, int for_knock)
{
    if (!t->lazy || p->wanted || gw__ib_peer_up(t, p))
        return GW_OK;
    p->wanted = 1;
    p->dial_for_knock = for_knock;
    if (p->rank > t->base.rank) {
        GW_TRACE(t->base.log, GW_IB_SUBSYS, "first message for %s: asking it to connect", p->desc);
        return knock(t, p);
    }
    GW_TRACE(t->base.log, GW_IB_SUBSYS, "first message for %s: connecting", p->desc);
    p->dial_deadline = gw__now_ms() + t->timeout_ms;
    return rdmacm(t) ? gw__ib_cm_dial_peer(t, p) : gw__ib_oob_dial_peer(t, p);
}

gw_status_t gw__ib_want_peer(gw_ib_t *t, gw_ib_peer_t *p) { return sticky(t, start(t, p, 0)); }

gw_status_t gw__ib_knocked_by(gw_ib_t *t, int peer)
{
    gw_ib_peer_t *p = &t->peers[peer];
    if (p->wanted || gw__ib_peer_up(t, p) || peer >= t->base.rank)
        return GW_OK;
    GW_TRACE(t->base.log, GW_IB_SUBSYS, "%s knocked: connecting", p->desc);
    return sticky(t, start(t, p, 1));
}

int gw__ib_dial_give_up(gw_ib_t *t, gw_ib_peer_t *p, const char *why)
{
    if (!t->lazy || !p->dial_for_knock || p->sq_head || p->rq_head || p->rank > t->base.rank)
        return 0;
    if (rdmacm(t))
        gw__ib_cm_dial_stop(t, p);
    else if (gw__ib_oob_dial_stop(t, p) != 0)
        return 0; /* its QPs moved already: the pair is ours to finish */
    GW_WARN(t->base.log, GW_IB_SUBSYS,
            "%s knocked, but dialling it back failed: %s; no message of ours waits for it, so "
            "the job goes on (dialled again when one does)",
            p->desc, why);
    p->wanted = 0;
    p->dial_for_knock = 0;
    return 1;
}

int gw__ib_lazy_busy(const gw_ib_t *t)
{
    if (!t->lazy || !t->base.connected)
        return 0;
    if (gw__ib_oob_busy(t))
        return 1;
    for (int r = 0; r < t->base.size; r++)
        if (t->peers[r].wanted && !gw__ib_peer_up(t, &t->peers[r]))
            return 1;
    return 0;
}

int gw__ib_lazy_wake_ms(gw_ib_t *t)
{
    int64_t now = gw__now_ms(), wake = now + 1000;
    if (gw__ib_oob_busy(t))
        return 1; /* its sockets are not in the poll set: look again soon */
    for (int r = 0; r < t->base.size; r++) {
        const gw_ib_peer_t *p = &t->peers[r];
        if (!p->wanted || gw__ib_peer_up(t, p))
            continue;
        /* Out of band, a dial keeps gw__ib_oob_busy() true until the pair
         * is up (above); through the RDMA CM its next attempt is due. */
        int64_t at = p->knock_at;
        if (r < t->base.rank) {
            int64_t retry = gw__ib_cm_next_retry(t, p); /* INT64_MAX when none waits */
            at = retry < p->dial_deadline ? retry : p->dial_deadline;
        }
        if (at < wake)
            wake = at;
    }
    return wake > now ? (int)(wake - now) : 0;
}

/* Why the dials to p did not bring it up: the pair fails, unless the dial
 * only answered a knock (gw__ib_dial_give_up). */
static gw_status_t dial_timed_out(gw_ib_t *t, gw_ib_peer_t *p)
{
    const char *why = rdmacm(t) ? gw__ib_cm_dial_why(t, p) : gw__ib_oob_dial_why(t, p);
    char what[224];
    snprintf(what, sizeof(what), "not connected within %d ms (%d of %d QPs up)%s%s", t->timeout_ms,
             p->qp_up, t->nqps, why[0] ? "; last error: " : "", why);
    if (gw__ib_dial_give_up(t, p, what))
        return GW_OK;
    return gw__ib_peer_fail(t, p, GW_ERR_TIMEOUT,
                            "not connected %d ms after its first message (%d of %d QPs up)%s%s: "
                            "is it alive, and does %s reach it?",
                            t->timeout_ms, p->qp_up, t->nqps, why[0] ? "; last error: " : "", why,
                            rdmacm(t) ? "the RDMA CM" : "TCP");
}

gw_status_t gw__ib_lazy_progress(gw_ib_t *t)
{
    if (!t->lazy || !t->base.connected)
        return GW_OK;
    gw_status_t st = rdmacm(t) ? gw__ib_cm_lazy_step(t) : gw__ib_oob_lazy_step(t);
    int64_t now = gw__now_ms();
    for (int r = 0; st == GW_OK && r < t->base.size; r++) {
        gw_ib_peer_t *p = &t->peers[r];
        if (!p->wanted || gw__ib_peer_up(t, p) || p->gone)
            continue;
        if (r < t->base.rank && now >= p->dial_deadline)
            st = dial_timed_out(t, p);
        else if (r > t->base.rank && !p->knock_id && p->knock_fd < 0 && now >= p->knock_at)
            st = knock(t, p);
    }
    return sticky(t, st);
}
