/*
 * ib_cm_cand.c - incoming rdmacm connections until they have proven the
 * job's data-plane key: the acceptor's side of the handshake that ib_cm.c
 * describes (connect request with the dialler's nonce; accept with ours and
 * our proof; the dialler's proof as the first message on the QP).
 *
 * Until its proof has arrived and checked out, an incoming connection is a
 * candidate: it holds no rank's slot, its QP is in no map and what arrives
 * on it counts for nothing, and a request for the same rank and QP does not
 * displace it (each proves itself on its own QP; the first proven one takes
 * the slot, and a request for a slot already proven is rejected). A
 * candidate that fails - a wrong proof, a message that is not one, a
 * disconnect first - is dropped, and the real rank, which knows the key,
 * still gets in. The first requests and candidates dropped are logged at
 * WARN with their address and why, the rest counted and summed up once a
 * second (transport/sock_strangers.c), so a flood of requests is not a
 * flood of log lines. A knock (a request for QP GW_IB_KNOCK_QP) is always
 * rejected, and makes us dial only when its proof is right and its counter
 * fresh (knock_from). Up to
 * GW_IB_CM_CANDS wait at once; when they are all taken the one that has
 * waited longest makes room for a newcomer, so strangers cannot lock a rank
 * out. A dropped candidate is disconnected (its QP goes to the error state)
 * but destroyed only when connect() ends or its entry is needed, so that
 * its QP number cannot come back on a new QP while completions of the old
 * one may still be queued; the numbers of destroyed ones are remembered for
 * the same reason. Whether its QPs agree (GW_IB_QPS) is judged only once a
 * connection is proven, so a stranger cannot make the job fail with a
 * configuration error.
 *
 * The proof arrives on the CQ (gw__ib_cm_on_proof, called by the
 * completion handler for the proof's receive), during connect(), which polls
 * the CQ while candidates wait.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/byteorder.h"
#include "common/clock.h"
#include "transport/ib/ib_cm.h"

/* id->context is a conn or a candidate: which one. */
gw_ib_cm_cand_t *gw__ib_cm_cand_of(const gw_ib_t *t, void *ctx)
{
    uintptr_t c = (uintptr_t)ctx, lo = (uintptr_t)t->cm_cands;
    if (!t->cm_cands || c < lo || c >= lo + GW_IB_CM_CANDS * sizeof(gw_ib_cm_cand_t))
        return NULL;
    return ctx;
}

void gw__ib_cm_retire_qpn(gw_ib_t *t, uint32_t qpn)
{
    t->cm_retired[t->cm_nretired % GW_IB_CM_RETIRED] = qpn;
    t->cm_nretired++;
}

static void cand_destroy(gw_ib_t *t, gw_ib_cm_cand_t *k)
{
    if (k->id) {
        if (k->id->qp) {
            gw__ib_cm_retire_qpn(t, k->id->qp->qp_num);
            t->api.cm_destroy_qp(k->id);
        }
        t->api.destroy_id(k->id);
    }
    memset(k, 0, sizeof(*k));
}

/* Disconnect a candidate that failed; it stays (DEAD) until its entry is
 * needed or connect() ends. The slot it claimed learns why, for the time-out
 * report. */
static void cand_kill(gw_ib_t *t, gw_ib_cm_cand_t *k, int kind, const char *why)
{
    if (gw__sock_stranger(&t->cm_strangers, kind))
        GW_WARN(t->base.log, GW_IB_SUBSYS,
                "dropping the RDMA CM connection from %s that claims to be rank %d (QP %d): %s",
                k->addr, k->peer, k->qp, why);
    else
        GW_TRACE(t->base.log, GW_IB_SUBSYS,
                 "dropping the RDMA CM connection from %s that claims to be rank %d (QP %d): %s",
                 k->addr, k->peer, k->qp, why);
    gw_ib_cm_conn_t *c = gw__ib_cm_conn_of(t, k->peer, k->qp);
    /* A reason longer than c->why keeps its start, marked as cut. */
    if (c->state != CM_UP &&
        snprintf(c->why, sizeof(c->why), "a connection from %s claiming it was dropped: %s",
                 k->addr, why) >= (int)sizeof(c->why))
        memcpy(c->why + sizeof(c->why) - 4, "...", 4);
    if (k->state == CAND_PROVING)
        t->api.disconnect(k->id);
    k->state = CAND_DEAD;
}

/* An entry for a new candidate: a free one, else the dead one that died
 * first, else the one that has waited longest (dropped to make room). */
static gw_ib_cm_cand_t *cand_slot(gw_ib_t *t)
{
    gw_ib_cm_cand_t *oldest = NULL, *dead = NULL;
    for (int i = 0; i < GW_IB_CM_CANDS; i++) {
        gw_ib_cm_cand_t *k = &t->cm_cands[i];
        if (k->state == CAND_FREE)
            return k;
        if (k->state == CAND_DEAD && (!dead || k->since < dead->since))
            dead = k;
        if (k->state == CAND_PROVING && (!oldest || k->since < oldest->since))
            oldest = k;
    }
    if (!dead) {
        cand_kill(t, oldest, CM_DROP_EVICTED,
                  "it has not proven the job token, and its place is needed for a "
                  "newer connection");
        dead = oldest;
    }
    /* Completions of its QP that are still queued go where they belong
     * before its number can be given to another QP. */
    int handled;
    gw__ib_poll_cq(t, 1 << 20, &handled);
    cand_destroy(t, dead);
    return dead;
}

/* Accept id as a candidate for conn (peer, qp): a QP whose first receive
 * takes the proof, and the accept with our nonce and proof. */
static void cand_accept(gw_ib_t *t, struct rdma_cm_id *id, const gw_ib_cm_pdata_t *req,
                        const char *addr)
{
    gw_ib_cm_cand_t *k = cand_slot(t);
    k->id = id;
    id->context = k;
    k->peer = (int)req->from;
    k->qp = req->qp_idx;
    k->nqps = req->nqps;
    k->since = gw__now_ms();
    snprintf(k->addr, sizeof(k->addr), "%s", addr);
    k->shake = (gw_ib_cm_shake_t){
        .dialler = req->from, .acceptor = (uint32_t)t->base.rank, .qp_idx = req->qp_idx};
    memcpy(k->shake.nonce_d, req->nonce, GW_IB_CM_NONCE_LEN);
    k->state = CAND_PROVING;
    char whom[128];
    snprintf(whom, sizeof(whom), "the connection from %s (rank %d, QP %d)", addr, k->peer, k->qp);
    gw__ib_cm_ack_timeout(t, id);
    gw_ib_peer_t *p = &t->peers[k->peer];
    if (gw__ib_pair_block(t, p) != GW_OK || gw__ib_cm_create_qp(t, id, whom) != GW_OK ||
        gw__ib_cm_nonce(t, k->shake.nonce_a) != GW_OK) {
        cand_kill(t, k, CM_DROP_CLOSED, "no QP for it");
        return;
    }
    k->qpn = id->qp->qp_num;
    int i = (int)(k - t->cm_cands);
    struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)gw__ib_cm_proof_buf(t, i),
                          .length = GW_IB_CM_PROOF_SLOT,
                          .lkey = t->cm_auth_mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = GW_IB_WR_PROOF_RECV, .sg_list = &sge, .num_sge = 1}, *bad;
    int rc = ibv_post_recv(id->qp, &wr, &bad);
    if (rc == 0)
        rc = gw__ib_qp_post_empty_recvs(id->qp, GW_IB_CM_CAND_RECVS);
    if (rc != 0) {
        char why[96];
        snprintf(why, sizeof(why), "posting its receives: %s", strerror(rc));
        cand_kill(t, k, CM_DROP_CLOSED, why);
        return;
    }
    gw_ib_cm_pdata_t rep = {.from = (uint32_t)t->base.rank, .to = req->from, .qp_idx = req->qp_idx};
    memcpy(rep.nonce, k->shake.nonce_a, GW_IB_CM_NONCE_LEN);
    k->shake.blk_a = rep.blk = (uint64_t)(uintptr_t)p->blk;
    k->shake.rkey_a = rep.blk_rkey = gw__ib_blk_rkey(t, p);
    gw__ib_cm_proof(t->data_key, &k->shake, 1, rep.mac);
    uint8_t buf[GW_IB_CM_REP_SIZE];
    gw__ib_cm_rep_encode(&rep, buf);
    struct rdma_conn_param cp;
    gw__ib_cm_param(t, &cp, buf, sizeof(buf));
    if (t->api.accept(id, &cp) != 0) {
        char why[96];
        snprintf(why, sizeof(why), "rdma_accept: %s", strerror(errno));
        cand_kill(t, k, CM_DROP_CLOSED, why);
    }
}

/* A proven candidate becomes the connection of its rank and QP. */
static gw_status_t cand_admit(gw_ib_t *t, gw_ib_cm_cand_t *k)
{
    gw_ib_peer_t *p = &t->peers[k->peer];
    gw_ib_cm_conn_t *c = gw__ib_cm_conn_of(t, k->peer, k->qp);
    if (k->nqps != t->nqps) /* sticky: a CQ poll that discards the status still fails the job */
        return gw__ib_peer_fail(t, p, GW_ERR_CONFIG,
                                "uses %d QPs per peer, this rank %d (GW_IB_QPS)", k->nqps, t->nqps);
    if (c->state == CM_UP) {
        cand_kill(t, k, CM_DROP_CLAIM, "its rank's QP is connected already");
        return GW_OK;
    }
    gw_status_t st = gw__ib_cq_room(t, p); /* sticky: a failure fails the job */
    if (st != GW_OK)
        return gw__ib_fail(t, st, NULL);
    /* The proof took the first receive; the candidate had a few more. */
    int rc = gw__ib_qp_post_empty_recvs(k->id->qp, GW_IB_WQ_DEPTH - GW_IB_CM_CAND_RECVS);
    if (rc != 0) {
        char why[96];
        snprintf(why, sizeof(why), "posting its receives: %s", strerror(rc));
        cand_kill(t, k, CM_DROP_CLOSED, why);
        return GW_OK;
    }
    GW_TRACE(t->base.log, GW_IB_SUBSYS, "RDMA CM connection %d from %s (%s) proved the key", k->qp,
             p->desc, k->addr);
    /* Where we write CTS entries and eager messages: named, and proven, in
     * its proof. */
    p->rblk = k->shake.blk_d;
    p->rblk_rkey = k->shake.rkey_d;
    c->id = k->id;
    c->id->context = c;
    p->qp[c->qp] = c->id->qp;
    p->cm_id[c->qp] = c->id;
    t->qpn_dirty = 1;
    c->state = CM_UP;
    p->qp_up++;
    memset(k, 0, sizeof(*k));
    return GW_OK;
}

gw_status_t gw__ib_cm_on_proof(gw_ib_t *t, const struct ibv_wc *wc)
{
    for (int i = 0; t->cm_cands && i < GW_IB_CM_CANDS; i++) {
        gw_ib_cm_cand_t *k = &t->cm_cands[i];
        if (k->state != CAND_PROVING || k->qpn != wc->qp_num)
            continue;
        if (wc->status != IBV_WC_SUCCESS) {
            char why[128];
            snprintf(why, sizeof(why), "its first message is not a proof (%s)",
                     t->api.wc_status_str(wc->status));
            cand_kill(t, k, CM_DROP_CLOSED, why);
            return GW_OK;
        }
        const uint8_t *msg = gw__ib_cm_proof_buf(t, i);
        if (wc->byte_len == GW_IB_CM_PROOF_SIZE)
            gw__ib_cm_proof_msg_decode(msg, &k->shake.blk_d, &k->shake.rkey_d);
        if (wc->byte_len != GW_IB_CM_PROOF_SIZE ||
            !gw__ib_cm_proof_ok(t->data_key, &k->shake, 0, msg)) {
            cand_kill(t, k, CM_DROP_PROOF, "wrong proof (it does not know the job token)");
            return GW_OK;
        }
        return cand_admit(t, k);
    }
    return GW_OK; /* a candidate dropped already */
}

int gw__ib_cm_stray(const gw_ib_t *t, uint32_t qpn)
{
    for (int i = 0; t->cm_cands && i < GW_IB_CM_CANDS; i++)
        if (t->cm_cands[i].state != CAND_FREE && t->cm_cands[i].qpn == qpn)
            return 1;
    unsigned n = t->cm_nretired < GW_IB_CM_RETIRED ? t->cm_nretired : GW_IB_CM_RETIRED;
    for (unsigned i = 0; i < n; i++)
        if (t->cm_retired[i] == qpn)
            return 1;
    return 0;
}

void gw__ib_cm_cands_end(gw_ib_t *t)
{
    int any = 0;
    for (int i = 0; t->cm_cands && i < GW_IB_CM_CANDS; i++) {
        any |= t->cm_cands[i].state != CAND_FREE;
        if (t->cm_cands[i].state == CAND_PROVING)
            cand_kill(t, &t->cm_cands[i], CM_DROP_CLOSED,
                      "it did not prove the job token before every rank was connected");
    }
    if (!any)
        return;
    /* Their completions still queued are recognised as theirs while their
     * QPs exist (and by number once they are destroyed). */
    int handled;
    gw__ib_poll_cq(t, 1 << 20, &handled);
    for (int i = 0; i < GW_IB_CM_CANDS; i++)
        if (t->cm_cands[i].state != CAND_FREE)
            cand_destroy(t, &t->cm_cands[i]);
}

/* A knock's request: the rank to dial when its proof is right, it may
 * knock on us and its counter is above the last we acted on from it; else
 * -1 and why. */
static int knock_from(gw_ib_t *t, const uint8_t *pdata, size_t len, char *why, size_t cap)
{
    uint32_t from;
    uint64_t counter;
    if (!gw__ib_cm_knock_check(t->data_key, t->job_id, (uint32_t)t->base.rank, pdata, len, &from,
                               &counter)) {
        snprintf(why, cap, "a knock without the right proof (it does not know the job token)");
        return -1;
    }
    if (!t->lazy || from >= (uint32_t)t->base.rank || !t->peers[from].active) {
        snprintf(why, cap, "a knock from rank %u, which does not ask us to dial it",
                 (unsigned)from);
        return -1;
    }
    if (counter <= t->peers[from].knock_seen) {
        snprintf(why, cap, "replayed (a knock in rank %u's name that is not fresh)",
                 (unsigned)from);
        return -1;
    }
    t->peers[from].knock_seen = counter;
    return (int)from;
}

/* A connection request: reject what is not a request of this job's ranks
 * (one WARN line), accept the rest as candidates. */
void gw__ib_cm_on_request(gw_ib_t *t, struct rdma_cm_id *id, const uint8_t *pdata, size_t pdata_len)
{
    char addr[64], why[160];
    gw__ib_cm_peer_str(id, addr, sizeof(addr));
    gw_ib_cm_pdata_t pd;
    why[0] = '\0';
    int kind = CM_DROP_CLAIM;
    if (gw__ib_cm_req_decode(pdata, pdata_len, &pd) != GW_OK) {
        kind = CM_DROP_GARBAGE;
        snprintf(why, sizeof(why),
                 "it is not a gradwire connection request of protocol version %u (%zu bytes, "
                 "magic 0x%08x)",
                 GW_IB_PROTOCOL_VERSION, pdata_len,
                 pdata_len >= 4 ? (unsigned)gw__get_be32(pdata) : 0u);
    } else if (pd.qp_idx == GW_IB_KNOCK_QP) {
        kind = CM_DROP_PROOF;
        /* A knock: rejected either way (the knocker learns it was
         * delivered); we dial (ib_lazy.c) only for a proven, fresh one. */
        int from = knock_from(t, pdata, pdata_len, why, sizeof(why));
        if (from >= 0) {
            t->api.reject(id, NULL, 0);
            t->api.destroy_id(id);
            (void)gw__ib_knocked_by(t, from); /* a failure is sticky */
            return;
        }
    } else if (memcmp(pd.job_id, t->job_id, 16) != 0)
        snprintf(why, sizeof(why), "it is from another job");
    else if (pd.to != (uint32_t)t->base.rank || pd.from <= (uint32_t)t->base.rank ||
             pd.from >= (uint32_t)t->base.size || pd.qp_idx >= t->nqps || !t->peers[pd.from].active)
        snprintf(why, sizeof(why), "rank %u does not connect to rank %u this way (QP %u)",
                 (unsigned)pd.from, (unsigned)pd.to, (unsigned)pd.qp_idx);
    else if (gw__ib_cm_conn_of(t, (int)pd.from, pd.qp_idx)->state == CM_UP)
        snprintf(why, sizeof(why), "rank %u's QP %u is connected and proven already",
                 (unsigned)pd.from, (unsigned)pd.qp_idx);
    if (!why[0] && t->cfg.test_reject > 0) {
        t->cfg.test_reject--;
        snprintf(why, sizeof(why), "GW_IB_TEST_REJECT (test-only) says so");
    }
    if (why[0]) {
        if (gw__sock_stranger(&t->cm_strangers, kind))
            GW_WARN(t->base.log, GW_IB_SUBSYS,
                    "rejecting an RDMA CM connection request from %s: %s", addr, why);
        else
            GW_TRACE(t->base.log, GW_IB_SUBSYS,
                     "rejecting an RDMA CM connection request from %s: %s", addr, why);
        t->api.reject(id, NULL, 0);
        t->api.destroy_id(id);
        return;
    }
    cand_accept(t, id, &pd, addr);
}

/* Events of a candidate: only its proof (on the CQ) admits it. */
void gw__ib_cm_cand_event(gw_ib_t *t, gw_ib_cm_cand_t *k, enum rdma_cm_event_type type, int status)
{
    if (type == RDMA_CM_EVENT_ESTABLISHED || k->state != CAND_PROVING)
        return;
    char why[128];
    snprintf(why, sizeof(why), "%s (status %d) before it proved the job token",
             t->api.event_str(type), status);
    cand_kill(t, k, CM_DROP_CLOSED, why);
}

int gw__ib_cm_proving(const gw_ib_t *t)
{
    for (int i = 0; i < GW_IB_CM_CANDS; i++)
        if (t->cm_cands[i].state == CAND_PROVING)
            return 1;
    return 0;
}

void gw__ib_cm_cands_free(gw_ib_t *t)
{
    for (int i = 0; t->cm_cands && i < GW_IB_CM_CANDS; i++)
        cand_destroy(t, &t->cm_cands[i]);
    free(t->cm_cands);
    t->cm_cands = NULL;
}
