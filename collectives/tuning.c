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
 *   hier  2(H-1) alpha + 2 alpha + 2 (L-2) alpha_l
 *         + max(2 (H-1)/H S beta, 2 (L-1)/L S beta_l)
 *         + ((L-1)/L + (H-1)/(H L)) S gamma,   H hosts, at most L ranks on
 *         one (allreduce_hier.c). Inside a host (beta_l, the figure
 *         beta_local) the bytes move over shared memory, in phases that
 *         overlap the network's (pipelined by pieces), so the slower of the
 *         two decides; beta_l is what a byte through shared memory costs a
 *         rank while the host's other ranks do the same; across hosts each
 *         host's link
 *         carries 2 (H-1)/H S, against the ring's 2 (n-1)/n S on its
 *         busiest link. A candidate whenever several ranks share a host;
 *         with one rank per host it is the ring over the hosts, and
 *         predicted as such. On one host (H = 1) it is 2 alpha + 2 (L-2)
 *         alpha_l + 2 (L-1)/L S beta_l: each rank sends every segment to its owner at once and
 *         gets it back the same way, so it pays two latencies where the
 *         ring pays 2(n-1), and its L - 1 concurrent transfers per rank
 *         keep both cores busy where the ring's dependent steps leave
 *         them waiting: that is why beta_local is below beta over TCP on
 *         one host (loopback sockets copied in parallel), and what made
 *         hier the fastest fixed choice there from 128 KiB to 8 MiB.
 *         alpha_l is what each further message of a round costs the CPU
 *         (alpha over TCP, a system call and a wake-up per message; half a
 *         microsecond over shared memory), which keeps small messages on
 *         recursive doubling over TCP, where hier took 2x its time at 8 B.
 *   direct 2 alpha + 2 (n-1)/n S beta_l + (n-1)/n S gamma, and alpha +
 *         (n-1) S (beta_l + gamma) up to 16 KiB (allreduce_direct.c): the
 *         small form by its prediction, for one host over shared memory
 *         only (gw__tuning_pick_shm); the large form by a measured rule
 *         rather than the model, on one host of at most 4 ranks from 8 MiB
 *         (gw__tuning_pick_hosts), on 2 ranks over shared memory from
 *         64 KiB and on 3-4 from 32 KiB (gw__tuning_pick_shm). On 4 ranks
 *         over shared memory the tree in a range a tuning file sets (off
 *         by default), also a measured rule.
 *
 * The defaults are per transport (gw__tuning_links: the figures of the
 * transports the communicator's pairs use, the worst link deciding each
 * figure, chosen once the transports have connected:
 * collectives/api/comm_tuning.c); `gradwire-bench tune`
 * measures them per cluster and writes a tuning file (format in tuning.h)
 * that GW_TUNING_FILE loads in place of the defaults. The model only has to
 * rank algorithms correctly around the crossover points, not predict times
 * exactly.
 *
 * The measured rules (direct from 8 MiB, direct on 2 ranks from 64 KiB
 * and on 3-4 ranks over shared memory from 32 KiB, the tree on 4 ranks at
 * a range a tuning file may set, direct's small form up to 16 KiB)
 * are fields of gw_tuning_t with these defaults, measured on the 2-core
 * test machine; a tuning file sets each (tuning_file.c), and
 * `gradwire-bench tune` measures them on the user's machine.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/tuning.h"

/* Default figures of each transport, for one link between two ranks
 * (alpha, beta) and for a host's ranks all exchanging at once (beta_local,
 * what the hierarchical allreduce's local phases see). shm and tcp are
 * measured with `gradwire-bench tune` on 2 ranks of the 2-core test machine
 * (README, "Is auto the right choice?"); ib is not measurable here (soft
 * RoCE in a VM is slower than TCP) and comes from published figures for
 * 100 Gbit/s EDR InfiniBand verbs: about 2 us a message, 12 GB/s.
 * shm's beta_local is above its beta on purpose: hier on one host over
 * shared memory took 10-18x the best fixed algorithm at 128 KiB in every
 * sweep on 4 ranks (its segments' concurrent copies contend for 2 cores),
 * so the ring takes over from about 96 KiB. alpha_local is a guess from
 * the TCP sweeps (hier twice rd's time at 8 B: each further message costs
 * a rank about an alpha of system calls); shm's is a few stores. */
static const struct {
    unsigned link;
    double alpha, beta, beta_local, alpha_local;
} link_defaults[] = {
    {GW_TUNING_LINK_SHM, 2.5e-6, 0.40e-9, 0.47e-9, 0.5e-6},
    {GW_TUNING_LINK_TCP, 11e-6, 0.46e-9, 0.35e-9, 11e-6},
    {GW_TUNING_LINK_IB, 2e-6, 1.0 / 12e9, 1.0 / 12e9, 0.5e-6},
};
#define NLINKS (sizeof(link_defaults) / sizeof(link_defaults[0]))

void gw__tuning_links(gw_tuning_t *t, unsigned intra, unsigned inter)
{
    unsigned all = intra | inter;
    if (!all) /* one rank, or nothing known: TCP's, the slowest */
        all = intra = GW_TUNING_LINK_TCP;
    t->alpha = t->beta = t->beta_local = t->alpha_local = 0;
    for (size_t i = 0; i < NLINKS; i++) {
        /* The worst link on an algorithm's path decides: a flat ring over
         * shm and tcp waits for its TCP edges. */
        if (all & link_defaults[i].link) {
            t->alpha = fmax(t->alpha, link_defaults[i].alpha);
            t->beta = fmax(t->beta, link_defaults[i].beta);
        }
        if (intra & link_defaults[i].link) {
            t->beta_local = fmax(t->beta_local, link_defaults[i].beta_local);
            t->alpha_local = fmax(t->alpha_local, link_defaults[i].alpha_local);
        }
    }
    if (!intra) { /* one rank per host: hier's local phases are empty */
        t->beta_local = link_defaults[0].beta_local;
        t->alpha_local = link_defaults[0].alpha_local;
    }
    t->gamma = 5.5e-11; /* measured: the AVX2 sum of float32 on this machine */
    t->chunk_bytes = 512 * 1024;
    gw__tuning_rules_default(t);
}

void gw__tuning_rules_default(gw_tuning_t *t)
{
    t->direct_large_min = GW_TUNING_DIRECT_LARGE_MIN;
    t->direct_large_max_ranks = GW_TUNING_DIRECT_LARGE_MAX_RANKS;
    t->direct_max_bytes = GW_TUNING_DIRECT_MAX_BYTES;
    t->direct_max_ranks = GW_TUNING_DIRECT_MAX_RANKS;
    t->direct_pair_min = GW_TUNING_DIRECT_PAIR_MIN;
    t->tree4_min = GW_TUNING_TREE4_MIN;
    t->tree4_end = GW_TUNING_TREE4_END;
    t->direct_shm_min = GW_TUNING_DIRECT_SHM_MIN;
    for (int k = 0; k < GW_COLL_KIND_END; k++)
        t->force[k] = GW_ALGO_AUTO;
    t->from_file = 0;
}

void gw__tuning_defaults(gw_tuning_t *t, const char *transport)
{
    unsigned link = GW_TUNING_LINK_TCP;
    if (transport && strcmp(transport, "shm") == 0)
        link = GW_TUNING_LINK_SHM;
    else if (transport && strcmp(transport, "ib") == 0)
        link = GW_TUNING_LINK_IB;
    gw__tuning_links(t, link, link);
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
    return gw__tuning_predict_hosts(t, algo, nranks, nranks, 1, bytes);
}

double gw__tuning_predict_hosts(const gw_tuning_t *t, gw_algo_t algo, int nranks, int nhosts,
                                int local_max, size_t bytes)
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
    case GW_ALGO_HIER: {
        double h = nhosts, l = local_max;
        /* Pipelined: the local phases overlap the network's, and the
         * slower of the two decides. */
        double t_local = local_max > 1 ? 2 * (l - 1) / l * s * t->beta_local : 0.0;
        double t_net = 2 * (h - 1) / h * s * t->beta;
        /* Phases 1 and 3: one round each of up to L - 1 messages. */
        double t_rounds = local_max > 1 ? 2 * t->alpha + 2 * (l - 2) * t->alpha_local : 0.0;
        return 2 * (h - 1) * t->alpha + t_rounds + (t_local > t_net ? t_local : t_net) +
               ((l - 1) / l + (h - 1) / (h * l)) * s * t->gamma;
    }
    case GW_ALGO_DIRECT: {
        /* allreduce_direct.c, bytes over shared memory (beta_local): the
         * small form (whole inputs to every peer, up to 16 KiB) or two
         * rounds of n - 1 overlapping messages. */
        if (s <= 16 * 1024) /* its GW__DIRECT_SMALL_BYTES */
            return t->alpha + (n - 1) * s * (t->beta_local + t->gamma);
        return 2 * t->alpha + 2 * (n - 1) / n * s * t->beta_local + (n - 1) / n * s * t->gamma;
    }
    default:
        return HUGE_VAL;
    }
}

gw_algo_t gw__tuning_pick(const gw_tuning_t *t, int nranks, size_t bytes)
{
    return gw__tuning_pick_hosts(t, nranks, nranks, 1, bytes);
}

gw_algo_t gw__tuning_pick_hosts(const gw_tuning_t *t, int nranks, int nhosts, int local_max,
                                size_t bytes)
{
    static const gw_algo_t candidates[] = {GW_ALGO_RD, GW_ALGO_TREE, GW_ALGO_RING, GW_ALGO_HIER};
    gw_algo_t best = GW_ALGO_RING;
    double best_time = HUGE_VAL;
    /* The hierarchy needs several ranks on a host. On one host it is its
     * local phases alone: every rank sends each segment straight to its
     * owner and gets it back, two rounds of n - 1 concurrent messages
     * instead of the ring's 2(n - 1) dependent steps. With 2 ranks on
     * one host there is one peer and nothing concurrent: hier is then the
     * ring's two steps, and measured slower than it over TCP from 512 KiB
     * (README). */
    /* One host, a few ranks, large messages: the direct exchange's large
     * form, which the model (same bytes as the ring, fewer dependent
     * steps, but charged beta_local) does not rank first. In every sweep
     * on the 2-core test machine since 3fe5499 it was the fastest or
     * within 1.05-1.19 of it from 8 MiB on 2 and 4 ranks, over shared
     * memory and over TCP, where the model's choice (the ring, or hier
     * over TCP) took up to 1.47x its time; with 8 ranks (4 per core) the
     * ring was faster, so the rule stops at 4 ranks (README, "Is auto the
     * right choice?"). */
    if (nhosts == 1 && nranks >= 2 && nranks <= t->direct_large_max_ranks &&
        bytes >= t->direct_large_min)
        return GW_ALGO_DIRECT;
    size_t ncand = local_max > 2 || (nhosts > 1 && local_max > 1) ? 4 : 3;
    for (size_t i = 0; i < ncand; i++) {
        double time = gw__tuning_predict_hosts(t, candidates[i], nranks, nhosts, local_max, bytes);
        /* Strictly less: ties keep the earlier, lower-latency candidate. */
        if (time < best_time) {
            best_time = time;
            best = candidates[i];
        }
    }
    return best;
}

gw_algo_t gw__tuning_pick_shm(const gw_tuning_t *t, int nranks, size_t bytes)
{
    /* One host: hier is its local phases alone (see the top). The direct
     * exchange's small form (one round, every input to every peer, up to
     * GW_TUNING_DIRECT_MAX_BYTES) competes by its prediction: it beats
     * recursive doubling's two rounds at 8 bytes on 4 ranks and loses to
     * hier's two rounds of a quarter of the bytes once (n - 1) S copies
     * cost more than an alpha (about 4 KiB with shm's figures; README, "Is
     * auto the right choice?"). Above GW_TUNING_DIRECT_MAX_BYTES its large
     * form measured no faster than the ring (and slower at 32-64 MiB) on
     * the 2-core test machine with 4 ranks, so it is no candidate there;
     * with more ranks than GW_TUNING_DIRECT_MAX_RANKS the small form's
     * n - 1 copies of the input were not measured.
     *
     * Two ranks over shared memory, from GW_TUNING_DIRECT_PAIR_MIN: the
     * direct exchange's large form, a measured rule like the one from 8
     * MiB. With one peer it moves what the ring moves in the same two
     * steps, yet in six runs on the 2-core test machine after single copy
     * went to 8 MiB (s11/tune; README, "Is auto the right choice?") it
     * took less time than the ring in 28 of the 36 (size, run) pairs at
     * 128 KiB-4 MiB (0.42-1.36x the ring's time, median 0.86, the median
     * of every size below 1), and at 64 KiB it took 0.27-0.99x the time
     * of recursive doubling (the model's choice there, whose 64 KiB
     * messages had been single copy) in all six. Why it beats the ring
     * was not found. Over TCP it was not measured ahead, so the rule is
     * shared memory's alone. */
    if (nranks == 2 && t->direct_pair_min && bytes >= t->direct_pair_min)
        return GW_ALGO_DIRECT;
    /* Four ranks over shared memory, 64 to 256 KiB: the tree, which the
     * model ranks below the ring and hier (it charges the tree 2 S beta
     * plus its pipeline's fill). In the 4-rank sweeps on the 2-core test
     * machine after single copy went to 8 MiB (s11/tune; README, "Is auto
     * the right choice?") it was the fastest fixed algorithm at 64 KiB in
     * all four that had the size and at 128 KiB in five of six; auto's
     * hier or ring took 1.13-1.58x its time in eight of those nine (size,
     * run) pairs (0.72x in one). From 256 KiB the ring was about as fast.
     * Only 4 ranks were measured. Off by default since the rule below
     * took its sizes; a tuning file that sets it is heard first. */
    if (nranks == 4 && bytes >= t->tree4_min && bytes < t->tree4_end)
        return GW_ALGO_TREE;
    /* Three or four ranks over shared memory, from direct_shm_min: the
     * direct exchange's large form. In three runs of `gradwire-bench tune`
     * on 4 ranks of the 2-core test machine (2026-12-07, after the rings'
     * warming and the memoised signatures) it was the fastest, or within
     * 5% of it, at every size from 32 KiB to 2 MiB (hier alike), and
     * within 1.12x of the fastest from 4 to 32 MiB, while this function's
     * choice before the rule (the tree at 64-256 KiB, the ring above) took
     * 1.8-4.1x its time at 64 KiB-1 MiB; on 3 ranks it was the fastest
     * from 64 KiB to 4 MiB (auto's ring 1.0-2.5x its time). Every rank
     * sends its input to every peer and reduces what arrives, all in one
     * step: when ranks outnumber cores, as there, the fewest dependent
     * steps win. Over TCP on one host it was not the fastest below 1 MiB,
     * so the rule is shared memory's alone. */
    if (nranks >= 3 && nranks <= t->direct_large_max_ranks && t->direct_shm_min &&
        bytes >= t->direct_shm_min)
        return GW_ALGO_DIRECT;
    gw_algo_t best = gw__tuning_pick_hosts(t, nranks, 1, nranks, bytes);
    if (nranks >= 2 && nranks <= t->direct_max_ranks && bytes <= t->direct_max_bytes &&
        gw__tuning_predict(t, GW_ALGO_DIRECT, nranks, bytes) <=
            gw__tuning_predict_hosts(t, best, nranks, 1, nranks, bytes))
        return GW_ALGO_DIRECT;
    return best;
}
