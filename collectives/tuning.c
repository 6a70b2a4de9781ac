/*
 * tuning.c - the alpha-beta(-gamma) cost model that chooses an allreduce
 * algorithm per message size and rank count.
 *
 * With n ranks, S bytes, alpha seconds per message, beta seconds per byte on
 * a link and gamma seconds per byte reduced:
 *
 *   ring  2(n-1) alpha + 2 (n-1)/n S beta + (n-1)/n S gamma
 *         Bandwidth-optimal: every rank sends and receives 2(n-1)/n S, but
 *         the latency term grows linearly with n.
 *   tree  2 d alpha + 2 S beta + 2 d c beta + S gamma,   d = ceil(log2 n)
 *         Each half of the buffer goes up one binary tree and down again; a
 *         rank's links carry about 2S in each direction over both trees, and
 *         filling the pipeline costs 2d chunks of c bytes.
 *   rd    L alpha + L S beta + L S gamma,  L = ceil(log2 n) (+2 when n is not
 *         a power of two: fold in and out). Fewest rounds, but every round
 *         moves the whole buffer: the latency choice for small messages.
 *
 * The defaults are rough figures for TCP on one host; issue #3 measures
 * them per machine. The model only has to rank algorithms correctly around
 * the crossover points, not predict times exactly.
 */
#include <math.h>
#include <string.h>

#include "collectives/tuning.h"

void gw__tuning_defaults(gw_tuning_t *t, const char *transport)
{
    (void)transport; /* one set of defaults until transports are measured */
    t->alpha = 25e-6;
    t->beta = 1.0 / 2.0e9;
    t->gamma = 1.0 / 4.0e9;
    t->chunk_bytes = 512 * 1024;
}

static int ceil_log2(int n)
{
    int d = 0;
    while ((1 << d) < n)
        d++;
    return d;
}

double gw__tuning_predict(const gw_tuning_t *t, gw_algo_t algo, int nranks, size_t bytes)
{
    double n = nranks, s = (double)bytes;
    if (nranks <= 1)
        return 0.0;
    int d = ceil_log2(nranks);
    switch (algo) {
    case GW_ALGO_RING:
        return 2 * (n - 1) * t->alpha + 2 * (n - 1) / n * s * t->beta + (n - 1) / n * s * t->gamma;
    case GW_ALGO_TREE: {
        double c = fmin((double)t->chunk_bytes, s / 2);
        return 2 * d * t->alpha + 2 * s * t->beta + 2 * d * c * t->beta + s * t->gamma;
    }
    case GW_ALGO_RD: {
        int rounds = d + ((nranks & (nranks - 1)) ? 2 : 0);
        return rounds * (t->alpha + s * t->beta) + d * s * t->gamma;
    }
    default:
        return HUGE_VAL;
    }
}

gw_algo_t gw__tuning_pick(const gw_tuning_t *t, int nranks, size_t bytes)
{
    static const gw_algo_t candidates[] = {GW_ALGO_RD, GW_ALGO_TREE, GW_ALGO_RING};
    gw_algo_t best = GW_ALGO_RING;
    double best_time = HUGE_VAL;
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        double time = gw__tuning_predict(t, candidates[i], nranks, bytes);
        /* Strictly less: ties keep the earlier, lower-latency candidate. */
        if (time < best_time) {
            best_time = time;
            best = candidates[i];
        }
    }
    return best;
}
