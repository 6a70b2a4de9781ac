/*
 * bootstrap_settle.c - the join's last step: every rank tells rank 0
 * whether its data plane connected, and rank 0 answers that the job is
 * formed, or whom every rank is to blame (contract in bootstrap.h,
 * messages in bootstrap_msg.h).
 *
 * Why. Once the transport addresses are all-gathered, each rank connects
 * to its peers on its own (TCP connections, shared-memory segments, verbs
 * queue pairs). A rank stopped or killed then leaves each survivor with
 * its own view: one timed out connecting to the victim, another to a peer
 * that was itself waiting for the victim, a third saw a segment vanish.
 * Without a referee (it starts only once the communicator exists) they
 * name different ranks, or none. Every rank still holds its bootstrap
 * connection to rank 0, and rank 0 sees a dead rank's close at once, so
 * one more exchange on the star gives every rank the same culprit.
 *
 * The exchange. Every rank, whether its connect succeeded or failed,
 * sends rank 0 a REPORT: a STATE with GW_OK when it connected, FAILED with
 * its status and the rank it suspects when it did not. Rank 0 collects
 * them with its own outcome: when every rank connected it answers each
 * with an empty DATA message and the job is formed. Otherwise it decides
 * as soon as it knows, never later than the grace period after the first
 * failure (a healthy rank that waits for the same victim times out within
 * milliseconds of the others, having started at the same moment): a rank
 * whose connection closed died, and is blamed at once; else a rank that
 * said nothing by then is stopped or hung; else the rank most suspected
 * by the failed ranks. The VERDICT goes to every rank still connected.
 * A rank waits for rank 0's answer until its connect's timeout plus the
 * grace and a margin, counted from the end of the all-gather; with no
 * answer by then, or with its connection closed, it blames rank 0.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "transport/bootstrap/bootstrap_internal.h"

/* What a rank allows beyond rank 0's decision for the answer to arrive. */
#define ANSWER_MARGIN_MS 500
/* Sending one small message to rank 0: the kernel takes it at once. */
#define SEND_MS 1000

static int64_t later(int64_t a, int64_t b) { return a > b ? a : b; }

static const gw_bs_round_words_t settle_words = {
    .outcome = "its connect",
    .during = "while the ranks connected their data plane",
    .silent = "say whether it connected its data plane",
    .silent_others = ", while the others failed to connect",
    .failed = "failed to connect their data plane",
};

void gw__bs_seat_read(gw_bootstrap_t *bs, int r, gw_bs_seat_t *s, const gw_bs_round_words_t *w)
{
    int io = gw__sock_io_step(bs->fds[r], &s->io, 0);
    if (io == GW_SOCK_IO_AGAIN)
        return;
    if (io == GW_SOCK_IO_EOF || io == GW_SOCK_IO_ERROR) {
        s->state = GW_BS_SEAT_GONE;
        return;
    }
    const char *why = NULL;
    if (gw__bs_decode_report(s->buf, sizeof(s->buf), &s->rep, &why) != GW_OK ||
        s->rep.culprit >= bs->size) {
        GW_WARN(bs->log, GW_BS_SUBSYS, "rank %d sent a malformed outcome of %s: %s", r, w->outcome,
                why ? why : "it names a rank outside the job");
        s->rep = (gw_bs_report_t){.status = GW_ERR_PROTOCOL, .culprit = r};
    }
    s->state = s->rep.status == GW_OK ? GW_BS_SEAT_OK : GW_BS_SEAT_FAILED;
}

void gw__bs_round_decide(gw_bootstrap_t *bs, const gw_bs_seat_t *seats, int first_failed,
                         int *votes, const gw_bs_round_words_t *w, gw_bs_verdict_t *v)
{
    int gone = -1, silent = -1, nfailed = 0;
    for (int r = 0; r < bs->size; r++) {
        if (seats[r].state == GW_BS_SEAT_GONE && gone < 0)
            gone = r;
        if (seats[r].state == GW_BS_SEAT_PENDING && silent < 0)
            silent = r;
        if (seats[r].state == GW_BS_SEAT_FAILED && first_failed < 0)
            first_failed = r;
        nfailed += seats[r].state == GW_BS_SEAT_FAILED;
    }
    v->origin = first_failed >= 0 ? first_failed : 0;
    v->seq = 0;
    if (gone >= 0) {
        v->status = GW_ERR_REMOTE;
        v->culprit = gone;
        snprintf(v->reason, sizeof(v->reason),
                 "rank %d left the job (its bootstrap connection closed) %s", gone, w->during);
        return;
    }
    /* A rank that failed by its own fault (out of descriptors, a system
     * call) says so by blaming itself: as certain as a closed connection,
     * and the ranks still waiting may be waiting for it. */
    for (int r = 0; r < bs->size; r++)
        if (seats[r].state == GW_BS_SEAT_FAILED && seats[r].rep.culprit == r) {
            v->origin = r;
            v->status = seats[r].rep.status;
            v->culprit = r;
            snprintf(v->reason, sizeof(v->reason), "rank %d failed %s by its own fault (%s)", r,
                     w->during, gw_status_str(seats[r].rep.status));
            return;
        }
    if (silent >= 0) {
        v->status = GW_ERR_TIMEOUT;
        v->culprit = silent;
        snprintf(v->reason, sizeof(v->reason), "rank %d did not %s (stopped or hung)%s", silent,
                 w->silent, first_failed >= 0 ? w->silent_others : "");
        return;
    }
    /* Everyone answered and some failed: the rank most of them suspect. */
    int best = -1;
    for (int r = 0; r < bs->size; r++) {
        int c = seats[r].state == GW_BS_SEAT_FAILED ? seats[r].rep.culprit : -1;
        if (c >= 0 && ++votes[c] > (best >= 0 ? votes[best] : 0))
            best = c;
    }
    v->status = first_failed >= 0 ? seats[first_failed].rep.status : GW_ERR_REMOTE;
    v->culprit = best;
    if (best >= 0)
        snprintf(v->reason, sizeof(v->reason), "%d of %d ranks %s; %d of them blame rank %d",
                 nfailed, bs->size, w->failed, votes[best], best);
    else
        snprintf(v->reason, sizeof(v->reason), "%d of %d ranks %s, naming no rank", nfailed,
                 bs->size, w->failed);
}

static gw_status_t root_settle(gw_bootstrap_t *bs, gw_status_t mine, int suspect, int grace_ms)
{
    gw_bs_seat_t *seats = calloc((size_t)bs->size, sizeof(*seats));
    struct pollfd *pfds = calloc((size_t)bs->size, sizeof(*pfds));
    int *who = calloc((size_t)bs->size, sizeof(*who));
    int *votes = calloc((size_t)bs->size, sizeof(*votes));
    if (!seats || !pfds || !who || !votes) {
        free(seats);
        free(pfds);
        free(who);
        free(votes);
        GW_ERROR(bs->log, GW_BS_SUBSYS, "out of memory settling the join");
        bs->culprit = 0;
        return GW_ERR_NO_MEMORY;
    }
    int64_t now = gw__now_ms();
    int64_t all_by = later(now, bs->gathered_at + bs->timeout_ms) + grace_ms;
    int64_t decide_by = all_by;
    int first_failed = -1;
    seats[0].state = mine == GW_OK ? GW_BS_SEAT_OK : GW_BS_SEAT_FAILED;
    seats[0].rep = (gw_bs_report_t){.status = mine, .culprit = suspect};
    if (mine != GW_OK) {
        first_failed = 0;
        decide_by = now + grace_ms;
    }
    for (int r = 1; r < bs->size; r++)
        gw__sock_io_set(&seats[r].io, seats[r].buf, sizeof(seats[r].buf), NULL, 0);
    int gone = 0;
    for (;;) {
        int n = 0;
        for (int r = 1; r < bs->size; r++)
            if (seats[r].state == GW_BS_SEAT_PENDING) {
                pfds[n] = (struct pollfd){.fd = bs->fds[r], .events = POLLIN};
                who[n++] = r;
            }
        if (n == 0 || gone)
            break;
        int wait = gw__sock_remaining_ms(decide_by);
        if (wait == 0)
            break;
        int pr = poll(pfds, (nfds_t)n, wait);
        if (pr < 0 && errno != EINTR) {
            GW_ERROR(bs->log, GW_BS_SUBSYS, "poll settling the join failed: %m");
            break;
        }
        for (int i = 0; pr > 0 && i < n; i++) {
            if (!pfds[i].revents)
                continue;
            int r = who[i];
            gw__bs_seat_read(bs, r, &seats[r], &settle_words);
            if (seats[r].state == GW_BS_SEAT_GONE)
                gone = 1; /* certain: decide now */
            if (seats[r].state == GW_BS_SEAT_FAILED && first_failed < 0) {
                first_failed = r;
                if (gw__now_ms() + grace_ms < decide_by)
                    decide_by = gw__now_ms() + grace_ms;
            }
        }
    }
    int all_ok = 1;
    for (int r = 0; r < bs->size; r++)
        all_ok &= seats[r].state == GW_BS_SEAT_OK;
    gw_status_t st = GW_OK;
    if (all_ok) {
        uint8_t go[GW_BS_DATA_PREFIX_LEN];
        gw__bs_encode_data_prefix(0, go);
        for (int r = 1; r < bs->size; r++)
            (void)send(bs->fds[r], go, sizeof(go), MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
        gw_bs_verdict_t v;
        gw__bs_round_decide(bs, seats, first_failed, votes, &settle_words, &v);
        for (int r = 1; r < bs->size; r++)
            if (seats[r].state != GW_BS_SEAT_GONE)
                gw__bs_send_verdict_nowait(bs->fds[r], v.status, v.culprit, v.reason);
        GW_ERROR(bs->log, GW_BS_SUBSYS, "the job did not form: %s [blaming rank %d]", v.reason,
                 v.culprit);
        bs->culprit = v.culprit;
        st = mine != GW_OK ? mine : v.status;
    }
    free(votes);
    free(who);
    free(pfds);
    free(seats);
    return st;
}

gw_status_t gw__bs_client_outcome(gw_bootstrap_t *bs, gw_status_t mine, int suspect, int grace_ms,
                                  int64_t since, const char *when, const char *ended,
                                  int verdict_wins)
{
    int fd = bs->root_fd;
    gw_bs_report_t rep = {
        .kind = mine == GW_OK ? GW_BS_REPORT_STATE : GW_BS_REPORT_FAILED,
        .status = mine,
        .culprit = suspect >= 0 && suspect < bs->size ? suspect : -1,
        .origin = -1,
        .waiting_on = -1,
    };
    uint8_t msg[GW_BS_SMALL_MSG_MAX];
    size_t len = gw__bs_encode_report(&rep, msg);
    gw_sock_io_t io;
    gw__sock_io_set(&io, msg, len, NULL, 0);
    int r = gw__sock_io_run(fd, &io, 1, gw__now_ms() + SEND_MS);
    int64_t until = later(gw__now_ms(), since + bs->timeout_ms) + grace_ms + ANSWER_MARGIN_MS;
    const char *why = NULL;
    gw_bs_hdr_t h;
    if (r == GW_SOCK_IO_DONE) {
        gw__sock_io_set(&io, msg, GW_BS_HDR_LEN, NULL, 0);
        r = gw__sock_io_run(fd, &io, 0, until);
    }
    if (r == GW_SOCK_IO_DONE) {
        if (gw__bs_decode_hdr(msg, GW_BS_HDR_LEN, &h, &why) != GW_OK)
            goto malformed;
        if (h.type == GW_BS_DATA && h.payload_len == 4) {
            gw__sock_io_set(&io, msg, GW_BS_DATA_PREFIX_LEN, NULL, 0);
        } else if (h.type == GW_BS_VERDICT && h.payload_len <= sizeof(msg) - GW_BS_HDR_LEN) {
            gw__sock_io_set(&io, msg, GW_BS_HDR_LEN + h.payload_len, NULL, 0);
        } else {
            why = "unexpected message";
            goto malformed;
        }
        io.done = GW_BS_HDR_LEN;
        r = gw__sock_io_run(fd, &io, 0, until);
    }
    if (r != GW_SOCK_IO_DONE) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "rank 0 (root %s) %s while %s, so it is blamed", bs->root,
                 r == GW_SOCK_IO_TIMEOUT ? "gave no word in time (stopped or hung)"
                                         : "closed the bootstrap connection (did it exit?)",
                 when);
        bs->culprit = 0;
        return mine != GW_OK ? mine : r == GW_SOCK_IO_TIMEOUT ? GW_ERR_TIMEOUT : GW_ERR_REMOTE;
    }
    if (h.type == GW_BS_DATA) {
        uint32_t n;
        if (gw__bs_decode_data_prefix(msg, GW_BS_DATA_PREFIX_LEN, &n, &why) != GW_OK || n != 0)
            goto malformed;
        return mine; /* every rank connected, or we failed alone: then rank 0 would not say so */
    }
    gw_status_t vst = gw__bs_client_take_verdict(bs, msg, io.total, ended);
    return mine != GW_OK && !verdict_wins ? mine : vst;

malformed:
    GW_ERROR(bs->log, GW_BS_SUBSYS, "malformed answer from rank 0 (root %s) while %s: %s", bs->root,
             when, why ? why : "?");
    bs->culprit = 0;
    return mine != GW_OK ? mine : GW_ERR_PROTOCOL;
}

gw_status_t gw__bootstrap_settle(gw_bootstrap_t *bs, gw_status_t mine, int suspect, int grace_ms)
{
    if (!bs)
        return mine != GW_OK ? mine : GW_ERR_INVALID_ARG;
    if (bs->size == 1)
        return mine;
    if (bs->failed != GW_OK)
        return mine != GW_OK ? mine : bs->failed; /* the all-gather's verdict stands */
    gw_status_t st =
        bs->rank == 0
            ? root_settle(bs, mine, suspect, grace_ms)
            : gw__bs_client_outcome(bs, mine, suspect, grace_ms, bs->gathered_at,
                                    "the ranks connected their data plane", "ended the join", 0);
    if (st != GW_OK) {
        bs->failed = st;
        if (bs->culprit < 0 && mine != GW_OK && suspect >= 0)
            bs->culprit = suspect;
    }
    return st;
}
