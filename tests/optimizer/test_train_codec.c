/*
 * Compressed data-parallel training over real ranks. Each compressed
 * bucket is started with gw_iallreduce_compressed as soon as backward has
 * produced it; the library runs the calls in order on its progress thread
 * and promises results bitwise equal to the blocking call, so the final
 * weights of an overlapped run must equal, bit for bit, those of the same
 * job with --no-overlap, which makes blocking gw_allreduce_compressed calls
 * after backward (the trainer's former path). The codec must really have
 * compressed (the weights differ from a dense run), or the comparison
 * proves nothing.
 *
 * Top-k with DGC momentum correction (--dgc-momentum): the codec returns
 * the momentum-SGD update and the trainer applies plain SGD. So while the
 * codec is still warming up (dense calls) the run must follow dense
 * momentum SGD to float rounding, with the trainer's own momentum off (a
 * second momentum would be far off); on one rank, where there is no codec,
 * it is exactly momentum SGD with the DGC factor; and compressed, it must
 * converge on the synthetic task.
 */
#include "train_util.h"

/* Tensors of at least 1024 elements are compressed (the library's default
 * min_elements): 16 x 96 and 96 x 64 here; the biases and the 64 x 5 layer
 * go dense. */
#define MODEL "--data", "synthetic", "--synthetic", "3000,600,16,5,1.5", "--hidden", "96,64"

/* The number after `key` in text, or -1. */
static double number_after(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtod(p + strlen(key), NULL) : -1;
}

/* Train on n ranks (0: one process) with the extra options (up to 8) and
 * return the final weights; *out gets the output when out is not NULL. */
static float *train(int n, const char *dir, const char *tag, char *const *extra, size_t *count,
                    char **out)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s.bin", dir, tag);
    char *args[32] = {MODEL,
                      "--batch",
                      "48",
                      "--epochs",
                      "2",
                      "--seed",
                      "7",
                      "--no-progress",
                      "--save-weights",
                      path,
                      "--codec-warmup-epochs",
                      "0.25"};
    int k = 0;
    while (args[k])
        k++;
    for (int i = 0; extra[i]; i++)
        args[k++] = extra[i];
    args[k] = NULL;
    run_result_t r = train_run(n, args, 200);
    cr_assert(!r.timed_out, "%s timed out:\n%s", tag, r.output);
    cr_assert(r.exited && r.status == 0, "%s failed (status %d):\n%s", tag, r.status, r.output);
    size_t len;
    float *w = (float *)read_bin(path, &len);
    cr_assert_not_null(w, "%s wrote no weights", tag);
    cr_assert_eq(len % sizeof(float), 0);
    *count = len / sizeof(float);
    if (out)
        *out = r.output;
    else
        free(r.output);
    return w;
}

static size_t count_diff(const float *a, const float *b, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

static void overlap_equals_blocking(int ranks, const char *codec)
{
    char *dir = make_tmpdir("traincodec");
    cr_assert_not_null(dir, "cannot make a temporary directory");
    size_t no, nb, nd;
    char *ov_args[] = {"--codec", (char *)codec, NULL};
    char *bl_args[] = {"--codec", (char *)codec, "--no-overlap", NULL};
    char *dense_args[] = {"--codec", "none", NULL};
    float *ov = train(ranks, dir, "overlap", ov_args, &no, NULL);
    float *bl = train(ranks, dir, "blocking", bl_args, &nb, NULL);
    float *dn = train(ranks, dir, "dense", dense_args, &nd, NULL);
    cr_assert_eq(no, nb);
    cr_assert_eq(no, nd);
    size_t d = count_diff(ov, bl, no);
    cr_assert_eq(d, 0, "%s on %d ranks: %zu of %zu weights differ between overlapped and blocking",
                 codec, ranks, d, no);
    size_t moved = count_diff(ov, dn, no);
    cr_assert(moved > no / 10,
              "%s changed only %zu of %zu weights against dense: the codec did not run", codec,
              moved, no);
    free(ov);
    free(bl);
    free(dn);
    remove_tree(dir);
    free(dir);
}

Test(train_codec, overlapped_topk_equals_blocking, .timeout = 300)
{
    overlap_equals_blocking(2, "topk");
}

Test(train_codec, overlapped_powersgd_equals_blocking, .timeout = 300)
{
    overlap_equals_blocking(2, "powersgd");
}

Test(train_codec, overlapped_int8_equals_blocking_on_three_ranks, .timeout = 300)
{
    overlap_equals_blocking(3, "int8");
}

Test(train_codec, overlapped_sign_equals_blocking, .timeout = 300)
{
    overlap_equals_blocking(2, "sign");
}

/* While the codec warms up, DGC is dense momentum SGD: the codec's velocity
 * (with weight decay in it) replaces the optimizer's. */
Test(train_codec, dgc_warmup_is_momentum_sgd, .timeout = 300)
{
    char *dir = make_tmpdir("traindgc");
    cr_assert_not_null(dir, "cannot make a temporary directory");
    size_t nm, nd, n1, n1m;
    /* Ten warm-up epochs: every step of the two is dense. */
    char *mom[] = {"--momentum", "0.8", "--codec", "none", NULL};
    char *dgc[] = {
        "--momentum", "0.3", "--codec", "topk", "--dgc-momentum", "0.8", "--codec-warmup-epochs",
        "10",         NULL};
    float *wm = train(2, dir, "momentum", mom, &nm, NULL);
    float *wd = train(2, dir, "dgc", dgc, &nd, NULL);
    cr_assert_eq(nm, nd);
    double worst = 0;
    for (size_t i = 0; i < nm; i++) {
        double d = fabs((double)wm[i] - wd[i]);
        cr_assert(d <= 1e-5 + 1e-4 * fabs(wm[i]), "weight %zu: momentum SGD %.9g, DGC %.9g", i,
                  wm[i], wd[i]);
        worst = d > worst ? d : worst;
    }
    cr_log_info("DGC warm-up vs momentum SGD: largest difference %.3g", worst);
    /* One rank has no codec: DGC is the optimizer's momentum, exactly. */
    char *one_dgc[] = {"--codec", "topk", "--dgc-momentum", "0.8", NULL};
    float *w1 = train(0, dir, "one-dgc", one_dgc, &n1, NULL);
    float *w1m = train(0, dir, "one-momentum", mom, &n1m, NULL);
    cr_assert_eq(n1, n1m);
    cr_assert_eq(count_diff(w1, w1m, n1), 0, "one-rank DGC is not momentum SGD");
    free(wm);
    free(wd);
    free(w1);
    free(w1m);
    remove_tree(dir);
    free(dir);
}

/* Compressed from the first step (1% of each large tensor per step), DGC
 * still learns the task: five classes, chance is 20%. */
Test(train_codec, dgc_converges, .timeout = 300)
{
    char *dir = make_tmpdir("traindgc");
    cr_assert_not_null(dir, "cannot make a temporary directory");
    size_t n;
    char *output;
    char *dgc[] = {
        "--codec", "topk", "--dgc-momentum", "0.9", "--codec-warmup-epochs", "0", "--epochs",
        "3",       NULL};
    float *w = train(2, dir, "dgc", dgc, &n, &output);
    const char *last = strstr(output, "epoch   3");
    cr_assert_not_null(last, "no report of epoch 3:\n%s", output);
    double acc = number_after(last, "test ");
    cr_assert(acc >= 85.0, "DGC reached only %.2f%% test accuracy:\n%s", acc, output);
    cr_log_info("DGC test accuracy after 3 epochs: %.2f%%", acc);
    free(output);
    free(w);
    remove_tree(dir);
    free(dir);
}

static void expect_usage_error(char *const *extra, const char *what)
{
    char *args[16] = {MODEL};
    int k = 0;
    while (args[k])
        k++;
    for (int i = 0; extra[i]; i++)
        args[k++] = extra[i];
    args[k] = NULL;
    run_result_t r = train_run(0, args, 60);
    cr_assert(r.exited && r.status == 2, "expected a usage error (2), got %d:\n%s", r.status,
              r.output);
    cr_assert(strstr(r.output, what), "expected \"%s\" in:\n%s", what, r.output);
    free(r.output);
}

Test(train_codec, dgc_options_are_checked, .timeout = 60)
{
    char *int8[] = {"--codec", "int8", "--dgc-momentum", "0.9", NULL};
    expect_usage_error(int8, "needs --codec topk, not --codec int8");
    char *none[] = {"--dgc-momentum", "0.9", NULL};
    expect_usage_error(none, "needs --codec topk, not --codec none");
    char *range[] = {"--codec", "topk", "--dgc-momentum", "1.5", NULL};
    expect_usage_error(range, "--dgc-momentum wants [0, 1)");
    char *async[] = {"--async", "--codec", "topk", "--dgc-momentum", "0.9", NULL};
    expect_usage_error(async, "--dgc-momentum is for synchronous training");
    char *async_codec[] = {"--async", "--codec", "int8", NULL};
    expect_usage_error(async_codec, "--codec int8 is for synchronous training");
    char *help[] = {TRAINER, "--help", NULL};
    run_result_t r = run_cmd(help, NULL, 30);
    cr_assert(r.exited && r.status == 0, "%s", r.output);
    cr_assert(strstr(r.output, "--dgc-momentum X") && strstr(r.output, "plain SGD"),
              "--help does not document --dgc-momentum:\n%s", r.output);
    free(r.output);
}
