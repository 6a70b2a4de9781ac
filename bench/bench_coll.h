/*
 * bench_coll.h - what the collective benchmarks (bench_coll.c) know about
 * each collective, and how they call and check it (bench_coll_calls.c):
 * the buffers' shapes, in and out of place, the inputs and the exact
 * answers of every rank.
 */
#ifndef GW_BENCH_BENCH_COLL_H
#define GW_BENCH_BENCH_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "gradwire.h"

typedef enum gw_bench_coll_id {
    GW_BENCH_ALLREDUCE,
    GW_BENCH_ALLGATHER,
    GW_BENCH_REDUCE_SCATTER,
    GW_BENCH_BROADCAST,
    GW_BENCH_REDUCE,
    GW_BENCH_BARRIER,
    GW_BENCH_SENDRECV,
    GW_BENCH_ALLTOALL,
    GW_BENCH_GATHER,
    GW_BENCH_SCATTER,
    GW_BENCH_ALLGATHERV,
    GW_BENCH_ALLTOALLV,
} gw_bench_coll_id_t;

typedef struct gw_bench_coll {
    gw_bench_coll_id_t id;
    const char *name; /* gradwire-bench NAME */
    const char *what; /* the usage text's description */
    int has_op, has_root, has_algo;
    int blocks; /* S holds one block per rank (allgather, reduce-scatter,
                 * alltoall, gather, scatter, allgatherv) */
    /* busbw = algbw * factor(ranks): the share of S on the busiest link. */
    double (*busbw_factor)(int n);
    /* No in-place form (gw_sendrecv's buffers must not overlap): the
     * in-place columns say N/A. */
    int out_of_place_only;
} gw_bench_coll_t;

/* Every collective the benchmarks know; NULL for another name. */
const gw_bench_coll_t *gw_bench_coll_find(const char *name);

/* One benchmark run's collective, communicator and buffers (send and
 * recv of the sweep's largest size each). */
typedef struct gw_bench_coll_run {
    const gw_bench_coll_t *coll;
    gw_comm_t *comm;
    int rank, size, root;
    void *send, *recv;
    size_t *counts, *displs; /* allgatherv's, size entries each */
} gw_bench_coll_run_t;

/* One row's shape: elements per rank block (the whole buffer but for
 * allgather and reduce-scatter), elements of S, and S in bytes. */
typedef struct gw_bench_shape {
    size_t block, count, bytes;
} gw_bench_shape_t;

gw_bench_shape_t gw_bench_coll_shape(const gw_bench_coll_run_t *r, size_t size, gw_dtype_t dt);

/* Where a call reads and writes: out of place send -> recv; in place one
 * buffer, recv, with the rank's own block at its offset (MPI's rule for
 * allgather and reduce-scatter). */
typedef struct gw_bench_place {
    const void *src;
    void *dst;
} gw_bench_place_t;

gw_bench_place_t gw_bench_coll_place(const gw_bench_coll_run_t *r, const gw_bench_shape_t *sh,
                                     gw_dtype_t dt, int in_place);

/* The collective, once. */
gw_status_t gw_bench_coll_call(const gw_bench_coll_run_t *r, const gw_bench_place_t *pl,
                               const gw_bench_shape_t *sh, gw_dtype_t dt, gw_op_t op);

/* The collective, once, non-blocking: its handles into h[0..*nh) (two for
 * a sendrecv, its send and its receive; one for the others), each to be
 * completed with gw_wait. On an error none is left to complete. */
#define GW_BENCH_MAX_HANDLES 2
gw_status_t gw_bench_coll_icall(const gw_bench_coll_run_t *r, const gw_bench_place_t *pl,
                                const gw_bench_shape_t *sh, gw_dtype_t dt, gw_op_t op,
                                gw_handle_t **h, int *nh);

/* This rank's input (bench_data.c's patterns), in the buffer it reads. */
void gw_bench_coll_fill(const gw_bench_coll_run_t *r, const gw_bench_place_t *pl,
                        const gw_bench_shape_t *sh, gw_dtype_t dt, gw_op_t op);

/* Before the checked call: overwrite what this rank will receive with
 * values that are certainly wrong (in place, not what holds its input). */
void gw_bench_coll_poison(const gw_bench_coll_run_t *r, const gw_bench_place_t *pl,
                          const gw_bench_shape_t *sh, gw_dtype_t dt, gw_op_t op, int in_place);

/* After it: the elements this rank received that differ from the exact
 * answer (0 on ranks that receive nothing). */
int64_t gw_bench_coll_wrong(const gw_bench_coll_run_t *r, const gw_bench_place_t *pl,
                            const gw_bench_shape_t *sh, gw_dtype_t dt, gw_op_t op);

#endif
