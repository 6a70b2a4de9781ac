/*
 * shm_door.c - how a rank asks a peer on its host to connect, when pairs
 * are connected on first use (params.lazy, GW_CONNECT=lazy), and how a
 * pair's segment reaches the peer that did not make it.
 *
 * A pair's segment is made by the lower rank and attached by the higher
 * one (shm_seg.c), and both must take part before a message moves. The
 * rank that first needs the pair starts its side; the other may need
 * nothing from us for a long time (it may be about to send to a third rank,
 * or never post the receive our message waits for), so it must be told.
 *
 * Every rank therefore has a door: a Unix datagram socket bound at open(),
 * before the addresses are exchanged (so it exists by the time anyone can
 * knock), to the abstract name "gw-shm-<job id>-<rank>". Abstract names
 * live in the network namespace, which shared-memory peers share (their
 * host id includes it), and vanish with the socket: a rank that is killed
 * leaves nothing behind, where a door in /dev/shm would stay until someone
 * removed it. To knock, a rank sends the door one datagram {magic, its
 * rank}; the owner looks at its door once a millisecond from its progress
 * rounds (a non-blocking recvmsg, so the rounds that move messages pay
 * only a clock read; a knock waits at most a millisecond plus one sleep of
 * the progress engine, GW_SHM_SLEEP_NS, and only a pair's first message
 * pays it) and starts connecting each knocker. The kernel stamps every
 * datagram with its sender's pid and uid (SO_PASSCRED), so a knock counts
 * only when it comes from the pid the claimed rank's address announced and
 * from our user: a stranger's knock, or one in another rank's name, is
 * dropped with a WARN. A knock is only a request anyway: the connection
 * that follows proves the job's data-plane key both ways as at creation.
 *
 * The door also carries the pair's segment: lo's knock holds its
 * descriptor (SCM_RIGHTS), so the segment never needs a name that a killed
 * job would leave in /dev/shm (shm_seg.c). Only the process bound to hi's
 * door can receive it, and hi keeps one only from the pid lo's address
 * names, one per pair; every other descriptor that arrives is closed and
 * its sender counted as a stranger. That is why every rank has a door, also
 * when pairs are connected eagerly.
 *
 * Lazily, both sides knock when they start, whoever started first, so a
 * pair is never half-asked; eagerly only lo knocks, to hand over the
 * segment. A door that is gone when we knock (ECONNREFUSED: no
 * socket has the name) means its owner closed or died: a message for it
 * can never be delivered, so the pair fails in the next progress round,
 * naming it. A door whose queue is full (EAGAIN), or a user with too
 * many descriptors in flight (ETOOMANYREFS: 128 ranks handing over
 * thousands of segments at once), is knocked on again in the next round.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/byteorder.h"
#include "transport/shm/shm_internal.h"

/* Strangers' knocks logged one by one before they are only counted. */
#define STRANGERS_LOGGED 8

socklen_t gw__shm_door_addr(const uint8_t job_id[16], int rank, struct sockaddr_un *a)
{
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", job_id[i]);
    int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "gw-shm-%s-%d", hex, rank);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

void gw__shm_knock_encode(int rank, uint8_t msg[GW_SHM_KNOCK_LEN])
{
    gw__put_le32(msg, GW_SHM_DOOR_MAGIC);
    gw__put_le32(msg + 4, (uint32_t)rank);
}

gw_status_t gw__shm_knock_decode(const uint8_t *msg, size_t n, int *rank)
{
    if (n != GW_SHM_KNOCK_LEN || gw__get_le32(msg) != GW_SHM_DOOR_MAGIC ||
        gw__get_le32(msg + 4) > INT32_MAX)
        return GW_ERR_PROTOCOL;
    *rank = (int)gw__get_le32(msg + 4);
    return GW_OK;
}

gw_status_t gw__shm_door_open(gw_shm_t *t)
{
    const gw_logger_t *lg = t->base.log;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        GW_ERROR(lg, GW_SHM_SUBSYS, "socket(AF_UNIX) for this rank's door: %m");
        return GW_ERR_SYSTEM;
    }
    int one = 1;
    struct sockaddr_un a;
    socklen_t al = gw__shm_door_addr(t->job_id, t->base.rank, &a);
    if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&a, al) != 0) {
        GW_ERROR(lg, GW_SHM_SUBSYS, "binding this rank's door @%s: %m%s", a.sun_path + 1,
                 errno == EADDRINUSE ? " (is another process using this job id and rank?)" : "");
        close(fd);
        return GW_ERR_SYSTEM;
    }
    t->door_fd = fd;
    return GW_OK;
}

void gw__shm_door_close(gw_shm_t *t)
{
    if (t->door_fd >= 0)
        close(t->door_fd); /* the abstract name goes with it */
    t->door_fd = -1;
}

gw_status_t gw__shm_door_gone(gw_shm_t *t, gw_shm_peer_t *p)
{
    if (gw__shm_peer_gone(p))
        return gw__shm_peer_fail(t, p, GW_ERR_REMOTE,
                                 "died before we connected to it: its process is gone");
    return gw__shm_peer_fail(t, p, GW_ERR_REMOTE,
                             "already closed its communicator (its shared-memory door is gone), "
                             "but we need to connect to it");
}

gw_status_t gw__shm_knock(gw_shm_t *t, gw_shm_peer_t *p)
{
    uint8_t msg[GW_SHM_KNOCK_LEN];
    gw__shm_knock_encode(t->base.rank, msg);
    struct sockaddr_un a;
    socklen_t al = gw__shm_door_addr(t->job_id, p->rank, &a);
    p->knock_due = 0;
    /* lo's knock carries the pair's segment until one went out. */
    int give = p->created && p->fd >= 0;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof(ctl));
    struct iovec iov = {msg, sizeof(msg)};
    struct msghdr mh = {.msg_name = &a, .msg_namelen = al, .msg_iov = &iov, .msg_iovlen = 1};
    if (give) {
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof(ctl.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &p->fd, sizeof(int));
    }
    if (sendmsg(t->door_fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(msg)) {
        GW_TRACE(t->base.log, GW_SHM_SUBSYS, "knocked on rank %d's door%s", p->rank,
                 give ? ", handing it our segment" : "");
        if (give) {
            /* The datagram holds the segment now, and our mapping holds it
             * after that: the descriptor has served. */
            close(p->fd);
            p->fd = -1;
        }
        return GW_OK;
    }
    if (errno == ECONNREFUSED || errno == ENOENT) {
        /* Said by the next progress round (gw__shm_connect_step), not by
         * the post that knocked: a post succeeds, what it can never do
         * fails in progress, as for a peer whose goodbye we see later. */
        p->door_gone = 1;
        return GW_OK;
    }
    /* ETOOMANYREFS: our user has too many descriptors in flight in Unix
     * sockets (RLIMIT_NOFILE), as when many ranks hand over segments at
     * once; they drain as the peers take theirs. */
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ETOOMANYREFS) {
        p->knock_due = 1; /* its queue is full: again next round */
        return GW_OK;
    }
    GW_ERROR(t->base.log, GW_SHM_SUBSYS, "knocking on rank %d's door @%s: %m", p->rank,
             a.sun_path + 1);
    return GW_ERR_SYSTEM;
}

/* A knock that does not count: said at WARN for the first few, then only
 * counted (at close, shm.c). */
static void stranger(gw_shm_t *t, const char *why, int rank, long pid)
{
    if (t->strangers++ < STRANGERS_LOGGED)
        GW_WARN(t->base.log, GW_SHM_SUBSYS,
                "a knock on our door claiming rank %d, from pid %ld: %s: ignored (carrying on)",
                rank, pid, why);
}

gw_status_t gw__shm_door_answer(gw_shm_t *t)
{
    for (;;) {
        uint8_t msg[GW_SHM_KNOCK_LEN + 1]; /* one more: a longer datagram is no knock */
        union {
            char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } ctl;
        struct iovec iov = {msg, sizeof(msg)};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = ctl.buf,
                            .msg_controllen = sizeof(ctl.buf)};
        ssize_t n = recvmsg(t->door_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return GW_OK; /* EAGAIN: nobody else knocked */
        struct ucred cred = {.pid = 0, .uid = (uid_t)-1};
        int seg_fd = -1, extra = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS)
                memcpy(&cred, CMSG_DATA(c), sizeof(cred));
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            /* Every descriptor that arrives is ours to close, wanted or not. */
            size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < nfd; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                if (seg_fd < 0) {
                    seg_fd = fd;
                } else {
                    close(fd);
                    extra = 1;
                }
            }
        }
        int r = -1;
        if (gw__shm_knock_decode(msg, (size_t)n, &r) != GW_OK || extra ||
            (mh.msg_flags & MSG_CTRUNC)) {
            if (seg_fd >= 0)
                close(seg_fd);
            stranger(t, "not a knock", -1, (long)cred.pid);
            continue;
        }
        if (r < 0 || r >= t->base.size || r == t->base.rank || !t->peers[r].served) {
            if (seg_fd >= 0)
                close(seg_fd);
            stranger(t,
                     r == t->base.rank ? "that is this rank"
                     : r < 0 || r >= t->base.size
                         ? "not a rank of the job"
                         : "a rank that does not reach us through shared memory",
                     r, (long)cred.pid);
            continue;
        }
        gw_shm_peer_t *p = &t->peers[r];
        if (cred.uid != getuid() || cred.pid != p->pid) {
            if (seg_fd >= 0)
                close(seg_fd);
            stranger(t, "not the process that rank's address names", r, (long)cred.pid);
            continue;
        }
        if (seg_fd >= 0) {
            /* The pair's segment, from its creator: only lo makes one, and
             * only one per pair. */
            if (r > t->base.rank || p->fd >= 0 || p->seg) {
                close(seg_fd);
                stranger(t, "a segment we did not wait for", r, (long)cred.pid);
                continue;
            }
            p->fd = seg_fd;
        }
        t->moved++;
        if (p->conn != GW_SHM_C_IDLE)
            continue; /* already connecting or connected */
        GW_TRACE(t->base.log, GW_SHM_SUBSYS, "rank %d knocked: connecting", r);
        gw_status_t st = gw__shm_start_connect(t, p);
        if (st != GW_OK)
            return gw__shm_connect_failed(t, p, st);
    }
}
