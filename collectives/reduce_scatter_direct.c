/*
 * reduce_scatter_direct.c - reduce-scatter in one round: every rank sends
 * block j of its input to rank j and reduces the n contributions to its own
 * block, all messages posted at once.
 *
 * sendbuf holds n blocks of m = recvcount elements; rank r's result is the
 * reduction of block r over every rank. Rank r posts a receive of block r
 * from every peer j into scratch slot j, sends its block j to every peer j,
 * copies its own block r into slot r, and once every message is in reduces
 * the slots in rank order (x0 op x1 op ... op x(n-1)) into recvbuf. Only
 * rank r reduces block r, so the order is its choice; rank order makes the
 * result independent of the placement.
 *
 * In place (recvbuf == sendbuf + r m): the own block is copied to its slot
 * before anything is written, and recvbuf is written only after every send
 * completed; the blocks sent are never the one written.
 *
 * The ring's n - 1 dependent steps become one round of n - 1 concurrent
 * messages each way (the latency choice on one host over shared memory, and
 * for small blocks on few ranks elsewhere; tuning_coll.c):
 *     T = alpha + (n-2) alpha_local + (n-1)/n S (beta + gamma).
 */
#include <string.h>

#include "collectives/coll.h"

gw_status_t gw__reduce_scatter_direct(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                      size_t recvcount, gw_dtype_t dtype, gw_op_t op)
{
    const int n = comm->size, rank = comm->rank;
    const size_t bytes = recvcount * gw_dtype_size(dtype);
    gw__exchange_t x;
    char *slots;
    gw_status_t st = gw__exchange_scratch(comm, (size_t)n * bytes, &x, &slots);
    if (st != GW_OK)
        return st;
    if (bytes > 0)
        memcpy(slots + (size_t)rank * bytes, gw__cat(sendbuf, (size_t)rank * bytes), bytes);
    /* Block j of our input to rank j; rank j's block r into slot j. */
    if ((st = gw__exchange_round(comm, &x, slots, bytes, sendbuf, bytes, bytes)) != GW_OK ||
        recvcount == 0)
        return st;
    st = gw__coll_reduce(comm, recvbuf, slots, slots + bytes, recvcount, dtype, op);
    for (int j = 2; j < n && st == GW_OK; j++)
        st = gw__coll_reduce(comm, recvbuf, recvbuf, slots + (size_t)j * bytes, recvcount, dtype,
                             op);
    return st;
}
