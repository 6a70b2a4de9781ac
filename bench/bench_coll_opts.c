/*
 * bench_coll_opts.c - the collective benchmarks' command line, nccl-tests'
 * options (-b -e -f -i -n -w -c -d -o -a -m -N -z -r) and gradwire's own
 * (--algo, -J, --plot): every argument checked before the communicator
 * exists, so that a typo costs no rendezvous.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_coll_cmd.h"

#define MAX_SIZES 100000
#define OPT_ALGO 256         /* --algo: long only, -a is nccl-tests' --average */
#define MAX_NB_CALLS 1000000 /* -z 0: calls in flight at once, iters x agg_iters */

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
size_t gw_bench_coll_next_size(const gw_bench_coll_opts_t *o, size_t s)
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
static int check_sweep(gw_bench_coll_opts_t *o, int have_i)
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
    for (size_t s = o->sw.minbytes; nsizes <= MAX_SIZES; s = gw_bench_coll_next_size(o, s)) {
        nsizes++;
        if (gw_bench_coll_next_size(o, s) == 0)
            break;
    }
    if (nsizes > MAX_SIZES)
        return usage_error(o, "more than %d sizes from -b to -e: use a larger step", MAX_SIZES);
    return -1;
}

/* An option the collective has no use for is a usage error, not ignored. */
static int not_for(gw_bench_coll_opts_t *o, int c)
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
int gw_bench_coll_parse(int argc, char **argv, const gw_bench_coll_t *d, gw_bench_coll_opts_t *o)
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
        o->sw.factor = 1; /* one row: gw_bench_coll_next_size() ends the sweep after size 0 */
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
