/*
 * test_compress_errors.c - what goes wrong in gw_allreduce_compressed, and
 * what it costs: NaN and infinity, ranks that disagree, bad arguments, the
 * rank limit of int8, and the traffic statistics.
 */
#include <unistd.h>

#include "test_compress_harness.h"

/* ---- NaN and infinity ---- */

typedef struct bad_arg {
    gw_codec_t codec;
    int bad_rank;
    size_t bad_index;
    float bad_value;
} bad_arg_t;

/* Read back everything written to f. */
static char *slurp(FILE *f)
{
    fflush(f);
    long len = ftell(f);
    char *s = calloc(1, (size_t)(len > 0 ? len : 0) + 1);
    rewind(f);
    if (len > 0 && fread(s, 1, (size_t)len, f) != (size_t)len)
        s[0] = 0;
    return s;
}

static void nonfinite_body(ctx_t *c, const void *argp)
{
    const bad_arg_t *a = argp;
    const size_t rows = 50, cols = 40, count = rows * cols;
    gw_compress_config_t cfg = config(a->codec);
    gw_compress_state_t *st = NULL;
    if (gw_compress_state_create(&cfg, rows, cols, &st) != GW_OK) {
        note(c, "create failed");
        return;
    }
    float *in = malloc(count * 4), *out = malloc(count * 4), *res = malloc(count * 4);
    /* One good step first, so that there is a residual to preserve. */
    for (size_t i = 0; i < count; i++)
        in[i] = grad(1, c->rank, i);
    gw_status_t s = gw_allreduce_compressed(&c->comm, st, in, out, count);
    CHECK(c, s == GW_OK, "first step: %s", gw_status_name(s));
    memcpy(res, st->residual, count * 4);

    for (size_t i = 0; i < count; i++)
        in[i] = grad(2, c->rank, i);
    if (c->rank == a->bad_rank)
        in[a->bad_index] = a->bad_value;
    for (size_t i = 0; i < count; i++)
        out[i] = 12345.0f;
    FILE *log = tmpfile(), *saved = c->comm.log.file;
    c->comm.log.file = log;
    s = gw_allreduce_compressed(&c->comm, st, in, out, count);
    c->comm.log.file = saved;
    char *text = slurp(log);
    fclose(log);
    CHECK(c, s == GW_ERR_INVALID_ARG, "%s with %g at [%zu] on rank %d: %s", gw_codec_name(a->codec),
          (double)a->bad_value, a->bad_index, a->bad_rank, gw_status_name(s));
    CHECK(c, c->comm.failed == GW_OK, "the communicator broke: %s", gw_status_name(c->comm.failed));
    CHECK(c, gw_compress_state_step(st) == 1, "step advanced to %llu",
          (unsigned long long)gw_compress_state_step(st));
    CHECK(c, memcmp(res, st->residual, count * 4) == 0, "the residual changed");
    int untouched = 1;
    for (size_t i = 0; i < count; i++)
        untouched &= out[i] == 12345.0f;
    CHECK(c, untouched, "the output was written");
    if (c->rank == a->bad_rank) {
        char want[64];
        snprintf(want, sizeof(want), "element %zu is %s", a->bad_index,
                 a->bad_value != a->bad_value ? "NaN" : "infinite");
        CHECK(c, strstr(text, want) != NULL, "log does not say \"%s\": %s", want, text);
    }
    free(text);

    /* The communicator and the state carry on. */
    for (size_t i = 0; i < count; i++)
        in[i] = grad(3, c->rank, i);
    s = gw_allreduce_compressed(&c->comm, st, in, out, count);
    CHECK(c, s == GW_OK, "step after the skipped one: %s", gw_status_name(s));
    check_agree(c, "after the skipped step", out, s == GW_OK ? count * 4 : 0);
    free(in);
    free(out);
    free(res);
    gw_compress_state_destroy(st);
}

Test(compress_errors, nan_and_inf_fail_every_rank_and_spare_the_state, .timeout = 60)
{
    for (size_t k = 0; k < NCODECS; k++) {
        bad_arg_t nan_arg = {all_codecs[k], 1, 5, NAN};
        job_run(3, nonfinite_body, &nan_arg);
        bad_arg_t inf_arg = {all_codecs[k], 0, 1999, -INFINITY};
        job_run(2, nonfinite_body, &inf_arg);
    }
    bad_arg_t one = {GW_CODEC_INT8, 0, 7, INFINITY};
    job_run(1, nonfinite_body, &one);
}

/* ---- ranks that disagree ---- */

typedef struct mismatch_arg {
    gw_compress_config_t cfg0, cfg; /* rank 0's, everybody else's */
    int warm0;                      /* calls rank 0 makes before the checked one */
} mismatch_arg_t;

static void mismatch_body(ctx_t *c, const void *argp)
{
    const mismatch_arg_t *a = argp;
    const size_t count = 2048;
    gw_compress_state_t *st = NULL;
    if (gw_compress_state_create(c->rank == 0 ? &a->cfg0 : &a->cfg, 64, 32, &st) != GW_OK) {
        note(c, "create failed");
        return;
    }
    float *in = malloc(count * 4), *out = malloc(count * 4);
    for (size_t i = 0; i < count; i++)
        in[i] = grad(4, c->rank, i);
    /* Rank 0's step counter is ahead, as after loading another step's
     * checkpoint. */
    if (c->rank == 0)
        st->step += (uint64_t)a->warm0;
    gw_status_t s = gw_allreduce_compressed(&c->comm, st, in, out, count);
    CHECK(c, s == GW_ERR_MISMATCH, "got %s, expected GW_ERR_MISMATCH", gw_status_name(s));
    free(in);
    free(out);
    gw_compress_state_destroy(st);
}

Test(compress_errors, disagreeing_ranks_fail_with_mismatch, .timeout = 60)
{
    mismatch_arg_t a;
    a.cfg = config(GW_CODEC_FP16);
    a.warm0 = 0;
    a.cfg0 = config(GW_CODEC_INT8);
    job_run(3, mismatch_body, &a); /* codec */
    a.cfg0 = config(GW_CODEC_FP16);
    a.cfg0.seed ^= 1;
    job_run(2, mismatch_body, &a); /* seed */
    a.cfg0 = config(GW_CODEC_FP16);
    a.cfg0.topk_ratio = 0.5;
    job_run(2, mismatch_body, &a); /* a knob the codec does not even use */
    a.cfg0 = config(GW_CODEC_FP16);
    a.warm0 = 1;
    job_run(4, mismatch_body, &a); /* step */
    a.cfg = config(GW_CODEC_TOPK);
    a.cfg0 = a.cfg;
    a.cfg0.warmup_steps = 5; /* rank 0 dense, the others top-k */
    a.warm0 = 0;
    job_run(3, mismatch_body, &a);
}

/* ---- bad arguments ---- */

static void badcount_body(ctx_t *c, const void *argp)
{
    (void)argp;
    gw_compress_config_t cfg = config(GW_CODEC_INT8);
    gw_compress_state_t *st = NULL;
    if (gw_compress_state_create(&cfg, 100, 1, &st) != GW_OK) {
        note(c, "create failed");
        return;
    }
    float in[101] = {0}, out[101];
    /* Rank 1 passes the wrong count: it fails at once, and its peers must
     * fail too (not wait for it until the timeout). */
    size_t count = c->rank == 1 ? 101 : 100;
    gw_status_t s = gw_allreduce_compressed(&c->comm, st, in, out, count);
    CHECK(c, s == GW_ERR_INVALID_ARG, "got %s, expected GW_ERR_INVALID_ARG", gw_status_name(s));
    CHECK(c, gw_compress_state_step(st) == 0, "step advanced");
    gw_compress_state_destroy(st);
}

Test(compress_errors, bad_count_fails_every_rank, .timeout = 60)
{
    job_run(3, badcount_body, NULL);
}

Test(compress_errors, null_arguments)
{
    gw_compress_config_t cfg;
    gw_compress_config_init(&cfg);
    gw_compress_state_t *st = NULL;
    cr_assert_eq(gw_compress_state_create(NULL, 1, 1, &st), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw_compress_state_create(&cfg, 1, 1, NULL), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw_allreduce_compressed(NULL, NULL, NULL, NULL, 0), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw_compress_stats_get(NULL, NULL, NULL), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw_compress_state_step(NULL), 0);
    gw_compress_state_destroy(NULL);
    gw_compress_stats_reset(NULL);
}

Test(compress_errors, int8_refuses_more_than_127_ranks)
{
    gw_compress_config_t cfg = config(GW_CODEC_INT8);
    gw_compress_state_t *st = NULL;
    cr_assert_eq(gw_compress_state_create(&cfg, 10, 1, &st), GW_OK);
    gw_logger_t lg;
    gw__logger_init(&lg, 0);
    lg.level = GW_LOG_NONE;
    cr_assert_eq(gw__codec_int8.check_ranks(st, 127, &lg), GW_OK);
    cr_assert_eq(gw__codec_int8.check_ranks(st, 128, &lg), GW_ERR_UNSUPPORTED);
    gw__logger_fini(&lg);
    gw_compress_state_destroy(st);
}

/* ---- statistics ---- */

typedef struct stats_arg {
    gw_codec_t codec;
    double min_ratio, max_ratio;
} stats_arg_t;

static void stats_body(ctx_t *c, const void *argp)
{
    const stats_arg_t *a = argp;
    const int n = c->comm.size;
    const size_t rows = 512, cols = 128, count = rows * cols;
    gw_compress_config_t cfg = config(a->codec);
    cfg.bucket_elements = 4096;
    cfg.topk_ratio = 0.01;
    cfg.powersgd_rank = 4;
    gw_compress_state_t *st = NULL;
    if (gw_compress_state_create(&cfg, rows, cols, &st) != GW_OK) {
        note(c, "create failed");
        return;
    }
    float *in = malloc(count * 4), *out = malloc(count * 4);
    gw_compress_stats_t last, total;
    for (int step = 0; step < 2; step++) {
        for (size_t i = 0; i < count; i++)
            in[i] = grad(8 + (uint64_t)step, c->rank, i);
        gw_status_t s = gw_allreduce_compressed(&c->comm, st, in, out, count);
        CHECK(c, s == GW_OK, "%s: %s", gw_codec_name(a->codec), gw_status_name(s));
    }
    gw_compress_stats_get(st, &last, &total);
    uint64_t dense = gw__cz_ring_bytes(count, 4, n, c->rank);
    CHECK(c, last.calls == 1 && total.calls == 2, "calls %llu / %llu",
          (unsigned long long)last.calls, (unsigned long long)total.calls);
    CHECK(c, last.input_bytes == count * 4 && total.input_bytes == 2 * count * 4,
          "input bytes %llu", (unsigned long long)last.input_bytes);
    CHECK(c, last.dense_bytes_sent == dense, "dense bytes %llu, ring sends %llu",
          (unsigned long long)last.dense_bytes_sent, (unsigned long long)dense);
    CHECK(c, last.compression_ratio >= a->min_ratio && last.compression_ratio <= a->max_ratio,
          "%s on %d ranks: compression ratio %.3f not in [%.2f, %.2f] (%llu bytes sent)",
          gw_codec_name(a->codec), n, last.compression_ratio, a->min_ratio, a->max_ratio,
          (unsigned long long)last.bytes_sent);
    CHECK(c,
          total.bytes_sent >= last.bytes_sent && total.encode_seconds >= last.encode_seconds &&
              last.total_seconds >= last.comm_seconds && last.comm_seconds > 0,
          "times: total %.3g comm %.3g", last.total_seconds, last.comm_seconds);
    /* Exact traffic where it is known: int8 sends one byte per element in
     * the ring plus the shared scales (one float per bucket, 16 buckets). */
    if (a->codec == GW_CODEC_INT8) {
        uint64_t data = gw__cz_ring_bytes(count, 1, n, c->rank);
        CHECK(c, last.bytes_sent > data && last.bytes_sent <= data + 16 * 4 * 2 * (uint64_t)n,
              "int8 sent %llu bytes, data alone %llu", (unsigned long long)last.bytes_sent,
              (unsigned long long)data);
        CHECK(c, last.encoded_bytes == count, "int8 encoded %llu bytes",
              (unsigned long long)last.encoded_bytes);
    }
    if (a->codec == GW_CODEC_TOPK) {
        size_t k = (count + 99) / 100;
        uint64_t data = (uint64_t)(n - 1) * 8 * k; /* allgather */
        CHECK(c, last.bytes_sent > data && last.bytes_sent <= data + 8 * (uint64_t)n,
              "topk sent %llu bytes, data alone %llu", (unsigned long long)last.bytes_sent,
              (unsigned long long)data);
    }
    gw_compress_stats_reset(st);
    gw_compress_stats_get(st, &last, &total);
    CHECK(c, total.calls == 0 && last.calls == 0, "reset left calls");
    free(in);
    free(out);
    gw_compress_state_destroy(st);
}

Test(compress_stats, bytes_and_ratios, .timeout = 60)
{
    static const stats_arg_t cases[] = {
        {GW_CODEC_NONE, 0.5, 1.0},         {GW_CODEC_FP16, 1.95, 2.0},
        {GW_CODEC_BF16, 1.95, 2.0},        {GW_CODEC_INT8, 3.9, 4.0},
        {GW_CODEC_SIGN, 5.0, 100.0},       {GW_CODEC_TOPK, 10.0, 100.0},
        {GW_CODEC_POWERSGD, 10.0, 1000.0},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
        job_run(4, stats_body, &cases[k]);
}
