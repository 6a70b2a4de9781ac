/*
 * trace.h - the timeline (GW_TRACE=FILE, trace.c): Chrome trace JSON, the
 * format chrome://tracing and Perfetto read, fed by the flight recorder's
 * hooks.
 *
 * Rank N writes FILE.rank-N.json: one event per line between a first line
 * that opens {"traceEvents":[ and a last line that closes it, so that the
 * file of a rank that died is still readable line by line and `gradwire
 * launch` merges the ranks' files by concatenating their event lines into
 * FILE. The events of rank N have pid N (one track per rank); timestamps
 * are microseconds of rank 0's monotonic clock: each rank measures its
 * offset from rank 0 through the bootstrap when it joins
 * (gw__bootstrap_clock, then gw__trace_set_offset, in comm_init.c), so no
 * merge needs to shift them.
 */
#ifndef GW_COLLECTIVES_COMM_TRACE_H
#define GW_COLLECTIVES_COMM_TRACE_H

#include <stdint.h>

#include "collectives/comm/flight_recorder.h"
#include "common/log.h"
#include "gradwire.h"

/* Open FILE.rank-N.json (mode 0600) for rank. */
gw_status_t gw__trace_open(const gw_logger_t *log, const char *file, int rank, gw_trace_t **out);
/* Flush and close it (NULL: nothing). */
void gw__trace_close(gw_trace_t *t);
/* Rank 0's monotonic clock minus this rank's, in ns. */
void gw__trace_set_offset(gw_trace_t *t, int64_t offset_ns, int64_t rtt_ns);

/* A collective that ended (one X span, with its steps' spans written
 * already by gw__trace_step), a step that ended (an X span for its wait
 * and the bytes-in-flight counter). */
void gw__trace_op(gw_trace_t *t, const gw_fr_entry_t *e);
void gw__trace_step(gw_trace_t *t, const gw_fr_entry_t *e);

/* A span of the caller's own (gw_trace_span: compute, I/O), from start_ns
 * to end_ns on CLOCK_MONOTONIC. */
void gw__trace_span(gw_trace_t *t, const char *name, const char *cat, int64_t start_ns,
                    int64_t end_ns);

#endif
