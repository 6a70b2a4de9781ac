/*
 * bench_tune_rules.c - `gradwire-bench tune`'s second part: measure, on this
 * job's ranks, the crossovers behind the cost model's measured rules
 * (collectives/tuning.c: direct_pair_min, tree4_min/tree4_end,
 * direct_shm_min, direct_large_min), so that the tuning file carries this machine's own
 * instead of the defaults measured on the 2-core test machine.
 *
 * The rules exist for one host (the direct exchange and the 4-rank tree
 * over shared memory), so they are measured only when the job's transport
 * is shared memory, which joins ranks of one host only (a host name would
 * not tell: emulated hosts share the machine's), and each only for the
 * rank count it is about:
 *   direct_pair_min   2 ranks over shared memory: the smallest size from
 *                     which the direct exchange is the fastest at that size
 *                     and every larger one measured (0: never, the rule off);
 *   tree4_min, _end   4 ranks over shared memory: the sizes at which the
 *                     tree is the fastest and faster than the direct
 *                     exchange by more than the tolerance (the first run
 *                     of them; an empty range, 0 and 0, turns the rule
 *                     off);
 *   direct_shm_min    3 or 4 ranks over shared memory: the smallest size at
 *                     which the direct exchange is the fastest and from
 *                     which it trails the fastest by at most RULES_NEAR
 *                     in the geometric mean (0: never, the rule off);
 *   direct_large_min  2 to 4 ranks, from 1 MiB: as direct_pair_min
 *                     (never: 1 TiB, the rule off).
 * "The fastest" (within 5% of it) is among ring, tree, rd, hier (more than
 * 2 ranks) and direct, each forced with gw_comm_set_algo, at sizes 16 KiB to 32 MiB in
 * powers of two, the algorithms interleaved at each size so that a drift in
 * the machine's speed hits all of them alike; a call's time is its slowest
 * rank's, the figure the median over calls. A rank pinned to a busy core
 * measures the busy core, as any benchmark would: the rules are only as
 * good as the machine was quiet (gradwire-bench prints its load).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define RULES_MIN_BYTES ((size_t)16 << 10)
#define RULES_MAX_BYTES ((size_t)32 << 20)
#define RULES_NSIZES 12 /* 16 KiB .. 32 MiB */
#define RULES_OFF_BYTES ((size_t)1 << 40)
/* An algorithm within 5% of the fastest counts as the fastest: one noisy
 * size must not move a rule across the whole range. */
#define RULES_TOLERANCE 1.05
/* direct_shm_min: from its first size on, the direct exchange may trail
 * the fastest by this much, as the geometric mean of its ratio to the
 * fastest over the larger sizes, and by at most RULES_WORST at any one.
 * With ranks outnumbering cores one size in a run is often off by 1.3-1.7x
 * for one algorithm or another, the fastest changing from run to run: a
 * rule that every size must hold would fall to the first such figure. */
#define RULES_NEAR 1.15
#define RULES_WORST 2.0

static const gw_algo_t algos[] = {GW_ALGO_RING, GW_ALGO_TREE, GW_ALGO_RD, GW_ALGO_HIER,
                                  GW_ALGO_DIRECT};
#define NALGOS ((int)(sizeof(algos) / sizeof(algos[0])))

/* Calls per size: enough bytes to average out a scheduler's tick, few
 * enough that 32 MiB costs seconds, not minutes. */
static long calls_for(size_t bytes)
{
    long c = (long)(((size_t)64 << 20) / bytes);
    return c < 5 ? 5 : c > 200 ? 200 : c;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median over calls of the slowest rank's time, in seconds, of an
 * allreduce of `bytes` with algo. */
static gw_status_t time_algo(gw_comm_t *comm, gw_algo_t algo, float *buf, size_t bytes, long warmup,
                             double *out)
{
    const size_t count = bytes / sizeof(float);
    const long calls = calls_for(bytes);
    double *t = malloc((size_t)calls * sizeof(double));
    if (!t)
        return GW_ERR_NO_MEMORY;
    gw_status_t st = gw_comm_set_algo(comm, algo);
    for (long i = 0; st == GW_OK && i < warmup; i++)
        st = gw_allreduce(comm, buf, buf, count, GW_FLOAT32, GW_MAX);
    if (st == GW_OK)
        st = gw_barrier(comm);
    for (long i = 0; st == GW_OK && i < calls; i++) {
        double t0 = gw_kit_now_us();
        st = gw_allreduce(comm, buf, buf, count, GW_FLOAT32, GW_MAX);
        t[i] = (gw_kit_now_us() - t0) * 1e-6;
    }
    /* The slowest rank's time per call (a call ends when its last rank is
     * done), then the median. */
    if (st == GW_OK)
        st = gw_allreduce(comm, t, t, (size_t)calls, GW_FLOAT64, GW_MAX);
    if (st == GW_OK) {
        qsort(t, (size_t)calls, sizeof(double), cmp_double);
        *out = calls % 2 ? t[calls / 2] : (t[calls / 2 - 1] + t[calls / 2]) / 2;
    }
    gw_comm_set_algo(comm, GW_ALGO_AUTO);
    free(t);
    return st;
}

/* Algorithm a's time at size s over the fastest's there (>= 1). */
static double behind(double t[RULES_NSIZES][NALGOS], int s, int a)
{
    double best = t[s][a];
    for (int b = 0; b < NALGOS; b++)
        if (isfinite(t[s][b]) && t[s][b] < best)
            best = t[s][b];
    return t[s][a] / best;
}

/* The smallest size index from which algorithm a is the fastest (within
 * RULES_TOLERANCE) at every larger size measured, or -1. */
static int wins_from(double t[RULES_NSIZES][NALGOS], int nsizes, int a, int from)
{
    int start = -1;
    for (int s = nsizes - 1; s >= from && behind(t, s, a) <= RULES_TOLERANCE; s--)
        start = s;
    return start;
}

/* The smallest size index at which algorithm a is the fastest (within
 * RULES_TOLERANCE) and from which it trails the fastest by at most
 * RULES_NEAR in the geometric mean and RULES_WORST at any size, or -1. */
static int near_from(double t[RULES_NSIZES][NALGOS], int nsizes, int a)
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

int gw_bench_tune_rules(gw_comm_t *comm, long warmup, gw_bench_rules_t *r)
{
    const int n = gw_comm_size(comm), rank = gw_comm_rank(comm);
    const int shm = strncmp(gw_comm_transport(comm), "shm", 3) == 0;
    memset(r, 0, sizeof(*r));
    if (!shm || n > 4) {
        if (rank == 0)
            printf("# rules: not measured (they are about 2 to 4 ranks of one host over shared "
                   "memory; this job has %d ranks over %s)\n",
                   n, gw_comm_transport(comm));
        return 0;
    }
    size_t sizes[RULES_NSIZES];
    double t[RULES_NSIZES][NALGOS];
    int nsizes = 0;
    for (size_t b = RULES_MIN_BYTES; b <= RULES_MAX_BYTES && nsizes < RULES_NSIZES; b *= 2)
        sizes[nsizes++] = b;
    float *buf = calloc(RULES_MAX_BYTES / sizeof(float), sizeof(float));
    int ok = buf != NULL, all_ok = 0;
    if (gw_bench_all_ok(comm, ok, &all_ok) != GW_OK || !all_ok) {
        free(buf);
        return -1;
    }
    for (int s = 0; s < nsizes; s++)
        for (int a = 0; a < NALGOS; a++) {
            t[s][a] = HUGE_VAL;
            if (algos[a] == GW_ALGO_HIER && n == 2)
                continue; /* with one peer it is the ring */
            if (time_algo(comm, algos[a], buf, sizes[s], warmup, &t[s][a]) != GW_OK) {
                free(buf);
                return -1;
            }
        }
    free(buf);

    const int direct = NALGOS - 1, tree = 1;
    if (n == 2) {
        int from = wins_from(t, nsizes, direct, 0);
        r->have_pair = 1;
        r->direct_pair_min = from < 0 ? 0 : sizes[from];
    }
    if (n == 4) {
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
    if (n >= 3) {
        int from = near_from(t, nsizes, direct);
        r->have_shm = 1;
        r->direct_shm_min = from < 0 ? 0 : sizes[from];
    }
    int mib = 0;
    while (mib < nsizes && sizes[mib] < ((size_t)1 << 20))
        mib++;
    int from = wins_from(t, nsizes, direct, mib);
    r->have_large = 1;
    r->direct_large_min = from < 0 ? RULES_OFF_BYTES : sizes[from];

    if (rank == 0) {
        printf("# rules: allreduce on %d ranks of one host over %s, median of the slowest rank, "
               "us:\n#  %10s",
               n, gw_comm_transport(comm), "bytes");
        for (int a = 0; a < NALGOS; a++)
            printf(" %9s", gw_algo_name(algos[a]));
        printf("\n");
        for (int s = 0; s < nsizes; s++) {
            printf("#  %10zu", sizes[s]);
            for (int a = 0; a < NALGOS; a++)
                isfinite(t[s][a]) ? printf(" %9.1f", t[s][a] * 1e6) : printf(" %9s", "-");
            printf("\n");
        }
        if (r->have_pair)
            printf("direct_pair_min = %zu\n", r->direct_pair_min);
        if (r->have_tree4)
            printf("tree4_min = %zu\ntree4_end = %zu\n", r->tree4_min, r->tree4_end);
        if (r->have_shm)
            printf("direct_shm_min = %zu\n", r->direct_shm_min);
        printf("direct_large_min = %zu\n", r->direct_large_min);
        fflush(stdout);
    }
    return 0;
}
