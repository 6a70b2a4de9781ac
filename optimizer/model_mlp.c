/*
 * model_mlp.c - a multilayer perceptron with ReLU and softmax cross-entropy,
 * its matrix products done by OpenBLAS (cblas_sgemm).
 *
 * Activations are row-major B x n matrices (one sample per row), weights
 * out x in. Forward is Z = A W^T + b, then ReLU except on the last layer.
 * Backward walks the layers from last to first: dW = dZ^T A, db = column
 * sums of dZ, dA = dZ W, and dZ of the layer below is dA masked by where
 * its ReLU let the value through. Parameters sit in one flat array with
 * layer 0 first, so the gradients become final from the end of the array
 * towards its start; after each layer the caller's hook learns how far, and
 * the data-parallel trainer uses that to start allreducing finished buckets
 * while the lower layers are still being differentiated.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

static void free_workspace(gw_train_mlp_t *m)
{
    m->act[0] = NULL; /* the caller's input, not ours */
    for (int l = 1; l <= GW_TRAIN_MAX_LAYERS; l++) {
        free(m->act[l]);
        free(m->delta[l]);
        m->act[l] = m->delta[l] = NULL;
    }
}

void gw_train_mlp_free(gw_train_mlp_t *m)
{
    if (!m)
        return;
    free_workspace(m);
    free(m->params);
    free(m->grads);
    memset(m, 0, sizeof(*m));
}

gw_status_t gw_train_mlp_init(gw_train_mlp_t *m, const int *sizes, int nsizes, size_t cap,
                              gw_train_rng_t *rng)
{
    memset(m, 0, sizeof(*m));
    if (nsizes < 2 || nsizes > GW_TRAIN_MAX_LAYERS + 1 || cap == 0) {
        fprintf(stderr, "gradwire-train: a model needs 2..%d layer sizes, not %d\n",
                GW_TRAIN_MAX_LAYERS + 1, nsizes);
        return GW_ERR_INVALID_ARG;
    }
    m->nlayers = nsizes - 1;
    size_t off = 0;
    for (int i = 0; i < nsizes; i++) {
        if (sizes[i] <= 0) {
            fprintf(stderr, "gradwire-train: layer size %d is not positive\n", sizes[i]);
            return GW_ERR_INVALID_ARG;
        }
        m->sizes[i] = sizes[i];
    }
    for (int l = 0; l < m->nlayers; l++) {
        m->w_off[l] = off;
        off += (size_t)sizes[l] * (size_t)sizes[l + 1];
        m->b_off[l] = off;
        off += (size_t)sizes[l + 1];
    }
    m->nparams = off;
    m->cap = cap;
    m->params = calloc(off, sizeof(float));
    m->grads = calloc(off, sizeof(float));
    if (!m->params || !m->grads)
        goto err_free;
    /* act[0] is the caller's input; act[l] and delta[l] for l >= 1 are ours. */
    for (int l = 1; l <= m->nlayers; l++) {
        m->act[l] = malloc(cap * (size_t)sizes[l] * sizeof(float));
        m->delta[l] = malloc(cap * (size_t)sizes[l] * sizeof(float));
        if (!m->act[l] || !m->delta[l])
            goto err_free;
    }
    /* He initialisation for ReLU layers, zero biases; the same generator
     * state on every rank gives the same weights everywhere. */
    for (int l = 0; l < m->nlayers; l++) {
        float sd = (float)sqrt(2.0 / sizes[l]);
        size_t n = (size_t)sizes[l] * (size_t)sizes[l + 1];
        for (size_t i = 0; i < n; i++)
            m->params[m->w_off[l] + i] = sd * (float)gw_train_rng_normal(rng);
    }
    return GW_OK;

err_free:
    fprintf(stderr, "gradwire-train: out of memory for a model of %zu parameters\n", off);
    gw_train_mlp_free(m);
    return GW_ERR_NO_MEMORY;
}

void gw_train_mlp_forward(gw_train_mlp_t *m, const float *x, size_t B)
{
    m->act[0] = (float *)x;
    for (int l = 0; l < m->nlayers; l++) {
        int in = m->sizes[l], out = m->sizes[l + 1];
        float *z = m->act[l + 1];
        const float *b = m->params + m->b_off[l];
        for (size_t i = 0; i < B; i++)
            memcpy(z + i * (size_t)out, b, (size_t)out * sizeof(float));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, out, in, 1.0f, m->act[l], in,
                    m->params + m->w_off[l], in, 1.0f, z, out);
        if (l + 1 < m->nlayers)
            for (size_t i = 0; i < B * (size_t)out; i++)
                z[i] = z[i] > 0.0f ? z[i] : 0.0f;
    }
}

void gw_train_softmax_xent(const float *z, float *d, int k, const int32_t *y, size_t B, float scale,
                           double *loss_sum, long *correct)
{
    double loss = 0;
    long ok = 0;
    for (size_t i = 0; i < B; i++) {
        const float *zi = z + i * (size_t)k;
        float *di = d + i * (size_t)k;
        int arg = 0;
        float mx = zi[0];
        for (int j = 1; j < k; j++)
            if (zi[j] > mx) {
                mx = zi[j];
                arg = j;
            }
        /* Softmax with the maximum subtracted, so exp never overflows. */
        double sum = 0;
        for (int j = 0; j < k; j++) {
            di[j] = expf(zi[j] - mx);
            sum += di[j];
        }
        float inv = (float)(1.0 / sum);
        for (int j = 0; j < k; j++)
            di[j] *= inv;
        loss += -(double)(zi[y[i]] - mx) + log(sum);
        ok += arg == y[i];
        di[y[i]] -= 1.0f;
        for (int j = 0; j < k; j++)
            di[j] *= scale;
    }
    *loss_sum += loss;
    *correct += ok;
}

void gw_train_mlp_loss(gw_train_mlp_t *m, const int32_t *y, size_t B, float scale, double *loss_sum,
                       long *correct)
{
    gw_train_softmax_xent(m->act[m->nlayers], m->delta[m->nlayers], m->sizes[m->nlayers], y, B,
                          scale, loss_sum, correct);
}

void gw_train_mlp_backward_weights(gw_train_mlp_t *m, size_t B, int l, int row0, int row1,
                                   float *dw, float *db)
{
    int in = m->sizes[l], out = m->sizes[l + 1], rows = row1 - row0;
    const float *dz = m->delta[l + 1];
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, rows, in, (int)B, 1.0f, dz + row0, out,
                m->act[l], in, 0.0f, dw, in);
    if (!db)
        return;
    memset(db, 0, (size_t)out * sizeof(float));
    for (size_t i = 0; i < B; i++)
        for (int j = 0; j < out; j++)
            db[j] += dz[i * (size_t)out + j];
}

void gw_train_mlp_backward_input(gw_train_mlp_t *m, size_t B, int l)
{
    /* dA of the layer below, then its ReLU mask (act holds the post-ReLU
     * values: zero exactly where the unit was off). */
    int in = m->sizes[l], out = m->sizes[l + 1];
    float *da = m->delta[l];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B, in, out, 1.0f, m->delta[l + 1],
                out, m->params + m->w_off[l], in, 0.0f, da, in);
    const float *a = m->act[l];
    for (size_t i = 0; i < B * (size_t)in; i++)
        if (a[i] <= 0.0f)
            da[i] = 0.0f;
}

gw_status_t gw_train_mlp_backward(gw_train_mlp_t *m, size_t B, gw_train_grad_ready_fn ready,
                                  void *ctx)
{
    for (int l = m->nlayers - 1; l >= 0; l--) {
        gw_train_mlp_backward_weights(m, B, l, 0, m->sizes[l + 1], m->grads + m->w_off[l],
                                      m->grads + m->b_off[l]);
        /* Hand the finished layer to the caller before differentiating the
         * layer below, so its communication starts as early as it can. */
        if (ready) {
            gw_status_t st = ready(ctx, m->w_off[l]);
            if (st != GW_OK)
                return st;
        }
        if (l > 0)
            gw_train_mlp_backward_input(m, B, l);
    }
    return GW_OK;
}

void gw_train_mlp_evaluate(gw_train_mlp_t *m, const gw_train_dataset_t *d, double *loss_sum,
                           long *correct)
{
    for (size_t i = 0; i < d->n; i += m->cap) {
        size_t B = d->n - i < m->cap ? d->n - i : m->cap;
        gw_train_mlp_forward(m, d->x + i * d->dim, B);
        gw_train_mlp_loss(m, d->y + i, B, 1.0f, loss_sum, correct);
    }
}
