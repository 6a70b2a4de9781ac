/*
 * gradwire-bench compress end to end: launched on real ranks it must run the
 * dense allreduce and every codec for every size, find every rank in
 * agreement, exit 0, print its table and write a JSON file with every row;
 * and it must refuse a bad command line before starting anything.
 */
#include <criterion/criterion.h>

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define BENCH GW_BUILD_DIR "/gradwire-bench"

static int count(const char *doc, const char *needle)
{
    int n = 0;
    for (const char *p = doc; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

Test(compress_bench, three_ranks_every_codec, .timeout = 300)
{
    char *dir = make_tmpdir("czbench");
    char json[512];
    snprintf(json, sizeof(json), "%s/out.json", dir);
    char *argv[] = {LAUNCHER, "launch",       "-n", "3",      "--", BENCH, "compress", "-b",
                    "64K",    "-e",           "1M", "-f",     "4",  "-n",  "2",        "-w",
                    "1",      "--solo_iters", "1",  "--json", json, NULL};
    char tenv[] = "GW_TIMEOUT_MS=60000";
    char benv[] = "OPENBLAS_NUM_THREADS=1";
    char *env[] = {tenv, benv, NULL};
    run_result_t r = run_cmd(argv, env, 280);
    cr_assert(!r.timed_out, "bench timed out:\n%s", r.output);
    cr_assert(r.exited && r.status == 0, "bench failed (%d):\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "speedup"), "no table header:\n%s", r.output);
    cr_expect(strstr(r.output, "full sort by magnitude"), "no sort comparison:\n%s", r.output);
    cr_expect(!strstr(r.output, " NO"), "some rank disagreed:\n%s", r.output);
    /* 64 KiB, 256 KiB, 1 MiB: dense + 6 codecs each. */
    char *doc = read_file(json);
    cr_assert_not_null(doc, "no JSON written");
    cr_expect_eq(count(doc, "\"codec\":"), 21, "JSON rows:\n%s", doc);
    cr_expect_eq(count(doc, "\"agree\": true"), 21, "JSON agreement:\n%s", doc);
    cr_expect_eq(count(doc, "\"select_ms\""), 3, "JSON sort comparisons:\n%s", doc);
    cr_expect(strstr(doc, "\"ok\": true"), "%s", doc);
    free(doc);
    free(r.output);
    remove_tree(dir);
    free(dir);
}

/* Top-k with DGC momentum correction: ranks still agree bitwise, and the
 * setting is reported. */
Test(compress_bench, topk_with_momentum, .timeout = 300)
{
    char *dir = make_tmpdir("czmom");
    char json[512];
    snprintf(json, sizeof(json), "%s/out.json", dir);
    char *argv[] = {LAUNCHER,    "launch", "-n", "2",    "--", BENCH,          "compress",
                    "-b",        "256K",   "-e", "256K", "-C", "topk",         "--momentum",
                    "0.9",       "-n",     "3",  "-w",   "1",  "--solo_iters", "1",
                    "--no-sort", "--json", json, NULL};
    char tenv[] = "GW_TIMEOUT_MS=60000";
    char *env[] = {tenv, NULL};
    run_result_t r = run_cmd(argv, env, 280);
    cr_assert(r.exited && r.status == 0, "bench failed (%d):\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "DGC momentum 0.9"), "setting not printed:\n%s", r.output);
    char *doc = read_file(json);
    cr_assert_not_null(doc, "no JSON written");
    cr_expect(strstr(doc, "\"topk_momentum\": 0.9"), "%s", doc);
    cr_expect_eq(count(doc, "\"agree\": true"), 2, "dense + top-k rows agree:\n%s", doc);
    free(doc);
    free(r.output);
    remove_tree(dir);
    free(dir);
}

Test(compress_bench, bad_command_lines, .timeout = 60)
{
    static const char *const bad[][3] = {{"-C", "gzip", NULL},      {"-r", "0", NULL},
                                         {"-r", "1.5", NULL},       {"-k", "0", NULL},
                                         {"-b", "2", NULL},         {"--bogus", NULL, NULL},
                                         {"--momentum", "1", NULL}, {"--momentum", "-0.1", NULL},
                                         {"-e", "1K", "-b"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *argv[8] = {BENCH, "compress"};
        int a = 2;
        for (int j = 0; j < 3 && bad[i][j]; j++)
            argv[a++] = (char *)bad[i][j];
        if (i == sizeof(bad) / sizeof(bad[0]) - 1)
            argv[a++] = "4K"; /* minbytes above maxbytes */
        argv[a] = NULL;
        run_result_t r = run_cmd(argv, NULL, 30);
        cr_expect(r.exited && r.status == 2, "%s %s: status %d\n%s", bad[i][0],
                  bad[i][1] ? bad[i][1] : "", r.status, r.output);
        free(r.output);
    }
    char *argv[] = {BENCH, "compress", "--help", NULL};
    run_result_t r = run_cmd(argv, NULL, 30);
    cr_expect(r.exited && r.status == 0 && strstr(r.output, "--codecs"), "%s", r.output);
    free(r.output);
}
