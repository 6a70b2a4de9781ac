/*
 * test_bench_conventions.c - gradwire-bench's nccl-tests and OSU
 * conventions, run on real ranks: -m (calls per wait), -z (blocking), -N
 * (cycles), -a (how the ranks' times combine), the algorithm column, the
 * rank-to-host lines and the oversubscription warning, alltoallv, and the
 * message-rate benchmark mbw_mr.
 *
 * What a run did is read from what it cannot fake: the library's TRACE
 * and INFO lines count the collectives each rank made (and say when the progress
 * thread of non-blocking calls started), the JSON file holds every row.
 */
#include <criterion/criterion.h>
#include <sched.h>

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define BENCH GW_BUILD_DIR "/gradwire-bench"

/* `gradwire launch -n N [--bind none] -- gradwire-bench ARGS...` with
 * GW_DEBUG=TRACE for the collectives (when trace is set). */
static run_result_t bench(const char *n, int trace, char *const args[])
{
    char *argv[48] = {LAUNCHER, "launch", "-n", (char *)n, "--", BENCH};
    int k = 6;
    for (int i = 0; args[i] && k < 47; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    char tenv[] = "GW_TIMEOUT_MS=60000", dbg[] = "GW_DEBUG=TRACE",
         sub[] = "GW_DEBUG_SUBSYS=coll,async";
    char *env[] = {tenv, trace ? dbg : NULL, sub, NULL};
    run_result_t r = run_cmd(argv, env, 120);
    cr_assert(!r.timed_out, "bench timed out:\n%s", r.output);
    return r;
}

/* Lines of rank 1's output that hold every one of a and b. */
static int count_rank1(const char *out, const char *a, const char *b)
{
    int n = 0;
    for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char line[512];
        snprintf(line, sizeof(line), "%.*s", (int)(len < 511 ? len : 511), l);
        if (strncmp(line, "[1] ", 4) == 0 && strstr(line, a) && (!b || strstr(line, b)))
            n++;
    }
    return n;
}

/* 8 bytes (2 float32), 2 timed iterations, no warm-up, no check: rank 1
 * makes 2 placements x 2 iterations x M allreduces of 2 x float32. */
Test(bench_conventions, agg_iters_and_blocking_make_the_calls_they_say, .timeout = 120)
{
    char *base[] = {"allreduce", "-b", "8", "-e", "8", "-n", "2", "-w", "0", "-c", "0", NULL};
    run_result_t r = bench("2", 1, base);
    cr_assert_eq(r.status, 0, "%s", r.output);
    cr_expect_eq(count_rank1(r.output, "gw_allreduce", "2 x float32"), 4, "%s", r.output);
    cr_expect_eq(count_rank1(r.output, "progress thread started", NULL), 0,
                 "the default (-m 1 -z 1) made non-blocking calls:\n%s", r.output);
    free(r.output);

    char *agg[] = {"allreduce", "-b", "8",  "-e", "8",  "-n", "2",
                   "-w",        "0",  "-c", "0",  "-m", "3",  NULL};
    r = bench("2", 1, agg);
    cr_assert_eq(r.status, 0, "%s", r.output);
    cr_expect_eq(count_rank1(r.output, "gw_allreduce", "2 x float32"), 12,
                 "-m 3: not 3 calls per iteration:\n%s", r.output);
    cr_expect_eq(count_rank1(r.output, "progress thread started", NULL), 1,
                 "-m 3: the calls were not non-blocking:\n%s", r.output);
    cr_expect(strstr(r.output, "agg iters: 3"), "%s", r.output);
    free(r.output);

    char *nb[] = {"allreduce", "-b", "8",  "-e", "8",  "-n", "2",
                  "-w",        "0",  "-c", "0",  "-z", "0",  NULL};
    r = bench("2", 1, nb);
    cr_assert_eq(r.status, 0, "%s", r.output);
    cr_expect_eq(count_rank1(r.output, "gw_allreduce", "2 x float32"), 4, "%s", r.output);
    cr_expect_eq(count_rank1(r.output, "progress thread started", NULL), 1,
                 "-z 0: the calls were not issued non-blocking:\n%s", r.output);
    cr_expect(strstr(r.output, "blocking: 0"), "%s", r.output);
    free(r.output);

    /* Checked, every collective with -m and -z 0 (sendrecv's are
     * gw_isend/gw_irecv pairs; alltoallv's in-place form too). */
    const char *colls[] = {"sendrecv", "alltoallv", "reduce_scatter", "allgatherv", "broadcast"};
    for (size_t i = 0; i < sizeof(colls) / sizeof(colls[0]); i++) {
        char *chk[] = {(char *)colls[i],
                       "-b",
                       "8",
                       "-e",
                       "4K",
                       "-f",
                       "8",
                       "-n",
                       "3",
                       "-w",
                       "1",
                       "-m",
                       "2",
                       "-z",
                       "0",
                       NULL};
        r = bench("3", 0, chk);
        cr_expect_eq(r.status, 0, "%s -m 2 -z 0:\n%s", colls[i], r.output);
        cr_expect(strstr(r.output, "# Wrong elements       : 0 OK"), "%s:\n%s", colls[i], r.output);
        free(r.output);
    }
}

/* -a 0 is rank 0's times, as every rank learns them: a broadcast of the
 * iterations' times, not an allreduce; the others say which in the header
 * and the JSON. */
Test(bench_conventions, average_over_ranks, .timeout = 120)
{
    char *dir = make_tmpdir("bench-avg"), json[512];
    snprintf(json, sizeof(json), "%s/a.json", dir);
    char *a0[] = {"allreduce", "-b", "8",  "-e", "8",  "-n", "7",
                  "-w",        "0",  "-c", "0",  "-a", "0",  NULL};
    run_result_t r = bench("2", 1, a0);
    cr_assert_eq(r.status, 0, "%s", r.output);
    cr_expect_eq(count_rank1(r.output, "gw_broadcast", "7 x float64"), 2,
                 "-a 0: rank 0's times were not broadcast (2 placements):\n%s", r.output);
    cr_expect_eq(count_rank1(r.output, "gw_allreduce", "7 x float64"), 0, "%s", r.output);
    free(r.output);
    char *a2[] = {"allreduce", "-b", "8", "-e", "8", "-n",     "7",  "-w",
                  "0",         "-c", "0", "-a", "2", "--json", json, NULL};
    r = bench("2", 0, a2);
    cr_assert_eq(r.status, 0, "%s", r.output);
    cr_expect(strstr(r.output, "# average: 2 (min over ranks)"), "%s", r.output);
    char *doc = read_file(json);
    cr_assert_not_null(doc);
    cr_expect(strstr(doc, "\"average\": 2"), "%s", doc);
    free(doc);
    free(r.output);
    remove_tree(dir);
    free(dir);
}

/* -N 3: the sweep three times, each row in the JSON with its cycle; the
 * algorithm column holds the algorithm of each row, as the JSON does. */
Test(bench_conventions, run_cycles_and_the_algorithm_column, .timeout = 120)
{
    char *dir = make_tmpdir("bench-cyc"), json[512];
    snprintf(json, sizeof(json), "%s/c.json", dir);
    char *args[] = {"allreduce", "-b", "8", "-e", "64K", "-f",     "32", "-n",
                    "2",         "-w", "0", "-N", "3",   "--json", json, NULL};
    run_result_t r = bench("2", 0, args);
    cr_assert_eq(r.status, 0, "%s", r.output);
    cr_expect(strstr(r.output, "# cycle 3"), "%s", r.output);
    char *doc = read_file(json);
    cr_assert_not_null(doc);
    int rows = 0;
    for (const char *p = doc; (p = strstr(p, "\"redop\"")); p++)
        rows++;
    cr_expect_eq(rows, 3 * 3, "8 B, 256 B, 8 KiB three times: %d rows in\n%s", rows, doc);
    cr_expect(strstr(doc, "\"cycle\": 3"), "%s", doc);
    cr_expect(strstr(doc, "\"run_cycles\": 3"), "%s", doc);
    /* Every table row ends with the algorithm the JSON gives for it. */
    const char *j = strstr(doc, "\"results\"");
    cr_assert_not_null(j, "%s", doc);
    int checked = 0;
    for (const char *l = r.output; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        unsigned long long size;
        const char *e = strchr(l, '\n');
        if (!e || sscanf(l, "[0] %llu", &size) != 1)
            continue;
        const char *last = e;
        while (last > l && last[-1] != ' ')
            last--;
        char want[48];
        snprintf(want, sizeof(want), "\"algo\": \"%.*s\"", (int)(e - last), last);
        const char *row = strstr(j, "\"algo\": \"");
        cr_assert_not_null(row, "row %d has no algo in the JSON", checked);
        cr_expect_eq(strncmp(row, want, strlen(want)), 0, "row %d: table says %s, JSON %.20s",
                     checked, want, row);
        j = row + 1;
        checked++;
    }
    cr_expect_eq(checked, 9, "%d table rows:\n%s", checked, r.output);
    free(doc);
    free(r.output);
    remove_tree(dir);
    free(dir);
}

/* nccl-tests' rank lines, and the warning when a host's ranks outnumber
 * the CPUs they may use: 2 ranks confined to one CPU are oversubscribed,
 * 1 rank is not. */
Test(bench_conventions, rank_lines_and_oversubscription, .timeout = 120)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
    int cpu = 0;
    while (!CPU_ISSET(cpu, &set))
        cpu++;
    char cpus[16], host[256] = "";
    snprintf(cpus, sizeof(cpus), "%d", cpu);
    gethostname(host, sizeof(host) - 1);
    char *dir = make_tmpdir("bench-over"), json[512];
    snprintf(json, sizeof(json), "%s/o.json", dir);
    for (int n = 1; n <= 2; n++) {
        char ns[4];
        snprintf(ns, sizeof(ns), "%d", n);
        char *argv[] = {"taskset", "-c",  cpus,        LAUNCHER, "launch", "-n", ns,
                        "--",      BENCH, "allreduce", "-b",     "8",      "-e", "8",
                        "-n",      "2",   "--json",    json,     NULL};
        run_result_t r = run_cmd(argv, NULL, 120);
        cr_assert(!r.timed_out && r.status == 0, "%s", r.output);
        for (int rank = 0; rank < n; rank++) {
            char line[320];
            snprintf(line, sizeof(line), "#  Rank %2d Pid", rank);
            cr_expect(strstr(r.output, line), "no \"%s\" line:\n%s", line, r.output);
        }
        char *doc = read_file(json);
        cr_assert_not_null(doc);
        if (n == 1) {
            cr_expect_null(strstr(r.output, "WARNING"), "1 rank on 1 CPU:\n%s", r.output);
            cr_expect(strstr(doc, "\"oversubscribed\": false"), "%s", doc);
        } else {
            char warn[320];
            snprintf(warn, sizeof(warn), "# WARNING: 2 ranks on host %s, which gives them 1 CPU",
                     host);
            cr_expect(strstr(r.output, warn), "no \"%s\" in:\n%s", warn, r.output);
            cr_expect(strstr(doc, "\"oversubscribed\": true"), "%s", doc);
        }
        cr_expect(strstr(doc, "\"placement\": [{\"rank\": 0, \"host\": "), "%s", doc);
        free(doc);
        free(r.output);
    }
    remove_tree(dir);
    free(dir);
}

/* OSU's osu_mbw_mr: 2 pairs of a 4-rank job, every size checked, a rate
 * for each in the JSON; pairs the job cannot hold are refused. */
Test(bench_conventions, mbw_mr_pairs_with_a_window, .timeout = 120)
{
    char *dir = make_tmpdir("bench-mr"), json[512];
    snprintf(json, sizeof(json), "%s/mr.json", dir);
    char *args[] = {"mbw_mr", "-b", "1",  "-e", "4K", "-f", "4",      "-n", "3",
                    "-w",     "1",  "-W", "8",  "-c", "1",  "--json", json, NULL};
    run_result_t r = bench("4", 0, args);
    cr_assert_eq(r.status, 0, "%s", r.output);
    cr_expect(strstr(r.output, "pairs: 2  window: 8"), "%s", r.output);
    cr_expect(strstr(r.output, "# Wrong bytes          : 0 OK"), "%s", r.output);
    char *doc = read_file(json);
    cr_assert_not_null(doc);
    int rows = 0, zero = 0;
    for (const char *p = doc; (p = strstr(p, "\"messages_per_s\": ")); p++) {
        rows++;
        zero += strncmp(p + 18, "0,", 2) == 0;
    }
    cr_expect_eq(rows, 7, "1 B .. 4 KiB by 4: %d rows in\n%s", rows, doc);
    cr_expect_eq(zero, 0, "a size with no messages:\n%s", doc);
    cr_expect(strstr(doc, "\"wrong\": 0}"), "%s", doc);
    free(doc);
    free(r.output);
    char *three[] = {"mbw_mr", "-p", "2", "-e", "64", NULL};
    r = bench("3", 0, three);
    cr_expect_eq(r.status, 1, "%s", r.output);
    cr_expect(strstr(r.output, "2 pairs need 4 ranks, and the job has 3"), "%s", r.output);
    free(r.output);
    remove_tree(dir);
    free(dir);
}

/* A root the job does not have: every rank refuses, and rank 0's reason
 * reaches the user even when another rank is the first to exit (the CI
 * once lost mbw_mr's reason that way). */
Test(bench_conventions, a_refusal_every_rank_sees_keeps_its_reason, .timeout = 120)
{
    for (int trial = 0; trial < 4; trial++) {
        char *args[] = {"reduce", "--root", "5", "-e", "64", NULL};
        run_result_t r = bench("3", 0, args);
        cr_expect_eq(r.status, 1, "%s", r.output);
        cr_expect(strstr(r.output, "root 5 is not a rank of this job (3 ranks)"), "trial %d:\n%s",
                  trial, r.output);
        free(r.output);
    }
}
