/*
 * trace.c - GW_TRACE=FILE: the timeline of every collective, its steps
 * and the bytes in flight, as Chrome trace JSON (trace.h for the file's
 * layout).
 *
 * Events: one "X" (complete) span per collective, named after its kind and
 * carrying its sequence number, size, dtype and algorithm; one "X" span
 * per step for its wait (the time spent waiting for peers and the wire;
 * what lies between two waits is this rank's own work: reducing, the
 * codec), named after the rank it waited for; a "C" counter of the bytes
 * this rank had posted to send and not yet seen complete. The application
 * adds its own spans (gw_trace_span), which is how `gradwire train
 * --trace` shows compute beside communication.
 *
 * Writing is stdio into a 64 KiB buffer: a line per event, formatted with
 * snprintf on the thread that drives the communicator, after the call or
 * step it describes, so the time it takes lies outside every span.
 */
#include "collectives/comm/trace.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectives/comm/comm.h"
#include "common/clock.h"

struct gw_trace {
    FILE *f;
    int rank;
    int64_t offset_ns;
    int first; /* no event written yet */
};

gw_status_t gw__trace_open(const gw_logger_t *log, const char *file, int rank, gw_trace_t **out)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof(path), "%s.rank-%d.json", file, rank) >= sizeof(path)) {
        GW_ERROR(log, "coll", "GW_TRACE: the file name %s is too long", file);
        return GW_ERR_CONFIG;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || fchmod(fd, 0600) != 0) {
        GW_ERROR(log, "coll", "GW_TRACE: cannot write %s: %m", path);
        if (fd >= 0)
            close(fd);
        return GW_ERR_CONFIG;
    }
    gw_trace_t *t = calloc(1, sizeof(*t));
    FILE *f = fdopen(fd, "w");
    if (!t || !f) {
        free(t);
        if (f)
            fclose(f);
        else
            close(fd);
        return GW_ERR_NO_MEMORY;
    }
    setvbuf(f, NULL, _IOFBF, 1 << 16);
    t->f = f;
    t->rank = rank;
    t->first = 1;
    fprintf(f, "{\"traceEvents\":[\n");
    fprintf(f,
            "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
            "\"args\":{\"name\":\"rank %d\"}}",
            rank, rank);
    t->first = 0;
    *out = t;
    return GW_OK;
}

void gw__trace_close(gw_trace_t *t)
{
    if (!t)
        return;
    fprintf(t->f, "\n],\"displayTimeUnit\":\"ms\"}\n");
    fclose(t->f);
    free(t);
}

void gw__trace_set_offset(gw_trace_t *t, int64_t offset_ns, int64_t rtt_ns)
{
    if (!t)
        return;
    t->offset_ns = offset_ns;
    fprintf(t->f,
            ",\n{\"name\":\"clock offset\",\"ph\":\"i\",\"s\":\"p\",\"pid\":%d,\"tid\":0,"
            "\"ts\":%.3f,\"args\":{\"offset_ns\":%" PRId64 ",\"rtt_ns\":%" PRId64 "}}",
            t->rank, (double)(gw__now_ns() + offset_ns) / 1e3, offset_ns, rtt_ns);
}

static double us(const gw_trace_t *t, int64_t ns) { return (double)(ns + t->offset_ns) / 1e3; }

void gw__trace_op(gw_trace_t *t, const gw_fr_entry_t *e)
{
    fprintf(t->f,
            ",\n{\"name\":\"%s\",\"cat\":\"collective\",\"ph\":\"X\",\"pid\":%d,\"tid\":1,"
            "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"seq\":%" PRIu64 ",\"bytes\":%" PRIu64
            ",\"dtype\":\"%s\",\"algo\":\"%s\",\"steps\":%u,\"status\":\"%s\"}}",
            gw__fr_kind_name(e->kind), t->rank, us(t, e->t_start_ns),
            (double)(e->t_end_ns - e->t_start_ns) / 1e3, e->seq, e->bytes,
            gw_dtype_name((gw_dtype_t)e->dtype), gw_algo_name((gw_algo_t)e->algo), e->step,
            gw_status_name((gw_status_t)e->status));
}

void gw__trace_step(gw_trace_t *t, const gw_fr_entry_t *e)
{
    int64_t start = e->step_started_ns ? e->step_started_ns : e->step_posted_ns;
    fprintf(t->f,
            ",\n{\"name\":\"wait rank %d\",\"cat\":\"wire\",\"ph\":\"X\",\"pid\":%d,\"tid\":2,"
            "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"seq\":%" PRIu64 ",\"step\":%u,"
            "\"bytes\":%" PRIu64 "}}",
            e->step_peer, t->rank, us(t, start), (double)(e->step_done_ns - start) / 1e3, e->seq,
            e->step, e->step_bytes);
    fprintf(t->f,
            ",\n{\"name\":\"bytes in flight\",\"ph\":\"C\",\"pid\":%d,\"ts\":%.3f,"
            "\"args\":{\"bytes\":%" PRIu64 "}}",
            t->rank, us(t, e->step_posted_ns ? e->step_posted_ns : start), e->step_bytes);
    fprintf(t->f,
            ",\n{\"name\":\"bytes in flight\",\"ph\":\"C\",\"pid\":%d,\"ts\":%.3f,"
            "\"args\":{\"bytes\":0}}",
            t->rank, us(t, e->step_done_ns));
}

void gw__trace_span(gw_trace_t *t, const char *name, const char *cat, int64_t start_ns,
                    int64_t end_ns)
{
    if (!t)
        return;
    /* The caller's names go into JSON strings: anything but plain
     * printable ASCII without quotes or backslashes becomes '_'. */
    char n[64], c[32];
    const char *src[2] = {name ? name : "span", cat ? cat : "app"};
    char *dst[2] = {n, c};
    size_t cap[2] = {sizeof(n), sizeof(c)};
    for (int k = 0; k < 2; k++) {
        size_t i = 0;
        for (; src[k][i] && i + 1 < cap[k]; i++) {
            char ch = src[k][i];
            dst[k][i] = ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\' ? ch : '_';
        }
        dst[k][i] = '\0';
    }
    fprintf(t->f,
            ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,"
            "\"dur\":%.3f}",
            n, c, t->rank, us(t, start_ns), (double)(end_ns - start_ns) / 1e3);
}

gw_status_t gw_trace_span(gw_comm_t *comm, const char *name, const char *cat, int64_t start_ns,
                          int64_t end_ns)
{
    if (!comm || end_ns < start_ns)
        return GW_ERR_INVALID_ARG;
    gw__trace_span(gw__fr_trace(gw__comm_root(comm)->fr), name, cat, start_ns, end_ns);
    return GW_OK;
}
