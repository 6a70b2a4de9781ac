/*
 * scatter_linear.c - scatter from a root, linear: the root posts all n - 1
 * sends at once, block j (count elements at j * count of sendbuf) straight
 * to rank j, and copies its own block; every other rank receives its block
 * straight into recvbuf.
 *
 * Linear for the reasons gather_linear.c gives, mirrored: the root's link
 * carries (n-1)/n S bytes in any shape, so a binomial tree would only save
 * latency on tiny blocks and pays with forwarding through scratch:
 *     T = alpha + (n-1)/n S beta
 *
 * A leaf hears only from the root, so api_more.c runs the dissemination
 * barrier under the call's tag first: ranks that disagree about count,
 * dtype or root all fail there with GW_ERR_MISMATCH, and none waits for a
 * block that never comes.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/coll.h"

gw_status_t gw__scatter_linear(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                               gw_dtype_t dtype, int root)
{
    const int n = comm->size, rank = comm->rank;
    const size_t block = count * gw_dtype_size(dtype);
    if (rank != root) {
        gw_request_t req;
        gw_request_t *one[1] = {&req};
        gw_status_t st = gw__p2p_irecv(comm, root, recvbuf, block, &req);
        return st != GW_OK ? st : gw__p2p_waitall(comm, one, 1);
    }
    const char *own = gw__cat(sendbuf, (size_t)root * block);
    if (block > 0 && (const char *)recvbuf != own)
        memmove(recvbuf, own, block);
    gw_request_t *reqs = calloc((size_t)n, sizeof(*reqs));
    gw_request_t **ptrs = calloc((size_t)n, sizeof(*ptrs));
    gw_status_t st = reqs && ptrs ? GW_OK : GW_ERR_NO_MEMORY;
    for (int j = 0; j < n && st == GW_OK; j++) {
        if (j == root)
            continue;
        st = gw__p2p_isend(comm, j, gw__cat(sendbuf, (size_t)j * block), block, &reqs[j]);
        if (st == GW_OK)
            ptrs[j] = &reqs[j];
    }
    if (st == GW_OK)
        st = gw__p2p_waitall(comm, ptrs, n);
    free(ptrs);
    free(reqs);
    return st;
}
