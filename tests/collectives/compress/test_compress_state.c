/*
 * test_compress_state.c - compression settings and states: defaults,
 * validation, names, and checkpoints (save, load, refusal of bad images),
 * including that a run resumed from a checkpoint continues bit for bit.
 */
#include <unistd.h>

#include "test_compress_harness.h"

Test(compress_state, defaults_and_names)
{
    gw_compress_config_t cfg;
    memset(&cfg, 0x55, sizeof(cfg));
    gw_compress_config_init(&cfg);
    cr_assert_eq(cfg.codec, GW_CODEC_NONE);
    cr_assert_eq(cfg.error_feedback, 1);
    cr_assert_eq(cfg.warmup_steps, 0);
    cr_assert_eq(cfg.min_elements, 1024);
    cr_assert_eq(cfg.bucket_elements, 4096);
    cr_assert_float_eq(cfg.topk_ratio, 0.01, 1e-12);
    cr_assert_eq(cfg.powersgd_rank, 4);
    cr_assert(cfg.momentum == 0.0 && !signbit(cfg.momentum));
    gw_compress_config_init(NULL);
    for (int c = 0; c < GW_CODEC_COUNT; c++) {
        gw_codec_t back;
        cr_assert_eq(gw_codec_parse(gw_codec_name((gw_codec_t)c), &back), GW_OK);
        cr_assert_eq(back, (gw_codec_t)c);
    }
    gw_codec_t c;
    cr_assert_eq(gw_codec_parse("bfloat16", &c), GW_OK);
    cr_assert_eq(c, GW_CODEC_BF16);
    cr_assert_eq(gw_codec_parse("TOP-K", &c), GW_OK);
    cr_assert_eq(c, GW_CODEC_TOPK);
    cr_assert_eq(gw_codec_parse("gzip", &c), GW_ERR_INVALID_ARG);
    cr_assert_str_eq(gw_codec_name(GW_CODEC_COUNT), "unknown");
}

Test(compress_state, create_validates_settings)
{
    gw_compress_state_t *st = NULL;
    gw_compress_config_t cfg;
#define BAD(field, value, status)                                                  \
    do {                                                                           \
        gw_compress_config_init(&cfg);                                             \
        cfg.field = value;                                                         \
        cr_assert_eq(gw_compress_state_create(&cfg, 10, 10, &st), status, #field); \
    } while (0)
    BAD(codec, GW_CODEC_COUNT, GW_ERR_INVALID_ARG);
    BAD(error_feedback, 2, GW_ERR_INVALID_ARG);
    BAD(bucket_elements, 0, GW_ERR_INVALID_ARG);
    BAD(topk_ratio, 0.0, GW_ERR_INVALID_ARG);
    BAD(topk_ratio, 1.5, GW_ERR_INVALID_ARG);
    BAD(topk_ratio, NAN, GW_ERR_INVALID_ARG);
    BAD(powersgd_rank, 0, GW_ERR_INVALID_ARG);
    BAD(powersgd_rank, 5000, GW_ERR_INVALID_ARG);
    BAD(momentum, 0.9, GW_ERR_INVALID_ARG); /* momentum with a codec other than top-k */
#undef BAD
#define BAD_MOMENTUM(value)                                                           \
    do {                                                                              \
        gw_compress_config_init(&cfg);                                                \
        cfg.codec = GW_CODEC_TOPK;                                                    \
        cfg.momentum = value;                                                         \
        cr_assert_eq(gw_compress_state_create(&cfg, 10, 10, &st), GW_ERR_INVALID_ARG, \
                     "momentum %g", (double)(value));                                 \
    } while (0)
    BAD_MOMENTUM(-0.1);
    BAD_MOMENTUM(1.0);
    BAD_MOMENTUM(1.0 - 1e-12); /* rounds to 1.0f */
    BAD_MOMENTUM(NAN);
    BAD_MOMENTUM(INFINITY);
#undef BAD_MOMENTUM
    gw_compress_config_init(&cfg);
    cfg.codec = GW_CODEC_TOPK;
    cfg.momentum = 0.9;
    cr_assert_eq(gw_compress_state_create(&cfg, 10, 10, &st), GW_OK);
    cr_assert_eq(st->nextra, 100, "the velocity is one float per element");
    cr_assert_not_null(st->extra_next);
    gw_compress_state_destroy(st);
    st = NULL;
    gw_compress_config_init(&cfg);
    cr_assert_eq(gw_compress_state_create(&cfg, SIZE_MAX / 2, 3, &st), GW_ERR_OVERFLOW);
    cr_assert_null(st);
    cfg.codec = GW_CODEC_TOPK;
    cr_assert_eq(gw_compress_state_create(&cfg, 1u << 20, 1u << 12, &st), GW_ERR_UNSUPPORTED);
    cr_assert_null(st);
    cr_assert_eq(gw_compress_state_create(&cfg, 0, 5, &st), GW_OK);
    cr_assert_not_null(st);
    gw_compress_state_destroy(st);
}

/* ---- checkpoints ---- */

/* Run `steps` calls of a 2-rank top-k job on state st (inputs depend on the
 * step number, so a resumed run sees the same inputs). */
typedef struct resume_arg {
    gw_codec_t codec;
    double momentum;
} resume_arg_t;

static void run_steps(ctx_t *c, gw_compress_state_t *st, int from, int to, float *out, size_t count)
{
    float *in = malloc(count * 4);
    for (int step = from; step < to; step++) {
        for (size_t i = 0; i < count; i++)
            in[i] = grad(40 + (uint64_t)step, c->rank, i);
        gw_status_t s = gw_allreduce_compressed(&c->comm, st, in, out, count);
        CHECK(c, s == GW_OK, "step %d: %s", step, gw_status_name(s));
    }
    free(in);
}

static void resume_body(ctx_t *c, const void *argp)
{
    const resume_arg_t *a = argp;
    const size_t rows = 48, cols = 32, count = rows * cols;
    gw_compress_config_t cfg = config(a->codec);
    cfg.momentum = a->momentum;
    gw_compress_state_t *ref = NULL, *st = NULL, *resumed = NULL;
    if (gw_compress_state_create(&cfg, rows, cols, &ref) != GW_OK ||
        gw_compress_state_create(&cfg, rows, cols, &st) != GW_OK ||
        gw_compress_state_create(&cfg, rows, cols, &resumed) != GW_OK) {
        note(c, "create failed");
        return;
    }
    float *out_ref = malloc(count * 4), *out = malloc(count * 4);
    run_steps(c, ref, 0, 4, out_ref, count);

    run_steps(c, st, 0, 3, out, count);
    char path[256];
    snprintf(path, sizeof(path), "/tmp/gw_compress_state_%d_%d_%d.bin", (int)getpid(), a->codec,
             c->rank);
    gw_status_t s = gw_compress_state_save_file(st, path);
    CHECK(c, s == GW_OK, "save_file: %s", gw_status_name(s));
    s = gw_compress_state_load_file(resumed, path);
    CHECK(c, s == GW_OK, "load_file: %s", gw_status_name(s));
    unlink(path);
    CHECK(c, gw_compress_state_step(resumed) == 3, "resumed at step %llu",
          (unsigned long long)gw_compress_state_step(resumed));
    run_steps(c, resumed, 3, 4, out, count);
    CHECK(c, memcmp(out, out_ref, count * 4) == 0, "%s: the resumed run differs",
          gw_codec_name(a->codec));
    CHECK(c, memcmp(resumed->residual, ref->residual, count * 4) == 0,
          "%s: the resumed residual differs", gw_codec_name(a->codec));
    CHECK(c,
          resumed->nextra == ref->nextra &&
              (ref->nextra == 0 || memcmp(resumed->extra, ref->extra, ref->nextra * 4) == 0),
          "%s: the resumed codec state differs", gw_codec_name(a->codec));
    free(out);
    free(out_ref);
    gw_compress_state_destroy(ref);
    gw_compress_state_destroy(st);
    gw_compress_state_destroy(resumed);
}

Test(compress_state, resumed_run_continues_bit_for_bit, .timeout = 60)
{
    for (size_t k = 0; k < NCODECS; k++) {
        resume_arg_t a = {all_codecs[k], 0.0};
        job_run(2, resume_body, &a);
    }
    /* Top-k with momentum correction: the velocity is saved too. */
    resume_arg_t a = {GW_CODEC_TOPK, 0.9};
    job_run(2, resume_body, &a);
}

/* Fix the checksum after patching an image, so a test reaches the check
 * behind it. */
static void reseal(uint8_t *img, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len - 8; i++) {
        h ^= img[i];
        h *= 0x100000001b3ull;
    }
    for (int i = 0; i < 8; i++)
        img[len - 8 + (size_t)i] = (uint8_t)(h >> (8 * i));
}

static gw_compress_state_t *make_state(gw_codec_t codec, size_t rows, size_t cols)
{
    gw_compress_config_t cfg = config(codec);
    gw_compress_state_t *st = NULL;
    cr_assert_eq(gw_compress_state_create(&cfg, rows, cols, &st), GW_OK);
    for (size_t i = 0; i < st->count; i++)
        st->residual[i] = (float)i * 0.25f - 3.0f;
    st->step = 77;
    return st;
}

Test(compress_state, image_round_trip_and_refusals)
{
    gw_compress_state_t *st = make_state(GW_CODEC_POWERSGD, 20, 10);
    size_t len = 0;
    cr_assert_eq(gw_compress_state_save(st, NULL, 0, &len), GW_OK);
    cr_assert_eq(len, 104 + 4 * (200 + 10 * 2) + 8);
    uint8_t *img = malloc(len), *bad = malloc(len);
    size_t got = 0;
    cr_assert_eq(gw_compress_state_save(st, img, len - 1, &got), GW_ERR_OVERFLOW);
    cr_assert_eq(gw_compress_state_save(st, img, len, &got), GW_OK);
    cr_assert_eq(got, len);
    cr_assert_eq(memcmp(img, "GWCSTATE", 8), 0);

    gw_compress_state_t *back = make_state(GW_CODEC_POWERSGD, 20, 10);
    back->step = 0;
    memset(back->residual, 0, 200 * 4);
    cr_assert_eq(gw_compress_state_load(back, img, len), GW_OK);
    cr_assert_eq(back->step, 77);
    cr_assert_eq(memcmp(back->residual, st->residual, 200 * 4), 0);
    cr_assert_eq(memcmp(back->extra, st->extra, 20 * 4), 0);

    /* Every refusal leaves the state as it was. */
    back->step = 5;
    cr_assert_eq(gw_compress_state_load(back, img, len - 1), GW_ERR_PROTOCOL); /* truncated */
    cr_assert_eq(gw_compress_state_load(back, img, 50), GW_ERR_PROTOCOL);
    cr_assert_eq(gw_compress_state_load(back, NULL, 0), GW_ERR_PROTOCOL);
    memcpy(bad, img, len);
    bad[200] ^= 1; /* a residual bit */
    cr_assert_eq(gw_compress_state_load(back, bad, len), GW_ERR_PROTOCOL);
    memcpy(bad, img, len);
    bad[0] = 'X';
    cr_assert_eq(gw_compress_state_load(back, bad, len), GW_ERR_PROTOCOL);
    memcpy(bad, img, len);
    bad[8] = 3; /* format version 3, from the future */
    reseal(bad, len);
    cr_assert_eq(gw_compress_state_load(back, bad, len), GW_ERR_UNSUPPORTED);
    memcpy(bad, img, len);
    bad[8] = 0;
    reseal(bad, len);
    cr_assert_eq(gw_compress_state_load(back, bad, len), GW_ERR_UNSUPPORTED);
    memcpy(bad, img, len);
    bad[12] = 96; /* a version 2 image claiming version 1's header */
    reseal(bad, len);
    cr_assert_eq(gw_compress_state_load(back, bad, len), GW_ERR_PROTOCOL);
    memcpy(bad, img, len);
    uint32_t nan_bits = 0x7fc00000u;
    memcpy(bad + 104 + 4 * 3, &nan_bits, 4); /* a NaN in the residual */
    reseal(bad, len);
    cr_assert_eq(gw_compress_state_load(back, bad, len), GW_ERR_PROTOCOL);
    cr_assert_eq(back->step, 5);

    /* Other settings or another shape: mismatch. */
    gw_compress_state_t *other = make_state(GW_CODEC_TOPK, 20, 10);
    cr_assert_eq(gw_compress_state_load(other, img, len), GW_ERR_MISMATCH);
    gw_compress_state_t *shape = make_state(GW_CODEC_POWERSGD, 10, 20);
    cr_assert_eq(gw_compress_state_load(shape, img, len), GW_ERR_MISMATCH);
    gw_compress_config_t cfg = config(GW_CODEC_POWERSGD);
    cfg.seed++;
    gw_compress_state_t *seeded = NULL;
    cr_assert_eq(gw_compress_state_create(&cfg, 20, 10, &seeded), GW_OK);
    cr_assert_eq(gw_compress_state_load(seeded, img, len), GW_ERR_MISMATCH);

    /* Files: a missing file, and a file with trailing garbage. */
    cr_assert_eq(gw_compress_state_load_file(back, "/nonexistent/gw_state"), GW_ERR_SYSTEM);
    cr_assert_eq(gw_compress_state_save_file(st, "/nonexistent/dir/gw_state"), GW_ERR_SYSTEM);
    char path[128];
    snprintf(path, sizeof(path), "/tmp/gw_compress_image_%d.bin", (int)getpid());
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(img, 1, len, f), len);
    fputc(0, f);
    fclose(f);
    cr_assert_eq(gw_compress_state_load_file(back, path), GW_ERR_PROTOCOL);
    unlink(path);

    free(img);
    free(bad);
    gw_compress_state_destroy(st);
    gw_compress_state_destroy(back);
    gw_compress_state_destroy(other);
    gw_compress_state_destroy(shape);
    gw_compress_state_destroy(seeded);
}

/* ---- format versions and the momentum setting ---- */

static gw_compress_state_t *momentum_state(double momentum)
{
    gw_compress_config_t cfg = config(GW_CODEC_TOPK);
    cfg.momentum = momentum;
    gw_compress_state_t *st = NULL;
    cr_assert_eq(gw_compress_state_create(&cfg, 20, 10, &st), GW_OK);
    for (size_t i = 0; i < st->count; i++)
        st->residual[i] = (float)i * 0.5f - 7.0f;
    for (size_t i = 0; i < st->nextra; i++)
        st->extra[i] = (float)i * -0.125f + 1.0f;
    st->step = 12;
    return st;
}

static uint8_t *save_image(const gw_compress_state_t *st, size_t *len)
{
    cr_assert_eq(gw_compress_state_save(st, NULL, 0, len), GW_OK);
    uint8_t *img = malloc(*len);
    cr_assert_eq(gw_compress_state_save(st, img, *len, len), GW_OK);
    return img;
}

Test(compress_state, version_1_images_and_momentum)
{
    /* A version 1 image (what the library wrote before momentum existed):
     * the 96-byte header without the momentum field, then the floats. */
    gw_compress_state_t *st = momentum_state(0.0);
    cr_assert_eq(st->nextra, 0);
    size_t len2;
    uint8_t *img2 = save_image(st, &len2);
    cr_assert_eq(img2[8], 2, "images are written in version 2");
    size_t len1 = len2 - 8;
    uint8_t *img1 = malloc(len1);
    memcpy(img1, img2, 96);
    memcpy(img1 + 96, img2 + 104, len2 - 104);
    img1[8] = 1;
    img1[12] = 96;
    reseal(img1, len1);
    gw_compress_state_t *back = momentum_state(0.0);
    memset(back->residual, 0, back->count * 4);
    back->step = 0;
    cr_assert_eq(gw_compress_state_load(back, img1, len1), GW_OK);
    cr_assert_eq(back->step, 12);
    cr_assert_eq(memcmp(back->residual, st->residual, st->count * 4), 0);
    /* ... but not into a state with momentum (version 1 means momentum 0). */
    gw_compress_state_t *mom = momentum_state(0.9);
    cr_assert_eq(gw_compress_state_load(mom, img1, len1), GW_ERR_MISMATCH);
    /* A version 1 header on a version 2 image, or the reverse, is corrupt. */
    img2[8] = 1;
    reseal(img2, len2);
    cr_assert_eq(gw_compress_state_load(back, img2, len2), GW_ERR_PROTOCOL);
    img1[8] = 2;
    reseal(img1, len1);
    cr_assert_eq(gw_compress_state_load(back, img1, len1), GW_ERR_PROTOCOL);

    /* The velocity is saved and loaded; other momenta are refused. */
    size_t lenm;
    uint8_t *imgm = save_image(mom, &lenm);
    cr_assert_eq(lenm, 104 + 4 * (200 + 200) + 8);
    gw_compress_state_t *mom2 = momentum_state(0.9);
    memset(mom2->extra, 0, mom2->nextra * 4);
    cr_assert_eq(gw_compress_state_load(mom2, imgm, lenm), GW_OK);
    cr_assert_eq(memcmp(mom2->extra, mom->extra, mom->nextra * 4), 0);
    gw_compress_state_t *half = momentum_state(0.5);
    cr_assert_eq(gw_compress_state_load(half, imgm, lenm), GW_ERR_MISMATCH);
    cr_assert_eq(gw_compress_state_load(back, imgm, lenm), GW_ERR_MISMATCH);
    uint32_t inf_bits = 0x7f800000u;
    memcpy(imgm + 104 + 4 * (200 + 5), &inf_bits, 4); /* an infinite velocity */
    reseal(imgm, lenm);
    cr_assert_eq(gw_compress_state_load(mom2, imgm, lenm), GW_ERR_PROTOCOL);

    free(img1);
    free(img2);
    free(imgm);
    gw_compress_state_destroy(st);
    gw_compress_state_destroy(back);
    gw_compress_state_destroy(mom);
    gw_compress_state_destroy(mom2);
    gw_compress_state_destroy(half);
}

/* gw_compress_state_reset_residual zeroes what is this rank's own (the
 * residual; DGC's velocity) and keeps what every rank shares (the step;
 * PowerSGD's Q). */
Test(compress_state, reset_residual_keeps_what_ranks_share)
{
    cr_assert_eq(gw_compress_state_reset_residual(NULL), GW_ERR_INVALID_ARG);
    const double momenta[] = {0.0, 0.9};
    const gw_codec_t codecs[] = {GW_CODEC_POWERSGD, GW_CODEC_TOPK};
    for (int k = 0; k < 2; k++) {
        gw_compress_config_t cfg = config(codecs[k]);
        cfg.momentum = momenta[k];
        gw_compress_state_t *st = NULL;
        cr_assert_eq(gw_compress_state_create(&cfg, 24, 16, &st), GW_OK);
        cr_assert(st->nextra > 0, "%s keeps no state of its own", gw_codec_name(codecs[k]));
        for (size_t i = 0; i < st->count; i++)
            st->residual[i] = (float)i + 1.0f;
        for (size_t i = 0; i < st->nextra; i++)
            st->extra[i] = (float)i - 2.5f;
        st->step = 41;
        cr_assert_eq(gw_compress_state_reset_residual(st), GW_OK);
        cr_assert_eq(gw_compress_state_step(st), 41);
        for (size_t i = 0; i < st->count; i++)
            cr_assert(st->residual[i] == 0.0f, "residual[%zu] = %g", i, st->residual[i]);
        for (size_t i = 0; i < st->nextra; i++) {
            float want = momenta[k] != 0 ? 0.0f : (float)i - 2.5f;
            cr_assert(st->extra[i] == want, "%s: extra[%zu] = %g, want %g (%s)",
                      gw_codec_name(codecs[k]), i, st->extra[i], want,
                      momenta[k] != 0 ? "the velocity is this rank's" : "Q is every rank's");
        }
        gw_compress_state_destroy(st);
    }
    /* An empty tensor has no residual to zero. */
    gw_compress_config_t cfg = config(GW_CODEC_INT8);
    gw_compress_state_t *st = NULL;
    cr_assert_eq(gw_compress_state_create(&cfg, 0, 1, &st), GW_OK);
    cr_assert_eq(gw_compress_state_reset_residual(st), GW_OK);
    gw_compress_state_destroy(st);
}

/* A rank that joins a running job: rank 1 drops its state after 3 steps
 * and takes rank 0's image, reset. The next step runs (the step counts
 * agree, so the signatures do) and every rank gets the same result. A
 * fresh state in its place is refused: it is at step 0 while rank 0 is at
 * step 3 (and still in warm-up, dense, where rank 0 compresses). */
typedef struct {
    unsigned char img[1 << 16];
    size_t len;
    int fresh;
} join_arg_t;

static void join_body(ctx_t *c, const void *argp)
{
    join_arg_t *a = (join_arg_t *)argp;
    const size_t rows = 48, cols = 32, count = rows * cols;
    gw_compress_config_t cfg = config(GW_CODEC_POWERSGD);
    cfg.warmup_steps = 2;
    gw_compress_state_t *st = NULL;
    if (gw_compress_state_create(&cfg, rows, cols, &st) != GW_OK) {
        note(c, "create failed");
        return;
    }
    float *out = malloc(count * 4), *all = malloc(2 * count * 4);
    run_steps(c, st, 0, 3, out, count);
    if (c->rank == 0) {
        gw_status_t s = gw_compress_state_save(st, a->img, sizeof(a->img), &a->len);
        CHECK(c, s == GW_OK, "save: %s", gw_status_name(s));
    }
    sync_all(c);
    if (c->rank == 1) { /* the replacement */
        gw_compress_state_destroy(st);
        st = NULL;
        gw_status_t s = gw_compress_state_create(&cfg, rows, cols, &st);
        if (s == GW_OK && !a->fresh)
            s = gw_compress_state_load(st, a->img, a->len);
        if (s == GW_OK && !a->fresh)
            s = gw_compress_state_reset_residual(st);
        CHECK(c, s == GW_OK, "the joiner's state: %s", gw_status_name(s));
    }
    float *in = malloc(count * 4);
    for (size_t i = 0; i < count; i++)
        in[i] = grad(43, c->rank, i);
    gw_status_t s = gw_allreduce_compressed(&c->comm, st, in, out, count);
    if (a->fresh) {
        CHECK(c, s == GW_ERR_MISMATCH, "a fresh joiner's state: %s, not GW_ERR_MISMATCH",
              gw_status_name(s));
    } else {
        CHECK(c, s == GW_OK, "the step after the join: %s", gw_status_name(s));
        CHECK(c, gw_compress_state_step(st) == 4, "step %llu after the join",
              (unsigned long long)gw_compress_state_step(st));
        s = gw_allgather(&c->comm, out, all, count, GW_FLOAT32);
        CHECK(c, s == GW_OK && memcmp(all, all + count, count * 4) == 0,
              "the ranks' results differ after the join");
    }
    free(in);
    free(all);
    free(out);
    gw_compress_state_destroy(st);
}

Test(compress_state, a_joiner_goes_on_from_a_members_reset_image, .timeout = 60)
{
    static join_arg_t a;
    a.fresh = 0;
    job_run(2, join_body, &a);
    a.fresh = 1;
    job_run(2, join_body, &a);
}
