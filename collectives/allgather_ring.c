/*
 * allgather_ring.c - allgather around a ring.
 *
 * recvbuf holds n blocks of m = sendcount elements, block b being rank b's
 * sendbuf. The ring visits the ranks in the communicator's host-contiguous
 * order (core/topo.h); below, "rank r" and "block r" are the rank at ring
 * position r and its block, which lies in recvbuf where the caller's rank
 * order puts it. Rank r first puts its own block in place (nothing to do in place,
 * where sendbuf == recvbuf + r m). At step s (0 .. n-2) it sends block r - s
 * to its right neighbour and receives block r - s - 1 from its left one,
 * straight into its place in recvbuf; that block is what it sends at the
 * next step. After n - 1 steps every block has visited every rank once.
 * Data is only copied, so all ranks hold the same bytes.
 *
 * Streaming: blocks are cut into chunks of comm->chunk_bytes, and chunk c of
 * step s is forwarded as soon as chunk c of step s - 1 has arrived, with
 * GW__STREAM_DEPTH messages in flight per direction (core/p2p.h). No
 * scratch memory is needed.
 *
 * Cost for S = n m elements' bytes: every rank sends and receives
 * (n-1)/n S in n - 1 steps:
 *     T = (n-1) alpha + (n-1)/n S beta.
 */
#include <string.h>

#include "collectives/coll.h"

/* Chunk c of block b: its bytes in recvbuf (m elements per block). */
static char *piece(char *recvbuf, size_t b, size_t c, size_t m, size_t chunk, size_t esize,
                   size_t *bytes)
{
    size_t first = c * chunk, len = m - first < chunk ? m - first : chunk;
    *bytes = len * esize;
    return gw__at(recvbuf, (b * m + first) * esize);
}

gw_status_t gw__allgather_ring(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                               size_t sendcount, gw_dtype_t dtype)
{
    const int n = comm->size, rank = comm->rank, pos = gw__ring_pos(comm);
    const size_t esize = gw_dtype_size(dtype), m = sendcount;
    const size_t chunk = gw__chunk_elems(comm, esize);
    /* An empty block is still one zero-length message (mismatches surface). */
    const size_t nch = m == 0 ? 1 : (m + chunk - 1) / chunk;
    const size_t total = (size_t)(n - 1) * nch;

    char *mine = gw__at(recvbuf, (size_t)rank * m * esize);
    if (m > 0 && (const char *)sendbuf != mine)
        memcpy(mine, sendbuf, m * esize);

    /* Message p (both directions) is chunk p % nch of step p / nch: step s
     * receives block r - s - 1 and sends block r - s. */
    gw__stream_t in, out;
    gw__stream_init(&in, gw__ring_rank(comm, (pos - 1 + n) % n));
    gw__stream_init(&out, gw__ring_rank(comm, (pos + 1) % n));
    gw__stream_t *const both[2] = {&in, &out};
    for (;;) {
        int moved = 0;
        gw_status_t st;
        if ((st = gw__streams_reap(comm, both, 2, &moved)) != GW_OK)
            return st;

        while (in.posted < total && gw__stream_room(&in)) {
            size_t s = in.posted / nch, bytes;
            size_t b = (size_t)gw__ring_rank(
                comm, (int)(((size_t)pos + 2 * (size_t)n - s - 1) % (size_t)n));
            char *dst = piece(recvbuf, b, in.posted % nch, m, chunk, esize, &bytes);
            if ((st = gw__stream_recv(comm, &in, dst, bytes)) != GW_OK)
                return st;
            moved = 1;
        }

        /* Send p forwards receive p - nch (the same block, one step later). */
        while (out.posted < total && gw__stream_room(&out) &&
               (out.posted < nch || in.done > out.posted - nch)) {
            size_t s = out.posted / nch, bytes;
            size_t b =
                (size_t)gw__ring_rank(comm, (int)(((size_t)pos + 2 * (size_t)n - s) % (size_t)n));
            char *src = piece(recvbuf, b, out.posted % nch, m, chunk, esize, &bytes);
            if ((st = gw__stream_send(comm, &out, src, bytes)) != GW_OK)
                return st;
            moved = 1;
        }

        if (in.done == total && out.done == total)
            return GW_OK;
        if (!moved && (st = gw__streams_wait(comm, both, 2, "ring allgather")) != GW_OK)
            return st;
    }
}
