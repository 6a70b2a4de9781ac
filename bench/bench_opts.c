/*
 * bench_opts.c - the options the benchmarks share: those of a size sweep
 * (allreduce, compress and p2p), so that -b 64K or -n 0 mean, and are
 * refused, the same way in each; --json and --help; and what getopt_long
 * reports about options nobody knows or values that are missing.
 */
#include "bench.h"

/* Parse option c ('b', 'e', 'f', 'n' or 'w') with value arg into *sw.
 * Returns 1 when c is a sweep option and arg is good, 0 when c is not a
 * sweep option, -1 for a bad value (the message, naming the option, is in
 * err). */
static int sweep_opt(int c, const char *arg, gw_bench_sweep_t *sw, char *err, size_t cap)
{
    long v;
    switch (c) {
    case 'b':
    case 'e':
        if (gw_kit_parse_size(arg, c == 'b' ? &sw->minbytes : &sw->maxbytes) == 0)
            return 1;
        snprintf(err, cap, "-%c wants a size in bytes (e.g. 4096, 64K, 32M, 1G), not \"%s\"", c,
                 arg);
        return -1;
    case 'f':
        if (gw_kit_parse_long(arg, 2, 1024, &sw->factor) == 0)
            return 1;
        snprintf(err, cap, "-f wants an integer step factor in 2..1024, not \"%s\"", arg);
        return -1;
    case 'n':
    case 'w':
        if (gw_kit_parse_long(arg, c == 'n' ? 1 : 0, 100000000, &v) == 0) {
            *(c == 'n' ? &sw->iters : &sw->warmup) = v;
            return 1;
        }
        snprintf(err, cap, "-%c wants a number of iterations in %d..100000000, not \"%s\"", c,
                 c == 'n' ? 1 : 0, arg);
        return -1;
    default:
        return 0;
    }
}

/* Take option c if it is a shared one: -1 to go on, an exit status, or
 * OTHER when it is the benchmark's own. */
#define OTHER (-3)
static int shared_opt(const gw_bench_cmdline_t *cl, int c, char **argv)
{
    char err[160];
    int sweep;
    switch (c) {
    case 'h':
        if (cl->usage_of)
            cl->usage_of(stdout, cl->ctx);
        else
            cl->usage(stdout);
        return 0;
    case ':':
    case '?':
        return gw_kit_getopt_error(cl->prog, c, argv);
    case 'J':
        if (!cl->json)
            return OTHER;
        if (!*optarg)
            return gw_kit_usage_error(cl->prog, "--json wants a file name");
        *cl->json = optarg;
        return -1;
    default:
        sweep = cl->sw ? sweep_opt(c, optarg, cl->sw, err, sizeof(err)) : 0;
        if (sweep < 0)
            return gw_kit_usage_error(cl->prog, "%s", err);
        return sweep ? -1 : OTHER;
    }
}

int gw_bench_next_opt(const gw_bench_cmdline_t *cl, int argc, char **argv, int *rc)
{
    int c;
    while ((c = getopt_long(argc, argv, cl->optstring, cl->longopts, NULL)) != -1) {
        int r = shared_opt(cl, c, argv);
        if (r == OTHER)
            return c;
        if (r >= 0) {
            *rc = r;
            return GW_BENCH_OPT_EXIT;
        }
    }
    return -1;
}
