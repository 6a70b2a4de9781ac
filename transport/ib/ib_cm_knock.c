/*
 * ib_cm_knock.c - knocks through the RDMA CM: how a lower rank asks a
 * higher one to dial it when the pair connects on first use (ib_lazy.c).
 *
 * A knock is a connect request for QP GW_IB_KNOCK_QP, on an id with no QP
 * of its own, whose private data carries our knock counter for the pair
 * and its proof of the job's key (ib_wire.c: the 56 bytes RoCE carries).
 * The higher rank rejects it (consumer reason) and, when the proof is
 * right and the counter above the last it acted on from us, starts
 * dialling; a knock of a stranger who read the job id, or one played
 * back, moves nobody (ib_cm_cand.c). Its IB CM carries the rejection
 * back, so the knocker knows the knock was delivered. A request
 * that finds no listener at the address is rejected by the peer's kernel
 * instead, with "invalid service ID": nobody listens there any more (the
 * rank closed its communicator or died), and the pair fails at once,
 * naming it. Any other outcome (no route yet, no answer within the CM's
 * time-out) leaves the knock to be sent again (ib_lazy.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "transport/ib/ib_cm.h"

#define RESOLVE_MS 2000

gw_ib_peer_t *gw__ib_cm_knock_of(const gw_ib_t *t, void *ctx)
{
    uintptr_t c = (uintptr_t)ctx, lo = (uintptr_t)t->peers;
    if (!t->peers || c < lo || c >= lo + (size_t)t->base.size * sizeof(gw_ib_peer_t))
        return NULL;
    return ctx;
}

void gw__ib_cm_knock_end(gw_ib_t *t, gw_ib_peer_t *p)
{
    if (p->knock_id)
        t->api.destroy_id(p->knock_id);
    p->knock_id = NULL;
}

/* The knock could not go now: it goes again when ib_lazy.c says. */
static gw_status_t not_now(gw_ib_t *t, gw_ib_peer_t *p, const char *what, int err)
{
    GW_TRACE(t->base.log, GW_IB_SUBSYS, "knocking on %s: %s: %s; knocking again later", p->desc,
             what, strerror(err));
    gw__ib_cm_knock_end(t, p);
    return GW_OK;
}

gw_status_t gw__ib_cm_knock(gw_ib_t *t, gw_ib_peer_t *p)
{
    if (p->knock_id)
        return GW_OK; /* one under way */
    if (t->api.create_id(t->cm_channel, &p->knock_id, p, RDMA_PS_TCP) != 0) {
        p->knock_id = NULL;
        return not_now(t, p, "rdma_create_id", errno);
    }
    gw__ib_cm_ack_timeout(t, p->knock_id);
    struct sockaddr_storage src;
    gw__ib_cm_src_addr(t, &src);
    if (t->api.resolve_addr(p->knock_id, (struct sockaddr *)&src, (struct sockaddr *)&p->addr.sa,
                            RESOLVE_MS) != 0)
        return not_now(t, p, "rdma_resolve_addr", errno);
    return GW_OK;
}

/* The route is known: the request, with our next counter and the proof. */
static gw_status_t send_request(gw_ib_t *t, gw_ib_peer_t *p)
{
    uint8_t buf[GW_IB_CM_KNOCK_SIZE];
    gw__ib_cm_knock_encode(t->data_key, t->job_id, (uint32_t)t->base.rank, (uint32_t)p->rank,
                           gw__sock_knock_next(&p->knock_sent), buf);
    struct rdma_conn_param cp;
    gw__ib_cm_param(t, &cp, buf, sizeof(buf));
    if (t->api.connect(p->knock_id, &cp) != 0)
        return not_now(t, p, "rdma_connect", errno);
    return GW_OK;
}

gw_status_t gw__ib_cm_knock_event(gw_ib_t *t, gw_ib_peer_t *p, enum rdma_cm_event_type type,
                                  int status)
{
    switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
        if (t->api.resolve_route(p->knock_id, RESOLVE_MS) != 0)
            return not_now(t, p, "rdma_resolve_route", errno);
        return GW_OK;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
        return send_request(t, p);
    case RDMA_CM_EVENT_REJECTED:
        gw__ib_cm_knock_end(t, p);
        if (status == GW_IB_REJ_CONSUMER_DEFINED) {
            p->knocks++;
            GW_TRACE(t->base.log, GW_IB_SUBSYS, "knocked on %s", p->desc);
            return GW_OK;
        }
        if (status == GW_IB_REJ_INVALID_SERVICE_ID)
            return gw__ib_peer_fail(t, p, GW_ERR_REMOTE,
                                    "no longer listens at its RDMA CM address (our knock was "
                                    "refused by its host): it closed its communicator or died");
        GW_TRACE(t->base.log, GW_IB_SUBSYS,
                 "knocking on %s: rejected with reason %d; knocking again later", p->desc, status);
        return GW_OK;
    default:
        /* ESTABLISHED would be a listener that accepted a knock: not a
         * rank of this version; the rest are errors worth another try. */
        GW_TRACE(t->base.log, GW_IB_SUBSYS, "knocking on %s: %s (status %d); knocking again later",
                 p->desc, t->api.event_str(type), status);
        if (type == RDMA_CM_EVENT_ESTABLISHED)
            t->api.disconnect(p->knock_id);
        gw__ib_cm_knock_end(t, p);
        return GW_OK;
    }
}
