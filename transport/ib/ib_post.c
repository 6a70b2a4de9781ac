/*
 * ib_post.c - the posting half of the IB transport's progress engine: what
 * a progress() round puts on the wire (ib_progress.c polls and waits).
 *
 * Posting follows the per-peer order of the transport contract:
 *   - receives, oldest first: register the buffer and write its CTS entry
 *     into the peer's FIFO, as long as fewer than GW_IB_FIFO_DEPTH receives
 *     from that peer are outstanding (the slot of receive n + depth is free
 *     only once receive n completed); the last receive queued for a peer,
 *     when its message may come eagerly, first waits a little for it (see
 *     defer_cts);
 *   - sends, oldest first: once the CTS entry with the send's index has
 *     arrived, compare tag and length; refuse with a MISMATCH immediate, or
 *     write the payload, one part per QP, each part ending with a DATA
 *     immediate. A small send whose CTS is not there yet goes eagerly into
 *     a free eager slot of the receiver instead (see ib.c), where the
 *     receiver checks it against its receive before copying it out
 *     (gw__ib_match_eager). An eager send that asks for a receipt
 *     (GW_REQ_RECEIPT: the public point-to-point calls) stays queued,
 *     marked GW_IB_SEND_EAGER_WAIT, until the receiver's RECEIPT immediate
 *     says it accepted it (a send through the CTS needs none: it matched
 *     the receiver's own entry);
 *   - receipts: a RECEIPT immediate naming the last such eager message
 *     accepted, cumulative, as soon as the send queue has room.
 * Work requests are always signalled, and each QP's send queue is accounted
 * for in software, so a queue is never overrun: a part that finds it full
 * waits for the next round.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "common/clock.h"
#include "transport/ib/ib_internal.h"

void gw__ib_req_release(gw_ib_t *t, gw_request_t *r)
{
    gw_ib_mr_entry_t *e = (gw_ib_mr_entry_t *)(uintptr_t)GW_IB_REQ_MR(r);
    if (e)
        gw__ib_mr_cache_put(&t->mrc, e);
    GW_IB_REQ_MR(r) = 0;
}

static void finish(gw_ib_t *t, gw_ib_peer_t *p, gw_request_t *r)
{
    if (r->kind == GW_REQ_SEND)
        gw__req_queue_remove(&p->sq_head, &p->sq_tail, r);
    else
        gw__req_queue_remove(&p->rq_head, &p->rq_tail, r);
    gw__ib_req_release(t, r);
    r->bytes_done = r->len;
    t->ncompleted++;
    gw__req_complete(r, GW_OK);
}

/* Progress is counted in parts: a striped message reports its bytes as the
 * share of its parts that completed. */
void gw__ib_part_done(gw_ib_t *t, gw_ib_peer_t *p, gw_request_t *r)
{
    GW_IB_REQ_PARTS_DONE(r)++;
    r->bytes_done =
        (size_t)((double)r->len * (double)GW_IB_REQ_PARTS_DONE(r) / (double)GW_IB_REQ_NPARTS(r));
    if (GW_IB_REQ_PARTS_DONE(r) == GW_IB_REQ_NPARTS(r))
        finish(t, p, r);
}

/* The registration covering r's buffer (none for empty messages). */
static gw_status_t reg_buffer(gw_ib_t *t, gw_ib_peer_t *p, gw_request_t *r)
{
    if (r->len == 0 || GW_IB_REQ_MR(r))
        return GW_OK;
    gw_ib_mr_entry_t *e = NULL;
    int err = gw__ib_mr_cache_get(&t->mrc, r->buf, r->len, &e);
    if (err) {
        errno = err;
        return gw__ib_fail(t, gw__ib_errno_status(err),
                           "registering the %zu-byte buffer at %p of a %s %s %s: %m%s", r->len,
                           r->buf, r->kind == GW_REQ_SEND ? "send" : "receive",
                           r->kind == GW_REQ_SEND ? "to" : "from", p->desc,
                           err == ENOMEM || err == EAGAIN
                               ? " (is the locked-memory limit, ulimit -l, too low?)"
                               : "");
    }
    GW_IB_REQ_MR(r) = (uint64_t)(uintptr_t)e;
    return GW_OK;
}

/* Write `bytes` from our registered staging area into the peer's FIFO
 * region at remote_addr on QP 0, signalled and with immediate imm (host
 * order), inline when the QPs allow that much. 0 or the verbs error. CTS
 * entries and eager messages both travel this way. */
static int post_stage_write(gw_ib_t *t, gw_ib_peer_t *p, uint64_t wr_id, uint8_t *stage,
                            uint32_t bytes, uint32_t imm, uint64_t remote_addr)
{
    struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)stage, .length = bytes, .lkey = p->blk_lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED | ((long)bytes <= t->max_inline ? IBV_SEND_INLINE : 0);
    wr.imm_data = htobe32(imm);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = p->rblk_rkey;
    return ibv_post_send(p->qp[0], &wr, &bad);
}

/* ---- receives: clear-to-send -------------------------------------------- */

static gw_status_t post_cts(gw_ib_t *t, gw_ib_peer_t *p, gw_request_t *r)
{
    gw_status_t st = reg_buffer(t, p, r);
    if (st != GW_OK)
        return st;
    const gw_ib_mr_entry_t *e = (const gw_ib_mr_entry_t *)(uintptr_t)GW_IB_REQ_MR(r);
    uint64_t idx = GW_IB_REQ_IDX(r), num = p->r_cts_sent;
    int slot = (int)(num % GW_IB_FIFO_DEPTH);
    gw_ib_cts_t c = {.addr = (uint64_t)(uintptr_t)r->buf,
                     .len = r->len,
                     .seq = r->tag.seq,
                     .idx = idx,
                     .rkey = e ? e->rkey : 0,
                     .sig = r->tag.sig,
                     .eager_freed = p->r_eager_freed,
                     .comm_id = r->tag.comm_id};
    uint8_t *stage = gw__ib_stage_slot(p, slot);
    gw__ib_cts_encode(&c, stage);
    int rc =
        post_stage_write(t, p, GW_IB_WR_CTS, stage, GW_IB_CTS_SIZE,
                         gw__ib_imm_encode(GW_IB_IMM_CTS, num), gw__ib_remote_fifo_slot(p, slot));
    if (rc != 0) {
        errno = rc;
        return gw__ib_peer_fail(t, p, GW_ERR_SYSTEM,
                                "posting the CTS of message %llu on QP 0x%x: %m",
                                (unsigned long long)idx, p->qp[0]->qp_num);
    }
    p->sq_used[0]++;
    p->r_eager_reported = c.eager_freed;
    GW_IB_REQ_STARTED(r) = num + 1;
    p->r_cts_sent = num + 1;
    p->r_cts_next = idx + 1;
    GW_TRACE(t->base.log, GW_IB_SUBSYS, "CTS %llu (len %zu, seq %llu) to %s",
             (unsigned long long)idx, r->len, (unsigned long long)r->tag.seq, p->desc);
    return GW_OK;
}

/* Hand eager messages waiting in their slots to their receives, oldest
 * first: check tag and length, copy the payload, free the slot (the next
 * CTS entry tells the sender). Stops at a message whose receive is not
 * posted yet. An announcement (GW_IB_EAGER_ANNOUNCE) is checked the same
 * way and freed, and its receive goes on to send its CTS at once: the
 * message comes through it. */
gw_status_t gw__ib_match_eager(gw_ib_t *t, gw_ib_peer_t *p, int *did)
{
    while (p->r_eager_freed < p->r_eager_in) {
        int s = (int)(p->r_eager_freed % GW_IB_EAGER_SLOTS);
        const gw_ib_eager_hdr_t *h = &p->r_eager[s];
        gw_request_t *r = p->rq_head;
        while (r && GW_IB_REQ_IDX(r) != h->idx)
            r = r->next;
        if (!r)
            return GW_OK;
        gw_msg_tag_t got = {.seq = h->seq, .sig = h->sig, .comm_id = h->comm_id};
        gw_status_t st = gw__transport_check_match(&t->base, r, &got, h->len);
        if (st != GW_OK)
            return st;
        p->r_eager_freed++;
        *did = 1;
        if (h->flags & GW_IB_EAGER_ANNOUNCE) {
            GW_IB_REQ_DEFER(r) = 1; /* long past: its CTS goes in this round */
            continue;
        }
        if (h->flags & GW_IB_EAGER_RECEIPT)
            p->rc_due = h->idx; /* accepted: the sender waits for our word */
        if (r->len > 0)
            memcpy(r->buf, gw__ib_eager_slot(p, s) + GW_IB_EAGER_HDR, r->len);
        /* No CTS goes out for it any more (one sent already is dropped). */
        if (GW_IB_REQ_IDX(r) >= p->r_cts_next)
            p->r_cts_next = GW_IB_REQ_IDX(r) + 1;
        finish(t, p, r);
    }
    return GW_OK;
}

/* Whether receive r, next in line for a CTS, should give its message a
 * moment to come eagerly first. A small message usually does (the sender
 * sends eagerly whenever it has a free slot), and then a CTS would only
 * have cost both ends a work request and a completion each: half of the
 * verbs work of a small message. So the CTS waits GW_IB_CTS_DEFER_US, or
 * until this rank is about to sleep, whichever comes first; never when
 * other receives queue behind r (their CTS entries go in order), and never
 * while the sender may be short of eager slots (half or more of them freed
 * and not reported yet: CTS entries report them, and so do our own eager
 * messages to that rank, which in request-reply traffic go anyway). A CTS
 * that is needed after all (the sender's slots are full, or its message is
 * larger: a length mismatch that the CTS lets the sender detect) is only
 * that much late. */
static int defer_cts(const gw_ib_t *t, const gw_ib_peer_t *p, gw_request_t *r)
{
    if (t->no_defer || t->cfg.cts_defer_us == 0 || r->next || p->eager_limit <= 0 ||
        r->len > (size_t)p->eager_limit ||
        p->r_eager_freed - p->r_eager_reported >= GW_IB_EAGER_SLOTS / 2)
        return 0;
    int64_t now = gw__now_ns();
    if (!GW_IB_REQ_DEFER(r))
        GW_IB_REQ_DEFER(r) = (uint64_t)(now + (int64_t)t->cfg.cts_defer_us * 1000);
    return now < (int64_t)GW_IB_REQ_DEFER(r);
}

static gw_status_t post_receives(gw_ib_t *t, gw_ib_peer_t *p, int *did)
{
    gw_status_t st = gw__ib_match_eager(t, p, did);
    if (st != GW_OK || !p->rq_head)
        return st;
    /* A FIFO slot is free again once the sender has taken its entry out,
     * which it says in its eager headers, and shows by writing a payload
     * (that needed the entry). */
    for (gw_request_t *r = p->rq_head; r; r = r->next) {
        if (GW_IB_REQ_STARTED(r))
            continue;
        if (GW_IB_REQ_IDX(r) != p->r_cts_next ||
            p->r_cts_sent - p->r_cts_acked >= GW_IB_FIFO_DEPTH || p->sq_used[0] >= GW_IB_WQ_DEPTH ||
            defer_cts(t, p, r))
            return GW_OK;
        if ((st = post_cts(t, p, r)) != GW_OK)
            return st;
        *did = 1;
    }
    return GW_OK;
}

/* ---- sends: payload --------------------------------------------------------- */

static gw_status_t post_parts(gw_ib_t *t, gw_ib_peer_t *p, gw_request_t *r, int *did)
{
    const gw_ib_mr_entry_t *e = (const gw_ib_mr_entry_t *)(uintptr_t)GW_IB_REQ_MR(r);
    uint64_t nparts = GW_IB_REQ_NPARTS(r);
    int inl = r->len > 0 && r->len <= (size_t)t->max_inline;
    while (GW_IB_REQ_POSTED(r) < nparts) {
        uint64_t k = GW_IB_REQ_POSTED(r);
        int q = (int)(k % (uint64_t)t->nqps);
        if (p->sq_used[q] >= GW_IB_WQ_DEPTH)
            return GW_OK;
        size_t off, plen;
        gw__ib_part_range(r->len, (size_t)nparts, (size_t)k, &off, &plen);
        struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)((uint8_t *)r->buf + off),
                              .length = (uint32_t)plen,
                              .lkey = e ? e->lkey : 0};
        struct ibv_send_wr wr, *bad = NULL;
        memset(&wr, 0, sizeof(wr));
        wr.wr_id = (uint64_t)(uintptr_t)r;
        wr.send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0);
        wr.imm_data = htobe32(gw__ib_imm_encode(GW_IB_IMM_DATA, GW_IB_REQ_IDX(r)));
        if (r->len == 0) {
            wr.opcode = IBV_WR_SEND_WITH_IMM;
            wr.num_sge = 0;
        } else {
            wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.wr.rdma.remote_addr = GW_IB_REQ_RADDR(r) + off;
            wr.wr.rdma.rkey = (uint32_t)GW_IB_REQ_RKEY(r);
        }
        int rc = ibv_post_send(p->qp[q], &wr, &bad);
        if (rc != 0) {
            errno = rc;
            return gw__ib_peer_fail(t, p, GW_ERR_SYSTEM,
                                    "posting part %llu of %llu of message %llu (%zu bytes) on QP "
                                    "0x%x: %m",
                                    (unsigned long long)k + 1, (unsigned long long)nparts,
                                    (unsigned long long)GW_IB_REQ_IDX(r), r->len, p->qp[q]->qp_num);
        }
        p->sq_used[q]++;
        GW_IB_REQ_POSTED(r) = k + 1;
        *did = 1;
    }
    return GW_OK;
}

/* Send r eagerly: header and payload into the peer's next eager slot,
 * through our staging copy of it; the send completes at once. Or, with
 * announce, the header alone (GW_IB_EAGER_ANNOUNCE): r waits for its CTS
 * as before, but the receiver knows of it. */
static gw_status_t post_eager(gw_ib_t *t, gw_ib_peer_t *p, gw_request_t *r, int announce)
{
    uint64_t idx = GW_IB_REQ_IDX(r);
    int s = (int)(p->eager_sent % GW_IB_EAGER_SLOTS);
    uint8_t *stage = gw__ib_eager_stage(p, s);
    int receipt = !announce && (r->flags & GW_REQ_RECEIPT) != 0;
    gw_ib_eager_hdr_t h = {.idx = idx,
                           .seq = r->tag.seq,
                           .sig = r->tag.sig,
                           .comm_id = r->tag.comm_id,
                           .len = r->len,
                           .cts_seen = p->s_cts_seen,
                           .eager_freed = p->r_eager_freed,
                           .flags = announce  ? GW_IB_EAGER_ANNOUNCE
                                    : receipt ? GW_IB_EAGER_RECEIPT
                                              : 0};
    gw__ib_eager_hdr_encode(&h, stage);
    size_t payload = announce ? 0 : r->len;
    if (payload > 0)
        memcpy(stage + GW_IB_EAGER_HDR, r->buf, payload);
    uint32_t bytes = (uint32_t)(GW_IB_EAGER_HDR + payload);
    int rc =
        post_stage_write(t, p, GW_IB_WR_EAGER, stage, bytes,
                         gw__ib_imm_encode(GW_IB_IMM_EAGER, idx), gw__ib_remote_eager_slot(p, s));
    if (rc != 0) {
        errno = rc;
        return gw__ib_peer_fail(t, p, GW_ERR_SYSTEM,
                                "posting eager message %llu (%zu bytes) on QP 0x%x: %m",
                                (unsigned long long)idx, r->len, p->qp[0]->qp_num);
    }
    p->sq_used[0]++;
    p->r_eager_reported = h.eager_freed;
    GW_TRACE(t->base.log, GW_IB_SUBSYS, "%s %llu (len %zu, slot %d) to %s",
             announce ? "announcement of" : "eager", (unsigned long long)idx, r->len, s, p->desc);
    p->eager_sent++;
    if (announce) {
        GW_IB_REQ_STARTED(r) = GW_IB_SEND_ANNOUNCED;
        return GW_OK;
    }
    p->eager_idx[idx % GW_IB_FIFO_DEPTH] = idx;
    if (receipt) {
        /* Sent, not yet accepted: it waits in the queue for the receipt. */
        GW_IB_REQ_STARTED(r) = GW_IB_SEND_EAGER_WAIT;
        r->bytes_done = r->len;
        return GW_OK;
    }
    finish(t, p, r);
    return GW_OK;
}

gw_status_t gw__ib_take_receipt(gw_ib_t *t, gw_ib_peer_t *p, uint32_t value)
{
    uint64_t idx = gw__ib_imm_widen(value, p->s_next);
    if (idx == 0 || idx > p->s_next)
        return gw__ib_peer_fail(t, p, GW_ERR_PROTOCOL,
                                "sent a receipt for message %u, but only %llu were sent to it",
                                (unsigned)value, (unsigned long long)p->s_next);
    gw_request_t *next;
    for (gw_request_t *r = p->sq_head; r; r = next) {
        next = r->next;
        if (GW_IB_REQ_IDX(r) > idx)
            break;
        if (GW_IB_REQ_STARTED(r) == GW_IB_SEND_EAGER_WAIT)
            finish(t, p, r);
    }
    return GW_OK;
}

/* Whether an eager slot of the peer and room in QP 0 are free. */
static int slot_free(const gw_ib_peer_t *p)
{
    return p->eager_sent - p->eager_freed < GW_IB_EAGER_SLOTS && p->sq_used[0] < GW_IB_WQ_DEPTH;
}

static int eager_ok(const gw_ib_peer_t *p, const gw_request_t *r)
{
    return !(r->flags & GW_REQ_GATED) && p->eager_limit > 0 && r->len <= (size_t)p->eager_limit &&
           slot_free(p);
}

/* Pair send r with the CTS entry that carries its index, if it arrived. */
static gw_status_t match_cts(gw_ib_t *t, gw_ib_peer_t *p, gw_request_t *r, int *matched)
{
    uint64_t idx = GW_IB_REQ_IDX(r);
    int slot = (int)(idx % GW_IB_FIFO_DEPTH);
    *matched = 0;
    if (!p->cts_have[slot] || p->cts[slot].idx != idx)
        return GW_OK;
    const gw_ib_cts_t *c = &p->cts[slot];
    p->cts_have[slot] = 0;
    gw_msg_tag_t wants = {.seq = c->seq, .sig = c->sig, .comm_id = c->comm_id};
    if (!gw__tag_equal(&wants, &r->tag) || c->len != r->len) {
        /* Tell the receiver first: its buffer stays untouched and its
         * receive fails with the same status as our send. */
        gw__ib_post_ctrl(t, p, GW_IB_IMM_MISMATCH, idx);
        return gw__ib_peer_fail(t, p, GW_ERR_MISMATCH,
                                "posted a receive that does not match the message sent to it: "
                                "it expects (communicator 0x%08x, seq %llu, sig 0x%08x, len "
                                "%llu), we send (communicator 0x%08x, seq %llu, sig 0x%08x, len "
                                "%zu)",
                                (unsigned)c->comm_id, (unsigned long long)c->seq, (unsigned)c->sig,
                                (unsigned long long)c->len, (unsigned)r->tag.comm_id,
                                (unsigned long long)r->tag.seq, (unsigned)r->tag.sig, r->len);
    }
    GW_IB_REQ_RADDR(r) = c->addr;
    GW_IB_REQ_RKEY(r) = c->rkey;
    GW_IB_REQ_STARTED(r) = 1;
    *matched = 1;
    return GW_OK;
}

/* Sends start in posting order: small ones eagerly while an eager slot is
 * free (the send completes at once, without waiting for the receiver's
 * CTS or for the NIC's acknowledgement; a CTS that came anyway is dropped),
 * others with the receiver's CTS entry, straight into its buffer, once that
 * is here; a send that can do neither waits, and so do the later ones. */
static gw_status_t post_sends(gw_ib_t *t, gw_ib_peer_t *p, int *did)
{
    gw_request_t *next;
    for (gw_request_t *r = p->sq_head; r; r = next) {
        next = r->next; /* an eager send leaves the queue */
        if (GW_IB_REQ_STARTED(r) == GW_IB_SEND_EAGER_WAIT)
            continue; /* sent; its receipt completes it */
        if (!GW_IB_REQ_STARTED(r) || GW_IB_REQ_STARTED(r) == GW_IB_SEND_ANNOUNCED) {
            gw_status_t st;
            if (!GW_IB_REQ_STARTED(r) && eager_ok(p, r)) {
                int slot = (int)(GW_IB_REQ_IDX(r) % GW_IB_FIFO_DEPTH);
                if (p->cts_have[slot] && p->cts[slot].idx == GW_IB_REQ_IDX(r))
                    p->cts_have[slot] = 0;
                *did = 1;
                if ((st = post_eager(t, p, r, 0)) != GW_OK)
                    return st;
                continue;
            }
            int matched = 0;
            if ((st = match_cts(t, p, r, &matched)) != GW_OK)
                return st;
            if (!matched && !GW_IB_REQ_STARTED(r) && (r->flags & GW_REQ_ANNOUNCE) &&
                !(r->flags & GW_REQ_GATED) && slot_free(p)) {
                /* A receiver that peeks learns of it only so (transport.h). */
                *did = 1;
                return post_eager(t, p, r, 1);
            }
            if (!matched)
                return GW_OK;
            if (r->len > (size_t)t->max_inline && (st = reg_buffer(t, p, r)) != GW_OK)
                return st;
            if (r->flags & GW_REQ_GATED)
                r->gate->matched++;
            *did = 1;
        }
        /* A part of a message cut over several rails waits until every
         * part's receive accepted its part (transport.h): it and the sends
         * behind it. */
        if ((r->flags & GW_REQ_GATED) && r->gate->matched < r->gate->need)
            return GW_OK;
        gw_status_t st = post_parts(t, p, r, did);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

/* The receipt for the eager messages accepted since the last one; a full
 * send queue only delays it to a later round. */
static gw_status_t post_receipt(gw_ib_t *t, gw_ib_peer_t *p, int *did)
{
    gw_status_t st = gw__ib_post_ctrl(t, p, GW_IB_IMM_RECEIPT, p->rc_due);
    if (st == GW_ERR_NO_MEMORY)
        return GW_OK;
    if (st != GW_OK)
        return gw__ib_peer_fail(t, p, GW_ERR_SYSTEM, "posting the receipt for message %llu failed",
                                (unsigned long long)p->rc_due);
    p->rc_sent = p->rc_due;
    *did = 1;
    return GW_OK;
}

/* Tell the peer of its eager messages we freed (a FREED immediate) when
 * half of its slots are free and not reported, and no receive of ours is
 * queued, whose CTS entry would tell it (defer_cts sends that one at once
 * in this case). Without this, a receiver that only peeks (tagged
 * messages) would leave the sender without slots for good. A full send
 * queue only delays it to a later round. */
static gw_status_t post_freed(gw_ib_t *t, gw_ib_peer_t *p, int *did)
{
    gw_status_t st = gw__ib_post_ctrl(t, p, GW_IB_IMM_FREED, p->r_eager_freed);
    if (st == GW_ERR_NO_MEMORY)
        return GW_OK;
    if (st != GW_OK)
        return gw__ib_peer_fail(t, p, GW_ERR_SYSTEM,
                                "posting the count of freed eager slots failed");
    p->r_eager_reported = p->r_eager_freed;
    *did = 1;
    return GW_OK;
}

gw_status_t gw__ib_post_all(gw_ib_t *t, int *did)
{
    for (int i = 0; i < t->base.size; i++) {
        gw_ib_peer_t *p = &t->peers[i];
        if (i == t->base.rank || !gw__ib_peer_up(t, p))
            continue; /* a pair connecting on first use: its requests wait (ib_lazy.c) */
        gw_status_t st = GW_OK;
        if (p->rq_head)
            st = post_receives(t, p, did); /* eager messages waiting included */
        if (st == GW_OK && p->sq_head)
            st = post_sends(t, p, did);
        if (st == GW_OK && p->rc_due > p->rc_sent)
            st = post_receipt(t, p, did);
        if (st == GW_OK && !p->rq_head &&
            p->r_eager_freed - p->r_eager_reported >= GW_IB_EAGER_SLOTS / 2)
            st = post_freed(t, p, did);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}
