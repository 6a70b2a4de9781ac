/*
 * bench_run.c - the steps of a benchmark run that every benchmark takes
 * the same way.
 *
 * A run joins the job from the environment, sets up on every rank and then
 * asks all ranks whether they all succeeded (an allreduce with min), so
 * that a rank that cannot allocate its buffers stops the others instead of
 * leaving them in a collective that never completes. Each timed call is
 * timed on every rank; a rank's time alone says little (the first rank to
 * enter waits for the last), so the per-call times are reduced with max
 * over ranks and the median of those maxima is what is reported, with min
 * and max beside it. Rank 0 writes the JSON report: a placeholder first,
 * which says the run did not finish, then the whole document over it at
 * the end.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

int gw_bench_join(const char *who, gw_comm_t **comm, int *rank, int *size)
{
    gw_status_t st = gw_comm_init_env(comm);
    if (st == GW_OK) {
        *rank = gw_comm_rank(*comm);
        *size = gw_comm_size(*comm);
        return 0;
    }
    fprintf(stderr, "%s: gw_comm_init_env failed: %s (%s)\n", who, gw_status_str(st),
            gw_status_name(st));
    return -1;
}

gw_status_t gw_bench_all_ok(gw_comm_t *comm, int ok, int *all)
{
    int32_t mine = ok != 0, every = 0;
    gw_status_t st = gw_allreduce(comm, &mine, &every, 1, GW_INT32, GW_MIN);
    if (st == GW_OK)
        *all = every;
    return st;
}

int gw_bench_setup_end(gw_comm_t *comm, int rank, int ok, const char *benchmark, const char *path,
                       gw_bench_report_t *json, char *error, size_t cap)
{
    int all_ok = 0;
    if (rank == 0 && path && gw_bench_json_open(json, path, benchmark) != 0)
        ok = 0;
    gw_status_t st = gw_bench_all_ok(comm, ok, &all_ok);
    if (st != GW_OK)
        return gw_bench_fail(error, cap, rank, st, "gw_allreduce of the setup status");
    if (!all_ok) {
        snprintf(error, cap, "setup failed on some rank");
        return -1;
    }
    return 0;
}

int gw_bench_fail(char *error, size_t cap, int rank, gw_status_t st, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(error, cap, "%s failed: %s (%s)", what, gw_status_str(st), gw_status_name(st));
    fprintf(stderr, "gradwire-bench: rank %d: %s\n", rank, error);
    return -1;
}

int gw_bench_reserve(void **items, size_t *cap, size_t n, size_t size, size_t first)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : first;
    void *p = realloc(*items, ncap * size);
    if (!p)
        return -1;
    *items = p;
    *cap = ncap;
    return 0;
}

gw_status_t gw_bench_timing_reduce(gw_comm_t *comm, const double *times, double *tmax, long n,
                                   gw_bench_timing_t *out)
{
    return gw_bench_timing_reduce_by(comm, times, tmax, n, GW_BENCH_AVG_MAX, out);
}

gw_status_t gw_bench_timing_reduce_by(gw_comm_t *comm, const double *times, double *tall, long n,
                                      gw_bench_average_t avg, gw_bench_timing_t *out)
{
    static const gw_op_t ops[] = {GW_SUM, GW_SUM, GW_MIN, GW_MAX};
    gw_status_t st;
    if (avg == GW_BENCH_AVG_RANK0) {
        /* Rank 0's times, as every rank learns them. */
        memcpy(tall, times, (size_t)n * sizeof(double));
        st = gw_broadcast(comm, tall, tall, (size_t)n, GW_FLOAT64, 0);
    } else {
        st = gw_allreduce(comm, times, tall, (size_t)n, GW_FLOAT64, ops[avg]);
    }
    if (st != GW_OK)
        return st;
    if (avg == GW_BENCH_AVG_MEAN)
        for (long i = 0; i < n; i++)
            tall[i] /= gw_comm_size(comm);
    gw_kit_sort(tall, (size_t)n);
    out->min_us = tall[0];
    out->max_us = tall[n - 1];
    out->med_us = gw_kit_median_sorted(tall, (size_t)n);
    return GW_OK;
}

int gw_bench_json_open(gw_bench_report_t *rep, const char *path, const char *benchmark)
{
    gw_bench_header_start(rep);
    FILE *f = rep->f = gw_kit_fopen_private(path);
    if (!f ||
        fprintf(f,
                "{\"benchmark\": \"%s\", \"ok\": false, "
                "\"error\": \"the run did not finish\"}\n",
                benchmark) < 0 ||
        fflush(f) != 0) {
        fprintf(stderr, "gradwire-bench: cannot write %s: %m\n", path);
        if (f)
            fclose(f);
        rep->f = NULL;
        return -1;
    }
    return 0;
}

int gw_bench_json_begin(gw_kit_json_t *j, gw_bench_report_t *rep, const char *path,
                        const char *benchmark, gw_comm_t *comm)
{
    FILE *f = rep->f;
    rewind(f);
    if (ftruncate(fileno(f), 0) != 0) {
        fprintf(stderr, "gradwire-bench: writing %s failed: %m\n", path);
        fclose(f);
        return -1;
    }
    gw_kit_json_start(j, f, 6);
    gw_kit_json_object(j, NULL, "\n  ");
    gw_kit_json_str(j, "benchmark", benchmark);
    gw_kit_json_str(j, "gradwire_version", gw_version());
    gw_kit_json_int(j, "ranks", gw_comm_size(comm));
    gw_kit_json_str(j, "transport", gw_comm_transport(comm));
    gw_bench_header_write(j, rep);
    return 0;
}

int gw_bench_json_end(gw_kit_json_t *j, int ok, const char *error, const char *path)
{
    gw_kit_json_bool(j, "ok", ok);
    gw_kit_json_str(j, "error", error && error[0] ? error : NULL);
    gw_kit_json_close(j, "\n");
    fputc('\n', j->f);
    int bad = ferror(j->f);
    bad |= fclose(j->f) != 0;
    if (bad) {
        fprintf(stderr, "gradwire-bench: writing %s failed: %m\n", path);
        return -1;
    }
    return 0;
}

void gw_bench_json_timing(gw_kit_json_t *j, const gw_bench_timing_t *t)
{
    gw_kit_json_object(j, "time_us", NULL);
    gw_kit_json_num(j, "median", t->med_us);
    gw_kit_json_num(j, "min", t->min_us);
    gw_kit_json_num(j, "max", t->max_us);
    gw_kit_json_close(j, NULL);
}
