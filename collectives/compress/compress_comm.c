/*
 * compress_comm.c - the exchanges of a compressed allreduce.
 *
 * A compressed call is several collectives in a row (agree on the scales,
 * then one or two data exchanges). Each gets its own sequence number and a
 * signature from the core's one home of tags (core/tag.h), as gw_allreduce
 * does, but the signature also covers what only a compressed call has: the
 * codec and its knobs, the tensor's shape, the state's step and the phase
 * within the call. Ranks whose states disagree about any of them exchange
 * messages with different signatures, which the transport reports as
 * GW_ERR_MISMATCH on every rank before a byte lands in a buffer.
 *
 * Allreduce phases run the algorithm gw_allreduce would run, through the
 * same dispatch (gw__allreduce_algo). Traffic is counted by the core where
 * sends are posted (comm->bytes_sent), so the figure is exact whatever
 * algorithm carried a phase.
 */
#include <string.h>

#include "collectives/api/api.h"
#include "collectives/compress/codec.h"

static uint64_t double_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

static void begin_phase(gw__cz_call_t *call, size_t count, gw_dtype_t dtype, gw_op_t op,
                        gw_algo_t algo)
{
    const gw_compress_state_t *st = call->st;
    const gw_compress_config_t *cfg = &st->cfg;
    const uint64_t words[] = {
        (uint64_t)GW_COLL_ALLREDUCE_COMPRESSED,
        (uint64_t)cfg->codec,
        (uint64_t)cfg->error_feedback,
        (uint64_t)cfg->warmup_steps,
        (uint64_t)cfg->min_elements,
        (uint64_t)cfg->bucket_elements,
        double_bits(cfg->topk_ratio),
        (uint64_t)cfg->powersgd_rank,
        cfg->seed,
        double_bits(cfg->momentum),
        (uint64_t)st->rows,
        (uint64_t)st->cols,
        st->step,
        (uint64_t)call->phase,
        (uint64_t)count,
        (uint64_t)dtype,
        (uint64_t)op,
        (uint64_t)algo,
    };
    gw__tag_collective(call->comm, gw__sig_words(words, sizeof(words) / sizeof(words[0])));
    call->phase++;
}

gw_status_t gw__cz_allreduce(gw__cz_call_t *call, const void *send, void *recv, size_t count,
                             gw_dtype_t dtype, gw_op_t op, gw_algo_t algo)
{
    gw_comm_t *comm = call->comm;
    if (comm->failed != GW_OK)
        return comm->failed;
    if (comm->size == 1) {
        if (send != recv && count > 0)
            memmove(recv, send, count * gw_dtype_size(dtype));
        call->phase++;
        return GW_OK;
    }
    if (algo == GW_ALGO_AUTO)
        algo = gw_comm_pick_algo(comm, count, dtype);
    begin_phase(call, count, dtype, op, algo);
    int64_t t0 = gw__cz_now(), c0 = gw__cz_cpu_now();
    gw_status_t st = gw__allreduce_algo(comm, send, recv, count, dtype, op, algo);
    call->comm_ns += gw__cz_now() - t0;
    call->comm_cpu_ns += gw__cz_cpu_now() - c0;
    return st == GW_OK ? GW_OK : gw__comm_fail(comm, st);
}

void gw__cz_begin(gw__cz_call_t *call, size_t count, gw_dtype_t dtype, gw_op_t op)
{
    begin_phase(call, count, dtype, op, GW_ALGO_RING);
}

/* Small messages among few ranks go straight to every peer; larger ones,
 * or more ranks, around the pipelined ring. */
#define DIRECT_MAX_RANKS 32
#define DIRECT_MAX_BYTES (256u << 10)

/* Every rank sends its message to every peer directly, all at once: the
 * same bytes on each rank's link as the ring ((n-1) messages out and in),
 * but one round trip instead of n - 1 dependent steps, which is what small
 * messages are short of. Large ones go around the ring, whose single
 * pipelined stream per link keeps a shaped or congested link busier than
 * n - 1 competing ones. */
static gw_status_t allgather_direct(gw_comm_t *comm, const void *send, void *recv, size_t bytes)
{
    const int n = comm->size, r = comm->rank;
    gw_request_t reqs[2 * DIRECT_MAX_RANKS];
    gw_request_t *wait[2 * DIRECT_MAX_RANKS];
    int nreq = 0;
    gw_status_t st = GW_OK;
    char *base = recv;
    if ((char *)send != base + (size_t)r * bytes && bytes > 0)
        memcpy(base + (size_t)r * bytes, send, bytes);
    /* Peers in the order r+1, r+2, ...: not everyone at rank 0 first. */
    for (int d = 1; d < n && st == GW_OK; d++) {
        int from = (r - d + n) % n;
        st = gw__p2p_irecv(comm, from, base + (size_t)from * bytes, bytes, &reqs[nreq]);
        if (st == GW_OK) {
            wait[nreq] = &reqs[nreq];
            nreq++;
        }
    }
    for (int d = 1; d < n && st == GW_OK; d++) {
        st = gw__p2p_isend(comm, (r + d) % n, send, bytes, &reqs[nreq]);
        if (st == GW_OK) {
            wait[nreq] = &reqs[nreq];
            nreq++;
        }
    }
    if (st != GW_OK)
        return st; /* the communicator failed, which dropped the posted requests */
    return gw__p2p_waitall(comm, wait, nreq);
}

gw_status_t gw__cz_allgather(gw__cz_call_t *call, const void *send, void *recv, size_t bytes)
{
    gw_comm_t *comm = call->comm;
    if (comm->failed != GW_OK)
        return comm->failed;
    if (comm->size == 1) {
        if (send != recv && bytes > 0)
            memmove(recv, send, bytes);
        call->phase++;
        return GW_OK;
    }
    int direct = comm->size <= DIRECT_MAX_RANKS && bytes <= DIRECT_MAX_BYTES;
    begin_phase(call, bytes, GW_UINT8, GW_SUM, direct ? GW_ALGO_RD : GW_ALGO_RING);
    int64_t t0 = gw__cz_now(), c0 = gw__cz_cpu_now();
    gw_status_t st = direct ? allgather_direct(comm, send, recv, bytes)
                            : gw__allgather_ring(comm, send, recv, bytes, GW_UINT8);
    call->comm_ns += gw__cz_now() - t0;
    call->comm_cpu_ns += gw__cz_cpu_now() - c0;
    return st == GW_OK ? GW_OK : gw__comm_fail(comm, st);
}

/* The ring sends every block but one in its reduce-scatter half (all but
 * block rank + 1) and every block but one in its allgather half (all but
 * block rank + 2); see allreduce_ring.c. */
uint64_t gw__cz_ring_bytes(size_t count, size_t esize, int n, int rank)
{
    if (n < 2)
        return 0;
    size_t q = count / (size_t)n, rem = count % (size_t)n;
    size_t b1 = (size_t)((rank + 1) % n), b2 = (size_t)((rank + 2) % n);
    size_t c1 = q + (b1 < rem ? 1 : 0), c2 = q + (b2 < rem ? 1 : 0);
    return (uint64_t)(2 * count - c1 - c2) * esize;
}
