/*
 * gradwire-bench allreduce end to end: launched on real ranks it must check
 * every dtype and op with no wrong element, exit 0, print the nccl-tests
 * table and write a JSON file that holds every size. The other collectives'
 * benchmarks likewise, over shared memory and TCP, with a root other than
 * 0, and the barrier's one line.
 */
#include <criterion/criterion.h>

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define BENCH GW_BUILD_DIR "/gradwire-bench"

/* What `-d all` and `-o all` cover: 12 dtypes (6 float: float32, float64,
 * float16, bfloat16, float8_e4m3, float8_e5m2; 6 integer: int8, uint8,
 * int32, int64, uint32, uint64), and the pairs that exist: each float dtype
 * with sum, prod, min, max, avg and premul_sum (6), each integer dtype with
 * sum, prod, min, max, avg, band, bor and bxor (8). */
#define DTYPES 12
#define PAIRS (6 * 6 + 6 * 8)

/* 8 B .. 256 KiB by 8: 6 sizes, for every (dtype, op) pair there is. Under
 * the sanitizers up to 32 KiB (5 sizes): what they check, the memory the
 * bench and every dtype and op's kernel touch, is reached at every size,
 * and the 256 KiB row was most of the case's 18 s there; the large
 * messages' paths run under them in test_collectives_tcp's large counts. */
#if defined(__SANITIZE_ADDRESS__)
#define MAX_SIZE "32K"
#define SIZES 5
#else
#define MAX_SIZE "256K"
#define SIZES 6
#endif

static void bench(const char *nranks, const char *algo)
{
    char *dir = make_tmpdir("bench");
    char json[512];
    snprintf(json, sizeof(json), "%s/out.json", dir);
    char *argv[] = {LAUNCHER, "launch",     "-n",     (char *)nranks, "--",  BENCH, "allreduce",
                    "-b",     "8",          "-e",     MAX_SIZE,       "-f",  "8",   "-n",
                    "2",      "-w",         "1",      "-d",           "all", "-o",  "all",
                    "--algo", (char *)algo, "--json", json,           NULL};
    char tenv[] = "GW_TIMEOUT_MS=60000";
    char *env[] = {tenv, NULL};
    run_result_t r = run_cmd(argv, env, 400);
    cr_assert(!r.timed_out, "bench timed out:\n%s", r.output);
    cr_assert(r.exited && r.status == 0, "bench failed (%d):\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "# Wrong elements       : 0 OK"), "%s", r.output);
    cr_expect(strstr(r.output, "busbw"), "no table header:\n%s", r.output);
    char *doc = read_file(json);
    cr_assert_not_null(doc, "no JSON written");
    int rows = 0, wrong_zero = 0;
    for (const char *p = doc; (p = strstr(p, "\"redop\"")); p++)
        rows++;
    for (const char *p = doc; (p = strstr(p, "\"wrong\": 0}")); p++)
        wrong_zero++;
    cr_expect_eq(rows, SIZES * PAIRS, "JSON has %d result rows", rows);
    cr_expect_eq(wrong_zero, 2 * rows, "not every placement reports 0 wrong");
    free(doc);
    free(r.output);
    remove_tree(dir);
    free(dir);
}

Test(bench_e2e, three_ranks_every_dtype_and_op_ring, .timeout = 420) { bench("3", "ring"); }
Test(bench_e2e, four_ranks_every_dtype_and_op_auto, .timeout = 420) { bench("4", "auto"); }

/* One collective's benchmark on nranks over transport, every dtype (and op,
 * where it has one); rows is the number of JSON result rows to expect, each
 * with both placements checked (sendrecv: out of place only, in place
 * null). */
static void coll(const char *name, const char *nranks, const char *transport, char *extra, int rows)
{
    char *dir = make_tmpdir("bench");
    char json[512], tr[64];
    snprintf(json, sizeof(json), "%s/out.json", dir);
    snprintf(tr, sizeof(tr), "GW_TRANSPORT=%s", transport);
    char *argv[] = {LAUNCHER,
                    "launch",
                    "-n",
                    (char *)nranks,
                    "--",
                    BENCH,
                    (char *)name,
                    "-b",
                    "8",
                    "-e",
                    "96K",
                    "-f",
                    "16",
                    "-n",
                    "2",
                    "-w",
                    "1",
                    "-d",
                    "all",
                    "--json",
                    json,
                    extra,
                    extra ? "all" : NULL,
                    NULL};
    char *env[] = {"GW_TIMEOUT_MS=60000", tr, NULL};
    run_result_t r = run_cmd(argv, env, 300);
    cr_assert(!r.timed_out, "%s timed out:\n%s", name, r.output);
    cr_assert(r.exited && r.status == 0, "%s over %s failed (%d):\n%s", name, transport, r.status,
              r.output);
    cr_expect(strstr(r.output, "# Wrong elements       : 0 OK"), "%s", r.output);
    char head[64];
    snprintf(head, sizeof(head), "# gradwire-bench %s,", name);
    cr_expect(strstr(r.output, head), "no header \"%s\":\n%s", head, r.output);
    char *doc = read_file(json);
    cr_assert_not_null(doc, "no JSON written");
    char bench_member[64];
    snprintf(bench_member, sizeof(bench_member), "\"benchmark\": \"%s\"", name);
    cr_expect(strstr(doc, bench_member), "JSON does not say %s:\n%s", bench_member, doc);
    int n = 0, wrong_zero = 0;
    for (const char *p = doc; (p = strstr(p, "\"redop\"")); p++)
        n++;
    for (const char *p = doc; (p = strstr(p, "\"wrong\": 0}")); p++)
        wrong_zero++;
    cr_expect_eq(n, rows, "%s: JSON has %d result rows, want %d", name, n, rows);
    int placements = strcmp(name, "sendrecv") == 0 ? 1 : 2;
    cr_expect_eq(wrong_zero, placements * n, "%s: not every placement reports 0 wrong", name);
    if (placements == 1) {
        int nulls = 0;
        for (const char *p = doc; (p = strstr(p, "\"in_place\": null")); p++)
            nulls++;
        cr_expect_eq(nulls, n, "%s: in_place should be null in every row:\n%s", name, doc);
    }
    free(doc);
    free(r.output);
    remove_tree(dir);
    free(dir);
}

/* 8 B .. 96 KiB by 16: 4 sizes (8, 128, 2K, 32K), every dtype. */
Test(bench_e2e, allgather_and_reduce_scatter, .timeout = 420)
{
    coll("allgather", "3", "shm", NULL, 4 * DTYPES);
    coll("allgather", "4", "tcp", NULL, 4 * DTYPES);
    coll("reduce_scatter", "3", "tcp", "-o", 4 * PAIRS);
}

Test(bench_e2e, broadcast_and_reduce_from_every_root, .timeout = 420)
{
    coll("broadcast", "3", "tcp", NULL, 4 * DTYPES);
    coll("reduce", "4", "shm", "-o", 4 * PAIRS);
    const char *roots[] = {"1", "2"};
    for (int i = 0; i < 2; i++) {
        char *argv[] = {LAUNCHER, "launch",         "-n", "3",  "--", BENCH, "broadcast",
                        "-r",     (char *)roots[i], "-b", "4K", "-e", "4K",  NULL};
        char *env[] = {"GW_TIMEOUT_MS=60000", NULL};
        run_result_t r = run_cmd(argv, env, 60);
        cr_assert(r.exited && r.status == 0 && strstr(r.output, "# Wrong elements       : 0 OK"),
                  "broadcast from root %s:\n%s", roots[i], r.output);
        free(r.output);
        argv[6] = "reduce";
        r = run_cmd(argv, env, 60);
        cr_assert(r.exited && r.status == 0 && strstr(r.output, "# Wrong elements       : 0 OK"),
                  "reduce to root %s:\n%s", roots[i], r.output);
        free(r.output);
    }
}

/* The collectives that move blocks, every dtype, both placements checked,
 * each over both transports somewhere; gather and scatter from every root
 * of 3 ranks. */
Test(bench_e2e, alltoall_gather_scatter_allgatherv, .timeout = 420)
{
    coll("alltoall", "3", "shm", NULL, 4 * DTYPES);
    coll("alltoall", "4", "tcp", NULL, 4 * DTYPES);
    coll("gather", "3", "tcp", NULL, 4 * DTYPES);
    coll("scatter", "4", "shm", NULL, 4 * DTYPES);
    coll("allgatherv", "3", "tcp", NULL, 4 * DTYPES);
    coll("allgatherv", "2", "shm", NULL, 4 * DTYPES);
    const char *roots[] = {"1", "2"};
    for (int i = 0; i < 2; i++) {
        char *argv[] = {LAUNCHER, "launch",         "-n", "3",  "--", BENCH, "gather",
                        "-r",     (char *)roots[i], "-b", "4K", "-e", "4K",  NULL};
        char *env[] = {"GW_TIMEOUT_MS=60000", NULL};
        run_result_t r = run_cmd(argv, env, 60);
        cr_assert(r.exited && r.status == 0 && strstr(r.output, "# Wrong elements       : 0 OK"),
                  "gather to root %s:\n%s", roots[i], r.output);
        free(r.output);
        argv[6] = "scatter";
        r = run_cmd(argv, env, 60);
        cr_assert(r.exited && r.status == 0 && strstr(r.output, "# Wrong elements       : 0 OK"),
                  "scatter from root %s:\n%s", roots[i], r.output);
        free(r.output);
    }
}

/* Every rank sends to the next and receives from the previous: 2 ranks
 * (both neighbours the same rank) and 4, over each transport; one rank is
 * a usage error. */
Test(bench_e2e, sendrecv_around_the_ring, .timeout = 420)
{
    coll("sendrecv", "2", "tcp", NULL, 4 * DTYPES);
    coll("sendrecv", "4", "shm", NULL, 4 * DTYPES);
    char *argv[] = {LAUNCHER, "launch", "-n", "1", "--", BENCH, "sendrecv", NULL};
    run_result_t r = run_cmd(argv, NULL, 60);
    cr_expect(r.exited && r.status == 2 && strstr(r.output, "needs at least 2 ranks"),
              "one rank: status %d:\n%s", r.status, r.output);
    free(r.output);
}

Test(bench_e2e, barrier_prints_its_latency, .timeout = 60)
{
    char *argv[] = {LAUNCHER, "launch", "-n", "4", "--", BENCH, "barrier", "-n", "50", NULL};
    char *env[] = {"GW_TIMEOUT_MS=60000", NULL};
    run_result_t r = run_cmd(argv, env, 60);
    cr_assert(r.exited && r.status == 0, "barrier failed:\n%s", r.output);
    cr_expect(strstr(r.output, "a barrier moves no data"), "%s", r.output);
    double us = 0;
    const char *row = strstr(r.output, "[0]            0             0");
    cr_assert_not_null(row, "no result row:\n%s", r.output);
    cr_expect(sscanf(row, "[0] %*d %*d %*s %*s %*d %lf", &us) == 1 && us > 0,
              "no barrier time in:\n%s", r.output);
    free(r.output);
}
