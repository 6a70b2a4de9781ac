/*
 * scaling_report.c - what `gradwire-train --scaling` reports: the table of
 * measured efficiencies and the projection (labelled as one) on stdout,
 * the same as PREFIX.csv and PREFIX.json, and a plot drawn by gnuplot when
 * it is installed (PREFIX.dat and PREFIX.gp stay behind for redrawing).
 */
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kit.h"
#include "scaling.h"

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
    FILE *f = gw_kit_fopen_private(path);
    if (!f) {
        fprintf(stderr, "gradwire-train: cannot write %s: %m\n", path);
        return -1;
    }
    fprintf(f, "kind,ranks,global_batch,samples_per_s,efficiency,final_test_acc,"
               "time_to_target_s,oversubscribed,node_hours,cost\n");
    for (int i = 0; i < nruns; i++) {
        const run_t *r = &runs[i];
        fprintf(f, "%s,%d,%d,%.2f,%.4f,%.4f,%.3f,%d,%.6g,%.6g\n", r->weak ? "weak" : "strong", r->n,
                r->weak ? s->batch * r->n : s->batch, r->sps, r->eff, r->acc, r->tta, r->n > cores,
                r->node_hours, r->cost);
    }
    for (int i = 0; i < np; i++)
        fprintf(f, "projection-strong,%d,%d,,%.4f-%.4f,,,\nprojection-weak,%d,%d,,%.4f-%.4f,,,\n",
                pr[i].n, s->batch, pr[i].strong_lo, pr[i].strong_hi, pr[i].n, s->batch * pr[i].n,
                pr[i].weak_lo, pr[i].weak_hi);
    fclose(f);

    snprintf(path, sizeof(path), "%s.json", s->out);
    if (!(f = gw_kit_fopen_private(path))) {
        fprintf(stderr, "gradwire-train: cannot write %s: %m\n", path);
        return -1;
    }
    gw_kit_json_t j;
    gw_kit_json_start(&j, f, 6);
    gw_kit_json_object(&j, NULL, NULL);
    gw_kit_json_str(&j, "tool", "gradwire-train --scaling");
    gw_kit_json_int(&j, "cores", cores);
    gw_kit_json_int(&j, "batch", s->batch);
    gw_kit_json_array(&j, "measured", "\n  ");
    for (int i = 0; i < nruns; i++) {
        const run_t *r = &runs[i];
        gw_kit_json_object(&j, NULL, NULL);
        gw_kit_json_str(&j, "kind", r->weak ? "weak" : "strong");
        gw_kit_json_int(&j, "ranks", r->n);
        gw_kit_json_bool(&j, "ok", r->ok);
        gw_kit_json_num(&j, "samples_per_s", r->sps);
        gw_kit_json_num(&j, "efficiency", r->eff);
        gw_kit_json_num(&j, "final_test_acc", r->acc);
        gw_kit_json_num(&j, "time_to_target_s", r->tta);
        gw_kit_json_num(&j, "train_s", r->train_s);
        gw_kit_json_bool(&j, "oversubscribed", r->n > cores);
        gw_kit_json_num_or_null(&j, "node_hours", !isnan(r->node_hours), r->node_hours);
        gw_kit_json_num_or_null(&j, "cost", !isnan(r->cost), r->cost);
        gw_kit_json_close(&j, NULL);
    }
    gw_kit_json_close(&j, "");
    gw_kit_json_break(&j, "\n ");
    gw_kit_json_object(&j, "projection", NULL);
    gw_kit_json_str(&j, "label", "projection from the alpha-beta ring model, not a measurement");
    gw_kit_json_num(&j, "alpha_s", np ? alpha : 0);
    gw_kit_json_num(&j, "beta_s_per_byte", np ? beta : 0);
    gw_kit_json_num(&j, "compute_per_sample_s", np ? c : 0);
    gw_kit_json_array(&j, "points", "\n  ");
    for (int i = 0; i < np; i++) {
        gw_kit_json_object(&j, NULL, NULL);
        gw_kit_json_int(&j, "ranks", pr[i].n);
        gw_kit_json_num(&j, "strong_no_overlap", pr[i].strong_lo);
        gw_kit_json_num(&j, "strong_full_overlap", pr[i].strong_hi);
        gw_kit_json_num(&j, "weak_no_overlap", pr[i].weak_lo);
        gw_kit_json_num(&j, "weak_full_overlap", pr[i].weak_hi);
        gw_kit_json_close(&j, NULL);
    }
    gw_kit_json_close(&j, "");
    gw_kit_json_close(&j, NULL);
    gw_kit_json_close(&j, NULL);
    fputc('\n', f);
    fclose(f);
    return 0;
}

static int plot(const scaling_t *s, const run_t *runs, int nruns, const projection_t *pr, int np)
{
    char dat[PATH_MAX], gp[PATH_MAX];
    snprintf(dat, sizeof(dat), "%s.dat", s->out);
    snprintf(gp, sizeof(gp), "%s.gp", s->out);
    FILE *f = gw_kit_fopen_private(dat);
    if (!f)
        return -1;
    /* Blocks: 0 measured strong, 1 measured weak (n, efficiency, cost), 2
     * projected. */
    int priced = 0;
    for (int w = 0; w < 2; w++) {
        fprintf(f, "# %s\n", w ? "weak" : "strong");
        int any = 0;
        for (int i = 0; i < nruns; i++)
            if (runs[i].weak == w && runs[i].ok && isfinite(runs[i].eff)) {
                fprintf(f, "%d %.6f %.6g\n", runs[i].n, 100 * runs[i].eff, runs[i].cost);
                any = 1;
                priced |= isfinite(runs[i].cost);
            }
        if (!any)
            fprintf(f, "1 NaN NaN\n");
        fputs("\n\n", f);
    }
    fputs("# projection: n strong_lo strong_hi weak_lo weak_hi\n", f);
    for (int i = 0; i < np; i++)
        fprintf(f, "%d %.6f %.6f %.6f %.6f\n", pr[i].n, 100 * pr[i].strong_lo,
                100 * pr[i].strong_hi, 100 * pr[i].weak_lo, 100 * pr[i].weak_hi);
    if (np == 0)
        fputs("1 NaN NaN NaN NaN\n", f);
    fclose(f);
    if (!(f = gw_kit_fopen_private(gp)))
        return -1;
    fprintf(
        f,
        "set terminal pngcairo size 900,560 noenhanced\n"
        "set output '%s.png'\n"
        "set title 'gradwire-train scaling efficiency (shaded bands: projection, not measured)'\n"
        "set xlabel 'ranks'\nset ylabel 'efficiency (%%)'\n"
        "set logscale x 2\nset yrange [0:*]\nset grid\nset key outside bottom center\n%s"
        "plot '%s' index 0 using 1:2 with linespoints lw 2 pt 7 title 'strong (measured)', "
        "'' index 1 using 1:2 with linespoints lw 2 pt 5 title 'weak (measured)', "
        "'' index 2 using 1:2:3 with filledcurves fs transparent solid 0.15 lc 1 "
        "title 'strong (projection: no overlap .. full overlap)', "
        "'' index 2 using 1:4:5 with filledcurves fs transparent solid 0.15 lc 2 "
        "title 'weak (projection)'%s\n",
        s->out,
        priced ? "set y2label 'cost of the run (price per node-hour x node-hours)'\n"
                 "set y2tics\nset y2range [0:*]\n"
               : "",
        dat,
        priced ? ", '' index 0 using 1:3 axes x1y2 with linespoints dt 2 lw 2 pt 6 lc 1 "
                 "title 'strong: cost of the run (right axis)', '' index 1 using 1:3 axes x1y2 "
                 "with linespoints dt 2 lw 2 pt 4 lc 2 title 'weak: cost of the run (right axis)'"
               : "");

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

void gw_train_scaling_report(const scaling_t *s, const scaling_result_t *res)
{
    const run_t *runs = res->runs;
    const projection_t *pr = res->pr;
    int nruns = res->nruns, np = res->np;
    long cores = res->cores;
    printf("\n%-7s %6s %8s %12s %10s %9s %9s %11s %10s\n", "kind", "ranks", "batch", "samples/s",
           "efficiency", "test acc", "cores", "node-hours", "cost");
    for (int i = 0; i < nruns; i++) {
        const run_t *r = &runs[i];
        char e[16], a[16], c[24] = "-";
        fmt_pct(e, sizeof(e), r->eff);
        fmt_pct(a, sizeof(a), r->acc);
        /* The same steps at every count (strong): where the cost rises
         * faster than the time falls, more nodes stop paying. */
        if (!isnan(r->cost))
            snprintf(c, sizeof(c), "%.4g", r->cost);
        printf("%-7s %6d %8d %12.0f %10s %9s %9s %11.4g %10s\n", r->weak ? "weak" : "strong", r->n,
               r->weak ? s->batch * r->n : s->batch, r->sps, e, a, r->n > cores ? "oversub." : "ok",
               r->node_hours, c);
    }
    if (np > 0) {
        printf("\nPROJECTION (alpha-beta ring model, not measured): alpha %.3g s, beta %.3g "
               "s/byte (%.3g GB/s), compute %.3g s/sample\n",
               res->alpha, res->beta, res->beta > 0 ? 1e-9 / res->beta : INFINITY, res->c);
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
    if (write_outputs(s, runs, nruns, pr, np, res->alpha, res->beta, res->c, cores) == 0)
        printf("\nwrote %s.csv and %s.json", s->out, s->out);
    if (plot(s, runs, nruns, pr, np) == 0)
        printf(", plot %s.png", s->out);
    printf("\n");
}
