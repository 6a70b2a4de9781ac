/*
 * bootstrap.c - the out-of-band rendezvous of the ranks of one job (contract
 * in bootstrap.h, wire format in bootstrap_msg.h): its public entry points,
 * and the socket helpers that all of its parts share.
 *
 * The rendezvous has three parts, one file each, because each is a state
 * machine of its own: rank 0 accepting and authenticating the other ranks
 * (bootstrap_root.c), every other rank connecting to rank 0 and proving
 * itself (bootstrap_client.c), and the all-gathers over the star of
 * connections that the join leaves open (bootstrap_gather.c). This file
 * checks the parameters, hands the join to the part for this rank, and
 * holds what every part needs: non-blocking transfers with deadlines,
 * nonces, addresses as text, and the best-effort REJECT sent on the way out
 * of a failure.
 */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "transport/bootstrap/bootstrap_internal.h"
#include "common/clock.h"
#include "common/env.h"

/* ---- small helpers ------------------------------------------------------ */

int gw__bs_remaining_ms(int64_t deadline)
{
    int64_t left = deadline - gw__now_ms();
    if (left <= 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

void gw__bs_format_addr(const struct sockaddr *sa, socklen_t len, char out[GW_BS_ADDR_TEXT])
{
    char host[128], serv[16];
    if (getnameinfo(sa, len, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        snprintf(out, GW_BS_ADDR_TEXT, "(unknown address)");
    else if (sa->sa_family == AF_INET6)
        snprintf(out, GW_BS_ADDR_TEXT, "[%s]:%s", host, serv);
    else
        snprintf(out, GW_BS_ADDR_TEXT, "%s:%s", host, serv);
}

gw_status_t gw__bs_random_bytes(const gw_logger_t *lg, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom((uint8_t *)buf + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            GW_ERROR(lg, GW_BS_SUBSYS, "getrandom failed: %m");
            return GW_ERR_SYSTEM;
        }
        got += (size_t)r;
    }
    return GW_OK;
}

/* Small handshake messages go out whole; waiting for the peer's ACK before
 * sending the next one (Nagle) would only add latency. Failure is harmless. */
void gw__bs_set_nodelay(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Best effort, never blocks: used on the way out of a failure, when the peer
 * may already be gone. The REJECT is small and our side of the stream is at
 * a message boundary whenever this is called, so it goes out whole or not at
 * all. */
void gw__bs_send_reject_nowait(int fd, gw_status_t status, const char *reason)
{
    uint8_t msg[GW_BS_REJECT_MAX_LEN];
    size_t n = gw__bs_encode_reject(status, reason, msg);
    (void)send(fd, msg, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* ---- non-blocking transfers of up to two segments ----------------------- */

void gw__bs_io_set(gw_bs_io_t *io, void *a, size_t alen, void *b, size_t blen)
{
    io->iov[0].iov_base = a;
    io->iov[0].iov_len = alen;
    io->iov[1].iov_base = b;
    io->iov[1].iov_len = blen;
    io->total = alen + blen;
    io->done = 0;
}

/* Move as much as the socket takes now. GW_BS_IO_ERROR leaves errno set. */
int gw__bs_io_step(int fd, gw_bs_io_t *io, int writing)
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
            return GW_BS_IO_EOF;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return GW_BS_IO_AGAIN;
        return GW_BS_IO_ERROR;
    }
    return GW_BS_IO_DONE;
}

/* Finish a transfer on one socket, waiting at most until deadline. */
int gw__bs_io_run(int fd, gw_bs_io_t *io, int writing, int64_t deadline)
{
    for (;;) {
        int r = gw__bs_io_step(fd, io, writing);
        if (r != GW_BS_IO_AGAIN)
            return r;
        int wait = gw__bs_remaining_ms(deadline);
        if (wait == 0)
            return GW_BS_IO_TIMEOUT;
        struct pollfd p = {.fd = fd, .events = writing ? POLLOUT : POLLIN};
        if (poll(&p, 1, wait) < 0 && errno != EINTR)
            return GW_BS_IO_ERROR;
    }
}

/* ======================= the public entry points ========================= */

gw_status_t gw__bootstrap_open(const gw_bootstrap_params_t *params, gw_bootstrap_t **out)
{
    if (!params || !out)
        return GW_ERR_INVALID_ARG;
    const gw_logger_t *lg = params->log;
    if (params->size < 1) {
        GW_ERROR(lg, GW_BS_SUBSYS, "bootstrap size %d: a job has at least one rank", params->size);
        return GW_ERR_CONFIG;
    }
    if (params->rank < 0 || params->rank >= params->size) {
        GW_ERROR(lg, GW_BS_SUBSYS, "bootstrap rank %d is outside [0, %d)", params->rank,
                 params->size);
        return GW_ERR_CONFIG;
    }
    if (params->timeout_ms <= 0) {
        GW_ERROR(lg, GW_BS_SUBSYS, "bootstrap timeout %d ms: it must be positive",
                 params->timeout_ms);
        return GW_ERR_CONFIG;
    }
    char host[256];
    char port[8] = "";
    if (params->size > 1 || params->root) {
        int p = 0;
        if (!params->root) {
            GW_ERROR(lg, GW_BS_SUBSYS, "no root address (host:port) for a job of %d ranks",
                     params->size);
            return GW_ERR_CONFIG;
        }
        if (gw__parse_hostport(params->root, host, sizeof(host), &p) != GW_OK ||
            strlen(params->root) >= GW_BS_ROOT_TEXT) {
            GW_ERROR(lg, GW_BS_SUBSYS,
                     "root address \"%s\" is not host:port or [ipv6]:port with a port in "
                     "1..65535",
                     params->root);
            return GW_ERR_CONFIG;
        }
        snprintf(port, sizeof(port), "%d", p);
    }
    gw_bootstrap_t *bs = calloc(1, sizeof(*bs));
    if (!bs) {
        GW_ERROR(lg, GW_BS_SUBSYS, "out of memory");
        return GW_ERR_NO_MEMORY;
    }
    bs->rank = params->rank;
    bs->size = params->size;
    bs->timeout_ms = params->timeout_ms;
    bs->log = lg;
    bs->failed = GW_OK;
    bs->root_fd = -1;
    if (params->root)
        memcpy(bs->root, params->root, strlen(params->root) + 1);

    const char *token = params->token ? params->token : "";
    const uint8_t *key = (const uint8_t *)token;
    size_t key_len = strlen(token);
    int64_t start = gw__now_ms();
    int64_t deadline = start + params->timeout_ms;
    gw_status_t st;
    if (bs->size == 1)
        st = gw__bs_random_bytes(lg, bs->job_id, sizeof(bs->job_id)); /* no network at all */
    else if (bs->rank == 0)
        st = gw__bs_root_open(bs, host, port, key, key_len, start, deadline);
    else
        st = gw__bs_client_join(bs, host, port, key, key_len, start, deadline);
    if (st != GW_OK) {
        gw__bootstrap_close(bs);
        return st;
    }
    *out = bs;
    return GW_OK;
}

void gw__bootstrap_job_id(const gw_bootstrap_t *bs, uint8_t job_id[16])
{
    if (bs)
        memcpy(job_id, bs->job_id, GW_BS_JOB_ID_LEN);
    else
        memset(job_id, 0, GW_BS_JOB_ID_LEN);
}

gw_status_t gw__bootstrap_local_addr(const gw_bootstrap_t *bs, struct sockaddr_storage *addr,
                                     socklen_t *len)
{
    if (!bs || !addr || !len)
        return GW_ERR_INVALID_ARG;
    if (bs->local_len == 0)
        return GW_ERR_NOT_FOUND; /* a one-rank job has no connection */
    memcpy(addr, &bs->local, sizeof(*addr));
    *len = bs->local_len;
    return GW_OK;
}

void gw__bootstrap_close(gw_bootstrap_t *bs)
{
    if (!bs)
        return;
    if (bs->root_fd >= 0)
        close(bs->root_fd);
    if (bs->fds)
        for (int r = 0; r < bs->size; r++)
            if (bs->fds[r] >= 0)
                close(bs->fds[r]);
    free(bs->fds);
    free(bs->peer_addr);
    explicit_bzero(bs->job_id, sizeof(bs->job_id));
    free(bs);
}
