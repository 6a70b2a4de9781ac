/*
 * bench_coll_cmd.h - the collective benchmark command's own state, shared
 * by its three files: bench_coll.c runs the sweep, bench_coll_opts.c reads
 * the command line (nccl-tests' options), bench_coll_report.c prints the
 * table and writes the JSON and the plot. Private to gradwire-bench.
 */
#ifndef GW_BENCH_BENCH_COLL_CMD_H
#define GW_BENCH_BENCH_COLL_CMD_H

#include <stdint.h>

#include "bench.h"
#include "bench_coll.h"

/* The command line, checked. */
typedef struct gw_bench_coll_opts {
    const gw_bench_coll_t *coll;
    int root;
    gw_bench_sweep_t sw; /* sw.factor is 0 when stepping by stepbytes */
    size_t stepbytes;
    int check;
    int ndtypes, nops;
    gw_dtype_t dtypes[GW_DTYPE_COUNT];
    gw_op_t ops[GW_OP_COUNT];
    gw_algo_t algo;
    long agg;               /* -m: calls per timed iteration, one wait for all */
    gw_bench_average_t avg; /* -a: how the ranks' times of a call combine */
    long cycles;            /* -N: sweeps of every size (0: until stopped) */
    int blocking;           /* -z: 1 each iteration timed alone, 0 one wait at the end */
    const char *json;
    const char *plot;        /* --plot FILE: a PNG of the busbw curves */
    char name[48], tail[80]; /* "gradwire-bench NAME" for messages */
    gw_kit_prog_t prog;
} gw_bench_coll_opts_t;

/* One placement's figures in one row of the table. */
typedef struct gw_bench_coll_cell {
    gw_bench_timing_t t;
    double algbw, busbw;
    int64_t wrong; /* -1: not checked */
    int ran;       /* 0: this placement does not exist for the collective */
} gw_bench_coll_cell_t;

/* One row: a size of one (dtype, op), out of place and in place. */
typedef struct gw_bench_coll_row {
    long cycle;
    size_t bytes, count;
    gw_dtype_t dtype;
    gw_op_t op;
    gw_algo_t algo;
    gw_bench_coll_cell_t p[2]; /* out of place, in place */
} gw_bench_coll_row_t;

/* The run: its options, collective and buffers, and the rows so far. */
typedef struct gw_bench_coll_job {
    gw_bench_coll_opts_t o;
    gw_bench_coll_run_t r; /* the collective, the communicator, the buffers */
    double *times, *tmax;
    gw_bench_coll_row_t *res;
    size_t nres, capres;
    gw_handle_t **handles; /* -m or -z 0: the calls in flight */
    size_t nhandles;
    gw_bench_hosts_t place; /* where the ranks run */
    char error[512];        /* the failure that ended the run, for the JSON */
} gw_bench_coll_job_t;

/* The command line into *o: -1 to go on, or an exit status (usage text or
 * error printed). */
int gw_bench_coll_parse(int argc, char **argv, const gw_bench_coll_t *d, gw_bench_coll_opts_t *o);
/* The sweep's next size after s, or 0 when there is none (beyond -e or
 * overflow). */
size_t gw_bench_coll_next_size(const gw_bench_coll_opts_t *o, size_t s);

/* Rank 0's table: the header, one row per size as it is measured, the
 * footer. */
void gw_bench_coll_print_header(const gw_bench_coll_job_t *b);
void gw_bench_coll_print_row(const gw_bench_coll_job_t *b, const gw_bench_coll_row_t *r);
void gw_bench_coll_print_footer(const gw_bench_coll_job_t *b);
/* Totals over the rows: average busbw and wrong elements (-1 unchecked). */
void gw_bench_coll_totals(const gw_bench_coll_job_t *b, double *avg_busbw, int64_t *wrong);
/* -J: the run as one JSON document (0, or -1). */
int gw_bench_coll_write_json(gw_bench_report_t *f, const gw_bench_coll_job_t *b, int ok);
/* --plot: the busbw curves as a PNG (0, or -1 after printing why). */
int gw_bench_coll_plot(const gw_bench_coll_job_t *b);

#endif
