/*
 * Collectives over real processes and loopback TCP: `gradwire launch -n N`
 * starts worker_collectives as N ranks; each checks its results against a
 * serial reference and writes a hash of every output, which must agree
 * across all ranks bitwise.
 */
#include <criterion/criterion.h>

#include "support/ranks_agree.h"
#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define WORKER GW_BUILD_DIR "/tests/worker_collectives"

static void run_job(int n, const char *counts, const char *algos, const char *dtypes,
                    const char *ops, const char *colls, const char *nsocks, double timeout)
{
    char *dir = make_tmpdir("coll");
    cr_assert_not_null(dir);
    char nstr[16];
    snprintf(nstr, sizeof(nstr), "%d", n);
    char *argv[] = {
        LAUNCHER,       "launch",      "-n",           nstr,        "--",          WORKER, dir,
        (char *)counts, (char *)algos, (char *)dtypes, (char *)ops, (char *)colls, NULL};
    char nsock_env[64], chunk_env[64];
    snprintf(nsock_env, sizeof(nsock_env), "GW_NSOCKS=%s", nsocks);
    /* Small chunks make even the test sizes go through many pipeline steps. */
    snprintf(chunk_env, sizeof(chunk_env), "GW_CHUNK_BYTES=%d", 8192);
    char timeout_env[] = "GW_TIMEOUT_MS=60000";
    char *env[] = {nsock_env, chunk_env, timeout_env, NULL};
    run_result_t r = run_cmd(argv, env, timeout);
    cr_assert(!r.timed_out, "job with %d ranks timed out after %.0f s:\n%s", n, timeout, r.output);
    cr_assert(r.exited && r.status == 0, "job with %d ranks failed (status %d):\n%s", n, r.status,
              r.output);
    free(expect_ranks_agree(dir, n, strcmp(counts, "") == 0));
    free(r.output);
    remove_tree(dir);
    free(dir);
}

#define SMALL_COUNTS "0,1,7,1023"

Test(collectives_tcp, one_rank, .timeout = 120)
{
    run_job(1, SMALL_COUNTS, "all", "all", "all", "all", "1", 100);
}

Test(collectives_tcp, two_ranks, .timeout = 300)
{
    run_job(2, SMALL_COUNTS, "all", "all", "all", "all", "1", 280);
}

Test(collectives_tcp, three_ranks, .timeout = 300)
{
    run_job(3, SMALL_COUNTS, "all", "all", "all", "all", "2", 280);
}

Test(collectives_tcp, four_ranks, .timeout = 300)
{
    run_job(4, SMALL_COUNTS, "all", "all", "all", "all", "4", 280);
}

Test(collectives_tcp, five_ranks, .timeout = 400)
{
    run_job(5, SMALL_COUNTS, "all", "all", "all", "all", "1", 380);
}

Test(collectives_tcp, eight_ranks, .timeout = 600)
{
    run_job(8, SMALL_COUNTS, "all", "all", "all", "all", "2", 580);
}

/* The large counts exist to move the chunk and socket boundaries, which
 * depend on the element size (1, 2, 4 and 8 bytes) and not on the op: every
 * algorithm runs over one dtype of each size, and the half-precision pair
 * (float16 and bfloat16 take different conversion paths), with two ops.
 * Every dtype with every op is checked at the small counts above, on every
 * rank count, and in the reduction kernels' own tests; repeating the whole
 * table at a million elements cost minutes of CI and checked nothing more
 * (and grew with every dtype or op added). Under the sanitizers, one op. */
#if defined(__SANITIZE_ADDRESS__)
#define LARGE_DTYPES "int8,float16,float32,float64"
#define LARGE_OPS "sum"
#define LARGE_DTYPES_3 "int8,bfloat16"
#define LARGE_OPS_3 "max"
#define LARGE_DTYPES_8 "float16"
#define LARGE_OPS_8 "avg"
#else
#define LARGE_DTYPES "int8,float16,bfloat16,float32,float64"
#define LARGE_OPS "sum,max"
#define LARGE_DTYPES_3 "float32,bfloat16,int8"
#define LARGE_OPS_3 "sum,max"
#define LARGE_DTYPES_8 "float32,float16"
#define LARGE_OPS_8 "sum,avg"
#endif

/* 2^20 + 3 elements: large enough to stream through many chunks and to split
 * across sockets; every algorithm, over the dtypes and ops above. */
Test(collectives_tcp, large_count_four_ranks, .timeout = 900)
{
    run_job(4, "1048579", "all", LARGE_DTYPES, LARGE_OPS, "allreduce", "4", 880);
}

Test(collectives_tcp, large_count_three_and_eight_ranks, .timeout = 900)
{
    run_job(3, "1048579", "all", LARGE_DTYPES_3, LARGE_OPS_3, "allreduce,random", "2", 400);
    run_job(8, "1048579", "all", LARGE_DTYPES_8, LARGE_OPS_8, "allreduce,random", "1", 480);
}
