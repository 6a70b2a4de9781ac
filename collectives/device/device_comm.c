/*
 * device_comm.c - a communicator's device state: which engine copies its
 * device buffers, where a pointer points, and the resources the stagers
 * share (two streams, events, pinned buffers), created on first need and
 * freed with the communicator.
 *
 * Finding out where a pointer points costs a call into the CUDA runtime,
 * and loading that runtime costs far more; a process that never loaded
 * CUDA has no device memory. So under GW_BUFFERS_AUTO nothing is asked
 * until a CUDA runtime is found in the process (looked for at most once a
 * second, in the list of loaded objects, which costs no system call); then
 * the plugin is opened, once, and asks cudaPointerGetAttributes for every
 * buffer. If the plugin cannot be opened while the application's runtime is
 * there, that runtime's own cudaPointerGetAttributes still tells device
 * pointers apart, so they fail with GW_ERR_UNSUPPORTED naming the missing
 * plugin instead of being read as host memory (which would crash).
 * GW_BUFFERS_DEVICE opens the plugin at the first call and stages every
 * buffer; GW_BUFFERS_HOST never asks.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/comm/comm.h"
#include "collectives/device/device.h"
#include "common/clock.h"
#include "common/env.h"

gw_status_t gw__device_state(gw_comm_t *comm, gw_device_t **out)
{
    gw_comm_t *root = gw__comm_root(comm);
    if (root->device) {
        *out = root->device;
        return GW_OK;
    }
    long chunk;
    int where;
    gw_status_t st = gw__env_int(&root->log, GW_ENV_CUDA_CHUNK, &chunk);
    if (st == GW_OK)
        st = gw__env_choice(&root->log, GW_ENV_CUDA_REDUCE, &where);
    if (st != GW_OK)
        return st;
    gw_device_t *d = calloc(1, sizeof(*d));
    if (!d)
        return GW_ERR_NO_MEMORY;
    d->chunk_bytes = (size_t)chunk;
    d->reduce_on_host = where == 1;
    d->cur_device = -1;
    root->device = d;
    *out = d;
    return GW_OK;
}

static void free_staging(gw_device_t *d)
{
    const gw_copy_engine_ops_t *o = d->engine.ops;
    void *e = d->engine.impl;
    if (!o)
        return;
    if (d->d2h_stream)
        o->stream_destroy(e, d->d2h_stream);
    if (d->h2d_stream)
        o->stream_destroy(e, d->h2d_stream);
    if (d->ev_user)
        o->event_destroy(e, d->ev_user);
    if (d->ev_reduce)
        o->event_destroy(e, d->ev_reduce);
    for (int i = 0; i < GW_STAGE_SLOTS; i++) {
        if (d->ev_d2h[i])
            o->event_destroy(e, d->ev_d2h[i]);
        if (d->ev_h2d[i])
            o->event_destroy(e, d->ev_h2d[i]);
        o->host_free(e, d->slot[i]);
        d->ev_d2h[i] = d->ev_h2d[i] = d->slot[i] = NULL;
    }
    for (int i = 0; i < 2; i++) {
        o->host_free(e, d->whole[i]);
        d->whole[i] = NULL;
        d->whole_len[i] = 0;
    }
    d->d2h_stream = d->h2d_stream = d->ev_user = d->ev_reduce = NULL;
    d->slot_len = 0;
    d->cur_device = -1;
}

static void release_engine(gw_device_t *d)
{
    free_staging(d);
    gw__device_p2p_pool_free(d);
    if (d->engine.ops)
        d->engine.ops->destroy(d->engine.impl);
    d->engine.ops = NULL;
    d->engine.impl = NULL;
    if (d->plugin)
        dlclose(d->plugin);
    d->plugin = NULL;
}

void gw__device_destroy(gw_comm_t *comm)
{
    gw_device_t *d = comm->device;
    if (!d)
        return;
    release_engine(d);
    free(d);
    comm->device = NULL;
}

void gw__comm_set_copy_engine(gw_comm_t *comm, const gw_copy_engine_t *engine)
{
    gw_device_t *d;
    if (gw__device_state(comm, &d) != GW_OK) {
        engine->ops->destroy(engine->impl);
        return;
    }
    release_engine(d);
    d->engine = *engine;
    d->load_tried = 1;
    d->load_status = GW_OK;
}

/* Open the plugin once; GW_OK when an engine is there afterwards. */
static gw_status_t ensure_engine(gw_comm_t *comm, gw_device_t *d)
{
    if (d->engine.ops)
        return GW_OK;
    if (!d->load_tried) {
        char path[256];
        d->load_tried = 1;
        d->load_status = gw__cuda_plugin_load(&d->engine, &d->plugin, d->why, sizeof(d->why), path,
                                              sizeof(path));
        if (d->load_status == GW_OK)
            GW_INFO(&comm->log, "cuda", "device buffers: %s loaded, engine %s", path,
                    d->engine.ops->name);
        else
            GW_INFO(&comm->log, "cuda", "device buffers unavailable: %s", d->why);
    }
    return d->engine.ops ? GW_OK : d->load_status;
}

gw_status_t gw__device_where(gw_comm_t *comm, const void *ptr, int *dev)
{
    *dev = -1;
    if (!ptr || comm->buffers == GW_BUFFERS_HOST)
        return GW_OK;
    gw_device_t *d = gw__comm_root(comm)->device;
    gw_status_t st;
    /* gw_comm_init made the state; a communicator built otherwise (tests
     * of the algorithms) gets one only when it could need it. */
    if (!d && comm->buffers != GW_BUFFERS_DEVICE && !gw__cuda_runtime_in_process())
        return GW_OK;
    if (!d && (st = gw__device_state(comm, &d)) != GW_OK)
        return st;
    if (!d->engine.ops) {
        if (comm->buffers != GW_BUFFERS_DEVICE) {
            /* AUTO: only a process with a CUDA runtime has device memory.
             * Looked for at most once a second (on the coarse clock: this
             * runs for both buffers of every collective). */
            int64_t now = gw__now_coarse_ms();
            if (!d->load_tried && now < d->next_probe_ms)
                return GW_OK;
            if (!d->load_tried) {
                d->next_probe_ms = now + 1000;
                if (!gw__cuda_runtime_in_process())
                    return GW_OK;
            }
        }
        if (ensure_engine(comm, d) != GW_OK) {
            if (comm->buffers == GW_BUFFERS_DEVICE) {
                GW_ERROR(&comm->log, "cuda",
                         "device buffers declared (gw_comm_set_buffers) but cannot be staged: %s",
                         d->why);
                return GW_ERR_UNSUPPORTED;
            }
            if (gw__cuda_runtime_says_device(ptr)) {
                GW_ERROR(&comm->log, "cuda",
                         "buffer %p is CUDA device memory, but gradwire's CUDA part is not "
                         "loaded: %s",
                         ptr, d->why);
                return GW_ERR_UNSUPPORTED;
            }
            if (!d->warned) {
                d->warned = 1;
                GW_WARN(&comm->log, "cuda",
                        "a CUDA runtime is loaded in this process but gradwire's CUDA plugin is "
                        "not (%s): device buffers will fail with GW_ERR_UNSUPPORTED",
                        d->why);
            }
            return GW_OK;
        }
    }
    st = d->engine.ops->pointer_device(d->engine.impl, ptr, dev);
    if (st != GW_OK) {
        GW_ERROR(&comm->log, "cuda", "cannot tell where buffer %p is: %s", ptr,
                 d->engine.ops->error(d->engine.impl));
        return st;
    }
    if (*dev < 0 && comm->buffers == GW_BUFFERS_DEVICE)
        *dev = 0;
    return GW_OK;
}

gw_status_t gw__device_prepare(gw_comm_t *comm, gw_handle_t *call)
{
    call->dev_send = call->dev_recv = -1;
    if (comm->buffers == GW_BUFFERS_HOST || call->args.kind == GW_COLL_BARRIER ||
        (!call->args.sendbuf && !call->args.recvbuf))
        return GW_OK;
    gw_status_t st = gw__device_where(comm, call->args.sendbuf, &call->dev_send);
    if (st == GW_OK)
        st = gw__device_where(comm, call->args.recvbuf, &call->dev_recv);
    if (st != GW_OK) {
        if (comm->failed != GW_OK)
            return comm->failed;
        return gw__comm_fail(comm, st);
    }
    if (call->dev_send >= 0 || call->dev_recv >= 0) {
        call->host_execute = call->execute;
        call->execute = gw__staged_execute;
    }
    return GW_OK;
}

gw_status_t gw__staged_execute(gw_comm_t *comm, const gw_handle_t *h)
{
    switch (h->args.kind) {
    case GW_COLL_ALLREDUCE:
    case GW_COLL_BROADCAST:
    case GW_COLL_REDUCE:
    case GW_COLL_ALLGATHER:
    case GW_COLL_REDUCE_SCATTER:
        return gw__staged_chunked(comm, h);
    default:
        return gw__staged_whole(comm, h);
    }
}

gw_status_t gw__device_engine_fail(gw_comm_t *comm, gw_device_t *d, gw_status_t st,
                                   const char *what)
{
    GW_ERROR(&comm->log, "cuda", "device buffer staging: %s failed: %s", what,
             d->engine.ops->error(d->engine.impl));
    return gw__comm_fail(comm, st);
}

gw_status_t gw__device_streams(gw_comm_t *comm, gw_device_t *d, int dev)
{
    const gw_copy_engine_ops_t *o = d->engine.ops;
    void *e = d->engine.impl;
    if (!o)
        return GW_ERR_UNSUPPORTED;
    gw_status_t st = o->set_device(e, dev);
    if (st != GW_OK)
        return gw__device_engine_fail(comm, d, st, "selecting the device");
    if (d->cur_device == dev)
        return GW_OK;
    free_staging(d); /* another device: its streams and memory are its own */
    if ((st = o->stream_create(e, &d->d2h_stream)) != GW_OK ||
        (st = o->stream_create(e, &d->h2d_stream)) != GW_OK ||
        (st = o->event_create(e, &d->ev_user)) != GW_OK ||
        (st = o->event_create(e, &d->ev_reduce)) != GW_OK)
        goto fail;
    for (int i = 0; i < GW_STAGE_SLOTS; i++)
        if ((st = o->event_create(e, &d->ev_d2h[i])) != GW_OK ||
            (st = o->event_create(e, &d->ev_h2d[i])) != GW_OK)
            goto fail;
    d->cur_device = dev;
    return GW_OK;
fail:
    st = gw__device_engine_fail(comm, d, st, "creating streams and events");
    free_staging(d);
    return st;
}

gw_status_t gw__device_pinned(gw_comm_t *comm, gw_device_t *d, int which, size_t len, void **out)
{
    if (d->whole_len[which] < len || !d->whole[which]) {
        d->engine.ops->host_free(d->engine.impl, d->whole[which]);
        d->whole[which] = NULL;
        d->whole_len[which] = 0;
        gw_status_t st = d->engine.ops->host_alloc(d->engine.impl, len, &d->whole[which]);
        if (st != GW_OK)
            return gw__device_engine_fail(comm, d, st, "allocating pinned memory");
        d->whole_len[which] = len;
    }
    *out = d->whole[which];
    return GW_OK;
}

gw_status_t gw__device_copy_sync(gw_comm_t *comm, void *dst, const void *src, size_t len,
                                 int to_device)
{
    gw_device_t *d = gw__comm_root(comm)->device;
    const gw_copy_engine_ops_t *o = d->engine.ops;
    void *e = d->engine.impl;
    void *s = to_device ? d->h2d_stream : d->d2h_stream;
    void *ev = to_device ? d->ev_h2d[0] : d->ev_d2h[0];
    gw_status_t st = GW_OK;
    /* Data copied down was produced on the caller's stream. */
    if (!to_device && (st = o->event_record(e, d->ev_user, d->user_stream)) == GW_OK)
        st = o->stream_wait_event(e, s, d->ev_user);
    if (st == GW_OK)
        st = to_device ? o->copy_h2d(e, dst, src, len, s) : o->copy_d2h(e, dst, src, len, s);
    if (st == GW_OK)
        st = o->event_record(e, ev, s);
    if (st == GW_OK)
        st = o->event_wait(e, ev);
    return st == GW_OK
               ? GW_OK
               : gw__device_engine_fail(
                     comm, d, st, to_device ? "a host-to-device copy" : "a device-to-host copy");
}

gw_status_t gw_comm_set_buffers(gw_comm_t *comm, gw_buffers_t buffers)
{
    if (!comm || (unsigned)buffers > GW_BUFFERS_DEVICE)
        return GW_ERR_INVALID_ARG;
    comm->buffers = buffers;
    return GW_OK;
}

gw_status_t gw_comm_set_cuda_stream(gw_comm_t *comm, void *stream)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    gw_device_t *d;
    gw_status_t st = gw__device_state(comm, &d);
    if (st != GW_OK)
        return st;
    d->user_stream = stream;
    return GW_OK;
}
