/*
 * bench_allreduce.c - `gradwire-bench allreduce`, in the manner of
 * nccl-tests' all_reduce_perf so that the numbers compare.
 *
 * For every dtype, op and message size, each rank runs the allreduce out of
 * place (send -> recv) and then in place (recv -> recv): a few untimed
 * warm-up calls, then `iters` calls timed one by one. A rank's time for an
 * iteration says little on its own (the first rank to enter waits for the
 * last), so the per-iteration times are reduced with GW_MAX over ranks, and
 * the reported time is the median of those maxima; min and max go to the
 * JSON. Bandwidths use nccl-tests' units: GB = 1e9 bytes, algbw = S / t,
 * busbw = algbw * 2(n-1)/n, the traffic each link carries in a ring.
 *
 * With -c 1 every size is then run once more on fresh input and every
 * element of the result is compared with the exact answer (bench_data.c
 * explains why the answer is exact); the wrong-element counts of all ranks
 * are summed. Out of place, the receive buffer is first overwritten with
 * values that are certainly wrong, so a call that leaves it alone is caught.
 *
 * Every argument is checked before the communicator exists: a typo must not
 * cost a rendezvous (or a hang waiting for ranks that already quit).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MAX_SIZES 100000

struct opts {
    gw_bench_sweep_t sw; /* sw.factor is 0 when stepping by stepbytes */
    size_t stepbytes;
    int check;
    int ndtypes, nops;
    gw_dtype_t dtypes[GW_DTYPE_COUNT];
    gw_op_t ops[GW_OP_COUNT];
    gw_algo_t algo;
    const char *json;
};

struct place_result {
    gw_bench_timing_t t;
    double algbw, busbw;
    int64_t wrong; /* -1: not checked */
};

struct result {
    size_t bytes, count;
    gw_dtype_t dtype;
    gw_op_t op;
    gw_algo_t algo;
    struct place_result p[2]; /* out of place, in place */
};

struct bench {
    struct opts o;
    gw_comm_t *comm;
    int rank, size;
    void *send, *recv;
    double *times, *tmax;
    struct result *res;
    size_t nres, capres;
    char error[512]; /* the failure that ended the run, for the JSON */
};

static void usage(FILE *out)
{
    fprintf(out, "usage: gradwire-bench allreduce [options]\n"
                 "\n"
                 "  -b, --minbytes N      smallest message in bytes (default 8); K, M, G suffixes\n"
                 "  -e, --maxbytes N      largest message in bytes (default 32M)\n"
                 "  -f, --stepfactor N    multiply the size by N each step (default 2)\n"
                 "  -i, --stepbytes N     add N bytes each step (instead of -f)\n"
                 "  -n, --iters N         timed iterations per size (default 20)\n"
                 "  -w, --warmup_iters N  untimed iterations before them (default 5)\n"
                 "  -c, --check 0|1       check every element of every result (default 1)\n"
                 "  -d, --datatype T      float32 (default), float64, float16, bfloat16, int8,\n"
                 "                        uint8, int32, int64, or all\n"
                 "  -o, --op OP           sum (default), prod, min, max, avg, or all\n"
                 "  -a, --algo A          auto (default), ring, tree, rd\n"
                 "      --json FILE       also write parameters and results as JSON (rank 0)\n"
                 "  -h, --help            show this help\n"
                 "\n"
                 "Run one process per rank; the communicator comes from the environment\n"
                 "(gw_comm_init_env), e.g. `gradwire launch -n 4 gradwire-bench allreduce`.\n"
                 "Rank 0 prints the table. Exit status: 0 if every call succeeded and no\n"
                 "element was wrong, 1 otherwise, 2 for a bad command line.\n");
}

static const gw_kit_prog_t prog = {"gradwire-bench allreduce",
                                   "\n(see gradwire-bench allreduce --help)\n"};
#define usage_error(...) gw_kit_usage_error(&prog, __VA_ARGS__)

/* The next size after s, or 0 when there is none (beyond max or overflow). */
static size_t next_size(const struct opts *o, size_t s)
{
    if (o->sw.factor) {
        if (s > o->sw.maxbytes / (size_t)o->sw.factor)
            return 0;
        return s * (size_t)o->sw.factor;
    }
    if (s > o->sw.maxbytes - o->stepbytes)
        return 0;
    return s + o->stepbytes;
}

/* Returns -1 to go on, or an exit status. */
static int parse_opts(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {GW_BENCH_SWEEP_LONGOPTS,
                                             {"stepbytes", required_argument, NULL, 'i'},
                                             {"check", required_argument, NULL, 'c'},
                                             {"datatype", required_argument, NULL, 'd'},
                                             {"op", required_argument, NULL, 'o'},
                                             {"algo", required_argument, NULL, 'a'},
                                             GW_BENCH_JSON_LONGOPT,
                                             GW_BENCH_END_LONGOPTS};
    const gw_bench_cmdline_t cl = {&prog,    usage,  "+:b:e:f:i:n:w:c:d:o:a:h",
                                   longopts, &o->sw, &o->json};
    int c, rc, have_i = 0;
    long v;
    memset(o, 0, sizeof(*o));
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
    gw_kit_getopt_begin();
    while ((c = gw_bench_next_opt(&cl, argc, argv, &rc)) != -1) {
        switch (c) {
        case GW_BENCH_OPT_EXIT:
            return rc;
        case 'i':
            if (gw_kit_parse_size(optarg, &o->stepbytes) != 0 || o->stepbytes == 0)
                return usage_error("-i wants a positive step in bytes, not \"%s\"", optarg);
            have_i = 1;
            break;
        case 'c':
            if (gw_kit_parse_long(optarg, 0, 1, &v) != 0)
                return usage_error("-c wants 0 or 1, not \"%s\"", optarg);
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
                return usage_error("unknown datatype \"%s\" (float32, float64, float16, "
                                   "bfloat16, int8, uint8, int32, int64 or all)",
                                   optarg);
            }
            break;
        case 'o':
            if (strcmp(optarg, "all") == 0) {
                for (int p = 0; p < GW_OP_COUNT; p++)
                    o->ops[p] = (gw_op_t)p;
                o->nops = GW_OP_COUNT;
            } else if (gw_op_parse(optarg, &o->ops[0]) == GW_OK) {
                o->nops = 1;
            } else {
                return usage_error("unknown op \"%s\" (sum, prod, min, max, avg or all)", optarg);
            }
            break;
        case 'a':
            if (gw_algo_parse(optarg, &o->algo) != GW_OK)
                return usage_error("unknown algorithm \"%s\" (auto, ring, tree or rd)", optarg);
            break;
        }
    }
    if ((c = gw_kit_no_operands(&prog, argc, argv)) >= 0)
        return c;
    if (o->sw.factor && have_i)
        return usage_error("-f and -i both given: step by a factor or by bytes, not both");
    if (!have_i && !o->sw.factor)
        o->sw.factor = 2;
    if (o->sw.minbytes > o->sw.maxbytes)
        return usage_error("minbytes (-b %zu) is larger than maxbytes (-e %zu)", o->sw.minbytes,
                           o->sw.maxbytes);
    if (o->sw.factor && o->sw.minbytes == 0)
        return usage_error("-b 0 cannot grow by a factor: use -b 1 or more, or -i");
    size_t nsizes = 0;
    for (size_t s = o->sw.minbytes; nsizes <= MAX_SIZES; s = next_size(o, s)) {
        nsizes++;
        if (next_size(o, s) == 0)
            break;
    }
    if (nsizes > MAX_SIZES)
        return usage_error("more than %d sizes from -b to -e: use a larger step", MAX_SIZES);
    return -1;
}

#define call_failed(b, st, ...) \
    gw_bench_fail((b)->error, sizeof((b)->error), (b)->rank, st, __VA_ARGS__)

/* Time and check one (dtype, op, size, placement); fills *pr. */
static int measure(struct bench *b, gw_dtype_t dt, gw_op_t op, size_t count, int in_place,
                   struct place_result *pr)
{
    const char *where = in_place ? "in-place" : "out-of-place";
    void *src = in_place ? b->recv : b->send;
    size_t bytes = count * gw_dtype_size(dt);
    long n = b->o.sw.iters;
    gw_status_t st;

    gw_bench_fill(src, count, dt, op, b->rank, b->size);
    if ((st = gw_barrier(b->comm)) != GW_OK)
        return call_failed(b, st, "gw_barrier before %zu B", bytes);
    for (long it = 0; it < b->o.sw.warmup; it++)
        if ((st = gw_allreduce(b->comm, src, b->recv, count, dt, op)) != GW_OK)
            return call_failed(b, st, "gw_allreduce (%s, %zu B %s %s, warm-up)", where, bytes,
                               gw_dtype_name(dt), gw_op_name(op));
    for (long it = 0; it < n; it++) {
        double t0 = gw_kit_now_us();
        if ((st = gw_allreduce(b->comm, src, b->recv, count, dt, op)) != GW_OK)
            return call_failed(b, st, "gw_allreduce (%s, %zu B %s %s, iteration %ld)", where, bytes,
                               gw_dtype_name(dt), gw_op_name(op), it);
        b->times[it] = gw_kit_now_us() - t0;
    }
    if ((st = gw_bench_timing_reduce(b->comm, b->times, b->tmax, n, &pr->t)) != GW_OK)
        return call_failed(b, st, "gw_allreduce of the timings");
    pr->algbw = pr->t.med_us > 0 ? (double)bytes / pr->t.med_us / 1e3 : 0;
    pr->busbw = pr->algbw * 2.0 * (b->size - 1) / b->size;
    pr->wrong = -1;
    if (!b->o.check)
        return 0;

    gw_bench_fill(src, count, dt, op, b->rank, b->size);
    if (!in_place)
        gw_bench_poison(b->recv, count, dt, op, b->size);
    if ((st = gw_allreduce(b->comm, src, b->recv, count, dt, op)) != GW_OK)
        return call_failed(b, st, "gw_allreduce (%s, %zu B %s %s, check)", where, bytes,
                           gw_dtype_name(dt), gw_op_name(op));
    int64_t local = gw_bench_count_wrong(b->recv, count, dt, op, b->size);
    if ((st = gw_allreduce(b->comm, &local, &pr->wrong, 1, GW_INT64, GW_SUM)) != GW_OK)
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
    printf("# gradwire-bench allreduce, gradwire %s\n", gw_version());
    printf("# ranks: %d  transport: %s  algorithm: %s%s\n", b->size, gw_comm_transport(b->comm),
           gw_algo_name(o->algo), o->algo == GW_ALGO_AUTO ? " (cost model picks per size)" : "");
    if (o->sw.factor)
        printf("# minBytes %zu maxBytes %zu step: %ld(factor)", o->sw.minbytes, o->sw.maxbytes,
               o->sw.factor);
    else
        printf("# minBytes %zu maxBytes %zu step: %zu(bytes)", o->sw.minbytes, o->sw.maxbytes,
               o->stepbytes);
    printf(" warmup iters: %ld iters: %ld validation: %d\n#\n", o->sw.warmup, o->sw.iters,
           o->check);
    /* Centred over the 33 columns of each placement, which start at 52. */
    printf("#%61s%s%23s%s\n", "", "out-of-place", "", "in-place");
    printf("#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
    for (int p = 0; p < 2; p++)
        printf("  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
    printf("\n#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
    printf("  %7s  %6s  %6s  %6s  %7s  %6s  %6s\n", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
           "(GB/s)", "(GB/s)");
    fflush(stdout);
}

static void print_result(const struct result *r)
{
    printf("%12zu  %12zu  %8s  %6s  %6d", r->bytes, r->count, gw_dtype_name(r->dtype),
           gw_op_name(r->op), -1);
    for (int p = 0; p < 2; p++) {
        char t[32], w[32];
        format_time(t, r->p[p].t.med_us);
        if (r->p[p].wrong < 0)
            snprintf(w, sizeof(w), "N/A");
        else
            snprintf(w, sizeof(w), "%lld", (long long)r->p[p].wrong);
        printf("  %7s  %6.2f  %6.2f  %6s", t, r->p[p].algbw, r->p[p].busbw, w);
    }
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
static int run_all(struct bench *b)
{
    for (int d = 0; d < b->o.ndtypes; d++) {
        gw_dtype_t dt = b->o.dtypes[d];
        for (int k = 0; k < b->o.nops; k++) {
            gw_op_t op = b->o.ops[k];
            for (size_t s = b->o.sw.minbytes;; s = next_size(&b->o, s)) {
                struct result r = {.dtype = dt, .op = op};
                r.count = s / gw_dtype_size(dt);
                r.bytes = r.count * gw_dtype_size(dt);
                r.algo = gw_comm_pick_algo(b->comm, r.count, dt);
                for (int p = 0; p < 2; p++)
                    if (measure(b, dt, op, r.count, p, &r.p[p]) != 0)
                        return -1;
                if (add_result(b, &r) != 0)
                    return -1;
                if (b->rank == 0)
                    print_result(&r);
                if (next_size(&b->o, s) == 0)
                    break;
            }
        }
    }
    return 0;
}

/* Totals over the results: average busbw and wrong elements (-1 unchecked). */
static void totals(const struct bench *b, double *avg_busbw, int64_t *wrong)
{
    double sum = 0;
    *wrong = b->o.check ? 0 : -1;
    for (size_t i = 0; i < b->nres; i++)
        for (int p = 0; p < 2; p++) {
            sum += b->res[i].p[p].busbw;
            if (b->o.check)
                *wrong += b->res[i].p[p].wrong;
        }
    *avg_busbw = b->nres ? sum / (double)(2 * b->nres) : 0;
}

static void print_footer(const struct bench *b)
{
    double avg;
    int64_t wrong;
    totals(b, &avg, &wrong);
    if (wrong < 0)
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
static int setup(struct bench *b, FILE **json)
{
    gw_status_t st;
    int ok = 1;
    size_t cap = b->o.sw.maxbytes ? b->o.sw.maxbytes : 1;
    if (b->o.algo != GW_ALGO_AUTO && (st = gw_comm_set_algo(b->comm, b->o.algo)) != GW_OK)
        return call_failed(b, st, "gw_comm_set_algo(%s)", gw_algo_name(b->o.algo));
    b->send = malloc(cap);
    b->recv = malloc(cap);
    b->times = calloc((size_t)b->o.sw.iters, sizeof(double));
    b->tmax = calloc((size_t)b->o.sw.iters, sizeof(double));
    if (!b->send || !b->recv || !b->times || !b->tmax) {
        fprintf(stderr, "gradwire-bench: rank %d: cannot allocate 2 x %zu bytes of buffers\n",
                b->rank, cap);
        ok = 0;
    }
    return gw_bench_setup_end(b->comm, b->rank, ok, "allreduce", b->o.json, json, b->error,
                              sizeof(b->error));
}

static void json_place(gw_kit_json_t *j, const char *name, const struct place_result *p)
{
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
static int write_json(FILE *f, const struct bench *b, int ok)
{
    const struct opts *o = &b->o;
    gw_kit_json_t j;
    double avg;
    int64_t wrong;
    totals(b, &avg, &wrong);
    if (gw_bench_json_begin(&j, f, o->json, "allreduce", b->comm) != 0)
        return -1;
    gw_kit_json_str(&j, "algo", gw_algo_name(o->algo));
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
        gw_kit_json_uint(&j, "size", r->bytes);
        gw_kit_json_uint(&j, "count", r->count);
        gw_kit_json_str(&j, "type", gw_dtype_name(r->dtype));
        gw_kit_json_str(&j, "redop", gw_op_name(r->op));
        gw_kit_json_int(&j, "root", -1);
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

int gw_bench_allreduce_main(int argc, char **argv)
{
    struct bench b;
    FILE *json = NULL;
    double avg;
    int64_t wrong;
    memset(&b, 0, sizeof(b));
    int rc = parse_opts(argc, argv, &b.o);
    if (rc >= 0)
        return rc;

    if (gw_bench_join("gradwire-bench", &b.comm, &b.rank, &b.size) != 0)
        return GW_BENCH_EXIT_FAIL;
    rc = GW_BENCH_EXIT_FAIL;
    if (setup(&b, &json) == 0) {
        if (b.rank == 0)
            print_header(&b);
        rc = run_all(&b) == 0 ? 0 : GW_BENCH_EXIT_FAIL;
        if (b.rank == 0)
            print_footer(&b);
    }
    totals(&b, &avg, &wrong);
    if (wrong > 0)
        rc = GW_BENCH_EXIT_FAIL;
    if (json && write_json(json, &b, rc == 0) != 0)
        rc = GW_BENCH_EXIT_FAIL;
    free(b.res);
    free(b.tmax);
    free(b.times);
    free(b.recv);
    free(b.send);
    gw_comm_destroy(b.comm);
    return rc;
}
