/*
 * ib_cm_connect.c - when the RDMA CM set-up runs (ib_cm.c has how): all of
 * it in connect(), one loop on the event channel under one deadline, with
 * the CQ polled while incoming connections wait for their proofs; or,
 * connecting on first use (ib_lazy.c), one pair's dials at a time, started
 * by its first request and moved by progress() with the events, retries
 * and deadlines of the eager loop.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/clock.h"
#include "transport/ib/ib_cm.h"

#define PROOF_TICK_MS 1 /* how often connect() looks at the CQ while proofs are due */

static void report_missing(gw_ib_t *t)
{
    for (int i = 0; i < t->ncm_conns; i++) {
        const gw_ib_cm_conn_t *c = &t->cm_conns[i];
        if (!c->used || c->state == CM_UP)
            continue;
        GW_ERROR(t->base.log, GW_IB_SUBSYS,
                 "RDMA CM connection %d with %s not established after %d ms%s%s", c->qp,
                 t->peers[c->peer].desc, t->timeout_ms, c->why[0] ? ": last error: " : "", c->why);
    }
}

/* The conns, the candidates and the registered proof buffers. */
static gw_status_t cm_alloc(gw_ib_t *t)
{
    t->ncm_conns = (t->base.size - 1) * t->nqps;
    t->cm_conns = calloc((size_t)(t->ncm_conns > 0 ? t->ncm_conns : 1), sizeof(*t->cm_conns));
    t->cm_cands = calloc(GW_IB_CM_CANDS, sizeof(*t->cm_cands));
    size_t bytes = (size_t)(GW_IB_CM_CANDS + t->ncm_conns) * GW_IB_CM_PROOF_SLOT;
    t->cm_auth_mem = calloc(1, bytes);
    if (!t->cm_conns || !t->cm_cands || !t->cm_auth_mem) {
        GW_ERROR(t->base.log, GW_IB_SUBSYS, "out of memory for %d RDMA CM connections",
                 t->ncm_conns);
        return GW_ERR_NO_MEMORY;
    }
    /* Local access only: the proofs are sent and received, never written
     * into by a peer. */
    t->cm_auth_mr = t->api.reg_mr(t->pd, t->cm_auth_mem, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!t->cm_auth_mr) {
        GW_ERROR(t->base.log, GW_IB_SUBSYS, "registering %zu bytes for the RDMA CM proofs: %m",
                 bytes);
        return GW_ERR_SYSTEM;
    }
    return GW_OK;
}

gw_status_t gw__ib_cm_connect(gw_ib_t *t)
{
    gw_status_t st = cm_alloc(t);
    if (st != GW_OK)
        return st;
    for (int r = 0; r < t->base.size; r++) {
        if (!t->peers[r].active)
            continue;
        for (int k = 0; k < t->nqps; k++) {
            gw_ib_cm_conn_t *c = gw__ib_cm_conn_of(t, r, k);
            c->used = 1;
            c->peer = r;
            c->qp = k;
            c->out = r < t->base.rank;
            /* Lazily, a dial starts with the pair's first request. */
            c->state = c->out && !t->lazy ? CM_WAIT : CM_IDLE;
            gw__sock_retry_init(&c->retry);
        }
    }
    if (t->lazy)
        return GW_OK; /* candidates stay: peers dial us whenever they need us */
    int64_t deadline = gw__now_ms() + t->timeout_ms;
    for (;;) {
        int up = 0;
        int64_t now = gw__now_ms(), wake = deadline;
        for (int i = 0; i < t->ncm_conns; i++) {
            gw_ib_cm_conn_t *c = &t->cm_conns[i];
            if (!c->used) {
                up++;
                continue;
            }
            if (c->state == CM_WAIT && now >= c->retry.at)
                gw__ib_cm_out_start(t, c);
            if (c->state == CM_WAIT && c->retry.at < wake)
                wake = c->retry.at;
            up += c->state == CM_UP;
        }
        if (up == t->ncm_conns) {
            gw__ib_cm_cands_end(t); /* a failure it sees is sticky: the next call returns it */
            return GW_OK;
        }
        if (now >= deadline) {
            report_missing(t);
            return GW_ERR_TIMEOUT;
        }
        int wait = (int)(wake > now ? wake - now : 0);
        if (gw__ib_cm_proving(t) && wait > PROOF_TICK_MS)
            wait = PROOF_TICK_MS;
        struct pollfd pfd = {.fd = t->cm_channel->fd, .events = POLLIN};
        int rc = poll(&pfd, 1, wait);
        if (rc < 0 && errno != EINTR) {
            GW_ERROR(t->base.log, GW_IB_SUBSYS, "poll() on the RDMA CM channel: %m");
            return GW_ERR_SYSTEM;
        }
        while (st == GW_OK && gw__ib_cm_next_event(t, &st, 1))
            ;
        gw__sock_strangers_summary(&t->cm_strangers, gw__now_ms(), 0, NULL);
        /* Proofs, and whatever proven peers have sent before them. Only
         * while proofs are due: otherwise what peers send waits for
         * progress(), as it would have without the proofs (a peer that
         * fails right after its connect() must fail our first call, not
         * this connect()). */
        int handled;
        if (st == GW_OK && gw__ib_cm_proving(t))
            st = gw__ib_poll_cq(t, 1 << 20, &handled);
        if (st != GW_OK)
            return st;
    }
}

gw_status_t gw__ib_cm_dial_peer(gw_ib_t *t, gw_ib_peer_t *p)
{
    for (int k = 0; k < t->nqps; k++) {
        gw_ib_cm_conn_t *c = gw__ib_cm_conn_of(t, p->rank, k);
        if (c->state != CM_IDLE)
            continue;
        gw__sock_retry_init(&c->retry);
        c->state = CM_WAIT;
        gw__ib_cm_out_start(t, c);
    }
    return t->base.failed;
}

void gw__ib_cm_dial_stop(gw_ib_t *t, gw_ib_peer_t *p)
{
    /* QPs that are up stay up (both sides hold them); the others are
     * forgotten, and dialled again with the pair's next need. */
    for (int k = 0; t->cm_conns && k < t->nqps; k++) {
        gw_ib_cm_conn_t *c = gw__ib_cm_conn_of(t, p->rank, k);
        if (c->state == CM_UP || c->state == CM_IDLE)
            continue;
        gw__ib_cm_drop_id(t, c); /* as a retry does */
        c->state = CM_IDLE;
    }
}

const char *gw__ib_cm_dial_why(gw_ib_t *t, const gw_ib_peer_t *p)
{
    for (int k = 0; t->cm_conns && k < t->nqps; k++) {
        const gw_ib_cm_conn_t *c = gw__ib_cm_conn_of(t, p->rank, k);
        if (c->state != CM_UP && c->why[0])
            return c->why;
    }
    return "";
}

int64_t gw__ib_cm_next_retry(gw_ib_t *t, const gw_ib_peer_t *p)
{
    int64_t at = INT64_MAX;
    for (int k = 0; t->cm_conns && k < t->nqps; k++) {
        const gw_ib_cm_conn_t *c = gw__ib_cm_conn_of(t, p->rank, k);
        if (c->state == CM_WAIT && c->retry.at < at)
            at = c->retry.at;
    }
    return at;
}

gw_status_t gw__ib_cm_lazy_step(gw_ib_t *t)
{
    gw_status_t st = gw__ib_cm_poll_events(t);
    int64_t now = gw__now_ms();
    for (int i = 0; st == GW_OK && i < t->ncm_conns; i++) {
        gw_ib_cm_conn_t *c = &t->cm_conns[i];
        if (c->used && c->state == CM_WAIT && now >= c->retry.at)
            gw__ib_cm_out_start(t, c);
    }
    return st != GW_OK ? st : t->base.failed;
}
