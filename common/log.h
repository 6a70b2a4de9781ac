/*
 * log.h - leveled logging with a per-communicator context.
 *
 * Every line starts with host, pid, rank and subsystem, e.g.
 *   node3:4711:2 gradwire TCP WARN connection to rank 5 reset: ...
 * The level is checked before any formatting, so a disabled TRACE costs one
 * compare. There is no global logger: each communicator owns a gw_logger_t
 * and passes a pointer down to its transport and bootstrap.
 */
#ifndef GW_COMMON_LOG_H
#define GW_COMMON_LOG_H

#include <stdatomic.h>
#include <stdio.h>

#include "gradwire.h"

typedef enum gw_log_level {
    GW_LOG_NONE = 0,
    GW_LOG_ERROR,
    GW_LOG_WARN,
    GW_LOG_INFO,
    GW_LOG_TRACE
} gw_log_level_t;

/* GW_DEBUG_SUBSYS: the subsystems whose INFO and TRACE lines are written
 * (or, excluded, are not); WARN and ERROR are always written. */
#define GW_LOG_SUBSYS_MAX 16
#define GW_LOG_SUBSYS_LEN 16

/* The longest last-error message kept (gw_last_error), with its NUL. */
#define GW_LOG_LAST_ERROR_MAX 1024

/* A communicator's last-error slot: the message of the last ERROR line
 * logged through a logger that points at it, for gw_last_error(comm) asked
 * from any thread. A spin flag, not a mutex, guards it: a copy of at most
 * GW_LOG_LAST_ERROR_MAX bytes is all that is done under it, and zeroed
 * memory is a valid empty slot, so it needs neither set-up nor tear-down. */
typedef struct gw_log_slot {
    atomic_int busy;
    char msg[GW_LOG_LAST_ERROR_MAX];
} gw_log_slot_t;

typedef struct gw_logger {
    gw_log_level_t level;
    int rank;      /* -1 before the rank is known */
    FILE *file;    /* stderr, or the GW_DEBUG_FILE we opened */
    int owns_file; /* close file on gw__logger_fini */
    char host[64];
    int nsubsys;        /* 0: every subsystem; -1: none (^ALL) */
    int subsys_exclude; /* the list says which not to write */
    char subsys[GW_LOG_SUBSYS_MAX][GW_LOG_SUBSYS_LEN];
    /* Where ERROR lines are also recorded besides the calling thread's own
     * last error: the communicator's slot (not owned; NULL: none). */
    gw_log_slot_t *slot;
} gw_logger_t;

/* The subsystems lines are logged under, for GW_DEBUG_SUBSYS: "init,api,
 * coll,...". */
const char *gw__log_subsys_names(void);

/* Configure from GW_DEBUG (NONE|ERROR|WARN|INFO|TRACE, default WARN),
 * GW_DEBUG_FILE (a path; "%h" becomes the host name and "%p" the pid) and
 * GW_DEBUG_SUBSYS (a comma-separated list of subsystems whose INFO and
 * TRACE lines are written, ALL by default, '^' in front to name those that
 * are not, as NCCL_DEBUG_SUBSYS). A malformed GW_DEBUG or
 * GW_DEBUG_SUBSYS (an unknown subsystem), or a set but empty GW_DEBUG_FILE
 * is GW_ERR_CONFIG,
 * logged at the default level; the logger is usable (default level, on
 * stderr) whatever it returns, and needs gw__logger_fini either way. A file
 * that cannot be opened falls back to stderr with a warning. */
gw_status_t gw__logger_init(gw_logger_t *lg, int rank);
/* The same, but every line (the complaints about the variables too) goes
 * to `into`, and GW_DEBUG_FILE is only checked, never opened: for
 * gw_node_probe, which reports what a rank's logger would do. */
gw_status_t gw__logger_init_into(gw_logger_t *lg, int rank, FILE *into);
void gw__logger_fini(gw_logger_t *lg);

/* gw_last_error: the message of the last ERROR line logged on the calling
 * thread (slot NULL), or through a logger pointing at slot, from whichever
 * thread. Never NULL ("" when none); the text lives in a buffer of the
 * calling thread, valid until its next call into gradwire. ERROR lines are
 * recorded whatever GW_DEBUG says, even when it keeps them off the log. */
const char *gw__log_last_error(gw_log_slot_t *slot);
/* Record msg as the calling thread's last error (and slot's, unless NULL),
 * as an ERROR line would: for errors the caller reports without a line. */
void gw__log_record_error(gw_log_slot_t *slot, const char *msg);

void gw__log_write(const gw_logger_t *lg, gw_log_level_t level, const char *subsys, const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));
/* An ERROR line that sums up errors logged just before it ("communicator
 * creation failed: ..."): written like any ERROR, but not recorded as the
 * last error, which keeps the cause the earlier line gave. */
void gw__log_write_summary(const gw_logger_t *lg, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Record msg in slot only (not as the thread's): a communicator that fails
 * because of an error logged through another one's logger (a
 * sub-communicator, whose transport is its root's) keeps the cause too. */
void gw__log_record_slot(gw_log_slot_t *slot, const char *msg);

/* An ERROR is formatted even below the logger's level, because it is also
 * the thread's last error (gw_last_error); only the level says whether it
 * is written. */
#define GW__LOG(lg, lvl, subsys, ...)                                    \
    do {                                                                 \
        const gw_logger_t *gw__lg = (lg);                                \
        if (gw__lg && (gw__lg->level >= (lvl) || (lvl) == GW_LOG_ERROR)) \
            gw__log_write(gw__lg, (lvl), (subsys), __VA_ARGS__);         \
    } while (0)

#define GW_ERROR(lg, subsys, ...) GW__LOG(lg, GW_LOG_ERROR, subsys, __VA_ARGS__)
#define GW_ERROR_SUMMARY(lg, subsys, ...)                          \
    do {                                                           \
        const gw_logger_t *gw__lgs = (lg);                         \
        if (gw__lgs && gw__lgs->level >= GW_LOG_ERROR)             \
            gw__log_write_summary(gw__lgs, (subsys), __VA_ARGS__); \
    } while (0)
#define GW_WARN(lg, subsys, ...) GW__LOG(lg, GW_LOG_WARN, subsys, __VA_ARGS__)
#define GW_INFO(lg, subsys, ...) GW__LOG(lg, GW_LOG_INFO, subsys, __VA_ARGS__)
#define GW_TRACE(lg, subsys, ...) GW__LOG(lg, GW_LOG_TRACE, subsys, __VA_ARGS__)

#endif
