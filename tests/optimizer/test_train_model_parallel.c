/*
 * Model parallelism against the unsplit model: gradwire-train with the MLP
 * split over ranks (--tensor-parallel, --pipeline-parallel in GPipe and
 * 1F1B order, both, and with data-parallel replicas) must compute the same first-step loss and
 * gradients (--dump-grads: the gradients in the unsplit layout, then the
 * mean loss) and, after three steps with momentum and weight decay, the
 * same weights as one rank holding the whole model, to float rounding
 * (only the order of additions differs: the allreduces and micro-batches
 * sum partial products). The one-rank reference itself must equal the
 * data-parallel trainer's weights bit for bit. On tcp and shared memory.
 * Then the memory budget (data parallel refuses, the split run trains) and
 * the arguments that cannot work.
 */
#include "train_util.h"

#define COMMON                                                                                  \
    "--data", "synthetic", "--synthetic", "960,96,12,5,1.5", "--hidden", "24,16,12", "--batch", \
        "96", "--steps", "3", "--no-shuffle", "--lr", "0.2", "--warmup-epochs", "0", "--decay", \
        "none", "--momentum", "0.9", "--no-progress", "--quiet"

/* Run with n ranks (0: alone) over transport tr, the NULL-terminated extra
 * arguments after the common ones; returns the output, asserts success. */
static run_result_t run_tr(int n, const char *tr, char *const *extra, double timeout)
{
    char *args[64];
    char *common[] = {COMMON, NULL};
    int k = 0;
    for (int i = 0; common[i]; i++)
        args[k++] = common[i];
    for (int i = 0; extra[i]; i++)
        args[k++] = extra[i];
    args[k] = NULL;
    char *argv[96], nbuf[16];
    char trenv[64], timeout_env[] = "GW_TIMEOUT_MS=60000";
    snprintf(trenv, sizeof(trenv), "GW_TRANSPORT=%s", tr);
    char *env[] = {timeout_env, trenv, NULL};
    require_trainer();
    train_argv(argv, n, nbuf, args);
    return run_cmd(argv, env, timeout);
}

static float *read_floats(const char *path, size_t *count)
{
    size_t len;
    float *f = (float *)read_bin(path, &len);
    cr_assert_not_null(f, "%s was not written", path);
    cr_assert_eq(len % sizeof(float), 0);
    *count = len / sizeof(float);
    return f;
}

/* grads (with the loss last) and weights of one configuration. */
static void run_split(const char *dir, int n, const char *tr, const char *tag, char *const *split,
                      float **g, size_t *ng, float **w, size_t *nw)
{
    char gpath[512], wpath[512];
    snprintf(gpath, sizeof(gpath), "%s/%s-grads.bin", dir, tag);
    snprintf(wpath, sizeof(wpath), "%s/%s-weights.bin", dir, tag);
    char *extra[16];
    int k = 0;
    for (int i = 0; split[i]; i++)
        extra[k++] = split[i];
    extra[k++] = "--dump-grads";
    extra[k++] = gpath;
    extra[k++] = "--save-weights";
    extra[k++] = wpath;
    extra[k] = NULL;
    run_result_t r = run_tr(n, tr, extra, 120);
    cr_assert(!r.timed_out, "%s timed out:\n%s", tag, r.output);
    cr_assert(r.exited && r.status == 0, "%s failed (status %d):\n%s", tag, r.status, r.output);
    free(r.output);
    *g = read_floats(gpath, ng);
    *w = read_floats(wpath, nw);
}

static void close_to(const float *a, const float *b, size_t n, const char *what, const char *tag)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        cr_assert(d <= 1e-5 + 1e-4 * fabs(a[i]), "%s: %s %zu: unsplit %.9g, split %.9g", tag, what,
                  i, a[i], b[i]);
        worst = d > worst ? d : worst;
    }
    cr_log_info("%s: %s within %.3g of the unsplit model", tag, what, worst);
}

typedef struct split_case {
    int ranks;
    const char *tag;
    char *args[12];
} split_case_t;

static void check_transport(const char *tr)
{
    char *dir = make_tmpdir("trainmp");
    cr_assert_not_null(dir);
    float *g1, *w1;
    size_t ng1, nw1;
    char *unsplit[] = {"--tensor-parallel", "1", NULL};
    run_split(dir, 0, tr, "unsplit", unsplit, &g1, &ng1, &w1, &nw1);
    cr_assert_eq(ng1, nw1 + 1, "the dump holds the gradients and the loss");
    cr_assert(g1[ng1 - 1] > 0.5f && g1[ng1 - 1] < 10.0f, "first loss %g", g1[ng1 - 1]);
    /* The reference is the data-parallel trainer's step, bit for bit. */
    char dp_path[512];
    snprintf(dp_path, sizeof(dp_path), "%s/dp.bin", dir);
    char *dp_args[] = {"--save-weights", dp_path, NULL};
    run_result_t r = run_tr(0, tr, dp_args, 60);
    cr_assert(r.exited && r.status == 0, "data-parallel reference failed:\n%s", r.output);
    free(r.output);
    size_t ndp;
    float *wdp = read_floats(dp_path, &ndp);
    cr_assert_eq(ndp, nw1);
    cr_assert(memcmp(wdp, w1, ndp * sizeof(float)) == 0,
              "--tensor-parallel 1 on one rank is not the data-parallel trainer's step");
    free(wdp);
    /* The gradients are not trivially equal: they are not all zero. */
    double gsum = 0;
    for (size_t i = 0; i + 1 < ng1; i++)
        gsum += fabs(g1[i]);
    cr_assert(gsum > 1e-3, "the reference gradient is zero");

    static const split_case_t cases[] = {
        {2, "tensor2", {"--tensor-parallel", "2", NULL}},
        {2, "pipeline2", {"--pipeline-parallel", "2", NULL}},
        {4, "tensor4", {"--tensor-parallel", "4", NULL}},
        {4, "pipeline4x3micro", {"--pipeline-parallel", "4", "--micro-batches", "3", NULL}},
        {4, "tensor2xpipeline2", {"--tensor-parallel", "2", "--pipeline-parallel", "2", NULL}},
        {4,
         "tensor2xpipeline2x4micro",
         {"--tensor-parallel", "2", "--pipeline-parallel", "2", "--micro-batches", "4", NULL}},
        {4, "data2xtensor2", {"--tensor-parallel", "2", NULL}},
        {4, "data2xpipeline2", {"--pipeline-parallel", "2", "--micro-batches", "2", NULL}},
        /* 1F1B: fewer, as many and more micro-batches than stages. */
        {4,
         "pipeline4x2micro-1f1b",
         {"--pipeline-parallel", "4", "--micro-batches", "2", "--schedule", "1f1b", NULL}},
        {4,
         "pipeline4x6micro-1f1b",
         {"--pipeline-parallel", "4", "--micro-batches", "6", "--schedule", "1f1b", NULL}},
        {4,
         "tensor2xpipeline2x4micro-1f1b",
         {"--tensor-parallel", "2", "--pipeline-parallel", "2", "--micro-batches", "4",
          "--schedule", "1f1b", NULL}},
        {4,
         "data2xpipeline2-1f1b",
         {"--pipeline-parallel", "2", "--micro-batches", "2", "--schedule", "1f1b", NULL}},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        float *g, *w;
        size_t ng, nw;
        char tag[96];
        snprintf(tag, sizeof(tag), "%s-%s", tr, cases[c].tag);
        run_split(dir, cases[c].ranks, tr, tag, cases[c].args, &g, &ng, &w, &nw);
        cr_assert_eq(ng, ng1, "%s: %zu gradient floats, unsplit %zu", tag, ng, ng1);
        cr_assert_eq(nw, nw1);
        cr_assert(fabs(g[ng - 1] - g1[ng1 - 1]) <= 1e-5 * fabs(g1[ng1 - 1]),
                  "%s: first loss %.9g, unsplit %.9g", tag, g[ng - 1], g1[ng1 - 1]);
        close_to(g1, g, ng1 - 1, "gradient", tag);
        close_to(w1, w, nw1, "weight after 3 steps", tag);
        free(g);
        free(w);
    }
    free(g1);
    free(w1);
    remove_tree(dir);
    free(dir);
}

Test(train_model_parallel, split_equals_unsplit_tcp, .timeout = 300) { check_transport("tcp"); }

Test(train_model_parallel, split_equals_unsplit_shm, .timeout = 300) { check_transport("shm"); }

/* A model whose whole (12 -> 512 -> 512 -> 5, batch 256) needs about 5.4
 * MiB per rank against a 4 MiB budget: data parallel refuses before
 * allocating, naming the figure and the way out; 2 tensor x 2 pipeline
 * ranks fit and train. */
Test(train_model_parallel, memory_budget, .timeout = 120)
{
    char *big[] = {"--hidden", "512,512", "--batch", "256", "--max-rank-memory", "4M", NULL};
    run_result_t r = run_tr(2, "shm", big, 60);
    cr_assert(r.exited && r.status != 0, "data parallel over the budget started:\n%s", r.output);
    cr_assert(strstr(r.output, "--max-rank-memory 4.0 MiB") &&
                  strstr(r.output, "each data-parallel rank (the whole model) needs 5.") &&
                  strstr(r.output, "--tensor-parallel K"),
              "no clear refusal:\n%s", r.output);
    free(r.output);
    char *split[] = {"--hidden",
                     "512,512",
                     "--batch",
                     "256",
                     "--max-rank-memory",
                     "4M",
                     "--tensor-parallel",
                     "2",
                     "--pipeline-parallel",
                     "2",
                     NULL};
    r = run_tr(4, "shm", split, 60);
    cr_assert(r.exited && r.status == 0, "the split run did not train:\n%s", r.output);
    free(r.output);
}

static void refused(int n, char *const *args, const char *needle)
{
    run_result_t r = run_tr(n, "shm", args, 60);
    cr_assert(!r.timed_out, "hung instead of refusing:\n%s", r.output);
    cr_assert(r.exited && r.status != 0, "accepted %s:\n%s", args[0], r.output);
    cr_assert(strstr(r.output, needle), "no \"%s\" in:\n%s", needle, r.output);
    free(r.output);
}

Test(train_model_parallel, bad_arguments, .timeout = 120)
{
    refused(3, (char *[]){"--tensor-parallel", "2", NULL},
            "2 ranks per model replica do not divide the world of 3 ranks");
    refused(0, (char *[]){"--pipeline-parallel", "5", NULL},
            "--pipeline-parallel 5 asks for more stages than the model's 4 weight layers");
    refused(2, (char *[]){"--tensor-parallel", "2", "--hidden", "25,16,12", NULL},
            "layer 0 has 25 output units, which do not split evenly over --tensor-parallel 2");
    refused(2, (char *[]){"--pipeline-parallel", "2", "--micro-batches", "5", NULL},
            "the local batch of 96 samples does not split into 5 equal micro-batches");
    refused(4, (char *[]){"--pipeline-parallel", "2", "--batch", "95", NULL},
            "the global batch 95 must be a multiple of the 2 data-parallel replicas");
    refused(0, (char *[]){"--tensor-parallel", "0", NULL}, "--tensor-parallel wants 1..4096");
    refused(0, (char *[]){"--max-rank-memory", "12Q", NULL},
            "--max-rank-memory wants a size in bytes");
    refused(0, (char *[]){"--micro-batches", "4", NULL},
            "--micro-batches is for --pipeline-parallel");
    refused(0, (char *[]){"--dump-grads", "/tmp/x", "--checkpoint-dir", "/tmp/y", NULL},
            "--dump-grads writes the gradients of one step and stops: it takes no "
            "--checkpoint-dir");
    refused(0, (char *[]){"--schedule", "zigzag", NULL}, "--schedule wants gpipe or 1f1b");
    refused(0, (char *[]){"--schedule", "1f1b", NULL},
            "--schedule 1f1b is for --pipeline-parallel");
    refused(0, (char *[]){"--async", "--max-rank-memory", "1G", NULL},
            "--max-rank-memory is checked by synchronous training only");
    refused(2, (char *[]){"--tensor-parallel", "2", "--hidden", "none", NULL},
            "--tensor-parallel 2 has nothing to split");
}
