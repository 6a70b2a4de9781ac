/*
 * comm_split.c - sub-communicators: gw_comm_split and gw_comm_dup, and
 * the reference count that lets communicators be destroyed in any order.
 *
 * A split is one collective over the parent: every rank contributes four
 * 32-bit words (its color, its key, the communicator id it computed for
 * its color, and how many splits it made on this parent before), gathered
 * by the ring all-gather under the split's own tag, so a rank that calls
 * something else meanwhile fails with GW_ERR_MISMATCH like in any other
 * collective. Each rank then checks what every rank sent: the same split
 * count as its own and, for every color, the id it computes itself for
 * that color. All ranks check the same gathered words, so they all agree
 * that the split succeeded or all fail with GW_ERR_MISMATCH, blaming the
 * first rank that disagreed. The members of a color, ordered by (key,
 * parent rank), are the new communicator's ranks 0, 1, ...; a rank with
 * color GW_UNDEFINED takes part and gets no communicator. gw_comm_dup is
 * a split in which every rank has color 0 and its own rank as key (under
 * another signature, so a dup on one rank and a split on another
 * disagree).
 *
 * Nothing else is exchanged: no bootstrap, no listening port, no
 * connection. The child uses its root's transport (the communicator
 * gw_comm_init made; the root of a child's child is the same root) and
 * maps its ranks to the root's through a table (to_root), which p2p.c
 * applies to every message it posts. Its id travels in every message's
 * tag (tag.comm_id), so the transports never match one communicator's
 * message with another's receive, and never take another communicator's
 * message for a sign of disagreement (transport.h); each communicator
 * numbers its own collectives from 1. The id is FNV-1a over (parent id,
 * parent's split count, color): every member computes it alone, and the
 * check above proves they agree. Two communicators that share ranks get
 * the same id only by a 32-bit hash collision.
 *
 * What children share with the root (comm.h): the transport, the claim
 * on it (only one thread drives it), the one progress thread and its
 * queue (async.c says why one), the bootstrap and rank 0's referee, which
 * blames in the root's ranks; gw__comm_fail_with maps the verdict into
 * the child's (gw_comm_culprit), -1 for a culprit that is no member of
 * it. A failed transport fails every communicator that uses it, each at
 * its next call that reaches the transport.
 *
 * Lifetime. A root counts its live children plus its own reference
 * (`refs`, from the first split on). Destroying a child lets its queued
 * calls finish and frees it; destroying a root whose children live does
 * the same but keeps the root, its transport and its bootstrap, closed to
 * the application, until the last child is destroyed, which then tears
 * everything down as gw_comm_destroy of a root always did. Point-to-point
 * handles still pending when a communicator is destroyed live in the
 * shared transport's queues: they cannot be dropped alone, so destroying
 * it then aborts the transport (every communicator on it fails), as
 * destroying a root with pending handles always did to that root.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/api/api.h"
#include "collectives/coll.h"
#include "collectives/comm/flight_recorder.h"

/* The first signature word of a split and of a dup: distinct from every
 * gw_coll_kind_t and from GW__SIG_P2P_KIND. */
#define SIG_SPLIT_KIND 0x73706c74u /* "splt" */
#define SIG_DUP_KIND 0x64757021u   /* "dup!" */

enum { W_COLOR, W_KEY, W_ID, W_SPLITS, W_WORDS };

typedef struct split_ctx {
    int color, key, dup;
    gw_comm_t **out;
} split_ctx_t;

static uint32_t child_id(const gw_comm_t *parent, int color)
{
    const uint64_t words[] = {0x636f6d6du /* "comm" */, parent->id, parent->splits,
                              (uint64_t)(int64_t)color};
    uint32_t id = gw__sig_words(words, sizeof(words) / sizeof(words[0]));
    return id ? id : 1; /* 0 is every root's */
}

/* A member of the new communicator: its key and its parent rank. */
typedef struct member {
    int32_t key;
    int parent_rank;
} member_t;

static int member_cmp(const void *a, const void *b)
{
    const member_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->parent_rank > y->parent_rank) - (x->parent_rank < y->parent_rank);
}

/* Every rank sent the split count and ids this rank expects: otherwise
 * GW_ERR_MISMATCH, blaming the first that did not (the same on every rank,
 * since all check the same words). */
static gw_status_t check_agreement(gw_comm_t *comm, const int32_t *all, const char *fn)
{
    for (int j = 0; j < comm->size; j++) {
        const int32_t *w = all + (size_t)j * W_WORDS;
        const uint32_t want = w[W_COLOR] >= 0 ? child_id(comm, w[W_COLOR]) : 0;
        if ((uint32_t)w[W_SPLITS] == (uint32_t)comm->splits && (uint32_t)w[W_ID] == want)
            continue;
        GW_ERROR(&comm->log, "api",
                 "%s: rank %d disagrees about the split: it made %u splits of this communicator "
                 "before (this rank %u) and computed id 0x%08x for color %d (expected 0x%08x)",
                 fn, j, (unsigned)w[W_SPLITS], (unsigned)comm->splits, (unsigned)w[W_ID],
                 (int)w[W_COLOR], (unsigned)want);
        return gw__comm_fail_blame(comm, GW_ERR_MISMATCH, gw__comm_to_root(comm, j),
                                   gw__comm_to_root(comm, comm->rank), GW_BLAME_PEER);
    }
    return GW_OK;
}

/* The child of `parent` whose members are members[0..n), this rank at
 * index `rank`. */
static gw_status_t make_child(gw_comm_t *parent, const member_t *members, int n, int rank,
                              uint32_t id, gw_comm_t **out)
{
    gw_comm_t *child = calloc(1, sizeof(*child));
    int *to_root = malloc((size_t)n * sizeof(*to_root));
    if (!child || !to_root) {
        free(child);
        free(to_root);
        GW_ERROR(&parent->log, "api", "gw_comm_split: no memory for a communicator of %d ranks", n);
        return gw__comm_fail(parent, GW_ERR_NO_MEMORY);
    }
    for (int i = 0; i < n; i++)
        to_root[i] = gw__comm_to_root(parent, members[i].parent_rank);
    gw_comm_t *root = gw__comm_root(parent);
    child->rank = rank;
    child->size = n;
    child->log = parent->log;
    child->log.owns_file = 0;             /* the root's, which outlives every child */
    child->log.slot = &child->last_error; /* its own errors, not its parent's */
    child->timeout_ms = parent->timeout_ms;
    child->algo = parent->algo;
    child->p2p_send = parent->p2p_send;
    child->tuning = parent->tuning;
    child->chunk_bytes = parent->chunk_bytes;
    child->failed = GW_OK;
    child->culprit = -1;
    child->origin = -1;
    child->transport = n > 1 ? parent->transport : NULL; /* alone: "self" */
    child->watching = n > 1 ? root->watching : 0;
    child->blame_wait_ms = root->blame_wait_ms;
    child->root = root;
    child->to_root = to_root;
    child->id = id;
    /* Its own recorder (the settings were checked when the root was made:
     * a failure here leaves the child without one). */
    if (gw__fr_from_env(&child->log, rank, n, id, &child->fr) != GW_OK)
        child->fr = NULL;
    /* Its hosts: the root's host of each member, renumbered (topo.c), so
     * that its rings keep each host's ranks together and the hierarchical
     * allreduce works on it too. */
    if (root->topo.host_of && n > 1) {
        uint64_t *ids = malloc((size_t)n * sizeof(*ids));
        gw_status_t tst = ids ? GW_OK : GW_ERR_NO_MEMORY;
        for (int i = 0; ids && i < n; i++)
            ids[i] = (uint64_t)root->topo.host_of[to_root[i]];
        if (tst == GW_OK)
            tst = gw__topo_build(ids, n, &child->topo);
        free(ids);
        if (tst != GW_OK) {
            gw__fr_destroy(child->fr);
            free(to_root);
            free(child);
            GW_ERROR(&parent->log, "api", "gw_comm_split: no memory for the hosts of %d ranks", n);
            return gw__comm_fail(parent, tst);
        }
    }
    /* The root's own reference counts from its first child on. */
    int none = 0;
    atomic_compare_exchange_strong(&root->refs, &none, 1);
    atomic_fetch_add(&root->refs, 1);
    GW_INFO(&parent->log, "api",
            "sub-communicator 0x%08x: rank %d of %d (rank %d of the root communicator)", id, rank,
            n, to_root[rank]);
    *out = child;
    return GW_OK;
}

static gw_status_t execute_split(gw_comm_t *comm, const gw_handle_t *h)
{
    const split_ctx_t *ctx = h->ctx;
    const char *fn = ctx->dup ? "gw_comm_dup" : "gw_comm_split";
    if (gw__comm_abort_requested(comm))
        return gw__comm_fail(comm, GW_ERR_ABORTED);
    if (comm->failed != GW_OK)
        return comm->failed;
    const int32_t mine[W_WORDS] = {
        [W_COLOR] = ctx->color,
        [W_KEY] = ctx->key,
        [W_ID] = (int32_t)(ctx->color >= 0 ? child_id(comm, ctx->color) : 0),
        [W_SPLITS] = (int32_t)comm->splits,
    };
    int32_t *all = malloc((size_t)comm->size * sizeof(mine));
    if (!all)
        return gw__comm_fail(comm, GW_ERR_NO_MEMORY);
    gw_status_t st = GW_OK;
    if (comm->size > 1) {
        const uint64_t sig[] = {ctx->dup ? SIG_DUP_KIND : SIG_SPLIT_KIND, W_WORDS};
        gw__tag_collective(comm, gw__sig_words(sig, 2));
        st = gw__allgather_ring(comm, mine, all, W_WORDS, GW_INT32);
        if (st != GW_OK)
            st = gw__comm_fail(comm, st);
    } else {
        memcpy(all, mine, sizeof(mine));
    }
    if (st == GW_OK)
        st = check_agreement(comm, all, fn);
    comm->splits++;
    if (st != GW_OK || ctx->color == GW_UNDEFINED) {
        free(all);
        return st;
    }
    member_t *members = malloc((size_t)comm->size * sizeof(*members));
    if (!members) {
        free(all);
        return gw__comm_fail(comm, GW_ERR_NO_MEMORY);
    }
    int n = 0;
    for (int j = 0; j < comm->size; j++)
        if (all[(size_t)j * W_WORDS + W_COLOR] == ctx->color)
            members[n++] = (member_t){.key = all[(size_t)j * W_WORDS + W_KEY], .parent_rank = j};
    qsort(members, (size_t)n, sizeof(*members), member_cmp);
    int rank = 0;
    while (members[rank].parent_rank != comm->rank)
        rank++;
    st = make_child(comm, members, n, rank, (uint32_t)mine[W_ID], ctx->out);
    free(members);
    free(all);
    return st;
}

static gw_status_t split(gw_comm_t *comm, int color, int key, int dup, gw_comm_t **out)
{
    if (out)
        *out = NULL;
    if (!comm || !out)
        return GW_ERR_INVALID_ARG;
    if (color < 0 && color != GW_UNDEFINED) {
        /* The other ranks wait in the split for this one: fail and tell. */
        GW_ERROR(&comm->log, "api", "gw_comm_split: color %d is negative and not GW_UNDEFINED",
                 color);
        gw__comm_drive_begin(comm);
        gw_status_t st = gw__comm_fail(comm, GW_ERR_INVALID_ARG);
        gw__comm_drive_end(comm);
        return st;
    }
    split_ctx_t ctx = {.color = color, .key = key, .dup = dup, .out = out};
    gw_handle_t call = {.execute = execute_split, .ctx = &ctx};
    return gw__async_run(comm, &call, dup ? "gw_comm_dup" : "gw_comm_split");
}

gw_status_t gw_comm_split(gw_comm_t *comm, int color, int key, gw_comm_t **out)
{
    return split(comm, color, key, 0, out);
}

gw_status_t gw_comm_dup(gw_comm_t *comm, gw_comm_t **out)
{
    return split(comm, 0, comm ? comm->rank : 0, 1, out);
}

static gw_status_t execute_nothing(gw_comm_t *comm, const gw_handle_t *h)
{
    (void)comm;
    (void)h;
    return GW_OK;
}

void gw__comm_release(gw_comm_t *comm)
{
    if (comm->p2p_npending > 0) {
        /* Their requests sit in the shared transport's queues (see top). */
        GW_WARN(&comm->log, "api",
                "gw_comm_destroy: pending point-to-point handles on a communicator that shares "
                "its transport: aborting the transport");
        gw__comm_drive_begin(comm);
        gw__comm_fail(comm, GW_ERR_ABORTED);
        gw__comm_drive_end(comm);
    }
    gw__p2p_abandon(comm);
    /* Its calls queued on the shared progress thread finish first. */
    if (gw__comm_root(comm)->async) {
        gw_handle_t last = {.execute = execute_nothing};
        gw__async_run_unguarded(comm, &last, "gw_comm_destroy");
    }
    if (!comm->root) {
        comm->destroyed = 1; /* the last child frees it (gw_comm_destroy) */
        return;
    }
    gw_comm_t *root = comm->root;
    free(comm->scratch);
    free(comm->to_root);
    gw__topo_free(&comm->topo);
    gw__fr_destroy(comm->fr);
    free(comm);
    if (atomic_fetch_sub(&root->refs, 1) == 1)
        gw_comm_destroy(root); /* its own reference went before: tear down */
}
