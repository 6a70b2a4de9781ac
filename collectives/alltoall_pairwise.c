/*
 * alltoall_pairwise.c - alltoall and alltoallv by pairwise exchange (the
 * shift schedule).
 *
 * Every rank r has a block for every rank j (sblocks: where in sendbuf,
 * how many elements) and receives one block from every rank (rblocks: where
 * in recvbuf). Rank r copies its own block locally; then at step k
 * (k = 1 .. n-1) it sends its block for rank r + k and receives rank
 * r - k's block for it (mod n), both posted before waiting
 * (gw__p2p_sendrecv), straight between the caller's buffers. At each step
 * the pairs form one permutation of the ranks (a shift by k), so every rank
 * sends exactly one message and receives exactly one: no rank faces n - 1
 * incoming streams at once (the incast of posting everything together),
 * requests and memory stay constant, and each message is one block whole
 * (the transports stream it; no chunking needed, nothing is forwarded).
 *
 * Why not Bruck's log2(n) rounds: they win for tiny blocks on many ranks,
 * but move each byte log2(n) / 2 times through scratch; gradient and
 * activation exchanges (MoE dispatch, sparse top-k) are bandwidth-bound, and
 * this schedule sends each byte once:
 *     T = (n-1) alpha + (n-1)/n S beta      (S = n blocks of m elements)
 *
 * Mismatches: the transports match each message by tag and exact length.
 * alltoall's tag carries the count and dtype, and every rank receives from
 * every other, so a rank that disagrees is caught by everyone directly.
 * alltoallv's per-pair counts differ legitimately; a pair that disagrees
 * (rank a sends b x elements, b expects y) fails at b's receive with
 * GW_ERR_MISMATCH, and api_more.c closes the call with a dissemination
 * barrier so that no other rank returns GW_OK first.
 */
#include <string.h>

#include "collectives/coll.h"

gw_status_t gw__alltoall_pairwise(gw_comm_t *comm, const void *sendbuf, const gw__blocks_t *sblocks,
                                  void *recvbuf, const gw__blocks_t *rblocks, gw_dtype_t dtype)
{
    const int n = comm->size, rank = comm->rank;
    const size_t esize = gw_dtype_size(dtype);
    size_t own = gw__block_count(sblocks, rank) * esize;
    const char *from = gw__cat(sendbuf, gw__block_displ(sblocks, rank) * esize);
    char *to = gw__at(recvbuf, gw__block_displ(rblocks, rank) * esize);
    if (own > 0 && from != to)
        memmove(to, from, own);
    for (int k = 1; k < n; k++) {
        int dst = (rank + k) % n, src = (rank - k + n) % n;
        gw_status_t st =
            gw__p2p_sendrecv(comm, dst, gw__cat(sendbuf, gw__block_displ(sblocks, dst) * esize),
                             gw__block_count(sblocks, dst) * esize, src,
                             gw__at(recvbuf, gw__block_displ(rblocks, src) * esize),
                             gw__block_count(rblocks, src) * esize);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}
