/*
 * zero.h - ZeRO-1 and ZeRO-2 for the synchronous data-parallel trainer
 * (--zero 1|2, zero.c): the momentum, and with stage 2 the reduced
 * gradients, kept as one block per layer on each rank instead of whole on
 * every rank.
 */
#ifndef GW_OPTIMIZER_ZERO_H
#define GW_OPTIMIZER_ZERO_H

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

/* ---- ZeRO-1 over the hybrid grid's data-parallel axis (zero_grid.c) ---- */

typedef struct gw_train_zero_grid {
    gw_comm_t *comm; /* the data-parallel group: same stage, same tensor slice */
    int rank, world;
    size_t n, part;  /* the stage's parameters; each rank's block, padded */
    size_t *counts;  /* real elements of each rank's block */
    size_t *displs;  /* where each starts */
    float *velocity; /* part: the momentum of this rank's block */
} gw_train_zero_grid_t;

/* The bytes of momentum a rank of a dp-rank group holds for a stage of n
 * parameters, and the padding its gradient array gains. */
void gw_train_zero_grid_sizes(size_t n, int dp, double *optimizer, double *grad_padding);
/* Shard the momentum of stage st over comm (st->velocity is freed, and
 * st->grads grows to dp * part floats for the reduce-scatter). */
gw_status_t gw_train_zero_grid_init(gw_train_zero_grid_t *z, gw_comm_t *comm, gw_train_stage_t *st);
void gw_train_zero_grid_free(gw_train_zero_grid_t *z);
/* After the step's backward: reduce-scatter of st->grads over the group,
 * the SGD update of this rank's block, allgather of the stage's weights. */
gw_status_t gw_train_zero_grid_step(gw_train_zero_grid_t *z, gw_train_stage_t *st, float mu,
                                    float wd, float lr);

#endif
