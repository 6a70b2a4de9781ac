/*
 * test_tune_decide: the rules `gradwire-bench tune` reads off its table of
 * times (bench/bench_tune_decide.c), on tables made to show each rule's
 * cases: a clean crossover, a noisy size within the 5% tolerance, an
 * outlier the direct_shm rule forgives and one it does not, an algorithm
 * not run, and the rules' "off" values.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "bench/bench.h"

enum { N = GW_BENCH_RULES_NSIZES };
enum { RING = GW_BENCH_RULE_RING, TREE = GW_BENCH_RULE_TREE, RD = GW_BENCH_RULE_RD };
enum { HIER = GW_BENCH_RULE_HIER, DIRECT = GW_BENCH_RULE_DIRECT };
#define OFF ((size_t)1 << 40)

static size_t sizes[N];
static double t[N][GW_BENCH_RULE_NALGOS];

/* Sizes 16 KiB .. 32 MiB; every algorithm at 10 ms except the ring at
 * 5 ms: the ring is the fastest everywhere. */
static void table(void)
{
    for (int s = 0; s < N; s++) {
        sizes[s] = (size_t)16384 << s;
        for (int a = 0; a < GW_BENCH_RULE_NALGOS; a++)
            t[s][a] = 10e-3;
        t[s][RING] = 5e-3;
    }
}

static gw_bench_rules_t decide(int nranks)
{
    gw_bench_rules_t r;
    gw_bench_rules_decide(nranks, N, sizes, (const double(*)[GW_BENCH_RULE_NALGOS])t, &r);
    return r;
}

Test(tune_decide, direct_never_fastest_turns_the_rules_off)
{
    table();
    gw_bench_rules_t r = decide(2);
    cr_assert(r.have_pair && r.have_large);
    cr_assert(!r.have_tree4 && !r.have_shm, "2 ranks measure neither the tree4 nor the shm rule");
    cr_assert_eq(r.direct_pair_min, 0);
    cr_assert_eq(r.direct_large_min, OFF);
    r = decide(4);
    cr_assert(r.have_tree4 && r.have_shm && !r.have_pair);
    cr_assert_eq(r.tree4_min, 0);
    cr_assert_eq(r.tree4_end, 0);
    cr_assert_eq(r.direct_shm_min, 0);
    cr_assert(!decide(5).have_large && !decide(1).have_large, "the rules are about 2 to 4 ranks");
}

Test(tune_decide, pair_rule_starts_where_direct_wins_to_the_end)
{
    table();
    for (int s = 5; s < N; s++)
        t[s][DIRECT] = 4e-3;
    t[2][DIRECT] = 4e-3; /* an early win that does not last */
    gw_bench_rules_t r = decide(2);
    cr_assert_eq(r.direct_pair_min, sizes[5]);
    cr_assert_eq(r.direct_large_min, (size_t)1 << 20, "from 1 MiB, the first size it wins on");
    /* Within 5% of the ring counts as the fastest; 6% behind does not. */
    t[8][DIRECT] = 5.2e-3;
    cr_assert_eq(decide(2).direct_pair_min, sizes[5]);
    t[8][DIRECT] = 5.3e-3;
    cr_assert_eq(decide(2).direct_pair_min, sizes[9]);
    cr_assert_eq(decide(2).direct_large_min, sizes[9]);
}

Test(tune_decide, tree4_rule_is_the_first_run_where_the_tree_clearly_beats_direct)
{
    table();
    for (int s = 0; s < N; s++)
        t[s][RING] = 10e-3;
    for (int s = 2; s < 5; s++) {
        t[s][TREE] = 3e-3;
        t[s][DIRECT] = 4e-3;
    }
    t[8][TREE] = 3e-3; /* a second run is not taken */
    gw_bench_rules_t r = decide(4);
    cr_assert_eq(r.tree4_min, sizes[2]);
    cr_assert_eq(r.tree4_end, sizes[5]);
    /* Faster than direct by 5% or less is no clear win. */
    for (int s = 2; s < 5; s++)
        t[s][DIRECT] = 3.1e-3;
    r = decide(4);
    cr_assert_eq(r.tree4_min, sizes[8]);
    cr_assert_eq(r.tree4_end, sizes[9]);
    /* A run to the largest size has no end. */
    for (int s = 8; s < N; s++)
        t[s][TREE] = 3e-3;
    cr_assert_eq(decide(4).tree4_end, OFF);
}

Test(tune_decide, shm_rule_forgives_a_noisy_size_not_a_slow_range)
{
    table();
    for (int s = 0; s < N; s++)
        t[s][RING] = 10e-3;
    for (int s = 0; s < N; s++)
        t[s][DIRECT] = s < 3 ? 20e-3 : 4e-3;
    cr_assert_eq(decide(3).direct_shm_min, sizes[3]);
    /* One size 1.5x behind the fastest: the geometric mean over the 9
     * sizes from 3 is 1.5^(1/9) = 1.046, within 1.15. */
    t[6][HIER] = t[6][DIRECT] / 1.5;
    cr_assert_eq(decide(3).direct_shm_min, sizes[3]);
    cr_assert_eq(decide(4).direct_pair_min, 0, "4 ranks have no pair rule");
    /* More than 2x behind at one size: the rule starts above it. */
    t[6][HIER] = t[6][DIRECT] / 2.5;
    cr_assert_eq(decide(3).direct_shm_min, sizes[7]);
    /* 1.2x behind at the three largest sizes, the fastest below them:
     * the geometric mean from size 3 is 1.2^(3/9) = 1.06. */
    t[6][HIER] = 10e-3;
    for (int s = 9; s < N; s++)
        t[s][RD] = t[s][DIRECT] / 1.2;
    cr_assert_eq(decide(3).direct_shm_min, sizes[3]);
    for (int s = 3; s < 9; s++)
        t[s][RD] = t[s][DIRECT] / 1.2;
    cr_assert_eq(decide(3).direct_shm_min, 0, "1.2x behind everywhere is not near the fastest");
}

Test(tune_decide, an_algorithm_not_run_is_never_the_fastest)
{
    table();
    for (int s = 0; s < N; s++) {
        t[s][HIER] = HUGE_VAL; /* 2 ranks: hier is the ring, not run */
        t[s][DIRECT] = 4e-3;
    }
    t[0][RING] = HUGE_VAL;
    gw_bench_rules_t r = decide(2);
    cr_assert_eq(r.direct_pair_min, sizes[0]);
    for (int s = 0; s < N; s++)
        t[s][DIRECT] = HUGE_VAL;
    cr_assert_eq(decide(3).direct_shm_min, 0);
}
