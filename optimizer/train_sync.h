/*
 * train_sync.h - the state of one synchronous data-parallel run, shared by
 * train_sync.c (setup, steps, checkpoints, resume) and train_epoch.c (the
 * epoch loop, statistics and evaluation).
 */
#ifndef GW_OPTIMIZER_TRAIN_SYNC_H
#define GW_OPTIMIZER_TRAIN_SYNC_H

#include "model_parallel.h"
#include "straggler.h"
#include "zero.h"

typedef struct gw_train_sync {
    const gw_train_opts_t *o;
    gw_comm_t *comm;
    int rank, world;
    gw_train_dataset_t train, test;
    gw_train_mlp_t model;
    gw_train_sgd_t sgd;
    gw_train_zero_t zero; /* --zero: the sharded optimizer (zero.c) instead of sgd and bk */
    gw_train_codec_t *codec;
    gw_train_buckets_t bk;
    gw_train_report_t rep;
    gw_train_rng_t rng;       /* the shuffle generator, as it is now */
    gw_train_rng_t rng_epoch; /* ... as it was when this epoch began */
    uint32_t *perm;           /* this epoch's order of the shard */
    float *xb;                /* the local batch */
    int32_t *yb;
    size_t local_b;
    float grad_scale;        /* of the loss: 1 / global batch, or 1 / local with a codec */
    long spe;                /* steps per epoch */
    long epoch, step, gstep; /* position: epoch, step in it, steps in all */
    int resumed, stopped;
    int32_t stop_send, stop_recv;
    double t_start, elapsed0; /* training time: this process, and before it */
    double time_to_target;
    double ep_loss; /* running sums of this epoch (local) */
    long ep_correct, ep_seen;
    double compute_s;     /* this epoch, this rank */
    double eval_s;        /* evaluation time, kept out of the clock */
    double total_compute; /* whole run, mean over ranks */
    long total_samples_local;
    double lr;
    uint64_t last_ckpt;
    char config[512];
    gw_train_mem_t mem; /* this rank's memory figure (rank_memory.c) */
    /* Stragglers (straggler.c): step times, and the rank's slice of each
     * step's global batch, perm[step * batch_stride + batch_off + j] for j
     * below local_b (stride local_b and offset 0 without --straggler
     * balance: each rank walks its own shard). */
    gw_train_straggler_t strag;
    size_t batch_stride, batch_off;
    struct gw_train_elastic *el; /* --elastic (train_elastic.c), NULL until the first step */
    long grown_at;               /* the gstep of the last grow (train_grow.c), -1 none */
} gw_train_sync_t;
typedef struct gw_train_elastic gw_train_elastic_t;

gw_status_t gw_train_sync_checkpoint(gw_train_sync_t *s);
/* The gradient buckets over s->comm, through the codec when codec is set
 * (one bucket per tensor; s->codec is made from them the first time), and
 * the loss scale that goes with them, for the current world: at the
 * start, and again whenever --elastic changes the world. */
gw_status_t gw_train_sync_buckets(gw_train_sync_t *s, int codec);
gw_status_t gw_train_sync_step(gw_train_sync_t *s);
void gw_train_sync_begin_epoch(gw_train_sync_t *s);
gw_status_t gw_train_sync_loop(gw_train_sync_t *s);

/* ---- --elastic (train_elastic.c) ---- */
/* The local batch of rank `rank` of `world` when they split the global
 * batch: batch / world, one more for the first batch % world ranks. */
int gw_train_local_batch(int batch, int rank, int world);
/* Before each step: keep what taking it again needs (no-op without
 * --elastic). GW_ERR_NO_MEMORY. */
gw_status_t gw_train_elastic_snapshot(gw_train_sync_t *s);
/* After `failure`: GW_OK when the survivors shrank, rolled back and
 * re-sharded (s->comm is the shrunk communicator), else the error to end
 * the run with (failure itself without --elastic). */
gw_status_t gw_train_elastic_recover(gw_train_sync_t *s, gw_status_t failure);
/* The job goes on with communicator nc (grown, or a joiner's first
 * replacement): the one in use is kept until the end (the first is the
 * caller's), and rank and world follow nc. */
gw_status_t gw_train_elastic_adopt(gw_train_sync_t *s, gw_comm_t *nc);
/* This rank's shard, batch, buffers and buckets in the current world. */
gw_status_t gw_train_elastic_reshard(gw_train_sync_t *s);

/* ---- joining a running job (train_grow.c) ---- */
/* At an epoch's start, or every --grow-every steps, every rank of an
 * --elastic run: admit the processes waiting to join (gw_comm_grow).
 * begun: the epoch's shuffle was drawn already (the generator is rewound
 * to the epoch's start, so that it replays on the new shards). *grew is 1
 * when the world changed: then the state is the grown job's (weights and
 * position from rank 0, data re-sharded) and the caller starts the pass
 * again (the epoch's shuffle, its length). */
gw_status_t gw_train_grow(gw_train_sync_t *s, int begun, int *grew);
/* A joiner (--join), right after setup on its new communicator: take the
 * state from rank 0 as the members send it after their grow. */
gw_status_t gw_train_grow_joined(gw_train_sync_t *s);
/* At the end of an --elastic run: GW_OK when every rank holds the same
 * weights (rank 0 says so), GW_ERR_MISMATCH, logged, when not. */
gw_status_t gw_train_elastic_check_replicas(gw_train_sync_t *s);
/* Frees the snapshots and the communicators --elastic made. */
void gw_train_elastic_free(gw_train_sync_t *s);

/* ---- --resume on another number of ranks (train_resize.c) ---- */
/* Read the checkpoint of `step` this rank resumes from into *c (its path
 * in path): its own file when it was one of the ranks that wrote it, else
 * rank 0's. */
gw_status_t gw_train_resume_read(gw_train_sync_t *s, uint64_t step, char *path, size_t cap,
                                 gw_train_ckpt_t *c);
/* 0: checkpoint c (read from path) has this run's rank count; 1: another,
 * with this run's settings otherwise, which resumes re-sharded; -1: it
 * cannot (said why on stderr). */
int gw_train_resume_other_world(gw_train_sync_t *s, const gw_train_ckpt_t *c, const char *path);
/* After such a checkpoint was loaded: its position in this run's steps. */
void gw_train_resume_renumber(gw_train_sync_t *s, const gw_train_ckpt_t *c);

#endif
