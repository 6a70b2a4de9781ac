/*
 * bench_coll.c - `gradwire-bench allreduce | allgather | reduce_scatter |
 * broadcast | reduce | barrier | sendrecv | alltoall | gather | scatter |
 * allgatherv`, in the manner of nccl-tests' all_reduce_perf,
 * all_gather_perf, reduce_scatter_perf, broadcast_perf, reduce_perf,
 * sendrecv_perf, alltoall_perf, gather_perf and scatter_perf, so that the
 * numbers compare (allgatherv, which nccl-tests lacks, counts like
 * allgather).
 *
 * For every dtype, op and message size, each rank runs the collective out
 * of place (send -> recv) and then in place (MPI's convention: one buffer,
 * a rank's own block at its offset for allgather and reduce-scatter): a few
 * untimed warm-up calls, then `iters` calls timed one by one. A rank's time
 * for an iteration says little on its own (the first rank to enter waits
 * for the last), so the per-iteration times are reduced with GW_MAX over
 * ranks, and the reported time is the median of those maxima; min and max
 * go to the JSON. Units and factors are nccl-tests': GB = 1e9 bytes, size
 * S is the largest buffer of the call (the gathered or the scattered one
 * for allgather, reduce-scatter, gather, scatter and allgatherv, either
 * of alltoall's), algbw = S / t and busbw = algbw times the share of S
 * that crosses the busiest link of an optimal algorithm: 2(n-1)/n for
 * allreduce, (n-1)/n for allgather, reduce-scatter, alltoall, gather,
 * scatter and allgatherv (nccl-tests' factors), 1 for
 * broadcast, reduce and sendrecv (every rank sends S to the next rank and
 * receives S from the previous one at once, out of place only: gw_sendrecv's
 * buffers must not overlap). The barrier has no size: one line, its time.
 *
 * With -c 1 every size is then run once more on fresh input and every
 * element each rank received is compared with the exact answer (bench_data.c
 * explains why the answer is exact): the reduction for allreduce, reduce
 * (on the root) and reduce-scatter (the rank's block of it), the root's
 * input for broadcast, every rank's input in its block for allgather,
 * allgatherv and gather (on the root), rank q's block for this rank in
 * block q for alltoall, the root's block for this rank for scatter, the
 * previous rank's input for sendrecv. The
 * wrong-element counts of all ranks are summed. The receive buffer is first
 * overwritten with values that are certainly wrong, so a call that leaves
 * it alone is caught.
 *
 * Every argument is checked before the communicator exists: a typo must not
 * cost a rendezvous (or a hang waiting for ranks that already quit).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_coll.h"

#define MAX_SIZES 100000
#define OPT_ALGO 256         /* --algo: long only, -a is nccl-tests' --average */
#define MAX_NB_CALLS 1000000 /* -z 0: calls in flight at once, iters x agg_iters */

struct opts {
    const gw_bench_coll_t *coll;
    int root;
    gw_bench_sweep_t sw; /* sw.factor is 0 when stepping by stepbytes */
    size_t stepbytes;
    int check;
    int ndtypes, nops;
    gw_dtype_t dtypes[GW_DTYPE_COUNT];
    gw_op_t ops[GW_OP_COUNT];
    gw_algo_t algo;
    long agg;               /* -m: calls per timed iteration, one wait for all */
    gw_bench_average_t avg; /* -a: how the ranks' times of a call combine */
    long cycles;            /* -N: sweeps of every size (0: until stopped) */
    int blocking;           /* -z: 1 each iteration timed alone, 0 one wait at the end */
    const char *json;
    const char *plot;        /* --plot FILE: a PNG of the busbw curves */
    char name[48], tail[80]; /* "gradwire-bench NAME" for messages */
    gw_kit_prog_t prog;
};

struct place_result {
    gw_bench_timing_t t;
    double algbw, busbw;
    int64_t wrong; /* -1: not checked */
    int ran;       /* 0: this placement does not exist for the collective */
};

struct result {
    long cycle;
    size_t bytes, count;
    gw_dtype_t dtype;
    gw_op_t op;
    gw_algo_t algo;
    struct place_result p[2]; /* out of place, in place */
};

struct bench {
    struct opts o;
    gw_bench_coll_run_t r; /* the collective, the communicator, the buffers */
    double *times, *tmax;
    struct result *res;
    size_t nres, capres;
    gw_handle_t **handles; /* -m or -z 0: the calls in flight */
    size_t nhandles;
    gw_bench_hosts_t place; /* where the ranks run */
    char error[512];        /* the failure that ended the run, for the JSON */
};

static void usage_of(FILE *out, const void *ctx)
{
    const gw_bench_coll_t *d = ctx;
    fprintf(out, "usage: gradwire-bench %s [options]\n\n", d->name);
    if (d->id == GW_BENCH_BARRIER) {
        fprintf(out, "  -n, --iters N         timed barriers (default 20)\n"
                     "  -w, --warmup_iters N  untimed barriers before them (default 5)\n");
    } else {
        fprintf(out,
                "  -b, --minbytes N      smallest message in bytes (default 8); K, M, G suffixes\n"
                "  -e, --maxbytes N      largest message in bytes (default 32M)\n"
                "  -f, --stepfactor N    multiply the size by N each step (default 2)\n"
                "  -i, --stepbytes N     add N bytes each step (instead of -f)\n"
                "  -n, --iters N         timed iterations per size (default 20)\n"
                "  -w, --warmup_iters N  untimed iterations before them (default 5)\n"
                "  -c, --check 0|1       check every element of every result (default 1)\n"
                "  -d, --datatype T      float32 (default), float64, float16, bfloat16, int8,\n"
                "                        uint8, int32, int64, float8_e4m3, float8_e5m2, uint32,\n"
                "                        uint64, or all\n");
        if (d->has_op)
            fprintf(out,
                    "  -o, --op OP           sum (default), prod, min, max, avg, band, bor, bxor,\n"
                    "                        premul_sum (every rank's factor 2), or all (the\n"
                    "                        combinations that exist with each dtype)\n");
        if (d->has_root)
            fprintf(out, "  -r, --root R          the root rank (default 0)\n");
        if (d->has_algo)
            fprintf(out, "      --algo A          auto (default), ring, tree, rd, hier, direct\n");
        if (d->blocks)
            fprintf(out, "Sizes are of the %s buffer: one block of size / ranks per rank.\n",
                    d->id == GW_BENCH_REDUCE_SCATTER || d->id == GW_BENCH_SCATTER
                        ? "scattered (send)"
                    : d->id == GW_BENCH_ALLTOALL ? "send (and the receive)"
                                                 : "gathered (receive)");
    }
    fprintf(out,
            "  -m, --agg_iters M     calls per timed iteration, issued non-blocking and\n"
            "                        waited for together; the time is per call (default 1)\n"
            "  -a, --average A       how the ranks' times of a call make one: 0 rank 0's,\n"
            "                        1 the mean (nccl-tests' default), 2 the fastest\n"
            "                        rank's, 3 the slowest rank's (default 3)\n"
            "  -N, --run_cycles N    run the whole sweep N times, printing each (0: until\n"
            "                        stopped; default 1)\n"
            "  -z, --blocking 0|1    1 (default): every iteration completes and is timed\n"
            "                        alone, the table gives the median; 0: every\n"
            "                        iteration's calls are issued without waiting and\n"
            "                        waited for once at the end, the time is the total\n"
            "                        over the calls (nccl-tests' default)\n"
            "      --json FILE       also write parameters and results as JSON (rank 0)\n"
            "      --plot FILE       also draw the sweep this run measured as a PNG (rank 0,\n"
            "                        with gnuplot): busbw against size on a log2 axis, one\n"
            "                        line per placement (and datatype and op), as the pages\n"
            "                        of docs/results; not for barrier\n"
            "  -h, --help            show this help\n"
            "\n"
            "Measures %s. Run one process per rank; the communicator comes from the\n"
            "environment (gw_comm_init_env), e.g. `gradwire launch -n 4 gradwire-bench\n"
            "%s`. Rank 0 prints where each rank runs (a WARNING when a host has more\n"
            "ranks than CPUs) and the table; the algo column is the algorithm auto\n"
            "chose for the size. Exit status: 0 if every call succeeded and no\n"
            "element was wrong, 1 otherwise, 2 for a bad command line.\n",
            d->what, d->name);
}

#define usage_error(o, ...) gw_kit_usage_error(&(o)->prog, __VA_ARGS__)

/* The next size after s, or 0 when there is none (beyond max or overflow). */
static size_t next_size(const struct opts *o, size_t s)
{
    if (o->sw.factor) {
        if (s == 0 || s > o->sw.maxbytes / (size_t)o->sw.factor)
            return 0;
        return s * (size_t)o->sw.factor;
    }
    if (s > o->sw.maxbytes - o->stepbytes)
        return 0;
    return s + o->stepbytes;
}

/* Whether the command line's step of a sweep fits: -1 to go on, or an exit status. */
static int check_sweep(struct opts *o, int have_i)
{
    if (o->sw.factor && have_i)
        return usage_error(o, "-f and -i both given: step by a factor or by bytes, not both");
    if (!have_i && !o->sw.factor)
        o->sw.factor = 2;
    if (o->sw.minbytes > o->sw.maxbytes)
        return usage_error(o, "minbytes (-b %zu) is larger than maxbytes (-e %zu)", o->sw.minbytes,
                           o->sw.maxbytes);
    if (o->sw.factor && o->sw.minbytes == 0)
        return usage_error(o, "-b 0 cannot grow by a factor: use -b 1 or more, or -i");
    size_t nsizes = 0;
    for (size_t s = o->sw.minbytes; nsizes <= MAX_SIZES; s = next_size(o, s)) {
        nsizes++;
        if (next_size(o, s) == 0)
            break;
    }
    if (nsizes > MAX_SIZES)
        return usage_error(o, "more than %d sizes from -b to -e: use a larger step", MAX_SIZES);
    return -1;
}

/* An option the collective has no use for is a usage error, not ignored. */
static int not_for(struct opts *o, int c)
{
    if (c == 'J' || c == 'P' || c == OPT_ALGO)
        return usage_error(o, "--%s means nothing to %s",
                           c == 'J'   ? "json"
                           : c == 'P' ? "plot"
                                      : "algo",
                           o->coll->name);
    return usage_error(o, "-%c means nothing to %s", c, o->coll->name);
}

/* Returns -1 to go on, or an exit status. */
static int parse_opts(int argc, char **argv, const gw_bench_coll_t *d, struct opts *o)
{
    static const struct option longopts[] = {GW_BENCH_SWEEP_LONGOPTS,
                                             {"stepbytes", required_argument, NULL, 'i'},
                                             {"check", required_argument, NULL, 'c'},
                                             {"datatype", required_argument, NULL, 'd'},
                                             {"op", required_argument, NULL, 'o'},
                                             {"algo", required_argument, NULL, OPT_ALGO},
                                             {"average", required_argument, NULL, 'a'},
                                             {"agg_iters", required_argument, NULL, 'm'},
                                             {"run_cycles", required_argument, NULL, 'N'},
                                             {"blocking", required_argument, NULL, 'z'},
                                             {"root", required_argument, NULL, 'r'},
                                             GW_BENCH_JSON_LONGOPT,
                                             {"plot", required_argument, NULL, 'P'},
                                             GW_BENCH_END_LONGOPTS};
    int c, rc, have_i = 0;
    long v;
    memset(o, 0, sizeof(*o));
    o->coll = d;
    snprintf(o->name, sizeof(o->name), "gradwire-bench %s", d->name);
    snprintf(o->tail, sizeof(o->tail), "\n(see gradwire-bench %s --help)\n", d->name);
    o->prog = (gw_kit_prog_t){o->name, o->tail};
    /* The barrier has no sizes: it takes -n and -w itself, and -b, -e, -f
     * come back as options it has no use for. */
    gw_bench_sweep_t *sw = d->id == GW_BENCH_BARRIER ? NULL : &o->sw;
    const char **json = d->id == GW_BENCH_BARRIER ? NULL : &o->json;
    const gw_bench_cmdline_t cl = {
        &o->prog, NULL,           "+:b:e:f:i:n:w:c:d:o:a:r:m:N:z:h", longopts, sw, json,
        usage_of, (const void *)d};
    o->sw.minbytes = 8;
    o->sw.maxbytes = (size_t)32 << 20;
    o->sw.factor = 0; /* 0 until -f: it excludes -i, and the default is 2 */
    o->sw.iters = 20;
    o->sw.warmup = 5;
    o->check = 1;
    o->ndtypes = o->nops = 1;
    o->dtypes[0] = GW_FLOAT32;
    o->ops[0] = GW_SUM;
    o->algo = GW_ALGO_AUTO;
    o->agg = 1;
    o->avg = GW_BENCH_AVG_MAX;
    o->cycles = 1;
    o->blocking = 1;
    gw_kit_getopt_begin();
    while ((c = gw_bench_next_opt(&cl, argc, argv, &rc)) != -1) {
        if (c == GW_BENCH_OPT_EXIT)
            return rc;
        if (d->id == GW_BENCH_BARRIER && !strchr("nwamNz", c))
            return not_for(o, c);
        switch (c) {
        case 'n':
        case 'w':
            if (gw_kit_parse_long(optarg, c == 'n' ? 1 : 0, 100000000, &v) != 0)
                return usage_error(o, "-%c wants a number of barriers, not \"%s\"", c, optarg);
            *(c == 'n' ? &o->sw.iters : &o->sw.warmup) = v;
            break;
        case 'P':
            if (!*optarg)
                return usage_error(o, "--plot wants a file name");
            if (!gw_bench_plot_available())
                return usage_error(o, "--plot needs gnuplot (Debian package gnuplot-nox)");
            o->plot = optarg;
            break;
        case 'i':
            if (gw_kit_parse_size(optarg, &o->stepbytes) != 0 || o->stepbytes == 0)
                return usage_error(o, "-i wants a positive step in bytes, not \"%s\"", optarg);
            have_i = 1;
            break;
        case 'c':
            if (gw_kit_parse_long(optarg, 0, 1, &v) != 0)
                return usage_error(o, "-c wants 0 or 1, not \"%s\"", optarg);
            o->check = (int)v;
            break;
        case 'd':
            if (strcmp(optarg, "all") == 0) {
                for (int t = 0; t < GW_DTYPE_COUNT; t++)
                    o->dtypes[t] = (gw_dtype_t)t;
                o->ndtypes = GW_DTYPE_COUNT;
            } else if (gw_dtype_parse(optarg, &o->dtypes[0]) == GW_OK) {
                o->ndtypes = 1;
            } else {
                return usage_error(o,
                                   "unknown datatype \"%s\" (float32, float64, float16, "
                                   "bfloat16, int8, uint8, int32, int64, float8_e4m3, "
                                   "float8_e5m2, uint32, uint64 or all)",
                                   optarg);
            }
            break;
        case 'o':
            if (!d->has_op)
                return not_for(o, c);
            if (strcmp(optarg, "all") == 0) {
                for (int p = 0; p < GW_OP_COUNT; p++)
                    o->ops[p] = (gw_op_t)p;
                o->nops = GW_OP_COUNT;
            } else if (gw_op_parse(optarg, &o->ops[0]) == GW_OK) {
                o->nops = 1;
            } else {
                return usage_error(o,
                                   "unknown op \"%s\" (sum, prod, min, max, avg, band, bor, "
                                   "bxor, premul_sum or all)",
                                   optarg);
            }
            break;
        case 'm':
            if (gw_kit_parse_long(optarg, 1, 1000000, &v) != 0)
                return usage_error(o,
                                   "-m wants a number of calls per iteration in 1..1000000, "
                                   "not \"%s\"",
                                   optarg);
            o->agg = v;
            break;
        case 'a':
            if (gw_kit_parse_long(optarg, 0, 3, &v) != 0)
                return usage_error(o,
                                   "-a wants 0 (rank 0), 1 (mean), 2 (min) or 3 (max), not "
                                   "\"%s\" (the algorithm is --algo)",
                                   optarg);
            o->avg = (gw_bench_average_t)v;
            break;
        case 'N':
            if (gw_kit_parse_long(optarg, 0, 1000000, &v) != 0)
                return usage_error(o, "-N wants a number of cycles in 0..1000000, not \"%s\"",
                                   optarg);
            o->cycles = v;
            break;
        case 'z':
            if (gw_kit_parse_long(optarg, 0, 1, &v) != 0)
                return usage_error(o, "-z wants 0 or 1, not \"%s\"", optarg);
            o->blocking = (int)v;
            break;
        case OPT_ALGO:
            if (!d->has_algo)
                return not_for(o, c);
            if (gw_algo_parse(optarg, &o->algo) != GW_OK)
                return usage_error(
                    o, "unknown algorithm \"%s\" (auto, ring, tree, rd, hier or direct)", optarg);
            break;
        case 'r':
            if (!d->has_root)
                return not_for(o, c);
            if (gw_kit_parse_long(optarg, 0, INT32_MAX, &v) != 0)
                return usage_error(o, "-r wants a rank (0 or more), not \"%s\"", optarg);
            o->root = (int)v;
            break;
        }
    }
    if ((c = gw_kit_no_operands(&o->prog, argc, argv)) >= 0)
        return c;
    if (!o->blocking && o->sw.iters * o->agg > MAX_NB_CALLS)
        return usage_error(o,
                           "-z 0 issues all %ld x %ld calls before one wait: at most %d (fewer "
                           "-n or -m)",
                           o->sw.iters, o->agg, MAX_NB_CALLS);
    if (d->id == GW_BENCH_BARRIER) {
        o->sw.minbytes = o->sw.maxbytes = 0;
        o->sw.factor = 1; /* one row: next_size() ends the sweep after size 0 */
        o->check = 0;
        return -1;
    }
    if (!d->has_op)
        o->nops = 1; /* one pass; the op is not used (the check patterns take sum's) */
    else if (o->ndtypes == 1 && o->nops == 1 && !gw_bench_combo_exists(o->dtypes[0], o->ops[0]))
        return usage_error(o,
                           "%s on %s does not exist (bitwise ops are for integer dtypes, "
                           "premul_sum for float dtypes)",
                           gw_op_name(o->ops[0]), gw_dtype_name(o->dtypes[0]));
    return check_sweep(o, have_i);
}

#define call_failed(b, st, ...) \
    gw_bench_fail((b)->error, sizeof((b)->error), (b)->r.rank, st, __VA_ARGS__)

/* Wait for every call in flight; the first error, if any. */
static gw_status_t wait_all(struct bench *b)
{
    gw_status_t first = GW_OK;
    for (size_t i = 0; i < b->nhandles; i++) {
        gw_status_t st = gw_wait(b->handles[i]);
        if (first == GW_OK)
            first = st;
    }
    b->nhandles = 0;
    return first;
}

/* Issue calls non-blocking calls (b->handles has room); on an error, wait
 * for those already issued and return it. */
static gw_status_t issue(struct bench *b, const gw_bench_place_t *pl, const gw_bench_shape_t *sh,
                         gw_dtype_t dt, gw_op_t op, long calls)
{
    for (long k = 0; k < calls; k++) {
        int nh = 0;
        gw_status_t st = gw_bench_coll_icall(&b->r, pl, sh, dt, op, b->handles + b->nhandles, &nh);
        if (st != GW_OK) {
            wait_all(b);
            return st;
        }
        b->nhandles += (size_t)nh;
    }
    return GW_OK;
}

/* One iteration: the blocking call, or with -m M, M non-blocking calls and
 * one wait for them all (nccl-tests' aggregation). */
static gw_status_t iteration(struct bench *b, const gw_bench_place_t *pl,
                             const gw_bench_shape_t *sh, gw_dtype_t dt, gw_op_t op)
{
    if (b->o.agg == 1)
        return gw_bench_coll_call(&b->r, pl, sh, dt, op);
    gw_status_t st = issue(b, pl, sh, dt, op, b->o.agg);
    return st == GW_OK ? wait_all(b) : st;
}

/* Time and check one (dtype, op, size, placement); fills *pr. */
static int measure(struct bench *b, gw_dtype_t dt, gw_op_t op, const gw_bench_shape_t *sh,
                   int in_place, struct place_result *pr)
{
    const char *where = in_place ? "in-place" : "out-of-place", *name = b->o.coll->name;
    const char *opname = b->o.coll->has_op ? gw_op_name(op) : "-";
    gw_bench_place_t pl = gw_bench_coll_place(&b->r, sh, dt, in_place);
    long n = b->o.sw.iters;
    gw_status_t st;

    gw_bench_coll_fill(&b->r, &pl, sh, dt, op);
    if ((st = gw_barrier(b->r.comm)) != GW_OK)
        return call_failed(b, st, "gw_barrier before %zu B", sh->bytes);
    for (long it = 0; it < b->o.sw.warmup; it++)
        if ((st = iteration(b, &pl, sh, dt, op)) != GW_OK)
            return call_failed(b, st, "gw_%s (%s, %zu B %s %s, warm-up)", name, where, sh->bytes,
                               gw_dtype_name(dt), opname);
    if (b->o.blocking) {
        for (long it = 0; it < n; it++) {
            double t0 = gw_kit_now_us();
            if ((st = iteration(b, &pl, sh, dt, op)) != GW_OK)
                return call_failed(b, st, "gw_%s (%s, %zu B %s %s, iteration %ld)", name, where,
                                   sh->bytes, gw_dtype_name(dt), opname, it);
            b->times[it] = (gw_kit_now_us() - t0) / (double)b->o.agg;
        }
    } else {
        /* -z 0: no wait until every call is issued; each iteration's time
         * is the mean over all of them. */
        double t0 = gw_kit_now_us();
        st = issue(b, &pl, sh, dt, op, n * b->o.agg);
        if (st == GW_OK)
            st = wait_all(b);
        if (st != GW_OK)
            return call_failed(b, st, "gw_%s (%s, %zu B %s %s, %ld calls without waiting)", name,
                               where, sh->bytes, gw_dtype_name(dt), opname, n * b->o.agg);
        double each = (gw_kit_now_us() - t0) / (double)(n * b->o.agg);
        for (long it = 0; it < n; it++)
            b->times[it] = each;
    }
    if ((st = gw_bench_timing_reduce_by(b->r.comm, b->times, b->tmax, n, b->o.avg, &pr->t)) !=
        GW_OK)
        return call_failed(b, st, "gw_allreduce of the timings");
    pr->algbw = pr->t.med_us > 0 ? (double)sh->bytes / pr->t.med_us / 1e3 : 0;
    pr->busbw = pr->algbw * b->o.coll->busbw_factor(b->r.size);
    pr->wrong = -1;
    pr->ran = 1;
    if (!b->o.check)
        return 0;

    gw_bench_coll_fill(&b->r, &pl, sh, dt, op);
    gw_bench_coll_poison(&b->r, &pl, sh, dt, op, in_place);
    if ((st = gw_bench_coll_call(&b->r, &pl, sh, dt, op)) != GW_OK)
        return call_failed(b, st, "gw_%s (%s, %zu B %s %s, check)", name, where, sh->bytes,
                           gw_dtype_name(dt), opname);
    int64_t local = gw_bench_coll_wrong(&b->r, &pl, sh, dt, op);
    if ((st = gw_allreduce(b->r.comm, &local, &pr->wrong, 1, GW_INT64, GW_SUM)) != GW_OK)
        return call_failed(b, st, "gw_allreduce of the wrong-element counts");
    return 0;
}

static void format_time(char out[32], double us)
{
    snprintf(out, 32, us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
}

static void print_header(const struct bench *b)
{
    const struct opts *o = &b->o;
    printf("# gradwire-bench %s, gradwire %s\n", o->coll->name, gw_version());
    printf("# ranks: %d  transport: %s", b->r.size, gw_comm_transport(b->r.comm));
    if (o->coll->has_algo)
        printf("  algorithm: %s%s", gw_algo_name(o->algo),
               o->algo == GW_ALGO_AUTO ? " (cost model picks per size)" : "");
    if (o->coll->has_root)
        printf("  root: %d", o->root);
    printf("\n");
    if (o->sw.factor)
        printf("# minBytes %zu maxBytes %zu step: %ld(factor)", o->sw.minbytes, o->sw.maxbytes,
               o->sw.factor);
    else
        printf("# minBytes %zu maxBytes %zu step: %zu(bytes)", o->sw.minbytes, o->sw.maxbytes,
               o->stepbytes);
    printf(" warmup iters: %ld iters: %ld agg iters: %ld validation: %d\n", o->sw.warmup,
           o->sw.iters, o->agg, o->check);
    static const char *const avgs[] = {"rank 0", "mean", "min", "max"};
    printf("# average: %d (%s over ranks) blocking: %d run cycles: %ld\n#\n", (int)o->avg,
           avgs[o->avg], o->blocking, o->cycles);
    if (b->place.n) {
        gw_bench_place_print(&b->place, stdout);
        printf("#\n");
    }
    /* Centred over the 33 columns of each placement, which start at 52. */
    printf("#%61s%s%23s%s\n", "", "out-of-place", "", "in-place");
    printf("#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
    for (int p = 0; p < 2; p++)
        printf("  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
    if (o->coll->has_algo)
        printf("  %6s", "algo");
    printf("\n#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
    printf("  %7s  %6s  %6s  %6s  %7s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
           "(GB/s)");
    printf(o->coll->has_algo ? "  %6s  %6s\n" : "\n", "", "(used)");
    fflush(stdout);
}

static void print_result(const struct bench *b, const struct result *r)
{
    const gw_bench_coll_t *d = b->o.coll;
    printf("%12zu  %12zu  %8s  %6s  %6d", r->bytes, r->count, gw_dtype_name(r->dtype),
           d->has_op ? gw_op_name(r->op) : "none", d->has_root ? b->r.root : -1);
    for (int p = 0; p < 2; p++) {
        char t[32], w[32];
        if (!r->p[p].ran) {
            printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
            continue;
        }
        format_time(t, r->p[p].t.med_us);
        if (r->p[p].wrong < 0)
            snprintf(w, sizeof(w), "N/A");
        else
            snprintf(w, sizeof(w), "%lld", (long long)r->p[p].wrong);
        printf("  %7s  %6.2f  %6.2f  %6s", t, r->p[p].algbw, r->p[p].busbw, w);
    }
    /* The algorithm the call ran (auto's choice for this size), last so
     * that the columns before it are nccl-tests'. */
    if (d->has_algo)
        printf("  %6s", gw_algo_name(r->algo));
    printf("\n");
    fflush(stdout);
}

static int add_result(struct bench *b, const struct result *r)
{
    if (gw_bench_reserve((void **)&b->res, &b->capres, b->nres, sizeof(*r), 64) != 0) {
        snprintf(b->error, sizeof(b->error), "out of memory for the results");
        return -1;
    }
    b->res[b->nres++] = *r;
    return 0;
}

/* Every size of every (dtype, op). Returns 0, or -1 with b->error set. */
static int run_sweep(struct bench *b, long cycle)
{
    for (int d = 0; d < b->o.ndtypes; d++) {
        gw_dtype_t dt = b->o.dtypes[d];
        for (int k = 0; k < b->o.nops; k++) {
            gw_op_t op = b->o.ops[k];
            /* -d all, -o all: only the combinations that exist (one
             * explicit pair that does not is refused at parsing). */
            if (b->o.coll->has_op && !gw_bench_combo_exists(dt, op))
                continue;
            for (size_t s = b->o.sw.minbytes;; s = next_size(&b->o, s)) {
                struct result r = {.cycle = cycle, .dtype = dt, .op = op};
                gw_bench_shape_t sh = gw_bench_coll_shape(&b->r, s, dt);
                r.count = sh.count;
                r.bytes = sh.bytes;
                r.algo =
                    b->o.coll->has_algo ? gw_comm_pick_algo(b->r.comm, r.count, dt) : GW_ALGO_AUTO;
                for (int p = 0; p < (b->o.coll->out_of_place_only ? 1 : 2); p++)
                    if (measure(b, dt, op, &sh, p, &r.p[p]) != 0)
                        return -1;
                if (add_result(b, &r) != 0)
                    return -1;
                if (b->r.rank == 0)
                    print_result(b, &r);
                if (next_size(&b->o, s) == 0)
                    break;
            }
        }
    }
    return 0;
}

/* -N: the sweep N times (0: until stopped, keeping only the last sweep's
 * rows, so that memory stays bounded). */
static int run_all(struct bench *b)
{
    for (long c = 0; b->o.cycles == 0 || c < b->o.cycles; c++) {
        if (b->o.cycles == 0)
            b->nres = 0;
        if (b->r.rank == 0 && b->o.cycles != 1) {
            printf("# cycle %ld\n", c + 1);
            fflush(stdout);
        }
        if (run_sweep(b, c) != 0)
            return -1;
    }
    return 0;
}

/* Totals over the results: average busbw and wrong elements (-1 unchecked). */
static void totals(const struct bench *b, double *avg_busbw, int64_t *wrong)
{
    double sum = 0;
    size_t n = 0;
    *wrong = b->o.check ? 0 : -1;
    for (size_t i = 0; i < b->nres; i++)
        for (int p = 0; p < 2; p++) {
            if (!b->res[i].p[p].ran)
                continue;
            sum += b->res[i].p[p].busbw;
            n++;
            if (b->o.check)
                *wrong += b->res[i].p[p].wrong;
        }
    *avg_busbw = n ? sum / (double)n : 0;
}

static void print_footer(const struct bench *b)
{
    double avg;
    int64_t wrong;
    totals(b, &avg, &wrong);
    if (b->o.coll->id == GW_BENCH_BARRIER)
        printf("# Wrong elements       : N/A (a barrier moves no data)\n");
    else if (wrong < 0)
        printf("# Wrong elements       : N/A (not checked: -c 0)\n");
    else
        printf("# Wrong elements       : %lld %s\n", (long long)wrong, wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g\n", avg);
    if (b->error[0])
        printf("# Error                : %s\n", b->error);
    printf("#\n");
    fflush(stdout);
}

/* Set up buffers (and the JSON file on rank 0); every rank learns whether
 * all succeeded, so that none is left waiting for a rank that gave up. */
static int setup(struct bench *b, gw_bench_report_t *json)
{
    gw_status_t st;
    int ok = 1;
    size_t cap = b->o.sw.maxbytes ? b->o.sw.maxbytes : 1;
    if (b->o.algo != GW_ALGO_AUTO && (st = gw_comm_set_algo(b->r.comm, b->o.algo)) != GW_OK)
        return call_failed(b, st, "gw_comm_set_algo(%s)", gw_algo_name(b->o.algo));
    b->r.send = malloc(cap);
    b->r.recv = malloc(cap);
    b->r.counts = calloc((size_t)b->r.size, sizeof(size_t));
    b->r.displs = calloc((size_t)b->r.size, sizeof(size_t));
    b->handles =
        calloc((size_t)(b->o.blocking ? b->o.agg : b->o.agg * b->o.sw.iters) * GW_BENCH_MAX_HANDLES,
               sizeof(*b->handles));
    if (!b->handles)
        ok = 0;
    b->times = calloc((size_t)b->o.sw.iters, sizeof(double));
    b->tmax = calloc((size_t)b->o.sw.iters, sizeof(double));
    if (!b->r.send || !b->r.recv || !b->times || !b->tmax || !b->r.counts || !b->r.displs) {
        fprintf(stderr, "gradwire-bench: rank %d: cannot allocate 2 x %zu bytes of buffers\n",
                b->r.rank, cap);
        ok = 0;
    }
    if (b->o.coll->has_root && b->r.root >= b->r.size) {
        /* Every rank sees the same size: all of them stop here, after
         * meeting in setup_end, so none exits (and has the launcher stop
         * rank 0) before rank 0 has said why. */
        if (b->r.rank == 0)
            fprintf(stderr, "%s: root %d is not a rank of this job (%d ranks)\n", b->o.name,
                    b->r.root, b->r.size);
        snprintf(b->error, sizeof(b->error), "root %d out of range", b->r.root);
        char ignored[sizeof(b->error)];
        gw_bench_setup_end(b->r.comm, b->r.rank, 0, b->o.coll->name, b->o.json, json, ignored,
                           sizeof(ignored));
        return -1;
    }
    if (gw_bench_place_alloc(&b->place, b->r.rank, b->r.size) != 0)
        ok = 0;
    if (gw_bench_setup_end(b->r.comm, b->r.rank, ok, b->o.coll->name, b->o.json, json, b->error,
                           sizeof(b->error)) != 0)
        return -1;
    if ((st = gw_bench_place_gather(b->r.comm, &b->place)) != GW_OK)
        return call_failed(b, st, "gw_gather of where the ranks run");
    json->place = &b->place;
    return 0;
}

static void json_place(gw_kit_json_t *j, const char *name, const struct place_result *p)
{
    if (!p->ran) {
        gw_kit_json_null(j, name);
        return;
    }
    gw_kit_json_object(j, name, NULL);
    gw_bench_json_timing(j, &p->t);
    gw_kit_json_num(j, "algbw", p->algbw);
    gw_kit_json_num(j, "busbw", p->busbw);
    gw_kit_json_int_or_null(j, "wrong", p->wrong >= 0, p->wrong);
    gw_kit_json_close(j, NULL);
}

/* The whole run as one JSON document over the placeholder: parameters, one
 * entry per line of the table, totals, and the error that ended the run
 * (or null). */
static int write_json(gw_bench_report_t *f, const struct bench *b, int ok)
{
    const struct opts *o = &b->o;
    gw_kit_json_t j;
    double avg;
    int64_t wrong;
    totals(b, &avg, &wrong);
    if (gw_bench_json_begin(&j, f, o->json, o->coll->name, b->r.comm) != 0)
        return -1;
    if (o->coll->has_algo)
        gw_kit_json_str(&j, "algo", gw_algo_name(o->algo));
    if (o->coll->has_root)
        gw_kit_json_int(&j, "root", o->root);
    gw_kit_json_object(&j, "units", NULL);
    gw_kit_json_str(&j, "size", "bytes");
    gw_kit_json_str(&j, "time", "us");
    gw_kit_json_str(&j, "bandwidth", "GB/s (1e9 bytes/s)");
    gw_kit_json_close(&j, NULL);
    gw_kit_json_object(&j, "params", NULL);
    gw_kit_json_uint(&j, "minbytes", o->sw.minbytes);
    gw_kit_json_uint(&j, "maxbytes", o->sw.maxbytes);
    gw_kit_json_int_or_null(&j, "stepfactor", o->sw.factor != 0, o->sw.factor);
    gw_kit_json_int_or_null(&j, "stepbytes", o->sw.factor == 0, (long long)o->stepbytes);
    gw_kit_json_int(&j, "iters", o->sw.iters);
    gw_kit_json_int(&j, "warmup_iters", o->sw.warmup);
    gw_kit_json_bool(&j, "check", o->check);
    gw_kit_json_int(&j, "agg_iters", o->agg);
    gw_kit_json_int(&j, "average", (int)o->avg);
    gw_kit_json_int(&j, "run_cycles", o->cycles);
    gw_kit_json_int(&j, "blocking", o->blocking);
    gw_kit_json_array(&j, "dtypes", NULL);
    for (int d = 0; d < o->ndtypes; d++)
        gw_kit_json_str(&j, NULL, gw_dtype_name(o->dtypes[d]));
    gw_kit_json_close(&j, NULL);
    gw_kit_json_array(&j, "ops", NULL);
    for (int k = 0; k < o->nops; k++)
        gw_kit_json_str(&j, NULL, gw_op_name(o->ops[k]));
    gw_kit_json_close(&j, NULL);
    gw_kit_json_close(&j, NULL);
    gw_kit_json_array(&j, "results", "\n    ");
    for (size_t i = 0; i < b->nres; i++) {
        const struct result *r = &b->res[i];
        gw_kit_json_object(&j, NULL, NULL);
        if (o->cycles != 1)
            gw_kit_json_int(&j, "cycle", r->cycle + 1);
        gw_kit_json_uint(&j, "size", r->bytes);
        gw_kit_json_uint(&j, "count", r->count);
        gw_kit_json_str(&j, "type", gw_dtype_name(r->dtype));
        gw_kit_json_str(&j, "redop", o->coll->has_op ? gw_op_name(r->op) : "none");
        gw_kit_json_int(&j, "root", o->coll->has_root ? o->root : -1);
        if (o->coll->has_algo)
            gw_kit_json_str(&j, "algo", gw_algo_name(r->algo));
        gw_kit_json_break(&j, "\n     ");
        json_place(&j, "out_of_place", &r->p[0]);
        gw_kit_json_break(&j, "\n     ");
        json_place(&j, "in_place", &r->p[1]);
        gw_kit_json_close(&j, NULL);
    }
    gw_kit_json_close(&j, "\n  ");
    gw_kit_json_num(&j, "avg_busbw", avg);
    gw_kit_json_int_or_null(&j, "wrong_total", wrong >= 0, wrong);
    return gw_bench_json_end(&j, ok, b->error, o->json);
}

/* --plot: one curve per datatype, op and placement, in the order of the
 * table, drawn on rank 0 after the run. 0, or -1 after printing why. */
static int plot(const struct bench *b)
{
    const struct opts *o = &b->o;
    int ncurves = o->ndtypes * o->nops * 2, rc = -1, oom = 1;
    gw_bench_curve_t *cv = calloc((size_t)ncurves, sizeof(*cv));
    char title[160];
    if (!cv)
        goto out;
    for (int k = 0; k < ncurves; k++) {
        int d = k / 2 / o->nops, op = k / 2 % o->nops, in = k % 2;
        cv[k].sizes = calloc(b->nres ? b->nres : 1, sizeof(size_t));
        cv[k].busbw = calloc(b->nres ? b->nres : 1, sizeof(double));
        if (!cv[k].sizes || !cv[k].busbw)
            goto out;
        snprintf(cv[k].label, sizeof(cv[k].label), "%s%s%s%s%s", in ? "in-place" : "out-of-place",
                 ncurves > 2 ? " " : "", o->ndtypes > 1 ? gw_dtype_name(o->dtypes[d]) : "",
                 o->ndtypes > 1 && o->nops > 1 ? " " : "",
                 o->nops > 1 && o->coll->has_op ? gw_op_name(o->ops[op]) : "");
    }
    for (size_t i = 0; i < b->nres; i++) {
        const struct result *r = &b->res[i];
        int d = 0, op = 0;
        while (d < o->ndtypes - 1 && o->dtypes[d] != r->dtype)
            d++;
        while (op < o->nops - 1 && o->ops[op] != r->op)
            op++;
        for (int in = 0; in < 2; in++) {
            gw_bench_curve_t *c = &cv[(d * o->nops + op) * 2 + in];
            if (!r->p[in].ran)
                continue;
            c->sizes[c->n] = r->bytes;
            c->busbw[c->n++] = r->p[in].busbw;
        }
    }
    snprintf(title, sizeof(title), "gradwire-bench %s: %d ranks, %s, algo %s", o->coll->name,
             b->r.size, gw_comm_transport(b->r.comm), gw_algo_name(o->algo));
    oom = 0;
    rc = gw_bench_plot_busbw(o->plot, title, cv, ncurves);
out:
    if (oom)
        fprintf(stderr, "gradwire-bench: --plot: out of memory\n");
    for (int k = 0; cv && k < ncurves; k++) {
        free(cv[k].sizes);
        free(cv[k].busbw);
    }
    free(cv);
    return rc;
}

int gw_bench_coll_main(int argc, char **argv)
{
    struct bench b;
    gw_bench_report_t json = {0};
    double avg;
    int64_t wrong;
    const gw_bench_coll_t *d = gw_bench_coll_find(argv[0]);
    if (!d)
        return GW_BENCH_EXIT_USAGE; /* bench_main.c dispatches only our names */
    memset(&b, 0, sizeof(b));
    int rc = parse_opts(argc, argv, d, &b.o);
    if (rc >= 0)
        return rc;
    b.r.coll = d;
    b.r.root = b.o.root;

    if (gw_bench_join("gradwire-bench", &b.r.comm, &b.r.rank, &b.r.size) != 0)
        return GW_BENCH_EXIT_FAIL;
    if (d->id == GW_BENCH_SENDRECV && b.r.size < 2) {
        fprintf(stderr, "%s: needs at least 2 ranks (have 1)\n", b.o.name);
        gw_comm_destroy(b.r.comm);
        return GW_BENCH_EXIT_USAGE;
    }
    rc = GW_BENCH_EXIT_FAIL;
    if (setup(&b, &json) == 0) {
        if (b.r.rank == 0)
            print_header(&b);
        rc = run_all(&b) == 0 ? 0 : GW_BENCH_EXIT_FAIL;
        if (b.r.rank == 0)
            print_footer(&b);
        if (b.r.rank == 0 && b.o.plot && plot(&b) != 0)
            rc = GW_BENCH_EXIT_FAIL;
    }
    totals(&b, &avg, &wrong);
    if (wrong > 0)
        rc = GW_BENCH_EXIT_FAIL;
    if (json.f && write_json(&json, &b, rc == 0) != 0)
        rc = GW_BENCH_EXIT_FAIL;
    free(b.res);
    free(b.tmax);
    free(b.times);
    free(b.r.recv);
    free(b.r.send);
    free(b.r.counts);
    free(b.r.displs);
    free(b.handles);
    gw_bench_place_free(&b.place);
    gw_comm_destroy(b.r.comm);
    return rc;
}
