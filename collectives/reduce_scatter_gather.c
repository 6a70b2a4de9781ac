/*
 * reduce_scatter_gather.c - reduce to a root as a ring reduce-scatter
 * followed by a gather of the reduced blocks (Rabenseifner's reduce): the
 * bandwidth choice for large buffers.
 *
 * The pipelined binomial tree (reduce_tree.c) makes the root take in every
 * chunk once per child, d = ceil(log2 n) times the buffer, and reduce it as
 * often. Here every rank reduces one n-th of the buffer (the ring
 * reduce-scatter, reduce_scatter_ring.c) and sends it to the root (the
 * linear gather, gather_linear.c), so the root takes in about 2 (n-1)/n of
 * the buffer whatever n:
 *     T = n alpha + (n-2) alpha_local + (n-1)/n S (2 beta + gamma),
 * against the tree's about d S (beta + gamma).
 *
 * count = q n + t: the first q n elements go this way, in blocks of q (block
 * j is rank j's); the last t < n elements, too few to split, go up the tree
 * (reduce_tree.c) after them, on every rank alike (count is the same on
 * every rank). Each phase completes before the next, under the call's tag,
 * so messages still match in order per peer. The root writes recvbuf only
 * in the gather, after its own reduce-scatter completed: every peer has
 * read what it sent by then, so the in-place form (sendbuf == recvbuf on
 * the root) reads nothing already overwritten; the tail is read from
 * sendbuf past the gathered part.
 */
#include <stdlib.h>

#include "collectives/coll.h"

gw_status_t gw__reduce_scatter_gather(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                      size_t count, gw_dtype_t dtype, gw_op_t op, int root)
{
    const int n = comm->size;
    const size_t esize = gw_dtype_size(dtype), q = count / (size_t)n, head = q * (size_t)n;
    gw_status_t st = GW_OK;
    if (q > 0) {
        /* Not the communicator's scratch: the reduce-scatter uses that. */
        char *block = malloc(q * esize);
        if (!block) {
            GW_ERROR(&comm->log, "coll", "gw_reduce: cannot allocate %zu bytes for a block",
                     q * esize);
            return GW_ERR_NO_MEMORY;
        }
        st = gw__reduce_scatter_ring(comm, sendbuf, block, q, dtype, op);
        if (st == GW_OK)
            st = gw__gather_linear(comm, block, recvbuf, q, dtype, root);
        free(block);
        if (st != GW_OK)
            return st;
    }
    if (count > head || q == 0)
        st = gw__reduce_tree(comm, gw__cat(sendbuf, head * esize),
                             comm->rank == root ? gw__at(recvbuf, head * esize) : NULL,
                             count - head, dtype, op, root);
    return st;
}
