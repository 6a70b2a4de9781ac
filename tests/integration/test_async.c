/* Non-blocking collectives and asynchronous abort over real processes. */
#include <criterion/criterion.h>

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define WORKER GW_BUILD_DIR "/tests/worker_async"

static run_result_t job(const char *n, const char *mode)
{
    char *argv[] = {LAUNCHER, "launch", "-n", (char *)n, "--", WORKER, (char *)mode, NULL};
    char tenv[] = "GW_TIMEOUT_MS=30000";
    char *env[] = {tenv, NULL};
    run_result_t r = run_cmd(argv, env, 120);
    cr_assert(!r.timed_out, "hung:\n%s", r.output);
    return r;
}

Test(async, pending_calls_complete_in_order_with_correct_results, .timeout = 150)
{
    for (int n = 1; n <= 4; n++) {
        char ns[8];
        snprintf(ns, sizeof(ns), "%d", n);
        run_result_t r = job(ns, "order");
        cr_assert(r.exited && r.status == 0, "n=%d:\n%s", n, r.output);
        free(r.output);
    }
}

/* gw_ibroadcast .. gw_iallgatherv, gw_iallreduce and a blocking alltoall
 * all pending at once: exact results, completion in call order. */
Test(async, every_collective_non_blocking_in_call_order, .timeout = 150)
{
    for (int n = 1; n <= 5; n++) {
        char ns[8];
        snprintf(ns, sizeof(ns), "%d", n);
        run_result_t r = job(ns, "every");
        cr_assert(r.exited && r.status == 0, "n=%d:\n%s", n, r.output);
        free(r.output);
    }
}

Test(async, abort_from_another_thread_ends_a_blocked_collective, .timeout = 150)
{
    run_result_t r = job("3", "abort");
    cr_assert(r.exited && r.status == 0, "%s", r.output);
    cr_expect(strstr(r.output, "rank 0: GW_ERR_ABORTED"), "%s", r.output);
    free(r.output);
}
