/*
 * worker_compress.c - one rank of the compressed-allreduce integration test.
 *
 * Started by `gradwire launch -n N`, it drives gw_allreduce_compressed over
 * the real library and TCP transport (public API only), for every codec and
 * a few tensor sizes, several steps each, and writes one line per call with
 * a hash of the output to OUTDIR/rank<R>: the test then checks that every
 * rank ended with bitwise the same bytes. Along the way each rank checks
 * what it can check on its own:
 *  - a warm-up step gives bitwise what gw_allreduce(..., GW_AVG) gives;
 *  - a constant tensor reduces to exactly the constant (top-k: where sent;
 *    PowerSGD: within float rounding);
 *  - a NaN on the last rank makes the call fail with GW_ERR_INVALID_ARG on
 *    every rank, and the next call works;
 *  - a state saved to a file and loaded into a fresh state continues exactly
 *    as the original does;
 *  - the statistics count calls and bytes.
 * Any failure is printed and makes the exit status 1.
 *
 * Usage: worker_compress OUTDIR [codecs] [counts] [steps]
 *   codecs and counts are comma lists ("all" or "-": every codec).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradwire.h"

typedef struct {
    gw_comm_t *comm;
    int rank, size;
    FILE *out;
    const char *dir;
    int failures;
} ctx_t;

#define FAIL(c, ...)                                                                       \
    do {                                                                                   \
        fprintf(stderr, "worker_compress rank %d: ", (c)->rank);                            \
        fprintf(stderr, __VA_ARGS__);                                                      \
        fputc('\n', stderr);                                                               \
        (c)->failures++;                                                                   \
    } while (0)

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static float grad(uint64_t seed, int rank, size_t i)
{
    uint64_t h = mix64(seed << 40 ^ (uint64_t)rank << 32 ^ (uint64_t)i);
    double s = 0;
    for (int k = 0; k < 4; k++)
        s += (double)((h >> (16 * k)) & 0xffff) / 65536.0 - 0.5;
    return (float)(s * (h % 3 == 0 ? 1.0 : h % 3 == 1 ? 0.1 : 0.01));
}

static uint64_t hash(const float *x, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *p = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof(float); i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void shape(size_t count, size_t *rows, size_t *cols)
{
    size_t c = 1;
    for (size_t d = 2; d * d <= count; d++)
        if (count % d == 0)
            c = d;
    *rows = count / c;
    *cols = c;
}

static gw_compress_config_t config(gw_codec_t codec)
{
    gw_compress_config_t cfg;
    gw_compress_config_init(&cfg);
    cfg.codec = codec;
    cfg.min_elements = 0;
    cfg.bucket_elements = 256;
    cfg.topk_ratio = 0.05;
    cfg.powersgd_rank = 2;
    return cfg;
}

/* Several steps with error feedback; hashes of every output go to the file,
 * and a checkpoint taken half-way must continue identically. */
static void steps(ctx_t *c, gw_codec_t codec, size_t count, int nsteps)
{
    size_t rows, cols;
    shape(count, &rows, &cols);
    gw_compress_config_t cfg = config(codec);
    gw_compress_state_t *st = NULL, *resumed = NULL;
    gw_status_t s = gw_compress_state_create(&cfg, rows, cols, &st);
    if (s == GW_OK)
        s = gw_compress_state_create(&cfg, rows, cols, &resumed);
    if (s != GW_OK) {
        FAIL(c, "create %s %zu: %s", gw_codec_name(codec), count, gw_status_name(s));
        goto out;
    }
    float *in = malloc(count * sizeof(float) + 4), *out = malloc(count * sizeof(float) + 4),
          *out2 = malloc(count * sizeof(float) + 4);
    char path[512];
    snprintf(path, sizeof(path), "%s/state%d.bin", c->dir, c->rank);
    for (int step = 0; step < nsteps; step++) {
        for (size_t i = 0; i < count; i++)
            in[i] = grad((uint64_t)step * 131 + count, c->rank, i);
        if (step == nsteps / 2) {
            if ((s = gw_compress_state_save_file(st, path)) != GW_OK ||
                (s = gw_compress_state_load_file(resumed, path)) != GW_OK)
                FAIL(c, "%s checkpoint: %s", gw_codec_name(codec), gw_status_name(s));
            remove(path);
        }
        s = gw_allreduce_compressed(c->comm, st, count ? in : NULL, count ? out : NULL, count);
        if (s != GW_OK) {
            FAIL(c, "%s count %zu step %d: %s", gw_codec_name(codec), count, step,
                 gw_status_name(s));
            break;
        }
        fprintf(c->out, "%s %zu step %d %016llx\n", gw_codec_name(codec), count, step,
                (unsigned long long)hash(out, count));
        if (step >= nsteps / 2) {
            s = gw_allreduce_compressed(c->comm, resumed, count ? in : NULL,
                                        count ? out2 : NULL, count);
            if (s != GW_OK || memcmp(out, out2, count * sizeof(float)) != 0)
                FAIL(c, "%s count %zu step %d: the resumed state differs (%s)",
                     gw_codec_name(codec), count, step, gw_status_name(s));
        }
    }
    gw_compress_stats_t last, total;
    gw_compress_stats_get(st, &last, &total);
    if (c->failures == 0 &&
        (total.calls != (uint64_t)nsteps || total.input_bytes != (uint64_t)nsteps * count * 4 ||
         (c->size > 1 && last.bytes_sent == 0)))
        FAIL(c, "%s count %zu: stats say %llu calls, %llu input bytes, %llu sent",
             gw_codec_name(codec), count, (unsigned long long)total.calls,
             (unsigned long long)total.input_bytes, (unsigned long long)last.bytes_sent);
    free(in);
    free(out);
    free(out2);
out:
    gw_compress_state_destroy(st);
    gw_compress_state_destroy(resumed);
}

/* Warm-up equals gw_allreduce; constants are exact; a NaN fails everyone. */
static void checks(ctx_t *c, gw_codec_t codec)
{
    const size_t rows = 40, cols = 25, count = rows * cols;
    gw_compress_config_t cfg = config(codec);
    cfg.warmup_steps = 1;
    gw_compress_state_t *st = NULL;
    gw_status_t s = gw_compress_state_create(&cfg, rows, cols, &st);
    if (s != GW_OK) {
        FAIL(c, "create %s: %s", gw_codec_name(codec), gw_status_name(s));
        return;
    }
    float *in = malloc(count * 4), *out = malloc(count * 4), *ref = malloc(count * 4);
    for (size_t i = 0; i < count; i++)
        in[i] = grad(999, c->rank, i);
    if ((s = gw_allreduce(c->comm, in, ref, count, GW_FLOAT32, GW_AVG)) != GW_OK ||
        (s = gw_allreduce_compressed(c->comm, st, in, out, count)) != GW_OK)
        FAIL(c, "%s warm-up: %s", gw_codec_name(codec), gw_status_name(s));
    else if (memcmp(out, ref, count * 4) != 0)
        FAIL(c, "%s: the warm-up step differs from gw_allreduce", gw_codec_name(codec));

    /* Step 1 is compressed: a constant. */
    for (size_t i = 0; i < count; i++)
        in[i] = 0.75f;
    gw_compress_state_t *fresh = NULL;
    gw_compress_config_t cfg0 = config(codec);
    if ((s = gw_compress_state_create(&cfg0, rows, cols, &fresh)) != GW_OK ||
        (s = gw_allreduce_compressed(c->comm, fresh, in, out, count)) != GW_OK) {
        FAIL(c, "%s constant: %s", gw_codec_name(codec), gw_status_name(s));
    } else {
        for (size_t i = 0; i < count; i++) {
            int ok = codec == GW_CODEC_POWERSGD ? fabsf(out[i] - 0.75f) <= 1e-5f
                     : codec == GW_CODEC_TOPK   ? out[i] == 0.75f || out[i] == 0.0f
                                                : out[i] == 0.75f;
            if (!ok) {
                FAIL(c, "%s constant 0.75: element %zu is %.9g", gw_codec_name(codec), i,
                     (double)out[i]);
                break;
            }
        }
    }
    gw_compress_state_destroy(fresh);

    /* A NaN on the last rank: every rank fails alike, the next call works. */
    for (size_t i = 0; i < count; i++)
        in[i] = grad(1000, c->rank, i);
    if (c->rank == c->size - 1)
        in[3] = NAN;
    s = gw_allreduce_compressed(c->comm, st, in, out, count);
    if (s != GW_ERR_INVALID_ARG)
        FAIL(c, "%s with a NaN on rank %d: %s", gw_codec_name(codec), c->size - 1,
             gw_status_name(s));
    in[3] = 1.0f;
    if ((s = gw_allreduce_compressed(c->comm, st, in, out, count)) != GW_OK)
        FAIL(c, "%s after the NaN: %s", gw_codec_name(codec), gw_status_name(s));
    else
        fprintf(c->out, "%s after-nan %016llx\n", gw_codec_name(codec),
                (unsigned long long)hash(out, count));
    free(in);
    free(out);
    free(ref);
    gw_compress_state_destroy(st);
}

static int in_list(const char *list, const char *name)
{
    if (!list || strcmp(list, "all") == 0 || strcmp(list, "-") == 0)
        return 1;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: worker_compress OUTDIR [codecs] [counts] [steps]\n");
        return 2;
    }
    const char *codecs = argc > 2 ? argv[2] : "all";
    const char *counts = argc > 3 ? argv[3] : "0,1,7,1001,4096";
    int nsteps = argc > 4 ? atoi(argv[4]) : 4;
    ctx_t c = {0};
    c.dir = argv[1];
    gw_status_t s = gw_comm_init_env(&c.comm);
    if (s != GW_OK) {
        fprintf(stderr, "worker_compress: gw_comm_init_env: %s\n", gw_status_name(s));
        return 1;
    }
    c.rank = gw_comm_rank(c.comm);
    c.size = gw_comm_size(c.comm);
    char path[512];
    snprintf(path, sizeof(path), "%s/rank%d", c.dir, c.rank);
    c.out = fopen(path, "w");
    if (!c.out) {
        perror(path);
        return 1;
    }
    for (int k = 0; k < GW_CODEC_COUNT; k++) {
        gw_codec_t codec = (gw_codec_t)k;
        if (!in_list(codecs, gw_codec_name(codec)))
            continue;
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", counts);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save))
            steps(&c, codec, (size_t)strtoull(tok, NULL, 10), nsteps);
        checks(&c, codec);
    }
    fclose(c.out);
    gw_comm_destroy(c.comm);
    return c.failures ? 1 : 0;
}
