/*
 * zero_grid.c - ZeRO stages 1 and 2 over the data-parallel axis of the
 * hybrid grid (--zero 1|2 with --tensor-parallel and/or --pipeline-parallel).
 *
 * In the grid (parallel_grid.c) the ranks of one data-parallel group hold
 * the same share of the model: the same pipeline stage, the same tensor
 * slice. Plain, they allreduce that share's gradient once per step and all
 * apply the same update to it (train_model_parallel.c).
 *
 * Stage 1 shards the momentum. The share's flat array of n parameters is
 * cut into dp blocks of part = ceil(n / dp) (the last ones shorter, or
 * empty); the step's gradient is reduce-scattered in place (the array
 * grows by the padding, at most dp - 1 zeros that nothing writes), each
 * rank updates its block with its block of the momentum
 * (gw_train_sgd_update: weight decay on the weight spans, not on the
 * biases, as gw_train_stage_sgd), and an allgatherv puts every block back
 * into every rank's weights. The momentum a rank holds falls from n to
 * part floats.
 *
 * Stage 2 shards the reduced gradients too, so the share's whole gradient
 * array is never held. The unit is a run of rows of one layer's weights,
 * about --bucket-kb (the layer's last unit with its biases, which follow
 * its weights in the flat arrays), as in zero.c; each unit's span is cut
 * into dp blocks of part = ceil(count / dp). Backward
 * (model_tensor_parallel.c) computes each unit's rows of dW = dZ^T X into
 * one zeroed slot of dp * part floats instead of the array (the stage's
 * sink); as soon as a unit is done, its slot is reduce-scattered over the
 * group, in place, and the rank adds its block into its gradient shard,
 * before backward goes on. A rank then holds the shard (n / dp and the
 * padding) and one unit's slot instead of n floats. Micro-batches each
 * reduce-scatter their gradients and add them into the shard, as
 * DeepSpeed's stage 2 does under gradient accumulation: the step's
 * communication grows with the number of micro-batches, the memory does
 * not. After the step's last backward each rank updates its block of
 * every unit and an allgatherv per unit gives every rank the whole
 * weights. With a pipeline each
 * stage's reduce-scatters sit inside its schedule (pipeline_schedule.c,
 * pipeline_1f1b.c), on the data-parallel group of that stage: every
 * replica runs the same schedule, so they meet there, and a stage held in
 * one holds up its neighbours for as long: DeepSpeed does not combine
 * ZeRO-2 with pipeline parallelism; here it is offered, and the report's
 * bubble figure shows what it costs.
 *
 * Sums: the reduce-scatter may add the ranks' contributions in another
 * order than the plain grid's allreduce, and stage 2 adds micro-batches
 * after the sum over ranks rather than before it, and a unit's rows of dW
 * come from a smaller matrix product than the whole layer's (other
 * OpenBLAS kernels, other rounding), so the steps agree with the plain
 * grid's to float rounding; bit for bit on two data-parallel ranks (each
 * sum one commutative addition) with one micro-batch and one unit per
 * layer. There is no overlap with backward beyond that: each collective is
 * waited for where it is called.
 */
#include <stdlib.h>
#include <string.h>

#include "zero.h"

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

/* Calls f(ctx, layer, row0, row1, off, count) for every unit of st's
 * layers, in the flat arrays' order; returns how many. */
typedef void (*unit_fn)(void *ctx, int i, int row0, int row1, size_t off, size_t count);
static int units(const gw_train_stage_t *st, size_t bucket_bytes, unit_fn f, void *ctx)
{
    int n = 0;
    for (int i = 0; i < st->nl; i++) {
        const gw_train_tp_layer_t *L = &st->L[i];
        int step = gw_train_zero_unit_rows(bucket_bytes, L->lin);
        for (int a = 0; a < L->lout; a += step, n++) {
            int b = a + step < L->lout ? a + step : L->lout;
            size_t off = L->w_off + (size_t)a * (size_t)L->lin;
            size_t count = (size_t)(b - a) * (size_t)L->lin + (b == L->lout ? L->nb : 0);
            if (f)
                f(ctx, i, a, b, off, count);
        }
    }
    return n;
}

typedef struct {
    size_t w, shard, slot;
} sizes_t;

static void size_unit(void *ctx, int i, int row0, int row1, size_t off, size_t count)
{
    (void)i, (void)row0, (void)row1, (void)off;
    sizes_t *s = ctx;
    size_t part = ceil_div(count, s->w);
    s->shard += part;
    s->slot = s->w * part > s->slot ? s->w * part : s->slot;
}

void gw_train_zero_grid_sizes(const gw_train_stage_t *st, int dp, int stage, size_t bucket_bytes,
                              double *optimizer, double *grads)
{
    size_t w = (size_t)dp;
    if (stage == 1) {
        size_t part = ceil_div(st->nparams, w);
        *optimizer = (double)part * sizeof(float);
        *grads = (double)(w * part) * sizeof(float);
        return;
    }
    sizes_t s = {w, 0, 0};
    units(st, bucket_bytes, size_unit, &s);
    *optimizer = (double)s.shard * sizeof(float);
    *grads = (double)(s.shard + s.slot) * sizeof(float);
}

static gw_train_zero_unit_t *unit_of(gw_train_zero_grid_t *z, int i, int row0)
{
    return &z->u[z->ubeg[i] + row0 / z->rows[i]];
}

static int sink_rows(gw_train_grad_sink_t *s, int i)
{
    return ((gw_train_zero_grid_t *)s)->rows[i];
}

static float *sink_slot(gw_train_grad_sink_t *s, int i, int row0)
{
    gw_train_zero_grid_t *z = (gw_train_zero_grid_t *)s;
    memset(z->slot, 0, (size_t)z->world * unit_of(z, i, row0)->part * sizeof(float));
    return z->slot;
}

/* A unit's gradient of one micro-batch is in the slot: sum it over the
 * group and add this rank's block into the shard. */
static gw_status_t sink_ready(gw_train_grad_sink_t *s, int i, int row0)
{
    gw_train_zero_grid_t *z = (gw_train_zero_grid_t *)s;
    const gw_train_zero_unit_t *u = unit_of(z, i, row0);
    float *mine = z->slot + (size_t)z->rank * u->part;
    gw_status_t st = gw_reduce_scatter(z->comm, z->slot, mine, u->part, GW_FLOAT32, GW_SUM);
    if (st != GW_OK) {
        fprintf(stderr,
                "gradwire-train: --zero 2: the data-parallel reduce-scatter of layer %d, rows "
                "%d-%d failed: %s\n",
                z->st->lo + i, u->row0, u->row1 - 1, gw_status_str(st));
        return st;
    }
    float *g = z->grad_shard + u->soff;
    for (size_t k = 0; k < u->part; k++)
        g[k] += mine[k];
    return GW_OK;
}

static void plan_unit(void *ctx, int i, int row0, int row1, size_t off, size_t count)
{
    gw_train_zero_grid_t *z = ctx;
    gw_train_zero_unit_t *u = &z->u[z->nu];
    if (row0 == 0) {
        z->ubeg[i] = z->nu;
        z->rows[i] = row1 - row0;
    }
    u->layer = i;
    u->row0 = row0;
    u->row1 = row1;
    u->off = off;
    u->nw = (size_t)(row1 - row0) * (size_t)z->st->L[i].lin;
    u->count = count;
    u->part = ceil_div(count, (size_t)z->world);
    u->soff = z->shard;
    z->shard += u->part;
    z->slot_len =
        (size_t)z->world * u->part > z->slot_len ? (size_t)z->world * u->part : z->slot_len;
    z->nu++;
}

static gw_status_t init_stage2(gw_train_zero_grid_t *z, gw_train_stage_t *st, size_t bucket_bytes)
{
    size_t w = (size_t)z->world;
    int n = units(st, bucket_bytes, NULL, NULL);
    z->u = calloc((size_t)n, sizeof(*z->u));
    z->counts = calloc((size_t)n * w, sizeof(size_t));
    z->displs = calloc((size_t)n * w, sizeof(size_t));
    if (!z->u || !z->counts || !z->displs)
        return GW_ERR_NO_MEMORY;
    units(st, bucket_bytes, plan_unit, z);
    for (int k = 0; k < z->nu; k++) {
        gw_train_zero_unit_t *u = &z->u[k];
        u->counts = z->counts + (size_t)k * w;
        u->displs = z->displs + (size_t)k * w;
        gw_train_zero_blocks(u->count, u->part, w, u->counts, u->displs);
    }
    z->vlen = z->shard;
    z->velocity = calloc(z->shard, sizeof(float));
    z->grad_shard = calloc(z->shard, sizeof(float));
    z->slot = malloc(z->slot_len * sizeof(float));
    if (!z->velocity || !z->grad_shard || !z->slot)
        return GW_ERR_NO_MEMORY;
    /* The whole gradient array is not kept: backward hands each unit to
     * the sink. */
    free(st->grads);
    st->grads = NULL;
    z->sink.rows = sink_rows;
    z->sink.slot = sink_slot;
    z->sink.ready = sink_ready;
    st->sink = &z->sink;
    return GW_OK;
}

static gw_status_t init_stage1(gw_train_zero_grid_t *z, gw_train_stage_t *st)
{
    size_t w = (size_t)z->world;
    z->n = st->nparams;
    z->part = ceil_div(z->n, w);
    z->vlen = z->part;
    z->counts = calloc(w, sizeof(size_t));
    z->displs = calloc(w, sizeof(size_t));
    z->velocity = calloc(z->part, sizeof(float));
    float *g = realloc(st->grads, w * z->part * sizeof(float)); /* n >= 1: a stage has layers */
    if (g)
        st->grads = g;
    if (!z->counts || !z->displs || !z->velocity || !g)
        return GW_ERR_NO_MEMORY;
    memset(st->grads + z->n, 0, (w * z->part - z->n) * sizeof(float));
    gw_train_zero_blocks(z->n, z->part, w, z->counts, z->displs);
    return GW_OK;
}

gw_status_t gw_train_zero_grid_init(gw_train_zero_grid_t *z, gw_comm_t *comm, gw_train_stage_t *st,
                                    int stage, size_t bucket_bytes)
{
    memset(z, 0, sizeof(*z));
    z->comm = comm;
    z->st = st;
    z->stage = stage;
    z->rank = gw_comm_rank(comm);
    z->world = gw_comm_size(comm);
    gw_status_t s = stage == 2 ? init_stage2(z, st, bucket_bytes) : init_stage1(z, st);
    if (s != GW_OK) {
        fprintf(stderr, "gradwire-train: out of memory for the --zero shards\n");
        gw_train_zero_grid_free(z);
        return s;
    }
    /* The whole momentum is not kept: our blocks replace it. */
    free(st->velocity);
    st->velocity = NULL;
    return GW_OK;
}

void gw_train_zero_grid_free(gw_train_zero_grid_t *z)
{
    if (!z)
        return;
    if (z->st && z->st->sink == &z->sink)
        z->st->sink = NULL;
    free(z->u);
    free(z->counts);
    free(z->displs);
    free(z->velocity);
    free(z->grad_shard);
    free(z->slot);
    memset(z, 0, sizeof(*z));
}

/* The update of [lo, hi) of span [off, off + len) of the stage's arrays;
 * g and v are indexed from lo. */
static void update_span(gw_train_stage_t *st, size_t off, size_t len, float mu, float d, float lr,
                        size_t lo, size_t hi, const float *g, float *v)
{
    size_t a = off > lo ? off : lo, e = off + len < hi ? off + len : hi;
    if (a < e)
        gw_train_sgd_update(st->params + a, v + (a - lo), g + (a - lo), e - a, mu, d, lr);
}

/* This rank's block [lo, hi) of the stage's arrays, with its gradient g
 * and momentum v (indexed from lo): the update of every layer's part of it. */
static void update_block(gw_train_stage_t *st, float mu, float wd, float lr, size_t lo, size_t hi,
                         const float *g, float *v)
{
    for (int i = 0; i < st->nl; i++) {
        const gw_train_tp_layer_t *L = &st->L[i];
        update_span(st, L->w_off, L->nw, mu, wd, lr, lo, hi, g, v);
        update_span(st, L->b_off, L->nb, mu, 0.0f, lr, lo, hi, g, v);
    }
}

static gw_status_t allgather_fail(gw_status_t s)
{
    fprintf(stderr, "gradwire-train: --zero: the data-parallel allgather failed: %s\n",
            gw_status_str(s));
    return s;
}

static gw_status_t step_stage2(gw_train_zero_grid_t *z, gw_train_stage_t *st, float mu, float wd,
                               float lr)
{
    for (int k = 0; k < z->nu; k++) {
        const gw_train_zero_unit_t *u = &z->u[k];
        size_t lo = u->off + u->displs[z->rank], hi = lo + u->counts[z->rank];
        update_block(st, mu, wd, lr, lo, hi, z->grad_shard + u->soff, z->velocity + u->soff);
        gw_status_t s = gw_allgatherv(z->comm, st->params + lo, st->params + u->off,
                                      u->counts[z->rank], u->counts, u->displs, GW_FLOAT32);
        if (s != GW_OK)
            return allgather_fail(s);
    }
    memset(z->grad_shard, 0, z->shard * sizeof(float));
    return GW_OK;
}

gw_status_t gw_train_zero_grid_step(gw_train_zero_grid_t *z, gw_train_stage_t *st, float mu,
                                    float wd, float lr)
{
    if (z->stage == 2)
        return step_stage2(z, st, mu, wd, lr);
    float *mine = st->grads + (size_t)z->rank * z->part;
    gw_status_t s = gw_reduce_scatter(z->comm, st->grads, mine, z->part, GW_FLOAT32, GW_SUM);
    if (s != GW_OK) {
        fprintf(stderr, "gradwire-train: --zero: the data-parallel reduce-scatter failed: %s\n",
                gw_status_str(s));
        return s;
    }
    size_t lo = z->displs[z->rank], hi = lo + z->counts[z->rank];
    update_block(st, mu, wd, lr, lo, hi, mine, z->velocity);
    s = gw_allgatherv(z->comm, st->params + lo, st->params, z->counts[z->rank], z->counts,
                      z->displs, GW_FLOAT32);
    return s != GW_OK ? allgather_fail(s) : GW_OK;
}
