/*
 * allreduce_rd.c - recursive doubling: the latency-optimal allreduce for
 * small messages.
 *
 * Let p be the largest power of two <= n. In round k (mask = 2^k) rank r
 * exchanges its whole current vector with rank r ^ mask and both combine the
 * two; after log2 p rounds every rank of [0, p) holds the full reduction.
 * Each pair computes op(lower rank's vector, higher rank's vector), in that
 * order on both sides, from the very same bytes, so the two partners agree
 * bitwise (even when op picks one of two NaN payloads) and, by induction,
 * so do all p ranks.
 *
 * When n is not a power of two, the n - p extra ranks fold in first: rank
 * p + i sends its vector to rank i, which combines op(own, extra) (the lower
 * rank first again); after the doubling rank i sends the result back.
 *
 * Cost for S bytes, L = log2 p rounds:
 *     T = L alpha + L S beta + L S gamma        (+2 (alpha + S beta) to fold)
 * Fewest message latencies of all algorithms, but every round moves the
 * whole vector, so it only wins while S beta is small next to alpha. No
 * chunking: each round is one message each way.
 *
 * Buffers: the first round reads sendbuf directly, later rounds recvbuf;
 * the partner's vector lands in scratch. An extra rank in place receives the
 * result into the buffer it sent from, which is safe: the result cannot
 * arrive before its partner has received the whole vector.
 */
#include "collectives/coll.h"

gw_status_t gw__allreduce_rd(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                             gw_dtype_t dtype, gw_op_t op)
{
    const int n = comm->size, rank = comm->rank;
    const size_t bytes = count * gw_dtype_size(dtype);
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    gw_status_t st;

    if (rank >= p) {
        /* Extra rank: hand our vector to rank - p, get the result back. */
        gw_request_t sreq, rreq;
        if ((st = gw__p2p_isend(comm, rank - p, sendbuf, bytes, &sreq)) != GW_OK)
            return st;
        if ((st = gw__p2p_irecv(comm, rank - p, recvbuf, bytes, &rreq)) != GW_OK)
            return st;
        gw_request_t *reqs[2] = {&sreq, &rreq};
        return gw__p2p_waitall(comm, reqs, 2);
    }

    char *peer_data;
    if ((st = gw__coll_scratch(comm, bytes, &peer_data)) != GW_OK)
        return st;
    /* The vector we hold so far: our own input until the first combine. */
    const void *cur = sendbuf;

    if (rank < n - p) {
        gw_request_t rreq;
        if ((st = gw__p2p_irecv(comm, rank + p, peer_data, bytes, &rreq)) != GW_OK)
            return st;
        gw_request_t *reqs[1] = {&rreq};
        if ((st = gw__p2p_waitall(comm, reqs, 1)) != GW_OK)
            return st;
        if (count > 0 &&
            (st = gw__coll_reduce(comm, recvbuf, cur, peer_data, count, dtype, op)) != GW_OK)
            return st;
        cur = recvbuf;
    }

    for (int mask = 1; mask < p; mask <<= 1) {
        int partner = rank ^ mask;
        st = gw__p2p_sendrecv(comm, partner, cur, bytes, partner, peer_data, bytes);
        if (st != GW_OK)
            return st;
        if (count > 0) {
            /* The lower rank's data first, so both ends get the same bits. */
            st = rank < partner ? gw__coll_reduce(comm, recvbuf, cur, peer_data, count, dtype, op)
                                : gw__coll_reduce(comm, recvbuf, peer_data, cur, count, dtype, op);
            if (st != GW_OK)
                return st;
        }
        cur = recvbuf;
    }

    if (rank < n - p) {
        gw_request_t sreq;
        if ((st = gw__p2p_isend(comm, rank + p, recvbuf, bytes, &sreq)) != GW_OK)
            return st;
        gw_request_t *reqs[1] = {&sreq};
        return gw__p2p_waitall(comm, reqs, 1);
    }
    return GW_OK;
}
