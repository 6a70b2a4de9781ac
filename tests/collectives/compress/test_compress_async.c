/*
 * test_compress_async.c - gw_iallreduce_compressed, one thread per rank over
 * the in-memory transport (test_compress_harness.h); each rank's
 * communicator gets its own progress thread, as in a real process.
 *
 * What is checked, and how:
 *  - every codec over 2, 3, 4 and 8 ranks: the same steps run once with
 *    blocking calls (before the communicator has a progress thread) and once
 *    with every step of every codec in flight together, on twin states, with
 *    dense gw_iallreduce calls and a blocking call queued in between; the
 *    outputs and the final states (their saved images) are bitwise equal,
 *    and every rank's outputs are the same;
 *  - handles complete in call order: once a later one is done, every
 *    earlier one is too;
 *  - a NaN in one rank's input of one of several calls in flight fails that
 *    handle on every rank with GW_ERR_INVALID_ARG and leaves its state as
 *    it was; the calls around it complete normally;
 *  - argument errors: NULL communicator or handle at once, a NULL state or
 *    a wrong count when the handle completes.
 */
#include "collectives/api/api.h"
#include "test_compress_harness.h"

#define STEPS 3
#define COUNT 1001

typedef struct twin {
    gw_compress_state_t *a, *b;
    float *in[STEPS], *ref[STEPS], *out[STEPS];
    gw_handle_t *h[STEPS];
} twin_t;

static int same_image(const gw_compress_state_t *a, const gw_compress_state_t *b)
{
    size_t la = 0, lb = 0;
    if (gw_compress_state_save(a, NULL, 0, &la) != GW_OK ||
        gw_compress_state_save(b, NULL, 0, &lb) != GW_OK || la != lb)
        return 0;
    uint8_t *ia = malloc(la), *ib = malloc(lb);
    int same = ia && ib && gw_compress_state_save(a, ia, la, &la) == GW_OK &&
               gw_compress_state_save(b, ib, lb, &lb) == GW_OK && memcmp(ia, ib, la) == 0;
    free(ia);
    free(ib);
    return same;
}

static void equal_body(ctx_t *c, const void *argp)
{
    (void)argp;
    size_t rows, cols;
    shape_of(COUNT, &rows, &cols);
    twin_t tw[NCODECS];
    memset(tw, 0, sizeof(tw));
    for (size_t k = 0; k < NCODECS; k++) {
        gw_compress_config_t cfg = config(all_codecs[k]);
        if (all_codecs[k] == GW_CODEC_TOPK)
            cfg.momentum = 0.5;
        if (gw_compress_state_create(&cfg, rows, cols, &tw[k].a) != GW_OK ||
            gw_compress_state_create(&cfg, rows, cols, &tw[k].b) != GW_OK) {
            note(c, "create %s failed", gw_codec_name(all_codecs[k]));
            return;
        }
        for (int s = 0; s < STEPS; s++) {
            tw[k].in[s] = malloc(COUNT * 4);
            tw[k].ref[s] = malloc(COUNT * 4);
            tw[k].out[s] = malloc(COUNT * 4);
            for (size_t i = 0; i < COUNT; i++)
                tw[k].in[s][i] = grad(900 + (uint64_t)s, c->rank, i);
        }
    }
    /* The reference: blocking calls, no progress thread yet. */
    for (int s = 0; s < STEPS; s++)
        for (size_t k = 0; k < NCODECS; k++) {
            gw_status_t st =
                gw_allreduce_compressed(&c->comm, tw[k].a, tw[k].in[s], tw[k].ref[s], COUNT);
            CHECK(c, st == GW_OK, "blocking %s step %d: %s", gw_codec_name(all_codecs[k]), s,
                  gw_status_name(st));
        }
    /* One more blocking compressed call, to be repeated among the
     * non-blocking ones below (where it must queue behind them). */
    gw_compress_config_t mid_cfg = config(GW_CODEC_INT8);
    gw_compress_state_t *mid_a = NULL, *mid_b = NULL;
    float *mid_in = malloc(COUNT * 4), *mid_ref = malloc(COUNT * 4), *mid_out = malloc(COUNT * 4);
    if (gw_compress_state_create(&mid_cfg, COUNT, 1, &mid_a) != GW_OK ||
        gw_compress_state_create(&mid_cfg, COUNT, 1, &mid_b) != GW_OK) {
        note(c, "create failed");
        return;
    }
    for (size_t i = 0; i < COUNT; i++)
        mid_in[i] = grad(940, c->rank, i);
    gw_status_t st = gw_allreduce_compressed(&c->comm, mid_a, mid_in, mid_ref, COUNT);
    CHECK(c, st == GW_OK, "blocking int8: %s", gw_status_name(st));
    CHECK(c, c->comm.async == NULL, "blocking compressed calls started a progress thread");

    /* Everything in flight at once, dense calls and a blocking one between. */
    float dense[64], dense_out[64];
    for (int i = 0; i < 64; i++)
        dense[i] = (float)(c->rank + i);
    gw_handle_t *hd1 = NULL, *hd2 = NULL;
    st = gw_iallreduce(&c->comm, dense, dense_out, 64, GW_FLOAT32, GW_SUM, &hd1);
    CHECK(c, st == GW_OK, "gw_iallreduce: %s", gw_status_name(st));
    for (int s = 0; s < STEPS; s++) {
        for (size_t k = 0; k < NCODECS; k++) {
            st = gw_iallreduce_compressed(&c->comm, tw[k].b, tw[k].in[s], tw[k].out[s], COUNT,
                                          &tw[k].h[s]);
            CHECK(c, st == GW_OK, "gw_iallreduce_compressed %s step %d: %s",
                  gw_codec_name(all_codecs[k]), s, gw_status_name(st));
        }
        if (s == 0) {
            st = gw_iallreduce(&c->comm, dense, dense, 64, GW_FLOAT32, GW_MAX, &hd2);
            CHECK(c, st == GW_OK, "gw_iallreduce: %s", gw_status_name(st));
            st = gw_allreduce_compressed(&c->comm, mid_b, mid_in, mid_out, COUNT);
            CHECK(c, st == GW_OK && memcmp(mid_out, mid_ref, COUNT * 4) == 0,
                  "a blocking compressed call among non-blocking ones: %s, %s", gw_status_name(st),
                  st == GW_OK ? "differs" : "failed");
        }
    }
    /* A blocking call queues behind all of them. */
    int64_t one = 1, n = 0;
    st = gw_allreduce(&c->comm, &one, &n, 1, GW_INT64, GW_SUM);
    CHECK(c, st == GW_OK && n == c->comm.size, "blocking allreduce behind them: %s, %lld",
          gw_status_name(st), (long long)n);
    /* It ran after every queued call: those are all done now. */
    for (size_t k = 0; k < NCODECS; k++)
        for (int s = 0; s < STEPS; s++) {
            int done = 0;
            st = gw_test(tw[k].h[s], &done);
            CHECK(c, st == GW_OK && done,
                  "%s step %d not done after a later blocking call "
                  "(%s)",
                  gw_codec_name(all_codecs[k]), s, gw_status_name(st));
            if (!done)
                gw_wait(tw[k].h[s]);
        }
    CHECK(c, gw_wait(hd2) == GW_OK && gw_wait(hd1) == GW_OK, "dense handles failed");
    for (int i = 0; i < 64; i++) {
        float want = (float)(c->comm.size * i + c->comm.size * (c->comm.size - 1) / 2);
        CHECK(c, dense_out[i] == want, "dense sum element %d: %g, want %g", i, (double)dense_out[i],
              (double)want);
        if (dense_out[i] != want)
            break;
    }
    for (size_t k = 0; k < NCODECS; k++) {
        const char *name = gw_codec_name(all_codecs[k]);
        for (int s = 0; s < STEPS; s++) {
            CHECK(c, memcmp(tw[k].out[s], tw[k].ref[s], COUNT * 4) == 0,
                  "%s step %d: non-blocking result differs from the blocking one", name, s);
            check_agree(c, name, tw[k].out[s], COUNT * 4);
        }
        CHECK(c, same_image(tw[k].a, tw[k].b), "%s: the states differ after the same steps", name);
        gw_compress_stats_t ta, tb;
        gw_compress_stats_get(tw[k].a, NULL, &ta);
        gw_compress_stats_get(tw[k].b, NULL, &tb);
        CHECK(c, ta.calls == STEPS && tb.calls == STEPS && ta.bytes_sent == tb.bytes_sent,
              "%s: statistics %llu / %llu calls, %llu / %llu bytes", name,
              (unsigned long long)ta.calls, (unsigned long long)tb.calls,
              (unsigned long long)ta.bytes_sent, (unsigned long long)tb.bytes_sent);
        for (int s = 0; s < STEPS; s++) {
            free(tw[k].in[s]);
            free(tw[k].ref[s]);
            free(tw[k].out[s]);
        }
        gw_compress_state_destroy(tw[k].a);
        gw_compress_state_destroy(tw[k].b);
    }
    gw_compress_state_destroy(mid_a);
    gw_compress_state_destroy(mid_b);
    free(mid_in);
    free(mid_ref);
    free(mid_out);
    gw__async_stop(&c->comm);
}

Test(compress_async, equals_blocking_bitwise_in_order, .timeout = 120)
{
    static const int ranks[] = {1, 2, 3, 4, 8};
    for (size_t i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++)
        job_run(ranks[i], equal_body, NULL);
}

/* ---- completion order ---- */

static void order_body(ctx_t *c, const void *argp)
{
    (void)argp;
    enum { NCALLS = 8 };
    const size_t count = 20000;
    gw_compress_config_t cfg = config(GW_CODEC_INT8);
    gw_compress_state_t *st[NCALLS];
    float *buf[NCALLS];
    gw_handle_t *h[NCALLS];
    for (int k = 0; k < NCALLS; k++) {
        if (gw_compress_state_create(&cfg, count, 1, &st[k]) != GW_OK) {
            note(c, "create failed");
            return;
        }
        buf[k] = malloc(count * 4);
        for (size_t i = 0; i < count; i++)
            buf[k][i] = grad(950 + (uint64_t)k, c->rank, i);
        /* In place, from the caller's thread's point of view untouched
         * until completion. */
        gw_status_t s = gw_iallreduce_compressed(&c->comm, st[k], buf[k], buf[k], count, &h[k]);
        CHECK(c, s == GW_OK, "call %d: %s", k, gw_status_name(s));
    }
    /* Poll the last; when it is done every earlier one must be. */
    int done = 0;
    while (!done) {
        gw_status_t s = gw_test(h[NCALLS - 1], &done);
        CHECK(c, s == GW_OK, "gw_test of the last call: %s", gw_status_name(s));
        if (s != GW_OK)
            break;
    }
    for (int k = NCALLS - 2; k >= 0; k--) {
        int d = 0;
        gw_status_t s = gw_test(h[k], &d);
        CHECK(c, s == GW_OK && d == 1, "call %d not complete after call %d (%s)", k, NCALLS - 1,
              gw_status_name(s));
        if (!d)
            gw_wait(h[k]);
    }
    for (int k = 0; k < NCALLS; k++) {
        CHECK(c, gw_compress_state_step(st[k]) == 1, "call %d: state at step %llu", k,
              (unsigned long long)gw_compress_state_step(st[k]));
        check_agree(c, "int8 in place", buf[k], count * 4);
        gw_compress_state_destroy(st[k]);
        free(buf[k]);
    }
    gw__async_stop(&c->comm);
}

Test(compress_async, handles_complete_in_call_order, .timeout = 60)
{
    job_run(3, order_body, NULL);
}

/* ---- a NaN among calls in flight ---- */

static void nan_body(ctx_t *c, const void *argp)
{
    (void)argp;
    const int n = c->comm.size;
    const size_t count = 3000;
    gw_compress_config_t cfg = config(GW_CODEC_FP16);
    gw_compress_state_t *st[3];
    float *in[3], *out[3];
    gw_handle_t *h[3];
    for (int k = 0; k < 3; k++) {
        if (gw_compress_state_create(&cfg, count, 1, &st[k]) != GW_OK) {
            note(c, "create failed");
            return;
        }
        in[k] = malloc(count * 4);
        out[k] = malloc(count * 4);
        for (size_t i = 0; i < count; i++) {
            in[k][i] = grad(970 + (uint64_t)k, c->rank, i);
            out[k][i] = -1.0f;
        }
    }
    if (c->rank == n - 1)
        in[1][777] = NAN;
    FILE *saved = c->comm.log.file, *devnull = fopen("/dev/null", "w");
    c->comm.log.file = devnull; /* the progress thread logs the NaN */
    for (int k = 0; k < 3; k++) {
        gw_status_t s = gw_iallreduce_compressed(&c->comm, st[k], in[k], out[k], count, &h[k]);
        CHECK(c, s == GW_OK, "call %d: %s", k, gw_status_name(s));
    }
    gw_status_t s0 = gw_wait(h[0]), s2 = gw_wait(h[2]), s1 = gw_wait(h[1]);
    c->comm.log.file = saved;
    fclose(devnull);
    CHECK(c, s0 == GW_OK && s2 == GW_OK, "the calls around the NaN: %s, %s", gw_status_name(s0),
          gw_status_name(s2));
    CHECK(c, s1 == GW_ERR_INVALID_ARG, "the call with a NaN on rank %d: %s", n - 1,
          gw_status_name(s1));
    CHECK(c, gw_compress_state_step(st[1]) == 0, "the failed call advanced its state");
    size_t touched = 0;
    for (size_t i = 0; i < count; i++)
        touched += out[1][i] != -1.0f || st[1]->residual[i] != 0.0f;
    CHECK(c, touched == 0, "the failed call wrote %zu output or residual elements", touched);
    check_agree(c, "fp16 after a NaN", out[2], count * 4);
    /* The communicator is still usable, also for the failed state. */
    in[1][777] = 0.25f;
    gw_status_t s = gw_iallreduce_compressed(&c->comm, st[1], in[1], out[1], count, &h[1]);
    if (s == GW_OK)
        s = gw_wait(h[1]);
    CHECK(c, s == GW_OK, "the call after the NaN: %s", gw_status_name(s));
    for (int k = 0; k < 3; k++) {
        gw_compress_state_destroy(st[k]);
        free(in[k]);
        free(out[k]);
    }
    gw__async_stop(&c->comm);
}

Test(compress_async, nan_fails_its_handle_on_every_rank, .timeout = 60)
{
    job_run(3, nan_body, NULL);
    job_run(2, nan_body, NULL);
}

/* ---- argument errors ---- */

static void args_body(ctx_t *c, const void *argp)
{
    (void)argp;
    gw_compress_config_t cfg = config(GW_CODEC_BF16);
    gw_compress_state_t *st = NULL;
    if (gw_compress_state_create(&cfg, 10, 1, &st) != GW_OK) {
        note(c, "create failed");
        return;
    }
    float in[10] = {0}, out[10];
    gw_handle_t *h = NULL;
    CHECK(c, gw_iallreduce_compressed(NULL, st, in, out, 10, &h) == GW_ERR_INVALID_ARG,
          "NULL comm accepted");
    CHECK(c, gw_iallreduce_compressed(&c->comm, st, in, out, 10, NULL) == GW_ERR_INVALID_ARG,
          "NULL handle accepted");
    FILE *saved = c->comm.log.file, *devnull = fopen("/dev/null", "w");
    c->comm.log.file = devnull;
    gw_status_t s = gw_iallreduce_compressed(&c->comm, st, in, out, 11, &h);
    CHECK(c, s == GW_OK, "a wrong count is refused at once (%s), not on completion",
          gw_status_name(s));
    if (s == GW_OK)
        s = gw_wait(h);
    CHECK(c, s == GW_ERR_INVALID_ARG, "wrong count: %s", gw_status_name(s));
    c->comm.failed = GW_OK; /* one rank: nobody else to tell */
    s = gw_iallreduce_compressed(&c->comm, NULL, in, out, 10, &h);
    if (s == GW_OK)
        s = gw_wait(h);
    CHECK(c, s == GW_ERR_INVALID_ARG, "NULL state: %s", gw_status_name(s));
    c->comm.log.file = saved;
    fclose(devnull);
    gw_compress_state_destroy(st);
    gw__async_stop(&c->comm);
}

Test(compress_async, argument_errors) { job_run(1, args_body, NULL); }
