/*
 * bench_mbw_mr.c - `gradwire-bench mbw_mr`: multiple bandwidth and message
 * rate, as OSU's osu_mbw_mr, so that the numbers compare.
 *
 * P pairs (-p, default half the ranks): rank i of the first P sends to rank
 * i + P, all pairs at once. Per size, each iteration the sender posts a
 * window of W non-blocking sends (-W, default 64) and waits for them all;
 * the receiver posts W receives, waits for them, and answers with a
 * one-byte message, which the sender waits for before its next window
 * (OSU's handshake, so that a window never runs ahead into the next). A
 * pair's rate is W x iters messages over its sender's time for the timed
 * iterations; the job's message rate is the sum over the pairs and its
 * bandwidth that times the size (MB = 1e6 bytes, OSU's unit). Ranks beyond
 * the 2P of the pairs rest.
 *
 * Every message of a window lands in one receive buffer (OSU's layout: W
 * buffers of the largest size would not fit a small node); the messages
 * all carry the sender's pattern, so with -c 1 what the buffer holds after
 * the size's last window is checked byte by byte, having been overwritten
 * with a value no pattern byte takes (0xff) before the size began. The
 * wrong bytes of all receivers are summed.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MAX_SIZES 64

struct mr_opts {
    gw_bench_sweep_t sw;
    long pairs; /* 0: half the ranks */
    long window;
    int check;
    const char *json;
};

struct mr_row {
    size_t bytes;
    double mbps, rate; /* MB/s and messages/s, summed over the pairs */
    int64_t wrong;     /* -1: not checked */
};

struct mr_run {
    struct mr_opts o;
    gw_comm_t *comm;
    int rank, size, peer, sender; /* peer -1: this rank rests */
    uint8_t *sbuf, *rbuf;
    gw_handle_t **h;
    struct mr_row rows[MAX_SIZES];
    size_t nrows;
    gw_bench_hosts_t place;
    char error[512];
};

static const gw_kit_prog_t prog = {"gradwire-bench mbw_mr",
                                   "\n(see gradwire-bench mbw_mr --help)\n"};

static void usage(FILE *out)
{
    fprintf(out, "usage: gradwire-bench mbw_mr [options]\n"
                 "\n"
                 "  -b, --minbytes N      smallest message in bytes (default 1); K, M, G suffixes\n"
                 "  -e, --maxbytes N      largest message in bytes (default 4M)\n"
                 "  -f, --stepfactor N    multiply the size by N each step (default 2)\n"
                 "  -n, --iters N         timed windows per size (default 100)\n"
                 "  -w, --warmup_iters N  untimed windows before them (default 10)\n"
                 "  -p, --pairs P         pairs sending at once: rank i to rank i + P, for i < P\n"
                 "                        (default: half the ranks)\n"
                 "  -W, --window W        messages in flight per pair, each window ended by a\n"
                 "                        reply from the receiver (default 64)\n"
                 "  -c, --check 0|1       check what the receivers got (default 1)\n"
                 "      --json FILE       also write parameters and results as JSON (rank 0)\n"
                 "  -h, --help            show this help\n"
                 "\n"
                 "Measures the message rate and bandwidth of P pairs at once, as OSU's\n"
                 "osu_mbw_mr: MB/s (1e6 bytes) and messages/s summed over the pairs. Run one\n"
                 "process per rank, e.g. `gradwire launch -n 4 gradwire-bench mbw_mr`. Rank 0\n"
                 "prints where each rank runs and the table. Exit status: 0 if every call\n"
                 "succeeded and no byte was wrong, 1 otherwise, 2 for a bad command line.\n");
}

static int parse(int argc, char **argv, struct mr_opts *o)
{
    static const struct option longopts[] = {GW_BENCH_SWEEP_LONGOPTS,
                                             {"pairs", required_argument, NULL, 'p'},
                                             {"window", required_argument, NULL, 'W'},
                                             {"check", required_argument, NULL, 'c'},
                                             GW_BENCH_JSON_LONGOPT,
                                             GW_BENCH_END_LONGOPTS};
    const gw_bench_cmdline_t cl = {&prog, usage, "+:b:e:f:n:w:p:W:c:h", longopts, &o->sw, &o->json,
                                   NULL,  NULL};
    int c, rc;
    long v;
    memset(o, 0, sizeof(*o));
    o->sw = (gw_bench_sweep_t){1, (size_t)4 << 20, 2, 100, 10};
    o->window = 64;
    o->check = 1;
    gw_kit_getopt_begin();
    while ((c = gw_bench_next_opt(&cl, argc, argv, &rc)) != -1) {
        if (c == GW_BENCH_OPT_EXIT)
            return rc;
        switch (c) {
        case 'p':
            if (gw_kit_parse_long(optarg, 1, 1 << 20, &v) != 0)
                return gw_kit_usage_error(
                    &prog, "-p wants a number of pairs (1 or more), not \"%s\"", optarg);
            o->pairs = v;
            break;
        case 'W':
            if (gw_kit_parse_long(optarg, 1, 4096, &v) != 0)
                return gw_kit_usage_error(
                    &prog, "-W wants a window of 1..4096 messages, not \"%s\"", optarg);
            o->window = v;
            break;
        case 'c':
            if (gw_kit_parse_long(optarg, 0, 1, &v) != 0)
                return gw_kit_usage_error(&prog, "-c wants 0 or 1, not \"%s\"", optarg);
            o->check = (int)v;
            break;
        default:
            return gw_kit_getopt_error(&prog, '?', argv);
        }
    }
    if ((c = gw_kit_no_operands(&prog, argc, argv)) >= 0)
        return c;
    if (o->sw.minbytes == 0 || o->sw.minbytes > o->sw.maxbytes)
        return gw_kit_usage_error(&prog, "sizes from -b %zu to -e %zu: -b must be 1 to -e",
                                  o->sw.minbytes, o->sw.maxbytes);
    size_t n = 0;
    for (size_t s = o->sw.minbytes; s && s <= o->sw.maxbytes; s = s * (size_t)o->sw.factor)
        if (++n > MAX_SIZES || s > SIZE_MAX / (size_t)o->sw.factor)
            break;
    if (n > MAX_SIZES)
        return gw_kit_usage_error(&prog, "more than %d sizes from -b to -e: use a larger -f",
                                  MAX_SIZES);
    return -1;
}

/* The sender's byte i: never 0xff, the poison. */
static uint8_t pattern(int sender, size_t size, size_t i)
{
    return (uint8_t)(((size_t)sender * 31 + size + i * 7) % 251);
}

#define failed(m, st, ...) gw_bench_fail((m)->error, sizeof((m)->error), (m)->rank, st, __VA_ARGS__)

/* One window and its reply; on this rank's side of its pair. */
static gw_status_t window(struct mr_run *m, size_t size)
{
    gw_status_t st = GW_OK, ws;
    long posted = 0;
    uint8_t ack = 1;
    for (; posted < m->o.window && st == GW_OK; posted++) {
        st = m->sender ? gw_isend(m->comm, m->sbuf, size, GW_UINT8, m->peer, &m->h[posted])
                       : gw_irecv(m->comm, m->rbuf, size, GW_UINT8, m->peer, &m->h[posted]);
        if (st != GW_OK)
            break;
    }
    for (long k = 0; k < posted; k++)
        if ((ws = gw_wait(m->h[k])) != GW_OK && st == GW_OK)
            st = ws;
    if (st != GW_OK)
        return st;
    return m->sender ? gw_recv(m->comm, &ack, 1, GW_UINT8, m->peer)
                     : gw_send(m->comm, &ack, 1, GW_UINT8, m->peer);
}

static int run_size(struct mr_run *m, size_t size, struct mr_row *row)
{
    gw_status_t st;
    double rate = 0;
    int64_t wrong = 0, all_wrong = 0;
    if (m->peer >= 0 && m->sender)
        for (size_t i = 0; i < size; i++)
            m->sbuf[i] = pattern(m->rank, size, i);
    if (m->peer >= 0 && !m->sender)
        memset(m->rbuf, 0xff, size);
    for (long it = 0; m->peer >= 0 && it < m->o.sw.warmup; it++)
        if ((st = window(m, size)) != GW_OK)
            return failed(m, st, "window of %zu B with rank %d (warm-up)", size, m->peer);
    if ((st = gw_barrier(m->comm)) != GW_OK)
        return failed(m, st, "gw_barrier before %zu B", size);
    double t0 = gw_kit_now_us();
    for (long it = 0; m->peer >= 0 && it < m->o.sw.iters; it++)
        if ((st = window(m, size)) != GW_OK)
            return failed(m, st, "window of %zu B with rank %d (iteration %ld)", size, m->peer, it);
    double us = gw_kit_now_us() - t0;
    if (m->peer >= 0 && m->sender && us > 0)
        rate = (double)m->o.window * (double)m->o.sw.iters / us * 1e6;
    if (m->peer >= 0 && !m->sender && m->o.check)
        for (size_t i = 0; i < size; i++)
            wrong += m->rbuf[i] != pattern(m->peer, size, i);
    if ((st = gw_allreduce(m->comm, &rate, &row->rate, 1, GW_FLOAT64, GW_SUM)) != GW_OK ||
        (st = gw_allreduce(m->comm, &wrong, &all_wrong, 1, GW_INT64, GW_SUM)) != GW_OK)
        return failed(m, st, "gw_allreduce of the rates");
    row->bytes = size;
    row->mbps = row->rate * (double)size / 1e6;
    row->wrong = m->o.check ? all_wrong : -1;
    return 0;
}

static void write_json(gw_bench_report_t *rep, const struct mr_run *m, int ok)
{
    gw_kit_json_t j;
    if (gw_bench_json_begin(&j, rep, m->o.json, "mbw_mr", m->comm) != 0)
        return;
    gw_kit_json_object(&j, "units", NULL);
    gw_kit_json_str(&j, "size", "bytes");
    gw_kit_json_str(&j, "bandwidth", "MB/s (1e6 bytes/s), summed over the pairs");
    gw_kit_json_str(&j, "rate", "messages/s, summed over the pairs");
    gw_kit_json_close(&j, NULL);
    gw_kit_json_object(&j, "params", NULL);
    gw_kit_json_uint(&j, "minbytes", m->o.sw.minbytes);
    gw_kit_json_uint(&j, "maxbytes", m->o.sw.maxbytes);
    gw_kit_json_int(&j, "stepfactor", m->o.sw.factor);
    gw_kit_json_int(&j, "iters", m->o.sw.iters);
    gw_kit_json_int(&j, "warmup_iters", m->o.sw.warmup);
    gw_kit_json_int(&j, "pairs", m->o.pairs);
    gw_kit_json_int(&j, "window", m->o.window);
    gw_kit_json_bool(&j, "check", m->o.check);
    gw_kit_json_close(&j, NULL);
    gw_kit_json_array(&j, "results", "\n    ");
    for (size_t i = 0; i < m->nrows; i++) {
        gw_kit_json_object(&j, NULL, NULL);
        gw_kit_json_uint(&j, "size", m->rows[i].bytes);
        gw_kit_json_num(&j, "mb_per_s", m->rows[i].mbps);
        gw_kit_json_num(&j, "messages_per_s", m->rows[i].rate);
        gw_kit_json_int_or_null(&j, "wrong", m->rows[i].wrong >= 0, m->rows[i].wrong);
        gw_kit_json_close(&j, NULL);
    }
    gw_kit_json_close(&j, "\n  ");
    gw_bench_json_end(&j, ok, m->error, m->o.json);
}

/* Buffers and the pairs; every rank learns whether all are ready. */
static int setup(struct mr_run *m, gw_bench_report_t *rep)
{
    int ok = 1;
    gw_status_t st;
    if (m->o.pairs == 0)
        m->o.pairs = m->size / 2;
    if (m->o.pairs == 0 || 2 * m->o.pairs > m->size) {
        if (m->rank == 0)
            fprintf(stderr,
                    "gradwire-bench mbw_mr: %ld pair%s need%s %ld ranks, and the job has %d\n",
                    m->o.pairs ? m->o.pairs : 1, m->o.pairs > 1 ? "s" : "",
                    m->o.pairs > 1 ? "" : "s", 2 * (m->o.pairs ? m->o.pairs : 1), m->size);
        snprintf(m->error, sizeof(m->error), "not enough ranks for the pairs");
        /* Every rank sees this, and all of them still meet in setup_end:
         * none exits (and has the launcher stop rank 0) before rank 0 has
         * said why. */
        char ignored[sizeof(m->error)];
        gw_bench_setup_end(m->comm, m->rank, 0, "mbw_mr", m->o.json, rep, ignored, sizeof(ignored));
        return -1;
    }
    m->peer = m->rank < m->o.pairs       ? m->rank + (int)m->o.pairs
              : m->rank < 2 * m->o.pairs ? m->rank - (int)m->o.pairs
                                         : -1;
    m->sender = m->rank < m->o.pairs;
    m->sbuf = malloc(m->o.sw.maxbytes);
    m->rbuf = malloc(m->o.sw.maxbytes);
    m->h = calloc((size_t)m->o.window, sizeof(*m->h));
    if (!m->sbuf || !m->rbuf || !m->h) {
        fprintf(stderr, "gradwire-bench mbw_mr: rank %d: out of memory for 2 x %zu bytes\n",
                m->rank, m->o.sw.maxbytes);
        ok = 0;
    }
    if (gw_bench_place_alloc(&m->place, m->rank, m->size) != 0)
        ok = 0;
    if (gw_bench_setup_end(m->comm, m->rank, ok, "mbw_mr", m->o.json, rep, m->error,
                           sizeof(m->error)) != 0)
        return -1;
    if ((st = gw_bench_place_gather(m->comm, &m->place)) != GW_OK)
        return failed(m, st, "gw_gather of where the ranks run");
    rep->place = &m->place;
    return 0;
}

int gw_bench_mbw_mr_main(int argc, char **argv)
{
    struct mr_run *m = calloc(1, sizeof(*m));
    gw_bench_report_t rep = {0};
    if (!m) {
        fprintf(stderr, "gradwire-bench mbw_mr: out of memory\n");
        return GW_BENCH_EXIT_FAIL;
    }
    int rc = parse(argc, argv, &m->o);
    if (rc >= 0 || gw_bench_join("gradwire-bench mbw_mr", &m->comm, &m->rank, &m->size) != 0) {
        free(m);
        return rc >= 0 ? rc : GW_BENCH_EXIT_FAIL;
    }
    rc = GW_BENCH_EXIT_FAIL;
    if (setup(m, &rep) == 0) {
        rc = 0;
        if (m->rank == 0) {
            printf("# gradwire-bench mbw_mr, gradwire %s\n", gw_version());
            printf("# ranks: %d  transport: %s  pairs: %ld  window: %ld  iters: %ld  warmup "
                   "iters: %ld  validation: %d\n#\n",
                   m->size, gw_comm_transport(m->comm), m->o.pairs, m->o.window, m->o.sw.iters,
                   m->o.sw.warmup, m->o.check);
            gw_bench_place_print(&m->place, stdout);
            printf("#\n#%11s  %14s  %14s  %8s\n", "size (B)", "MB/s", "messages/s", "#wrong");
            fflush(stdout);
        }
        int64_t wrong = 0;
        for (size_t s = m->o.sw.minbytes; s && s <= m->o.sw.maxbytes && rc == 0;
             s = s > SIZE_MAX / (size_t)m->o.sw.factor ? 0 : s * (size_t)m->o.sw.factor) {
            struct mr_row *row = &m->rows[m->nrows];
            if (run_size(m, s, row) != 0) {
                rc = GW_BENCH_EXIT_FAIL;
                break;
            }
            m->nrows++;
            wrong += row->wrong > 0 ? row->wrong : 0;
            if (m->rank == 0) {
                char w[24] = "N/A";
                if (row->wrong >= 0)
                    snprintf(w, sizeof(w), "%lld", (long long)row->wrong);
                printf("%12zu  %14.2f  %14.0f  %8s\n", s, row->mbps, row->rate, w);
                fflush(stdout);
            }
        }
        if (wrong > 0)
            rc = GW_BENCH_EXIT_FAIL;
        if (m->rank == 0) {
            if (!m->o.check)
                printf("# Wrong bytes          : N/A (not checked: -c 0)\n");
            else
                printf("# Wrong bytes          : %lld %s\n", (long long)wrong,
                       wrong ? "FAILED" : "OK");
            if (m->error[0])
                printf("# Error                : %s\n", m->error);
            printf("#\n");
            fflush(stdout);
        }
    }
    if (rep.f)
        write_json(&rep, m, rc == 0);
    gw_bench_place_free(&m->place);
    free(m->h);
    free(m->sbuf);
    free(m->rbuf);
    gw_comm_destroy(m->comm);
    free(m);
    return rc;
}
