/*
 * pipeline_schedule.c - one training step of a pipeline of stages, GPipe's
 * schedule (Huang et al. 2019), and the forward-only pass that evaluates.
 *
 * The local batch is cut into M micro-batches of local_b / M rows. Stage s
 * runs the forward pass of micro-batch 0, sends its output to stage s+1
 * (gw_send), and goes on with micro-batch 1 while stage s+1 works on 0:
 * after the pipeline fills, all stages compute at once. When the last
 * stage has the loss of every micro-batch, the backward passes run the
 * other way, last micro-batch first, each stage sending its input's
 * gradient to the stage before. Gradients of the micro-batches add up in
 * the stage's gradient arrays, so the step's update is the same as with
 * the whole batch at once (up to the order of float additions).
 *
 * Every row slice has its own place in the stage's workspace (the
 * workspace holds the whole local batch), which is what GPipe's memory
 * cost is: all M micro-batches' activations are alive when backward
 * starts. With equal stages, each stage idles for K-1 micro-batch slots
 * of the M+K-1 slots of a forward (and as many of the backward) sweep:
 * the bubble fraction (K-1)/(M+K-1). The step measures the real figure
 * per rank: the time blocked in gw_send/gw_recv over the step's duration.
 *
 * Sends are blocking (a gw_send returns once the receiver has matched it),
 * which keeps the stage's tensor-parallel collectives from ever starting
 * while a message is pending (gradwire.h forbids that), and cannot
 * deadlock: in each sweep messages flow one way only, in micro-batch
 * order, and every stage posts its receives in that order.
 */
#include <string.h>

#include "kit.h"
#include "model_parallel.h"

static gw_status_t p2p_fail(const char *what, int peer, gw_status_t st)
{
    fprintf(stderr, "gradwire-train: pipeline %s stage %d failed: %s (%s)\n", what, peer,
            gw_status_str(st), gw_status_name(st));
    return st;
}

/* Blocking send or receive of rows to or from a neighbouring stage, its
 * time added to *idle. */
static gw_status_t pass(const gw_train_grid_t *g, int send, float *buf, size_t count, int peer,
                        double *idle)
{
    double t0 = gw_kit_now_s();
    gw_status_t st = send ? gw_send(g->pp_comm, buf, count, GW_FLOAT32, peer)
                          : gw_recv(g->pp_comm, buf, count, GW_FLOAT32, peer);
    *idle += gw_kit_now_s() - t0;
    return st == GW_OK ? GW_OK : p2p_fail(send ? "send to" : "receive from", peer, st);
}

static void relu_mask(float *d, const float *a, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (a[k] <= 0.0f)
            d[k] = 0.0f;
}

gw_status_t gw_train_pipe_step(gw_train_stage_t *st, const gw_train_grid_t *g, const float *x,
                               const int32_t *y, size_t local_b, int micro, float scale,
                               double *loss_sum, long *correct, gw_train_pipe_stats_t *ps)
{
    int s = g->pp_rank, first = s == 0, last = s == g->pp - 1;
    size_t mb = local_b / (size_t)micro;
    size_t w0 = (size_t)st->width[0], wn = (size_t)st->width[st->nl];
    double idle = 0, t0 = gw_kit_now_s();
    gw_status_t rc;
    if (st->grads) /* with a sink, the sink's own */
        memset(st->grads, 0, st->nparams * sizeof(float));
    if (first)
        memcpy(st->act[0], x, local_b * w0 * sizeof(float));
    for (int m = 0; m < micro; m++) {
        size_t r0 = (size_t)m * mb;
        if (!first && (rc = pass(g, 0, st->act[0] + r0 * w0, mb * w0, s - 1, &idle)) != GW_OK)
            return rc;
        if ((rc = gw_train_stage_forward(st, r0, mb)) != GW_OK)
            return rc;
        if (last)
            gw_train_softmax_xent(st->act[st->nl] + r0 * wn, st->delta[st->nl] + r0 * wn, (int)wn,
                                  y + r0, mb, scale, loss_sum, correct);
        else if ((rc = pass(g, 1, st->act[st->nl] + r0 * wn, mb * wn, s + 1, &idle)) != GW_OK)
            return rc;
    }
    for (int m = micro - 1; m >= 0; m--) {
        size_t r0 = (size_t)m * mb;
        if (!last) {
            /* The next stage sends dLoss/d(our output); our ReLU makes it
             * the gradient of our last layer's pre-activation. */
            if ((rc = pass(g, 0, st->delta[st->nl] + r0 * wn, mb * wn, s + 1, &idle)) != GW_OK)
                return rc;
            relu_mask(st->delta[st->nl] + r0 * wn, st->act[st->nl] + r0 * wn, mb * wn);
        }
        if ((rc = gw_train_stage_backward(st, r0, mb, !first)) != GW_OK)
            return rc;
        if (!first && (rc = pass(g, 1, st->delta[0] + r0 * w0, mb * w0, s - 1, &idle)) != GW_OK)
            return rc;
    }
    double span = gw_kit_now_s() - t0;
    ps->span_s += span;
    ps->idle_s += idle;
    ps->busy_s += span - idle;
    return GW_OK;
}

gw_status_t gw_train_pipe_evaluate(gw_train_stage_t *st, const gw_train_grid_t *g,
                                   const gw_train_dataset_t *d, double *loss_sum, long *correct)
{
    int s = g->pp_rank, first = s == 0, last = s == g->pp - 1;
    size_t w0 = (size_t)st->width[0], wn = (size_t)st->width[st->nl];
    double idle = 0;
    gw_status_t rc;
    for (size_t i = 0; i < d->n; i += st->cap) {
        size_t B = d->n - i < st->cap ? d->n - i : st->cap;
        if (first)
            memcpy(st->act[0], d->x + i * d->dim, B * w0 * sizeof(float));
        else if ((rc = pass(g, 0, st->act[0], B * w0, s - 1, &idle)) != GW_OK)
            return rc;
        if ((rc = gw_train_stage_forward(st, 0, B)) != GW_OK)
            return rc;
        if (last)
            gw_train_softmax_xent(st->act[st->nl], st->delta[st->nl], (int)wn, d->y + i, B, 1.0f,
                                  loss_sum, correct);
        else if ((rc = pass(g, 1, st->act[st->nl], B * wn, s + 1, &idle)) != GW_OK)
            return rc;
    }
    return GW_OK;
}
