/*
 * bench_main.c - `gradwire-bench BENCHMARK [options]`: the dispatcher, and
 * the argument parsers and JSON writers the benchmarks share.
 *
 * Each benchmark is a function taking its own argv (argv[0] is its name) and
 * returning the exit status: 0 when every call succeeded and every checked
 * element was right, 1 otherwise, 2 for a bad command line. Benchmarks are
 * built on the public API only and get their ranks from the environment, so
 * they run under `gradwire launch`, torchrun-style launchers, mpirun or srun.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* `gradwire-bench tune ...` (bench_tune.c); argv[0] is "tune". Returns the
 * exit status. Declared here until bench.h, shared with other benchmarks,
 * takes it. */
int gw_bench_tune_main(int argc, char **argv);

/* `gradwire-bench compress ...` (bench_compress.c); argv[0] is "compress". */
int gw_bench_compress_main(int argc, char **argv);

/* `gradwire-bench p2p ...` (bench_p2p.c); argv[0] is "p2p". */
int gw_bench_p2p_main(int argc, char **argv);

static void usage(FILE *out)
{
    fprintf(out, "usage: gradwire-bench BENCHMARK [options]\n"
                 "\n"
                 "benchmarks:\n"
                 "  allreduce    allreduce bandwidth and correctness, as nccl-tests'\n"
                 "               all_reduce_perf\n"
                 "  p2p          point-to-point bandwidth and latency between ranks 0 and 1,\n"
                 "               as perftest's ib_write_bw and ib_write_lat\n"
                 "  tune         measure the cost model's alpha, beta and gamma and write\n"
                 "               them as a tuning file for GW_TUNING_FILE\n"
                 "  compress     gradient compression codecs against the dense allreduce\n"
                 "\n"
                 "Run `gradwire-bench BENCHMARK --help` for its options. Start one process\n"
                 "per rank, e.g. `gradwire launch -n 4 gradwire-bench allreduce`.\n");
}

int gw_bench_parse_long(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int gw_bench_parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    if (!s || !isdigit((unsigned char)*s))
        return -1; /* no sign, no space: strtoull would accept and wrap "-1" */
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    int shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    case '\0':
        break;
    default:
        return -1;
    }
    if (shift) {
        end++;
        if (strcmp(end, "B") == 0 || strcmp(end, "iB") == 0)
            end += strlen(end);
    }
    if (*end != '\0' || v > (SIZE_MAX >> shift))
        return -1;
    *out = (size_t)v << shift;
    return 0;
}

void gw_bench_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void gw_bench_json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f); /* JSON has no NaN or infinity */
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return GW_BENCH_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "allreduce") == 0)
        return gw_bench_allreduce_main(argc - 1, argv + 1);
    if (strcmp(name, "p2p") == 0)
        return gw_bench_p2p_main(argc - 1, argv + 1);
    if (strcmp(name, "tune") == 0)
        return gw_bench_tune_main(argc - 1, argv + 1);
    if (strcmp(name, "compress") == 0)
        return gw_bench_compress_main(argc - 1, argv + 1);
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("gradwire-bench (gradwire %s)\n", gw_version());
        return 0;
    }
    fprintf(stderr, "gradwire-bench: unknown benchmark \"%s\"\n", name);
    usage(stderr);
    return GW_BENCH_EXIT_USAGE;
}

int gw_bench_sweep_opt(int c, const char *arg, gw_bench_sweep_t *sw, char *err, size_t cap)
{
    long v;
    switch (c) {
    case 'b':
    case 'e':
        if (gw_bench_parse_size(arg, c == 'b' ? &sw->minbytes : &sw->maxbytes) == 0)
            return 1;
        snprintf(err, cap, "-%c wants a size in bytes (e.g. 4096, 64K, 32M, 1G), not \"%s\"", c,
                 arg);
        return -1;
    case 'f':
        if (gw_bench_parse_long(arg, 2, 1024, &sw->factor) == 0)
            return 1;
        snprintf(err, cap, "-f wants an integer step factor in 2..1024, not \"%s\"", arg);
        return -1;
    case 'n':
    case 'w':
        if (gw_bench_parse_long(arg, c == 'n' ? 1 : 0, 100000000, &v) == 0) {
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
