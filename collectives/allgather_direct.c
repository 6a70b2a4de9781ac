/*
 * allgather_direct.c - allgather in one round: every rank sends its block to
 * every peer and receives every peer's block, all posted at once.
 *
 * recvbuf holds n blocks of m elements, block b being rank b's sendbuf.
 * Rank r puts its own block in place (nothing to do in place, where
 * sendbuf == recvbuf + r m), posts a receive from every peer j straight
 * into block j, and sends block r to every peer from its place in recvbuf,
 * which nothing writes during the call. Data is only copied, so every rank
 * holds the same bytes.
 *
 * The ring's n - 1 dependent steps become one round of n - 1 concurrent
 * messages each way: on one host over shared memory, where a message costs
 * a few stores and the steps' dependence costs a wake-up each, that is the
 * latency choice; between hosts each further message of the round costs a
 * rank its CPU work (alpha_local, a system call over TCP), so the model
 * (tuning_coll.c) keeps it for small blocks and few ranks:
 *     T = alpha + (n-2) alpha_local + (n-1)/n S beta.
 */
#include <string.h>

#include "collectives/coll.h"

gw_status_t gw__allgather_direct(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                 size_t sendcount, gw_dtype_t dtype)
{
    const int rank = comm->rank;
    const size_t bytes = sendcount * gw_dtype_size(dtype);
    char *mine = gw__at(recvbuf, (size_t)rank * bytes);
    if (bytes > 0 && (const char *)sendbuf != mine)
        memcpy(mine, sendbuf, bytes);

    gw__exchange_t x;
    char *unused;
    gw_status_t st = gw__exchange_scratch(comm, 0, &x, &unused);
    if (st != GW_OK)
        return st;
    /* Every peer's block straight into its place; ours to everyone. */
    return gw__exchange_round(comm, &x, recvbuf, bytes, mine, 0, bytes);
}
