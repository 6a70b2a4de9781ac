/*
 * bench_coll_report.c - what the collective benchmarks print and write:
 * rank 0's table in nccl-tests' columns (and the algorithm auto chose),
 * its footer with the average busbw and the wrong elements, the JSON
 * document of the whole run and the --plot PNG.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_coll_cmd.h"

static void format_time(char out[32], double us)
{
    snprintf(out, 32, us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
}

void gw_bench_coll_print_header(const gw_bench_coll_job_t *b)
{
    const gw_bench_coll_opts_t *o = &b->o;
    printf("# gradwire-bench %s, gradwire %s\n", o->coll->name, gw_version());
    printf("# ranks: %d  transport: %s", b->r.size, gw_comm_transport(b->r.comm));
    if (o->coll->has_algo)
        printf("  algorithm: %s%s", gw_algo_name(o->algo),
               o->algo == GW_ALGO_AUTO ? " (cost model picks per size)" : "");
    if (o->coll->has_root)
        printf("  root: %d", o->root);
    printf("\n");
    if (o->sw.factor)
        printf("# minBytes %zu maxBytes %zu step: %ld(factor)", o->sw.minbytes, o->sw.maxbytes,
               o->sw.factor);
    else
        printf("# minBytes %zu maxBytes %zu step: %zu(bytes)", o->sw.minbytes, o->sw.maxbytes,
               o->stepbytes);
    printf(" warmup iters: %ld iters: %ld agg iters: %ld validation: %d\n", o->sw.warmup,
           o->sw.iters, o->agg, o->check);
    static const char *const avgs[] = {"rank 0", "mean", "min", "max"};
    printf("# average: %d (%s over ranks) blocking: %d run cycles: %ld\n#\n", (int)o->avg,
           avgs[o->avg], o->blocking, o->cycles);
    if (b->place.n) {
        gw_bench_place_print(&b->place, stdout);
        printf("#\n");
    }
    /* Centred over the 33 columns of each placement, which start at 52. */
    printf("#%61s%s%23s%s\n", "", "out-of-place", "", "in-place");
    printf("#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
    for (int p = 0; p < 2; p++)
        printf("  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
    if (o->coll->has_algo)
        printf("  %6s", "algo");
    printf("\n#%11s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
    printf("  %7s  %6s  %6s  %6s  %7s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
           "(GB/s)");
    printf(o->coll->has_algo ? "  %6s  %6s\n" : "\n", "", "(used)");
    fflush(stdout);
}

void gw_bench_coll_print_row(const gw_bench_coll_job_t *b, const gw_bench_coll_row_t *r)
{
    const gw_bench_coll_t *d = b->o.coll;
    printf("%12zu  %12zu  %8s  %6s  %6d", r->bytes, r->count, gw_dtype_name(r->dtype),
           d->has_op ? gw_op_name(r->op) : "none", d->has_root ? b->r.root : -1);
    for (int p = 0; p < 2; p++) {
        char t[32], w[32];
        if (!r->p[p].ran) {
            printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
            continue;
        }
        format_time(t, r->p[p].t.med_us);
        if (r->p[p].wrong < 0)
            snprintf(w, sizeof(w), "N/A");
        else
            snprintf(w, sizeof(w), "%lld", (long long)r->p[p].wrong);
        printf("  %7s  %6.2f  %6.2f  %6s", t, r->p[p].algbw, r->p[p].busbw, w);
    }
    /* The algorithm the call ran (auto's choice for this size), last so
     * that the columns before it are nccl-tests'. */
    if (d->has_algo)
        printf("  %6s", gw_algo_name(r->algo));
    printf("\n");
    fflush(stdout);
}

/* Totals over the results: average busbw and wrong elements (-1 unchecked). */
void gw_bench_coll_totals(const gw_bench_coll_job_t *b, double *avg_busbw, int64_t *wrong)
{
    double sum = 0;
    size_t n = 0;
    *wrong = b->o.check ? 0 : -1;
    for (size_t i = 0; i < b->nres; i++)
        for (int p = 0; p < 2; p++) {
            if (!b->res[i].p[p].ran)
                continue;
            sum += b->res[i].p[p].busbw;
            n++;
            if (b->o.check)
                *wrong += b->res[i].p[p].wrong;
        }
    *avg_busbw = n ? sum / (double)n : 0;
}

void gw_bench_coll_print_footer(const gw_bench_coll_job_t *b)
{
    double avg;
    int64_t wrong;
    gw_bench_coll_totals(b, &avg, &wrong);
    if (b->o.coll->id == GW_BENCH_BARRIER)
        printf("# Wrong elements       : N/A (a barrier moves no data)\n");
    else if (wrong < 0)
        printf("# Wrong elements       : N/A (not checked: -c 0)\n");
    else
        printf("# Wrong elements       : %lld %s\n", (long long)wrong, wrong ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g\n", avg);
    if (b->error[0])
        printf("# Error                : %s\n", b->error);
    printf("#\n");
    fflush(stdout);
}

static void json_place(gw_kit_json_t *j, const char *name, const gw_bench_coll_cell_t *p)
{
    if (!p->ran) {
        gw_kit_json_null(j, name);
        return;
    }
    gw_kit_json_object(j, name, NULL);
    gw_bench_json_timing(j, &p->t);
    gw_kit_json_num(j, "algbw", p->algbw);
    gw_kit_json_num(j, "busbw", p->busbw);
    gw_kit_json_int_or_null(j, "wrong", p->wrong >= 0, p->wrong);
    gw_kit_json_close(j, NULL);
}

/* The whole run as one JSON document over the placeholder: parameters, one
 * entry per line of the table, totals, and the error that ended the run
 * (or null). */
int gw_bench_coll_write_json(gw_bench_report_t *f, const gw_bench_coll_job_t *b, int ok)
{
    const gw_bench_coll_opts_t *o = &b->o;
    gw_kit_json_t j;
    double avg;
    int64_t wrong;
    gw_bench_coll_totals(b, &avg, &wrong);
    if (gw_bench_json_begin(&j, f, o->json, o->coll->name, b->r.comm) != 0)
        return -1;
    if (o->coll->has_algo)
        gw_kit_json_str(&j, "algo", gw_algo_name(o->algo));
    if (o->coll->has_root)
        gw_kit_json_int(&j, "root", o->root);
    gw_kit_json_object(&j, "units", NULL);
    gw_kit_json_str(&j, "size", "bytes");
    gw_kit_json_str(&j, "time", "us");
    gw_kit_json_str(&j, "bandwidth", "GB/s (1e9 bytes/s)");
    gw_kit_json_close(&j, NULL);
    gw_kit_json_object(&j, "params", NULL);
    gw_kit_json_uint(&j, "minbytes", o->sw.minbytes);
    gw_kit_json_uint(&j, "maxbytes", o->sw.maxbytes);
    gw_kit_json_int_or_null(&j, "stepfactor", o->sw.factor != 0, o->sw.factor);
    gw_kit_json_int_or_null(&j, "stepbytes", o->sw.factor == 0, (long long)o->stepbytes);
    gw_kit_json_int(&j, "iters", o->sw.iters);
    gw_kit_json_int(&j, "warmup_iters", o->sw.warmup);
    gw_kit_json_bool(&j, "check", o->check);
    gw_kit_json_int(&j, "agg_iters", o->agg);
    gw_kit_json_int(&j, "average", (int)o->avg);
    gw_kit_json_int(&j, "run_cycles", o->cycles);
    gw_kit_json_int(&j, "blocking", o->blocking);
    gw_kit_json_array(&j, "dtypes", NULL);
    for (int d = 0; d < o->ndtypes; d++)
        gw_kit_json_str(&j, NULL, gw_dtype_name(o->dtypes[d]));
    gw_kit_json_close(&j, NULL);
    gw_kit_json_array(&j, "ops", NULL);
    for (int k = 0; k < o->nops; k++)
        gw_kit_json_str(&j, NULL, gw_op_name(o->ops[k]));
    gw_kit_json_close(&j, NULL);
    gw_kit_json_close(&j, NULL);
    gw_kit_json_array(&j, "results", "\n    ");
    for (size_t i = 0; i < b->nres; i++) {
        const gw_bench_coll_row_t *r = &b->res[i];
        gw_kit_json_object(&j, NULL, NULL);
        if (o->cycles != 1)
            gw_kit_json_int(&j, "cycle", r->cycle + 1);
        gw_kit_json_uint(&j, "size", r->bytes);
        gw_kit_json_uint(&j, "count", r->count);
        gw_kit_json_str(&j, "type", gw_dtype_name(r->dtype));
        gw_kit_json_str(&j, "redop", o->coll->has_op ? gw_op_name(r->op) : "none");
        gw_kit_json_int(&j, "root", o->coll->has_root ? o->root : -1);
        if (o->coll->has_algo)
            gw_kit_json_str(&j, "algo", gw_algo_name(r->algo));
        gw_kit_json_break(&j, "\n     ");
        json_place(&j, "out_of_place", &r->p[0]);
        gw_kit_json_break(&j, "\n     ");
        json_place(&j, "in_place", &r->p[1]);
        gw_kit_json_close(&j, NULL);
    }
    gw_kit_json_close(&j, "\n  ");
    gw_kit_json_num(&j, "avg_busbw", avg);
    gw_kit_json_int_or_null(&j, "wrong_total", wrong >= 0, wrong);
    return gw_bench_json_end(&j, ok, b->error, o->json);
}

/* --plot: one curve per datatype, op and placement, in the order of the
 * table, drawn on rank 0 after the run. 0, or -1 after printing why. */
int gw_bench_coll_plot(const gw_bench_coll_job_t *b)
{
    const gw_bench_coll_opts_t *o = &b->o;
    int ncurves = o->ndtypes * o->nops * 2, rc = -1, oom = 1;
    gw_bench_curve_t *cv = calloc((size_t)ncurves, sizeof(*cv));
    char title[160];
    if (!cv)
        goto out;
    for (int k = 0; k < ncurves; k++) {
        int d = k / 2 / o->nops, op = k / 2 % o->nops, in = k % 2;
        cv[k].sizes = calloc(b->nres ? b->nres : 1, sizeof(size_t));
        cv[k].busbw = calloc(b->nres ? b->nres : 1, sizeof(double));
        if (!cv[k].sizes || !cv[k].busbw)
            goto out;
        snprintf(cv[k].label, sizeof(cv[k].label), "%s%s%s%s%s", in ? "in-place" : "out-of-place",
                 ncurves > 2 ? " " : "", o->ndtypes > 1 ? gw_dtype_name(o->dtypes[d]) : "",
                 o->ndtypes > 1 && o->nops > 1 ? " " : "",
                 o->nops > 1 && o->coll->has_op ? gw_op_name(o->ops[op]) : "");
    }
    for (size_t i = 0; i < b->nres; i++) {
        const gw_bench_coll_row_t *r = &b->res[i];
        int d = 0, op = 0;
        while (d < o->ndtypes - 1 && o->dtypes[d] != r->dtype)
            d++;
        while (op < o->nops - 1 && o->ops[op] != r->op)
            op++;
        for (int in = 0; in < 2; in++) {
            gw_bench_curve_t *c = &cv[(d * o->nops + op) * 2 + in];
            if (!r->p[in].ran)
                continue;
            c->sizes[c->n] = r->bytes;
            c->busbw[c->n++] = r->p[in].busbw;
        }
    }
    snprintf(title, sizeof(title), "gradwire-bench %s: %d ranks, %s, algo %s", o->coll->name,
             b->r.size, gw_comm_transport(b->r.comm), gw_algo_name(o->algo));
    oom = 0;
    rc = gw_bench_plot_busbw(o->plot, title, cv, ncurves);
out:
    if (oom)
        fprintf(stderr, "gradwire-bench: --plot: out of memory\n");
    for (int k = 0; cv && k < ncurves; k++) {
        free(cv[k].sizes);
        free(cv[k].busbw);
    }
    free(cv);
    return rc;
}
