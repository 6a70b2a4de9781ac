/*
 * ib_progress.c - the progress engine of the IB transport: completions,
 * waiting, and the progress() entry point.
 *
 * One call of progress() is: post what can be posted (ib_post.c), poll the
 * CQ, post again what the completions made possible (a CTS entry that
 * arrived lets a send go), check the CTS entries no send has claimed
 * against the current collective. A completion is either one of our work
 * requests done (a payload part: the send may complete) or an immediate
 * from the peer, whose kind says what landed: a CTS entry, a payload part,
 * an eager message, or the peer's refusal, abort or goodbye.
 *
 * When nothing moved and the caller allows waiting, progress() first
 * polls the CQ in a loop for GW_IB_SPIN_US (completions usually come within
 * microseconds on real hardware, and sleeping costs a wake-up), then arms
 * the CQ and sleeps in poll() on the completion channel, the device's async
 * event fd and the connection watchers (RDMA CM channel, or the out-of-band
 * sockets), so that a peer's death or a port going down wakes it as surely
 * as a completion does.
 */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "transport/ib/ib_internal.h"

/* ---- completions ---------------------------------------------------------------- */

/* The peer took n of our eager messages out of its slots (its eager
 * headers and its FREED immediates say so). */
static gw_status_t take_freed(gw_ib_t *t, gw_ib_peer_t *p, uint64_t n)
{
    if (n > p->eager_sent)
        return gw__ib_peer_fail(
            t, p, GW_ERR_PROTOCOL,
            "reported %llu of our eager messages freed, but only %llu were sent",
            (unsigned long long)n, (unsigned long long)p->eager_sent);
    if (n > p->eager_freed)
        p->eager_freed = n;
    return GW_OK;
}

static gw_request_t *find_recv(gw_ib_peer_t *p, uint32_t value)
{
    for (gw_request_t *r = p->rq_head; r; r = r->next)
        if (GW_IB_REQ_STARTED(r) && gw__ib_imm_names(value, GW_IB_REQ_IDX(r)))
            return r;
    return NULL;
}

static gw_status_t on_cts(gw_ib_t *t, gw_ib_peer_t *p, uint32_t value)
{
    int fslot = (int)(value % GW_IB_FIFO_DEPTH);
    gw_ib_cts_t c;
    int torn = gw__ib_cts_decode(gw__ib_fifo_slot(p, fslot), &c) != 0;
    if (torn || !gw__ib_imm_names(value, p->s_cts_seen) || c.idx < p->s_cts_next ||
        c.eager_freed > p->eager_sent)
        return gw__ib_peer_fail(t, p, GW_ERR_PROTOCOL,
                                "wrote a CTS entry that is torn or out of order (entry %u, "
                                "expected %llu; message %llu, expected %llu or later; %llu eager "
                                "messages freed of %llu sent)",
                                (unsigned)value, (unsigned long long)p->s_cts_seen,
                                (unsigned long long)c.idx, (unsigned long long)p->s_cts_next,
                                (unsigned long long)c.eager_freed,
                                (unsigned long long)p->eager_sent);
    p->s_cts_seen++;
    int slot = (int)(c.idx % GW_IB_FIFO_DEPTH);
    GW_TRACE(t->base.log, GW_IB_SUBSYS, "CTS %llu (len %llu) from %s, %llu eager freed",
             (unsigned long long)c.idx, (unsigned long long)c.len, p->desc,
             (unsigned long long)c.eager_freed);
    /* Receives satisfied by eager messages get no CTS: indexes may skip. */
    p->s_cts_next = c.idx + 1;
    if (c.eager_freed > p->eager_freed)
        p->eager_freed = c.eager_freed;
    if (p->eager_idx[slot] == c.idx)
        return GW_OK; /* that message went eagerly before its CTS came */
    if (p->cts_have[slot])
        return gw__ib_peer_fail(t, p, GW_ERR_PROTOCOL,
                                "overran its CTS FIFO (slot %d still holds message %llu)", slot,
                                (unsigned long long)p->cts[slot].idx);
    p->cts[slot] = c;
    p->cts_have[slot] = 1;
    return GW_OK;
}

static gw_status_t on_recv(gw_ib_t *t, gw_ib_peer_t *p, const struct ibv_wc *wc)
{
    if (!(wc->wc_flags & IBV_WC_WITH_IMM))
        return gw__ib_peer_fail(t, p, GW_ERR_PROTOCOL, "sent a message without immediate data");
    gw_ib_imm_kind_t kind;
    uint32_t value;
    gw__ib_imm_decode(be32toh(wc->imm_data), &kind, &value);
    gw_request_t *r;
    gw_status_t st;
    int did = 0;
    switch (kind) {
    case GW_IB_IMM_CTS:
        return on_cts(t, p, value);
    case GW_IB_IMM_DATA:
        r = find_recv(p, value);
        if (!r)
            return gw__ib_peer_fail(t, p, GW_ERR_PROTOCOL,
                                    "wrote data for message %u, which has no CTS outstanding",
                                    (unsigned)value);
        /* The payload needed the CTS: the sender has taken it out. */
        if (GW_IB_REQ_STARTED(r) > p->r_cts_acked)
            p->r_cts_acked = GW_IB_REQ_STARTED(r);
        gw__ib_part_done(t, p, r);
        return GW_OK;
    case GW_IB_IMM_EAGER: {
        int s = (int)(p->r_eager_in % GW_IB_EAGER_SLOTS);
        gw_ib_eager_hdr_t *h = &p->r_eager[s];
        gw__ib_eager_hdr_decode(gw__ib_eager_slot(p, s), h);
        if (p->r_eager_in - p->r_eager_freed >= GW_IB_EAGER_SLOTS ||
            !gw__ib_imm_names(value, h->idx) ||
            (h->len > GW_IB_EAGER_MAX && !(h->flags & GW_IB_EAGER_ANNOUNCE)) ||
            (h->flags & ~(GW_IB_EAGER_RECEIPT | GW_IB_EAGER_ANNOUNCE)) ||
            h->flags == (GW_IB_EAGER_RECEIPT | GW_IB_EAGER_ANNOUNCE))
            return gw__ib_peer_fail(t, p, GW_ERR_PROTOCOL,
                                    "wrote an eager message that overruns its slots or is "
                                    "malformed (index %llu, immediate %u, len %llu)",
                                    (unsigned long long)h->idx, (unsigned)value,
                                    (unsigned long long)h->len);
        if (h->cts_seen > p->r_cts_sent)
            return gw__ib_peer_fail(
                t, p, GW_ERR_PROTOCOL, "acknowledged %llu CTS entries, but only %llu were sent",
                (unsigned long long)h->cts_seen, (unsigned long long)p->r_cts_sent);
        if ((st = take_freed(t, p, h->eager_freed)) != GW_OK)
            return st;
        if (h->cts_seen > p->r_cts_acked)
            p->r_cts_acked = h->cts_seen;
        p->r_eager_in++;
        GW_TRACE(t->base.log, GW_IB_SUBSYS, "eager %llu (len %llu) from %s",
                 (unsigned long long)h->idx, (unsigned long long)h->len, p->desc);
        return gw__ib_match_eager(t, p, &did);
    }
    case GW_IB_IMM_MISMATCH:
        r = find_recv(p, value);
        return gw__ib_peer_fail(
            t, p, GW_ERR_MISMATCH,
            "refused to send into the receive posted for it (seq %llu, sig 0x%08x, len %zu): its "
            "message has another tag or length",
            r ? (unsigned long long)r->tag.seq : 0ULL, r ? (unsigned)r->tag.sig : 0u,
            r ? r->len : (size_t)0);
    case GW_IB_IMM_ABORT_FROM:
        gw__ib_abort_from_decode(value, &p->abort_origin, &p->abort_culprit);
        return GW_OK;
    case GW_IB_IMM_RECEIPT:
        return gw__ib_take_receipt(t, p, value);
    case GW_IB_IMM_FREED:
        return take_freed(t, p, gw__ib_imm_widen(value, p->eager_sent));
    case GW_IB_IMM_ABORT: {
        gw_abort_info_t got = {.status = gw__ib_abort_status(value),
                               .origin = gw__transport_abort_rank(p->abort_origin, t->base.size),
                               .culprit = gw__transport_abort_rank(p->abort_culprit, t->base.size)};
        return gw__transport_peer_aborted(&t->base, p->rank, &got);
    }
    case GW_IB_IMM_GOODBYE:
        GW_TRACE(t->base.log, GW_IB_SUBSYS, "%s said goodbye", p->desc);
        p->goodbye = 1;
        /* Receives of eager messages already here can still complete. */
        if ((st = gw__ib_match_eager(t, p, &did)) != GW_OK)
            return st;
        if (p->sq_head || p->rq_head)
            return gw__ib_peer_fail(t, p, GW_ERR_REMOTE,
                                    "closed its communicator while %s were pending with it",
                                    p->sq_head ? "sends" : "receives");
        return GW_OK;
    default:
        return gw__ib_peer_fail(t, p, GW_ERR_PROTOCOL, "sent an immediate of unknown kind %d",
                                (int)kind);
    }
}

static gw_status_t on_send_done(gw_ib_t *t, gw_ib_peer_t *p, const struct ibv_wc *wc)
{
    if (wc->wr_id == GW_IB_WR_CTS || wc->wr_id == GW_IB_WR_CTRL || wc->wr_id == GW_IB_WR_EAGER ||
        wc->wr_id == GW_IB_WR_PROOF_SEND || t->base.failed != GW_OK)
        return GW_OK; /* after a failure, requests are no longer ours to touch */
    gw__ib_part_done(t, p, (gw_request_t *)(uintptr_t)wc->wr_id);
    return GW_OK;
}

static gw_status_t handle_wc(gw_ib_t *t, const struct ibv_wc *wc)
{
    /* rdmacm: the dialler's proof of the key, on a QP not yet admitted. */
    if (wc->wr_id == GW_IB_WR_PROOF_RECV)
        return gw__ib_cm_on_proof(t, wc);
    const gw_ib_qpn_map_t *m = gw__ib_qpn_find(t, wc->qp_num);
    if (!m && gw__ib_cm_stray(t, wc->qp_num))
        return GW_OK; /* a connection that never proved the key: nothing it says counts */
    if (!m)
        return t->base.failed != GW_OK
                   ? GW_OK
                   : gw__ib_fail(t, GW_ERR_PROTOCOL, "completion on unknown QP 0x%x", wc->qp_num);
    gw_ib_peer_t *p = &t->peers[m->peer];
    int is_recv = wc->wr_id == GW_IB_WR_RECV;
    if (!is_recv && p->sq_used[m->qp] > 0)
        p->sq_used[m->qp]--;
    if (wc->status != IBV_WC_SUCCESS) {
        if (t->base.failed != GW_OK)
            return t->base.failed; /* flushed or failing for a reason already reported */
        return gw__ib_wc_fail(t, wc);
    }
    if (!is_recv)
        return on_send_done(t, p, wc);
    if (t->base.failed == GW_OK) {
        gw_status_t st = gw__ib_qp_post_recvs(t, p, m->qp, 1);
        if (st != GW_OK)
            return st;
    }
    return on_recv(t, p, wc);
}

gw_status_t gw__ib_poll_cq(gw_ib_t *t, int budget, int *handled)
{
    struct ibv_wc wcs[GW_IB_POLL_BATCH];
    *handled = 0;
    gw_status_t st = GW_OK;
    while (*handled < budget) {
        int n = ibv_poll_cq(t->cq, GW_IB_POLL_BATCH, wcs);
        if (n < 0)
            return gw__ib_fail(t, GW_ERR_SYSTEM, "ibv_poll_cq failed (%d)", n);
        for (int i = 0; i < n; i++) {
            gw_status_t s = handle_wc(t, &wcs[i]);
            if (s != GW_OK && st == GW_OK)
                st = s; /* keep draining: later completions still free queue slots */
        }
        *handled += n;
        if (n < GW_IB_POLL_BATCH)
            break;
    }
    return st != GW_OK ? st : t->base.failed;
}

/* ---- waiting -------------------------------------------------------------------- */

static void drain_cq_events(gw_ib_t *t)
{
    struct ibv_cq *cq;
    void *ctx;
    while (t->api.get_cq_event(t->channel, &cq, &ctx) == 0) {
        t->cq_events_unacked++;
        t->cq_armed = 0;
    }
    if (t->cq_events_unacked >= 64) {
        t->api.ack_cq_events(t->cq, t->cq_events_unacked);
        t->cq_events_unacked = 0;
    }
}

/* The out-of-band sockets carry nothing after connect(): readable means
 * closed (or reset), i.e. the peer's process is gone. */
static gw_status_t check_oob(gw_ib_t *t, gw_ib_peer_t *p)
{
    char c;
    ssize_t n = recv(p->oob_fd, &c, 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return GW_OK;
    if (n > 0)
        return gw__ib_peer_fail(t, p, GW_ERR_PROTOCOL, "sent data on its out-of-band socket");
    return gw__ib_peer_gone(
        t, p, n == 0 ? "closed its out-of-band socket" : "reset its out-of-band socket");
}

/* The fds a blocking wait watches, into pfds (room for 4 + size):
 * returns how many. */
static int fill_fds(gw_ib_t *t, struct pollfd *pfds)
{
    int n = 0;
    pfds[n++] = (struct pollfd){.fd = t->channel->fd, .events = POLLIN};
    pfds[n++] = (struct pollfd){.fd = t->ctx->async_fd, .events = POLLIN};
    pfds[n++] = (struct pollfd){.fd = t->cm_channel ? t->cm_channel->fd : -1, .events = POLLIN};
    /* Out of band and lazily, higher ranks dial (and knock) whenever they
     * need us. */
    pfds[n++] = (struct pollfd){.fd = t->oob ? t->listen_fd : -1, .events = POLLIN};
    for (int r = 0; r < t->base.size; r++)
        if (t->peers[r].oob_fd >= 0)
            pfds[n++] = (struct pollfd){.fd = t->peers[r].oob_fd, .events = POLLIN};
    return n;
}

/* Handle what poll() reported on the n fds fill_fds gave. */
static gw_status_t handle_fds(gw_ib_t *t, const struct pollfd *pfds, int n)
{
    if (pfds[0].revents)
        drain_cq_events(t);
    gw_status_t st = GW_OK;
    if (pfds[1].revents)
        st = gw__ib_async_events(t);
    if (st == GW_OK && pfds[2].revents) {
        int handled;
        gw__ib_poll_cq(t, 1 << 20, &handled); /* a goodbye may precede the disconnect */
        st = gw__ib_cm_poll_events(t);
    }
    if (st == GW_OK && pfds[3].revents)
        st = gw__ib_lazy_progress(t);
    for (int i = 4; st == GW_OK && i < n; i++) {
        if (!pfds[i].revents)
            continue;
        for (int r = 0; r < t->base.size; r++) {
            if (t->peers[r].oob_fd != pfds[i].fd)
                continue;
            int handled;
            gw__ib_poll_cq(t, 1 << 20, &handled);
            st = check_oob(t, &t->peers[r]);
            break;
        }
    }
    return st != GW_OK ? st : t->base.failed;
}

/* poll() the watched fds for up to timeout_ms and handle what they report. */
static gw_status_t wait_fds(gw_ib_t *t, int timeout_ms)
{
    int n = fill_fds(t, t->pfds);
    int rc = poll(t->pfds, (nfds_t)n, timeout_ms);
    if (rc < 0 && errno != EINTR)
        return gw__ib_fail(t, GW_ERR_SYSTEM, "poll() on the completion channel: %m");
    if (rc <= 0)
        return GW_OK;
    return handle_fds(t, t->pfds, n);
}

static gw_status_t check_conflicts(gw_ib_t *t, const gw_msg_tag_t *current)
{
    for (int i = 0; i < t->base.size; i++) {
        gw_ib_peer_t *p = &t->peers[i];
        if (i == t->base.rank)
            continue;
        gw_status_t st = GW_OK;
        for (uint64_t k = p->r_eager_freed; st == GW_OK && k < p->r_eager_in; k++) {
            const gw_ib_eager_hdr_t *h = &p->r_eager[k % GW_IB_EAGER_SLOTS];
            gw_msg_tag_t pending = {.seq = h->seq, .sig = h->sig, .comm_id = h->comm_id};
            st = gw__transport_check_pending(&t->base, p->rank, "sent a message", &pending, h->len,
                                             current);
        }
        for (int s = 0; st == GW_OK && s < GW_IB_FIFO_DEPTH; s++) {
            if (!p->cts_have[s])
                continue;
            gw_msg_tag_t pending = {
                .seq = p->cts[s].seq, .sig = p->cts[s].sig, .comm_id = p->cts[s].comm_id};
            st = gw__transport_check_pending(&t->base, p->rank, "waits for a message", &pending,
                                             p->cts[s].len, current);
        }
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

/* Post, poll, post again. *moved: something was posted or completed. */
static gw_status_t round_trip(gw_ib_t *t, int *moved)
{
    int did = 0, handled = 0;
    gw_status_t st = gw__ib_post_all(t, &did);
    if (st == GW_OK)
        st = gw__ib_poll_cq(t, 4 * GW_IB_POLL_BATCH, &handled);
    if (st == GW_OK && handled)
        st = gw__ib_post_all(t, &did);
    *moved = did || handled;
    return st;
}

/* Arm the CQ and make a last round before sleeping: a completion that
 * came before the CQ was armed raises no event, and a CTS that waited for
 * an eager message goes now. */
static gw_status_t before_sleep(gw_ib_t *t, int *moved)
{
    if (!t->cq_armed) {
        if (ibv_req_notify_cq(t->cq, 0) != 0)
            return gw__ib_fail(t, GW_ERR_SYSTEM, "ibv_req_notify_cq failed");
        t->cq_armed = 1;
    }
    t->no_defer = 1;
    gw_status_t st = round_trip(t, moved);
    t->no_defer = 0;
    return st;
}

/* How long a wait may sleep while pairs connect on first use. */
static int lazy_wait(gw_ib_t *t, int wait_ms)
{
    int wake = gw__ib_lazy_wake_ms(t);
    return wait_ms > wake ? (wake > 0 ? wake : 1) : wait_ms;
}

gw_status_t gw__ib_progress(gw_transport_t *base, const gw_msg_tag_t *current, int wait_ms)
{
    gw_ib_t *t = gw__ib_of(base);
    int moved = 0;
    if (t->cfg.test_qp_error)
        gw__ib_test_qp_error(t);
    /* Pairs connecting on first use move in every call, and while they
     * do, a waiting call sleeps only until their next step is due. */
    int connecting = gw__ib_lazy_busy(t);
    if (connecting) {
        gw_status_t cst = gw__ib_lazy_progress(t);
        if (cst != GW_OK)
            return cst;
        wait_ms = lazy_wait(t, wait_ms);
    }
    gw_status_t st = round_trip(t, &moved);
    if (st == GW_OK && current)
        st = check_conflicts(t, current);
    if (st != GW_OK || moved)
        return st;
    /* Even a caller that never waits must learn about dead peers and
     * fatal events now and then. */
    if ((++t->progress_calls & 255) == 0 && (st = wait_fds(t, 0)) != GW_OK)
        return st;
    if (wait_ms <= 0)
        return GW_OK;
    /* The clock is read once per 16 rounds: where it is an emulated timer
     * (a VM whose clocksource is the HPET, as under QEMU without KVM) one
     * read costs more than a round, and polling faster is the point. */
    int64_t spin_end = gw__now_ns() + (int64_t)t->cfg.spin_us * 1000;
    for (unsigned spins = 0; t->cfg.spin_us > 0; spins++) {
        if ((spins & 15) == 15 && gw__now_ns() >= spin_end)
            break;
        if ((st = round_trip(t, &moved)) != GW_OK || moved)
            goto out;
    }
    if ((st = before_sleep(t, &moved)) != GW_OK || moved)
        goto out;
    if ((st = wait_fds(t, wait_ms)) != GW_OK)
        return st;
    if (connecting && (st = gw__ib_lazy_progress(t)) != GW_OK)
        return st;
    st = round_trip(t, &moved);
out:
    if (st == GW_OK && current)
        st = check_conflicts(t, current);
    return st;
}

gw_status_t gw__ib_wait_many(gw_ib_t *const *ts, int n, int wait_ms, struct pollfd *pfds)
{
    int nfds[GW_IB_MAX_RAILS], total = 0;
    for (int i = 0; i < n; i++) {
        gw_ib_t *t = ts[i];
        if (t->base.failed != GW_OK)
            return t->base.failed;
        if (gw__ib_lazy_busy(t))
            wait_ms = lazy_wait(t, wait_ms);
        int moved = 0;
        gw_status_t st = before_sleep(t, &moved);
        if (st != GW_OK || moved)
            return st;
        nfds[i] = fill_fds(t, pfds + total);
        total += nfds[i];
    }
    int rc = poll(pfds, (nfds_t)total, wait_ms);
    if (rc < 0 && errno != EINTR)
        return gw__ib_fail(ts[0], GW_ERR_SYSTEM, "poll() on the completion channels: %m");
    for (int i = 0, at = 0; rc > 0 && i < n; at += nfds[i++]) {
        gw_status_t st = handle_fds(ts[i], pfds + at, nfds[i]);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}
