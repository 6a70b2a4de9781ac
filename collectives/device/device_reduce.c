/*
 * device_reduce.c - where a reduction runs. Every algorithm combines data
 * through gw__coll_reduce (and an average's last step through
 * gw__coll_finish_avg). For host buffers that is the CPU kernel,
 * gw__reduce. While a call on device buffers runs (the stagers set
 * d->reducing around the host algorithm, which then works on pinned
 * copies), it is the copy engine's reduce: the project's GPU kernels on
 * the caller's stream (collectives/cuda/engine_cuda.c), which read the
 * pinned memory the wire filled, so the host moves bytes and never
 * computes on them. The kernels are bitwise the CPU's (reduce_kernels.h,
 * checked on a GPU by tests/cuda/gpu_kernel_check.cu), so a device buffer
 * gives the same bits as a host buffer with the same data.
 *
 * Each reduction is waited for (an event behind it on the caller's stream)
 * before the algorithm goes on: the next step sends what it wrote. That is
 * one kernel launch and one synchronisation per reduced piece, which the
 * algorithms keep large (their chunks are comm->chunk_bytes).
 *
 * A plugin built without the kernels (no nvcc) has no reduce op: its
 * device buffers are reduced by the CPU on their pinned copies, as they are
 * everywhere under GW_CUDA_REDUCE=host (the path before the kernels, kept
 * to compare with: gpu_device_check --bench measures both).
 */
#include "collectives/coll.h"
#include "collectives/comm/comm.h"
#include "collectives/device/device.h"
#include "collectives/reduce_kernels.h"

/* The device state when this call's reductions belong to the engine;
 * NULL (and the CPU's reduction counted) otherwise. */
static gw_device_t *reducing(gw_comm_t *comm)
{
    gw_device_t *d = gw__comm_root(comm)->device;
    if (d && d->reducing && !d->reduce_on_host && d->engine.ops && d->engine.ops->reduce &&
        d->engine.ops->finish_avg)
        return d;
    if (d)
        d->cpu_reduces++;
    return NULL;
}

static gw_status_t wait_reduce(gw_comm_t *comm, gw_device_t *d, gw_status_t st)
{
    const gw_copy_engine_ops_t *o = d->engine.ops;
    if (st == GW_OK)
        st = o->event_record(d->engine.impl, d->ev_reduce, d->user_stream);
    if (st == GW_OK)
        st = o->event_wait(d->engine.impl, d->ev_reduce);
    if (st != GW_OK)
        return gw__device_engine_fail(comm, d, st, "a reduction on the device");
    d->engine_reduces++;
    return GW_OK;
}

gw_status_t gw__coll_reduce(gw_comm_t *comm, void *out, const void *a, const void *b, size_t count,
                            gw_dtype_t dtype, gw_op_t op)
{
    gw_device_t *d = reducing(comm);
    if (!d) {
        gw__reduce(out, a, b, count, dtype, op);
        return GW_OK;
    }
    if (count == 0)
        return GW_OK;
    return wait_reduce(
        comm, d,
        d->engine.ops->reduce(d->engine.impl, out, a, b, count, dtype, op, d->user_stream));
}

gw_status_t gw__coll_finish_avg(gw_comm_t *comm, void *buf, size_t count, gw_dtype_t dtype,
                                int nranks)
{
    gw_device_t *d = reducing(comm);
    if (!d) {
        gw__reduce_finish_avg(buf, count, dtype, nranks);
        return GW_OK;
    }
    if (count == 0)
        return GW_OK;
    return wait_reduce(
        comm, d,
        d->engine.ops->finish_avg(d->engine.impl, buf, count, dtype, nranks, d->user_stream));
}

gw_status_t gw__device_reduce_run(gw_comm_t *comm, gw_device_t *d, const gw_handle_t *h)
{
    d->reducing = 1;
    gw_status_t st = h->host_execute(comm, h);
    d->reducing = 0;
    return st;
}
