/* The cost model: predictions behave as the formulas say, and the choice
 * moves from recursive doubling to tree to ring as messages grow. */
#include <criterion/criterion.h>

#include "collectives/api/api.h"
#include "collectives/tuning.h"

static gw_tuning_t model(void)
{
    gw_tuning_t t;
    gw__tuning_defaults(&t, "tcp");
    return t;
}

Test(tuning, small_messages_pick_latency_optimal)
{
    gw_tuning_t t = model();
    for (int n = 2; n <= 64; n *= 2)
        cr_expect_eq(gw__tuning_pick(&t, n, 8), GW_ALGO_RD, "n=%d 8 bytes", n);
}

Test(tuning, large_messages_pick_ring)
{
    gw_tuning_t t = model();
    for (int n = 2; n <= 64; n++)
        cr_expect_eq(gw__tuning_pick(&t, n, (size_t)256 << 20), GW_ALGO_RING, "n=%d 256 MiB", n);
}

Test(tuning, medium_messages_on_many_ranks_pick_tree)
{
    gw_tuning_t t = model();
    /* At 1024 ranks the ring's 2(n-1) alpha dominates a 4 MiB message,
     * and recursive doubling's 10 whole copies cost more than the tree's
     * pipeline. */
    cr_expect_eq(gw__tuning_pick(&t, 1024, 4 << 20), GW_ALGO_TREE);
}

Test(tuning, predictions_follow_the_formulas)
{
    gw_tuning_t t = {.alpha = 1e-5, .beta = 1e-9, .gamma = 0, .chunk_bytes = 1 << 20};
    /* ring, n=4, S=4000: 6 alpha + 1.5 S beta */
    cr_expect_float_eq(gw__tuning_predict(&t, GW_ALGO_RING, 4, 4000), 6e-5 + 6e-6, 1e-12);
    /* rd, n=4 (power of two): 2 (alpha + S beta) */
    cr_expect_float_eq(gw__tuning_predict(&t, GW_ALGO_RD, 4, 4000), 2 * (1e-5 + 4e-6), 1e-12);
    /* rd, n=5: ceil(log2 5) = 3 rounds plus fold in and out */
    cr_expect_float_eq(gw__tuning_predict(&t, GW_ALGO_RD, 5, 4000), 5 * (1e-5 + 4e-6), 1e-12);
    /* one rank costs nothing */
    cr_expect_float_eq(gw__tuning_predict(&t, GW_ALGO_RING, 1, 4000), 0.0, 1e-15);
}

Test(tuning, predictions_grow_with_size)
{
    gw_tuning_t t = model();
    for (int a = GW_ALGO_RING; a < GW_ALGO_COUNT; a++)
        for (size_t s = 1; s < ((size_t)1 << 30); s *= 4)
            cr_expect_lt(gw__tuning_predict(&t, (gw_algo_t)a, 8, s),
                         gw__tuning_predict(&t, (gw_algo_t)a, 8, s * 4));
}

/* ---- tuning files ---------------------------------------------------------- */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/coll.h"

/* Parse text as a tuning file over the defaults; the log goes to *log. */
static gw_status_t parse_text(const char *text, gw_tuning_t *t, char **log)
{
    size_t loglen = 0;
    FILE *lf = open_memstream(log, &loglen);
    cr_assert_not_null(lf);
    gw_logger_t lg = {.level = GW_LOG_ERROR, .rank = 0, .file = lf};
    snprintf(lg.host, sizeof(lg.host), "test");
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    cr_assert_not_null(f);
    gw__tuning_defaults(t, "tcp");
    gw_status_t st = gw__tuning_parse(t, f, "t.conf", &lg);
    fclose(f);
    fclose(lf);
    return st;
}

Test(tuning_file, every_key_with_comments_and_spaces)
{
    gw_tuning_t t;
    char *log = NULL;
    gw_status_t st = parse_text("# measured by hand\n"
                                "\n"
                                "gradwire-tuning 1   # version\n"
                                "alpha=3.5e-05\n"
                                "  beta =  4e-09  \n"
                                "\tgamma\t=\t2.5e-10 # comment\n"
                                "chunk_bytes = 131072\n",
                                &t, &log);
    cr_assert_eq(st, GW_OK, "log: %s", log);
    cr_expect_float_eq(t.alpha, 3.5e-5, 1e-15);
    cr_expect_float_eq(t.beta, 4e-9, 1e-20);
    cr_expect_float_eq(t.gamma, 2.5e-10, 1e-20);
    cr_expect_eq(t.chunk_bytes, 131072);
    cr_expect_str_empty(log);
    free(log);
}

Test(tuning_file, missing_keys_keep_defaults)
{
    gw_tuning_t t, d;
    char *log = NULL;
    gw__tuning_defaults(&d, "tcp");
    cr_assert_eq(parse_text("gradwire-tuning 1\nbeta = 1e-08\n", &t, &log), GW_OK, "%s", log);
    cr_expect_float_eq(t.beta, 1e-8, 1e-20);
    cr_expect_float_eq(t.alpha, d.alpha, 1e-20);
    cr_expect_float_eq(t.gamma, d.gamma, 1e-20);
    cr_expect_eq(t.chunk_bytes, d.chunk_bytes);
    free(log);
}

/* Every malformed file is GW_ERR_CONFIG, leaves the figures alone, and the
 * log names the line and the reason. */
Test(tuning_file, malformed_files_name_the_line)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"", "empty"},
        {"# only a comment\n\n", "empty"},
        {"alpha = 1e-5\n", "line 1: expected the version line"},
        {"gradwire-tuning 2\nalpha = 1e-5\n", "line 1: tuning file version 2"},
        {"gradwire-tuning one\n", "line 1: bad version"},
        {"gradwire-tuning 1\nalpha = 1e-5\nalhpa = 1e-5\n", "line 3: unknown key \"alhpa\""},
        {"gradwire-tuning 1\n\nbeta 1e-9\n", "line 3: expected key = value"},
        {"gradwire-tuning 1\nbeta = 1e-9\nbeta = 2e-9\n",
         "line 3: beta given again (first on line 2)"},
        {"gradwire-tuning 1\nalpha = fast\n", "line 2: alpha \"fast\" is not a number"},
        {"gradwire-tuning 1\nalpha = -1e-5\n", "line 2: alpha \"-1e-5\""},
        {"gradwire-tuning 1\nalpha = nan\n", "line 2: alpha \"nan\""},
        {"gradwire-tuning 1\nbeta = inf\n", "line 2: beta \"inf\""},
        {"gradwire-tuning 1\ngamma = 1e-9x\n", "line 2: gamma \"1e-9x\""},
        {"gradwire-tuning 1\ngamma =\n", "line 2: gamma \"\""},
        {"gradwire-tuning 1\nbeta = 2\n",
         "line 2: beta \"2\" is not a number of seconds in [0, 1]"},
        {"gradwire-tuning 1\nchunk_bytes = 100\n", "line 2: chunk_bytes \"100\" is not an integer"},
        {"gradwire-tuning 1\nchunk_bytes = 64K\n", "line 2: chunk_bytes \"64K\""},
        {"gradwire-tuning 1\n = 5\n", "line 2: unknown key \"\""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_tuning_t t, d;
        char *log = NULL;
        gw__tuning_defaults(&d, "tcp");
        gw_status_t st = parse_text(cases[i].text, &t, &log);
        cr_expect_eq(st, GW_ERR_CONFIG, "case %zu: status %s", i, gw_status_name(st));
        cr_expect(strstr(log, "t.conf") && strstr(log, cases[i].want),
                  "case %zu: log lacks \"%s\": %s", i, cases[i].want, log);
        cr_expect(t.alpha == d.alpha && t.beta == d.beta && t.gamma == d.gamma &&
                      t.chunk_bytes == d.chunk_bytes,
                  "case %zu changed the figures", i);
        free(log);
    }
}

Test(tuning_file, overlong_line_and_nul_byte)
{
    gw_tuning_t t;
    char *log = NULL;
    char text[4096] = "gradwire-tuning 1\n# ";
    memset(text + strlen(text), 'x', 2000);
    cr_expect_eq(parse_text(text, &t, &log), GW_ERR_CONFIG);
    cr_expect(strstr(log, "line 2: longer than"), "%s", log);
    free(log);
    log = NULL;
    static const char nul[] = "gradwire-tuning 1\nalpha = 1e-5\0junk\n";
    size_t loglen = 0;
    FILE *lf = open_memstream(&log, &loglen);
    gw_logger_t lg = {.level = GW_LOG_ERROR, .file = lf};
    FILE *f = fmemopen((void *)nul, sizeof(nul) - 1, "r");
    gw__tuning_defaults(&t, "tcp");
    cr_expect_eq(gw__tuning_parse(&t, f, "t.conf", &lg), GW_ERR_CONFIG);
    fclose(f);
    fclose(lf);
    cr_expect(strstr(log, "line 2: NUL byte"), "%s", log);
    free(log);
}

Test(tuning_file, write_then_parse_round_trips)
{
    gw_tuning_t t = {
        .alpha = 1.234567891e-5, .beta = 9.87654321e-10, .gamma = 3.3e-11, .chunk_bytes = 262144};
    char *buf = NULL, *log = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(gw__tuning_write(&t, f), GW_OK);
    fclose(f);
    gw_tuning_t u;
    cr_assert_eq(parse_text(buf, &u, &log), GW_OK, "%s\n%s", buf, log);
    /* Nine significant digits: far more than any measurement has. */
    cr_expect_float_eq(u.alpha, t.alpha, t.alpha * 1e-8);
    cr_expect_float_eq(u.beta, t.beta, t.beta * 1e-8);
    cr_expect_float_eq(u.gamma, t.gamma, t.gamma * 1e-8);
    cr_expect_eq(u.chunk_bytes, t.chunk_bytes);
    free(buf);
    free(log);
}

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/gw-tuning-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static gw_status_t one_rank_comm(gw_comm_t **out)
{
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = 0;
    cfg.size = 1;
    return gw_comm_init(&cfg, out);
}

/* gw_comm_init reads GW_TUNING_FILE: its figures drive the cost model. */
Test(tuning_file, comm_init_loads_gw_tuning_file)
{
    /* A huge alpha and a tiny beta: every size looks bandwidth-free and
     * latency-bound, so the model picks recursive doubling even at 1 GiB,
     * where the defaults pick the ring. */
    char *path = write_tmp("gradwire-tuning 1\nalpha = 1\nbeta = 1e-15\ngamma = 0\n"
                           "chunk_bytes = 65536\n");
    setenv("GW_TUNING_FILE", path, 1);
    unsetenv("GW_ALGO");
    unsetenv("GW_CHUNK_BYTES");
    gw_comm_t *comm = NULL;
    cr_assert_eq(one_rank_comm(&comm), GW_OK);
    cr_expect_float_eq(comm->tuning.alpha, 1.0, 1e-12);
    cr_expect_eq(comm->chunk_bytes, 65536);
    cr_expect_eq(gw__tuning_pick(&comm->tuning, 8, (size_t)1 << 30), GW_ALGO_RD);
    gw_comm_destroy(comm);

    /* GW_CHUNK_BYTES still wins over the file's chunk size. */
    setenv("GW_CHUNK_BYTES", "8192", 1);
    cr_assert_eq(one_rank_comm(&comm), GW_OK);
    cr_expect_eq(comm->chunk_bytes, 8192);
    cr_expect_eq(comm->tuning.chunk_bytes, 8192);
    gw_comm_destroy(comm);
    unsetenv("GW_CHUNK_BYTES");

    /* GW_ALGO still overrides whatever the model would pick. */
    setenv("GW_ALGO", "ring", 1);
    cr_assert_eq(one_rank_comm(&comm), GW_OK);
    cr_expect_eq(gw_comm_pick_algo(comm, (size_t)1 << 28, GW_FLOAT32), GW_ALGO_RING);
    gw_comm_destroy(comm);
    unlink(path);
    free(path);
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return strdup("");
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

Test(tuning_file, comm_init_fails_on_bad_or_missing_file)
{
    char logpath[] = "/tmp/gw-tuning-log-XXXXXX";
    int fd = mkstemp(logpath);
    cr_assert_geq(fd, 0);
    close(fd);
    setenv("GW_DEBUG_FILE", logpath, 1);
    setenv("GW_DEBUG", "WARN", 1);
    unsetenv("GW_ALGO");

    char *path = write_tmp("gradwire-tuning 1\nalpha = 1e-5\nbta = 1e-9\n");
    setenv("GW_TUNING_FILE", path, 1);
    gw_comm_t *comm = NULL;
    cr_expect_eq(one_rank_comm(&comm), GW_ERR_CONFIG);
    cr_expect_null(comm);
    char *log = read_all(logpath);
    char want[256];
    snprintf(want, sizeof(want), "GW_TUNING_FILE=%s line 3: unknown key \"bta\"", path);
    cr_expect(strstr(log, want), "log lacks \"%s\":\n%s", want, log);
    free(log);
    unlink(path);

    /* The file is gone now: the error names the path. */
    cr_expect_eq(one_rank_comm(&comm), GW_ERR_CONFIG);
    log = read_all(logpath);
    snprintf(want, sizeof(want), "cannot open GW_TUNING_FILE=%s: No such file or directory", path);
    cr_expect(strstr(log, want), "log lacks \"%s\":\n%s", want, log);
    free(log);

    /* Set but empty is an error naming the variable, not the defaults. */
    setenv("GW_TUNING_FILE", "", 1);
    cr_expect_eq(one_rank_comm(&comm), GW_ERR_CONFIG);
    log = read_all(logpath);
    cr_expect(strstr(log, "GW_TUNING_FILE is set but empty"), "log:\n%s", log);
    free(log);
    free(path);
    unlink(logpath);
}

/* ---- gradwire-bench tune: the writer of tuning files ---------------------------- */

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define BENCH GW_BUILD_DIR "/gradwire-bench"

/* Two ranks on loopback: what tune writes, the library reads, and the
 * figures are plausible for what they measure. */
/* The number after `key` in text, or -1. */
static double number_after(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtod(p + strlen(key), NULL) : -1;
}

Test(tuning_bench, tune_output_loads, .timeout = 120)
{
    char *dir = make_tmpdir("tune");
    cr_assert_not_null(dir);
    char out[512];
    snprintf(out, sizeof(out), "%s/t.tuning", dir);
    char *argv[] = {LAUNCHER, "launch", "-n",    "2",  "--timeout", "100", "--",
                    BENCH,    "tune",   "--out", out,  "-s",        "4M",  "-g",
                    "4M",     "-n",     "3",     "-m", "20",        NULL};
    char *env[] = {"GW_TRANSPORT=tcp", NULL};
    run_result_t r = run_cmd(argv, env, 110);
    cr_assert(r.exited && r.status == 0, "tune failed (status %d):\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "alpha = ") && strstr(r.output, "beta = ") &&
                  strstr(r.output, "gamma = ") && strstr(r.output, "wrote "),
              "%s", r.output);
    gw_tuning_t t = {0};
    gw_logger_t lg = {.level = GW_LOG_ERROR, .file = stderr};
    cr_assert_eq(gw__tuning_load(&t, out, &lg), GW_OK);
    /* Seconds per message, per byte on the wire and per byte reduced: none
     * slower than a second per message or a megabyte. The file's alpha is
     * the fit of what tune measured (its median over the rounds), not the
     * floor it clamps to: what alpha is worth on a link of known latency is
     * checked on the emulated hosts below. */
    double med_us = number_after(r.output, "recursive doubling in 1 round: median ");
    cr_expect(med_us > 0 && fabs(t.alpha - med_us * 1e-6) <= 0.006e-6 + 1e-3 * t.alpha,
              "alpha %g is not the measured median %g us of one round:\n%s", t.alpha, med_us,
              r.output);
    cr_expect(t.alpha < 1, "alpha %g", t.alpha);
    cr_expect(t.beta > 0 && t.beta < 1e-6, "beta %g", t.beta);
    cr_expect(t.gamma > 0 && t.gamma < 1e-6, "gamma %g", t.gamma);
    char *text = read_file(out);
    cr_assert_not_null(text);
    cr_expect_eq(strncmp(text, "gradwire-tuning 1\n", 18), 0, "%s", text);
    /* Over TCP the rules (about shared memory on one host) are left alone. */
    cr_expect(!strstr(text, "direct_") && strstr(r.output, "# rules: not measured"),
              "rules measured over TCP:\n%s\n%s", text, r.output);
    free(text);
    free(r.output);

    /* Two ranks over shared memory: both rules for 2 ranks are measured
     * (their values are this machine's, not judged here) and load. */
    char *shm_env[] = {"GW_TRANSPORT=shm", NULL};
    char *argv1[] = {LAUNCHER, "launch", "-n",    "2",  "--timeout", "100", "--",
                     BENCH,    "tune",   "--out", out,  "-s",        "4M",  "-g",
                     "0",      "-n",     "3",     "-m", "20",        NULL};
    r = run_cmd(argv1, shm_env, 110);
    cr_assert(r.exited && r.status == 0, "tune over shm failed (status %d):\n%s", r.status,
              r.output);
    text = read_file(out);
    cr_assert_not_null(text);
    cr_expect(strstr(text, "\ndirect_pair_min = ") && strstr(text, "\ndirect_large_min = ") &&
                  strstr(r.output, "# rules: allreduce on 2 ranks"),
              "no measured rule in the file:\n%s\n%s", text, r.output);
    gw_tuning_t rt;
    memset(&rt, 0, sizeof(rt));
    cr_assert_eq(gw__tuning_load(&rt, out, &lg), GW_OK);
    char given[512];
    gw__tuning_describe_file(&rt, given, sizeof(given));
    cr_expect(strstr(given, "direct_pair_min=") && strstr(given, "direct_large_min="),
              "the rules did not load: %s", given);
    free(text);
    free(r.output);

    /* --no-rules: the figures alone. */
    char *argv2[] = {LAUNCHER, "launch", "-n",    "2",  "--timeout", "100",        "--",
                     BENCH,    "tune",   "--out", out,  "-s",        "4M",         "-g",
                     "0",      "-n",     "3",     "-m", "20",        "--no-rules", NULL};
    r = run_cmd(argv2, shm_env, 110);
    cr_assert(r.exited && r.status == 0, "tune --no-rules failed (status %d):\n%s", r.status,
              r.output);
    text = read_file(out);
    cr_assert_not_null(text);
    cr_expect(!strstr(text, "direct_large_min") && !strstr(r.output, "# rules:"),
              "--no-rules measured the rules:\n%s", text);
    free(text);
    free(r.output);
    remove_tree(dir);
    free(dir);
}

Test(tuning_bench, tune_usage_and_one_rank, .timeout = 60)
{
    static const char *const bad[][6] = {
        {BENCH, "tune", "--bogus", NULL},    {BENCH, "tune", "-s", "100", NULL},
        {BENCH, "tune", "-g", "1000", NULL}, {BENCH, "tune", "-n", "0", NULL},
        {BENCH, "tune", "--out", "", NULL},  {BENCH, "tune", "extra", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        run_result_t r = run_cmd((char *const *)bad[i], NULL, 20);
        cr_expect(r.exited && r.status == 2, "case %zu: status %d:\n%s", i, r.status, r.output);
        cr_expect(strstr(r.output, "gradwire-bench tune: "), "case %zu:\n%s", i, r.output);
        free(r.output);
    }
    char *one[] = {LAUNCHER, "launch", "-n", "1", "--", BENCH, "tune", NULL};
    run_result_t r = run_cmd(one, NULL, 30);
    cr_expect(r.exited && r.status == 1, "status %d:\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "needs at least 2 ranks"), "%s", r.output);
    free(r.output);
    char *help[] = {BENCH, "tune", "--help", NULL};
    r = run_cmd(help, NULL, 20);
    cr_expect(r.exited && r.status == 0 && strstr(r.output, "usage: gradwire-bench tune"), "%s",
              r.output);
    free(r.output);
}

/* ---- tune on links of known speed and latency --------------------------------- */

#define CLUSTER GW_SOURCE_DIR "/scripts/cluster.sh"

static char shaped_prefix[64];

static void shaped_down(void)
{
    if (!shaped_prefix[0])
        return;
    char *argv[] = {CLUSTER, "down", "--prefix", shaped_prefix, NULL};
    run_result_t r = run_cmd(argv, NULL, 60);
    free(r.output);
    shaped_prefix[0] = '\0';
}

/* Two emulated hosts (scripts/cluster.sh) shaped by `shape` (cluster.sh up
 * options), then `gradwire-bench tune` across them; returns what tune wrote.
 * Skips, saying why, where emulated hosts are not available, or a delay
 * neither by netem nor by the user-space relay (cluster.sh --delay-mode). */
static gw_tuning_t tune_on_hosts(char *const shape[], char **output)
{
    if (geteuid() != 0)
        cr_skip_test("tune on emulated hosts needs root (network namespaces and tc)");
    if (system("command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1") != 0)
        cr_skip_test("tune on emulated hosts needs ip and tc (Debian package iproute2)");
    snprintf(shaped_prefix, sizeof(shaped_prefix), "gwtune%dx", (int)getpid());
    char *argv[16] = {CLUSTER, "up", "2", "--prefix", shaped_prefix};
    int a = 5;
    for (int i = 0; shape[i] && a < 15; i++)
        argv[a++] = shape[i];
    argv[a] = NULL;
    run_result_t r = run_cmd(argv, NULL, 60);
    if (!(r.exited && r.status == 0) && strstr(r.output, "needs the netem qdisc")) {
        free(r.output);
        shaped_prefix[0] = '\0';
        cr_skip_test("a link of known latency needs the kernel's netem qdisc, which this kernel "
                     "lacks, or cluster.sh's user-space relay (gradwire-netdelay), not found");
    }
    if (!(r.exited && r.status == 0) && strstr(r.output, "network namespace")) {
        free(r.output);
        cr_skip_test("cannot create network namespaces here");
    }
    cr_assert(r.exited && r.status == 0, "cluster.sh up failed:\n%s", r.output);
    free(r.output);
    char *dir = make_tmpdir("tuneh");
    cr_assert_not_null(dir);
    char out[512];
    snprintf(out, sizeof(out), "%s/t.tuning", dir);
    char *tune[] = {LAUNCHER, "launch", "--hosts", shaped_prefix, "--timeout", "100", "--",
                    BENCH,    "tune",   "--out",   out,           "-s",        "8M",  "-g",
                    "1M",     "-n",     "5",       "-m",          "30",        NULL};
    r = run_cmd(tune, NULL, 110);
    cr_assert(r.exited && r.status == 0, "tune failed (status %d):\n%s", r.status, r.output);
    gw_tuning_t t = {0};
    gw_logger_t lg = {.level = GW_LOG_ERROR, .file = stderr};
    cr_assert_eq(gw__tuning_load(&t, out, &lg), GW_OK, "tune wrote a file the library rejects");
    remove_tree(dir);
    free(dir);
    *output = r.output;
    return t;
}

/* 100 Mbit/s links: one TCP stream carries 1448 payload bytes per 1514 on
 * the wire, so the time per byte is 8 / 1e8 * 1514 / 1448 = 83.6 ns. Tune's
 * beta must find it (measured 1.04-1.06 times that: slow start, headers of
 * the protocol), and neither twice nor half of it (the (n-1)/n of the
 * allgather, or alpha, counted wrongly). */
Test(tuning_bench, beta_of_a_100mbit_link, .timeout = 180, .fini = shaped_down)
{
    char *shape[] = {"--rate", "100mbit", NULL};
    char *out = NULL;
    gw_tuning_t t = tune_on_hosts(shape, &out);
    double want = 8.0 / 1e8 * 1514.0 / 1448.0;
    cr_expect(t.beta >= 0.95 * want && t.beta <= 1.35 * want,
              "beta %.4g s/byte on a 100 Mbit/s link, want %.4g (0.95-1.35 times):\n%s", t.beta,
              want, out);
    free(out);
}

/* 5 ms of delay on each host's egress: every message takes 5 ms one way,
 * and a round of recursive doubling between two ranks is one message each
 * way at once, so alpha must be 5 ms (and the little the stack adds), not
 * the microseconds of loopback nor a round trip. */
Test(tuning_bench, alpha_of_a_5ms_link, .timeout = 180, .fini = shaped_down)
{
    char *shape[] = {"--delay", "5ms", NULL};
    char *out = NULL;
    gw_tuning_t t = tune_on_hosts(shape, &out);
    cr_expect(t.alpha >= 0.9 * 5e-3 && t.alpha <= 1.6 * 5e-3,
              "alpha %.4g s with 5 ms one way, want 4.5-8 ms:\n%s", t.alpha, out);
    free(out);
}

/* One host over shared memory (shm's figures): the direct exchange's
 * one round for small messages on up to GW_TUNING_DIRECT_MAX_RANKS ranks,
 * never above GW_TUNING_DIRECT_MAX_BYTES, and hier's two rounds once the
 * n - 1 copies of the direct form cost more than an alpha. */
Test(tuning, one_host_over_shm_picks_direct_for_small_messages)
{
    gw_tuning_t t;
    gw__tuning_defaults(&t, "shm");
    for (int n = 3; n <= GW_TUNING_DIRECT_MAX_RANKS + 1; n++) {
        for (size_t s = 0; s <= 512; s = s ? s * 4 : 8)
            cr_expect_eq(gw__tuning_pick_shm(&t, n, s),
                         n <= GW_TUNING_DIRECT_MAX_RANKS ? GW_ALGO_DIRECT
                                                         : gw__tuning_pick_hosts(&t, n, 1, n, s),
                         "n=%d %zu bytes", n, s);
        /* Up to the large forms' own rules (the tests after this one). */
        size_t large = n <= GW_TUNING_DIRECT_LARGE_MAX_RANKS ? GW_TUNING_DIRECT_SHM_MIN
                                                             : GW_TUNING_DIRECT_LARGE_MIN;
        for (size_t s = GW_TUNING_DIRECT_MAX_BYTES + 1; s < large; s *= 4)
            cr_expect_neq(gw__tuning_pick_shm(&t, n, s), GW_ALGO_DIRECT, "n=%d %zu bytes", n, s);
        cr_expect_eq(gw__tuning_pick_shm(&t, n, 24 << 10), GW_ALGO_HIER, "n=%d 24 KiB", n);
    }
    /* Even a huge alpha does not bring the direct form past its limit. */
    t.alpha = 1;
    cr_expect_neq(gw__tuning_pick_shm(&t, 4, GW_TUNING_DIRECT_MAX_BYTES + 1), GW_ALGO_DIRECT);
    cr_expect_eq(gw__tuning_pick_shm(&t, 4, GW_TUNING_DIRECT_MAX_BYTES), GW_ALGO_DIRECT);
}

/* ---- figures per transport ------------------------------------------------------ */

/* Each transport's defaults differ, and a communicator that mixes them
 * takes the worst link for alpha and beta and the worst link inside a host
 * for the local phases. */
Test(tuning, figures_per_transport_and_the_worst_link)
{
    gw_tuning_t shm, tcp, ib, mixed, mixed_ib, none;
    gw__tuning_links(&shm, GW_TUNING_LINK_SHM, 0);
    gw__tuning_links(&tcp, GW_TUNING_LINK_TCP, GW_TUNING_LINK_TCP);
    gw__tuning_links(&ib, 0, GW_TUNING_LINK_IB);
    gw__tuning_links(&mixed, GW_TUNING_LINK_SHM, GW_TUNING_LINK_TCP);
    gw__tuning_links(&mixed_ib, GW_TUNING_LINK_SHM, GW_TUNING_LINK_IB | GW_TUNING_LINK_TCP);
    gw__tuning_links(&none, 0, 0);
    /* Shared memory is the cheapest message, RDMA the fastest byte. */
    cr_expect_lt(shm.alpha, tcp.alpha);
    cr_expect_lt(ib.alpha, tcp.alpha);
    cr_expect_lt(ib.beta, shm.beta);
    cr_expect_lt(shm.beta, tcp.beta);
    cr_expect_float_eq(mixed.alpha, tcp.alpha, 1e-15);
    cr_expect_float_eq(mixed.beta, tcp.beta, 1e-18);
    cr_expect_float_eq(mixed.beta_local, shm.beta_local, 1e-18);
    cr_expect_float_eq(mixed.alpha_local, shm.alpha_local, 1e-15);
    cr_expect_float_eq(mixed_ib.beta, tcp.beta, 1e-18, "some pairs across hosts use TCP");
    cr_expect_float_eq(none.alpha, tcp.alpha, 1e-15);
    gw_tuning_t named;
    gw__tuning_defaults(&named, "shm");
    cr_expect_float_eq(named.alpha, shm.alpha, 1e-15);
    gw__tuning_defaults(&named, "ib");
    cr_expect_float_eq(named.beta, ib.beta, 1e-18);
}

/* The choice follows the transport (figures injected as comm_tuning.c
 * would set them): on one host of 4 ranks, a 1 MiB message takes hier
 * over TCP (two rounds of concurrent loopback copies) and the direct
 * exchange over shared memory (a measured rule); a 2 KiB message the direct exchange over shared memory
 * and recursive doubling over TCP, where hier's six messages a rank cost
 * six system calls; 8 ranks on 8 hosts at 128 KiB take the ring over RDMA
 * and recursive doubling over TCP's 11 us messages. */
Test(tuning, the_choice_follows_the_transport)
{
    gw_tuning_t shm, tcp, ib;
    gw__tuning_links(&shm, GW_TUNING_LINK_SHM, 0);
    gw__tuning_links(&tcp, GW_TUNING_LINK_TCP, 0);
    gw__tuning_links(&ib, 0, GW_TUNING_LINK_IB);
    cr_expect_eq(gw__tuning_pick_hosts(&tcp, 4, 1, 4, 1 << 20), GW_ALGO_HIER);
    /* With 2 ranks on the host nothing is concurrent: the ring. */
    cr_expect_eq(gw__tuning_pick_hosts(&tcp, 2, 1, 2, 1 << 20), GW_ALGO_RING);
    cr_expect_eq(gw__tuning_pick_shm(&shm, 4, 1 << 20), GW_ALGO_DIRECT);
    cr_expect_eq(gw__tuning_pick_shm(&shm, 4, 2048), GW_ALGO_DIRECT);
    cr_expect_eq(gw__tuning_pick_hosts(&tcp, 4, 1, 4, 2048), GW_ALGO_RD);
    cr_expect_eq(gw__tuning_pick(&ib, 8, 128 << 10), GW_ALGO_RING);
    cr_expect_eq(gw__tuning_pick(&tcp, 8, 128 << 10), GW_ALGO_RD);
    /* Two hosts of 4 joined by TCP, shared memory inside: hier from 128
     * KiB, where one set of figures for both kept the ring. */
    gw_tuning_t mixed;
    gw__tuning_links(&mixed, GW_TUNING_LINK_SHM, GW_TUNING_LINK_TCP);
    cr_expect_eq(gw__tuning_pick_hosts(&mixed, 8, 2, 4, 128 << 10), GW_ALGO_HIER);
    cr_expect_eq(gw__tuning_pick_hosts(&mixed, 8, 2, 4, 8), GW_ALGO_RD);
}

/* On one host of 2 to 4 ranks, over shared memory or TCP, 8 MiB and more
 * take the direct exchange's large form (a measured rule); just below, with
 * 8 ranks, or across hosts, the model decides as before. */
Test(tuning, large_messages_on_a_few_ranks_of_one_host_take_direct)
{
    gw_tuning_t shm, tcp;
    gw__tuning_links(&shm, GW_TUNING_LINK_SHM, 0);
    gw__tuning_links(&tcp, GW_TUNING_LINK_TCP, 0);
    const size_t min = GW_TUNING_DIRECT_LARGE_MIN;
    for (int n = 2; n <= GW_TUNING_DIRECT_LARGE_MAX_RANKS; n++) {
        cr_expect_eq(gw__tuning_pick_shm(&shm, n, min), GW_ALGO_DIRECT, "shm, %d ranks", n);
        cr_expect_eq(gw__tuning_pick_shm(&shm, n, (size_t)1 << 30), GW_ALGO_DIRECT);
        cr_expect_eq(gw__tuning_pick_hosts(&tcp, n, 1, n, min), GW_ALGO_DIRECT, "tcp, %d", n);
        /* Below it, over shm, the rules of the two tests after this one. */
        cr_expect_neq(gw__tuning_pick_hosts(&tcp, n, 1, n, min - 1), GW_ALGO_DIRECT);
    }
    cr_expect_eq(gw__tuning_pick_shm(&shm, 8, min), GW_ALGO_RING, "8 ranks: the model's ring");
    cr_expect_neq(gw__tuning_pick_hosts(&tcp, 8, 1, 8, min), GW_ALGO_DIRECT);
    cr_expect_neq(gw__tuning_pick_hosts(&tcp, 4, 2, 2, min), GW_ALGO_DIRECT, "two hosts");
    cr_expect_neq(gw__tuning_pick(&tcp, 4, min), GW_ALGO_DIRECT, "one rank per host");
}

/* Two ranks over shared memory take the direct exchange's large form from
 * GW_TUNING_DIRECT_PAIR_MIN (a measured rule); one byte less the model
 * decides, and 3 ranks, or 2 over TCP, keep the model's choice there. */
Test(tuning, two_ranks_over_shm_take_direct_from_the_pair_min)
{
    gw_tuning_t shm, tcp;
    gw__tuning_links(&shm, GW_TUNING_LINK_SHM, 0);
    gw__tuning_links(&tcp, GW_TUNING_LINK_TCP, 0);
    const size_t min = GW_TUNING_DIRECT_PAIR_MIN;
    for (size_t s = min; s < GW_TUNING_DIRECT_LARGE_MIN; s *= 2)
        cr_expect_eq(gw__tuning_pick_shm(&shm, 2, s), GW_ALGO_DIRECT, "%zu bytes", s);
    cr_expect_eq(gw__tuning_pick_shm(&shm, 2, min + 1), GW_ALGO_DIRECT);
    cr_expect_neq(gw__tuning_pick_shm(&shm, 2, min - 1), GW_ALGO_DIRECT);
    cr_expect_neq(gw__tuning_pick_hosts(&tcp, 2, 1, 2, min), GW_ALGO_DIRECT, "over TCP");
}

/* Three and four ranks over shared memory take the direct exchange's large
 * form from GW_TUNING_DIRECT_SHM_MIN (a measured rule); one byte less, on
 * 2 ranks below the pair's rule, on 8 ranks, over TCP, or with the rule
 * off (0), the model decides. */
Test(tuning, three_and_four_ranks_over_shm_take_direct_from_the_shm_min)
{
    gw_tuning_t shm, tcp;
    gw__tuning_links(&shm, GW_TUNING_LINK_SHM, 0);
    gw__tuning_links(&tcp, GW_TUNING_LINK_TCP, 0);
    const size_t min = GW_TUNING_DIRECT_SHM_MIN;
    for (int n = 3; n <= 4; n++) {
        for (size_t s = min; s <= GW_TUNING_DIRECT_LARGE_MIN; s *= 2)
            cr_expect_eq(gw__tuning_pick_shm(&shm, n, s), GW_ALGO_DIRECT, "n=%d %zu bytes", n, s);
        cr_expect_neq(gw__tuning_pick_shm(&shm, n, min - 1), GW_ALGO_DIRECT, "n=%d", n);
        cr_expect_neq(gw__tuning_pick_hosts(&tcp, n, 1, n, min), GW_ALGO_DIRECT, "n=%d tcp", n);
    }
    cr_expect_neq(gw__tuning_pick_shm(&shm, 2, min), GW_ALGO_DIRECT, "2 ranks: the pair's rule");
    cr_expect_neq(gw__tuning_pick_shm(&shm, 8, min), GW_ALGO_DIRECT, "8 ranks");
    shm.direct_shm_min = 0;
    cr_expect_neq(gw__tuning_pick_shm(&shm, 4, 1 << 20), GW_ALGO_DIRECT, "the rule off");
}

/* Four ranks over shared memory take the tree in [tree4_min, tree4_end),
 * a range a tuning file sets (off by default), ahead of the direct rule;
 * outside it, on 3 or 8 ranks, and over TCP the others decide. */
Test(tuning, four_ranks_over_shm_take_the_tree_in_its_range)
{
    gw_tuning_t shm, tcp;
    gw__tuning_links(&shm, GW_TUNING_LINK_SHM, 0);
    gw__tuning_links(&tcp, GW_TUNING_LINK_TCP, 0);
    cr_expect_eq(GW_TUNING_TREE4_END, 0, "off by default");
    const size_t lo = 64 * 1024, hi = 256 * 1024;
    shm.tree4_min = lo;
    shm.tree4_end = hi;
    for (size_t s = lo; s < hi; s += lo / 2)
        cr_expect_eq(gw__tuning_pick_shm(&shm, 4, s), GW_ALGO_TREE, "%zu bytes", s);
    cr_expect_eq(gw__tuning_pick_shm(&shm, 4, hi - 1), GW_ALGO_TREE);
    cr_expect_neq(gw__tuning_pick_shm(&shm, 4, lo - 1), GW_ALGO_TREE);
    cr_expect_neq(gw__tuning_pick_shm(&shm, 4, hi), GW_ALGO_TREE);
    cr_expect_neq(gw__tuning_pick_shm(&shm, 3, lo), GW_ALGO_TREE);
    cr_expect_neq(gw__tuning_pick_shm(&shm, 8, lo), GW_ALGO_TREE);
    cr_expect_neq(gw__tuning_pick_hosts(&tcp, 4, 1, 4, lo), GW_ALGO_TREE, "over TCP");
}

/* A tuning file's keys go over the transport's defaults; the keys it does
 * not give keep them (comm_tuning.c's overlay). */
Test(tuning_file, file_keys_over_the_transports_defaults)
{
    char *path = write_tmp("gradwire-tuning 1\nbeta = 1e-9\n");
    setenv("GW_TUNING_FILE", path, 1);
    gw_logger_t lg = {.level = GW_LOG_ERROR, .file = stderr};
    gw_tuning_t file;
    cr_assert_eq(gw__comm_tuning_file(&file, &lg), GW_OK);
    char given[256];
    gw__tuning_describe_file(&file, given, sizeof(given));
    cr_expect_str_eq(given, "beta=1e-09", "the file gave beta alone, not: %s", given);
    gw_comm_t comm;
    memset(&comm, 0, sizeof(comm));
    gw__comm_tuning_apply(&comm, GW_TUNING_LINK_SHM, 0, &file, 0);
    gw_tuning_t shm;
    gw__tuning_links(&shm, GW_TUNING_LINK_SHM, 0);
    cr_expect_float_eq(comm.tuning.beta, 1e-9, 1e-18);
    cr_expect_float_eq(comm.tuning.alpha, shm.alpha, 1e-15);
    cr_expect_float_eq(comm.tuning.beta_local, shm.beta_local, 1e-18);
    cr_expect_eq(comm.chunk_bytes, shm.chunk_bytes);
    gw__comm_tuning_apply(&comm, GW_TUNING_LINK_TCP, 0, &file, 8192);
    cr_expect_eq(comm.chunk_bytes, 8192);
    gw_tuning_t tcp;
    gw__tuning_links(&tcp, GW_TUNING_LINK_TCP, 0);
    cr_expect_float_eq(comm.tuning.alpha, tcp.alpha, 1e-15);
    unsetenv("GW_TUNING_FILE");
    cr_assert_eq(gw__comm_tuning_file(&file, &lg), GW_OK);
    cr_expect_eq(file.from_file, 0, "no file, yet keys are marked given");
    unlink(path);
    free(path);
}
