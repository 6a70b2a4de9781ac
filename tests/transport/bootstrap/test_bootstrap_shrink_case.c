/*
 * test_bootstrap_shrink_case.c - the referee's shrink case alone
 * (bootstrap_shrink.c: gw__bs_shrink_*), in every order its messages can
 * be read in: who goes on, who is left out, and a rank 0 deposed by a
 * survivor that gave up on it (stopped, hung or busy past the window),
 * whether the referee reads rank 0's own request before the DEPOSED or
 * after it. The processes and sockets around it are test_shrink's.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "common/log.h"
#include "transport/bootstrap/bootstrap_internal.h"

static gw_logger_t lg;
static gw_bs_shrink_t *sh;
static unsigned char gone[4];

static void setup(void)
{
    gw__logger_init(&lg, 0);
    lg.level = GW_LOG_NONE;
    sh = gw__bs_shrink_new(&lg, 4);
    cr_assert(sh);
    memset(gone, 0, sizeof(gone));
}

static void teardown(void) { gw__bs_shrink_free(sh); }

TestSuite(shrink_case, .init = setup, .fini = teardown);

static void ask(int r, uint32_t port)
{
    gw_bs_shrink_req_t req = {.port = port, .window_ms = 1000};
    gw__bs_shrink_request(sh, r, &req, 0);
}

static gw_bs_members_t answer_of(int r)
{
    gw_bs_members_t m;
    memset(&m, 0x5a, sizeof(m));
    cr_assert(gw__bs_shrink_answer(sh, r, &m), "rank %d has no answer", r);
    return m;
}

Test(shrink_case, survivors_and_rank0_ask_the_dead_are_left_out)
{
    ask(1, 0);
    ask(0, 4242);
    ask(3, 0);
    gone[2] = 1;
    cr_assert(gw__bs_shrink_decide(sh, gone, 10));
    gw_bs_members_t m = answer_of(3);
    cr_assert_eq(m.status, GW_OK);
    cr_assert_eq(m.new_rank, 2);
    cr_assert_eq(m.new_size, 3);
    cr_assert_eq(m.port, 4242);
    cr_assert_eq(answer_of(0).new_rank, 0);
    gw_bs_members_t late;
    cr_assert_not(gw__bs_shrink_answer(sh, 2, &late), "the dead rank never asked");
}

/* The referee read the survivors' requests, then one's DEPOSED: decided at
 * once, every asker told GW_ERR_TIMEOUT (they go to the succession), and
 * rank 0, asking later, left out. */
Test(shrink_case, deposed_before_rank0_asks)
{
    ask(1, 0);
    ask(2, 0);
    cr_assert(gw__bs_shrink_depose(sh, 1), "the DEPOSED decides the open case");
    cr_assert(gw__bs_shrink_decided(sh));
    cr_assert(gw__bs_shrink_deposed(sh));
    cr_assert_eq(answer_of(1).status, GW_ERR_TIMEOUT);
    cr_assert_eq(answer_of(2).new_rank, -1);
    ask(0, 4242); /* too late: not recorded */
    gw_bs_members_t m = answer_of(0);
    cr_assert_eq(m.status, GW_ERR_ABORTED);
    cr_assert_eq(m.new_rank, -1);
    cr_assert_eq(m.port, 0);
    cr_assert_not(gw__bs_shrink_decide(sh, gone, 1000000), "decided once");
}

/* Rank 0 woke and asked before its referee read the DEPOSED: its request
 * counts for nothing, it is left out, and nobody is a member. */
Test(shrink_case, deposed_after_rank0_asked)
{
    ask(0, 4242);
    ask(1, 0);
    ask(2, 0);
    ask(3, 0);
    cr_assert(gw__bs_shrink_depose(sh, 3));
    cr_assert_eq(answer_of(0).status, GW_ERR_ABORTED);
    for (int r = 1; r < 4; r++) {
        gw_bs_members_t m = answer_of(r);
        cr_assert_eq(m.status, GW_ERR_TIMEOUT, "rank %d: %d", r, m.status);
        cr_assert_eq(m.new_rank, -1);
    }
    cr_assert_not(gw__bs_shrink_decide(sh, gone, 10), "a later decide changes nothing");
    cr_assert_eq(answer_of(0).status, GW_ERR_ABORTED);
}

/* Decided in time for some, deposed by a survivor that gave up anyway:
 * the case stays as decided (its members build around rank 0 and fail
 * without the deposer), and rank 0's own answer, asked again, is left out. */
Test(shrink_case, deposed_after_the_decision)
{
    ask(0, 4242);
    ask(1, 0);
    ask(2, 0);
    ask(3, 0);
    cr_assert(gw__bs_shrink_decide(sh, gone, 10));
    cr_assert_eq(answer_of(2).status, GW_OK);
    cr_assert_not(gw__bs_shrink_depose(sh, 2), "already decided");
    cr_assert_eq(answer_of(2).new_rank, 2);
    cr_assert_eq(answer_of(0).status, GW_ERR_ABORTED);
}
