/*
 * zero_grid.c - ZeRO-1 over the data-parallel axis of the hybrid grid
 * (--zero 1 with --tensor-parallel and/or --pipeline-parallel).
 *
 * In the grid (parallel_grid.c) the ranks of one data-parallel group hold
 * the same share of the model: the same pipeline stage, the same tensor
 * slice. Plain, they allreduce that share's gradient once per step and all
 * apply the same update to it (train_model_parallel.c). Here the share's
 * flat array of n parameters is cut into dp blocks of part = ceil(n / dp)
 * (the last ones shorter, or empty); the step's gradient is
 * reduce-scattered in place (the array grows by the padding, at most
 * dp - 1 zeros that nothing writes), each rank updates its block with its
 * block of the momentum (gw_train_sgd_update: weight decay on the weight
 * spans, not on the biases, as gw_train_stage_sgd), and an allgatherv puts
 * every block back into every rank's weights. The momentum a rank holds
 * falls from n to part floats.
 *
 * Stage 2 is not offered here: the pipeline accumulates each micro-batch's
 * gradient into the share's full array, so it cannot be handed out in
 * pieces during backward, and the full array stays (DeepSpeed does not
 * combine ZeRO-2 with pipeline parallelism either). There is no overlap
 * with backward: the reduction starts once the schedule's last backward
 * is done, as the plain grid's allreduce does.
 */
#include <stdlib.h>
#include <string.h>

#include "zero.h"

void gw_train_zero_grid_sizes(size_t n, int dp, double *optimizer, double *grad_padding)
{
    size_t part = (n + (size_t)dp - 1) / (size_t)dp;
    *optimizer = (double)part * sizeof(float);
    *grad_padding = (double)((size_t)dp * part - n) * sizeof(float);
}

gw_status_t gw_train_zero_grid_init(gw_train_zero_grid_t *z, gw_comm_t *comm, gw_train_stage_t *st)
{
    memset(z, 0, sizeof(*z));
    z->comm = comm;
    z->rank = gw_comm_rank(comm);
    z->world = gw_comm_size(comm);
    size_t w = (size_t)z->world;
    z->n = st->nparams;
    z->part = (z->n + w - 1) / w;
    z->counts = calloc(w, sizeof(size_t));
    z->displs = calloc(w, sizeof(size_t));
    z->velocity = calloc(z->part, sizeof(float));
    float *g = realloc(st->grads, w * z->part * sizeof(float)); /* n >= 1: a stage has layers */
    if (g)
        st->grads = g;
    if (!z->counts || !z->displs || !z->velocity || !g) {
        fprintf(stderr, "gradwire-train: out of memory for the --zero shards\n");
        gw_train_zero_grid_free(z);
        return GW_ERR_NO_MEMORY;
    }
    memset(st->grads + z->n, 0, (w * z->part - z->n) * sizeof(float));
    for (size_t r = 0; r < w; r++) {
        size_t lo = r * z->part < z->n ? r * z->part : z->n;
        z->displs[r] = lo;
        z->counts[r] = (lo + z->part < z->n ? lo + z->part : z->n) - lo;
    }
    /* The whole momentum is not kept: our block replaces it. */
    free(st->velocity);
    st->velocity = NULL;
    return GW_OK;
}

void gw_train_zero_grid_free(gw_train_zero_grid_t *z)
{
    if (!z)
        return;
    free(z->counts);
    free(z->displs);
    free(z->velocity);
    memset(z, 0, sizeof(*z));
}

/* The update of [lo, hi) of span [off, off + len) of the stage's arrays;
 * g and v are indexed from lo. */
static void update_span(gw_train_zero_grid_t *z, gw_train_stage_t *st, size_t off, size_t len,
                        float mu, float d, float lr, size_t lo, size_t hi, const float *g)
{
    size_t a = off > lo ? off : lo, e = off + len < hi ? off + len : hi;
    if (a < e)
        gw_train_sgd_update(st->params + a, z->velocity + (a - lo), g + (a - lo), e - a, mu, d, lr);
}

gw_status_t gw_train_zero_grid_step(gw_train_zero_grid_t *z, gw_train_stage_t *st, float mu,
                                    float wd, float lr)
{
    float *mine = st->grads + (size_t)z->rank * z->part;
    gw_status_t s = gw_reduce_scatter(z->comm, st->grads, mine, z->part, GW_FLOAT32, GW_SUM);
    if (s != GW_OK) {
        fprintf(stderr, "gradwire-train: --zero: the data-parallel reduce-scatter failed: %s\n",
                gw_status_str(s));
        return s;
    }
    size_t lo = z->displs[z->rank], hi = lo + z->counts[z->rank];
    for (int i = 0; i < st->nl; i++) {
        const gw_train_tp_layer_t *L = &st->L[i];
        update_span(z, st, L->w_off, L->nw, mu, wd, lr, lo, hi, mine);
        update_span(z, st, L->b_off, L->nb, mu, 0.0f, lr, lo, hi, mine);
    }
    s = gw_allgatherv(z->comm, st->params + lo, st->params, z->counts[z->rank], z->counts,
                      z->displs, GW_FLOAT32);
    if (s != GW_OK)
        fprintf(stderr, "gradwire-train: --zero: the data-parallel allgather failed: %s\n",
                gw_status_str(s));
    return s;
}
