/*
 * exchange_round.c - one round of concurrent messages with every peer, the
 * step the one-round algorithms share (allgather_direct.c,
 * reduce_scatter_direct.c): a receive from and a send to every other rank,
 * all posted before any is waited for, so that no pair waits on another.
 *
 * Each pair exchanges one message each way, posted in the same order on
 * both ends (receive, then send, for every peer in rank order), so in-order
 * matching per peer needs nothing more. The requests live in the
 * communicator's scratch, ahead of whatever the algorithm keeps there
 * (gw__exchange_scratch), so that a failed round leaves nothing freed that
 * the transport may still hold.
 */
#include "collectives/coll.h"

gw_status_t gw__exchange_scratch(gw_comm_t *comm, size_t extra, gw__exchange_t *x, char **rest)
{
    const size_t n2 = 2 * (size_t)comm->size;
    const size_t req_bytes = n2 * sizeof(gw_request_t);
    const size_t head = (req_bytes + n2 * sizeof(gw_request_t *) + 63) & ~(size_t)63;
    char *mem;
    gw_status_t st = gw__coll_scratch(comm, head + extra, &mem);
    if (st != GW_OK)
        return st;
    x->req = (gw_request_t *)(void *)mem;
    x->ptr = (gw_request_t **)(void *)(mem + req_bytes);
    *rest = mem + head;
    return GW_OK;
}

gw_status_t gw__exchange_round(gw_comm_t *comm, const gw__exchange_t *x, char *rbase,
                               size_t rstride, const char *sbase, size_t sstride, size_t len)
{
    const int n = comm->size, rank = comm->rank;
    gw_status_t st = GW_OK;
    for (int j = 0; j < 2 * n; j++)
        x->ptr[j] = NULL;
    for (int j = 0; j < n && st == GW_OK; j++) {
        if (j == rank)
            continue;
        st = gw__p2p_irecv(comm, j, gw__at(rbase, (size_t)j * rstride), len, &x->req[2 * j]);
        if (st != GW_OK)
            break;
        x->ptr[2 * j] = &x->req[2 * j];
        st = gw__p2p_isend(comm, j, gw__cat(sbase, (size_t)j * sstride), len, &x->req[2 * j + 1]);
        if (st == GW_OK)
            x->ptr[2 * j + 1] = &x->req[2 * j + 1];
    }
    /* On a failed post the communicator fails; the requests already posted
     * are the transport's to finish or abort, as in the other algorithms. */
    return st != GW_OK ? st : gw__p2p_waitall(comm, x->ptr, 2 * n);
}
