/*
 * tcp_progress.c - the progress engine of the TCP transport.
 *
 * One call of progress() is one round: first the receives posted since the
 * last round are matched against headers already read ahead (a zero-length
 * message completes right there) and take what the staging buffers hold
 * for them; then every socket with something to send writes it without
 * asking poll() first (a socket that had room at its last write almost
 * always still has; one that was refused waits for POLLOUT); a round in
 * which that completed a request ends there, so its caller goes on at once.
 * Otherwise a single poll() over every socket waits for the kernel to have
 * room or data, and every socket that is ready writes as much of its
 * current send part as the kernel takes and reads as much as has arrived.
 * Sends and receives of all peers move in the same round, so a ring in
 * which every rank sends a large message to its right and receives one
 * from its left never deadlocks: a rank whose send buffer is full still
 * drains its receive side, which frees its left neighbour's send side, and
 * so on around the ring.
 *
 * Before the poll() lets the thread sleep, it asks again without waiting
 * for up to GW_TCP_SPIN_US (tcp_spin.c): on loopback an answer is often a
 * few microseconds away, and a wake-up costs more than that, most of all
 * across cores when ranks are bound to their own. The spin runs in the
 * caller's thread, only while it waits anyway. A host with more TCP ranks
 * than CPUs never spins (tcp_mesh.c decides at connect(): the peer we wait
 * for may need the core we would spin on), and spins that keep ending
 * without an answer (other work shares our core) make the next waits sleep
 * at once for a while.
 *
 * Each socket has an independent send state machine and receive state
 * machine, each busy with at most one frame (header plus payload) at a time.
 * A frame goes out in one sendmsg() of header and payload. Socket k carries
 * part k of every message split into more than k parts, in message order,
 * so socket 0 carries part 0 of every message: the receiver learns the tag
 * and length of the next message from socket 0 alone. That header is
 * checked against the posted receive (tag and length exactly) before a
 * byte of payload is copied into the user's buffer; the other parts are
 * taken only once part 0 was checked, and must agree with it.
 *
 * Reading. Each socket reads into a staging buffer of GW_TCP_RBUF bytes,
 * so that one recv() brings a small frame's header and payload together,
 * and frames are parsed out of the buffer; a payload of at least
 * GW_TCP_DIRECT_MIN still missing is read straight into the user's buffer,
 * never through the staging one. A read that comes back short means the
 * kernel had no more, so the socket is not read again until poll() says
 * so (no recv() only to be told EAGAIN). A socket whose next message has
 * no receive posted yet parses that message's header and then stops: what
 * follows stays in the staging buffer (at most GW_TCP_RBUF bytes) or in
 * the kernel, which back-pressures the sender, until the receive is
 * posted; then the receive takes it from the buffer, and since poll()
 * reports only what is still in the kernel, every round first uses what
 * the buffers hold (drain_buffers). The header read ahead on socket 0 is
 * what lets progress(current) notice that a peer is in another collective
 * than ours.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "common/clock.h"
#include "transport/tcp/tcp_internal.h"

/* A socket that keeps sending or receiving yields to the others after this
 * many bytes in one round; poll() reports it ready again at once. */
#define GW_TCP_IO_BUDGET ((size_t)16 * 1024 * 1024)

/* One more part of r is done; the request completes with its last part,
 * or, for a send that asked for a receipt which has not come yet, waits for
 * it in aq. */
static void finish_part(gw_tcp_t *t, gw_tcp_peer_t *p, gw_request_t *r)
{
    if (++GW_TCP_REQ_PARTS_DONE(r) < GW_TCP_REQ_NPARTS(r))
        return;
    if (r->kind == GW_REQ_SEND) {
        gw__req_queue_remove(&p->sq_head, &p->sq_tail, r);
        if ((r->flags & GW_REQ_RECEIPT) && GW_TCP_REQ_IDX(r) > p->acked) {
            gw__req_queue_push(&p->aq_head, &p->aq_tail, r);
            return;
        }
    } else {
        gw__req_queue_remove(&p->rq_head, &p->rq_tail, r);
    }
    t->ncompleted++;
    gw__req_complete(r, GW_OK);
}

/* ---- receipts ------------------------------------------------------------ */

/* p's receipt (in a RECEIPT frame, or a GOODBYE: `what`) says it accepted
 * our messages up to idx: the sends among them that wait for it complete.
 * Receipts on several sockets may arrive out of order; an older one says
 * nothing new. */
static gw_status_t take_receipt(gw_tcp_t *t, gw_tcp_peer_t *p, uint64_t idx, const char *what)
{
    if (idx > p->s_next)
        return gw__tcp_peer_fail(t, p, GW_ERR_PROTOCOL,
                                 "sent a %s for message %llu, but only %llu were sent to it", what,
                                 (unsigned long long)idx, (unsigned long long)p->s_next);
    if (idx <= p->acked)
        return GW_OK;
    p->acked = idx;
    for (gw_request_t *r = p->aq_head, *next; r; r = next) {
        next = r->next;
        if (GW_TCP_REQ_IDX(r) <= idx) {
            gw__req_queue_remove(&p->aq_head, &p->aq_tail, r);
            t->ncompleted++;
            gw__req_complete(r, GW_OK);
        }
    }
    return GW_OK;
}

static int receipt_due(const gw_tcp_peer_t *p) { return p->rc_due > p->rc_sent; }

/* Whether socket s may start a RECEIPT frame now: nothing of its own in
 * the making, and it is the control connection, or that one cannot write. */
static int receipt_sock(const gw_tcp_t *t, const gw_tcp_peer_t *p, const gw_tcp_sock_t *s)
{
    if (s->sreq || s->s_receipt || s->dead || s->fd < 0 || s->s_midframe)
        return 0;
    const gw_tcp_sock_t *c = &p->socks[t->nsocks - 1];
    return s == c || c->dead || c->fd < 0 || c->s_midframe;
}

static void start_receipt(gw_tcp_peer_t *p, gw_tcp_sock_t *s)
{
    gw_tcp_hdr_t h = {.magic = GW_TCP_FRAME_MAGIC, .type = GW_TCP_RECEIPT, .seq = p->rc_due};
    gw__tcp_hdr_encode(&h, s->s_hdr);
    p->rc_sent = p->rc_due;
    s->s_receipt = 1;
    s->s_hdr_done = 0;
}

/* ---- send side ---------------------------------------------------------- */

/* The next message with a part for socket s: the first queued send after
 * the last one s carried that is long enough to have a part k. */
static gw_request_t *next_send(const gw_tcp_peer_t *p, const gw_tcp_sock_t *s)
{
    for (gw_request_t *r = p->sq_head; r; r = r->next)
        if (GW_TCP_REQ_IDX(r) > s->s_last && GW_TCP_REQ_NPARTS(r) > (uint64_t)s->idx)
            return r;
    return NULL;
}

static void start_send(gw_tcp_sock_t *s, gw_request_t *r)
{
    gw_tcp_hdr_t h = {.magic = GW_TCP_FRAME_MAGIC,
                      .type = GW_TCP_DATA,
                      .flags = (r->flags & GW_REQ_RECEIPT) ? GW_TCP_FLAG_RECEIPT : 0,
                      .seq = r->tag.seq,
                      .sig = r->tag.sig,
                      .comm_id = r->tag.comm_id,
                      .total = r->len};
    size_t off, plen;
    gw__tcp_part_range(r->len, GW_TCP_REQ_NPARTS(r), (size_t)s->idx, &off, &plen);
    h.offset = off;
    h.part_len = plen;
    gw__tcp_hdr_encode(&h, s->s_hdr);
    s->sreq = r;
    s->s_last = GW_TCP_REQ_IDX(r);
    s->s_hdr_done = 0;
    s->s_part_off = off;
    s->s_part_len = plen;
    s->s_done = 0;
}

/* The kernel took nothing, or failed the write: from the eager pass
 * (eager), which writes without asking poll() first, a failure waits for
 * poll() too, so that the socket is read before it is reported (an ABORT
 * frame from the peer is the better report than our broken pipe). */
static gw_status_t send_refused(gw_tcp_t *t, gw_tcp_peer_t *p, gw_tcp_sock_t *s, int err, int eager)
{
    if (err == EAGAIN || err == EWOULDBLOCK || eager) {
        s->s_full = 1;
        return GW_OK;
    }
    return gw__tcp_sock_errno(t, p, s, err, "send");
}

static gw_status_t send_sock(gw_tcp_t *t, gw_tcp_peer_t *p, gw_tcp_sock_t *s, int eager)
{
    size_t budget = GW_TCP_IO_BUDGET;
    while (budget > 0) {
        if (!s->sreq && !s->s_receipt) {
            /* A receipt first: it is small, and a peer waits on it. */
            if (receipt_due(p) && receipt_sock(t, p, s)) {
                start_receipt(p, s);
            } else {
                gw_request_t *next = next_send(p, s);
                if (!next)
                    return GW_OK;
                start_send(s, next);
            }
        }
        if (s->s_receipt) {
            ssize_t w = send(s->fd, s->s_hdr + s->s_hdr_done, GW_TCP_HDR_SIZE - s->s_hdr_done,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return send_refused(t, p, s, errno, eager);
            if (w == 0)
                return send_refused(t, p, s, EAGAIN, eager);
            s->s_hdr_done += (size_t)w;
            if (s->s_hdr_done == GW_TCP_HDR_SIZE)
                s->s_receipt = 0;
            continue;
        }
        gw_request_t *r = s->sreq;
        struct iovec iov[2];
        int n = 0;
        if (s->s_hdr_done < GW_TCP_HDR_SIZE)
            iov[n++] = (struct iovec){s->s_hdr + s->s_hdr_done, GW_TCP_HDR_SIZE - s->s_hdr_done};
        if (s->s_done < s->s_part_len)
            iov[n++] = (struct iovec){(uint8_t *)r->buf + s->s_part_off + s->s_done,
                                      s->s_part_len - s->s_done};
        struct msghdr mh;
        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = iov;
        mh.msg_iovlen = (size_t)n;
        /* MSG_NOSIGNAL: a peer that died gives EPIPE here, never SIGPIPE. */
        ssize_t w = sendmsg(s->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return send_refused(t, p, s, errno, eager);
        }
        if (w == 0) /* took nothing: wait for POLLOUT like EAGAIN */
            return send_refused(t, p, s, EAGAIN, eager);
        size_t adv = (size_t)w;
        budget = adv < budget ? budget - adv : 0;
        size_t h = GW_TCP_HDR_SIZE - s->s_hdr_done;
        if (h > adv)
            h = adv;
        s->s_hdr_done += h;
        s->s_done += adv - h;
        r->bytes_done += adv - h;
        if (s->s_hdr_done == GW_TCP_HDR_SIZE && s->s_done == s->s_part_len) {
            s->sreq = NULL;
            finish_part(t, p, r);
        }
    }
    return GW_OK;
}

/* ---- receive side --------------------------------------------------------- */

/* The receive that the next part on socket s belongs to, or NULL while that
 * is not known. Socket 0 carries part 0 of every message, so its next
 * message is simply the next receive posted. Socket k > 0 carries part k of
 * the messages long enough to have one, which is known only from receives
 * whose part 0 was checked: the search stops at the first unchecked one. */
static gw_request_t *next_recv(const gw_tcp_peer_t *p, const gw_tcp_sock_t *s)
{
    for (gw_request_t *r = p->rq_head; r; r = r->next) {
        if (GW_TCP_REQ_IDX(r) <= s->r_last)
            continue;
        if (s->idx == 0)
            return r;
        if (!GW_TCP_REQ_MATCHED(r))
            return NULL;
        if (GW_TCP_REQ_NPARTS(r) > (uint64_t)s->idx)
            return r;
    }
    return NULL;
}

/* Give the header held on socket s to the receive it belongs to, after
 * checking that they agree; payload is read only after this. */
static gw_status_t try_claim(gw_tcp_t *t, gw_tcp_peer_t *p, gw_tcp_sock_t *s)
{
    if (s->rreq)
        return GW_OK;
    gw_request_t *r = next_recv(p, s);
    if (!r)
        return GW_OK;
    if (!s->r_held) {
        if (s->goodbye)
            return gw__tcp_peer_fail(
                t, p, GW_ERR_REMOTE,
                "already closed its communicator, but a receive from it is posted "
                "(seq %llu, sig 0x%08x, len %zu)",
                (unsigned long long)r->tag.seq, (unsigned)r->tag.sig, r->len);
        return GW_OK;
    }
    const gw_tcp_hdr_t *h = &s->r_hdr;
    size_t off, plen;
    gw__tcp_part_range(r->len, GW_TCP_REQ_NPARTS(r), (size_t)s->idx, &off, &plen);
    gw_msg_tag_t got = {.seq = h->seq, .sig = h->sig, .comm_id = h->comm_id};
    gw_status_t st;
    if (s->idx == 0 && (st = gw__transport_check_match(&t->base, r, &got, h->total)) != GW_OK)
        return st;
    if (!gw__tag_equal(&got, &r->tag) || h->total != r->len || h->offset != off ||
        h->part_len != plen)
        return gw__tcp_peer_fail(
            t, p, GW_ERR_PROTOCOL,
            "sent a part header on socket %d that disagrees with part 0: got (seq "
            "%llu, sig 0x%08x, len %llu, offset %llu, part %llu), expected (seq "
            "%llu, sig 0x%08x, len %zu, offset %zu, part %zu)",
            s->idx, (unsigned long long)h->seq, (unsigned)h->sig, (unsigned long long)h->total,
            (unsigned long long)h->offset, (unsigned long long)h->part_len,
            (unsigned long long)r->tag.seq, (unsigned)r->tag.sig, r->len, off, plen);
    if (s->idx == 0) {
        GW_TCP_REQ_MATCHED(r) = 1;
        /* Accepted: the sender may be waiting for our word (receipts). */
        if (h->flags & GW_TCP_FLAG_RECEIPT)
            p->rc_due = GW_TCP_REQ_IDX(r);
    }
    s->r_held = 0;
    s->rreq = r;
    s->r_last = GW_TCP_REQ_IDX(r);
    s->r_part_off = off;
    s->r_part_len = plen;
    s->r_done = 0;
    if (plen == 0) {
        s->rreq = NULL;
        finish_part(t, p, r);
    }
    return GW_OK;
}

/* Socket 0 first: checking part 0 there is what lets the others claim. */
static gw_status_t claim_peer(gw_tcp_t *t, gw_tcp_peer_t *p)
{
    for (int k = 0; k < t->nsocks; k++) {
        gw_status_t st = try_claim(t, p, &p->socks[k]);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

static gw_status_t on_header(gw_tcp_t *t, gw_tcp_peer_t *p, gw_tcp_sock_t *s,
                             const uint8_t bytes[GW_TCP_HDR_SIZE])
{
    gw_tcp_hdr_t h;
    gw__tcp_hdr_decode(bytes, &h);
    if (h.magic != GW_TCP_FRAME_MAGIC)
        return gw__tcp_peer_fail(t, p, GW_ERR_PROTOCOL,
                                 "sent garbage on socket %d (frame magic 0x%08x, expected 0x%08x)",
                                 s->idx, (unsigned)h.magic, (unsigned)GW_TCP_FRAME_MAGIC);
    if (s->goodbye)
        return gw__tcp_peer_fail(t, p, GW_ERR_PROTOCOL, "sent a frame of type %u after its goodbye",
                                 (unsigned)h.type);
    switch (h.type) {
    case GW_TCP_ABORT: {
        /* What it accepted before it failed completes first. */
        gw_status_t st = take_receipt(t, p, h.seq, "abort with a receipt");
        return st != GW_OK ? st : gw__tcp_peer_aborted(t, p, &h);
    }
    case GW_TCP_RECEIPT:
        return take_receipt(t, p, h.seq, "receipt");
    case GW_TCP_GOODBYE: {
        GW_TRACE(t->base.log, GW_TCP_SUBSYS, "rank %d said goodbye on socket %d", p->rank, s->idx);
        s->goodbye = 1;
        gw_status_t st = take_receipt(t, p, h.seq, "goodbye with a receipt");
        if (st != GW_OK)
            return st;
        if (s->idx == 0) {
            p->goodbye = 1;
            gw_request_t *q = p->sq_head ? p->sq_head : p->aq_head;
            if (q)
                return gw__tcp_peer_fail(
                    t, p, GW_ERR_REMOTE,
                    "already closed its communicator, but sends to it are pending "
                    "(seq %llu, len %zu%s)",
                    (unsigned long long)q->tag.seq, q->len,
                    q == p->aq_head ? ", sent but never matched by a receive" : "");
        }
        return try_claim(t, p, s);
    }
    case GW_TCP_DATA:
        if (h.offset > h.total || h.part_len > h.total - h.offset)
            return gw__tcp_peer_fail(t, p, GW_ERR_PROTOCOL,
                                     "sent a malformed header on socket %d (len %llu, offset %llu, "
                                     "part %llu)",
                                     s->idx, (unsigned long long)h.total,
                                     (unsigned long long)h.offset, (unsigned long long)h.part_len);
        s->r_hdr = h;
        s->r_held = 1;
        return claim_peer(t, p);
    default:
        return gw__tcp_peer_fail(t, p, GW_ERR_PROTOCOL,
                                 "sent a frame of unknown type %u on socket %d", (unsigned)h.type,
                                 s->idx);
    }
}

ssize_t gw__tcp_rb_fill(gw_tcp_t *t, gw_tcp_sock_t *s)
{
    if (!s->rb && !(s->rb = malloc(GW_TCP_RBUF))) {
        errno = ENOMEM;
        return -1;
    }
    if (s->rb_pos > 0) {
        memmove(s->rb, s->rb + s->rb_pos, s->rb_len - s->rb_pos);
        s->rb_len -= s->rb_pos;
        s->rb_pos = 0;
    }
    t->nreads++;
    ssize_t n = recv(s->fd, s->rb + s->rb_len, GW_TCP_RBUF - s->rb_len, MSG_DONTWAIT);
    if (n > 0)
        s->rb_len += (size_t)n;
    return n;
}

/* Move socket s forward: the current part's payload into its receive, or,
 * between parts, the next frame header. Bytes already in the staging
 * buffer go first; the socket itself is read only when may_read (poll()
 * said it has data), and not again after a read came back short, which
 * means the kernel had no more: the next recv() would only say EAGAIN, and
 * poll() reports what arrives later. A header whose receive is not posted
 * yet is held (r_held), and what follows it stays in the buffer or the
 * kernel until it is. */
static gw_status_t recv_sock(gw_tcp_t *t, gw_tcp_peer_t *p, gw_tcp_sock_t *s, int may_read)
{
    size_t budget = GW_TCP_IO_BUDGET;
    for (;;) {
        gw_request_t *r = s->rreq;
        size_t avail = s->rb_len - s->rb_pos;
        if (r) {
            size_t want = s->r_part_len - s->r_done;
            uint8_t *dst = (uint8_t *)r->buf + s->r_part_off + s->r_done;
            size_t n;
            if (avail > 0 || want == 0) {
                n = avail < want ? avail : want;
                if (n > 0)
                    memcpy(dst, s->rb + s->rb_pos, n);
                s->rb_pos += n;
            } else {
                if (!may_read || budget == 0)
                    return GW_OK;
                ssize_t got;
                if (want >= GW_TCP_DIRECT_MIN) { /* the payload goes straight to the user */
                    t->nreads++;
                    got = recv(s->fd, dst, want, MSG_DONTWAIT);
                } else {
                    got = gw__tcp_rb_fill(t, s);
                }
                if (got == 0)
                    return gw__tcp_sock_eof(t, p, s);
                if (got < 0) {
                    if (errno == EINTR)
                        continue;
                    if (errno == EAGAIN || errno == EWOULDBLOCK)
                        return GW_OK;
                    return gw__tcp_sock_errno(t, p, s, errno, "recv");
                }
                if (want < GW_TCP_DIRECT_MIN) {
                    if ((size_t)got < GW_TCP_RBUF - (s->rb_len - (size_t)got))
                        may_read = 0; /* short read: the kernel has nothing more */
                    continue;
                }
                if ((size_t)got < want)
                    may_read = 0;
                n = (size_t)got;
                budget = n < budget ? budget - n : 0;
            }
            s->r_done += n;
            r->bytes_done += n;
            if (s->r_done == s->r_part_len) {
                s->rreq = NULL;
                finish_part(t, p, r);
            }
            continue;
        }
        if (s->r_held || s->eof)
            return GW_OK;
        if (avail >= GW_TCP_HDR_SIZE) {
            const uint8_t *hb = s->rb + s->rb_pos;
            s->rb_pos += GW_TCP_HDR_SIZE; /* on_header() reads no more into rb */
            gw_status_t st = on_header(t, p, s, hb);
            if (st != GW_OK)
                return st;
            continue;
        }
        if (!may_read)
            return GW_OK;
        ssize_t got = gw__tcp_rb_fill(t, s);
        if (got == 0 && avail == 0 && s->goodbye) {
            s->eof = 1;
            return GW_OK;
        }
        if (got == 0)
            return gw__tcp_sock_eof(t, p, s);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return GW_OK;
            return gw__tcp_sock_errno(t, p, s, errno, "recv");
        }
        if ((size_t)got < GW_TCP_RBUF - (s->rb_len - (size_t)got))
            may_read = 0;
    }
}

/* Whether s has bytes in its staging buffer that it can use without a
 * read: part of the payload of its current receive, or a header while it
 * holds none. */
static int rb_ready(const gw_tcp_sock_t *s)
{
    if (s->fd < 0 || s->dead || s->rb_len == s->rb_pos)
        return 0;
    return s->rreq || (!s->r_held && !s->eof && s->rb_len - s->rb_pos >= GW_TCP_HDR_SIZE);
}

/* Use what the staging buffers hold: a receive posted or claimed since the
 * bytes were read finds its payload there, and a header parsed on one
 * socket may let another claim (the parts of a message spread over
 * several). Nothing else would: poll() reports only data still in the
 * kernel. Repeats until no socket can move. */
static gw_status_t drain_buffers(gw_tcp_t *t)
{
    for (int moved = 1; moved;) {
        moved = 0;
        for (int i = 0; i < t->npfds; i++) {
            gw_tcp_sock_t *s = t->pfd_socks[i];
            if (!rb_ready(s))
                continue;
            size_t before = s->rb_pos;
            gw_status_t st = recv_sock(t, t->pfd_peers[i], s, 0);
            if (st != GW_OK)
                return st;
            moved |= s->rb_pos != before;
        }
    }
    return GW_OK;
}

static gw_status_t check_conflicts(gw_tcp_t *t, const gw_msg_tag_t *current)
{
    for (int i = 0; i < t->base.size; i++) {
        gw_tcp_peer_t *p = &t->peers[i];
        if (i == t->base.rank || !p->socks || !p->socks[0].r_held)
            continue;
        const gw_tcp_hdr_t *h = &p->socks[0].r_hdr;
        gw_msg_tag_t pending = {.seq = h->seq, .sig = h->sig, .comm_id = h->comm_id};
        gw_status_t st = gw__transport_check_pending(&t->base, p->rank, "sent a message", &pending,
                                                     h->total, current);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

/* Match new receives with headers read ahead, and fail requests that can
 * never complete because their peer said goodbye. */
static gw_status_t prepass(gw_tcp_t *t)
{
    for (int i = 0; i < t->base.size; i++) {
        gw_tcp_peer_t *p = &t->peers[i];
        if (i == t->base.rank || !p->socks)
            continue;
        gw_status_t st = claim_peer(t, p);
        if (st != GW_OK)
            return st;
        gw_request_t *q = p->sq_head ? p->sq_head : p->aq_head;
        if (p->goodbye && q)
            return gw__tcp_peer_fail(
                t, p, GW_ERR_REMOTE,
                "already closed its communicator, but a send to it is posted (seq "
                "%llu, len %zu%s)",
                (unsigned long long)q->tag.seq, q->len,
                q == p->aq_head ? ", sent but never matched by a receive" : "");
    }
    return GW_OK;
}

static gw_status_t flush_receipts(gw_tcp_t *t)
{
    for (int i = 0; i < t->base.size; i++) {
        gw_tcp_peer_t *p = &t->peers[i];
        if (i == t->base.rank || !p->socks || !receipt_due(p))
            continue;
        for (int k = t->nsocks - 1; k >= 0; k--) {
            if (receipt_sock(t, p, &p->socks[k])) {
                gw_status_t st = send_sock(t, p, &p->socks[k], 0);
                if (st != GW_OK)
                    return st;
                break;
            }
        }
    }
    return GW_OK;
}

/* Whether s has something to write: a part in the making, a receipt, or
 * the next message's part. */
static int wants_send(const gw_tcp_t *t, const gw_tcp_peer_t *p, const gw_tcp_sock_t *s)
{
    return s->sreq || s->s_receipt || next_send(p, s) || (receipt_due(p) && receipt_sock(t, p, s));
}

/* Write what can be written before polling: a socket that had room at its
 * last write almost always still has, and asking poll() first costs a
 * system call and a round for every message. A socket the kernel refused
 * (s_full) waits for POLLOUT instead. */
static gw_status_t eager_sends(gw_tcp_t *t)
{
    for (int i = 0; i < t->npfds; i++) {
        gw_tcp_sock_t *s = t->pfd_socks[i];
        gw_tcp_peer_t *p = t->pfd_peers[i];
        if (s->fd < 0 || s->dead || s->s_full || !wants_send(t, p, s))
            continue;
        gw_status_t st = send_sock(t, p, s, 1);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

static void build_pollset(gw_tcp_t *t)
{
    for (int i = 0; i < t->npfds; i++) {
        gw_tcp_sock_t *s = t->pfd_socks[i];
        const gw_tcp_peer_t *p = t->pfd_peers[i];
        struct pollfd *pfd = &t->pfds[i];
        pfd->revents = 0;
        pfd->events = 0;
        if (s->fd < 0 || s->dead) {
            pfd->fd = -1;
            continue;
        }
        if (wants_send(t, p, s))
            pfd->events |= POLLOUT;
        if (!s->eof && (s->rreq || !s->r_held))
            pfd->events |= POLLIN;
        /* A socket holding a header is still watched (events 0) so that a
         * reset is noticed; a closed one only when we have sends for it. */
        pfd->fd = (pfd->events || !s->eof) ? s->fd : -1;
    }
}

gw_status_t gw__tcp_progress(gw_transport_t *base, const gw_msg_tag_t *current, int wait_ms)
{
    gw_tcp_t *t = gw__tcp_of(base);
    uint64_t completed_before = t->ncompleted;
    gw_status_t st = prepass(t);
    if (st == GW_OK)
        st = drain_buffers(t);
    if (st == GW_OK && current)
        st = check_conflicts(t, current);
    if (st != GW_OK)
        return st;
    /* Connections being made move first (their peers' requests wait for
     * them), then again once the poll below saw the listener or waited
     * at most a millisecond for them. */
    int connecting = gw__tcp_mesh_busy(t);
    if (connecting && (st = gw__tcp_mesh_progress(t)) != GW_OK)
        return gw__tcp_fail(t, st, NULL);
    if ((st = eager_sends(t)) != GW_OK)
        return st;
    /* A send that completed ends the round: its caller may go on at once,
     * and a failure read after it in the same round would fail a call
     * whose every request succeeded. */
    if (t->ncompleted != completed_before && !connecting)
        return current ? check_conflicts(t, current) : GW_OK;
    build_pollset(t);
    int timeout = wait_ms < 0 || t->ncompleted != completed_before ? 0 : wait_ms;
    if (connecting && timeout > 1)
        timeout = 1;
    int np = t->npfds;
    if (t->mesh && t->listen_fd >= 0)
        t->pfds[np++] = (struct pollfd){.fd = t->listen_fd, .events = POLLIN};
    int n = gw__tcp_poll_spin(t, np, timeout);
    if (n < 0) {
        if (errno == EINTR)
            return GW_OK;
        return gw__tcp_fail(t, GW_ERR_SYSTEM, "poll() over %d sockets: %m", t->npfds);
    }
    int npeer_socks = t->npfds; /* peers that come up below join the next round */
    if (np > npeer_socks && t->pfds[npeer_socks].revents)
        n--;
    if (t->mesh && (connecting || (np > npeer_socks && t->pfds[npeer_socks].revents)) &&
        (st = gw__tcp_mesh_progress(t)) != GW_OK)
        return gw__tcp_fail(t, st, NULL);
    if (gw__tcp_mesh_awaiting(t) && (st = gw__tcp_mesh_knock_again(t)) != GW_OK)
        return gw__tcp_fail(t, st, NULL);
    for (int i = 0; i < npeer_socks && n > 0; i++) {
        struct pollfd *pfd = &t->pfds[i];
        if (!pfd->revents)
            continue;
        n--;
        gw_tcp_sock_t *s = t->pfd_socks[i];
        gw_tcp_peer_t *p = t->pfd_peers[i];
        short ev = pfd->events, rev = pfd->revents;
        if (rev & POLLNVAL)
            return gw__tcp_fail(t, GW_ERR_SYSTEM,
                                "socket %d to rank %d is not open (internal error)", s->idx,
                                p->rank);
        /* Receive first: an ABORT frame that arrived is a better report
         * than the broken pipe a send to the aborted peer would give. */
        int errhup = (rev & (POLLERR | POLLHUP)) != 0;
        if ((ev & POLLIN) && ((rev & POLLIN) || errhup))
            st = recv_sock(t, p, s, 1);
        else if (errhup && !(ev & POLLOUT) && !s->eof)
            st = gw__tcp_idle_sock_error(t, p, s);
        if (st == GW_OK && (rev & POLLOUT))
            s->s_full = 0;
        if (st == GW_OK && (ev & POLLOUT) && ((rev & POLLOUT) || errhup))
            st = send_sock(t, p, s, 0);
        if (st != GW_OK)
            return st;
    }
    /* Bytes read in this round may hold more frames than the sockets they
     * came on could take (another socket's claim made them usable). */
    if ((st = drain_buffers(t)) != GW_OK)
        return st;
    /* Receipts that this round made due go out now, not at the next round:
     * the receive they answer may have completed in this one, and its
     * caller may not call again for a while. */
    if ((st = flush_receipts(t)) != GW_OK)
        return st;
    /* Headers that arrived in this round may belong to a collective that
     * disagrees with ours. */
    if (current)
        return check_conflicts(t, current);
    return GW_OK;
}
