/*
 * options.c - gradwire-train's command line: parsing, validation and the
 * fingerprint of the settings that determine a run's trajectory (stored in
 * checkpoints, so that a resume with different settings is refused).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

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
            "  --async                  parameter-server SGD instead of synchronous (dense\n"
            "                           gradients: no --codec)\n"
            "  --servers N              async: server ranks (default 1)\n"
            "  --staleness N            async: largest version lag of a worker (default 4)\n"
            "checkpoints:\n"
            "  --checkpoint-dir DIR     write checkpoints there (also on SIGTERM)\n"
            "  --checkpoint-every N     every N steps (default: only on SIGTERM)\n"
            "  --resume                 continue from the latest checkpoint in DIR\n"
            "output:\n"
            "  --save-weights FILE      final weights as raw float32\n"
            "  --json FILE  --csv FILE  per-epoch report\n"
            "  --target-acc X           time-to-accuracy target (default 0.88)\n"
            "  --stop-at-target         end the run once the test accuracy reaches it\n"
            "  --eval-every N           test evaluation every N epochs (default 1)\n"
            "  --threads N              OpenBLAS threads per rank (default 1)\n"
            "  --progress|--no-progress progress bar (default: on a terminal)\n"
            "  --quiet                  no per-epoch lines\n"
            "  --check-data             load the data, print a summary and exit\n"
            "scaling (see --scaling --help):\n"
            "  --scaling LIST           run at each node count, print efficiencies\n",
            GW_TRAIN_DEFAULT_FMNIST_DIR);
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("gradwire-train: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" (see gradwire-train --help)\n", stderr);
    return 2;
}

static int parse_l(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_d(const char *s, double min, double max, double *out)
{
    char *end = NULL;
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= min && v <= max))
        return -1;
    *out = v;
    return 0;
}

int gw_train_parse_int_list(const char *s, int *out, int max)
{
    int n = 0;
    const char *p = s;
    if (!s || !*s)
        return -1;
    for (;;) {
        char *end = NULL;
        if (!isdigit((unsigned char)*p))
            return -1;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || v <= 0 || v > 1000000 || n == max)
            return -1;
        out[n++] = (int)v;
        if (*end == '\0')
            return n;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
}

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
}

/* The options that take a value, so a missing value is caught once. */
static const char *const value_opts[] = {"--data",
                                         "--data-dir",
                                         "--train",
                                         "--test",
                                         "--features",
                                         "--synthetic",
                                         "--seed",
                                         "--hidden",
                                         "--batch",
                                         "--epochs",
                                         "--steps",
                                         "--lr",
                                         "--lr-ref-batch",
                                         "--momentum",
                                         "--weight-decay",
                                         "--warmup-epochs",
                                         "--decay",
                                         "--bucket-kb",
                                         "--codec",
                                         "--codec-param",
                                         "--codec-warmup-epochs",
                                         "--dgc-momentum",
                                         "--servers",
                                         "--staleness",
                                         "--checkpoint-dir",
                                         "--checkpoint-every",
                                         "--save-weights",
                                         "--json",
                                         "--csv",
                                         "--target-acc",
                                         "--eval-every",
                                         "--threads",
                                         NULL};

/* "--name VALUE" or "--name=VALUE": 1 with *val set, 0 no match. */
static int opt(int argc, char **argv, int *i, const char *name, const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strcmp(a, name) == 0 && *i + 1 < argc) {
        *val = argv[++*i];
        return 1;
    }
    if (strncmp(a, name, n) == 0 && a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    return 0;
}

int gw_train_parse_args(int argc, char **argv, gw_train_opts_t *o)
{
    defaults(o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        long l;
        double d;
        if (i + 1 == argc)
            for (int k = 0; value_opts[k]; k++)
                if (strcmp(a, value_opts[k]) == 0)
                    return usage_error("%s needs a value", a);
#define OPT(name) opt(argc, argv, &i, name, &v)
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            gw_train_usage(stdout);
            return 0;
        } else if (strcmp(a, "--no-shuffle") == 0) {
            o->shuffle = 0;
        } else if (strcmp(a, "--no-overlap") == 0) {
            o->overlap = 0;
        } else if (strcmp(a, "--async") == 0) {
            o->mode = GW_TRAIN_ASYNC;
        } else if (strcmp(a, "--resume") == 0) {
            o->resume = 1;
        } else if (strcmp(a, "--progress") == 0) {
            o->progress = 1;
        } else if (strcmp(a, "--no-progress") == 0) {
            o->progress = 0;
        } else if (strcmp(a, "--quiet") == 0) {
            o->quiet = 1;
        } else if (strcmp(a, "--stop-at-target") == 0) {
            o->stop_at_target = 1;
        } else if (strcmp(a, "--check-data") == 0) {
            o->check_data = 1;
        } else if (OPT("--data")) {
            if (strcmp(v, "fashion-mnist") == 0 || strcmp(v, "fmnist") == 0)
                o->data = GW_TRAIN_DATA_FMNIST;
            else if (strcmp(v, "synthetic") == 0)
                o->data = GW_TRAIN_DATA_SYNTHETIC;
            else if (strcmp(v, "libsvm") == 0)
                o->data = GW_TRAIN_DATA_LIBSVM;
            else
                return usage_error("--data wants fashion-mnist, synthetic or libsvm, not \"%s\"",
                                   v);
        } else if (OPT("--data-dir")) {
            o->data_dir = v;
        } else if (OPT("--train")) {
            o->train_file = v;
        } else if (OPT("--test")) {
            o->test_file = v;
        } else if (OPT("--features")) {
            if (parse_l(v, 1, 10000000, &l))
                return usage_error("--features wants 1..10000000, not \"%s\"", v);
            o->features = (size_t)l;
        } else if (OPT("--synthetic")) {
            char *end;
            unsigned long long n, t, dd;
            int k;
            double s;
            errno = 0;
            n = strtoull(v, &end, 10);
            if (*end != ',' || errno)
                goto bad_synth;
            t = strtoull(end + 1, &end, 10);
            if (*end != ',')
                goto bad_synth;
            dd = strtoull(end + 1, &end, 10);
            if (*end != ',')
                goto bad_synth;
            k = (int)strtol(end + 1, &end, 10);
            if (*end != ',')
                goto bad_synth;
            s = strtod(end + 1, &end);
            if (*end || errno || n == 0 || dd == 0 || k < 2 || !(s >= 0))
                goto bad_synth;
            o->synth_train = n;
            o->synth_test = t;
            o->synth_features = dd;
            o->synth_classes = k;
            o->synth_noise = s;
            continue;
        bad_synth:
            return usage_error("--synthetic wants TRAIN,TEST,FEATURES,CLASSES,NOISE (e.g. "
                               "20000,4000,32,10,3), not \"%s\"",
                               v);
        } else if (OPT("--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 0);
            if (!*v || *end || errno || *v == '-')
                return usage_error("--seed wants a non-negative integer, not \"%s\"", v);
            o->seed = s;
        } else if (OPT("--hidden")) {
            if (strcmp(v, "none") == 0) {
                o->nhidden = 0;
            } else {
                int n = gw_train_parse_int_list(v, o->hidden, GW_TRAIN_MAX_LAYERS - 1);
                if (n < 0)
                    return usage_error("--hidden wants up to %d positive sizes like 256,128, "
                                       "or none, not \"%s\"",
                                       GW_TRAIN_MAX_LAYERS - 1, v);
                o->nhidden = n;
            }
        } else if (OPT("--batch")) {
            if (parse_l(v, 1, 1 << 24, &l))
                return usage_error("--batch wants 1..16777216, not \"%s\"", v);
            o->batch = (int)l;
        } else if (OPT("--epochs")) {
            if (parse_l(v, 0, 1000000, &l))
                return usage_error("--epochs wants 0..1000000, not \"%s\"", v);
            o->epochs = (int)l;
        } else if (OPT("--steps")) {
            if (parse_l(v, 1, 1000000000L, &l))
                return usage_error("--steps wants a positive number, not \"%s\"", v);
            o->max_steps = l;
        } else if (OPT("--lr")) {
            if (parse_d(v, 0, 1e3, &d))
                return usage_error("--lr wants a number in [0, 1000], not \"%s\"", v);
            o->lr = d;
        } else if (OPT("--lr-ref-batch")) {
            if (parse_l(v, 1, 1 << 24, &l))
                return usage_error("--lr-ref-batch wants a positive batch size, not \"%s\"", v);
            o->lr_ref_batch = (int)l;
        } else if (OPT("--momentum")) {
            if (parse_d(v, 0, 0.9999, &d))
                return usage_error("--momentum wants [0, 1), not \"%s\"", v);
            o->momentum = d;
        } else if (OPT("--weight-decay")) {
            if (parse_d(v, 0, 1, &d))
                return usage_error("--weight-decay wants [0, 1], not \"%s\"", v);
            o->weight_decay = d;
        } else if (OPT("--warmup-epochs")) {
            if (parse_d(v, 0, 1e6, &d))
                return usage_error("--warmup-epochs wants a number >= 0, not \"%s\"", v);
            o->warmup_epochs = d;
        } else if (OPT("--decay")) {
            if (strcmp(v, "cosine") == 0)
                o->decay = GW_TRAIN_DECAY_COSINE;
            else if (strcmp(v, "step") == 0)
                o->decay = GW_TRAIN_DECAY_STEP;
            else if (strcmp(v, "none") == 0)
                o->decay = GW_TRAIN_DECAY_NONE;
            else
                return usage_error("--decay wants cosine, step or none, not \"%s\"", v);
        } else if (OPT("--bucket-kb")) {
            if (parse_l(v, 1, 1 << 20, &l))
                return usage_error("--bucket-kb wants 1..1048576, not \"%s\"", v);
            o->bucket_bytes = (size_t)l * 1024;
        } else if (OPT("--codec")) {
            o->codec = v;
        } else if (OPT("--codec-param")) {
            if (parse_d(v, 0, 1e9, &d))
                return usage_error("--codec-param wants a number >= 0, not \"%s\"", v);
            o->codec_param = d;
        } else if (OPT("--codec-warmup-epochs")) {
            if (parse_d(v, 0, 1e6, &d))
                return usage_error("--codec-warmup-epochs wants a number >= 0, not \"%s\"", v);
            o->codec_warmup_epochs = d;
        } else if (OPT("--dgc-momentum")) {
            if (parse_d(v, 0, 0.9999, &d))
                return usage_error("--dgc-momentum wants [0, 1), not \"%s\"", v);
            o->dgc_momentum = d;
        } else if (OPT("--servers")) {
            if (parse_l(v, 1, 1024, &l))
                return usage_error("--servers wants 1..1024, not \"%s\"", v);
            o->servers = (int)l;
        } else if (OPT("--staleness")) {
            if (parse_l(v, 0, 1000000, &l))
                return usage_error("--staleness wants a number >= 0, not \"%s\"", v);
            o->staleness = (int)l;
        } else if (OPT("--checkpoint-dir")) {
            o->ckpt_dir = v;
        } else if (OPT("--checkpoint-every")) {
            if (parse_l(v, 0, 1000000000L, &l))
                return usage_error("--checkpoint-every wants a number of steps, not \"%s\"", v);
            o->ckpt_every = l;
        } else if (OPT("--save-weights")) {
            o->save_weights = v;
        } else if (OPT("--json")) {
            o->report_json = v;
        } else if (OPT("--csv")) {
            o->report_csv = v;
        } else if (OPT("--target-acc")) {
            if (parse_d(v, 0, 100, &d))
                return usage_error("--target-acc wants a fraction or a percentage, not \"%s\"", v);
            o->target_acc = d > 1 ? d / 100 : d;
        } else if (OPT("--eval-every")) {
            if (parse_l(v, 1, 1000000, &l))
                return usage_error("--eval-every wants a positive number, not \"%s\"", v);
            o->eval_every = (int)l;
        } else if (OPT("--threads")) {
            if (parse_l(v, 1, 256, &l))
                return usage_error("--threads wants 1..256, not \"%s\"", v);
            o->threads = (int)l;
        } else {
            return usage_error("unknown option \"%s\"", a);
        }
#undef OPT
    }
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
}
