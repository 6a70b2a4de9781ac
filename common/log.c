#include "log.h"

#include "env.h"
#include "file_read.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *const level_names[] = {"NONE", "ERROR", "WARN", "INFO", "TRACE"};

/* Every subsystem a line is logged under (the transports' GW_*_SUBSYS,
 * the collectives' and the trainer's own), for GW_DEBUG_SUBSYS. */
static const char *const subsys_names[] = {"init",   "api", "coll",      "async",  "compress",
                                           "tuning", "env", "log",       "select", "tcp",
                                           "shm",    "ib",  "bootstrap", "cuda"};
#define NSUBSYS (sizeof(subsys_names) / sizeof(subsys_names[0]))

const char *gw__log_subsys_names(void)
{
    return "init, api, coll, async, compress, tuning, env, log, select, tcp, shm, ib, bootstrap, "
           "cuda";
}

/* GW_DEBUG_SUBSYS into lg: "ALL", or names (any case), '^' to exclude. */
static gw_status_t parse_subsys(gw_logger_t *lg)
{
    const char *v;
    gw_status_t st = gw__env_str(lg, GW_ENV_DEBUG_SUBSYS, &v);
    if (st != GW_OK || !v)
        return st;
    const char *p = v;
    int exclude = *p == '^';
    p += exclude;
    int n = 0, all = 0;
    char names[GW_LOG_SUBSYS_MAX][GW_LOG_SUBSYS_LEN];
    for (;;) {
        size_t len = strcspn(p, ",");
        size_t k = 0;
        if (len == 3 && strncasecmp(p, "all", 3) == 0) {
            all = 1;
        } else {
            for (; k < NSUBSYS; k++)
                if (strlen(subsys_names[k]) == len && strncasecmp(p, subsys_names[k], len) == 0)
                    break;
            if (k == NSUBSYS || n == GW_LOG_SUBSYS_MAX) {
                GW_ERROR(lg, "env", "GW_DEBUG_SUBSYS=\"%s\": \"%.*s\" is not a subsystem (ALL, %s)",
                         v, (int)len, p, gw__log_subsys_names());
                return GW_ERR_CONFIG;
            }
            snprintf(names[n++], GW_LOG_SUBSYS_LEN, "%s", subsys_names[k]);
        }
        if (!p[len])
            break;
        p += len + 1;
    }
    if (all)
        n = 0; /* ALL (with or without others) is everything; ^ALL is nothing */
    lg->subsys_exclude = exclude;
    lg->nsubsys = all && exclude ? -1 : n;
    memcpy(lg->subsys, names, sizeof(names));
    return GW_OK;
}

/* Whether an INFO or TRACE line of subsys is written. */
static int subsys_wanted(const gw_logger_t *lg, const char *subsys)
{
    if (lg->nsubsys == 0)
        return 1;
    if (lg->nsubsys < 0)
        return 0;
    int listed = 0;
    for (int i = 0; i < lg->nsubsys && !listed; i++)
        listed = strcasecmp(subsys, lg->subsys[i]) == 0;
    return lg->subsys_exclude ? !listed : listed;
}

/* Expand %h (host) and %p (pid) in a GW_DEBUG_FILE pattern. */
static void expand_path(char *out, size_t cap, const char *pattern, const char *host)
{
    size_t n = 0;
    for (const char *p = pattern; *p && n + 1 < cap; p++) {
        if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
            int w = p[1] == 'h' ? snprintf(out + n, cap - n, "%s", host)
                                : snprintf(out + n, cap - n, "%ld", (long)getpid());
            if (w < 0 || (size_t)w >= cap - n)
                break;
            n += (size_t)w;
            p++;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

/* gw__logger_init, writing to `into`; GW_DEBUG_FILE is opened only when
 * open_file (else only checked). */
static gw_status_t logger_setup(gw_logger_t *lg, int rank, FILE *into, int open_file)
{
    memset(lg, 0, sizeof(*lg));
    lg->rank = rank;
    lg->file = into;
    /* The default level first, so that a malformed GW_DEBUG or GW_DEBUG_FILE
     * is reported at it; the logger stays usable either way. */
    lg->level = GW_LOG_WARN;
    if (gethostname(lg->host, sizeof(lg->host)) != 0)
        snprintf(lg->host, sizeof(lg->host), "unknown");
    lg->host[sizeof(lg->host) - 1] = '\0';
    /* GW_DEBUG_FILE first, so that a malformed GW_DEBUG is reported in the
     * file the user reads, not on a stderr that may be discarded. */
    const char *path;
    gw_status_t st = gw__env_str(lg, GW_ENV_DEBUG_FILE, &path);
    if (st != GW_OK)
        return st;
    if (path && open_file) {
        char expanded[4096];
        expand_path(expanded, sizeof(expanded), path, lg->host);
        /* Opened without blocking (a FIFO nobody reads would stop the job
         * here for ever) and checked for what it is: file_read.h. */
        char why[128];
        int fd;
        FILE *f = NULL;
        if (gw__file_open_log(expanded, &fd, why, sizeof(why)) == GW_OK && !(f = fdopen(fd, "a"))) {
            snprintf(why, sizeof(why), "%s", strerror(errno));
            close(fd);
        }
        if (f) {
            setvbuf(f, NULL, _IOLBF, 0);
            lg->file = f;
            lg->owns_file = 1;
        } else {
            /* A file that cannot be opened now is not a malformed value: the
             * job still runs, and says where its log went. */
            GW_WARN(lg, "log", "cannot open GW_DEBUG_FILE %s: %s; logging to stderr", expanded,
                    why);
        }
    }
    int level;
    st = gw__env_choice(lg, GW_ENV_DEBUG, &level);
    if (st != GW_OK)
        return st;
    lg->level = level > (int)GW_LOG_TRACE ? GW_LOG_TRACE : (gw_log_level_t)level;
    return parse_subsys(lg);
}

gw_status_t gw__logger_init(gw_logger_t *lg, int rank) { return logger_setup(lg, rank, stderr, 1); }

gw_status_t gw__logger_init_into(gw_logger_t *lg, int rank, FILE *into)
{
    return logger_setup(lg, rank, into, 0);
}

void gw__logger_fini(gw_logger_t *lg)
{
    if (lg->owns_file && lg->file)
        fclose(lg->file);
    lg->file = stderr;
    lg->owns_file = 0;
}

/* The calling thread's last error, and the copy gw__log_last_error hands
 * out (a slot's message is copied here under its flag, so that the caller
 * reads a stable string while other threads record new errors). Per
 * thread, not process-wide: each thread sees only its own calls' errors. */
static _Thread_local char tls_last_error[GW_LOG_LAST_ERROR_MAX];
static _Thread_local char tls_answer[GW_LOG_LAST_ERROR_MAX];

static void slot_lock(gw_log_slot_t *slot)
{
    int free_ = 0;
    while (!atomic_compare_exchange_weak(&slot->busy, &free_, 1))
        free_ = 0;
}

void gw__log_record_slot(gw_log_slot_t *slot, const char *msg)
{
    if (!slot)
        return;
    slot_lock(slot);
    /* A longer message keeps its start, marked as cut (the return value is
     * checked, which is also what tells -Wformat-truncation the cut is
     * meant). */
    if (snprintf(slot->msg, sizeof(slot->msg), "%s", msg) >= (int)sizeof(slot->msg))
        memcpy(slot->msg + sizeof(slot->msg) - 4, "...", 4);
    atomic_store(&slot->busy, 0);
}

void gw__log_record_error(gw_log_slot_t *slot, const char *msg)
{
    if (snprintf(tls_last_error, sizeof(tls_last_error), "%s", msg) >= (int)sizeof(tls_last_error))
        memcpy(tls_last_error + sizeof(tls_last_error) - 4, "...", 4);
    gw__log_record_slot(slot, msg);
}

const char *gw__log_last_error(gw_log_slot_t *slot)
{
    if (!slot)
        return tls_last_error;
    slot_lock(slot);
    memcpy(tls_answer, slot->msg, sizeof(tls_answer));
    atomic_store(&slot->busy, 0);
    tls_answer[sizeof(tls_answer) - 1] = '\0';
    return tls_answer;
}

/* One line: written when the level allows it, recorded as the last error
 * when it is an ERROR and `record`. */
static void log_line(const gw_logger_t *lg, gw_log_level_t level, const char *subsys, int record,
                     const char *fmt, va_list ap0)
{
    int saved_errno = errno; /* keep %m meaningful for the caller's syscall */
    if (level >= GW_LOG_INFO && !subsys_wanted(lg, subsys))
        return;
    const int written = lg->level >= level;
    char line[2048];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%s:%ld:%d %02d:%02d:%02d.%06ld gradwire %s %s ", lg->host,
                     (long)getpid(), lg->rank, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)tv.tv_usec,
                     subsys, level_names[level]);
    if (n < 0)
        n = 0;
    if ((size_t)n < sizeof(line)) {
        va_list ap;
        va_copy(ap, ap0);
        errno = saved_errno;
        vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
        va_end(ap);
        /* The message without the line's prefix is what gw_last_error
         * gives: the program knows its own host, pid and rank. */
        if (level == GW_LOG_ERROR && record)
            gw__log_record_error(lg->slot, line + n);
    }
    if (!written) {
        errno = saved_errno;
        return;
    }
    /* One fputs per line keeps lines from several ranks whole in a shared file. */
    size_t len = strlen(line);
    if (len + 1 < sizeof(line)) {
        line[len] = '\n';
        line[len + 1] = '\0';
    }
    fputs(line, lg->file ? lg->file : stderr);
    errno = saved_errno;
}

void gw__log_write(const gw_logger_t *lg, gw_log_level_t level, const char *subsys, const char *fmt,
                   ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_line(lg, level, subsys, 1, fmt, ap);
    va_end(ap);
}

void gw__log_write_summary(const gw_logger_t *lg, const char *subsys, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_line(lg, GW_LOG_ERROR, subsys, 0, fmt, ap);
    va_end(ap);
}
