/*
 * broadcast_tree.c - pipelined broadcast from any root, over a binomial tree
 * or a chain.
 *
 * Ranks are renumbered relative to the root (v = rank - root mod n). The
 * buffer is cut into chunks of comm->chunk_bytes; every rank receives each
 * chunk from its parent straight into the buffer and forwards it to its
 * children as soon as it is in, so later chunks are still arriving while
 * earlier ones travel on.
 *
 * Two shapes, chosen from the chunk count C and n alone, so every rank picks
 * the same one:
 *  - binomial tree: v's parent is v with its lowest set bit cleared, its
 *    children v + 2^k for every 2^k below that bit (the largest subtree is
 *    served first). Depth d = ceil(log2 n), but the root sends each chunk d
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

/* Chunks in flight per link. */
#define BCAST_DEPTH 2
/* Children in a binomial tree: at most ceil(log2 n) <= 31 for int ranks. */
#define BCAST_MAX_KIDS 32

typedef struct stream {
    int peer;
    size_t posted, done;
    gw_request_t req[BCAST_DEPTH];
} stream_t;

static inline char *at(char *base, size_t off) { return off ? base + off : base; }

static gw_status_t reap(gw_comm_t *comm, stream_t *s, int *moved)
{
    while (s->done < s->posted && s->req[s->done % BCAST_DEPTH].complete) {
        gw_status_t st = s->req[s->done % BCAST_DEPTH].status;
        if (st != GW_OK)
            return gw__comm_fail(comm, st);
        s->done++;
        *moved = 1;
    }
    return GW_OK;
}

gw_status_t gw__broadcast_tree(gw_comm_t *comm, void *buf, size_t count, gw_dtype_t dtype,
                               int root)
{
    const int n = comm->size;
    const int v = (comm->rank - root + n) % n;
    const size_t esize = gw_dtype_size(dtype);
    const size_t chunk = comm->chunk_bytes / esize ? comm->chunk_bytes / esize : 1;
    /* An empty buffer still travels as one zero-length chunk, so ranks that
     * disagree about the count are caught. */
    const size_t nchunks = count == 0 ? 1 : (count + chunk - 1) / chunk;

    int depth = 0;
    while ((1 << depth) < n)
        depth++;
    const int chain = (double)nchunks * (depth - 1) > (double)(n - 2);

    stream_t in = {.peer = -1}, out[BCAST_MAX_KIDS];
    int nkids = 0;
    if (chain) {
        if (v > 0)
            in.peer = (v - 1 + root) % n;
        if (v + 1 < n)
            out[nkids++].peer = (v + 1 + root) % n;
    } else {
        int limit = 1; /* children are v + mask for mask < lowest bit of v */
        if (v > 0) {
            in.peer = ((v & (v - 1)) + root) % n;
            limit = v & -v;
        } else {
            while (limit < n)
                limit <<= 1;
        }
        for (int mask = limit >> 1; mask > 0; mask >>= 1)
            if (v + mask < n)
                out[nkids++].peer = (v + mask + root) % n;
    }
    for (int k = 0; k < nkids; k++)
        out[k].posted = out[k].done = 0;
    in.posted = in.done = 0;

    for (;;) {
        int moved = 0;
        gw_status_t st;
        if (in.peer >= 0 && (st = reap(comm, &in, &moved)) != GW_OK)
            return st;
        for (int k = 0; k < nkids; k++)
            if ((st = reap(comm, &out[k], &moved)) != GW_OK)
                return st;

        while (in.peer >= 0 && in.posted < nchunks && in.posted - in.done < BCAST_DEPTH) {
            size_t first = in.posted * chunk;
            size_t len = count - first < chunk ? count - first : chunk;
            st = gw__p2p_irecv(comm, in.peer, at(buf, first * esize), len * esize,
                               &in.req[in.posted % BCAST_DEPTH]);
            if (st != GW_OK)
                return st;
            in.posted++;
            moved = 1;
        }

        size_t have = in.peer >= 0 ? in.done : nchunks;
        for (int k = 0; k < nkids; k++) {
            stream_t *s = &out[k];
            while (s->posted < have && s->posted - s->done < BCAST_DEPTH) {
                size_t first = s->posted * chunk;
                size_t len = count - first < chunk ? count - first : chunk;
                st = gw__p2p_isend(comm, s->peer, at(buf, first * esize), len * esize,
                                   &s->req[s->posted % BCAST_DEPTH]);
                if (st != GW_OK)
                    return st;
                s->posted++;
                moved = 1;
            }
        }

        int finished = in.peer < 0 || in.done == nchunks;
        for (int k = 0; k < nkids; k++)
            finished &= out[k].done == nchunks;
        if (finished)
            return GW_OK;
        if (moved)
            continue;

        gw_request_t *wait[(BCAST_MAX_KIDS + 1) * BCAST_DEPTH];
        int nwait = 0;
        for (int k = -1; k < nkids; k++) {
            stream_t *s = k < 0 ? &in : &out[k];
            if (s->peer < 0)
                continue;
            for (size_t m = s->done; m < s->posted; m++)
                if (!s->req[m % BCAST_DEPTH].complete)
                    wait[nwait++] = &s->req[m % BCAST_DEPTH];
        }
        if (nwait == 0) {
            GW_ERROR(&comm->log, "coll", "internal error: broadcast stalled");
            return gw__comm_fail(comm, GW_ERR_PROTOCOL);
        }
        int idx;
        if ((st = gw__p2p_waitany(comm, wait, nwait, &idx)) != GW_OK)
            return st;
    }
}
