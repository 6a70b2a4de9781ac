/*
 * check_main.c - gradwire-check (`gradwire check`): cluster acceptance
 * testing, run as a job with one or more ranks per host under any launcher
 * (gradwire launch --hosts, srun, mpirun); rank 0 writes the report.
 *
 * The phases, in order (each in its own file, see check.h): host sanity,
 * gathered to rank 0; the node checks (memory bandwidth, GEMM, GPU: one
 * rank per host measures, hosts sharing a machine in turns); the plan (with --budget: one quick circle round is
 * timed first and rank 0 chooses what fits, then tells every rank); the
 * link matrix in circle rounds; serial retests of the suspect links, then
 * of each suspect host against a known-good partner; the collectives;
 * the verdicts and the reports. Rank 0 prints a progress line after each
 * step.
 *
 * Failure. Every call fails once any rank has died or hung (the library's
 * timeout, GW_TIMEOUT_MS, or --timeout), and gw_comm_culprit names the
 * rank at fault, the same on every rank: rank 0 then FAILs that rank's
 * host with the phase it died in, writes every report with what it had
 * measured, and exits 1. A launcher that stops the other ranks when one
 * dies (gradwire launch, mpirun, srun: SIGTERM, SIGKILL seconds later)
 * would take rank 0's report with it, and the ranks it stops would die as
 * suspects beside the real culprit (in test_check, a rank killed during the
 * allreduce was blamed on a neighbour that the launcher had stopped): so
 * every rank lets the first SIGTERM pass, the job fails on the rank that
 * really died, and rank 0 writes its report; a second SIGTERM ends a rank.
 *
 * Exit status: 0 when nothing FAILed (WARN allowed) and everything was
 * judged, 1 when something FAILed or the job failed, 2 for a bad command
 * line or a setup error (a baseline that cannot be read, an output that
 * cannot be written, no job to join), 3 when nothing FAILed but something
 * could not be judged (NOT_JUDGED: links between two hosts with no line
 * rate known and no --baseline; timing gathered while oversubscribed).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static const gw_kit_prog_t prog = {"gradwire-check", "\n(see gradwire check --help)\n"};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gradwire check [options]   (as a job: gradwire launch ... gradwire check)\n"
            "\n"
            "Cluster acceptance test: host sanity, the node (memory bandwidth, GEMM, GPU),\n"
            "every pair's latency and bandwidth in circle rounds, allreduce bus bandwidth\n"
            "and latency with the data checked, then PASS/WARN/FAIL per host and link;\n"
            "rank 0 writes the reports.\n"
            "\n"
            "  -q, --quick             fewer iterations (about 5x faster)\n"
            "  -B, --budget S          plan what fits in S seconds (from a first quick round)\n"
            "                          and say what was left out\n"
            "  -t, --timeout S         a rank that hangs fails the job after S s (default:\n"
            "                          GW_TIMEOUT_MS, the library's)\n"
            "      --lat-iters N       8-byte ping-pongs per pair (default 200; quick 50)\n"
            "      --bw-iters N        messages per direction per pair (default 40; quick 8)\n"
            "      --bw-size SIZE      bandwidth message size (default 1M)\n"
            "      --coll-size SIZE    allreduce size for bus bandwidth (default 16M)\n"
            "      --coll-iters N      timed large allreduces (default 5; quick 2)\n"
            "      --no-retest         judge suspects without retesting them alone\n"
            "      --no-node           leave out the node checks (memory bandwidth, GEMM, GPU)\n"
            "      --node-size SIZE    the triad's arrays and the GPU's copies (default 32M)\n"
            "      --gemm-size N       the GEMM's matrix order (default 1024)\n"
            "      --node-time S       seconds each node measurement runs (default 0.2; one\n"
            "                          rank per host measures, hosts sharing a machine in turns)\n"
            "      --node-fraction X   a host's memory bandwidth, GEMM or GPU FAILs under X x\n"
            "                          the hosts' median (or its --baseline figure), WARNs\n"
            "                          under (1+X)/2 x (default 0.7); fewer than 3 hosts and\n"
            "                          no --baseline: reported, not judged\n"
            "      --lat-factor X      bad when latency p50 > X x reference (default 2.1)\n"
            "      --tail-factor X     bad when latency p99 > X x reference (default 20)\n"
            "      --tail-floor-us U   ... and above U microseconds (default 10000)\n"
            "      --bw-fraction X     bad when bandwidth < X x reference (default 0.93)\n"
            "      --host-fraction X   a host is suspect when more than X of its links are\n"
            "                          bad (default 0.5)\n"
            "      --baseline FILE     judge against FILE's figures, not the cluster's medians\n"
            "      --baseline RATE     judge links between hosts against RATE (\"12.5GB/s\" or\n"
            "                          \"100Gbit/s\"), bad under --bw-fraction of it\n"
            "      --line-fraction X   between fewer than 3 hosts, without --baseline: bad when\n"
            "                          bandwidth < X x the NICs' line rate (default 0.5)\n"
            "      --coll-fraction X   allreduce busbw WARNs under X x the slowest link between\n"
            "                          hosts, FAILs under X/2 (default 0.5)\n"
            "      --judge-oversubscribed  FAIL on timing even where ranks outnumber their\n"
            "                          machine's CPUs (by default such a FAIL is NOT_JUDGED:\n"
            "                          \"inconclusive: oversubscribed\")\n"
            "      --save-baseline FILE  save this run's figures (links, allreduce, each host's\n"
            "                          node figures) as a baseline\n"
            "      --json FILE         JSON report (schema: README, Acceptance testing)\n"
            "      --junit FILE        JUnit XML: a testcase per host, per link, allreduce\n"
            "      --markdown FILE     Markdown report\n"
            "      --heatmap FILE      PNG of the bandwidth matrix (needs gnuplot)\n"
            "  -h, --help              show this help\n"
            "\n"
            "Exit status: 0 all PASS (WARN allowed), 1 something FAILed, 2 usage or setup\n"
            "error, 3 nothing FAILed but something could not be judged (NOT_JUDGED: two\n"
            "hosts with no line rate known and no --baseline; timing that would FAIL a\n"
            "node gathered while ranks outnumbered CPUs). Files are written mode 0600.\n");
}

#define usage_error(...) gw_kit_usage_error(&prog, __VA_ARGS__)

enum {
    OPT_LAT_ITERS = 256,
    OPT_BW_ITERS,
    OPT_BW_SIZE,
    OPT_COLL_SIZE,
    OPT_COLL_ITERS,
    OPT_NO_RETEST,
    OPT_NO_NODE,
    OPT_NODE_SIZE,
    OPT_GEMM_SIZE,
    OPT_NODE_TIME,
    OPT_NODE_FRACTION,
    OPT_LAT_FACTOR,
    OPT_TAIL_FACTOR,
    OPT_TAIL_FLOOR,
    OPT_BW_FRACTION,
    OPT_HOST_FRACTION,
    OPT_LINE_FRACTION,
    OPT_COLL_FRACTION,
    OPT_JUDGE_OVERSUB,
    OPT_BASELINE,
    OPT_SAVE_BASELINE,
    OPT_JSON,
    OPT_JUNIT,
    OPT_MARKDOWN,
    OPT_HEATMAP,
};

static int parse_opts(int argc, char **argv, gwc_opts_t *o)
{
    static const struct option longopts[] = {
        {"quick", no_argument, NULL, 'q'},
        {"budget", required_argument, NULL, 'B'},
        {"timeout", required_argument, NULL, 't'},
        {"lat-iters", required_argument, NULL, OPT_LAT_ITERS},
        {"bw-iters", required_argument, NULL, OPT_BW_ITERS},
        {"bw-size", required_argument, NULL, OPT_BW_SIZE},
        {"coll-size", required_argument, NULL, OPT_COLL_SIZE},
        {"coll-iters", required_argument, NULL, OPT_COLL_ITERS},
        {"no-retest", no_argument, NULL, OPT_NO_RETEST},
        {"no-node", no_argument, NULL, OPT_NO_NODE},
        {"node-size", required_argument, NULL, OPT_NODE_SIZE},
        {"gemm-size", required_argument, NULL, OPT_GEMM_SIZE},
        {"node-time", required_argument, NULL, OPT_NODE_TIME},
        {"node-fraction", required_argument, NULL, OPT_NODE_FRACTION},
        {"lat-factor", required_argument, NULL, OPT_LAT_FACTOR},
        {"tail-factor", required_argument, NULL, OPT_TAIL_FACTOR},
        {"tail-floor-us", required_argument, NULL, OPT_TAIL_FLOOR},
        {"bw-fraction", required_argument, NULL, OPT_BW_FRACTION},
        {"host-fraction", required_argument, NULL, OPT_HOST_FRACTION},
        {"line-fraction", required_argument, NULL, OPT_LINE_FRACTION},
        {"coll-fraction", required_argument, NULL, OPT_COLL_FRACTION},
        {"judge-oversubscribed", no_argument, NULL, OPT_JUDGE_OVERSUB},
        {"baseline", required_argument, NULL, OPT_BASELINE},
        {"save-baseline", required_argument, NULL, OPT_SAVE_BASELINE},
        {"json", required_argument, NULL, OPT_JSON},
        {"junit", required_argument, NULL, OPT_JUNIT},
        {"markdown", required_argument, NULL, OPT_MARKDOWN},
        {"heatmap", required_argument, NULL, OPT_HEATMAP},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof(*o));
    long lat = -1, bw = -1, coll = -1, v;
    o->bw_bytes = (size_t)1 << 20;
    o->coll_bytes = (size_t)16 << 20;
    o->retest = 1;
    o->lat_factor = 2.1;
    o->tail_factor = 20;
    o->tail_floor_us = 10000;
    o->bw_fraction = 0.93;
    o->host_fraction = 0.5;
    o->line_fraction = 0.5;
    o->coll_fraction = 0.5;
    o->node = 1;
    o->node_bytes = (size_t)32 << 20;
    o->gemm_n = 1024;
    o->node_s = 0.2;
    o->node_fraction = 0.7;
    int c;
    gw_kit_getopt_begin();
    while ((c = getopt_long(argc, argv, "+:qB:t:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'q':
            o->quick = 1;
            break;
        case 'B':
            if (gw_kit_parse_double(optarg, 1, 1e6, &o->budget_s) != 0)
                return usage_error("--budget takes seconds in [1, 1e6], not \"%s\"", optarg);
            break;
        case 't':
            if (gw_kit_parse_long(optarg, 1, 86400, &o->timeout_s) != 0)
                return usage_error("--timeout takes seconds in [1, 86400], not \"%s\"", optarg);
            break;
        case OPT_LAT_ITERS:
        case OPT_BW_ITERS:
        case OPT_COLL_ITERS:
            if (gw_kit_parse_long(optarg, 1, 1000000, &v) != 0)
                return usage_error("--%s takes an integer in [1, 1000000], not \"%s\"",
                                   c == OPT_LAT_ITERS  ? "lat-iters"
                                   : c == OPT_BW_ITERS ? "bw-iters"
                                                       : "coll-iters",
                                   optarg);
            *(c == OPT_LAT_ITERS ? &lat : c == OPT_BW_ITERS ? &bw : &coll) = v;
            break;
        case OPT_BW_SIZE:
        case OPT_COLL_SIZE: {
            size_t s;
            if (gw_kit_parse_size(optarg, &s) != 0 || s < 8 || s > ((size_t)1 << 30))
                return usage_error("--%s takes a size in [8, 1G], not \"%s\"",
                                   c == OPT_BW_SIZE ? "bw-size" : "coll-size", optarg);
            *(c == OPT_BW_SIZE ? &o->bw_bytes : &o->coll_bytes) = s;
            break;
        }
        case OPT_NO_RETEST:
            o->retest = 0;
            break;
        case OPT_NO_NODE:
            o->node = 0;
            break;
        case OPT_NODE_SIZE:
            if (gw_kit_parse_size(optarg, &o->node_bytes) != 0 || o->node_bytes < 4096 ||
                o->node_bytes > ((size_t)16 << 30))
                return usage_error("--node-size takes a size in [4K, 16G], not \"%s\"", optarg);
            break;
        case OPT_GEMM_SIZE:
            if (gw_kit_parse_long(optarg, 16, 32768, &o->gemm_n) != 0)
                return usage_error("--gemm-size takes a matrix order in [16, 32768], not \"%s\"",
                                   optarg);
            break;
        case OPT_NODE_TIME:
            if (gw_kit_parse_double(optarg, 0.01, 60, &o->node_s) != 0)
                return usage_error("--node-time takes seconds in [0.01, 60], not \"%s\"", optarg);
            break;
        case OPT_NODE_FRACTION:
            if (gw_kit_parse_double(optarg, 0, 1, &o->node_fraction) != 0)
                return usage_error("--node-fraction takes a fraction in [0, 1], not \"%s\"",
                                   optarg);
            break;
        case OPT_JUDGE_OVERSUB:
            o->judge_oversubscribed = 1;
            break;
        case OPT_LAT_FACTOR:
        case OPT_TAIL_FACTOR:
            if (gw_kit_parse_double(optarg, 1, 1e6,
                                    c == OPT_LAT_FACTOR ? &o->lat_factor : &o->tail_factor) != 0)
                return usage_error("--%s takes a factor of at least 1, not \"%s\"",
                                   c == OPT_LAT_FACTOR ? "lat-factor" : "tail-factor", optarg);
            break;
        case OPT_TAIL_FLOOR:
            if (gw_kit_parse_double(optarg, 0, 1e9, &o->tail_floor_us) != 0)
                return usage_error("--tail-floor-us takes microseconds in [0, 1e9], not \"%s\"",
                                   optarg);
            break;
        case OPT_BW_FRACTION:
        case OPT_HOST_FRACTION:
            if (gw_kit_parse_double(
                    optarg, 0, 1, c == OPT_BW_FRACTION ? &o->bw_fraction : &o->host_fraction) != 0)
                return usage_error("--%s takes a fraction in [0, 1], not \"%s\"",
                                   c == OPT_BW_FRACTION ? "bw-fraction" : "host-fraction", optarg);
            break;
        case OPT_LINE_FRACTION:
        case OPT_COLL_FRACTION:
            if (gw_kit_parse_double(optarg, 0, 1,
                                    c == OPT_LINE_FRACTION ? &o->line_fraction
                                                           : &o->coll_fraction) != 0)
                return usage_error("--%s takes a fraction in [0, 1], not \"%s\"",
                                   c == OPT_LINE_FRACTION ? "line-fraction" : "coll-fraction",
                                   optarg);
            break;
        case OPT_BASELINE: {
            int rate = gwc_parse_rate(optarg, &o->base_rate);
            if (rate < 0)
                return usage_error("--baseline takes a file or a rate such as 12.5GB/s or "
                                   "100Gbit/s, not \"%s\"",
                                   optarg);
            o->baseline = rate ? NULL : optarg; /* the last --baseline counts */
            if (!rate)
                o->base_rate = 0;
            break;
        }
        case OPT_SAVE_BASELINE:
            o->save_baseline = optarg;
            break;
        case OPT_JSON:
            o->json = optarg;
            break;
        case OPT_JUNIT:
            o->junit = optarg;
            break;
        case OPT_MARKDOWN:
            o->markdown = optarg;
            break;
        case OPT_HEATMAP:
            o->heatmap = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            return gw_kit_getopt_error(&prog, c, argv);
        }
    }
    if ((c = gw_kit_no_operands(&prog, argc, argv)) >= 0)
        return c;
    o->lat_iters = lat > 0 ? lat : o->quick ? 50 : 200;
    o->bw_iters = bw > 0 ? bw : o->quick ? 8 : 40;
    o->coll_iters = coll > 0 ? coll : o->quick ? 2 : 5;
    o->coll_lat_iters = o->quick ? 20 : 100;
    return -1;
}

/* ---- SIGTERM: every rank lets the first pass (see the top) ---- */

static volatile sig_atomic_t terminated;

static void on_term(int sig)
{
    terminated = 1;
    signal(sig, SIG_DFL);
}

/* ---- the plan ---- */

static void note_left_out(gwc_run_t *r, const char *what)
{
    size_t used = strlen(r->left_out);
    snprintf(r->left_out + used, sizeof(r->left_out) - used, "%s%s", used ? "; " : "", what);
}

/* With --budget: round 0 at quick iterations, timed; rank 0 chooses and
 * every rank learns the plan. *first: the first round still to run. */
static gw_status_t plan(gwc_run_t *r, int *first)
{
    const gwc_opts_t *o = r->o;
    int rounds = r->size - 1 + (r->size & 1);
    r->rounds_planned = rounds;
    r->lat_iters = o->lat_iters;
    r->bw_iters = o->bw_iters;
    r->coll_iters = o->coll_iters;
    r->do_coll = r->size > 1;
    r->do_retest = o->retest;
    *first = 0;
    if (o->budget_s <= 0 || r->size < 2)
        return GW_OK;
    long full_lat = r->lat_iters, full_bw = r->bw_iters;
    r->lat_iters = 50 < full_lat ? 50 : full_lat;
    r->bw_iters = 8 < full_bw ? 8 : full_bw;
    double t = gw_kit_now_s();
    gw_status_t st = gwc_matrix_round(r, 0);
    if (st != GW_OK)
        return st;
    int32_t p[6] = {0};
    if (r->rank == 0) {
        double t_quick = gw_kit_now_s() - t, left = o->budget_s - (gw_kit_now_s() - r->t0);
        double scale = (double)full_bw / (double)r->bw_iters;
        double t_full = t_quick * (scale > 1 ? scale : 1);
        /* The allreduce: about 2 x its size through the slowest link. */
        double minbw = INFINITY;
        for (int i = 0; i < r->nlinks; i++)
            if (r->links[i].measured) {
                double b = fmin(r->links[i].fig.bw_ab, r->links[i].fig.bw_ba);
                minbw = fmin(minbw, b > 0 ? b : 1e-3);
            }
        double per_call = 2.0 * (double)o->coll_bytes / (isfinite(minbw) ? minbw * 1e9 : 1e8);
        double t_coll = per_call * (double)(o->coll_iters + 1) + 0.5;
        double t_coll_quick = per_call * 3 + 0.5; /* a warm-up and 2 timed */
        double reserve = 0.2 * o->budget_s;       /* retests */
        int mode, k = rounds;
        if (rounds * t_full + t_coll + reserve <= left)
            mode = 2; /* full: round 0 again at full iterations */
        else {
            mode = 1;
            double for_rounds = left - reserve - t_coll_quick;
            if ((rounds - 1) * t_quick > for_rounds) {
                k = 1 + (int)fmax(0, floor((left - reserve) / t_quick));
                if (k > rounds)
                    k = rounds;
                for_rounds = left - reserve - (k - 1) * t_quick;
            }
            p[3] = for_rounds >= t_coll_quick;
        }
        p[0] = mode;
        p[1] = k;
        p[2] = mode == 2 || p[3];
        p[4] = reserve > 0 && r->do_retest;
        gwc_progress(r,
                     "budget %.0f s: a quick round took %.2f s; a full one would take %.2f s; "
                     "plan: %s, %d of %d rounds%s",
                     o->budget_s, t_quick, t_full, mode == 2 ? "full" : "quick", k, rounds,
                     p[2] ? "" : ", no collectives");
    }
    st = gw_broadcast(r->comm, p, p, 6, GW_INT32, 0);
    if (st != GW_OK)
        return st;
    if (p[0] == 2) {
        r->lat_iters = full_lat;
        r->bw_iters = full_bw;
        *first = 0;
    } else {
        *first = 1;
        r->coll_iters = 2;
        if (full_bw > r->bw_iters || full_lat > r->lat_iters)
            note_left_out(r, "full iterations (quick ones instead)");
    }
    r->rounds_planned = p[1];
    r->do_coll = p[2];
    r->do_retest = p[4];
    if (p[1] < rounds) {
        char text[128];
        snprintf(text, sizeof(text), "circle rounds %d..%d of %d (their links not measured)",
                 p[1] + 1, rounds, rounds);
        note_left_out(r, text);
    }
    if (!r->do_coll)
        note_left_out(r, "collectives");
    return GW_OK;
}

/* ---- the phases in order ---- */

static int over_budget(const gwc_run_t *r)
{
    return r->o->budget_s > 0 && gw_kit_now_s() - r->t0 > r->o->budget_s;
}

static gw_status_t retests(gwc_run_t *r, int hosts)
{
    int *pairs = NULL, n = 0, distinct = 0;
    if (r->rank == 0) {
        n = gwc_retest_list(r, hosts, &pairs, &distinct);
        if (n < 0)
            return GW_ERR_NO_MEMORY;
        if (!r->do_retest)
            n = 0;
        if (r->do_retest && n > 0 && over_budget(r)) {
            note_left_out(r, hosts ? "retests of suspect hosts" : "retests of suspect links");
            n = 0;
        }
        if (n > 0)
            gwc_progress(r, "%d %s alone", distinct,
                         hosts ? "suspect host(s) to retest, each against a known-good partner,"
                               : "suspect link(s) to retest twice");
    }
    gw_status_t st = gwc_retest(r, pairs, n);
    free(pairs);
    return st;
}

static gw_status_t run_phases(gwc_run_t *r, const char **phase)
{
    *phase = "host sanity";
    gw_status_t st = gwc_hosts_gather(r);
    if (st != GW_OK)
        return st;
    gwc_progress(r, "%d ranks on %d hosts over %s", r->size, r->nhosts, gw_comm_transport(r->comm));
    if (r->o->node) {
        *phase = "the node checks";
        if ((st = gwc_node_checks(r)) != GW_OK)
            return st;
        gwc_progress(r, "node checks done (memory bandwidth, GEMM, GPU)");
    }
    if (r->rank == 0) {
        r->nlinks = r->size * (r->size - 1) / 2;
        r->links = calloc(r->nlinks > 0 ? (size_t)r->nlinks : 1, sizeof(*r->links));
        if (!r->links)
            return GW_ERR_NO_MEMORY;
        for (int a = 0; a < r->size; a++)
            for (int b = a + 1; b < r->size; b++) {
                gwc_link_t *l = &r->links[gwc_link_index(r->size, a, b)];
                l->a = a;
                l->b = b;
                l->same_host = r->host_of[a] == r->host_of[b];
                l->host_blamed = -1;
            }
    }
    *phase = "the link matrix";
    int first = 0;
    if ((st = plan(r, &first)) != GW_OK)
        return st;
    for (int k = first; k < r->rounds_planned; k++) {
        if ((st = gwc_matrix_round(r, k)) != GW_OK)
            return st;
        r->rounds_run = k + 1;
        gwc_progress(r, "matrix round %d/%d done", k + 1, r->rounds_planned);
    }
    if (first == 1 && r->rounds_planned >= 1)
        r->rounds_run = r->rounds_planned;
    *phase = "the retests";
    if (r->size > 1) {
        if ((st = retests(r, 0)) != GW_OK)
            return st;
        if ((st = retests(r, 1)) != GW_OK)
            return st;
    }
    if (r->do_coll) {
        *phase = "the collectives";
        gwc_progress(r, "allreduce of %zu bytes: bus bandwidth", r->o->coll_bytes);
        if ((st = gwc_collectives(r)) != GW_OK)
            return st;
    }
    return GW_OK;
}

/* Rank 0's reports; returns 0, or -1 when one could not be written. */
static int write_reports(gwc_run_t *r)
{
    const gwc_opts_t *o = r->o;
    int rc = 0;
    /* After a failure: judge what was measured before it. */
    if (r->nlinks > 0 && !r->suspects_found)
        gwc_find_suspects(r, NULL, 0);
    if (r->nlinks > 0 && !r->hosts_found)
        gwc_find_suspect_hosts(r, NULL, 0);
    gwc_judge(r);
    r->elapsed_s = gw_kit_now_s() - r->t0;
    gwc_print_report(r);
    if (o->json && gwc_write_json(r, o->json) != 0)
        rc = -1;
    if (o->junit && gwc_write_junit(r, o->junit) != 0)
        rc = -1;
    if (o->markdown && gwc_write_markdown(r, o->markdown) != 0)
        rc = -1;
    if (o->heatmap && gwc_write_heatmap(r, o->heatmap) != 0)
        rc = -1;
    if (o->save_baseline && !r->failed && gwc_baseline_save(r, o->save_baseline) != 0)
        rc = -1;
    return rc;
}

/* Rank 0's setup: the baseline and every output file; 0 or -1. */
static int setup(gwc_run_t *r)
{
    const gwc_opts_t *o = r->o;
    char err[300];
    if (o->baseline) {
        if (gwc_baseline_load(o->baseline, &r->base, err, sizeof(err)) != 0) {
            fprintf(stderr, "gradwire-check: %s\n", err);
            return -1;
        }
        r->have_base = 1;
    }
    const char *outs[] = {o->json, o->junit, o->markdown, o->save_baseline};
    for (size_t i = 0; i < sizeof(outs) / sizeof(outs[0]); i++) {
        if (!outs[i])
            continue;
        FILE *f = gw_kit_fopen_private(outs[i]);
        if (!f) {
            fprintf(stderr, "gradwire-check: cannot write %s: %s\n", outs[i], strerror(errno));
            return -1;
        }
        if (outs[i] == o->json) /* valid JSON if the run is killed on the way */
            fprintf(f, "{\"tool\": \"gradwire-check\", \"verdict\": null, \"error\": \"the check "
                       "did not finish\"}\n");
        fclose(f);
    }
    return 0;
}

int main(int argc, char **argv)
{
    gwc_opts_t o;
    int rc = parse_opts(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.timeout_s > 0) {
        char ms[32];
        snprintf(ms, sizeof(ms), "%ld", o.timeout_s * 1000);
        setenv("GW_TIMEOUT_MS", ms, 1);
    }
    gwc_run_t r;
    memset(&r, 0, sizeof(r));
    r.o = &o;
    r.culprit = -1;
    r.t0 = gw_kit_now_s();
    gw_status_t st = gw_comm_init_env(&r.comm);
    if (st != GW_OK) {
        fprintf(stderr, "gradwire-check: cannot join the job: gw_comm_init_env: %s (%s)\n",
                gw_status_str(st), gw_status_name(st));
        return GWC_EXIT_USAGE;
    }
    r.rank = gw_comm_rank(r.comm);
    r.size = gw_comm_size(r.comm);
    signal(SIGTERM, on_term);
    int32_t ok = r.rank != 0 || setup(&r) == 0, all = 0;
    st = gw_allreduce(r.comm, &ok, &all, 1, GW_INT32, GW_MIN);
    if (st != GW_OK || !all) {
        if (st != GW_OK)
            fprintf(stderr, "gradwire-check: rank %d: setup: %s\n", r.rank, gw_status_str(st));
        gw_comm_destroy(r.comm);
        return GWC_EXIT_USAGE;
    }
    const char *phase = "setup";
    st = run_phases(&r, &phase);
    if (st != GW_OK)
        gwc_job_failed(&r, phase, st);
    rc = r.failed ? GWC_EXIT_FAIL : GWC_EXIT_PASS;
    if (r.rank == 0 && r.info && r.hosts) {
        int wrote = write_reports(&r);
        rc = gwc_exit_status(&r);
        if (wrote != 0 && rc != GWC_EXIT_FAIL)
            rc = GWC_EXIT_USAGE;
        if (terminated)
            fprintf(stderr, "gradwire-check: a SIGTERM arrived during the check; the report "
                            "above was written after it\n");
    }
    gwc_baseline_free(&r.base);
    free(r.coll.wrong_from);
    gwc_node_free(&r.node);
    free(r.links);
    free(r.hosts);
    free(r.host_of);
    free(r.info);
    gw_comm_destroy(r.comm);
    return rc;
}
