/*
 * allgatherv_ring.c - allgather of blocks of different sizes, around a
 * ring.
 *
 * The schedule is allgather_ring.c's: rank r puts its own block in place,
 * then at step s (0 .. n-2) sends block r - s to its right neighbour and
 * receives block r - s - 1 from its left one, straight into its place in
 * recvbuf (blocks->counts[b] elements at blocks->displs[b]), and forwards
 * it at step s + 1. What differs is that blocks have their own lengths, so
 * each block is cut into its own number of chunks (one zero-length message
 * for an empty block, so disagreements still surface) and the pipeline
 * walks (step, chunk) cursors instead of dividing a message index: send
 * (s, c) forwards receive (s - 1, c), and may go once that receive is in.
 *
 * Why a ring and not a gather to one rank and a broadcast: each rank sends
 * and receives (S - its own block) bytes once, the bandwidth bound, and an
 * uneven block only makes its own steps longer:
 *     T = (n-1) alpha + (S - m_r) beta     (S = sum of the counts' bytes)
 *
 * Mismatches: every rank must pass the same counts; api_more.c puts a
 * digest of them in the call's signature, so a rank with other counts
 * sends and expects other tags, caught by the first checked receive; as
 * for allgather, each rank's result depends on a chain of checked receives
 * from every other rank, so no rank can finish while another disagrees.
 */
#include <string.h>

#include "collectives/coll.h"

typedef struct cursor {
    int step;      /* ring step 0 .. n-2 */
    size_t chunk;  /* chunk of that step's block */
    size_t posted; /* messages posted so far (== the stream's) */
} cursor_t;

/* Chunks of a block of count elements (at least one message). */
static size_t chunks_of(size_t count, size_t chunk)
{
    return count == 0 ? 1 : (count + chunk - 1) / chunk;
}

/* Chunk c of block b: its bytes in recvbuf. */
static char *piece(char *recvbuf, const gw__blocks_t *blocks, int b, size_t c, size_t chunk,
                   size_t esize, size_t *bytes)
{
    size_t m = gw__block_count(blocks, b), first = c * chunk;
    size_t len = m - first < chunk ? m - first : chunk;
    *bytes = len * esize;
    return gw__at(recvbuf, (gw__block_displ(blocks, b) + first) * esize);
}

gw_status_t gw__allgatherv_ring(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                const gw__blocks_t *blocks, gw_dtype_t dtype)
{
    const int n = comm->size, rank = comm->rank;
    const size_t esize = gw_dtype_size(dtype);
    const size_t chunk = gw__chunk_elems(comm, esize);
#define RECV_BLOCK(s) ((rank + 2 * n - (s)-1) % n)
#define SEND_BLOCK(s) ((rank + 2 * n - (s)) % n)

    size_t own = gw__block_count(blocks, rank) * esize;
    char *mine = gw__at(recvbuf, gw__block_displ(blocks, rank) * esize);
    if (own > 0 && (const char *)sendbuf != mine)
        memmove(mine, sendbuf, own);

    size_t total_in = 0;
    for (int s = 0; s < n - 1; s++)
        total_in += chunks_of(gw__block_count(blocks, RECV_BLOCK(s)), chunk);
    /* Sends: own block, then every received block but the last. */
    size_t total_out = total_in + chunks_of(gw__block_count(blocks, rank), chunk) -
                       chunks_of(gw__block_count(blocks, RECV_BLOCK(n - 2)), chunk);

    gw__stream_t in, out;
    gw__stream_ring(comm, &in, &out);
    gw__stream_t *const both[2] = {&in, &out};
    cursor_t ic = {0, 0, 0}, oc = {0, 0, 0};
    size_t fwd_base = 0; /* receive index of chunk 0 of step oc.step - 1 */
    for (;;) {
        int moved = 0;
        gw_status_t st;
        if ((st = gw__streams_reap(comm, both, 2, &moved)) != GW_OK)
            return st;

        while (ic.posted < total_in && gw__stream_room(&in)) {
            int b = RECV_BLOCK(ic.step);
            size_t bytes;
            char *dst = piece(recvbuf, blocks, b, ic.chunk, chunk, esize, &bytes);
            if ((st = gw__stream_recv(comm, &in, dst, bytes)) != GW_OK)
                return st;
            ic.posted++;
            if (++ic.chunk == chunks_of(gw__block_count(blocks, b), chunk)) {
                ic.step++;
                ic.chunk = 0;
            }
            moved = 1;
        }

        while (oc.posted < total_out && gw__stream_room(&out) &&
               (oc.step == 0 || in.done > fwd_base + oc.chunk)) {
            int b = SEND_BLOCK(oc.step);
            size_t bytes;
            char *src = piece(recvbuf, blocks, b, oc.chunk, chunk, esize, &bytes);
            if ((st = gw__stream_send(comm, &out, src, bytes)) != GW_OK)
                return st;
            oc.posted++;
            size_t nb = chunks_of(gw__block_count(blocks, b), chunk);
            if (++oc.chunk == nb) {
                if (oc.step > 0)
                    fwd_base += nb; /* block b was received at step oc.step - 1 */
                oc.step++;
                oc.chunk = 0;
            }
            moved = 1;
        }

        if (in.done == total_in && out.done == total_out)
            return GW_OK;
        if (!moved && (st = gw__streams_wait(comm, both, 2, "ring allgatherv")) != GW_OK)
            return st;
    }
#undef RECV_BLOCK
#undef SEND_BLOCK
}
