/*
 * bench_compress.h - what the two halves of `gradwire-bench compress`
 * share: the options, one row of results and the run's state.
 * bench_compress.c measures (see the comment at its top for how);
 * bench_compress_report.c prints the table and writes the JSON report.
 */
#ifndef GW_BENCH_BENCH_COMPRESS_H
#define GW_BENCH_BENCH_COMPRESS_H

#include "bench.h"

#define MAX_CODECS GW_CODEC_COUNT

struct copts {
    gw_bench_sweep_t sw;
    long solo_iters;
    int ncodecs;
    gw_codec_t codecs[MAX_CODECS];
    double ratio, momentum;
    long rank, bucket;
    gw_algo_t algo;
    int sort;
    const char *json;
};

struct cres {
    size_t bytes;
    const char *name; /* codec name, or "dense" */
    int dense;
    gw_bench_timing_t t;
    double algbw, speedup, ratio, comm_us, cpu_us;
    double enc_gbps, dec_gbps, cpu_gbps; /* 0: not measured */
    uint64_t wire;
    int agree;
};

struct sortres {
    size_t bytes;
    double select_ms, sort_ms;
};

/* The run: the communicator of every rank and, on rank 0, a one-rank
 * communicator for the codec-throughput measurement. */
struct cbench {
    struct copts o;
    gw_comm_t *comm, *solo;
    int rank, size;
    float *in, *out;
    double *times, *tmax;
    struct cres *res;
    size_t nres, capres;
    struct sortres sorts[64];
    int nsorts;
    int bad;
    char error[512];
};

/* Rank 0's table: the header, then one line per row. */
void gw_bench_compress_print_header(const struct cbench *b);
void gw_bench_compress_print_result(const struct cres *r);

/* The whole run as one JSON document over the placeholder in f, which is
 * then closed. 0, or -1 after printing why. */
int gw_bench_compress_write_json(gw_bench_report_t *f, const struct cbench *b, int ok);

#endif
