/*
 * compress_comm.c - the exchanges of a compressed allreduce.
 *
 * A compressed call is several collectives in a row (agree on the scales,
 * then one or two data exchanges). Each gets its own sequence number and a
 * signature, exactly as the API layer stamps gw_allreduce (api.c: begin()),
 * but the signature also covers what only a compressed call has: the codec
 * and its knobs, the tensor's shape, the state's step and the phase within
 * the call. Ranks whose states disagree about any of them exchange messages
 * with different signatures, which the transport reports as GW_ERR_MISMATCH
 * on every rank before a byte lands in a buffer.
 *
 * Traffic is counted by a transport decorator installed for the length of a
 * call (gw__cz_counter_t): every send the algorithms post goes through it,
 * so the figure is exact whatever algorithm carried a phase.
 */
#include <string.h>

#include "collectives/compress/codec.h"

static uint32_t fnv1a(uint32_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (uint32_t)(v & 0xff);
        h *= 16777619u;
        v >>= 8;
    }
    return h;
}

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
    uint32_t h = 2166136261u;
    const uint64_t parts[] = {
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
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        h = fnv1a(h, parts[i]);
    gw_comm_t *comm = call->comm;
    comm->seq++;
    comm->tag.seq = comm->seq;
    comm->tag.sig = h;
    comm->tag.reserved = 0;
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
    gw_status_t st;
    switch (algo) {
    case GW_ALGO_TREE:
        st = gw__allreduce_tree(comm, send, recv, count, dtype, op);
        break;
    case GW_ALGO_RD:
        st = gw__allreduce_rd(comm, send, recv, count, dtype, op);
        break;
    default:
        st = gw__allreduce_ring(comm, send, recv, count, dtype, op);
        break;
    }
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

/* ---- the counting transport ---------------------------------------------- */

static gw__cz_counter_t *counter_of(gw_transport_t *t)
{
    /* base is the first member, so the transport is the counter itself. */
    return (gw__cz_counter_t *)(void *)t;
}

static gw_status_t counter_open(const gw_transport_params_t *params, gw_transport_t **out,
                                uint8_t addr[GW_TRANSPORT_ADDR_MAX])
{
    (void)params;
    (void)out;
    (void)addr;
    return GW_ERR_UNSUPPORTED; /* a decorator is installed, never opened */
}

static gw_status_t counter_connect(gw_transport_t *t, const uint8_t *all_addrs)
{
    gw_transport_t *in = counter_of(t)->inner;
    return in->ops->connect(in, all_addrs);
}

static gw_status_t counter_isend(gw_transport_t *t, gw_request_t *req)
{
    gw__cz_counter_t *c = counter_of(t);
    gw_status_t st = c->inner->ops->isend(c->inner, req);
    if (st == GW_OK)
        c->bytes_sent += req->len;
    return st;
}

static gw_status_t counter_irecv(gw_transport_t *t, gw_request_t *req)
{
    gw_transport_t *in = counter_of(t)->inner;
    return in->ops->irecv(in, req);
}

static gw_status_t counter_progress(gw_transport_t *t, const gw_msg_tag_t *current, int wait_ms)
{
    gw_transport_t *in = counter_of(t)->inner;
    return in->ops->progress(in, current, wait_ms);
}

static gw_status_t counter_mem_reg(gw_transport_t *t, void *buf, size_t len, void **handle)
{
    gw_transport_t *in = counter_of(t)->inner;
    return in->ops->mem_reg(in, buf, len, handle);
}

static gw_status_t counter_mem_dereg(gw_transport_t *t, void *handle)
{
    gw_transport_t *in = counter_of(t)->inner;
    return in->ops->mem_dereg(in, handle);
}

static gw_status_t counter_abort(gw_transport_t *t, gw_status_t reason)
{
    gw_transport_t *in = counter_of(t)->inner;
    return in->ops->abort(in, reason);
}

static void counter_close(gw_transport_t *t)
{
    /* The communicator closes the real transport after the decorator has
     * been removed; closing through the decorator would be a bug. */
    (void)t;
}

static const gw_transport_ops_t counter_ops = {
    .size = sizeof(gw_transport_ops_t),
    .open = counter_open,
    .connect = counter_connect,
    .isend = counter_isend,
    .irecv = counter_irecv,
    .progress = counter_progress,
    .mem_reg = counter_mem_reg,
    .mem_dereg = counter_mem_dereg,
    .abort = counter_abort,
    .close = counter_close,
};

void gw__cz_counter_install(gw__cz_counter_t *c, gw_comm_t *comm)
{
    memset(c, 0, sizeof(*c));
    c->inner = comm->transport;
    if (!c->inner)
        return; /* one rank: nothing is sent */
    c->base = *c->inner;
    c->base.ops = &counter_ops;
    c->base.name = "counting";
    comm->transport = &c->base;
}

void gw__cz_counter_remove(gw__cz_counter_t *c, gw_comm_t *comm)
{
    if (c->inner)
        comm->transport = c->inner;
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
