/*
 * reduce_tree.c - pipelined binomial-tree reduce to any root.
 *
 * Ranks are numbered from the root in the tree order of coll.h (v: the root,
 * the rest of its host, then the other hosts, each contiguous). Rank v's
 * parent is v with its lowest set bit cleared; its children are v + 2^k for
 * every 2^k below that bit (binomial_tree.c), so the subtree of child
 * v + 2^k covers exactly the relative ranks [v + 2^k, v + 2^(k+1)). Data
 * flows towards the root:
 * every node combines its own contribution with its children's partials and
 * sends the result to its parent.
 *
 * Reduction order: own contribution first, then the children in increasing
 * relative rank,
 *     out = op(... op(op(x[v], partial[v+1]), partial[v+2 .. v+3]) ...),
 * which is a fold over the relative ranks in increasing order (with the tree
 * deciding the grouping). Only the root's recvbuf is written; other ranks
 * may pass NULL.
 *
 * Streaming: the buffer is cut into chunks of comm->chunk_bytes. Children's
 * chunks land in GW__STREAM_DEPTH (core/p2p.h) scratch slots per child; a
 * node folds chunk c as soon as all its children's chunk c is in, and sends
 * it on while later chunks are still arriving. An inner node other than the
 * root folds into as many accumulator slots of scratch (its recvbuf may be
 * NULL), a leaf sends straight from sendbuf, and the root folds into recvbuf. Each link
 * carries one stream in one direction, so both ends post in the same order.
 *
 * Cost for S bytes, d = ceil(log2 n), chunks of c bytes: the root receives
 * and reduces every chunk d times (once per child):
 *     T ~ (C + d - 1) d (alpha + c beta + c gamma),   C = S / c chunks.
 */
#include "collectives/coll.h"

#define DEPTH GW__STREAM_DEPTH

gw_status_t gw__reduce_tree(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                            gw_dtype_t dtype, gw_op_t op, int root)
{
    const int n = comm->size;
    const size_t esize = gw_dtype_size(dtype);
    const size_t chunk = gw__chunk_elems(comm, esize);
    /* An empty buffer is still one zero-length chunk (mismatches surface). */
    const size_t nchunks = count == 0 ? 1 : (count + chunk - 1) / chunk;
    const size_t slot_bytes = (count < chunk ? count : chunk) * esize;

    /* all[0] is the stream to the parent, all[1 + k] the one from child k. */
    gw__stream_t out, in[GW__BINOMIAL_MAX_KIDS], *all[GW__BINOMIAL_MAX_KIDS + 1] = {&out};
    int kids[GW__BINOMIAL_MAX_KIDS], parent;
    const int nkids =
        gw__binomial_node(n, gw__tree_index(comm, root, comm->rank), 0, kids, &parent);
    /* Children stay in increasing index, the fixed order they are folded in. */
    gw__tree_to_ranks(comm, root, &parent, kids, nkids);
    gw__stream_init(&out, parent);
    for (int k = 0; k < nkids; k++) {
        gw__stream_init(&in[k], kids[k]);
        all[1 + k] = &in[k];
    }

    /* Scratch: DEPTH slots per child, then (inner non-root nodes)
     * DEPTH accumulator slots. */
    char *slots, *acc = NULL;
    const int use_acc = nkids > 0 && out.peer >= 0;
    size_t scratch_len = ((size_t)nkids + (use_acc ? 1 : 0)) * DEPTH * slot_bytes;
    gw_status_t st0 = gw__coll_scratch(comm, scratch_len, &slots);
    if (st0 != GW_OK)
        return st0;
    if (use_acc && slots)
        acc = slots + (size_t)nkids * DEPTH * slot_bytes;

    size_t reduced = nkids ? 0 : nchunks; /* a leaf has nothing to fold */
    for (;;) {
        int moved = 0;
        gw_status_t st;
        if ((st = gw__streams_reap(comm, all, nkids + 1, &moved)) != GW_OK)
            return st;

        /* Fold chunk `reduced` once every child's copy is in (and, on an
         * inner node, once its accumulator slot has been sent). */
        while (reduced < nchunks && (!use_acc || reduced - out.done < DEPTH)) {
            int ready = 1;
            for (int k = 0; k < nkids; k++)
                ready &= in[k].done > reduced;
            if (!ready)
                break;
            size_t first = reduced * chunk;
            size_t len = count - first < chunk ? count - first : chunk;
            if (len > 0) {
                size_t slot = (reduced % DEPTH) * slot_bytes;
                char *dst = use_acc ? acc + slot : gw__at(recvbuf, first * esize);
                const char *own = gw__cat(sendbuf, first * esize);
                for (int k = 0; k < nkids; k++) {
                    const char *kid = slots + (size_t)k * DEPTH * slot_bytes + slot;
                    gw_status_t rst =
                        gw__coll_reduce(comm, dst, k == 0 ? own : dst, kid, len, dtype, op);
                    if (rst != GW_OK)
                        return rst;
                }
            }
            reduced++;
            moved = 1;
        }

        for (int k = 0; k < nkids; k++) {
            gw__stream_t *s = &in[k];
            while (s->posted < nchunks && s->posted - reduced < DEPTH) {
                size_t first = s->posted * chunk;
                size_t len = count - first < chunk ? count - first : chunk;
                char *dst = gw__at(slots, ((size_t)k * DEPTH + s->posted % DEPTH) * slot_bytes);
                if ((st = gw__stream_recv(comm, s, dst, len * esize)) != GW_OK)
                    return st;
                moved = 1;
            }
        }

        while (out.peer >= 0 && out.posted < reduced && gw__stream_room(&out)) {
            size_t first = out.posted * chunk;
            size_t len = count - first < chunk ? count - first : chunk;
            const char *src = use_acc ? gw__at(acc, (out.posted % DEPTH) * slot_bytes)
                                      : gw__cat(sendbuf, first * esize);
            if ((st = gw__stream_send(comm, &out, src, len * esize)) != GW_OK)
                return st;
            moved = 1;
        }

        int finished = reduced == nchunks && (out.peer < 0 || out.done == nchunks);
        for (int k = 0; k < nkids; k++)
            finished &= in[k].done == nchunks;
        if (finished)
            return GW_OK;
        if (!moved && (st = gw__streams_wait(comm, all, nkids + 1, "reduce")) != GW_OK)
            return st;
    }
}
