/*
 * Stragglers in synchronous training (optimizer/straggler.c), over real
 * ranks on this host, with one rank made slow by the trainer's test-only
 * knob GW_TRAIN_TEST_SLOW=RANK:US (it sleeps US microseconds per sample of
 * its share; tests/optimizer/straggler_hosts.sh slows a host for real,
 * with a CPU quota, on emulated hosts).
 *
 *  - The report names the slow rank, and the others' wait dominates.
 *  - --straggler balance gives the slow rank a smaller share, lowers the
 *    fast ranks' typical (median) wait per step, and ends within a stated
 *    tolerance of the unmitigated run's loss (the sample order differs, see
 *    straggler.c).
 *
 * What is asserted must hold on any machine, idle or loaded: the injected
 * delay (2 ms a sample) dwarfs a sample's compute on any CPU this runs on
 * (tens of microseconds here, a few hundred under the sanitizers), so the
 * fast ranks wait for the slow one whatever the CPU's speed. The run's
 * overall wait share is not compared between the two runs: the steps before
 * the first split are unbalanced in both, and how much of the run they are
 * depends on the CPU's speed against the delay (on a fast machine they were
 * most of the balanced run's wait). The per-step medians are the balanced
 * steps' own; the overall shares are printed, not judged.
 *  - A balanced step is the step one rank takes on the same global batch:
 *    with the shares split unevenly, 3 balanced ranks end with one rank's
 *    weights to float rounding (the 1/global-batch weighting and the
 *    slices of the one permutation are what makes this hold).
 *  - Where balance does not apply it is refused, saying why.
 */
#include "train_util.h"

/* The trainer alone (n 0) or under `gradwire launch -n N`, with the slow knob. */
static run_result_t run_slow(int n, const char *slow, char *const *extra)
{
    char *argv[128], nbuf[16], knob[64];
    char timeout_env[] = "GW_TIMEOUT_MS=60000";
    snprintf(knob, sizeof(knob), "GW_TRAIN_TEST_SLOW=%s", slow ? slow : "");
    char *env[] = {timeout_env, knob, NULL};
    require_trainer();
    train_argv(argv, n, nbuf, extra);
    return run_cmd(argv, env, 200);
}

static void must_pass(run_result_t r, const char *what)
{
    cr_assert(!r.timed_out, "%s timed out:\n%s", what, r.output);
    cr_assert(r.exited && r.status == 0, "%s failed (status %d):\n%s", what, r.status, r.output);
}

/* The number after "key": in s (the first one from s on); NAN if none. */
static double json_num(const char *s, const char *key)
{
    char pat[96];
    snprintf(pat, sizeof(pat), "\"%s\": ", key);
    const char *p = s ? strstr(s, pat) : NULL;
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}

/* Field key of rank r's object in the report's "stragglers" table. */
static double rank_num(const char *json, int r, const char *key)
{
    const char *t = strstr(json, "\"stragglers\"");
    cr_assert_not_null(t, "no stragglers object in the report:\n%s", json);
    char pat[48];
    snprintf(pat, sizeof(pat), "{\"rank\": %d,", r);
    const char *p = strstr(t, pat);
    cr_assert_not_null(p, "no rank %d in the stragglers table", r);
    return json_num(p, key);
}

/* A task with enough compute per sample that a fast rank's share is
 * measurable: 3 ranks, 96 per step, 2 epochs of 31 steps. */
static char *run_job(const char *dir, const char *tag, const char *slow, const char *mitigation)
{
    char json[512];
    snprintf(json, sizeof(json), "%s/%s.json", dir, tag);
    char *args[] = {"--data",          "synthetic", "--synthetic", "3000,600,128,5,4",
                    "--hidden",        "256,256",   "--batch",     "96",
                    "--epochs",        "2",         "--straggler", (char *)mitigation,
                    "--balance-every", "8",         "--json",      json,
                    "--no-progress",   NULL};
    run_result_t r = run_slow(3, slow, args);
    must_pass(r, tag);
    cr_log_info("%s:\n%s", tag, r.output);
    free(r.output);
    char *text = read_file(json);
    cr_assert_not_null(text, "no report %s", json);
    return text;
}

Test(train_straggler, slow_rank_named_and_balance_lowers_its_wait, .timeout = 300)
{
    char *dir = make_tmpdir("trainstrag");
    cr_assert_not_null(dir);
    char *plain = run_job(dir, "plain", "1:2000", "none");
    char *bal = run_job(dir, "balance", "1:2000", "balance");

    cr_assert_eq(json_num(plain, "slowest_rank"), 1, "the slow rank is not named:\n%s", plain);
    double share = json_num(plain, "wait_share");
    cr_assert(share > 0.25, "without mitigation only %.3f of the run was lost waiting", share);
    for (int r = 0; r < 3; r += 2)
        cr_assert(rank_num(plain, r, "wait_share") > 2 * rank_num(plain, 1, "wait_share") + 0.1,
                  "rank %d does not wait for rank 1:\n%s", r, plain);
    cr_assert_eq(rank_num(plain, 1, "batch"), 32);

    /* Balanced: rank 1's share shrank, well below an even third, and is
     * the smallest; the sum is kept. How the rest is split between the
     * two fast ranks follows their measured speed, which is the machine's:
     * beside a benchmark on 2 cores rank 0 was slower than rank 2 and
     * ended with 29 (shares 29 1 66), where this test once wanted each
     * fast rank above 32. */
    double b0 = rank_num(bal, 0, "batch"), b1 = rank_num(bal, 1, "batch"),
           b2 = rank_num(bal, 2, "batch");
    cr_assert_eq(b0 + b1 + b2, 96, "the shares %g+%g+%g are not the global batch", b0, b1, b2);
    cr_assert(b1 < 24 && b1 < b0 && b1 < b2, "shares %g %g %g: the slow rank 1 not relieved", b0,
              b1, b2);
    cr_assert(json_num(bal, "rebalances") >= 1);
    /* A fast rank's typical step no longer waits out rank 1's delay: 32
     * samples of 2 ms (64 ms) unbalanced; with rank 1's share down to a
     * few samples, what is left is the imbalance of rounding and the
     * allreduce. Half is a wide margin either way. */
    for (int r = 0; r < 3; r += 2) {
        double wp = rank_num(plain, r, "wait_median_s"), wb = rank_num(bal, r, "wait_median_s");
        cr_assert(wb < 0.5 * wp, "rank %d's median wait per step %.2f ms balanced, %.2f ms without",
                  r, 1e3 * wb, 1e3 * wp);
    }
    cr_log_info("rank 0 median wait %.2f ms -> %.2f ms", 1e3 * rank_num(plain, 0, "wait_median_s"),
                1e3 * rank_num(bal, 0, "wait_median_s"));
    cr_log_info("wait share %.3f -> %.3f, train time %.2f s -> %.2f s", share,
                json_num(bal, "wait_share"), json_num(plain, "train_s"), json_num(bal, "train_s"));

    /* The same task, other sample orders: the final loss agrees to 0.05
     * (the two runs' losses here are about 0.1-0.2). */
    double loss_p = json_num(strstr(plain, "{\"epoch\": 2,"), "loss");
    double loss_b = json_num(strstr(bal, "{\"epoch\": 2,"), "loss");
    cr_assert(fabs(loss_p - loss_b) <= 0.05, "final loss %.4f balanced, %.4f without", loss_b,
              loss_p);
    free(plain);
    free(bal);
    remove_tree(dir);
    free(dir);
}

static float *weights(int n, const char *dir, const char *tag, const char *slow,
                      const char *mitigation, char **json_out, size_t *count)
{
    char path[512], json[512];
    snprintf(path, sizeof(path), "%s/%s.bin", dir, tag);
    snprintf(json, sizeof(json), "%s/%s.json", dir, tag);
    char *args[] = {"--data",
                    "synthetic",
                    "--synthetic",
                    "1920,96,12,5,1.5",
                    "--hidden",
                    "24,16",
                    "--batch",
                    "96",
                    "--steps",
                    "9",
                    "--lr",
                    "0.2",
                    "--warmup-epochs",
                    "0",
                    "--decay",
                    "none",
                    "--straggler",
                    (char *)mitigation,
                    "--balance-every",
                    "3",
                    "--save-weights",
                    path,
                    "--json",
                    json,
                    "--no-progress",
                    NULL};
    run_result_t r = run_slow(n, slow, args);
    must_pass(r, tag);
    free(r.output);
    size_t len = 0;
    float *w = (float *)read_bin(path, &len);
    cr_assert_not_null(w, "no weights from %s", tag);
    *count = len / sizeof(float);
    if (json_out)
        *json_out = read_file(json);
    return w;
}

Test(train_straggler, balanced_steps_are_one_rank_steps_on_the_global_batch, .timeout = 300)
{
    char *dir = make_tmpdir("trainstragw");
    cr_assert_not_null(dir);
    size_t n1, n3;
    char *json = NULL;
    /* One rank permutes the whole set with the same seed: the same batches. */
    float *w1 = weights(0, dir, "one", NULL, "none", NULL, &n1);
    float *w3 = weights(3, dir, "three", "2:400", "balance", &json, &n3);
    cr_assert_not_null(json);
    cr_assert_eq(n1, n3);
    double b2 = rank_num(json, 2, "batch");
    cr_assert(b2 < 32, "the split stayed even (rank 2 takes %g of 96): nothing was tested", b2);
    double worst = 0;
    for (size_t i = 0; i < n1; i++) {
        double d = fabs((double)w1[i] - w3[i]);
        cr_assert(d <= 2e-5 + 2e-4 * fabs(w1[i]), "weight %zu: one rank %.9g, balanced %.9g", i,
                  w1[i], w3[i]);
        worst = d > worst ? d : worst;
    }
    cr_log_info("rank 2's share %g of 96; largest difference from one rank %.3g", b2, worst);
    free(w1);
    free(w3);
    free(json);
    remove_tree(dir);
    free(dir);
}

static void refused(const char *want, char *const *args)
{
    run_result_t r = run_slow(0, NULL, args);
    cr_assert(r.exited && r.status == 2, "not refused (status %d):\n%s", r.status, r.output);
    cr_assert(strstr(r.output, want), "the refusal does not say \"%s\":\n%s", want, r.output);
    free(r.output);
}

Test(train_straggler, balance_refused_where_it_does_not_apply)
{
    refused("--async", (char *[]){"--straggler", "balance", "--async", NULL});
    refused("model parallelism",
            (char *[]){"--straggler", "balance", "--tensor-parallel", "2", NULL});
    refused("model parallelism",
            (char *[]){"--straggler", "balance", "--pipeline-parallel", "2", NULL});
    refused("--codec", (char *[]){"--straggler", "balance", "--codec", "fp16", NULL});
    refused("none or balance", (char *[]){"--straggler", "backup", NULL});
}
