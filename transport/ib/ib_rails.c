/*
 * ib_rails.c - several RDMA ports at once: multi-rail verbs.
 *
 * A rank with more than one rail (GW_IB_RAILS and GW_IB_HCA choose the
 * ports: ib_hca.c) opens one instance of the transport (ib.c) on each
 * port, with its own device context, protection domain, completion queue,
 * registrations and connections: nothing is shared between rails. The
 * transport the layers above see is the one made of them here (the
 * bookkeeping of sub-transports is transport/subs.h's, as the mux's). A
 * rank with one rail gets the plain instance, with no layer in between.
 *
 * Pairs. Rail i of a rank connects to rail i of its peer, and a pair uses
 * the rails both have (the fewer of the two counts): rail i's instance is
 * connected with an all-zero address ("not mine", transport.h) for the
 * peers that have no rail i. Ranks list their rails in GW_IB_HCA's order,
 * so with one setting for the job, rail i is the same fabric everywhere.
 * The address blob carries every rail's (ib_wire.h, GW_IB_RAIL_BLOB); it
 * opens with the first rail's, so a rank with one rail reads it as usual.
 *
 * Messages. A message of 2 x RAIL_PART_MIN (128 KiB) and more is cut into
 * as many parts as the pair has rails, at least 64 KiB each, one per
 * rail, every part with the message's tag; each rail may stripe its part
 * further over its own QPs (GW_IB_QPS). A smaller message goes whole to
 * one rail, the pair's rails dealt in turn: with s the lower rank of the
 * pair, the n-th message to a peer, and the n-th receive posted for it,
 * go to rail (s + n) mod rails (a cut one's first part does). Both ends
 * count in posting order, which the transport contract makes the same
 * (transport.h), so they pick the same rail without a word; the chunks of
 * a collective's step spread over the rails; and the pairs of a
 * hierarchical allreduce's shards, rank i of one host with rank i of
 * another, start on different rails, as NCCL gives GPU i NIC i.
 *
 * Tagged messages (GW_REQ_ANNOUNCE) go whole to the rail of their turn,
 * however large, and peek() looks at the rail of the pair's next receive
 * turn: the tagged calls see each message before they post its receive
 * (collectives/msg/match.c), and both ends still count every message.
 *
 * Matching. Each rail matches its share in posting order. A tag or length
 * that disagrees shows on the rail that carries it (a message cut on one
 * side and whole on the other leaves a part whose length disagrees) and
 * fails the job as on one rail. The parts of a send share a gate
 * (transport.h): each waits, after the receiver's clear-to-send for it
 * matched, until every part's did, so a receive that disagrees with any
 * part keeps its whole buffer untouched, as on one rail (two lengths a
 * byte apart cut into parts of which some agree).
 *
 * Registrations. Each rail registers the parts it carries in its own
 * protection domain, and over the turns every rail registers every part
 * of a buffer. The registration caches notice a buffer that was freed and
 * mapped again by a mark on the memory (ib_mr_cache.c), which is the
 * memory's, not a cache's: so a rail that registers memory with no mark
 * yet first announces it to every other cache of the process, the other
 * rails' included (ib_mr_caches.c), which drop their entries over it, or
 * their registrations of the old mapping would pass their check once the
 * new one is marked, and the data land in the old pages.
 *
 * Failure. A rail that fails (its port went down, a QP in error, a peer
 * gone) fails the whole transport with that rail's error, logged by the
 * rail naming its device and the peer, and the other rails are aborted:
 * every request completes, and the communicator's abort reaches every
 * peer. The job fails; it does not go on with fewer rails.
 *
 * Progress. Every rail moves without waiting first; when nothing moved and
 * the caller may wait, a single busy rail gets the whole wait (its own
 * spin, then sleep), and with several busy (a message striped over them),
 * or none, the rails spin together for GW_IB_SPIN_US, then sleep in one
 * poll() over all their fds (gw__ib_wait_many).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/byteorder.h"
#include "common/clock.h"
#include "transport/ib/ib_internal.h"
#include "transport/subs.h"

#define RAIL_PART_MIN (64 * 1024)

/* A message cut over the rails: the caller's request and its parts. */
typedef struct rail_stripe {
    struct rail_stripe *next;
    gw_request_t *outer;
    int n;
    gw_req_gate_t gate; /* sends: no part moves before every part matched */
    gw_request_t part[GW_IB_MAX_RAILS];
} rail_stripe_t;

typedef struct gw_ib_rails {
    gw_transport_t base;
    gw_sub_t sub[GW_IB_MAX_RAILS]; /* rail i's instance, sub[i].t */
    gw_subs_t subs;
    gw_ib_t *all[GW_IB_MAX_RAILS];  /* the rails' instances: their waits and caches */
    char port[GW_IB_MAX_RAILS][72]; /* "mlx5_1:1" */
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    uint8_t *shared;         /* per peer: the rails of the pair; 0 for ourselves */
    uint64_t *nsent, *nrecv; /* per peer: messages and receives posted */
    rail_stripe_t *stripes;  /* cut messages not complete yet */
    struct pollfd *pfds;
    int spin_us;
} gw_ib_rails_t;

static const gw__transport_class_t rails_class; /* at the end of the file */

static gw_ib_rails_t *rails_of(gw_transport_t *t)
{
    return gw__container_of(t, gw_ib_rails_t, base);
}

static void rails_free(gw_ib_rails_t *r)
{
    gw__subs_close(&r->subs); /* first: the rails may still hold the parts */
    while (r->stripes) {
        rail_stripe_t *s = r->stripes;
        r->stripes = s->next;
        free(s);
    }
    free(r->shared);
    free(r->nsent);
    free(r->nrecv);
    free(r->pfds);
    free(r);
}

/* Complete the cut messages whose parts all completed: the first part's
 * failure is the message's; the bytes are the parts' together. */
static void finish_stripes(gw_ib_rails_t *r)
{
    for (rail_stripe_t **at = &r->stripes; *at;) {
        rail_stripe_t *s = *at;
        size_t bytes = 0;
        int done = 1;
        gw_status_t st = GW_OK;
        for (int i = 0; i < s->n; i++) {
            bytes += s->part[i].bytes_done;
            done &= s->part[i].complete;
            if (s->part[i].complete && s->part[i].status != GW_OK && st == GW_OK)
                st = s->part[i].status;
        }
        s->outer->bytes_done = bytes;
        if (!done) {
            at = &s->next;
            continue;
        }
        /* A failed transport's parts fail with its first failure, or are
         * aborted because of it: the message gets the first failure. */
        gw__req_complete(s->outer, st != GW_OK && r->base.failed != GW_OK ? r->base.failed : st);
        *at = s->next;
        free(s);
    }
}

gw_status_t gw__ib_rails_open(const gw_transport_params_t *params, gw_transport_t **out,
                              uint8_t addr[GW_TRANSPORT_ADDR_MAX])
{
    gw_transport_t *first = NULL;
    gw_status_t st = gw__ib_open_port(params, NULL, &first, addr);
    if (st != GW_OK || gw__ib_of(first)->nrails <= 1) {
        *out = first;
        return st;
    }
    const gw_ib_t *t0 = gw__ib_of(first);
    const gw_logger_t *lg = params->log;
    gw_transport_t *base = NULL;
    if ((st = gw__transport_open_base(&rails_class, params, sizeof(gw_ib_rails_t), &base)) !=
        GW_OK) {
        first->ops->close(first);
        return st;
    }
    gw_ib_rails_t *r = rails_of(base);
    r->subs = (gw_subs_t){.owner = &r->base, .subsys = GW_IB_SUBSYS, .sub = r->sub};
    r->sub[0].t = first;
    r->subs.n = 1;
    r->spin_us = t0->cfg.spin_us;
    memcpy(r->blob, addr, GW_IB_ADDR_SIZE);
    int n = t0->nrails;
    for (int i = 0; i < n; i++)
        snprintf(r->port[i], sizeof(r->port[i]), "%s", t0->rail_spec[i] + 1); /* past '=' */
    for (int i = 1; i < n; i++) {
        uint8_t b[GW_TRANSPORT_ADDR_MAX];
        if ((st = gw__ib_open_port(params, t0->rail_spec[i], &r->sub[i].t, b)) != GW_OK) {
            GW_ERROR(lg, GW_IB_SUBSYS, "rail %d of %d (%s) did not open: %s", i, n, r->port[i],
                     gw_status_str(st));
            goto err;
        }
        r->subs.n++;
        memcpy(r->blob + GW_IB_RAIL_BLOB(i), b, GW_IB_ADDR_SIZE);
    }
    /* The rails register the same memory in turns; their caches keep
     * each other from trusting a replaced mapping as every cache of the
     * process does (ib_mr_caches.c). */
    for (int i = 0; i < n; i++)
        r->all[i] = gw__ib_of(r->sub[i].t);
    gw__put_be32(r->blob + GW_IB_RAILS_OFF, GW_IB_RAILS_MAGIC);
    r->blob[GW_IB_RAILS_OFF + 4] = (uint8_t)n;
    size_t size = (size_t)params->size;
    r->shared = calloc(size, sizeof(*r->shared));
    r->nsent = calloc(size, sizeof(*r->nsent));
    r->nrecv = calloc(size, sizeof(*r->nrecv));
    r->pfds = calloc((size_t)n * (size + 4), sizeof(*r->pfds));
    if (!r->shared || !r->nsent || !r->nrecv || !r->pfds) {
        GW_ERROR(lg, GW_IB_SUBSYS, "out of memory for %d rails to %zu ranks", n, size);
        st = GW_ERR_NO_MEMORY;
        goto err;
    }
    memcpy(addr, r->blob, GW_TRANSPORT_ADDR_MAX);
    char list[GW_IB_MAX_RAILS * 74] = "";
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "",
                 r->port[i]);
    GW_INFO(lg, GW_IB_SUBSYS,
            "%d rails: %s; messages of %d KiB and more are cut across the rails a pair shares", n,
            list, 2 * RAIL_PART_MIN / 1024);
    *out = base;
    return GW_OK;
err:
    rails_free(r);
    return st;
}

/* Rails in a peer's blob: 0 for an all-zero one (not this transport's
 * peer), 1 for a plain one, -1 for a count out of range. */
static int blob_rails(const uint8_t *b)
{
    static const uint8_t zero[GW_IB_ADDR_SIZE];
    if (memcmp(b, zero, sizeof(zero)) == 0)
        return 0;
    if (gw__get_be32(b + GW_IB_RAILS_OFF) != GW_IB_RAILS_MAGIC)
        return 1;
    int n = b[GW_IB_RAILS_OFF + 4];
    return n >= 2 && n <= GW_IB_MAX_RAILS ? n : -1;
}

static gw_status_t rails_connect(gw_transport_t *base, const uint8_t *all)
{
    gw_status_t st = gw__transport_connect_check(base, all, 0);
    if (st != GW_OK)
        return st;
    gw_ib_rails_t *r = rails_of(base);
    int size = r->base.size, me = r->base.rank;
    for (int p = 0; p < size; p++) {
        int n = p == me ? 0 : blob_rails(all + (size_t)p * GW_TRANSPORT_ADDR_MAX);
        if (n < 0) {
            GW_ERROR(r->base.log, GW_IB_SUBSYS,
                     "the verbs address of rank %d lists %u rails (at most %d): do all ranks run "
                     "the same gradwire?",
                     p, all[(size_t)p * GW_TRANSPORT_ADDR_MAX + GW_IB_RAILS_OFF + 4],
                     GW_IB_MAX_RAILS);
            return GW_ERR_PROTOCOL;
        }
        r->shared[p] = (uint8_t)(n < r->subs.n ? n : r->subs.n);
        r->nsent[p] = r->nrecv[p] = (uint64_t)(p < me ? p : me); /* the turns' start */
    }
    uint8_t *blobs = malloc((size_t)size * GW_TRANSPORT_ADDR_MAX);
    if (!blobs) {
        GW_ERROR(r->base.log, GW_IB_SUBSYS, "out of memory for %d addresses", size);
        return GW_ERR_NO_MEMORY;
    }
    st = GW_OK;
    for (int i = 0; i < r->subs.n && st == GW_OK; i++) {
        memset(blobs, 0, (size_t)size * GW_TRANSPORT_ADDR_MAX);
        for (int p = 0; p < size; p++) {
            const uint8_t *from = p == me            ? r->blob
                                  : r->shared[p] > i ? all + (size_t)p * GW_TRANSPORT_ADDR_MAX
                                                     : NULL;
            if (from)
                memcpy(blobs + (size_t)p * GW_TRANSPORT_ADDR_MAX, from + GW_IB_RAIL_BLOB(i),
                       GW_IB_ADDR_SIZE);
        }
        st = r->sub[i].t->ops->connect(r->sub[i].t, blobs);
        if (st != GW_OK)
            GW_ERROR(r->base.log, GW_IB_SUBSYS, "rail %d (%s) did not connect: %s", i, r->port[i],
                     gw_status_str(st));
    }
    free(blobs);
    if (st == GW_OK)
        r->base.connected = 1;
    return st;
}

static int rails_peer_usable(const gw_transport_t *base, int peer)
{
    const gw_ib_rails_t *r = gw__container_of(base, const gw_ib_rails_t, base);
    return r->shared[peer] > 0;
}

/* The base checked the request and reset it, and the transport is healthy. */
static gw_status_t rails_post(gw_transport_t *base, gw_request_t *req)
{
    gw_ib_rails_t *r = rails_of(base);
    int send = req->kind == GW_REQ_SEND;
    int k = r->shared[req->peer];
    uint64_t *turn = send ? &r->nsent[req->peer] : &r->nrecv[req->peer];
    int first = (int)(*turn % (uint64_t)k);
    (*turn)++;
    /* An announced message goes whole: the receiver finds it by peeking
     * at the one rail of its turn (rails_peek). */
    size_t parts =
        req->flags & GW_REQ_ANNOUNCE ? 1 : gw__transport_nparts(req->len, RAIL_PART_MIN, k);
    if (parts == 1)
        return gw__subs_post(&r->subs, first, req, send);
    rail_stripe_t *s = calloc(1, sizeof(*s));
    if (!s) {
        GW_ERROR(r->base.log, GW_IB_SUBSYS, "out of memory for a message cut over %zu rails",
                 parts);
        return gw__subs_fail(&r->subs, first, GW_ERR_NO_MEMORY);
    }
    s->outer = req;
    s->n = (int)parts;
    s->gate.need = (int)parts;
    s->next = r->stripes;
    r->stripes = s;
    gw_status_t st = GW_OK;
    for (size_t i = 0; i < parts; i++) {
        gw_request_t *q = &s->part[i];
        size_t off, len;
        gw__transport_part_range(req->len, parts, i, &off, &len);
        q->peer = req->peer;
        q->tag = req->tag;
        q->flags = req->flags | (send ? GW_REQ_GATED : 0);
        q->gate = &s->gate;
        q->buf = (uint8_t *)req->buf + off;
        q->len = len;
        if (st == GW_OK) {
            int rail = (first + (int)i) % k;
            st = gw__subs_post(&r->subs, rail, q, send);
            /* A part refused after others went would leave half a
             * message on the wire: the transport fails instead. */
            if (st == GW_ERR_INVALID_ARG && i > 0)
                st = gw__subs_fail(&r->subs, rail, st);
        }
        if (st != GW_OK && !q->complete)
            gw__req_complete(q, st);
    }
    finish_stripes(r);
    return st;
}

static gw_status_t rails_progress(gw_transport_t *base, const gw_msg_tag_t *current, int wait_ms)
{
    gw_ib_rails_t *r = rails_of(base);
    gw_subs_t *subs = &r->subs;
    uint64_t before = gw__subs_moved(subs);
    gw_status_t st = gw__subs_round(subs, current);
    if (st == GW_OK && wait_ms > 0 && gw__subs_moved(subs) == before) {
        int busy = gw__subs_busy(subs);
        if (busy >= 0) {
            st = gw__subs_progress(subs, busy, current, wait_ms);
        } else {
            int64_t spin_end = gw__now_ns() + (int64_t)r->spin_us * 1000;
            while (st == GW_OK && gw__subs_moved(subs) == before && gw__now_ns() < spin_end)
                st = gw__subs_round(subs, current);
            if (st == GW_OK && gw__subs_moved(subs) == before) {
                /* A rail's failure shows in the round after. */
                (void)gw__ib_wait_many(r->all, subs->n, wait_ms, r->pfds);
                st = gw__subs_round(subs, current);
            }
        }
    }
    finish_stripes(r);
    return st;
}

/* The next message from peer is on the rail of the pair's next receive
 * turn (rails_post): what that rail's peek says. Every earlier message of
 * the pair has its receive posted by then, on its own rail, so the rail's
 * head is this one once those have completed; until then its peek says 0
 * (a receive is posted), as the contract wants. A cut message shows its
 * first part, with the part's length; the tagged calls, the only users,
 * send theirs announced, never cut. */
static int rails_peek(gw_transport_t *base, int peer, gw_msg_tag_t *tag, size_t *len)
{
    gw_ib_rails_t *r = rails_of(base);
    if (peer < 0 || peer >= r->base.size || peer == r->base.rank || r->shared[peer] == 0)
        return 0;
    gw_transport_t *rail = r->sub[r->nrecv[peer] % r->shared[peer]].t;
    return rail ? gw__transport_peek(rail, peer, tag, len) : 0;
}

typedef struct rails_reg {
    void *h[GW_IB_MAX_RAILS];
} rails_reg_t;

/* Every rail registers the memory: a message may go over any of them. */
static gw_status_t rails_mem_reg(gw_transport_t *base, void *buf, size_t len, void **handle)
{
    gw_ib_rails_t *r = rails_of(base);
    rails_reg_t *g = calloc(1, sizeof(*g));
    if (!g)
        return GW_ERR_NO_MEMORY;
    for (int i = 0; i < r->subs.n; i++) {
        gw_transport_t *t = r->sub[i].t;
        gw_status_t st = t->ops->mem_reg(t, buf, len, &g->h[i]);
        if (st != GW_OK) {
            while (i-- > 0)
                r->sub[i].t->ops->mem_dereg(r->sub[i].t, g->h[i]);
            free(g);
            return st;
        }
    }
    *handle = g;
    return GW_OK;
}

static gw_status_t rails_mem_dereg(gw_transport_t *base, void *handle)
{
    gw_ib_rails_t *r = rails_of(base);
    rails_reg_t *g = handle;
    gw_status_t st = GW_OK;
    for (int i = 0; g && i < r->subs.n; i++) {
        gw_status_t s = r->sub[i].t->ops->mem_dereg(r->sub[i].t, g->h[i]);
        st = st == GW_OK ? s : st;
    }
    free(g);
    return st;
}

static gw_status_t rails_abort(gw_transport_t *base, const gw_abort_info_t *why)
{
    if (!base)
        return GW_ERR_INVALID_ARG;
    gw_ib_rails_t *r = rails_of(base);
    gw__subs_abort(&r->subs, why);
    finish_stripes(r);
    return GW_OK;
}

/* Messages still cut over the rails are not completed: the caller is
 * tearing down and may have released them already. */
static void rails_close(gw_transport_t *base)
{
    if (base)
        rails_free(rails_of(base));
}

static const gw_transport_ops_t rails_ops = {
    .size = sizeof(gw_transport_ops_t),
    .open = gw__ib_rails_open,
    .connect = rails_connect,
    .isend = gw__transport_isend,
    .irecv = gw__transport_irecv,
    .progress = gw__transport_progress,
    .mem_reg = rails_mem_reg,
    .mem_dereg = rails_mem_dereg,
    .abort = rails_abort,
    .close = rails_close,
    .peek = rails_peek,
};

int gw__ib_rails_count(gw_transport_t *t) { return t->ops == &rails_ops ? rails_of(t)->subs.n : 1; }

gw_transport_t *gw__ib_rail(gw_transport_t *t, int i)
{
    if (t->ops == &rails_ops)
        return i >= 0 && i < rails_of(t)->subs.n ? rails_of(t)->sub[i].t : NULL;
    return i == 0 ? t : NULL;
}

/* Failures come from the rails (gw__subs_fail), not through the base: the
 * parts of a cut message complete with their rail's. */
static const gw__transport_class_t rails_class = {
    .size = sizeof(gw__transport_class_t),
    .name = "ib",
    .subsys = GW_IB_SUBSYS,
    .ops = &rails_ops,
    .peer_usable = rails_peer_usable,
    .post = rails_post,
    .progress = rails_progress,
};
