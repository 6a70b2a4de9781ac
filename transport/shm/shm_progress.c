/*
 * shm_progress.c - the progress engine of the shared-memory transport.
 *
 * One round visits every peer: it completes the DIRECT sends the peer has
 * finished reading, writes queued sends into the outgoing ring for as long
 * as it has room, and reads the incoming ring: the next header (checked
 * against the receive posted for it, or held as read-ahead when none is),
 * INLINE payload as far as it has arrived, or a DIRECT payload by a
 * single-copy read from the sender's memory. Then it looks at what the
 * peer says about itself (abort, goodbye) and, every GW_SHM_LIVENESS_MS,
 * whether its process still exists. Copies are cut into pieces (the ring's
 * GW_SHM_PIECE, a direct read's GW_SHM_DIRECT_PIECE) and head or tail is
 * published after each, so that the other side starts on a piece while this
 * side copies the next, and no peer waits long behind another's big
 * message. Sends and receives of every peer move in the same round, so
 * symmetric exchanges (rings of ranks) never deadlock on full rings.
 *
 * When a round moved nothing and the caller may wait, the engine waits
 * for the next round as shm_wait.c says: polling, yielding, or asleep until
 * a peer rings its bell.
 *
 * A small message costs a header line, its payload and head's line; little
 * else is touched on its way. One of at most GW_SHM_TINY_MAX (16) bytes
 * rides in its header's line (GW_SHM_REC_TINY). The sender reads the
 * receiver's tail only when the tail it read last leaves too little room
 * (the receiver writes that line after every message, so reading it for
 * every send put a cache miss before each); a small publish rings the
 * peer's bell at the end of the round (shm_wait.c). A send of at most
 * GW_SHM_POST_COPY bytes posted to a pair with nothing queued is written
 * into the ring by the post.
 *
 * Warming. Between two ranks that trade small messages, the next message
 * of a pair is most likely the size of the last, and where it goes is
 * known: at the sender's head, the receiver's tail. So after a message
 * that took at most GW_SHM_WARM_SEND_MAX bytes of the ring, the sender,
 * once idle, asks for the next as many lines for writing (prefetchw: the
 * copy then finds them its own); after one of at most
 * GW_SHM_WARM_RECV_MAX, the receiver asks for them for reading in every
 * idle round, so that the miss on head's line and the misses on the
 * message's own lines are out at once rather than one after the other.
 * Prefetches are hints: a wrong guess costs a little traffic, never a
 * wrong byte. Measured on the 2-core test machine (2 ranks bound,
 * standard sends, median half round trip): 8-64 B 0.48 -> 0.42 us, 256 B
 * 0.53 -> 0.45, 512 B 0.75 -> 0.47, 1 KiB 0.93 -> 0.82, 1.5 KiB 0.98 ->
 * 0.80, 2 KiB 1.03 -> 0.96, and a 2-rank allreduce of 1 KiB 1.19 -> 0.87.
 * The limits are measured too: the receiver's warming of 17 lines or more
 * (a 1 KiB message and its header) made them slower (2 KiB 1.0 -> 1.3-1.8
 * us), as its reads pulled lines away from a sender still writing them,
 * and the sender's of 4 KiB messages did (1.18 -> 1.3).
 *
 * Pairs connected on first use (shm_connect.c) come up in the same rounds:
 * a round answers knocks on our door (at most once a millisecond), then
 * moves every pair that is connecting one handshake step; their requests
 * wait in the queues until the pair is up. Neither a knock (a datagram)
 * nor the handshake's steps ring a bell: a sleep lasts at most
 * GW_SHM_SLEEP_NS, and while a pair is connecting at most
 * GW_SHM_CONNECTING_SLEEP_NS.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/shm/shm_internal.h"

static void complete(gw_shm_t *t, gw_request_t *r)
{
    r->status = GW_OK;
    r->complete = 1;
    t->moved++;
}

int gw__shm_peer_gone(gw_shm_peer_t *p)
{
    if (p->gone)
        return 1;
    if (p->pidfd >= 0) {
        struct pollfd pfd = {.fd = p->pidfd, .events = POLLIN};
        p->gone = poll(&pfd, 1, 0) > 0;
        return p->gone;
    }
    if (kill(p->pid, 0) != 0 && errno == ESRCH)
        return p->gone = 1;
    /* A dead process that is not reaped yet still answers kill(). */
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)p->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return p->gone = errno == ENOENT;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); /* the command name may hold spaces */
    if (paren && (paren[2] == 'Z' || paren[2] == 'X'))
        p->gone = 1;
    return p->gone;
}

/* ---- ring copies ------------------------------------------------------------ */

static void ring_put(uint8_t *ring, uint64_t size, uint64_t pos, const void *src, size_t len)
{
    size_t off = (size_t)(pos & (size - 1)), first = size - off < len ? size - off : len;
    memcpy(ring + off, src, first);
    if (len > first)
        memcpy(ring, (const uint8_t *)src + first, len - first);
}

static void ring_get(const uint8_t *ring, uint64_t size, uint64_t pos, void *dst, size_t len)
{
    size_t off = (size_t)(pos & (size - 1)), first = size - off < len ? size - off : len;
    memcpy(dst, ring + off, first);
    if (len > first)
        memcpy((uint8_t *)dst + first, ring, len - first);
}

/* ---- send side ---------------------------------------------------------------- */

/* DIRECT sends the peer has finished reading are complete. */
static void finish_direct(gw_shm_t *t, gw_shm_peer_t *p)
{
    if (!p->dq_head)
        return;
    uint64_t done = atomic_load_explicit(&p->out->direct_done, memory_order_acquire);
    while (p->dq_head && GW_SHM_REQ_INDEX(p->dq_head) <= done) {
        gw_request_t *r = gw__req_queue_pop(&p->dq_head, &p->dq_tail);
        r->bytes_done = r->len;
        complete(t, r);
    }
}

/* INLINE sends whose receipt came (the peer accepted them) are complete. */
static void finish_accepted(gw_shm_t *t, gw_shm_peer_t *p)
{
    if (!p->aq_head)
        return;
    uint64_t accepted = atomic_load_explicit(&p->out->accepted, memory_order_acquire);
    while (p->aq_head && GW_SHM_REQ_INDEX(p->aq_head) <= accepted)
        complete(t, gw__req_queue_pop(&p->aq_head, &p->aq_tail));
}

/* The bytes a message of len bytes takes in the ring, header included,
 * when they are at most max, else 0 (nothing to warm). */
static uint64_t warm_bytes(uint64_t len, uint64_t max)
{
    uint64_t bytes = GW_SHM_LINE + gw__shm_body(len);
    return bytes <= max ? bytes : 0;
}

/* Idle after a small send: ask, once, for the lines the next message of
 * that size will be written to, so that writing it finds them ours. */
static void warm_next_send(gw_shm_peer_t *p)
{
    if (p->s_warmed == p->s_head + 1)
        return;
    p->s_warmed = p->s_head + 1; /* + 1: 0 means not yet, also at head 0 */
    for (uint64_t o = p->s_head; o < p->s_head + p->s_warm; o += GW_SHM_LINE)
        __builtin_prefetch(p->out_ring + (o & (p->ring_bytes - 1)), 1, 3);
}

static void send_peer(gw_shm_t *t, gw_shm_peer_t *p)
{
    /* Nothing to send: leave tail's line alone (the receiver writes it
     * after every message; a needless read here costs a cache miss a
     * round while we wait for its answer). */
    if (!p->sq_head) {
        warm_next_send(p);
        return;
    }
    const uint64_t size = p->ring_bytes;
    /* head as we last published it: ours to write, no need to read the
     * shared line. The tail we read last: the receiver writes tail after
     * every message, so reading it for every send would put a cache miss
     * before every small message. It is read again only when the old one
     * leaves too little room; an old one only ever gives less (we never
     * wrote past the room it gave). */
    uint64_t head = p->s_head;
    uint64_t tail = p->s_tail;
    gw_request_t *r;
    while ((r = p->sq_head) != NULL) {
        if (!p->s_hdr_done) {
            if (size - (head - tail) < GW_SHM_LINE) {
                tail = p->s_tail = atomic_load_explicit(&p->out->tail, memory_order_acquire);
                if (size - (head - tail) < GW_SHM_LINE)
                    break;
            }
            int direct = p->direct_ok && r->len >= t->direct_min;
            gw_shm_rec_t rec;
            memset(&rec, 0, sizeof(rec));
            rec.magic = GW_SHM_REC_MAGIC;
            rec.kind = direct ? GW_SHM_DIRECT : GW_SHM_INLINE;
            rec.seq = r->tag.seq;
            rec.sig = r->tag.sig;
            rec.comm_id = r->tag.comm_id;
            rec.flags = (r->flags & GW_REQ_RECEIPT) && !direct ? GW_SHM_REC_RECEIPT : 0;
            rec.len = r->len;
            if (direct) {
                rec.u.addr = (uint64_t)(uintptr_t)r->buf;
            } else if (r->len <= GW_SHM_TINY_MAX) {
                rec.flags |= GW_SHM_REC_TINY;
                if (r->len > 0)
                    memcpy(rec.u.tiny, r->buf, r->len);
                r->bytes_done = r->len;
            }
            rec.index = ++p->s_index;
            ring_put(p->out_ring, size, head, &rec, sizeof(rec));
            head += GW_SHM_LINE;
            t->moved++;
            if (direct) {
                /* The peer copies the payload; the send completes when it
                 * counts the message in direct_done. */
                GW_SHM_REQ_INDEX(r) = ++p->s_direct;
                gw__req_queue_pop(&p->sq_head, &p->sq_tail);
                gw__req_queue_push(&p->dq_head, &p->dq_tail, r);
                continue;
            }
            GW_SHM_REQ_INDEX(r) = rec.index;
            p->s_warm = warm_bytes(r->len, GW_SHM_WARM_SEND_MAX);
            p->s_hdr_done = 1;
            p->s_done = 0;
        }
        uint64_t body = gw__shm_body(r->len);
        while (p->s_done < body) {
            uint64_t room = size - (head - tail);
            if (room < body - p->s_done && room < GW_SHM_PIECE) {
                tail = p->s_tail = atomic_load_explicit(&p->out->tail, memory_order_acquire);
                room = size - (head - tail);
                if (room == 0)
                    break;
            }
            uint64_t n = body - p->s_done;
            if (n > room)
                n = room;
            if (n > GW_SHM_PIECE)
                n = GW_SHM_PIECE;
            if (p->s_done < r->len) {
                size_t data = r->len - p->s_done < n ? r->len - p->s_done : (size_t)n;
                gw__shm_before_copy(t, data);
                ring_put(p->out_ring, size, head, (const uint8_t *)r->buf + p->s_done, data);
                r->bytes_done += data;
            }
            head += n;
            p->s_done += n;
            t->moved += n;
            /* Publish each piece at once: the receiver copies it out while
             * we copy the next. */
            atomic_store_explicit(&p->out->head, head, memory_order_release);
            p->s_head = head;
            gw__shm_bell_due(t, p, n);
        }
        if (p->s_done < body)
            break;
        gw__req_queue_pop(&p->sq_head, &p->sq_tail);
        p->s_hdr_done = 0;
        if (r->flags & GW_REQ_RECEIPT) {
            /* In the ring, but not yet accepted: wait for the receipt. */
            gw__req_queue_push(&p->aq_head, &p->aq_tail, r);
            t->moved++;
            continue;
        }
        complete(t, r);
    }
    if (head != p->s_head) {
        atomic_store_explicit(&p->out->head, head, memory_order_release);
        p->s_head = head;
        gw__shm_bell_due(t, p, 0);
    }
}

/* A small send posted while nothing waits before it goes into the ring at
 * once (shm_post): it leaves before the caller starts to wait, and the
 * wait's first round need not return early just for having moved it. */
void gw__shm_send_now(gw_shm_t *t, gw_shm_peer_t *p)
{
    send_peer(t, p);
    gw__shm_ring_due_bells(t);
}

/* ---- receive side --------------------------------------------------------------- */

/* The next header of the incoming ring, into r_hdr (held). */
static gw_status_t take_header(gw_shm_t *t, gw_shm_peer_t *p, uint64_t *tail)
{
    ring_get(p->in_ring, p->ring_bytes, *tail, &p->r_hdr, sizeof(p->r_hdr));
    const gw_shm_rec_t *h = &p->r_hdr;
    /* A tiny message is INLINE, and every INLINE one that short is tiny:
     * anything else would have us read past u.tiny, or wait for a body
     * that never comes. */
    int tiny_ok =
        !(h->flags & GW_SHM_REC_TINY) == !(h->kind == GW_SHM_INLINE && h->len <= GW_SHM_TINY_MAX);
    if (h->magic != GW_SHM_REC_MAGIC || (h->kind != GW_SHM_INLINE && h->kind != GW_SHM_DIRECT) ||
        h->index != p->r_index + 1 || !tiny_ok)
        return gw__shm_peer_fail(t, p, GW_ERR_PROTOCOL,
                                 "wrote garbage into our ring (magic 0x%08x, kind %u, flags "
                                 "0x%x, len %llu, index %llu, expected index %llu)",
                                 (unsigned)h->magic, (unsigned)h->kind, (unsigned)h->flags,
                                 (unsigned long long)h->len, (unsigned long long)h->index,
                                 (unsigned long long)(p->r_index + 1));
    p->r_index++;
    p->r_warm = warm_bytes(h->len, GW_SHM_WARM_RECV_MAX);
    *tail += GW_SHM_LINE;
    p->r_held = 1;
    t->moved++;
    return GW_OK;
}

/* Give the held header to the next posted receive, after checking that
 * they agree: no payload is copied before this. */
static gw_status_t claim(gw_shm_t *t, gw_shm_peer_t *p)
{
    gw_request_t *r = p->rq_head;
    gw_msg_tag_t got = {.seq = p->r_hdr.seq, .sig = p->r_hdr.sig, .comm_id = p->r_hdr.comm_id};
    gw_status_t st = gw__transport_check_match(&t->base, r, &got, p->r_hdr.len);
    if (st != GW_OK)
        return st;
    if (p->r_hdr.flags & GW_SHM_REC_RECEIPT) {
        /* The sender waits for our word: accepted, before any payload. */
        atomic_store_explicit(&p->in->accepted, p->r_hdr.index, memory_order_release);
        gw__shm_bell_due(t, p, 0);
    }
    p->r_held = 0;
    p->rreq = r;
    p->r_done = 0;
    if ((p->r_hdr.flags & GW_SHM_REC_TINY) && r->len > 0) {
        memcpy(r->buf, p->r_hdr.u.tiny, r->len);
        r->bytes_done = r->len;
    }
    return GW_OK;
}

static void finish_recv(gw_shm_t *t, gw_shm_peer_t *p)
{
    gw_request_t *r = gw__req_queue_pop(&p->rq_head, &p->rq_tail);
    p->rreq = NULL;
    complete(t, r);
}

/* The sender aborted or closed while we read its memory: what we read may
 * be from a buffer it no longer owned. */
static gw_status_t sender_left(gw_shm_t *t, gw_shm_peer_t *p)
{
    int32_t ab = atomic_load_explicit(&p->its->abort_status, memory_order_acquire);
    if (ab != 0)
        return gw__shm_peer_aborted(t, p, ab);
    if (atomic_load_explicit(&p->its->goodbye, memory_order_acquire))
        return gw__shm_peer_fail(t, p, GW_ERR_REMOTE,
                                 "closed its communicator while we read a message from it "
                                 "(seq %llu, len %llu)",
                                 (unsigned long long)p->r_hdr.seq,
                                 (unsigned long long)p->r_hdr.len);
    return GW_OK;
}

/* One piece of a DIRECT payload, read from the sender's memory. */
static gw_status_t read_direct(gw_shm_t *t, gw_shm_peer_t *p)
{
    gw_request_t *r = p->rreq;
    size_t want = r->len - p->r_done;
    if (want > GW_SHM_DIRECT_PIECE)
        want = GW_SHM_DIRECT_PIECE;
    if (want > 0) {
        struct iovec local = {(uint8_t *)r->buf + p->r_done, want};
        struct iovec remote = {(void *)(uintptr_t)(p->r_hdr.u.addr + p->r_done), want};
        gw__shm_before_copy(t, want);
        ssize_t n = process_vm_readv(p->pid, &local, 1, &remote, 1, 0);
        if (n < 0 && errno == EINTR)
            return GW_OK;
        if (n <= 0) {
            int err = n < 0 ? errno : EFAULT;
            gw_status_t st = sender_left(t, p);
            if (st != GW_OK)
                return st;
            errno = err;
            if (err == ESRCH)
                return gw__shm_peer_fail(t, p, GW_ERR_REMOTE,
                                         "died while we read a message from it (seq %llu): "
                                         "its process is gone",
                                         (unsigned long long)p->r_hdr.seq);
            return gw__shm_peer_fail(t, p, err == EFAULT ? GW_ERR_PROTOCOL : GW_ERR_SYSTEM,
                                     "single-copy read of %zu bytes at 0x%llx (seq %llu) "
                                     "failed: %m",
                                     want, (unsigned long long)(p->r_hdr.u.addr + p->r_done),
                                     (unsigned long long)p->r_hdr.seq);
        }
        p->r_done += (size_t)n;
        r->bytes_done = p->r_done;
        t->moved += (uint64_t)n;
    }
    if (p->r_done < r->len)
        return GW_OK;
    gw_status_t st = sender_left(t, p);
    if (st != GW_OK)
        return st;
    uint64_t done = atomic_load_explicit(&p->in->direct_done, memory_order_relaxed);
    atomic_store_explicit(&p->in->direct_done, done + 1, memory_order_release);
    gw__shm_bell_due(t, p, 0);
    finish_recv(t, p);
    return GW_OK;
}

/* New bytes in the ring, up to GW_SHM_FETCH_AHEAD of them (a header and
 * 2 KiB): ask for all their lines at once. The header says how long the
 * payload is only once it has been read, so reading it and then the
 * payload puts one miss after the other: a ping-pong of 68 bytes (a second
 * payload line) took 0.19 us more than one of 64 (2 ranks bound, 0.61
 * against 0.42); with the lines asked for at once 128 B takes 0.43, and
 * 512 B and 1 KiB about 0.08 us less than before, while from 2 KiB the
 * hardware's own prefetch already keeps up. The lines
 * are the sender's, published with head: prefetching them reads nothing
 * that is not there yet. */
#define GW_SHM_FETCH_AHEAD (33 * GW_SHM_LINE)
static void fetch_ahead(gw_shm_peer_t *p, uint64_t tail, uint64_t head)
{
    if (head == p->r_fetched)
        return;
    uint64_t from = p->r_fetched > tail && p->r_fetched < head ? p->r_fetched : tail;
    p->r_fetched = head;
    if (head - from > GW_SHM_FETCH_AHEAD)
        return;
    for (uint64_t o = from; o < head; o += GW_SHM_LINE)
        __builtin_prefetch(p->in_ring + (o & (p->ring_bytes - 1)));
}

static gw_status_t recv_peer(gw_shm_t *t, gw_shm_peer_t *p)
{
    const uint64_t size = p->ring_bytes;
    uint64_t tail = p->r_tail; /* as we last published it: ours to write */
    if (!p->rreq && !p->r_held)
        for (uint64_t o = tail; o < tail + p->r_warm; o += GW_SHM_LINE)
            __builtin_prefetch(p->in_ring + (o & (size - 1)));
    uint64_t head = atomic_load_explicit(&p->in->head, memory_order_acquire);
    gw_status_t st = GW_OK;
    fetch_ahead(p, tail, head);
    for (;;) {
        if (!p->rreq) {
            if (!p->r_held) {
                if (head - tail < GW_SHM_LINE)
                    break;
                st = take_header(t, p, &tail);
                if (st != GW_OK)
                    break;
            }
            if (!p->rq_head)
                break; /* read-ahead: the payload waits for its receive */
            st = claim(t, p);
            if (st != GW_OK)
                break;
        }
        gw_request_t *r = p->rreq;
        if (p->r_hdr.kind == GW_SHM_DIRECT) {
            /* One piece per round, so other peers get their turn. */
            st = read_direct(t, p);
            if (st != GW_OK || p->rreq)
                break;
            continue;
        }
        uint64_t body = gw__shm_body(r->len);
        if (p->r_done == body) {
            finish_recv(t, p);
            continue;
        }
        uint64_t avail = head - tail;
        if (avail == 0) {
            head = atomic_load_explicit(&p->in->head, memory_order_acquire);
            avail = head - tail;
            if (avail == 0)
                break;
        }
        uint64_t n = body - p->r_done;
        if (n > avail)
            n = avail;
        if (n > GW_SHM_PIECE)
            n = GW_SHM_PIECE;
        if (p->r_done < r->len) {
            size_t data = r->len - p->r_done < n ? r->len - p->r_done : (size_t)n;
            gw__shm_before_copy(t, data);
            ring_get(p->in_ring, size, tail, (uint8_t *)r->buf + p->r_done, data);
            r->bytes_done += data;
        }
        tail += n;
        p->r_done += n;
        t->moved += n;
        atomic_store_explicit(&p->in->tail, tail, memory_order_release);
        p->r_tail = tail;
        gw__shm_bell_due(t, p, n);
    }
    if (tail != p->r_tail) {
        atomic_store_explicit(&p->in->tail, tail, memory_order_release);
        p->r_tail = tail;
        gw__shm_bell_due(t, p, 0);
    }
    return st;
}

/* ---- what the peer says about itself ---------------------------------------------- */

static gw_status_t check_peer(gw_shm_t *t, gw_shm_peer_t *p, int liveness)
{
    int32_t ab = atomic_load_explicit(&p->its->abort_status, memory_order_acquire);
    if (ab != 0) {
        /* What it accepted before it aborted completes first (it published
         * the receipt before the abort). */
        finish_accepted(t, p);
        return gw__shm_peer_aborted(t, p, ab);
    }
    if (!p->goodbye && atomic_load_explicit(&p->its->goodbye, memory_order_acquire)) {
        /* Everything it sent before its goodbye is in the ring by now. */
        uint64_t head = atomic_load_explicit(&p->in->head, memory_order_acquire);
        uint64_t tail = atomic_load_explicit(&p->in->tail, memory_order_relaxed);
        if (head == tail && !p->r_held && !p->rreq)
            p->goodbye = 1;
    }
    if (p->goodbye) {
        /* The peer marks a DIRECT send read before it says goodbye, but this
         * round's finish_direct() may have looked before it did: look again
         * now that its goodbye is seen (acquire), or a send it read in full
         * would be failed as still pending. */
        finish_direct(t, p);
        finish_accepted(t, p);
        if (p->rq_head)
            return gw__shm_peer_fail(t, p, GW_ERR_REMOTE,
                                     "already closed its communicator, but a receive from it is "
                                     "posted (seq %llu, len %zu)",
                                     (unsigned long long)p->rq_head->tag.seq, p->rq_head->len);
        gw_request_t *s = p->sq_head ? p->sq_head : p->dq_head ? p->dq_head : p->aq_head;
        if (s)
            return gw__shm_peer_fail(t, p, GW_ERR_REMOTE,
                                     "already closed its communicator, but a send to it is "
                                     "pending (seq %llu, len %zu)",
                                     (unsigned long long)s->tag.seq, s->len);
        return GW_OK;
    }
    if (liveness && gw__shm_peer_gone(p)) {
        /* It may have aborted, or said goodbye, just before it exited. */
        ab = atomic_load_explicit(&p->its->abort_status, memory_order_acquire);
        if (ab != 0)
            return gw__shm_peer_aborted(t, p, ab);
        if (atomic_load_explicit(&p->its->goodbye, memory_order_acquire))
            return GW_OK; /* its last messages may still be in the ring */
        return gw__shm_peer_fail(t, p, GW_ERR_REMOTE,
                                 "died: its process is gone, without a goodbye");
    }
    return GW_OK;
}

static gw_status_t check_conflicts(gw_shm_t *t, const gw_msg_tag_t *current)
{
    for (int i = 0; i < t->base.size; i++) {
        gw_shm_peer_t *p = &t->peers[i];
        if (!p->served || !p->r_held)
            continue;
        gw_msg_tag_t pending = {
            .seq = p->r_hdr.seq, .sig = p->r_hdr.sig, .comm_id = p->r_hdr.comm_id};
        gw_status_t st = gw__transport_check_pending(&t->base, p->rank, "sent a message", &pending,
                                                     p->r_hdr.len, current);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

/* One round over every peer; now_ns is the caller's latest clock reading
 * (liveness and the door are looked at by the millisecond: a reading a
 * round old is good enough, and a clock read costs about as much as the
 * rest of an idle round). */
static gw_status_t round_peers(gw_shm_t *t, const gw_msg_tag_t *current, int64_t now_ns)
{
    int liveness = 0;
    int64_t now_ms = now_ns / 1000000;
    if (now_ms >= t->next_liveness_ms) {
        liveness = 1;
        t->next_liveness_ms = now_ms + GW_SHM_LIVENESS_MS;
    }
    if (t->door_fd >= 0 && (t->lazy || t->nconnecting > 0) && now_ms != t->door_seen_ms) {
        /* Once a millisecond: a system call per round would cost the
         * rounds that move small messages more than they move. Eagerly,
         * every pair is up once connect() returned: nothing more comes
         * through the door that we would answer. */
        t->door_seen_ms = now_ms;
        gw_status_t st = gw__shm_door_answer(t);
        if (st != GW_OK)
            return st;
    }
    for (int i = 0; i < t->base.size; i++) {
        gw_shm_peer_t *p = &t->peers[i];
        if (!p->served)
            continue;
        if (p->conn != GW_SHM_C_DONE) {
            /* Lazily connected pairs come up here, one step per round. */
            if (p->conn == GW_SHM_C_IDLE)
                continue;
            gw_status_t st = p->knock_due ? gw__shm_knock(t, p) : GW_OK;
            if (st == GW_OK)
                st = gw__shm_connect_step(t, p, liveness);
            if (st != GW_OK)
                return gw__shm_connect_failed(t, p, st);
            if (p->conn != GW_SHM_C_DONE)
                continue;
        }
        finish_direct(t, p);
        finish_accepted(t, p);
        send_peer(t, p);
        gw_status_t st = recv_peer(t, p);
        if (st == GW_OK)
            st = check_peer(t, p, liveness);
        if (st != GW_OK)
            return st;
    }
    return current ? check_conflicts(t, current) : GW_OK;
}

gw_status_t gw__shm_round(gw_shm_t *t, const gw_msg_tag_t *current, int64_t now_ns)
{
    gw_status_t st = round_peers(t, current, now_ns);
    gw__shm_ring_due_bells(t); /* also after a failure: what we published stands */
    return st;
}
