/*
 * sock.c - dialling, accepting and moving bytes on the non-blocking TCP
 * sockets of the TCP transport's mesh, the verbs transport's out-of-band
 * set-up and the bootstrap (sock.h).
 *
 * All three run their own poll() loops under one deadline and keep their
 * own protocols, so what is shared is the part below the protocol: a
 * connection attempt that is started, then finished or failed when poll()
 * says so, retried after pauses that double from 10 ms up to 1 s; an accept
 * that hands back a non-blocking socket with its peer's address as text;
 * and transfers of one message (up to two segments, such as a header and
 * its payload) that move as far as the socket allows and resume where they
 * stopped, so that one slow peer never blocks the loop that serves the
 * others.
 */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/byteorder.h"
#include "common/clock.h"
#include "transport/sock.h"

void gw__sock_retry_init(gw_sock_retry_t *r)
{
    r->at = 0;
    r->delay_ms = GW_SOCK_RETRY_FIRST_MS;
}

int gw__sock_retry_arm(gw_sock_retry_t *r)
{
    int d = r->delay_ms;
    r->at = gw__now_ms() + d;
    r->delay_ms = d * 2 > GW_SOCK_RETRY_MAX_MS ? GW_SOCK_RETRY_MAX_MS : d * 2;
    return d;
}

void gw__sock_dial_init(gw_sock_dial_t *d)
{
    d->fd = -1;
    d->state = GW_SOCK_CONNECTING;
    gw__sock_retry_init(&d->retry);
    d->why[0] = '\0';
}

int gw__sock_dial_step(gw_sock_dial_t *d, const struct sockaddr *sa, socklen_t len, short revents,
                       void (*prep)(void *arg, int fd), void *arg, const char **what)
{
    if (d->state == GW_SOCK_CONNECTED)
        return GW_SOCK_CONNECTED;
    *what = "connect";
    if (d->fd < 0) {
        if (gw__now_ms() < d->retry.at)
            return GW_SOCK_CONNECTING;
        d->fd = gw__sock_open(sa->sa_family);
        if (d->fd < 0) {
            *what = "socket()";
            return GW_SOCK_FAILED;
        }
        if (prep)
            prep(arg, d->fd);
        int st = gw__sock_connect(d->fd, sa, len);
        if (st == GW_SOCK_CONNECTED)
            d->state = GW_SOCK_CONNECTED;
        return st;
    }
    int err = gw__sock_connect_result(d->fd, revents);
    if (err < 0)
        return GW_SOCK_CONNECTING;
    if (err != 0) {
        errno = err;
        return GW_SOCK_FAILED;
    }
    d->state = GW_SOCK_CONNECTED;
    return GW_SOCK_CONNECTED;
}

short gw__sock_dial_events(const gw_sock_dial_t *d)
{
    return d->fd >= 0 && d->state == GW_SOCK_CONNECTING ? POLLOUT : 0;
}

int gw__sock_dial_failed(gw_sock_dial_t *d, const char *what)
{
    snprintf(d->why, sizeof(d->why), "%s: %m", what);
    if (d->fd >= 0)
        close(d->fd);
    d->fd = -1;
    d->state = GW_SOCK_CONNECTING;
    return gw__sock_retry_arm(&d->retry);
}

int gw__sock_open(int family)
{
    return socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

int gw__sock_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    if (connect(fd, sa, len) == 0)
        return GW_SOCK_CONNECTED;
    /* EINTR: the connection goes on in the background, as with EINPROGRESS. */
    if (errno == EINPROGRESS || errno == EINTR)
        return GW_SOCK_CONNECTING;
    return GW_SOCK_FAILED;
}

int gw__sock_connect_result(int fd, short revents)
{
    if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
        return -1;
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err == EINPROGRESS || err == EALREADY)
        return -1;
    return err;
}

int gw__sock_accept(int lfd, char *addr, size_t addr_cap)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0 && addr)
        gw__sock_addr_str((const struct sockaddr *)&ss, addr, addr_cap);
    return fd;
}

int gw__sock_nodelay(int fd)
{
    int one = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int gw__sock_remaining_ms(int64_t deadline)
{
    int64_t left = deadline - gw__now_ms();
    if (left <= 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

void gw__sock_hello_id_put(uint8_t out[GW_SOCK_HELLO_ID_SIZE], const gw_sock_hello_id_t *id)
{
    gw__put_be32(out, id->magic);
    memcpy(out + 8, id->job_id, 16);
    gw__put_be32(out + 24, id->from);
    gw__put_be32(out + 28, id->to);
    memset(out + GW_SOCK_NONCE_AT, 0, GW_SOCK_NONCE_LEN);
}

void gw__sock_hello_id_get(const uint8_t in[GW_SOCK_HELLO_ID_SIZE], gw_sock_hello_id_t *id)
{
    id->magic = gw__get_be32(in);
    memcpy(id->job_id, in + 8, 16);
    id->from = gw__get_be32(in + 24);
    id->to = gw__get_be32(in + 28);
}

void gw__sock_io_set(gw_sock_io_t *io, void *a, size_t alen, void *b, size_t blen)
{
    io->iov[0].iov_base = a;
    io->iov[0].iov_len = alen;
    io->iov[1].iov_base = b;
    io->iov[1].iov_len = blen;
    io->total = alen + blen;
    io->done = 0;
}

int gw__sock_io_step(int fd, gw_sock_io_t *io, int writing)
{
    while (io->done < io->total) {
        struct iovec v[2];
        int n = 0;
        size_t skip = io->done;
        for (int i = 0; i < 2; i++) {
            if (skip >= io->iov[i].iov_len) {
                skip -= io->iov[i].iov_len;
                continue;
            }
            v[n].iov_base = (uint8_t *)io->iov[i].iov_base + skip;
            v[n].iov_len = io->iov[i].iov_len - skip;
            skip = 0;
            n++;
        }
        struct msghdr mh;
        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = v;
        mh.msg_iovlen = (size_t)n;
        /* MSG_NOSIGNAL: a peer that died must give an error, not SIGPIPE. */
        ssize_t r = writing ? sendmsg(fd, &mh, MSG_NOSIGNAL) : recvmsg(fd, &mh, 0);
        if (r > 0) {
            io->done += (size_t)r;
            continue;
        }
        if (r == 0 && !writing)
            return GW_SOCK_IO_EOF;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return GW_SOCK_IO_AGAIN;
        return GW_SOCK_IO_ERROR;
    }
    return GW_SOCK_IO_DONE;
}

int gw__sock_io_buf(int fd, void *buf, size_t len, size_t *done, int writing)
{
    gw_sock_io_t io;
    gw__sock_io_set(&io, buf, len, NULL, 0);
    io.done = *done;
    int r = gw__sock_io_step(fd, &io, writing);
    *done = io.done;
    return r;
}

int gw__sock_io_run(int fd, gw_sock_io_t *io, int writing, int64_t deadline)
{
    for (;;) {
        int r = gw__sock_io_step(fd, io, writing);
        if (r != GW_SOCK_IO_AGAIN)
            return r;
        int wait = gw__sock_remaining_ms(deadline);
        if (wait == 0)
            return GW_SOCK_IO_TIMEOUT;
        struct pollfd p = {.fd = fd, .events = writing ? POLLOUT : POLLIN};
        if (poll(&p, 1, wait) < 0 && errno != EINTR)
            return GW_SOCK_IO_ERROR;
    }
}
