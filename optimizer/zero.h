/*
 * zero.h - ZeRO-1 and ZeRO-2 for the synchronous data-parallel trainer
 * (--zero 1|2, zero.c): the momentum, and with stage 2 the reduced
 * gradients, kept as one block per layer on each rank instead of whole on
 * every rank.
 */
#ifndef GW_OPTIMIZER_ZERO_H
#define GW_OPTIMIZER_ZERO_H

#include <stdint.h>

#include "model_parallel.h"

/* A unit: rows [row0, row1) of layer l's weights, the last unit of a layer
 * with the layer's biases too; contiguous in the flat arrays. */
typedef struct gw_train_zero_unit {
    int layer;
    int row0, row1;
    size_t off, count; /* in the flat arrays */
    size_t nw;         /* how many of them are weights (decayed); biases follow */
    size_t part;       /* each rank's block: ceil(count / world), the last ones padded */
    size_t soff;       /* where this rank's block sits in the shard arrays */
    size_t goff;       /* stage 1: the unit's padded gradient in grad_full */
    size_t *counts;    /* the real elements of each rank's block (world entries) */
    size_t *displs;    /* ... and where each starts in the unit (world entries) */
    gw_handle_t *rs, *ag;
    int state; /* 0: idle; 1: reduce-scatter queued; 2: reduced; 3: allgather queued */
} gw_train_zero_unit_t;

/* Rows of a layer of `in` columns that make a unit of about bucket_bytes
 * (at least one). */
static inline int gw_train_zero_unit_rows(size_t bucket_bytes, int in)
{
    size_t r = bucket_bytes / sizeof(float) / (size_t)in;
    return r < 1 ? 1 : r > (size_t)INT32_MAX ? INT32_MAX : (int)r;
}

/* Blocks of `part` floats of a span of n over world ranks: the real
 * elements of each rank's block (the last ones shorter, or empty) and
 * where each starts in the span. */
static inline void gw_train_zero_blocks(size_t n, size_t part, size_t world, size_t *counts,
                                        size_t *displs)
{
    for (size_t r = 0; r < world; r++) {
        size_t lo = r * part < n ? r * part : n;
        displs[r] = lo;
        counts[r] = (lo + part < n ? lo + part : n) - lo;
    }
}

typedef struct gw_train_zero {
    int stage, rank, world, overlap;
    gw_comm_t *comm;
    gw_train_mlp_t *m;
    float mu, wd;
    gw_train_zero_unit_t *u; /* in backward order: the last layer's last rows first */
    int nu;
    int ubeg[GW_TRAIN_MAX_LAYERS], uend[GW_TRAIN_MAX_LAYERS]; /* layer l: u[ubeg[l] .. uend[l]) */
    size_t shard;      /* floats in this rank's shard arrays: the sum of the parts */
    float *velocity;   /* shard: the momentum of this rank's blocks */
    float *grad_shard; /* stage 2, shard: the reduced gradients of this rank's blocks */
    float *grad_full;  /* stage 1: every unit's padded gradient (world * part each) */
    float *slot[2];    /* stage 2: backward's workspace, two units' padded gradients */
    size_t slot_len;
    gw_train_mem_t mem; /* what init allocated for the model (bytes) */
    double wait_s;      /* the training thread waiting for a collective, in all */
} gw_train_zero_t;

/* Plan the units (about bucket_bytes each) and allocate the shards for the
 * model m, whose full gradient array is freed: the trainer's gradients
 * live here now. */
gw_status_t gw_train_zero_init(gw_train_zero_t *z, gw_comm_t *comm, gw_train_mlp_t *m, int stage,
                               double momentum, double weight_decay, size_t bucket_bytes,
                               int overlap);
void gw_train_zero_free(gw_train_zero_t *z);
/* The bytes init would allocate for the gradients and the momentum, for
 * the memory check before anything is allocated (rank_memory.c). */
void gw_train_zero_sizes(const int *sizes, int nlayers, int world, size_t bucket_bytes, int stage,
                         double *grads, double *optimizer);
/* Backward of the last forward pass (B rows), reduce-scatter of each
 * unit's gradient, the update of this rank's blocks at rate lr and the
 * allgather of the parameters; on return every rank holds the updated
 * weights. */
gw_status_t gw_train_zero_backward_step(gw_train_zero_t *z, size_t B, float lr);
/* Checkpoints hold each rank's shard (checkpoint.c, format version 2).
 * On resume, on any number of ranks, with or without --zero: the whole
 * momentum (m->nparams floats) put together from the files the `world`
 * ranks of a --zero run wrote at `step` in dir (each rank reads them all);
 * then this rank's blocks taken from it. */
gw_status_t gw_train_zero_assemble_velocity(const char *dir, uint64_t step, int world,
                                            const gw_train_mlp_t *m, size_t bucket_bytes,
                                            float *full);
void gw_train_zero_load_velocity(gw_train_zero_t *z, const float *full);

/* ---- ZeRO over the hybrid grid's data-parallel axis (zero_grid.c) ----- */

typedef struct gw_train_zero_grid {
    gw_train_grad_sink_t sink; /* stage 2: handed to the stage's backward */
    gw_comm_t *comm;           /* the data-parallel group: same stage, same tensor slice */
    gw_train_stage_t *st;
    int stage, rank, world;
    size_t n, part;  /* stage 1: the stage's parameters; each rank's block, padded */
    size_t *counts;  /* stage 1: real elements of each rank's block */
    size_t *displs;  /* stage 1: where each starts */
    size_t vlen;     /* floats of momentum this rank holds: part, or shard */
    float *velocity; /* vlen: the momentum of this rank's block(s) */
    /* Stage 2. */
    gw_train_zero_unit_t *u; /* as zero.c's: rs, ag, state, goff unused here */
    int nu;
    int ubeg[GW_TRAIN_MAX_LAYERS]; /* layer i's units: u[ubeg[i]] on, rows[i] rows each */
    int rows[GW_TRAIN_MAX_LAYERS];
    size_t shard;      /* the sum of the units' parts */
    float *grad_shard; /* shard: this rank's blocks of the reduced gradients */
    float *slot;       /* backward's room for one unit's gradient: world * the largest part */
    size_t slot_len;
} gw_train_zero_grid_t;

/* The bytes of momentum (*optimizer) and of gradients (*grads) a rank of a
 * dp-rank group holds at stage `stage` for the share laid out in st
 * (gw_train_stage_layout), stage 2 in units of about bucket_bytes. */
void gw_train_zero_grid_sizes(const gw_train_stage_t *st, int dp, int stage, size_t bucket_bytes,
                              double *optimizer, double *grads);
/* Shard the momentum of stage st over comm (st->velocity is freed). Stage
 * 1: st->grads grows to dp * part floats for the reduce-scatter. Stage 2:
 * st->grads is freed, and backward hands each unit of about bucket_bytes
 * of gradient to a reduce-scatter through st->sink. */
gw_status_t gw_train_zero_grid_init(gw_train_zero_grid_t *z, gw_comm_t *comm, gw_train_stage_t *st,
                                    int stage, size_t bucket_bytes);
void gw_train_zero_grid_free(gw_train_zero_grid_t *z);
/* After the step's backward: (stage 1: the reduce-scatter of st->grads
 * over the group,) the SGD update of this rank's blocks, the allgather of
 * the stage's weights. */
gw_status_t gw_train_zero_grid_step(gw_train_zero_grid_t *z, gw_train_stage_t *st, float mu,
                                    float wd, float lr);

#endif
