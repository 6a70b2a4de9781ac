/*
 * test_launch_bind.c - `gradwire launch --bind` (tools/launch_bind.c): the
 * ranks' CPU affinity as each rank reads it from /proc/self/status, against
 * the CPUs this test process may use. With `auto` rank r runs on the r-th
 * of them when there are no more ranks than CPUs (cores: this test's
 * machines have no SMT, where one CPU of each core is taken), and nowhere
 * in particular with more, saying so; `core` binds round robin anyway;
 * `none` never binds; auto is the default; anything else is a usage error.
 * And the other launchers' spellings of -n: mpirun's -np, torchrun's
 * --nproc-per-node and --nproc_per_node.
 */
#include <criterion/criterion.h>
#include <sched.h>

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"

static int ncpus;
static int cpus[CPU_SETSIZE];
static char all_list[64]; /* our own affinity, as the kernel writes it (e.g. "0-1") */

static void read_ours(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
    ncpus = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            cpus[ncpus++] = c;
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "Cpus_allowed_list: %63s", all_list) == 1)
            break;
    if (f)
        fclose(f);
    cr_assert(ncpus > 0 && all_list[0]);
}

/* Each rank prints "cpus R LIST". */
static run_result_t launch(int n, const char *bind)
{
    char ns[8];
    snprintf(ns, sizeof(ns), "%d", n);
    char *argv[] = {LAUNCHER,
                    "launch",
                    "-n",
                    ns,
                    "--no-prefix",
                    "--bind",
                    (char *)bind,
                    "--",
                    "sh",
                    "-c",
                    "echo cpus $GW_RANK $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "
                    "/proc/self/status)",
                    NULL};
    if (!bind) {
        argv[4] = "--";
        argv[5] = "sh";
        argv[6] = "-c";
        argv[7] = argv[10];
        argv[8] = NULL;
    }
    run_result_t r = run_cmd(argv, NULL, 60);
    cr_assert(!r.timed_out && r.exited, "launch -n %d --bind %s hung:\n%s", n,
              bind ? bind : "(default)", r.output);
    return r;
}

/* Rank r's affinity list is `want` (a single CPU, or our whole list). */
static void expect_cpus(const run_result_t *r, int rank, const char *want)
{
    char line[96];
    snprintf(line, sizeof(line), "cpus %d %s\n", rank, want);
    cr_assert(strstr(r->output, line), "want \"%s\" in:\n%s", line, r->output);
}

static void expect_bound(const run_result_t *r, int n)
{
    for (int rank = 0; rank < n; rank++) {
        char one[16];
        snprintf(one, sizeof(one), "%d", cpus[rank % ncpus]);
        expect_cpus(r, rank, one);
    }
}

static void expect_unbound(const run_result_t *r, int n)
{
    for (int rank = 0; rank < n; rank++)
        expect_cpus(r, rank, all_list);
}

Test(launch_bind, auto_binds_when_every_rank_gets_a_cpu, .timeout = 120)
{
    read_ours();
    run_result_t r = launch(ncpus, "auto");
    expect_bound(&r, ncpus);
    cr_expect_null(strstr(r.output, "unbound"), "a note although every rank got a core:\n%s",
                   r.output);
    free(r.output);
    /* One rank more than CPUs: nobody is bound, and the launcher says so. */
    r = launch(ncpus + 1, "auto");
    cr_assert_eq(r.status, 0, "%s", r.output);
    if (ncpus > 1)
        expect_unbound(&r, ncpus + 1);
    char note[96];
    snprintf(note, sizeof(note), "note: %d ranks and %d core%s", ncpus + 1, ncpus,
             ncpus == 1 ? "" : "s");
    cr_expect(strstr(r.output, note) && strstr(r.output, "the ranks run unbound"),
              "no note that the ranks run unbound:\n%s", r.output);
    free(r.output);
}

Test(launch_bind, core_binds_round_robin_none_never_and_auto_is_the_default, .timeout = 120)
{
    read_ours();
    run_result_t r = launch(ncpus + 1, "core");
    cr_assert_eq(r.status, 0, "%s", r.output);
    expect_bound(&r, ncpus + 1);
    free(r.output);
    if (ncpus > 1) {
        r = launch(ncpus, "none");
        cr_assert_eq(r.status, 0, "%s", r.output);
        expect_unbound(&r, ncpus);
        free(r.output);
    }
    r = launch(ncpus, NULL); /* the default is auto: a core per rank, so bound */
    cr_assert_eq(r.status, 0, "%s", r.output);
    expect_bound(&r, ncpus);
    free(r.output);
    r = launch(ncpus + 1, NULL); /* and unbound, with the note, beyond */
    cr_assert_eq(r.status, 0, "%s", r.output);
    if (ncpus > 1)
        expect_unbound(&r, ncpus + 1);
    cr_expect(strstr(r.output, "the ranks run unbound"), "%s", r.output);
    free(r.output);
}

/* mpirun's and torchrun's names for the number of ranks: 3 ranks each. */
Test(launch_args, np_and_nproc_per_node_mean_n, .timeout = 120)
{
    const char *forms[][2] = {{"-np", "3"},
                              {"--np", "3"},
                              {"--nproc-per-node", "3"},
                              {"--nproc_per_node", "3"},
                              {"--nproc-per-node=3", NULL},
                              {"--nproc_per_node=3", NULL}};
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        char *argv[12];
        int k = 0;
        argv[k++] = LAUNCHER;
        argv[k++] = "launch";
        argv[k++] = (char *)forms[i][0];
        if (forms[i][1])
            argv[k++] = (char *)forms[i][1];
        argv[k++] = "--no-prefix";
        argv[k++] = "--";
        argv[k++] = "sh";
        argv[k++] = "-c";
        argv[k++] = "echo rank $GW_RANK of $GW_SIZE";
        argv[k] = NULL;
        run_result_t r = run_cmd(argv, NULL, 60);
        cr_assert(!r.timed_out && r.exited && r.status == 0, "%s: status %d\n%s", forms[i][0],
                  r.status, r.output);
        for (int rank = 0; rank < 3; rank++) {
            char line[32];
            snprintf(line, sizeof(line), "rank %d of 3\n", rank);
            cr_expect(strstr(r.output, line), "%s: no \"%s\" in:\n%s", forms[i][0], line, r.output);
        }
        free(r.output);
    }
    /* -np with nothing after it, or not a number: usage errors. */
    char *bad[][6] = {{LAUNCHER, "launch", "-np", NULL},
                      {LAUNCHER, "launch", "-np", "many", "true", NULL},
                      {LAUNCHER, "launch", "--nproc-per-node", "0", "true", NULL}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        run_result_t r = run_cmd(bad[i], NULL, 30);
        cr_expect_eq(r.status, 2, "case %zu: status %d\n%s", i, r.status, r.output);
        free(r.output);
    }
}

Test(launch_bind, a_bad_value_is_a_usage_error, .timeout = 30)
{
    run_result_t r = launch(2, "cores");
    cr_assert_eq(r.status, 2, "%s", r.output);
    cr_assert(strstr(r.output, "--bind wants auto, core or none, not \"cores\""), "%s", r.output);
    free(r.output);
}
