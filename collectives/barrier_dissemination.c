/*
 * barrier_dissemination.c - dissemination barrier (Hensgen, Finkel and
 * Manber).
 *
 * In round k (k = 0 .. ceil(log2 n) - 1) rank r sends an empty message to
 * rank r + 2^k and waits for one from rank r - 2^k (mod n). After round k a
 * rank has heard, directly or through the chain of earlier rounds, from the
 * 2^(k+1) - 1 ranks before it, so after ceil(log2 n) rounds it knows that
 * every rank has entered the barrier. Unlike a gather-then-release tree it
 * needs no root and every round is a single concurrent exchange:
 *     T = ceil(log2 n) alpha.
 * The distances 2^k are distinct and below n, so a pair of ranks never
 * exchanges two messages in one direction within one barrier, and the
 * messages carry no payload: the collective's tag alone identifies them.
 */
#include "collectives/coll.h"

gw_status_t gw__barrier_dissemination(gw_comm_t *comm)
{
    const int n = comm->size, rank = comm->rank;
    for (int dist = 1; dist < n; dist <<= 1) {
        gw_status_t st =
            gw__p2p_sendrecv(comm, (rank + dist) % n, NULL, 0, (rank - dist + n) % n, NULL, 0);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}
