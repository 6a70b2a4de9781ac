/*
 * allgather_bruck.c - allgather in ceil(log2 n) rounds, for any n (Bruck et
 * al., "Efficient algorithms for all-to-all communications in
 * multiprocessor systems", 1997): the latency choice between hosts.
 *
 * Rank r keeps the blocks it has gathered in scratch, relative to itself:
 * slot i holds the block of rank (r + i) mod n. It starts with its own
 * block in slot 0. In the round of distance d (1, 2, 4, ...), it sends
 * slots 0 .. k - 1, k = min(d, n - d), to rank r - d and receives rank
 * r + d's slots 0 .. k - 1 into its slots d .. d + k - 1: rank r + d's slot
 * i is the block of rank r + d + i, which is this rank's slot d + i. After
 * the rounds slots 0 .. n - 1 are full, and each goes to its place in
 * recvbuf (block (r + i) mod n). Data is only copied, so every rank holds
 * the same bytes.
 *
 * Recursive doubling would need n to be a power of two; Bruck's rotation
 * makes any n take the same ceil(log2 n) rounds, at the price of one local
 * copy of the whole result:
 *     T = ceil(log2 n) alpha + (n-1)/n S beta + S beta_local.
 */
#include <string.h>

#include "collectives/coll.h"

gw_status_t gw__allgather_bruck(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                size_t sendcount, gw_dtype_t dtype)
{
    const int n = comm->size, rank = comm->rank;
    const size_t bytes = sendcount * gw_dtype_size(dtype);
    char *slots = NULL;
    gw_status_t st = gw__coll_scratch(comm, (size_t)n * bytes, &slots);
    if (st != GW_OK)
        return st;
    if (bytes > 0)
        memcpy(slots, sendbuf, bytes);
    for (int d = 1; d < n; d *= 2) {
        const size_t k = (size_t)(d < n - d ? d : n - d);
        if ((st = gw__p2p_sendrecv(comm, (rank - d + n) % n, slots, k * bytes, (rank + d) % n,
                                   gw__at(slots, (size_t)d * bytes), k * bytes)) != GW_OK)
            return st;
    }
    for (int i = 0; i < n && bytes > 0; i++)
        memcpy((char *)recvbuf + (size_t)((rank + i) % n) * bytes, slots + (size_t)i * bytes,
               bytes);
    return GW_OK;
}
