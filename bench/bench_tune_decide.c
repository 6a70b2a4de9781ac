/*
 * bench_tune_decide.c - how `gradwire-bench tune` turns its table of
 * allreduce times (bench_tune_rules.c measures it) into the cost model's
 * measured rules (collectives/tuning.c). No communication: a function of
 * the table alone, so that tests/tools/test_tune_decide.c can hand it the
 * tables a quiet, a noisy and an oversubscribed machine give.
 *
 * "The fastest" at a size is any algorithm within RULES_TOLERANCE (5%) of
 * the best time there: one noisy size must not move a rule across the
 * whole range. Per rule, on the rank count it is about:
 *   direct_pair_min   2 ranks: the smallest size from which the direct
 *                     exchange is the fastest at that size and every larger
 *                     one (0: never, the rule off);
 *   tree4_min, _end   4 ranks: the first run of sizes at which the tree is
 *                     the fastest and beats the direct exchange by more than
 *                     the tolerance (0 and 0: never, the rule off; an end of
 *                     1 TiB: to the largest size measured);
 *   direct_shm_min    3 or 4 ranks: the smallest size at which the direct
 *                     exchange is the fastest and from which it trails the
 *                     fastest by at most RULES_NEAR in the geometric mean and
 *                     RULES_WORST at any one size (0: never);
 *   direct_large_min  2 to 4 ranks, from 1 MiB: as direct_pair_min (never:
 *                     1 TiB, the rule off).
 * A time that is not finite (an algorithm not run, as hier on 2 ranks) is
 * never the fastest.
 */
#include <math.h>
#include <string.h>

#include "bench.h"

#define RULES_OFF_BYTES ((size_t)1 << 40)
#define RULES_TOLERANCE 1.05
/* direct_shm_min's slack. With ranks outnumbering cores one size in a run
 * is often off by 1.3-1.7x for one algorithm or another, the fastest
 * changing from run to run: a rule that every size must hold would fall to
 * the first such figure. */
#define RULES_NEAR 1.15
#define RULES_WORST 2.0

typedef const double (*table_t)[GW_BENCH_RULE_NALGOS];

/* Algorithm a's time at size s over the fastest's there (>= 1; infinite
 * when a was not run). */
static double behind(table_t t, int s, int a)
{
    double best = t[s][a];
    for (int b = 0; b < GW_BENCH_RULE_NALGOS; b++)
        if (isfinite(t[s][b]) && t[s][b] < best)
            best = t[s][b];
    return t[s][a] / best;
}

/* The smallest size index, from `from` on, from which algorithm a is the
 * fastest at every larger size measured, or -1. */
static int wins_from(table_t t, int nsizes, int a, int from)
{
    int start = -1;
    for (int s = nsizes - 1; s >= from && behind(t, s, a) <= RULES_TOLERANCE; s--)
        start = s;
    return start;
}

/* The smallest size index at which algorithm a is the fastest and from
 * which it trails the fastest by at most RULES_NEAR in the geometric mean
 * and RULES_WORST at any size, or -1. */
static int near_from(table_t t, int nsizes, int a)
{
    int start = -1;
    double log_sum = 0;
    for (int s = nsizes - 1; s >= 0; s--) {
        double r = behind(t, s, a);
        if (!isfinite(r) || r > RULES_WORST)
            break;
        log_sum += log(r);
        if (r <= RULES_TOLERANCE && exp(log_sum / (nsizes - s)) <= RULES_NEAR)
            start = s;
    }
    return start;
}

void gw_bench_rules_decide(int nranks, int nsizes, const size_t *sizes,
                           const double t[][GW_BENCH_RULE_NALGOS], gw_bench_rules_t *r)
{
    const int direct = GW_BENCH_RULE_DIRECT, tree = GW_BENCH_RULE_TREE;
    memset(r, 0, sizeof(*r));
    if (nranks == 2) {
        int from = wins_from(t, nsizes, direct, 0);
        r->have_pair = 1;
        r->direct_pair_min = from < 0 ? 0 : sizes[from];
    }
    if (nranks == 4) {
        int first = -1, end = -1;
        /* The tree's rule comes before the direct exchange's: it must
         * beat the direct exchange clearly, not by one noisy figure's
         * chance of being within 5% of the fastest. */
        for (int s = 0; s < nsizes && end < 0; s++) {
            int best = t[s][tree] * RULES_TOLERANCE < t[s][direct] &&
                       behind(t, s, tree) <= RULES_TOLERANCE;
            if (best && first < 0)
                first = s;
            else if (!best && first >= 0)
                end = s;
        }
        r->have_tree4 = 1;
        r->tree4_min = first < 0 ? 0 : sizes[first];
        r->tree4_end = first < 0 ? 0 : end < 0 ? RULES_OFF_BYTES : sizes[end];
    }
    if (nranks == 3 || nranks == 4) {
        int from = near_from(t, nsizes, direct);
        r->have_shm = 1;
        r->direct_shm_min = from < 0 ? 0 : sizes[from];
    }
    if (nranks >= 2 && nranks <= 4) {
        int mib = 0;
        while (mib < nsizes && sizes[mib] < ((size_t)1 << 20))
            mib++;
        int from = wins_from(t, nsizes, direct, mib);
        r->have_large = 1;
        r->direct_large_min = from < 0 ? RULES_OFF_BYTES : sizes[from];
    }
}
