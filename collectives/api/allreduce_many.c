/*
 * allreduce_many.c - tensor fusion: many small allreduces as a few large
 * ones (gw_allreduce_many, and the runs of allreduces of a group).
 *
 * A small allreduce costs its latency, not its bytes: 64 gradients of
 * 4 KiB reduced one by one pay 64 times the rounds of the algorithm, and
 * the same 256 KiB in one call pay them once. So, as Horovod's tensor
 * fusion does, consecutive buffers are copied into one bucket of at most
 * GW_FUSION_BYTES bytes, the bucket is reduced in place by one
 * gw_allreduce, and the results are copied back, each buffer at the offset
 * it was packed at. The copies cost two passes over the data at memory
 * speed, against one round of messages saved per buffer.
 *
 * A buffer larger than the threshold is reduced alone, in place, without
 * a copy (fusing it would only add the copies), and so is a bucket that
 * holds one buffer. With GW_FUSION_BYTES=0 every buffer goes alone.
 *
 * Each bucket is an ordinary gw_allreduce, so everything a collective
 * guarantees holds per bucket: the signature check (ranks whose buckets
 * differ fail with GW_ERR_MISMATCH), the progress thread's call order,
 * error propagation and blame. The reduction is elementwise, so the
 * results are bitwise those of the separate calls: an element is reduced
 * with the same operands in the same rank order whatever bucket it is in.
 *
 * Buffers in device memory are reduced one by one: the staging of
 * collectives/device already copies them, and packing device memory from
 * the host is not possible.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/api/api.h"
#include "collectives/device/device.h"
#include "common/env.h"

/* The bucket size, from GW_FUSION_BYTES (read per call: it is a getenv,
 * and a communicator has no field for it). A malformed value was refused
 * when the communicator was created; should it change since, fall back to
 * no fusion rather than guess. */
static size_t fusion_bytes(gw_comm_t *comm)
{
    long v = 0;
    if (gw__env_int(&comm->log, GW_ENV_FUSION_BYTES, &v) != GW_OK || v < 0)
        return 0;
    return (size_t)v;
}

static gw_status_t check(gw_comm_t *comm, const void *const sends[], void *const recvs[],
                         const size_t counts[], size_t n, gw_dtype_t dtype, gw_op_t op,
                         size_t *total)
{
    const char *fn = "gw_allreduce_many";
    size_t esize = gw_dtype_size(dtype), sum = 0;
    if (n > 0 && (!sends || !recvs || !counts)) {
        GW_ERROR(&comm->log, "api", "%s: NULL buffer or count array with n = %zu", fn, n);
        return GW_ERR_INVALID_ARG;
    }
    if (esize == 0) {
        GW_ERROR(&comm->log, "api", "%s: unknown dtype %d", fn, (int)dtype);
        return GW_ERR_INVALID_ARG;
    }
    if (op == GW_PREMUL_SUM) {
        GW_ERROR(&comm->log, "api",
                 "%s: premul_sum needs a factor per call: use "
                 "gw_allreduce_premul",
                 fn);
        return GW_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < n; i++) {
        size_t bytes;
        if (counts[i] > 0 && (!sends[i] || !recvs[i])) {
            GW_ERROR(&comm->log, "api", "%s: buffer %zu is NULL with count %zu", fn, i, counts[i]);
            return GW_ERR_INVALID_ARG;
        }
        if (__builtin_mul_overflow(counts[i], esize, &bytes) ||
            __builtin_add_overflow(sum, bytes, &sum)) {
            GW_ERROR(&comm->log, "api", "%s: the buffers' sizes overflow (at buffer %zu)", fn, i);
            return GW_ERR_OVERFLOW;
        }
    }
    *total = sum;
    return GW_OK;
}

/* Whether any buffer is device memory (then nothing is packed). */
static gw_status_t any_on_device(gw_comm_t *comm, const void *const sends[], void *const recvs[],
                                 size_t n, int *yes)
{
    *yes = 0;
    for (size_t i = 0; i < n && !*yes; i++) {
        int ds = -1, dr = -1;
        gw_status_t st = gw__device_where(comm, sends[i], &ds);
        if (st == GW_OK)
            st = gw__device_where(comm, recvs[i], &dr);
        if (st != GW_OK)
            return st;
        *yes = ds >= 0 || dr >= 0;
    }
    return GW_OK;
}

/* One allreduce: through the public call (the caller's thread: it queues
 * behind pending non-blocking calls), or, on the thread that drives the
 * transport (gw_iallreduce_many's handle), executed there directly. */
static gw_status_t one_allreduce(gw_comm_t *comm, int driving, const void *send, void *recv,
                                 size_t count, gw_dtype_t dtype, gw_op_t op)
{
    if (!driving)
        return gw_allreduce(comm, send, recv, count, dtype, op);
    const gw_coll_args_t a = {.kind = GW_COLL_ALLREDUCE,
                              .sendbuf = send,
                              .recvbuf = recv,
                              .count = count,
                              .dtype = dtype,
                              .op = op};
    return gw__coll_execute(comm, &a);
}

/* One bucket: buffers [first, last) packed at increasing offsets, one
 * allreduce, unpacked from the same offsets. */
static gw_status_t run_bucket(gw_comm_t *comm, int driving, const void *const sends[],
                              void *const recvs[], const size_t counts[], size_t first, size_t last,
                              gw_dtype_t dtype, gw_op_t op, unsigned char *bucket)
{
    const size_t esize = gw_dtype_size(dtype);
    if (last - first == 1)
        return one_allreduce(comm, driving, sends[first], recvs[first], counts[first], dtype, op);
    size_t off = 0;
    for (size_t i = first; i < last; i++) {
        if (counts[i])
            memcpy(bucket + off, sends[i], counts[i] * esize);
        off += counts[i] * esize;
    }
    gw_status_t st = one_allreduce(comm, driving, bucket, bucket, off / esize, dtype, op);
    if (st != GW_OK)
        return st;
    off = 0;
    for (size_t i = first; i < last; i++) {
        if (counts[i])
            memcpy(recvs[i], bucket + off, counts[i] * esize);
        off += counts[i] * esize;
    }
    return GW_OK;
}

static gw_status_t fused(gw_comm_t *comm, int driving, const void *const sends[],
                         void *const recvs[], const size_t counts[], size_t n, gw_dtype_t dtype,
                         gw_op_t op)
{
    if (comm->failed != GW_OK)
        return comm->failed;
    size_t total = 0;
    gw_status_t st = check(comm, sends, recvs, counts, n, dtype, op, &total);
    if (st != GW_OK)
        return gw__comm_fail(comm, st);
    int device = 0;
    if ((st = any_on_device(comm, sends, recvs, n, &device)) != GW_OK)
        return gw__comm_fail(comm, st);
    const size_t esize = gw_dtype_size(dtype);
    const size_t limit = device ? 0 : fusion_bytes(comm);
    unsigned char *bucket = NULL;
    if (limit > 0 && n > 1) {
        size_t cap = total < limit ? total : limit;
        if (!(bucket = malloc(cap ? cap : 1))) {
            GW_ERROR(&comm->log, "api", "gw_allreduce_many: no memory for a bucket of %zu bytes",
                     cap);
            return gw__comm_fail(comm, GW_ERR_NO_MEMORY);
        }
    }
    for (size_t i = 0; i < n && st == GW_OK;) {
        size_t j = i, bytes = 0;
        /* Take buffers while they fit; a buffer over the limit (or any,
         * with fusion off) makes a bucket of its own. */
        while (j < n && bucket && bytes + counts[j] * esize <= limit)
            bytes += counts[j++] * esize;
        if (j == i)
            j = i + 1;
        st = run_bucket(comm, driving, sends, recvs, counts, i, j, dtype, op, bucket);
        i = j;
    }
    free(bucket);
    return st;
}

gw_status_t gw__allreduce_fused(gw_comm_t *comm, const void *const sends[], void *const recvs[],
                                const size_t counts[], size_t n, gw_dtype_t dtype, gw_op_t op)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    return fused(comm, 0, sends, recvs, counts, n, dtype, op);
}

/* gw_iallreduce_many's handle, run by the progress thread: the buffer
 * array is ctx, the counts recvcounts, n the count. Device buffers are
 * refused here (their staging is per call, on the caller's thread). */
static gw_status_t execute_many(gw_comm_t *comm, const gw_handle_t *h)
{
    void *const *bufs = h->ctx;
    const gw_coll_args_t *a = &h->args;
    int device = 0;
    gw_status_t st = any_on_device(comm, (const void *const *)bufs, bufs, a->count, &device);
    if (st == GW_OK && device) {
        GW_ERROR(&comm->log, "api",
                 "gw_iallreduce_many: device buffers are not supported; use "
                 "gw_allreduce_many");
        st = GW_ERR_UNSUPPORTED;
    }
    if (st != GW_OK)
        return gw__comm_fail(comm, st);
    return fused(comm, 1, (const void *const *)bufs, bufs, a->recvcounts, a->count, a->dtype,
                 a->op);
}

gw_status_t gw_iallreduce_many(gw_comm_t *comm, void *const bufs[], const size_t counts[], size_t n,
                               gw_dtype_t dtype, gw_op_t op, gw_handle_t **handle)
{
    if (!comm || !handle)
        return GW_ERR_INVALID_ARG;
    /* No buffer pointer in args: the staging of device buffers
     * (gw__device_prepare) has nothing to classify, and execute_many
     * checks them itself. */
    gw_handle_t call = {
        .execute = execute_many,
        .ctx = (void *)(uintptr_t)bufs,
        .args = {
            .kind = GW_COLL_ALLREDUCE, .count = n, .recvcounts = counts, .dtype = dtype, .op = op}};
    return gw__async_start(comm, &call, handle);
}

gw_status_t gw_allreduce_many(gw_comm_t *comm, void *const bufs[], const size_t counts[], size_t n,
                              gw_dtype_t dtype, gw_op_t op)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    /* In a group, each buffer is queued as an allreduce of its own; the
     * group's end fuses them (this bucket would be gone by then). */
    if (comm->group) {
        if (n > 0 && (!bufs || !counts))
            return GW_ERR_INVALID_ARG;
        for (size_t i = 0; i < n; i++) {
            gw_status_t st = gw_allreduce(comm, bufs[i], bufs[i], counts[i], dtype, op);
            if (st != GW_OK)
                return st;
        }
        return GW_OK;
    }
    return gw__allreduce_fused(comm, (const void *const *)bufs, bufs, counts, n, dtype, op);
}
