/*
 * tuning_coll.c - the cost model for the collectives other than allreduce
 * (whose model is tuning.c's): allgather, reduce-scatter, broadcast and
 * reduce choose their algorithm per call by the same figures (alpha, beta,
 * gamma, beta_local, alpha_local), and a tuning file can force one per kind.
 *
 * With n ranks and S bytes (the whole vector: all n blocks of an allgather
 * or reduce-scatter, the buffer of a broadcast or reduce), d = ceil(log2 n),
 * b the per-byte figure of the links the algorithm uses (beta_local when
 * every rank is on one host over shared memory, beta otherwise):
 *
 *   allgather
 *     ring    (n-1) alpha + (n-1)/n S beta               allgather_ring.c
 *     rd      d alpha + (n-1)/n S beta + S beta_local     allgather_bruck.c
 *             (Bruck: log rounds for any n, then a local rotation)
 *     direct  alpha + (n-2) alpha_local + (n-1)/n S b     allgather_direct.c
 *   reduce-scatter
 *     ring    (n-1) alpha + (n-1)/n S (beta + gamma)      reduce_scatter_ring.c
 *     direct  alpha + (n-2) alpha_local + (n-1)/n S (b + gamma)
 *                                                        reduce_scatter_direct.c
 *   reduce
 *     tree    (C + d - 1) d (alpha + c (beta + gamma))    reduce_tree.c
 *             (C chunks of c bytes; the root takes each chunk from each of
 *             its d children)
 *     ring    n alpha + (n-2) alpha_local + (n-1)/n S (2 beta + gamma)
 *             (reduce-scatter, then a gather)             reduce_scatter_gather.c
 *   broadcast
 *     tree    min((C + d - 1) d, C + n - 2) (alpha + c beta)
 *             broadcast_tree.c's binomial tree or chain. The two shapes'
 *             costs share the factor (alpha + c beta), so which is cheaper
 *             depends on C and n alone, which is how broadcast_tree.c picks
 *             its shape: the model has nothing more to choose, and the
 *             broadcast has one algorithm.
 *
 * The direct exchanges post n - 1 messages at once; each costs a rank its
 * CPU work (alpha_local: a system call over TCP, a few stores over shared
 * memory), which is what keeps them to small messages and few ranks between
 * hosts: over TCP, where alpha_local is alpha, the direct round prices as
 * the ring does, and ties keep the earlier candidate in each kind's list,
 * the ring or the tree, the algorithms every transport has run longest.
 *
 * These are the model's predictions from the transport's figures; where a
 * machine disagrees, `gradwire-bench tune` measures the figures and a tuning
 * file forces a kind's algorithm ("allgather = ring"): docs/design/tuning.md.
 */
#include <math.h>

#include "collectives/tuning.h"

static int ceil_log2(int n)
{
    int d = 0;
    while ((1 << d) < n)
        d++;
    return d;
}

/* The algorithms each kind has, in the order ties are broken. */
static const gw_algo_t allgather_algos[] = {GW_ALGO_RING, GW_ALGO_RD, GW_ALGO_DIRECT};
static const gw_algo_t reduce_scatter_algos[] = {GW_ALGO_RING, GW_ALGO_DIRECT};
static const gw_algo_t reduce_algos[] = {GW_ALGO_TREE, GW_ALGO_RING};
static const gw_algo_t broadcast_algos[] = {GW_ALGO_TREE};

static const gw_algo_t *algos_of(gw_coll_kind_t kind, size_t *n)
{
#define LIST(a) (*n = sizeof(a) / sizeof(a[0]), a)
    switch (kind) {
    case GW_COLL_ALLGATHER:
        return LIST(allgather_algos);
    case GW_COLL_REDUCE_SCATTER:
        return LIST(reduce_scatter_algos);
    case GW_COLL_REDUCE:
        return LIST(reduce_algos);
    case GW_COLL_BROADCAST:
        return LIST(broadcast_algos);
    default:
        *n = 0;
        return NULL;
    }
#undef LIST
}

int gw__tuning_coll_has(gw_coll_kind_t kind, gw_algo_t algo)
{
    if (algo == GW_ALGO_AUTO)
        return 1;
    if (kind == GW_COLL_ALLREDUCE)
        return (unsigned)algo < GW_ALGO_COUNT;
    size_t n;
    const gw_algo_t *list = algos_of(kind, &n);
    for (size_t i = 0; i < n; i++)
        if (list[i] == algo)
            return 1;
    return 0;
}

/* The pipelined trees' chunk count C (at least 1) and chunk c in bytes. */
static void chunks(const gw_tuning_t *t, double s, double *C, double *c)
{
    *c = fmin((double)t->chunk_bytes, s > 0 ? s : 1);
    *C = fmax(1.0, ceil(s / *c));
}

double gw__tuning_predict_coll(const gw_tuning_t *t, gw_coll_kind_t kind, gw_algo_t algo,
                               int nranks, size_t bytes, int on_shm)
{
    if (nranks <= 1)
        return 0.0;
    if (!gw__tuning_coll_has(kind, algo) || algo == GW_ALGO_AUTO)
        return HUGE_VAL;
    const double n = nranks, s = (double)bytes, d = ceil_log2(nranks);
    const double b = on_shm ? t->beta_local : t->beta, share = (n - 1) / n * s;
    const double round = t->alpha + (n - 2) * t->alpha_local; /* n - 1 messages at once */
    double C, c;
    switch (kind) {
    case GW_COLL_ALLREDUCE:
        return gw__tuning_predict(t, algo, nranks, bytes);
    case GW_COLL_ALLGATHER:
        return algo == GW_ALGO_RING ? (n - 1) * t->alpha + share * t->beta
               : algo == GW_ALGO_RD ? d * t->alpha + share * t->beta + s * t->beta_local
                                    : round + share * b;
    case GW_COLL_REDUCE_SCATTER:
        return algo == GW_ALGO_RING ? (n - 1) * t->alpha + share * (t->beta + t->gamma)
                                    : round + share * (b + t->gamma);
    case GW_COLL_REDUCE:
        chunks(t, s, &C, &c);
        return algo == GW_ALGO_TREE
                   ? (C + d - 1) * d * (t->alpha + c * (t->beta + t->gamma))
                   : n * t->alpha + (n - 2) * t->alpha_local + share * (2 * t->beta + t->gamma);
    case GW_COLL_BROADCAST:
        chunks(t, s, &C, &c);
        return fmin((C + d - 1) * d, C + n - 2) * (t->alpha + c * t->beta);
    default:
        return HUGE_VAL;
    }
}

gw_algo_t gw__tuning_pick_coll(const gw_tuning_t *t, gw_coll_kind_t kind, int nranks, size_t bytes,
                               int on_shm)
{
    if ((unsigned)kind < GW_COLL_KIND_END && t->force[kind] != GW_ALGO_AUTO)
        return t->force[kind];
    size_t n;
    const gw_algo_t *list = algos_of(kind, &n);
    if (n == 0)
        return GW_ALGO_RING;
    gw_algo_t best = list[0];
    double best_time = HUGE_VAL;
    for (size_t i = 0; i < n; i++) {
        double time = gw__tuning_predict_coll(t, kind, list[i], nranks, bytes, on_shm);
        if (time < best_time) { /* strictly: ties keep the earlier */
            best_time = time;
            best = list[i];
        }
    }
    return best;
}
