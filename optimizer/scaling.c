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

#include "trainer.h"

#define MAX_COUNTS 32
#define MAX_PASS 256

typedef struct run {
    int n;
    int weak;
    int ok;
    double sps, compute_per_sample, alpha, beta, allreduce_s, grad_bytes, tta, acc, train_s;
    double eff;
} run_t;

typedef struct scaling {
    int counts[MAX_COUNTS], ncounts;
    int project[MAX_COUNTS], nproject;
    int strong, weak;
    const char *launcher, *hosts, *out;
    const char *launch_args[MAX_PASS];
    int nlaunch_args;
    const char *pass[MAX_PASS]; /* options for the trainer */
    int npass;
    int batch;
    int has_steps, has_epochs;
    char self[PATH_MAX], launcher_buf[PATH_MAX];
} scaling_t;

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

static int value(int argc, char **argv, int *i, const char *name, const char **v)
{
    size_t n = strlen(name);
    if (strcmp(argv[*i], name) == 0 && *i + 1 < argc) {
        *v = argv[++*i];
        return 1;
    }
    if (strncmp(argv[*i], name, n) == 0 && argv[*i][n] == '=') {
        *v = argv[*i] + n + 1;
        return 1;
    }
    return 0;
}

/* Options that take a value, so their values are not mistaken for ours. */
static int takes_value(const char *a)
{
    return strncmp(a, "--", 2) == 0 && !strchr(a, '=') && strcmp(a, "--no-shuffle") != 0 &&
           strcmp(a, "--no-overlap") != 0 && strcmp(a, "--async") != 0 &&
           strcmp(a, "--resume") != 0 && strcmp(a, "--progress") != 0 &&
           strcmp(a, "--no-progress") != 0 && strcmp(a, "--quiet") != 0 &&
           strcmp(a, "--check-data") != 0 && strcmp(a, "--stop-at-target") != 0;
}

static int parse(scaling_t *s, int argc, char **argv, const char *counts)
{
    memset(s, 0, sizeof(*s));
    s->strong = s->weak = 1;
    s->out = "scaling";
    s->batch = 128;
    s->ncounts = gw_train_parse_int_list(counts, s->counts, MAX_COUNTS);
    if (s->ncounts < 0) {
        fprintf(stderr, "gradwire-train: --scaling wants node counts like 1,2,4,8, not \"%s\"\n",
                counts);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (value(argc, argv, &i, "--scaling", &v))
            continue;
        if (value(argc, argv, &i, "--scaling-mode", &v)) {
            s->strong = strcmp(v, "strong") == 0 || strcmp(v, "both") == 0;
            s->weak = strcmp(v, "weak") == 0 || strcmp(v, "both") == 0;
            if (!s->strong && !s->weak) {
                fprintf(stderr, "gradwire-train: --scaling-mode wants strong, weak or both\n");
                return 2;
            }
        } else if (value(argc, argv, &i, "--scaling-out", &v)) {
            s->out = v;
        } else if (value(argc, argv, &i, "--project", &v)) {
            s->nproject = gw_train_parse_int_list(v, s->project, MAX_COUNTS);
            if (s->nproject < 0) {
                fprintf(stderr, "gradwire-train: --project wants node counts like 16,32,64\n");
                return 2;
            }
        } else if (value(argc, argv, &i, "--launcher", &v)) {
            s->launcher = v;
        } else if (value(argc, argv, &i, "--hosts", &v)) {
            s->hosts = v;
        } else if (value(argc, argv, &i, "--launch-arg", &v)) {
            if (s->nlaunch_args == MAX_PASS)
                return 2;
            s->launch_args[s->nlaunch_args++] = v;
        } else if (strcmp(a, "--json") == 0 || strcmp(a, "--csv") == 0 ||
                   strcmp(a, "--resume") == 0 || strcmp(a, "--checkpoint-dir") == 0) {
            fprintf(stderr, "gradwire-train: %s is not for --scaling runs\n", a);
            return 2;
        } else {
            if (s->npass + 2 >= MAX_PASS) {
                fprintf(stderr, "gradwire-train: too many options\n");
                return 2;
            }
            if (value(argc, argv, &i, "--batch", &v)) {
                long b = strtol(v, NULL, 10);
                s->batch = b > 0 ? (int)b : s->batch;
                continue; /* set per run */
            }
            s->has_steps |= strncmp(a, "--steps", 7) == 0;
            s->has_epochs |= strncmp(a, "--epochs", 8) == 0;
            s->pass[s->npass++] = a;
            if (takes_value(a) && i + 1 < argc)
                s->pass[s->npass++] = argv[++i];
        }
    }
    /* Check the trainer options once here rather than in every run. */
    gw_train_opts_t o;
    const char *check[MAX_PASS + 2];
    check[0] = "gradwire-train";
    for (int i = 0; i < s->npass; i++)
        check[i + 1] = s->pass[i];
    int rc = gw_train_parse_args(s->npass + 1, (char **)check, &o);
    if (rc >= 0)
        return rc;
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
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
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

typedef struct projection {
    int n;
    double strong_lo, strong_hi, weak_lo, weak_hi;
} projection_t;

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

static void fmt_pct(char *buf, size_t len, double v)
{
    if (isfinite(v))
        snprintf(buf, len, "%6.1f%%", 100 * v);
    else
        snprintf(buf, len, "%7s", "-");
}

static int write_outputs(const scaling_t *s, const run_t *runs, int nruns, const projection_t *pr,
                         int np, double alpha, double beta, double c, long cores)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s.csv", s->out);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "gradwire-train: cannot write %s: %m\n", path);
        return -1;
    }
    fprintf(f, "kind,ranks,global_batch,samples_per_s,efficiency,final_test_acc,"
               "time_to_target_s,oversubscribed\n");
    for (int i = 0; i < nruns; i++) {
        const run_t *r = &runs[i];
        fprintf(f, "%s,%d,%d,%.2f,%.4f,%.4f,%.3f,%d\n", r->weak ? "weak" : "strong", r->n,
                r->weak ? s->batch * r->n : s->batch, r->sps, r->eff, r->acc, r->tta, r->n > cores);
    }
    for (int i = 0; i < np; i++)
        fprintf(f, "projection-strong,%d,%d,,%.4f-%.4f,,,\nprojection-weak,%d,%d,,%.4f-%.4f,,,\n",
                pr[i].n, s->batch, pr[i].strong_lo, pr[i].strong_hi, pr[i].n, s->batch * pr[i].n,
                pr[i].weak_lo, pr[i].weak_hi);
    fclose(f);

    snprintf(path, sizeof(path), "%s.json", s->out);
    if (!(f = fopen(path, "w"))) {
        fprintf(stderr, "gradwire-train: cannot write %s: %m\n", path);
        return -1;
    }
    fprintf(f,
            "{\"tool\": \"gradwire-train --scaling\", \"cores\": %ld, \"batch\": %d, "
            "\"measured\": [",
            cores, s->batch);
    for (int i = 0; i < nruns; i++) {
        const run_t *r = &runs[i];
        fprintf(f, "%s\n  {\"kind\": \"%s\", \"ranks\": %d, \"ok\": %s, ", i ? "," : "",
                r->weak ? "weak" : "strong", r->n, r->ok ? "true" : "false");
        double vals[] = {r->sps, r->eff, r->acc, r->tta, r->train_s};
        const char *names[] = {"samples_per_s", "efficiency", "final_test_acc", "time_to_target_s",
                               "train_s"};
        for (int k = 0; k < 5; k++) {
            fprintf(f, "\"%s\": ", names[k]);
            if (isfinite(vals[k]))
                fprintf(f, "%.6g", vals[k]);
            else
                fputs("null", f);
            fputs(k < 4 ? ", " : "", f);
        }
        fprintf(f, ", \"oversubscribed\": %s}", r->n > cores ? "true" : "false");
    }
    fprintf(f,
            "],\n \"projection\": {\"label\": \"projection from the alpha-beta ring model, "
            "not a measurement\", \"alpha_s\": %.6g, \"beta_s_per_byte\": %.6g, "
            "\"compute_per_sample_s\": %.6g, \"points\": [",
            np ? alpha : 0, np ? beta : 0, np ? c : 0);
    for (int i = 0; i < np; i++)
        fprintf(f,
                "%s\n  {\"ranks\": %d, \"strong_no_overlap\": %.6g, \"strong_full_overlap\": "
                "%.6g, \"weak_no_overlap\": %.6g, \"weak_full_overlap\": %.6g}",
                i ? "," : "", pr[i].n, pr[i].strong_lo, pr[i].strong_hi, pr[i].weak_lo,
                pr[i].weak_hi);
    fputs("]}}\n", f);
    fclose(f);
    return 0;
}

static int plot(const scaling_t *s, const run_t *runs, int nruns, const projection_t *pr, int np)
{
    char dat[PATH_MAX], gp[PATH_MAX];
    snprintf(dat, sizeof(dat), "%s.dat", s->out);
    snprintf(gp, sizeof(gp), "%s.gp", s->out);
    FILE *f = fopen(dat, "w");
    if (!f)
        return -1;
    /* Blocks: 0 measured strong, 1 measured weak, 2 projected. */
    for (int w = 0; w < 2; w++) {
        fprintf(f, "# %s\n", w ? "weak" : "strong");
        int any = 0;
        for (int i = 0; i < nruns; i++)
            if (runs[i].weak == w && runs[i].ok && isfinite(runs[i].eff)) {
                fprintf(f, "%d %.6f\n", runs[i].n, 100 * runs[i].eff);
                any = 1;
            }
        if (!any)
            fprintf(f, "1 NaN\n");
        fputs("\n\n", f);
    }
    fputs("# projection: n strong_lo strong_hi weak_lo weak_hi\n", f);
    for (int i = 0; i < np; i++)
        fprintf(f, "%d %.6f %.6f %.6f %.6f\n", pr[i].n, 100 * pr[i].strong_lo,
                100 * pr[i].strong_hi, 100 * pr[i].weak_lo, 100 * pr[i].weak_hi);
    if (np == 0)
        fputs("1 NaN NaN NaN NaN\n", f);
    fclose(f);
    if (!(f = fopen(gp, "w")))
        return -1;
    fprintf(
        f,
        "set terminal pngcairo size 900,560 noenhanced\n"
        "set output '%s.png'\n"
        "set title 'gradwire-train scaling efficiency (shaded bands: projection, not measured)'\n"
        "set xlabel 'ranks'\nset ylabel 'efficiency (%%)'\n"
        "set logscale x 2\nset yrange [0:*]\nset grid\nset key outside bottom center\n"
        "plot '%s' index 0 using 1:2 with linespoints lw 2 pt 7 title 'strong (measured)', "
        "'' index 1 using 1:2 with linespoints lw 2 pt 5 title 'weak (measured)', "
        "'' index 2 using 1:2:3 with filledcurves fs transparent solid 0.15 lc 1 "
        "title 'strong (projection: no overlap .. full overlap)', "
        "'' index 2 using 1:4:5 with filledcurves fs transparent solid 0.15 lc 2 "
        "title 'weak (projection)'\n",
        s->out, dat);
    fclose(f);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0)
            dup2(fd, 1);
        execlp("gnuplot", "gnuplot", gp, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0)
        return -1;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
        fprintf(stderr,
                "gradwire-train: gnuplot not found (apt-get install gnuplot-nox); no "
                "plot drawn, data in %s\n",
                dat);
        return -1;
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int gw_train_scaling_main(int argc, char **argv, const char *counts)
{
    scaling_t s;
    int rc = parse(&s, argc, argv, counts);
    if (rc >= 0)
        return rc;
    if (find_programs(&s) != 0)
        return 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
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
    run_t runs[2 * MAX_COUNTS];
    int nruns = 0;
    int failed = measure(&s, runs, &nruns, cores);
    efficiencies(runs, nruns);
    projection_t pr[MAX_COUNTS];
    double alpha = 0, beta = 0, c = 0;
    int np = project(&s, runs, nruns, pr, &alpha, &beta, &c);

    printf("\n%-7s %6s %8s %12s %10s %9s %9s\n", "kind", "ranks", "batch", "samples/s",
           "efficiency", "test acc", "cores");
    for (int i = 0; i < nruns; i++) {
        const run_t *r = &runs[i];
        char e[16], a[16];
        fmt_pct(e, sizeof(e), r->eff);
        fmt_pct(a, sizeof(a), r->acc);
        printf("%-7s %6d %8d %12.0f %10s %9s %9s\n", r->weak ? "weak" : "strong", r->n,
               r->weak ? s.batch * r->n : s.batch, r->sps, e, a, r->n > cores ? "oversub." : "ok");
    }
    if (np > 0) {
        printf("\nPROJECTION (alpha-beta ring model, not measured): alpha %.3g s, beta %.3g "
               "s/byte (%.3g GB/s), compute %.3g s/sample\n",
               alpha, beta, beta > 0 ? 1e-9 / beta : INFINITY, c);
        printf("%6s  %-24s  %-24s\n", "ranks", "strong: no..full overlap",
               "weak: no..full overlap");
        for (int i = 0; i < np; i++) {
            char a[16], b[16], cc[16], d[16];
            fmt_pct(a, sizeof(a), pr[i].strong_lo);
            fmt_pct(b, sizeof(b), pr[i].strong_hi);
            fmt_pct(cc, sizeof(cc), pr[i].weak_lo);
            fmt_pct(d, sizeof(d), pr[i].weak_hi);
            printf("%6d  %s .. %s        %s .. %s\n", pr[i].n, a, b, cc, d);
        }
    } else {
        printf("\nno projection: it needs a run with 2 or more ranks (for the link) and a "
               "successful run (for compute)\n");
    }
    if (write_outputs(&s, runs, nruns, pr, np, alpha, beta, c, cores) == 0)
        printf("\nwrote %s.csv and %s.json", s.out, s.out);
    if (plot(&s, runs, nruns, pr, np) == 0)
        printf(", plot %s.png", s.out);
    printf("\n");
    return failed ? 1 : 0;
}
