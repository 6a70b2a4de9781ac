/*
 * ib_qp.c - queue pairs: creation, the INIT -> RTR -> RTS walk of the
 * out-of-band mode, receive posting, control messages, and the map from QP
 * numbers back to peers that completions need.
 *
 * Attributes follow what NCCL found to work across InfiniBand and RoCE
 * fabrics: one SGE, min_rnr_timer 12, rnr_retry 7 (retry for ever while the
 * receiver is not ready: it always catches up, since its receive queue is
 * refilled on every completion), retry_cnt and the ACK timeout from
 * GW_IB_RETRY_CNT and GW_IB_TIMEOUT; on RoCE (or with GW_IB_GID_INDEX) a
 * global route with hop limit 255. The path MTU is the smaller of both
 * ports' active MTUs.
 *
 * Inline data: the first QP asks for 256 bytes, so that eager messages of
 * up to 192 bytes (after their 64-byte header) and every CTS entry travel
 * inside the work request (no DMA read of the source on the sender, the
 * cheapest small-message path on every NIC); a device that refuses gets
 * 64, then none, and every later QP asks for what worked.
 *
 * Receives carry no buffer: every message arrives by RDMA WRITE WITH
 * IMMEDIATE (payload and CTS entries) or as an empty SEND WITH IMMEDIATE
 * (control), so a receive work request only gives the immediate a place to
 * complete. (One exception: the first receive of a QP that an rdmacm
 * acceptor sets up takes the dialler's 32-byte proof of the job's key, into
 * a buffer of ib_cm.c's.)
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transport/ib/ib_internal.h"

gw_status_t gw__ib_errno_status(int err)
{
    return err == ENOMEM || err == EAGAIN ? GW_ERR_NO_MEMORY : GW_ERR_SYSTEM;
}

void gw__ib_qp_init_attr(const gw_ib_t *t, struct ibv_qp_init_attr *a)
{
    memset(a, 0, sizeof(*a));
    a->send_cq = t->cq;
    a->recv_cq = t->cq;
    a->qp_type = IBV_QPT_RC;
    a->sq_sig_all = 0;
    a->cap.max_send_wr = GW_IB_WQ_DEPTH;
    a->cap.max_recv_wr = GW_IB_WQ_DEPTH;
    a->cap.max_send_sge = 1;
    a->cap.max_recv_sge = 1;
    a->cap.max_inline_data = (uint32_t)t->inline_req;
}

int gw__ib_qp_inline_retry(gw_ib_t *t, int err)
{
    if ((err != EINVAL && err != ENOMEM) || t->inline_req == 0)
        return 0;
    int next = t->inline_req > 64 ? 64 : 0;
    GW_TRACE(t->base.log, GW_IB_SUBSYS,
             "creating a QP with %d bytes of inline data failed (%s): "
             "asking for %d",
             t->inline_req, strerror(err), next);
    t->inline_req = next;
    return 1;
}

void gw__ib_qp_created(gw_ib_t *t, const struct ibv_qp_init_attr *a)
{
    if (t->max_inline < 0 || (int)a->cap.max_inline_data < t->max_inline)
        t->max_inline = (int)a->cap.max_inline_data;
}

gw_status_t gw__ib_qp_create(gw_ib_t *t, gw_ib_peer_t *p, int k)
{
    struct ibv_qp_init_attr ia;
    struct ibv_qp *qp;
    for (;;) {
        gw__ib_qp_init_attr(t, &ia);
        if ((qp = t->api.create_qp(t->pd, &ia)))
            break;
        int err = errno;
        if (gw__ib_qp_inline_retry(t, err))
            continue;
        errno = err;
        GW_ERROR(t->base.log, GW_IB_SUBSYS, "ibv_create_qp for %s, QP %d: %m", p->desc, k);
        return gw__ib_errno_status(err);
    }
    p->qp[k] = qp;
    gw__ib_qp_created(t, &ia);
    struct ibv_qp_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = (uint8_t)t->port_num;
    attr.qp_access_flags =
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    int rc = t->api.modify_qp(qp, &attr,
                              IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc != 0) {
        errno = rc;
        GW_ERROR(t->base.log, GW_IB_SUBSYS, "QP 0x%x for %s: INIT failed: %m", qp->qp_num, p->desc);
        return GW_ERR_SYSTEM;
    }
    return GW_OK;
}

gw_status_t gw__ib_qp_connect(gw_ib_t *t, gw_ib_peer_t *p, int k, uint32_t remote_qpn,
                              uint32_t remote_psn, uint32_t local_psn)
{
    struct ibv_qp *qp = p->qp[k];
    struct ibv_qp_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu =
        p->addr.mtu < t->port_attr.active_mtu ? (enum ibv_mtu)p->addr.mtu : t->port_attr.active_mtu;
    attr.dest_qp_num = remote_qpn;
    attr.rq_psn = remote_psn;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    attr.ah_attr.port_num = (uint8_t)t->port_num;
    attr.ah_attr.sl = (uint8_t)t->cfg.sl;
    if (t->gid_index >= 0) {
        attr.ah_attr.is_global = 1;
        memcpy(attr.ah_attr.grh.dgid.raw, p->addr.gid, 16);
        attr.ah_attr.grh.sgid_index = (uint8_t)t->gid_index;
        attr.ah_attr.grh.hop_limit = 255;
        attr.ah_attr.grh.traffic_class = (uint8_t)t->cfg.tc;
        attr.ah_attr.grh.flow_label = 0;
    } else {
        attr.ah_attr.dlid = p->addr.lid;
    }
    int rc = t->api.modify_qp(qp, &attr,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc != 0) {
        errno = rc;
        GW_ERROR(t->base.log, GW_IB_SUBSYS,
                 "QP 0x%x to %s (remote QP 0x%x): RTR failed: %m (GID index %d, path MTU %d)",
                 qp->qp_num, p->desc, remote_qpn, t->gid_index, 128 << attr.path_mtu);
        return GW_ERR_SYSTEM;
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = (uint8_t)t->cfg.timeout;
    attr.retry_cnt = (uint8_t)t->cfg.retry_cnt;
    attr.rnr_retry = 7;
    attr.sq_psn = local_psn;
    attr.max_rd_atomic = 1;
    rc = t->api.modify_qp(qp, &attr,
                          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                              IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0) {
        errno = rc;
        GW_ERROR(t->base.log, GW_IB_SUBSYS, "QP 0x%x to %s: RTS failed: %m", qp->qp_num, p->desc);
        return GW_ERR_SYSTEM;
    }
    return GW_OK;
}

int gw__ib_qp_post_empty_recvs(struct ibv_qp *qp, int n)
{
    struct ibv_recv_wr wrs[16], *bad = NULL;
    while (n > 0) {
        int m = n < 16 ? n : 16;
        for (int i = 0; i < m; i++) {
            memset(&wrs[i], 0, sizeof(wrs[i]));
            wrs[i].wr_id = GW_IB_WR_RECV;
            wrs[i].num_sge = 0;
            wrs[i].next = i + 1 < m ? &wrs[i + 1] : NULL;
        }
        int rc = ibv_post_recv(qp, wrs, &bad);
        if (rc != 0)
            return rc;
        n -= m;
    }
    return 0;
}

gw_status_t gw__ib_qp_post_recvs(gw_ib_t *t, gw_ib_peer_t *p, int k, int n)
{
    int rc = gw__ib_qp_post_empty_recvs(p->qp[k], n);
    if (rc != 0) {
        errno = rc;
        return gw__ib_fail(t, GW_ERR_SYSTEM, "posting receives on QP 0x%x to %s: %m",
                           p->qp[k]->qp_num, p->desc);
    }
    return GW_OK;
}

static int cmp_qpn(const void *a, const void *b)
{
    uint32_t x = ((const gw_ib_qpn_map_t *)a)->qpn, y = ((const gw_ib_qpn_map_t *)b)->qpn;
    return x < y ? -1 : x > y;
}

gw_status_t gw__ib_qpn_map_build(gw_ib_t *t)
{
    int n = (t->base.size - 1) * t->nqps;
    free(t->qpn_map);
    t->qpn_map = calloc((size_t)(n > 0 ? n : 1), sizeof(*t->qpn_map));
    if (!t->qpn_map)
        return GW_ERR_NO_MEMORY;
    t->nqpn = 0;
    for (int r = 0; r < t->base.size; r++) {
        if (!t->peers[r].active)
            continue;
        for (int k = 0; k < t->nqps; k++)
            if (t->peers[r].qp[k]) /* during the rdmacm set-up, not all exist yet */
                t->qpn_map[t->nqpn++] =
                    (gw_ib_qpn_map_t){.qpn = t->peers[r].qp[k]->qp_num, .peer = r, .qp = k};
    }
    qsort(t->qpn_map, (size_t)t->nqpn, sizeof(*t->qpn_map), cmp_qpn);
    t->qpn_dirty = 0;
    return GW_OK;
}

const gw_ib_qpn_map_t *gw__ib_qpn_lookup(const gw_ib_t *t, uint32_t qpn)
{
    if (t->nqpn == 0)
        return NULL;
    gw_ib_qpn_map_t key = {.qpn = qpn};
    return bsearch(&key, t->qpn_map, (size_t)t->nqpn, sizeof(key), cmp_qpn);
}

const gw_ib_qpn_map_t *gw__ib_qpn_find(gw_ib_t *t, uint32_t qpn)
{
    /* A map that is out of date could send a completion to the peer that
     * held a QP number before a stranger's QP got it. */
    if (t->qpn_dirty && gw__ib_qpn_map_build(t) != GW_OK)
        return NULL;
    return gw__ib_qpn_lookup(t, qpn);
}

gw_status_t gw__ib_post_ctrl(gw_ib_t *t, gw_ib_peer_t *p, gw_ib_imm_kind_t kind, uint64_t value)
{
    if (!p->qp[0] || p->sq_used[0] >= GW_IB_WQ_DEPTH)
        return GW_ERR_NO_MEMORY;
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = GW_IB_WR_CTRL;
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htobe32(gw__ib_imm_encode(kind, value));
    wr.num_sge = 0;
    int rc = ibv_post_send(p->qp[0], &wr, &bad);
    if (rc != 0) {
        errno = rc;
        GW_TRACE(t->base.log, GW_IB_SUBSYS, "posting a control message to %s: %m", p->desc);
        return GW_ERR_SYSTEM;
    }
    p->sq_used[0]++;
    return GW_OK;
}
