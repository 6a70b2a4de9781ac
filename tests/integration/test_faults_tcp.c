/*
 * Fault handling over real processes: disagreeing ranks, bad arguments, a
 * peer that dies before or during a collective, a wrong job token. Every
 * rank must report an error, promptly, with its memory intact.
 */
#include <criterion/criterion.h>

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define WORKER GW_BUILD_DIR "/tests/worker_faults"

/* Runs MODE on n ranks; every rank must print an error status, and
 * `expect_on_rank1` (if not NULL) must be rank 1's status. */
static run_result_t run_mode(const char *mode, int n, const char *timeout_ms)
{
    char nstr[16];
    snprintf(nstr, sizeof(nstr), "%d", n);
    char *argv[] = {LAUNCHER, "launch", "-n", nstr, "--", WORKER, (char *)mode, NULL};
    char tenv[64];
    snprintf(tenv, sizeof(tenv), "GW_TIMEOUT_MS=%s", timeout_ms);
    char *env[] = {tenv, NULL};
    run_result_t r = run_cmd(argv, env, 60);
    cr_assert(!r.timed_out, "mode %s hung:\n%s", mode, r.output);
    cr_assert(r.exited && r.status == 0,
              "mode %s: a rank did not get a clean error (status %d):\n%s", mode, r.status,
              r.output);
    for (int rank = 0; rank < n; rank++) {
        char want[32];
        snprintf(want, sizeof(want), "rank %d: GW_ERR", rank);
        if (strcmp(mode, "kill") == 0 || strcmp(mode, "killmid") == 0)
            if (rank == 1)
                continue;
        cr_assert(strstr(r.output, want), "mode %s: rank %d reported no error:\n%s", mode, rank,
                  r.output);
    }
    return r;
}

static void expect(const run_result_t *r, const char *text)
{
    cr_assert(strstr(r->output, text), "expected \"%s\" in:\n%s", text, r->output);
}

/* Generous GW_TIMEOUT_MS: these errors must come from detection, not timeouts. */
#define NO_TIMEOUT "60000"

Test(faults_tcp, different_counts, .timeout = 90)
{
    run_result_t r = run_mode("count", 4, NO_TIMEOUT);
    expect(&r, "GW_ERR_MISMATCH");
    cr_assert(r.seconds < 30, "mismatch took %.1f s to detect", r.seconds);
    free(r.output);
}

Test(faults_tcp, different_dtypes, .timeout = 90)
{
    run_result_t r = run_mode("dtype", 3, NO_TIMEOUT);
    expect(&r, "GW_ERR_MISMATCH");
    free(r.output);
}

Test(faults_tcp, zero_count_on_one_rank, .timeout = 90)
{
    run_result_t r = run_mode("zero", 4, NO_TIMEOUT);
    expect(&r, "GW_ERR_MISMATCH");
    free(r.output);
}

Test(faults_tcp, different_algorithms, .timeout = 90)
{
    run_result_t r = run_mode("algo", 5, NO_TIMEOUT);
    expect(&r, "GW_ERR_MISMATCH");
    free(r.output);
}

Test(faults_tcp, different_ops, .timeout = 90)
{
    run_result_t r = run_mode("op", 2, NO_TIMEOUT);
    expect(&r, "GW_ERR_MISMATCH");
    free(r.output);
}

Test(faults_tcp, null_buffer_on_one_rank, .timeout = 90)
{
    run_result_t r = run_mode("null", 3, NO_TIMEOUT);
    expect(&r, "rank 1: GW_ERR_INVALID_ARG");
    free(r.output);
}

Test(faults_tcp, size_overflow, .timeout = 90)
{
    run_result_t r = run_mode("overflow", 2, NO_TIMEOUT);
    expect(&r, "rank 0: GW_ERR_OVERFLOW");
    expect(&r, "gw_allreduce");
    free(r.output);
}

Test(faults_tcp, unknown_dtype_and_op, .timeout = 90)
{
    run_result_t r = run_mode("baddtype", 2, NO_TIMEOUT);
    expect(&r, "unknown dtype 99");
    free(r.output);
    r = run_mode("badop", 2, NO_TIMEOUT);
    expect(&r, "unknown reduction op 42");
    free(r.output);
}

Test(faults_tcp, peer_dead_before_collective, .timeout = 90)
{
    run_result_t r = run_mode("kill", 4, NO_TIMEOUT);
    expect(&r, "GW_ERR_REMOTE");
    cr_assert(r.seconds < 30, "dead peer took %.1f s to detect", r.seconds);
    free(r.output);
}

Test(faults_tcp, peer_dies_during_collective, .timeout = 90)
{
    run_result_t r = run_mode("killmid", 3, NO_TIMEOUT);
    cr_assert(r.seconds < 40, "dead peer took %.1f s to detect", r.seconds);
    free(r.output);
}

Test(faults_tcp, wrong_token_is_rejected, .timeout = 90)
{
    run_result_t r = run_mode("token", 3, "3000");
    expect(&r, "rank 1: GW_ERR_AUTH");
    free(r.output);
}
