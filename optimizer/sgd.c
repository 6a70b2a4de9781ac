/*
 * sgd.c - stochastic gradient descent with momentum and weight decay, and
 * the learning-rate schedule for large-batch data-parallel training.
 *
 * The update is PyTorch's: v = mu v + (g + wd w); w -= lr v, with weight
 * decay on the weight matrices only (decaying biases only hurts). The
 * schedule follows Goyal et al., "Accurate, Large Minibatch SGD": the
 * linear scaling rule multiplies the learning rate by global batch /
 * reference batch, and a linear warm-up climbs from the unscaled rate to
 * the scaled one, because the scaled rate is too large while the weights
 * are still random. After warm-up comes the decay (cosine by default).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

gw_status_t gw_train_sgd_init(gw_train_sgd_t *s, const gw_train_mlp_t *m, double momentum,
                              double weight_decay)
{
    memset(s, 0, sizeof(*s));
    s->velocity = calloc(m->nparams, sizeof(float));
    if (!s->velocity) {
        fprintf(stderr, "gradwire-train: out of memory for the optimizer state\n");
        return GW_ERR_NO_MEMORY;
    }
    s->nparams = m->nparams;
    s->momentum = (float)momentum;
    s->weight_decay = (float)weight_decay;
    return GW_OK;
}

void gw_train_sgd_free(gw_train_sgd_t *s)
{
    if (!s)
        return;
    free(s->velocity);
    s->velocity = NULL;
}

void gw_train_sgd_update(float *w, float *v, const float *g, size_t n, float mu, float wd, float lr)
{
    for (size_t i = 0; i < n; i++) {
        v[i] = mu * v[i] + (g[i] + wd * w[i]);
        w[i] -= lr * v[i];
    }
}

void gw_train_sgd_step_range(gw_train_sgd_t *s, gw_train_mlp_t *m, const float *grad, size_t lo,
                             size_t hi, float lr)
{
    for (int l = 0; l < m->nlayers; l++) {
        size_t nw = (size_t)m->sizes[l] * (size_t)m->sizes[l + 1];
        /* Weights [w, w + nw) with decay, then biases [b, b + nb) without,
         * each clipped to [lo, hi). */
        size_t spans[2][3] = {{m->w_off[l], nw, 1}, {m->b_off[l], (size_t)m->sizes[l + 1], 0}};
        for (int k = 0; k < 2; k++) {
            size_t a = spans[k][0] > lo ? spans[k][0] : lo;
            size_t e = spans[k][0] + spans[k][1] < hi ? spans[k][0] + spans[k][1] : hi;
            if (a < e)
                gw_train_sgd_update(m->params + a, s->velocity + a, grad + a, e - a, s->momentum,
                                    spans[k][2] ? s->weight_decay : 0.0f, lr);
        }
    }
}

void gw_train_sgd_step(gw_train_sgd_t *s, gw_train_mlp_t *m, const float *grad, float lr)
{
    gw_train_sgd_step_range(s, m, grad, 0, m->nparams, lr);
}

double gw_train_lr_at(const gw_train_opts_t *o, long step, long steps_per_epoch)
{
    double peak = o->lr * (double)o->batch / (double)o->lr_ref_batch;
    long total = (long)o->epochs * steps_per_epoch;
    if (o->max_steps > 0 && o->max_steps < total)
        total = o->max_steps;
    long warm = (long)llround(o->warmup_epochs * (double)steps_per_epoch);
    if (warm > total)
        warm = total;
    /* Warm-up climbs to a scaled-up rate; a batch below the reference
     * scales the rate down, and then there is nothing to climb. */
    double start = o->lr < peak ? o->lr : peak;
    if (step < warm)
        return start + (peak - start) * (double)step / (double)warm;
    double t = total > warm ? (double)(step - warm) / (double)(total - warm) : 0.0;
    switch (o->decay) {
    case GW_TRAIN_DECAY_COSINE:
        return peak * 0.5 * (1.0 + cos(M_PI * t));
    case GW_TRAIN_DECAY_STEP:
        return peak * (t < 0.5 ? 1.0 : t < 0.75 ? 0.1 : 0.01);
    case GW_TRAIN_DECAY_NONE:
    default:
        return peak;
    }
}
