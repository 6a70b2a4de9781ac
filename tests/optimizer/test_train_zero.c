/*
 * ZeRO (--zero 1|2, optimizer/zero.c) against plain data parallelism over
 * real ranks: the same loss curve and weights to float rounding on 2 and 3
 * ranks with small buckets (blocks of uneven real length: 797 parameters
 * do not divide by 2 or 3, nor do most buckets), bitwise with one bucket
 * per layer on 2 ranks (each sum is then one commutative addition and the
 * gradients come from the same matrix products); the momentum's memory
 * per rank falls as 1/N, and stage 2's gradients with it; a checkpoint
 * written under --zero 2 on 2 ranks (one shard of the momentum per file)
 * resumes under --zero 1 on 3 and without --zero on 1; --zero 1 and 2
 * over the hybrid grid's data-parallel axis (optimizer/zero_grid.c: tensor
 * and pipeline parallel, GPipe and 1F1B) take the plain grid's steps, with
 * the momentum, and at stage 2 the gradients, sharded; and the
 * combinations it does not support are refused, naming the flag.
 */
#include "train_util.h"

/* The number after "key": in text from `from` on; NAN when absent. */
static double field(const char *text, const char *key)
{
    char pat[96];
    snprintf(pat, sizeof(pat), "\"%s\": ", key);
    const char *p = strstr(text, pat);
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}

/* Every epoch's "loss" in the report, in order; returns how many. */
static int losses(const char *json, double *out, int cap)
{
    int k = 0;
    for (const char *p = json; k < cap && (p = strstr(p, "\"loss\": ")); p += 8)
        out[k++] = strtod(p + 8, NULL);
    return k;
}

typedef struct {
    float *w;
    size_t n;
    char *json;
} result_t;

static result_t train(int n, const char *dir, const char *tag, char *const *extra)
{
    char wpath[512], jpath[512];
    snprintf(wpath, sizeof(wpath), "%s/%s.bin", dir, tag);
    snprintf(jpath, sizeof(jpath), "%s/%s.json", dir, tag);
    char *args[64] = {"--data",
                      "synthetic",
                      "--synthetic",
                      "960,96,12,5,1.5",
                      "--hidden",
                      "24,16",
                      "--batch",
                      "96",
                      "--no-shuffle",
                      "--lr",
                      "0.2",
                      "--warmup-epochs",
                      "0",
                      "--decay",
                      "none",
                      "--save-weights",
                      wpath,
                      "--json",
                      jpath,
                      "--no-progress",
                      "--quiet"};
    int k = 21;
    for (int i = 0; extra[i]; i++)
        args[k++] = extra[i];
    args[k] = NULL;
    run_result_t r = train_run(n, args, 120);
    cr_assert(!r.timed_out, "%s on %d ranks timed out:\n%s", tag, n, r.output);
    cr_assert(r.exited && r.status == 0, "%s on %d ranks failed (status %d):\n%s", tag, n, r.status,
              r.output);
    free(r.output);
    result_t res;
    size_t len;
    res.w = (float *)read_bin(wpath, &len);
    cr_assert_not_null(res.w, "%s wrote no weights", tag);
    res.n = len / sizeof(float);
    res.json = read_file(jpath);
    cr_assert_not_null(res.json, "%s wrote no report", tag);
    return res;
}

static void result_free(result_t *r)
{
    free(r->w);
    free(r->json);
}

/* Weights to 2e-5 + 2e-4 |w| (as tests/optimizer/test_train_parallel.c
 * allows between rank counts) and each epoch's mean loss to 1e-5
 * relative; or both bit for bit. b may have run only the last epochs. */
static void compare(const result_t *a, const result_t *b, const char *what, int bitwise)
{
    cr_assert_eq(a->n, b->n, "%s: %zu weights against %zu", what, b->n, a->n);
    double worst = 0;
    for (size_t i = 0; i < a->n; i++) {
        double d = fabs((double)a->w[i] - b->w[i]);
        if (bitwise)
            cr_assert(memcmp(&a->w[i], &b->w[i], sizeof(float)) == 0,
                      "%s: weight %zu is %.9g, plain data parallelism's %.9g (bitwise)", what, i,
                      b->w[i], a->w[i]);
        cr_assert(d <= 2e-5 + 2e-4 * fabs(a->w[i]),
                  "%s: weight %zu is %.9g, plain data parallelism's %.9g", what, i, b->w[i],
                  a->w[i]);
        worst = d > worst ? d : worst;
    }
    double la[16], lb[16];
    int na = losses(a->json, la, 16), nb = losses(b->json, lb, 16);
    /* A resumed run reports the epochs it ran: the last ones. */
    cr_assert(na >= 3 && nb >= 1 && nb <= na, "%s: %d epochs' losses against %d", what, nb, na);
    for (int e = na - nb; e < na; e++) {
        double x = la[e], y = lb[e - (na - nb)];
        cr_assert(bitwise ? x == y : fabs(x - y) <= 1e-5 * fabs(x),
                  "%s: epoch %d's loss %.9g, plain data parallelism's %.9g", what, e + 1, y, x);
    }
    cr_log_info("%s: largest weight difference %.3g", what, worst);
}

static void equivalence(const char *bucket_kb, int bitwise, const int *ranks, int nranks)
{
    char *dir = make_tmpdir("trainzero");
    cr_assert_not_null(dir);
    for (int i = 0; i < nranks; i++) {
        int n = ranks[i];
        char *plain[] = {"--steps", "30", "--bucket-kb", (char *)bucket_kb, NULL};
        result_t p = train(n, dir, "plain", plain);
        const char *stages[][3] = {{"1", NULL}, {"2", NULL}, {"2", "--no-overlap"}};
        for (int s = 0; s < 3; s++) {
            char *z[] = {"--steps",
                         "30",
                         "--bucket-kb",
                         (char *)bucket_kb,
                         "--zero",
                         (char *)stages[s][0],
                         (char *)stages[s][1],
                         NULL};
            result_t r = train(n, dir, "zero", z);
            char what[96];
            snprintf(what, sizeof(what), "--zero %s%s on %d ranks, %s KiB buckets", stages[s][0],
                     stages[s][1] ? " --no-overlap" : "", n, bucket_kb);
            compare(&p, &r, what, bitwise);
            result_free(&r);
        }
        /* The steps moved the weights: comparing untrained ones proves nothing. */
        char *none[] = {"--steps", "1", "--lr", "0", NULL};
        result_t z = train(n, dir, "none", none);
        double moved = 0;
        for (size_t k = 0; k < p.n; k++)
            moved += fabs((double)p.w[k] - z.w[k]);
        cr_assert(moved > 1e-1, "training did not change the weights (%g)", moved);
        result_free(&z);
        result_free(&p);
    }
    remove_tree(dir);
    free(dir);
}

Test(train_zero, matches_plain_data_parallelism_with_small_buckets, .timeout = 300)
{
    /* 1 KiB: 256 floats, so every layer is several buckets of a few rows. */
    int ranks[] = {2, 3};
    equivalence("1", 0, ranks, 2);
}

Test(train_zero, one_bucket_per_layer_on_two_ranks_is_bitwise, .timeout = 300)
{
    int ranks[] = {2};
    equivalence("1024", 1, ranks, 1);
}

/* The report's memory figures of one step on n ranks. */
static void memory(int n, const char *dir, const char *zero, double *params, double *grads,
                   double *opt)
{
    char *args[] = {"--steps", "1",      "--hidden",   "256,256", "--bucket-kb",
                    "16",      "--zero", (char *)zero, NULL};
    result_t r = train(n, dir, "mem", args);
    const char *m = strstr(r.json, "\"memory\": ");
    cr_assert_not_null(m, "no memory figures in the report:\n%s", r.json);
    cr_assert_eq(field(m, "zero"), atoi(zero), "%s", m);
    *params = field(m, "params");
    *grads = field(m, "grads");
    *opt = field(m, "optimizer");
    cr_log_info("--zero %s on %d ranks: params %.0f grads %.0f optimizer %.0f bytes", zero, n,
                *params, *grads, *opt);
    result_free(&r);
}

Test(train_zero, memory_per_rank_falls_as_one_over_n, .timeout = 300)
{
    char *dir = make_tmpdir("trainzeromem");
    cr_assert_not_null(dir);
    /* 12-256-256-5: 70,917 parameters; buckets of 4096 floats: 19 of them. */
    const double P = 4.0 * (12 * 256 + 256 + 256 * 256 + 256 + 256 * 5 + 5), pad = 4.0 * 19;
    double p, g, o;
    memory(2, dir, "0", &p, &g, &o);
    cr_assert(p == P && g == P && o == P, "plain data parallelism holds the whole model");
    int ns[] = {1, 2, 4};
    double g2_prev = 0;
    for (int i = 0; i < 3; i++) {
        int n = ns[i];
        memory(n, dir, "1", &p, &g, &o);
        cr_assert(p == P, "the weights stay whole");
        cr_assert(o >= P / n && o <= P / n + pad, "ZeRO-1's momentum on %d ranks: %.0f bytes", n,
                  o);
        cr_assert(g >= P && g <= P + n * pad, "ZeRO-1 keeps the whole gradient: %.0f", g);
        double o1 = o;
        memory(n, dir, "2", &p, &g, &o);
        cr_assert_eq(o, o1, "the same momentum shard at stage 2");
        /* The shard plus backward's two-bucket workspace (16 KiB each, and
         * at most n - 1 floats of padding). */
        cr_assert(g >= o + 2 * 16384 && g <= o + 2 * (16384 + 4.0 * (256 + n)),
                  "ZeRO-2's gradients on %d ranks: %.0f bytes", n, g);
        if (i > 0)
            cr_assert(g < g2_prev, "ZeRO-2's gradients do not fall from %.0f on %d ranks", g2_prev,
                      n);
        g2_prev = g;
    }
    remove_tree(dir);
    free(dir);
}

Test(train_zero, checkpoint_resumes_on_another_data_parallel_size, .timeout = 300)
{
    char *dir = make_tmpdir("trainzerock");
    cr_assert_not_null(dir);
    char ck[512], latest[600];
    snprintf(ck, sizeof(ck), "%s/ck", dir);
    snprintf(latest, sizeof(latest), "%s/latest", ck);
    /* 30 steps of plain data parallelism, the reference. */
    char *plain[] = {"--steps", "30", "--bucket-kb", "1", NULL};
    result_t ref = train(2, dir, "plain", plain);
    /* The same under --zero 2 on 2 ranks, with checkpoints at steps 20 and 30. */
    char *z2[] = {"--steps",          "30", "--bucket-kb",        "1",  "--zero", "2",
                  "--checkpoint-dir", ck,   "--checkpoint-every", "10", NULL};
    result_t a = train(2, dir, "z2", z2);
    compare(&ref, &a, "--zero 2 with checkpoints", 0);
    /* Each file holds the weights and the rank's shard of the momentum:
     * less than the two whole arrays a plain checkpoint holds. */
    char file[700];
    snprintf(file, sizeof(file), "%s/ckpt-00000020-rank1.gwc", ck);
    size_t flen = 0;
    free(read_bin(file, &flen));
    cr_assert(flen > 0 && flen < 2 * sizeof(float) * a.n,
              "%s has %zu bytes: not a shard of the momentum (%zu parameters)", file, flen, a.n);
    /* Back to step 20, then on 3 ranks under --zero 1: every rank puts the
     * momentum together from the 2 ranks' shards and takes its blocks. */
    write_bin(latest, "20\n", 3);
    char *z1[] = {"--steps",          "30", "--bucket-kb", "1", "--zero", "1",
                  "--checkpoint-dir", ck,   "--resume",    NULL};
    result_t b = train(3, dir, "resumed", z1);
    compare(&ref, &b, "--zero 2 on 2 ranks resumed under --zero 1 on 3", 0);
    cr_assert(strstr(b.json, "\"epoch\": 3") != NULL, "the resumed run did the third epoch");
    /* And without --zero, on one rank: the whole momentum from the shards. */
    write_bin(latest, "20\n", 3);
    char *plain1[] = {"--steps",          "30", "--bucket-kb", "1",
                      "--checkpoint-dir", ck,   "--resume",    NULL};
    result_t c = train(1, dir, "plain1", plain1);
    compare(&ref, &c, "--zero 2 on 2 ranks resumed without --zero on 1", 0);
    result_free(&c);
    /* A plain checkpoint (the whole momentum, format version 1) resumes
     * under --zero 2 on 3 ranks. */
    char ckp[512], latestp[600];
    snprintf(ckp, sizeof(ckp), "%s/ckplain", dir);
    snprintf(latestp, sizeof(latestp), "%s/latest", ckp);
    char *plainck[] = {
        "--steps", "30", "--bucket-kb", "1", "--checkpoint-dir", ckp, "--checkpoint-every",
        "10",      NULL};
    result_t d = train(2, dir, "plainck", plainck);
    result_free(&d);
    write_bin(latestp, "20\n", 3);
    char *z2r[] = {"--steps",          "30", "--bucket-kb", "1", "--zero", "2",
                   "--checkpoint-dir", ckp,  "--resume",    NULL};
    d = train(3, dir, "z2resumed", z2r);
    compare(&ref, &d, "plain on 2 ranks resumed under --zero 2 on 3", 0);
    result_free(&d);
    result_free(&ref);
    result_free(&a);
    result_free(&b);
    remove_tree(dir);
    free(dir);
}

static void refused(const char *flag, char *const *extra)
{
    /* Stage 2, which is refused wherever stage 1 is, and more. */
    char *args[16] = {"--data", "synthetic", "--steps", "1", "--zero", "2"};
    int k = 6;
    for (int i = 0; extra[i]; i++)
        args[k++] = extra[i];
    args[k] = NULL;
    run_result_t r = train_run(0, args, 60);
    cr_assert(r.exited && r.status == 2, "--zero with %s: status %d, not a usage error:\n%s", flag,
              r.status, r.output);
    cr_assert(strstr(r.output, "--zero") && strstr(r.output, flag),
              "the refusal of --zero with %s does not name both:\n%s", flag, r.output);
    free(r.output);
}

Test(train_zero, what_does_not_combine_is_refused, .timeout = 60)
{
    refused("--async", (char *[]){"--async", NULL});
    refused("--codec", (char *[]){"--codec", "fp16", NULL});
    refused("--elastic", (char *[]){"--elastic", NULL});
    refused("--straggler balance", (char *[]){"--straggler", "balance", NULL});
    char *bad[] = {"--data", "synthetic", "--zero", "3", NULL};
    run_result_t r = train_run(0, bad, 60);
    cr_assert(r.exited && r.status == 2 && strstr(r.output, "--zero wants 0, 1 or 2"), "%s",
              r.output);
    free(r.output);
}

/* The hybrid grid, 6 ranks: data x model parallel, plain and with --zero 1
 * and 2 (xopt xval: one more option for every run, or NULL). Each --zero run takes
 * the plain grid's steps (bit for bit where `bitwise`: stage 2 adds the
 * micro-batches after the sum over ranks, so only stage 1 is bitwise with
 * several of them, or units smaller than a layer); rank 0's momentum is
 * its share's over dp, and its gradients at stage 2 are a shard and one
 * unit's room, less than the share when the units are (--bucket-kb 1). */
static void grid(const char *mp, const char *k, int dp, int bitwise, int bitwise2, const char *xopt,
                 const char *xval)
{
    char *dir = make_tmpdir("trainzerogrid");
    cr_assert_not_null(dir);
    char *plain[] = {"--steps", "30", (char *)mp, (char *)k, (char *)xopt, (char *)xval, NULL};
    result_t p = train(6, dir, "plain", plain);
    const char *mp_p = strstr(p.json, "\"memory_per_rank\"");
    cr_assert(mp_p, "no per-rank memory in the grid's report");
    double n = field(mp_p, "optimizer");
    cr_assert_eq(field(mp_p, "params"), n, "plain: a momentum per parameter");
    cr_assert_eq(field(mp_p, "grads"), n, "plain: a gradient per parameter");
    for (int stage = 1; stage <= 2; stage++) {
        char zs[2] = {(char)('0' + stage), 0};
        char *z[] = {"--steps", "30",         (char *)mp,   (char *)k, "--zero",
                     zs,        (char *)xopt, (char *)xval, NULL};
        result_t r = train(6, dir, "zero", z);
        char what[128];
        int small_units = xopt && strcmp(xopt, "--bucket-kb") == 0;
        snprintf(what, sizeof(what), "--zero %d with %s %s%s%s (%d data-parallel ranks)", stage, mp,
                 k, xopt ? " " : "", xopt ? xopt : "", dp);
        compare(&p, &r, what, stage == 1 ? bitwise : bitwise2);
        const char *mp_z = strstr(r.json, "\"memory_per_rank\"");
        cr_assert(mp_z, "no per-rank memory in the grid's report");
        double shard = field(mp_z, "optimizer"), grads = field(mp_z, "grads");
        if (stage == 1) {
            cr_assert_eq(shard, 4 * ceil(n / 4 / dp), "%s: %.0f bytes of momentum, not %.0f / %d",
                         what, shard, n, dp);
        } else {
            /* A block per unit: at most dp - 1 floats of padding each. */
            cr_assert(shard >= n / dp && shard <= 1.5 * n / dp,
                      "%s: %.0f bytes of momentum, not %.0f / %d", what, shard, n, dp);
            cr_assert(grads > shard, "%s: %.0f bytes of gradients, less than the shard %.0f", what,
                      grads, shard);
            /* With 1 KiB units the shard and one unit's room are less
             * than the share (with whole layers as units, rank 0's one
             * layer, they are not). */
            if (small_units)
                cr_assert(grads < n, "%s: %.0f bytes of gradients for a share of %.0f (shard %.0f)",
                          what, grads, n, shard);
        }
        result_free(&r);
    }
    result_free(&p);
    remove_tree(dir);
    free(dir);
}

Test(train_zero, hybrid_grid_tensor_parallel, .timeout = 300)
{
    /* 3 x 2: blocks of uneven length; the sums may be ordered otherwise;
     * units of 1 KiB, several per layer. */
    grid("--tensor-parallel", "2", 3, 0, 0, "--bucket-kb", "1");
}

Test(train_zero, hybrid_grid_tensor_parallel_two_data_ranks, .timeout = 300)
{
    /* 2 x 3, one micro-batch: every sum is one commutative addition, so
     * both stages are bit for bit. */
    grid("--tensor-parallel", "3", 2, 1, 1, NULL, NULL);
}

Test(train_zero, hybrid_grid_pipeline_parallel, .timeout = 300)
{
    /* 2 x 3, three micro-batches: stage 1 bit for bit, stage 2 sums them
     * after the ranks. */
    grid("--pipeline-parallel", "3", 2, 1, 0, NULL, NULL);
}

Test(train_zero, hybrid_grid_pipeline_1f1b, .timeout = 300)
{
    grid("--pipeline-parallel", "3", 2, 1, 0, "--schedule", "1f1b");
}
