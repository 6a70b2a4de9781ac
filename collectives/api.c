/*
 * api.c - the public collective calls: validate arguments, stamp the
 * collective's tag, pick the algorithm, run it, finish GW_AVG.
 *
 * Every call gets the next sequence number and a signature of its arguments
 * (kind, count, dtype, op, root, algorithm). Both travel in every message,
 * so ranks that disagree about any of them fail with GW_ERR_MISMATCH instead
 * of exchanging wrongly sized data. An invalid argument on one rank also
 * fails the communicator (and tells the peers): the other ranks are already
 * waiting in a collective that can never complete without this one.
 */
#include <stdint.h>
#include <string.h>

#include "collectives/coll.h"

static uint32_t fnv1a(uint32_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (uint32_t)(v & 0xff);
        h *= 16777619u;
        v >>= 8;
    }
    return h;
}

static uint32_t signature(gw_coll_kind_t kind, size_t count, gw_dtype_t dtype, gw_op_t op,
                          int root, gw_algo_t algo)
{
    uint32_t h = 2166136261u;
    h = fnv1a(h, (uint64_t)kind);
    h = fnv1a(h, (uint64_t)count);
    h = fnv1a(h, (uint64_t)dtype);
    h = fnv1a(h, (uint64_t)op);
    h = fnv1a(h, (uint64_t)(int64_t)root);
    h = fnv1a(h, (uint64_t)algo);
    return h;
}

/* Common checks; logs the first problem with the call's name. `nbytes_out`
 * receives count * elements-per-count * dtype size. */
static gw_status_t check_args(gw_comm_t *comm, const char *fn, const void *sendbuf,
                              int need_send, const void *recvbuf, int need_recv, size_t count,
                              size_t multiplier, gw_dtype_t dtype, gw_op_t op, int root,
                              size_t *nbytes_out)
{
    gw_status_t st = GW_ERR_INVALID_ARG;
    size_t esize = gw_dtype_size(dtype);
    if (atomic_load(&comm->abort_requested))
        return gw__comm_fail(comm, GW_ERR_ABORTED);
    if (comm->failed != GW_OK)
        return comm->failed;
    if (esize == 0) {
        GW_ERROR(&comm->log, "api", "%s: unknown dtype %d", fn, (int)dtype);
        goto fail;
    }
    if ((unsigned)op >= GW_OP_COUNT) {
        GW_ERROR(&comm->log, "api", "%s: unknown reduction op %d", fn, (int)op);
        goto fail;
    }
    if (root < 0 || root >= comm->size) {
        GW_ERROR(&comm->log, "api", "%s: root %d out of range [0, %d)", fn, root, comm->size);
        goto fail;
    }
    size_t elems, nbytes;
    if (__builtin_mul_overflow(count, multiplier, &elems) ||
        __builtin_mul_overflow(elems, esize, &nbytes) || nbytes > (size_t)PTRDIFF_MAX) {
        GW_ERROR(&comm->log, "api", "%s: %zu x %zu elements of %s overflow the address space",
                 fn, count, multiplier, gw_dtype_name(dtype));
        st = GW_ERR_OVERFLOW;
        goto fail;
    }
    if (count > 0 && need_send && !sendbuf) {
        GW_ERROR(&comm->log, "api", "%s: send buffer is NULL with count %zu", fn, count);
        goto fail;
    }
    if (count > 0 && need_recv && !recvbuf) {
        GW_ERROR(&comm->log, "api", "%s: receive buffer is NULL with count %zu", fn, count);
        goto fail;
    }
    *nbytes_out = nbytes;
    return GW_OK;
fail:
    return gw__comm_fail(comm, st);
}

void gw__coll_begin(gw_comm_t *comm, gw_coll_kind_t kind, size_t count, gw_dtype_t dtype,
                    gw_op_t op, int root, gw_algo_t algo)
{
    comm->seq++;
    comm->tag.seq = comm->seq;
    comm->tag.sig = signature(kind, count, dtype, op, root, algo);
    comm->tag.reserved = 0;
}

static void copy_if_distinct(void *dst, const void *src, size_t nbytes)
{
    if (dst != src && nbytes > 0)
        memmove(dst, src, nbytes);
}

gw_algo_t gw_comm_pick_algo(const gw_comm_t *comm, size_t count, gw_dtype_t dtype)
{
    if (!comm)
        return GW_ALGO_AUTO;
    if (comm->algo != GW_ALGO_AUTO)
        return comm->algo;
    size_t bytes;
    if (__builtin_mul_overflow(count, gw_dtype_size(dtype), &bytes))
        bytes = SIZE_MAX;
    return gw__tuning_pick(&comm->tuning, comm->size, bytes);
}

static gw_status_t allreduce_impl(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                         gw_dtype_t dtype, gw_op_t op)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    size_t nbytes;
    gw_status_t st =
        check_args(comm, "gw_allreduce", sendbuf, 1, recvbuf, 1, count, 1, dtype, op, 0, &nbytes);
    if (st != GW_OK)
        return st;
    gw_op_t red = op == GW_AVG ? GW_SUM : op;
    if (comm->size == 1) {
        copy_if_distinct(recvbuf, sendbuf, nbytes);
    } else {
        gw_algo_t algo = gw_comm_pick_algo(comm, count, dtype);
        gw__coll_begin(comm, GW_COLL_ALLREDUCE, count, dtype, op, 0, algo);
        switch (algo) {
        case GW_ALGO_TREE:
            st = gw__allreduce_tree(comm, sendbuf, recvbuf, count, dtype, red);
            break;
        case GW_ALGO_RD:
            st = gw__allreduce_rd(comm, sendbuf, recvbuf, count, dtype, red);
            break;
        default:
            st = gw__allreduce_ring(comm, sendbuf, recvbuf, count, dtype, red);
            break;
        }
        if (st != GW_OK)
            return gw__comm_fail(comm, st);
    }
    if (op == GW_AVG)
        gw__reduce_finish_avg(recvbuf, count, dtype, comm->size);
    return GW_OK;
}

static gw_status_t broadcast_impl(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                         gw_dtype_t dtype, int root)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    size_t nbytes;
    gw_status_t st = check_args(comm, "gw_broadcast", sendbuf, comm->rank == root, recvbuf, 1,
                                count, 1, dtype, GW_SUM, root, &nbytes);
    if (st != GW_OK)
        return st;
    if (comm->rank == root)
        copy_if_distinct(recvbuf, sendbuf, nbytes);
    if (comm->size == 1)
        return GW_OK;
    gw__coll_begin(comm, GW_COLL_BROADCAST, count, dtype, GW_SUM, root, GW_ALGO_TREE);
    st = gw__broadcast_tree(comm, recvbuf, count, dtype, root);
    return st == GW_OK ? GW_OK : gw__comm_fail(comm, st);
}

static gw_status_t reduce_impl(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                      gw_dtype_t dtype, gw_op_t op, int root)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    size_t nbytes;
    gw_status_t st = check_args(comm, "gw_reduce", sendbuf, 1, recvbuf, comm->rank == root,
                                count, 1, dtype, op, root, &nbytes);
    if (st != GW_OK)
        return st;
    gw_op_t red = op == GW_AVG ? GW_SUM : op;
    if (comm->size == 1) {
        copy_if_distinct(recvbuf, sendbuf, nbytes);
    } else {
        gw__coll_begin(comm, GW_COLL_REDUCE, count, dtype, op, root, GW_ALGO_TREE);
        st = gw__reduce_tree(comm, sendbuf, recvbuf, count, dtype, red, root);
        if (st != GW_OK)
            return gw__comm_fail(comm, st);
    }
    if (op == GW_AVG && comm->rank == root)
        gw__reduce_finish_avg(recvbuf, count, dtype, comm->size);
    return GW_OK;
}

static gw_status_t allgather_impl(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                         gw_dtype_t dtype)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    size_t nbytes;
    gw_status_t st = check_args(comm, "gw_allgather", sendbuf, 1, recvbuf, 1, sendcount,
                                (size_t)comm->size, dtype, GW_SUM, 0, &nbytes);
    if (st != GW_OK)
        return st;
    if (comm->size == 1) {
        copy_if_distinct(recvbuf, sendbuf, nbytes);
        return GW_OK;
    }
    gw__coll_begin(comm, GW_COLL_ALLGATHER, sendcount, dtype, GW_SUM, 0, GW_ALGO_RING);
    st = gw__allgather_ring(comm, sendbuf, recvbuf, sendcount, dtype);
    return st == GW_OK ? GW_OK : gw__comm_fail(comm, st);
}

static gw_status_t reduce_scatter_impl(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                              size_t recvcount, gw_dtype_t dtype, gw_op_t op)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    size_t nbytes;
    gw_status_t st = check_args(comm, "gw_reduce_scatter", sendbuf, 1, recvbuf, 1, recvcount,
                                (size_t)comm->size, dtype, op, 0, &nbytes);
    if (st != GW_OK)
        return st;
    gw_op_t red = op == GW_AVG ? GW_SUM : op;
    if (comm->size == 1) {
        copy_if_distinct(recvbuf, sendbuf, nbytes);
    } else {
        gw__coll_begin(comm, GW_COLL_REDUCE_SCATTER, recvcount, dtype, op, 0, GW_ALGO_RING);
        st = gw__reduce_scatter_ring(comm, sendbuf, recvbuf, recvcount, dtype, red);
        if (st != GW_OK)
            return gw__comm_fail(comm, st);
    }
    if (op == GW_AVG)
        gw__reduce_finish_avg(recvbuf, recvcount, dtype, comm->size);
    return GW_OK;
}

static gw_status_t barrier_impl(gw_comm_t *comm)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    if (atomic_load(&comm->abort_requested))
        return gw__comm_fail(comm, GW_ERR_ABORTED);
    if (comm->failed != GW_OK)
        return comm->failed;
    if (comm->size == 1)
        return GW_OK;
    gw__coll_begin(comm, GW_COLL_BARRIER, 0, GW_UINT8, GW_SUM, 0, GW_ALGO_AUTO);
    gw_status_t st = gw__barrier_dissemination(comm);
    return st == GW_OK ? GW_OK : gw__comm_fail(comm, st);
}

gw_status_t gw__coll_execute(gw_comm_t *comm, const gw_coll_args_t *a)
{
    switch (a->kind) {
    case GW_COLL_ALLREDUCE:
        return allreduce_impl(comm, a->sendbuf, a->recvbuf, a->count, a->dtype, a->op);
    case GW_COLL_BROADCAST:
        return broadcast_impl(comm, a->sendbuf, a->recvbuf, a->count, a->dtype, a->root);
    case GW_COLL_REDUCE:
        return reduce_impl(comm, a->sendbuf, a->recvbuf, a->count, a->dtype, a->op, a->root);
    case GW_COLL_ALLGATHER:
        return allgather_impl(comm, a->sendbuf, a->recvbuf, a->count, a->dtype);
    case GW_COLL_REDUCE_SCATTER:
        return reduce_scatter_impl(comm, a->sendbuf, a->recvbuf, a->count, a->dtype, a->op);
    case GW_COLL_BARRIER:
        return barrier_impl(comm);
    default:
        return GW_ERR_INVALID_ARG;
    }
}

/* The public calls: each describes itself as a gw_coll_args_t and runs
 * through gw__coll_run, which executes it here or, once the communicator has
 * a progress thread (non-blocking calls were used), in order behind the
 * operations already queued there. */
#define GW__RUN(comm, ...)                                                                 \
    do {                                                                                   \
        if (!(comm))                                                                       \
            return GW_ERR_INVALID_ARG;                                                     \
        gw_coll_args_t args_ = {__VA_ARGS__};                                              \
        return gw__coll_run((comm), &args_);                                               \
    } while (0)

gw_status_t gw_allreduce(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                         gw_dtype_t dtype, gw_op_t op)
{
    GW__RUN(comm, .kind = GW_COLL_ALLREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf,
            .count = count, .dtype = dtype, .op = op);
}

gw_status_t gw_broadcast(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                         gw_dtype_t dtype, int root)
{
    GW__RUN(comm, .kind = GW_COLL_BROADCAST, .sendbuf = sendbuf, .recvbuf = recvbuf,
            .count = count, .dtype = dtype, .root = root);
}

gw_status_t gw_reduce(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                      gw_dtype_t dtype, gw_op_t op, int root)
{
    GW__RUN(comm, .kind = GW_COLL_REDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
            .dtype = dtype, .op = op, .root = root);
}

gw_status_t gw_allgather(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                         gw_dtype_t dtype)
{
    GW__RUN(comm, .kind = GW_COLL_ALLGATHER, .sendbuf = sendbuf, .recvbuf = recvbuf,
            .count = sendcount, .dtype = dtype);
}

gw_status_t gw_reduce_scatter(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                              size_t recvcount, gw_dtype_t dtype, gw_op_t op)
{
    GW__RUN(comm, .kind = GW_COLL_REDUCE_SCATTER, .sendbuf = sendbuf, .recvbuf = recvbuf,
            .count = recvcount, .dtype = dtype, .op = op);
}

gw_status_t gw_barrier(gw_comm_t *comm) { GW__RUN(comm, .kind = GW_COLL_BARRIER); }
