/*
 * bench_p2p_cmd.c - the `gradwire-bench p2p` command: its options, the
 * default run between ranks 0 and 1 with its table and JSON, and the
 * dispatch to the all-pairs run (bench_p2p_pairs.c). The measurement of
 * one pair is bench_p2p.c, which gradwire-check shares (the static library
 * gradwire_p2p, CMakeLists.txt).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_p2p.h"

#define MODE_UNI GW_P2P_MODE_UNI
#define MODE_BIDIR GW_P2P_MODE_BIDIR
#define MODE_LAT GW_P2P_MODE_LAT

static void usage(FILE *out)
{
    fprintf(out, "usage: gradwire-bench p2p [options]\n"
                 "\n"
                 "  -b, --minbytes N      smallest message in bytes (default 8); K, M, G suffixes\n"
                 "  -e, --maxbytes N      largest message in bytes (default 4M)\n"
                 "  -f, --stepfactor N    multiply the size by N each step (default 4)\n"
                 "  -n, --iters N         timed iterations per size and mode (default 100)\n"
                 "  -w, --warmup_iters N  untimed iterations before them (default 10)\n"
                 "  -W, --window N        messages in flight per direction in uni and bidir\n"
                 "                        (default 16; 1: blocking calls, one at a time)\n"
                 "  -m, --mode LIST       uni, bidir, lat, or all (default), comma-separated\n"
                 "  -c, --check 0|1       check the bytes that arrived (default 1)\n"
                 "  -p, --pairs P         which pairs: first (ranks 0 and 1, the default), all\n"
                 "                        (every pair, in n-1 rounds of n/2 pairs at once, the\n"
                 "                        circle method; odd n: one rank rests each round), or\n"
                 "                        serial (every pair, one at a time)\n"
                 "      --json FILE       also write parameters and results as JSON (rank 0)\n"
                 "  -h, --help            show this help\n"
                 "\n"
                 "Ranks 0 and 1 exchange messages; other ranks exit at once (but with\n"
                 "--pairs, where rank 0 prints a row per pair and size, then the spread over\n"
                 "the pairs). Start with e.g. `gradwire launch -n 2 gradwire-bench p2p`.\n"
                 "Exit status: 0 if every call\n"
                 "succeeded and every byte was right, 1 otherwise, 2 for a bad command line.\n");
}

static const gw_kit_prog_t prog = {"gradwire-bench p2p", "\n(see gradwire-bench p2p --help)\n"};
#define usage_error(...) gw_kit_usage_error(&prog, __VA_ARGS__)

static int parse_modes(const char *s, int *out)
{
    int m = 0;
    char buf[64];
    if (strlen(s) >= sizeof(buf))
        return -1;
    strcpy(buf, s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (strcmp(tok, "uni") == 0)
            m |= MODE_UNI;
        else if (strcmp(tok, "bidir") == 0)
            m |= MODE_BIDIR;
        else if (strcmp(tok, "lat") == 0)
            m |= MODE_LAT;
        else if (strcmp(tok, "all") == 0)
            m |= MODE_UNI | MODE_BIDIR | MODE_LAT;
        else
            return -1;
    }
    if (!m)
        return -1;
    *out = m;
    return 0;
}

static int parse_opts(int argc, char **argv, gw_p2p_opts_t *o)
{
    static const struct option longopts[] = {GW_BENCH_SWEEP_LONGOPTS,
                                             {"window", required_argument, NULL, 'W'},
                                             {"mode", required_argument, NULL, 'm'},
                                             {"check", required_argument, NULL, 'c'},
                                             {"pairs", required_argument, NULL, 'p'},
                                             GW_BENCH_JSON_LONGOPT,
                                             GW_BENCH_END_LONGOPTS};
    memset(o, 0, sizeof(*o));
    o->sw.minbytes = 8;
    o->sw.maxbytes = (size_t)4 << 20;
    o->sw.factor = 4;
    o->sw.iters = 100;
    o->sw.warmup = 10;
    o->window = 16;
    o->modes = MODE_UNI | MODE_BIDIR | MODE_LAT;
    o->check = 1;
    const gw_bench_cmdline_t cl = {
        &prog, usage, "+:b:e:f:n:w:W:m:c:p:h", longopts, &o->sw, &o->json, NULL, NULL};
    long v;
    int c, rc;
    gw_kit_getopt_begin();
    while ((c = gw_bench_next_opt(&cl, argc, argv, &rc)) != -1) {
        switch (c) {
        case GW_BENCH_OPT_EXIT:
            return rc;
        case 'W':
            if (gw_kit_parse_long(optarg, 1, 1024, &o->window) != 0)
                return usage_error("--window must be an integer in [1, 1024], not \"%s\"", optarg);
            break;
        case 'm':
            if (parse_modes(optarg, &o->modes) != 0)
                return usage_error("--mode takes uni, bidir, lat or all, not \"%s\"", optarg);
            break;
        case 'c':
            if (gw_kit_parse_long(optarg, 0, 1, &v) != 0)
                return usage_error("--check takes 0 or 1, not \"%s\"", optarg);
            o->check = (int)v;
            break;
        case 'p':
            if (strcmp(optarg, "first") == 0)
                o->pairs = GW_P2P_PAIR_01;
            else if (strcmp(optarg, "all") == 0)
                o->pairs = GW_P2P_PAIRS_ROUND;
            else if (strcmp(optarg, "serial") == 0)
                o->pairs = GW_P2P_PAIRS_ALONE;
            else
                return usage_error("--pairs takes first, all or serial, not \"%s\"", optarg);
            break;
        }
    }
    if ((c = gw_kit_no_operands(&prog, argc, argv)) >= 0)
        return c;
    if (o->sw.minbytes > o->sw.maxbytes)
        return usage_error("--minbytes %zu is above --maxbytes %zu", o->sw.minbytes,
                           o->sw.maxbytes);
    return -1;
}

static void print_num(double v, int width, int prec)
{
    if (isnan(v))
        printf(" %*s", width, "-");
    else
        printf(" %*.*f", width, prec, v);
}

/* GW_P2P_SEND's word for comm's mode. */
static const char *send_mode_name(const gw_comm_t *comm)
{
    return gw_comm_p2p_send(comm) == GW_P2P_SEND_STANDARD ? "standard" : "sync";
}

static void write_json(const gw_p2p_opts_t *o, gw_comm_t *comm, const gw_p2p_result_t *res,
                       size_t nres, const char *error)
{
    FILE *f = gw_kit_fopen_private(o->json);
    if (!f) {
        perror(o->json);
        return;
    }
    gw_kit_json_t j;
    gw_kit_json_start(&j, f, 6);
    gw_kit_json_object(&j, NULL, NULL);
    gw_kit_json_str(&j, "benchmark", "p2p");
    gw_kit_json_str(&j, "transport", gw_comm_transport(comm));
    gw_kit_json_str(&j, "p2p_send", send_mode_name(comm));
    gw_kit_json_int(&j, "ranks", gw_comm_size(comm));
    gw_kit_json_int(&j, "iters", o->sw.iters);
    gw_kit_json_int(&j, "warmup_iters", o->sw.warmup);
    gw_kit_json_int(&j, "window", o->window);
    gw_kit_json_int(&j, "check", o->check);
    gw_kit_json_break(&j, "\n ");
    gw_kit_json_str(&j, "error", error);
    gw_kit_json_break(&j, "\n ");
    gw_kit_json_array(&j, "results", "\n  ");
    for (size_t i = 0; i < nres; i++) {
        const gw_p2p_result_t *p = &res[i];
        gw_kit_json_object(&j, NULL, NULL);
        gw_kit_json_uint(&j, "bytes", p->bytes);
        gw_kit_json_num(&j, "uni_GBps", p->uni);
        gw_kit_json_num(&j, "bidir_GBps", p->bidir);
        gw_kit_json_object(&j, "lat_us", NULL);
        gw_kit_json_num(&j, "p50", p->p50);
        gw_kit_json_num(&j, "p90", p->p90);
        gw_kit_json_num(&j, "p99", p->p99);
        gw_kit_json_num(&j, "min", p->min);
        gw_kit_json_num(&j, "max", p->max);
        gw_kit_json_close(&j, NULL);
        gw_kit_json_int(&j, "wrong", p->wrong);
        gw_kit_json_close(&j, NULL);
    }
    gw_kit_json_close(&j, "\n");
    gw_kit_json_close(&j, NULL);
    fputc('\n', f);
    fclose(f);
}

int gw_bench_p2p_main(int argc, char **argv)
{
    gw_p2p_opts_t o;
    int rc = parse_opts(argc, argv, &o);
    if (rc >= 0)
        return rc;
    gw_comm_t *comm = NULL;
    gw_status_t st = GW_OK;
    int rank, size;
    if (gw_bench_join("gradwire-bench p2p", &comm, &rank, &size) != 0)
        return GW_BENCH_EXIT_FAIL;
    if (size < 2) {
        fprintf(stderr, "gradwire-bench p2p: needs at least 2 ranks (have %d)\n", size);
        gw_comm_destroy(comm);
        return GW_BENCH_EXIT_USAGE;
    }
    if (o.pairs != GW_P2P_PAIR_01) {
        rc = gw_p2p_all_pairs(&o, comm, rank, size);
        gw_comm_destroy(comm);
        return rc;
    }
    if (rank > 1) {
        gw_comm_destroy(comm);
        return 0;
    }
    gw_p2p_pair_t r;
    size_t sizes[64], nres = 0, nsizes = gw_p2p_sizes(&o, sizes, 64);
    gw_p2p_result_t res[64];
    if (gw_p2p_pair_open(&r, &o, comm, rank) != 0) {
        gw_comm_destroy(comm);
        return GW_BENCH_EXIT_FAIL;
    }
    gw_p2p_pair_with(&r, 1 - rank);
    if (rank == 0) {
        printf("# gradwire-bench p2p: rank 0 <-> rank 1 over %s (%d ranks), %ld iterations "
               "(+%ld warm-up), window %ld, check %s\n",
               gw_comm_transport(comm), size, o.sw.iters, o.sw.warmup, o.window,
               o.check ? "on" : "off");
        printf("# sends complete %s (GW_P2P_SEND=%s)\n",
               gw_comm_p2p_send(comm) == GW_P2P_SEND_STANDARD
                   ? "once the buffer may be reused, as MPI_Send"
                   : "once the receiver accepted them, as MPI_Ssend (a receipt each)",
               send_mode_name(comm));
        printf("# GB/s = 1e9 bytes/s; latency is one way (half the round trip)\n#\n");
        printf("# %10s %10s %11s %10s %9s %9s %9s %9s %8s\n", "size(B)", "uni(GB/s)", "bidir(GB/s)",
               "lat_p50", "lat_p90", "lat_p99", "lat_min", "lat_max", "#wrong");
        fflush(stdout);
    }
    char error[256] = "";
    for (; nres < nsizes; nres++) {
        size_t s = sizes[nres];
        st = gw_p2p_run_size(&r, s, &res[nres]);
        if (st != GW_OK) {
            snprintf(error, sizeof(error), "size %zu: %s", s, gw_status_str(st));
            fprintf(stderr, "gradwire-bench p2p: rank %d: %s\n", rank, error);
            break;
        }
        if (rank == 0) {
            const gw_p2p_result_t *p = &res[nres];
            printf("  %10zu", p->bytes);
            print_num(p->uni, 10, 4);
            print_num(p->bidir, 11, 4);
            print_num(p->p50, 10, 2);
            print_num(p->p90, 9, 2);
            print_num(p->p99, 9, 2);
            print_num(p->min, 9, 2);
            print_num(p->max, 9, 2);
            printf(" %8lld\n", (long long)p->wrong);
            fflush(stdout);
        }
    }
    /* Rank 1's wrong bytes, so that rank 0's verdict covers both. */
    int64_t theirs = 0;
    if (st == GW_OK)
        st = rank == 0 ? gw_recv(comm, &theirs, 1, GW_INT64, 1)
                       : gw_send(comm, &r.wrong, 1, GW_INT64, 0);
    int64_t total = r.wrong + theirs;
    if (rank == 0) {
        if (st == GW_OK)
            printf("# wrong bytes: %lld (rank 0: %lld, rank 1: %lld)\n", (long long)total,
                   (long long)r.wrong, (long long)theirs);
        if (o.json)
            write_json(&o, comm, res, nres, error[0] ? error : NULL);
    }
    gw_p2p_pair_close(&r);
    gw_comm_destroy(comm);
    return st == GW_OK && total == 0 ? 0 : GW_BENCH_EXIT_FAIL;
}
