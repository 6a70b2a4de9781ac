/*
 * staging_p2p.c - device buffers of point-to-point messages, staged whole.
 *
 * A message is matched by its count (the receiver checks it against its
 * receive), so it cannot be cut into several messages without changing
 * what a host peer sees: a device message is sent from, or received into,
 * a pinned copy of the whole buffer. A send's data is copied down when it
 * is posted (gw_isend returns after that copy, so the device buffer may be
 * reused as soon as gw_isend returns); a receive's data is copied up when
 * the message completes (in gw_recv, or the gw_test or gw_wait that sees
 * its handle complete). The pinned copy is the message's own until then:
 * several may be in flight at once. The peer may use host memory, device
 * memory, or either through another engine: the bytes on the wire are the
 * same.
 *
 * Pinning memory costs far more than copying it (cudaHostAlloc maps and
 * locks every page), so the pinned buffers are pooled: up to GW_P2P_POOL
 * of them are kept when their message completes, and a message takes the
 * smallest free one that fits, else a new one of the next power of two
 * from GW_P2P_POOL_MIN (so that sizes that vary a little reuse one), which
 * takes an empty place in the pool or the place of the smallest free
 * buffer. Messages beyond the pool (every place busy) get a buffer of
 * their own, freed on completion. The pool is the root communicator's,
 * freed with its engine.
 */
#include <stdint.h>

#include "collectives/comm/comm.h"
#include "collectives/device/device.h"

static size_t pool_size(size_t len)
{
    size_t cap = GW_P2P_POOL_MIN;
    while (cap < len && cap <= SIZE_MAX / 2)
        cap *= 2;
    return cap < len ? len : cap;
}

/* A pinned buffer of at least len bytes. */
static gw_status_t pool_take(gw_device_t *d, size_t len, void **out)
{
    int best = -1, place = -1;
    for (int i = 0; i < GW_P2P_POOL; i++) {
        if (!d->pool[i].p) {
            if (place < 0 || d->pool[place].p)
                place = i; /* an empty place first */
            continue;
        }
        if (d->pool[i].busy)
            continue;
        if (d->pool[i].cap >= len && (best < 0 || d->pool[i].cap < d->pool[best].cap))
            best = i;
        if (place < 0 || (d->pool[place].p && d->pool[i].cap < d->pool[place].cap))
            place = i; /* the smallest free buffer, where no place is empty */
    }
    if (best >= 0) {
        d->pool[best].busy = 1;
        *out = d->pool[best].p;
        return GW_OK;
    }
    size_t cap = pool_size(len);
    gw_status_t st = d->engine.ops->host_alloc(d->engine.impl, cap, out);
    if (st != GW_OK || place < 0)
        return st; /* every place busy: the buffer is the message's own */
    d->engine.ops->host_free(d->engine.impl, d->pool[place].p);
    d->pool[place].p = *out;
    d->pool[place].cap = cap;
    d->pool[place].busy = 1;
    return GW_OK;
}

static void pool_give(gw_device_t *d, void *p)
{
    for (int i = 0; i < GW_P2P_POOL; i++)
        if (d->pool[i].p == p) {
            d->pool[i].busy = 0;
            return;
        }
    d->engine.ops->host_free(d->engine.impl, p);
}

void gw__device_p2p_pool_free(gw_device_t *d)
{
    for (int i = 0; i < GW_P2P_POOL; i++) {
        if (d->pool[i].p && d->engine.ops)
            d->engine.ops->host_free(d->engine.impl, d->pool[i].p);
        d->pool[i].p = NULL;
        d->pool[i].cap = 0;
        d->pool[i].busy = 0;
    }
}

gw_status_t gw__device_p2p_stage(gw_comm_t *comm, int is_send, void *buf, size_t nbytes, void **use,
                                 void **pinned)
{
    int dev;
    *use = buf;
    *pinned = NULL;
    gw_status_t st = gw__device_where(comm, buf, &dev);
    if (st != GW_OK)
        return gw__comm_fail(comm, st);
    if (dev < 0)
        return GW_OK;
    gw_device_t *d = gw__comm_root(comm)->device;
    if ((st = gw__device_streams(comm, d, dev)) != GW_OK)
        return st;
    void *p;
    if ((st = pool_take(d, nbytes, &p)) != GW_OK)
        return gw__device_engine_fail(comm, d, st, "allocating a pinned message buffer");
    if (is_send && nbytes > 0 && (st = gw__device_copy_sync(comm, p, buf, nbytes, 0)) != GW_OK) {
        pool_give(d, p);
        return st;
    }
    *use = p;
    *pinned = p;
    return GW_OK;
}

gw_status_t gw__device_p2p_unstage(gw_comm_t *comm, int is_send, void *dst, void *pinned,
                                   size_t nbytes, gw_status_t st)
{
    if (!pinned)
        return st;
    gw_device_t *d = gw__comm_root(comm)->device;
    if (!is_send && st == GW_OK && nbytes > 0)
        st = gw__device_copy_sync(comm, dst, pinned, nbytes, 1);
    pool_give(d, pinned);
    return st;
}

void gw__device_p2p_release(gw_comm_t *comm, void *pinned)
{
    gw_device_t *d = gw__comm_root(comm)->device;
    if (pinned && d && d->engine.ops)
        pool_give(d, pinned);
}
