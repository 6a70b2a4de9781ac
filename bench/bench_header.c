/*
 * bench_header.c - the run header of gradwire-bench's JSON reports.
 *
 * A figure says little without what it was measured on, and these machines
 * are shared: the report's "run" member records the source tree the binary
 * was built from (git describe, "+dirty" when a source file, not the docs,
 * had changes), the date at
 * the start and the end (UTC), the host, the cores (online, and those in
 * this process's affinity mask), the load average at the start and the end,
 * this process's full command line, and the versions of the peer libraries
 * the figures are compared with (Open MPI as ompi_info says; Gloo and torch
 * as Debian packages them), and, where the benchmark gathered it, where
 * each rank ran and whether a host had more ranks than CPUs (placement,
 * oversubscribed: bench_place.c; null otherwise). The members are those bench/run_header.py
 * writes for the benchmark scripts of bench/, so scripts/render_results.py and the
 * results test read both alike. The start is taken when the report is
 * opened, before the measurement; the rest when it is written.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#ifndef GW_SOURCE_DIR
#define GW_SOURCE_DIR "."
#endif

static void utc_now(char *buf, size_t cap)
{
    time_t now = time(NULL);
    struct tm tm;
    if (!gmtime_r(&now, &tm) || strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, cap, "unknown");
}

static int read_load(double load[3])
{
    FILE *f = fopen("/proc/loadavg", "r");
    int n = f ? fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) : 0;
    if (f)
        fclose(f);
    return n == 3;
}

void gw_bench_header_start(gw_bench_report_t *rep)
{
    utc_now(rep->date, sizeof(rep->date));
    rep->have_load = read_load(rep->load);
}

/* The first line of what cmd prints, without its end of line, into
 * out[0..cap); empty when it cannot be run or prints nothing. A peer that
 * is not installed is then recorded as null, not as an error. */
static void first_line(const char *cmd, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p)
        return;
    if (!fgets(out, (int)cap, p))
        out[0] = '\0';
    while (fgetc(p) != EOF) {
    }
    if (pclose(p) != 0)
        out[0] = '\0';
    out[strcspn(out, "\r\n")] = '\0';
}

/* This process's command line, arguments joined by spaces. */
static void command_line(char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f)
        return;
    size_t n = fread(out, 1, cap - 1, f);
    fclose(f);
    while (n > 0 && out[n - 1] == '\0')
        n--;
    for (size_t i = 0; i < n; i++)
        if (out[i] == '\0')
            out[i] = ' ';
    out[n] = '\0';
}

static void str_or_null(gw_kit_json_t *j, const char *key, const char *s)
{
    if (s[0])
        gw_kit_json_str(j, key, s);
    else
        gw_kit_json_null(j, key);
}

static void load_array(gw_kit_json_t *j, const char *key, int have, const double load[3])
{
    if (!have) {
        gw_kit_json_null(j, key);
        return;
    }
    gw_kit_json_array(j, key, NULL);
    for (int i = 0; i < 3; i++)
        gw_kit_json_num(j, NULL, load[i]);
    gw_kit_json_close(j, NULL);
}

void gw_bench_header_write(gw_kit_json_t *j, const gw_bench_report_t *rep)
{
    char commit[128], host[256], end[32], cmd[4096], ompi[128], gloo[128], torch[128];
    double load_end[3];
    cpu_set_t mask;

    /* "+dirty" as bench/run_header.py says it: for a changed source file,
     * not for the docs and README that scripts/results.sh writes while its
     * campaigns run. */
    first_line(
        "cd '" GW_SOURCE_DIR "' 2>/dev/null && c=$(git describe --always --tags 2>/dev/null) && "
        "if [ -n \"$(git status --porcelain --untracked-files=no -- . ':(exclude)docs' "
        "':(exclude)README.md' 2>/dev/null)\" ]; then echo \"$c+dirty\"; else echo \"$c\"; fi",
        commit, sizeof(commit));
    if (gethostname(host, sizeof(host)) != 0)
        snprintf(host, sizeof(host), "unknown");
    host[sizeof(host) - 1] = '\0';
    utc_now(end, sizeof(end));
    command_line(cmd, sizeof(cmd));
    first_line("ompi_info --version 2>/dev/null", ompi, sizeof(ompi));
    if (strncmp(ompi, "Open MPI v", 10) == 0)
        memmove(ompi, ompi + 10, strlen(ompi + 10) + 1);
    first_line("dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null", gloo, sizeof(gloo));
    first_line("dpkg-query -W -f='${Version}' python3-torch 2>/dev/null", torch, sizeof(torch));
    int have_end = read_load(load_end);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int affinity = sched_getaffinity(0, sizeof(mask), &mask) == 0 ? CPU_COUNT(&mask) : -1;

    gw_kit_json_object(j, "run", "\n    ");
    str_or_null(j, "commit", commit[0] ? commit : "unknown");
    gw_kit_json_str(j, "date", rep->date);
    gw_kit_json_str(j, "date_end", end);
    gw_kit_json_str(j, "host", host);
    gw_kit_json_object(j, "cores", NULL);
    gw_kit_json_int_or_null(j, "online", online > 0, online);
    gw_kit_json_int_or_null(j, "affinity", affinity > 0, affinity);
    gw_kit_json_close(j, NULL);
    gw_kit_json_object(j, "load", NULL);
    load_array(j, "start", rep->have_load, rep->load);
    load_array(j, "end", have_end, load_end);
    gw_kit_json_close(j, NULL);
    gw_kit_json_str(j, "command", cmd);
    gw_kit_json_object(j, "peers", NULL);
    str_or_null(j, "open_mpi", ompi);
    str_or_null(j, "gloo", gloo);
    str_or_null(j, "torch", torch);
    gw_kit_json_close(j, NULL);
    gw_bench_place_json(j, rep->place);
    gw_kit_json_close(j, "\n  ");
}
