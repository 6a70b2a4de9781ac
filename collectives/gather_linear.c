/*
 * gather_linear.c - gather to a root, linear: every rank sends its block
 * straight to the root, which posts all n - 1 receives at once, each into
 * its place in recvbuf (block j, count elements, at j * count).
 *
 * Why linear and not a binomial tree: the root must take in (n-1)/n S bytes
 * whatever the shape, so its link bounds both; a tree only saves latency
 * (log2(n) alpha instead of n - 1 messages queued at the root) and pays for
 * it by forwarding each block up to log2(n) times through scratch memory at
 * the inner ranks. For the data-parallel sizes gradwire serves (up to a few
 * dozen ranks, blocks of kilobytes or more) the root's receives overlap on
 * the wire and the linear form is the faster and the simpler one:
 *     T = alpha + (n-1)/n S beta      (at the root, receives overlapped)
 * A binomial tree would be the better choice for tiny blocks on hundreds
 * of ranks; binomial_tree.c has the shape should that be needed.
 *
 * No rank but the root receives anything, so a rank that disagrees would
 * not be noticed by the other leaves: api_more.c runs the dissemination
 * barrier under the call's tag first (as api.c does for broadcast and
 * reduce), after which every rank agrees on count, dtype and root.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/coll.h"

gw_status_t gw__gather_linear(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                              gw_dtype_t dtype, int root)
{
    const int n = comm->size, rank = comm->rank;
    const size_t block = count * gw_dtype_size(dtype);
    if (rank != root) {
        gw_request_t req;
        gw_request_t *one[1] = {&req};
        gw_status_t st = gw__p2p_isend(comm, root, sendbuf, block, &req);
        return st != GW_OK ? st : gw__p2p_waitall(comm, one, 1);
    }
    char *own = gw__at(recvbuf, (size_t)root * block);
    if (block > 0 && (const char *)sendbuf != own)
        memmove(own, sendbuf, block);
    gw_request_t *reqs = calloc((size_t)n, sizeof(*reqs));
    gw_request_t **ptrs = calloc((size_t)n, sizeof(*ptrs));
    gw_status_t st = reqs && ptrs ? GW_OK : GW_ERR_NO_MEMORY;
    for (int j = 0; j < n && st == GW_OK; j++) {
        if (j == root)
            continue;
        st = gw__p2p_irecv(comm, j, gw__at(recvbuf, (size_t)j * block), block, &reqs[j]);
        if (st == GW_OK)
            ptrs[j] = &reqs[j];
    }
    if (st == GW_OK)
        st = gw__p2p_waitall(comm, ptrs, n);
    free(ptrs);
    free(reqs);
    return st;
}
