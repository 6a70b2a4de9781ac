/*
 * api.c - the public collective calls: validate arguments, stamp the
 * collective's tag, pick the algorithm, run it, finish GW_AVG; and the one
 * allreduce dispatch, which the compressed calls use too. The collectives
 * that move blocks without reducing them (alltoall(v), gather, scatter,
 * allgatherv) have their own entry points and rules in api_more.c.
 *
 * Every call gets the next sequence number and a signature of its arguments
 * (kind, count, dtype, op, root, algorithm; tag.c). Both travel in every
 * message, so ranks that disagree about any of them fail with
 * GW_ERR_MISMATCH instead of exchanging wrongly sized data. An invalid
 * argument on one rank also fails the communicator (and tells the peers):
 * the other ranks are already waiting in a collective that can never
 * complete without this one.
 *
 * Tags alone catch a disagreement only where a message crosses it, and the
 * first rank to see one fails the communicator, whose abort reaches every
 * peer. That is enough for allreduce, allgather, reduce-scatter and the
 * barrier: each rank's result depends on a message from every other rank
 * (through a chain of receives, each checked before the next send), so no
 * rank can finish while another disagrees. A rooted collective is not like
 * that: a broadcast's root only sends, and finishes before anyone checked
 * it; a reduce's leaves only send; and ranks that disagree about the root
 * may never exchange a message at all (each waits for children that do not
 * send), which would end in a timeout instead of a mismatch. So broadcast
 * and reduce first run a dissemination barrier under the call's own tag
 * (agree_first in the rules below): log2(size) rounds in which every rank
 * hears, through checked receives, from every other, before the tree
 * posts a message. A rank that disagrees fails its neighbours in the first
 * round; nobody passes the barrier. It costs those rounds' latency (tens
 * of microseconds over TCP, a few over shared memory; nothing per byte).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/api/api.h"
#include "collectives/coll.h"
#include "collectives/comm/flight_recorder.h"

/* Common checks; logs the first problem with the call's name. `nbytes_out`
 * receives count * elements-per-count * dtype size. */
static gw_status_t check_args(gw_comm_t *comm, const char *fn, const void *sendbuf, int need_send,
                              const void *recvbuf, int need_recv, size_t count, size_t multiplier,
                              gw_dtype_t dtype, gw_op_t op, int root, size_t *nbytes_out)
{
    gw_status_t st = GW_ERR_INVALID_ARG;
    size_t esize = gw_dtype_size(dtype);
    if (atomic_load(&comm->abort_requested))
        return gw__comm_fail(comm, GW_ERR_ABORTED);
    if (comm->failed != GW_OK)
        return comm->failed;
    if (esize == 0) {
        GW_ERROR(&comm->log, "api", "%s: unknown dtype %d", fn, (int)dtype);
        goto fail;
    }
    if ((unsigned)op >= GW_OP_COUNT) {
        GW_ERROR(&comm->log, "api", "%s: unknown reduction op %d", fn, (int)op);
        goto fail;
    }
    if (!gw__reduce_supported(dtype, op)) {
        GW_ERROR(&comm->log, "api", "%s: %s is a bitwise op, for integer dtypes only, not %s", fn,
                 gw_op_name(op), gw_dtype_name(dtype));
        goto fail;
    }
    if (root < 0 || root >= comm->size) {
        GW_ERROR(&comm->log, "api", "%s: root %d out of range [0, %d)", fn, root, comm->size);
        goto fail;
    }
    size_t elems, nbytes;
    if (__builtin_mul_overflow(count, multiplier, &elems) ||
        __builtin_mul_overflow(elems, esize, &nbytes) || nbytes > (size_t)PTRDIFF_MAX) {
        GW_ERROR(&comm->log, "api", "%s: %zu x %zu elements of %s overflow the address space", fn,
                 count, multiplier, gw_dtype_name(dtype));
        st = GW_ERR_OVERFLOW;
        goto fail;
    }
    if (count > 0 && need_send && !sendbuf) {
        GW_ERROR(&comm->log, "api", "%s: send buffer is NULL with count %zu", fn, count);
        goto fail;
    }
    if (count > 0 && need_recv && !recvbuf) {
        GW_ERROR(&comm->log, "api", "%s: receive buffer is NULL with count %zu", fn, count);
        goto fail;
    }
    *nbytes_out = nbytes;
    return GW_OK;
fail:
    return gw__comm_fail(comm, st);
}

static void copy_if_distinct(void *dst, const void *src, size_t nbytes)
{
    if (dst != src && nbytes > 0)
        memmove(dst, src, nbytes);
}

/* Every member on one host, reached through shared memory (the transport
 * is "shm", or a mux such as "shm+tcp" that uses it for the ranks of this
 * host). */
static int on_one_host_shm(const gw_comm_t *comm)
{
    const gw_comm_t *owner = comm->root ? comm->root : comm;
    return comm->topo.order && comm->topo.nhosts == 1 && owner->transport &&
           owner->transport->name && strncmp(owner->transport->name, "shm", 3) == 0;
}

gw_algo_t gw_comm_pick_algo(const gw_comm_t *comm, size_t count, gw_dtype_t dtype)
{
    if (!comm)
        return GW_ALGO_AUTO;
    if (comm->algo != GW_ALGO_AUTO)
        return comm->algo;
    if (comm->tuning.force[GW_COLL_ALLREDUCE] != GW_ALGO_AUTO)
        return comm->tuning.force[GW_COLL_ALLREDUCE];
    size_t bytes;
    if (__builtin_mul_overflow(count, gw_dtype_size(dtype), &bytes))
        bytes = SIZE_MAX;
    if (!comm->topo.order)
        return gw__tuning_pick(&comm->tuning, comm->size, bytes);
    if (on_one_host_shm(comm))
        return gw__tuning_pick_shm(&comm->tuning, comm->size, bytes);
    return gw__tuning_pick_hosts(&comm->tuning, comm->size, comm->topo.nhosts, comm->topo.local_max,
                                 bytes);
}

/* The algorithm of a validated call of a kind the model chooses for:
 * allreduce's own model, or the other kinds' (tuning_coll.c), each priced
 * on the bytes of the whole vector. */
static gw_algo_t pick_algo(const gw_comm_t *comm, const gw_coll_args_t *a)
{
    if (a->kind == GW_COLL_ALLREDUCE)
        return gw_comm_pick_algo(comm, a->count, a->dtype);
    size_t bytes;
    const size_t mult = a->kind == GW_COLL_REDUCE ? 1 : (size_t)comm->size;
    if (__builtin_mul_overflow(a->count, gw_dtype_size(a->dtype), &bytes) ||
        __builtin_mul_overflow(bytes, mult, &bytes))
        bytes = SIZE_MAX;
    return gw__tuning_pick_coll(&comm->tuning, a->kind, comm->size, bytes, on_one_host_shm(comm));
}

gw_status_t gw__allreduce_algo(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                               gw_dtype_t dtype, gw_op_t op, gw_algo_t algo)
{
    switch (algo) {
    case GW_ALGO_TREE:
        return gw__allreduce_tree(comm, sendbuf, recvbuf, count, dtype, op);
    case GW_ALGO_RD:
        return gw__allreduce_rd(comm, sendbuf, recvbuf, count, dtype, op);
    case GW_ALGO_HIER:
        return gw__allreduce_hier(comm, sendbuf, recvbuf, count, dtype, op);
    case GW_ALGO_DIRECT:
        return gw__allreduce_direct(comm, sendbuf, recvbuf, count, dtype, op);
    default:
        return gw__allreduce_ring(comm, sendbuf, recvbuf, count, dtype, op);
    }
}

/* What a collective's kind decides about its call: the name in messages,
 * which buffers each rank must pass, how many elements count stands for
 * (count, or count on each of size ranks), whether op and root mean
 * anything, and the algorithm (GW_ALGO_AUTO: the cost model picks it per
 * call; the broadcast has one, tuning_coll.c says why). */
typedef struct coll_rule {
    const char *fn;
    int send_root_only; /* only the root passes a send buffer */
    int recv_root_only; /* only the root passes a receive buffer */
    int per_rank;       /* count elements per rank: count * size in all */
    int has_op, has_root;
    gw_algo_t algo;
    int agree_first; /* ranks agree on the tag before the algorithm: see the top */
} coll_rule_t;

static const coll_rule_t rules[] = {
    [GW_COLL_ALLREDUCE] = {"gw_allreduce", 0, 0, 0, 1, 0, GW_ALGO_AUTO, 0},
    [GW_COLL_BROADCAST] = {"gw_broadcast", 1, 0, 0, 0, 1, GW_ALGO_TREE, 1},
    [GW_COLL_REDUCE] = {"gw_reduce", 0, 1, 0, 1, 1, GW_ALGO_AUTO, 1},
    [GW_COLL_ALLGATHER] = {"gw_allgather", 0, 0, 1, 0, 0, GW_ALGO_AUTO, 0},
    [GW_COLL_REDUCE_SCATTER] = {"gw_reduce_scatter", 0, 0, 1, 1, 0, GW_ALGO_AUTO, 0},
};

/* The buffers of a validated call (nbytes: count times the rule's
 * multiplier, in bytes) must not partly overlap (overlap.c); each kind's
 * in-place layout is the header's. */
static gw_status_t check_buffers(gw_comm_t *comm, const coll_rule_t *rule, const gw_coll_args_t *a,
                                 size_t nbytes, int is_root)
{
    const uintptr_t recv = (uintptr_t)a->recvbuf;
    size_t send_bytes = nbytes, recv_bytes = nbytes;
    uintptr_t in_place = recv;
    const size_t block = rule->per_rank ? nbytes / (size_t)comm->size : nbytes;
    switch (a->kind) {
    case GW_COLL_BROADCAST: /* sendbuf is read on root only */
        send_bytes = is_root ? nbytes : 0;
        break;
    case GW_COLL_REDUCE: /* recvbuf is written on root only */
        recv_bytes = is_root ? nbytes : 0;
        break;
    case GW_COLL_ALLGATHER: /* in place: sendbuf == recvbuf + rank's block */
        send_bytes = block;
        in_place = recv + (uintptr_t)comm->rank * block;
        break;
    case GW_COLL_REDUCE_SCATTER: /* in place: recvbuf == sendbuf + rank's block */
        recv_bytes = block;
        in_place = recv - (uintptr_t)comm->rank * block;
        break;
    default:
        break;
    }
    return gw__check_overlap(comm, rule->fn, a->sendbuf, send_bytes, a->recvbuf, recv_bytes,
                             (const void *)in_place);
}

/* The algorithm of a validated call, under its tag; red is the op with
 * GW_AVG reduced as GW_SUM. */
static gw_status_t run_algorithm(gw_comm_t *comm, const gw_coll_args_t *a, gw_op_t red,
                                 gw_algo_t algo)
{
    switch (a->kind) {
    case GW_COLL_ALLREDUCE:
        return gw__allreduce_algo(comm, a->sendbuf, a->recvbuf, a->count, a->dtype, red, algo);
    case GW_COLL_BROADCAST:
        return gw__broadcast_tree(comm, a->recvbuf, a->count, a->dtype, a->root);
    case GW_COLL_REDUCE:
        return algo == GW_ALGO_RING ? gw__reduce_scatter_gather(comm, a->sendbuf, a->recvbuf,
                                                                a->count, a->dtype, red, a->root)
                                    : gw__reduce_tree(comm, a->sendbuf, a->recvbuf, a->count,
                                                      a->dtype, red, a->root);
    case GW_COLL_ALLGATHER:
        return algo == GW_ALGO_DIRECT
                   ? gw__allgather_direct(comm, a->sendbuf, a->recvbuf, a->count, a->dtype)
               : algo == GW_ALGO_RD
                   ? gw__allgather_bruck(comm, a->sendbuf, a->recvbuf, a->count, a->dtype)
                   : gw__allgather_ring(comm, a->sendbuf, a->recvbuf, a->count, a->dtype);
    case GW_COLL_REDUCE_SCATTER:
        return algo == GW_ALGO_DIRECT
                   ? gw__reduce_scatter_direct(comm, a->sendbuf, a->recvbuf, a->count, a->dtype,
                                               red)
                   : gw__reduce_scatter_ring(comm, a->sendbuf, a->recvbuf, a->count, a->dtype, red);
    default:
        return GW_ERR_INVALID_ARG;
    }
}

/* Which algorithm a collective runs, at INFO the first time a kind of
 * collective runs with it on this communicator (a handful of lines per
 * job), at TRACE every time after. */
static void log_algo(gw_comm_t *comm, const coll_rule_t *rule, const gw_coll_args_t *a,
                     gw_algo_t algo)
{
    const char *why = rule->algo != GW_ALGO_AUTO ? "its only algorithm"
                      : a->kind == GW_COLL_ALLREDUCE && comm->algo != GW_ALGO_AUTO
                          ? "set by GW_ALGO or gw_comm_set_algo"
                      : comm->tuning.force[a->kind] != GW_ALGO_AUTO
                          ? "set by the tuning file"
                          : "the cost model's choice for this size";
    uint32_t bit = 1u << (unsigned)algo, *seen = &comm->algo_logged[a->kind];
    if (*seen & bit) {
        GW_TRACE(&comm->log, "coll", "%s #%llu: %s, %zu x %s", rule->fn,
                 (unsigned long long)comm->seq, gw_algo_name(algo), a->count,
                 gw_dtype_name(a->dtype));
        return;
    }
    *seen |= bit;
    GW_INFO(&comm->log, "coll", "%s of %zu x %s on %d ranks: %s algorithm (%s)", rule->fn, a->count,
            gw_dtype_name(a->dtype), comm->size, gw_algo_name(algo), why);
}

static gw_status_t barrier(gw_comm_t *comm)
{
    if (atomic_load(&comm->abort_requested))
        return gw__comm_fail(comm, GW_ERR_ABORTED);
    if (comm->failed != GW_OK)
        return comm->failed;
    if (comm->size == 1)
        return GW_OK;
    gw__coll_begin(comm, GW_COLL_BARRIER, 0, GW_UINT8, GW_SUM, 0, GW_ALGO_AUTO);
    gw__fr_begin(comm->fr, comm->seq, GW_COLL_BARRIER, 0, GW_UINT8, GW_ALGO_AUTO);
    gw_status_t st = gw__comm_op_end(comm, gw__barrier_dissemination(comm));
    return st == GW_OK ? GW_OK : gw__comm_fail(comm, st);
}

static gw_status_t run_checked(gw_comm_t *comm, const coll_rule_t *rule, const gw_coll_args_t *a,
                               size_t nbytes, int is_root, gw_op_t op, int root);
static gw_status_t check_premul(gw_comm_t *comm, const coll_rule_t *rule, const gw_coll_args_t *a);
static gw_status_t premul_input(gw_comm_t *comm, gw_coll_args_t *a, size_t nbytes, void **scratch);

gw_status_t gw__coll_execute(gw_comm_t *comm, const gw_coll_args_t *a)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    if (a->kind == GW_COLL_BARRIER)
        return barrier(comm);
    if ((unsigned)a->kind >= sizeof(rules) / sizeof(rules[0]) || !rules[a->kind].fn)
        return GW_ERR_INVALID_ARG;
    const coll_rule_t *rule = &rules[a->kind];
    const int is_root = comm->rank == a->root;
    const gw_op_t op = rule->has_op ? a->op : GW_SUM;
    const int root = rule->has_root ? a->root : 0;
    size_t nbytes = 0;
    gw_status_t st =
        check_args(comm, rule->fn, a->sendbuf, !rule->send_root_only || is_root, a->recvbuf,
                   !rule->recv_root_only || is_root, a->count,
                   rule->per_rank ? (size_t)comm->size : 1, a->dtype, op, root, &nbytes);
    if (st != GW_OK)
        return st;
    if ((st = check_buffers(comm, rule, a, nbytes, is_root)) != GW_OK ||
        (st = check_premul(comm, rule, a)) != GW_OK)
        return gw__comm_fail(comm, st);
    gw_coll_args_t scaled;
    void *scratch = NULL;
    if (rule->has_op && a->op == GW_PREMUL_SUM) {
        scaled = *a;
        if ((st = premul_input(comm, &scaled, nbytes, &scratch)) != GW_OK)
            return gw__comm_fail(comm, st);
        a = &scaled;
    }
    st = run_checked(comm, rule, a, nbytes, is_root, op, root);
    free(scratch);
    return st;
}

/* gw__coll_execute once the arguments are checked: the algorithm, or the
 * copy of a rank alone, then GW_AVG's division. */
static gw_status_t run_checked(gw_comm_t *comm, const coll_rule_t *rule, const gw_coll_args_t *a,
                               size_t nbytes, int is_root, gw_op_t op, int root)
{
    gw_status_t st;
    /* A broadcast's root holds the result from the start; the others hold
     * their own data when they are alone. */
    if (a->kind == GW_COLL_BROADCAST ? is_root : comm->size == 1)
        copy_if_distinct(a->recvbuf, a->sendbuf, nbytes);
    if (comm->size > 1) {
        gw_algo_t algo = rule->algo == GW_ALGO_AUTO ? pick_algo(comm, a) : rule->algo;
        gw__coll_begin(comm, a->kind, a->count, a->dtype, op, root, algo);
        gw__fr_begin(comm->fr, comm->seq, a->kind, a->count, a->dtype, algo);
        log_algo(comm, rule, a, algo);
        st = rule->agree_first ? gw__barrier_dissemination(comm) : GW_OK;
        if (st == GW_OK)
            st = run_algorithm(comm, a, op == GW_AVG || op == GW_PREMUL_SUM ? GW_SUM : op, algo);
        st = gw__comm_op_end(comm, st);
        if (st != GW_OK)
            return gw__comm_fail(comm, st);
    }
    if (op == GW_AVG && (!rule->recv_root_only || is_root))
        return gw__coll_finish_avg(comm, a->recvbuf, a->count, a->dtype, comm->size);
    return GW_OK;
}

/* GW_PREMUL_SUM comes with a factor (only the *_premul calls give one), for
 * float dtypes, and the factor is a finite number. */
static gw_status_t check_premul(gw_comm_t *comm, const coll_rule_t *rule, const gw_coll_args_t *a)
{
    if (!rule->has_op || a->op != GW_PREMUL_SUM)
        return GW_OK;
    if (!a->premul)
        GW_ERROR(&comm->log, "api",
                 "%s: premul_sum needs a factor: call gw_allreduce_premul, gw_reduce_premul or "
                 "gw_reduce_scatter_premul",
                 rule->fn);
    else if (!gw__dtype_is_float(a->dtype))
        GW_ERROR(&comm->log, "api", "%s: premul_sum is for float dtypes, not %s", rule->fn,
                 gw_dtype_name(a->dtype));
    else if (!isfinite(a->factor))
        GW_ERROR(&comm->log, "api", "%s: premul_sum factor %g is not a finite number", rule->fn,
                 a->factor);
    else
        return GW_OK;
    return GW_ERR_INVALID_ARG;
}

/* premul_sum's first step: this rank's input times its factor, in scratch
 * memory (sendbuf is the caller's and stays untouched), which then stands
 * for sendbuf in a plain sum. */
static gw_status_t premul_input(gw_comm_t *comm, gw_coll_args_t *a, size_t nbytes, void **scratch)
{
    size_t esize = gw_dtype_size(a->dtype);
    *scratch = malloc(nbytes ? nbytes : 1);
    if (!*scratch) {
        GW_ERROR(&comm->log, "api", "premul_sum: no memory for %zu bytes of scaled input", nbytes);
        return GW_ERR_NO_MEMORY;
    }
    gw__reduce_scale(*scratch, a->sendbuf, nbytes / esize, a->dtype, a->factor);
    a->sendbuf = *scratch;
    return GW_OK;
}

static gw_status_t execute_handle(gw_comm_t *comm, const gw_handle_t *h)
{
    return gw__coll_execute(comm, &h->args);
}

/* The public calls: each describes itself as a gw_coll_args_t and runs
 * through gw__async_run, which executes it here or, once the communicator
 * has a progress thread (non-blocking calls were used), in order behind the
 * operations already queued there. */
#define GW__RUN(comm, ...)                                                      \
    do {                                                                        \
        if (!(comm))                                                            \
            return GW_ERR_INVALID_ARG;                                          \
        gw_handle_t call_ = {.execute = execute_handle, .args = {__VA_ARGS__}}; \
        return gw__async_run((comm), &call_, "a collective");                   \
    } while (0)

gw_status_t gw_allreduce(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                         gw_dtype_t dtype, gw_op_t op)
{
    GW__RUN(comm, .kind = GW_COLL_ALLREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
            .dtype = dtype, .op = op);
}

gw_status_t gw_broadcast(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                         gw_dtype_t dtype, int root)
{
    GW__RUN(comm, .kind = GW_COLL_BROADCAST, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
            .dtype = dtype, .root = root);
}

gw_status_t gw_reduce(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                      gw_dtype_t dtype, gw_op_t op, int root)
{
    GW__RUN(comm, .kind = GW_COLL_REDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
            .dtype = dtype, .op = op, .root = root);
}

gw_status_t gw_allgather(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                         gw_dtype_t dtype)
{
    GW__RUN(comm, .kind = GW_COLL_ALLGATHER, .sendbuf = sendbuf, .recvbuf = recvbuf,
            .count = sendcount, .dtype = dtype);
}

gw_status_t gw_reduce_scatter(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                              gw_dtype_t dtype, gw_op_t op)
{
    GW__RUN(comm, .kind = GW_COLL_REDUCE_SCATTER, .sendbuf = sendbuf, .recvbuf = recvbuf,
            .count = recvcount, .dtype = dtype, .op = op);
}

gw_status_t gw_barrier(gw_comm_t *comm) { GW__RUN(comm, .kind = GW_COLL_BARRIER); }

gw_status_t gw_allreduce_premul(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                gw_dtype_t dtype, double factor)
{
    GW__RUN(comm, .kind = GW_COLL_ALLREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
            .dtype = dtype, .op = GW_PREMUL_SUM, .factor = factor, .premul = 1);
}

gw_status_t gw_reduce_premul(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                             gw_dtype_t dtype, double factor, int root)
{
    GW__RUN(comm, .kind = GW_COLL_REDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
            .dtype = dtype, .op = GW_PREMUL_SUM, .root = root, .factor = factor, .premul = 1);
}

gw_status_t gw_reduce_scatter_premul(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t recvcount, gw_dtype_t dtype, double factor)
{
    GW__RUN(comm, .kind = GW_COLL_REDUCE_SCATTER, .sendbuf = sendbuf, .recvbuf = recvbuf,
            .count = recvcount, .dtype = dtype, .op = GW_PREMUL_SUM, .factor = factor, .premul = 1);
}

/* The non-blocking forms: the same description, queued as a handle for the
 * progress thread (async.c), which runs it in call order. */
#define GW__START(comm, handle, ...)                                            \
    do {                                                                        \
        if (!(comm) || !(handle))                                               \
            return GW_ERR_INVALID_ARG;                                          \
        gw_handle_t call_ = {.execute = execute_handle, .args = {__VA_ARGS__}}; \
        return gw__async_start((comm), &call_, (handle));                       \
    } while (0)

gw_status_t gw_iallreduce(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                          gw_dtype_t dtype, gw_op_t op, gw_handle_t **handle)
{
    GW__START(comm, handle, .kind = GW_COLL_ALLREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf,
              .count = count, .dtype = dtype, .op = op);
}

gw_status_t gw_ibroadcast(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                          gw_dtype_t dtype, int root, gw_handle_t **handle)
{
    GW__START(comm, handle, .kind = GW_COLL_BROADCAST, .sendbuf = sendbuf, .recvbuf = recvbuf,
              .count = count, .dtype = dtype, .root = root);
}

gw_status_t gw_ireduce(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                       gw_dtype_t dtype, gw_op_t op, int root, gw_handle_t **handle)
{
    GW__START(comm, handle, .kind = GW_COLL_REDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf,
              .count = count, .dtype = dtype, .op = op, .root = root);
}

gw_status_t gw_iallgather(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                          gw_dtype_t dtype, gw_handle_t **handle)
{
    GW__START(comm, handle, .kind = GW_COLL_ALLGATHER, .sendbuf = sendbuf, .recvbuf = recvbuf,
              .count = sendcount, .dtype = dtype);
}

gw_status_t gw_ireduce_scatter(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                               size_t recvcount, gw_dtype_t dtype, gw_op_t op, gw_handle_t **handle)
{
    GW__START(comm, handle, .kind = GW_COLL_REDUCE_SCATTER, .sendbuf = sendbuf, .recvbuf = recvbuf,
              .count = recvcount, .dtype = dtype, .op = op);
}

gw_status_t gw_ibarrier(gw_comm_t *comm, gw_handle_t **handle)
{
    GW__START(comm, handle, .kind = GW_COLL_BARRIER);
}

gw_status_t gw_iallreduce_premul(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                 gw_dtype_t dtype, double factor, gw_handle_t **handle)
{
    GW__START(comm, handle, .kind = GW_COLL_ALLREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf,
              .count = count, .dtype = dtype, .op = GW_PREMUL_SUM, .factor = factor, .premul = 1);
}

gw_status_t gw_ireduce_premul(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                              gw_dtype_t dtype, double factor, int root, gw_handle_t **handle)
{
    GW__START(comm, handle, .kind = GW_COLL_REDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf,
              .count = count, .dtype = dtype, .op = GW_PREMUL_SUM, .root = root, .factor = factor,
              .premul = 1);
}

gw_status_t gw_ireduce_scatter_premul(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                      size_t recvcount, gw_dtype_t dtype, double factor,
                                      gw_handle_t **handle)
{
    GW__START(comm, handle, .kind = GW_COLL_REDUCE_SCATTER, .sendbuf = sendbuf, .recvbuf = recvbuf,
              .count = recvcount, .dtype = dtype, .op = GW_PREMUL_SUM, .factor = factor,
              .premul = 1);
}
