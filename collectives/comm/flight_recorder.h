/*
 * flight_recorder.h - the last N collectives of a communicator, kept so
 * that a job that stops or fails can say what each rank was doing
 * (flight_recorder.c; GW_FR_ENTRIES, GW_FR_DUMP).
 *
 * Each communicator owns one recorder (comm->fr; NULL when GW_FR_ENTRIES
 * is 0). The entry points of the collectives open an entry per call
 * (gw__fr_begin) and close it (gw__fr_end); the messaging layer marks the
 * call's steps: a step is the messages posted since the last wait and the
 * wait for them (gw__fr_post, gw__fr_wait, gw__fr_waited). Every hook is a
 * handful of stores into a ring the communicator's driving thread alone
 * writes, so the recorder costs nothing a benchmark can see.
 *
 * On a failure (a timeout, an abort, any sticky error) and on a fatal
 * signal, a recorder writes itself as JSON to GW_FR_DUMP/rank-N.json (mode
 * 0600; a sub-communicator's to rank-N.comm-XXXXXXXX.json). The writer uses
 * only write(2) on a buffer it formats itself, so the signal handler can
 * use it too. `gradwire fr DIR` reads the dumps (gw__fr_parse).
 */
#ifndef GW_COLLECTIVES_COMM_FLIGHT_RECORDER_H
#define GW_COLLECTIVES_COMM_FLIGHT_RECORDER_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/msg/tag.h"
#include "common/log.h"
#include "gradwire.h"

/* The state of an entry's current step, and of the entry itself. */
typedef enum gw_fr_state {
    GW_FR_NONE = 0,    /* no step yet */
    GW_FR_POSTED = 1,  /* messages posted, not yet waited for */
    GW_FR_STARTED = 2, /* waiting for them */
    GW_FR_DONE = 3,    /* the wait returned (the step, or the call, ended) */
    GW_FR_FAILED = 4,  /* the call ended with an error */
} gw_fr_state_t;

/* The peers an entry remembers (the first distinct ones it posted to). */
#define GW_FR_PEERS 8

typedef struct gw_fr_entry {
    uint64_t seq;        /* the call's sequence number (its tag) */
    uint64_t bytes;      /* count times the dtype's size */
    int64_t t_start_ns;  /* CLOCK_MONOTONIC */
    int64_t t_end_ns;    /* 0 while running */
    uint32_t kind;       /* gw_coll_kind_t */
    int32_t dtype, algo; /* gw_dtype_t, gw_algo_t */
    int32_t status;      /* gw_status_t once ended */
    uint32_t state;      /* GW_FR_STARTED while running, then DONE or FAILED */
    uint32_t step;       /* steps begun (1-based number of the current one) */
    uint32_t step_state; /* gw_fr_state_t of the current step */
    int32_t step_peer;   /* the rank the current step waits for, -1: none */
    int64_t step_posted_ns, step_started_ns, step_done_ns;
    uint64_t step_bytes; /* bytes posted to send in the current step */
    uint32_t npeers;     /* distinct peers posted to (counted up to GW_FR_PEERS) */
    int32_t peers[GW_FR_PEERS];
} gw_fr_entry_t;

typedef struct gw_fr gw_fr_t;
typedef struct gw_trace gw_trace_t;

/* A recorder of `entries` entries for rank `rank` of `size` (communicator
 * id `comm_id`, 0 for a root), dumping to dump_dir (NULL: no dump); NULL
 * when entries is 0 or memory is short. It registers itself with the
 * fatal-signal handler when it has a dump directory. */
gw_fr_t *gw__fr_create(const gw_logger_t *log, int entries, int rank, int size, uint32_t comm_id,
                       const char *dump_dir);
/* The settings from GW_FR_ENTRIES, GW_FR_DUMP and GW_TRACE (GW_OK and
 * *fr = NULL when the recorder is off). */
gw_status_t gw__fr_from_env(const gw_logger_t *log, int rank, int size, uint32_t comm_id,
                            gw_fr_t **fr);
void gw__fr_destroy(gw_fr_t *fr);

/* The hooks (each does nothing on NULL). */
void gw__fr_begin(gw_fr_t *fr, uint64_t seq, gw_coll_kind_t kind, size_t count, gw_dtype_t dtype,
                  gw_algo_t algo);
void gw__fr_end(gw_fr_t *fr, gw_status_t status);
void gw__fr_post(gw_fr_t *fr, int peer, int is_send, size_t len);
void gw__fr_wait(gw_fr_t *fr, int peer);
void gw__fr_waited(gw_fr_t *fr);

/* The entry of the call in progress, or of the last one; NULL when none. */
const gw_fr_entry_t *gw__fr_current(const gw_fr_t *fr);
/* Operations completed, and the start of the call in progress (0: none). */
uint64_t gw__fr_done_count(const gw_fr_t *fr);

/* Write the dump now (`why`: what ended the job, in a word). GW_OK, or
 * the error that stopped it (logged); nothing without a dump directory. */
gw_status_t gw__fr_dump(gw_fr_t *fr, const char *why);

/* The timeline trace the recorder feeds (trace.c), or NULL. */
gw_trace_t *gw__fr_trace(const gw_fr_t *fr);

/* The short name of a collective kind ("allreduce"), "?" if unknown; of
 * a state ("posted", "started", "done", "failed", "none"), and back (-1:
 * unknown; "running" is GW_FR_STARTED). In fr_read.c. */
const char *gw__fr_kind_name(uint32_t kind);
const char *gw__fr_state_name(uint32_t s);
int gw__fr_state_parse(const char *name);

/* ---- reading dumps (gw__fr_parse, flight_recorder_read.c) ---------------- */

/* One dump as `gradwire fr` reads it. */
typedef struct gw_fr_dump {
    int rank, size;
    uint32_t comm_id;
    char why[32];
    int64_t now_ns; /* CLOCK_MONOTONIC when written */
    uint64_t done;  /* operations completed */
    int nentries;
    gw_fr_entry_t *entries; /* oldest first; malloc'd */
} gw_fr_dump_t;

/* Parse the dump text[0 .. len) into *out (free with gw__fr_dump_free).
 * Malformed or oversized input: GW_ERR_PROTOCOL, with what is wrong in
 * err[0 .. cap). */
gw_status_t gw__fr_parse(const char *text, size_t len, gw_fr_dump_t *out, char *err, size_t cap);
void gw__fr_dump_free(gw_fr_dump_t *d);

#endif
