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
    const int n = comm->size, rank = comm->rank;
    const size_t bytes = sendcount * gw_dtype_size(dtype);
    char *mine = gw__at(recvbuf, (size_t)rank * bytes);
    if (bytes > 0 && (const char *)sendbuf != mine)
        memcpy(mine, sendbuf, bytes);

    /* 2 requests per peer and their pointers (NULL: this rank's own pair). */
    char *mem;
    const size_t req_bytes = 2 * (size_t)n * sizeof(gw_request_t);
    gw_status_t st =
        gw__coll_scratch(comm, req_bytes + 2 * (size_t)n * sizeof(gw_request_t *), &mem);
    if (st != GW_OK)
        return st;
    gw_request_t *req = (gw_request_t *)(void *)mem;
    gw_request_t **ptr = (gw_request_t **)(void *)(mem + req_bytes);
    for (int j = 0; j < n; j++) {
        ptr[2 * j] = ptr[2 * j + 1] = NULL;
        if (j == rank)
            continue;
        if ((st = gw__p2p_irecv(comm, j, gw__at(recvbuf, (size_t)j * bytes), bytes, &req[2 * j])) !=
            GW_OK)
            break;
        ptr[2 * j] = &req[2 * j];
        if ((st = gw__p2p_isend(comm, j, mine, bytes, &req[2 * j + 1])) != GW_OK)
            break;
        ptr[2 * j + 1] = &req[2 * j + 1];
    }
    /* On a failed post the communicator fails; the requests already posted
     * are the transport's to finish or abort, as in the other algorithms. */
    return st != GW_OK ? st : gw__p2p_waitall(comm, ptr, 2 * n);
}
