/*
 * buckets.c - gradient buckets, allreduced while backward is still running.
 *
 * The flat gradient array is cut into buckets of about bucket_bytes,
 * starting from its end: backward finishes the last layer first, so b[0]
 * (the tail of the array) is complete first, then b[1], and so on. After
 * each layer the model tells us how far the gradients are final; every
 * bucket lying entirely in that region is launched at once with
 * gw_iallreduce (or, with a codec, gw_iallreduce_compressed on the
 * bucket's own compression state), and the library's progress thread
 * encodes and sends it while this thread differentiates the next layer
 * down. Every rank has the same model and the same bucket plan, so every
 * rank launches the same buckets in the same order, which is what keeps the
 * collectives matched; the progress thread runs them in that order, and a
 * compressed call's result is bitwise what the blocking call gives, so
 * overlapping changes the time a step takes, never its result.
 *
 * Time accounting, per step:
 *  - `comm` is the time the progress thread was busy with our buckets (from
 *    a bucket's launch, or the previous bucket's completion if later, to its
 *    completion; completions are seen when a handle is polled between layers
 *    or waited for at the end). With a codec that includes encoding and
 *    decoding, which run on the progress thread too.
 *  - `codec` is the encode and decode time of the compressed calls, summed
 *    from the library's per-call statistics (encode_seconds +
 *    decode_seconds of each finished call, read once its handle has
 *    completed). With overlap it is wall time on the progress thread: a part
 *    of `comm` that may also overlap backward, and on a busy machine it
 *    includes time that thread waited for a core. It is not compute: the
 *    training thread's compute excludes only what ran on it.
 *  - `wait` is the time this thread sat in finish() with nothing else to
 *    do, i.e. the communication (and codec work) that backward did not
 *    hide. In the blocking mode (--no-overlap with a codec) the codec runs
 *    on this thread inside finish(): that part is counted as codec, not
 *    wait.
 */
#include <stdlib.h>
#include <string.h>

#include "kit.h"
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
            bk->b[i++] = (gw_train_bucket_t){
                .off = m->w_off[l], .count = out * in, .rows = out, .cols = in, .decay = 1};
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
    bk->params = m->params;
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

/* A bucket has completed with status st: account its time. */
static void note_done(gw_train_buckets_t *bk, gw_train_bucket_t *b, gw_status_t st)
{
    double now = gw_kit_now_s();
    double start = b->t_launch > bk->t_last_done ? b->t_launch : bk->t_last_done;
    bk->comm_s += now - start;
    bk->t_last_done = now;
    /* The state is the trainer's again: its statistics are this call's. */
    if (bk->codec && st == GW_OK)
        bk->codec_s += gw_train_codec_last_seconds(bk->codec, (int)(b - bk->b));
    if (st != GW_OK && bk->status == GW_OK)
        bk->status = st;
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
        note_done(bk, b, st);
    }
}

/* DGC: grad += wd * w on a weight bucket, so the decay goes through the
 * codec's momentum (v = m v + g + wd w) as it does through the optimizer's
 * in dense momentum SGD; every rank adds the same term, so the average
 * carries it once. */
static void add_decay(gw_train_buckets_t *bk, const gw_train_bucket_t *b)
{
    float *g = bk->grads + b->off;
    const float *w = bk->params + b->off;
    float wd = bk->grad_decay;
    for (size_t i = 0; i < b->count; i++)
        g[i] += wd * w[i];
}

static gw_status_t launch(gw_train_buckets_t *bk, gw_train_bucket_t *b)
{
    float *p = bk->grads + b->off;
    int idx = (int)(b - bk->b);
    b->launched = 1;
    if (bk->grad_decay != 0 && b->decay)
        add_decay(bk, b);
    double now = gw_kit_now_s();
    b->t_launch = now;
    if (bk->t_first_launch < 0) {
        bk->t_first_launch = now;
        bk->t_last_done = now;
    }
    if (bk->codec && bk->blocking) {
        gw_status_t st = gw_train_codec_allreduce(bk->codec, idx, p, b->count);
        note_done(bk, b, st);
        return st;
    }
    if (bk->codec)
        return gw_train_codec_start(bk->codec, idx, p, b->count, &b->handle);
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
    double t0 = gw_kit_now_s(), codec0 = bk->codec_s;
    while (bk->next < bk->nb) {
        st = launch(bk, &bk->b[bk->next]);
        bk->next++;
        if (st != GW_OK && bk->status == GW_OK)
            bk->status = st;
    }
    /* Blocking calls ran the codec on this thread just now: not waiting. */
    double own_codec = bk->blocking ? bk->codec_s - codec0 : 0;
    for (int i = 0; i < bk->nb; i++) {
        gw_train_bucket_t *b = &bk->b[i];
        if (!b->handle)
            continue;
        st = gw_wait(b->handle);
        b->handle = NULL;
        note_done(bk, b, st);
    }
    bk->wait_s += gw_kit_now_s() - t0 - own_codec;
reset:
    st = bk->status;
    for (int i = 0; i < bk->nb; i++)
        bk->b[i].launched = 0;
    bk->next = 0;
    bk->t_first_launch = -1;
    return st;
}
