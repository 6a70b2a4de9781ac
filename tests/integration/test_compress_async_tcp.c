/*
 * Non-blocking compressed allreduce (gw_iallreduce_compressed) over real
 * processes and loopback TCP: `gradwire launch -n N` starts worker_compress
 * --async as N ranks. Each checks on its own that the non-blocking results
 * and states equal the blocking ones bitwise, that handles complete in call
 * order among other collectives, and that a NaN fails its handle on every
 * rank; the hashes of every result must agree across ranks. A rank that
 * dies with calls in flight must make the others' gw_wait fail, promptly,
 * not hang.
 */
#include <criterion/criterion.h>

#include "support/ranks_agree.h"
#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define WORKER GW_BUILD_DIR "/tests/worker_compress"

/* transport: "tcp", or NULL for the automatic choice (shared memory
 * between processes of one host). */
static void run_job(int n, const char *transport, const char *codecs, const char *counts,
                    double timeout)
{
    char *dir = make_tmpdir("compress_async");
    cr_assert_not_null(dir);
    char nstr[16];
    snprintf(nstr, sizeof(nstr), "%d", n);
    char *argv[] = {LAUNCHER,  "launch", "-n",           nstr,           "--", WORKER,
                    "--async", dir,      (char *)codecs, (char *)counts, "3",  NULL};
    char chunk_env[] = "GW_CHUNK_BYTES=4096";
    char timeout_env[] = "GW_TIMEOUT_MS=60000";
    char blas_env[] = "OPENBLAS_NUM_THREADS=1";
    char transport_env[64];
    snprintf(transport_env, sizeof(transport_env), "GW_TRANSPORT=%s", transport);
    char *env[] = {chunk_env, timeout_env, blas_env, transport ? transport_env : NULL, NULL};
    run_result_t r = run_cmd(argv, env, timeout);
    cr_assert(!r.timed_out, "job with %d ranks timed out after %.0f s:\n%s", n, timeout, r.output);
    cr_assert(r.exited && r.status == 0, "job with %d ranks failed (status %d):\n%s", n, r.status,
              r.output);
    char *first = expect_ranks_agree(dir, n, 0);
    cr_assert(strstr(first, "async-nan"), "rank 0 did not get through the NaN check:\n%s", first);
    free(first);
    free(r.output);
    remove_tree(dir);
    free(dir);
}

#define COUNTS "0,1,7,1001,4096"

Test(compress_async_tcp, one_rank, .timeout = 120) { run_job(1, NULL, "all", COUNTS, 100); }
Test(compress_async_tcp, two_ranks_tcp, .timeout = 300) { run_job(2, "tcp", "all", COUNTS, 280); }
Test(compress_async_tcp, three_ranks, .timeout = 300) { run_job(3, NULL, "all", COUNTS, 280); }
Test(compress_async_tcp, four_ranks_tcp, .timeout = 300) { run_job(4, "tcp", "all", COUNTS, 280); }
Test(compress_async_tcp, eight_ranks_tcp, .timeout = 600) { run_job(8, "tcp", "all", COUNTS, 580); }

static void peer_death(const char *transport)
{
    char *argv[] = {LAUNCHER, "launch", "-n", "3", "--", WORKER, "--async-kill", NULL};
    /* A generous no-progress timeout: the error must come from detecting
     * the dead peer, not from waiting the timeout out. */
    char timeout_env[] = "GW_TIMEOUT_MS=60000";
    char transport_env[64];
    snprintf(transport_env, sizeof(transport_env), "GW_TRANSPORT=%s", transport);
    char *env[] = {timeout_env, transport ? transport_env : NULL, NULL};
    run_result_t r = run_cmd(argv, env, 120);
    cr_assert(!r.timed_out, "hung after a rank died:\n%s", r.output);
    cr_assert(r.exited && r.status == 0, "a surviving rank did not get an error (status %d):\n%s",
              r.status, r.output);
    static const char *const survivors[] = {"rank 0: first call", "rank 2: first call"};
    for (int k = 0; k < 2; k++) {
        const char *line = strstr(r.output, survivors[k]);
        cr_assert(line, "\"%s\" missing:\n%s", survivors[k], r.output);
        const char *end = strchr(line, '\n'), *err = strstr(line, "then GW_ERR_");
        cr_assert(err && (!end || err < end), "%s... got no error:\n%s", survivors[k], r.output);
    }
    cr_expect(r.seconds < 45, "the survivors took %.1f s to notice", r.seconds);
    free(r.output);
}

Test(compress_async_tcp, peer_death_fails_the_waits_tcp, .timeout = 150) { peer_death("tcp"); }
Test(compress_async_tcp, peer_death_fails_the_waits, .timeout = 150) { peer_death(NULL); }
