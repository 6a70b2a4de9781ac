/*
 * group.c - gw_group_start and gw_group_end: calls queued, then issued
 * together as one operation (NCCL's ncclGroupStart/End).
 *
 * Between the two calls nothing moves. The blocking collectives and
 * point-to-point calls of the communicator find comm->group set and, instead
 * of running, append a copy of their description here and return GW_OK
 * (the scheduler's gw__async_run and p2p_api.c hand them over). gw_group_end
 * then issues the lot, in two phases:
 *
 *  1. The collectives, in call order, as they would have run one by one,
 *     except that each run of consecutive allreduces with the same dtype
 *     and op (messages queued between them do not count) goes through
 *     the fusion of allreduce_many.c: a group of 64
 *     small allreduces costs a few buckets' rounds, not 64.
 *  2. The messages. Every send and receive is posted at once as a
 *     non-blocking request (gw_isend, gw_irecv), then all are waited for.
 *     Waiting on any point-to-point handle progresses every pending one
 *     of the communicator, so this is one progress loop over all of them:
 *     a rank that queued "send to b, then receive from b" and a rank b
 *     that queued the same both have their receive posted while their
 *     send waits for acceptance, so neither waits for the other, whereas
 *     the same blocking calls issued one by one (sends are synchronous)
 *     would wait until the timeout.
 *
 * Collectives go first because no collective may start while messages are
 * pending (their frames carry the next collective's sequence number);
 * every rank follows the same rule, so the order within a group on one
 * rank does not have to match another's.
 *
 * A group that failed to queue a call (out of memory) has lost it; its end
 * fails the communicator (peers told, nobody waits for the lost call) and
 * returns that status. Nesting only counts: the outermost end issues.
 */
#include <stdlib.h>

#include "collectives/api/api.h"

typedef struct group_item {
    int is_p2p;
    gw_handle_t call; /* a collective: its description (execute and args) */
    const char *what;
    int is_send; /* a message: direction, buffer, size, peer */
    void *buf;
    size_t count;
    gw_dtype_t dtype;
    int peer;
} group_item_t;

struct gw_group {
    int depth;
    group_item_t *items;
    size_t n, cap;
    gw_status_t failed; /* a call could not be queued */
};

gw_status_t gw_group_start(gw_comm_t *comm)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    if (comm->group) {
        comm->group->depth++;
        return GW_OK;
    }
    struct gw_group *g = calloc(1, sizeof(*g));
    if (!g)
        return GW_ERR_NO_MEMORY;
    g->depth = 1;
    comm->group = g;
    return GW_OK;
}

static group_item_t *append(gw_comm_t *comm)
{
    struct gw_group *g = comm->group;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        group_item_t *items = realloc(g->items, cap * sizeof(*items));
        if (!items) {
            GW_ERROR(&comm->log, "group", "no memory to queue call %zu of a group", g->n + 1);
            g->failed = GW_ERR_NO_MEMORY;
            return NULL;
        }
        g->items = items;
        g->cap = cap;
    }
    group_item_t *it = &g->items[g->n++];
    *it = (group_item_t){0};
    return it;
}

gw_status_t gw__group_add_call(gw_comm_t *comm, const gw_handle_t *call, const char *what)
{
    if (call->ctx) {
        GW_ERROR(&comm->log, "group", "%s cannot be part of a group (gw_group_start)", what);
        return GW_ERR_UNSUPPORTED;
    }
    group_item_t *it = append(comm);
    if (!it)
        return GW_ERR_NO_MEMORY;
    it->call = *call;
    it->what = what;
    return GW_OK;
}

gw_status_t gw__group_add_p2p(gw_comm_t *comm, int is_send, void *buf, size_t count,
                              gw_dtype_t dtype, int peer)
{
    group_item_t *it = append(comm);
    if (!it)
        return GW_ERR_NO_MEMORY;
    *it = (group_item_t){
        .is_p2p = 1, .is_send = is_send, .buf = buf, .count = count, .dtype = dtype, .peer = peer};
    return GW_OK;
}

gw_status_t gw__group_refuse(gw_comm_t *comm, const char *what)
{
    if (!comm || !comm->group)
        return GW_OK;
    GW_ERROR(&comm->log, "group",
             "%s inside gw_group_start/gw_group_end: only blocking collectives and gw_send, "
             "gw_recv, gw_sendrecv can be grouped",
             what);
    return GW_ERR_UNSUPPORTED;
}

static int is_fusable(const group_item_t *it)
{
    return !it->is_p2p && it->call.args.kind == GW_COLL_ALLREDUCE && !it->call.args.premul;
}

/* The first collective (not a message) at or after k, or n. */
static size_t next_coll(const group_item_t *items, size_t n, size_t k)
{
    while (k < n && items[k].is_p2p)
        k++;
    return k;
}

/* Phase 1: collectives in call order, runs of alike allreduces fused (the
 * messages between them do not break a run: they go after every
 * collective anyway). */
static gw_status_t issue_collectives(gw_comm_t *comm, group_item_t *items, size_t n)
{
    gw_status_t st = GW_OK;
    const void **sends = NULL;
    void **recvs = NULL;
    size_t *counts = NULL;
    for (size_t i = next_coll(items, n, 0); i < n && st == GW_OK;) {
        const gw_coll_args_t *a = &items[i].call.args;
        size_t m = 1, j = next_coll(items, n, i + 1);
        while (is_fusable(&items[i]) && j < n && is_fusable(&items[j]) &&
               items[j].call.args.dtype == a->dtype && items[j].call.args.op == a->op) {
            m++;
            j = next_coll(items, n, j + 1);
        }
        if (m == 1) {
            st = gw__async_run(comm, &items[i].call, items[i].what);
            i = j;
            continue;
        }
        /* Runs are taken in order, so arrays of n entries are enough. */
        if (!sends &&
            (!(sends = malloc(n * sizeof(*sends))) || !(recvs = malloc(n * sizeof(*recvs))) ||
             !(counts = malloc(n * sizeof(*counts))))) {
            st = gw__comm_fail(comm, GW_ERR_NO_MEMORY);
            break;
        }
        size_t r = 0;
        for (size_t k = i; k < j; k = next_coll(items, n, k + 1)) {
            sends[r] = items[k].call.args.sendbuf;
            recvs[r] = items[k].call.args.recvbuf;
            counts[r++] = items[k].call.args.count;
        }
        st = gw__allreduce_fused(comm, sends, recvs, counts, m, a->dtype, a->op);
        i = j;
    }
    free(sends);
    free(recvs);
    free(counts);
    return st;
}

/* Phase 2: every message posted, then every handle waited for (each wait
 * progresses all of them). Handles posted are always waited for, also
 * after a failure, so that none is left pending. */
static gw_status_t issue_messages(gw_comm_t *comm, group_item_t *items, size_t n)
{
    size_t np = 0;
    for (size_t i = 0; i < n; i++)
        np += items[i].is_p2p;
    if (np == 0)
        return GW_OK;
    gw_handle_t **h = calloc(np, sizeof(*h));
    if (!h)
        return gw__comm_fail(comm, GW_ERR_NO_MEMORY);
    gw_status_t st = GW_OK;
    size_t posted = 0;
    for (size_t i = 0; i < n && st == GW_OK; i++) {
        const group_item_t *it = &items[i];
        if (!it->is_p2p)
            continue;
        st = it->is_send ? gw_isend(comm, it->buf, it->count, it->dtype, it->peer, &h[posted])
                         : gw_irecv(comm, it->buf, it->count, it->dtype, it->peer, &h[posted]);
        if (st == GW_OK)
            posted++;
    }
    for (size_t k = 0; k < posted; k++) {
        gw_status_t w = gw_wait(h[k]);
        if (st == GW_OK)
            st = w;
    }
    free(h);
    return st;
}

gw_status_t gw_group_end(gw_comm_t *comm)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    struct gw_group *g = comm->group;
    if (!g) {
        GW_ERROR(&comm->log, "group", "gw_group_end without gw_group_start");
        return GW_ERR_INVALID_ARG;
    }
    if (--g->depth > 0)
        return GW_OK;
    /* Detach first: the calls issued below must run, not queue again. */
    comm->group = NULL;
    gw_status_t st = g->failed;
    if (st != GW_OK)
        st = gw__comm_fail(comm, st);
    if (st == GW_OK)
        st = issue_collectives(comm, g->items, g->n);
    if (st == GW_OK)
        st = issue_messages(comm, g->items, g->n);
    free(g->items);
    free(g);
    return st;
}

void gw__group_discard(gw_comm_t *comm)
{
    struct gw_group *g = comm->group;
    if (!g)
        return;
    /* Nothing was issued: no rank waits for these calls on our account
     * beyond what its own timeout bounds, and the buffers stay the
     * caller's. Said once, since the caller may have meant to end it. */
    GW_WARN(&comm->log, "group",
            "gw_comm_destroy with a group still open (gw_group_start without gw_group_end): "
            "its %zu queued call%s were never issued",
            g->n, g->n == 1 ? "" : "s");
    comm->group = NULL;
    free(g->items);
    free(g);
}
