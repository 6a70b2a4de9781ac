/*
 * reduce_scatter_ring.c - reduce-scatter around a ring.
 *
 * sendbuf holds n blocks of m = recvcount elements; rank r must end with the
 * reduction of block r. The ring visits the ranks in the communicator's
 * host-contiguous order (core/topo.h); below, "rank r" and "block r" are
 * the rank at ring position r and its block, which lies in every buffer
 * where the caller's rank order puts it. At step s (0 .. n-2) rank r sends block r - s - 1 to
 * its right neighbour and receives block r - s - 2 from its left one,
 * combines it with its own contribution and passes it on at the next step.
 * Block b thus starts at rank b + 1, picks up one contribution per hop and
 * is complete at rank b after n - 1 hops, in the fixed order
 *     op(... op(op(x[b+1], x[b+2]), x[b+3]) ..., x[b])      (ranks mod n),
 * the incoming partial always being the left operand. Each block is reduced
 * on exactly one path, so no rank recomputes anything another holds.
 *
 * Streaming: blocks are cut into chunks of comm->chunk_bytes, and chunk c of
 * step s is sent as soon as chunk c of step s - 1 has been reduced.
 * Incoming chunks land in GW__STREAM_DEPTH scratch slots (core/p2p.h); the
 * running partial of the block in transit is kept in recvbuf itself (one
 * block is exactly its size), chunk c of step s overwriting chunk c of step
 * s - 1 once that has been sent on. No resource is ever held waiting for a later message, which
 * keeps the pipeline free of deadlock even on transports where a send only
 * completes once the receiver has posted its receive. In place (recvbuf ==
 * sendbuf + r m) our own block would be overwritten by those partials, so it
 * is first copied aside into scratch.
 *
 * Cost for S = n m elements' bytes: every rank sends, receives and reduces
 * (n-1)/n S, in n - 1 steps:
 *     T = (n-1) alpha + (n-1)/n S beta + (n-1)/n S gamma.
 */
#include <string.h>

#include "collectives/coll.h"

#define DEPTH GW__STREAM_DEPTH

gw_status_t gw__reduce_scatter_ring(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                    size_t recvcount, gw_dtype_t dtype, gw_op_t op)
{
    const int n = comm->size, rank = comm->rank, pos = gw__ring_pos(comm);
    const size_t esize = gw_dtype_size(dtype), m = recvcount;
    const size_t chunk = gw__chunk_elems(comm, esize);
    /* An empty block is still one zero-length message (mismatches surface). */
    const size_t nch = m == 0 ? 1 : (m + chunk - 1) / chunk;
    const size_t total = (size_t)(n - 1) * nch;
    const size_t slot_bytes = (m < chunk ? m : chunk) * esize;
    const int in_place = m > 0 && (const char *)recvbuf == (const char *)sendbuf + rank * m * esize;

    char *slots;
    const char *own_block = gw__cat(sendbuf, (size_t)rank * m * esize);
    gw_status_t st0 =
        gw__coll_scratch(comm, DEPTH * slot_bytes + (in_place ? m * esize : 0), &slots);
    if (st0 != GW_OK)
        return st0;
    if (in_place) {
        memcpy(slots + DEPTH * slot_bytes, own_block, m * esize);
        own_block = slots + DEPTH * slot_bytes;
    }

    /* Message p (both directions) is chunk p % nch of step p / nch; incoming
     * message p lands in scratch slot p % DEPTH. */
    gw__stream_t in, out;
    gw__stream_init(&in, gw__ring_rank(comm, (pos - 1 + n) % n));
    gw__stream_init(&out, gw__ring_rank(comm, (pos + 1) % n));
    gw__stream_t *const both[2] = {&in, &out};
    size_t reduced = 0;
    for (;;) {
        int moved = 0;
        gw_status_t st;
        if ((st = gw__streams_reap(comm, both, 2, &moved)) != GW_OK)
            return st;

        /* Reduce message p into recvbuf once it is in and the partial it
         * replaces there (from step s - 1) has been sent on. */
        while (reduced < in.done && (reduced < nch || out.done > reduced)) {
            size_t s = reduced / nch, c = reduced % nch;
            size_t first = c * chunk, len = m - first < chunk ? m - first : chunk;
            if (len > 0) {
                int b =
                    gw__ring_rank(comm, (int)(((size_t)pos + 2 * (size_t)n - s - 2) % (size_t)n));
                const char *own = b == rank ? gw__cat(own_block, first * esize)
                                            : gw__cat(sendbuf, ((size_t)b * m + first) * esize);
                gw_status_t rst =
                    gw__coll_reduce(comm, gw__at(recvbuf, first * esize),
                                    slots + (reduced % DEPTH) * slot_bytes, own, len, dtype, op);
                if (rst != GW_OK)
                    return rst;
            }
            reduced++;
            moved = 1;
        }

        while (in.posted < total && in.posted - reduced < DEPTH) {
            size_t c = in.posted % nch;
            size_t first = c * chunk, len = m - first < chunk ? m - first : chunk;
            st = gw__stream_recv(comm, &in, gw__at(slots, (in.posted % DEPTH) * slot_bytes),
                                 len * esize);
            if (st != GW_OK)
                return st;
            moved = 1;
        }

        /* Step 0 sends our own block r - 1; later steps forward the partial
         * reduced one step earlier, now in recvbuf. */
        while (out.posted < total && gw__stream_room(&out) &&
               (out.posted < nch || reduced > out.posted - nch)) {
            size_t c = out.posted % nch;
            size_t first = c * chunk, len = m - first < chunk ? m - first : chunk;
            const char *src;
            if (out.posted < nch) {
                size_t b = (size_t)gw__ring_rank(comm, (pos - 1 + n) % n);
                src = gw__cat(sendbuf, (b * m + first) * esize);
            } else {
                src = gw__at(recvbuf, first * esize);
            }
            if ((st = gw__stream_send(comm, &out, src, len * esize)) != GW_OK)
                return st;
            moved = 1;
        }

        if (reduced == total && out.done == total)
            return GW_OK;
        if (!moved && (st = gw__streams_wait(comm, both, 2, "ring reduce-scatter")) != GW_OK)
            return st;
    }
}
