/*
 * Data-parallel equivalence over real ranks: gradwire-train under
 * `gradwire launch -n N` must take the same steps as one rank training on
 * the union of the ranks' batches. With shuffling off, the strided shards
 * make step s of N ranks see exactly the samples one rank sees at step s
 * with the same global batch, so the weights after a few steps (momentum
 * and weight decay on) must agree to float rounding: only the order of the
 * gradient additions differs.
 */
#include "train_util.h"

static float *train_weights(int n, const char *dir, const char *tag, const char *steps,
                            const char *extra, size_t *count)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s.bin", dir, tag);
    char *args[] = {"--data",
                    "synthetic",
                    "--synthetic",
                    "960,96,12,5,1.5",
                    "--hidden",
                    "24,16",
                    "--batch",
                    "96",
                    "--steps",
                    (char *)steps,
                    "--no-shuffle",
                    "--lr",
                    "0.2",
                    "--warmup-epochs",
                    "0",
                    "--decay",
                    "none",
                    "--bucket-kb",
                    "1",
                    "--save-weights",
                    path,
                    "--no-progress",
                    (char *)extra,
                    NULL};
    run_result_t r = train_run(n, args, 200);
    cr_assert(!r.timed_out, "%d ranks timed out:\n%s", n, r.output);
    cr_assert(r.exited && r.status == 0, "%d ranks failed (status %d):\n%s", n, r.status, r.output);
    free(r.output);
    size_t len;
    float *w = (float *)read_bin(path, &len);
    cr_assert_not_null(w, "no weights written by %d ranks", n);
    cr_assert_eq(len % sizeof(float), 0);
    *count = len / sizeof(float);
    return w;
}

static void compare(const float *a, const float *b, size_t n, int ranks)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        cr_assert(d <= 2e-5 + 2e-4 * fabs(a[i]), "weight %zu: one rank %.9g, %d ranks %.9g", i,
                  a[i], ranks, b[i]);
        worst = d > worst ? d : worst;
    }
    cr_log_info("%d ranks: largest difference from one rank %.3g", ranks, worst);
}

static void check(const char *steps, const char *extra)
{
    char *dir = make_tmpdir("trainpar");
    cr_assert_not_null(dir, "cannot make a temporary directory");
    size_t n1, n2, n4, n3;
    float *w1 = train_weights(0, dir, "one", steps, extra, &n1);
    float *w2 = train_weights(2, dir, "two", steps, extra, &n2);
    float *w4 = train_weights(4, dir, "four", steps, extra, &n4);
    cr_assert_eq(n1, n2);
    cr_assert_eq(n1, n4);
    compare(w1, w2, n1, 2);
    compare(w1, w4, n1, 4);
    /* Three ranks (96 = 3 x 32) exercise shards that are not powers of two. */
    float *w3 = train_weights(3, dir, "three", steps, extra, &n3);
    compare(w1, w3, n1, 3);
    /* The steps really moved the weights: a test of nothing would pass too. */
    size_t n0;
    float *w0 = train_weights(0, dir, "none", "1", "--lr=0", &n0);
    double moved = 0;
    for (size_t i = 0; i < n1; i++)
        moved += fabs((double)w1[i] - w0[i]);
    cr_assert(moved > 1e-2, "training did not change the weights (%g)", moved);
    free(w0);
    free(w1);
    free(w2);
    free(w3);
    free(w4);
    remove_tree(dir);
    free(dir);
}

Test(train_parallel, one_step_equals_union_batch, .timeout = 300) { check("1", "--momentum=0"); }

Test(train_parallel, several_steps_with_momentum_and_decay, .timeout = 300)
{
    check("5", "--momentum=0.9");
}

Test(train_parallel, no_overlap_gives_the_same_steps, .timeout = 300)
{
    check("3", "--no-overlap");
}
