/*
 * kit_trace.c - the ranks' timelines (GW_TRACE=FILE: FILE.rank-N.json,
 * collectives/comm/trace.h) merged into one Chrome trace, FILE, one track
 * per rank: by `gradwire launch` once its ranks are gone, by `gradwire
 * train --trace FILE`'s rank 0 once every rank closed its file.
 *
 * Each rank already wrote its events in microseconds of rank 0's clock,
 * one event per line (trace.h), so merging is concatenating event lines: a
 * rank that died mid-run left a file without its closing line, and its
 * events still count. The rank files are removed once FILE is written
 * (0600, like them). Ranks on other hosts wrote theirs there: only the
 * files this host holds (or a shared file system) are merged, and the
 * caller says how many.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit.h"

/* An event line: "{...}," or "{...}" (trace.c writes nothing else on a
 * line of its own, but the first and the last line). */
static const char *event_of(char *line)
{
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ','))
        line[--n] = '\0';
    const char *p = line[0] == ',' ? line + 1 : line;
    if (p[0] != '{' || strncmp(p, "{\"traceEvents\"", 14) == 0 || p[strlen(p) - 1] != '}')
        return NULL;
    return p;
}

/* Whether a rank's file is complete: its last line closes the events. */
static int complete(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char tail[64] = "";
    if (fseek(f, -(long)(sizeof(tail) - 1), SEEK_END) != 0)
        rewind(f);
    size_t n = fread(tail, 1, sizeof(tail) - 1, f);
    tail[n] = '\0';
    fclose(f);
    return strstr(tail, "],\"displayTimeUnit\"") != NULL;
}

int gw_kit_trace_merge(const char *file, int nranks, int wait_ms, int *merged, int *events)
{
    char path[4096];
    *merged = *events = 0;
    if ((size_t)snprintf(path, sizeof(path), "%s.rank-%d.json", file, nranks) >= sizeof(path)) {
        fprintf(stderr, "GW_TRACE: the file name %s is too long\n", file);
        return -1;
    }
    /* The ranks close their files as they leave: wait for the last. */
    int64_t until = gw_kit_now_ns() + (int64_t)wait_ms * 1000000;
    for (int r = 0; r < nranks; r++) {
        snprintf(path, sizeof(path), "%s.rank-%d.json", file, r);
        while (!complete(path) && gw_kit_now_ns() < until)
            usleep(20000);
    }
    int any = 0;
    for (int r = 0; r < nranks && !any; r++) {
        snprintf(path, sizeof(path), "%s.rank-%d.json", file, r);
        any = access(path, F_OK) == 0;
    }
    if (!any)
        return 0; /* nothing to merge (another merger took them): FILE stays */
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FILE *out = fd >= 0 && fchmod(fd, 0600) == 0 ? fdopen(fd, "w") : NULL;
    if (!out) {
        fprintf(stderr, "GW_TRACE: cannot write %s: %s\n", file, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    fprintf(out, "{\"traceEvents\":[\n");
    char *line = NULL;
    size_t cap = 0;
    for (int r = 0; r < nranks; r++) {
        snprintf(path, sizeof(path), "%s.rank-%d.json", file, r);
        FILE *in = fopen(path, "r");
        if (!in)
            continue;
        while (getline(&line, &cap, in) > 0) {
            const char *ev = event_of(line);
            if (ev)
                fprintf(out, "%s%s", (*events)++ ? ",\n" : "", ev);
        }
        fclose(in);
        (*merged)++;
    }
    free(line);
    fprintf(out, "\n],\"displayTimeUnit\":\"ms\"}\n");
    if (fclose(out) != 0) {
        fprintf(stderr, "GW_TRACE: writing %s: %s\n", file, strerror(errno));
        return -1;
    }
    for (int r = 0; r < nranks; r++) {
        snprintf(path, sizeof(path), "%s.rank-%d.json", file, r);
        unlink(path);
    }
    return 0;
}
