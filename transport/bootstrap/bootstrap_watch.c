/*
 * bootstrap_watch.c - a rank's side of the watch: once the all-gathers are
 * done, the connection to rank 0 carries what the ranks need to agree on
 * whom to blame when the job fails (messages in bootstrap_msg.h, rank 0's
 * referee in bootstrap_referee.c).
 *
 * Why through rank 0. A rank that fails knows only what it saw: the peer
 * whose connection broke, the peer whose abort reached it first, the peer
 * it waited for in vain. When rank 2 of 4 is stopped, rank 0 may time out
 * waiting for rank 3, which waits for rank 2; when rank 1 dies, a survivor
 * may see a neighbour's connection close before it sees rank 1's. Each rank
 * would name another culprit. Every rank already holds a connection to
 * rank 0 (the bootstrap's star), rank 0 sees each of them close when a
 * rank dies, and only a failing rank talks on it, so the healthy path pays
 * nothing: no message per collective, and a rank that waits looks at its
 * connection (one non-blocking read) at most every few tens of
 * milliseconds of waiting.
 *
 * The exchange. A rank whose communicator fails sends a REPORT (whom it
 * blames and how it knows, or that it timed out waiting for a peer) and
 * waits, for a bounded time, for the VERDICT, which it then takes as its
 * own error; a rank that is waiting answers the referee's INQUIRE with what
 * it waits for; a VERDICT that arrives while a rank waits fails it at once.
 * Everything here is non-blocking or bounded by a deadline: a rank never
 * waits for rank 0 longer than it is told to, and a rank 0 that is gone or
 * stopped shows up as GW_ERR_REMOTE or GW_ERR_TIMEOUT, which the caller
 * turns into blaming rank 0.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "transport/bootstrap/bootstrap_internal.h"

/* How long sending one small message to rank 0 may take before the
 * connection counts as broken: the kernel takes a few hundred bytes at once
 * unless rank 0 stopped reading long ago. */
#define SEND_MS 200

gw_status_t gw__bootstrap_watch_start(gw_bootstrap_t *bs, int grace_ms)
{
    if (!bs || bs->size == 1 || bs->watching)
        return GW_OK;
    if (bs->rank == 0) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
            GW_ERROR(bs->log, GW_BS_SUBSYS, "socketpair for the referee: %m");
            return GW_ERR_SYSTEM;
        }
        gw_status_t st = gw__bs_referee_start(bs, sv[1], grace_ms, &bs->referee);
        if (st != GW_OK) {
            close(sv[0]);
            close(sv[1]);
            return st;
        }
        bs->root_fd = sv[0];
    }
    bs->watching = 1;
    return GW_OK;
}

void gw__bootstrap_set_op_namer(gw_bootstrap_t *bs, gw_bs_op_namer_t namer)
{
    if (bs)
        bs->op_namer = namer;
}

/* Three rounds; the one with the shortest round trip gives the offset
 * (the answer's time sits halfway through it, give or take half of it). */
#define CLOCK_ROUNDS 3
#define CLOCK_WAIT_MS 500

gw_status_t gw__bootstrap_clock(gw_bootstrap_t *bs, int64_t *offset_ns, int64_t *rtt_ns)
{
    if (!bs || !bs->watching || bs->watch_gone)
        return GW_ERR_UNSUPPORTED;
    int64_t best_rtt = INT64_MAX, best_off = 0;
    for (int i = 0; i < CLOCK_ROUNDS; i++) {
        uint8_t msg[GW_BS_CLOCK_LEN];
        int64_t t0 = gw__now_ns();
        gw__bs_encode_clock((uint64_t)t0, 0, msg);
        bs->have_clock = 0;
        if (gw__bs_watch_ask(bs, msg, sizeof(msg), &bs->have_clock, gw__now_ms() + CLOCK_WAIT_MS) !=
            GW_OK)
            break;
        int64_t t1 = gw__now_ns();
        if (bs->clock_asked != (uint64_t)t0)
            continue; /* an answer to an earlier round that came late */
        if (t1 - t0 < best_rtt) {
            best_rtt = t1 - t0;
            best_off = (int64_t)bs->clock_root - (t0 + (t1 - t0) / 2);
        }
    }
    if (best_rtt == INT64_MAX)
        return GW_ERR_TIMEOUT;
    *offset_ns = best_off;
    *rtt_ns = best_rtt;
    return GW_OK;
}

void gw__bootstrap_pulse(gw_bootstrap_t *bs, const gw_bs_pulse_t *p)
{
    if (!bs || !bs->watching || bs->watch_gone)
        return;
    uint8_t msg[GW_BS_PULSE_MAX_LEN];
    size_t len = gw__bs_encode_pulse(p, msg);
    ssize_t n = send(bs->root_fd, msg, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0)
        return; /* full (or broken: the next read says so): skip this one */
    /* Half a message would break the stream: the rest goes out, bounded
     * (a buffer that took part of it drains as the referee reads). */
    if ((size_t)n < len)
        gw__bs_watch_send(bs, msg + n, len - (size_t)n);
}

int gw__bootstrap_watching(const gw_bootstrap_t *bs)
{
    return bs && bs->watching && !bs->watch_gone;
}

static void gone(gw_bootstrap_t *bs, const char *why)
{
    if (!bs->watch_gone)
        GW_TRACE(bs->log, GW_BS_SUBSYS, "the connection to rank 0 is gone: %s", why);
    bs->watch_gone = 1;
}

int gw__bs_watch_send(gw_bootstrap_t *bs, const uint8_t *msg, size_t len)
{
    gw_sock_io_t io;
    gw__sock_io_set(&io, (void *)msg, len, NULL, 0);
    int r = gw__sock_io_run(bs->root_fd, &io, 1, gw__now_ms() + SEND_MS);
    if (r != GW_SOCK_IO_DONE) {
        gone(bs, r == GW_SOCK_IO_TIMEOUT ? "a send to it timed out" : "a send to it failed");
        return -1;
    }
    return 0;
}

gw_status_t gw__bs_watch_ask(gw_bootstrap_t *bs, const uint8_t *msg, size_t len,
                             const int *answered, int64_t deadline)
{
    if (!bs->watch_gone)
        gw__bs_watch_send(bs, msg, len);
    while (!*answered && !bs->watch_gone) {
        int left = gw__sock_remaining_ms(deadline);
        if (left <= 0)
            break;
        struct pollfd p = {.fd = bs->root_fd, .events = POLLIN};
        if (poll(&p, 1, left) < 0 && errno != EINTR)
            break;
        gw__bs_watch_pump(bs, NULL);
    }
    if (!*answered)
        return bs->watch_gone ? GW_ERR_REMOTE : GW_ERR_TIMEOUT;
    return GW_OK;
}

static void on_message(gw_bootstrap_t *bs, const gw_bs_hdr_t *hdr, const gw_bs_report_t *state)
{
    const char *why = NULL;
    size_t len = GW_BS_HDR_LEN + hdr->payload_len;
    if (hdr->type == GW_BS_VERDICT) {
        gw_bs_verdict_t v;
        if (gw__bs_decode_verdict(bs->wrx, len, &v, &why) != GW_OK) {
            GW_WARN(bs->log, GW_BS_SUBSYS, "malformed verdict from rank 0: %s", why);
            return;
        }
        if (!bs->have_verdict) {
            bs->verdict = v;
            bs->have_verdict = 1;
        }
        return;
    }
    if (hdr->type == GW_BS_INQUIRE) {
        gw_bs_inquire_t q;
        if (gw__bs_decode_inquire(bs->wrx, len, &q, &why) != GW_OK) {
            GW_WARN(bs->log, GW_BS_SUBSYS, "malformed inquiry from rank 0: %s", why);
            return;
        }
        /* Without a state to give (a rank that has reported already, or
         * that is busy failing), the referee has or will have our report. */
        if (state) {
            uint8_t msg[GW_BS_REPORT_LEN];
            size_t n = gw__bs_encode_report(state, msg);
            GW_TRACE(bs->log, GW_BS_SUBSYS,
                     "rank %d asks what we wait for: rank %d, in collective #%llu, for %u ms",
                     q.reporter, state->waiting_on, (unsigned long long)state->seq,
                     state->stalled_ms);
            gw__bs_watch_send(bs, msg, n);
        }
        return;
    }
    if (hdr->type == GW_BS_MEMBERS) {
        gw_bs_members_t m;
        if (gw__bs_decode_members(bs->wrx, len, &m, &why) != GW_OK) {
            GW_WARN(bs->log, GW_BS_SUBSYS, "malformed shrink answer from rank 0: %s", why);
            return;
        }
        if (!bs->have_members) {
            bs->members = m;
            bs->have_members = 1;
        }
        return;
    }
    if (hdr->type == GW_BS_CLOCK) {
        uint64_t asked, root;
        if (gw__bs_decode_clock(bs->wrx, len, &asked, &root, &why) != GW_OK) {
            GW_WARN(bs->log, GW_BS_SUBSYS, "malformed clock answer from rank 0: %s", why);
            return;
        }
        bs->clock_asked = asked;
        bs->clock_root = root;
        bs->have_clock = 1;
        return;
    }
    if (hdr->type == GW_BS_BYE) {
        bs->watch_bye = 1;
        gone(bs, "rank 0 closed its communicator");
        return;
    }
    if (hdr->type == GW_BS_GROWN) {
        gw_bs_members_t m;
        if (gw__bs_decode_grown(bs->wrx, len, &m, &why) != GW_OK) {
            GW_WARN(bs->log, GW_BS_SUBSYS, "malformed grow answer from rank 0: %s", why);
            return;
        }
        bs->grown = m;
        bs->have_grown = 1;
        return;
    }
    GW_WARN(bs->log, GW_BS_SUBSYS, "unexpected %s message from rank 0 during the job",
            gw__bs_type_name(hdr->type));
}

/* Read whatever rank 0 sent and act on each whole message. */
void gw__bs_watch_pump(gw_bootstrap_t *bs, const gw_bs_report_t *state)
{
    while (bs->watching && !bs->watch_gone) {
        ssize_t n =
            recv(bs->root_fd, bs->wrx + bs->wrx_len, sizeof(bs->wrx) - bs->wrx_len, MSG_DONTWAIT);
        if (n == 0) {
            gone(bs, "it closed the connection");
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                gone(bs, "a receive from it failed");
            return;
        }
        bs->wrx_len += (size_t)n;
        while (bs->wrx_len >= GW_BS_HDR_LEN) {
            gw_bs_hdr_t hdr;
            const char *why = NULL;
            if (gw__bs_decode_hdr(bs->wrx, GW_BS_HDR_LEN, &hdr, &why) != GW_OK ||
                hdr.payload_len > sizeof(bs->wrx) - GW_BS_HDR_LEN) {
                GW_WARN(bs->log, GW_BS_SUBSYS, "malformed message from rank 0 during the job: %s",
                        why ? why : "too long");
                gone(bs, "it sent garbage");
                return;
            }
            size_t len = GW_BS_HDR_LEN + hdr.payload_len;
            if (bs->wrx_len < len)
                break;
            on_message(bs, &hdr, state);
            memmove(bs->wrx, bs->wrx + len, bs->wrx_len - len);
            bs->wrx_len -= len;
        }
    }
}

int gw__bootstrap_watch_poll(gw_bootstrap_t *bs, const gw_bs_report_t *state,
                             gw_bs_verdict_t *verdict)
{
    if (!bs || !bs->watching)
        return 0;
    gw__bs_watch_pump(bs, state);
    if (!bs->have_verdict)
        return 0;
    *verdict = bs->verdict;
    return 1;
}

/* A send that failed marks the connection gone before what rank 0 sent
 * last was read: its BYE, or a verdict, may wait there still. */
static void read_last_words(gw_bootstrap_t *bs)
{
    if (!bs->watch_gone || bs->watch_bye || bs->have_verdict || bs->root_fd < 0)
        return;
    bs->watch_gone = 0;
    gw__bs_watch_pump(bs, NULL);
    bs->watch_gone = 1;
}

gw_status_t gw__bootstrap_watch_report(gw_bootstrap_t *bs, const gw_bs_report_t *report,
                                       int wait_ms, gw_bs_verdict_t *verdict)
{
    if (!bs || !bs->watching)
        return GW_ERR_UNSUPPORTED;
    int64_t deadline = gw__now_ms() + (wait_ms > 0 ? wait_ms : 0);
    /* A verdict that came before the failure (it may be what made the
     * transport fail: the rank it blames closed its connections) is the
     * answer already: no need to ask again. */
    gw__bs_watch_pump(bs, NULL);
    if (!bs->have_verdict && !bs->watch_gone) {
        uint8_t msg[GW_BS_REPORT_LEN];
        size_t n = gw__bs_encode_report(report, msg);
        gw__bs_watch_send(bs, msg, n);
    }
    while (!bs->have_verdict && !bs->watch_gone) {
        int left = gw__sock_remaining_ms(deadline);
        if (left <= 0)
            break;
        struct pollfd p = {.fd = bs->root_fd, .events = POLLIN};
        if (poll(&p, 1, left) < 0 && errno != EINTR) {
            gone(bs, "poll failed");
            break;
        }
        gw__bs_watch_pump(bs, NULL);
    }
    read_last_words(bs);
    if (bs->have_verdict) {
        *verdict = bs->verdict;
        return GW_OK;
    }
    if (bs->watch_bye)
        return GW_ERR_UNSUPPORTED; /* no watch any more: rank 0 left */
    return bs->watch_gone ? GW_ERR_REMOTE : GW_ERR_TIMEOUT;
}
