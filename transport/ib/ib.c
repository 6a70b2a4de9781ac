/*
 * ib.c - the InfiniBand verbs transport: tagged messages between every pair
 * of ranks, moved by the NIC straight from the sender's buffer into the
 * receiver's (RDMA WRITE), with RC queue pairs over InfiniBand or RoCE.
 *
 * How data moves. The protocol is receiver-driven, as NCCL's: a message
 * moves only once its receiver has said where it goes. For its n-th receive
 * from peer p, a rank registers the buffer (through the registration cache)
 * and writes a clear-to-send entry {address, rkey, length, tag, n} into slot
 * n mod 32 of the FIFO that p set aside for it, with an RDMA WRITE WITH
 * IMMEDIATE, so p's CQ reports the entry's arrival. p pairs that entry with
 * its own n-th send to us and compares the two: same tag (sequence number
 * and signature) and same length, or the send is refused with a MISMATCH
 * immediate and both ends fail with GW_ERR_MISMATCH; no payload byte ever
 * reaches a buffer meant for something else. Otherwise p writes the payload
 * straight into our buffer with RDMA WRITE WITH IMMEDIATE; the immediate (a
 * kind and the message index) tells our CQ which receive the data landed
 * in. Messages of at least 256 KiB are striped over the GW_IB_QPS queue
 * pairs of the pair of ranks, one part per QP, each part ending with its own
 * immediate; a receive completes when all its parts did. Messages up to the
 * QP's inline size (256 bytes where the device allows) are written inline,
 * so the sender needs no registration for them. Both ends derive the
 * number of parts from the length alone.
 *
 * Small messages (up to 4 KiB, GW_IB_EAGER) do not wait for the CTS: the
 * sender writes header (index, tag, length) and payload into the next of 4
 * eager slots that the receiver keeps for it, and the send completes at
 * once (a CTS for it that comes anyway is dropped). The receiver checks
 * the header against the receive with that index, as the sender checks a
 * CTS entry, before it copies a byte into the user's buffer (or fails with
 * GW_ERR_MISMATCH and aborts, which tells the sender), and frees the slot;
 * every CTS entry carries the count of freed slots back to the sender. This
 * halves the latency of a ping-pong (no CTS on the critical path); with no
 * slot free, a message simply waits for its CTS. Since most small messages
 * come eagerly, the receive of one that may (up to the smaller GW_IB_EAGER
 * of the two ranks, which they publish in their addresses) gives it up to
 * GW_IB_CTS_DEFER_US (200 us by default) before sending its CTS, unless it
 * is about to sleep or the sender needs freed slots reported: a CTS that
 * nobody uses costs both NICs and both CPUs as much as the message itself.
 *
 * Ordering is per peer, as the transport contract wants: receives get CTS
 * entries in posting order, sends consume them in posting order, so the
 * n-th send meets the n-th receive. At most 32 messages per direction and
 * peer are in flight (a receive whose slot is still in use waits), which
 * bounds the FIFOs, the work queues and the CQ.
 *
 * A receiver that matches by tag (collectives/msg/match.c) must see a
 * message before it posts a receive for it (the transport's peek), and a
 * message that waits for its CTS is unseen. So a send that asks for it
 * (GW_REQ_ANNOUNCE: the tagged calls) and cannot go eagerly first writes
 * its header alone into an eager slot (GW_IB_EAGER_ANNOUNCE); peek shows
 * the oldest slot's header, and the receive posted for it frees the slot
 * and sends its CTS without deferring it.
 *
 * The CTS entries and eager headers double as the read-ahead that the
 * contract asks for: an entry from p is p's statement of the collective it
 * is in, so progress() checks entries and headers nothing has claimed yet
 * against the current collective's tag (gw__tag_conflicts) and fails with
 * GW_ERR_MISMATCH when p is in another one.
 *
 * Progress is explicit (ib_post.c, ib_progress.c): progress() posts what
 * can be posted, polls the CQ in batches and, when there is nothing to do,
 * spins for GW_IB_SPIN_US and then sleeps on the completion channel, the
 * device's async event fd and the connection manager's fd (or the
 * out-of-band sockets), so a waiting rank costs no CPU and still wakes at
 * once.
 *
 * Connections (ib_cm.c, ib_oob.c): RC QPs set up through librdmacm by
 * default (needs an IP address on the port: RoCE, or IPoIB), or through an
 * out-of-band exchange of QP numbers, PSNs, LID/GID and MTU over TCP
 * (GW_IB_CM=oob) as NCCL does. Either way, the connection that set a pair up
 * stays open and is watched: a peer process that dies is reported by the
 * RDMA CM (DISCONNECTED) or by its socket (EOF), not only after the
 * transport's retries run out. By default (GW_CONNECT=lazy) connect() only
 * reads the addresses, and a pair is connected when its first request is
 * posted (ib_lazy.c).
 *
 * Failure (ib_fail.c, and the base every transport shares: base.h). The
 * first failure breaks the whole transport, as in the TCP transport: it is
 * logged once at ERROR naming the peer, every pending request completes
 * with it, every later call returns it. Failed
 * work completions name their status (ibv_wc_status_str) with a hint; a
 * peer's ABORT immediate carries its status, after an ABORT_FROM naming
 * the rank that first reported the failure and the rank blamed for it
 * (both taken over: gw__transport_peer_aborted); async events (port down,
 * device fatal, QP fatal) fail everything instead of leaving ranks waiting.
 *
 * Loading (ib_api.c): libibverbs and librdmacm are opened with dlopen when
 * the transport opens. Without them, or without an active port, open()
 * fails with one line saying why (INFO, so the selection falls back to TCP
 * quietly; ERROR when GW_TRANSPORT=ib asked for this transport, which the
 * selection tells us through params->forced).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "transport/ib/ib_internal.h"

static const gw__transport_class_t ib_class; /* at the end of the file */

#define VERBS_SONAME "libibverbs.so.1"
#define RDMACM_SONAME "librdmacm.so.1"

/* ---- open and close ------------------------------------------------------- */

static void ib_free(gw_ib_t *t)
{
    if (t->peers) {
        for (int r = 0; r < t->base.size; r++) {
            gw_ib_peer_t *p = &t->peers[r];
            for (int k = 0; k < t->nqps; k++)
                if (p->qp[k] && !p->cm_id[k])
                    t->api.destroy_qp(p->qp[k]);
            if (p->oob_fd >= 0)
                close(p->oob_fd);
        }
    }
    if (t->cm_mode == GW_IB_CM_RDMACM)
        gw__ib_cm_teardown(t); /* QPs and ids of rdmacm, before the memory they write into */
    for (int r = 0; t->peers && r < t->base.size; r++)
        if (t->peers[r].blk_mr) {
            t->api.dereg_mr(t->peers[r].blk_mr);
            free(t->peers[r].blk);
        }
    gw__ib_oob_free(t);
    gw__ib_mr_cache_fini(&t->mrc); /* also leaves the process's list of caches */
    if (t->fifo_mr)
        t->api.dereg_mr(t->fifo_mr);
    free(t->fifo_mem);
    if (t->cq) {
        if (t->cq_events_unacked)
            t->api.ack_cq_events(t->cq, t->cq_events_unacked);
        t->api.destroy_cq(t->cq);
    }
    if (t->channel)
        t->api.destroy_comp_channel(t->channel);
    if (t->pd)
        t->api.dealloc_pd(t->pd);
    if (t->cm_mode == GW_IB_CM_RDMACM) {
        if (t->listen_id)
            t->api.destroy_id(t->listen_id);
        if (t->cm_channel)
            t->api.destroy_event_channel(t->cm_channel);
    }
    if (t->ctx && t->own_ctx)
        t->api.close_device(t->ctx);
    if (t->listen_fd >= 0)
        close(t->listen_fd);
    /* libibverbs, librdmacm and the provider stay loaded: rdma-core does not
     * support unloading while anything else in the process (another
     * communicator, a framework's own verbs use) may hold a context, and
     * the mapping costs nothing. */
    free(t->peers);
    free(t->qpn_map);
    free(t->pfds);
    explicit_bzero(t->data_key, sizeof(t->data_key));
    free(t);
}

static gw_status_t choose_cm_mode(gw_ib_t *t)
{
    int roce = t->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
    int usable = t->api.rdmacm_lib && roce && t->gid_index >= 0;
    if (t->cfg.cm_mode == GW_IB_CM_OOB || (t->cfg.cm_mode == 0 && !usable)) {
        t->cm_mode = GW_IB_CM_OOB;
        if (t->cfg.cm_mode == 0)
            GW_INFO(t->base.log, GW_IB_SUBSYS, "connecting out of band over TCP: %s",
                    !t->api.rdmacm_lib ? t->api.rdmacm_why
                                       : "librdmacm needs an IP address on the port (RoCE)");
        return GW_OK;
    }
    if (!usable) {
        GW_ERROR(t->base.log, GW_IB_SUBSYS, "GW_IB_CM=rdmacm cannot be used: %s",
                 !t->api.rdmacm_lib ? t->api.rdmacm_why
                                    : "only RoCE ports (with an IP address in their GID) are "
                                      "supported with librdmacm; use GW_IB_CM=oob");
        return GW_ERR_CONFIG;
    }
    t->cm_mode = GW_IB_CM_RDMACM;
    return GW_OK;
}

static gw_status_t alloc_peers(gw_ib_t *t)
{
    t->peers = calloc((size_t)t->base.size, sizeof(*t->peers));
    if (!t->peers)
        return GW_ERR_NO_MEMORY;
    for (int r = 0; r < t->base.size; r++) {
        t->peers[r].rank = r;
        t->peers[r].oob_fd = -1;
        t->peers[r].knock_fd = -1;
        t->peers[r].r_cts_next = 1;
        t->peers[r].s_cts_next = 1;
        t->peers[r].abort_origin = -1;
        t->peers[r].abort_culprit = -1;
        snprintf(t->peers[r].desc, sizeof(t->peers[r].desc), "rank %d", r);
    }
    return GW_OK;
}

gw_status_t gw__ib_open_port(const gw_transport_params_t *params, const char *only,
                             gw_transport_t **out, uint8_t addr[GW_TRANSPORT_ADDR_MAX])
{
    if (!params || !out || !addr)
        return GW_ERR_INVALID_ARG;
    const gw_logger_t *lg = params->log;
    gw_transport_t *base = NULL;
    gw_status_t st = gw__transport_open_base(&ib_class, params, sizeof(gw_ib_t), &base);
    if (st != GW_OK)
        return st;
    gw_ib_t *t = gw__ib_of(base);
    t->listen_fd = -1;
    t->gid_index = -1;
    t->forced = params->forced;
    t->inline_req = GW_IB_INLINE;
    t->max_inline = -1;
    t->timeout_ms = params->timeout_ms > 0 ? params->timeout_ms : GW_IB_DEFAULT_TIMEOUT_MS;
    memcpy(t->job_id, params->job_id, sizeof(t->job_id));
    memcpy(t->data_key, params->data_key, sizeof(t->data_key));
    st = gw__ib_config_read(lg, &t->cfg);
    if (st != GW_OK)
        goto err_free;
    if (only) { /* one rail of several: exactly this port */
        t->cfg.hca = only;
        t->cfg.rails = 1;
    }
    t->nqps = t->cfg.qps;
    if ((st = alloc_peers(t)) != GW_OK) {
        GW_ERROR(lg, GW_IB_SUBSYS, "out of memory for %d peers", params->size);
        goto err_free;
    }
    char why[512];
    st = gw__ib_api_open(&t->api, VERBS_SONAME, RDMACM_SONAME, why, sizeof(why));
    if (st != GW_OK) {
        gw__ib_unavailable(t, st, "%s", why);
        goto err_free;
    }
    char gid_desc[256];
    if ((st = gw__ib_open_device(t, gid_desc, sizeof(gid_desc))) != GW_OK)
        goto err_free;
    if ((st = choose_cm_mode(t)) != GW_OK)
        goto err_free;
    t->lazy = params->lazy;
    char cm_desc[192] = "";
    if (t->cm_mode == GW_IB_CM_RDMACM)
        st = gw__ib_cm_listen(t, cm_desc, sizeof(cm_desc)); /* may switch t->ctx */
    if (st == GW_OK)
        st = gw__ib_setup_resources(t);
    if (st == GW_OK && t->cm_mode == GW_IB_CM_OOB)
        st = gw__ib_oob_listen(t, params, cm_desc, sizeof(cm_desc));
    if (st != GW_OK)
        goto err_free;

    gw_ib_addr_t *a = &t->local;
    a->cm_mode = (uint8_t)t->cm_mode;
    a->link_layer = t->port_attr.link_layer;
    a->port_num = (uint8_t)t->port_num;
    a->mtu = (uint8_t)t->port_attr.active_mtu;
    a->lid = t->port_attr.lid;
    a->nqps = (uint8_t)t->nqps;
    a->gid_index = t->gid_index >= 0 ? (uint8_t)t->gid_index : 255;
    memcpy(a->gid, t->gid.raw, 16);
    a->eager_max = (uint16_t)t->cfg.eager_max;
    a->lazy = (uint8_t)t->lazy;
    snprintf(a->device, sizeof(a->device), "%.*s", (int)sizeof(a->device) - 1, t->dev_name);
    gw__ib_addr_encode(a, addr);
    gw__sock_addr_str((const struct sockaddr *)&a->sa, t->local_str, sizeof(t->local_str));
    GW_INFO(lg, GW_IB_SUBSYS, "using %s:%d (%s, MTU %d, %s), %d QP%s per peer, connecting %s",
            t->dev_name, t->port_num,
            t->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
            128 << t->port_attr.active_mtu, gid_desc, t->nqps, t->nqps == 1 ? "" : "s", cm_desc);
    *out = &t->base;
    return GW_OK;

err_free:
    ib_free(t);
    return st;
}

/* ---- posting ---------------------------------------------------------------- */

/* Whether the message for receive r already waits in an eager slot: then
 * a peer that has closed since still delivers it (an announcement is not
 * the message). */
static int eager_waiting(const gw_ib_peer_t *p, const gw_request_t *r)
{
    for (uint64_t k = p->r_eager_freed; k < p->r_eager_in; k++) {
        const gw_ib_eager_hdr_t *h = &p->r_eager[k % GW_IB_EAGER_SLOTS];
        if (h->idx == GW_IB_REQ_IDX(r) && !(h->flags & GW_IB_EAGER_ANNOUNCE))
            return 1;
    }
    return 0;
}

/* peek (transport.h): the header in the oldest eager slot from peer, when
 * it is the next message (a message that comes through the CTS is there
 * only when announced, GW_REQ_ANNOUNCE) and no receive for peer is
 * posted. */
static int ib_peek(gw_transport_t *base, int peer, gw_msg_tag_t *tag, size_t *len)
{
    gw_ib_t *t = gw__ib_of(base);
    if (!t->peers || peer < 0 || peer >= t->base.size || peer == t->base.rank)
        return 0;
    const gw_ib_peer_t *p = &t->peers[peer];
    if (p->rq_head || p->r_eager_freed == p->r_eager_in)
        return 0;
    const gw_ib_eager_hdr_t *h = &p->r_eager[p->r_eager_freed % GW_IB_EAGER_SLOTS];
    if (h->idx != p->r_next + 1)
        return 0;
    *tag = (gw_msg_tag_t){.seq = h->seq, .sig = h->sig, .comm_id = h->comm_id};
    *len = (size_t)h->len;
    return 1;
}

/* A peer that another transport carries has no QPs here. */
static int peer_usable(const gw_transport_t *base, int peer)
{
    const gw_ib_t *t = gw__container_of(base, gw_ib_t, base);
    return !t->base.connected || t->peers[peer].active;
}

static gw_status_t ib_post(gw_transport_t *base, gw_request_t *req)
{
    gw_ib_t *t = gw__ib_of(base);
    gw_ib_peer_t *p = &t->peers[req->peer];
    GW_IB_REQ_NPARTS(req) = gw__ib_nparts(req->len, t->nqps);
    if (req->kind == GW_REQ_SEND) {
        GW_IB_REQ_IDX(req) = ++p->s_next;
        gw__req_queue_push(&p->sq_head, &p->sq_tail, req);
    } else {
        GW_IB_REQ_IDX(req) = ++p->r_next;
        gw__req_queue_push(&p->rq_head, &p->rq_tail, req);
    }
    if ((p->goodbye || p->gone) && !(req->kind == GW_REQ_RECV && eager_waiting(p, req)))
        return gw__transport_post_refused(base, req,
                                          p->goodbye ? "already closed its communicator"
                                                     : "lost its connection without saying "
                                                       "goodbye (it probably died)");
    return gw__ib_want_peer(t, p); /* a failure is sticky: the request fails with it */
}

static int all_zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

static gw_status_t ib_connect(gw_transport_t *base, const uint8_t *all_addrs)
{
    gw_status_t st = gw__transport_connect_check(base, all_addrs, 0);
    if (st != GW_OK)
        return st;
    gw_ib_t *t = gw__ib_of(base);
    int npeers = 0;
    for (int r = 0; r < t->base.size; r++) {
        gw_ib_peer_t *p = &t->peers[r];
        const uint8_t *blob = all_addrs + (size_t)r * GW_TRANSPORT_ADDR_MAX;
        if (r == t->base.rank || all_zero(blob, GW_TRANSPORT_ADDR_MAX))
            continue; /* another transport carries it (transport.h) */
        if (gw__ib_addr_decode(blob, &p->addr) != GW_OK) {
            GW_ERROR(t->base.log, GW_IB_SUBSYS,
                     "rank %d did not publish an RDMA address (does it use another transport? "
                     "set the same GW_TRANSPORT on every rank)",
                     r);
            return GW_ERR_PROTOCOL;
        }
        char sa[64];
        gw__sock_addr_str((const struct sockaddr *)&p->addr.sa, sa, sizeof(sa));
        snprintf(p->desc, sizeof(p->desc), "rank %d (%.48s, %.24s)", r, sa, p->addr.device);
        const char *bad = NULL;
        if (p->addr.cm_mode != t->cm_mode)
            bad = "connection mode (GW_IB_CM)";
        else if (p->addr.nqps != t->nqps)
            bad = "number of QPs per peer (GW_IB_QPS)";
        else if (p->addr.link_layer != t->port_attr.link_layer)
            bad = "link layer (InfiniBand vs RoCE)";
        else if ((p->addr.gid_index == 255) != (t->gid_index < 0))
            bad = "addressing (GID vs LID: GW_IB_GID_INDEX)";
        else if (p->addr.lazy != t->lazy)
            bad = "time to connect (on first use or at once: GW_CONNECT)";
        if (bad) {
            GW_ERROR(t->base.log, GW_IB_SUBSYS, "%s uses another %s than this rank", p->desc, bad);
            return GW_ERR_CONFIG;
        }
        p->active = 1;
        p->eager_limit =
            p->addr.eager_max < t->cfg.eager_max ? p->addr.eager_max : t->cfg.eager_max;
        npeers++;
    }
    st = t->cm_mode == GW_IB_CM_RDMACM ? gw__ib_cm_connect(t) : gw__ib_oob_connect(t);
    if (st != GW_OK)
        return st;
    if ((st = gw__ib_qpn_map_build(t)) != GW_OK)
        return st;
    if (t->max_inline < 0 && !t->lazy)
        t->max_inline = 0; /* no QP at all: every peer is another transport's */
    /* The fds a waiting progress() sleeps on: completions, async events,
     * and the connection watchers. */
    t->pfds = calloc((size_t)t->base.size + 4, sizeof(*t->pfds));
    if (!t->pfds)
        return GW_ERR_NO_MEMORY;
    t->base.connected = 1;
    GW_INFO(t->base.log, GW_IB_SUBSYS, "%s %d peer%s over %s:%d",
            t->lazy ? "connecting on first use to" : "connected to", npeers, npeers == 1 ? "" : "s",
            t->dev_name, t->port_num);
    return GW_OK;
}

/* ---- memory registration for callers -------------------------------------- */

static gw_status_t ib_mem_reg(gw_transport_t *base, void *buf, size_t len, void **handle)
{
    if (!base || !handle || (len > 0 && !buf))
        return GW_ERR_INVALID_ARG;
    gw_ib_t *t = gw__ib_of(base);
    gw_ib_mr_entry_t *e = NULL;
    int err = gw__ib_mr_cache_get(&t->mrc, buf, len, &e);
    if (err) {
        errno = err;
        GW_ERROR(t->base.log, GW_IB_SUBSYS, "registering %zu bytes at %p: %m", len, buf);
        return gw__ib_errno_status(err);
    }
    e->explicit_refs++;
    *handle = e;
    return GW_OK;
}

static gw_status_t ib_mem_dereg(gw_transport_t *base, void *handle)
{
    gw_ib_mr_entry_t *e = handle;
    if (!base || !e || e->explicit_refs <= 0)
        return GW_ERR_INVALID_ARG;
    gw_ib_t *t = gw__ib_of(base);
    /* The caller is about to free the memory: forget the range, so that a
     * later buffer at the same address gets a fresh registration. */
    e->explicit_refs--;
    uintptr_t start = e->start, end = e->end;
    gw__ib_mr_cache_put(&t->mrc, e);
    gw__ib_mr_cache_invalidate(&t->mrc, (void *)start, end - start);
    return GW_OK;
}

/* ---- shutdown ---------------------------------------------------------------- */

/* Send a control immediate to every connected peer and wait up to budget_ms
 * for their completions. Returns how many were acknowledged. */
/* Post the control message (kind, value) to every connected peer, after
 * (pre_kind, pre_value) when pre_kind is not 0, and wait up to budget_ms
 * for the sends to complete. Returns how many peers were told. */
static int tell_all(gw_ib_t *t, gw_ib_imm_kind_t pre_kind, uint64_t pre_value,
                    gw_ib_imm_kind_t kind, uint64_t value, int budget_ms)
{
    int sent = 0;
    for (int r = 0; r < t->base.size; r++) {
        gw_ib_peer_t *p = &t->peers[r];
        if (r == t->base.rank || p->qp_up < t->nqps || p->gone)
            continue;
        /* A receipt still due goes first: what we accepted before we
         * failed (or closed) completes on the sender. */
        if (p->rc_due > p->rc_sent && gw__ib_post_ctrl(t, p, GW_IB_IMM_RECEIPT, p->rc_due) == GW_OK)
            p->rc_sent = p->rc_due;
        /* Without room for the first, the second still tells the peer
         * the essential (the ABORT alone: it then blames us). */
        if (pre_kind)
            (void)gw__ib_post_ctrl(t, p, pre_kind, pre_value);
        if (gw__ib_post_ctrl(t, p, kind, value) == GW_OK)
            sent++;
    }
    int64_t deadline = gw__now_ms() + budget_ms;
    int pending = 0;
    do {
        int handled = 0;
        gw__ib_poll_cq(t, 64, &handled);
        pending = 0;
        for (int r = 0; r < t->base.size; r++)
            for (int k = 0; k < t->nqps && t->peers; k++)
                pending += r != t->base.rank ? t->peers[r].sq_used[k] : 0;
        if (pending && !handled)
            usleep(200);
    } while (pending && gw__now_ms() < deadline);
    return sent;
}

static gw_status_t ib_abort(gw_transport_t *base, const gw_abort_info_t *why)
{
    if (!base)
        return GW_ERR_INVALID_ARG;
    gw_ib_t *t = gw__ib_of(base);
    int was_ok = t->base.failed == GW_OK;
    gw_abort_info_t tell = gw__transport_abort_begin(base, why);
    int told =
        t->base.connected
            ? tell_all(t, GW_IB_IMM_ABORT_FROM, gw__ib_abort_from_encode(tell.origin, tell.culprit),
                       GW_IB_IMM_ABORT, (uint64_t)tell.status, GW_IB_SHUTDOWN_MS)
            : 0;
    GW_INFO(t->base.log, GW_IB_SUBSYS,
            "aborting (%s, blaming rank %d, first reported by rank %d): told %d of %d peers%s",
            gw_status_str(tell.status), tell.culprit, tell.origin, told, t->base.size - 1,
            was_ok ? "" : " (the transport had failed already)");
    return GW_OK;
}

static void ib_close(gw_transport_t *base)
{
    if (!base)
        return;
    gw_ib_t *t = gw__ib_of(base);
    if (t->base.connected && t->base.failed == GW_OK) {
        /* From here on a peer's disconnect is expected, not a failure. */
        int told = tell_all(t, 0, 0, GW_IB_IMM_GOODBYE, 0, GW_IB_SHUTDOWN_MS);
        GW_TRACE(t->base.log, GW_IB_SUBSYS, "closing: said goodbye to %d peers", told);
    }
    int up = 0, active = 0;
    for (int r = 0; t->peers && r < t->base.size; r++) {
        active += t->peers[r].active;
        up += t->peers[r].active && gw__ib_peer_up(t, &t->peers[r]);
    }
    GW_INFO(t->base.log, GW_IB_SUBSYS, "closing: %d of %d peers were connected (%d QPs)%s", up,
            active, up * t->nqps, t->lazy ? ", each on first use" : "");
    /* One line per communicator: whether repeated messages on the same
     * buffers found their registrations again is what decides the cost of
     * small and medium messages, and users tune GW_IB_REG_CACHE_MAX by it. */
    GW_INFO(t->base.log, GW_IB_SUBSYS,
            "registration cache: %llu hits, %llu misses, %llu registrations, %llu "
            "deregistrations, %llu evictions, %llu stale",
            (unsigned long long)t->mrc.hits, (unsigned long long)t->mrc.misses,
            (unsigned long long)t->mrc.regs, (unsigned long long)t->mrc.deregs,
            (unsigned long long)t->mrc.evictions, (unsigned long long)t->mrc.stale);
    /* Requests still queued are not completed: the caller is tearing down
     * and may have released them already. */
    ib_free(t);
}

const gw_transport_ops_t gw__ib_transport_ops = {
    .size = sizeof(gw_transport_ops_t),
    .open = gw__ib_rails_open,
    .connect = ib_connect,
    .isend = gw__transport_isend,
    .irecv = gw__transport_irecv,
    .progress = gw__transport_progress,
    .mem_reg = ib_mem_reg,
    .mem_dereg = ib_mem_dereg,
    .abort = ib_abort,
    .close = ib_close,
    .peek = ib_peek,
};

static const gw__transport_class_t ib_class = {
    .size = sizeof(gw__transport_class_t),
    .name = "ib",
    .subsys = GW_IB_SUBSYS,
    .ops = &gw__ib_transport_ops,
    .fail_pending = gw__ib_fail_pending,
    .describe_peer = gw__ib_describe_peer,
    .post = ib_post,
    .progress = gw__ib_progress,
    .peer_usable = peer_usable,
};
