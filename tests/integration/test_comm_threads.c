/*
 * A communicator and its dup (or split), driven from two threads at once
 * over real processes (`gradwire launch`, TCP and shared memory). The two
 * share one transport, which matches messages per pair of ranks in posting
 * order, so this use is refused (gradwire.h): the call that finds another
 * thread inside the family, or the receive that gets the other
 * communicator's message, fails with GW_ERR_UNSUPPORTED and the shared
 * transport is aborted. What must never happen: a false GW_ERR_MISMATCH
 * (the ranks agreed on every call's arguments), a wrong result, or a hang.
 */
#include <criterion/criterion.h>

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define WORKER GW_BUILD_DIR "/tests/worker_threads"

static void two_threads(int n, const char *mode, const char *transport, const char *cross)
{
    char ns[8], tr[64];
    snprintf(ns, sizeof(ns), "%d", n);
    snprintf(tr, sizeof(tr), "GW_TRANSPORT=%s", transport);
    char *argv[] = {LAUNCHER,     "launch", "-n",          ns,  "--", WORKER,
                    (char *)mode, "2000",   (char *)cross, NULL};
    char tenv[] = "GW_TIMEOUT_MS=20000";
    char *env[] = {tr, tenv, NULL};
    run_result_t r = run_cmd(argv, env, 120);
    cr_assert(!r.timed_out, "%d ranks, %s, %s: hung:\n%s", n, mode, transport, r.output);
    cr_assert(r.exited && r.status == 0, "%s over %s:\n%s", mode, transport, r.output);
    cr_expect(!strstr(r.output, "GW_ERR_MISMATCH"), "a false mismatch (%s, %s):\n%s", mode,
              transport, r.output);
    cr_expect(!strstr(r.output, "GW_ERR_PROTOCOL"), "a wrong result (%s, %s):\n%s", mode, transport,
              r.output);
    /* Each rank ends with both threads done, or refused and aborted. */
    int refused = strstr(r.output, "GW_ERR_UNSUPPORTED") != NULL;
    for (int rank = 0; rank < n; rank++) {
        char all_ok[64];
        snprintf(all_ok, sizeof(all_ok), "rank %d: parent GW_OK child GW_OK", rank);
        char seen[32];
        snprintf(seen, sizeof(seen), "rank %d: parent ", rank);
        cr_expect(strstr(r.output, seen), "rank %d said nothing:\n%s", rank, r.output);
        if (!refused)
            cr_expect(strstr(r.output, all_ok), "rank %d failed without a refusal:\n%s", rank,
                      r.output);
    }
    /* Refused where a second thread came in while the first was inside,
     * or where a message of the other communicator arrived: either way
     * the reason (gw_last_error) says why. */
    if (refused)
        cr_expect(strstr(r.output, "share a transport"),
                  "the refusal's reason (gw_last_error) is missing:\n%s", r.output);
    free(r.output);
}

/* The threads as they come: a wrong order happens sooner or later. */
Test(comm_threads, dup_from_a_second_thread_tcp, .timeout = 200)
{
    two_threads(2, "dup", "tcp", NULL);
}
Test(comm_threads, dup_from_a_second_thread_shm, .timeout = 200)
{
    two_threads(3, "dup", "shm", NULL);
}
Test(comm_threads, split_from_a_second_thread_tcp, .timeout = 200)
{
    two_threads(3, "split", "tcp", NULL);
}
/* The wrong order made certain: even ranks start the parent, odd ranks
 * the child (without the refusal: a false mismatch at once). */
Test(comm_threads, crossed_dup_shm, .timeout = 200) { two_threads(2, "dup", "shm", "cross"); }
Test(comm_threads, crossed_split_tcp, .timeout = 200) { two_threads(3, "split", "tcp", "cross"); }
