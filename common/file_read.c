/*
 * file_read.c - opening and reading user-named files without hanging
 * (contract in file_read.h).
 *
 * The order matters. open() with O_NONBLOCK returns at once for a FIFO
 * (reading) or fails with ENXIO (writing, no reader), where a blocking
 * open waits for a peer forever. fstat() on the descriptor then says what
 * was opened, with no race against a rename of the path. Only then is
 * anything read, and never more than the caller's bound plus one byte, so
 * a file that is too long is caught without reading all of it.
 */
#include "file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the file is, in words, for an error; NULL for a regular file. */
static const char *not_regular(mode_t mode)
{
    if (S_ISREG(mode))
        return NULL;
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a plain file";
}

gw_status_t gw__file_read(const gw_logger_t *lg, const char *subsys, const char *what,
                          const char *path, size_t max_bytes, int flags, char **out, size_t *len,
                          struct stat *sb)
{
    int oflags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
    if (flags & GW_FILE_NOFOLLOW)
        oflags |= O_NOFOLLOW;
    int fd = open(path, oflags);
    if (fd < 0) {
        GW_ERROR(lg, subsys, "cannot open %s: %s", what, strerror(errno));
        return GW_ERR_CONFIG;
    }
    gw_status_t st = GW_ERR_CONFIG;
    char *buf = NULL;
    struct stat s;
    if (fstat(fd, &s) != 0) {
        GW_ERROR(lg, subsys, "cannot stat %s: %s", what, strerror(errno));
        goto out_close;
    }
    const char *kind = not_regular(s.st_mode);
    if (kind) {
        GW_ERROR(lg, subsys, "%s is %s, not a regular file: it is not read", what, kind);
        goto out_close;
    }
    if (s.st_size > 0 && (unsigned long long)s.st_size > max_bytes) {
        GW_ERROR(lg, subsys, "%s is %lld bytes, more than the %zu it may be", what,
                 (long long)s.st_size, max_bytes);
        goto out_close;
    }
    buf = malloc(max_bytes + 2);
    if (!buf) {
        st = GW_ERR_NO_MEMORY;
        goto out_close;
    }
    /* A regular file can still grow while it is read: the bound holds. */
    size_t got = 0;
    while (got <= max_bytes) {
        ssize_t r = read(fd, buf + got, max_bytes + 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            GW_ERROR(lg, subsys, "cannot read %s: %s", what, strerror(errno));
            goto out_free;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    if (got > max_bytes) {
        GW_ERROR(lg, subsys, "%s is more than the %zu bytes it may be", what, max_bytes);
        goto out_free;
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    if (sb)
        *sb = s;
    buf = NULL;
    st = GW_OK;
out_free:
    free(buf);
out_close:
    close(fd);
    return st;
}

gw_status_t gw__file_open_log(const char *path, int *fd_out, char *why, size_t why_cap)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd < 0) {
        snprintf(why, why_cap, "%s",
                 errno == ENXIO ? "a FIFO or socket nobody reads" : strerror(errno));
        return GW_ERR_CONFIG;
    }
    struct stat s;
    if (fstat(fd, &s) != 0) {
        snprintf(why, why_cap, "%s", strerror(errno));
        close(fd);
        return GW_ERR_CONFIG;
    }
    /* A FIFO or socket that opened has a reader (a pipe to tee, say): as
     * good a place for lines as stderr. Writing log lines over a disk's
     * block device would destroy it. */
    if (!S_ISREG(s.st_mode) && !S_ISCHR(s.st_mode) && !S_ISFIFO(s.st_mode) &&
        !S_ISSOCK(s.st_mode)) {
        snprintf(why, why_cap, "%s, where a log may not go", not_regular(s.st_mode));
        close(fd);
        return GW_ERR_CONFIG;
    }
    /* Blocking from here, as stderr is: a slow reader slows the writer
     * rather than losing its lines. */
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        snprintf(why, why_cap, "%s", strerror(errno));
        close(fd);
        return GW_ERR_CONFIG;
    }
    *fd_out = fd;
    return GW_OK;
}
