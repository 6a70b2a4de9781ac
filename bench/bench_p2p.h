/*
 * bench_p2p.h - what the two halves of `gradwire-bench p2p` share: the
 * options, one pair's measurement (bench_p2p.c: the perftest-style uni,
 * bidir and latency modes between this rank and one peer), and the
 * all-pairs run built on it (bench_p2p_pairs.c).
 */
#ifndef GW_BENCH_BENCH_P2P_H
#define GW_BENCH_BENCH_P2P_H

#include <stddef.h>
#include <stdint.h>

#include "bench.h"

#define GW_P2P_MODE_UNI 1
#define GW_P2P_MODE_BIDIR 2
#define GW_P2P_MODE_LAT 4

/* Which pairs a run measures. */
typedef enum gw_p2p_pairs {
    GW_P2P_PAIR_01,     /* ranks 0 and 1; the others exit at once */
    GW_P2P_PAIRS_ROUND, /* every pair, n-1 rounds of n/2 pairs at once */
    GW_P2P_PAIRS_ALONE, /* every pair, one at a time */
} gw_p2p_pairs_t;

typedef struct gw_p2p_opts {
    gw_bench_sweep_t sw;
    long window;
    int modes, check;
    gw_p2p_pairs_t pairs;
    const char *json;
} gw_p2p_opts_t;

/* One size's figures for one pair, as its lower rank measured them. */
typedef struct gw_p2p_result {
    size_t bytes;
    double uni, bidir;              /* GB/s, NAN when not run */
    double p50, p90, p99, min, max; /* one-way latency, us */
    int64_t wrong;                  /* bytes this rank received wrong */
} gw_p2p_result_t;

/* This rank's side of a pair: the lower rank leads (sends in uni, times
 * everything); the other answers. Buffers for the sweep's largest size. */
typedef struct gw_p2p_pair {
    const gw_p2p_opts_t *o;
    gw_comm_t *comm;
    int rank, peer, lead;
    uint8_t *sbuf, *rbuf;
    gw_handle_t **ring; /* 2 x window handles */
    double *lat;        /* iters one-way latencies */
    int64_t wrong;      /* wrong bytes received so far, over all sizes */
} gw_p2p_pair_t;

/* Allocate p's buffers for o; 0, or -1 after printing why. */
int gw_p2p_pair_open(gw_p2p_pair_t *p, const gw_p2p_opts_t *o, gw_comm_t *comm, int rank);
void gw_p2p_pair_close(gw_p2p_pair_t *p);

/* Point p at peer (rank < peer leads). */
void gw_p2p_pair_with(gw_p2p_pair_t *p, int peer);

/* Every mode of o at one size with p's peer, into *res (res->wrong: what
 * this rank received wrong at this size). */
gw_status_t gw_p2p_run_size(gw_p2p_pair_t *p, size_t size, gw_p2p_result_t *res);

/* Rank's partner in round k (0 <= k < n - 1 + n % 2) of the circle
 * method for n ranks: rank n-1 (a phantom rank n when n is odd) stays put
 * and meets rank k, every other rank r meets (2k - r) mod (n-1); -1: rank
 * rests this round (its partner is the phantom). Every pair meets once. */
int gw_p2p_circle_partner(int n, int rank, int k);

/* The sweep's sizes, into sizes[0..cap); returns how many (at most cap). */
size_t gw_p2p_sizes(const gw_p2p_opts_t *o, size_t *sizes, size_t cap);

/* The all-pairs run (bench_p2p_pairs.c), on every rank of comm; returns
 * the exit status. */
int gw_p2p_all_pairs(const gw_p2p_opts_t *o, gw_comm_t *comm, int rank, int size);

#endif
