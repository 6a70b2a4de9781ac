/*
 * gradwire-bench allreduce end to end: launched on real ranks it must check
 * every dtype and op with no wrong element, exit 0, print the nccl-tests
 * table and write a JSON file that holds every size.
 */
#include <criterion/criterion.h>

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define BENCH GW_BUILD_DIR "/gradwire-bench"

static void bench(const char *nranks, const char *algo)
{
    char *dir = make_tmpdir("bench");
    char json[512];
    snprintf(json, sizeof(json), "%s/out.json", dir);
    char *argv[] = {LAUNCHER, "launch",     "-n",     (char *)nranks, "--",  BENCH, "allreduce",
                    "-b",     "8",          "-e",     "256K",         "-f",  "8",   "-n",
                    "2",      "-w",         "1",      "-d",           "all", "-o",  "all",
                    "-a",     (char *)algo, "--json", json,           NULL};
    char tenv[] = "GW_TIMEOUT_MS=60000";
    char *env[] = {tenv, NULL};
    run_result_t r = run_cmd(argv, env, 400);
    cr_assert(!r.timed_out, "bench timed out:\n%s", r.output);
    cr_assert(r.exited && r.status == 0, "bench failed (%d):\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "# Wrong elements       : 0 OK"), "%s", r.output);
    cr_expect(strstr(r.output, "busbw"), "no table header:\n%s", r.output);
    /* 8 B .. 256 KiB by 8: 6 sizes, for 8 dtypes x 5 ops = 240 rows. */
    char *doc = read_file(json);
    cr_assert_not_null(doc, "no JSON written");
    int rows = 0, wrong_zero = 0;
    for (const char *p = doc; (p = strstr(p, "\"redop\"")); p++)
        rows++;
    for (const char *p = doc; (p = strstr(p, "\"wrong\": 0}")); p++)
        wrong_zero++;
    cr_expect_eq(rows, 240, "JSON has %d result rows", rows);
    cr_expect_eq(wrong_zero, 2 * rows, "not every placement reports 0 wrong");
    free(doc);
    free(r.output);
    remove_tree(dir);
    free(dir);
}

Test(bench_e2e, three_ranks_every_dtype_and_op_ring, .timeout = 420) { bench("3", "ring"); }
Test(bench_e2e, four_ranks_every_dtype_and_op_auto, .timeout = 420) { bench("4", "auto"); }
