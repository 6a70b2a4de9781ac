/*
 * bench.h - what the parts of gradwire-bench share: argument parsing and
 * JSON helpers, the benchmarks' entry points, and the data patterns whose
 * exact reduction the correctness check knows. Public API only (gradwire.h).
 */
#ifndef GW_BENCH_BENCH_H
#define GW_BENCH_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gradwire.h"

#define GW_BENCH_EXIT_FAIL 1  /* a call failed or a result was wrong */
#define GW_BENCH_EXIT_USAGE 2 /* bad command line; nothing was started */

/* "4096", "64K", "32M", "1G", "2T" (binary multiples; an optional "B" or
 * "iB" may follow the suffix) into *out. Returns 0, or -1 for anything
 * else: empty, signs, spaces, unknown suffixes, overflow. */
int gw_bench_parse_size(const char *s, size_t *out);

/* A whole-string decimal integer in [min, max]. Returns 0 or -1. */
int gw_bench_parse_long(const char *s, long min, long max, long *out);

/* The options every size-sweeping benchmark shares, nccl-tests style:
 * -b/--minbytes, -e/--maxbytes, -f/--stepfactor, -n/--iters,
 * -w/--warmup_iters. */
typedef struct gw_bench_sweep {
    size_t minbytes, maxbytes;
    long factor, iters, warmup;
} gw_bench_sweep_t;

/* Parse option c ('b', 'e', 'f', 'n' or 'w') with value arg into *sw.
 * Returns 1 when c is a sweep option and arg is good, 0 when c is not a
 * sweep option, -1 for a bad value (the message, naming the option, is
 * in err). */
int gw_bench_sweep_opt(int c, const char *arg, gw_bench_sweep_t *sw, char *err, size_t cap);

/* JSON output: s as a quoted, escaped string; v as a number (null when it
 * is not finite, which JSON cannot express). */
void gw_bench_json_str(FILE *f, const char *s);
void gw_bench_json_num(FILE *f, double v);

/* `gradwire-bench allreduce ...`; argv[0] is "allreduce". Returns the exit
 * status. */
int gw_bench_allreduce_main(int argc, char **argv);

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

/* Rank's input at index i, and the expected result, as integers (exposed
 * so the patterns can be tested against a brute-force reduction). */
int64_t gw_bench_input(gw_dtype_t dtype, gw_op_t op, int rank, int nranks, size_t i);
int64_t gw_bench_expected(gw_dtype_t dtype, gw_op_t op, int nranks, size_t i);

#endif
