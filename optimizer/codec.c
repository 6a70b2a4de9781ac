/*
 * codec.c - gradient compression for the synchronous trainer, through the
 * library's compression API (gw_iallreduce_compressed and, behind
 * --no-overlap, the blocking gw_allreduce_compressed).
 *
 * With a codec, every tensor (each layer's weight matrix and bias vector)
 * is its own bucket with its own gw_compress_state_t, so PowerSGD sees the
 * matrix shapes and error feedback keeps one residual per tensor. Warm-up
 * is the library's: the first warmup_steps calls on a state are dense, and
 * since every state is called once per step, --codec-warmup-epochs E means
 * E epochs of dense steps. Tensors too small to be worth compressing (the
 * biases) go dense inside the library too.
 *
 * The compressed call averages (GW_AVG), so with a codec the trainer scales
 * its loss by 1 / local batch instead of 1 / global batch. Each bucket's
 * call is queued on the communicator's progress thread as soon as backward
 * has produced the bucket (buckets.c), so compression and its exchanges
 * overlap the rest of backward like dense buckets do. Every state is in one
 * call at a time: a bucket is launched once per step and waited for before
 * the update, and its state is read (statistics, checkpoints) only then.
 *
 * With --dgc-momentum m the top-k states apply Deep Gradient Compression's
 * momentum correction: the codec keeps the velocity and returns the
 * averaged momentum-SGD update, so the trainer applies it with plain SGD.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

struct gw_train_codec {
    gw_comm_t *comm;
    uint32_t warmup_steps;
    int n;
    gw_compress_state_t **st;
};

void gw_train_codec_destroy(gw_train_codec_t *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        gw_compress_state_destroy(c->st[i]);
    free(c->st);
    free(c);
}

uint32_t gw_train_codec_warmup_steps(const gw_train_opts_t *o, long steps_per_epoch)
{
    double warm = o->codec_warmup_epochs * (double)steps_per_epoch;
    return warm > 4e9 ? 4000000000u : (uint32_t)llround(warm);
}

uint32_t gw_train_codec_warmup(const gw_train_codec_t *c) { return c->warmup_steps; }

gw_status_t gw_train_codec_create(gw_comm_t *comm, const gw_train_opts_t *o,
                                  const gw_train_buckets_t *bk, uint32_t warmup_steps,
                                  gw_train_codec_t **out)
{
    gw_compress_config_t cfg;
    gw_compress_config_init(&cfg);
    gw_status_t st = gw_codec_parse(o->codec, &cfg.codec);
    if (st != GW_OK) {
        fprintf(stderr,
                "gradwire-train: unknown --codec \"%s\" (none, fp16, bf16, int8, sign, topk, "
                "powersgd)\n",
                o->codec);
        return st;
    }
    cfg.error_feedback = 1;
    cfg.warmup_steps = warmup_steps;
    cfg.seed = o->seed;
    if (o->dgc_momentum > 0) {
        if (cfg.codec != GW_CODEC_TOPK) {
            fprintf(stderr, "gradwire-train: --dgc-momentum needs --codec topk, not %s\n",
                    o->codec);
            return GW_ERR_INVALID_ARG;
        }
        cfg.momentum = o->dgc_momentum;
    }
    if (o->codec_param > 0) {
        if (cfg.codec == GW_CODEC_TOPK) {
            cfg.topk_ratio = o->codec_param;
        } else if (cfg.codec == GW_CODEC_POWERSGD) {
            cfg.powersgd_rank = (int)o->codec_param;
        } else if (cfg.codec == GW_CODEC_INT8 || cfg.codec == GW_CODEC_SIGN) {
            cfg.bucket_elements = (size_t)o->codec_param;
        } else {
            fprintf(stderr, "gradwire-train: --codec %s takes no --codec-param\n", o->codec);
            return GW_ERR_INVALID_ARG;
        }
    }
    gw_train_codec_t *c = calloc(1, sizeof(*c));
    if (!c || !(c->st = calloc((size_t)bk->nb, sizeof(*c->st)))) {
        free(c);
        fprintf(stderr, "gradwire-train: out of memory for the codec states\n");
        return GW_ERR_NO_MEMORY;
    }
    c->comm = comm;
    c->warmup_steps = warmup_steps;
    for (int i = 0; i < bk->nb; i++, c->n++) {
        st = gw_compress_state_create(&cfg, bk->b[i].rows, bk->b[i].cols, &c->st[i]);
        if (st != GW_OK) {
            fprintf(stderr, "gradwire-train: cannot set up codec %s for a %zu x %zu tensor: %s\n",
                    o->codec, bk->b[i].rows, bk->b[i].cols, gw_status_str(st));
            gw_train_codec_destroy(c);
            return st;
        }
    }
    *out = c;
    return GW_OK;
}

gw_status_t gw_train_codec_start(gw_train_codec_t *c, int bucket, float *buf, size_t count,
                                 gw_handle_t **handle)
{
    return gw_iallreduce_compressed(c->comm, c->st[bucket], buf, buf, count, handle);
}

gw_status_t gw_train_codec_allreduce(gw_train_codec_t *c, int bucket, float *buf, size_t count)
{
    return gw_allreduce_compressed(c->comm, c->st[bucket], buf, buf, count);
}

double gw_train_codec_last_seconds(const gw_train_codec_t *c, int bucket)
{
    gw_compress_stats_t last;
    if (gw_compress_stats_get(c->st[bucket], &last, NULL) != GW_OK)
        return 0;
    return last.encode_seconds + last.decode_seconds;
}

void gw_train_codec_traffic(const gw_train_codec_t *c, double *sent, double *dense)
{
    *sent = *dense = 0;
    for (int i = 0; c && i < c->n; i++) {
        gw_compress_stats_t tot;
        if (gw_compress_stats_get(c->st[i], NULL, &tot) == GW_OK) {
            *sent += (double)tot.bytes_sent;
            *dense += (double)tot.dense_bytes_sent;
        }
    }
}

/* Image: for each state, its length (u64) and gw_compress_state_save bytes. */
static gw_status_t image_size(const gw_train_codec_t *c, size_t *total)
{
    size_t n;
    *total = 0;
    for (int i = 0; i < c->n; i++) {
        gw_status_t st = gw_compress_state_save(c->st[i], NULL, 0, &n);
        if (st != GW_OK && st != GW_ERR_OVERFLOW)
            return st;
        *total += sizeof(uint64_t) + n;
    }
    return GW_OK;
}

/* The image into p, which holds total bytes (image_size's). */
static gw_status_t image_write(const gw_train_codec_t *c, unsigned char *p, size_t total,
                               size_t *len)
{
    size_t pos = 0, n;
    for (int i = 0; i < c->n; i++) {
        gw_compress_state_save(c->st[i], NULL, 0, &n);
        uint64_t n64 = n;
        memcpy(p + pos, &n64, sizeof(n64));
        pos += sizeof(n64);
        gw_status_t st = gw_compress_state_save(c->st[i], p + pos, total - pos, &n);
        if (st != GW_OK)
            return st;
        pos += n;
    }
    *len = pos;
    return GW_OK;
}

gw_status_t gw_train_codec_save(const gw_train_codec_t *c, unsigned char **out, size_t *len)
{
    unsigned char *p = NULL;
    size_t cap = 0;
    gw_status_t st = gw_train_codec_save_into(c, &p, &cap, len);
    if (st != GW_OK) {
        free(p);
        return st;
    }
    *out = p;
    return GW_OK;
}

gw_status_t gw_train_codec_save_into(const gw_train_codec_t *c, unsigned char **buf, size_t *cap,
                                     size_t *len)
{
    size_t total;
    gw_status_t st = image_size(c, &total);
    if (st != GW_OK)
        return st;
    if (total > *cap || !*buf) {
        unsigned char *p = realloc(*buf, total + 1);
        if (!p)
            return GW_ERR_NO_MEMORY;
        *buf = p;
        *cap = total;
    }
    return image_write(c, *buf, total, len);
}

void gw_train_codec_set_comm(gw_train_codec_t *c, gw_comm_t *comm) { c->comm = comm; }

gw_status_t gw_train_codec_reset_residuals(gw_train_codec_t *c)
{
    for (int i = 0; i < c->n; i++) {
        gw_status_t st = gw_compress_state_reset_residual(c->st[i]);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

uint64_t gw_train_codec_step(const gw_train_codec_t *c)
{
    return c && c->n ? gw_compress_state_step(c->st[0]) : 0;
}

gw_status_t gw_train_codec_load(gw_train_codec_t *c, const unsigned char *in, size_t len)
{
    size_t pos = 0;
    for (int i = 0; i < c->n; i++) {
        uint64_t n;
        if (len - pos < sizeof(n))
            goto bad;
        memcpy(&n, in + pos, sizeof(n));
        pos += sizeof(n);
        if (n > len - pos)
            goto bad;
        gw_status_t st = gw_compress_state_load(c->st[i], in + pos, (size_t)n);
        if (st != GW_OK) {
            fprintf(stderr, "gradwire-train: the checkpoint's codec state %d does not load: %s\n",
                    i, gw_status_str(st));
            return st;
        }
        pos += (size_t)n;
    }
    if (pos == len)
        return GW_OK;
bad:
    fprintf(stderr,
            "gradwire-train: the checkpoint's codec states do not match this model's "
            "%d tensors\n",
            c->n);
    return GW_ERR_PROTOCOL;
}
