/*
 * pipeline_1f1b.c - one training step of the pipeline in the 1F1B order
 * (PipeDream-flush, as Megatron-LM schedules it; `--schedule 1f1b`).
 *
 * Stage s of K first runs min(K-s-1, M) forward passes (warm-up), then
 * alternates one forward and one backward pass (steady state), then runs
 * the backward passes left (cool-down). The bubble is GPipe's, (K-1)/(M+K-1),
 * but a micro-batch's backward pass starts as soon as the last stage has
 * its loss, so at most K-s micro-batches are in flight on stage s, not M
 * (this trainer still keeps a workspace for the whole local batch, so the
 * memory figure does not shrink). The gradients add up as in GPipe, so the
 * step is the same, up to the order of float additions.
 *
 * In the steady state a stage sends an activation forward and waits for a
 * gradient from the same neighbour, while that neighbour sends the gradient
 * and waits for the next activation. gw_send is synchronous, so two sends
 * would wait for each other; each such pair is one gw_sendrecv on both
 * sides instead (Megatron's send_forward_recv_backward and
 * send_backward_recv_forward), and the messages on each link alternate in
 * the same order at both ends.
 */
#include <string.h>

#include "kit.h"
#include "model_parallel.h"

typedef struct sched {
    gw_train_stage_t *st;
    const gw_train_grid_t *g;
    const int32_t *y;
    size_t mb, w0, wn;
    int first, last;
    float scale;
    double *loss_sum, idle;
    long *correct;
} sched_t;

static gw_status_t fail(const char *what, gw_status_t st)
{
    fprintf(stderr, "gradwire-train: 1F1B pipeline %s failed: %s (%s)\n", what, gw_status_str(st),
            gw_status_name(st));
    return st;
}

static float *in_act(sched_t *c, int m) { return c->st->act[0] + (size_t)m * c->mb * c->w0; }
static float *out_act(sched_t *c, int m)
{
    return c->st->act[c->st->nl] + (size_t)m * c->mb * c->wn;
}
static float *out_grad(sched_t *c, int m)
{
    return c->st->delta[c->st->nl] + (size_t)m * c->mb * c->wn;
}
static float *in_grad(sched_t *c, int m) { return c->st->delta[0] + (size_t)m * c->mb * c->w0; }

/* Time in every message call counts as idle. */
static gw_status_t xfer(sched_t *c, const float *send, size_t ns, int dst, float *recv, size_t nr,
                        int src)
{
    double t0 = gw_kit_now_s();
    gw_status_t st;
    if (send && recv)
        st = gw_sendrecv(c->g->pp_comm, send, ns, dst, recv, nr, src, GW_FLOAT32);
    else if (send)
        st = gw_send(c->g->pp_comm, send, ns, GW_FLOAT32, dst);
    else if (recv)
        st = gw_recv(c->g->pp_comm, recv, nr, GW_FLOAT32, src);
    else
        st = GW_OK;
    c->idle += gw_kit_now_s() - t0;
    return st == GW_OK ? GW_OK : fail("message", st);
}

static gw_status_t forward(sched_t *c, int m)
{
    gw_status_t st = gw_train_stage_forward(c->st, (size_t)m * c->mb, c->mb);
    if (st == GW_OK && c->last)
        gw_train_softmax_xent(out_act(c, m), out_grad(c, m), (int)c->wn, c->y + (size_t)m * c->mb,
                              c->mb, c->scale, c->loss_sum, c->correct);
    return st;
}

static gw_status_t backward(sched_t *c, int m)
{
    if (!c->last) {
        float *d = out_grad(c, m);
        const float *a = out_act(c, m);
        for (size_t k = 0; k < c->mb * c->wn; k++)
            if (a[k] <= 0.0f)
                d[k] = 0.0f;
    }
    return gw_train_stage_backward(c->st, (size_t)m * c->mb, c->mb, !c->first);
}

gw_status_t gw_train_pipe_step_1f1b(gw_train_stage_t *st, const gw_train_grid_t *g, const float *x,
                                    const int32_t *y, size_t local_b, int micro, float scale,
                                    double *loss_sum, long *correct, gw_train_pipe_stats_t *ps)
{
    int s = g->pp_rank, k = g->pp;
    sched_t c = {st,
                 g,
                 y,
                 local_b / (size_t)micro,
                 (size_t)st->width[0],
                 (size_t)st->width[st->nl],
                 s == 0,
                 s == k - 1,
                 scale,
                 loss_sum,
                 0,
                 correct};
    size_t nin = c.mb * c.w0, nout = c.mb * c.wn;
    int prev = s - 1, next = s + 1;
    int warm = k - s - 1 < micro ? k - s - 1 : micro;
    double t0 = gw_kit_now_s();
    gw_status_t rc;
    if (st->grads) /* with a sink, the sink's own */
        memset(st->grads, 0, st->nparams * sizeof(float));
    if (c.first)
        memcpy(st->act[0], x, local_b * c.w0 * sizeof(float));
    for (int m = 0; m < warm; m++) {
        if ((rc = xfer(&c, NULL, 0, 0, c.first ? NULL : in_act(&c, m), nin, prev)) ||
            (rc = forward(&c, m)) || (rc = xfer(&c, out_act(&c, m), nout, next, NULL, 0, 0)))
            return rc;
    }
    int steady = micro - warm;
    if (steady > 0 && (rc = xfer(&c, NULL, 0, 0, c.first ? NULL : in_act(&c, warm), nin, prev)))
        return rc;
    for (int i = 0; i < steady; i++) {
        int f = warm + i, b = i;
        if ((rc = forward(&c, f)))
            return rc;
        /* Our activation out, the gradient of micro-batch b back. */
        if (!c.last && (rc = xfer(&c, out_act(&c, f), nout, next, out_grad(&c, b), nout, next)))
            return rc;
        if ((rc = backward(&c, b)))
            return rc;
        /* Our input's gradient back, the next activation in (none after
         * the last steady step). */
        int more = i + 1 < steady;
        if (!c.first &&
            (rc = xfer(&c, in_grad(&c, b), nin, prev, more ? in_act(&c, f + 1) : NULL, nin, prev)))
            return rc;
    }
    for (int b = steady; b < micro; b++) {
        if ((rc = xfer(&c, NULL, 0, 0, c.last ? NULL : out_grad(&c, b), nout, next)) ||
            (rc = backward(&c, b)) ||
            (rc = xfer(&c, c.first ? NULL : in_grad(&c, b), nin, prev, NULL, 0, 0)))
            return rc;
    }
    double span = gw_kit_now_s() - t0;
    ps->span_s += span;
    ps->idle_s += c.idle;
    ps->busy_s += span - c.idle;
    return GW_OK;
}
