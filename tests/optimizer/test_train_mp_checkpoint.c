/*
 * Checkpoints of model-parallel runs over real ranks: a job split over
 * 2 pipeline stages x 2 tensor slices (and one over 2 stages x 2
 * data-parallel replicas with --zero 1, whose ranks hold shards of the
 * momentum, and one over 2 tensor slices x 2 replicas with --zero 2,
 * which shards the reduced gradients too) is stopped mid-run (SIGTERM: the ranks agree on a step,
 * checkpoint it and exit 143; SIGKILL: it goes on from the last periodic
 * checkpoint), then resumed with --resume; its final weights must equal,
 * bit for bit, those of the same job run without interruption. Resuming on
 * another grid of the same rank count is refused, naming both grids, and
 * leaves the checkpoint as it was.
 */
#include <string.h>
#include <sys/stat.h>

#include "train_util.h"

#define RANKS 4

/* The job: 2 x 2 ranks of `grid`, 6 epochs of 250 steps. */
static char *const *job_args(const char *const *grid, const char *ckdir, const char *weights,
                             const char *extra)
{
    static char *args[64];
    static char ck[512], w[512];
    int k = 0;
    snprintf(w, sizeof(w), "%s", weights);
    char *base[] = {"--data",
                    "synthetic",
                    "--synthetic",
                    "8000,400,16,6,2",
                    "--hidden",
                    "64,32",
                    "--batch",
                    "32",
                    "--epochs",
                    "6",
                    "--warmup-epochs",
                    "1",
                    "--save-weights",
                    w,
                    "--no-progress",
                    "--quiet",
                    NULL};
    for (int i = 0; base[i]; i++)
        args[k++] = base[i];
    for (int i = 0; grid[i]; i++)
        args[k++] = (char *)grid[i];
    if (ckdir) {
        snprintf(ck, sizeof(ck), "%s", ckdir);
        args[k++] = "--checkpoint-dir";
        args[k++] = ck;
        args[k++] = "--checkpoint-every";
        args[k++] = "50";
    }
    if (extra)
        args[k++] = (char *)extra;
    args[k] = NULL;
    return args;
}

static const char *const tensor_pipeline[] = {"--tensor-parallel", "2", "--pipeline-parallel", "2",
                                              NULL};
static const char *const zero_pipeline[] = {"--pipeline-parallel", "2", "--zero", "1", NULL};
static const char *const zero2_tensor[] = {"--tensor-parallel", "2", "--zero", "2", NULL};

/* Into the second epoch (250 steps each), so that the resume must restore
 * the shuffle of an epoch other than the first. */
#define INTERRUPT_AFTER_STEP 300

static void resume_check(const char *const *grid, int sig)
{
    char *dir = make_tmpdir("mpckpt");
    cr_assert_not_null(dir, "cannot make a temporary directory");
    char ref[512], ck[512], got[512];
    snprintf(ref, sizeof(ref), "%s/reference.bin", dir);
    snprintf(ck, sizeof(ck), "%s/ck", dir);
    snprintf(got, sizeof(got), "%s/resumed.bin", dir);
    train_run_ok(RANKS, job_args(grid, NULL, ref, NULL));
    int rc = train_interrupt(RANKS, job_args(grid, ck, got, NULL), dir, ck, INTERRUPT_AFTER_STEP,
                             got, sig);
    cr_assert_eq(rc, 128 + sig, "after signal %d the job exits %d, not %d", sig, 128 + sig, rc);
    /* Every rank wrote its own part of the step `latest` names. */
    char latest[1024];
    snprintf(latest, sizeof(latest), "%s/latest", ck);
    char *step = read_file(latest);
    cr_assert_not_null(step);
    for (int r = 0; r < RANKS; r++) {
        char part[1024];
        snprintf(part, sizeof(part), "%s/ckpt-%08llu-rank%d.gwc", ck,
                 (unsigned long long)strtoull(step, NULL, 10), r);
        cr_assert(file_exists(part), "no %s (latest says step %s)", part, step);
    }
    free(step);
    train_run_ok(RANKS, job_args(grid, ck, got, "--resume"));
    train_assert_same_file(ref, got);
    remove_tree(dir);
    free(dir);
}

Test(train_mp_checkpoint, tensor_and_pipeline_resume_after_sigterm_is_bitwise_identical,
     .timeout = 600)
{
    resume_check(tensor_pipeline, SIGTERM);
}

Test(train_mp_checkpoint, zero_shards_resume_after_sigkill_are_bitwise_identical, .timeout = 600)
{
    resume_check(zero_pipeline, SIGKILL);
}

Test(train_mp_checkpoint, zero2_shards_resume_after_sigterm_are_bitwise_identical, .timeout = 600)
{
    resume_check(zero2_tensor, SIGTERM);
}

/* A checkpoint of 1 data x 2 pipeline x 2 tensor, resumed as 2 pipeline x
 * 2 data, as 2 tensor x 2 data, and by the data-parallel trainer. */
Test(train_mp_checkpoint, resume_on_another_grid_is_refused, .timeout = 300)
{
    char *dir = make_tmpdir("mpckpt");
    cr_assert_not_null(dir);
    char ck[512], w[512], latest[1024];
    snprintf(ck, sizeof(ck), "%s/ck", dir);
    snprintf(w, sizeof(w), "%s/w.bin", dir);
    snprintf(latest, sizeof(latest), "%s/latest", ck);
    char *steps[] = {"--steps", "60", NULL};
    char *args[64];
    int k = 0;
    for (char *const *a = job_args(tensor_pipeline, ck, w, NULL); *a; a++)
        args[k++] = *a;
    args[k++] = steps[0];
    args[k++] = steps[1];
    args[k] = NULL;
    train_run_ok(RANKS, args);
    char *before = read_file(latest);
    cr_assert_not_null(before, "the first run wrote no checkpoint");
    static const char *const others[][6] = {
        {"--pipeline-parallel", "2", NULL},
        {"--tensor-parallel", "2", NULL},
        {"--tensor-parallel", "1", NULL},
    };
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        k = 0;
        for (char *const *a = job_args(others[i], ck, w, "--resume"); *a; a++)
            args[k++] = *a;
        args[k++] = steps[0];
        args[k++] = steps[1];
        args[k] = NULL;
        run_result_t r = train_run(RANKS, args, 120);
        cr_assert(!r.timed_out, "%s %s: hung:\n%s", others[i][0], others[i][1], r.output);
        cr_assert(r.exited && r.status != 0, "%s %s resumed a checkpoint of another grid:\n%s",
                  others[i][0], others[i][1], r.output);
        if (strcmp(others[i][1], "1") == 0) {
            /* The data-parallel trainer: other settings, said. */
            cr_assert(strstr(r.output, "was written with other settings"), "%s", r.output);
        } else {
            cr_assert(strstr(r.output, "resumes only on the grid that wrote it") &&
                          strstr(r.output, "grid=1data,2pipeline,2tensor"),
                      "%s %s: the refusal does not name the grids:\n%s", others[i][0], others[i][1],
                      r.output);
        }
        free(r.output);
    }
    char *after = read_file(latest);
    cr_assert(after && strcmp(before, after) == 0, "a refused resume changed latest");
    free(before);
    free(after);
    remove_tree(dir);
    free(dir);
}
