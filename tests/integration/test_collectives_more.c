/*
 * The collectives that move blocks (alltoall, alltoallv, gather, scatter,
 * allgatherv) over real processes, TCP and shared memory forced in turn:
 * `gradwire launch -n N` starts worker_collectives as N ranks (1 .. 5);
 * each checks every result against a serial reference (every rank can
 * generate every rank's blocks), in place and out of place, every root,
 * uneven and empty blocks with gaps between them (canaries must survive),
 * and writes a hash of every output, which must agree across ranks
 * bitwise. Counts 0, 1, 7 and 1023 in every dtype; 262147 float32 elements
 * stream through many 8 KiB chunks.
 */
#include <criterion/criterion.h>

#include "support/ranks_agree.h"
#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define WORKER GW_BUILD_DIR "/tests/worker_collectives"
#define COLLS "alltoall,alltoallv,gather,scatter,allgatherv"

static void run_job(const char *transport, int n, const char *counts, const char *dtypes)
{
    char *dir = make_tmpdir("collmore");
    cr_assert_not_null(dir);
    char nstr[16], tenv[64];
    snprintf(nstr, sizeof(nstr), "%d", n);
    snprintf(tenv, sizeof(tenv), "GW_TRANSPORT=%s", transport);
    char *argv[] = {LAUNCHER,       "launch", "-n",           nstr,  "--",  WORKER, dir,
                    (char *)counts, "ring",   (char *)dtypes, "sum", COLLS, NULL};
    char chunk[] = "GW_CHUNK_BYTES=8192", timeout[] = "GW_TIMEOUT_MS=60000";
    char *env[] = {tenv, chunk, timeout, NULL};
    run_result_t r = run_cmd(argv, env, 280);
    cr_assert(!r.timed_out, "%d ranks over %s timed out:\n%s", n, transport, r.output);
    cr_assert(r.exited && r.status == 0, "%d ranks over %s failed (status %d):\n%s", n, transport,
              r.status, r.output);
    free(expect_ranks_agree(dir, n, 0));
    free(r.output);
    remove_tree(dir);
    free(dir);
}

static const char *const transports[] = {"tcp", "shm"};

Test(collectives_more, one_to_five_ranks_every_dtype, .timeout = 900)
{
    for (int t = 0; t < 2; t++)
        for (int n = 1; n <= 5; n++)
            run_job(transports[t], n, "0,1,7,1023", "all");
}

Test(collectives_more, large_counts_streamed, .timeout = 600)
{
    for (int t = 0; t < 2; t++) {
        run_job(transports[t], 3, "262147", "float32");
        run_job(transports[t], 4, "262147", "int8");
    }
}
