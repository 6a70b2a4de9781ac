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
 * not tell: emulated hosts share the machine's), on 2 to 4 ranks. Each
 * algorithm the rules compare (ring, tree, rd, hier on more than 2 ranks,
 * direct) is forced with gw_comm_set_algo at sizes 16 KiB to 32 MiB in
 * powers of two, the algorithms interleaved at each size so that a drift
 * in the machine's speed hits all of them alike; a call's time is its
 * slowest rank's, the figure the median over calls. bench_tune_decide.c
 * reads the rules off that table. A rank pinned to a busy core measures
 * the busy core, as any benchmark would: the rules are only as good as the
 * machine was quiet (gradwire-bench prints its load).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define RULES_MIN_BYTES ((size_t)16 << 10)
#define RULES_MAX_BYTES ((size_t)32 << 20)

/* In the columns' order of gw_bench_rules_decide's table. */
static const gw_algo_t algos[GW_BENCH_RULE_NALGOS] = {
    [GW_BENCH_RULE_RING] = GW_ALGO_RING,     [GW_BENCH_RULE_TREE] = GW_ALGO_TREE,
    [GW_BENCH_RULE_RD] = GW_ALGO_RD,         [GW_BENCH_RULE_HIER] = GW_ALGO_HIER,
    [GW_BENCH_RULE_DIRECT] = GW_ALGO_DIRECT,
};
#define NALGOS GW_BENCH_RULE_NALGOS

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
    size_t sizes[GW_BENCH_RULES_NSIZES];
    double t[GW_BENCH_RULES_NSIZES][NALGOS];
    int nsizes = 0;
    for (size_t b = RULES_MIN_BYTES; b <= RULES_MAX_BYTES && nsizes < GW_BENCH_RULES_NSIZES; b *= 2)
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

    gw_bench_rules_decide(n, nsizes, sizes, t, r);

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
