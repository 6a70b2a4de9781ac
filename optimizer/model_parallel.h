/*
 * model_parallel.h - what the model-parallel trainer's parts share: the
 * grid of ranks (parallel_grid.c), the memory estimate (rank_memory.c), one
 * pipeline stage's share of the MLP with its layers split over a tensor-
 * parallel group (model_tensor_parallel.c), the GPipe schedule of a step
 * (pipeline_schedule.c) and the training loop (train_model_parallel.c).
 */
#ifndef GW_OPTIMIZER_MODEL_PARALLEL_H
#define GW_OPTIMIZER_MODEL_PARALLEL_H

#include "trainer.h"

/* ---- the grid (parallel_grid.c) ------------------------------------------
 * world = dp x pp x tp ranks; rank = (dp_rank * pp + pp_rank) * tp + tp_rank,
 * so a tensor-parallel group is tp consecutive ranks (one host, when the
 * launcher fills hosts in order: its allreduces are the chattiest). */
typedef struct gw_train_grid {
    int world, rank;
    int dp, pp, tp;
    int dp_rank, pp_rank, tp_rank;
    gw_comm_t *world_comm;           /* not owned */
    gw_comm_t *dp_comm;              /* same stage and tensor slice, other data shards */
    gw_comm_t *pp_comm;              /* same data shard and tensor slice: the stages */
    gw_comm_t *tp_comm;              /* same data shard and stage: one layer's slices */
    int lo[GW_TRAIN_MAX_LAYERS + 1]; /* stage s holds layers lo[s] .. lo[s+1]-1 */
} gw_train_grid_t;

/* Check the sizes (world divisible, layers enough for the stages, the
 * column-parallel layers' outputs divisible by tp) and split the
 * communicators. sizes[0..nlayers] as in gw_train_mlp_t. Errors name what
 * does not divide. Collective over comm; every rank returns the same. */
gw_status_t gw_train_grid_init(gw_train_grid_t *g, gw_comm_t *comm, const gw_train_opts_t *o,
                               const int *sizes, int nlayers);
void gw_train_grid_free(gw_train_grid_t *g);
/* Whether layer l (global index) of a stage starting at `lo` and ending
 * before `hi` is split by output rows (column-parallel, 'C'), by input
 * columns (row-parallel, 'R'), or kept whole on every rank ('F'). */
char gw_train_tp_kind(int l, int lo, int hi, int tp);

/* ---- memory (rank_memory.c) ------------------------------------------------ */

typedef struct gw_train_mem {
    double params, grads, optimizer, activations; /* bytes */
} gw_train_mem_t;

double gw_train_mem_total(const gw_train_mem_t *m);
/* The data-parallel trainer's figure: the whole model on every rank. */
void gw_train_mem_data_parallel(const int *sizes, int nlayers, size_t cap, size_t local_b,
                                gw_train_mem_t *m);
/* With --zero STAGE over `world` data-parallel ranks (zero.c): the
 * momentum is one block of ceil(count / world) per bucket; the gradients
 * are the padded full array (stage 1) or a block per bucket plus two
 * buckets' workspace (stage 2). */
void gw_train_mem_zero(int stage, int world, size_t bucket_bytes, const int *sizes, int nlayers,
                       size_t cap, size_t local_b, gw_train_mem_t *m);
/* Refuse (GW_ERR_CONFIG, with the figures and what to do) when the total
 * exceeds o->max_rank_memory; `who` says which rank or stage it is. */
gw_status_t gw_train_mem_check(const gw_train_opts_t *o, const gw_train_mem_t *m, const char *who,
                               int suggest_split);
/* "12.3 MiB" */
void gw_train_mem_format(double bytes, char *buf, size_t len);

/* ---- a stage's share of the model (model_tensor_parallel.c) --------------- */

typedef struct gw_train_tp_layer {
    char kind;                   /* 'F', 'C' or 'R' (gw_train_tp_kind) */
    int in, out;                 /* the whole layer's sizes */
    int lin, lout;               /* this rank's: lout = out / tp ('C'), lin = in / tp ('R') */
    int first_row, first_col;    /* where this rank's block starts in the whole matrix */
    int relu;                    /* ReLU after it: every layer but the model's last */
    size_t w_off, b_off, nw, nb; /* in the stage's flat arrays */
} gw_train_tp_layer_t;

/* Where backward puts the gradients instead of the stage's grads array
 * (ZeRO-2 over the grid, zero_grid.c), in units of rows of a layer's
 * weights: rows(i) rows at a time (the last unit of a layer shorter);
 * slot(i, row0) is zeroed room for the unit's rows of the weights'
 * gradient, followed, for the layer's last unit, by the biases' (the
 * unit's span of the flat arrays); ready(i, row0) takes it once backward
 * of one micro-batch has written it, before the next is asked for. */
typedef struct gw_train_grad_sink {
    int (*rows)(struct gw_train_grad_sink *s, int i);
    float *(*slot)(struct gw_train_grad_sink *s, int i, int row0);
    gw_status_t (*ready)(struct gw_train_grad_sink *s, int i, int row0);
} gw_train_grad_sink_t;

typedef struct gw_train_stage {
    int lo, hi, nl; /* global layers lo..hi-1, nl = hi - lo */
    gw_train_tp_layer_t L[GW_TRAIN_MAX_LAYERS];
    size_t nparams;
    float *params, *grads, *velocity;      /* grads: NULL with a sink */
    gw_train_grad_sink_t *sink;            /* NULL: backward adds into grads */
    size_t cap;                            /* rows of the workspace */
    int width[GW_TRAIN_MAX_LAYERS + 1];    /* of act[i], delta[i] */
    float *act[GW_TRAIN_MAX_LAYERS + 1];   /* act[i]: input of local layer i; act[nl]: output */
    float *delta[GW_TRAIN_MAX_LAYERS + 1]; /* delta[i+1]: dLoss/d(pre-activation) of layer i;
                                            * delta[0]: dLoss/d(stage input) */
    gw_comm_t *tp_comm;
    int tp, tp_rank;
    double tp_comm_s; /* time in the tensor-parallel allreduces */
} gw_train_stage_t;

/* The layers, sizes and flat offsets of this rank's share of stage
 * pp_rank, without allocating anything (for memory estimates). */
void gw_train_stage_layout(gw_train_stage_t *st, const gw_train_grid_t *g, int pp_rank,
                           const int *sizes, int nlayers);
/* This rank's share of stage g->pp_rank, weights drawn from the generator
 * exactly as gw_train_mlp_init draws the whole model's (so the generator
 * ends in the same state and the split model starts from the same weights
 * as the unsplit one). */
gw_status_t gw_train_stage_init(gw_train_stage_t *st, const gw_train_grid_t *g, const int *sizes,
                                int nlayers, size_t cap, gw_train_rng_t *rng);
void gw_train_stage_free(gw_train_stage_t *st);
/* Memory of a stage as gw_train_stage_init would allocate it. */
void gw_train_stage_mem(const gw_train_grid_t *g, int pp_rank, const int *sizes, int nlayers,
                        size_t cap, gw_train_mem_t *m);
/* Forward of rows [r0, r0 + B) of act[0] through the stage's layers. */
gw_status_t gw_train_stage_forward(gw_train_stage_t *st, size_t r0, size_t B);
/* Backward of rows [r0, r0 + B) from delta[nl] (dLoss/d(output)), adding
 * into grads (or handing each layer's gradient to st->sink); delta[0]
 * gets the input's gradient when need_input. */
gw_status_t gw_train_stage_backward(gw_train_stage_t *st, size_t r0, size_t B, int need_input);
/* Add this rank's parameters (or gradients) at their places in the
 * unsplit layout of nparams_full floats; replicated ones only when
 * `replicas` (one rank of the tensor group adds them). */
void gw_train_stage_scatter_full(const gw_train_stage_t *st, const float *local, const int *sizes,
                                 float *full, int replicas);
/* v = mu v + g + wd w (weights only), w -= lr v, as sgd.c. */
void gw_train_stage_sgd(gw_train_stage_t *st, float mu, float wd, float lr);

/* ---- one step's schedule (pipeline_schedule.c) ---------------------------- */

typedef struct gw_train_pipe_stats {
    double busy_s, idle_s, span_s; /* this rank: computing, blocked on a neighbour, in all */
} gw_train_pipe_stats_t;

/* One GPipe step on the local batch (x: local_b rows, y labels): every
 * micro-batch forward through the stages, then every one backward; the
 * gradients of the mean loss over the global batch (scale) accumulate in
 * grads. The last stage adds the loss and correct count. */
gw_status_t gw_train_pipe_step(gw_train_stage_t *st, const gw_train_grid_t *g, const float *x,
                               const int32_t *y, size_t local_b, int micro, float scale,
                               double *loss_sum, long *correct, gw_train_pipe_stats_t *ps);
/* The same step in the 1F1B order (pipeline_1f1b.c). */
gw_status_t gw_train_pipe_step_1f1b(gw_train_stage_t *st, const gw_train_grid_t *g, const float *x,
                                    const int32_t *y, size_t local_b, int micro, float scale,
                                    double *loss_sum, long *correct, gw_train_pipe_stats_t *ps);
/* Forward-only evaluation of a whole data set through the stages. */
gw_status_t gw_train_pipe_evaluate(gw_train_stage_t *st, const gw_train_grid_t *g,
                                   const gw_train_dataset_t *d, double *loss_sum, long *correct);

/* ---- the loop (train_model_parallel.c) -------------------------------------- */

int gw_train_run_model_parallel(const gw_train_opts_t *o, gw_comm_t *comm);

#endif
