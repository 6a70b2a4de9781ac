/*
 * train_mp.h - the state of one rank of a model-parallel run
 * (train_model_parallel.c), shared with its checkpoints (train_mp_ckpt.c).
 */
#ifndef GW_TRAIN_MP_H
#define GW_TRAIN_MP_H

#include "model_parallel.h"
#include "zero.h"

typedef struct mp_run {
    const gw_train_opts_t *o;
    gw_train_grid_t g;
    gw_train_stage_t st;
    gw_train_dataset_t train, test;
    gw_train_rng_t rng;
    gw_train_rng_t rng_epoch; /* rng as the current epoch began: its shuffle replays from it */
    gw_train_report_t rep;
    int sizes[GW_TRAIN_MAX_LAYERS + 1], nlayers;
    size_t nfull; /* parameters of the unsplit model */
    uint32_t *perm;
    float *xb;
    int32_t *yb;
    size_t local_b;
    int micro;
    long spe, gstep;
    long epoch, step; /* epochs done; steps done in the current one */
    float scale;
    double *mem; /* 4 per rank */
    double ep_loss, dp_comm_s;
    long ep_correct, ep_seen;
    gw_train_pipe_stats_t ps, ps_epoch;
    gw_train_zero_grid_t
        zg; /* --zero: the momentum (2: and gradients) sharded over dp (zero_grid.c) */
    /* Checkpoints (train_mp_ckpt.c). */
    char config[512]; /* the settings and the grid, as a checkpoint records them */
    double elapsed0;  /* training time before a resumed checkpoint */
    uint64_t last_ckpt;
    int resumed, stopped;
} mp_run_t;

/* The settings this run's checkpoints record: the trainer's fingerprint
 * (options.c) and the grid (data x pipeline x tensor, micro-batches,
 * schedule, --zero), into r->config. */
void gw_train_mp_fingerprint(mp_run_t *r);
/* Every rank writes its part (its stage's share of the parameters and of
 * the momentum, or its --zero shard) and the position; collective over the
 * world. */
gw_status_t gw_train_mp_checkpoint(mp_run_t *r, double elapsed_s);
/* --resume: this rank's part of the latest step, checked against this run
 * (the same settings on the same grid; another grid is refused, saying
 * both); every rank agrees on the step. Collective over the world. */
gw_status_t gw_train_mp_resume(mp_run_t *r);

#endif
