/*
 * staging_chunked.c - allreduce, broadcast and reduce of device buffers,
 * through pinned host memory in chunks whose copies overlap the network.
 *
 * The buffer is cut into chunks of GW_CUDA_CHUNK bytes (the last one
 * shorter; a buffer smaller than one chunk is one chunk). Each chunk goes
 * through one of GW_STAGE_SLOTS pinned slots:
 *
 *   1. a device-to-host copy of the chunk's input into the slot, on the
 *      D2H stream, which first waits for the caller's stream (so the kernel
 *      that produced the data has finished), then an event;
 *   2. once that event is done, the host collective on the slot, in place:
 *      a collective of its own on the wire (its own sequence number), the
 *      same algorithm code as for host buffers;
 *   3. a host-to-device copy of the slot to the chunk's output, on the H2D
 *      stream, and an event.
 *
 * Two chunks ahead are being copied down while one is on the wire, and the
 * chunk before it is being copied back up: chunk k is on the wire while
 * k+1 and k+2 come down and k-1 goes up. A slot is reused for chunk
 * k+SLOTS only after the event of its previous chunk's host-to-device copy
 * said that copy finished: before that, the DMA engine may still be
 * reading it. The call returns when every host-to-device copy finished,
 * so the results are on the device when it returns (or when its handle
 * completes).
 *
 * Host arguments mix in freely: a host input is copied into the slot, a
 * host output copied out of it, by the CPU. A reduce's non-root ranks have
 * no output, a broadcast's non-root ranks no input. On any failure the
 * copies still in flight are waited for before returning (their slots are
 * the communicator's and will be reused), the communicator fails, and the
 * peers are told, as for any failed call.
 */
#include <string.h>

#include "collectives/comm/comm.h"
#include "collectives/device/device.h"

typedef struct chunked {
    gw_comm_t *comm;
    gw_device_t *d;
    const gw_copy_engine_ops_t *o;
    void *e;
    const gw_handle_t *h;
    const char *in; /* input (NULL: none on this rank) */
    char *out;      /* output (NULL: none on this rank) */
    int in_dev, out_dev;
    size_t esize, chunk_elems, nchunks;
    int h2d_pending[GW_STAGE_SLOTS]; /* the slot's last H2D not yet waited for */
    int d2h_pending[GW_STAGE_SLOTS];
} chunked_t;

static size_t chunk_len(const chunked_t *c, size_t k)
{
    size_t first = k * c->chunk_elems, n = c->h->args.count - first;
    return (n < c->chunk_elems ? n : c->chunk_elems) * c->esize;
}

/* Start chunk k's way down into its slot. */
static gw_status_t issue_down(chunked_t *c, size_t k)
{
    int s = (int)(k % GW_STAGE_SLOTS);
    gw_status_t st;
    if (c->h2d_pending[s]) {
        /* The slot's previous chunk may still be on its way up. */
        c->h2d_pending[s] = 0;
        if ((st = c->o->event_wait(c->e, c->d->ev_h2d[s])) != GW_OK)
            return gw__device_engine_fail(c->comm, c->d, st, "a host-to-device copy");
    }
    if (!c->in)
        return GW_OK;
    const char *src = c->in + k * c->chunk_elems * c->esize;
    size_t len = chunk_len(c, k);
    if (c->in_dev < 0) {
        memcpy(c->d->slot[s], src, len);
        return GW_OK;
    }
    st = c->o->copy_d2h(c->e, c->d->slot[s], src, len, c->d->d2h_stream);
    if (st == GW_OK)
        st = c->o->event_record(c->e, c->d->ev_d2h[s], c->d->d2h_stream);
    if (st != GW_OK)
        return gw__device_engine_fail(c->comm, c->d, st, "queueing a device-to-host copy");
    c->d2h_pending[s] = 1;
    return GW_OK;
}

/* Chunk k: wait for its input, run the collective, start it on its way up. */
static gw_status_t run_chunk(chunked_t *c, size_t k)
{
    int s = (int)(k % GW_STAGE_SLOTS);
    gw_status_t st;
    if (c->d2h_pending[s]) {
        c->d2h_pending[s] = 0;
        if ((st = c->o->event_wait(c->e, c->d->ev_d2h[s])) != GW_OK)
            return gw__device_engine_fail(c->comm, c->d, st, "a device-to-host copy");
    }
    gw_handle_t piece = *c->h;
    piece.args.sendbuf = c->d->slot[s];
    piece.args.recvbuf = c->d->slot[s];
    piece.args.count = chunk_len(c, k) / c->esize;
    if ((st = c->h->host_execute(c->comm, &piece)) != GW_OK)
        return st; /* the collective failed the communicator itself */
    if (!c->out)
        return GW_OK;
    char *dst = c->out + k * c->chunk_elems * c->esize;
    if (c->out_dev < 0) {
        memcpy(dst, c->d->slot[s], chunk_len(c, k));
        return GW_OK;
    }
    st = c->o->copy_h2d(c->e, dst, c->d->slot[s], chunk_len(c, k), c->d->h2d_stream);
    if (st == GW_OK)
        st = c->o->event_record(c->e, c->d->ev_h2d[s], c->d->h2d_stream);
    if (st != GW_OK)
        return gw__device_engine_fail(c->comm, c->d, st, "queueing a host-to-device copy");
    c->h2d_pending[s] = 1;
    return GW_OK;
}

/* Wait for every copy still in flight; the first failure is returned. */
static gw_status_t drain(chunked_t *c)
{
    gw_status_t first = GW_OK;
    for (int s = 0; s < GW_STAGE_SLOTS; s++) {
        gw_status_t st = GW_OK;
        if (c->d2h_pending[s])
            st = c->o->event_wait(c->e, c->d->ev_d2h[s]);
        if (c->h2d_pending[s]) {
            gw_status_t st2 = c->o->event_wait(c->e, c->d->ev_h2d[s]);
            st = st != GW_OK ? st : st2;
        }
        c->d2h_pending[s] = c->h2d_pending[s] = 0;
        first = first != GW_OK ? first : st;
    }
    return first;
}

/* Pinned slots of at least len bytes each. */
static gw_status_t slots(gw_comm_t *comm, gw_device_t *d, size_t len)
{
    if (d->slot_len >= len && d->slot[0])
        return GW_OK;
    for (int s = 0; s < GW_STAGE_SLOTS; s++) {
        d->engine.ops->host_free(d->engine.impl, d->slot[s]);
        d->slot[s] = NULL;
    }
    d->slot_len = 0;
    for (int s = 0; s < GW_STAGE_SLOTS; s++) {
        gw_status_t st = d->engine.ops->host_alloc(d->engine.impl, len, &d->slot[s]);
        if (st != GW_OK)
            return gw__device_engine_fail(comm, d, st, "allocating pinned staging slots");
    }
    d->slot_len = len;
    return GW_OK;
}

gw_status_t gw__staged_chunked(gw_comm_t *comm, const gw_handle_t *h)
{
    const gw_coll_args_t *a = &h->args;
    size_t esize = gw_dtype_size(a->dtype);
    /* Nothing to copy (or arguments the host executor refuses before it
     * touches memory): the host path decides. */
    if (a->count == 0 || esize == 0 || a->root < 0 || a->root >= comm->size ||
        comm->failed != GW_OK)
        return h->host_execute(comm, h);
    gw_device_t *d = gw__comm_root(comm)->device;
    int is_root = comm->rank == a->root;
    chunked_t c = {
        .comm = comm, .d = d, .o = d->engine.ops, .e = d->engine.impl, .h = h, .esize = esize};
    c.in = a->sendbuf;
    c.in_dev = h->dev_send;
    c.out = a->recvbuf;
    c.out_dev = h->dev_recv;
    if (a->kind == GW_COLL_BROADCAST && !is_root)
        c.in = NULL;
    if (a->kind == GW_COLL_REDUCE && !is_root)
        c.out = NULL;
    if ((c.in && !a->sendbuf) || (c.out && !a->recvbuf))
        return h->host_execute(comm, h); /* NULL buffers: refused there */
    size_t chunk_bytes = d->chunk_bytes < esize ? esize : d->chunk_bytes;
    c.chunk_elems = chunk_bytes / esize;
    c.nchunks = (a->count + c.chunk_elems - 1) / c.chunk_elems;
    int dev = c.in && c.in_dev >= 0 ? c.in_dev : c.out_dev >= 0 ? c.out_dev : 0;
    gw_status_t st = gw__device_streams(comm, d, dev);
    if (st == GW_OK)
        st = slots(comm, d, c.chunk_elems * esize);
    if (st != GW_OK)
        return st;
    /* Copies start after the caller's stream's work so far. */
    st = c.o->event_record(c.e, d->ev_user, d->user_stream);
    if (st == GW_OK)
        st = c.o->stream_wait_event(c.e, d->d2h_stream, d->ev_user);
    if (st != GW_OK)
        return gw__device_engine_fail(comm, d, st, "ordering after the caller's stream");

    size_t ahead = GW_STAGE_SLOTS - 1;
    for (size_t k = 0; k < ahead && k < c.nchunks && st == GW_OK; k++)
        st = issue_down(&c, k);
    for (size_t k = 0; k < c.nchunks && st == GW_OK; k++) {
        st = run_chunk(&c, k);
        if (st == GW_OK && k + ahead < c.nchunks)
            st = issue_down(&c, k + ahead);
    }
    gw_status_t late = drain(&c);
    if (st == GW_OK && late != GW_OK)
        st = gw__device_engine_fail(comm, d, late, "a copy of the last chunks");
    return st;
}
