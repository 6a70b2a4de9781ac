/*
 * model_tensor_parallel.c - one pipeline stage's layers of the MLP, each
 * kept whole ('F') or split over the stage's tensor-parallel group.
 *
 * A column-parallel layer ('C', out x in) keeps rows [r * out/tp, (r+1) *
 * out/tp) of W and the same slice of b: from the whole input it computes
 * its slice of the output units, and the ReLU is local. The row-parallel
 * layer after it ('R') keeps columns [r * in/tp, ...) of W, exactly the
 * input units the column-parallel layer produced here: X_r W_r^T is this
 * rank's share of the product, an allreduce over the group sums the
 * shares, and the bias (whole, on every rank) is added after the sum, so
 * every rank of the group holds the same full output and, on the last
 * stage, computes the same softmax and loss. Backward mirrors it: the
 * row-parallel layer's output gradient is the same everywhere, its input
 * gradient dZ W_r is this rank's slice and needs no communication; the
 * column-parallel layer's input gradient dZ_r W_r is a share of a sum,
 * allreduced (Megatron's "g" operator) unless the stage's input needs no
 * gradient (the first stage). Whole layers and row-parallel biases have
 * the same gradient on every rank of the group, so the data-parallel
 * allreduce is the only reduction they need.
 *
 * The weights are drawn from the generator in the order gw_train_mlp_init
 * draws the whole model's, each rank keeping its block, so a split run
 * starts from the unsplit model's weights and the generator (which then
 * shuffles the data) is in the same state.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"
#include "model_parallel.h"

void gw_train_stage_layout(gw_train_stage_t *st, const gw_train_grid_t *g, int pp_rank,
                           const int *sizes, int nlayers)
{
    st->lo = g->lo[pp_rank];
    st->hi = g->lo[pp_rank + 1];
    st->nl = st->hi - st->lo;
    st->tp = g->tp;
    st->tp_rank = g->tp_rank;
    size_t off = 0;
    st->width[0] = sizes[st->lo];
    for (int i = 0; i < st->nl; i++) {
        int l = st->lo + i;
        gw_train_tp_layer_t *L = &st->L[i];
        memset(L, 0, sizeof(*L));
        L->kind = gw_train_tp_kind(l, st->lo, st->hi, g->tp);
        L->in = L->lin = sizes[l];
        L->out = L->lout = sizes[l + 1];
        L->relu = l + 1 < nlayers;
        if (L->kind == 'C') {
            L->lout = L->out / g->tp;
            L->first_row = g->tp_rank * L->lout;
        } else if (L->kind == 'R') {
            L->lin = L->in / g->tp;
            L->first_col = g->tp_rank * L->lin;
        }
        L->nw = (size_t)L->lin * (size_t)L->lout;
        L->nb = L->kind == 'C' ? (size_t)L->lout : (size_t)L->out;
        L->w_off = off;
        off += L->nw;
        L->b_off = off;
        off += L->nb;
        /* A row-parallel layer's input is the column-parallel slice. */
        st->width[i] = L->kind == 'R' ? L->lin : L->in;
        st->width[i + 1] = L->kind == 'C' ? L->lout : L->out;
    }
    st->nparams = off;
}

void gw_train_stage_mem(const gw_train_grid_t *g, int pp_rank, const int *sizes, int nlayers,
                        size_t cap, gw_train_mem_t *m)
{
    gw_train_stage_t st;
    gw_train_stage_layout(&st, g, pp_rank, sizes, nlayers);
    m->params = m->grads = m->optimizer = (double)st.nparams * sizeof(float);
    double act = 0;
    for (int i = 0; i <= st.nl; i++)
        act += 2.0 * (double)cap * st.width[i] * sizeof(float);
    m->activations = act;
}

void gw_train_stage_free(gw_train_stage_t *st)
{
    free(st->params);
    free(st->grads);
    free(st->velocity);
    for (int i = 0; i <= GW_TRAIN_MAX_LAYERS; i++) {
        free(st->act[i]);
        free(st->delta[i]);
    }
    memset(st, 0, sizeof(*st));
}

gw_status_t gw_train_stage_init(gw_train_stage_t *st, const gw_train_grid_t *g, const int *sizes,
                                int nlayers, size_t cap, gw_train_rng_t *rng)
{
    memset(st, 0, sizeof(*st));
    gw_train_stage_layout(st, g, g->pp_rank, sizes, nlayers);
    st->cap = cap;
    st->tp_comm = g->tp_comm;
    st->params = calloc(st->nparams, sizeof(float));
    st->grads = calloc(st->nparams, sizeof(float));
    st->velocity = calloc(st->nparams, sizeof(float));
    int ok = st->params && st->grads && st->velocity;
    for (int i = 0; i <= st->nl && ok; i++) {
        st->act[i] = malloc(cap * (size_t)st->width[i] * sizeof(float));
        st->delta[i] = malloc(cap * (size_t)st->width[i] * sizeof(float));
        ok = st->act[i] && st->delta[i];
    }
    if (!ok) {
        fprintf(stderr, "gradwire-train: out of memory for a stage of %zu parameters\n",
                st->nparams);
        gw_train_stage_free(st);
        return GW_ERR_NO_MEMORY;
    }
    /* The whole model's draws, in gw_train_mlp_init's order; keep ours. */
    for (int l = 0; l < nlayers; l++) {
        float sd = (float)sqrt(2.0 / sizes[l]);
        int in = sizes[l], out = sizes[l + 1];
        const gw_train_tp_layer_t *L = l >= st->lo && l < st->hi ? &st->L[l - st->lo] : NULL;
        for (int r = 0; r < out; r++)
            for (int c = 0; c < in; c++) {
                float w = sd * (float)gw_train_rng_normal(rng);
                if (!L || r < L->first_row || r >= L->first_row + L->lout || c < L->first_col ||
                    c >= L->first_col + L->lin)
                    continue;
                st->params[L->w_off + (size_t)(r - L->first_row) * L->lin +
                           (size_t)(c - L->first_col)] = w;
            }
    }
    return GW_OK;
}

static gw_status_t tp_sum(gw_train_stage_t *st, float *buf, size_t count)
{
    if (st->tp == 1)
        return GW_OK;
    double t0 = gw_kit_now_s();
    gw_status_t s = gw_allreduce(st->tp_comm, buf, buf, count, GW_FLOAT32, GW_SUM);
    st->tp_comm_s += gw_kit_now_s() - t0;
    if (s != GW_OK)
        fprintf(stderr, "gradwire-train: tensor-parallel allreduce failed: %s (%s)\n",
                gw_status_str(s), gw_status_name(s));
    return s;
}

static void add_bias(float *z, const float *b, size_t B, int n)
{
    for (size_t i = 0; i < B; i++)
        for (int j = 0; j < n; j++)
            z[i * (size_t)n + j] += b[j];
}

gw_status_t gw_train_stage_forward(gw_train_stage_t *st, size_t r0, size_t B)
{
    for (int i = 0; i < st->nl; i++) {
        const gw_train_tp_layer_t *L = &st->L[i];
        int win = st->width[i], wout = st->width[i + 1];
        const float *x = st->act[i] + r0 * (size_t)win;
        float *z = st->act[i + 1] + r0 * (size_t)wout;
        const float *w = st->params + L->w_off, *b = st->params + L->b_off;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, L->lout, L->lin, 1.0f, x,
                    L->lin, w, L->lin, 0.0f, z, wout);
        if (L->kind == 'R') {
            /* The shares of the product, summed; then the bias, once. */
            gw_status_t s = tp_sum(st, z, B * (size_t)wout);
            if (s != GW_OK)
                return s;
        }
        add_bias(z, b, B, wout);
        if (L->relu)
            for (size_t k = 0; k < B * (size_t)wout; k++)
                z[k] = z[k] > 0.0f ? z[k] : 0.0f;
    }
    return GW_OK;
}

/* db += the column sums of dz (B rows of width w): the biases' gradient. */
static void add_bias_grad(float *db, const float *dz, size_t B, int w)
{
    for (size_t r = 0; r < B; r++)
        for (int j = 0; j < w; j++)
            db[j] += dz[r * (size_t)w + j];
}

/* Layer i's gradient handed to the sink a unit of rows at a time: rows
 * [a, b) of dW = dZ^T X into the unit's zeroed slot, and the biases'
 * after the last unit's rows. */
static gw_status_t sink_layer(gw_train_stage_t *st, int i, const float *dz, const float *x,
                              size_t B)
{
    const gw_train_tp_layer_t *L = &st->L[i];
    int win = st->width[i], wout = st->width[i + 1], step = st->sink->rows(st->sink, i);
    for (int a = 0; a < L->lout; a += step) {
        int b = a + step < L->lout ? a + step : L->lout;
        float *g = st->sink->slot(st->sink, i, a);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, b - a, L->lin, (int)B, 1.0f, dz + a,
                    wout, x, win, 1.0f, g, L->lin);
        if (b == L->lout)
            add_bias_grad(g + (size_t)(b - a) * (size_t)L->lin, dz, B, wout);
        gw_status_t s = st->sink->ready(st->sink, i, a);
        if (s != GW_OK)
            return s;
    }
    return GW_OK;
}

gw_status_t gw_train_stage_backward(gw_train_stage_t *st, size_t r0, size_t B, int need_input)
{
    for (int i = st->nl - 1; i >= 0; i--) {
        const gw_train_tp_layer_t *L = &st->L[i];
        int win = st->width[i], wout = st->width[i + 1];
        const float *dz = st->delta[i + 1] + r0 * (size_t)wout;
        const float *x = st->act[i] + r0 * (size_t)win;
        if (st->sink) {
            gw_status_t s = sink_layer(st, i, dz, x, B);
            if (s != GW_OK)
                return s;
        } else {
            /* Micro-batches add into the step's gradients. */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, L->lout, L->lin, (int)B, 1.0f, dz,
                        wout, x, win, 1.0f, st->grads + L->w_off, L->lin);
            add_bias_grad(st->grads + L->b_off, dz, B, wout);
        }
        if (i == 0 && !need_input)
            break;
        float *da = st->delta[i] + r0 * (size_t)win;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B, L->lin, L->lout, 1.0f, dz,
                    wout, st->params + L->w_off, L->lin, 0.0f, da, win);
        if (L->kind == 'C') {
            gw_status_t s = tp_sum(st, da, B * (size_t)win);
            if (s != GW_OK)
                return s;
        }
        /* The ReLU of the layer below (act holds post-ReLU values); the
         * stage's input is masked by the stage that produced it. */
        if (i > 0) {
            const float *a = st->act[i] + r0 * (size_t)win;
            for (size_t k = 0; k < B * (size_t)win; k++)
                if (a[k] <= 0.0f)
                    da[k] = 0.0f;
        }
    }
    return GW_OK;
}

void gw_train_stage_scatter_full(const gw_train_stage_t *st, const float *local, const int *sizes,
                                 float *full, int replicas)
{
    size_t off = 0;
    for (int l = 0; l < st->lo; l++)
        off += (size_t)sizes[l] * (size_t)sizes[l + 1] + (size_t)sizes[l + 1];
    for (int i = 0; i < st->nl; i++) {
        const gw_train_tp_layer_t *L = &st->L[i];
        float *w = full + off, *b = full + off + (size_t)L->in * (size_t)L->out;
        if (L->kind != 'F' || replicas)
            for (int r = 0; r < L->lout; r++)
                for (int c = 0; c < L->lin; c++)
                    w[(size_t)(r + L->first_row) * L->in + (size_t)(c + L->first_col)] +=
                        local[L->w_off + (size_t)r * L->lin + (size_t)c];
        if (L->kind == 'C' || replicas)
            for (size_t j = 0; j < L->nb; j++)
                b[j + (size_t)L->first_row] += local[L->b_off + j];
        off += (size_t)L->in * (size_t)L->out + (size_t)L->out;
    }
}

void gw_train_stage_sgd(gw_train_stage_t *st, float mu, float wd, float lr)
{
    for (int i = 0; i < st->nl; i++) {
        const gw_train_tp_layer_t *L = &st->L[i];
        size_t spans[2][2] = {{L->w_off, L->nw}, {L->b_off, L->nb}};
        for (int k = 0; k < 2; k++) {
            float *w = st->params + spans[k][0], *v = st->velocity + spans[k][0];
            const float *g = st->grads + spans[k][0];
            float d = k == 0 ? wd : 0.0f;
            for (size_t j = 0; j < spans[k][1]; j++) {
                v[j] = mu * v[j] + (g[j] + d * w[j]);
                w[j] -= lr * v[j];
            }
        }
    }
}
