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
 * its handle complete). The pinned copy is the message's own, freed then:
 * several may be in flight at once. The peer may use host memory, device
 * memory, or either through another engine: the bytes on the wire are the
 * same.
 */
#include "collectives/comm/comm.h"
#include "collectives/device/device.h"

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
    if ((st = d->engine.ops->host_alloc(d->engine.impl, nbytes, &p)) != GW_OK)
        return gw__device_engine_fail(comm, d, st, "allocating a pinned message buffer");
    if (is_send && nbytes > 0 && (st = gw__device_copy_sync(comm, p, buf, nbytes, 0)) != GW_OK) {
        d->engine.ops->host_free(d->engine.impl, p);
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
    d->engine.ops->host_free(d->engine.impl, pinned);
    return st;
}

void gw__device_p2p_release(gw_comm_t *comm, void *pinned)
{
    gw_device_t *d = gw__comm_root(comm)->device;
    if (pinned && d && d->engine.ops)
        d->engine.ops->host_free(d->engine.impl, pinned);
}
