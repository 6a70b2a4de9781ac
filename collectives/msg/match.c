/*
 * match.c - MPI-style matching for the tagged point-to-point calls
 * (gw_isend_tagged, gw_irecv_tagged and their blocking forms).
 *
 * The transports match strictly per pair of ranks in posting order: the
 * n-th receive posted for a peer takes the n-th message it sent, whatever
 * that is. A receive for "any source" or "any tag" cannot be posted that
 * way, since it would take whatever the pair carries next (a collective's
 * message, another tag). So a tagged receive is not posted to the
 * transport at all until the engine has seen, by the transport's peek
 * (transport.h), that the peer's next message is a tagged one of this
 * communicator: its transport tag carries the user's tag and a signature
 * of count and dtype, in a comm id of its own (gw__match_tag), and its
 * length is the header's. Then, and only then, a transport receive of
 * exactly that tag and length is posted, so no other message of the pair
 * is ever taken.
 *
 * Matching, as MPI's: each message seen goes to the earliest posted
 * receive that accepts its source and tag (receives are kept in posting
 * order), or, when none does, is taken in anyway, into a heap buffer of
 * the unexpected queue, in the order the messages were seen. A new
 * receive first looks through that queue, earliest first. Since one
 * peer's messages are seen in the order it sent them, messages of one
 * source and one tag never overtake each other. Several peers' messages
 * that become visible in one progress round are seen lowest rank first
 * from a start that rotates each round, so no sender is starved.
 *
 * Taking unexpected messages in is what lets a later message of the same
 * pair (another tag, a collective's) pass; its memory is bounded by
 * GW_P2P_UNEXPECTED_BYTES per communicator, and a message past the bound
 * fails the communicator with GW_ERR_NO_MEMORY naming its sender: never a
 * silent drop. Count and dtype are checked when a message meets its
 * receive (the signature and the length): GW_ERR_MISMATCH naming the
 * sender, whose send (or, under GW_P2P_SEND_STANDARD, a later call) fails
 * with that verdict (the abort carries it). Under GW_P2P_SEND_SYNC sends
 * ask for a receipt, so one completes once the receiver took the message
 * in, matched or held; under GW_P2P_SEND_STANDARD when its buffer may be
 * reused.
 */
#include "collectives/msg/match.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/msg/p2p.h"
#include "collectives/msg/tag.h"

/* A message taken in before any receive wanted it. */
typedef struct gw__unexp {
    struct gw__unexp *next;
    int source; /* communicator rank */
    int tag;
    uint32_t sig;
    size_t len;
    void *buf;
    gw_request_t req;    /* the transport receive landing it in buf */
    gw_handle_t *waiter; /* the receive it was matched to while landing */
    int taken;           /* out of the queue: a receive took it while it landed */
} gw__unexp_t;

typedef struct gw_match {
    uint32_t space;                    /* the comm id of tagged messages */
    gw_handle_t *posted, *posted_tail; /* receives not matched yet, posting order */
    gw__unexp_t *unexp, *unexp_tail;   /* held messages, in the order seen */
    size_t unexp_bytes;
    int start; /* the peer the next pass looks at first */
    /* Per communicator rank: the transport receive in flight for that
     * peer's next message (NULL: none), and the held message it lands. */
    gw_request_t **busy;
    gw__unexp_t **busy_u;
} gw_match_t;

gw_msg_tag_t gw__match_tag(gw_comm_t *comm, int tag, uint32_t sig)
{
    /* "tagd" and the communicator's id: apart from every real comm id but
     * by a 32-bit hash's chance, as the sub-communicators' ids are. */
    const uint64_t words[] = {0x74616764u, comm->id};
    gw_msg_tag_t t = {.seq = ((uint64_t)(uint32_t)tag << 32) | 1u,
                      .sig = sig,
                      .comm_id = gw__sig_words(words, 2)};
    return t;
}

static int tag_of(const gw_msg_tag_t *t) { return (int)(uint32_t)(t->seq >> 32); }

static gw_status_t engine(gw_comm_t *comm, gw_match_t **out)
{
    if (!comm->match) {
        gw_match_t *m = calloc(1, sizeof(*m));
        if (m) {
            m->busy = calloc((size_t)comm->size, sizeof(*m->busy));
            m->busy_u = calloc((size_t)comm->size, sizeof(*m->busy_u));
        }
        if (!m || !m->busy || !m->busy_u) {
            if (m) {
                free(m->busy);
                free(m->busy_u);
            }
            free(m);
            GW_ERROR(&comm->log, "api", "out of memory for the tagged messages' state");
            return gw__comm_fail(comm, GW_ERR_NO_MEMORY);
        }
        m->space = gw__match_tag(comm, 0, 0).comm_id;
        comm->match = m;
    }
    *out = comm->match;
    return GW_OK;
}

gw_status_t gw__match_send(gw_comm_t *comm, int peer, int tag, const void *buf, size_t len,
                           uint32_t sig, gw_request_t *req)
{
    gw_match_t *m = NULL;
    gw_status_t st = engine(comm, &m);
    if (st != GW_OK)
        return st;
    if (gw__transport_peek(comm->transport, gw__comm_to_root(comm, peer), &(gw_msg_tag_t){0},
                           &(size_t){0}) < 0) {
        GW_ERROR(&comm->log, "api",
                 "gw_isend_tagged: the %s transport to rank %d cannot carry tagged messages "
                 "(shared memory, TCP and verbs can)",
                 comm->transport->name, peer);
        return gw__comm_fail(comm, GW_ERR_UNSUPPORTED);
    }
    comm->tag = gw__match_tag(comm, tag, sig);
    /* The receiver takes it in by peek(): where only its clear-to-send
     * would tell it of the message (verbs), the transport announces it. */
    return gw__p2p_isend_public(comm, peer, buf, len, GW_REQ_ANNOUNCE, req);
}

static int accepts(const gw_handle_t *h, int source, int tag)
{
    return (h->tagged.source == GW_ANY_SOURCE || h->tagged.source == source) &&
           (h->tagged.tag == GW_ANY_TAG || h->tagged.tag == tag);
}

/* Count and dtype, as far as the message tells them: its signature and
 * its length. */
static gw_status_t check_fit(gw_comm_t *comm, const gw_handle_t *h, int source, int tag,
                             uint32_t sig, size_t len)
{
    if (sig == h->tagged.sig && len == h->req.len)
        return GW_OK;
    char from[16] = "any", want[16] = "any";
    if (h->tagged.source != GW_ANY_SOURCE)
        snprintf(from, sizeof(from), "%d", h->tagged.source);
    if (h->tagged.tag != GW_ANY_TAG)
        snprintf(want, sizeof(want), "%d", h->tagged.tag);
    GW_ERROR(&comm->log, "api",
             "rank %d sent a %zu-byte message with tag %d that does not fit the receive it "
             "matched (%zu elements, %zu bytes; source %s, tag %s): the ranks disagree about "
             "the message's count or dtype",
             source, len, tag, h->tagged.count, h->req.len, from, want);
    gw_comm_blame_t b = {.status = GW_ERR_MISMATCH,
                         .culprit = gw__comm_to_root(comm, source),
                         .origin = gw__comm_to_root(comm, comm->rank),
                         .kind = GW_BLAME_PEER,
                         .waiting_on = -1};
    return gw__comm_fail_with(comm, &b);
}

static void complete_recv(gw_handle_t *h, gw_status_t st)
{
    h->req.bytes_done = st == GW_OK ? h->req.len : 0;
    h->req.status = st;
    h->req.complete = 1;
}

/* h takes the held message u: at once if it has landed, else when it does. */
static gw_status_t take_held(gw_comm_t *comm, gw_handle_t *h, gw__unexp_t *u)
{
    gw_status_t st = check_fit(comm, h, u->source, u->tag, u->sig, u->len);
    if (st != GW_OK)
        return st;
    h->tagged.matched = 1;
    h->tagged.got = (gw_msg_status_t){.source = u->source, .tag = u->tag, .count = h->tagged.count};
    if (!u->req.complete) {
        u->waiter = h;
        h->tagged.from = u;
        return GW_OK;
    }
    gw_match_t *m = comm->match;
    for (int q = 0; q < comm->size; q++) /* landed, but the pump may not have seen it yet */
        if (m->busy_u[q] == u)
            m->busy[q] = NULL, m->busy_u[q] = NULL;
    if (u->len)
        memcpy(h->tagged.buf, u->buf, u->len);
    m->unexp_bytes -= u->len;
    free(u->buf);
    free(u);
    complete_recv(h, GW_OK);
    return GW_OK;
}

gw_status_t gw__match_recv(gw_comm_t *comm, gw_handle_t *h)
{
    gw_match_t *m = NULL;
    gw_status_t st = engine(comm, &m);
    if (st != GW_OK)
        return st;
    if (h->tagged.source != GW_ANY_SOURCE &&
        gw__transport_peek(comm->transport, gw__comm_to_root(comm, h->tagged.source),
                           &(gw_msg_tag_t){0}, &(size_t){0}) < 0) {
        GW_ERROR(&comm->log, "api",
                 "gw_irecv_tagged: the %s transport from rank %d cannot carry tagged messages "
                 "(shared memory, TCP and verbs can)",
                 comm->transport->name, h->tagged.source);
        return gw__comm_fail(comm, GW_ERR_UNSUPPORTED);
    }
    h->req.kind = GW_REQ_RECV;
    h->req.peer = gw__comm_to_root(comm, h->tagged.source); /* -1: any, until matched */
    for (gw__unexp_t **p = &m->unexp; *p; p = &(*p)->next) {
        gw__unexp_t *u = *p;
        if (u->waiter || !accepts(h, u->source, u->tag))
            continue;
        *p = u->next;
        if (m->unexp_tail == u) {
            m->unexp_tail = NULL;
            for (gw__unexp_t *v = m->unexp; v; v = v->next)
                m->unexp_tail = v;
        }
        u->next = NULL;
        u->taken = 1;
        h->req.peer = gw__comm_to_root(comm, u->source);
        return take_held(comm, h, u);
    }
    h->tagged.qnext = NULL;
    if (m->posted_tail)
        m->posted_tail->tagged.qnext = h;
    else
        m->posted = h;
    m->posted_tail = h;
    /* A message may already wait at the head of a pair. */
    return gw__match_pump(comm);
}

/* Unlink h from the posted receives (when there). */
static void unpost(gw_match_t *m, gw_handle_t *h)
{
    gw_handle_t *prev = NULL;
    for (gw_handle_t *q = m->posted; q; prev = q, q = q->tagged.qnext) {
        if (q != h)
            continue;
        if (prev)
            prev->tagged.qnext = q->tagged.qnext;
        else
            m->posted = q->tagged.qnext;
        if (m->posted_tail == q)
            m->posted_tail = prev;
        return;
    }
}

/* Peer q's next message is the tagged one with transport tag t and len
 * bytes: post the transport receive for it, into the receive it matches
 * or into a held buffer. */
static gw_status_t take_in(gw_comm_t *comm, gw_match_t *m, int q, const gw_msg_tag_t *t, size_t len)
{
    int tag = tag_of(t);
    gw_handle_t *h = m->posted;
    while (h && !accepts(h, q, tag))
        h = h->tagged.qnext;
    gw_status_t st;
    if (h) {
        if ((st = check_fit(comm, h, q, tag, t->sig, len)) != GW_OK)
            return st;
        unpost(m, h);
        h->tagged.matched = 1;
        h->tagged.got = (gw_msg_status_t){.source = q, .tag = tag, .count = h->tagged.count};
        comm->tag = *t;
        if ((st = gw__p2p_irecv_announced(comm, q, h->tagged.buf, len, &h->req)) != GW_OK)
            return st;
        m->busy[q] = &h->req;
        m->busy_u[q] = NULL;
        return GW_OK;
    }
    if (len > GW_P2P_UNEXPECTED_BYTES - m->unexp_bytes) {
        GW_ERROR(&comm->log, "api",
                 "rank %d sent a %zu-byte message with tag %d that no receive wants yet, and "
                 "this rank already holds %zu bytes of such messages: past the bound of %zu "
                 "(GW_P2P_UNEXPECTED_BYTES, match.h); post receives before the messages arrive",
                 q, len, tag, m->unexp_bytes, GW_P2P_UNEXPECTED_BYTES);
        gw_comm_blame_t b = {.status = GW_ERR_NO_MEMORY,
                             .culprit = gw__comm_to_root(comm, q),
                             .origin = gw__comm_to_root(comm, comm->rank),
                             .kind = GW_BLAME_PEER,
                             .waiting_on = -1};
        return gw__comm_fail_with(comm, &b);
    }
    gw__unexp_t *u = calloc(1, sizeof(*u));
    void *buf = len ? malloc(len) : NULL;
    if (!u || (len && !buf)) {
        free(u);
        free(buf);
        GW_ERROR(&comm->log, "api", "out of memory holding a %zu-byte message from rank %d", len,
                 q);
        return gw__comm_fail(comm, GW_ERR_NO_MEMORY);
    }
    *u = (gw__unexp_t){.source = q, .tag = tag, .sig = t->sig, .len = len, .buf = buf};
    comm->tag = *t;
    if ((st = gw__p2p_irecv_announced(comm, q, buf, len, &u->req)) != GW_OK) {
        free(buf);
        free(u);
        return st;
    }
    m->unexp_bytes += len;
    if (m->unexp_tail)
        m->unexp_tail->next = u;
    else
        m->unexp = u;
    m->unexp_tail = u;
    m->busy[q] = &u->req;
    m->busy_u[q] = u;
    return GW_OK;
}

/* Peer q's transport receive landed: a held message that a receive took
 * meanwhile goes to it now. */
static gw_status_t landed(gw_comm_t *comm, gw_match_t *m, int q)
{
    gw__unexp_t *u = m->busy_u[q];
    gw_status_t st = m->busy[q]->status;
    m->busy[q] = NULL;
    m->busy_u[q] = NULL;
    if (u && u->taken && !u->waiter) { /* its receive was abandoned */
        free(u->buf);
        free(u);
        u = NULL;
    }
    if (st != GW_OK)
        return gw__comm_fail(comm, st);
    if (u && u->waiter) {
        gw_handle_t *h = u->waiter;
        if (u->len)
            memcpy(h->tagged.buf, u->buf, u->len);
        m->unexp_bytes -= u->len;
        free(u->buf);
        free(u);
        h->tagged.from = NULL;
        complete_recv(h, GW_OK);
    }
    return GW_OK;
}

gw_status_t gw__match_pump(gw_comm_t *comm)
{
    gw_match_t *m = comm->match;
    if (!m || comm->failed != GW_OK || !comm->transport)
        return comm->failed;
    gw_msg_tag_t saved = comm->tag;
    gw_status_t st = GW_OK;
    int n = comm->size;
    for (int i = 0; i < n && st == GW_OK; i++) {
        int q = (m->start + i) % n;
        if (q == comm->rank)
            continue;
        if (m->busy[q] && m->busy[q]->complete && (st = landed(comm, m, q)) != GW_OK)
            break;
        if (m->busy[q])
            continue;
        gw_msg_tag_t t;
        size_t len;
        if (gw__transport_peek(comm->transport, gw__comm_to_root(comm, q), &t, &len) == 1 &&
            t.comm_id == m->space)
            st = take_in(comm, m, q, &t, len);
    }
    m->start = (m->start + 1) % n;
    comm->tag = saved;
    return st;
}

void gw__match_forget(gw_comm_t *comm, gw_handle_t *h)
{
    gw_match_t *m = comm->match;
    if (!m || !h->tagged.is_recv)
        return;
    unpost(m, h);
    if (h->tagged.from)
        h->tagged.from->waiter = NULL; /* it stays held; the communicator has failed */
    h->tagged.from = NULL;
    for (int q = 0; q < comm->size; q++)
        if (m->busy[q] == &h->req)
            m->busy[q] = NULL;
}

void gw__match_free(gw_comm_t *comm)
{
    gw_match_t *m = comm->match;
    if (!m)
        return;
    /* A held message still landing stays allocated: a sub-communicator's
     * transport lives on and may still write into it (a leak, on a
     * communicator destroyed in the middle of a message). */
    for (int q = 0; q < comm->size; q++) {
        gw__unexp_t *u = m->busy_u[q];
        if (u && u->taken && u->req.complete) {
            free(u->buf);
            free(u);
        }
    }
    while (m->unexp) {
        gw__unexp_t *u = m->unexp;
        m->unexp = u->next;
        if (u->req.complete) {
            free(u->buf);
            free(u);
        }
    }
    free(m->busy);
    free(m->busy_u);
    free(m);
    comm->match = NULL;
}
