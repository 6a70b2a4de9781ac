/*
 * bootstrap_ring_gather.c - the ring all-gather of a large job, driven on
 * rank 0 and on the other ranks (one rank's part of the ring itself is
 * bootstrap_ring.c; how rank 0 hands out the neighbours is
 * bootstrap_gather.c).
 *
 * Why a ring. Over the star, rank 0 answers every rank with the whole
 * result: size^2 x len bytes leave rank 0 (4.3 GB for 4096 ranks of 256
 * bytes). In the ring, rank 0 sends its neighbour size - 1 blocks like
 * every other rank, and each other rank a few small messages over the
 * star: O(size x len) in all.
 *
 * The exchange. Every rank sends its block to rank 0 as over the star
 * (rank 0 checks that the lengths agree, and a rank that never comes is
 * named as before). Rank 0, which alone decides whether this job uses the
 * ring (GW_BOOTSTRAP_RING_MIN on rank 0, so every rank takes the same
 * path whatever its own environment says), answers RING_OPEN instead of
 * the result. Each rank opens a listener on the address it reached rank 0
 * from and sends rank 0 its port; rank 0 sends each rank its next
 * neighbour's address (RING_PEER: the address rank 0 sees that rank at,
 * with its port) and the blocks go round. Then, as in the settle of the
 * join, every rank reports its outcome to rank 0 (a STATE when it has
 * every block, FAILED with the neighbour it blames), and rank 0 answers
 * go (an empty DATA) or a VERDICT, so that the all-gather succeeds on
 * every rank or fails on every rank with the same culprit.
 *
 * Whom rank 0 blames. While the ring runs, rank 0 reads every rank's
 * star connection: a rank whose connection closes died, and rank 0 blames
 * it at once and tells every rank, which stops waiting for its neighbours
 * (each rank reads its star connection during the ring too). So does a
 * rank that reports a failure of its own (it blames itself: out of
 * descriptors, a failed system call). Otherwise
 * rank 0 waits until every rank has reported, or until the ring's deadline
 * plus a grace (a rank that waits for a hung neighbour reports only at the
 * deadline): a rank that said nothing by then is stopped or hung, else
 * the rank most of the failed ranks blame.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "transport/bootstrap/bootstrap_internal.h"

#define GRACE_MIN_MS 200
#define GRACE_MAX_MS 1000
/* How long past its own deadline a rank waits for rank 0's RING_PEER: rank
 * 0 waits up to its timeout for the others' ports first. */
#define PEER_MARGIN_MS 1000

int gw__bs_ring_grace_ms(int timeout_ms)
{
    int g = timeout_ms / 4;
    return g < GRACE_MIN_MS ? GRACE_MIN_MS : g > GRACE_MAX_MS ? GRACE_MAX_MS : g;
}

/* ---- rank 0 ----------------------------------------------------------------- */

static const gw_bs_round_words_t ring_words = {
    .outcome = "its ring part",
    .during = "during the ring all-gather",
    .silent = "finish its part of the ring all-gather in time",
    .silent_others = "",
    .failed = "failed the ring all-gather",
};

/* Rank 0's part of the ring and every rank's outcome, until each rank
 * reported, a rank is gone, or decide_by. */
static void root_collect(gw_bootstrap_t *bs, gw_bs_ring_t *g, gw_bs_seat_t *seats,
                         struct pollfd *pfds, int *who, int64_t decide_by)
{
    int ring_busy = 1;
    for (;;) {
        int nr = ring_busy ? gw__bs_ring_pollfds(g, pfds) : 0;
        int n = nr;
        for (int r = 1; r < bs->size; r++)
            if (seats[r].state == GW_BS_SEAT_PENDING) {
                pfds[n] = (struct pollfd){.fd = bs->fds[r], .events = POLLIN};
                who[n++ - nr] = r;
            }
        if (!ring_busy && n == 0)
            return;
        int wait = gw__sock_remaining_ms(decide_by);
        if (wait == 0)
            return;
        if (ring_busy && gw__bs_ring_wait_ms(g) < wait)
            wait = gw__bs_ring_wait_ms(g);
        int pr = poll(pfds, (nfds_t)n, wait);
        if (pr < 0 && errno != EINTR) {
            GW_ERROR(bs->log, GW_BS_SUBSYS, "poll on rank 0 during the ring all-gather: %m");
            return;
        }
        if (ring_busy && gw__bs_ring_events(g, pfds, nr) != GW_BS_RING_BUSY) {
            ring_busy = 0;
            int suspect;
            gw_status_t st = gw__bs_ring_outcome(g, &suspect);
            seats[0].state = st == GW_OK ? GW_BS_SEAT_OK : GW_BS_SEAT_FAILED;
            seats[0].rep = (gw_bs_report_t){.status = st, .culprit = suspect};
            if (st != GW_OK && suspect == 0)
                return; /* our own fault: certain, decide now */
        }
        for (int i = nr; pr > 0 && i < n; i++) {
            if (!pfds[i].revents)
                continue;
            int r = who[i - nr];
            gw__bs_seat_read(bs, r, &seats[r], &ring_words);
            if (seats[r].state == GW_BS_SEAT_GONE ||
                (seats[r].state == GW_BS_SEAT_FAILED && seats[r].rep.culprit == r))
                return; /* gone, or failed by its own fault: certain, decide now */
        }
    }
}

gw_status_t gw__bs_ring_root_run(gw_bootstrap_t *bs, gw_bs_ring_t *g, int64_t ring_deadline)
{
    int n = bs->size;
    gw_bs_seat_t *seats = calloc((size_t)n, sizeof(*seats));
    struct pollfd *pfds = calloc((size_t)n + GW_BS_RING_PFDS, sizeof(*pfds));
    int *who = calloc((size_t)n, sizeof(*who));
    int *votes = calloc((size_t)n, sizeof(*votes));
    gw_status_t st = GW_OK;
    if (!seats || !pfds || !who || !votes) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "out of memory on rank 0 for the ring all-gather");
        st = GW_ERR_NO_MEMORY;
    }
    if (st == GW_OK) {
        for (int r = 1; r < n; r++)
            gw__sock_io_set(&seats[r].io, seats[r].buf, sizeof(seats[r].buf), NULL, 0);
        root_collect(bs, g, seats, pfds, who, ring_deadline + gw__bs_ring_grace_ms(bs->timeout_ms));
        if (seats[0].state == GW_BS_SEAT_PENDING) { /* stopped early: a rank is gone */
            seats[0].state = GW_BS_SEAT_FAILED;
            seats[0].rep = (gw_bs_report_t){.status = GW_ERR_REMOTE, .culprit = -1};
        }
        bs->sent_bytes += gw__bs_ring_bytes_sent(g);
    }
    int all_ok = st == GW_OK;
    for (int r = 0; all_ok && r < n; r++)
        all_ok = seats[r].state == GW_BS_SEAT_OK;
    if (all_ok) {
        uint8_t go[GW_BS_DATA_PREFIX_LEN];
        gw__bs_encode_data_prefix(0, go);
        for (int r = 1; r < n; r++)
            if (send(bs->fds[r], go, sizeof(go), MSG_NOSIGNAL | MSG_DONTWAIT) ==
                (ssize_t)sizeof(go))
                bs->sent_bytes += sizeof(go);
    } else {
        gw_bs_verdict_t v = {.status = st, .culprit = 0};
        if (st == GW_OK)
            gw__bs_round_decide(bs, seats, -1, votes, &ring_words, &v);
        else
            snprintf(v.reason, sizeof(v.reason), "rank 0 is out of memory");
        for (int r = 1; r < n; r++)
            if (!seats || seats[r].state != GW_BS_SEAT_GONE)
                gw__bs_send_verdict_nowait(bs->fds[r], v.status == GW_OK ? GW_ERR_REMOTE : v.status,
                                           v.culprit, v.reason);
        GW_ERROR(bs->log, GW_BS_SUBSYS, "the ring all-gather failed: %s [blaming rank %d]",
                 v.reason, v.culprit);
        bs->culprit = v.culprit;
        st = st != GW_OK ? st : v.status; /* the job's one answer, ours included */
    }
    free(votes);
    free(who);
    free(pfds);
    free(seats);
    return st;
}

/* ---- the other ranks ------------------------------------------------------- */

/* Read rank 0's RING_PEER into *next, or take its VERDICT or REJECT. */
static gw_status_t client_peer(gw_bootstrap_t *bs, int64_t deadline, struct sockaddr_storage *next,
                               socklen_t *next_len)
{
    uint8_t msg[GW_BS_SMALL_MSG_MAX];
    gw_sock_io_t io;
    gw__sock_io_set(&io, msg, GW_BS_HDR_LEN, NULL, 0);
    int r = gw__sock_io_run(bs->root_fd, &io, 0, deadline);
    gw_bs_hdr_t h;
    const char *why = NULL;
    if (r == GW_SOCK_IO_DONE) {
        if (gw__bs_decode_hdr(msg, GW_BS_HDR_LEN, &h, &why) != GW_OK)
            goto malformed;
        if (h.type != GW_BS_RING_PEER && h.type != GW_BS_VERDICT && h.type != GW_BS_REJECT) {
            why = "unexpected message type";
            goto malformed;
        }
        gw__sock_io_set(&io, msg, GW_BS_HDR_LEN + h.payload_len, NULL, 0);
        io.done = GW_BS_HDR_LEN;
        r = gw__sock_io_run(bs->root_fd, &io, 0, deadline);
    }
    if (r != GW_SOCK_IO_DONE) {
        GW_ERROR(bs->log, GW_BS_SUBSYS,
                 "rank 0 (root %s) %s before it gave this rank its ring neighbour", bs->root,
                 r == GW_SOCK_IO_TIMEOUT ? "said nothing in time"
                                         : "closed the bootstrap connection (did it exit?)");
        return r == GW_SOCK_IO_TIMEOUT ? GW_ERR_TIMEOUT : GW_ERR_REMOTE;
    }
    if (h.type == GW_BS_VERDICT)
        return gw__bs_client_take_verdict(bs, msg, io.total, "ended the all-gather");
    if (h.type == GW_BS_REJECT)
        return gw__bs_client_take_reject(bs, msg, io.total, "ended the all-gather");
    uint8_t addr[GW_BS_RING_ADDR_LEN];
    if (gw__bs_decode_ring_peer(msg, io.total, addr, &why) != GW_OK)
        goto malformed;
    if (gw__sock_addr_get(addr, next, next_len) != GW_OK) {
        why = "not an IPv4 or IPv6 address";
        goto malformed;
    }
    return GW_OK;
malformed:
    GW_ERROR(bs->log, GW_BS_SUBSYS, "malformed ring message from rank 0 (root %s): %s", bs->root,
             why);
    return GW_ERR_PROTOCOL;
}

/* This rank's part of the ring, while watching its star connection: rank
 * 0's word during the ring (a VERDICT) ends it at once. Returns this
 * rank's outcome, GW_OK with *suspect -1 when rank 0 spoke first. */
static gw_status_t client_pass(gw_bootstrap_t *bs, gw_bs_ring_t *g, int *suspect)
{
    struct pollfd pfds[GW_BS_RING_PFDS + 1];
    for (;;) {
        int nr = gw__bs_ring_pollfds(g, pfds);
        pfds[nr] = (struct pollfd){.fd = bs->root_fd, .events = POLLIN};
        int pr = poll(pfds, (nfds_t)nr + 1, gw__bs_ring_wait_ms(g));
        if (pr < 0 && errno != EINTR) {
            GW_ERROR(bs->log, GW_BS_SUBSYS, "poll during the ring all-gather: %m");
            *suspect = -1;
            return GW_ERR_SYSTEM;
        }
        if (pr > 0 && pfds[nr].revents) {
            GW_INFO(bs->log, GW_BS_SUBSYS,
                    "rank 0 spoke during the ring all-gather: leaving the ring for its word");
            *suspect = -1;
            return GW_OK;
        }
        if (gw__bs_ring_events(g, pfds, nr) != GW_BS_RING_BUSY)
            return gw__bs_ring_outcome(g, suspect);
    }
}

gw_status_t gw__bs_ring_client(gw_bootstrap_t *bs, const void *mine, size_t len, uint8_t *all)
{
    gw_bs_ring_t *g = NULL;
    uint32_t port = 0;
    gw_status_t st = gw__bs_ring_listen(bs, &bs->local, bs->local_len, &g, &port);
    if (st != GW_OK) {
        char reason[GW_BS_REASON_MAX + 1];
        snprintf(reason, sizeof(reason), "rank %d cannot open its ring listener", bs->rank);
        gw__bs_send_reject_nowait(bs->root_fd, st, reason);
        bs->culprit = bs->rank;
        return st;
    }
    uint8_t msg[GW_BS_DATA_PREFIX_LEN + 4];
    gw__bs_encode_data_prefix(4, msg);
    msg[GW_BS_DATA_PREFIX_LEN] = (uint8_t)(port >> 24);
    msg[GW_BS_DATA_PREFIX_LEN + 1] = (uint8_t)(port >> 16);
    msg[GW_BS_DATA_PREFIX_LEN + 2] = (uint8_t)(port >> 8);
    msg[GW_BS_DATA_PREFIX_LEN + 3] = (uint8_t)port;
    gw_sock_io_t io;
    gw__sock_io_set(&io, msg, sizeof(msg), NULL, 0);
    int64_t deadline = gw__now_ms() + bs->timeout_ms + PEER_MARGIN_MS;
    struct sockaddr_storage next;
    socklen_t next_len = 0;
    if (gw__sock_io_run(bs->root_fd, &io, 1, deadline) != GW_SOCK_IO_DONE) {
        GW_ERROR(bs->log, GW_BS_SUBSYS,
                 "cannot send the ring listener's port to rank 0 (root %s): %m", bs->root);
        st = GW_ERR_REMOTE;
    } else {
        st = client_peer(bs, deadline, &next, &next_len);
    }
    if (st != GW_OK) {
        gw__bs_ring_close(g);
        return st;
    }
    if (len > 0)
        memmove(all + (size_t)bs->rank * len, mine, len);
    int64_t since = gw__now_ms();
    gw__bs_ring_start(g, &next, next_len, len, all, since + bs->timeout_ms);
    int suspect = -1;
    gw_status_t mine_st = client_pass(bs, g, &suspect);
    /* The ring's connections stay open until rank 0 has decided: closing
     * them now would fail our neighbours with our failure, not theirs, and
     * muddle whom the failed ranks blame. */
    st = gw__bs_client_outcome(bs, mine_st, suspect, gw__bs_ring_grace_ms(bs->timeout_ms), since,
                               "the ranks passed the all-gather round the ring",
                               "ended the ring all-gather", 1);
    gw__bs_ring_close(g);
    return st;
}
