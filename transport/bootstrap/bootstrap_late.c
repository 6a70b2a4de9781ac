/*
 * bootstrap_late.c - rank 0 answers processes that arrive after the job
 * formed (contract in bootstrap_internal.h; the referee's thread runs it,
 * bootstrap_referee.c).
 *
 * Why. Once every rank joined, the root's port has nothing left to admit.
 * Closing it made a surplus process (a fifth one started with GW_SIZE=4,
 * a rank started twice, a restarted rank of a job that went on) find the
 * port refused and retry until its own timeout, then fail naming nobody:
 * "could not connect to the root". So rank 0 keeps listening for as long
 * as the job runs and answers each HELLO at once with a REJECT that says
 * why: the job of N ranks has formed, so rank R is taken.
 *
 * Strangers. The referee's thread does this between its own work, so
 * nothing here may block or grow: at most LATE_MAX connections are held
 * at once (a new one pushes out the oldest), each for at most LATE_MS to
 * send its HELLO; at most LATE_ACCEPT_MAX are accepted per wake-up; bytes
 * that are not a HELLO close the connection. A flood of them costs the
 * referee an accept and a close each, and never a real rank's report,
 * which arrives on its own connection. The REJECT says only what a process
 * that reached the port learns anyway (that a job is there, its size): no
 * token is proven, nothing of the job's secrets goes out.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "transport/bootstrap/bootstrap_internal.h"

#define LATE_MAX (GW_BS_LATE_PFDS - 1)
#define LATE_MS 1000
#define LATE_ACCEPT_MAX 64

typedef struct late_conn {
    int fd; /* -1: free */
    int64_t deadline;
    size_t got;
    uint8_t buf[GW_BS_HELLO_LEN];
    char addr[GW_BS_ADDR_TEXT];
} late_conn_t;

struct gw_bs_late {
    const gw_logger_t *log;
    int lfd;
    int size;
    char root[GW_BS_ROOT_TEXT];
    late_conn_t conns[LATE_MAX];
};

gw_bs_late_t *gw__bs_late_open(gw_bootstrap_t *bs)
{
    if (bs->late_lfd < 0)
        return NULL;
    gw_bs_late_t *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL; /* then late processes find the port closed, as before */
    l->log = bs->log;
    l->lfd = bs->late_lfd;
    bs->late_lfd = -1;
    l->size = bs->size;
    memcpy(l->root, bs->root, sizeof(l->root));
    for (int i = 0; i < LATE_MAX; i++)
        l->conns[i].fd = -1;
    return l;
}

void gw__bs_late_close(gw_bs_late_t *l)
{
    if (!l)
        return;
    for (int i = 0; i < LATE_MAX; i++)
        if (l->conns[i].fd >= 0)
            close(l->conns[i].fd);
    close(l->lfd);
    free(l);
}

int gw__bs_late_pollfds(gw_bs_late_t *l, struct pollfd *pfds)
{
    if (!l)
        return 0;
    int n = 0;
    pfds[n++] = (struct pollfd){.fd = l->lfd, .events = POLLIN};
    for (int i = 0; i < LATE_MAX; i++)
        pfds[n++] = (struct pollfd){.fd = l->conns[i].fd, .events = POLLIN}; /* -1: ignored */
    return n;
}

int64_t gw__bs_late_deadline(const gw_bs_late_t *l)
{
    int64_t first = INT64_MAX;
    for (int i = 0; l && i < LATE_MAX; i++)
        if (l->conns[i].fd >= 0 && l->conns[i].deadline < first)
            first = l->conns[i].deadline;
    return first;
}

static void conn_drop(late_conn_t *c)
{
    close(c->fd);
    c->fd = -1;
}

static void conn_read(gw_bs_late_t *l, late_conn_t *c)
{
    ssize_t n = recv(c->fd, c->buf + c->got, sizeof(c->buf) - c->got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        conn_drop(c);
        return;
    }
    c->got += (size_t)n;
    gw_bs_hdr_t h;
    if (c->got >= GW_BS_HDR_LEN &&
        (gw__bs_decode_hdr(c->buf, GW_BS_HDR_LEN, &h, NULL) != GW_OK || h.type != GW_BS_HELLO)) {
        conn_drop(c); /* not one of ours */
        return;
    }
    if (c->got < sizeof(c->buf))
        return;
    gw_bs_hello_t hello;
    if (gw__bs_decode_hello(c->buf, c->got, &hello, NULL) != GW_OK) {
        conn_drop(c);
        return;
    }
    char reason[GW_BS_REASON_MAX + 1];
    if (hello.rank >= 0 && hello.rank < l->size)
        snprintf(reason, sizeof(reason),
                 "the job of %d ranks at %.100s has formed: rank %d is taken (a process started "
                 "twice, or one too many?)",
                 l->size, l->root, (int)hello.rank);
    else
        snprintf(reason, sizeof(reason),
                 "the job of %d ranks at %.100s has formed: it has no rank %d and admits no one",
                 l->size, l->root, (int)hello.rank);
    GW_WARN(l->log, GW_BS_SUBSYS, "rejected a process from %s claiming rank %d of %d: %s", c->addr,
            (int)hello.rank, (int)hello.size, reason);
    /* Its HELLO is read whole, so closing sends a FIN after the REJECT,
     * not a reset that could discard it. */
    gw__bs_send_reject_nowait(c->fd, GW_ERR_CONFIG, reason);
    conn_drop(c);
}

static void accept_some(gw_bs_late_t *l)
{
    for (int k = 0; k < LATE_ACCEPT_MAX; k++) {
        char addr[GW_BS_ADDR_TEXT];
        int fd = gw__sock_accept(l->lfd, addr, sizeof(addr));
        if (fd < 0)
            return; /* none waiting, or an error the next wake-up retries */
        late_conn_t *slot = NULL;
        for (int i = 0; i < LATE_MAX && !slot; i++)
            if (l->conns[i].fd < 0)
                slot = &l->conns[i];
        if (!slot) { /* the oldest makes room */
            slot = &l->conns[0];
            for (int i = 1; i < LATE_MAX; i++)
                if (l->conns[i].deadline < slot->deadline)
                    slot = &l->conns[i];
        }
        if (slot->fd >= 0)
            conn_drop(slot);
        slot->fd = fd;
        slot->got = 0;
        slot->deadline = gw__now_ms() + LATE_MS;
        memcpy(slot->addr, addr, sizeof(addr));
    }
}

void gw__bs_late_events(gw_bs_late_t *l, const struct pollfd *pfds)
{
    if (!l)
        return;
    for (int i = 0; i < LATE_MAX; i++)
        if (l->conns[i].fd >= 0 && pfds[1 + i].fd == l->conns[i].fd && pfds[1 + i].revents)
            conn_read(l, &l->conns[i]);
    if (pfds[0].revents)
        accept_some(l);
    int64_t now = gw__now_ms();
    for (int i = 0; i < LATE_MAX; i++)
        if (l->conns[i].fd >= 0 && now >= l->conns[i].deadline)
            conn_drop(&l->conns[i]);
}
