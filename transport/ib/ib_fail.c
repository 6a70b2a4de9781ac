/*
 * ib_fail.c - the failure path of the IB transport.
 *
 * As in every transport, the first failure breaks the transport for good:
 * the base (transport/base.c) logs it once at ERROR, naming the peer by
 * its desc, and keeps it as the status every later call returns; here,
 * every pending request completes with it and releases its registration
 * (gw__ib_fail_pending). What RDMA adds is where failures come from and how to explain them:
 *   - failed work completions, reported with ibv_wc_status_str and a hint
 *     for the common ones (retries exceeded: the peer is gone or the ACK
 *     timeout is too short; remote access error: an rkey or bounds
 *     problem). Errors that say the peer did not cooperate are
 *     GW_ERR_REMOTE, local ones GW_ERR_SYSTEM;
 *   - asynchronous events from the device (port down, device fatal, QP
 *     fatal, CQ overrun), which otherwise would leave every rank waiting
 *     for completions that never come;
 *   - the connection watchers: a peer whose RDMA CM connection or
 *     out-of-band socket goes away without a goodbye died.
 */
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "transport/ib/ib_internal.h"

void gw__ib_fail_pending(gw_transport_t *base, gw_status_t st)
{
    gw_ib_t *t = gw__ib_of(base);
    for (int i = 0; t->peers && i < t->base.size; i++) {
        gw_ib_peer_t *p = &t->peers[i];
        for (gw_request_t *r = p->sq_head; r; r = r->next)
            gw__ib_req_release(t, r);
        for (gw_request_t *r = p->rq_head; r; r = r->next)
            gw__ib_req_release(t, r);
        gw__req_queue_fail(&p->sq_head, &p->sq_tail, st);
        gw__req_queue_fail(&p->rq_head, &p->rq_tail, st);
        memset(p->cts_have, 0, sizeof(p->cts_have));
    }
}

void gw__ib_describe_peer(const gw_transport_t *base, int peer, char *buf, size_t cap)
{
    const gw_ib_t *t = gw__container_of(base, gw_ib_t, base);
    snprintf(buf, cap, "%s", t->peers[peer].desc);
}

gw_status_t gw__ib_wc_status_class(enum ibv_wc_status st, const char **hint)
{
    switch (st) {
    case IBV_WC_RETRY_EXC_ERR:
        *hint = "transport retries exceeded: the peer is gone or unreachable, or GW_IB_TIMEOUT / "
                "GW_IB_RETRY_CNT are too low for this fabric";
        return GW_ERR_REMOTE;
    case IBV_WC_RNR_RETRY_EXC_ERR:
        *hint = "the peer stopped posting receives: it hung or died";
        return GW_ERR_REMOTE;
    case IBV_WC_REM_ACCESS_ERR:
        *hint = "the peer refused the RDMA access: rkey or buffer bounds do not match its "
                "registration (was a buffer freed while in use? see GW_IB_REG_CACHE)";
        return GW_ERR_REMOTE;
    case IBV_WC_REM_INV_REQ_ERR:
        *hint = "the peer found the request invalid (a message longer than its buffer, or QPs "
                "configured differently)";
        return GW_ERR_REMOTE;
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_ABORT_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR:
        *hint = "the peer could not complete the operation";
        return GW_ERR_REMOTE;
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
        *hint = "a local buffer is not covered by its registration (freed or remapped while in "
                "use?)";
        return GW_ERR_SYSTEM;
    case IBV_WC_LOC_LEN_ERR:
        *hint = "a message did not fit the local limits";
        return GW_ERR_SYSTEM;
    case IBV_WC_LOC_QP_OP_ERR:
        *hint = "the QP could not carry the request (is its port down?)";
        return GW_ERR_SYSTEM;
    case IBV_WC_WR_FLUSH_ERR:
        *hint = "the QP had already failed (see the first error or async event)";
        return GW_ERR_SYSTEM;
    default:
        *hint = "the NIC or its driver reported an internal error";
        return GW_ERR_SYSTEM;
    }
}

gw_status_t gw__ib_wc_fail(gw_ib_t *t, const struct ibv_wc *wc)
{
    /* A port that went down or a device error fails the work requests in
     * flight too, and its async event, which may trail the completion by a
     * little, is the better report: give it a moment. */
    struct pollfd pfd = {.fd = t->ctx->async_fd, .events = POLLIN};
    if (poll(&pfd, 1, GW_IB_ASYNC_GRACE_MS) > 0)
        gw__ib_async_events(t);
    if (t->base.failed != GW_OK)
        return t->base.failed;
    const char *hint = "";
    gw_status_t st = gw__ib_wc_status_class(wc->status, &hint);
    const gw_ib_qpn_map_t *m = gw__ib_qpn_lookup(t, wc->qp_num);
    const char *what = wc->wr_id == GW_IB_WR_RECV    ? "receive"
                       : wc->wr_id == GW_IB_WR_CTS   ? "CTS write"
                       : wc->wr_id == GW_IB_WR_CTRL  ? "control message"
                       : wc->wr_id == GW_IB_WR_EAGER ? "eager write"
                                                     : "payload write";
    /* A work request to a known peer failed: the failure is blamed on that
     * peer's connection (a dead peer's registrations are gone: remote
     * access error; its QP no longer answers: retry exceeded), so that the
     * referee follows it there instead of hearing "naming no rank". */
    if (m)
        return gw__ib_peer_fail(t, &t->peers[m->peer], st,
                                "%s failed on QP 0x%x: %s (status %d, vendor error 0x%x): %s", what,
                                wc->qp_num, t->api.wc_status_str(wc->status), (int)wc->status,
                                (unsigned)wc->vendor_err, hint);
    return gw__ib_fail(t, st,
                       "unknown peer: %s failed on QP 0x%x: %s (status %d, vendor error 0x%x): %s",
                       what, wc->qp_num, t->api.wc_status_str(wc->status), (int)wc->status,
                       (unsigned)wc->vendor_err, hint);
}

/* This rank's own device or port failed: it names itself as the culprit
 * (GW_BLAME_SELF), as a rank whose own call was wrong does, so that a peer
 * that can no longer reach it and this rank agree on where the fault is,
 * instead of this rank blaming nobody. */
static gw_status_t local_fail(gw_ib_t *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static gw_status_t local_fail(gw_ib_t *t, const char *fmt, ...)
{
    if (t->base.failed != GW_OK)
        return t->base.failed;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gw_status_t st = gw__ib_fail(t, GW_ERR_SYSTEM, "%s", msg);
    t->base.culprit = t->base.rank;
    t->base.origin = t->base.rank;
    t->base.blame = GW_BLAME_SELF;
    return st;
}

static const gw_ib_peer_t *peer_of_qp(const gw_ib_t *t, const struct ibv_qp *qp)
{
    const gw_ib_qpn_map_t *m = qp ? gw__ib_qpn_lookup(t, qp->qp_num) : NULL;
    return m ? &t->peers[m->peer] : NULL;
}

/* One async event: a failure status, or GW_OK for events that are news. */
static gw_status_t async_one(gw_ib_t *t, const struct ibv_async_event *ev)
{
    const char *name = t->api.event_type_str(ev->event_type);
    const gw_ib_peer_t *p;
    gw_status_t st;
    switch (ev->event_type) {
    case IBV_EVENT_DEVICE_FATAL:
        return local_fail(t, "device %s reported a fatal error (%s)", t->dev_name, name);
    case IBV_EVENT_PORT_ERR:
        if (ev->element.port_num != t->port_num)
            break;
        return local_fail(t, "port %s:%d went down (%s): check the link and the subnet manager",
                          t->dev_name, t->port_num, name);
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
        /* As a failed completion is: blamed on the QP's peer, so that the
         * referee follows it there. */
        p = peer_of_qp(t, ev->element.qp);
        st = ev->event_type == IBV_EVENT_QP_ACCESS_ERR ? GW_ERR_REMOTE : GW_ERR_SYSTEM;
        if (p)
            return gw__ib_peer_fail(t, p, st, "QP 0x%x went into the error state (%s)",
                                    ev->element.qp->qp_num, name);
        return gw__ib_fail(t, st, "unknown peer: QP 0x%x went into the error state (%s)",
                           ev->element.qp ? ev->element.qp->qp_num : 0u, name);
    case IBV_EVENT_CQ_ERR:
        return gw__ib_fail(t, GW_ERR_SYSTEM, "the completion queue failed (%s, overrun?)", name);
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
        GW_TRACE(t->base.log, GW_IB_SUBSYS, "async event: %s", name);
        return GW_OK;
    default:
        break;
    }
    GW_INFO(t->base.log, GW_IB_SUBSYS, "async event on %s: %s", t->dev_name, name);
    return GW_OK;
}

gw_status_t gw__ib_async_events(gw_ib_t *t)
{
    gw_status_t st = GW_OK;
    struct ibv_async_event ev;
    /* The fd is non-blocking: this returns -1 (EAGAIN) once drained. */
    while (t->api.get_async_event(t->ctx, &ev) == 0) {
        gw_status_t s = async_one(t, &ev);
        t->api.ack_async_event(&ev);
        if (s != GW_OK && st == GW_OK)
            st = s;
    }
    return st != GW_OK ? st : t->base.failed;
}

gw_status_t gw__ib_peer_gone(gw_ib_t *t, gw_ib_peer_t *p, const char *how)
{
    if (p->gone)
        return t->base.failed;
    p->gone = 1;
    if (p->oob_fd >= 0) {
        close(p->oob_fd);
        p->oob_fd = -1;
    }
    if (t->base.failed != GW_OK)
        return t->base.failed;
    if (p->goodbye) {
        GW_TRACE(t->base.log, GW_IB_SUBSYS, "%s %s after its goodbye", p->desc, how);
        return GW_OK;
    }
    /* The goodbye travels on a QP, the disconnect on another channel, so
     * one may overtake the other. A peer we expect nothing from has
     * finished with us either way; one we are waiting for has died. */
    if (!p->sq_head && !p->rq_head) {
        GW_TRACE(t->base.log, GW_IB_SUBSYS, "%s %s; nothing is pending with it", p->desc, how);
        return GW_OK;
    }
    return gw__ib_peer_fail(t, p, GW_ERR_REMOTE, "%s without saying goodbye: it probably died",
                            how);
}

void gw__ib_test_qp_error(gw_ib_t *t)
{
    if (t->cfg.test_qp_error <= 0 || t->ncompleted < (uint64_t)t->cfg.test_qp_error)
        return;
    t->cfg.test_qp_error = 0; /* once */
    for (int r = 0; t->peers && r < t->base.size; r++) {
        gw_ib_peer_t *p = &t->peers[r];
        if (r == t->base.rank || !p->qp_up || p->gone)
            continue;
        for (int q = 0; q < t->nqps; q++) {
            if (!p->qp[q])
                continue;
            struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};
            int rc = t->api.modify_qp(p->qp[q], &attr, IBV_QP_STATE);
            GW_WARN(t->base.log, GW_IB_SUBSYS,
                    "GW_IB_TEST_QP_ERROR (test-only): QP 0x%x to %s moved into the error state "
                    "after %llu messages%s",
                    p->qp[q]->qp_num, p->desc, (unsigned long long)t->ncompleted,
                    rc ? " (ibv_modify_qp failed)" : "");
        }
        return;
    }
}
