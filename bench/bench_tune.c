/*
 * bench_tune.c - `gradwire-bench tune`: measure the figures of gradwire's
 * cost model on this cluster and write them as a tuning file, which
 * GW_TUNING_FILE then loads in place of the built-in defaults.
 *
 * The model (collectives/tuning.c) prices an allreduce with three figures:
 * alpha, the time of one message however small; beta, the time per byte on
 * a link; gamma, the time per byte reduced. Each is measured with the
 * collective whose cost, in that very model, depends on it alone, so that
 * the figures reproduce the model's predictions for the calls they came
 * from:
 *
 *   alpha  a 4-byte allreduce by recursive doubling. Each of its L rounds is
 *          one message each way between a pair of ranks (a ping-pong whose
 *          two halves travel at once): alpha = T / L, with L = ceil(log2 n),
 *          plus 2 for folding in and out when n is not a power of two.
 *   beta   an allgather of S bytes (the ring; nothing is reduced): every rank
 *          sends and receives (n-1)/n S in n - 1 steps, so
 *          beta = (T - (n-1) alpha) / ((n-1)/n S).
 *   gamma  the reduction's speed on rank 0's host alone: a float32 sum of S
 *          bytes in place, chunk by chunk, each chunk with one that has just
 *          arrived, as a ring step does: gamma = T / S. (Timing the
 *          reduction through collectives, e.g. a reduce-scatter against an
 *          allgather of the same bytes, was tried and gave nonsense: the two
 *          differ in where received bytes land, and caches decide the
 *          difference more than the reduction does.)
 *
 * Timing is gradwire-bench allreduce's: every call is timed on every rank,
 * the per-call times are reduced with max over ranks (a call ends when its
 * last rank is done), and the median of those maxima is used. Everything
 * goes through the public API, as for any user of the library.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* The measured figures are clamped to at least this: a model figure of 0
 * would make one term vanish entirely, which no real network earns. */
#define FIGURE_MIN 1e-15

struct tune_opts {
    size_t bytes;       /* allgather size for beta */
    size_t gamma_bytes; /* bytes summed for gamma; 0: skip gamma */
    long iters, small_iters, warmup;
    int rules; /* measure the rules (bench_tune_rules.c) */
    const char *out;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gradwire-bench tune [options]\n"
            "\n"
            "Measure the cost model's figures between the ranks of this job and write\n"
            "them as a tuning file for GW_TUNING_FILE:\n"
            "  alpha  seconds per message: a 4-byte recursive-doubling allreduce / rounds\n"
            "  beta   seconds per byte on a link: a large allgather\n"
            "  gamma  seconds per byte reduced: a float32 sum on rank 0's host\n"
            "and, on 2 to 4 ranks of one host, the sizes behind the measured rules\n"
            "(direct_pair_min, tree4_min/tree4_end, direct_shm_min, direct_large_min):\n"
            "every allreduce algorithm timed from 16 KiB to 32 MiB\n"
            "\n"
            "  -o, --out FILE         write the tuning file (rank 0); default: print only\n"
            "  -s, --size N           allgather size for beta (default 32M); K, M, G suffixes\n"
            "  -g, --gamma-size N     bytes summed for gamma (default 16M; 0 skips\n"
            "                         gamma and keeps the default)\n"
            "  -n, --iters N          timed calls of each large collective (default 10)\n"
            "  -m, --small-iters N    timed calls of the 4-byte allreduce (default 200)\n"
            "  -w, --warmup_iters N   untimed calls before each series (default 3)\n"
            "      --no-rules         do not measure the rules (keep their defaults)\n"
            "  -h, --help             show this help\n"
            "\n"
            "Run one process per rank, at least 2, e.g.\n"
            "  gradwire launch --hosts gwh gradwire-bench tune --out cluster.tuning\n"
            "  GW_TUNING_FILE=cluster.tuning gradwire launch --hosts gwh my_training\n"
            "Exit status: 0 on success, 1 if a call or writing the file failed, 2 for a\n"
            "bad command line.\n");
}

static const gw_kit_prog_t prog = {"gradwire-bench tune", "\n(see gradwire-bench tune --help)\n"};
#define usage_error(...) gw_kit_usage_error(&prog, __VA_ARGS__)

/* Returns -1 to go on, or an exit status. */
static int parse_opts(int argc, char **argv, struct tune_opts *o)
{
    static const struct option longopts[] = {{"out", required_argument, NULL, 'o'},
                                             {"size", required_argument, NULL, 's'},
                                             {"gamma-size", required_argument, NULL, 'g'},
                                             {"iters", required_argument, NULL, 'n'},
                                             {"small-iters", required_argument, NULL, 'm'},
                                             {"warmup_iters", required_argument, NULL, 'w'},
                                             {"no-rules", no_argument, NULL, 'R'},
                                             GW_BENCH_END_LONGOPTS};
    const gw_bench_cmdline_t cl = {&prog, usage, "+:o:s:g:n:m:w:h", longopts, NULL, NULL,
                                   NULL,  NULL};
    int c, rc;
    long v;
    memset(o, 0, sizeof(*o));
    o->bytes = (size_t)32 << 20;
    o->gamma_bytes = (size_t)16 << 20;
    o->iters = 10;
    o->small_iters = 200;
    o->warmup = 3;
    o->rules = 1;
    gw_kit_getopt_begin();
    while ((c = gw_bench_next_opt(&cl, argc, argv, &rc)) != -1) {
        switch (c) {
        case GW_BENCH_OPT_EXIT:
            return rc;
        case 'R':
            o->rules = 0;
            break;
        case 'o':
            if (!*optarg)
                return usage_error("--out wants a file name");
            o->out = optarg;
            break;
        case 's':
        case 'g': {
            size_t *dst = c == 's' ? &o->bytes : &o->gamma_bytes;
            if (gw_kit_parse_size(optarg, dst) != 0 || *dst > ((size_t)1 << 32))
                return usage_error("-%c wants a size in bytes up to 4G (e.g. 64K, 32M), not "
                                   "\"%s\"",
                                   c, optarg);
            if (c == 's' && *dst < 4096)
                return usage_error("-s %s is too small to measure bandwidth: use 4K or more",
                                   optarg);
            if (c == 'g' && *dst != 0 && *dst < 4096)
                return usage_error("-g %s is too small to time a reduction: use 4K or more, "
                                   "or 0 to skip gamma",
                                   optarg);
            break;
        }
        case 'n':
        case 'm':
        case 'w':
            if (gw_kit_parse_long(optarg, c == 'w' ? 0 : 1, 1000000, &v) != 0)
                return usage_error("-%c wants a number of calls in %d..1000000, not \"%s\"", c,
                                   c == 'w' ? 0 : 1, optarg);
            *(c == 'n' ? &o->iters : c == 'm' ? &o->small_iters : &o->warmup) = v;
            break;
        }
    }
    return gw_kit_no_operands(&prog, argc, argv);
}

enum call_kind { CALL_ALLREDUCE, CALL_ALLGATHER, CALL_REDUCE_SCATTER };

static gw_status_t call(gw_comm_t *comm, enum call_kind kind, void *send, void *recv, size_t count)
{
    switch (kind) {
    case CALL_ALLREDUCE:
        return gw_allreduce(comm, send, recv, count, GW_FLOAT32, GW_SUM);
    case CALL_ALLGATHER:
        return gw_allgather(comm, send, recv, count, GW_FLOAT32);
    case CALL_REDUCE_SCATTER:
        return gw_reduce_scatter(comm, send, recv, count, GW_FLOAT32, GW_SUM);
    }
    return GW_ERR_INVALID_ARG;
}

static const char *kind_name(enum call_kind kind)
{
    return kind == CALL_ALLREDUCE   ? "gw_allreduce"
           : kind == CALL_ALLGATHER ? "gw_allgather"
                                    : "gw_reduce_scatter";
}

/* Consecutive calls of the 4-byte allreduce timed together as one sample
 * (the sample's time is their mean). Calls back to back settle into a
 * pipeline in which the ranks stay apart by the skew they came in with (up
 * to one latency: the bootstrap releases rank 0 before the others), and a
 * rank's calls then take in turn latency - skew and latency + skew; timed
 * one by one, the slowest rank's time is latency + skew, up to twice the
 * latency (seen: 10.2 ms for a 5 ms link, where a raw TCP exchange takes
 * 5-6 ms). An even number of calls sums to the latency times the count
 * exactly between two ranks, and averages the skew down elsewhere. */
#define ALPHA_CALLS_PER_SAMPLE 4

/* Time iters calls (after warmup untimed ones) of count elements, in
 * samples of per_sample consecutive calls: the median, min and max over
 * samples of the slowest rank's time per call. */
static gw_status_t time_calls(gw_comm_t *comm, enum call_kind kind, void *send, void *recv,
                              size_t count, long warmup, long iters, long per_sample,
                              gw_bench_timing_t *out)
{
    gw_status_t st = GW_ERR_NO_MEMORY;
    long samples = iters / per_sample > 0 ? iters / per_sample : 1;
    double *t = calloc((size_t)samples, sizeof(double)),
           *tmax = calloc((size_t)samples, sizeof(double));
    if (!t || !tmax)
        goto out_free;
    if ((st = gw_barrier(comm)) != GW_OK)
        goto out_free;
    for (long i = 0; i < warmup; i++)
        if ((st = call(comm, kind, send, recv, count)) != GW_OK)
            goto out_free;
    for (long i = 0; i < samples; i++) {
        double t0 = gw_kit_now_us();
        for (long k = 0; k < per_sample; k++)
            if ((st = call(comm, kind, send, recv, count)) != GW_OK)
                goto out_free;
        t[i] = (gw_kit_now_us() - t0) / (double)per_sample;
    }
    st = gw_bench_timing_reduce(comm, t, tmax, samples, out);
out_free:
    if (st != GW_OK)
        fprintf(stderr, "gradwire-bench tune: rank %d: %s of %zu elements failed: %s (%s)\n",
                gw_comm_rank(comm), kind_name(kind), count, gw_status_str(st), gw_status_name(st));
    free(tmax);
    free(t);
    return st;
}

static int ceil_log2(int n)
{
    int d = 0;
    while ((1 << d) < n)
        d++;
    return d;
}

/* ---- gamma: the reduction on this host ----------------------------------------- */

/* One float32 sum in the form of the library's kernel (reduce_kernels.c): a
 * plain loop that GCC's vectoriser turns into SIMD code at -O3, as that
 * file is built. The benchmark sees only the public API, which has no call
 * that reduces without also moving data, so it times the same loop itself. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static void
sum_f32(float *out, const float *a, const float *b, size_t n)
{
#pragma GCC ivdep
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

/* Time the reduction of o->gamma_bytes the way a ring step does it: each
 * chunk of the user's buffer is summed in place with a chunk that has just
 * arrived (and so is in cache). Median over o->iters passes after warm-up
 * ones. 0, or -1 after printing why. */
static int measure_gamma(const struct tune_opts *o, gw_bench_timing_t *t)
{
    const size_t chunk = 512 * 1024 / sizeof(float);
    size_t n = o->gamma_bytes / sizeof(float);
    float *buf = malloc(n * sizeof(float)), *in = malloc(chunk * sizeof(float));
    double *times = calloc((size_t)o->iters, sizeof(double));
    if (!buf || !in || !times) {
        fprintf(stderr, "gradwire-bench tune: cannot allocate %zu bytes for gamma\n",
                o->gamma_bytes);
        free(times);
        free(in);
        free(buf);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = (float)(i % 64);
    for (size_t i = 0; i < chunk; i++)
        in[i] = (float)(i % 7);
    for (long it = -(o->warmup > 0 ? o->warmup : 1); it < o->iters; it++) {
        double t0 = gw_kit_now_us();
        for (size_t off = 0; off < n; off += chunk) {
            size_t len = n - off < chunk ? n - off : chunk;
            sum_f32(buf + off, buf + off, in, len);
        }
        if (it >= 0)
            times[it] = gw_kit_now_us() - t0;
    }
    /* Keep the sums alive: a result nobody reads could be optimised away. */
    volatile float sink = buf[n / 2];
    (void)sink;
    gw_kit_sort(times, (size_t)o->iters);
    t->min_us = times[0];
    t->max_us = times[o->iters - 1];
    t->med_us = gw_kit_median_sorted(times, (size_t)o->iters);
    free(times);
    free(in);
    free(buf);
    return 0;
}

/* ---- the job ------------------------------------------------------------------ */

struct figures {
    double alpha, beta, gamma;
    int rounds;
    size_t bytes;
    gw_bench_timing_t small, large, reduce;
    int have_gamma;
    gw_bench_rules_t rules;
};

static void print_figures(const struct tune_opts *o, const struct figures *f, int n,
                          const char *transport)
{
    printf("# gradwire-bench tune, gradwire %s: %d ranks, transport %s\n", gw_version(), n,
           transport);
    printf(
        "# alpha: 4-byte allreduce, recursive doubling in %d round%s: median %.2f us "
        "(min %.2f, max %.2f) over %ld calls, timed %d at a time\n",
        f->rounds, f->rounds == 1 ? "" : "s", f->small.med_us, f->small.min_us, f->small.max_us,
        (o->small_iters >= ALPHA_CALLS_PER_SAMPLE ? o->small_iters / ALPHA_CALLS_PER_SAMPLE : 1) *
            ALPHA_CALLS_PER_SAMPLE,
        ALPHA_CALLS_PER_SAMPLE);
    printf("alpha = %.4g s per message (%.2f us)\n", f->alpha, f->alpha * 1e6);
    printf("# beta: %zu-byte allgather (ring, %d steps): median %.1f us (min %.1f, max %.1f) over "
           "%ld calls\n",
           f->bytes, n - 1, f->large.med_us, f->large.min_us, f->large.max_us, o->iters);
    printf("beta = %.4g s per byte (%.3f GB/s, %.3f Gbit/s per link)\n", f->beta, 1e-9 / f->beta,
           8e-9 / f->beta);
    if (f->have_gamma) {
        printf("# gamma: float32 sum of %zu bytes in place, in 512 KiB chunks, on rank 0's host: "
               "median %.1f us (min %.1f, max %.1f) over %ld passes\n",
               o->gamma_bytes, f->reduce.med_us, f->reduce.min_us, f->reduce.max_us, o->iters);
        printf("gamma = %.4g s per byte (%.2f GB/s)\n", f->gamma, 1e-9 / f->gamma);
    } else {
        printf("# gamma: not measured (-g 0)\n");
    }
    fflush(stdout);
}

/* Write the tuning file through a temporary name, so that a reader never
 * sees half a file. 0, or -1 after printing why. */
static int write_file(const struct tune_opts *o, const struct figures *f, int n,
                      const char *transport)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", o->out, (int)getpid()) >= (int)sizeof(tmp)) {
        fprintf(stderr, "gradwire-bench tune: --out path too long\n");
        return -1;
    }
    FILE *out = gw_kit_fopen_private(tmp);
    if (!out) {
        fprintf(stderr, "gradwire-bench tune: cannot write %s: %m\n", tmp);
        return -1;
    }
    time_t now = time(NULL);
    char date[64] = "unknown date";
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(out, "gradwire-tuning 1\n");
    fprintf(out, "# measured by gradwire-bench tune (gradwire %s) on %s\n", gw_version(), date);
    fprintf(out, "# %d ranks, transport %s; load it with GW_TUNING_FILE=%s\n", n, transport,
            o->out);
    fprintf(out, "# seconds per message: 4-byte allreduce %.2f us / %d rounds\n", f->small.med_us,
            f->rounds);
    fprintf(out, "alpha = %.6g\n", f->alpha);
    fprintf(out, "# seconds per byte on a link: %zu-byte allgather %.1f us (%.3f Gbit/s)\n",
            f->bytes, f->large.med_us, 8e-9 / f->beta);
    fprintf(out, "beta = %.6g\n", f->beta);
    if (f->have_gamma) {
        fprintf(out, "# seconds per byte reduced (float32 sum, local): %.2f GB/s\n",
                1e-9 / f->gamma);
        fprintf(out, "gamma = %.6g\n", f->gamma);
    }
    const gw_bench_rules_t *r = &f->rules;
    if (r->have_pair || r->have_tree4 || r->have_shm || r->have_large)
        fprintf(out, "# the measured rules: the fastest allreduce algorithm, 16 KiB to 32 MiB\n");
    if (r->have_pair)
        fprintf(out, "direct_pair_min = %zu\n", r->direct_pair_min);
    if (r->have_tree4)
        fprintf(out, "tree4_min = %zu\ntree4_end = %zu\n", r->tree4_min, r->tree4_end);
    if (r->have_shm)
        fprintf(out, "direct_shm_min = %zu\n", r->direct_shm_min);
    if (r->have_large)
        fprintf(out, "direct_large_min = %zu\n", r->direct_large_min);
    int bad = ferror(out);
    bad |= fclose(out) != 0;
    if (bad || rename(tmp, o->out) != 0) {
        fprintf(stderr, "gradwire-bench tune: writing %s failed: %m\n", o->out);
        unlink(tmp);
        return -1;
    }
    printf("# wrote %s\n", o->out);
    fflush(stdout);
    return 0;
}

static int run(gw_comm_t *comm, const struct tune_opts *o, struct figures *f)
{
    int n = gw_comm_size(comm), rank = gw_comm_rank(comm);
    gw_status_t st;
    f->rounds = ceil_log2(n) + ((n & (n - 1)) ? 2 : 0);
    size_t count = o->bytes / sizeof(float) / (size_t)n; /* per rank's block */
    if (count == 0)
        count = 1;
    f->bytes = count * sizeof(float) * (size_t)n;
    float small_in = 1, small_out = 0;
    float *send = calloc(count, sizeof(float)), *recv = calloc(count * (size_t)n, sizeof(float));
    int ok = send && recv, all_ok = 0;
    if (!ok)
        fprintf(stderr, "gradwire-bench tune: rank %d: cannot allocate %zu bytes\n", rank,
                f->bytes);
    if ((st = gw_bench_all_ok(comm, ok, &all_ok)) != GW_OK || !all_ok)
        goto err_free;

    if ((st = gw_comm_set_algo(comm, GW_ALGO_RD)) != GW_OK ||
        time_calls(comm, CALL_ALLREDUCE, &small_in, &small_out, 1, o->warmup, o->small_iters,
                   ALPHA_CALLS_PER_SAMPLE, &f->small) != GW_OK)
        goto err_free;
    gw_comm_set_algo(comm, GW_ALGO_AUTO);
    f->alpha = fmax(f->small.med_us * 1e-6 / f->rounds, FIGURE_MIN);

    if (time_calls(comm, CALL_ALLGATHER, send, recv, count, o->warmup, o->iters, 1, &f->large) !=
        GW_OK)
        goto err_free;
    double wire = f->large.med_us * 1e-6 - (n - 1) * f->alpha;
    f->beta = fmax(wire / ((double)(n - 1) / n * (double)f->bytes), FIGURE_MIN);
    free(recv);
    free(send);
    send = recv = NULL;

    /* Rank 0 measures gamma while the others wait in the allreduce below
     * (asleep in poll, so they leave the CPU to it); everyone learns
     * whether it worked. */
    ok = 1;
    if (o->gamma_bytes && rank == 0) {
        ok = measure_gamma(o, &f->reduce) == 0;
        f->gamma = fmax(f->reduce.med_us * 1e-6 / (double)o->gamma_bytes, FIGURE_MIN);
        f->have_gamma = ok;
    }
    if ((st = gw_bench_all_ok(comm, ok, &all_ok)) != GW_OK || !all_ok)
        return -1;
    if (o->rules && gw_bench_tune_rules(comm, o->warmup, &f->rules) != 0)
        return -1;
    return 0;

err_free:
    free(recv);
    free(send);
    return -1;
}

int gw_bench_tune_main(int argc, char **argv)
{
    struct tune_opts o;
    struct figures f;
    gw_comm_t *comm = NULL;
    int rc = parse_opts(argc, argv, &o);
    if (rc >= 0)
        return rc;
    int n, rank;
    if (gw_bench_join("gradwire-bench tune", &comm, &rank, &n) != 0)
        return GW_BENCH_EXIT_FAIL;
    if (n < 2) {
        fprintf(stderr, "gradwire-bench tune: needs at least 2 ranks (alpha and beta are "
                        "measured between ranks), e.g. gradwire launch -n 2 gradwire-bench tune\n");
        gw_comm_destroy(comm);
        return GW_BENCH_EXIT_FAIL;
    }
    memset(&f, 0, sizeof(f));
    rc = GW_BENCH_EXIT_FAIL;
    if (run(comm, &o, &f) == 0) {
        int ok = 1, all_ok = 0;
        if (rank == 0) {
            print_figures(&o, &f, n, gw_comm_transport(comm));
            if (o.out)
                ok = write_file(&o, &f, n, gw_comm_transport(comm)) == 0;
        }
        /* Every rank exits with rank 0's verdict on the file. */
        if (gw_bench_all_ok(comm, ok, &all_ok) == GW_OK && all_ok)
            rc = 0;
    }
    gw_comm_destroy(comm);
    return rc;
}
