/*
 * bench.h - what the parts of gradwire-bench share: the benchmarks' entry
 * points, the sweep options, the steps every benchmark run takes the same
 * way (joining the job, agreeing on success, timing across ranks, the JSON
 * file), and the data patterns whose exact reduction the correctness check
 * knows. Public API only (gradwire.h), plus the tools' kit (kit.h).
 */
#ifndef GW_BENCH_BENCH_H
#define GW_BENCH_BENCH_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gradwire.h"
#include "kit.h"

#define GW_BENCH_EXIT_FAIL 1                  /* a call failed or a result was wrong */
#define GW_BENCH_EXIT_USAGE GW_KIT_EXIT_USAGE /* bad command line; nothing was started */

/* `gradwire-bench NAME ...`; argv[0] is NAME. Each returns the exit
 * status: 0 when every call succeeded and every checked result was right,
 * 1 otherwise, 2 for a bad command line. */
/* allreduce, allgather, reduce_scatter, broadcast, reduce and barrier
 * (bench_coll.c): argv[0] names the collective. */
int gw_bench_coll_main(int argc, char **argv);
int gw_bench_p2p_main(int argc, char **argv);
/* mbw_mr (bench_mbw_mr.c): OSU's osu_mbw_mr, pairs with a window. */
int gw_bench_mbw_mr_main(int argc, char **argv);
int gw_bench_tune_main(int argc, char **argv);
int gw_bench_compress_main(int argc, char **argv);

/* ---- the options the benchmarks share (bench_opts.c) ---- */

/* The options every size-sweeping benchmark shares, nccl-tests style:
 * -b/--minbytes, -e/--maxbytes, -f/--stepfactor, -n/--iters,
 * -w/--warmup_iters. */
typedef struct gw_bench_sweep {
    size_t minbytes, maxbytes;
    long factor, iters, warmup;
} gw_bench_sweep_t;

/* Entries for a benchmark's getopt_long table: the sweep's long options,
 * --json (which the benchmarks that write JSON take), and the table's end
 * with --help. */
#define GW_BENCH_SWEEP_LONGOPTS                                                                \
    {"minbytes", required_argument, NULL, 'b'}, {"maxbytes", required_argument, NULL, 'e'},    \
        {"stepfactor", required_argument, NULL, 'f'}, {"iters", required_argument, NULL, 'n'}, \
    {                                                                                          \
        "warmup_iters", required_argument, NULL, 'w'                                           \
    }
#define GW_BENCH_JSON_LONGOPT                \
    {                                        \
        "json", required_argument, NULL, 'J' \
    }
#define GW_BENCH_END_LONGOPTS \
    {"help", no_argument, NULL, 'h'}, { NULL, 0, NULL, 0 }

/* A benchmark's command line: how it names itself in usage errors, its
 * usage text, getopt_long's option string and table, and where the shared
 * options go (sw NULL: it has no sweep; json NULL: it takes no --json). */
typedef struct gw_bench_cmdline {
    const gw_kit_prog_t *prog;
    void (*usage)(FILE *out);
    const char *optstring;
    const struct option *longopts;
    gw_bench_sweep_t *sw;
    const char **json;
    /* A usage text that depends on the benchmark's own data (several
     * benchmarks in one file): when set, called with ctx instead of usage. */
    void (*usage_of)(FILE *out, const void *ctx);
    const void *ctx;
} gw_bench_cmdline_t;

/* What gw_bench_next_opt returns when the benchmark is to leave. */
#define GW_BENCH_OPT_EXIT (-2)

/* The next option that is the benchmark's own (with its value in optarg),
 * after gw_kit_getopt_begin(). The options every benchmark treats the same
 * way are taken on the way: -h (usage on stdout), getopt's ':' and '?' (a
 * usage error), --json FILE and the sweep options. Returns the option, -1
 * after the last one, or GW_BENCH_OPT_EXIT with *rc the exit status (0
 * after -h, 2 after printing a usage error). */
int gw_bench_next_opt(const gw_bench_cmdline_t *cl, int argc, char **argv, int *rc);

/* ---- a benchmark's run (bench_run.c) ---- */

/* Join the job described by the environment (gw_comm_init_env), and learn
 * this rank and the rank count. 0, or -1 after printing why, prefixed with
 * who ("gradwire-bench tune"). */
int gw_bench_join(const char *who, gw_comm_t **comm, int *rank, int *size);

/* Whether every rank's ok is non-zero, into *all. Every rank learns the
 * same answer, so none is left waiting for a rank that gave up. */
gw_status_t gw_bench_all_ok(gw_comm_t *comm, int ok, int *all);

/* The end of a benchmark's setup, on every rank: rank 0 opens the JSON
 * report at path (when path is not NULL; gw_bench_json_open) into *json
 * (declared below),
 * then the ranks learn whether all of them succeeded, ok being this rank's
 * verdict so far. 0, or -1 with what went wrong in error[0..cap). */
struct gw_bench_report;
int gw_bench_setup_end(gw_comm_t *comm, int rank, int ok, const char *benchmark, const char *path,
                       struct gw_bench_report *json, char *error, size_t cap);

/* Record in error[0..cap) that the call described by fmt failed with st,
 * print it with the rank, and return -1. */
__attribute__((format(printf, 5, 6))) int gw_bench_fail(char *error, size_t cap, int rank,
                                                        gw_status_t st, const char *fmt, ...);

/* Grow *items (of *cap elements of size bytes) to hold n + 1, doubling
 * from first. 0, or -1 when out of memory (*items is then unchanged). */
int gw_bench_reserve(void **items, size_t *cap, size_t n, size_t size, size_t first);

/* A series of timed calls: median, min and max, in microseconds. */
typedef struct gw_bench_timing {
    double med_us, min_us, max_us;
} gw_bench_timing_t;

/* The per-call times of this rank, times[0..n), are reduced with max over
 * ranks into tmax (a call ends when its last rank is done), sorted, and
 * summarised into *out. */
gw_status_t gw_bench_timing_reduce(gw_comm_t *comm, const double *times, double *tmax, long n,
                                   gw_bench_timing_t *out);

/* nccl-tests' -a: how a call's times on the ranks make one figure. */
typedef enum gw_bench_average {
    GW_BENCH_AVG_RANK0 = 0, /* rank 0's time */
    GW_BENCH_AVG_MEAN = 1,  /* the mean over ranks (nccl-tests' default) */
    GW_BENCH_AVG_MIN = 2,   /* the fastest rank's */
    GW_BENCH_AVG_MAX = 3,   /* the slowest rank's (gradwire-bench's default) */
} gw_bench_average_t;

/* gw_bench_timing_reduce with the ranks' times of each call combined as
 * avg says, instead of always by max. */
gw_status_t gw_bench_timing_reduce_by(gw_comm_t *comm, const double *times, double *tall, long n,
                                      gw_bench_average_t avg, gw_bench_timing_t *out);

/* ---- the cost model's measured rules (bench_tune_rules.c measures, bench_tune_decide.c decides) ---- */

/* The rules `gradwire-bench tune` measured on this job (have_*: measured;
 * the others keep the defaults), in bytes, as the tuning file's keys. */
typedef struct gw_bench_rules {
    int have_pair, have_tree4, have_shm, have_large;
    size_t direct_pair_min, tree4_min, tree4_end, direct_shm_min, direct_large_min;
} gw_bench_rules_t;
/* Measure them (a collective: every rank calls it); rank 0 prints the
 * table and the keys. 0, or -1 after a call failed. */
int gw_bench_tune_rules(gw_comm_t *comm, long warmup, gw_bench_rules_t *r);

/* The rules read off a table of allreduce times in seconds (bench_tune_decide.c):
 * t[s][a] the time at sizes[s] of the algorithm in column a (not finite:
 * not run), for the rules of nranks ranks. No communication. */
enum {
    GW_BENCH_RULE_RING,
    GW_BENCH_RULE_TREE,
    GW_BENCH_RULE_RD,
    GW_BENCH_RULE_HIER,
    GW_BENCH_RULE_DIRECT,
    GW_BENCH_RULE_NALGOS
};
#define GW_BENCH_RULES_NSIZES 12 /* 16 KiB .. 32 MiB */
void gw_bench_rules_decide(int nranks, int nsizes, const size_t *sizes,
                           const double t[][GW_BENCH_RULE_NALGOS], gw_bench_rules_t *r);

/* ---- where the ranks run (bench_place.c) ---- */

/* One rank's record, gathered as raw bytes (fixed size, no pointers). */
#define GW_BENCH_PLACE_CPUS 1024 /* CPUs a record's mask holds */
typedef struct gw_bench_rank_place {
    char host[64];
    char cpus[48]; /* its Cpus_allowed_list */
    int32_t pid;
    int32_t online;                          /* its host's online CPUs */
    uint64_t mask[GW_BENCH_PLACE_CPUS / 64]; /* its affinity mask */
    int32_t host_cpus; /* on rank 0, after the gather: the CPUs its host's ranks may use */
    int32_t pad;
} gw_bench_rank_place_t;

/* Every rank's record, and the host whose ranks most outnumber the CPUs
 * they may run on (the union of their affinity masks). */
typedef struct gw_bench_hosts {
    gw_bench_rank_place_t *ranks;
    int n; /* 0: not gathered */
    int oversubscribed;
    int worst, worst_ranks, worst_cpus_or_1;
} gw_bench_hosts_t;

/* Room on rank 0 for every rank's record (nothing elsewhere); 0, or -1
 * after printing why. Called before the ranks agree that their setup
 * succeeded, so that the gather below cannot fail for memory. */
int gw_bench_place_alloc(gw_bench_hosts_t *pl, int rank, int size);
/* Gather every rank's record to rank 0 (a collective: every rank calls it,
 * after gw_bench_place_alloc). Rank 0 keeps them (pl->n is 0 elsewhere);
 * gw_bench_place_free releases them. */
gw_status_t gw_bench_place_gather(gw_comm_t *comm, gw_bench_hosts_t *pl);
/* nccl-tests' "#  Rank  0 Pid ... on HOST ..." lines, and a WARNING line
 * when a host has more ranks than CPUs. */
void gw_bench_place_print(const gw_bench_hosts_t *pl, FILE *out);
/* "placement": [{rank, host, pid, cpus, host_cpus}...] and
 * "oversubscribed" (both null when pl is NULL or was not gathered). */
void gw_bench_place_json(gw_kit_json_t *j, const gw_bench_hosts_t *pl);
void gw_bench_place_free(gw_bench_hosts_t *pl);

/* A benchmark's JSON report on rank 0: the file, and what the run header
 * takes at the start of the run (the date and the load average), and where
 * the ranks ran when the benchmark gathered it (else NULL). */
typedef struct gw_bench_report {
    FILE *f;
    char date[32];
    double load[3];
    int have_load;
    const gw_bench_hosts_t *place;
} gw_bench_report_t;

/* Open path for a benchmark's JSON into rep and write a placeholder into
 * it that says the run did not finish: a run killed on the way (the
 * launcher stops every rank when one fails) leaves valid JSON behind, not
 * an empty file. Takes the run header's start. 0, or -1 after printing
 * why (rep->f is then NULL). */
int gw_bench_json_open(gw_bench_report_t *rep, const char *path, const char *benchmark);

/* Start the final document over the placeholder in rep (opened for path):
 * truncate it, begin a top-level object whose members are one per line,
 * and write the members every benchmark's report starts with (benchmark,
 * gradwire_version, ranks, transport, and the run header "run":
 * bench_header.c). 0, or -1 after printing why and closing the file. */
int gw_bench_json_begin(gw_kit_json_t *j, gw_bench_report_t *rep, const char *path,
                        const char *benchmark, gw_comm_t *comm);

/* The run header (bench_header.c): its start into rep, and the whole
 * "run" member, with the end, into j. */
void gw_bench_header_start(gw_bench_report_t *rep);
void gw_bench_header_write(gw_kit_json_t *j, const gw_bench_report_t *rep);

/* The members every report ends with (ok, error), and the closing brace;
 * then close f. 0, or -1 after printing that writing path failed. */
int gw_bench_json_end(gw_kit_json_t *j, int ok, const char *error, const char *path);

/* ---- --plot FILE (bench_plot.c) ---- */

/* One line of a plot: busbw[i] GB/s at sizes[i] bytes, i < n. */
typedef struct gw_bench_curve {
    char label[64];
    size_t n;
    size_t *sizes;
    double *busbw;
} gw_bench_curve_t;

/* Whether gnuplot can be run (checked before a run that is to plot). */
int gw_bench_plot_available(void);

/* Draw the curves as a PNG at path with gnuplot: busbw against size, log2
 * size axis, one line per curve (an empty one is left out). 0, or -1 after
 * printing why. */
int gw_bench_plot_busbw(const char *path, const char *title, const gw_bench_curve_t *curves,
                        int ncurves);

/* "time_us": {"median": ..., "min": ..., "max": ...} */
void gw_bench_json_timing(gw_kit_json_t *j, const gw_bench_timing_t *t);

/*
 * Check patterns (bench_data.c). Rank r's input for op is a sequence of
 * small integers (or +-1 and 2 for products) chosen so that every partial
 * reduction, in any order, is exactly representable in the dtype: the
 * expected result of the allreduce is then exact, whatever the algorithm.
 */

/* Fill buf[0..count) with rank's input for an allreduce with op. */
void gw_bench_fill(void *buf, size_t count, gw_dtype_t dtype, gw_op_t op, int rank, int nranks);

/* The number of elements of buf[0..count) that differ from the exact
 * allreduce result of every rank's gw_bench_fill input. NaN is wrong. */
int64_t gw_bench_count_wrong(const void *buf, size_t count, gw_dtype_t dtype, gw_op_t op,
                             int nranks);

/* Fill buf[0..count) with values that all differ from the expected result,
 * so that a call which leaves its receive buffer alone cannot pass. */
void gw_bench_poison(void *buf, size_t count, gw_dtype_t dtype, gw_op_t op, int nranks);

/* The other collectives move inputs or parts of results: what a buffer
 * should hold is rank `rank`'s input (rank >= 0: a broadcast's root, an
 * allgather's block) or the reduction over every rank (rank -1), from
 * global element index `first` on (a reduce-scatter's block). */
typedef struct gw_bench_want {
    int rank;
    size_t first;
} gw_bench_want_t;
#define GW_BENCH_WANT_REDUCED ((gw_bench_want_t){-1, 0})

/* gw_bench_fill from global index first on. */
void gw_bench_fill_at(void *buf, size_t first, size_t count, gw_dtype_t dtype, gw_op_t op, int rank,
                      int nranks);
/* gw_bench_count_wrong and gw_bench_poison against what w describes. */
int64_t gw_bench_count_wrong_want(const void *buf, size_t count, gw_dtype_t dtype, gw_op_t op,
                                  int nranks, gw_bench_want_t w);
void gw_bench_poison_want(void *buf, size_t count, gw_dtype_t dtype, gw_op_t op, int nranks,
                          gw_bench_want_t w);

/* Rank's input at index i, and the expected result, as integers (exposed
 * so the patterns can be tested against a brute-force reduction). */
int64_t gw_bench_input(gw_dtype_t dtype, gw_op_t op, int rank, int nranks, size_t i);
int64_t gw_bench_expected(gw_dtype_t dtype, gw_op_t op, int nranks, size_t i);

/* Whether (dtype, op) is a reduction the library has: not the bitwise ops
 * on float dtypes, not premul_sum on integer dtypes. `-d all -o all`
 * runs every combination that exists. */
int gw_bench_combo_exists(gw_dtype_t dtype, gw_op_t op);
/* Every rank's factor of premul_sum in the benchmarks (exact: a power of
 * two). */
#define GW_BENCH_PREMUL_FACTOR 2.0

#endif
