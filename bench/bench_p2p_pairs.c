/*
 * bench_p2p_pairs.c - `gradwire-bench p2p --pairs all|serial`: the
 * perftest-style measurement of bench_p2p.c between every pair of ranks,
 * the raw material of a cluster's link matrix.
 *
 * Schedule. `all` runs the n(n-1)/2 pairs in n-1 rounds of n/2 pairs at
 * once, by the circle method of round-robin tournaments: rank n-1 (for odd
 * n, a phantom rank n) stays put and meets rank k in round k, while every
 * other rank r meets (2k - r) mod (n-1), a rotation that pairs each rank
 * with every other exactly once. A rank whose partner is the phantom rests
 * that round. This is how cluster tests (ClusterKit, for one) load a
 * network: every rank busy, each link used by one pair at a time. `serial`
 * runs one pair per round (0-1, 0-2, ..., n-2 - n-1), so a pair's figures
 * are its own and not what it got of a link or a host shared with the other
 * pairs of its round; it takes n/2 times as many rounds.
 *
 * Each round, both ranks of a pair run every size and mode of the sweep as
 * bench_p2p.c does for ranks 0 and 1 (the lower rank leads and times); the
 * pairs of a round do not wait for each other between sizes. Then every
 * rank's record (its partner, whether it led, and per size its figures and
 * the bytes it received wrong) is gathered with gw_allgather, and rank 0
 * prints one row per pair and size with the wrong bytes of both ends. At the
 * end rank 0 prints, per size, the spread over the pairs: the lowest,
 * median and highest uni bandwidth and p50 latency, and which pair was the
 * slowest of each, as a ratio to the median. A failed call fails the
 * communicator, so every rank stops at the same round's gather.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_p2p.h"

#define MAX_SIZES 64

/* What one rank contributes to a round's gather. */
typedef struct record {
    int32_t peer; /* -1: rested this round */
    int32_t lead;
    int32_t status; /* gw_status_t of its pair's run */
    int32_t nres;   /* sizes done */
    gw_p2p_result_t res[MAX_SIZES];
} record_t;

/* One measured pair, kept on rank 0 for the summary and the JSON. */
typedef struct pair_row {
    int a, b, round;
    gw_p2p_result_t res[MAX_SIZES]; /* wrong: both ends */
} pair_row_t;

typedef struct pairs_run {
    const gw_p2p_opts_t *o;
    gw_comm_t *comm;
    int rank, size, rounds;
    size_t sizes[MAX_SIZES], nsizes;
    record_t *all; /* size records, the last round's gather */
    pair_row_t *rows;
    size_t nrows;
    char error[256];
} pairs_run_t;

/* The partner of rank in round k, -1 to rest. */
static int partner(const pairs_run_t *p, int rank, int k)
{
    int n = p->size;
    if (p->o->pairs == GW_P2P_PAIRS_ALONE) {
        /* Round k is the k-th pair (a, b), a < b, in order. */
        for (int a = 0; a < n; a++) {
            int left = n - 1 - a;
            if (k < left) {
                int b = a + 1 + k;
                return rank == a ? b : rank == b ? a : -1;
            }
            k -= left;
        }
        return -1;
    }
    return gw_p2p_circle_partner(n, rank, k);
}

static void print_num(double v, int width, int prec)
{
    if (isnan(v))
        printf(" %*s", width, "-");
    else
        printf(" %*.*f", width, prec, v);
}

static void print_header(const pairs_run_t *p)
{
    const gw_p2p_opts_t *o = p->o;
    printf("# gradwire-bench p2p --pairs %s: %d ranks over %s, %d rounds of %s, %ld iterations "
           "(+%ld warm-up), window %ld, check %s\n",
           o->pairs == GW_P2P_PAIRS_ALONE ? "serial" : "all", p->size, gw_comm_transport(p->comm),
           p->rounds,
           o->pairs == GW_P2P_PAIRS_ALONE ? "one pair" : "concurrent pairs (circle method)",
           o->sw.iters, o->sw.warmup, o->window, o->check ? "on" : "off");
    printf("# GB/s = 1e9 bytes/s; latency is one way (half the round trip), measured by the "
           "lower rank; #wrong counts both ends\n#\n");
    printf("# %5s %4s %4s %10s %10s %11s %10s %9s %9s %9s %9s %8s\n", "round", "a", "b", "size(B)",
           "uni(GB/s)", "bidir(GB/s)", "lat_p50", "lat_p90", "lat_p99", "lat_min", "lat_max",
           "#wrong");
    fflush(stdout);
}

/* This rank's part of round k into mine. */
static void run_round(pairs_run_t *p, gw_p2p_pair_t *pair, int k, record_t *mine)
{
    memset(mine, 0, sizeof(*mine));
    mine->peer = partner(p, p->rank, k);
    if (mine->peer < 0)
        return;
    gw_p2p_pair_with(pair, mine->peer);
    mine->lead = pair->lead;
    for (size_t i = 0; i < p->nsizes; i++) {
        gw_status_t st = gw_p2p_run_size(pair, p->sizes[i], &mine->res[i]);
        if (st != GW_OK) {
            mine->status = st;
            snprintf(p->error, sizeof(p->error), "round %d, ranks %d and %d, size %zu: %s", k,
                     p->rank, mine->peer, p->sizes[i], gw_status_str(st));
            fprintf(stderr, "gradwire-bench p2p: rank %d: %s\n", p->rank, p->error);
            return;
        }
        mine->nres = (int32_t)(i + 1);
    }
}

/* Rank 0: the pairs of a gathered round, printed and kept. */
static int take_round(pairs_run_t *p, int k)
{
    for (int a = 0; a < p->size; a++) {
        const record_t *ra = &p->all[a];
        if (ra->peer < 0 || !ra->lead)
            continue;
        const record_t *rb = &p->all[ra->peer];
        pair_row_t *row = &p->rows[p->nrows++];
        row->a = a;
        row->b = ra->peer;
        row->round = k;
        int n = ra->nres < rb->nres ? ra->nres : rb->nres;
        for (int i = 0; i < n; i++) {
            row->res[i] = ra->res[i];
            row->res[i].wrong = ra->res[i].wrong + rb->res[i].wrong;
            const gw_p2p_result_t *r = &row->res[i];
            printf("  %5d %4d %4d %10zu", k, row->a, row->b, r->bytes);
            print_num(r->uni, 10, 4);
            print_num(r->bidir, 11, 4);
            print_num(r->p50, 10, 2);
            print_num(r->p90, 9, 2);
            print_num(r->p99, 9, 2);
            print_num(r->min, 9, 2);
            print_num(r->max, 9, 2);
            printf(" %8lld\n", (long long)r->wrong);
        }
    }
    fflush(stdout);
    return 0;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The spread over the pairs of one figure at size index i: min, median,
 * max, and the pair at the bad end (lowest when low is bad). */
static void spread(const pairs_run_t *p, size_t i, size_t offset, int low_is_bad, double *v,
                   double out[3], const pair_row_t **worst)
{
    size_t n = 0;
    *worst = NULL;
    for (size_t r = 0; r < p->nrows; r++) {
        double x = *(const double *)((const char *)&p->rows[r].res[i] + offset);
        if (isnan(x))
            continue;
        v[n++] = x;
        double w = *worst ? *(const double *)((const char *)&(*worst)->res[i] + offset) : NAN;
        if (!*worst || (low_is_bad ? x < w : x > w))
            *worst = &p->rows[r];
    }
    out[0] = out[1] = out[2] = NAN;
    if (!n)
        return;
    qsort(v, n, sizeof(double), by_value);
    out[0] = v[0];
    out[1] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    out[2] = v[n - 1];
}

static void print_summary(const pairs_run_t *p)
{
    double *v = malloc((p->nrows ? p->nrows : 1) * sizeof(double));
    if (!v)
        return;
    printf("#\n# over the %zu pairs: %10s %s\n", p->nrows, "size(B)",
           "uni GB/s min / median / max (slowest pair, x median) | lat_p50 us min / median / "
           "max (slowest pair, x median)");
    for (size_t i = 0; i < p->nsizes; i++) {
        double bw[3], lat[3];
        const pair_row_t *wb, *wl;
        spread(p, i, offsetof(gw_p2p_result_t, uni), 1, v, bw, &wb);
        spread(p, i, offsetof(gw_p2p_result_t, p50), 0, v, lat, &wl);
        printf("#   %10zu", p->sizes[i]);
        if (wb)
            printf("  %.4f / %.4f / %.4f (%d-%d, %.2fx)", bw[0], bw[1], bw[2], wb->a, wb->b,
                   bw[1] > 0 ? bw[0] / bw[1] : NAN);
        if (wl)
            printf(" | %.2f / %.2f / %.2f (%d-%d, %.2fx)", lat[0], lat[1], lat[2], wl->a, wl->b,
                   lat[1] > 0 ? lat[2] / lat[1] : NAN);
        printf("\n");
    }
    free(v);
    fflush(stdout);
}

static void write_json(const pairs_run_t *p, int64_t wrong)
{
    FILE *f = gw_kit_fopen_private(p->o->json);
    if (!f) {
        perror(p->o->json);
        return;
    }
    gw_kit_json_t j;
    gw_kit_json_start(&j, f, 6);
    gw_kit_json_object(&j, NULL, NULL);
    gw_kit_json_str(&j, "benchmark", "p2p");
    gw_kit_json_str(&j, "pairs", p->o->pairs == GW_P2P_PAIRS_ALONE ? "serial" : "all");
    gw_kit_json_str(&j, "transport", gw_comm_transport(p->comm));
    gw_kit_json_int(&j, "ranks", p->size);
    gw_kit_json_int(&j, "rounds", p->rounds);
    gw_kit_json_int(&j, "iters", p->o->sw.iters);
    gw_kit_json_int(&j, "warmup_iters", p->o->sw.warmup);
    gw_kit_json_int(&j, "window", p->o->window);
    gw_kit_json_int(&j, "check", p->o->check);
    gw_kit_json_int(&j, "wrong", wrong);
    gw_kit_json_break(&j, "\n ");
    gw_kit_json_str(&j, "error", p->error[0] ? p->error : NULL);
    gw_kit_json_break(&j, "\n ");
    gw_kit_json_array(&j, "links", "\n  ");
    for (size_t r = 0; r < p->nrows; r++) {
        const pair_row_t *row = &p->rows[r];
        gw_kit_json_object(&j, NULL, NULL);
        gw_kit_json_int(&j, "a", row->a);
        gw_kit_json_int(&j, "b", row->b);
        gw_kit_json_int(&j, "round", row->round);
        gw_kit_json_array(&j, "results", "\n   ");
        for (size_t i = 0; i < p->nsizes; i++) {
            const gw_p2p_result_t *x = &row->res[i];
            if (x->bytes != p->sizes[i])
                break; /* the pair stopped before this size */
            gw_kit_json_object(&j, NULL, NULL);
            gw_kit_json_uint(&j, "bytes", x->bytes);
            gw_kit_json_num(&j, "uni_GBps", x->uni);
            gw_kit_json_num(&j, "bidir_GBps", x->bidir);
            gw_kit_json_object(&j, "lat_us", NULL);
            gw_kit_json_num(&j, "p50", x->p50);
            gw_kit_json_num(&j, "p90", x->p90);
            gw_kit_json_num(&j, "p99", x->p99);
            gw_kit_json_num(&j, "min", x->min);
            gw_kit_json_num(&j, "max", x->max);
            gw_kit_json_close(&j, NULL);
            gw_kit_json_int(&j, "wrong", x->wrong);
            gw_kit_json_close(&j, NULL);
        }
        gw_kit_json_close(&j, NULL);
        gw_kit_json_close(&j, NULL);
    }
    gw_kit_json_close(&j, "\n");
    gw_kit_json_close(&j, NULL);
    fputc('\n', f);
    fclose(f);
}

int gw_p2p_all_pairs(const gw_p2p_opts_t *o, gw_comm_t *comm, int rank, int size)
{
    pairs_run_t p = {.o = o, .comm = comm, .rank = rank, .size = size};
    int npairs = size * (size - 1) / 2;
    p.rounds = o->pairs == GW_P2P_PAIRS_ALONE ? npairs : size - 1 + (size & 1);
    p.nsizes = gw_p2p_sizes(o, p.sizes, MAX_SIZES);
    gw_p2p_pair_t pair;
    record_t mine;
    int ok = gw_p2p_pair_open(&pair, o, comm, rank) == 0;
    p.all = calloc((size_t)size, sizeof(*p.all));
    p.rows = rank == 0 ? calloc((size_t)npairs, sizeof(*p.rows)) : NULL;
    if (!p.all || (rank == 0 && !p.rows)) {
        fprintf(stderr, "gradwire-bench p2p: rank %d: out of memory for %d ranks' results\n", rank,
                size);
        ok = 0;
    }
    int all_ok = 0;
    gw_status_t st = gw_bench_all_ok(comm, ok, &all_ok);
    if (st != GW_OK || !all_ok)
        goto out;
    if (rank == 0)
        print_header(&p);
    for (int k = 0; k < p.rounds && st == GW_OK; k++) {
        run_round(&p, &pair, k, &mine);
        st = gw_allgather(comm, &mine, p.all, sizeof(mine), GW_UINT8);
        if (st != GW_OK && !p.error[0])
            snprintf(p.error, sizeof(p.error), "round %d: gathering the results: %s", k,
                     gw_status_str(st));
        if (st == GW_OK && rank == 0)
            take_round(&p, k);
    }
out:;
    int64_t wrong = 0;
    for (size_t r = 0; r < p.nrows; r++)
        for (size_t i = 0; i < p.nsizes; i++)
            wrong += p.rows[r].res[i].wrong;
    if (rank == 0 && p.nrows) {
        print_summary(&p);
        printf("# wrong bytes: %lld\n", (long long)wrong);
    }
    if (rank == 0 && o->json)
        write_json(&p, wrong);
    gw_p2p_pair_close(&pair);
    free(p.all);
    free(p.rows);
    return ok && all_ok && st == GW_OK && wrong == 0 ? 0 : GW_BENCH_EXIT_FAIL;
}
