/*
 * reduce_scatter_ring.c - reduce-scatter around a ring.
 *
 * sendbuf holds n blocks of m = recvcount elements; rank r must end with the
 * reduction of block r. At step s (0 .. n-2) rank r sends block r - s - 1 to
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
 * Incoming chunks land in RS_DEPTH scratch slots; the running partial of the
 * block in transit is kept in recvbuf itself (one block is exactly its
 * size), chunk c of step s overwriting chunk c of step s - 1 once that has
 * been sent on. No resource is ever held waiting for a later message, which
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

/* Messages in flight per direction, and scratch slots for incoming chunks. */
#define RS_DEPTH 2

static inline char *at(char *base, size_t off) { return off ? base + off : base; }
static inline const char *cat(const char *base, size_t off) { return off ? base + off : base; }

static gw_status_t reap(gw_comm_t *comm, gw_request_t *req, size_t posted, size_t *done,
                        int *moved)
{
    while (*done < posted && req[*done % RS_DEPTH].complete) {
        gw_status_t st = req[*done % RS_DEPTH].status;
        if (st != GW_OK)
            return gw__comm_fail(comm, st);
        (*done)++;
        *moved = 1;
    }
    return GW_OK;
}

gw_status_t gw__reduce_scatter_ring(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                    size_t recvcount, gw_dtype_t dtype, gw_op_t op)
{
    const int n = comm->size, rank = comm->rank;
    const int right = (rank + 1) % n, left = (rank - 1 + n) % n;
    const size_t esize = gw_dtype_size(dtype), m = recvcount;
    const size_t chunk = comm->chunk_bytes / esize ? comm->chunk_bytes / esize : 1;
    /* An empty block is still one zero-length message (mismatches surface). */
    const size_t nch = m == 0 ? 1 : (m + chunk - 1) / chunk;
    const size_t total = (size_t)(n - 1) * nch;
    const size_t slot_bytes = (m < chunk ? m : chunk) * esize;
    const int in_place = m > 0 && (const char *)recvbuf == (const char *)sendbuf + rank * m * esize;

    char *slots = NULL;
    const char *own_block = cat(sendbuf, (size_t)rank * m * esize);
    size_t scratch_len = RS_DEPTH * slot_bytes + (in_place ? m * esize : 0);
    if (scratch_len > 0) {
        void *scratch;
        gw_status_t st = gw__comm_scratch(comm, scratch_len, &scratch);
        if (st != GW_OK)
            return st;
        slots = scratch;
        if (in_place) {
            memcpy(slots + RS_DEPTH * slot_bytes, own_block, m * esize);
            own_block = slots + RS_DEPTH * slot_bytes;
        }
    }

    /* Message p (both directions) is chunk p % nch of step p / nch. */
    gw_request_t rreq[RS_DEPTH], sreq[RS_DEPTH];
    size_t recv_posted = 0, recv_done = 0, reduced = 0, send_posted = 0, send_done = 0;
    for (;;) {
        int moved = 0;
        gw_status_t st;
        if ((st = reap(comm, rreq, recv_posted, &recv_done, &moved)) != GW_OK)
            return st;
        if ((st = reap(comm, sreq, send_posted, &send_done, &moved)) != GW_OK)
            return st;

        /* Reduce message p into recvbuf once it is in and the partial it
         * replaces there (from step s - 1) has been sent on. */
        while (reduced < recv_done && (reduced < nch || send_done > reduced)) {
            size_t s = reduced / nch, c = reduced % nch;
            size_t first = c * chunk, len = m - first < chunk ? m - first : chunk;
            if (len > 0) {
                int b = (int)(((size_t)rank + 2 * (size_t)n - s - 2) % (size_t)n);
                const char *own = b == rank ? cat(own_block, first * esize)
                                            : cat(sendbuf, ((size_t)b * m + first) * esize);
                gw__reduce(at(recvbuf, first * esize), slots + (reduced % RS_DEPTH) * slot_bytes,
                           own, len, dtype, op);
            }
            reduced++;
            moved = 1;
        }

        while (recv_posted < total && recv_posted - reduced < RS_DEPTH) {
            size_t c = recv_posted % nch;
            size_t first = c * chunk, len = m - first < chunk ? m - first : chunk;
            st = gw__p2p_irecv(comm, left, at(slots, (recv_posted % RS_DEPTH) * slot_bytes),
                               len * esize, &rreq[recv_posted % RS_DEPTH]);
            if (st != GW_OK)
                return st;
            recv_posted++;
            moved = 1;
        }

        /* Step 0 sends our own block r - 1; later steps forward the partial
         * reduced one step earlier, now in recvbuf. */
        while (send_posted < total && send_posted - send_done < RS_DEPTH &&
               (send_posted < nch || reduced > send_posted - nch)) {
            size_t c = send_posted % nch;
            size_t first = c * chunk, len = m - first < chunk ? m - first : chunk;
            const char *src;
            if (send_posted < nch) {
                size_t b = (size_t)((rank - 1 + n) % n);
                src = cat(sendbuf, (b * m + first) * esize);
            } else {
                src = at(recvbuf, first * esize);
            }
            st = gw__p2p_isend(comm, right, src, len * esize, &sreq[send_posted % RS_DEPTH]);
            if (st != GW_OK)
                return st;
            send_posted++;
            moved = 1;
        }

        if (reduced == total && send_done == total)
            return GW_OK;
        if (moved)
            continue;

        gw_request_t *wait[2 * RS_DEPTH];
        int nwait = 0;
        for (size_t p = recv_done; p < recv_posted; p++)
            if (!rreq[p % RS_DEPTH].complete)
                wait[nwait++] = &rreq[p % RS_DEPTH];
        for (size_t p = send_done; p < send_posted; p++)
            if (!sreq[p % RS_DEPTH].complete)
                wait[nwait++] = &sreq[p % RS_DEPTH];
        if (nwait == 0) {
            GW_ERROR(&comm->log, "coll", "internal error: ring reduce-scatter stalled");
            return gw__comm_fail(comm, GW_ERR_PROTOCOL);
        }
        int idx;
        if ((st = gw__p2p_waitany(comm, wait, nwait, &idx)) != GW_OK)
            return st;
    }
}
