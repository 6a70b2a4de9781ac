/*
 * Compressed allreduce over real processes and loopback TCP: `gradwire
 * launch -n N` starts worker_compress as N ranks; each runs every codec for
 * several steps, checks warm-up, constants, NaN handling, checkpoints and
 * statistics itself, and writes a hash of every output, which must agree
 * across all ranks bitwise.
 */
#include <criterion/criterion.h>

#include "support/ranks_agree.h"
#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define WORKER GW_BUILD_DIR "/tests/worker_compress"

static void run_job(int n, const char *codecs, const char *counts, double timeout)
{
    char *dir = make_tmpdir("compress");
    cr_assert_not_null(dir);
    char nstr[16];
    snprintf(nstr, sizeof(nstr), "%d", n);
    char *argv[] = {LAUNCHER, "launch",       "-n",           nstr, "--", WORKER,
                    dir,      (char *)codecs, (char *)counts, "4",  NULL};
    /* Small chunks push even these sizes through many pipeline steps. */
    char chunk_env[] = "GW_CHUNK_BYTES=4096";
    char timeout_env[] = "GW_TIMEOUT_MS=60000";
    char blas_env[] = "OPENBLAS_NUM_THREADS=1";
    char *env[] = {chunk_env, timeout_env, blas_env, NULL};
    run_result_t r = run_cmd(argv, env, timeout);
    cr_assert(!r.timed_out, "job with %d ranks timed out after %.0f s:\n%s", n, timeout, r.output);
    cr_assert(r.exited && r.status == 0, "job with %d ranks failed (status %d):\n%s", n, r.status,
              r.output);
    free(expect_ranks_agree(dir, n, 0));
    free(r.output);
    remove_tree(dir);
    free(dir);
}

#define COUNTS "0,1,7,1001,4096"

Test(compress_tcp, one_rank, .timeout = 120) { run_job(1, "all", COUNTS, 100); }
Test(compress_tcp, two_ranks, .timeout = 300) { run_job(2, "all", COUNTS, 280); }
Test(compress_tcp, three_ranks, .timeout = 300) { run_job(3, "all", COUNTS, 280); }
Test(compress_tcp, four_ranks, .timeout = 300) { run_job(4, "all", COUNTS, 280); }
Test(compress_tcp, eight_ranks, .timeout = 600) { run_job(8, "all", COUNTS, 580); }

/* A larger tensor: 2^18 + 3 elements, many buckets and ring chunks. */
Test(compress_tcp, large_tensor_four_ranks, .timeout = 600)
{
    run_job(4, "all", "262147,262144", 580);
}
