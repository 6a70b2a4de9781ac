/*
 * bootstrap_gather.c - the bootstrap all-gather, on rank 0 and on the other
 * ranks (contract in bootstrap.h, protocol in bootstrap_msg.h).
 *
 * The star of connections left by the join stays open for all-gathers:
 * every rank sends its block to rank 0, which answers the concatenation
 * once it has all blocks. Rank 0 multiplexes its connections with poll(),
 * so a rank that dies is noticed as soon as its connection closes, whatever
 * order the others arrive in. When anything goes wrong, rank 0 sends every
 * rank a REJECT with the reason before giving up, so nobody waits for a
 * result that will not come; a rank that fails locally tells rank 0 the
 * same way. The first failure is sticky: a bootstrap that failed an
 * all-gather fails every later one at once.
 *
 * That answer costs rank 0 size^2 x len bytes. From GW_BOOTSTRAP_RING_MIN
 * ranks on (rank 0's setting, so that every rank takes the path rank 0
 * chose), rank 0 answers the blocks with RING_OPEN instead, gathers the
 * ports of the ranks' ring listeners the same way, hands each rank its
 * neighbour's address (RING_PEER), and the blocks go round a ring
 * (bootstrap_ring_gather.c says how, and how its failures are decided).
 */
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "transport/bootstrap/bootstrap_internal.h"

typedef enum gather_stage {
    G_HDR,
    G_BODY,
    G_REJECT,
    G_START, /* a client reading rank 0's GATHER_START */
    G_HAVE,
    G_SEND,
    G_SENT,
    G_RING /* a client reading rank 0's RING_OPEN */
} gather_stage_t;

typedef struct gather_peer {
    gather_stage_t stage;
    gw_sock_io_t io;
    uint8_t buf[GW_BS_SMALL_MSG_MAX];
} gather_peer_t;

/* Why the all-gather failed on rank 0, and what the other ranks are told. */
typedef struct gather_fail {
    gw_status_t local;
    gw_status_t remote;
    int culprit; /* whom every rank blames */
    char reason[GW_BS_REASON_MAX + 1];
} gather_fail_t;

static gw_status_t gather_set_fail(const gw_bootstrap_t *bs, gather_fail_t *f, gw_status_t local,
                                   gw_status_t remote, int culprit, const char *reason)
{
    f->local = local;
    f->remote = remote;
    f->culprit = culprit;
    size_t n = strnlen(reason, sizeof(f->reason) - 1); /* the wire carries at most this */
    memcpy(f->reason, reason, n);
    f->reason[n] = '\0';
    GW_ERROR(bs->log, GW_BS_SUBSYS, "bootstrap all-gather failed: %s", f->reason);
    return local;
}

/* Advance the receive from rank r. Returns GW_OK (maybe not finished yet:
 * see p->stage) or the failure, described in *f. */
static gw_status_t gather_recv(gw_bootstrap_t *bs, int r, gather_peer_t *p, size_t len,
                               uint8_t *all, gather_fail_t *f)
{
    char text[GW_BS_REASON_MAX + 64];
    const char *why = NULL;
    for (;;) {
        int io = gw__sock_io_step(bs->fds[r], &p->io, 0);
        if (io == GW_SOCK_IO_AGAIN)
            return GW_OK;
        if (io == GW_SOCK_IO_EOF || io == GW_SOCK_IO_ERROR) {
            if (io == GW_SOCK_IO_EOF)
                snprintf(text, sizeof(text),
                         "rank %d (%s) closed its bootstrap connection (did it exit?)", r,
                         bs->peer_addr[r]);
            else
                snprintf(text, sizeof(text), "the bootstrap connection to rank %d (%s) failed: %m",
                         r, bs->peer_addr[r]);
            return gather_set_fail(bs, f, GW_ERR_REMOTE, GW_ERR_REMOTE, r, text);
        }
        if (p->stage == G_HDR) {
            gw_bs_hdr_t h;
            if (gw__bs_decode_hdr(p->buf, GW_BS_HDR_LEN, &h, &why) != GW_OK)
                goto malformed;
            if (h.type == GW_BS_DATA) {
                if ((size_t)h.payload_len - 4 != len) {
                    snprintf(text, sizeof(text),
                             "length mismatch: rank %d contributes %lu bytes, rank 0 %zu bytes "
                             "(every rank must pass the same length)",
                             r, (unsigned long)h.payload_len - 4, len);
                    return gather_set_fail(bs, f, GW_ERR_MISMATCH, GW_ERR_MISMATCH, r, text);
                }
                p->stage = G_BODY;
                gw__sock_io_set(&p->io, p->buf, GW_BS_DATA_PREFIX_LEN,
                                len ? all + (size_t)r * len : NULL, len);
                p->io.done = GW_BS_HDR_LEN;
            } else if (h.type == GW_BS_REJECT) {
                p->stage = G_REJECT;
                gw__sock_io_set(&p->io, p->buf, GW_BS_HDR_LEN + h.payload_len, NULL, 0);
                p->io.done = GW_BS_HDR_LEN;
            } else {
                why = "unexpected message type";
                goto malformed;
            }
        } else if (p->stage == G_BODY) {
            uint32_t n;
            if (gw__bs_decode_data_prefix(p->buf, GW_BS_DATA_PREFIX_LEN, &n, &why) != GW_OK)
                goto malformed;
            p->stage = G_HAVE;
            return GW_OK;
        } else {
            gw_bs_reject_t rej;
            if (gw__bs_decode_reject(p->buf, p->io.total, &rej, &why) != GW_OK)
                goto malformed;
            snprintf(text, sizeof(text), "rank %d failed: %s", r, rej.reason);
            return gather_set_fail(bs, f, GW_ERR_REMOTE, GW_ERR_REMOTE, r, text);
        }
    }
malformed:
    snprintf(text, sizeof(text), "rank %d sent a malformed message: %s", r, why);
    return gather_set_fail(bs, f, GW_ERR_PROTOCOL, GW_ERR_REMOTE, r, text);
}

/* Tell every rank why the all-gather failed and whom to blame (a VERDICT),
 * where our side of its stream is at a message boundary (a half-sent result
 * can only be cut short), then close our sending side so that nobody waits
 * for more. */
static void gather_abort(gw_bootstrap_t *bs, const gather_peer_t *peers, const gather_fail_t *f)
{
    bs->culprit = f->culprit;
    for (int r = 1; r < bs->size; r++) {
        if (bs->fds[r] < 0)
            continue;
        if (!peers || peers[r].stage != G_SEND || peers[r].io.done == 0)
            gw__bs_send_verdict_nowait(bs->fds[r], f->remote, f->culprit, f->reason);
        shutdown(bs->fds[r], SHUT_WR);
    }
}

static gw_status_t gather_wait(gw_bootstrap_t *bs, gather_peer_t *peers, struct pollfd *pfds,
                               int *who, gather_stage_t stage, int64_t start, int64_t deadline,
                               gather_fail_t *f, size_t len, uint8_t *all)
{
    char text[GW_BS_REASON_MAX + 1];
    for (;;) {
        int n = 0;
        for (int r = 1; r < bs->size; r++) {
            int active = stage == G_SEND ? peers[r].stage == G_SEND : peers[r].stage < G_HAVE;
            if (active) {
                pfds[n] =
                    (struct pollfd){.fd = bs->fds[r], .events = stage == G_SEND ? POLLOUT : POLLIN};
                who[n++] = r;
            }
        }
        if (n == 0)
            return GW_OK;
        int wait = gw__sock_remaining_ms(deadline);
        if (wait == 0) {
            size_t k = (size_t)snprintf(
                text, sizeof(text), "rank 0 timed out after %lld ms %s rank%s",
                (long long)(gw__now_ms() - start),
                stage == G_SEND ? "sending the result to" : "waiting for the data of",
                n == 1 ? "" : "s");
            for (int i = 0; i < n && i < GW_BS_MISSING_LIST_MAX && k < sizeof(text); i++)
                k += (size_t)snprintf(text + k, sizeof(text) - k, "%s %d", i ? "," : "", who[i]);
            if (n > GW_BS_MISSING_LIST_MAX && k < sizeof(text))
                snprintf(text + k, sizeof(text) - k, " and %d more", n - GW_BS_MISSING_LIST_MAX);
            return gather_set_fail(bs, f, GW_ERR_TIMEOUT, GW_ERR_TIMEOUT, who[0], text);
        }
        int pr = poll(pfds, (nfds_t)n, wait);
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            snprintf(text, sizeof(text), "poll on rank 0 failed: %m");
            return gather_set_fail(bs, f, GW_ERR_SYSTEM, GW_ERR_REMOTE, 0, text);
        }
        for (int i = 0; i < n; i++) {
            if (!pfds[i].revents)
                continue;
            int r = who[i];
            if (stage != G_SEND) {
                gw_status_t st = gather_recv(bs, r, &peers[r], len, all, f);
                if (st != GW_OK)
                    return st;
                continue;
            }
            int io = gw__sock_io_step(bs->fds[r], &peers[r].io, 1);
            if (io == GW_SOCK_IO_DONE) {
                peers[r].stage = G_SENT;
                bs->sent_bytes += peers[r].io.total;
            } else if (io != GW_SOCK_IO_AGAIN) {
                snprintf(text, sizeof(text), "rank %d (%s) failed while receiving the result: %m",
                         r, bs->peer_addr[r]);
                return gather_set_fail(bs, f, GW_ERR_REMOTE, GW_ERR_REMOTE, r, text);
            }
        }
    }
}

/* Tell every rank that rank 0 waits for the blocks from now until deadline
 * (GATHER_START), so that a rank that started earlier waits for rank 0's
 * word past its own deadline. Sent only on a connection whose send queue
 * is empty, where 16 bytes always go at once: a rank not told keeps its
 * own deadline. */
static void announce_start(gw_bootstrap_t *bs, int64_t deadline)
{
    uint8_t msg[GW_BS_GATHER_START_LEN];
    gw__bs_encode_gather_start((uint32_t)gw__sock_remaining_ms(deadline), msg);
    for (int r = 1; r < bs->size; r++) {
        int queued = 0;
        if (bs->fds[r] < 0 || ioctl(bs->fds[r], SIOCOUTQ, &queued) != 0 || queued != 0)
            continue;
        if (send(bs->fds[r], msg, sizeof(msg), MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(msg))
            bs->sent_bytes += sizeof(msg);
    }
}

/* The address at which rank r's ring listener is reached (rank 0: the one
 * rank size - 1 reached rank 0 at), with port. */
static int ring_addr_of(const gw_bootstrap_t *bs, int r, uint32_t port, struct sockaddr_storage *a,
                        socklen_t *al)
{
    *al = sizeof(*a);
    int rc = r == 0 ? getsockname(bs->fds[bs->size - 1], (struct sockaddr *)a, al)
                    : getpeername(bs->fds[r], (struct sockaddr *)a, al);
    if (rc != 0)
        return -1;
    if (a->ss_family == AF_INET)
        ((struct sockaddr_in *)a)->sin_port = htons((uint16_t)port);
    else if (a->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)a)->sin6_port = htons((uint16_t)port);
    else
        return -1;
    return 0;
}

/* Rank 0 has every block: open its ring listener, tell every rank to open
 * one (RING_OPEN), gather their ports (DATA of 4 bytes, as blocks are
 * gathered), and send each rank its next neighbour's address (RING_PEER);
 * then start rank 0's own part. Failures as the all-gather's. */
static gw_status_t ring_setup(gw_bootstrap_t *bs, gather_peer_t *peers, struct pollfd *pfds,
                              int *who, int64_t start, gather_fail_t *f, size_t len, uint8_t *all,
                              gw_bs_ring_t **ring, int64_t *ring_deadline)
{
    int n = bs->size;
    char text[GW_BS_REASON_MAX + 1];
    struct sockaddr_storage a;
    socklen_t al;
    uint32_t port0 = 0;
    if (ring_addr_of(bs, 0, 0, &a, &al) != 0 ||
        gw__bs_ring_listen(bs, &a, al, ring, &port0) != GW_OK)
        return gather_set_fail(bs, f, GW_ERR_SYSTEM, GW_ERR_REMOTE, 0,
                               "rank 0 cannot open its ring listener");
    int64_t deadline = gw__now_ms() + bs->timeout_ms;
    uint8_t open_msg[GW_BS_RING_OPEN_LEN];
    gw__bs_encode_ring_open(open_msg);
    for (int r = 1; r < n; r++) {
        peers[r].stage = G_SEND;
        gw__sock_io_set(&peers[r].io, open_msg, sizeof(open_msg), NULL, 0);
    }
    if (gather_wait(bs, peers, pfds, who, G_SEND, start, deadline, f, 0, NULL) != GW_OK)
        return f->local;
    uint8_t *ports = calloc((size_t)n, 4);
    if (!ports)
        return gather_set_fail(bs, f, GW_ERR_NO_MEMORY, GW_ERR_REMOTE, 0,
                               "rank 0 is out of memory");
    for (int r = 1; r < n; r++) {
        peers[r].stage = G_HDR;
        gw__sock_io_set(&peers[r].io, peers[r].buf, GW_BS_HDR_LEN, NULL, 0);
    }
    gw_status_t st = gather_wait(bs, peers, pfds, who, G_HDR, start, deadline, f, 4, ports);
    struct sockaddr_storage next0;
    socklen_t next0_len = 0;
    for (int r = 0; st == GW_OK && r < n; r++) {
        int next = (r + 1) % n;
        const uint8_t *p = ports + (size_t)next * 4;
        uint32_t port =
            next == 0 ? port0
                      : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (port == 0 || port > 65535) {
            snprintf(text, sizeof(text), "rank %d sent a ring port out of range (%lu)", next,
                     (unsigned long)port);
            st = gather_set_fail(bs, f, GW_ERR_PROTOCOL, GW_ERR_REMOTE, next, text);
        } else if (ring_addr_of(bs, next, port, &a, &al) != 0) {
            snprintf(text, sizeof(text), "rank 0 cannot tell rank %d's address: %m", next);
            st = gather_set_fail(bs, f, GW_ERR_SYSTEM, GW_ERR_REMOTE, 0, text);
        } else if (r == 0) {
            next0 = a;
            next0_len = al;
        } else {
            uint8_t wire[GW_BS_RING_ADDR_LEN];
            gw__sock_addr_put(wire, (const struct sockaddr *)&a);
            gw__bs_encode_ring_peer(wire, peers[r].buf);
            peers[r].stage = G_SEND;
            gw__sock_io_set(&peers[r].io, peers[r].buf, GW_BS_RING_PEER_LEN, NULL, 0);
        }
    }
    free(ports);
    if (st == GW_OK)
        st = gather_wait(bs, peers, pfds, who, G_SEND, start, deadline, f, 0, NULL);
    if (st != GW_OK)
        return st;
    *ring_deadline = gw__now_ms() + bs->timeout_ms;
    gw__bs_ring_start(*ring, &next0, next0_len, len, all, *ring_deadline);
    return GW_OK;
}

static gw_status_t root_allgather(gw_bootstrap_t *bs, const void *mine, size_t len, uint8_t *all,
                                  int64_t start, int64_t deadline)
{
    announce_start(bs, deadline);
    gather_fail_t f;
    gather_peer_t *peers = calloc((size_t)bs->size, sizeof(*peers));
    struct pollfd *pfds = calloc((size_t)bs->size, sizeof(*pfds));
    int *who = calloc((size_t)bs->size, sizeof(*who));
    if (!peers || !pfds || !who) {
        gather_set_fail(bs, &f, GW_ERR_NO_MEMORY, GW_ERR_REMOTE, 0, "rank 0 is out of memory");
        goto err_abort;
    }
    if (len > 0)
        memmove(all, mine, len);
    for (int r = 1; r < bs->size; r++) {
        peers[r].stage = G_HDR;
        gw__sock_io_set(&peers[r].io, peers[r].buf, GW_BS_HDR_LEN, NULL, 0);
    }
    if (gather_wait(bs, peers, pfds, who, G_HDR, start, deadline, &f, len, all) != GW_OK)
        goto err_abort;
    if (bs->size >= bs->ring_min) {
        gw_bs_ring_t *ring = NULL;
        int64_t ring_deadline = 0;
        if (ring_setup(bs, peers, pfds, who, start, &f, len, all, &ring, &ring_deadline) != GW_OK) {
            gw__bs_ring_close(ring);
            goto err_abort; /* before the ring: the star's way out */
        }
        gw_status_t st = gw__bs_ring_root_run(bs, ring, ring_deadline);
        gw__bs_ring_close(ring);
        free(who);
        free(pfds);
        free(peers);
        return st;
    }

    uint8_t prefix[GW_BS_DATA_PREFIX_LEN];
    gw__bs_encode_data_prefix((uint32_t)((size_t)bs->size * len), prefix);
    for (int r = 1; r < bs->size; r++) {
        peers[r].stage = G_SEND;
        gw__sock_io_set(&peers[r].io, prefix, sizeof(prefix), all, (size_t)bs->size * len);
    }
    if (gather_wait(bs, peers, pfds, who, G_SEND, start, deadline, &f, len, all) != GW_OK)
        goto err_abort;
    free(who);
    free(pfds);
    free(peers);
    return GW_OK;

err_abort:
    gather_abort(bs, peers, &f);
    free(who);
    free(pfds);
    free(peers);
    return f.local;
}

/* How long past rank 0's deadline a rank waits for rank 0's word. A rank
 * waits until its own deadline plus this, or, once rank 0's GATHER_START
 * says how long rank 0 itself waits, until then plus this: rank 0 may have
 * started the all-gather later (busy opening a transport), and gives up on
 * a missing rank only at its own deadline, so a fixed margin after the
 * rank's own start could end before rank 0's verdict comes. */
#define VERDICT_MARGIN_MS 1000

static gw_status_t client_allgather(gw_bootstrap_t *bs, const void *mine, size_t len, uint8_t *all,
                                    int64_t deadline, int *ring)
{
    deadline += VERDICT_MARGIN_MS;
    int fd = bs->root_fd;
    size_t total = (size_t)bs->size * len;
    uint8_t prefix[GW_BS_DATA_PREFIX_LEN];
    gw__bs_encode_data_prefix((uint32_t)len, prefix);
    gw_sock_io_t tx, rx;
    gw__sock_io_set(&tx, prefix, sizeof(prefix), (void *)mine, len);
    uint8_t in[GW_BS_SMALL_MSG_MAX];
    gw__sock_io_set(&rx, in, GW_BS_HDR_LEN, NULL, 0);
    gather_stage_t rstage = G_HDR;
    int send_errno = 0, verdict = 0;
    const char *why = NULL;
    /* Send our block and read the answer in one loop: if rank 0 gives up
     * (a mismatch, a dead rank) its REJECT arrives while we may still be
     * sending, and must not wait behind a send that will never finish. */
    for (;;) {
        if (tx.done == tx.total && rstage == G_HAVE)
            return GW_OK;
        int wait = gw__sock_remaining_ms(deadline);
        if (wait == 0) {
            GW_ERROR(bs->log, GW_BS_SUBSYS,
                     "bootstrap all-gather timed out after %d ms waiting for rank 0 (root %s)",
                     bs->timeout_ms, bs->root);
            return GW_ERR_TIMEOUT;
        }
        int sending = tx.done < tx.total && send_errno == 0;
        struct pollfd p = {.fd = fd, .events = (short)(POLLIN | (sending ? POLLOUT : 0))};
        int pr = poll(&p, 1, wait);
        if (pr < 0 && errno != EINTR) {
            GW_ERROR(bs->log, GW_BS_SUBSYS, "poll on the connection to rank 0 failed: %m");
            return GW_ERR_SYSTEM;
        }
        if (pr <= 0)
            continue;
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            int io = gw__sock_io_step(fd, &rx, 0);
            if (io == GW_SOCK_IO_EOF || io == GW_SOCK_IO_ERROR) {
                if (send_errno)
                    errno = send_errno;
                if (io == GW_SOCK_IO_EOF && !send_errno)
                    GW_ERROR(bs->log, GW_BS_SUBSYS,
                             "rank 0 (root %s) closed the bootstrap connection during the "
                             "all-gather (did it exit?)",
                             bs->root);
                else
                    GW_ERROR(bs->log, GW_BS_SUBSYS,
                             "the bootstrap connection to rank 0 (root %s) failed during the "
                             "all-gather: %m",
                             bs->root);
                return GW_ERR_REMOTE;
            }
            if (io == GW_SOCK_IO_DONE && rstage == G_HDR) {
                gw_bs_hdr_t h;
                if (gw__bs_decode_hdr(in, GW_BS_HDR_LEN, &h, &why) != GW_OK)
                    goto malformed;
                if (h.type == GW_BS_GATHER_START) {
                    rstage = G_START;
                    gw__sock_io_set(&rx, in, GW_BS_GATHER_START_LEN, NULL, 0);
                } else if (h.type == GW_BS_REJECT || h.type == GW_BS_VERDICT) {
                    verdict = h.type == GW_BS_VERDICT;
                    rstage = G_REJECT;
                    gw__sock_io_set(&rx, in, GW_BS_HDR_LEN + h.payload_len, NULL, 0);
                } else if (h.type == GW_BS_RING_OPEN) {
                    rstage = G_RING;
                    gw__sock_io_set(&rx, in, GW_BS_RING_OPEN_LEN, NULL, 0);
                } else if (h.type == GW_BS_DATA && (size_t)h.payload_len - 4 == total) {
                    rstage = G_BODY;
                    gw__sock_io_set(&rx, in, GW_BS_DATA_PREFIX_LEN, all, total);
                } else {
                    why = h.type == GW_BS_DATA ? "result of the wrong length"
                                               : "unexpected message type";
                    goto malformed;
                }
                rx.done = GW_BS_HDR_LEN;
                io = gw__sock_io_step(fd, &rx, 0);
                if (io == GW_SOCK_IO_EOF || io == GW_SOCK_IO_ERROR)
                    continue; /* reported by the next pass */
            }
            if (io == GW_SOCK_IO_DONE && rstage == G_START) {
                uint32_t wait_ms;
                if (gw__bs_decode_gather_start(in, GW_BS_GATHER_START_LEN, &wait_ms, &why) != GW_OK)
                    goto malformed;
                int64_t theirs = gw__now_ms() + (int64_t)wait_ms + VERDICT_MARGIN_MS;
                if (theirs > deadline)
                    deadline = theirs;
                rstage = G_HDR;
                gw__sock_io_set(&rx, in, GW_BS_HDR_LEN, NULL, 0);
                continue;
            }
            if (io == GW_SOCK_IO_DONE && rstage == G_RING) {
                *ring = 1; /* rank 0 has our block; the ring comes next */
                rstage = G_HAVE;
                continue;
            }
            if (io == GW_SOCK_IO_DONE && rstage == G_REJECT)
                return verdict
                           ? gw__bs_client_take_verdict(bs, in, rx.total, "ended the all-gather")
                           : gw__bs_client_take_reject(bs, in, rx.total, "ended the all-gather");
            if (io == GW_SOCK_IO_DONE && rstage == G_BODY) {
                uint32_t n;
                if (gw__bs_decode_data_prefix(in, GW_BS_DATA_PREFIX_LEN, &n, &why) != GW_OK)
                    goto malformed;
                rstage = G_HAVE;
            }
        }
        if (sending && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
            /* A failed send is reported once the receive side tells why
             * (rank 0's REJECT, or the end of the connection). */
            if (gw__sock_io_step(fd, &tx, 1) == GW_SOCK_IO_ERROR)
                send_errno = errno;
        }
    }
malformed:
    GW_ERROR(bs->log, GW_BS_SUBSYS, "malformed all-gather message from rank 0 (root %s): %s",
             bs->root, why);
    return GW_ERR_PROTOCOL;
}

gw_status_t gw__bootstrap_allgather(gw_bootstrap_t *bs, const void *mine, size_t len, void *all)
{
    if (!bs)
        return GW_ERR_INVALID_ARG;
    if (bs->failed != GW_OK)
        return bs->failed;
    gw_status_t st = GW_OK;
    char reason[GW_BS_REASON_MAX + 1];
    if (len > GW_BS_DATA_RANK_MAX || len > GW_BS_DATA_MAX / (size_t)bs->size) {
        snprintf(reason, sizeof(reason),
                 "rank %d: bootstrap all-gather of %zu bytes per rank over %d ranks exceeds the "
                 "limits (%u bytes per rank, %u in all)",
                 bs->rank, len, bs->size, GW_BS_DATA_RANK_MAX, GW_BS_DATA_MAX);
        st = GW_ERR_INVALID_ARG;
    } else if (len > 0 && (!mine || !all)) {
        snprintf(reason, sizeof(reason), "rank %d: bootstrap all-gather with a NULL buffer",
                 bs->rank);
        st = GW_ERR_INVALID_ARG;
    }
    if (st != GW_OK) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "%s", reason);
        /* The other ranks are told, so that they fail now rather than time out. */
        bs->culprit = bs->rank;
        if (bs->rank == 0 && bs->size > 1) {
            gather_fail_t f = {.local = st, .remote = GW_ERR_REMOTE, .culprit = 0};
            snprintf(f.reason, sizeof(f.reason), "%s", reason);
            gather_abort(bs, NULL, &f);
        } else if (bs->root_fd >= 0) {
            gw__bs_send_reject_nowait(bs->root_fd, st, reason);
            shutdown(bs->root_fd, SHUT_WR);
        }
        bs->failed = st;
        return st;
    }
    int64_t start = gw__now_ms();
    int64_t deadline = start + bs->timeout_ms;
    bs->sent_bytes = 0;
    if (bs->size == 1) {
        if (len > 0)
            memmove(all, mine, len);
        return GW_OK;
    }
    if (bs->rank == 0) {
        st = root_allgather(bs, mine, len, all, start, deadline);
    } else {
        int ring = 0;
        st = client_allgather(bs, mine, len, all, deadline, &ring);
        if (st == GW_OK && ring)
            st = gw__bs_ring_client(bs, mine, len, all);
        if (st != GW_OK) {
            shutdown(bs->root_fd, SHUT_RDWR); /* rank 0 sees us leave at once */
            if (bs->culprit < 0)
                bs->culprit = 0; /* rank 0 is gone, or said nothing in time */
        }
    }
    if (st != GW_OK) {
        bs->failed = st;
        return st;
    }
    bs->gathered_at = gw__now_ms();
    /* What rank 0 sent is what limits the star at scale: say it, so that
     * the two paths can be compared (bench/scale.sh). */
    if (bs->rank == 0)
        GW_INFO(bs->log, GW_BS_SUBSYS,
                "bootstrap all-gather of %d x %zu bytes over the %s took %lld ms; rank 0 sent %llu "
                "bytes",
                bs->size, len, bs->size >= bs->ring_min ? "ring" : "star",
                (long long)(bs->gathered_at - start), (unsigned long long)bs->sent_bytes);
    return st;
}
