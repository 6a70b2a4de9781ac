/*
 * Sub-communicators (gw_comm_split, gw_comm_dup) over real processes:
 * `gradwire launch -n N` starts worker_split as N ranks, over TCP and over
 * shared memory. The worker checks every result against a serial
 * reference and the file descriptors before and after (worker_split.c);
 * here we check what each rank printed.
 */
#include <criterion/criterion.h>

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define WORKER GW_BUILD_DIR "/tests/worker_split"

static run_result_t job_timeout(int n, const char *mode, const char *transport, int timeout_ms,
                                double limit_s)
{
    char ns[8], tr[64], tenv[64];
    snprintf(ns, sizeof(ns), "%d", n);
    snprintf(tr, sizeof(tr), "GW_TRANSPORT=%s", transport);
    snprintf(tenv, sizeof(tenv), "GW_TIMEOUT_MS=%d", timeout_ms);
    char *argv[] = {LAUNCHER, "launch", "-n", ns, "--", WORKER, (char *)mode, NULL};
    char chunk[] = "GW_CHUNK_BYTES=8192"; /* many pipeline steps even at test sizes */
    char *env[] = {tr, tenv, chunk, NULL};
    run_result_t r = run_cmd(argv, env, limit_s);
    cr_assert(!r.timed_out, "%d ranks, %s, %s: hung:\n%s", n, mode, transport, r.output);
    return r;
}

static run_result_t job(int n, const char *mode, const char *transport, double limit_s)
{
    return job_timeout(n, mode, transport, 20000, limit_s);
}

static void expect_line(const run_result_t *r, const char *text)
{
    cr_assert(strstr(r->output, text), "expected \"%s\" in:\n%s", text, r->output);
}

static void all_ok(int n, const char *transport)
{
    run_result_t r = job(n, "all", transport, 200);
    cr_assert(r.exited && r.status == 0, "%d ranks over %s:\n%s", n, transport, r.output);
    for (int rank = 0; rank < n; rank++) {
        char want[32];
        snprintf(want, sizeof(want), "rank %d: ok", rank);
        expect_line(&r, want);
    }
    expect_line(&r, "before and after the splits");
    free(r.output);
}

Test(split, four_ranks_tcp, .timeout = 240) { all_ok(4, "tcp"); }
Test(split, five_ranks_tcp, .timeout = 240) { all_ok(5, "tcp"); }
Test(split, four_ranks_shm, .timeout = 240) { all_ok(4, "shm"); }
Test(split, five_ranks_shm, .timeout = 240) { all_ok(5, "shm"); }
Test(split, one_and_two_ranks, .timeout = 240)
{
    all_ok(1, "tcp");
    all_ok(2, "tcp");
}

static void mismatch(int n, const char *transport)
{
    run_result_t r = job(n, "mismatch", transport, 120);
    cr_assert(r.exited && r.status == 0, "%d ranks over %s:\n%s", n, transport, r.output);
    for (int rank = 0; rank < n; rank += 2) {
        char want[48];
        snprintf(want, sizeof(want), "rank %d: child GW_ERR_MISMATCH", rank);
        expect_line(&r, want);
    }
    free(r.output);
}

Test(split, mismatch_on_a_child_fails_its_ranks, .timeout = 240)
{
    mismatch(4, "tcp");
    mismatch(5, "shm");
}

static void killed(const char *transport)
{
    run_result_t r = job(4, "kill", transport, 120);
    /* Well within the timeout (20 s): the death is seen, not waited out. */
    cr_assert(r.seconds < 15, "took %.1f s:\n%s", r.seconds, r.output);
    /* Parent rank 2 is rank 1 of the even child. */
    expect_line(&r, "rank 0: child GW_ERR_REMOTE culprit 1");
    expect_line(&r, "rank 0: parent GW_ERR_REMOTE culprit 2");
    expect_line(&r, "rank 1: parent GW_ERR_REMOTE culprit 2");
    expect_line(&r, "rank 3: parent GW_ERR_REMOTE culprit 2");
    free(r.output);
}

Test(split, killed_rank_in_a_child_is_named_in_child_ranks, .timeout = 240)
{
    killed("tcp");
    killed("shm");
}

/* Rank 0 closed its communicator, and its referee with it, before a rank
 * of another child hung: that rank's peer times out and blames it, not
 * rank 0 (whom a rank blames when the referee is gone without a word). */
Test(split, a_hang_after_rank_0_left_names_the_hung_rank, .timeout = 120)
{
    const char *transports[] = {"tcp", "shm"};
    for (int t = 0; t < 2; t++) {
        run_result_t r = job_timeout(4, "leave", transports[t], 2000, 60);
        cr_assert(r.exited && r.status == 0, "over %s:\n%s", transports[t], r.output);
        expect_line(&r, "rank 0: left");
        expect_line(&r, "rank 1: child GW_ERR_TIMEOUT culprit 1");
        free(r.output);
    }
}

Test(split, aborting_the_parent_ends_a_child_collective, .timeout = 120)
{
    run_result_t r = job(3, "abort", "tcp", 60);
    cr_assert(r.exited && r.status == 0, "%s", r.output);
    expect_line(&r, "rank 0: child GW_ERR_ABORTED in time");
    expect_line(&r, "rank 0: parent GW_ERR_ABORTED");
    free(r.output);
}
