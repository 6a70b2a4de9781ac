/*
 * coll.h - what the collective algorithms see: the core's messaging layer
 * (core/p2p.h: posting with the current collective's tag, waiting with the
 * timeout, request windows), the reduce kernels, the buffer helpers, and the
 * algorithm entry points (one per file).
 *
 * Algorithms are given validated arguments (non-NULL buffers when count > 0,
 * no overflow, dtype/op in range, op never GW_AVG: the API layer reduces with
 * GW_SUM and divides afterwards) and the tag of the collective is already set
 * in comm->tag (core/tag.h). They must:
 *  - exchange messages only through gw__p2p_* and gw__stream_* (so
 *    mismatches and dead peers are detected and nothing waits past the
 *    timeout);
 *  - post matching sends and receives in the same order on both ends of a
 *    pair (messages are matched in order per peer);
 *  - produce bitwise identical results on every rank;
 *  - work for every size >= 2 and count >= 0 (count 0 still exchanges the
 *    zero-length messages so that disagreeing ranks are caught).
 */
#ifndef GW_COLLECTIVES_COLL_H
#define GW_COLLECTIVES_COLL_H

#include <stddef.h>

#include "collectives/comm/comm.h"
#include "collectives/msg/p2p.h"
#include "collectives/reduce_kernels.h"

struct gw_comm;
/* Every algorithm's reductions (collectives/device/device_reduce.c): out =
 * a OP b as gw__reduce, and buf /= nranks as gw__reduce_finish_avg, by the
 * CPU for host buffers and by the copy engine's device kernels while a
 * call on device buffers runs. An engine failure fails the communicator
 * and is returned. */
gw_status_t gw__coll_reduce(struct gw_comm *comm, void *out, const void *a, const void *b,
                            size_t count, gw_dtype_t dtype, gw_op_t op);
gw_status_t gw__coll_finish_avg(struct gw_comm *comm, void *buf, size_t count, gw_dtype_t dtype,
                                int nranks);
#include "gradwire.h"

/* base + off without forming NULL + 0 (count 0 calls may pass NULL). */
static inline char *gw__at(char *base, size_t off) { return off ? base + off : base; }
static inline const char *gw__cat(const char *base, size_t off) { return off ? base + off : base; }

/* Elements per pipeline chunk of dtype elements of esize bytes: at least 1. */
static inline size_t gw__chunk_elems(const gw_comm_t *comm, size_t esize)
{
    return comm->chunk_bytes / esize ? comm->chunk_bytes / esize : 1;
}

/* Scratch memory of the communicator for len bytes, or NULL for none (the
 * scratch is shared: one algorithm's call at a time). */
static inline gw_status_t gw__coll_scratch(gw_comm_t *comm, size_t len, char **out)
{
    void *p = NULL;
    gw_status_t st = len > 0 ? gw__comm_scratch(comm, len, &p) : GW_OK;
    if (st == GW_OK)
        *out = p;
    return st;
}

/* The rank at ring position p and this rank's ring position: the
 * communicator's host-contiguous order (core/topo.h), or rank order when it
 * has none (a communicator of one rank, or one built by hand in a test). */
static inline int gw__ring_rank(const gw_comm_t *comm, int p)
{
    return comm->topo.order ? comm->topo.order[p] : p;
}
static inline int gw__ring_pos(const gw_comm_t *comm)
{
    return comm->topo.order ? comm->topo.pos[comm->rank] : comm->rank;
}

/* The order rooted trees (broadcast, reduce) number the ranks in, relative
 * to the root: index 0 is the root, then the other ranks of the root's
 * host, then the other hosts' ranks in ring order, so that each host's
 * ranks are contiguous and the root's host starts at index 0 (a binomial
 * tree over hosts of 2^k ranks then crosses the network H - 1 times, where
 * rank order under `gradwire launch --hosts` crosses it on every edge).
 * Without a topology, rank - root mod n. gw__tree_rank(comm, root, v) is
 * the rank at index v; gw__tree_index(comm, root, rank) its inverse. */
static inline int gw__tree_rank(const gw_comm_t *comm, int root, int v)
{
    const gw_topo_t *t = &comm->topo;
    const int n = comm->size;
    if (!t->order)
        return (root + v) % n;
    const int h = t->host_of[root], b = t->host_first[h], e = t->host_first[h + 1], l = e - b;
    const int p = v < l ? b + (t->pos[root] - b + v) % l : (e + v - l) % n;
    return t->order[p];
}
static inline int gw__tree_index(const gw_comm_t *comm, int root, int rank)
{
    const gw_topo_t *t = &comm->topo;
    const int n = comm->size;
    if (!t->order)
        return (rank - root + n) % n;
    const int h = t->host_of[root], b = t->host_first[h], e = t->host_first[h + 1], l = e - b;
    const int p = t->pos[rank];
    return p >= b && p < e ? (p - t->pos[root] + l) % l : l + (p - e + n) % n;
}

/* A node's parent (-1: none) and kids[0 .. nkids), tree indices, turned
 * into ranks in place. */
static inline void gw__tree_to_ranks(const gw_comm_t *comm, int root, int *parent, int *kids,
                                     int nkids)
{
    if (*parent >= 0)
        *parent = gw__tree_rank(comm, root, *parent);
    for (int k = 0; k < nkids; k++)
        kids[k] = gw__tree_rank(comm, root, kids[k]);
}

/* A binomial tree over tree indices (v: gw__tree_index): v's parent is v
 * with its lowest set bit cleared, its children v + m for every power of
 * two m below that bit (below n for the root) that stay below n, so the
 * subtree of child v + m covers [v + m, v + 2m). Returns the number of
 * children and stores their indices in kids[] (largest subtree first when
 * `largest_first`, else smallest first) and the parent's index in *parent
 * (-1 at the root). */
#define GW__BINOMIAL_MAX_KIDS 32 /* ceil(log2 n) <= 31 for int ranks */
int gw__binomial_node(int n, int v, int largest_first, int kids[GW__BINOMIAL_MAX_KIDS],
                      int *parent);

/* Algorithms: one per file. */
gw_status_t gw__allreduce_ring(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                               gw_dtype_t dtype, gw_op_t op);
/* The ring allreduce over members[0 .. n) (ring positions; this rank is
 * members[pos]; NULL members: ranks 0 .. n-1), for algorithms that run
 * rings over part of the communicator. n == 1 copies sendbuf to recvbuf. */
gw_status_t gw__allreduce_ring_over(gw_comm_t *comm, const int *members, int n, int pos,
                                    const void *sendbuf, void *recvbuf, size_t count,
                                    gw_dtype_t dtype, gw_op_t op);
/* Reduce-scatter inside each host, an allreduce of each shard across hosts,
 * allgather inside each host (allreduce_hier.c). */
gw_status_t gw__allreduce_hier(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                               gw_dtype_t dtype, gw_op_t op);
/* Two rounds of concurrent exchanges with every peer (one host, shared
 * memory; allreduce_direct.c). */
gw_status_t gw__allreduce_direct(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                 gw_dtype_t dtype, gw_op_t op);
gw_status_t gw__allreduce_tree(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                               gw_dtype_t dtype, gw_op_t op);
gw_status_t gw__allreduce_rd(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                             gw_dtype_t dtype, gw_op_t op);
gw_status_t gw__broadcast_tree(gw_comm_t *comm, void *buf, size_t count, gw_dtype_t dtype,
                               int root);
gw_status_t gw__reduce_tree(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                            gw_dtype_t dtype, gw_op_t op, int root);
gw_status_t gw__allgather_ring(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                               size_t sendcount, gw_dtype_t dtype);
gw_status_t gw__reduce_scatter_ring(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                    size_t recvcount, gw_dtype_t dtype, gw_op_t op);
/* One round of concurrent messages with every peer (exchange_round.c): the
 * requests' room in scratch, ahead of `extra` bytes for the algorithm
 * (*rest); then a receive of len bytes from every peer j into rbase + j
 * rstride and a send to it from sbase + j sstride (stride 0: the same
 * bytes to all), all posted, then waited for. */
typedef struct gw__exchange {
    gw_request_t *req;
    gw_request_t **ptr;
} gw__exchange_t;
gw_status_t gw__exchange_scratch(gw_comm_t *comm, size_t extra, gw__exchange_t *x, char **rest);
gw_status_t gw__exchange_round(gw_comm_t *comm, const gw__exchange_t *x, char *rbase,
                               size_t rstride, const char *sbase, size_t sstride, size_t len);
/* The other collectives' further algorithms, chosen by the cost model
 * (tuning_coll.c): allgather in one round of concurrent messages, or in
 * log2 rounds (Bruck); reduce-scatter in one round; reduce as a ring
 * reduce-scatter and a gather. */
gw_status_t gw__allgather_direct(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                 size_t sendcount, gw_dtype_t dtype);
gw_status_t gw__allgather_bruck(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                size_t sendcount, gw_dtype_t dtype);
gw_status_t gw__reduce_scatter_direct(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                      size_t recvcount, gw_dtype_t dtype, gw_op_t op);
gw_status_t gw__reduce_scatter_gather(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                      size_t count, gw_dtype_t dtype, gw_op_t op, int root);
gw_status_t gw__barrier_dissemination(gw_comm_t *comm);

/* Where block j of a buffer lies, in elements: counts[j] elements at
 * displs[j], or, when counts is NULL, `count` elements at j * count (the
 * uniform layout of alltoall, gather and scatter). Validated by the API
 * layer: no block's end overflows. */
typedef struct gw__blocks {
    const size_t *counts, *displs;
    size_t count;
} gw__blocks_t;

static inline size_t gw__block_count(const gw__blocks_t *b, int j)
{
    return b->counts ? b->counts[j] : b->count;
}
static inline size_t gw__block_displ(const gw__blocks_t *b, int j)
{
    return b->counts ? b->displs[j] : (size_t)j * b->count;
}

/* The collectives of api_more.c, one file each (alltoall and alltoallv
 * share the pairwise exchange). */
gw_status_t gw__alltoall_pairwise(gw_comm_t *comm, const void *sendbuf, const gw__blocks_t *sblocks,
                                  void *recvbuf, const gw__blocks_t *rblocks, gw_dtype_t dtype);
gw_status_t gw__gather_linear(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                              gw_dtype_t dtype, int root);
gw_status_t gw__scatter_linear(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                               gw_dtype_t dtype, int root);
gw_status_t gw__allgatherv_ring(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                const gw__blocks_t *blocks, gw_dtype_t dtype);

#endif
