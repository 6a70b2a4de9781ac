/*
 * allreduce_tree.c - pipelined double binary tree allreduce (as NCCL's).
 *
 * Two binary trees span the ranks, numbered by their ring positions (the
 * communicator's host-contiguous order, collectives/comm/topo.h: every subtree is a
 * contiguous range of positions, so most edges stay inside a host whatever
 * the launcher's placement; "rank" below means position). Tree 0 is the
 * in-order tree on rank numbers: a rank whose lowest set bit is b has
 * children rank - b/2 and
 * rank + b/2 (or the nearest smaller step that stays below n), so odd ranks
 * are leaves, and rank 0 is the root with a single child. Tree 1 is tree 0
 * mirrored (rank r plays n-1-r) when n is even and shifted by one (rank r
 * plays r-1) when n is odd; either way the leaves of one tree are mostly the
 * interior nodes of the other, so no rank forwards much more than the buffer
 * once in each direction.
 *
 * The first half of the buffer is reduced up tree 0 and broadcast back down
 * tree 0; the second half does the same on tree 1. Both halves are cut into
 * chunks of comm->chunk_bytes that stream through their tree: a node folds
 * chunk c as soon as its children's partials of chunk c are in, sends the
 * result to its parent, and forwards the final chunk to its children as soon
 * as it comes down, while later chunks are still on their way up. Since the
 * two trees run at once and in opposite shapes, every link carries data in
 * both directions.
 *
 * Reduction order: every node folds its own contribution first and then its
 * children's partials in increasing rank order,
 *     out = op(op(own, partial of lower child), partial of higher child),
 * and the root's result is sent down unchanged, so every rank ends with the
 * same bits.
 *
 * Matching: the transport matches messages per ordered pair of ranks in
 * posting order, and the two trees can share a link (n = 2: rank 0 -> 1
 * carries tree 0's broadcast and tree 1's reduction). Posting in order of
 * readiness would let the two ends disagree about which tree a message
 * belongs to, so each link has a fixed interleaving that both ends compute.
 * It follows the schedule of an ideal synchronous pipeline in which node x
 * folds chunk c at time c + height(x) (the height of x's subtree; leaves
 * 0), so its children send chunk c up at c + height(x) - 1, the root has
 * the result at c + H (H the tree's height), and node x sends it down at
 * c + H + depth(x) + 1. Messages on a link go in order of (time, tree).
 * Every message waits only for messages of smaller (time, tree): data from
 * one hop earlier, earlier messages on its link, and the chunk TREE_DEPTH
 * earlier whose slot or request it reuses (all children of a node share one
 * send time, so a slot never waits for a later sibling message). Hence the
 * order cannot deadlock; and since it follows when messages become ready in
 * a steady pipeline, it seldom holds a ready message back (a plain
 * alternation of the two trees chunk by chunk would make one tree's
 * reduction wait for the other tree's broadcast on every shared link).
 *
 * Cost for S bytes, d = ceil(log2 n) levels, chunks of C bytes: about
 *     T = 2 d alpha + 2 S beta + 2 d C beta + S gamma
 * (each node's links carry about S each way over both trees; filling and
 * draining the pipeline costs 2d chunk times). The latency term grows with
 * log n instead of n, which makes it the choice between recursive doubling
 * (small S) and the ring (large S).
 *
 * Buffers: the fold writes recvbuf, which is then sent up; the final chunk
 * later arrives in the same place. It cannot arrive before the parent has
 * received the whole partial (the final depends on it), so the overwrite is
 * safe for any transport. sendbuf is only read.
 */
#include "collectives/coll.h"

/* Chunks in flight per stream (core/p2p.h); each child has this many
 * scratch slots. */
#define TREE_DEPTH GW__STREAM_DEPTH

typedef struct stream {
    gw__stream_t w; /* the window: peer (-1: no such stream), posted, done */
    int tree;
    int send;
    long time;                 /* schedule time of chunk 0; chunk c goes at time + c */
    size_t n;                  /* messages: one per chunk of the tree's half */
    const struct stream *mate; /* the other tree's stream on the same link */
} stream_t;

/* A rank's place in one tree. */
typedef struct node {
    int parent;
    int kid[2]; /* ascending rank order */
    int nkids;
} node_t;

typedef struct half {
    node_t node;
    size_t base, elems, nchunks; /* elements [base, base + elems) */
    size_t reduced;              /* chunks folded (all of them for a leaf) */
    size_t slot_bytes;
    char *slots[2]; /* per child: TREE_DEPTH incoming chunks */
    stream_t up_in[2], up_out, down_in, down_out[2];
} half_t;

typedef struct dbt {
    gw_comm_t *comm;
    const char *sendbuf;
    char *recvbuf;
    size_t esize, chunk;
    gw_dtype_t dtype;
    gw_op_t op;
    half_t h[2];
} dbt_t;

/* Tree 0 (see the top of the file). */
static void btree(int n, int r, int *parent, int kid[2])
{
    kid[0] = kid[1] = -1;
    if (r == 0) {
        int top = 1;
        while (top * 2 < n)
            top *= 2;
        *parent = -1;
        kid[0] = top;
        return;
    }
    int low = r & -r;
    /* The parent is r +- low, whichever has lowest bit 2 low; r - low when
     * r + low falls off the end. */
    int up = (r ^ low) | (low << 1);
    *parent = up < n ? up : (r ^ low);
    if (low > 1) {
        kid[0] = r - low / 2;
        for (int step = low / 2; step > 0; step /= 2) {
            if (r + step < n) {
                kid[1] = r + step;
                break;
            }
        }
    }
}

static int map_rank(int x, int n, int odd)
{
    if (x < 0)
        return -1;
    return odd ? (x + 1) % n : n - 1 - x;
}

static void tree_node(int n, int r, int tree, node_t *nd)
{
    int kid[2];
    if (tree == 0) {
        btree(n, r, &nd->parent, kid);
    } else {
        int odd = n % 2;
        btree(n, odd ? (r - 1 + n) % n : n - 1 - r, &nd->parent, kid);
        nd->parent = map_rank(nd->parent, n, odd);
        kid[0] = map_rank(kid[0], n, odd);
        kid[1] = map_rank(kid[1], n, odd);
    }
    nd->nkids = 0;
    nd->kid[0] = nd->kid[1] = -1;
    for (int k = 0; k < 2; k++)
        if (kid[k] >= 0)
            nd->kid[nd->nkids++] = kid[k];
    if (nd->nkids == 2 && nd->kid[0] > nd->kid[1]) {
        int tmp = nd->kid[0];
        nd->kid[0] = nd->kid[1];
        nd->kid[1] = tmp;
    }
}

/* Height of r's subtree in `tree` (a leaf has 0). In tree 0 a rank v > 0
 * whose lowest set bit is 2^k has the complete subtree [v - 2^k + 1, v - 1]
 * on its left (its right one is never taller), so its height is k; rank 0
 * sits one above the largest power of two below n. Tree 1 is an image of
 * tree 0, so r has the height of the rank it plays there. */
static int subtree_height(int n, int tree, int r)
{
    int v = tree == 0 ? r : n % 2 ? (r - 1 + n) % n : n - 1 - r;
    if (v > 0)
        return __builtin_ctz((unsigned)v);
    int height = 1;
    for (int top = 1; top * 2 < n; top *= 2)
        height++;
    return height;
}

static void stream_init(stream_t *s, int peer, int tree, int send, long time, size_t n)
{
    gw__stream_init(&s->w, peer);
    s->tree = tree;
    s->send = send;
    s->time = time;
    s->n = peer >= 0 ? n : 0;
    s->mate = NULL;
}

/* Whether it is the turn of s's next message on its link: every message of
 * the other tree's stream there with a smaller (time, tree) has been posted. */
static int link_turn(const stream_t *s)
{
    const stream_t *m = s->mate;
    if (!m)
        return 1;
    long mine = s->time + (long)s->w.posted;
    /* The mate's chunks c' with m->time + c' < mine, or == mine when the
     * mate's tree goes first on ties. */
    long need = mine - m->time + (m->tree < s->tree ? 1 : 0);
    if (need <= 0)
        return 1;
    if ((size_t)need > m->n)
        need = (long)m->n;
    return m->w.posted >= (size_t)need;
}

static void chunk_range(const dbt_t *g, const half_t *h, size_t c, size_t *off, size_t *len)
{
    size_t start = c * g->chunk;
    *off = h->base + start;
    *len = h->elems - start < g->chunk ? h->elems - start : g->chunk;
}

static gw_status_t fold(dbt_t *g, half_t *h, size_t c)
{
    size_t off, len;
    chunk_range(g, h, c, &off, &len);
    if (len == 0)
        return GW_OK;
    char *out = gw__at(g->recvbuf, off * g->esize);
    size_t slot = (c % TREE_DEPTH) * h->slot_bytes;
    gw_status_t st = gw__coll_reduce(g->comm, out, gw__cat(g->sendbuf, off * g->esize),
                                     h->slots[0] + slot, len, g->dtype, g->op);
    if (st == GW_OK && h->node.nkids == 2)
        st = gw__coll_reduce(g->comm, out, out, h->slots[1] + slot, len, g->dtype, g->op);
    return st;
}

/* Post everything of half h that is ready and whose turn it is. */
static gw_status_t post_ready(dbt_t *g, half_t *h, int *moved)
{
    gw_comm_t *comm = g->comm;
    gw_status_t st;
    size_t off, len;

    for (int k = 0; k < h->node.nkids; k++) {
        stream_t *s = &h->up_in[k];
        while (s->w.posted < s->n && s->w.posted - h->reduced < TREE_DEPTH && link_turn(s)) {
            chunk_range(g, h, s->w.posted, &off, &len);
            char *dst = gw__at(h->slots[k], (s->w.posted % TREE_DEPTH) * h->slot_bytes);
            if ((st = gw__stream_recv(comm, &s->w, dst, len * g->esize)) != GW_OK)
                return st;
            *moved = 1;
        }
    }

    stream_t *s = &h->up_out;
    while (s->w.posted < s->n && s->w.posted < h->reduced && gw__stream_room(&s->w) &&
           link_turn(s)) {
        chunk_range(g, h, s->w.posted, &off, &len);
        /* A leaf sends its own data; an inner node the partial it folded. */
        const char *src = h->node.nkids ? gw__at(g->recvbuf, off * g->esize)
                                        : gw__cat(g->sendbuf, off * g->esize);
        if ((st = gw__stream_send(comm, &s->w, src, len * g->esize)) != GW_OK)
            return st;
        *moved = 1;
    }

    s = &h->down_in;
    while (s->w.posted < s->n && s->w.posted < h->up_out.w.posted && gw__stream_room(&s->w) &&
           link_turn(s)) {
        chunk_range(g, h, s->w.posted, &off, &len);
        st = gw__stream_recv(comm, &s->w, gw__at(g->recvbuf, off * g->esize), len * g->esize);
        if (st != GW_OK)
            return st;
        *moved = 1;
    }

    size_t final = h->node.parent < 0 ? h->reduced : h->down_in.w.done;
    for (int k = 0; k < h->node.nkids; k++) {
        s = &h->down_out[k];
        while (s->w.posted < s->n && s->w.posted < final && gw__stream_room(&s->w) &&
               link_turn(s)) {
            chunk_range(g, h, s->w.posted, &off, &len);
            st = gw__stream_send(comm, &s->w, gw__at(g->recvbuf, off * g->esize), len * g->esize);
            if (st != GW_OK)
                return st;
            *moved = 1;
        }
    }
    return GW_OK;
}

/* The rank at ring position p (-1: none). */
static int rank_at(const gw_comm_t *comm, int p) { return p >= 0 ? gw__ring_rank(comm, p) : -1; }

gw_status_t gw__allreduce_tree(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                               gw_dtype_t dtype, gw_op_t op)
{
    const int me = gw__ring_pos(comm); /* the trees are over ring positions */
    dbt_t g = {
        .comm = comm,
        .sendbuf = sendbuf,
        .recvbuf = recvbuf,
        .esize = gw_dtype_size(dtype),
        .dtype = dtype,
        .op = op,
    };
    g.chunk = gw__chunk_elems(comm, g.esize);

    stream_t *all[12];
    gw__stream_t *win[12]; /* their windows, for gw__streams_wait */
    int nall = 0;
    size_t scratch_len = 0;
    for (int t = 0; t < 2; t++) {
        half_t *h = &g.h[t];
        const int n = comm->size;
        tree_node(n, me, t, &h->node);
        h->base = t == 0 ? 0 : (count + 1) / 2;
        h->elems = t == 0 ? (count + 1) / 2 : count / 2;
        /* An empty half still sends one zero-length chunk through its tree,
         * so that ranks disagreeing about the count are caught. */
        h->nchunks = h->elems == 0 ? 1 : (h->elems + g.chunk - 1) / g.chunk;
        h->reduced = h->node.nkids ? 0 : h->nchunks;
        h->slot_bytes = (h->elems < g.chunk ? h->elems : g.chunk) * g.esize;
        scratch_len += (size_t)h->node.nkids * TREE_DEPTH * h->slot_bytes;
        /* Schedule times (see the top of the file) from our depth, the
         * tree's height and the heights of our and our parent's subtrees. */
        int depth = 0, root = me;
        for (node_t up = h->node; up.parent >= 0; depth++) {
            root = up.parent;
            tree_node(n, root, t, &up);
        }
        long total = subtree_height(n, t, root);
        long into_us = subtree_height(n, t, me) - 1;
        long into_parent = h->node.parent >= 0 ? subtree_height(n, t, h->node.parent) - 1 : 0;
        long down = total + depth; /* the final chunk 0 arrives here */
        for (int k = 0; k < 2; k++) {
            const int kid = rank_at(comm, h->node.kid[k]);
            stream_init(&h->up_in[k], kid, t, 0, into_us, h->nchunks);
            stream_init(&h->down_out[k], kid, t, 1, down + 1, h->nchunks);
        }
        const int parent = rank_at(comm, h->node.parent);
        stream_init(&h->up_out, parent, t, 1, into_parent, h->nchunks);
        stream_init(&h->down_in, parent, t, 0, down, h->nchunks);
        stream_t *mine[6] = {&h->up_in[0],    &h->up_in[1], &h->down_out[0],
                             &h->down_out[1], &h->up_out,   &h->down_in};
        for (int i = 0; i < 6; i++)
            if (mine[i]->w.peer >= 0) {
                win[nall] = &mine[i]->w;
                all[nall++] = mine[i];
            }
    }
    /* Pair up the streams that share a link (same peer, same direction). */
    for (int i = 0; i < nall; i++)
        for (int j = 0; j < nall; j++)
            if (all[i]->tree == 0 && all[j]->tree == 1 && all[i]->w.peer == all[j]->w.peer &&
                all[i]->send == all[j]->send) {
                all[i]->mate = all[j];
                all[j]->mate = all[i];
            }

    char *p;
    gw_status_t st0 = gw__coll_scratch(comm, scratch_len, &p);
    if (st0 != GW_OK)
        return st0;
    for (int t = 0; t < 2 && p; t++) /* NULL: nothing to place */
        for (int k = 0; k < g.h[t].node.nkids; k++) {
            g.h[t].slots[k] = p;
            p += TREE_DEPTH * g.h[t].slot_bytes;
        }

    for (;;) {
        int moved = 0;
        gw_status_t st;
        for (int i = 0; i < nall; i++)
            if ((st = gw__stream_reap(comm, &all[i]->w, &moved)) != GW_OK)
                return st;
        for (int t = 0; t < 2; t++) {
            half_t *h = &g.h[t];
            while (h->reduced < h->nchunks && h->up_in[0].w.done > h->reduced &&
                   (h->node.nkids < 2 || h->up_in[1].w.done > h->reduced)) {
                if ((st = fold(&g, h, h->reduced++)) != GW_OK)
                    return st;
                moved = 1;
            }
            if ((st = post_ready(&g, h, &moved)) != GW_OK)
                return st;
        }

        int finished = 1;
        for (int i = 0; i < nall; i++)
            finished &= all[i]->w.done == all[i]->n;
        if (finished)
            return GW_OK;
        if (moved)
            continue;

        if ((st = gw__streams_wait(comm, win, nall, "tree allreduce")) != GW_OK)
            return st;
    }
}
