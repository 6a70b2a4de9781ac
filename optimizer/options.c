/*
 * options.c - gradwire-train's command line: parsing, validation and the
 * fingerprint of the settings that determine a run's trajectory (stored in
 * checkpoints, so that a resume with different settings is refused).
 */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"
#include "trainer.h"

void gw_train_usage(FILE *out)
{
    fprintf(out,
            "usage: gradwire-train [options]            (one process per rank, e.g. under\n"
            "                                           `gradwire launch -n 4 gradwire-train`)\n"
            "       gradwire-train --scaling 1,2,4,8 [scaling options] [options]\n"
            "\n"
            "data:\n"
            "  --data fashion-mnist|synthetic|libsvm   (default fashion-mnist)\n"
            "  --data-dir DIR           Fashion-MNIST IDX files (default %s)\n"
            "  --train FILE --test FILE libsvm files (--test optional)\n"
            "  --features N             libsvm feature count (default: largest index)\n"
            "  --synthetic N,T,D,K,S    train/test samples, features, classes, noise\n"
            "                           (default 20000,4000,32,10,3)\n"
            "  --seed N                 seeds weights, shuffles, synthetic data (default 1)\n"
            "  --no-shuffle             keep each shard in file order every epoch\n"
            "model and optimizer:\n"
            "  --hidden 256,128|none    hidden layer sizes (default 256,128)\n"
            "  --batch N                global batch, split over the workers (default 128)\n"
            "  --epochs N               (default 15)\n"
            "  --steps N                stop after N steps in all\n"
            "  --lr X                   learning rate at the reference batch (default 0.05)\n"
            "  --lr-ref-batch N         linear scaling rule: lr * batch / N (default 128)\n"
            "  --momentum X             (default 0.9)\n"
            "  --weight-decay X         on weight matrices (default 5e-4)\n"
            "  --warmup-epochs X        linear warm-up to the scaled rate (default 1)\n"
            "  --decay cosine|step|none after warm-up (default cosine)\n"
            "data-parallel:\n"
            "  --bucket-kb N            gradient bucket size (default 256)\n"
            "  --no-overlap             allreduce only after backward has finished (with a\n"
            "                           codec: blocking compressed calls, one per tensor)\n"
            "  --codec NAME             gradient compression: none, fp16, bf16, int8, sign,\n"
            "                           topk, powersgd (default none); started per tensor as\n"
            "                           backward produces it, like dense buckets\n"
            "  --codec-param X          the codec's parameter (top-k ratio, PowerSGD rank,\n"
            "                           int8/sign elements per scale)\n"
            "  --codec-warmup-epochs X  dense allreduce for the first X epochs (default 1)\n"
            "  --dgc-momentum X         with --codec topk: Deep Gradient Compression's momentum\n"
            "                           correction with factor X in (0, 1). The codec keeps\n"
            "                           the velocity (u = X u + g + wd w, weight decay\n"
            "                           included) and returns the momentum-corrected update,\n"
            "                           which the trainer applies by plain SGD: --momentum is\n"
            "                           then not used (default 0: off)\n"
            "  --zero 1|2               ZeRO: shard the momentum (1), and the reduced\n"
            "                           gradients too (2), over the data-parallel ranks:\n"
            "                           per --bucket-kb bucket a reduce-scatter of the\n"
            "                           gradient, the update of this rank's block and an\n"
            "                           allgather of the weights, overlapped with\n"
            "                           backward. Checkpoints hold each rank's shard and\n"
            "                           resume on any rank count, with or without --zero.\n"
            "                           With --tensor-/--pipeline-parallel: over the\n"
            "                           data-parallel axis. Not with --async, --codec,\n"
            "                           --elastic or --straggler balance (default 0: off)\n"
            "  --async                  parameter-server SGD instead of synchronous (dense\n"
            "                           gradients: no --codec)\n"
            "  --servers N              async: server ranks (default 1)\n"
            "  --staleness N            async: largest version lag of a worker (default 4)\n"
            "model parallelism (a grid of data x pipeline x tensor parallel ranks):\n"
            "  --tensor-parallel K      split each layer's weights over K ranks (Megatron:\n"
            "                           column- then row-parallel pairs; default 1)\n"
            "  --pipeline-parallel K    consecutive layers as K stages on K ranks (default 1)\n"
            "  --micro-batches M        micro-batches per local batch (default: K)\n"
            "  --schedule gpipe|1f1b    pipeline order: all forwards then all backwards, or\n"
            "                           one forward, one backward (default gpipe)\n"
            "  --max-rank-memory BYTES  refuse a run whose parameters, gradients, optimizer\n"
            "                           state and activations exceed BYTES on a rank (K/M/G)\n"
            "  --dump-grads FILE        the first step's gradients in the unsplit layout and\n"
            "                           its mean loss, raw float32 (for tests)\n"
            "stragglers (synchronous data parallel):\n"
            "  --straggler none|balance each rank's share of the global batch in proportion\n"
            "                           to its measured speed (balance: every rank holds the\n"
            "                           whole training set; default none)\n"
            "  --balance-every N        steps between two splits of the batch (default 20)\n"
            "timeline:\n"
            "  --trace FILE             Chrome trace JSON of the run (GW_TRACE=FILE): every\n"
            "                           collective and its waits, and the compute of each\n"
            "                           step (synchronous data parallel), one track per rank;\n"
            "                           rank 0 merges the ranks' files into FILE at the end\n"
            "checkpoints:\n"
            "  --checkpoint-dir DIR     write checkpoints there (also on SIGTERM)\n"
            "  --checkpoint-every N     every N steps (default: only on SIGTERM)\n"
            "  --resume                 continue from the latest checkpoint in DIR (on\n"
            "                           any number of ranks: the data is re-sharded)\n"
            "elastic:\n"
            "  --elastic                survive lost ranks: the others shrink the job, roll\n"
            "                           back to the last step all finished, re-shard and go\n"
            "                           on with the same global batch (under gradwire\n"
            "                           launch --elastic); with --codec each survivor's\n"
            "                           codec state rolls back too, and a joiner takes\n"
            "                           rank 0's with a zero residual; with --async a\n"
            "                           lost server's shard comes from the freshest\n"
            "                           worker copy; not with model parallelism; the\n"
            "                           running job admits processes started with\n"
            "                           --join at every epoch start (--async: at the\n"
            "                           next update rank 0 serves, as a new worker)\n"
            "  --grow-every N           (with --elastic) admit them every N steps too, at\n"
            "                           any step of an epoch (default 0: epoch starts only;\n"
            "                           each check is one small message to rank 0 and back)\n"
            "  --join                   (with --elastic) join the running job at GW_ROOT\n"
            "                           (its GW_JOB_TOKEN) where it next admits, as a new\n"
            "                           rank: rank 0 sends the weights and the position\n"
            "  --join-wait S            how long --join waits for that (default 600 s)\n"
            "output:\n"
            "  --save-weights FILE      final weights as raw float32\n"
            "  --json FILE  --csv FILE  per-epoch report\n"
            "  --target-acc X           time-to-accuracy target (default 0.88)\n"
            "  --stop-at-target         end the run once the test accuracy reaches it\n"
            "  --eval-every N           test evaluation every N epochs (default 1)\n"
            "  --threads N              OpenBLAS threads per rank (default 1)\n"
            "  --price-per-node-hour X  the run's cost (and to --target-acc) in the report\n"
            "  --ranks-per-node N       ranks that share a node, for node-hours (default 1)\n"
            "  --progress|--no-progress progress bar (default: on a terminal)\n"
            "  --quiet                  no per-epoch lines\n"
            "  --check-data             load the data, print a summary and exit\n"
            "scaling (see --scaling --help):\n"
            "  --scaling LIST           run at each node count, print efficiencies\n",
            GW_TRAIN_DEFAULT_FMNIST_DIR);
}

static const gw_kit_prog_t prog = {"gradwire-train", " (see gradwire-train --help)\n"};
#define usage_error(...) gw_kit_usage_error(&prog, __VA_ARGS__)

static void defaults(gw_train_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->data = GW_TRAIN_DATA_FMNIST;
    o->synth_train = 20000;
    o->synth_test = 4000;
    o->synth_features = 32;
    o->synth_classes = 10;
    o->synth_noise = 3.0;
    o->hidden[0] = 256;
    o->hidden[1] = 128;
    o->nhidden = 2;
    o->batch = 128;
    o->epochs = 15;
    o->lr = 0.05;
    o->lr_ref_batch = 128;
    o->momentum = 0.9;
    o->weight_decay = 5e-4;
    o->warmup_epochs = 1;
    o->decay = GW_TRAIN_DECAY_COSINE;
    o->seed = 1;
    o->shuffle = 1;
    o->bucket_bytes = 256 * 1024;
    o->overlap = 1;
    o->codec = "none";
    o->codec_param = 0;
    o->codec_warmup_epochs = 1;
    o->mode = GW_TRAIN_SYNC;
    o->servers = 1;
    o->staleness = 4;
    o->target_acc = 0.88;
    o->threads = 1;
    o->progress = -1;
    o->eval_every = 1;
    o->tensor_parallel = 1;
    o->pipeline_parallel = 1;
    o->ranks_per_node = 1;
    o->balance_every = 20;
    o->join_wait_s = 600;
}

/* Every option is long only; the values of getopt_long's table name them
 * in the switch below. */
enum {
    OPT_DATA = 256,
    OPT_DATA_DIR,
    OPT_TRAIN,
    OPT_TEST,
    OPT_FEATURES,
    OPT_SYNTHETIC,
    OPT_SEED,
    OPT_NO_SHUFFLE,
    OPT_HIDDEN,
    OPT_BATCH,
    OPT_EPOCHS,
    OPT_STEPS,
    OPT_LR,
    OPT_LR_REF_BATCH,
    OPT_MOMENTUM,
    OPT_WEIGHT_DECAY,
    OPT_WARMUP_EPOCHS,
    OPT_DECAY,
    OPT_BUCKET_KB,
    OPT_NO_OVERLAP,
    OPT_CODEC,
    OPT_CODEC_PARAM,
    OPT_CODEC_WARMUP_EPOCHS,
    OPT_DGC_MOMENTUM,
    OPT_ASYNC,
    OPT_SERVERS,
    OPT_STALENESS,
    OPT_CHECKPOINT_DIR,
    OPT_CHECKPOINT_EVERY,
    OPT_RESUME,
    OPT_SAVE_WEIGHTS,
    OPT_JSON,
    OPT_CSV,
    OPT_TARGET_ACC,
    OPT_STOP_AT_TARGET,
    OPT_ELASTIC,
    OPT_JOIN,
    OPT_JOIN_WAIT,
    OPT_GROW_EVERY,
    OPT_EVAL_EVERY,
    OPT_THREADS,
    OPT_PROGRESS,
    OPT_NO_PROGRESS,
    OPT_QUIET,
    OPT_CHECK_DATA,
    OPT_TENSOR_PARALLEL,
    OPT_PIPELINE_PARALLEL,
    OPT_MICRO_BATCHES,
    OPT_MAX_RANK_MEMORY,
    OPT_DUMP_GRADS,
    OPT_PRICE_PER_NODE_HOUR,
    OPT_RANKS_PER_NODE,
    OPT_SCHEDULE,
    OPT_STRAGGLER,
    OPT_BALANCE_EVERY,
    OPT_TRACE,
    OPT_ZERO,
};

const struct option gw_train_longopts[] = {
    {"data", required_argument, NULL, OPT_DATA},
    {"data-dir", required_argument, NULL, OPT_DATA_DIR},
    {"train", required_argument, NULL, OPT_TRAIN},
    {"test", required_argument, NULL, OPT_TEST},
    {"features", required_argument, NULL, OPT_FEATURES},
    {"synthetic", required_argument, NULL, OPT_SYNTHETIC},
    {"seed", required_argument, NULL, OPT_SEED},
    {"no-shuffle", no_argument, NULL, OPT_NO_SHUFFLE},
    {"hidden", required_argument, NULL, OPT_HIDDEN},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"lr", required_argument, NULL, OPT_LR},
    {"lr-ref-batch", required_argument, NULL, OPT_LR_REF_BATCH},
    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"weight-decay", required_argument, NULL, OPT_WEIGHT_DECAY},
    {"warmup-epochs", required_argument, NULL, OPT_WARMUP_EPOCHS},
    {"decay", required_argument, NULL, OPT_DECAY},
    {"bucket-kb", required_argument, NULL, OPT_BUCKET_KB},
    {"no-overlap", no_argument, NULL, OPT_NO_OVERLAP},
    {"codec", required_argument, NULL, OPT_CODEC},
    {"codec-param", required_argument, NULL, OPT_CODEC_PARAM},
    {"codec-warmup-epochs", required_argument, NULL, OPT_CODEC_WARMUP_EPOCHS},
    {"dgc-momentum", required_argument, NULL, OPT_DGC_MOMENTUM},
    {"async", no_argument, NULL, OPT_ASYNC},
    {"servers", required_argument, NULL, OPT_SERVERS},
    {"staleness", required_argument, NULL, OPT_STALENESS},
    {"checkpoint-dir", required_argument, NULL, OPT_CHECKPOINT_DIR},
    {"checkpoint-every", required_argument, NULL, OPT_CHECKPOINT_EVERY},
    {"resume", no_argument, NULL, OPT_RESUME},
    {"save-weights", required_argument, NULL, OPT_SAVE_WEIGHTS},
    {"json", required_argument, NULL, OPT_JSON},
    {"csv", required_argument, NULL, OPT_CSV},
    {"target-acc", required_argument, NULL, OPT_TARGET_ACC},
    {"stop-at-target", no_argument, NULL, OPT_STOP_AT_TARGET},
    {"elastic", no_argument, NULL, OPT_ELASTIC},
    {"join", no_argument, NULL, OPT_JOIN},
    {"join-wait", required_argument, NULL, OPT_JOIN_WAIT},
    {"grow-every", required_argument, NULL, OPT_GROW_EVERY},
    {"eval-every", required_argument, NULL, OPT_EVAL_EVERY},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"progress", no_argument, NULL, OPT_PROGRESS},
    {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"check-data", no_argument, NULL, OPT_CHECK_DATA},
    {"tensor-parallel", required_argument, NULL, OPT_TENSOR_PARALLEL},
    {"pipeline-parallel", required_argument, NULL, OPT_PIPELINE_PARALLEL},
    {"micro-batches", required_argument, NULL, OPT_MICRO_BATCHES},
    {"max-rank-memory", required_argument, NULL, OPT_MAX_RANK_MEMORY},
    {"dump-grads", required_argument, NULL, OPT_DUMP_GRADS},
    {"price-per-node-hour", required_argument, NULL, OPT_PRICE_PER_NODE_HOUR},
    {"ranks-per-node", required_argument, NULL, OPT_RANKS_PER_NODE},
    {"schedule", required_argument, NULL, OPT_SCHEDULE},
    {"straggler", required_argument, NULL, OPT_STRAGGLER},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"zero", required_argument, NULL, OPT_ZERO},
    {"balance-every", required_argument, NULL, OPT_BALANCE_EVERY},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* "TRAIN,TEST,FEATURES,CLASSES,NOISE" into the synthetic task's sizes.
 * 0 or -1. */
static int parse_synthetic(const char *v, gw_train_opts_t *o)
{
    char *end;
    unsigned long long n, t, dd;
    int k;
    double s;
    errno = 0;
    n = strtoull(v, &end, 10);
    if (*end != ',' || errno)
        return -1;
    t = strtoull(end + 1, &end, 10);
    if (*end != ',')
        return -1;
    dd = strtoull(end + 1, &end, 10);
    if (*end != ',')
        return -1;
    k = (int)strtol(end + 1, &end, 10);
    if (*end != ',')
        return -1;
    s = strtod(end + 1, &end);
    if (*end || errno || n == 0 || dd == 0 || k < 2 || !(s >= 0))
        return -1;
    o->synth_train = n;
    o->synth_test = t;
    o->synth_features = dd;
    o->synth_classes = k;
    o->synth_noise = s;
    return 0;
}

/* The options that take a number: its range, what the usage error says
 * it wants, and where it goes, as what type. */
typedef enum {
    NUM_INT,
    NUM_LONG,
    NUM_SIZE,
    NUM_KIB, /* a size_t, given in KiB */
    NUM_DOUBLE,
    NUM_FRACTION, /* a double; above 1 it is a percentage */
} num_kind_t;

typedef struct num_opt {
    int val;
    num_kind_t kind;
    size_t offset;
    double min, max;
    const char *wants;
} num_opt_t;

#define NUM(val, kind, field, min, max, wants)                       \
    {                                                                \
        val, kind, offsetof(gw_train_opts_t, field), min, max, wants \
    }

static const num_opt_t num_opts[] = {
    NUM(OPT_FEATURES, NUM_SIZE, features, 1, 10000000, "1..10000000"),
    NUM(OPT_BATCH, NUM_INT, batch, 1, 1 << 24, "1..16777216"),
    NUM(OPT_EPOCHS, NUM_INT, epochs, 0, 1000000, "0..1000000"),
    NUM(OPT_STEPS, NUM_LONG, max_steps, 1, 1000000000L, "a positive number"),
    NUM(OPT_LR, NUM_DOUBLE, lr, 0, 1e3, "a number in [0, 1000]"),
    NUM(OPT_LR_REF_BATCH, NUM_INT, lr_ref_batch, 1, 1 << 24, "a positive batch size"),
    NUM(OPT_MOMENTUM, NUM_DOUBLE, momentum, 0, 0.9999, "[0, 1)"),
    NUM(OPT_WEIGHT_DECAY, NUM_DOUBLE, weight_decay, 0, 1, "[0, 1]"),
    NUM(OPT_WARMUP_EPOCHS, NUM_DOUBLE, warmup_epochs, 0, 1e6, "a number >= 0"),
    NUM(OPT_BUCKET_KB, NUM_KIB, bucket_bytes, 1, 1 << 20, "1..1048576"),
    NUM(OPT_CODEC_PARAM, NUM_DOUBLE, codec_param, 0, 1e9, "a number >= 0"),
    NUM(OPT_CODEC_WARMUP_EPOCHS, NUM_DOUBLE, codec_warmup_epochs, 0, 1e6, "a number >= 0"),
    NUM(OPT_DGC_MOMENTUM, NUM_DOUBLE, dgc_momentum, 0, 0.9999, "[0, 1)"),
    NUM(OPT_SERVERS, NUM_INT, servers, 1, 1024, "1..1024"),
    NUM(OPT_STALENESS, NUM_INT, staleness, 0, 1000000, "a number >= 0"),
    NUM(OPT_CHECKPOINT_EVERY, NUM_LONG, ckpt_every, 0, 1000000000L, "a number of steps"),
    NUM(OPT_TARGET_ACC, NUM_FRACTION, target_acc, 0, 100, "a fraction or a percentage"),
    NUM(OPT_EVAL_EVERY, NUM_INT, eval_every, 1, 1000000, "a positive number"),
    NUM(OPT_THREADS, NUM_INT, threads, 1, 256, "1..256"),
    NUM(OPT_TENSOR_PARALLEL, NUM_INT, tensor_parallel, 1, 4096, "1..4096"),
    NUM(OPT_PIPELINE_PARALLEL, NUM_INT, pipeline_parallel, 1, GW_TRAIN_MAX_LAYERS,
        "1..16 (at most one stage per layer)"),
    NUM(OPT_PRICE_PER_NODE_HOUR, NUM_DOUBLE, price_per_node_hour, 0, 1e9, "a price >= 0"),
    NUM(OPT_RANKS_PER_NODE, NUM_INT, ranks_per_node, 1, 4096, "1..4096"),
    NUM(OPT_MICRO_BATCHES, NUM_INT, micro_batches, 1, 1 << 20, "a positive number"),
    NUM(OPT_BALANCE_EVERY, NUM_LONG, balance_every, 1, 1000000000L, "a positive number of steps"),
    NUM(OPT_JOIN_WAIT, NUM_INT, join_wait_s, 1, 2000000, "a positive number of seconds"),
    NUM(OPT_GROW_EVERY, NUM_INT, grow_every, 0, 1000000000,
        "a number of steps (0: epoch starts only)"),
};

/* Store the parsed value into the option's field. */
static void store_num(gw_train_opts_t *o, const num_opt_t *n, double d, long l)
{
    char *field = (char *)o + n->offset;
    switch (n->kind) {
    case NUM_INT:
        *(int *)field = (int)l;
        break;
    case NUM_LONG:
        *(long *)field = l;
        break;
    case NUM_SIZE:
        *(size_t *)field = (size_t)l;
        break;
    case NUM_KIB:
        *(size_t *)field = (size_t)l * 1024;
        break;
    case NUM_DOUBLE:
        *(double *)field = d;
        break;
    case NUM_FRACTION:
        *(double *)field = d > 1 ? d / 100 : d;
        break;
    }
}

/* Option c with value v if it takes a number: 1 when it did (or -1 after a
 * usage error, with *rc set), 0 when c takes no number. */
static int number_opt(gw_train_opts_t *o, int c, const char *v, int *rc)
{
    for (size_t i = 0; i < sizeof(num_opts) / sizeof(num_opts[0]); i++) {
        const num_opt_t *n = &num_opts[i];
        if (n->val != c)
            continue;
        int is_double = n->kind == NUM_DOUBLE || n->kind == NUM_FRACTION;
        double d = 0;
        long l = 0;
        int bad = is_double ? gw_kit_parse_double(v, n->min, n->max, &d)
                            : gw_kit_parse_long(v, (long)n->min, (long)n->max, &l);
        if (bad) {
            const char *name = NULL;
            for (const struct option *lo = gw_train_longopts; lo->name && !name; lo++)
                if (lo->val == c)
                    name = lo->name;
            *rc = usage_error("--%s wants %s, not \"%s\"", name, n->wants, v);
            return -1;
        }
        store_num(o, n, d, l);
        return 1;
    }
    return 0;
}

int gw_train_parse_args(int argc, char **argv, gw_train_opts_t *o)
{
    int c, rc;
    defaults(o);
    gw_kit_getopt_begin();
    while ((c = getopt_long(argc, argv, "+:h", gw_train_longopts, NULL)) != -1) {
        const char *v = optarg;
        int n = number_opt(o, c, v, &rc);
        if (n < 0)
            return rc;
        if (n > 0)
            continue;
        switch (c) {
        case 'h':
            gw_train_usage(stdout);
            return 0;
        case OPT_NO_SHUFFLE:
            o->shuffle = 0;
            break;
        case OPT_NO_OVERLAP:
            o->overlap = 0;
            break;
        case OPT_ASYNC:
            o->mode = GW_TRAIN_ASYNC;
            break;
        case OPT_RESUME:
            o->resume = 1;
            break;
        case OPT_PROGRESS:
            o->progress = 1;
            break;
        case OPT_NO_PROGRESS:
            o->progress = 0;
            break;
        case OPT_QUIET:
            o->quiet = 1;
            break;
        case OPT_STOP_AT_TARGET:
            o->stop_at_target = 1;
            break;
        case OPT_ELASTIC:
            o->elastic = 1;
            break;
        case OPT_JOIN:
            o->join = 1;
            break;
        case OPT_CHECK_DATA:
            o->check_data = 1;
            break;
        case OPT_DATA:
            if (strcmp(v, "fashion-mnist") == 0 || strcmp(v, "fmnist") == 0)
                o->data = GW_TRAIN_DATA_FMNIST;
            else if (strcmp(v, "synthetic") == 0)
                o->data = GW_TRAIN_DATA_SYNTHETIC;
            else if (strcmp(v, "libsvm") == 0)
                o->data = GW_TRAIN_DATA_LIBSVM;
            else
                return usage_error("--data wants fashion-mnist, synthetic or libsvm, not \"%s\"",
                                   v);
            break;
        case OPT_DATA_DIR:
            o->data_dir = v;
            break;
        case OPT_TRAIN:
            o->train_file = v;
            break;
        case OPT_TEST:
            o->test_file = v;
            break;
        case OPT_SYNTHETIC:
            if (parse_synthetic(v, o) != 0)
                return usage_error("--synthetic wants TRAIN,TEST,FEATURES,CLASSES,NOISE (e.g. "
                                   "20000,4000,32,10,3), not \"%s\"",
                                   v);
            break;
        case OPT_SEED:
            if (gw_kit_parse_u64(v, &o->seed) != 0)
                return usage_error("--seed wants a non-negative integer, not \"%s\"", v);
            break;
        case OPT_HIDDEN:
            if (strcmp(v, "none") == 0) {
                o->nhidden = 0;
            } else {
                int nh = gw_kit_parse_int_list(v, o->hidden, GW_TRAIN_MAX_LAYERS - 1);
                if (nh < 0)
                    return usage_error("--hidden wants up to %d positive sizes like 256,128, "
                                       "or none, not \"%s\"",
                                       GW_TRAIN_MAX_LAYERS - 1, v);
                o->nhidden = nh;
            }
            break;
        case OPT_DECAY:
            if (strcmp(v, "cosine") == 0)
                o->decay = GW_TRAIN_DECAY_COSINE;
            else if (strcmp(v, "step") == 0)
                o->decay = GW_TRAIN_DECAY_STEP;
            else if (strcmp(v, "none") == 0)
                o->decay = GW_TRAIN_DECAY_NONE;
            else
                return usage_error("--decay wants cosine, step or none, not \"%s\"", v);
            break;
        case OPT_CODEC:
            o->codec = v;
            break;
        case OPT_CHECKPOINT_DIR:
            o->ckpt_dir = v;
            break;
        case OPT_SAVE_WEIGHTS:
            o->save_weights = v;
            break;
        case OPT_MAX_RANK_MEMORY:
            if (gw_kit_parse_size(v, &o->max_rank_memory) != 0 || o->max_rank_memory == 0)
                return usage_error("--max-rank-memory wants a size in bytes like 64M or 2G, "
                                   "not \"%s\"",
                                   v);
            break;
        case OPT_SCHEDULE:
            if (strcmp(v, "gpipe") == 0)
                o->schedule_1f1b = 0;
            else if (strcmp(v, "1f1b") == 0)
                o->schedule_1f1b = 1;
            else
                return usage_error("--schedule wants gpipe or 1f1b, not \"%s\"", v);
            break;
        case OPT_STRAGGLER:
            if (strcmp(v, "none") == 0 || strcmp(v, "balance") == 0)
                o->straggler_balance = strcmp(v, "balance") == 0;
            else
                return usage_error("--straggler wants none or balance, not \"%s\"", v);
            break;
        case OPT_TRACE:
            o->trace = v;
            break;
        case OPT_ZERO:
            if (strcmp(v, "0") == 0 || strcmp(v, "1") == 0 || strcmp(v, "2") == 0)
                o->zero = v[0] - '0';
            else
                return usage_error("--zero wants 0, 1 or 2 (the ZeRO stage), not \"%s\"", v);
            break;
        case OPT_DUMP_GRADS:
            o->dump_grads = v;
            break;
        case OPT_JSON:
            o->report_json = v;
            break;
        case OPT_CSV:
            o->report_csv = v;
            break;
        default:
            return gw_kit_getopt_error(&prog, c, argv);
        }
    }
    /* Options end at the first word that is none; the trainer takes no
     * operands. */
    if (optind < argc)
        return usage_error("unknown option \"%s\"", argv[optind]);
    if (o->data == GW_TRAIN_DATA_LIBSVM && !o->train_file)
        return usage_error("--data libsvm needs --train FILE");
    if (o->data != GW_TRAIN_DATA_LIBSVM && (o->train_file || o->test_file))
        return usage_error("--train and --test are for --data libsvm");
    if (o->dgc_momentum > 0) {
        gw_codec_t codec;
        if (gw_codec_parse(o->codec, &codec) != GW_OK || codec != GW_CODEC_TOPK)
            return usage_error("--dgc-momentum is top-k's momentum correction: it needs "
                               "--codec topk, not --codec %s",
                               o->codec);
        if (o->mode == GW_TRAIN_ASYNC)
            return usage_error("--dgc-momentum is for synchronous training, not --async");
    }
    /* The parameter server exchanges dense gradients and weights; a codec
     * would be silently ignored there. */
    if (o->mode == GW_TRAIN_ASYNC && strcmp(o->codec, "none") != 0)
        return usage_error("--codec %s is for synchronous training: --async (parameter "
                           "server) sends dense gradients",
                           o->codec);
    if (o->tensor_parallel > 1 || o->pipeline_parallel > 1 || o->dump_grads) {
        const char *what = o->mode == GW_TRAIN_ASYNC       ? "--async"
                           : strcmp(o->codec, "none") != 0 ? "--codec"
                           : o->stop_at_target             ? "--stop-at-target"
                                                           : NULL;
        if (what)
            return usage_error("%s is not available with --tensor-parallel, "
                               "--pipeline-parallel or --dump-grads (model-parallel runs are "
                               "synchronous and dense)",
                               what);
    }
    if (o->dump_grads && o->ckpt_dir)
        return usage_error("--dump-grads writes the gradients of one step and stops: it takes "
                           "no --checkpoint-dir");
    if (o->max_rank_memory && o->mode == GW_TRAIN_ASYNC)
        return usage_error("--max-rank-memory is checked by synchronous training only, not "
                           "--async");
    if (o->schedule_1f1b && o->pipeline_parallel == 1)
        return usage_error("--schedule 1f1b is for --pipeline-parallel K with K > 1");
    if (o->micro_batches > 0 && o->pipeline_parallel == 1 && o->micro_batches != 1)
        return usage_error("--micro-batches is for --pipeline-parallel K with K > 1");
    /* Stragglers: the checks of the one mitigation (straggler.c). */
    if (o->straggler_balance) {
        const char *what = o->mode == GW_TRAIN_ASYNC ? "--async (parameter-server workers do not "
                                                       "wait for each other)"
                           : o->tensor_parallel > 1 || o->pipeline_parallel > 1 || o->dump_grads
                               ? "model parallelism (the ranks of a layer or stage share "
                                 "one batch)"
                           : strcmp(o->codec, "none") != 0
                               ? "--codec (a codec averages equal shares, with error feedback "
                                 "per rank)"
                               : NULL;
        if (what)
            return usage_error("--straggler balance splits a synchronous data-parallel batch; "
                               "it is not available with %s",
                               what);
    }
    /* --join (train_grow.c): a joiner takes its state from the job. */
    if (o->grow_every > 0 && !o->elastic)
        return usage_error("--grow-every is for a job started with --elastic: add --elastic");
    if (o->join && !o->elastic)
        return usage_error("--join is for a job started with --elastic: add --elastic (and "
                           "the job's other arguments)");
    if (o->join && o->resume)
        return usage_error("--join with --resume: a joiner takes the weights and the position "
                           "from the running job, not from a checkpoint");
    /* --elastic (train_elastic.c): what it cannot yet make correct. */
    if (o->elastic && o->mode == GW_TRAIN_ASYNC && o->grow_every > 0)
        return usage_error("--grow-every is for synchronous --elastic training: an --async job "
                           "admits a process started with --join at the next update rank 0 "
                           "serves");
    if (o->elastic && (o->tensor_parallel > 1 || o->pipeline_parallel > 1 || o->dump_grads))
        return usage_error("--elastic is for data parallelism: a model-parallel rank holds a "
                           "part of the model that the others do not have");
    if (o->elastic && o->straggler_balance)
        return usage_error("--elastic with --straggler balance: both decide how the global batch "
                           "is split; use one of them");
    /* --zero (zero.c): what it does not combine with yet, named. */
    if (o->zero) {
        const char *what =
            o->mode == GW_TRAIN_ASYNC ? "--async (the parameter server already shards the "
                                        "weights and the momentum over its server ranks)"
            : strcmp(o->codec, "none") != 0
                ? "--codec (a codec averages whole tensors through an allreduce with per-rank "
                  "error feedback; --zero reduce-scatters them)"
            : o->elastic ? "--elastic (a lost rank's shard of the momentum would be lost with it)"
            : o->straggler_balance ? "--straggler balance"
            : o->dump_grads        ? "--dump-grads"
                                   : NULL;
        if (what)
            return usage_error("--zero %d is not available with %s", o->zero, what);
    }
    if (o->resume && !o->ckpt_dir)
        return usage_error("--resume needs --checkpoint-dir DIR");
    if (o->ckpt_every && !o->ckpt_dir)
        return usage_error("--checkpoint-every needs --checkpoint-dir DIR");
    return -1;
}

void gw_train_opts_fingerprint(const gw_train_opts_t *o, int world, char *buf, size_t len)
{
    static const char *data_names[] = {"fashion-mnist", "synthetic", "libsvm"};
    static const char *decay_names[] = {"none", "cosine", "step"};
    char hidden[128] = "none";
    size_t p = 0;
    for (int i = 0; i < o->nhidden && p < sizeof(hidden) - 12; i++)
        p += (size_t)snprintf(hidden + p, sizeof(hidden) - p, "%s%d", i ? "," : "", o->hidden[i]);
    snprintf(buf, len,
             "v1 mode=%s world=%d data=%s synth=%zu,%zu,%zu,%d,%g features=%zu hidden=%s "
             "batch=%d epochs=%d steps=%ld lr=%g ref=%d mom=%g wd=%g warm=%g decay=%s "
             "seed=%llu shuffle=%d bucket=%zu overlap=%d codec=%s:%g:%g servers=%d stale=%d",
             o->mode == GW_TRAIN_ASYNC ? "async" : "sync", world, data_names[o->data],
             o->synth_train, o->synth_test, o->synth_features, o->synth_classes, o->synth_noise,
             o->features, hidden, o->batch, o->epochs, o->max_steps, o->lr, o->lr_ref_batch,
             o->momentum, o->weight_decay, o->warmup_epochs, decay_names[o->decay],
             (unsigned long long)o->seed, o->shuffle, o->bucket_bytes, o->overlap, o->codec,
             o->codec_param, o->codec_warmup_epochs, o->servers, o->staleness);
    /* Appended only when set, so checkpoints written before the option
     * existed still resume. */
    size_t used = strlen(buf);
    if (o->dgc_momentum > 0 && used < len)
        snprintf(buf + used, len - used, " dgc=%g", o->dgc_momentum);
    /* Balance permutes the whole set, not each shard: another trajectory. */
    used = strlen(buf);
    if (o->straggler_balance && used < len)
        snprintf(buf + used, len - used, " straggler=balance");
}
