#include "log.h"

#include "env.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *const level_names[] = {"NONE", "ERROR", "WARN", "INFO", "TRACE"};

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

gw_status_t gw__logger_init(gw_logger_t *lg, int rank)
{
    /* The GW_DEBUG choices, in gw_log_level_t order, then DEBUG as another
     * name for TRACE. */
    static const char *const levels[] = {"NONE", "ERROR", "WARN", "INFO", "TRACE", "DEBUG"};
    memset(lg, 0, sizeof(*lg));
    lg->rank = rank;
    lg->file = stderr;
    /* The default level first, so that a malformed GW_DEBUG or GW_DEBUG_FILE
     * is reported at it; the logger stays usable either way. */
    lg->level = GW_LOG_WARN;
    if (gethostname(lg->host, sizeof(lg->host)) != 0)
        snprintf(lg->host, sizeof(lg->host), "unknown");
    lg->host[sizeof(lg->host) - 1] = '\0';
    /* GW_DEBUG_FILE first, so that a malformed GW_DEBUG is reported in the
     * file the user reads, not on a stderr that may be discarded. */
    const char *path;
    gw_status_t st =
        gw__env_str(lg, "GW_DEBUG_FILE", "a file name (%h: the host, %p: the pid)", &path);
    if (st != GW_OK)
        return st;
    if (path) {
        char expanded[4096];
        expand_path(expanded, sizeof(expanded), path, lg->host);
        FILE *f = fopen(expanded, "a");
        if (f) {
            setvbuf(f, NULL, _IOLBF, 0);
            lg->file = f;
            lg->owns_file = 1;
        } else {
            /* A file that cannot be opened now is not a malformed value: the
             * job still runs, and says where its log went. */
            GW_WARN(lg, "log", "cannot open GW_DEBUG_FILE %s: %m; logging to stderr", expanded);
        }
    }
    int level;
    st = gw__env_choice(lg, "GW_DEBUG", levels, sizeof(levels) / sizeof(levels[0]), GW_LOG_WARN,
                        &level);
    if (st != GW_OK)
        return st;
    lg->level = level > (int)GW_LOG_TRACE ? GW_LOG_TRACE : (gw_log_level_t)level;
    return GW_OK;
}

void gw__logger_fini(gw_logger_t *lg)
{
    if (lg->owns_file && lg->file)
        fclose(lg->file);
    lg->file = stderr;
    lg->owns_file = 0;
}

void gw__log_write(const gw_logger_t *lg, gw_log_level_t level, const char *subsys, const char *fmt,
                   ...)
{
    int saved_errno = errno; /* keep %m meaningful for the caller's syscall */
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
        va_start(ap, fmt);
        errno = saved_errno;
        vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
        va_end(ap);
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
