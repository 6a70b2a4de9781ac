/*
 * buckets.c - gradient buckets, allreduced while backward is still running.
 *
 * The flat gradient array is cut into buckets of about bucket_bytes,
 * starting from its end: backward finishes the last layer first, so b[0]
 * (the tail of the array) is complete first, then b[1], and so on. After
 * each layer the model tells us how far the gradients are final; every
 * bucket lying entirely in that region is launched at once with
 * gw_iallreduce, and the library's progress thread sends it while this
 * thread differentiates the next layer down. Every rank has the same model
 * and the same bucket plan, so every rank launches the same buckets in the
 * same order, which is what keeps the collectives matched.
 *
 * Time accounting, per step: `comm` is the time the progress thread was
 * busy with our buckets (from a bucket's launch, or the previous bucket's
 * completion if later, to its completion; completions are seen when a
 * handle is polled between layers or waited for at the end); `wait` is the
 * time this thread sat in finish() with nothing else to do, i.e. the
 * communication that backward did not hide; `codec` is what compression
 * took, when a codec is in use.
 */
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

gw_status_t gw_train_buckets_init(gw_train_buckets_t *bk, gw_comm_t *comm, gw_train_mlp_t *m,
                                  size_t bucket_bytes, int overlap, int per_tensor)
{
    memset(bk, 0, sizeof(*bk));
    size_t per = bucket_bytes / sizeof(float);
    if (per == 0)
        per = 1;
    int nb = per_tensor ? 2 * m->nlayers : (int)((m->nparams + per - 1) / per);
    bk->b = calloc((size_t)nb, sizeof(*bk->b));
    if (!bk->b) {
        fprintf(stderr, "gradwire-train: out of memory for %d buckets\n", nb);
        return GW_ERR_NO_MEMORY;
    }
    if (per_tensor) {
        /* Layer by layer from the last: its biases sit after its weights. */
        for (int l = m->nlayers - 1, i = 0; l >= 0; l--) {
            size_t in = (size_t)m->sizes[l], out = (size_t)m->sizes[l + 1];
            bk->b[i++] =
                (gw_train_bucket_t){.off = m->b_off[l], .count = out, .rows = out, .cols = 1};
            bk->b[i++] =
                (gw_train_bucket_t){.off = m->w_off[l], .count = out * in, .rows = out, .cols = in};
        }
    } else {
        size_t end = m->nparams;
        for (int i = 0; i < nb; i++) {
            size_t start = end > per ? end - per : 0;
            bk->b[i] = (gw_train_bucket_t){
                .off = start, .count = end - start, .rows = end - start, .cols = 1};
            end = start;
        }
    }
    bk->nb = nb;
    bk->comm = comm;
    bk->grads = m->grads;
    bk->overlap = overlap;
    bk->t_first_launch = -1;
    return GW_OK;
}

void gw_train_buckets_free(gw_train_buckets_t *bk)
{
    if (!bk || !bk->b)
        return;
    /* A failed step can leave handles in flight; each must be completed. */
    for (int i = 0; i < bk->nb; i++)
        if (bk->b[i].handle)
            gw_wait(bk->b[i].handle);
    free(bk->b);
    bk->b = NULL;
}

static void note_done(gw_train_buckets_t *bk, double launched)
{
    double now = gw_train_now();
    double start = launched > bk->t_last_done ? launched : bk->t_last_done;
    bk->comm_s += now - start;
    bk->t_last_done = now;
}

/* Collect the buckets that have finished, in launch order. */
static void poll_done(gw_train_buckets_t *bk)
{
    for (int i = 0; i < bk->next; i++) {
        gw_train_bucket_t *b = &bk->b[i];
        if (!b->handle)
            continue;
        int done = 0;
        gw_status_t st = gw_test(b->handle, &done);
        if (!done) {
            if (st != GW_OK && bk->status == GW_OK)
                bk->status = st;
            return; /* they finish in order: later ones are not done either */
        }
        b->handle = NULL;
        note_done(bk, b->t_launch);
        if (st != GW_OK && bk->status == GW_OK)
            bk->status = st;
    }
}

static gw_status_t launch(gw_train_buckets_t *bk, gw_train_bucket_t *b)
{
    float *p = bk->grads + b->off;
    b->launched = 1;
    double now = gw_train_now();
    b->t_launch = now;
    if (bk->t_first_launch < 0) {
        bk->t_first_launch = now;
        bk->t_last_done = now;
    }
    if (bk->codec) {
        /* Compressed allreduce is blocking: it runs here, between layers,
         * and its time is communication (or codec), not compute. */
        double codec0 = bk->codec_s;
        gw_status_t st =
            gw_train_codec_allreduce(bk->codec, (int)(b - bk->b), p, b->count, &bk->codec_s);
        note_done(bk, now);
        bk->inline_s += gw_train_now() - now - (bk->codec_s - codec0);
        return st;
    }
    return gw_iallreduce(bk->comm, p, p, b->count, GW_FLOAT32, GW_SUM, &b->handle);
}

gw_status_t gw_train_buckets_ready(void *ctx, size_t from)
{
    gw_train_buckets_t *bk = ctx;
    if (!bk->comm || !bk->overlap)
        return GW_OK;
    while (bk->next < bk->nb && bk->b[bk->next].off >= from) {
        gw_status_t st = launch(bk, &bk->b[bk->next]);
        bk->next++;
        if (st != GW_OK)
            return bk->status = st;
    }
    poll_done(bk);
    return bk->status;
}

gw_status_t gw_train_buckets_finish(gw_train_buckets_t *bk)
{
    gw_status_t st = GW_OK;
    if (!bk->comm)
        goto reset;
    while (bk->next < bk->nb) {
        st = launch(bk, &bk->b[bk->next]);
        bk->next++;
        if (st != GW_OK && bk->status == GW_OK)
            bk->status = st;
    }
    double t0 = gw_train_now();
    for (int i = 0; i < bk->nb; i++) {
        gw_train_bucket_t *b = &bk->b[i];
        if (!b->handle)
            continue;
        st = gw_wait(b->handle);
        b->handle = NULL;
        note_done(bk, b->t_launch);
        if (st != GW_OK && bk->status == GW_OK)
            bk->status = st;
    }
    bk->wait_s += gw_train_now() - t0;
reset:
    st = bk->status;
    for (int i = 0; i < bk->nb; i++)
        bk->b[i].launched = 0;
    bk->next = 0;
    bk->t_first_launch = -1;
    return st;
}
