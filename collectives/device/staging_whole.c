/*
 * staging_whole.c - device buffers of the calls that do not cut into
 * chunks: alltoall(v), gather, scatter, allgatherv and the compressed
 * allreduce. Their blocks go to different ranks in layouts of their own
 * (uneven counts, a root's concatenation, a codec that sees the whole
 * tensor), so a chunk of the buffer is not a smaller call of the same
 * kind: the whole send buffer is copied down into pinned memory, the host
 * collective runs on the pinned copies (the compressed allreduce's
 * reductions on the device, device_reduce.c; its codecs still on the
 * host), and the whole receive buffer is copied back up. (Allgather and
 * reduce-scatter are chunked: staging_chunked.c.)
 *
 * What each buffer spans follows from the call (count, the rank count, the
 * v-forms' counts and displacements; nothing where a rank's buffer is not
 * used, such as a gather's receive buffer off the root). In-place forms
 * (send and receive buffers that overlap: alltoall's sendbuf == recvbuf, a
 * gather's sendbuf inside the root's recvbuf, ...) are staged as one
 * region, so the host collective sees the same overlap. The v-forms may
 * leave parts of the receive buffer unwritten, so it is copied down too,
 * and back up whole. Arguments whose extent cannot be computed (NULL count
 * arrays, overflow) are passed on unstaged to the host executor, which
 * refuses them before touching memory.
 */
#include <stdint.h>
#include <string.h>

#include "collectives/comm/comm.h"
#include "collectives/device/device.h"

/* Elements spanned by counts[j] at displs[j], over n ranks; 0 on overflow
 * or NULL arrays (then *ok = 0). */
static size_t v_extent(const size_t *counts, const size_t *displs, int n, int *ok)
{
    size_t max = 0;
    if (!counts || !displs) {
        *ok = 0;
        return 0;
    }
    for (int j = 0; j < n; j++) {
        size_t end;
        if (__builtin_add_overflow(counts[j], displs[j], &end)) {
            *ok = 0;
            return 0;
        }
        if (counts[j] && end > max)
            max = end;
    }
    return max;
}

/* Bytes each buffer spans, and whether the receive buffer is read first. */
static int extents(const gw_comm_t *comm, const gw_coll_args_t *a, size_t *send, size_t *recv,
                   int *recv_read)
{
    const size_t n = (size_t)comm->size, e = gw_dtype_size(a->dtype);
    const int is_root = comm->rank == a->root;
    int ok = e != 0;
    size_t s = 0, r = 0, all;
    if (__builtin_mul_overflow(a->count, n, &all))
        return 0;
    *recv_read = 0;
    switch (a->kind) {
    case GW_COLL_ALLTOALL:
        s = r = all;
        break;
    case GW_COLL_ALLTOALLV:
        r = v_extent(a->recvcounts, a->rdispls, comm->size, &ok);
        s = a->sendbuf == a->recvbuf ? r : v_extent(a->sendcounts, a->sdispls, comm->size, &ok);
        *recv_read = 1;
        break;
    case GW_COLL_GATHER:
        s = a->count, r = is_root ? all : 0;
        break;
    case GW_COLL_SCATTER:
        s = is_root ? all : 0, r = a->count;
        break;
    case GW_COLL_ALLGATHERV:
        s = a->count, r = v_extent(a->recvcounts, a->rdispls, comm->size, &ok);
        *recv_read = 1;
        break;
    case GW_COLL_ALLREDUCE_COMPRESSED:
        s = r = a->count;
        break;
    default:
        return 0;
    }
    if (!ok || __builtin_mul_overflow(s, e, send) || __builtin_mul_overflow(r, e, recv) ||
        *send > (size_t)PTRDIFF_MAX || *recv > (size_t)PTRDIFF_MAX)
        return 0;
    return 1;
}

static gw_status_t down(gw_comm_t *comm, gw_device_t *d, void *dst, const void *src, size_t len,
                        int dev)
{
    if (len == 0)
        return GW_OK;
    if (dev < 0) {
        memcpy(dst, src, len);
        return GW_OK;
    }
    gw_status_t st = d->engine.ops->copy_d2h(d->engine.impl, dst, src, len, d->d2h_stream);
    return st == GW_OK ? GW_OK
                       : gw__device_engine_fail(comm, d, st, "queueing a device-to-host copy");
}

gw_status_t gw__staged_whole(gw_comm_t *comm, const gw_handle_t *h)
{
    const gw_coll_args_t *a = &h->args;
    size_t slen, rlen;
    int recv_read;
    if (comm->failed != GW_OK || !extents(comm, a, &slen, &rlen, &recv_read) ||
        (slen && !a->sendbuf) || (rlen && !a->recvbuf) || (slen == 0 && rlen == 0))
        return h->host_execute(comm, h);
    gw_device_t *d = gw__comm_root(comm)->device;
    const gw_copy_engine_ops_t *o = d->engine.ops;
    void *e = d->engine.impl;
    int sdev = slen ? h->dev_send : -1, rdev = rlen ? h->dev_recv : -1;
    gw_status_t st = gw__device_streams(comm, d, sdev >= 0 ? sdev : rdev >= 0 ? rdev : 0);
    if (st != GW_OK)
        return st;
    st = o->event_record(e, d->ev_user, d->user_stream);
    if (st == GW_OK)
        st = o->stream_wait_event(e, d->d2h_stream, d->ev_user);
    if (st != GW_OK)
        return gw__device_engine_fail(comm, d, st, "ordering after the caller's stream");

    const char *sb = a->sendbuf;
    char *rb = a->recvbuf;
    gw_handle_t staged = *h;
    char *rpin = NULL;
    /* One region when both are on the device and overlap (in place). */
    if (sdev >= 0 && rdev >= 0 && sb < rb + rlen && rb < sb + slen) {
        const char *lo = sb < rb ? sb : rb;
        const char *hi = sb + slen > rb + rlen ? sb + slen : rb + rlen;
        char *pin;
        if ((st = gw__device_pinned(comm, d, 0, (size_t)(hi - lo), (void **)&pin)) != GW_OK ||
            (st = down(comm, d, pin, lo, (size_t)(hi - lo), sdev)) != GW_OK)
            return st;
        staged.args.sendbuf = pin + (sb - lo);
        rpin = pin + (rb - lo);
    } else {
        if (sdev >= 0) {
            char *spin;
            if ((st = gw__device_pinned(comm, d, 0, slen, (void **)&spin)) != GW_OK ||
                (st = down(comm, d, spin, sb, slen, sdev)) != GW_OK)
                return st;
            staged.args.sendbuf = spin;
        }
        if (rdev >= 0) {
            if ((st = gw__device_pinned(comm, d, 1, rlen, (void **)&rpin)) != GW_OK ||
                (recv_read && (st = down(comm, d, rpin, rb, rlen, rdev)) != GW_OK))
                return st;
        }
    }
    if (rpin)
        staged.args.recvbuf = rpin;
    if ((st = o->event_record(e, d->ev_d2h[0], d->d2h_stream)) != GW_OK ||
        (st = o->event_wait(e, d->ev_d2h[0])) != GW_OK)
        return gw__device_engine_fail(comm, d, st, "a device-to-host copy");
    if ((st = gw__device_reduce_run(comm, d, &staged)) != GW_OK || !rpin)
        return st;
    if ((st = o->copy_h2d(e, rb, rpin, rlen, d->h2d_stream)) != GW_OK ||
        (st = o->event_record(e, d->ev_h2d[0], d->h2d_stream)) != GW_OK ||
        (st = o->event_wait(e, d->ev_h2d[0])) != GW_OK)
        return gw__device_engine_fail(comm, d, st, "a host-to-device copy");
    return GW_OK;
}
