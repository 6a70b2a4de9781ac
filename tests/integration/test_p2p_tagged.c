/*
 * Tagged point-to-point messages (gw_send_tagged, gw_recv_tagged and the
 * non-blocking forms; collectives/msg/match.c) over TCP and shared memory,
 * with worker_tagged doing the calls: tag matching and GW_ANY_TAG,
 * GW_ANY_SOURCE with several senders, non-overtaking order with a held
 * (unexpected) tag, a count mismatch, a dead sender while a GW_ANY_SOURCE
 * receive waits, the unexpected-message bound, a 1F1B pipeline schedule
 * and an all-to-all of uneven expert batches. Each run takes seconds.
 */
#include <criterion/criterion.h>

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define WORKER GW_BUILD_DIR "/tests/worker_tagged"

static const char *const transports[] = {"tcp", "shm"};

/* Run worker_tagged MODE on n ranks over transport, sends completing as
 * p2p_send says (GW_P2P_SEND); the output. */
static run_result_t run_mode_as(const char *transport, int n, const char *mode, const char *timeout,
                                const char *p2p_send)
{
    char nstr[16];
    snprintf(nstr, sizeof(nstr), "%d", n);
    char *argv[] = {LAUNCHER, "launch", "-n", nstr, "--", WORKER, (char *)mode, NULL};
    char trenv[64], toenv[64], modeenv[64];
    snprintf(trenv, sizeof(trenv), "GW_TRANSPORT=%s", transport);
    snprintf(toenv, sizeof(toenv), "GW_TIMEOUT_MS=%s", timeout);
    snprintf(modeenv, sizeof(modeenv), "GW_P2P_SEND=%s", p2p_send);
    char *env[] = {trenv, toenv, modeenv, NULL};
    run_result_t r = run_cmd(argv, env, 60);
    cr_assert(!r.timed_out, "%s over %s on %d ranks: hung:\n%s", mode, transport, n, r.output);
    return r;
}

static run_result_t run_mode(const char *transport, int n, const char *mode, const char *timeout)
{
    return run_mode_as(transport, n, mode, timeout, "sync");
}

/* Every rank reports OK and the job exits 0. */
static void expect_ok_as(int n, const char *mode, const char *p2p_send)
{
    for (size_t t = 0; t < sizeof(transports) / sizeof(transports[0]); t++) {
        run_result_t r = run_mode_as(transports[t], n, mode, "20000", p2p_send);
        cr_assert(r.exited && r.status == 0, "%s over %s on %d ranks failed:\n%s", mode,
                  transports[t], n, r.output);
        for (int rank = 0; rank < n; rank++) {
            char want[32];
            snprintf(want, sizeof(want), "rank %d: OK", rank);
            cr_assert(strstr(r.output, want), "%s over %s: rank %d did not finish:\n%s", mode,
                      transports[t], rank, r.output);
        }
        free(r.output);
    }
}

static void expect_ok(int n, const char *mode) { expect_ok_as(n, mode, "sync"); }

Test(p2p_tagged, tags_and_any_tag, .timeout = 120) { expect_ok(2, "tags"); }

Test(p2p_tagged, any_source_every_message_once, .timeout = 120) { expect_ok(4, "anysrc"); }

Test(p2p_tagged, non_overtaking_with_a_held_tag, .timeout = 120) { expect_ok(2, "order"); }

Test(p2p_tagged, pipeline_1f1b, .timeout = 120) { expect_ok(4, "pipeline"); }

Test(p2p_tagged, moe_uneven_all_to_all, .timeout = 120) { expect_ok(4, "moe"); }

/* A failure mode: the job's ranks print their status and culprit, and
 * the wanted lines are there, within the time a timeout would not fit. */
static void expect_lines_within(int n, const char *mode, const char *const *lines,
                                const char *timeout, double max_s)
{
    for (size_t t = 0; t < sizeof(transports) / sizeof(transports[0]); t++) {
        run_result_t r = run_mode(transports[t], n, mode, timeout);
        for (const char *const *l = lines; *l; l++)
            cr_assert(strstr(r.output, *l), "%s over %s: no \"%s\" in:\n%s", mode, transports[t],
                      *l, r.output);
        cr_assert(r.seconds < max_s, "%s over %s: took %.1f s (too long for the failure):\n%s",
                  mode, transports[t], r.seconds, r.output);
        free(r.output);
    }
}

/* GW_TIMEOUT_MS of 30 s: a failure that waited for it would show. */
static void expect_lines(int n, const char *mode, const char *const *lines)
{
    expect_lines_within(n, mode, lines, "30000", 25);
}

/* Standard completion (GW_P2P_SEND=standard): the schedules that depend
 * on tags and any-source receives give the same values when sends
 * complete without receipts. */
Test(p2p_tagged, standard_sends_pipeline_and_moe, .timeout = 120)
{
    expect_ok_as(4, "pipeline", "standard");
    expect_ok_as(4, "moe", "standard");
}

/* Messages whose standard sends returned are delivered even though their
 * sender destroyed its communicator and exited before anything received
 * them (as MPI_Send followed by MPI_Finalize). */
Test(p2p_tagged, standard_sends_arrive_after_the_sender_left, .timeout = 120)
{
    expect_ok(2, "leave");
}

Test(p2p_tagged, count_mismatch_blames_the_sender, .timeout = 120)
{
    const char *lines[] = {"rank 0: GW_ERR_MISMATCH culprit 1", "rank 1: GW_ERR_MISMATCH culprit 1",
                           "rank 1 sent a 16-byte message with tag 5 that does not fit", NULL};
    expect_lines(2, "mismatch", lines);
}

Test(p2p_tagged, tested_any_source_receive_times_out, .timeout = 120)
{
    const char *lines[] = {"rank 0: GW_ERR_TIMEOUT",
                           "gw_test: no message for 2000 ms for a 4-byte receive from any rank",
                           NULL};
    expect_lines_within(2, "testany", lines, "2000", 20);
}

Test(p2p_tagged, negative_tag_is_refused, .timeout = 120)
{
    const char *lines[] = {"rank 0: GW_ERR_INVALID_ARG", "rank 1: GW_ERR_INVALID_ARG",
                           "gw_isend_tagged: tag -1 is negative", NULL};
    expect_lines(2, "args", lines);
}

Test(p2p_tagged, dead_sender_fails_an_any_source_receive, .timeout = 120)
{
    const char *lines[] = {"culprit 2", "rank 0: GW_ERR_", NULL};
    expect_lines(3, "dead", lines);
}

/* Rank 2 dies before it sent anything, so no connection of rank 0's
 * notices: the receive times out after GW_TIMEOUT_MS (3 s), and the
 * referee, which saw rank 2 go, blames it (bootstrap_referee.c). */
Test(p2p_tagged, silent_dead_rank_is_blamed_after_the_timeout, .timeout = 120)
{
    const char *lines[] = {"rank 0: GW_ERR_TIMEOUT culprit 2", "rank 1: GW_ERR_TIMEOUT culprit 2",
                           NULL};
    expect_lines_within(3, "deadsilent", lines, "3000", 20);
}

Test(p2p_tagged, unexpected_bound_names_the_sender, .timeout = 120)
{
    const char *lines[] = {"rank 0: GW_ERR_NO_MEMORY culprit 1", "past the bound of 67108864",
                           NULL};
    expect_lines(2, "bound", lines);
}
