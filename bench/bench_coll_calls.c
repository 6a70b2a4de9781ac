/*
 * bench_coll_calls.c - the collectives as the benchmarks call and check
 * them (contract in bench_coll.h).
 *
 * Inputs and answers come from bench_data.c's patterns, indexed by global
 * element: an allreduce's, a reduce's (on the root) and a reduce-scatter's
 * answer is the exact reduction (a reduce-scatter's rank r holds elements
 * r * block .. of it); a broadcast's is the root's input; an allgather's
 * block q is rank q's input at q * block... So a block sent to the wrong
 * place, reduced over the wrong ranks or left alone is counted wrong. A
 * sendrecv's answer is the previous rank's input.
 */
#include <string.h>

#include "bench.h"
#include "bench_coll.h"

static double factor_allreduce(int n) { return 2.0 * (n - 1) / n; }
static double factor_blocks(int n) { return (double)(n - 1) / n; }
static double factor_one(int n)
{
    (void)n;
    return 1.0;
}

static const gw_bench_coll_t colls[] = {
    {GW_BENCH_ALLREDUCE, "allreduce", "allreduce, as nccl-tests' all_reduce_perf", 1, 0, 1, 0,
     factor_allreduce, 0},
    {GW_BENCH_ALLGATHER, "allgather", "allgather, as nccl-tests' all_gather_perf", 0, 0, 0, 1,
     factor_blocks, 0},
    {GW_BENCH_REDUCE_SCATTER, "reduce_scatter",
     "reduce-scatter, as nccl-tests' reduce_scatter_perf", 1, 0, 0, 1, factor_blocks, 0},
    {GW_BENCH_BROADCAST, "broadcast", "broadcast, as nccl-tests' broadcast_perf", 0, 1, 0, 0,
     factor_one, 0},
    {GW_BENCH_REDUCE, "reduce", "reduce, as nccl-tests' reduce_perf", 1, 1, 0, 0, factor_one, 0},
    {GW_BENCH_BARRIER, "barrier", "barrier latency", 0, 0, 0, 0, factor_one, 0},
    {GW_BENCH_SENDRECV, "sendrecv",
     "gw_sendrecv to the next rank and from the previous one at once, as nccl-tests' "
     "sendrecv_perf",
     0, 0, 0, 0, factor_one, 1},
    {GW_BENCH_ALLTOALL, "alltoall", "alltoall, as nccl-tests' alltoall_perf", 0, 0, 0, 1,
     factor_blocks, 0},
    {GW_BENCH_GATHER, "gather", "gather to the root, as nccl-tests' gather_perf", 0, 1, 0, 1,
     factor_blocks, 0},
    {GW_BENCH_SCATTER, "scatter", "scatter from the root, as nccl-tests' scatter_perf", 0, 1, 0, 1,
     factor_blocks, 0},
    {GW_BENCH_ALLGATHERV, "allgatherv",
     "allgatherv with blocks of one size (its ring against allgather's)", 0, 0, 0, 1, factor_blocks,
     0},
    {GW_BENCH_ALLTOALLV, "alltoallv",
     "alltoallv with blocks of one size, as OSU's osu_alltoallv (its path against alltoall's)", 0,
     0, 0, 1, factor_blocks, 0},
};

/* Ring neighbours of a sendrecv: data goes to next and comes from prev. */
static int next_rank(const gw_bench_coll_run_t *r) { return (r->rank + 1) % r->size; }
static int prev_rank(const gw_bench_coll_run_t *r) { return (r->rank + r->size - 1) % r->size; }

const gw_bench_coll_t *gw_bench_coll_find(const char *name)
{
    for (size_t i = 0; i < sizeof(colls) / sizeof(colls[0]); i++)
        if (strcmp(name, colls[i].name) == 0)
            return &colls[i];
    return NULL;
}

gw_bench_shape_t gw_bench_coll_shape(const gw_bench_coll_run_t *r, size_t size, gw_dtype_t dt)
{
    gw_bench_shape_t sh;
    size_t es = gw_dtype_size(dt), parts = r->coll->blocks ? (size_t)r->size : 1;
    sh.block = size / es / parts;
    sh.count = sh.block * parts;
    sh.bytes = sh.count * es;
    return sh;
}

gw_bench_place_t gw_bench_coll_place(const gw_bench_coll_run_t *r, const gw_bench_shape_t *sh,
                                     gw_dtype_t dt, int in_place)
{
    char *own = (char *)r->recv + (size_t)r->rank * sh->block * gw_dtype_size(dt);
    if (!in_place)
        return (gw_bench_place_t){r->send, r->recv};
    switch (r->coll->id) {
    case GW_BENCH_ALLGATHER:
    case GW_BENCH_ALLGATHERV:
    case GW_BENCH_GATHER:
        return (gw_bench_place_t){own, r->recv};
    case GW_BENCH_REDUCE_SCATTER:
    case GW_BENCH_SCATTER:
        return (gw_bench_place_t){r->recv, own};
    default:
        return (gw_bench_place_t){r->recv, r->recv};
    }
}

/* The v-collectives' counts and displacements: one block per rank, in
 * rank order. */
static void uniform_blocks(const gw_bench_coll_run_t *r, const gw_bench_shape_t *sh)
{
    for (int q = 0; q < r->size; q++) {
        r->counts[q] = sh->block;
        r->displs[q] = (size_t)q * sh->block;
    }
}

gw_status_t gw_bench_coll_call(const gw_bench_coll_run_t *r, const gw_bench_place_t *pl,
                               const gw_bench_shape_t *sh, gw_dtype_t dt, gw_op_t op)
{
    const double f = GW_BENCH_PREMUL_FACTOR;
    if (op == GW_PREMUL_SUM)
        switch (r->coll->id) {
        case GW_BENCH_ALLREDUCE:
            return gw_allreduce_premul(r->comm, pl->src, pl->dst, sh->count, dt, f);
        case GW_BENCH_REDUCE_SCATTER:
            return gw_reduce_scatter_premul(r->comm, pl->src, pl->dst, sh->block, dt, f);
        case GW_BENCH_REDUCE:
            return gw_reduce_premul(r->comm, pl->src, pl->dst, sh->count, dt, f, r->root);
        default:
            break;
        }
    switch (r->coll->id) {
    case GW_BENCH_ALLREDUCE:
        return gw_allreduce(r->comm, pl->src, pl->dst, sh->count, dt, op);
    case GW_BENCH_ALLGATHER:
        return gw_allgather(r->comm, pl->src, pl->dst, sh->block, dt);
    case GW_BENCH_REDUCE_SCATTER:
        return gw_reduce_scatter(r->comm, pl->src, pl->dst, sh->block, dt, op);
    case GW_BENCH_BROADCAST:
        return gw_broadcast(r->comm, pl->src, pl->dst, sh->count, dt, r->root);
    case GW_BENCH_REDUCE:
        return gw_reduce(r->comm, pl->src, pl->dst, sh->count, dt, op, r->root);
    case GW_BENCH_SENDRECV:
        return gw_sendrecv(r->comm, pl->src, sh->count, next_rank(r), pl->dst, sh->count,
                           prev_rank(r), dt);
    case GW_BENCH_ALLTOALL:
        return gw_alltoall(r->comm, pl->src, pl->dst, sh->block, dt);
    case GW_BENCH_GATHER:
        return gw_gather(r->comm, pl->src, pl->dst, sh->block, dt, r->root);
    case GW_BENCH_SCATTER:
        return gw_scatter(r->comm, pl->src, pl->dst, sh->block, dt, r->root);
    case GW_BENCH_ALLGATHERV:
        uniform_blocks(r, sh);
        return gw_allgatherv(r->comm, pl->src, pl->dst, sh->block, r->counts, r->displs, dt);
    case GW_BENCH_ALLTOALLV:
        /* Block q goes to rank q and comes from it: the same counts and
         * displacements both ways (in place, the receive ones alone). */
        uniform_blocks(r, sh);
        return gw_alltoallv(r->comm, pl->src, r->counts, r->displs, pl->dst, r->counts, r->displs,
                            dt);
    default:
        return gw_barrier(r->comm);
    }
}

gw_status_t gw_bench_coll_icall(const gw_bench_coll_run_t *r, const gw_bench_place_t *pl,
                                const gw_bench_shape_t *sh, gw_dtype_t dt, gw_op_t op,
                                gw_handle_t **h, int *nh)
{
    gw_status_t st;
    *nh = 1;
    const double f = GW_BENCH_PREMUL_FACTOR;
    if (op == GW_PREMUL_SUM)
        switch (r->coll->id) {
        case GW_BENCH_ALLREDUCE:
            return gw_iallreduce_premul(r->comm, pl->src, pl->dst, sh->count, dt, f, h);
        case GW_BENCH_REDUCE_SCATTER:
            return gw_ireduce_scatter_premul(r->comm, pl->src, pl->dst, sh->block, dt, f, h);
        case GW_BENCH_REDUCE:
            return gw_ireduce_premul(r->comm, pl->src, pl->dst, sh->count, dt, f, r->root, h);
        default:
            break;
        }
    switch (r->coll->id) {
    case GW_BENCH_ALLREDUCE:
        return gw_iallreduce(r->comm, pl->src, pl->dst, sh->count, dt, op, h);
    case GW_BENCH_ALLGATHER:
        return gw_iallgather(r->comm, pl->src, pl->dst, sh->block, dt, h);
    case GW_BENCH_REDUCE_SCATTER:
        return gw_ireduce_scatter(r->comm, pl->src, pl->dst, sh->block, dt, op, h);
    case GW_BENCH_BROADCAST:
        return gw_ibroadcast(r->comm, pl->src, pl->dst, sh->count, dt, r->root, h);
    case GW_BENCH_REDUCE:
        return gw_ireduce(r->comm, pl->src, pl->dst, sh->count, dt, op, r->root, h);
    case GW_BENCH_SENDRECV:
        /* The receive first, so the send's data has a buffer waiting. */
        if ((st = gw_irecv(r->comm, pl->dst, sh->count, dt, prev_rank(r), &h[0])) != GW_OK)
            return st;
        if ((st = gw_isend(r->comm, pl->src, sh->count, dt, next_rank(r), &h[1])) != GW_OK) {
            gw_wait(h[0]); /* its peer's send matches it: it completes */
            return st;
        }
        *nh = 2;
        return GW_OK;
    case GW_BENCH_ALLTOALL:
        return gw_ialltoall(r->comm, pl->src, pl->dst, sh->block, dt, h);
    case GW_BENCH_GATHER:
        return gw_igather(r->comm, pl->src, pl->dst, sh->block, dt, r->root, h);
    case GW_BENCH_SCATTER:
        return gw_iscatter(r->comm, pl->src, pl->dst, sh->block, dt, r->root, h);
    case GW_BENCH_ALLGATHERV:
        uniform_blocks(r, sh);
        return gw_iallgatherv(r->comm, pl->src, pl->dst, sh->block, r->counts, r->displs, dt, h);
    case GW_BENCH_ALLTOALLV:
        uniform_blocks(r, sh);
        return gw_ialltoallv(r->comm, pl->src, r->counts, r->displs, pl->dst, r->counts, r->displs,
                             dt, h);
    default:
        return gw_ibarrier(r->comm, h);
    }
}

void gw_bench_coll_fill(const gw_bench_coll_run_t *r, const gw_bench_place_t *pl,
                        const gw_bench_shape_t *sh, gw_dtype_t dt, gw_op_t op)
{
    void *src = (void *)pl->src;
    switch (r->coll->id) {
    case GW_BENCH_ALLGATHER:
    case GW_BENCH_ALLGATHERV:
    case GW_BENCH_GATHER:
        gw_bench_fill_at(src, (size_t)r->rank * sh->block, sh->block, dt, op, r->rank, r->size);
        break;
    case GW_BENCH_BROADCAST:
    case GW_BENCH_SCATTER:
        if (r->rank == r->root)
            gw_bench_fill(src, sh->count, dt, op, r->rank, r->size);
        break;
    case GW_BENCH_BARRIER:
        break;
    default: /* the whole buffer, global indices (reduce-scatter: every block) */
        gw_bench_fill(src, sh->count, dt, op, r->rank, r->size);
    }
}

/* What this rank receives: where (*dst, *len elements) and what it should
 * be (*w). 0 when it receives nothing; an allgather (one want per block)
 * is handled by the callers. */
static int received(const gw_bench_coll_run_t *r, const gw_bench_place_t *pl,
                    const gw_bench_shape_t *sh, void **dst, size_t *len, gw_bench_want_t *w)
{
    *dst = pl->dst;
    *len = sh->count;
    *w = GW_BENCH_WANT_REDUCED;
    switch (r->coll->id) {
    case GW_BENCH_REDUCE_SCATTER:
        w->first = (size_t)r->rank * sh->block;
        *len = sh->block;
        return 1;
    case GW_BENCH_BROADCAST:
        w->rank = r->root;
        return 1;
    case GW_BENCH_REDUCE:
        return r->rank == r->root;
    case GW_BENCH_SENDRECV:
        w->rank = prev_rank(r);
        return 1;
    case GW_BENCH_SCATTER: /* the root's input at the rank's block */
        w->rank = r->root;
        w->first = (size_t)r->rank * sh->block;
        *len = sh->block;
        return 1;
    case GW_BENCH_BARRIER:
        return 0;
    default:
        return 1;
    }
}

static void *block_of(const gw_bench_place_t *pl, const gw_bench_shape_t *sh, gw_dtype_t dt, int q)
{
    return (char *)pl->dst + (size_t)q * sh->block * gw_dtype_size(dt);
}

/* The collectives whose receive buffer holds one block per rank, each with
 * its own answer: 1 and *w for block q when this rank receives, 0 when it
 * receives nothing (a gather off the root); -1 for the other collectives.
 * allgather's block q is rank q's input there; alltoall's block q is rank
 * q's input at this rank's block. */
static int block_want(const gw_bench_coll_run_t *r, const gw_bench_shape_t *sh, int q,
                      gw_bench_want_t *w)
{
    switch (r->coll->id) {
    case GW_BENCH_GATHER:
        if (r->rank != r->root)
            return 0;
        /* fall through */
    case GW_BENCH_ALLGATHER:
    case GW_BENCH_ALLGATHERV:
        *w = (gw_bench_want_t){q, (size_t)q * sh->block};
        return 1;
    case GW_BENCH_ALLTOALL:
    case GW_BENCH_ALLTOALLV:
        *w = (gw_bench_want_t){q, (size_t)r->rank * sh->block};
        return 1;
    default:
        return -1;
    }
}

void gw_bench_coll_poison(const gw_bench_coll_run_t *r, const gw_bench_place_t *pl,
                          const gw_bench_shape_t *sh, gw_dtype_t dt, gw_op_t op, int in_place)
{
    gw_bench_want_t bw;
    int blocks = block_want(r, sh, 0, &bw);
    if (blocks >= 0) {
        /* In place an alltoall's whole buffer, the others' own block, is input. */
        if (blocks == 0 ||
            (in_place && (r->coll->id == GW_BENCH_ALLTOALL || r->coll->id == GW_BENCH_ALLTOALLV)))
            return;
        for (int q = 0; q < r->size; q++)
            if (!(in_place && q == r->rank) && block_want(r, sh, q, &bw) == 1)
                gw_bench_poison_want(block_of(pl, sh, dt, q), sh->block, dt, op, r->size, bw);
        return;
    }
    void *dst;
    size_t len;
    gw_bench_want_t w;
    if (!received(r, pl, sh, &dst, &len, &w))
        return;
    /* In place the receive buffer is the input too; a broadcast's is only
     * the root's. */
    int holds_input = in_place && (r->coll->id != GW_BENCH_BROADCAST || r->rank == r->root) &&
                      (r->coll->id != GW_BENCH_SCATTER || r->rank == r->root);
    if (!holds_input)
        gw_bench_poison_want(dst, len, dt, op, r->size, w);
}

int64_t gw_bench_coll_wrong(const gw_bench_coll_run_t *r, const gw_bench_place_t *pl,
                            const gw_bench_shape_t *sh, gw_dtype_t dt, gw_op_t op)
{
    gw_bench_want_t bw;
    int blocks = block_want(r, sh, 0, &bw);
    if (blocks >= 0) {
        int64_t wrong = 0;
        for (int q = 0; q < r->size && blocks == 1; q++)
            if (block_want(r, sh, q, &bw) == 1)
                wrong += gw_bench_count_wrong_want(block_of(pl, sh, dt, q), sh->block, dt, op,
                                                   r->size, bw);
        return wrong;
    }
    void *dst;
    size_t len;
    gw_bench_want_t w;
    if (!received(r, pl, sh, &dst, &len, &w))
        return 0;
    return gw_bench_count_wrong_want(dst, len, dt, op, r->size, w);
}
