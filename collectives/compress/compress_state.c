/*
 * compress_state.c - the compression state a caller owns for each tensor:
 * settings, creation and destruction, codec names, and the codec table.
 * Saving and loading live in compress_save.c.
 *
 * Settings are checked once, here, with a message naming the field, so that
 * a call never discovers a bad knob half-way through an exchange (where it
 * would have to break the communicator to get out).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "collectives/compress/codec.h"
#include "common/struct_import.h"

#define MAX_BUCKET ((size_t)1 << 31)
#define MAX_POWERSGD_RANK 1024

static const char *const codec_names[GW_CODEC_COUNT] = {
    [GW_CODEC_NONE] = "none",         [GW_CODEC_FP16] = "fp16", [GW_CODEC_BF16] = "bf16",
    [GW_CODEC_INT8] = "int8",         [GW_CODEC_SIGN] = "sign", [GW_CODEC_TOPK] = "topk",
    [GW_CODEC_POWERSGD] = "powersgd",
};

const char *gw_codec_name(gw_codec_t codec)
{
    return (unsigned)codec < GW_CODEC_COUNT ? codec_names[codec] : "unknown";
}

gw_status_t gw_codec_parse(const char *name, gw_codec_t *out)
{
    static const struct {
        const char *name;
        gw_codec_t codec;
    } aliases[] = {{"dense", GW_CODEC_NONE},   {"float16", GW_CODEC_FP16},
                   {"half", GW_CODEC_FP16},    {"bfloat16", GW_CODEC_BF16},
                   {"top-k", GW_CODEC_TOPK},   {"1bit", GW_CODEC_SIGN},
                   {"signsgd", GW_CODEC_SIGN}, {"power-sgd", GW_CODEC_POWERSGD}};
    if (!name || !out)
        return GW_ERR_INVALID_ARG;
    for (int c = 0; c < GW_CODEC_COUNT; c++) {
        if (strcasecmp(name, codec_names[c]) == 0) {
            *out = (gw_codec_t)c;
            return GW_OK;
        }
    }
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (strcasecmp(name, aliases[i].name) == 0) {
            *out = aliases[i].codec;
            return GW_OK;
        }
    }
    return GW_ERR_INVALID_ARG;
}

const gw__codec_ops_t *gw__codec_lookup(gw_codec_t codec)
{
    switch (codec) {
    case GW_CODEC_FP16:
        return &gw__codec_fp16;
    case GW_CODEC_BF16:
        return &gw__codec_bf16;
    case GW_CODEC_INT8:
        return &gw__codec_int8;
    case GW_CODEC_SIGN:
        return &gw__codec_sign;
    case GW_CODEC_TOPK:
        return &gw__codec_topk;
    case GW_CODEC_POWERSGD:
        return &gw__codec_powersgd;
    default:
        return NULL;
    }
}

void gw_compress_config_init(gw_compress_config_t *cfg)
{
    if (!cfg)
        return;
    static const gw_compress_config_t defaults = GW_COMPRESS_CONFIG_INITIALIZER;
    *cfg = defaults;
}

/* The first versioned header's struct ended with this field. */
#define COMPRESS_V1_SIZE (offsetof(gw_compress_config_t, momentum) + sizeof(double))

/* *out = the library's reading of the caller's struct (its defaults, then
 * the caller's bytes: common/struct_import.h). */
static gw_status_t import_config(const gw_compress_config_t *in, gw_compress_config_t *out,
                                 const gw_logger_t *lg)
{
    gw_compress_config_init(out);
    gw_status_t st = gw__struct_import(
        in, in->struct_size, in->magic, COMPRESS_V1_SIZE, out, sizeof(*out), "gw_compress_config_t",
        "GW_COMPRESS_CONFIG_INITIALIZER or gw_compress_config_init()", lg);
    out->struct_size = sizeof(*out);
    return st;
}

static gw_status_t check_config(const gw_compress_config_t *cfg, const gw_logger_t *lg)
{
    if ((unsigned)cfg->codec >= GW_CODEC_COUNT) {
        GW_ERROR(lg, "compress", "unknown codec %d in the compression settings", (int)cfg->codec);
        return GW_ERR_INVALID_ARG;
    }
    if (cfg->error_feedback != 0 && cfg->error_feedback != 1) {
        GW_ERROR(lg, "compress", "error_feedback is %d: use 0 or 1", cfg->error_feedback);
        return GW_ERR_INVALID_ARG;
    }
    if (cfg->bucket_elements < 1 || cfg->bucket_elements > MAX_BUCKET) {
        GW_ERROR(lg, "compress", "bucket_elements %zu out of range [1, %zu]", cfg->bucket_elements,
                 MAX_BUCKET);
        return GW_ERR_INVALID_ARG;
    }
    if (!(cfg->topk_ratio > 0 && cfg->topk_ratio <= 1)) {
        GW_ERROR(lg, "compress", "topk_ratio %g out of range (0, 1]", cfg->topk_ratio);
        return GW_ERR_INVALID_ARG;
    }
    if (cfg->powersgd_rank < 1 || cfg->powersgd_rank > MAX_POWERSGD_RANK) {
        GW_ERROR(lg, "compress", "powersgd_rank %d out of range [1, %d]", cfg->powersgd_rank,
                 MAX_POWERSGD_RANK);
        return GW_ERR_INVALID_ARG;
    }
    /* The factor is used as a float: one that rounds up to 1 would let the
     * velocity grow without bound. */
    if (!(cfg->momentum >= 0 && (float)cfg->momentum < 1.0f)) {
        GW_ERROR(lg, "compress", "momentum %g out of range [0, 1)", cfg->momentum);
        return GW_ERR_INVALID_ARG;
    }
    if (cfg->momentum != 0 && cfg->codec != GW_CODEC_TOPK) {
        GW_ERROR(lg, "compress",
                 "momentum %g is set but the codec is %s: momentum correction "
                 "is part of the top-k codec only (set it to 0 or use topk)",
                 cfg->momentum, gw_codec_name(cfg->codec));
        return GW_ERR_INVALID_ARG;
    }
    return GW_OK;
}

static float *alloc_floats(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n * sizeof(float) : 64) != 0)
        return NULL;
    return p;
}

gw_status_t gw_compress_state_create(const gw_compress_config_t *caller, size_t rows, size_t cols,
                                     gw_compress_state_t **out)
{
    if (!caller || !out)
        return GW_ERR_INVALID_ARG;
    gw_logger_t lg;
    /* A malformed GW_DEBUG is reported here and the default level used;
     * gw_comm_init is where it stops the job. */
    (void)gw__logger_init(&lg, -1);
    gw_compress_config_t mine, *cfg = &mine;
    gw_status_t st = import_config(caller, &mine, &lg);
    if (st == GW_OK)
        st = check_config(cfg, &lg);
    size_t count = 0, bytes;
    if (st == GW_OK &&
        (__builtin_mul_overflow(rows, cols, &count) ||
         __builtin_mul_overflow(count, sizeof(float), &bytes) || bytes > (size_t)PTRDIFF_MAX / 2)) {
        GW_ERROR(&lg, "compress", "a %zu x %zu tensor of float32 does not fit in memory", rows,
                 cols);
        st = GW_ERR_OVERFLOW;
    }
    const gw__codec_ops_t *ops = gw__codec_lookup(cfg->codec);
    if (st == GW_OK && ops && ops->check)
        st = ops->check(cfg, rows, cols, &lg);
    if (st != GW_OK)
        goto out_logger;

    gw_compress_state_t *s = calloc(1, sizeof(*s));
    if (!s) {
        st = GW_ERR_NO_MEMORY;
        goto out_logger;
    }
    s->cfg = *cfg;
    if (s->cfg.momentum == 0)
        s->cfg.momentum = 0.0; /* not -0.0: settings are compared bit for bit */
    s->ops = ops;
    s->rows = rows;
    s->cols = cols;
    s->count = count;
    s->nextra = ops && ops->extra_floats ? ops->extra_floats(cfg, rows, cols) : 0;
    s->residual = alloc_floats(count);
    s->next = alloc_floats(count);
    s->extra = s->nextra ? alloc_floats(s->nextra) : NULL;
    /* With momentum, extra is the velocity, rebuilt from every input. */
    int double_buffered = s->cfg.momentum != 0;
    s->extra_next = double_buffered ? alloc_floats(s->nextra) : NULL;
    if (!s->residual || !s->next || (s->nextra && !s->extra) ||
        (double_buffered && !s->extra_next)) {
        GW_ERROR(&lg, "compress", "cannot allocate the state of a %zu x %zu tensor", rows, cols);
        st = GW_ERR_NO_MEMORY;
        goto err_free_state;
    }
    memset(s->residual, 0, count * sizeof(float));
    if (s->nextra) {
        memset(s->extra, 0, s->nextra * sizeof(float));
        if (ops->extra_init)
            ops->extra_init(s);
    }
    *out = s;
    goto out_logger;

err_free_state:
    gw_compress_state_destroy(s);
out_logger:
    gw__logger_fini(&lg);
    return st;
}

void gw_compress_state_destroy(gw_compress_state_t *state)
{
    if (!state)
        return;
    for (int i = 0; i < GW__CZ_NWORK; i++)
        free(state->work[i]);
    free(state->extra_next);
    free(state->extra);
    free(state->next);
    free(state->residual);
    free(state);
}

uint64_t gw_compress_state_step(const gw_compress_state_t *state)
{
    return state ? state->step : 0;
}

gw_status_t gw_compress_state_reset_residual(gw_compress_state_t *state)
{
    if (!state)
        return GW_ERR_INVALID_ARG;
    if (state->count)
        memset(state->residual, 0, state->count * sizeof(float));
    /* With momentum, extra is DGC's velocity: this rank's too. PowerSGD's
     * Q (extra without momentum) is shared by every rank: kept. */
    if (state->cfg.momentum != 0 && state->nextra)
        memset(state->extra, 0, state->nextra * sizeof(float));
    return GW_OK;
}

/* Equal settings, compared field by field so the mismatch can be named. */
const char *gw__cz_config_diff(const gw_compress_config_t *a, const gw_compress_config_t *b)
{
    if (a->codec != b->codec)
        return "codec";
    if (a->error_feedback != b->error_feedback)
        return "error_feedback";
    if (a->warmup_steps != b->warmup_steps)
        return "warmup_steps";
    if (a->min_elements != b->min_elements)
        return "min_elements";
    if (a->bucket_elements != b->bucket_elements)
        return "bucket_elements";
    if (memcmp(&a->topk_ratio, &b->topk_ratio, sizeof(double)) != 0)
        return "topk_ratio";
    if (a->powersgd_rank != b->powersgd_rank)
        return "powersgd_rank";
    if (a->seed != b->seed)
        return "seed";
    if (memcmp(&a->momentum, &b->momentum, sizeof(double)) != 0)
        return "momentum";
    return NULL;
}
