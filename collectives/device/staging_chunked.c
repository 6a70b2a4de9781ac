/*
 * staging_chunked.c - allreduce, broadcast, reduce, allgather and
 * reduce-scatter of device buffers, through pinned host memory in chunks
 * whose copies overlap the network, the reductions on the device.
 *
 * The buffer is cut into chunks of GW_CUDA_CHUNK bytes (the last one
 * shorter; a buffer smaller than one chunk is one chunk). Allgather and
 * reduce-scatter have one block per rank on one side (the receive buffer
 * of an allgather, the send buffer of a reduce-scatter): chunk k is then
 * piece k of every block, packed block after block in the slot, so that
 * it is a smaller call of the same kind (count = the piece's length), and
 * the piece is GW_CUDA_CHUNK / ranks bytes so a slot stays about two
 * chunks. Each chunk goes through one of GW_STAGE_SLOTS pinned slots:
 *
 *   1. a device-to-host copy of the chunk's input into the slot, on the
 *      D2H stream, which first waits for the caller's stream (so the kernel
 *      that produced the data has finished), then an event;
 *   2. once that event is done, the host collective on the slot (in place
 *      for allreduce, broadcast and reduce; send and receive halves for
 *      the others): a collective of its own on the wire (its own sequence
 *      number), the same algorithm code as for host buffers, but with its
 *      reductions run by the device's kernels on the caller's stream
 *      (device_reduce.c), reading the pinned slot, so the host only moves
 *      the bytes;
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
    size_t count;                    /* elements per block */
    int in_blocks;                   /* blocks of the input (1, or ranks for reduce-scatter) */
    int out_blocks;                  /* ... of the output (1, or ranks for allgather) */
    size_t recv_off;                 /* the receive half's offset in a slot (0: in place) */
    int h2d_pending[GW_STAGE_SLOTS]; /* the slot's last H2D not yet waited for */
    int d2h_pending[GW_STAGE_SLOTS];
} chunked_t;

static size_t chunk_len(const chunked_t *c, size_t k)
{
    size_t first = k * c->chunk_elems, n = c->count - first;
    return (n < c->chunk_elems ? n : c->chunk_elems) * c->esize;
}

/* Where block j's piece of chunk k lies in a user buffer. */
static size_t piece_at(const chunked_t *c, int j, size_t k)
{
    return ((size_t)j * c->count + k * c->chunk_elems) * c->esize;
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
    size_t len = chunk_len(c, k);
    char *slot = c->d->slot[s];
    st = GW_OK;
    for (int j = 0; j < c->in_blocks && st == GW_OK; j++) {
        const char *src = c->in + piece_at(c, j, k);
        if (c->in_dev < 0)
            memcpy(slot + (size_t)j * len, src, len);
        else
            st = c->o->copy_d2h(c->e, slot + (size_t)j * len, src, len, c->d->d2h_stream);
    }
    if (c->in_dev < 0)
        return GW_OK;
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
    size_t len = chunk_len(c, k);
    char *slot = c->d->slot[s], *recv = slot + c->recv_off;
    gw_handle_t piece = *c->h;
    piece.args.sendbuf = slot;
    piece.args.recvbuf = recv;
    piece.args.count = len / c->esize;
    if ((st = gw__device_reduce_run(c->comm, c->d, &piece)) != GW_OK)
        return st; /* the collective failed the communicator itself */
    if (!c->out)
        return GW_OK;
    st = GW_OK;
    for (int j = 0; j < c->out_blocks && st == GW_OK; j++) {
        char *dst = c->out + piece_at(c, j, k);
        if (c->out_dev < 0)
            memcpy(dst, recv + (size_t)j * len, len);
        else
            st = c->o->copy_h2d(c->e, dst, recv + (size_t)j * len, len, c->d->h2d_stream);
    }
    if (c->out_dev < 0)
        return GW_OK;
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
    int rooted = a->kind == GW_COLL_BROADCAST || a->kind == GW_COLL_REDUCE;
    int blocks = a->kind == GW_COLL_ALLGATHER || a->kind == GW_COLL_REDUCE_SCATTER;
    size_t all;
    /* Nothing to copy (or arguments the host executor refuses before it
     * touches memory): the host path decides. */
    if (a->count == 0 || esize == 0 || (rooted && (a->root < 0 || a->root >= comm->size)) ||
        __builtin_mul_overflow(a->count, (size_t)comm->size * esize, &all) || comm->failed != GW_OK)
        return h->host_execute(comm, h);
    gw_device_t *d = gw__comm_root(comm)->device;
    int is_root = comm->rank == a->root;
    chunked_t c = {.comm = comm,
                   .d = d,
                   .o = d->engine.ops,
                   .e = d->engine.impl,
                   .h = h,
                   .esize = esize,
                   .count = a->count,
                   .in_blocks = a->kind == GW_COLL_REDUCE_SCATTER ? comm->size : 1,
                   .out_blocks = a->kind == GW_COLL_ALLGATHER ? comm->size : 1};
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
    size_t chunk_bytes = blocks ? d->chunk_bytes / (size_t)comm->size : d->chunk_bytes;
    chunk_bytes = chunk_bytes < esize ? esize : chunk_bytes;
    c.chunk_elems = chunk_bytes / esize;
    c.nchunks = (a->count + c.chunk_elems - 1) / c.chunk_elems;
    size_t piece_bytes = c.chunk_elems * esize;
    c.recv_off = blocks ? (size_t)c.in_blocks * piece_bytes : 0;
    int dev = c.in && c.in_dev >= 0 ? c.in_dev : c.out_dev >= 0 ? c.out_dev : 0;
    gw_status_t st = gw__device_streams(comm, d, dev);
    if (st == GW_OK)
        st = slots(comm, d, c.recv_off + (size_t)c.out_blocks * piece_bytes);
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
