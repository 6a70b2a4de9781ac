/*
 * fr_internal.h - the flight recorder's own struct, shared by its files
 * (flight_recorder.c: the hooks and the signal handler; fr_write.c: the
 * dump writer; fr_read.c: the dump reader) and by nobody else.
 */
#ifndef GW_COLLECTIVES_COMM_FR_INTERNAL_H
#define GW_COLLECTIVES_COMM_FR_INTERNAL_H

#include <time.h>

#include "collectives/comm/flight_recorder.h"

struct gw_fr {
    const gw_logger_t *log;
    gw_fr_entry_t *ring;
    uint32_t cap;  /* entries in ring */
    uint64_t next; /* entries ever begun: the newest is ring[(next - 1) % cap] */
    uint64_t done; /* calls completed without an error */
    int running;   /* the newest entry is a call in progress */
    int rank, size;
    uint32_t comm_id;
    int dumped;
    char path[4096]; /* the dump's file, formatted in advance; "" for none */
    gw_trace_t *trace;
    /* Bytes posted to send to and receive from each rank (size entries),
     * and when the last pulse went out (pulse.c). */
    uint64_t *peer_sent, *peer_recv;
    uint64_t bytes_sent, bytes_recv;
    int64_t pulse_ns;
};

/* The recorder's clock. CLOCK_MONOTONIC_COARSE (the kernel's tick, a few
 * ms: enough to say how long a rank has waited) costs a few nanoseconds
 * where CLOCK_MONOTONIC costs tens, and more in a virtual machine under
 * load (157 ns a read measured here), and a collective takes five or six
 * stamps: the precise clock on an 8-byte allreduce of about a microsecond
 * was measurable (docs/guide/observability.md). So the precise clock only
 * when the timeline needs microseconds (GW_TRACE). */
static inline int64_t gw__fr_now(const gw_fr_t *fr)
{
    struct timespec ts;
    clock_gettime(fr->trace ? CLOCK_MONOTONIC : CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Write the dump (why: a word; in_signal: called from the fatal-signal
 * handler, so nothing but write(2) and the like). */
gw_status_t gw__fr_write(const gw_fr_t *fr, const char *why, int in_signal);

#endif
