/*
 * base.c - the part of every transport that does not depend on how bytes
 * move (contract in base.h).
 *
 * The failure model is the transport contract's (transport.h): the first
 * failure breaks the whole transport. It is logged once, at ERROR, where it
 * is detected, naming the peer; it becomes the sticky status that every
 * later call returns; and every pending request completes with it, so no
 * caller waits for a request that can no longer finish. Later failures
 * (often consequences of the first: a reset after an abort) are neither
 * logged nor allowed to replace the first one's status.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/base.h"

gw_status_t gw__transport_open_base(const gw__transport_class_t *cls,
                                    const gw_transport_params_t *params, size_t impl_size,
                                    gw_transport_t **out)
{
    const gw_logger_t *lg = params->log;
    if (params->size < 1 || params->rank < 0 || params->rank >= params->size) {
        GW_ERROR(lg, cls->subsys, "rank %d of %d ranks is not a valid rank", params->rank,
                 params->size);
        return GW_ERR_INVALID_ARG;
    }
    gw_transport_t *t = calloc(1, impl_size);
    if (!t) {
        GW_ERROR(lg, cls->subsys, "out of memory for the transport");
        return GW_ERR_NO_MEMORY;
    }
    t->ops = cls->ops;
    t->name = cls->name;
    t->log = lg;
    t->rank = params->rank;
    t->size = params->size;
    t->cls = cls;
    t->failed = GW_OK;
    t->culprit = -1;
    t->origin = -1;
    t->blame = GW_BLAME_NONE;
    *out = t;
    return GW_OK;
}

static gw_status_t post(gw_transport_t *t, gw_request_t *req, gw_req_kind_t kind)
{
    const char *what = kind == GW_REQ_SEND ? "isend" : "irecv";
    if (!t || !req)
        return GW_ERR_INVALID_ARG;
    if (req->peer < 0 || req->peer >= t->size || req->peer == t->rank ||
        (req->len > 0 && !req->buf) ||
        (t->cls->peer_usable && !t->cls->peer_usable(t, req->peer))) {
        GW_ERROR(t->log, t->cls->subsys,
                 "%s: invalid request (peer %d of %d ranks, we are %d; len %zu, buffer %p)", what,
                 req->peer, t->size, t->rank, req->len, req->buf);
        return GW_ERR_INVALID_ARG;
    }
    req->kind = kind;
    req->complete = 0;
    req->status = GW_OK;
    req->bytes_done = 0;
    req->next = NULL;
    memset(req->priv, 0, sizeof(req->priv));
    if (t->failed != GW_OK) {
        gw__req_complete(req, t->failed);
        return t->failed;
    }
    if (!t->connected) {
        GW_ERROR(t->log, t->cls->subsys, "%s before connect() succeeded", what);
        return GW_ERR_INVALID_ARG;
    }
    return t->cls->post(t, req);
}

gw_status_t gw__transport_isend(gw_transport_t *t, gw_request_t *req)
{
    return post(t, req, GW_REQ_SEND);
}

gw_status_t gw__transport_irecv(gw_transport_t *t, gw_request_t *req)
{
    return post(t, req, GW_REQ_RECV);
}

gw_status_t gw__transport_post_refused(gw_transport_t *t, const gw_request_t *req,
                                       const char *state)
{
    return gw__transport_peer_fail(
        t, req->peer, GW_ERR_REMOTE, "%s, but a %s for it was posted (seq %llu, len %zu)", state,
        req->kind == GW_REQ_SEND ? "send" : "receive", (unsigned long long)req->tag.seq, req->len);
}

gw_status_t gw__transport_connect_check(gw_transport_t *t, const uint8_t *all_addrs, int started)
{
    if (!t || !all_addrs)
        return GW_ERR_INVALID_ARG;
    if (t->failed != GW_OK)
        return t->failed;
    if (t->connected || started) {
        GW_ERROR(t->log, t->cls->subsys, "connect() called twice");
        return GW_ERR_INVALID_ARG;
    }
    return GW_OK;
}

gw_status_t gw__transport_progress_check(gw_transport_t *t)
{
    if (!t)
        return GW_ERR_INVALID_ARG;
    if (t->failed != GW_OK)
        return t->failed;
    if (!t->connected) {
        GW_ERROR(t->log, t->cls->subsys, "progress() called before connect() succeeded");
        return GW_ERR_INVALID_ARG;
    }
    return GW_OK;
}

gw_status_t gw__transport_progress(gw_transport_t *t, const gw_msg_tag_t *current, int wait_ms)
{
    gw_status_t st = gw__transport_progress_check(t);
    return st != GW_OK ? st : t->cls->progress(t, current, wait_ms);
}

static gw_status_t failv(gw_transport_t *t, gw_status_t st, const char *prefix, const char *fmt,
                         va_list ap)
{
    if (t->failed != GW_OK)
        return t->failed;
    if (fmt && t->log && t->log->level >= GW_LOG_ERROR) {
        char msg[1024];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        GW_ERROR(t->log, t->cls->subsys, "%s%s%s", prefix ? prefix : "", prefix ? " " : "", msg);
    }
    t->failed = st;
    if (t->cls->fail_pending)
        t->cls->fail_pending(t, st);
    return st;
}

gw_status_t gw__transport_fail(gw_transport_t *t, gw_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gw_status_t ret = failv(t, st, NULL, fmt, ap);
    va_end(ap);
    return ret;
}

gw_status_t gw__transport_peer_fail(gw_transport_t *t, int peer, gw_status_t st, const char *fmt,
                                    ...)
{
    char who[160] = "";
    int saved_errno = errno; /* the message may use %m */
    if (t->failed == GW_OK) {
        t->cls->describe_peer(t, peer, who, sizeof(who));
        t->culprit = peer;
        t->origin = t->rank;
        t->blame = st == GW_ERR_MISMATCH || st == GW_ERR_PROTOCOL || st == GW_ERR_AUTH
                       ? GW_BLAME_PEER
                   : st == GW_ERR_TIMEOUT ? GW_BLAME_TIMEOUT
                                          : GW_BLAME_LOST;
    }
    errno = saved_errno;
    va_list ap;
    va_start(ap, fmt);
    gw_status_t ret = failv(t, st, who, fmt, ap);
    va_end(ap);
    return ret;
}

gw_status_t gw__transport_peer_aborted(gw_transport_t *t, int peer, const gw_abort_info_t *got)
{
    gw_status_t st = got->status == GW_OK ? GW_ERR_ABORTED : got->status;
    int culprit = got->culprit >= 0 && got->culprit < t->size ? got->culprit : peer;
    int origin = got->origin >= 0 && got->origin < t->size ? got->origin : peer;
    if (t->failed != GW_OK)
        return t->failed;
    char also[96] = "";
    if (culprit != peer)
        snprintf(also, sizeof(also), ", blaming rank %d (first reported by rank %d)", culprit,
                 origin);
    else if (origin != peer)
        snprintf(also, sizeof(also), " (first reported by rank %d)", origin);
    gw_status_t ret =
        gw__transport_peer_fail(t, peer, st, "aborted: %s%s", gw_status_str(st), also);
    t->culprit = culprit;
    t->origin = origin;
    t->blame = GW_BLAME_ABORT;
    return ret;
}

gw_abort_info_t gw__transport_abort_begin(gw_transport_t *t, const gw_abort_info_t *why)
{
    gw_abort_info_t tell = {.status = GW_ERR_ABORTED, .origin = t->rank, .culprit = -1};
    if (why) {
        if (why->status != GW_OK)
            tell.status = why->status;
        if (why->origin >= 0 && why->origin < t->size)
            tell.origin = why->origin;
        if (why->culprit >= 0 && why->culprit < t->size)
            tell.culprit = why->culprit;
    }
    if (t->failed == GW_OK) {
        gw__transport_fail(t, GW_ERR_ABORTED, NULL);
        t->culprit = tell.culprit;
        t->origin = tell.origin;
        t->blame = tell.culprit == t->rank ? GW_BLAME_SELF : GW_BLAME_ABORT;
    }
    return tell;
}

int gw__transport_abort_rank(int64_t wire, int size)
{
    return wire >= 0 && wire < size ? (int)wire : -1;
}

/* ", of communicator 0x..." for a sub-communicator's tag, nothing for a
 * root's (comm id 0), in the messages below. */
static const char *comm_note(const gw_msg_tag_t *tag, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (tag->comm_id)
        snprintf(buf, cap, ", of communicator 0x%08x", (unsigned)tag->comm_id);
    return buf;
}

gw_status_t gw__transport_check_pending(gw_transport_t *t, int peer, const char *what,
                                        const gw_msg_tag_t *pending, uint64_t len,
                                        const gw_msg_tag_t *current)
{
    if (!gw__tag_conflicts(pending, current))
        return GW_OK;
    char note[40];
    return gw__transport_peer_fail(
        t, peer, GW_ERR_MISMATCH,
        "%s of collective (seq %llu, sig 0x%08x, len %llu) while this rank is in collective "
        "(seq %llu, sig 0x%08x)%s: the ranks called collectives in a different order or with "
        "different arguments",
        what, (unsigned long long)pending->seq, (unsigned)pending->sig, (unsigned long long)len,
        (unsigned long long)current->seq, (unsigned)current->sig,
        comm_note(current, note, sizeof(note)));
}

gw_status_t gw__transport_check_match(gw_transport_t *t, const gw_request_t *r,
                                      const gw_msg_tag_t *got, uint64_t len)
{
    if (gw__tag_equal(got, &r->tag) && len == r->len)
        return GW_OK;
    /* Messages of communicators that share this transport are matched in
     * posting order too: one of another communicator here means the ranks
     * called them in different orders (two threads driving a communicator
     * and one split from it, most often), not that they disagree about a
     * call's arguments. That use is refused (gradwire.h), with its own
     * status, so nobody takes it for a mismatch. */
    if (got->comm_id != r->tag.comm_id)
        return gw__transport_peer_fail(
            t, r->peer, GW_ERR_UNSUPPORTED,
            "sent a message of communicator 0x%08x (seq %llu) where this rank waits for one of "
            "communicator 0x%08x (seq %llu): communicators that share a transport (made from "
            "one another by gw_comm_split or gw_comm_dup) were called in a different order on "
            "these ranks, or from two threads at once; call them in one order on every rank, "
            "from one thread at a time (gradwire.h)",
            (unsigned)got->comm_id, (unsigned long long)got->seq, (unsigned)r->tag.comm_id,
            (unsigned long long)r->tag.seq);
    char want_note[40], got_note[40];
    return gw__transport_peer_fail(
        t, r->peer, GW_ERR_MISMATCH,
        "sent a message that does not match the receive posted for it: expected (seq %llu, sig "
        "0x%08x, len %zu)%s, received (seq %llu, sig 0x%08x, len %llu)%s",
        (unsigned long long)r->tag.seq, (unsigned)r->tag.sig, r->len,
        comm_note(&r->tag, want_note, sizeof(want_note)), (unsigned long long)got->seq,
        (unsigned)got->sig, (unsigned long long)len, comm_note(got, got_note, sizeof(got_note)));
}

gw_status_t gw__transport_abort_status(int64_t wire)
{
    if (wire <= 0 || wire > INT32_MAX)
        return GW_ERR_ABORTED;
    gw_status_t st = (gw_status_t)wire;
    if (strcmp(gw_status_name(st), "GW_UNKNOWN_STATUS") == 0)
        return GW_ERR_ABORTED;
    return st;
}

size_t gw__transport_nparts(size_t len, size_t min_part, int lanes)
{
    size_t n = len / min_part;
    if (n < 1)
        n = 1;
    if (n > (size_t)lanes)
        n = (size_t)lanes;
    return n;
}

void gw__transport_part_range(size_t len, size_t nparts, size_t k, size_t *off, size_t *plen)
{
    size_t base = len / nparts, rem = len % nparts;
    *off = k * base + (k < rem ? k : rem);
    *plen = base + (k < rem ? 1 : 0);
}

/* ---- request queues ------------------------------------------------------ */

void gw__req_queue_push(gw_request_t **head, gw_request_t **tail, gw_request_t *r)
{
    r->next = NULL;
    if (*tail)
        (*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

void gw__req_queue_remove(gw_request_t **head, gw_request_t **tail, gw_request_t *r)
{
    gw_request_t *prev = NULL;
    for (gw_request_t *q = *head; q; prev = q, q = q->next) {
        if (q != r)
            continue;
        if (prev)
            prev->next = q->next;
        else
            *head = q->next;
        if (*tail == q)
            *tail = prev;
        q->next = NULL;
        return;
    }
}

gw_request_t *gw__req_queue_pop(gw_request_t **head, gw_request_t **tail)
{
    gw_request_t *r = *head;
    *head = r->next;
    if (!*head)
        *tail = NULL;
    r->next = NULL;
    return r;
}

void gw__req_queue_fail(gw_request_t **head, gw_request_t **tail, gw_status_t st)
{
    gw_request_t *r = *head;
    while (r) {
        gw_request_t *next = r->next;
        r->next = NULL;
        gw__req_complete(r, st);
        r = next;
    }
    *head = *tail = NULL;
}
