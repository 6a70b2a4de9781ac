/*
 * straggler.h - stragglers in synchronous training (straggler.c): each
 * rank's step time split into compute and wait, gathered once at the end of
 * the run into a per-rank table that names the slowest rank; and the one
 * mitigation, --straggler balance, which gives each rank a share of the
 * global batch in proportion to its measured speed.
 */
#ifndef GW_OPTIMIZER_STRAGGLER_H
#define GW_OPTIMIZER_STRAGGLER_H

#include "kit.h"
#include "trainer.h"

/* What each rank contributes to the end-of-run table (one allgather). */
enum {
    GW_STRAG_BATCH,
    GW_STRAG_SAMPLES,
    GW_STRAG_STEP_MED,
    GW_STRAG_STEP_P90,
    GW_STRAG_COMPUTE_MED,
    GW_STRAG_COMPUTE_P90,
    GW_STRAG_WAIT_MED,
    GW_STRAG_WAIT_P90,
    GW_STRAG_STEP_SUM,
    GW_STRAG_COMPUTE_SUM,
    GW_STRAG_WAIT_SUM,
    GW_STRAG_FIELDS
};

struct gw_train_straggler {
    int rank, world;
    int balance;         /* --straggler balance */
    long every;          /* steps between two re-splits of the global batch */
    int global_batch;    /* the sum of batch[] */
    int *batch, *offset; /* per rank: its share of the global batch, where it starts */
    int rebalances;      /* re-splits that changed something */
    /* This rank's steps, the whole run: step, compute and wait seconds. */
    float *step_s, *compute_s, *wait_s;
    size_t n, cap;
    long samples;
    /* What the next split is computed from: sums over the steps so far,
     * halved at each split (an average that favours recent windows). */
    double win_fb_s, win_opt_s, win_samples, win_weight;
    long win_steps; /* steps since the last split */
    /* Test-only slowdown (GW_TRAIN_TEST_SLOW=RANK:US): seconds per sample. */
    double slow_s_per_sample;
    /* The gathered table (every rank has it after the summary). */
    double *table; /* world x GW_STRAG_FIELDS */
    int slowest;
    double wait_share; /* the ranks' step time lost to waiting beyond the fastest */
    int summarised;
};

/* Equal split of global_batch (the remainder to the first ranks); the
 * slowdown knob read from the environment. */
gw_status_t gw_train_straggler_init(gw_train_straggler_t *g, const gw_train_opts_t *o, int rank,
                                    int world);
void gw_train_straggler_free(gw_train_straggler_t *g);
/* --straggler balance: every rank holds the whole training set (a rank's
 * share of a step can be any slice of the global batch) and its own shard
 * of the test set, as the sharded loader would give it. */
gw_status_t gw_train_straggler_load_data(const gw_train_opts_t *o, int rank, int world,
                                         gw_train_dataset_t *train, gw_train_dataset_t *test);
/* GW_TRAIN_TEST_SLOW=RANK:US: *s_per_sample becomes US microseconds for
 * rank RANK (left alone for the others); GW_ERR_CONFIG, said, when the
 * variable is malformed. For --async too, where workers have no
 * straggler state but this. */
gw_status_t gw_train_test_slow(int rank, double *s_per_sample);
/* The test-only slowdown of `samples` samples (sleeps; nothing without it). */
void gw_train_straggler_slow(const gw_train_straggler_t *g, size_t samples);
/* After a step: its times (forward and backward, optimizer, wait in the
 * allreduce, the whole step) and its samples; with balance, every `every`
 * steps a new split from the window's figures of every rank (a small
 * allgather at the same step on every rank). */
gw_status_t gw_train_straggler_step(gw_train_straggler_t *g, gw_comm_t *comm, double fb_s,
                                    double opt_s, double wait_s, double step_s, size_t samples);
/* The end-of-run table: one allgather; every rank computes the same. */
gw_status_t gw_train_straggler_summarise(gw_train_straggler_t *g, gw_comm_t *comm);
/* The table as text (rank 0) and as the report's "stragglers" object. */
void gw_train_straggler_print(const gw_train_straggler_t *g, FILE *out);
void gw_train_straggler_json(const gw_train_straggler_t *g, gw_kit_json_t *j);

#endif
