/*
 * gw_comm_grow and gw_comm_join over real processes (worker_grow.c under
 * `gradwire launch --elastic`, over TCP): a grow with nobody waiting
 * leaves the communicator as it is; a process started with the job's root
 * address and token joins at the members' next grow, and allreduce,
 * allgather and broadcast on the grown communicator are exact on every
 * rank, the joiner included, with the members keeping their ranks and the
 * joiner after them; a joiner with another token is refused (GW_ERR_AUTH,
 * logged by rank 0), as is one that answers rank 0's challenge with a
 * made-up proof, and the job goes on and admits the next one; and a
 * job that lost a rank and shrank admits a replacement through its
 * original root address, back to its full count, also when the rank it
 * lost was rank 0 (its heir listens at the job's root port). Rank 0
 * counts the joiners waiting (gw_comm_joiners) once they proved the
 * token, never a refused one; the other ranks count none.
 */
#include <criterion/criterion.h>

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define WORKER GW_BUILD_DIR "/tests/worker_grow"

static run_result_t run_mode(const char *mode, const char *n)
{
    char *argv[] = {LAUNCHER, "launch", "--elastic",  "-n", (char *)n,
                    "--",     WORKER,   (char *)mode, NULL};
    char *env[] = {"GW_TIMEOUT_MS=10000", "GW_TRANSPORT=tcp", NULL};
    run_result_t r = run_cmd(argv, env, 50);
    cr_assert(!r.timed_out, "mode %s hung:\n%s", mode, r.output);
    return r;
}

static void expect(const run_result_t *r, const char *text)
{
    cr_assert(strstr(r->output, text), "expected \"%s\" in:\n%s", text, r->output);
}

static void expect_nobody(const run_result_t *r, int n)
{
    for (int k = 0; k < n; k++) {
        char want[96];
        snprintf(want, sizeof(want), "[%d] rank %d: grow with nobody: unchanged, sum ok", k, k);
        expect(r, want);
    }
}

static void expect_grown(const run_result_t *r, const char *who, int now, const char *members)
{
    char want[160];
    snprintf(want, sizeof(want), "rank %s: now rank %d of 4, members %s, sum ok, bcast ok", who,
             now, members);
    expect(r, want);
}

Test(grow, one_joiner, .timeout = 60)
{
    run_result_t r = run_mode("grow", "3");
    expect_nobody(&r, 3);
    expect_grown(&r, "0", 0, "0,1,2,100");
    expect_grown(&r, "1", 1, "0,1,2,100");
    expect_grown(&r, "2", 2, "0,1,2,100");
    expect_grown(&r, "joiner", 3, "0,1,2,100");
    expect(&r, "referee: the job grows from 3 to 4 ranks");
    expect(&r, "[0] rank 0: joiners 1 once it proved the token");
    expect(&r, "[1] rank 1: joiners 0 (not rank 0)");
    expect(&r, "[2] rank 2: joiners 0 (not rank 0)");
    expect(&r, "gw_comm_joiners: sub-communicator 0x");
    cr_assert(r.exited && r.status == 0, "status %d:\n%s", r.status, r.output);
    free(r.output);
}

Test(grow, wrong_token_refused, .timeout = 60)
{
    run_result_t r = run_mode("badtoken", "3");
    expect(&r, "joiner: join GW_ERR_AUTH");
    /* rank 0's own check, against a joiner that does not check rank 0's */
    expect(&r, "forger: rank 0 answered a REJECT with status 6");
    expect(&r, "its proof does not match the job token");
    expect(&r, "refused a process from 127.0.0.1");
    expect(&r, "asking to join the job");
    expect(&r, "[0] rank 0: joiners 0 after the refused ones");
    expect(&r, "[0] rank 0: joiners 1 once it proved the token");
    expect_grown(&r, "0", 0, "0,1,2,100");
    expect_grown(&r, "joiner", 3, "0,1,2,100");
    cr_assert(r.exited && r.status == 0, "status %d:\n%s", r.status, r.output);
    free(r.output);
}

/* A job of 4 that lost a rank (mode shrink: rank 2; shrink0: rank 0) and
 * shrank, its new rank 0 saying `shrank` (and `also`, unless NULL), admits
 * a joiner started with the job's GW_ROOT: the survivors olds[] keep their
 * order as ranks 0-2, the joiner is rank 3, members as they all-gather. */
static void expect_regrown(const char *mode, const char *shrank, const char *also,
                           const char *const olds[3], const char *members)
{
    run_result_t r = run_mode(mode, "4");
    expect_nobody(&r, 4);
    expect(&r, shrank);
    if (also)
        expect(&r, also);
    for (int i = 0; i < 3; i++)
        expect_grown(&r, olds[i], i, members);
    expect_grown(&r, "joiner", 3, members);
    cr_assert(r.exited && r.status == 0, "status %d:\n%s", r.status, r.output);
    free(r.output);
}

Test(grow, after_shrink, .timeout = 60)
{
    const char *const olds[] = {"0", "1", "3"};
    expect_regrown("shrink", "[0] rank 0: shrank to 3 ranks", NULL, olds, "0,1,3,100");
}

/* Rank 0 dies: rank 1, its heir, roots the shrunk job and listens at the
 * job's root port in its place, so a replacement started with the job's
 * GW_ROOT gets in (before, that port was closed with rank 0, and the
 * joiner waited for a job nobody answered for). */
Test(grow, after_rank0_died, .timeout = 60)
{
    const char *const olds[] = {"1", "2", "3"};
    expect_regrown("shrink0", "[1] rank 1: shrank to 3 ranks", "its root port, on this rank's host",
                   olds, "1,2,3,100");
}
