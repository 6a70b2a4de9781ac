/*
 * scaling.c - `gradwire-train --scaling 1,2,4,8 [options]`: run the same
 * training job at each node count and report scaling efficiency.
 *
 * Each run is `gradwire launch -n N [--hosts PREFIX] -- gradwire-train
 * OPTIONS --json FILE`, i.e. real ranks over the real transport; the driver
 * only reads the runs' JSON reports. Strong scaling keeps the global batch
 * (more ranks, smaller local batches); weak scaling keeps the local batch
 * (the global batch grows with the ranks, and the linear scaling rule
 * raises the learning rate with it). Efficiency at N is throughput at N
 * divided by N times the throughput at the smallest count measured.
 *
 * From the measured link (alpha and beta of a ring allreduce, timed inside
 * the runs) and the single-rank compute time per sample, the driver also
 * projects the efficiency at larger node counts: step time = compute of
 * the local batch + ring allreduce of the gradients, either not hidden at
 * all or hidden perfectly behind compute (the two bounds). Projections are
 * labelled as such; they are a model, not a measurement. When the ranks of
 * a run outnumber the cores, the run says so: they then share cores, and
 * the measured efficiency tells more about this machine than the network.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kit.h"
#include "scaling.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: gradwire-train --scaling 1,2,4,8 [scaling options] [training options]\n"
               "\n"
               "Runs the training job at each node count under `gradwire launch` and prints\n"
               "strong- and weak-scaling efficiency, a projection to larger counts from the\n"
               "measured link and compute figures, and writes PREFIX.csv, PREFIX.json and\n"
               "PREFIX.png (with gnuplot).\n"
               "\n"
               "scaling options:\n"
               "  --scaling-mode strong|weak|both   (default both)\n"
               "  --scaling-out PREFIX   output files (default ./scaling)\n"
               "  --project 16,32,64     node counts to project to (default: powers of two\n"
               "                         above the largest measured, up to 256)\n"
               "  --launcher PATH        the gradwire command (default: next to this program,\n"
               "                         then PATH)\n"
               "  --hosts PREFIX         run ranks on emulated hosts (gradwire launch --hosts)\n"
               "  --launch-arg ARG       pass ARG to gradwire launch (repeatable)\n"
               "Without --steps or --epochs each run takes --steps 100.\n");
}

/* The driver's own options; their values lie above the trainer's. */
enum {
    OPT_SCALING = 1000,
    OPT_SCALING_MODE,
    OPT_SCALING_OUT,
    OPT_PROJECT,
    OPT_LAUNCHER,
    OPT_HOSTS,
    OPT_LAUNCH_ARG,
};

static const struct option own_longopts[] = {
    {"scaling", required_argument, NULL, OPT_SCALING},
    {"scaling-mode", required_argument, NULL, OPT_SCALING_MODE},
    {"scaling-out", required_argument, NULL, OPT_SCALING_OUT},
    {"project", required_argument, NULL, OPT_PROJECT},
    {"launcher", required_argument, NULL, OPT_LAUNCHER},
    {"hosts", required_argument, NULL, OPT_HOSTS},
    {"launch-arg", required_argument, NULL, OPT_LAUNCH_ARG},
};

#define NOWN (sizeof(own_longopts) / sizeof(own_longopts[0]))
#define MAX_LONGOPTS 96

/* The driver's options followed by the trainer's (and its end marker), so
 * that one scan knows which words are values. */
static int all_longopts(struct option *all)
{
    size_t n = 0;
    while (gw_train_longopts[n].name)
        n++;
    if (NOWN + n + 1 > MAX_LONGOPTS)
        return -1;
    memcpy(all, own_longopts, sizeof(own_longopts));
    memcpy(all + NOWN, gw_train_longopts, (n + 1) * sizeof(*all));
    return 0;
}

/* The name of the trainer's option val ("" for none). */
static const char *train_opt_name(int val)
{
    for (const struct option *o = gw_train_longopts; o->name; o++)
        if (o->val == val)
            return o->name;
    return "";
}

static int is_train_opt(int val, const char *name)
{
    return strcmp(train_opt_name(val), name) == 0;
}

static int parse(scaling_t *s, int argc, char **argv, const char *counts)
{
    struct option longopts[MAX_LONGOPTS];
    const char *batch_words[2] = {NULL, NULL};
    memset(s, 0, sizeof(*s));
    s->strong = s->weak = 1;
    s->out = "scaling";
    s->ncounts = gw_kit_parse_int_list(counts, s->counts, MAX_COUNTS);
    if (s->ncounts < 0) {
        fprintf(stderr, "gradwire-train: --scaling wants node counts like 1,2,4,8, not \"%s\"\n",
                counts);
        return 2;
    }
    if (all_longopts(longopts) != 0)
        return 2;
    gw_kit_getopt_begin();
    for (;;) {
        int first = optind ? optind : 1, c = getopt_long(argc, argv, "+:h", longopts, NULL);
        const char *v = optarg;
        if (c == -1)
            break;
        switch (c) {
        case 'h':
            usage(stdout);
            return 0;
        case OPT_SCALING:
            continue; /* main() took the counts from it */
        case OPT_SCALING_MODE:
            s->strong = strcmp(v, "strong") == 0 || strcmp(v, "both") == 0;
            s->weak = strcmp(v, "weak") == 0 || strcmp(v, "both") == 0;
            if (!s->strong && !s->weak) {
                fprintf(stderr, "gradwire-train: --scaling-mode wants strong, weak or both\n");
                return 2;
            }
            continue;
        case OPT_SCALING_OUT:
            s->out = v;
            continue;
        case OPT_PROJECT:
            s->nproject = gw_kit_parse_int_list(v, s->project, MAX_COUNTS);
            if (s->nproject < 0) {
                fprintf(stderr, "gradwire-train: --project wants node counts like 16,32,64\n");
                return 2;
            }
            continue;
        case OPT_LAUNCHER:
            s->launcher = v;
            continue;
        case OPT_HOSTS:
            s->hosts = v;
            continue;
        case OPT_LAUNCH_ARG:
            if (s->nlaunch_args == MAX_PASS)
                return 2;
            s->launch_args[s->nlaunch_args++] = v;
            continue;
        case ':':
        case '?':
            break; /* the check of the trainer's options below says what is wrong */
        default:
            if (is_train_opt(c, "json") || is_train_opt(c, "csv") || is_train_opt(c, "resume") ||
                is_train_opt(c, "checkpoint-dir")) {
                fprintf(stderr, "gradwire-train: --%s is not for --scaling runs\n",
                        train_opt_name(c));
                return 2;
            }
            if (is_train_opt(c, "batch")) {
                /* Set per run, but checked with the others below. */
                batch_words[0] = argv[first];
                batch_words[1] = optind - first > 1 ? argv[first + 1] : NULL;
                continue;
            }
            s->has_steps |= is_train_opt(c, "steps");
            s->has_epochs |= is_train_opt(c, "epochs");
            break;
        }
        /* A training option (or a bad one): pass the words it took on to
         * the runs as they were written. */
        for (int i = first; i < optind; i++) {
            if (s->npass + 1 >= MAX_PASS) {
                fprintf(stderr, "gradwire-train: too many options\n");
                return 2;
            }
            s->pass[s->npass++] = argv[i];
        }
    }
    for (int i = optind; i < argc && s->npass + 1 < MAX_PASS; i++)
        s->pass[s->npass++] = argv[i]; /* operands: the check below refuses them */
    /* Check the trainer options once here rather than in every run; the
     * check also reads the batch (the trainer's default without one). */
    gw_train_opts_t o;
    const char *check[MAX_PASS + 4];
    int n = 0;
    check[n++] = "gradwire-train";
    for (int i = 0; i < 2 && batch_words[i]; i++)
        check[n++] = batch_words[i];
    for (int i = 0; i < s->npass; i++)
        check[n++] = s->pass[i];
    check[n] = NULL;
    int rc = gw_train_parse_args(n, (char **)check, &o);
    if (rc >= 0)
        return rc;
    s->batch = o.batch;
    return -1;
}

static int find_programs(scaling_t *s)
{
    ssize_t n = readlink("/proc/self/exe", s->self, sizeof(s->self) - 1);
    if (n <= 0) {
        fprintf(stderr, "gradwire-train: cannot find my own program: %m\n");
        return -1;
    }
    s->self[n] = '\0';
    if (s->launcher)
        return 0;
    /* Next to us (installed), or one directory up (the build tree). */
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", s->self);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    const char *cands[] = {"", "/.."};
    for (int i = 0; i < 2; i++) {
        int len =
            snprintf(s->launcher_buf, sizeof(s->launcher_buf), "%s%s/gradwire", dir, cands[i]);
        if (len > 0 && (size_t)len < sizeof(s->launcher_buf) &&
            access(s->launcher_buf, X_OK) == 0) {
            s->launcher = s->launcher_buf;
            return 0;
        }
    }
    s->launcher = "gradwire"; /* from PATH */
    return 0;
}

/* Run one job; its output goes to LOG. Returns the exit status. */
static int run_job(const scaling_t *s, int n, int weak, const char *json, const char *log)
{
    char nbuf[16], bbuf[32];
    const char *argv[2 * MAX_PASS + 32];
    int k = 0;
    snprintf(nbuf, sizeof(nbuf), "%d", n);
    snprintf(bbuf, sizeof(bbuf), "%d", weak ? s->batch * n : s->batch);
    argv[k++] = s->launcher;
    argv[k++] = "launch";
    argv[k++] = "-n";
    argv[k++] = nbuf;
    if (s->hosts) {
        argv[k++] = "--hosts";
        argv[k++] = s->hosts;
    }
    for (int i = 0; i < s->nlaunch_args; i++)
        argv[k++] = s->launch_args[i];
    argv[k++] = "--";
    argv[k++] = s->self;
    for (int i = 0; i < s->npass; i++)
        argv[k++] = s->pass[i];
    argv[k++] = "--batch";
    argv[k++] = bbuf;
    if (!s->has_steps && !s->has_epochs) {
        argv[k++] = "--steps";
        argv[k++] = "100";
    }
    argv[k++] = "--json";
    argv[k++] = json;
    argv[k++] = "--no-progress";
    argv[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gradwire-train: fork: %m\n");
        return -1;
    }
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, GW_KIT_PRIVATE_MODE);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(126);
        execvp(argv[0], (char **)argv);
        dprintf(2, "gradwire-train: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The number after "key": in our own JSON; NAN when absent or null. */
static double json_get(const char *text, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\": ", key);
    const char *p = strstr(text, pat);
    if (!p)
        return NAN;
    p += strlen(pat);
    if (strncmp(p, "null", 4) == 0)
        return NAN;
    return strtod(p, NULL);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, len = 0, n;
    char chunk[4096];
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

static void show_tail(const char *log)
{
    char *t = slurp(log);
    if (!t)
        return;
    size_t len = strlen(t);
    const char *p = len > 2000 ? t + len - 2000 : t;
    fprintf(stderr, "---- last lines of %s ----\n%s\n", log, p);
    free(t);
}

static int measure(scaling_t *s, run_t *runs, int *nruns, long cores)
{
    int failed = 0;
    for (int w = 0; w < 2; w++) {
        if ((w == 0 && !s->strong) || (w == 1 && !s->weak))
            continue;
        for (int i = 0; i < s->ncounts; i++) {
            run_t *r = &runs[(*nruns)++];
            memset(r, 0, sizeof(*r));
            r->n = s->counts[i];
            r->weak = w;
            char json[PATH_MAX], log[PATH_MAX];
            snprintf(json, sizeof(json), "%s-%s-%d.json", s->out, w ? "weak" : "strong", r->n);
            snprintf(log, sizeof(log), "%s-%s-%d.log", s->out, w ? "weak" : "strong", r->n);
            printf("%s scaling, %3d rank(s), global batch %d ... ", w ? "weak  " : "strong", r->n,
                   w ? s->batch * r->n : s->batch);
            fflush(stdout);
            int rc = run_job(s, r->n, w, json, log);
            char *text = rc == 0 ? slurp(json) : NULL;
            if (!text) {
                printf("failed (status %d)\n", rc);
                show_tail(log);
                failed = 1;
                continue;
            }
            r->ok = 1;
            r->sps = json_get(text, "samples_per_s");
            r->compute_per_sample = json_get(text, "compute_per_sample_s");
            r->alpha = json_get(text, "link_alpha_s");
            r->beta = json_get(text, "link_beta_s_per_byte");
            r->allreduce_s = json_get(text, "allreduce_s");
            r->grad_bytes = json_get(text, "grad_bytes");
            r->tta = json_get(text, "time_to_target_s");
            r->acc = json_get(text, "final_test_acc");
            r->train_s = json_get(text, "train_s");
            r->node_hours = json_get(text, "node_hours");
            r->cost = json_get(text, "cost");
            free(text);
            printf("%10.0f samples/s%s\n", r->sps, r->n > cores ? "  (ranks outnumber cores)" : "");
        }
    }
    return failed;
}

static void efficiencies(run_t *runs, int nruns)
{
    for (int w = 0; w < 2; w++) {
        const run_t *base = NULL;
        for (int i = 0; i < nruns; i++)
            if (runs[i].weak == w && runs[i].ok && (!base || runs[i].n < base->n))
                base = &runs[i];
        for (int i = 0; i < nruns; i++) {
            run_t *r = &runs[i];
            if (r->weak != w)
                continue;
            r->eff = NAN;
            if (r->ok && base && base->sps > 0)
                r->eff = (r->sps / r->n) / (base->sps / base->n);
        }
    }
}

/* Ring allreduce of S bytes over n ranks under the alpha-beta model. */
static double ring_s(int n, double bytes, double alpha, double beta)
{
    if (n < 2)
        return 0;
    return 2.0 * (n - 1) * alpha + 2.0 * (n - 1) / n * bytes * beta;
}

static int project(const scaling_t *s, const run_t *runs, int nruns, projection_t *out,
                   double *alpha, double *beta, double *c)
{
    const run_t *link = NULL, *comp = NULL;
    for (int i = 0; i < nruns; i++) {
        const run_t *r = &runs[i];
        if (!r->ok)
            continue;
        if (r->n > 1 && isfinite(r->alpha) && isfinite(r->beta) && (!link || r->n > link->n))
            link = r;
        if (isfinite(r->compute_per_sample) && r->compute_per_sample > 0 &&
            (!comp || r->n < comp->n))
            comp = r;
    }
    if (!link || !comp)
        return 0;
    *alpha = link->alpha;
    *beta = link->beta;
    *c = comp->compute_per_sample;
    double S = link->grad_bytes;
    int maxn = 1, np = 0;
    for (int i = 0; i < s->ncounts; i++)
        maxn = s->counts[i] > maxn ? s->counts[i] : maxn;
    int list[MAX_COUNTS];
    if (s->nproject > 0) {
        memcpy(list, s->project, sizeof(int) * (size_t)s->nproject);
        np = s->nproject;
    } else {
        for (int n = 1; n <= 256; n *= 2)
            if (n > maxn && np < MAX_COUNTS)
                list[np++] = n;
    }
    double B = s->batch;
    for (int i = 0; i < np; i++) {
        int n = list[i];
        double t_ar = ring_s(n, S, *alpha, *beta);
        double cs = *c * B / n, cw = *c * B; /* compute per step: strong, weak */
        out[i].n = n;
        out[i].strong_lo = (*c * B) / (n * (cs + t_ar));
        out[i].strong_hi = (*c * B) / (n * fmax(cs, t_ar));
        out[i].weak_lo = cw / (cw + t_ar);
        out[i].weak_hi = cw / fmax(cw, t_ar);
    }
    return np;
}

int gw_train_scaling_main(int argc, char **argv, const char *counts)
{
    scaling_t s;
    scaling_result_t res;
    int rc = parse(&s, argc, argv, counts);
    if (rc >= 0)
        return rc;
    if (find_programs(&s) != 0)
        return 1;
    memset(&res, 0, sizeof(res));
    long cores = res.cores = sysconf(_SC_NPROCESSORS_ONLN);
    int maxn = 0;
    for (int i = 0; i < s.ncounts; i++)
        maxn = s.counts[i] > maxn ? s.counts[i] : maxn;
    printf("gradwire-train scaling: %d core(s) here; launcher %s%s%s\n", (int)cores, s.launcher,
           s.hosts ? ", emulated hosts " : "", s.hosts ? s.hosts : "");
    if (maxn > cores)
        printf("note: up to %d ranks on %ld cores: ranks share cores, so per-rank compute slows "
               "down as ranks are added; the measured efficiency is a property of this machine, "
               "not of the network or the algorithm\n",
               maxn, cores);
    int failed = measure(&s, res.runs, &res.nruns, cores);
    efficiencies(res.runs, res.nruns);
    res.np = project(&s, res.runs, res.nruns, res.pr, &res.alpha, &res.beta, &res.c);
    gw_train_scaling_report(&s, &res);
    return failed ? 1 : 0;
}
