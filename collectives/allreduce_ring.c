/*
 * allreduce_ring.c - bandwidth-optimal allreduce around a ring.
 *
 * The ranks form a ring: each sends only to its right neighbour and
 * receives only from its left one. The ring visits the ranks in the
 * communicator's host-contiguous order (core/topo.h), so that it crosses
 * each host boundary once whatever the placement; below, "rank r" is the
 * rank at ring position r. gw__allreduce_ring_over runs the same ring over
 * any list of ranks (the hierarchical allreduce's rings across hosts,
 * allreduce_hier.c). The buffer is cut into n
 * blocks whose sizes differ by at most one element (the first count % n
 * blocks get the extra element; blocks may be empty).
 *
 * Reduce-scatter, steps 0 .. n-2: at step s rank r sends block r - s and
 * receives block r - s - 1, which it combines with its own contribution and
 * passes on at the next step. Block b thus starts at rank b, travels once
 * around the ring picking up one contribution per hop, and is complete at
 * rank b - 1. Its value is computed in one fixed order,
 *     op(... op(op(x[b], x[b+1]), x[b+2]) ..., x[b-1])      (ranks mod n),
 * the incoming partial always being the left operand.
 *
 * Allgather, steps n-1 .. 2n-3: the finished blocks travel around the ring
 * once more; each rank stores what it receives directly into its result and
 * forwards it. A final value is computed exactly once and then only copied,
 * so every rank ends with the same bits (NaN payloads included).
 *
 * Streaming: every block is cut into chunks of comm->chunk_bytes, and a chunk
 * moves on as soon as it is ready instead of waiting for its whole block:
 * chunk c of step s is sent the moment chunk c of step s - 1 has been
 * received (and reduced). RING_DEPTH receives and sends are kept in flight
 * per direction, so chunk c + 1 arrives while chunk c is being reduced;
 * incoming reduce-scatter chunks land in RING_DEPTH scratch slots, allgather
 * chunks directly in recvbuf. The message sequence on each link is the same
 * on both ends by construction (one stream per direction), which is all the
 * in-order matching of the transport needs.
 *
 * Cost for S bytes (alpha per message, beta per byte on a link, gamma per
 * byte reduced): every rank sends and receives 2(n-1)/n S bytes and reduces
 * (n-1)/n S, the bandwidth optimum; the price is 2(n-1) latencies:
 *     T = 2(n-1) alpha + 2 (n-1)/n S beta + (n-1)/n S gamma.
 * Chunking adds one alpha per extra chunk per step but lets the steps
 * overlap, so for large S the chain of 2(n-1) steps costs about one chunk
 * time each on top of the bandwidth term.
 *
 * Buffers: sendbuf is only read (out of place it is never written); recvbuf
 * may equal sendbuf. An allgather chunk may land in a region that an earlier
 * reduce-scatter send read from; that data cannot arrive before the right
 * neighbour has received the whole earlier message (it is part of the
 * chain that produced it), so the region is no longer needed by then.
 */
#include <string.h>

#include "collectives/coll.h"

/* Messages in flight per direction, and scratch slots for incoming chunks
 * (core/p2p.h). */
#define RING_DEPTH GW__STREAM_DEPTH

typedef struct ring {
    const char *sendbuf;
    char *recvbuf;
    size_t count;
    size_t esize;
    size_t chunk; /* elements per chunk, >= 1 */
    gw_dtype_t dtype;
    gw_op_t op;
    int n, rank;
    int steps;   /* 2(n - 1) */
    char *slots; /* RING_DEPTH chunks of scratch for reduce-scatter input */
    size_t slot_bytes;
} ring_t;

/* Position in a stream of chunks: chunk `chunk` (of `nchunks`) of step. */
typedef struct cursor {
    int step;
    size_t chunk;
    size_t nchunks;
} cursor_t;

static int mod(int a, int n) { return ((a % n) + n) % n; }

static size_t block_count(const ring_t *g, int b)
{
    size_t q = g->count / (size_t)g->n, rem = g->count % (size_t)g->n;
    return q + ((size_t)b < rem ? 1 : 0);
}

static size_t block_off(const ring_t *g, int b)
{
    size_t q = g->count / (size_t)g->n, rem = g->count % (size_t)g->n;
    return (size_t)b * q + ((size_t)b < rem ? (size_t)b : rem);
}

/* An empty block is still one (zero-length) message, so ranks that disagree
 * about the count meet a length mismatch instead of a missing message. */
static size_t block_chunks(const ring_t *g, int b)
{
    size_t c = block_count(g, b);
    return c == 0 ? 1 : (c + g->chunk - 1) / g->chunk;
}

static int send_block(const ring_t *g, int step)
{
    return step < g->n - 1 ? mod(g->rank - step, g->n)
                           : mod(g->rank + 1 - (step - (g->n - 1)), g->n);
}

static int recv_block(const ring_t *g, int step)
{
    return step < g->n - 1 ? mod(g->rank - step - 1, g->n)
                           : mod(g->rank - (step - (g->n - 1)), g->n);
}

/* Element range [*off, *off + *len) of chunk c of block b. */
static void chunk_range(const ring_t *g, int b, size_t c, size_t *off, size_t *len)
{
    size_t total = block_count(g, b), start = c * g->chunk;
    *off = block_off(g, b) + start;
    *len = total - start < g->chunk ? total - start : g->chunk;
}

static void cursor_init(const ring_t *g, cursor_t *cu, int (*block_of)(const ring_t *, int))
{
    cu->step = 0;
    cu->chunk = 0;
    cu->nchunks = block_chunks(g, block_of(g, 0));
}

static void cursor_next(const ring_t *g, cursor_t *cu, int (*block_of)(const ring_t *, int))
{
    if (++cu->chunk < cu->nchunks)
        return;
    cu->chunk = 0;
    if (++cu->step < g->steps)
        cu->nchunks = block_chunks(g, block_of(g, cu->step));
}

gw_status_t gw__allreduce_ring(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                               gw_dtype_t dtype, gw_op_t op)
{
    if (!comm->topo.order)
        return gw__allreduce_ring_over(comm, NULL, comm->size, comm->rank, sendbuf, recvbuf, count,
                                       dtype, op);
    return gw__allreduce_ring_over(comm, comm->topo.order, comm->size, comm->topo.pos[comm->rank],
                                   sendbuf, recvbuf, count, dtype, op);
}

gw_status_t gw__allreduce_ring_over(gw_comm_t *comm, const int *members, int n, int pos,
                                    const void *sendbuf, void *recvbuf, size_t count,
                                    gw_dtype_t dtype, gw_op_t op)
{
    if (n == 1) {
        if (count > 0 && recvbuf != sendbuf)
            memmove(recvbuf, sendbuf, count * gw_dtype_size(dtype));
        return GW_OK;
    }
    ring_t g = {
        .sendbuf = sendbuf,
        .recvbuf = recvbuf,
        .count = count,
        .esize = gw_dtype_size(dtype),
        .dtype = dtype,
        .op = op,
        .n = n,
        .rank = pos,
        .steps = 2 * (n - 1),
    };
    g.chunk = gw__chunk_elems(comm, g.esize);
    size_t biggest = block_count(&g, 0); /* block 0 is never smaller than another */
    g.slot_bytes = (biggest < g.chunk ? biggest : g.chunk) * g.esize;
    gw_status_t st0 = gw__coll_scratch(comm, RING_DEPTH * g.slot_bytes, &g.slots);
    if (st0 != GW_OK)
        return st0;
    /* Receive j goes to scratch slot j % RING_DEPTH, and is consumed (reduced,
     * for the reduce-scatter half) in order; send k forwards the chunk of
     * receive k - first_sends (the block sent at step s is the one received
     * at step s - 1, chunk for chunk), except for the first step's sends,
     * which come straight from our own contribution. */
    gw__stream_t in, out;
    gw__stream_init(&in, members ? members[mod(pos - 1, n)] : mod(pos - 1, n));
    gw__stream_init(&out, members ? members[mod(pos + 1, n)] : mod(pos + 1, n));
    gw__stream_t *const both[2] = {&in, &out};
    size_t consumed = 0;
    const size_t first_sends = block_chunks(&g, g.rank);
    cursor_t rpost, rdone, spost;
    cursor_init(&g, &rpost, recv_block);
    cursor_init(&g, &rdone, recv_block);
    cursor_init(&g, &spost, send_block);

    for (;;) {
        int moved = 0;
        gw_status_t st;
        if ((st = gw__streams_reap(comm, both, 2, &moved)) != GW_OK)
            return st;

        /* Consume receives in order: reduce-scatter chunks are combined with
         * our contribution into recvbuf, allgather chunks are already there. */
        while (consumed < in.done) {
            if (rdone.step < g.n - 1) {
                size_t off, len;
                chunk_range(&g, recv_block(&g, rdone.step), rdone.chunk, &off, &len);
                if (len > 0 && (st = gw__coll_reduce(
                                    comm, gw__at(g.recvbuf, off * g.esize),
                                    g.slots + (consumed % RING_DEPTH) * g.slot_bytes,
                                    gw__cat(g.sendbuf, off * g.esize), len, dtype, op)) != GW_OK)
                    return st;
            }
            consumed++;
            cursor_next(&g, &rdone, recv_block);
        }

        while (rpost.step < g.steps && in.posted - consumed < RING_DEPTH) {
            size_t off, len;
            chunk_range(&g, recv_block(&g, rpost.step), rpost.chunk, &off, &len);
            char *dst = rpost.step < g.n - 1
                            ? gw__at(g.slots, (in.posted % RING_DEPTH) * g.slot_bytes)
                            : gw__at(g.recvbuf, off * g.esize);
            if ((st = gw__stream_recv(comm, &in, dst, len * g.esize)) != GW_OK)
                return st;
            cursor_next(&g, &rpost, recv_block);
            moved = 1;
        }

        while (spost.step < g.steps && gw__stream_room(&out) &&
               (out.posted < first_sends || out.posted - first_sends < consumed)) {
            size_t off, len;
            chunk_range(&g, send_block(&g, spost.step), spost.chunk, &off, &len);
            const void *src = spost.step == 0 ? gw__cat(g.sendbuf, off * g.esize)
                                              : gw__at(g.recvbuf, off * g.esize);
            if ((st = gw__stream_send(comm, &out, src, len * g.esize)) != GW_OK)
                return st;
            cursor_next(&g, &spost, send_block);
            moved = 1;
        }

        if (rdone.step >= g.steps && spost.step >= g.steps && out.done == out.posted)
            return GW_OK;
        if (!moved && (st = gw__streams_wait(comm, both, 2, "ring allreduce")) != GW_OK)
            return st;
    }
}
