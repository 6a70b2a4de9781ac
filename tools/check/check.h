/*
 * check.h - what the parts of gradwire-check (`gradwire check`) share: the
 * options, what each rank learns about its host, the hosts and links rank 0
 * judges, and the run that carries them from one phase to the next.
 *
 * The phases, each in its own file:
 *   check_host.c     host sanity on every rank (name, the interface towards
 *                    the job's root, MTU, link state, RDMA ports), gathered
 *                    to rank 0, which groups the ranks into hosts;
 *   check_pairs.c    the link matrix: latency and bandwidth of every pair in
 *                    circle rounds, and the serial retests of suspects;
 *   check_coll.c     allreduce bus bandwidth and small-message latency, with
 *                    every contribution checked;
 *   check_verdict.c  PASS / WARN / FAIL per link and host, and attribution;
 *   check_timing.c   the allreduce's busbw against the links, and no FAIL on
 *                    timing gathered while oversubscribed;
 *   check_baseline.c the baseline file (--save-baseline, --baseline);
 *   check_report.c   the terminal table and the JSON report;
 *   check_ci.c       JUnit XML, Markdown and the gnuplot heatmap;
 *   check_node.c     the node: memory bandwidth and a GEMM on each host,
 *                    hosts sharing a machine in turns (check_gemm.c: the
 *                    BLAS, opened at run time; check_gpu.c: the GPU);
 *   check_node_judge.c  the node's figures against the other hosts', and
 *                    the NIC's line rate against the measured links;
 *   check_main.c     the options, the plan (--budget) and the phases in order.
 *
 * Public API only (gradwire.h), the tools' kit (kit.h) and the pair
 * measurement of gradwire-bench p2p (bench_p2p.h).
 */
#ifndef GW_TOOLS_CHECK_H
#define GW_TOOLS_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench_p2p.h"
#include "gradwire.h"
#include "kit.h"

#define GWC_EXIT_PASS 0
#define GWC_EXIT_FAIL 1
#define GWC_EXIT_USAGE GW_KIT_EXIT_USAGE
/* Nothing FAILed, but something could not be judged: the speed of links
 * between hosts with no reference of their own (two hosts and no NIC line
 * rate, without --baseline), or timing gathered while ranks outnumbered
 * their CPUs. Not a PASS: a CI job should not read it as one. */
#define GWC_EXIT_NOT_JUDGED 3

typedef enum gwc_verdict {
    GWC_SKIP = 0, /* not measured (a rank failed first, or left out by --budget) */
    GWC_PASS,
    GWC_NOT_JUDGED, /* measured, but nothing to judge it against (see GWC_EXIT_NOT_JUDGED) */
    GWC_WARN,
    GWC_FAIL,
} gwc_verdict_t;

const char *gwc_verdict_name(gwc_verdict_t v);

typedef struct gwc_opts {
    int quick;
    double budget_s;     /* 0: no budget */
    long timeout_s;      /* 0: the library's (GW_TIMEOUT_MS) */
    long lat_iters;      /* 8-byte ping-pongs per pair */
    long bw_iters;       /* bw_bytes messages per direction per pair */
    size_t bw_bytes;     /* bandwidth message size (1 MiB) */
    size_t coll_bytes;   /* allreduce size for bus bandwidth (16 MiB) */
    long coll_iters;     /* timed large allreduces */
    long coll_lat_iters; /* timed 8-byte allreduces */
    int retest;          /* retest suspects serially */
    /* Thresholds: a link is bad when its median latency is over lat_factor
     * x the reference, its 99th percentile over tail_factor x the
     * reference's, or its bandwidth under bw_fraction x the reference; a
     * host is suspect when more than host_fraction of its links are bad. */
    double lat_factor, tail_factor, bw_fraction, host_fraction;
    double tail_floor_us; /* a p99 at or below this is never a tail fault */
    /* Against the NIC's line rate (links between too few hosts to judge
     * by each other): bad under line_fraction x the line rate. */
    double line_fraction;
    double base_rate; /* --baseline RATE: GB/s every link between hosts should reach; 0: none */
    /* The allreduce's busbw WARNs under coll_fraction x the slowest link
     * between hosts, and FAILs under half of that. */
    double coll_fraction;
    int judge_oversubscribed; /* FAIL on timing even where ranks outnumber CPUs */
    /* The node checks (check_node.c): off with --no-node; the triad's
     * array size, the GEMM's order, the seconds each measurement runs;
     * a host FAILs under node_fraction x the hosts' reference and WARNs
     * under halfway between that and the reference. */
    int node;
    size_t node_bytes;
    long gemm_n;
    double node_s, node_fraction;
    const char *json, *junit, *markdown, *heatmap, *baseline, *save_baseline;
} gwc_opts_t;

/* What one rank finds out about itself (check_host.c); fixed size, so the
 * ranks' records travel in one gw_allgather. */
#define GWC_RDMA_CAP 384
typedef struct gwc_rank_info {
    int32_t rank;
    int32_t mtu;        /* -1: unknown */
    int32_t link_up;    /* 1 up and running, 0 not, -1 unknown */
    int32_t speed_mbps; /* -1: unknown */
    int32_t physical;   /* 1: the interface is a device's (its speed is a line rate) */
    uint64_t host_key;  /* equal on ranks that share a host */
    /* Equal on ranks that share a kernel, so its CPUs (the kernel's boot
     * id: emulated hosts in namespaces and containers share it). */
    uint64_t machine_key;
    int32_t cpus_online;  /* sysconf(_SC_NPROCESSORS_ONLN) */
    int32_t cpus_allowed; /* this rank's CPU affinity mask's count */
    uint8_t cpumask[128]; /* the mask itself, CPUs 0..1023 */
    char hostname[64];
    char addr[48]; /* this rank's address towards the job's root */
    char ifname[32];
    char operstate[16];
    char transport[24];      /* gw_comm_transport() on this rank */
    char rdma[GWC_RDMA_CAP]; /* "dev/port STATE gid; ..." or "" */
} gwc_rank_info_t;

/* A host: the ranks with one host_key (rank 0's view). */
typedef struct gwc_host {
    char name[80]; /* host name, or its address when names repeat */
    int first_rank, nranks;
    int bad_links, links; /* bad and measured links to other hosts */
    int suspect;          /* most of its links bad */
    int partner;          /* a known-good host's rank to retest against, -1 */
    /* Its machine (the hosts sharing its kernel): ranks there, the CPUs
     * their affinity masks allow together, and whether ranks outnumber
     * them (timing there is then no evidence to FAIL on). */
    int machine_ranks, machine_cpus, oversubscribed;
    gwc_verdict_t verdict;
    char cause[200];
} gwc_host_t;

/* One direction-pair's figures from one measurement. */
typedef struct gwc_fig {
    double lat_p50, lat_p99; /* us, one way, measured by the lower rank */
    double bw_ab, bw_ba;     /* GB/s: the lower rank sending, the higher */
    int64_t wrong;           /* bytes received wrong at either end */
} gwc_fig_t;

/* A pair of ranks a < b. */
typedef struct gwc_link {
    int a, b;
    int same_host;
    int measured, retested;
    gwc_fig_t fig;    /* from the circle rounds */
    gwc_fig_t retest; /* alone, when retested */
    int suspect;      /* over a threshold in the circle rounds */
    int unjudged;     /* its speed had no reference (GWC_NOT_JUDGED) */
    int bad;          /* over one when judged (after the retest) */
    int host_blamed;  /* -1 or the host its badness is attributed to */
    gwc_verdict_t verdict;
    char cause[200];
} gwc_link_t;

/* The references links are judged against. */
typedef struct gwc_ref {
    double lat_p50, lat_p99, bw; /* NAN: none */
    /* What bw is (NULL: the cluster's or the baseline file's figure, judged
     * at --bw-fraction), else e.g. "the NIC line rate", judged at bw_frac. */
    const char *bw_what;
    double bw_frac;
} gwc_ref_t;

/* A relative reference needs this many hosts (links within a host: links)
 * to stand on: with two hosts, every host's best link to another is the
 * same link, and a link would be its own reference. */
#define GWC_MIN_WITNESSES 3

typedef struct gwc_coll {
    int run;
    size_t bytes;
    double busbw, algbw;  /* GB/s, median of the timed calls */
    double lat_p50;       /* us, 8-byte allreduce */
    int64_t *wrong_from;  /* per rank: elements its contribution came out wrong in */
    int64_t unattributed; /* wrong elements no rank's bits explain */
    gwc_verdict_t verdict;
    char cause[200];
} gwc_coll_t;

/* A baseline (check_baseline.c): figures of a healthy run, per rank pair. */
typedef struct gwc_base_link {
    int a, b;
    char ha[80], hb[80];
    double lat_p50, lat_p99, bw;
} gwc_base_link_t;

/* A host's node figures in a baseline (GWC_NODE_FIGURES of them, NAN:
 * not measured there), matched by the host's name. */
typedef struct gwc_base_node gwc_base_node_t;

typedef struct gwc_baseline {
    gwc_base_link_t *links;
    size_t nlinks;
    double busbw, coll_lat;
    gwc_ref_t ref; /* the baseline's own medians, for links it lacks */
    gwc_base_node_t *nodes;
    size_t nnodes;
} gwc_baseline_t;

/* The node's figures, one record per rank (only each host's first rank
 * measures; fixed size, gathered in one gw_allgather). */
enum {
    GWC_NODE_MEM,     /* STREAM-like triad, GB/s */
    GWC_NODE_GEMM,    /* sgemm, GFLOP/s */
    GWC_NODE_GPU_D2D, /* device-to-device copy, GB/s */
    GWC_NODE_GPU_H2D, /* pinned host to device, GB/s */
    GWC_NODE_GPU_D2H, /* device to pinned host, GB/s */
    GWC_NODE_FIGURES
};
struct gwc_base_node {
    char host[80];
    double v[GWC_NODE_FIGURES];
};

typedef struct gwc_node_fig {
    int32_t measured;               /* 1: this rank measured its host */
    int32_t threads;                /* the triad's and the GEMM's threads */
    int32_t gpu;                    /* 1: a CUDA device is present */
    int32_t retested;               /* measured twice (a suspect), the better figures kept */
    double v[GWC_NODE_FIGURES];     /* NAN: not measured */
    double seconds;                 /* what the node checks took on this host */
    char why[GWC_NODE_FIGURES][96]; /* why a figure is NAN */
    char gpu_name[96];              /* the device, or why there is none */
} gwc_node_fig_t;

/* One check's verdict on one host. */
typedef struct gwc_node_judged {
    gwc_verdict_t verdict;
    double ref; /* what the figure was judged against, NAN: nothing */
    char cause[200];
} gwc_node_judged_t;

/* The NIC: its line rate against the best link measured from the host. */
typedef struct gwc_nic {
    double line_GBps, best_GBps, pct; /* NAN: unknown */
    gwc_node_judged_t j;
} gwc_nic_t;

#define GWC_NODE_CHECKS 4 /* memory, GEMM, NIC, GPU: a verdict each per host */
typedef struct gwc_node {
    int run;
    gwc_node_fig_t *fig;                           /* per host, from its first rank */
    gwc_node_judged_t (*judged)[GWC_NODE_FIGURES]; /* per host and figure */
    gwc_nic_t *nic;                                /* per host */
    gwc_node_judged_t *gpu;                        /* per host: the GPU figures together */
} gwc_node_t;

typedef struct gwc_run {
    const gwc_opts_t *o;
    gw_comm_t *comm;
    int rank, size;
    double t0;
    gwc_rank_info_t *info; /* size records, on every rank */
    int *host_of;          /* rank -> host */
    gwc_host_t *hosts;
    int nhosts;
    gwc_link_t *links; /* n(n-1)/2 on rank 0, gwc_link_index order */
    int nlinks;
    gwc_ref_t ref_cross, ref_same;
    int ref_cross_n, ref_same_n; /* hosts (links) the references stand on */
    gwc_baseline_t base;
    int have_base;
    gwc_coll_t coll;
    gwc_node_t node;
    /* What the plan ran: iterations used and rounds of the matrix. */
    long lat_iters, bw_iters, coll_iters;
    int rounds_planned, rounds_run, do_coll, do_retest;
    int suspects_found, hosts_found; /* rank 0 has looked for suspects */
    char left_out[400];
    /* A rank that failed the job (gw_comm_culprit), the phase and status. */
    int failed, culprit;
    char failure[300];
    gwc_verdict_t verdict;
    char notes[600]; /* what the verdict could not look at, for the report */
    double elapsed_s;
} gwc_run_t;

/* Index of the link between ranks a != b in run->links. */
int gwc_link_index(int n, int a, int b);

/* Progress on rank 0: "[check  12.3s] ..." on stdout, flushed. */
__attribute__((format(printf, 2, 3))) void gwc_progress(const gwc_run_t *r, const char *fmt, ...);

/* Record that the job failed in `phase` with st: the culprit, and the
 * message the report carries. */
void gwc_job_failed(gwc_run_t *r, const char *phase, gw_status_t st);

/* ---- check_host.c ---- */
/* Every rank's record into r->info (gw_allgather), then on every rank the
 * hosts: r->host_of, r->hosts, r->nhosts. */
gw_status_t gwc_hosts_gather(gwc_run_t *r);
/* Each host's machine: ranks, CPUs and whether oversubscribed, from
 * r->info (called by gwc_hosts_gather). */
void gwc_find_oversubscribed(gwc_run_t *r);
/* The transport rank a uses to rank b and why, as words. */
void gwc_transport_to(const gwc_run_t *r, int a, int b, char *out, size_t cap);

/* ---- check_pairs.c ---- */
/* (Round partners: gw_p2p_circle_partner, bench_p2p.h.) */
/* One round: every rank measures with peer[rank] (-1: rests); rank 0
 * stores the figures into `into` (links or retests: retest != 0). */
gw_status_t gwc_round(gwc_run_t *r, const int *peer, int retest);
/* Circle round k of the matrix. */
gw_status_t gwc_matrix_round(gwc_run_t *r, int k);
/* Rank 0 names the pairs to retest (count, pairs) and every rank runs
 * them one at a time. */
gw_status_t gwc_retest(gwc_run_t *r, const int *pairs, int npairs);
/* Rank 0: what to retest after the matrix (hosts == 0: every suspect link,
 * each twice) or after those retests (hosts != 0: each suspect host against
 * its known-good partner, once, unless that link was retested already).
 * Returns the number of retests, their pairs (2 ints each, malloc'd, the
 * caller frees) in *pairs, and in *distinct how many links or hosts they
 * are for; -1 when out of memory. */
int gwc_retest_list(gwc_run_t *r, int hosts, int **pairs, int *distinct);

/* ---- check_coll.c ---- */
gw_status_t gwc_collectives(gwc_run_t *r);

/* ---- check_verdict.c ---- */
/* Whether link figures f are over a threshold against ref; reason into why. */
int gwc_over(const gwc_opts_t *o, const gwc_fig_t *f, const gwc_ref_t *ref, char *why, size_t cap);
/* The reference for link l: the baseline's figure, else the cluster's. */
gwc_ref_t gwc_ref_for(const gwc_run_t *r, const gwc_link_t *l);
/* After the matrix: references, suspects; returns how many pairs went into
 * pairs[] (2 ints each) to retest, at most cap. */
int gwc_find_suspects(gwc_run_t *r, int *pairs, int cap);
/* After the retests: hosts suspect of most of their bad links, each with a
 * known-good partner to retest against: pairs (rank of the host, rank of
 * the partner) into pairs[], at most cap. */
int gwc_find_suspect_hosts(gwc_run_t *r, int *pairs, int cap);
/* The final verdicts on every host, link and the collectives. */
void gwc_judge(gwc_run_t *r);
/* The exit status for the run's verdict: GWC_EXIT_FAIL, _NOT_JUDGED, _PASS. */
int gwc_exit_status(const gwc_run_t *r);
/* ---- check_timing.c ---- */
/* v for timing evidence about hosts ha and hb (ha < 0: every host): a FAIL
 * becomes NOT_JUDGED, cause prefixed "inconclusive: oversubscribed (...)",
 * where ranks outnumber CPUs, unless --judge-oversubscribed. */
gwc_verdict_t gwc_timing_verdict(const gwc_run_t *r, int ha, int hb, gwc_verdict_t v, char *cause,
                                 size_t cap);
/* The allreduce's busbw against the slowest link between hosts. */
void gwc_judge_busbw(gwc_run_t *r);
/* The bandwidth (GB/s) of the slowest measured link between hosts, which
 * bounds the allreduce's busbw, and its ranks in *a, *b; NAN when none. */
double gwc_coll_bound(const gwc_run_t *r, int *a, int *b);
/* The line rate between ranks a and b in GB/s (the slower NIC's), NAN when
 * either is unknown. */
double gwc_line_rate(const gwc_run_t *r, int a, int b);

/* ---- check_node.c ---- */
/* The node checks on every host, hosts that share a machine in turns;
 * rank 0 gets every host's figures into r->node. */
gw_status_t gwc_node_checks(gwc_run_t *r);
void gwc_node_free(gwc_node_t *n);
/* The triad on `threads` threads over three arrays of `bytes` each, for
 * at least min_s seconds: GB/s, NAN with the reason in why. */
double gwc_triad(size_t bytes, int threads, double min_s, char *why, size_t cap);
/* ---- check_gemm.c ---- */
/* n x n sgemm through OpenBLAS (opened at run time) on `threads` threads,
 * for at least min_s seconds: GFLOP/s, NAN with the reason in why. */
double gwc_gemm(long n, int threads, double min_s, char *why, size_t cap);
/* ---- check_gpu.c ---- */
/* The GPU figures into f (NAN and the reason where none). */
void gwc_gpu_measure(gwc_node_fig_t *f, size_t bytes, double min_s);

/* ---- check_node_judge.c ---- */
/* One figure of n hosts (NAN: not measured) judged against the hosts'
 * reference, the upper median of the measured figures: a host FAILs under
 * fraction x it and WARNs under (1 + fraction) / 2 x it; NOT_JUDGED with
 * fewer than GWC_MIN_WITNESSES measured hosts; a FAIL on a host with
 * oversub[h] set becomes NOT_JUDGED ("inconclusive: oversubscribed")
 * unless judge_oversub. what: "memory bandwidth"; unit: "GB/s". */
void gwc_node_judge_figure(const char *what, const char *unit, const double *fig,
                           const int *oversub, int n, double fraction, int judge_oversub,
                           gwc_node_judged_t *out);
/* The same with a baseline (--baseline FILE with node records): base[h] is
 * host h's own figure in it (NAN: none), base_ref the upper median of the
 * baseline's hosts' figures (NAN: it has none). A host is judged against
 * its own baseline figure, else against base_ref, else as above; with a
 * baseline one host alone is judged. base NULL: no baseline. */
void gwc_node_judge_figure_base(const char *what, const char *unit, const double *fig,
                                const double *base, double base_ref, const int *oversub, int n,
                                double fraction, int judge_oversub, gwc_node_judged_t *out);
/* Every node verdict into r->node, and into the hosts' verdicts. */
void gwc_judge_node(gwc_run_t *r);
/* A link's bandwidth as a percentage of its line rate; NAN when unknown. */
double gwc_link_line_pct(const gwc_run_t *r, const gwc_link_t *l);
/* Add text to host h's cause with verdict v (check_verdict.c). */
void gwc_host_note(gwc_host_t *h, gwc_verdict_t v, const char *text);
/* The names of the node's checks and figures, for the reports. */
extern const char *const gwc_node_figure_name[GWC_NODE_FIGURES];
extern const char *const gwc_node_figure_unit[GWC_NODE_FIGURES];

/* ---- check_baseline.c ---- */
int gwc_baseline_load(const char *path, gwc_baseline_t *b, char *err, size_t cap);
int gwc_baseline_save(const gwc_run_t *r, const char *path);
const gwc_base_link_t *gwc_baseline_find(const gwc_run_t *r, const gwc_link_t *l);
/* Whether links are judged against a baseline file's links (a baseline
 * of one host has node records only). */
static inline int gwc_links_have_base(const gwc_run_t *r)
{
    return r->have_base && r->base.nlinks > 0;
}
/* Host h's node record in the baseline, or NULL. */
const gwc_base_node_t *gwc_baseline_find_node(const gwc_run_t *r, int h);
/* The upper median (the larger middle one of an even count) of the n
 * values of x that are not NAN, and in *measured how many those are; NAN
 * when none is. The reference of the node checks, from the hosts' figures
 * and from a baseline's. */
double gwc_upper_median(const double *x, size_t n, size_t *measured);
/* The upper median of figure k over the baseline's node records; NAN if
 * none has it. */
double gwc_baseline_node_ref(const gwc_baseline_t *b, int k);
void gwc_baseline_free(gwc_baseline_t *b);
/* --baseline's argument: 1 and *gbps set when it is a rate ("12.5GB/s",
 * "100Gbit/s", "100Gb/s"), 0 when it is not (a file), -1 when it ends like
 * a rate but its number is not a positive one. */
int gwc_parse_rate(const char *arg, double *gbps);

/* ---- check_report.c ---- */
void gwc_print_report(const gwc_run_t *r);
int gwc_write_json(const gwc_run_t *r, const char *path);
/* "198.18.0.3 (host 3)"-style label of rank's host. */
const char *gwc_host_name(const gwc_run_t *r, int rank);

/* ---- check_ci.c ---- */
int gwc_write_junit(const gwc_run_t *r, const char *path);
int gwc_write_markdown(const gwc_run_t *r, const char *path);
int gwc_write_heatmap(const gwc_run_t *r, const char *path);

#endif
