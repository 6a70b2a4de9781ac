/*
 * allreduce_direct.c - allreduce in two rounds of concurrent exchanges with
 * every peer at once, for ranks that share one host (shared memory).
 *
 * The ring makes n - 1 dependent steps in each half: a block moves one hop,
 * is reduced, moves on. Between hosts that keeps every link busy with the
 * least traffic; inside one host, where every rank reaches every other
 * through its own pair of rings, the dependence is what costs: each step
 * waits for the slowest rank to be scheduled, and on a host with fewer
 * cores than ranks that is a context switch per step. Here every rank exchanges with all its peers at once:
 *
 *   large (more than GW__DIRECT_SMALL_BYTES): the buffer is split into n
 *   blocks (the first count % n one element longer); rank b owns block b.
 *   Reduce-scatter: every rank sends block b of its input to rank b, for
 *   every b but its own, and receives its own block from every peer; it
 *   reduces its input's block with the n - 1 contributions (in rank order)
 *   into recvbuf. Allgather: every rank sends its reduced block to every
 *   peer and receives block b from rank b straight into recvbuf. Each rank
 *   moves 2 (n-1)/n S, as in the ring, but in 2 rounds instead of 2 (n-1).
 *
 *   Both rounds are cut into chunks: one round of a chunk moves about
 *   comm->chunk_bytes in all, comm->chunk_bytes / (n - 1) per peer but no
 *   less than 64 KiB (so that a message's fixed cost stays small against
 *   its bytes). Chunk c + 1 of the reduce-scatter is posted before chunk c
 *   is reduced (two scratch slots per peer, GW__STREAM_DEPTH), and chunk c
 *   of the allgather right after chunk c is reduced, so the allgather of
 *   one chunk overlaps the reduce-scatter of the next and the contributions being
 *   reduced are still in cache. Every block has the same number of chunks
 *   (that of the longest block; a shorter block's last chunk may be empty
 *   and is still one zero-length message), so both ends of every pair post
 *   the same sequence of messages and match them in order.
 *
 *   small: every rank sends its whole input to every peer and reduces all
 *   n inputs itself, in rank order (x0 op x1 op ... op x(n-1)), so every
 *   rank computes the same bits. One round of concurrent messages, against
 *   the ceil(log2 n) dependent rounds of recursive doubling: the latency
 *   choice on one host, where n - 1 small messages cost little more than
 *   one.
 *
 * Only block b's owner reduces it in the large form, so every rank gets
 * the same bits whatever order the owner uses. In place (sendbuf ==
 * recvbuf) is safe without a copy: a rank's own block is read and written
 * by itself only (out may alias a in gw__reduce); the allgather's receive
 * of block b overwrites input that was sent to rank b in the reduce-scatter,
 * but rank b sends that chunk only after it received (read) ours.
 *
 * Measured (README, "Is auto the right choice?"): on the 2-core test
 * machine with 4 ranks the small form beat recursive doubling at 8 bytes,
 * so the cost model weighs it up to 16 KiB over shared memory; the large
 * form is auto's choice by measured rules, not the model (tuning.c): on 2
 * to 4 ranks of one host from 8 MiB, and on 2 ranks over shared memory
 * from 64 KiB. With 4 ranks between 16 KiB and 8 MiB the ring was as
 * fast or faster once the transport's pieces went through its rings (with
 * more ranks than cores, a round that waits for all peers waits for the
 * one not scheduled); GW_ALGO=direct runs it at every size.
 *
 * Cost: large 2 alpha + 2 (n-1)/n S beta + (n-1)/n S gamma, with n - 1
 * messages per round that overlap; small alpha + (n-1) S beta + (n-1) S
 * gamma (tuning.c, GW_ALGO_DIRECT).
 */
#include <string.h>

#include "collectives/coll.h"

#define DEPTH GW__STREAM_DEPTH

/* The small form's largest input: above it the n - 1 copies of the whole
 * input cost more than the large form's second round. */
#define GW__DIRECT_SMALL_BYTES ((size_t)16 * 1024)
#define GW__DIRECT_MIN_PIECE ((size_t)64 * 1024)

/* Requests of one round of exchanges: [2 j] receives from peer j, [2 j + 1]
 * sends to it; ptrs the same, with NULL for this rank's own pair. */
typedef struct round_reqs {
    gw_request_t *req;
    gw_request_t **ptr;
} round_reqs_t;

/* Scratch layout: `rounds` rounds of 2 n requests and their pointers, then
 * the data slots. */
static gw_status_t take_scratch(gw_comm_t *comm, int rounds, size_t slot_bytes, round_reqs_t *r,
                                char **slots)
{
    const size_t n2 = 2 * (size_t)comm->size;
    const size_t req_bytes = (size_t)rounds * n2 * sizeof(gw_request_t);
    const size_t ptr_bytes = (size_t)rounds * n2 * sizeof(gw_request_t *);
    const size_t head = (req_bytes + ptr_bytes + 63) & ~(size_t)63;
    char *mem;
    gw_status_t st = gw__coll_scratch(comm, head + slot_bytes, &mem);
    if (st != GW_OK)
        return st;
    for (int i = 0; i < rounds; i++) {
        r[i].req = (gw_request_t *)(void *)mem + (size_t)i * n2;
        r[i].ptr = (gw_request_t **)(void *)(mem + req_bytes) + (size_t)i * n2;
        for (size_t k = 0; k < n2; k++)
            r[i].ptr[k] = NULL;
    }
    *slots = mem + head;
    return GW_OK;
}

static gw_status_t post_pair(gw_comm_t *comm, round_reqs_t *r, int j, void *rbuf, size_t rlen,
                             const void *sbuf, size_t slen)
{
    gw_status_t st = gw__p2p_irecv(comm, j, rbuf, rlen, &r->req[2 * j]);
    if (st != GW_OK)
        return st;
    r->ptr[2 * j] = &r->req[2 * j];
    if ((st = gw__p2p_isend(comm, j, sbuf, slen, &r->req[2 * j + 1])) != GW_OK)
        return st;
    r->ptr[2 * j + 1] = &r->req[2 * j + 1];
    return GW_OK;
}

/* Wait for a round's receives only (the sends may still be read by their
 * peers: they are waited for before the round's requests are reused). */
static gw_status_t wait_recvs(gw_comm_t *comm, round_reqs_t *r)
{
    const int n = comm->size;
    for (int j = 0; j < n; j++) {
        if (!r->ptr[2 * j])
            continue;
        gw_status_t st = gw__p2p_waitall(comm, &r->ptr[2 * j], 1);
        r->ptr[2 * j] = NULL;
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

/* Wait for a round's requests and forget them. */
static gw_status_t wait_round(gw_comm_t *comm, round_reqs_t *r)
{
    const int n2 = 2 * comm->size;
    gw_status_t st = gw__p2p_waitall(comm, r->ptr, n2);
    for (int k = 0; k < n2; k++)
        r->ptr[k] = NULL;
    return st;
}

static gw_status_t direct_small(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                gw_dtype_t dtype, gw_op_t op)
{
    const int n = comm->size, rank = comm->rank;
    const size_t bytes = count * gw_dtype_size(dtype);
    round_reqs_t r;
    char *slots;
    gw_status_t st = take_scratch(comm, 1, (size_t)n * bytes, &r, &slots);
    if (st != GW_OK)
        return st;
    /* Our own input goes in slot `rank` too: in place, recvbuf (our input)
     * is overwritten before the reduction reaches it. */
    if (bytes > 0)
        memcpy(slots + (size_t)rank * bytes, sendbuf, bytes);
    for (int j = 0; j < n; j++)
        if (j != rank && (st = post_pair(comm, &r, j, gw__at(slots, (size_t)j * bytes), bytes,
                                         sendbuf, bytes)) != GW_OK)
            return st;
    if ((st = wait_round(comm, &r)) != GW_OK || count == 0)
        return st;
    st = gw__coll_reduce(comm, recvbuf, slots, slots + bytes, count, dtype, op);
    for (int j = 2; j < n && st == GW_OK; j++)
        st = gw__coll_reduce(comm, recvbuf, recvbuf, slots + (size_t)j * bytes, count, dtype, op);
    return st;
}

/* Block b: `len` elements from `first`. */
typedef struct block {
    size_t first, len;
} block_t;

static block_t block_of(size_t count, int n, int b)
{
    size_t q = count / (size_t)n, rem = count % (size_t)n, ub = (size_t)b;
    block_t k = {ub * q + (ub < rem ? ub : rem), q + (ub < rem ? 1 : 0)};
    return k;
}

/* Elements of chunk c of a block of len elements (0 past its end). */
static size_t piece_len(size_t len, size_t chunk, size_t c)
{
    size_t off = c * chunk;
    return off >= len ? 0 : len - off < chunk ? len - off : chunk;
}

gw_status_t gw__allreduce_direct(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                 gw_dtype_t dtype, gw_op_t op)
{
    const int n = comm->size, rank = comm->rank;
    const size_t esize = gw_dtype_size(dtype);
    if (count * esize <= GW__DIRECT_SMALL_BYTES || count < (size_t)n)
        return direct_small(comm, sendbuf, recvbuf, count, dtype, op);

    const size_t longest = block_of(count, n, 0).len;
    /* One round moves comm->chunk_bytes in all, split among the peers, but
     * no piece below GW__DIRECT_MIN_PIECE, whose bytes outweigh the fixed
     * cost of a message. */
    size_t piece = comm->chunk_bytes / (size_t)(n - 1);
    if (piece < GW__DIRECT_MIN_PIECE)
        piece = GW__DIRECT_MIN_PIECE;
    const size_t chunk = piece / esize ? piece / esize : 1;
    const size_t nch = (longest + chunk - 1) / chunk;
    const size_t slot_bytes = (longest < chunk ? longest : chunk) * esize;
    const block_t mine = block_of(count, n, rank);
    /* rounds [0, DEPTH): reduce-scatter of chunk c in c % DEPTH; [DEPTH,
     * 2 DEPTH): allgather of chunk c in DEPTH + c % DEPTH. */
    round_reqs_t rr[2 * DEPTH];
    char *slots;
    gw_status_t st =
        take_scratch(comm, 2 * DEPTH, (size_t)DEPTH * (size_t)n * slot_bytes, rr, &slots);
    if (st != GW_OK)
        return st;
#define SLOT(c, j) (slots + (((c) % DEPTH) * (size_t)n + (size_t)(j)) * slot_bytes)

    for (size_t c = 0; c <= nch; c++) {
        /* Post the reduce-scatter of chunk c (its slots and requests were
         * last used by chunk c - DEPTH, reduced by now). */
        if (c < nch) {
            if ((st = wait_round(comm, &rr[c % DEPTH])) != GW_OK)
                return st;
            for (int j = 0; j < n; j++) {
                if (j == rank)
                    continue;
                block_t bj = block_of(count, n, j);
                st = post_pair(comm, &rr[c % DEPTH], j, SLOT(c, j),
                               piece_len(mine.len, chunk, c) * esize,
                               gw__cat(sendbuf, (bj.first + c * chunk) * esize),
                               piece_len(bj.len, chunk, c) * esize);
                if (st != GW_OK)
                    return st;
            }
        }
        if (c == 0)
            continue;
        /* Reduce chunk p = c - 1 of our block and post its allgather. */
        size_t p = c - 1, len = piece_len(mine.len, chunk, p);
        if ((st = wait_recvs(comm, &rr[p % DEPTH])) != GW_OK)
            return st;
        size_t off = (mine.first + p * chunk) * esize;
        char *out = gw__at(recvbuf, off);
        const char *acc = gw__cat(sendbuf, off);
        for (int j = 0; j < n && len > 0; j++) {
            if (j == rank)
                continue;
            if ((st = gw__coll_reduce(comm, out, acc, SLOT(p, j), len, dtype, op)) != GW_OK)
                return st;
            acc = out;
        }
        round_reqs_t *ag = &rr[DEPTH + p % DEPTH];
        if ((st = wait_round(comm, ag)) != GW_OK)
            return st;
        for (int j = 0; j < n; j++) {
            if (j == rank)
                continue;
            block_t bj = block_of(count, n, j);
            st = post_pair(comm, ag, j, gw__at(recvbuf, (bj.first + p * chunk) * esize),
                           piece_len(bj.len, chunk, p) * esize, out, len * esize);
            if (st != GW_OK)
                return st;
        }
    }
#undef SLOT
    for (int d = 0; d < 2 * DEPTH; d++)
        if ((st = wait_round(comm, &rr[d])) != GW_OK)
            return st;
    return GW_OK;
}
