/*
 * broadcast_tree.c - pipelined broadcast from any root, over a binomial tree
 * or a chain.
 *
 * Ranks are numbered from the root in the tree order of coll.h (v: the
 * root, the rest of its host, then the other hosts, each host's ranks
 * contiguous), so the chain crosses each host boundary once and the
 * binomial tree rarely more, whatever the launcher's placement. The
 * buffer is cut into chunks of comm->chunk_bytes; every rank receives each
 * chunk from its parent straight into the buffer and forwards it to its
 * children as soon as it is in, so later chunks are still arriving while
 * earlier ones travel on.
 *
 * Two shapes, chosen from the chunk count C and n alone, so every rank picks
 * the same one:
 *  - binomial tree (binomial_tree.c): v's parent is v with its lowest set
 *    bit cleared, its children v + 2^k for every 2^k below that bit (the
 *    largest subtree is served first). Depth d = ceil(log2 n), but the root sends each chunk d
 *    times: T ~ (C + d - 1) d (alpha + c beta) for chunks of c bytes.
 *  - chain: v sends to v + 1. Each rank sends each chunk once, but the
 *    pipeline is n - 1 deep: T ~ (C + n - 2) (alpha + c beta).
 * The chain wins once C (d - 1) > n - 2, i.e. for buffers of many chunks,
 * where it approaches the bandwidth bound S beta; the tree wins for short
 * buffers, where latency (d instead of n - 1 hops) dominates.
 *
 * Each link carries one stream of chunks in one direction, so both ends post
 * its messages in the same order and in-order matching needs nothing more.
 * The data is only copied, so every rank ends with root's exact bytes.
 */
#include "collectives/coll.h"

gw_status_t gw__broadcast_tree(gw_comm_t *comm, void *buf, size_t count, gw_dtype_t dtype, int root)
{
    const int n = comm->size;
    const int v = gw__tree_index(comm, root, comm->rank);
    const size_t esize = gw_dtype_size(dtype);
    const size_t chunk = gw__chunk_elems(comm, esize);
    /* An empty buffer still travels as one zero-length chunk, so ranks that
     * disagree about the count are caught. */
    const size_t nchunks = count == 0 ? 1 : (count + chunk - 1) / chunk;

    int depth = 0;
    while ((1 << depth) < n)
        depth++;
    const int chain = (double)nchunks * (depth - 1) > (double)(n - 2);

    /* all[0] is the stream from the parent, all[1 + k] the one to child k. */
    gw__stream_t in, out[GW__BINOMIAL_MAX_KIDS], *all[GW__BINOMIAL_MAX_KIDS + 1] = {&in};
    int kids[GW__BINOMIAL_MAX_KIDS], nkids = 0, parent = -1;
    if (chain) {
        if (v > 0)
            parent = v - 1;
        if (v + 1 < n)
            kids[nkids++] = v + 1;
    } else {
        nkids = gw__binomial_node(n, v, 1, kids, &parent);
    }
    gw__tree_to_ranks(comm, root, &parent, kids, nkids);
    gw__stream_init(&in, parent);
    for (int k = 0; k < nkids; k++) {
        gw__stream_init(&out[k], kids[k]);
        all[1 + k] = &out[k];
    }

    for (;;) {
        int moved = 0;
        gw_status_t st;
        if ((st = gw__streams_reap(comm, all, nkids + 1, &moved)) != GW_OK)
            return st;

        while (in.peer >= 0 && in.posted < nchunks && gw__stream_room(&in)) {
            size_t first = in.posted * chunk;
            size_t len = count - first < chunk ? count - first : chunk;
            if ((st = gw__stream_recv(comm, &in, gw__at(buf, first * esize), len * esize)) != GW_OK)
                return st;
            moved = 1;
        }

        size_t have = in.peer >= 0 ? in.done : nchunks;
        for (int k = 0; k < nkids; k++) {
            gw__stream_t *s = &out[k];
            while (s->posted < have && gw__stream_room(s)) {
                size_t first = s->posted * chunk;
                size_t len = count - first < chunk ? count - first : chunk;
                if ((st = gw__stream_send(comm, s, gw__at(buf, first * esize), len * esize)) !=
                    GW_OK)
                    return st;
                moved = 1;
            }
        }

        int finished = in.peer < 0 || in.done == nchunks;
        for (int k = 0; k < nkids; k++)
            finished &= out[k].done == nchunks;
        if (finished)
            return GW_OK;
        if (!moved && (st = gw__streams_wait(comm, all, nkids + 1, "broadcast")) != GW_OK)
            return st;
    }
}
