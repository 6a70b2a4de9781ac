/*
 * gw_comm_shrink over real processes (worker_shrink.c under `gradwire
 * launch --elastic`, 4 ranks over TCP): after one rank or two are killed
 * with SIGKILL, every survivor gets the same new size and ranks (in the
 * order of the old ones) and an exact allreduce on the new communicator;
 * a rank stopped with SIGSTOP is left out, and once woken gets an error
 * instead of getting in; when rank 0 dies, the lowest surviving rank
 * leads the survivors in its place (also when the next one died with it,
 * and again when it dies in turn). The launcher keeps the
 * job running and says which rank it lost.
 */
#include <criterion/criterion.h>

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define WORKER GW_BUILD_DIR "/tests/worker_shrink"

static run_result_t run_mode(const char *mode, const char *timeout_ms)
{
    char *argv[] = {LAUNCHER, "launch", "--elastic", "-n", "4", "--", WORKER, (char *)mode, NULL};
    char tenv[64];
    snprintf(tenv, sizeof(tenv), "GW_TIMEOUT_MS=%s", timeout_ms);
    char *env[] = {tenv, "GW_TRANSPORT=tcp", NULL};
    run_result_t r = run_cmd(argv, env, 80);
    cr_assert(!r.timed_out, "mode %s hung:\n%s", mode, r.output);
    return r;
}

static void expect(const run_result_t *r, const char *text)
{
    cr_assert(strstr(r->output, text), "expected \"%s\" in:\n%s", text, r->output);
}

static void expect_not(const run_result_t *r, const char *text)
{
    cr_assert(!strstr(r->output, text), "did not expect \"%s\" in:\n%s", text, r->output);
}

/* Survivor `old` is rank `now` of the shrunk communicator `members`. */
static void expect_member(const run_result_t *r, int old, int now, int n, const char *members)
{
    char want[160];
    snprintf(want, sizeof(want), "[%d] rank %d: now rank %d of %d, members %s, sum ok", old, old,
             now, n, members);
    expect(r, want);
}

Test(shrink, one_rank_killed, .timeout = 60)
{
    run_result_t r = run_mode("kill1", "10000");
    expect_member(&r, 0, 0, 3, "0,1,3");
    expect_member(&r, 1, 1, 3, "0,1,3");
    expect_member(&r, 3, 2, 3, "0,1,3");
    expect(&r, "gradwire launch: rank 2 killed by signal SIGKILL; --elastic: the job goes on");
    cr_assert(r.exited && r.status == 0, "the survivors finished, status %d:\n%s", r.status,
              r.output);
    free(r.output);
}

Test(shrink, two_ranks_killed, .timeout = 60)
{
    run_result_t r = run_mode("kill2", "10000");
    expect_member(&r, 0, 0, 2, "0,2");
    expect_member(&r, 2, 1, 2, "0,2");
    cr_assert(r.exited && r.status == 0, "status %d:\n%s", r.status, r.output);
    free(r.output);
}

Test(shrink, stopped_rank_left_out, .timeout = 60)
{
    /* The survivors time out on the stopped rank (2 s), get the verdict,
     * and shrink after the window (2 s) without it; it wakes at 8 s. */
    run_result_t r = run_mode("stop", "2000");
    expect_member(&r, 0, 0, 3, "0,1,3");
    expect_member(&r, 1, 1, 3, "0,1,3");
    expect_member(&r, 3, 2, 3, "0,1,3");
    expect(&r, "[2] rank 2: shrink GW_ERR_ABORTED");
    expect(&r, "was left out of the shrunk communicator");
    expect_not(&r, "[2] rank 2: now rank");
    cr_assert(r.exited && r.status == 0, "status %d:\n%s", r.status, r.output);
    free(r.output);
}

/* Rank 0 dies: rank 1, the lowest survivor, leads the others in its
 * place (bootstrap_heir.c) and becomes rank 0 of the shrunk job. */
Test(shrink, rank0_killed_rank1_leads, .timeout = 60)
{
    run_result_t r = run_mode("kill0", "10000");
    expect_member(&r, 1, 0, 3, "1,2,3");
    expect_member(&r, 2, 1, 3, "1,2,3");
    expect_member(&r, 3, 2, 3, "1,2,3");
    expect(&r, "rank 1 leads the survivors");
    expect(&r, "rank 0 is gone (its connection closed)");
    expect_not(&r, "this rank goes on without it"); /* not deposed: it died */
    cr_assert(r.exited && r.status == 0, "status %d:\n%s", r.status, r.output);
    free(r.output);
}

/* Ranks 0 and 1 die together: rank 1's heir listener refuses the others
 * (or, when a survivor dialled while rank 1 was dying, the connection
 * closes), so rank 2 leads. */
Test(shrink, rank0_and_its_heir_killed, .timeout = 60)
{
    run_result_t r = run_mode("kill01", "10000");
    expect_member(&r, 2, 0, 2, "2,3");
    expect_member(&r, 3, 1, 2, "2,3");
    cr_assert(strstr(r.output, "succession: rank 1 (127.0.0.1:") &&
                  strstr(r.output, "the connection: it is gone"),
              "no survivor found rank 1 gone:\n%s", r.output);
    expect(&r, "rank 2 leads the survivors");
    cr_assert(r.exited && r.status == 0, "status %d:\n%s", r.status, r.output);
    free(r.output);
}

/* Rank 0 dies, the survivors go on under rank 1; then rank 1, rank 0 of
 * the shrunk job, dies too: ranks 2 and 3 succeed it in turn, in one run. */
Test(shrink, rank0_then_the_next_rank0_killed, .timeout = 90)
{
    run_result_t r = run_mode("kill0then1", "10000");
    expect_member(&r, 1, 0, 3, "1,2,3");
    expect_member(&r, 2, 0, 2, "2,3");
    expect_member(&r, 3, 1, 2, "2,3");
    expect(&r, "[2] rank 2: second shrink GW_OK");
    expect(&r, "[3] rank 3: second shrink GW_OK");
    cr_assert(r.exited && r.status == 0, "status %d:\n%s", r.status, r.output);
    free(r.output);
}

/* Rank 0 dies and rank 1, its heir, is stopped: ranks 2 and 3 wait for
 * rank 1 (the window, 2 s, and a margin), give up on it and go on under
 * rank 2. Rank 1, woken 8 s later, finds nobody to lead and ranks 2 and 3
 * alive elsewhere: it is left out instead of going on as a job of one. */
Test(shrink, stopped_heir_is_passed_over_and_left_out, .timeout = 90)
{
    run_result_t r = run_mode("kill0stop1", "2000");
    expect_member(&r, 2, 0, 2, "2,3");
    expect_member(&r, 3, 1, 2, "2,3");
    expect(&r, "did not answer in time: it is stopped or hung");
    expect(&r, "[1] rank 1: shrink GW_ERR_ABORTED");
    expect(&r, "they may have gone on without this group");
    expect_not(&r, "[1] rank 1: now rank");
    cr_assert(r.exited && r.status == 0, "status %d:\n%s", r.status, r.output);
    free(r.output);
}

/* Rank 0 of 4 did not answer the others' shrink (mode stop0 or busy0; why:
 * what they say about it): ranks 1-3 depose it and go on under rank 1,
 * and rank 0, back, is left out, not a job of one. */
static void expect_rank0_deposed(const char *mode, const char *why)
{
    run_result_t r = run_mode(mode, "2000");
    expect_member(&r, 1, 0, 3, "1,2,3");
    expect_member(&r, 2, 1, 3, "1,2,3");
    expect_member(&r, 3, 2, 3, "1,2,3");
    expect(&r, why);
    expect(&r, "this rank goes on without it");
    expect(&r, "[0] rank 0: shrink GW_ERR_ABORTED");
    expect(&r, "rank 0 was left out: the survivors found it stopped");
    expect_not(&r, "[0] rank 0: now rank");
    cr_assert(r.exited && r.status == 0, "status %d:\n%s", r.status, r.output);
    free(r.output);
}

/* Rank 0 is stopped (its referee with it): the survivors get no answer to
 * their shrink within the window (2 s) and the margin, depose rank 0 and
 * go on under rank 1, as if it had died. Rank 0, woken 8 s later, finds
 * the survivors' DEPOSED in its referee's connections and is told it was
 * left out: it must not go on as a job of one. (Before, the survivors
 * failed with GW_ERR_TIMEOUT: "the loss of rank 0 ends the job".) */
Test(shrink, stopped_rank0_is_deposed_and_succeeded, .timeout = 90)
{
    expect_rank0_deposed("stop0", "no answer from rank 0's referee within 2000 ms");
}

/* Rank 0 busy outside gradwire past the window: its referee runs on and
 * answers the survivors that rank 0 did not ask to shrink; they depose it
 * and go on under rank 1 all the same, and rank 0, back, is left out. */
Test(shrink, busy_rank0_is_deposed_and_succeeded, .timeout = 90)
{
    expect_rank0_deposed("busy0", "rank 0 did not ask to shrink within 2000 ms");
}
