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
 * With --async it drives gw_iallreduce_compressed instead (async_mode):
 * the same steps run first with blocking calls on one state per tensor,
 * then all together in flight on twin states, with dense non-blocking and
 * blocking calls among them; results and states must be bitwise equal,
 * handles must complete in call order, and a NaN in one call in flight
 * fails that handle (only) on every rank. Hashes go to OUTDIR/rank<R> as
 * above. With --async-kill (kill_mode) rank 1 dies while compressed calls
 * are in flight (it never posts the last): the others must get an error
 * from gw_wait, not hang: each
 * prints "rank R: <status> after T ms" and exits 0 when it got an error.
 *
 * Usage: worker_compress OUTDIR [codecs] [counts] [steps]
 *        worker_compress --async OUTDIR [codecs] [counts] [steps]
 *        worker_compress --async-kill
 *   codecs and counts are comma lists ("all" or "-": every codec).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gradwire.h"

typedef struct {
    gw_comm_t *comm;
    int rank, size;
    FILE *out;
    const char *dir;
    int failures;
} ctx_t;

#define FAIL(c, ...)                                             \
    do {                                                         \
        fprintf(stderr, "worker_compress rank %d: ", (c)->rank); \
        fprintf(stderr, __VA_ARGS__);                            \
        fputc('\n', stderr);                                     \
        (c)->failures++;                                         \
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
            s = gw_allreduce_compressed(c->comm, resumed, count ? in : NULL, count ? out2 : NULL,
                                        count);
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

/* ---- non-blocking calls ---------------------------------------------- */

/* Equal saved images: the same step, residual and codec state. */
static int same_state(const gw_compress_state_t *a, const gw_compress_state_t *b)
{
    size_t la = 0, lb = 0;
    if (gw_compress_state_save(a, NULL, 0, &la) != GW_OK ||
        gw_compress_state_save(b, NULL, 0, &lb) != GW_OK || la != lb)
        return 0;
    unsigned char *ia = malloc(la), *ib = malloc(lb);
    int same = ia && ib && gw_compress_state_save(a, ia, la, &la) == GW_OK &&
               gw_compress_state_save(b, ib, lb, &lb) == GW_OK && memcmp(ia, ib, la) == 0;
    free(ia);
    free(ib);
    return same;
}

/* One tensor of the async test: a state for the blocking reference (a) and
 * its twin for the non-blocking calls (b), and every step's buffers. */
typedef struct job {
    gw_codec_t codec;
    size_t count;
    gw_compress_state_t *a, *b;
    float **in, **ref, **out;
    gw_handle_t **h;
} job_t;

static int job_init(ctx_t *c, job_t *j, gw_codec_t codec, size_t count, int nsteps)
{
    size_t rows, cols;
    shape(count, &rows, &cols);
    gw_compress_config_t cfg = config(codec);
    if (codec == GW_CODEC_TOPK)
        cfg.momentum = 0.9; /* DGC: the velocity must survive the queue as well */
    j->codec = codec;
    j->count = count;
    gw_status_t s = gw_compress_state_create(&cfg, rows, cols, &j->a);
    if (s == GW_OK)
        s = gw_compress_state_create(&cfg, rows, cols, &j->b);
    j->in = calloc((size_t)nsteps, sizeof(float *));
    j->ref = calloc((size_t)nsteps, sizeof(float *));
    j->out = calloc((size_t)nsteps, sizeof(float *));
    j->h = calloc((size_t)nsteps, sizeof(gw_handle_t *));
    if (s != GW_OK || !j->in || !j->ref || !j->out || !j->h) {
        FAIL(c, "create %s %zu: %s", gw_codec_name(codec), count, gw_status_name(s));
        return -1;
    }
    for (int step = 0; step < nsteps; step++) {
        j->in[step] = malloc(count * sizeof(float) + 4);
        j->ref[step] = malloc(count * sizeof(float) + 4);
        j->out[step] = malloc(count * sizeof(float) + 4);
        if (!j->in[step] || !j->ref[step] || !j->out[step]) {
            FAIL(c, "out of memory");
            return -1;
        }
        for (size_t i = 0; i < count; i++)
            j->in[step][i] = grad((uint64_t)step * 733 + count, c->rank, i);
    }
    return 0;
}

static void job_fini(job_t *j, int nsteps)
{
    for (int step = 0; step < nsteps; step++) {
        if (j->in)
            free(j->in[step]);
        if (j->ref)
            free(j->ref[step]);
        if (j->out)
            free(j->out[step]);
    }
    free(j->in);
    free(j->ref);
    free(j->out);
    free(j->h);
    gw_compress_state_destroy(j->a);
    gw_compress_state_destroy(j->b);
}

/* A NaN in the middle one of three calls in flight: it fails on every rank,
 * the others complete; everything as the blocking calls had it. */
static void async_nan(ctx_t *c, gw_codec_t codec)
{
    const size_t count = 2000;
    job_t j = {0};
    if (job_init(c, &j, codec, count, 3) != 0) {
        job_fini(&j, 3);
        return;
    }
    if (c->rank == c->size - 1)
        j.in[1][1999] = NAN;
    gw_status_t want[3], got[3];
    for (int step = 0; step < 3; step++)
        want[step] = gw_allreduce_compressed(c->comm, j.a, j.in[step], j.ref[step], count);
    for (int step = 0; step < 3; step++) {
        gw_status_t s =
            gw_iallreduce_compressed(c->comm, j.b, j.in[step], j.out[step], count, &j.h[step]);
        if (s != GW_OK) {
            FAIL(c, "%s: gw_iallreduce_compressed: %s", gw_codec_name(codec), gw_status_name(s));
            job_fini(&j, 3);
            return;
        }
    }
    for (int step = 2; step >= 0; step--)
        got[step] = gw_wait(j.h[step]);
    if (want[0] != GW_OK || want[1] != GW_ERR_INVALID_ARG || want[2] != GW_OK)
        FAIL(c, "%s: blocking calls with a NaN in the second: %s %s %s", gw_codec_name(codec),
             gw_status_name(want[0]), gw_status_name(want[1]), gw_status_name(want[2]));
    for (int step = 0; step < 3; step++)
        if (got[step] != want[step])
            FAIL(c, "%s: non-blocking call %d with a NaN in call 1: %s, blocking %s",
                 gw_codec_name(codec), step, gw_status_name(got[step]), gw_status_name(want[step]));
    if (got[2] == GW_OK && memcmp(j.out[2], j.ref[2], count * sizeof(float)) != 0)
        FAIL(c, "%s: the call after the NaN differs from the blocking one", gw_codec_name(codec));
    if (!same_state(j.a, j.b))
        FAIL(c, "%s: the states differ after a NaN", gw_codec_name(codec));
    if (got[2] == GW_OK)
        fprintf(c->out, "async-nan %s %016llx\n", gw_codec_name(codec),
                (unsigned long long)hash(j.out[2], count));
    job_fini(&j, 3);
}

static int async_mode(ctx_t *c, const char *codecs, const char *counts, int nsteps)
{
    /* Every tensor of every codec. */
    job_t jobs[64];
    int njobs = 0;
    for (int k = 0; k < GW_CODEC_COUNT; k++) {
        if (!in_list(codecs, gw_codec_name((gw_codec_t)k)))
            continue;
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", counts);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && njobs < 64;
             tok = strtok_r(NULL, ",", &save)) {
            memset(&jobs[njobs], 0, sizeof(jobs[njobs]));
            if (job_init(c, &jobs[njobs], (gw_codec_t)k, (size_t)strtoull(tok, NULL, 10), nsteps) !=
                0) {
                job_fini(&jobs[njobs], nsteps);
                goto out;
            }
            njobs++;
        }
    }
    /* The reference: blocking calls, step by step. */
    for (int step = 0; step < nsteps; step++)
        for (int q = 0; q < njobs; q++) {
            job_t *j = &jobs[q];
            gw_status_t s =
                gw_allreduce_compressed(c->comm, j->a, j->in[step], j->ref[step], j->count);
            if (s != GW_OK)
                FAIL(c, "blocking %s %zu step %d: %s", gw_codec_name(j->codec), j->count, step,
                     gw_status_name(s));
        }
    /* The same, all in flight, with other collectives among them. */
    int64_t x = c->rank + 1, xsum = 0, xmax = 0;
    gw_handle_t *hmax = NULL, *hlast = NULL;
    for (int step = 0; step < nsteps; step++) {
        for (int q = 0; q < njobs; q++) {
            job_t *j = &jobs[q];
            gw_status_t s = gw_iallreduce_compressed(c->comm, j->b, j->in[step], j->out[step],
                                                     j->count, &j->h[step]);
            if (s != GW_OK) {
                FAIL(c, "gw_iallreduce_compressed: %s", gw_status_name(s));
                goto out;
            }
        }
        if (step == 0 && gw_iallreduce(c->comm, &x, &xmax, 1, GW_INT64, GW_MAX, &hmax) != GW_OK)
            FAIL(c, "gw_iallreduce failed to start");
    }
    /* A blocking call waits for everything before it... */
    gw_status_t s = gw_allreduce(c->comm, &x, &xsum, 1, GW_INT64, GW_SUM);
    if (s != GW_OK || xsum != (int64_t)c->size * (c->size + 1) / 2)
        FAIL(c, "blocking allreduce among non-blocking calls: %s, %lld", gw_status_name(s),
             (long long)xsum);
    /* ... and one more queued after it completes after all of them. */
    if ((s = gw_iallreduce(c->comm, &x, &x, 1, GW_INT64, GW_MIN, &hlast)) == GW_OK) {
        int done = 0;
        while (!done && (s = gw_test(hlast, &done)) == GW_OK)
            ;
    }
    if (s != GW_OK)
        FAIL(c, "the last non-blocking call: %s", gw_status_name(s));
    if (hmax && ((s = gw_wait(hmax)) != GW_OK || xmax != c->size))
        FAIL(c, "gw_iallreduce among compressed calls: %s, %lld", gw_status_name(s),
             (long long)xmax);
    for (int q = 0; q < njobs; q++) {
        job_t *j = &jobs[q];
        const char *name = gw_codec_name(j->codec);
        for (int step = 0; step < nsteps; step++) {
            int done = 0;
            s = gw_test(j->h[step], &done);
            if (!done) {
                FAIL(c, "%s %zu step %d was not complete when a later call was", name, j->count,
                     step);
                s = gw_wait(j->h[step]);
            }
            if (s != GW_OK) {
                FAIL(c, "non-blocking %s %zu step %d: %s", name, j->count, step, gw_status_name(s));
                continue;
            }
            if (memcmp(j->out[step], j->ref[step], j->count * sizeof(float)) != 0)
                FAIL(c, "%s %zu step %d: the non-blocking result differs from the blocking one",
                     name, j->count, step);
            fprintf(c->out, "async %s %zu step %d %016llx\n", name, j->count, step,
                    (unsigned long long)hash(j->out[step], j->count));
        }
        if (!same_state(j->a, j->b))
            FAIL(c, "%s %zu: the states differ after the same steps", name, j->count);
    }
    for (int k = 0; k < GW_CODEC_COUNT; k++)
        if (k != GW_CODEC_NONE && in_list(codecs, gw_codec_name((gw_codec_t)k)))
            async_nan(c, (gw_codec_t)k);
out:
    for (int q = 0; q < njobs; q++)
        job_fini(&jobs[q], nsteps);
    return c->failures ? 1 : 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Rank 1 dies with compressed calls in flight; the others must see errors.
 * It posts one call fewer than they do, so their last call cannot complete
 * without it however fast its progress thread ran the others before it
 * exited (on an idle machine it once finished all of them first, and the
 * others got GW_OK). */
static int kill_mode(ctx_t *c)
{
    enum { NCALLS = 4 };
    const size_t count = (size_t)1 << 20;
    gw_compress_config_t cfg = config(GW_CODEC_FP16);
    gw_compress_state_t *st[NCALLS] = {0};
    float *buf[NCALLS] = {0};
    gw_handle_t *h[NCALLS];
    for (int k = 0; k < NCALLS; k++) {
        if (gw_compress_state_create(&cfg, count, 1, &st[k]) != GW_OK ||
            !(buf[k] = malloc(count * sizeof(float)))) {
            printf("rank %d: setup failed\n", c->rank);
            return 1;
        }
        for (size_t i = 0; i < count; i++)
            buf[k][i] = grad((uint64_t)k, c->rank, i);
    }
    if (gw_barrier(c->comm) != GW_OK) {
        printf("rank %d: barrier failed\n", c->rank);
        return 1;
    }
    double t0 = now_ms();
    for (int k = 0; k < (c->rank == 1 ? NCALLS - 1 : NCALLS); k++)
        if (gw_iallreduce_compressed(c->comm, st[k], buf[k], buf[k], count, &h[k]) != GW_OK) {
            printf("rank %d: gw_iallreduce_compressed failed to start\n", c->rank);
            return 1;
        }
    gw_status_t first = gw_wait(h[0]);
    if (c->rank == 1) {
        fflush(stdout);
        _exit(0); /* with three calls in flight; exit 0: the launcher must not stop the others */
    }
    gw_status_t err = GW_OK;
    for (int k = 1; k < NCALLS; k++) {
        gw_status_t s = gw_wait(h[k]);
        if (err == GW_OK)
            err = s;
    }
    printf("rank %d: first call %s, then %s after %.0f ms\n", c->rank, gw_status_name(first),
           gw_status_name(err), now_ms() - t0);
    fflush(stdout);
    for (int k = 0; k < NCALLS; k++) {
        gw_compress_state_destroy(st[k]);
        free(buf[k]);
    }
    return err == GW_OK;
}

int main(int argc, char **argv)
{
    int mode = 0; /* 1: --async, 2: --async-kill */
    if (argc > 1 && strcmp(argv[1], "--async") == 0)
        mode = 1;
    else if (argc > 1 && strcmp(argv[1], "--async-kill") == 0)
        mode = 2;
    if (mode) {
        argv++;
        argc--;
    }
    if (mode == 2) {
        ctx_t c = {0};
        if (gw_comm_init_env(&c.comm) != GW_OK) {
            fprintf(stderr, "worker_compress: gw_comm_init_env failed\n");
            return 1;
        }
        c.rank = gw_comm_rank(c.comm);
        c.size = gw_comm_size(c.comm);
        int rc = kill_mode(&c);
        gw_comm_destroy(c.comm);
        return rc;
    }
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
    if (mode == 1) {
        int rc = async_mode(&c, codecs, counts, nsteps);
        fclose(c.out);
        gw_comm_destroy(c.comm);
        return rc;
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
