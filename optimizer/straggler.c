/*
 * straggler.c - stragglers in synchronous data-parallel SGD: measured, and
 * (with --straggler balance) evened out by the size of each rank's share.
 *
 * Synchronous SGD waits for its slowest rank: every rank's gradient enters
 * the same allreduce, so a rank that computes faster sits in it until the
 * slowest one arrives. Each step this rank records three times: compute
 * (forward, backward and the optimizer's update), wait (blocked in the
 * gradient allreduce after backward) and the whole step. They stay local;
 * at the end of the run one allgather of a few figures per rank (medians,
 * 90th percentiles, sums) gives every rank the same table. The rank that
 * waits least is the one the others wait for: the slowest. Its wait is
 * what the allreduce itself costs; what any rank waits beyond it is time
 * lost to the straggler, and the run's wait share is that excess summed
 * over ranks, over the ranks' summed step time. No step pays for this: the
 * only collectives added are that allgather and, with balance, one every
 * --balance-every steps.
 *
 * The mitigation, --straggler balance, splits the global batch B unevenly:
 * rank r takes b_r samples, sum b_r = B, so that every rank's compute ends
 * at about the same time. Its figures for the steps so far (halved at
 * each split, so that recent windows count most) give each rank a time per
 * sample k_r (forward and backward, which grow with
 * the batch) and a time per step a_r (the optimizer's update, which does
 * not); equal step times T = a_r + b_r k_r with sum b_r = B give
 * T = (B + sum a_r / k_r) / sum (1 / k_r) and b_r = (T - a_r) / k_r,
 * rounded to integers of at least 1 by largest remainder. Every rank
 * computes the split from the same gathered figures, so all agree on it.
 *
 * Why the gradient stays the gradient of the global batch: each step's
 * global batch is the next B indices of one permutation of the whole
 * training set (the same on every rank: the same seed), and rank r takes
 * the slice [offset_r, offset_r + b_r) of it. The loss is scaled by 1 / B
 * on every rank whatever its b_r, so the summed gradient is the mean over
 * the B samples of the step: each sample is weighted by its share of the
 * global batch, 1 / B, wherever it was computed. A balanced step therefore
 * takes exactly the step one rank would take on the same B samples (up to
 * the order of the float additions), and the gradient is an unbiased
 * estimate of the full gradient as before; only the split of work changes.
 * The costs: every rank holds the whole training set (the slices move), and
 * the sample order differs from that of an unbalanced run (which permutes
 * each rank's own shard), so the two runs' losses agree only statistically.
 * A codec is refused (its per-rank averaging and error feedback assume
 * equal shares), as are --async and model parallelism, where there is no
 * global batch to split this way.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "straggler.h"

gw_status_t gw_train_straggler_init(gw_train_straggler_t *g, const gw_train_opts_t *o, int rank,
                                    int world)
{
    memset(g, 0, sizeof(*g));
    g->rank = rank;
    g->world = world;
    g->balance = o->straggler_balance && world > 1; /* one rank has nothing to split */
    g->every = o->balance_every;
    g->global_batch = o->batch;
    g->slowest = -1;
    g->batch = calloc((size_t)world, sizeof(int));
    g->offset = calloc((size_t)world, sizeof(int));
    g->table = calloc((size_t)world * GW_STRAG_FIELDS, sizeof(double));
    if (!g->batch || !g->offset || !g->table) {
        fprintf(stderr, "gradwire-train: out of memory for the straggler table\n");
        return GW_ERR_NO_MEMORY;
    }
    for (int r = 0, off = 0; r < world; r++) {
        g->batch[r] = o->batch / world + (r < o->batch % world);
        g->offset[r] = off;
        off += g->batch[r];
    }
    return gw_train_test_slow(rank, &g->slow_s_per_sample);
}

gw_status_t gw_train_test_slow(int rank, double *s_per_sample)
{
    /* GW_TRAIN_TEST_SLOW=RANK:US makes rank RANK sleep US microseconds per
     * sample of its share, inside its compute: a straggler for tests that
     * needs neither root nor a quiet machine. */
    const char *knob = getenv("GW_TRAIN_TEST_SLOW");
    if (knob && *knob) {
        char *end;
        long r = strtol(knob, &end, 10);
        double us = *end == ':' ? strtod(end + 1, &end) : -1;
        if (*end != '\0' || !(us >= 0)) {
            fprintf(stderr,
                    "gradwire-train: GW_TRAIN_TEST_SLOW wants RANK:MICROSECONDS, not "
                    "\"%s\"\n",
                    knob);
            return GW_ERR_CONFIG;
        }
        if (r == rank)
            *s_per_sample = us * 1e-6;
    }
    return GW_OK;
}

void gw_train_straggler_free(gw_train_straggler_t *g)
{
    free(g->batch);
    free(g->offset);
    free(g->table);
    free(g->step_s);
    free(g->compute_s);
    free(g->wait_s);
    memset(g, 0, sizeof(*g));
}

/* Keep, of a whole set, the samples of this rank's uneven shard. */
static void keep_shard(gw_train_dataset_t *d, int rank, int world)
{
    gw_train_shard_t sh = {.rank = rank, .n = world, .even = 0};
    size_t k = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (!gw_train_in_shard(i, d->n, &sh))
            continue;
        memmove(d->x + k * d->dim, d->x + i * d->dim, d->dim * sizeof(float));
        d->y[k++] = d->y[i];
    }
    d->n = k;
}

gw_status_t gw_train_straggler_load_data(const gw_train_opts_t *o, int rank, int world,
                                         gw_train_dataset_t *train, gw_train_dataset_t *test)
{
    gw_status_t st = gw_train_load_data(o, 0, 1, train, test);
    if (st == GW_OK)
        keep_shard(test, rank, world);
    return st;
}

void gw_train_straggler_slow(const gw_train_straggler_t *g, size_t samples)
{
    double s = g->slow_s_per_sample * (double)samples;
    if (s <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* The split of B for equal step times a_r + b_r k_r (see the top). */
static void split(const double *k, const double *a, double *frac, int world, int B, int *batch)
{
    double inv = 0, ak = 0;
    for (int r = 0; r < world; r++) {
        inv += 1 / k[r];
        ak += a[r] / k[r];
    }
    double T = (B + ak) / inv;
    int sum = 0;
    for (int r = 0; r < world; r++) {
        double b = (T - a[r]) / k[r];
        b = b < 1 ? 1 : b;
        batch[r] = (int)floor(b);
        frac[r] = b - batch[r];
        sum += batch[r];
    }
    /* Largest remainders up, or (when the floor of 1 overshot) the largest
     * shares down, until the shares add up to B again. */
    while (sum != B) {
        int best = -1;
        for (int r = 0; r < world; r++) {
            if (sum < B && (best < 0 || frac[r] > frac[best]))
                best = r;
            if (sum > B && batch[r] > 1 && (best < 0 || batch[r] > batch[best]))
                best = r;
        }
        batch[best] += sum < B ? 1 : -1;
        frac[best] = -1;
        sum += sum < B ? 1 : -1;
    }
}

static gw_status_t rebalance(gw_train_straggler_t *g, gw_comm_t *comm)
{
    double mine[3] = {g->win_fb_s, g->win_opt_s / g->win_weight, g->win_samples};
    double *all = malloc((size_t)g->world * 3 * sizeof(double));
    double *k = malloc((size_t)g->world * 3 * sizeof(double));
    if (!all || !k) {
        free(all);
        free(k);
        fprintf(stderr, "gradwire-train: out of memory for the batch split\n");
        return GW_ERR_NO_MEMORY;
    }
    gw_status_t st = gw_allgather(comm, mine, all, 3, GW_FLOAT64);
    if (st != GW_OK) {
        fprintf(stderr, "gradwire-train: allgather of the ranks' speeds failed: %s\n",
                gw_status_str(st));
    } else {
        double *a = k + g->world;
        for (int r = 0; r < g->world; r++) {
            /* A rank too fast to time counts as a microsecond per sample. */
            k[r] = all[3 * r + 2] > 0 ? all[3 * r] / all[3 * r + 2] : 1e-6;
            k[r] = k[r] > 1e-9 ? k[r] : 1e-9;
            a[r] = all[3 * r + 1];
        }
        int *next = malloc((size_t)g->world * sizeof(int));
        if (!next) {
            st = GW_ERR_NO_MEMORY;
        } else {
            split(k, a, a + g->world, g->world, g->global_batch, next);
            if (memcmp(next, g->batch, (size_t)g->world * sizeof(int)) != 0)
                g->rebalances++;
            for (int r = 0, off = 0; r < g->world; r++) {
                g->batch[r] = next[r];
                g->offset[r] = off;
                off += next[r];
            }
            free(next);
        }
    }
    free(all);
    free(k);
    /* Halved, not cleared: one window's bad luck (a CPU quota's throttling
     * that fell on the allreduce instead of on compute) does not decide the
     * split alone. */
    g->win_fb_s /= 2;
    g->win_opt_s /= 2;
    g->win_samples /= 2;
    g->win_weight /= 2;
    g->win_steps = 0;
    return st;
}

gw_status_t gw_train_straggler_step(gw_train_straggler_t *g, gw_comm_t *comm, double fb_s,
                                    double opt_s, double wait_s, double step_s, size_t samples)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 1024;
        float *a = realloc(g->step_s, cap * sizeof(float));
        if (a)
            g->step_s = a;
        float *b = a ? realloc(g->compute_s, cap * sizeof(float)) : NULL;
        if (b)
            g->compute_s = b;
        float *c = b ? realloc(g->wait_s, cap * sizeof(float)) : NULL;
        if (!c) {
            fprintf(stderr, "gradwire-train: out of memory for the step times\n");
            return GW_ERR_NO_MEMORY;
        }
        g->wait_s = c;
        g->cap = cap;
    }
    g->step_s[g->n] = (float)step_s;
    g->compute_s[g->n] = (float)(fb_s + opt_s);
    g->wait_s[g->n] = (float)wait_s;
    g->n++;
    g->samples += (long)samples;
    g->win_fb_s += fb_s;
    g->win_opt_s += opt_s;
    g->win_samples += (double)samples;
    g->win_weight += 1;
    g->win_steps++;
    if (g->balance && g->world > 1 && g->win_steps >= g->every)
        return rebalance(g, comm);
    return GW_OK;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median and 90th percentile (nearest rank) of v[0..n); sorts v. */
static void quantiles(float *v, size_t n, double *med, double *p90)
{
    if (n == 0) {
        *med = *p90 = 0;
        return;
    }
    qsort(v, n, sizeof(float), cmp_float);
    *med = v[(n - 1) / 2];
    size_t i = (size_t)ceil(0.9 * (double)n);
    *p90 = v[i > 0 ? i - 1 : 0];
}

gw_status_t gw_train_straggler_summarise(gw_train_straggler_t *g, gw_comm_t *comm)
{
    double mine[GW_STRAG_FIELDS] = {0};
    mine[GW_STRAG_BATCH] = g->batch[g->rank];
    mine[GW_STRAG_SAMPLES] = (double)g->samples;
    for (size_t i = 0; i < g->n; i++) {
        mine[GW_STRAG_STEP_SUM] += g->step_s[i];
        mine[GW_STRAG_COMPUTE_SUM] += g->compute_s[i];
        mine[GW_STRAG_WAIT_SUM] += g->wait_s[i];
    }
    quantiles(g->step_s, g->n, &mine[GW_STRAG_STEP_MED], &mine[GW_STRAG_STEP_P90]);
    quantiles(g->compute_s, g->n, &mine[GW_STRAG_COMPUTE_MED], &mine[GW_STRAG_COMPUTE_P90]);
    quantiles(g->wait_s, g->n, &mine[GW_STRAG_WAIT_MED], &mine[GW_STRAG_WAIT_P90]);
    gw_status_t st = gw_allgather(comm, mine, g->table, GW_STRAG_FIELDS, GW_FLOAT64);
    if (st != GW_OK) {
        fprintf(stderr, "gradwire-train: allgather of the per-rank step times failed: %s\n",
                gw_status_str(st));
        return st;
    }
    double wmin = 0, excess = 0, total = 0;
    for (int r = 0; r < g->world; r++) {
        double w = g->table[r * GW_STRAG_FIELDS + GW_STRAG_WAIT_SUM];
        if (g->slowest < 0 || w < wmin) {
            wmin = w;
            g->slowest = r;
        }
    }
    for (int r = 0; r < g->world; r++) {
        excess += g->table[r * GW_STRAG_FIELDS + GW_STRAG_WAIT_SUM] - wmin;
        total += g->table[r * GW_STRAG_FIELDS + GW_STRAG_STEP_SUM];
    }
    g->wait_share = total > 0 ? excess / total : 0;
    g->summarised = 1;
    return GW_OK;
}

static double field(const gw_train_straggler_t *g, int r, int f)
{
    return g->table[r * GW_STRAG_FIELDS + f];
}

void gw_train_straggler_print(const gw_train_straggler_t *g, FILE *out)
{
    if (!g->summarised || g->world < 2)
        return;
    double wmin = field(g, g->slowest, GW_STRAG_WAIT_SUM);
    fprintf(out,
            "gradwire-train: stragglers (%s): per-rank step, compute and wait (blocked in "
            "the gradient allreduce), ms per step\n",
            g->balance ? "--straggler balance" : "no mitigation");
    fprintf(out, "  rank  batch   step med    p90  compute med    p90   wait med    p90  "
                 "waited beyond the slowest\n");
    for (int r = 0; r < g->world; r++) {
        double over = field(g, r, GW_STRAG_WAIT_SUM) - wmin, t = field(g, r, GW_STRAG_STEP_SUM);
        fprintf(out,
                "  %4d  %5.0f   %8.2f %6.2f     %8.2f %6.2f   %8.2f %6.2f  %6.2f s (%4.1f%%)\n", r,
                field(g, r, GW_STRAG_BATCH), 1e3 * field(g, r, GW_STRAG_STEP_MED),
                1e3 * field(g, r, GW_STRAG_STEP_P90), 1e3 * field(g, r, GW_STRAG_COMPUTE_MED),
                1e3 * field(g, r, GW_STRAG_COMPUTE_P90), 1e3 * field(g, r, GW_STRAG_WAIT_MED),
                1e3 * field(g, r, GW_STRAG_WAIT_P90), over, t > 0 ? 100 * over / t : 0.0);
    }
    fprintf(out,
            "gradwire-train: slowest rank %d (the others wait for it); %.1f%% of the ranks' "
            "step time was spent waiting for it",
            g->slowest, 100 * g->wait_share);
    if (g->balance)
        fprintf(out, "; the batch was re-split %d time(s)", g->rebalances);
    fprintf(out, "\n");
}

void gw_train_straggler_json(const gw_train_straggler_t *g, gw_kit_json_t *j)
{
    if (!g->summarised)
        return;
    gw_kit_json_object(j, "stragglers", NULL);
    gw_kit_json_str(j, "mitigation", g->balance ? "balance" : "none");
    gw_kit_json_int(j, "slowest_rank", g->slowest);
    gw_kit_json_num(j, "wait_share", g->wait_share);
    gw_kit_json_int(j, "rebalances", g->rebalances);
    gw_kit_json_array(j, "ranks", "\n    ");
    double wmin = field(g, g->slowest, GW_STRAG_WAIT_SUM);
    for (int r = 0; r < g->world; r++) {
        double t = field(g, r, GW_STRAG_STEP_SUM), over = field(g, r, GW_STRAG_WAIT_SUM) - wmin;
        gw_kit_json_object(j, NULL, NULL);
        gw_kit_json_int(j, "rank", r);
        gw_kit_json_int(j, "batch", (long long)field(g, r, GW_STRAG_BATCH));
        gw_kit_json_num(j, "samples", field(g, r, GW_STRAG_SAMPLES));
        gw_kit_json_num(j, "step_median_s", field(g, r, GW_STRAG_STEP_MED));
        gw_kit_json_num(j, "step_p90_s", field(g, r, GW_STRAG_STEP_P90));
        gw_kit_json_num(j, "compute_median_s", field(g, r, GW_STRAG_COMPUTE_MED));
        gw_kit_json_num(j, "compute_p90_s", field(g, r, GW_STRAG_COMPUTE_P90));
        gw_kit_json_num(j, "wait_median_s", field(g, r, GW_STRAG_WAIT_MED));
        gw_kit_json_num(j, "wait_p90_s", field(g, r, GW_STRAG_WAIT_P90));
        gw_kit_json_num(j, "step_s", t);
        gw_kit_json_num(j, "compute_s", field(g, r, GW_STRAG_COMPUTE_SUM));
        gw_kit_json_num(j, "wait_s", field(g, r, GW_STRAG_WAIT_SUM));
        gw_kit_json_num(j, "wait_beyond_slowest_s", over);
        gw_kit_json_num(j, "wait_share", t > 0 ? over / t : 0);
        gw_kit_json_close(j, NULL);
    }
    gw_kit_json_close(j, "\n  ");
    gw_kit_json_close(j, NULL);
}
