/*
 * reduce_tree.c - pipelined binomial-tree reduce to any root.
 *
 * Ranks are renumbered relative to the root (v = rank - root mod n). Rank v's
 * parent is v with its lowest set bit cleared; its children are v + 2^k for
 * every 2^k below that bit, so the subtree of child v + 2^k covers exactly
 * the relative ranks [v + 2^k, v + 2^(k+1)). Data flows towards the root:
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
 * chunks land in REDUCE_DEPTH scratch slots per child; a node folds chunk c
 * as soon as all its children's chunk c is in, and sends it on while later
 * chunks are still arriving. An inner node other than the root folds into
 * REDUCE_DEPTH accumulator slots of scratch (its recvbuf may be NULL), a leaf
 * sends straight from sendbuf, and the root folds into recvbuf. Each link
 * carries one stream in one direction, so both ends post in the same order.
 *
 * Cost for S bytes, d = ceil(log2 n), chunks of c bytes: the root receives
 * and reduces every chunk d times (once per child):
 *     T ~ (C + d - 1) d (alpha + c beta + c gamma),   C = S / c chunks.
 */
#include "collectives/coll.h"

/* Chunks in flight per link (and scratch slots per child). */
#define REDUCE_DEPTH 2
#define REDUCE_MAX_KIDS 32

typedef struct stream {
    int peer;
    size_t posted, done;
    gw_request_t req[REDUCE_DEPTH];
} stream_t;

static inline char *at(char *base, size_t off) { return off ? base + off : base; }
static inline const char *cat(const char *base, size_t off) { return off ? base + off : base; }

static gw_status_t reap(gw_comm_t *comm, stream_t *s, int *moved)
{
    while (s->done < s->posted && s->req[s->done % REDUCE_DEPTH].complete) {
        gw_status_t st = s->req[s->done % REDUCE_DEPTH].status;
        if (st != GW_OK)
            return gw__comm_fail(comm, st);
        s->done++;
        *moved = 1;
    }
    return GW_OK;
}

gw_status_t gw__reduce_tree(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                            gw_dtype_t dtype, gw_op_t op, int root)
{
    const int n = comm->size;
    const int v = (comm->rank - root + n) % n;
    const size_t esize = gw_dtype_size(dtype);
    const size_t chunk = comm->chunk_bytes / esize ? comm->chunk_bytes / esize : 1;
    /* An empty buffer is still one zero-length chunk (mismatches surface). */
    const size_t nchunks = count == 0 ? 1 : (count + chunk - 1) / chunk;
    const size_t slot_bytes = (count < chunk ? count : chunk) * esize;

    stream_t out = {.peer = -1}, in[REDUCE_MAX_KIDS];
    int nkids = 0, limit = 1;
    if (v > 0) {
        out.peer = ((v & (v - 1)) + root) % n;
        limit = v & -v;
    } else {
        while (limit < n)
            limit <<= 1;
    }
    for (int mask = 1; mask < limit && v + mask < n; mask <<= 1) {
        in[nkids].peer = (v + mask + root) % n;
        in[nkids].posted = in[nkids].done = 0;
        nkids++;
    }

    /* Scratch: REDUCE_DEPTH slots per child, then (inner non-root nodes)
     * REDUCE_DEPTH accumulator slots. */
    char *slots = NULL, *acc = NULL;
    const int use_acc = nkids > 0 && out.peer >= 0;
    size_t scratch_len = ((size_t)nkids + (use_acc ? 1 : 0)) * REDUCE_DEPTH * slot_bytes;
    if (scratch_len > 0) {
        void *scratch;
        gw_status_t st = gw__comm_scratch(comm, scratch_len, &scratch);
        if (st != GW_OK)
            return st;
        slots = scratch;
        if (use_acc)
            acc = slots + (size_t)nkids * REDUCE_DEPTH * slot_bytes;
    }

    size_t reduced = nkids ? 0 : nchunks; /* a leaf has nothing to fold */
    for (;;) {
        int moved = 0;
        gw_status_t st;
        for (int k = 0; k < nkids; k++)
            if ((st = reap(comm, &in[k], &moved)) != GW_OK)
                return st;
        if (out.peer >= 0 && (st = reap(comm, &out, &moved)) != GW_OK)
            return st;

        /* Fold chunk `reduced` once every child's copy is in (and, on an
         * inner node, once its accumulator slot has been sent). */
        while (reduced < nchunks && (!use_acc || reduced - out.done < REDUCE_DEPTH)) {
            int ready = 1;
            for (int k = 0; k < nkids; k++)
                ready &= in[k].done > reduced;
            if (!ready)
                break;
            size_t first = reduced * chunk;
            size_t len = count - first < chunk ? count - first : chunk;
            if (len > 0) {
                size_t slot = (reduced % REDUCE_DEPTH) * slot_bytes;
                char *dst = use_acc ? acc + slot : at(recvbuf, first * esize);
                const char *own = cat(sendbuf, first * esize);
                for (int k = 0; k < nkids; k++) {
                    const char *kid = slots + (size_t)k * REDUCE_DEPTH * slot_bytes + slot;
                    gw__reduce(dst, k == 0 ? own : dst, kid, len, dtype, op);
                }
            }
            reduced++;
            moved = 1;
        }

        for (int k = 0; k < nkids; k++) {
            stream_t *s = &in[k];
            while (s->posted < nchunks && s->posted - reduced < REDUCE_DEPTH) {
                size_t first = s->posted * chunk;
                size_t len = count - first < chunk ? count - first : chunk;
                char *dst = at(slots, ((size_t)k * REDUCE_DEPTH + s->posted % REDUCE_DEPTH) *
                                          slot_bytes);
                st = gw__p2p_irecv(comm, s->peer, dst, len * esize,
                                   &s->req[s->posted % REDUCE_DEPTH]);
                if (st != GW_OK)
                    return st;
                s->posted++;
                moved = 1;
            }
        }

        while (out.peer >= 0 && out.posted < reduced && out.posted - out.done < REDUCE_DEPTH) {
            size_t first = out.posted * chunk;
            size_t len = count - first < chunk ? count - first : chunk;
            const char *src = use_acc ? at(acc, (out.posted % REDUCE_DEPTH) * slot_bytes)
                                      : cat(sendbuf, first * esize);
            st = gw__p2p_isend(comm, out.peer, src, len * esize,
                               &out.req[out.posted % REDUCE_DEPTH]);
            if (st != GW_OK)
                return st;
            out.posted++;
            moved = 1;
        }

        int finished = reduced == nchunks && (out.peer < 0 || out.done == nchunks);
        for (int k = 0; k < nkids; k++)
            finished &= in[k].done == nchunks;
        if (finished)
            return GW_OK;
        if (moved)
            continue;

        gw_request_t *wait[(REDUCE_MAX_KIDS + 1) * REDUCE_DEPTH];
        int nwait = 0;
        for (int k = -1; k < nkids; k++) {
            stream_t *s = k < 0 ? &out : &in[k];
            if (s->peer < 0)
                continue;
            for (size_t m = s->done; m < s->posted; m++)
                if (!s->req[m % REDUCE_DEPTH].complete)
                    wait[nwait++] = &s->req[m % REDUCE_DEPTH];
        }
        if (nwait == 0) {
            GW_ERROR(&comm->log, "coll", "internal error: reduce stalled");
            return gw__comm_fail(comm, GW_ERR_PROTOCOL);
        }
        int idx;
        if ((st = gw__p2p_waitany(comm, wait, nwait, &idx)) != GW_OK)
            return st;
    }
}
