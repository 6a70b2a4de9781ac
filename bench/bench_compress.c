/*
 * bench_compress.c - `gradwire-bench compress`: what gradient compression
 * buys, measured next to the dense allreduce in the same run.
 *
 * For every size, every rank runs the dense allreduce (gw_allreduce,
 * float32, average; the ring unless -a says otherwise) and
 * gw_allreduce_compressed with each codec on the same gradient-like input,
 * interleaved call by call so that changes in the machine's load hit all of
 * them alike: a few untimed rounds (which also let error feedback settle),
 * then `iters` timed ones. As in the allreduce benchmark, each iteration's time is the
 * maximum over ranks and the median of those is reported. The effective
 * algbw is the uncompressed size over that time, so it compares directly
 * with the dense algbw; speedup is dense time over codec time. Wire bytes
 * are what rank 0 sent (the library counts them), ratio is the dense ring's
 * bytes over those, and "agree" says that every rank ended with bitwise the
 * same result (a hash of the output, compared across ranks).
 *
 * Codec throughput is measured separately, on rank 0 alone with a
 * one-rank communicator while the other ranks wait: encode (error feedback,
 * quantization or selection) and decode, in GB/s of float32 input on one
 * core (the best of --solo_iters calls), and both together per second of
 * the thread's CPU time, which a busy machine disturbs much less than wall
 * time. That keeps the figures free of the other ranks' competition for the
 * CPU and of the network. (PowerSGD's products run in OpenBLAS, which starts
 * threads of its own unless OPENBLAS_NUM_THREADS=1.) For top-k the same
 * buffer is also sorted by magnitude with qsort, to compare the selection
 * with what it replaces.
 *
 * The codec(us) column is rank 0's CPU time in the codec per call during
 * the timed runs: on emulated hosts that share a machine's cores, this is
 * the cost that the codec adds to every rank's critical path.
 */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#include "bench_compress.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: gradwire-bench compress [options]\n"
                 "\n"
                 "  -b, --minbytes N      smallest tensor in bytes (default 1M); K, M, G suffixes\n"
                 "  -e, --maxbytes N      largest tensor in bytes (default 64M)\n"
                 "  -f, --stepfactor N    multiply the size by N each step (default 4)\n"
                 "  -n, --iters N         timed calls per size and codec (default 10)\n"
                 "  -w, --warmup_iters N  untimed calls before them (default 3)\n"
                 "  -C, --codecs LIST     comma list of fp16, bf16, int8, sign, topk, powersgd\n"
                 "                        (default all)\n"
                 "  -r, --ratio X         top-k's kept fraction (default 0.01)\n"
                 "      --momentum X      top-k with DGC momentum correction, factor X in\n"
                 "                        [0, 1) (default 0: off)\n"
                 "  -k, --rank N          PowerSGD's rank (default 4); tensors are square-ish\n"
                 "                        matrices (4096 x 4096 for 64M)\n"
                 "      --bucket N        elements per scale of int8 and sign (default 4096)\n"
                 "  -a, --algo A          the dense allreduce's algorithm (default ring)\n"
                 "      --solo_iters N    codec-throughput calls on rank 0 alone (default 5;\n"
                 "                        0 skips the measurement and the sort)\n"
                 "      --no-sort         skip the full sort that top-k is compared with\n"
                 "      --json FILE       also write parameters and results as JSON (rank 0)\n"
                 "  -h, --help            show this help\n"
                 "\n"
                 "Run one process per rank, e.g. `gradwire launch -n 8 gradwire-bench compress`.\n"
                 "Exit status: 0 if every call succeeded and every rank agreed bitwise, 1\n"
                 "otherwise, 2 for a bad command line.\n");
}

static const gw_kit_prog_t prog = {"gradwire-bench compress",
                                   "\n(see gradwire-bench compress --help)\n"};
#define usage_error(...) gw_kit_usage_error(&prog, __VA_ARGS__)

static int parse_codecs(const char *list, struct copts *o)
{
    char buf[256];
    if (strlen(list) >= sizeof(buf))
        return -1;
    strcpy(buf, list);
    o->ncodecs = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        gw_codec_t c;
        if (gw_codec_parse(tok, &c) != GW_OK || c == GW_CODEC_NONE || o->ncodecs == MAX_CODECS)
            return -1;
        o->codecs[o->ncodecs++] = c;
    }
    return o->ncodecs ? 0 : -1;
}

static int parse_opts(int argc, char **argv, struct copts *o)
{
    enum { OPT_BUCKET = 256, OPT_NOSORT, OPT_SOLO, OPT_MOMENTUM };
    static const struct option longopts[] = {GW_BENCH_SWEEP_LONGOPTS,
                                             {"codecs", required_argument, NULL, 'C'},
                                             {"ratio", required_argument, NULL, 'r'},
                                             {"rank", required_argument, NULL, 'k'},
                                             {"bucket", required_argument, NULL, OPT_BUCKET},
                                             {"momentum", required_argument, NULL, OPT_MOMENTUM},
                                             {"algo", required_argument, NULL, 'a'},
                                             {"solo_iters", required_argument, NULL, OPT_SOLO},
                                             {"no-sort", no_argument, NULL, OPT_NOSORT},
                                             GW_BENCH_JSON_LONGOPT,
                                             GW_BENCH_END_LONGOPTS};
    memset(o, 0, sizeof(*o));
    o->sw.minbytes = (size_t)1 << 20;
    o->sw.maxbytes = (size_t)64 << 20;
    o->sw.factor = 4;
    o->sw.iters = 10;
    o->sw.warmup = 3;
    o->solo_iters = 5;
    o->ratio = 0.01;
    o->rank = 4;
    o->bucket = 4096;
    o->algo = GW_ALGO_RING;
    o->sort = 1;
    parse_codecs("fp16,bf16,int8,sign,topk,powersgd", o);
    const gw_bench_cmdline_t cl = {
        &prog, usage, "+:b:e:f:n:w:C:r:k:a:h", longopts, &o->sw, &o->json, NULL, NULL};
    int c, rc;
    gw_kit_getopt_begin();
    while ((c = gw_bench_next_opt(&cl, argc, argv, &rc)) != -1) {
        switch (c) {
        case GW_BENCH_OPT_EXIT:
            return rc;
        case OPT_SOLO:
            if (gw_kit_parse_long(optarg, 0, 100000, &o->solo_iters) != 0)
                return usage_error("--solo_iters wants a number of calls, not \"%s\"", optarg);
            break;
        case 'C':
            if (parse_codecs(optarg, o) != 0)
                return usage_error("-C wants a comma list of fp16, bf16, int8, sign, topk, "
                                   "powersgd, not \"%s\"",
                                   optarg);
            break;
        case 'r':
            if (gw_kit_parse_double(optarg, 0, 1, &o->ratio) != 0 || o->ratio == 0)
                return usage_error("-r wants a fraction in (0, 1], not \"%s\"", optarg);
            break;
        case 'k':
            if (gw_kit_parse_long(optarg, 1, 1024, &o->rank) != 0)
                return usage_error("-k wants a PowerSGD rank in 1..1024, not \"%s\"", optarg);
            break;
        case OPT_MOMENTUM:
            if (gw_kit_parse_double(optarg, 0, 1, &o->momentum) != 0 || o->momentum == 1)
                return usage_error("--momentum wants a factor in [0, 1), not \"%s\"", optarg);
            break;
        case OPT_BUCKET:
            if (gw_kit_parse_long(optarg, 1, 1L << 30, &o->bucket) != 0)
                return usage_error("--bucket wants a number of elements, not \"%s\"", optarg);
            break;
        case 'a':
            if (gw_algo_parse(optarg, &o->algo) != GW_OK)
                return usage_error("unknown algorithm \"%s\" (auto, ring, tree, rd or hier)",
                                   optarg);
            break;
        case OPT_NOSORT:
            o->sort = 0;
            break;
        }
    }
    if ((c = gw_kit_no_operands(&prog, argc, argv)) >= 0)
        return c;
    if (o->sw.minbytes < 4 || o->sw.minbytes > o->sw.maxbytes)
        return usage_error("need 4 <= minbytes (%zu) <= maxbytes (%zu)", o->sw.minbytes,
                           o->sw.maxbytes);
    return -1;
}

#define failed(b, st, ...) gw_bench_fail((b)->error, sizeof((b)->error), (b)->rank, st, __VA_ARGS__)

/* A gradient-like input: roughly normal, magnitudes over three decades. */
static void fill(float *x, size_t n, int rank)
{
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1);
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        double u = (double)(s & 0xffff) + (double)((s >> 16) & 0xffff) +
                   (double)((s >> 32) & 0xffff) + (double)(s >> 48);
        x[i] = (float)((u / 65536.0 - 2.0) * (s % 3 == 0 ? 1.0 : s % 3 == 1 ? 0.1 : 0.01));
    }
}

static void shape(size_t count, size_t *rows, size_t *cols)
{
    size_t c = 1;
    for (size_t d = (size_t)sqrt((double)count); d >= 1; d--)
        if (count % d == 0) {
            c = d;
            break;
        }
    *rows = count / c;
    *cols = c;
}

static gw_compress_config_t config_of(const struct copts *o, gw_codec_t codec)
{
    gw_compress_config_t cfg;
    gw_compress_config_init(&cfg);
    cfg.codec = codec;
    cfg.min_elements = 0;
    cfg.bucket_elements = (size_t)o->bucket;
    cfg.topk_ratio = o->ratio;
    if (codec == GW_CODEC_TOPK)
        cfg.momentum = o->momentum;
    cfg.powersgd_rank = (int)o->rank;
    return cfg;
}

static int add_result(struct cbench *b, const struct cres *r)
{
    if (gw_bench_reserve((void **)&b->res, &b->capres, b->nres, sizeof(*r), 32) != 0)
        return -1;
    b->res[b->nres++] = *r;
    return 0;
}

/* Per-iteration times (b->times) -> max over ranks -> median, min, max. */
static int reduce_times(struct cbench *b, struct cres *r)
{
    gw_status_t st = gw_bench_timing_reduce(b->comm, b->times, b->tmax, b->o.sw.iters, &r->t);
    if (st != GW_OK)
        return failed(b, st, "gw_allreduce of the timings");
    r->algbw = r->t.med_us > 0 ? (double)r->bytes / r->t.med_us / 1e3 : 0;
    return 0;
}

/* Do all ranks hold the same count floats? */
static int agree(struct cbench *b, const float *x, size_t count, int *out)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *p = (const unsigned char *)x;
    for (size_t i = 0; i < count * sizeof(float); i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    int64_t v = (int64_t)(h >> 1), lo, hi;
    gw_status_t st = gw_allreduce(b->comm, &v, &lo, 1, GW_INT64, GW_MIN);
    if (st == GW_OK)
        st = gw_allreduce(b->comm, &v, &hi, 1, GW_INT64, GW_MAX);
    if (st != GW_OK)
        return failed(b, st, "gw_allreduce of the result hashes");
    *out = lo == hi;
    return 0;
}

/* What rank 0 sends in a ring allreduce of count floats: every block but
 * two (allreduce_ring.c). */
static uint64_t ring_bytes(size_t count, int nranks)
{
    size_t n = (size_t)nranks, q = count / n, rem = count % n;
    if (n < 2)
        return 0;
    size_t c1 = q + (1 % n < rem), c2 = q + (2 % n < rem);
    return (uint64_t)(2 * count - c1 - c2) * sizeof(float);
}

/* One size: the dense allreduce and every codec, interleaved call by call
 * (dense, codec 1, codec 2, ..., dense, ...) so that a machine whose load
 * changes during the run slows all of them alike and the ratios stay
 * honest. Fills r[0] (dense) and r[1 .. ncodecs]. */
static int run_size(struct cbench *b, size_t count, struct cres *r)
{
    const int nc = b->o.ncodecs;
    const long iters = b->o.sw.iters;
    gw_compress_state_t *state[MAX_CODECS] = {NULL};
    double *t = calloc((size_t)(nc + 1) * (size_t)iters, sizeof(double));
    double comm[MAX_CODECS + 1] = {0}, cpu[MAX_CODECS + 1] = {0};
    gw_status_t st = t ? GW_OK : GW_ERR_NO_MEMORY;
    int rc = 0;
    size_t rows, cols;
    shape(count, &rows, &cols);
    for (int c = 0; c < nc && st == GW_OK; c++) {
        gw_compress_config_t cfg = config_of(&b->o, b->o.codecs[c]);
        st = gw_compress_state_create(&cfg, rows, cols, &state[c]);
    }
    if (st != GW_OK) {
        rc = failed(b, st, "setting up %zu floats", count);
        goto out;
    }
    for (int k = 0; k <= nc; k++) {
        memset(&r[k], 0, sizeof(r[k]));
        r[k].bytes = count * sizeof(float);
        r[k].name = k ? gw_codec_name(b->o.codecs[k - 1]) : "dense";
        r[k].dense = k == 0;
    }
    for (long it = 0; it < b->o.sw.warmup + iters; it++) {
        for (int k = 0; k <= nc; k++) {
            double t0 = gw_kit_now_us();
            st = k ? gw_allreduce_compressed(b->comm, state[k - 1], b->in, b->out, count)
                   : gw_allreduce(b->comm, b->in, b->out, count, GW_FLOAT32, GW_AVG);
            double dt = gw_kit_now_us() - t0;
            if (st != GW_OK) {
                rc = failed(b, st, "%s of %zu floats", r[k].name, count);
                goto out;
            }
            if (it < b->o.sw.warmup)
                continue;
            t[(size_t)k * (size_t)iters + (size_t)(it - b->o.sw.warmup)] = dt;
            if (k) {
                gw_compress_stats_t last;
                gw_compress_stats_get(state[k - 1], &last, NULL);
                comm[k] += last.comm_seconds * 1e6;
                cpu[k] += last.codec_cpu_seconds * 1e6;
                r[k].wire = last.bytes_sent;
                r[k].ratio = last.compression_ratio;
            }
        }
    }
    for (int k = 0; k <= nc; k++) {
        memcpy(b->times, t + (size_t)k * (size_t)iters, (size_t)iters * sizeof(double));
        if (reduce_times(b, &r[k]) != 0) {
            rc = -1;
            goto out;
        }
        r[k].comm_us = comm[k] / (double)iters;
        r[k].cpu_us = cpu[k] / (double)iters;
        r[k].speedup = r[k].t.med_us > 0 ? r[0].t.med_us / r[k].t.med_us : 0;
    }
    r[0].ratio = 1;
    r[0].wire = ring_bytes(count, b->size);
    /* Each one's last result must agree across ranks: run them once more,
     * untimed, and compare hashes. */
    for (int k = 0; k <= nc; k++) {
        st = k ? gw_allreduce_compressed(b->comm, state[k - 1], b->in, b->out, count)
               : gw_allreduce(b->comm, b->in, b->out, count, GW_FLOAT32, GW_AVG);
        if (st != GW_OK) {
            rc = failed(b, st, "%s of %zu floats", r[k].name, count);
            goto out;
        }
        if (agree(b, b->out, count, &r[k].agree) != 0) {
            rc = -1;
            goto out;
        }
    }
out:
    for (int c = 0; c < nc; c++)
        gw_compress_state_destroy(state[c]);
    free(t);
    return rc;
}

static int cmp_abs(const void *a, const void *b)
{
    float x = fabsf(*(const float *)a), y = fabsf(*(const float *)b);
    return (x > y) - (x < y);
}

/* Rank 0 alone: encode and decode throughput of codec on one core, and for
 * top-k the full sort it avoids. Fills r->enc_gbps, r->dec_gbps. */
static int solo(struct cbench *b, gw_codec_t codec, size_t count, struct cres *r)
{
    size_t rows, cols;
    shape(count, &rows, &cols);
    gw_compress_config_t cfg = config_of(&b->o, codec);
    gw_compress_state_t *state = NULL;
    gw_status_t st = gw_compress_state_create(&cfg, rows, cols, &state);
    if (st != GW_OK)
        return failed(b, st, "gw_compress_state_create(%s)", gw_codec_name(codec));
    long n = b->o.solo_iters;
    double *enc = calloc((size_t)n + 1, sizeof(double)), *dec = calloc((size_t)n + 1, 8);
    double cpu = 0;
    int rc = 0;
    for (long it = 0; it <= n && enc && dec; it++) { /* the first call is a warm-up */
        if ((st = gw_allreduce_compressed(b->solo, state, b->in, b->out, count)) != GW_OK) {
            rc = failed(b, st, "one-rank gw_allreduce_compressed(%s)", r->name);
            break;
        }
        gw_compress_stats_t last;
        gw_compress_stats_get(state, &last, NULL);
        if (it > 0) {
            enc[it - 1] = last.encode_seconds;
            dec[it - 1] = last.decode_seconds;
            cpu = it == 1 ? last.codec_cpu_seconds : fmin(cpu, last.codec_cpu_seconds);
        }
    }
    if (rc == 0 && enc && dec) {
        /* The best of n: the machine's other work only ever slows a run. */
        double e = enc[0], d = dec[0];
        for (long i = 1; i < n; i++) {
            e = fmin(e, enc[i]);
            d = fmin(d, dec[i]);
        }
        r->enc_gbps = e > 0 ? (double)r->bytes / e / 1e9 : 0;
        r->dec_gbps = d > 0 ? (double)r->bytes / d / 1e9 : 0;
        r->cpu_gbps = cpu > 0 ? (double)r->bytes / cpu / 1e9 : 0;
        if (codec == GW_CODEC_TOPK && b->o.sort && b->nsorts < 64) {
            float *copy = malloc(count * sizeof(float));
            if (copy) {
                memcpy(copy, b->in, count * sizeof(float));
                double t0 = gw_kit_now_us();
                qsort(copy, count, sizeof(float), cmp_abs);
                double sort_us = gw_kit_now_us() - t0;
                free(copy);
                b->sorts[b->nsorts++] = (struct sortres){r->bytes, e * 1e3, sort_us / 1e3};
            }
        }
    }
    free(enc);
    free(dec);
    gw_compress_state_destroy(state);
    return rc;
}

static int run_all(struct cbench *b)
{
    struct cres r[MAX_CODECS + 1];
    for (size_t s = b->o.sw.minbytes;; s *= (size_t)b->o.sw.factor) {
        size_t count = s / sizeof(float);
        fill(b->in, count, b->rank);
        if (run_size(b, count, r) != 0)
            return -1;
        for (int k = 1; k <= b->o.ncodecs && b->o.solo_iters > 0; k++) {
            int ok = 1, all = 0;
            if (b->rank == 0)
                ok = solo(b, b->o.codecs[k - 1], count, &r[k]) == 0;
            gw_status_t st = gw_bench_all_ok(b->comm, ok, &all);
            if (st != GW_OK)
                return failed(b, st, "gw_allreduce after the one-rank measurement");
            if (!all)
                return -1;
        }
        for (int k = 0; k <= b->o.ncodecs; k++) {
            b->bad |= !r[k].agree;
            if (add_result(b, &r[k]) != 0)
                return -1;
            if (b->rank == 0)
                gw_bench_compress_print_result(&r[k]);
        }
        if (b->rank == 0 && b->nsorts > 0 && b->sorts[b->nsorts - 1].bytes == s) {
            const struct sortres *q = &b->sorts[b->nsorts - 1];
            printf("#  top-k selection (with error feedback) %.2f ms, full sort by magnitude "
                   "%.1f ms: %.0fx faster\n",
                   q->select_ms, q->sort_ms, q->select_ms > 0 ? q->sort_ms / q->select_ms : 0);
        }
        if (s > b->o.sw.maxbytes / (size_t)b->o.sw.factor)
            break;
    }
    return 0;
}

static int setup(struct cbench *b, gw_bench_report_t *json)
{
    gw_status_t st;
    int ok = 1;
    if ((st = gw_comm_set_algo(b->comm, b->o.algo)) != GW_OK)
        return failed(b, st, "gw_comm_set_algo(%s)", gw_algo_name(b->o.algo));
    size_t cap = b->o.sw.maxbytes / sizeof(float) + 1;
    b->in = malloc(cap * sizeof(float));
    b->out = malloc(cap * sizeof(float));
    b->times = calloc((size_t)b->o.sw.iters, sizeof(double));
    b->tmax = calloc((size_t)b->o.sw.iters, sizeof(double));
    if (!b->in || !b->out || !b->times || !b->tmax) {
        fprintf(stderr, "gradwire-bench: rank %d: cannot allocate 2 x %zu bytes\n", b->rank,
                cap * sizeof(float));
        ok = 0;
    }
    if (b->rank == 0 && b->o.solo_iters > 0) {
        gw_config_t cfg;
        gw_config_init(&cfg);
        cfg.rank = 0;
        cfg.size = 1;
        if ((st = gw_comm_init(&cfg, &b->solo)) != GW_OK) {
            fprintf(stderr, "gradwire-bench: one-rank communicator: %s\n", gw_status_str(st));
            ok = 0;
        }
    }
    return gw_bench_setup_end(b->comm, b->rank, ok, "compress", b->o.json, json, b->error,
                              sizeof(b->error));
}

int gw_bench_compress_main(int argc, char **argv)
{
    struct cbench b;
    gw_bench_report_t json = {0};
    memset(&b, 0, sizeof(b));
    int rc = parse_opts(argc, argv, &b.o);
    if (rc >= 0)
        return rc;
    if (gw_bench_join("gradwire-bench", &b.comm, &b.rank, &b.size) != 0)
        return GW_BENCH_EXIT_FAIL;
    rc = GW_BENCH_EXIT_FAIL;
    if (setup(&b, &json) == 0) {
        if (b.rank == 0)
            gw_bench_compress_print_header(&b);
        rc = run_all(&b) == 0 && !b.bad ? 0 : GW_BENCH_EXIT_FAIL;
        if (b.rank == 0 && b.bad && !b.error[0])
            snprintf(b.error, sizeof(b.error), "ranks ended with different results");
        if (b.rank == 0 && b.error[0])
            printf("# Error: %s\n", b.error);
    }
    if (json.f && gw_bench_compress_write_json(&json, &b, rc == 0) != 0)
        rc = GW_BENCH_EXIT_FAIL;
    free(b.res);
    free(b.tmax);
    free(b.times);
    free(b.out);
    free(b.in);
    gw_comm_destroy(b.solo);
    gw_comm_destroy(b.comm);
    return rc;
}
