/*
 * trainer.h - what the parts of gradwire-train share: the options, the
 * random number generator, the data sets, the MLP, the optimizer, the
 * gradient buckets, checkpoints and reports. The trainer is built on the
 * public API (gradwire.h) only, as a user's training stack would be; its
 * functions print their own errors to stderr and return a gw_status_t.
 */
#ifndef GW_OPTIMIZER_TRAINER_H
#define GW_OPTIMIZER_TRAINER_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gradwire.h"

#define GW_TRAIN_MAX_LAYERS 16
#define GW_TRAIN_DEFAULT_FMNIST_DIR "/usr/share/datasets/fashion-mnist"

/* ---- options (options.c) ---------------------------------------------- */

typedef enum {
    GW_TRAIN_DATA_FMNIST,
    GW_TRAIN_DATA_SYNTHETIC,
    GW_TRAIN_DATA_LIBSVM
} gw_train_data_kind_t;
typedef enum { GW_TRAIN_DECAY_NONE, GW_TRAIN_DECAY_COSINE, GW_TRAIN_DECAY_STEP } gw_train_decay_t;
typedef enum { GW_TRAIN_SYNC, GW_TRAIN_ASYNC } gw_train_mode_t;

typedef struct gw_train_opts {
    gw_train_data_kind_t data;
    const char *data_dir;   /* Fashion-MNIST IDX directory */
    const char *train_file; /* libsvm */
    const char *test_file;  /* libsvm, optional */
    size_t features;        /* libsvm: 0 = largest index in the files */
    size_t synth_train, synth_test, synth_features;
    int synth_classes;
    double synth_noise;

    int hidden[GW_TRAIN_MAX_LAYERS];
    int nhidden;
    int batch; /* global batch: the sum of every worker's local batch */
    int epochs;
    long max_steps; /* stop after this many steps in all (0: no limit) */
    double lr;      /* learning rate for lr_ref_batch samples per step */
    int lr_ref_batch;
    double momentum, weight_decay, warmup_epochs;
    gw_train_decay_t decay;
    uint64_t seed;
    int shuffle;

    size_t bucket_bytes;
    int overlap;       /* launch buckets while backward runs */
    const char *codec; /* "none" or a codec name of the compression API */
    double codec_param;
    double codec_warmup_epochs;
    double dgc_momentum; /* top-k: DGC momentum correction in the codec (0: off) */

    gw_train_mode_t mode;
    int servers;   /* async: number of parameter-server ranks */
    int staleness; /* async: largest allowed version lag of a worker */

    const char *ckpt_dir;
    long ckpt_every; /* steps; 0: only on SIGTERM */
    int resume;
    const char *save_weights;
    const char *report_json, *report_csv;
    double target_acc;
    int stop_at_target; /* end the run at the first epoch that reaches it */
    int elastic;        /* survive lost ranks (train_elastic.c) */
    int join;           /* join a running --elastic job (train_grow.c) */
    int join_wait_s;    /* how long --join waits for the job to admit it */
    int grow_every;     /* --elastic: admit joiners every N steps too (0: epoch starts only) */
    int threads;        /* OpenBLAS threads per rank */
    int progress;       /* -1 auto (a terminal), 0 off, 1 on */
    int quiet;
    int check_data; /* load the data, print a summary, exit */
    int eval_every; /* epochs between test evaluations */

    int tensor_parallel;        /* ranks per layer (Megatron split); 1: off */
    int pipeline_parallel;      /* stages; 1: off */
    int micro_batches;          /* per local batch; 0: the number of stages */
    int schedule_1f1b;          /* pipeline order: 0 GPipe, 1 1F1B */
    size_t max_rank_memory;     /* bytes; 0: no limit */
    const char *dump_grads;     /* first step's gradients, unsplit layout */
    double price_per_node_hour; /* 0: no cost in the report */
    int ranks_per_node;         /* for node-hours */
    int straggler_balance;      /* --straggler balance (straggler.c) */
    long balance_every;         /* steps between two splits of the global batch */
    const char *trace;          /* --trace FILE: GW_TRACE for this run, merged by rank 0 */
    int zero;                   /* ZeRO stage (zero.c): 0 off, 1 momentum, 2 and gradients */
} gw_train_opts_t;

/* Parse argv (argv[0] is the program). Returns -1 to go on, or an exit
 * status (0 after --help, 2 after a usage error printed to stderr). */
int gw_train_parse_args(int argc, char **argv, gw_train_opts_t *o);
void gw_train_usage(FILE *out);
/* The settings that determine the training trajectory, as one canonical
 * line; checkpoints store it so a resume with other settings is refused. */
void gw_train_opts_fingerprint(const gw_train_opts_t *o, int world, char *buf, size_t len);
/* The trainer's getopt_long table (every option is long only), which the
 * scaling driver also scans to pass the training options on to its runs. */
extern const struct option gw_train_longopts[];

/* ---- random numbers (rng.c): xoshiro256**, seeded by splitmix64 -------- */

typedef struct gw_train_rng {
    uint64_t s[4];
} gw_train_rng_t;

uint64_t gw_train_mix64(uint64_t x);
void gw_train_rng_seed(gw_train_rng_t *r, uint64_t seed);
uint64_t gw_train_rng_next(gw_train_rng_t *r);
double gw_train_rng_uniform(gw_train_rng_t *r); /* [0, 1) */
double gw_train_rng_normal(gw_train_rng_t *r);
uint64_t gw_train_rng_below(gw_train_rng_t *r, uint64_t n);
void gw_train_shuffle(uint32_t *a, size_t n, gw_train_rng_t *r);

/* ---- data (data_*.c) ---------------------------------------------------- */

/* A rank's shard of a labelled data set, dense, row-major. Sharding keeps
 * the samples whose global index i has i % nshards == shard; an even shard
 * (training) only among the first nshards * floor(total / nshards), so every
 * rank takes the same number of steps; an uneven one (evaluation) keeps the
 * remainder too, so every sample is evaluated once. */
typedef struct gw_train_shard {
    int rank, n, even;
} gw_train_shard_t;

typedef struct gw_train_dataset {
    size_t n;     /* samples in this shard */
    size_t dim;   /* features per sample */
    int nclasses; /* labels are 0..nclasses-1 */
    size_t total; /* samples in the whole set */
    float *x;     /* n * dim */
    int32_t *y;   /* n */
} gw_train_dataset_t;

void gw_train_dataset_free(gw_train_dataset_t *d);
/* 1 if global index i of total samples belongs to the shard. */
int gw_train_in_shard(size_t i, size_t total, const gw_train_shard_t *sh);
size_t gw_train_shard_size(size_t total, const gw_train_shard_t *sh);

/* Fashion-MNIST (or any IDX pair, gzipped or not): images idx3 of uint8,
 * labels idx1 of uint8. Pixels are scaled to [0, 1] and standardised with
 * norm[0] (mean) and norm[1] (deviation); when norm[1] is 0 they are taken
 * from this file, over all its samples, and stored in norm. classes is the
 * data set's declared class count (GW_TRAIN_FMNIST_CLASSES): a label
 * outside 0..classes-1 is GW_ERR_PROTOCOL naming the file, record and
 * value; 0 takes the largest label plus one. */
#define GW_TRAIN_FMNIST_CLASSES 10
gw_status_t gw_train_load_idx(const char *images_path, const char *labels_path, int classes,
                              const gw_train_shard_t *sh, float norm[2], gw_train_dataset_t *out);
/* libsvm/svmlight text: "LABEL IDX:VAL ...", indices from 1, ascending.
 * dim 0 takes the largest index in the file. Labels are integers >= 0, or
 * -1/+1 (mapped to 0/1). min_classes raises nclasses (train/test agree). */
gw_status_t gw_train_load_libsvm(const char *path, size_t dim, int min_classes,
                                 const gw_train_shard_t *sh, gw_train_dataset_t *out);
/* The largest feature index and label class count in a libsvm file (the
 * largest label plus one). A label that leaves classes between 1 and
 * itself without any sample (255 among 0..2) is refused as corrupt,
 * naming its line, in a training file (training 1); class 0 may be empty
 * (1-based labels). A test set's labels are checked against the training
 * set's classes instead (data_load.c). */
gw_status_t gw_train_scan_libsvm(const char *path, int training, size_t *max_index, int *nclasses);
/* Seeded synthetic classification task: Gaussian clusters around class
 * centres, sample i generated from (seed, i) alone, so each rank makes only
 * its own shard. `split` separates train (0) and test (1) streams. */
gw_status_t gw_train_make_synthetic(uint64_t seed, int split, size_t total, size_t dim,
                                    int nclasses, double noise, const gw_train_shard_t *sh,
                                    gw_train_dataset_t *out);
/* Load train and test sets for this rank according to the options. */
gw_status_t gw_train_load_data(const gw_train_opts_t *o, int shard, int nshards,
                               gw_train_dataset_t *train, gw_train_dataset_t *test);

/* ---- model (model_mlp.c) ----------------------------------------------- */

/* A multilayer perceptron: Linear -> ReLU -> ... -> Linear, softmax cross-
 * entropy. Parameters and gradients are flat arrays; layer l's weights
 * (out x in, row-major) are at w_off[l], its biases at b_off[l]. */
typedef struct gw_train_mlp {
    int nlayers;                        /* weight layers */
    int sizes[GW_TRAIN_MAX_LAYERS + 1]; /* sizes[0] inputs ... sizes[nlayers] classes */
    size_t w_off[GW_TRAIN_MAX_LAYERS], b_off[GW_TRAIN_MAX_LAYERS];
    size_t nparams;
    float *params, *grads;
    size_t cap;                            /* batch capacity of the workspace */
    float *act[GW_TRAIN_MAX_LAYERS + 1];   /* act[0] = input; act[l] = layer l-1 output */
    float *delta[GW_TRAIN_MAX_LAYERS + 1]; /* dLoss/d(pre-activation) of layer l-1 */
} gw_train_mlp_t;

/* Called during backward once every gradient from flat offset `from` to the
 * end is final (layers finish last to first). */
typedef gw_status_t (*gw_train_grad_ready_fn)(void *ctx, size_t from);

gw_status_t gw_train_mlp_init(gw_train_mlp_t *m, const int *sizes, int nsizes, size_t cap,
                              gw_train_rng_t *rng);
void gw_train_mlp_free(gw_train_mlp_t *m);
/* Forward pass of B samples (rows of x); logits land in act[nlayers]. */
void gw_train_mlp_forward(gw_train_mlp_t *m, const float *x, size_t B);
/* Softmax cross-entropy of the last forward pass: adds the summed loss and
 * the number of correct predictions to *loss_sum and *correct, and leaves
 * dLoss/dlogits * scale in delta[nlayers] (scale = 1 / global batch). */
void gw_train_mlp_loss(gw_train_mlp_t *m, const int32_t *y, size_t B, float scale, double *loss_sum,
                       long *correct);
/* The same on a B x k matrix of logits z, the gradient into d. */
void gw_train_softmax_xent(const float *z, float *d, int k, const int32_t *y, size_t B, float scale,
                           double *loss_sum, long *correct);
/* Backward pass into m->grads (overwritten), calling ready (may be NULL)
 * after each layer. Stops at ready's first error. */
gw_status_t gw_train_mlp_backward(gw_train_mlp_t *m, size_t B, gw_train_grad_ready_fn ready,
                                  void *ctx);
/* The two halves of backward for layer l, for callers that keep the
 * gradients elsewhere (ZeRO's buckets, zero.c): rows [row0, row1) of dW
 * of layer l into dw ((row1 - row0) x in) and, unless db is NULL, all of
 * db (out), from delta[l + 1]; then delta[l] from delta[l + 1] (l > 0), which reads
 * layer l's weights. */
void gw_train_mlp_backward_weights(gw_train_mlp_t *m, size_t B, int l, int row0, int row1,
                                   float *dw, float *db);
void gw_train_mlp_backward_input(gw_train_mlp_t *m, size_t B, int l);
/* Loss sum and correct count over a whole data set, in batches. */
void gw_train_mlp_evaluate(gw_train_mlp_t *m, const gw_train_dataset_t *d, double *loss_sum,
                           long *correct);

/* ---- optimizer (sgd.c) ------------------------------------------------- */

typedef struct gw_train_sgd {
    float momentum, weight_decay;
    float *velocity; /* nparams */
    size_t nparams;
} gw_train_sgd_t;

gw_status_t gw_train_sgd_init(gw_train_sgd_t *s, const gw_train_mlp_t *m, double momentum,
                              double weight_decay);
void gw_train_sgd_free(gw_train_sgd_t *s);
/* v = mu v + (g + wd w), w -= lr v on n elements: the update itself, the
 * one every optimizer path applies (sharded by ZeRO, zero.c). */
void gw_train_sgd_update(float *w, float *v, const float *g, size_t n, float mu, float wd,
                         float lr);
/* v = momentum * v + g + wd * w (weights only); w -= lr * v. */
void gw_train_sgd_step(gw_train_sgd_t *s, gw_train_mlp_t *m, const float *grad, float lr);
/* The same on the flat parameters [lo, hi) only (a parameter server's
 * shard); grad is indexed like the parameters. */
void gw_train_sgd_step_range(gw_train_sgd_t *s, gw_train_mlp_t *m, const float *grad, size_t lo,
                             size_t hi, float lr);
/* Learning rate at a global step: the linear scaling rule (lr * batch /
 * lr_ref_batch), a linear warm-up from lr to that over warmup_epochs, then
 * the decay schedule over the rest of the run. */
double gw_train_lr_at(const gw_train_opts_t *o, long step, long steps_per_epoch);

/* ---- gradient buckets (buckets.c) ---------------------------------------- */

typedef struct gw_train_codec gw_train_codec_t; /* codec.c */

typedef struct gw_train_bucket {
    size_t off, count;
    size_t rows, cols;   /* the tensor's shape, for per-tensor buckets */
    int decay;           /* a weight matrix (weight decay applies), not biases */
    gw_handle_t *handle; /* in flight when non-NULL */
    int launched;
    double t_launch;
} gw_train_bucket_t;

typedef struct gw_train_buckets {
    gw_comm_t *comm;
    float *grads;
    const float *params;
    gw_train_bucket_t *b; /* b[0] covers the end of the array: it is ready first */
    int nb;
    int next; /* next bucket to launch */
    int overlap;
    gw_train_codec_t *codec; /* NULL: dense allreduce */
    /* With a codec and no overlap: blocking gw_allreduce_compressed calls on
     * this thread after backward (the trainer's former path, kept to check
     * that the non-blocking one gives the same weights bit for bit). */
    int blocking;
    /* DGC: weight decay added to weight buckets' gradients (grad += wd * w)
     * before they are sent, so that it goes through the codec's momentum
     * like the optimizer's own would; 0 otherwise. */
    float grad_decay;
    double t_first_launch, t_last_done;
    double comm_s, wait_s, codec_s; /* accumulated since the last reset */
    gw_status_t status;             /* first failure */
} gw_train_buckets_t;

/* Buckets of about bucket_bytes, or one per tensor when per_tensor is set
 * (as codecs want). comm NULL: one rank, nothing to reduce. */
gw_status_t gw_train_buckets_init(gw_train_buckets_t *bk, gw_comm_t *comm, gw_train_mlp_t *m,
                                  size_t bucket_bytes, int overlap, int per_tensor);
void gw_train_buckets_free(gw_train_buckets_t *bk);
/* The gw_train_grad_ready_fn for backward: launch every bucket now final. */
gw_status_t gw_train_buckets_ready(void *ctx, size_t from);
/* Launch what is left and wait for every bucket; grads then hold the sum
 * over ranks (the average, with a codec). */
gw_status_t gw_train_buckets_finish(gw_train_buckets_t *bk);

/* ---- compression (codec.c) ------------------------------------------------ */

/* One gw_compress_state_t per bucket (buckets are whole tensors when a
 * codec is in use, so PowerSGD sees each weight matrix's shape). */
gw_status_t gw_train_codec_create(gw_comm_t *comm, const gw_train_opts_t *o,
                                  const gw_train_buckets_t *bk, uint32_t warmup_steps,
                                  gw_train_codec_t **out);
/* The dense steps before the codec starts: --codec-warmup-epochs of
 * steps_per_epoch; and what a codec was made with (a joiner of an
 * --elastic job takes the job's, whose epochs may have had another
 * length). */
uint32_t gw_train_codec_warmup_steps(const gw_train_opts_t *o, long steps_per_epoch);
uint32_t gw_train_codec_warmup(const gw_train_codec_t *c);
void gw_train_codec_destroy(gw_train_codec_t *c);
/* Average bucket i over the ranks in place through the codec: queued on
 * the communicator's progress thread (gw_iallreduce_compressed; buf and the
 * bucket's state belong to the library until *handle completes), or
 * blocking. */
gw_status_t gw_train_codec_start(gw_train_codec_t *c, int bucket, float *buf, size_t count,
                                 gw_handle_t **handle);
gw_status_t gw_train_codec_allreduce(gw_train_codec_t *c, int bucket, float *buf, size_t count);
/* Encode plus decode seconds of bucket i's last finished call, as the
 * library measured them on the thread that ran it (0 if unknown). Only
 * while no call on that bucket is in flight. */
double gw_train_codec_last_seconds(const gw_train_codec_t *c, int bucket);
/* Bytes sent and what a dense ring allreduce would have sent, since creation. */
void gw_train_codec_traffic(const gw_train_codec_t *c, double *sent, double *dense);
/* Every state (step, error-feedback residual, PowerSGD's Q) as one image,
 * for checkpoints: malloc'd into *out, or loaded back. */
gw_status_t gw_train_codec_save(const gw_train_codec_t *c, unsigned char **out, size_t *len);
gw_status_t gw_train_codec_load(gw_train_codec_t *c, const unsigned char *in, size_t len);
/* The same image into a buffer the caller keeps (*buf of *cap bytes,
 * grown with realloc when too small), for the step snapshots of
 * --elastic, which take one every step. */
gw_status_t gw_train_codec_save_into(const gw_train_codec_t *c, unsigned char **buf, size_t *cap,
                                     size_t *len);
/* --elastic (train_elastic.c, train_grow.c): the communicator the states
 * are reduced over from now on (a shrunk or grown one); zero every
 * state's residual (and DGC's velocity), keeping the steps and PowerSGD's
 * Q, for a rank that took another's image; the states' step (they all
 * take one per training step, so they agree). */
void gw_train_codec_set_comm(gw_train_codec_t *c, gw_comm_t *comm);
gw_status_t gw_train_codec_reset_residuals(gw_train_codec_t *c);
uint64_t gw_train_codec_step(const gw_train_codec_t *c);

/* ---- checkpoints (checkpoint.c) ------------------------------------------- */

typedef struct gw_train_ckpt {
    uint32_t rank, world;
    uint64_t epoch, step_in_epoch, global_step;
    gw_train_rng_t rng; /* the shuffle generator as it was at the epoch's start */
    double elapsed_s;   /* training time before this checkpoint */
    double time_to_target_s;
    double epoch_loss_sum;
    int64_t epoch_correct, epoch_seen;
    char config[512];
    size_t nparams;
    float *params, *velocity;
    /* Floats in velocity: 0 or nparams, the whole momentum; otherwise the
     * rank's --zero shard (zero.c), written as format version 2. */
    size_t velocity_len;
    size_t codec_len; /* the codec states' image: residuals, steps, PowerSGD Q */
    unsigned char *codec_state;
} gw_train_ckpt_t;

/* Write dir/ckpt-STEP-rankR.gwc atomically (temp file, fsync, rename,
 * fsync of the directory). */
gw_status_t gw_train_ckpt_write(const char *dir, const gw_train_ckpt_t *c);
/* Read and verify one file: magic, version, sizes, CRC32. On success the
 * arrays are malloc'd (free with gw_train_ckpt_release). */
gw_status_t gw_train_ckpt_read(const char *path, gw_train_ckpt_t *c);
void gw_train_ckpt_release(gw_train_ckpt_t *c);
void gw_train_ckpt_path(const char *dir, uint64_t step, uint32_t rank, char *buf, size_t len);
/* dir/latest names the newest step every rank has written. */
gw_status_t gw_train_ckpt_set_latest(const char *dir, uint64_t step);
/* GW_ERR_NOT_FOUND when there is no checkpoint yet. */
gw_status_t gw_train_ckpt_get_latest(const char *dir, uint64_t *step);
/* Remove this rank's files of steps other than keep_a and keep_b. */
void gw_train_ckpt_prune(const char *dir, uint32_t rank, uint64_t keep_a, uint64_t keep_b);

/* checkpoint_dir.c: the temporary name a write uses for dir/name
 * (".gradwire-train-tmp.PID.name"), whether a directory entry is such a
 * temporary (or one of the earlier versions' ".name.tmp.PID"), and the
 * removal of every such leftover in dir (rank 0, at start). */
void gw_train_ckpt_tmp_path(const char *dir, const char *name, char *buf, size_t len);
int gw_train_ckpt_is_tmp_name(const char *name);
void gw_train_ckpt_clean_tmp(const char *dir);
/* For --resume: GW_OK when dir has a `latest` (good or bad: resuming
 * checks it), or no checkpoint at all;
 * GW_ERR_CONFIG, with a message listing the steps found and how to pick
 * one, when it holds checkpoints that no `latest` names. */
gw_status_t gw_train_ckpt_check_resume(const char *dir);
/* checkpoint_commit.c: every rank of comm writes c (unless local is an
 * error, which it passes on), `latest` names the step once all have, and
 * each prunes its files but the step and *last_ckpt (then set to the
 * step). Collective over comm. */
gw_status_t gw_train_ckpt_commit(gw_comm_t *comm, const char *dir, const gw_train_ckpt_t *c,
                                 gw_status_t local, uint64_t *last_ckpt);
/* Every rank of comm resumes from the same global step (gstep, 0 when it
 * starts afresh), or all fail: local is this rank's outcome of loading. */
gw_status_t gw_train_ckpt_agree_start(gw_comm_t *comm, long gstep, gw_status_t local);

/* ---- reports (report.c) --------------------------------------------------- */

typedef struct gw_train_straggler gw_train_straggler_t; /* straggler.h */

typedef struct gw_train_epoch_stats {
    int epoch;
    double loss, train_acc, test_loss, test_acc; /* test_acc < 0: not evaluated */
    double samples_per_s;
    double compute_s, comm_s, codec_s, wait_s, epoch_s, elapsed_s;
    double lr;
} gw_train_epoch_stats_t;

typedef struct gw_train_report {
    int world, rank;
    int open; /* gw_train_report_open succeeded */
    int tty, quiet;
    double last_bar;
    FILE *csv;
    const char *csv_path; /* --csv, for a rank that becomes rank 0 (gw_train_report_rank) */
    gw_train_epoch_stats_t *epochs; /* every rank keeps them: any may become rank 0 */
    int nepochs, cap;
    double time_to_target_s; /* < 0: not reached */
    double target_acc;
    double alpha_s, beta_s_per_byte; /* measured link, -1 if not */
    double compute_per_sample_s;
    double allreduce_s; /* one dense gradient allreduce */
    size_t grad_bytes;
    long steps, samples;
    double train_s;
    const char *mode, *codec;
    char config[512];
    double rank_memory; /* bytes, the largest rank's (0: not computed) */
    /* Data parallel: this rank's params, grads, optimizer and activation
     * bytes (rank_memory.c, zero.c), with the ZeRO stage (0: off). */
    double dp_memory[4];
    int zero;
    int nodes; /* world / ranks per node, rounded up */
    /* An elastic run's node count changes (gw_train_report_world): the
     * cost is the mean count over the run's wall time, times train_s. */
    int nodes_start, ranks_per_node;
    double wall_open_s, wall_mark_s, node_wall_s; /* node-seconds up to the mark */
    double nodes_to_target;                       /* the mean when the target was reached */
    double price_per_node_hour;
    /* Model parallelism (train_model_parallel.c); par_tp 0: data parallel. */
    int par_dp, par_pp, par_tp, par_micro;
    double par_bubble_theory;
    double par_bubble[GW_TRAIN_MAX_LAYERS]; /* measured, per stage */
    const double *par_memory;               /* per rank: params, grads, optimizer, activations */
    const gw_train_straggler_t *straggler;  /* the per-rank step table (NULL: none) */
} gw_train_report_t;

gw_status_t gw_train_report_open(gw_train_report_t *r, const gw_train_opts_t *o, int rank,
                                 int world);
void gw_train_report_progress(gw_train_report_t *r, int epoch, long step, long steps, double loss);
gw_status_t gw_train_report_epoch(gw_train_report_t *r, const gw_train_epoch_stats_t *s);
/* This rank's rank from now on (--elastic: a shrink renumbers the ranks, and
 * when rank 0 died another rank becomes rank 0): a new rank 0 takes over
 * the epoch lines, the CSV (written again from the epochs every rank keeps)
 * and the JSON at the end. */
gw_status_t gw_train_report_rank(gw_train_report_t *r, int rank);
/* The job has world ranks from now on (an elastic shrink or grow): the
 * cost line and the JSON's node-hours count each node count for the time
 * it ran. */
void gw_train_report_world(gw_train_report_t *r, int world);
gw_status_t gw_train_report_close(gw_train_report_t *r, const char *json_path);

/* ---- the training loops ------------------------------------------------------ */

/* Synchronous data-parallel SGD (train_sync.c). Returns the exit status. */
int gw_train_run_sync(const gw_train_opts_t *o, gw_comm_t *comm);
/* Parameter-server SGD (param_server.c). Returns the exit status. */
int gw_train_run_async(const gw_train_opts_t *o, gw_comm_t *comm);

/* --elastic, both trainers (train_elastic.c, ps_elastic.c): after a
 * failure on old that names another rank, gw_comm_shrink and who the
 * survivors were: (*members)[new rank] = old rank (malloc'd; members may
 * be NULL) and the lost old ranks as text ("1,3") in lost. A failure that
 * names no rank, or this one, is returned as it was, said: there is
 * nothing to shrink away. */
gw_status_t gw_train_elastic_shrink(gw_comm_t *old, gw_status_t failure, gw_comm_t **out,
                                    int32_t **members, char *lost, size_t cap);
/* `--scaling 1,2,4,8`: run the job at each node count (scaling.c). */
int gw_train_scaling_main(int argc, char **argv, const char *counts);

/* Set by the SIGTERM handler; the loops poll it between steps. */
int gw_train_stop_requested(void);
void gw_train_install_signals(void);

/* Flat float array I/O (final weights). */
gw_status_t gw_train_save_floats(const char *path, const float *a, size_t n);

#endif
