/*
 * launch_relay.c - `gradwire launch` relaying its ranks' output.
 *
 * Every rank writes its stdout and stderr into two pipes of its own; the
 * launcher's poll loop (launch.c) calls in here when one has data. Output
 * is cut into whole lines, prefixed with "[R] " (unless --no-prefix) and
 * written to the launcher's own stdout or stderr, each line with one
 * writev, so lines of different ranks never interleave mid-line. A line
 * longer than LINE_CAP is relayed in pieces rather than held without
 * bound, and a last line without a newline gets one when its pipe closes.
 * When nobody reads the launcher's output any more (EPIPE) it is dropped,
 * and the ranks run on.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "launch_internal.h"

/* A line longer than this is cut and relayed in pieces. */
#define LINE_CAP 65536
#define READ_MIN 4096

/* Write all of iov to fd. Output is the launcher's job, so a full pipe
 * downstream makes us wait (and the ranks with us) rather than drop lines. */
static void write_out(struct job *job, int fd, struct iovec *iov, int n)
{
    while (n > 0 && !job->out_broken[fd]) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                poll(&p, 1, 100);
                continue;
            }
            job->out_broken[fd] = 1; /* EPIPE: nobody reads us any more */
            return;
        }
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
}

static void emit_line(struct job *job, int r, struct stream *s, const char *line, size_t len,
                      int add_newline)
{
    char prefix[32];
    int plen = job->opts->prefix ? snprintf(prefix, sizeof(prefix), "[%*d] ", job->width, r) : 0;
    struct iovec iov[3] = {
        {.iov_base = prefix, .iov_len = (size_t)plen},
        {.iov_base = (void *)line, .iov_len = len},
        {.iov_base = "\n", .iov_len = add_newline ? 1 : 0},
    };
    write_out(job, s->out_fd, iov, 3);
}

void gw_launch_relay_close(struct job *job, int r, struct stream *s)
{
    if (s->len > 0)
        emit_line(job, r, s, s->buf, s->len, 1); /* the unterminated last line */
    close(s->fd);
    free(s->buf);
    *s = (struct stream){.fd = -1, .out_fd = s->out_fd};
}

/* Read what one pipe has and relay the complete lines in it. */
void gw_launch_relay_pump(struct job *job, int r, struct stream *s)
{
    if (s->cap - s->len < READ_MIN && s->cap < LINE_CAP) {
        size_t ncap = s->cap ? s->cap * 2 : READ_MIN * 2;
        char *nb = realloc(s->buf, ncap > LINE_CAP ? LINE_CAP : ncap);
        if (!nb) {
            fprintf(stderr, "gradwire launch: out of memory relaying rank %d\n", r);
            gw_launch_relay_close(job, r, s);
            return;
        }
        s->buf = nb;
        s->cap = ncap > LINE_CAP ? LINE_CAP : ncap;
    }
    ssize_t n = read(s->fd, s->buf + s->len, s->cap - s->len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        gw_launch_relay_close(job, r, s);
        return;
    }
    size_t start = 0, scan = s->len;
    s->len += (size_t)n;
    for (char *nl; (nl = memchr(s->buf + scan, '\n', s->len - scan)) != NULL;) {
        size_t end = (size_t)(nl - s->buf);
        emit_line(job, r, s, s->buf + start, end + 1 - start, 0);
        start = scan = end + 1;
    }
    if (start == 0 && s->len == s->cap) {
        emit_line(job, r, s, s->buf, s->len, 1); /* overlong line: relay a piece */
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
}
