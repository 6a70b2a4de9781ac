/*
 * peer_common.h - what the peer-library allreduce drivers (Open MPI, Gloo)
 * share: command-line flags in the style of nccl-tests, the size sweep,
 * buffer patterns and their check, statistics, the nccl-tests table and the
 * JSON report.
 *
 * The drivers exist so that gradwire's numbers can be compared with the
 * libraries users would otherwise pick, measured side by side in one run.
 * Keeping every figure (units, busbw factor, median of per-iteration maxima)
 * in this one file is what makes the three tables comparable: only the call
 * being timed differs between drivers.
 *
 * This code is compiled as C11 and linked into both the C (MPI) and the C++
 * (Gloo) driver; it uses neither library and is not part of libgradwire.
 */
#ifndef GW_PEERS_PEER_COMMON_H
#define GW_PEERS_PEER_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum peer_dtype { PEER_FLOAT32, PEER_FLOAT64, PEER_INT32 } peer_dtype_t;
typedef enum peer_op { PEER_SUM, PEER_MAX, PEER_MIN } peer_op_t;

/* Options common to every driver; each driver adds its own flags. */
struct peer_opts {
    size_t min_bytes;      /* -b */
    size_t max_bytes;      /* -e */
    size_t step_bytes;     /* -i: additive step, used when step_factor <= 1 */
    double step_factor;    /* -f: multiplicative step, used when > 1 */
    int iters;             /* -n: timed iterations per size and mode */
    int warmup;            /* -w: untimed iterations per size and mode */
    int check;             /* -c: 1 to verify results (#wrong), 0 to skip */
    peer_dtype_t dtype;    /* -d */
    peer_op_t op;          /* -o */
    const char *json_path; /* --json FILE, NULL for none */
    const char *label;     /* --label STR, copied into the JSON report */
};

void peer_opts_default(struct peer_opts *o);

/* Tries to consume the common option at argv[*i] (advancing *i past its
 * value). Returns 1 if consumed, 0 if the option is not a common one, -1 on
 * a bad value (an error has been printed to stderr when print_errors). */
int peer_opts_parse_one(struct peer_opts *o, int argc, char **argv, int *i, int print_errors);

/* Checks cross-option consistency (min <= max, a step that makes progress).
 * Returns 0 or -1 with an error printed when print_errors. */
int peer_opts_validate(const struct peer_opts *o, int print_errors);

/* Prints the common flags' help text to f. */
void peer_opts_usage(FILE *f);

/* Parses "64", "8K", "32M", "1G" (binary multiples, as nccl-tests).
 * Returns 0 or -1 on a malformed or overflowing value. */
int peer_parse_size(const char *s, size_t *out);

/* The next size of the sweep after cur, or 0 when the sweep is done. */
size_t peer_next_size(const struct peer_opts *o, size_t cur);

size_t peer_dtype_size(peer_dtype_t t);
const char *peer_dtype_name(peer_dtype_t t);
const char *peer_op_name(peer_op_t op);

/* Fills buf with rank's input pattern. The values are small integers so
 * that sums over thousands of ranks stay exact in float32. */
void peer_fill(void *buf, size_t count, peer_dtype_t t, int rank);

/* Counts the elements of buf that differ from the reduction of every rank's
 * pattern under op. */
uint64_t peer_check(const void *buf, size_t count, peer_dtype_t t, peer_op_t op, int nranks);

/* Wall-clock seconds from a monotonic clock. */
double peer_now(void);

/* Figures for one size and one mode (out-of-place or in-place). */
struct peer_stats {
    double median_us, min_us, max_us;
    double algbw, busbw; /* GB/s (1e9 B/s), from the median */
    uint64_t wrong;      /* elements wrong, summed over ranks; 0 when unchecked */
};

/* Computes the statistics of times[n] (seconds; each already the maximum
 * over ranks of one iteration) for bytes on nranks. Sorts times in place. */
void peer_stats_compute(struct peer_stats *s, double *times, int n, size_t bytes, int nranks);

/* One row of the report. */
struct peer_row {
    size_t bytes, count;
    struct peer_stats oop, ip;
};

/* Collects rows, prints the nccl-tests table and writes the JSON report.
 * Only rank 0 creates one. */
struct peer_report {
    FILE *out;
    const struct peer_opts *opts;
    const char *library;   /* "openmpi", "gloo" */
    const char *version;   /* the library's own version string */
    const char *transport; /* "tcp", or MPI's BTL list ("tcp,self") */
    const char *algo;      /* the algorithm label ("library default" for MPI) */
    int nranks;
    struct peer_row *rows;
    size_t nrows, cap;
};

void peer_report_init(struct peer_report *r, FILE *out, const struct peer_opts *opts,
                      const char *library, const char *version, const char *transport,
                      const char *algo, int nranks);
void peer_report_header(struct peer_report *r);
/* Prints the row and keeps it for the JSON report. Returns 0 or -1 when
 * out of memory (the row is still printed). */
int peer_report_row(struct peer_report *r, const struct peer_row *row);
/* Prints the footer and writes the JSON file if requested. Returns 0, or -1
 * if the JSON file could not be written (an error has been printed). */
int peer_report_finish(struct peer_report *r);
/* The total of #wrong over every row and mode. */
uint64_t peer_report_wrong(const struct peer_report *r);
void peer_report_free(struct peer_report *r);

#ifdef __cplusplus
}
#endif

#endif
