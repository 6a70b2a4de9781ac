/*
 * bootstrap_referee.c - rank 0's referee: when the job fails, it decides
 * which rank to blame and tells every rank (the ranks' side is in
 * bootstrap_watch.c, the messages in bootstrap_msg.h).
 *
 * A thread of rank 0's process, started once the all-gathers are done,
 * that owns the connections of the bootstrap's star and one end of a
 * socket pair whose other end is rank 0's own connection, so that rank 0's
 * caller reports like any other rank, and so that the referee answers
 * while that caller computes between collectives. It sleeps in poll() and
 * costs nothing while the job is healthy: nobody sends on these
 * connections then.
 *
 * A case opens with the first REPORT (a rank's communicator failed, or it
 * timed out waiting for a peer). The referee asks every rank that did not
 * report what it waits for (INQUIRE; a rank that is waiting answers with a
 * STATE within a few tens of milliseconds) and then follows the chain of
 * blame from the first reporter: a rank blamed for its own fault, or for
 * sending what its peer did not expect, is the culprit; a rank blamed
 * otherwise (a broken connection, an abort naming it, a wait for it) is
 * followed further: to whom it blamed in its own report, or to the rank
 * it waits for in its STATE. The chain ends at a rank whose connection to
 * rank 0 closed (it died, or it closed its communicator: either way it is
 * gone from the job), at a rank that gave no answer by the end of the
 * grace period (stopped, hung, or busy outside gradwire: behind the
 * others), or at a cycle of ranks that wait for each other (the one in the
 * oldest collective is behind; with none older, the first one met). What
 * is known for certain ends the case at once (a death, a bad argument);
 * only a silent rank makes the referee wait, and never past the grace
 * period after the first report, so every rank has its verdict within
 * GW_TIMEOUT_MS plus the grace. The verdict goes to every rank still
 * connected, and the same verdict answers any later report.
 *
 * The referee also decides who goes on when the survivors shrink the job
 * (bootstrap_shrink.c): SHRINK requests come on the same connections, and
 * DEPOSED from a survivor that gave up on this rank 0 (which is then left
 * out of the shrink); and
 * when the members grow the job, whom it admits (GROW requests,
 * bootstrap_grow.c). A command on its stop pipe hands its late listener
 * over (gw__bs_referee_swap_late), so that the job's root address moves on
 * with the job to the next communicator.
 *
 * When rank 0 itself is stopped or dead, so is its referee: the ranks then
 * get no verdict, or see their connection to it close, and blame rank 0
 * (collectives/comm/blame.c). When rank 0 closes its communicator while
 * other ranks still work in sub-communicators of their own, the referee's
 * last word is a BYE, so that they do not take its leaving for a death.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "transport/bootstrap/bootstrap_internal.h"
#include "transport/transport.h"

typedef struct seat {
    int fd;   /* -1 once gone */
    int gone; /* its connection closed or broke */
    uint8_t rx[GW_BS_SMALL_MSG_MAX];
    size_t rx_len;
    int reported; /* rep holds its FAILED or STALLED report */
    int answered; /* state holds its answer to our inquiry */
    gw_bs_report_t rep, state;
    int pulsed;       /* pulse holds its latest news (gradwire status) */
    int64_t pulse_at; /* when it came (gw__now_ms) */
    gw_bs_pulse_t pulse;
} seat_t;

struct gw_bs_referee {
    const gw_logger_t *log;
    int size;
    int grace_ms;
    seat_t *seats;
    struct pollfd *pfds; /* [0]: the stop pipe, then one per seat */
    int *pfd_rank;
    int *next; /* the chain being followed: next[r] is whom r leads to */
    unsigned char *seen;
    const gw_bs_report_t **accounts; /* what each rank said of itself, for gw__bs_where_all */
    int stop[2];
    pthread_t thread;
    int first; /* the rank whose report opened the case, -1 while none */
    int64_t decide_by;
    int decided;
    gw_bs_verdict_t verdict;
    gw_bs_late_t *late;      /* answers processes that arrive after the job formed */
    gw_bs_shrink_t *shrink;  /* who goes on after a failure (bootstrap_shrink.c) */
    gw_bs_grow_t *grow;      /* whom the members admit (bootstrap_grow.c) */
    pthread_mutex_t swap_mu; /* the late listener's hand-over: */
    pthread_cond_t swap_cv;
    gw_bs_late_t *swap_in;
    int swap_done;
    int exited;                /* the thread returned (poll failed): nobody takes a swap */
    unsigned char *gone_map;   /* gone_map[r]: seats[r].gone, as the shrink wants it */
    gw_bs_op_namer_t op_namer; /* names the collectives in reports (NULL: numbers) */
    /* The joiners parked at the late listener, as of the thread's last
     * turn: written by the thread only, read by any (gw_comm_joiners). */
    atomic_int parked;
};

static void seat_gone(gw_bs_referee_t *ref, int r, const char *how)
{
    seat_t *s = &ref->seats[r];
    if (ref->first >= 0 && !ref->decided)
        GW_INFO(ref->log, GW_BS_SUBSYS, "referee: rank %d %s", r, how);
    else
        GW_TRACE(ref->log, GW_BS_SUBSYS, "referee: rank %d %s", r, how);
    close(s->fd);
    s->fd = -1;
    s->gone = 1;
    ref->gone_map[r] = 1;
}

/* Best effort, never blocks: the messages are small, and a rank that does
 * not read them is not waiting for them. */
static void send_to(gw_bs_referee_t *ref, int r, const uint8_t *msg, size_t len)
{
    seat_t *s = &ref->seats[r];
    if (s->gone)
        return;
    ssize_t n = send(s->fd, msg, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n != (ssize_t)len)
        GW_TRACE(ref->log, GW_BS_SUBSYS, "referee: telling rank %d: %s", r,
                 n < 0 ? strerror(errno) : "only part of the message went out");
}

/* A reason may be cut at GW_BS_REASON_MAX bytes: the verdict carries no
 * more. */
__attribute__((format(printf, 2, 3))) static void say(char reason[GW_BS_REASON_MAX + 1],
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, GW_BS_REASON_MAX + 1, fmt, ap);
    va_end(ap);
}

static void what_collective(uint64_t seq, char *buf, size_t cap)
{
    if (seq)
        snprintf(buf, cap, "collective #%llu", (unsigned long long)seq);
    else
        snprintf(buf, cap, "a point-to-point call");
}

/* Whom a report leads to: its culprit, or the rank it waited for. */
static int lead_of(const gw_bs_report_t *r) { return r->culprit >= 0 ? r->culprit : r->waiting_on; }

/* What a rank said of itself last (its report, or its answer), NULL when
 * it said nothing. */
static const gw_bs_report_t *account_of(const seat_t *s)
{
    return s->reported ? &s->rep : s->answered ? &s->state : NULL;
}

static void conclude(gw_bs_referee_t *ref, gw_status_t status, int culprit, const char *reason)
{
    const seat_t *f = &ref->seats[ref->first];
    gw_bs_verdict_t *v = &ref->verdict;
    v->status = status == GW_OK ? GW_ERR_ABORTED : status;
    v->culprit = culprit;
    v->origin = ref->first;
    v->seq = f->rep.seq;
    /* The verdict quotes where each rank was, as far as it fits; the log
     * line below has it whole. */
    char where[1024];
    for (int r = 0; r < ref->size; r++)
        ref->accounts[r] = account_of(&ref->seats[r]);
    /* ref->seen is free again: the chain has been followed. */
    gw__bs_where_all(ref->accounts, ref->gone_map, ref->size, ref->op_namer, ref->seen, where,
                     sizeof(where));
    int cut = snprintf(v->reason, sizeof(v->reason), "%s; where: %s", reason, where);
    if (cut >= (int)sizeof(v->reason))
        memcpy(v->reason + sizeof(v->reason) - 4, "...", 4);
    ref->decided = 1;
    char who[24] = "no rank";
    if (culprit >= 0)
        snprintf(who, sizeof(who), "rank %d", culprit);
    GW_WARN(ref->log, GW_BS_SUBSYS,
            "the referee blames %s (first report from rank %d) - %s; where: %s", who, ref->first,
            reason, where);
    uint8_t msg[GW_BS_VERDICT_MAX_LEN];
    size_t n = gw__bs_encode_verdict(v, msg);
    /* Rank 0's own caller last: once it has the verdict its process may
     * exit at once (a failed job often does), taking this thread with it,
     * and the other ranks would see rank 0's connection close instead of
     * the verdict and blame rank 0. Sent first, the verdict is in their
     * connections' buffers before rank 0 can go. */
    for (int r = 1; r < ref->size; r++)
        send_to(ref, r, msg, n);
    send_to(ref, 0, msg, n);
}

/* The collective a rank was last seen in, 0 when unknown. */
static uint64_t seq_of(const seat_t *s)
{
    return s->reported ? s->rep.seq : s->answered ? s->state.seq : 0;
}

/* Follow the chain of blame from the first reporter (see the top of the
 * file). Returns with ref->decided set, or unset when the chain ends at a
 * rank that may still answer and `final` is 0. */
static void decide(gw_bs_referee_t *ref, int final)
{
    const seat_t *f = &ref->seats[ref->first];
    gw_status_t status = f->rep.status;
    uint32_t kind = f->rep.blame;
    int cur = ref->first, c = lead_of(&f->rep);
    char chain[160], what[48], reason[GW_BS_REASON_MAX + 1];
    size_t clen = (size_t)snprintf(chain, sizeof(chain), "%d", cur);
    what_collective(f->rep.seq, what, sizeof(what));
    memset(ref->seen, 0, (size_t)ref->size);
    ref->seen[cur] = 1;
    for (;;) {
        if (c < 0 || c >= ref->size) {
            /* A wait that named nobody (a receive from any rank) while a
             * rank is gone: the gone one is why nothing came. */
            int gone = -1;
            for (int r = 0; r < ref->size && gone < 0 && kind == GW_BLAME_TIMEOUT; r++)
                if (ref->gone_map[r] && r != cur)
                    gone = r;
            if (gone >= 0) {
                say(reason,
                    "rank %d waited in vain (%s) naming no rank, in %s, and rank %d is gone", cur,
                    gw_status_str(status), what, gone);
                conclude(ref, status, gone, reason);
                return;
            }
            say(reason, "rank %d failed (%s) naming no rank, in %s", cur, gw_status_str(status),
                what);
            conclude(ref, status, -1, reason);
            return;
        }
        ref->next[cur] = c;
        if (clen < sizeof(chain))
            clen += (size_t)snprintf(chain + clen, sizeof(chain) - clen, " -> %d", c);
        if (kind == GW_BLAME_SELF || c == cur) {
            say(reason, "rank %d failed on its own (%s) in %s", c, gw_status_str(status), what);
            conclude(ref, status, c, reason);
            return;
        }
        if (kind == GW_BLAME_PEER) {
            say(reason, "rank %d sent rank %d what it did not expect (%s) in %s", c, cur,
                gw_status_str(status), what);
            conclude(ref, status, c, reason);
            return;
        }
        if (ref->seen[c]) {
            /* Ranks that wait for each other: the one behind is at fault. */
            int pick = c;
            for (int x = ref->next[c], hops = 0; x != c && hops < ref->size;
                 x = ref->next[x], hops++)
                if (seq_of(&ref->seats[x]) < seq_of(&ref->seats[pick]))
                    pick = x;
            say(reason,
                "ranks wait for each other (%s), rank %d in collective #%llu, while rank %d "
                "reported a failure in %s",
                chain, pick, (unsigned long long)seq_of(&ref->seats[pick]), ref->first, what);
            conclude(ref, status, pick, reason);
            return;
        }
        ref->seen[c] = 1;
        const seat_t *s = &ref->seats[c];
        if (s->reported) { /* its own account of the failure */
            status = s->rep.status;
            kind = s->rep.blame;
            cur = c;
            c = lead_of(&s->rep);
            continue;
        }
        if (s->gone) {
            say(reason,
                "rank %d is gone: its connection to rank 0 closed (it died or closed its "
                "communicator), noticed in %s (blame: %s)",
                c, what, chain);
            conclude(ref, status, c, reason);
            return;
        }
        if (s->answered && s->state.waiting_on >= 0) {
            kind = GW_BLAME_TIMEOUT;
            cur = c;
            c = s->state.waiting_on;
            continue;
        }
        if (s->answered) {
            say(reason,
                "rank %d waits for no rank, in collective #%llu, while the ranks waited for it "
                "in %s (waits: %s)",
                c, (unsigned long long)s->state.seq, what, chain);
            conclude(ref, status, c, reason);
            return;
        }
        if (!final)
            return;
        say(reason,
            "rank %d did not answer within %d ms (stopped, hung, or busy outside gradwire) "
            "while the ranks waited for it in %s (waits: %s)",
            c, ref->grace_ms, what, chain);
        conclude(ref, GW_ERR_TIMEOUT, c, reason);
        return;
    }
}

static void open_case(gw_bs_referee_t *ref, int r)
{
    ref->first = r;
    ref->decide_by = gw__now_ms() + ref->grace_ms;
    gw_bs_inquire_t q = {.reporter = r, .seq = ref->seats[r].rep.seq};
    uint8_t msg[GW_BS_INQUIRE_LEN];
    size_t n = gw__bs_encode_inquire(&q, msg);
    for (int k = 0; k < ref->size; k++)
        if (!ref->seats[k].reported)
            send_to(ref, k, msg, n);
}

static void on_report(gw_bs_referee_t *ref, int r, const gw_bs_report_t *rep)
{
    seat_t *s = &ref->seats[r];
    if (rep->culprit >= ref->size || rep->origin >= ref->size || rep->waiting_on >= ref->size) {
        GW_WARN(ref->log, GW_BS_SUBSYS, "referee: rank %d reports a rank beyond the job's %d", r,
                ref->size);
        return;
    }
    if (rep->kind == GW_BS_REPORT_STATE) {
        s->state = *rep;
        s->answered = 1;
        return;
    }
    if (s->reported)
        return; /* the first account stands */
    s->rep = *rep;
    s->reported = 1;
    GW_INFO(ref->log, GW_BS_SUBSYS,
            "referee: rank %d reports %s (%s), blaming rank %d, waiting for rank %d in "
            "collective #%llu",
            r, rep->kind == GW_BS_REPORT_STALLED ? "a stall" : "a failure",
            gw_status_str(rep->status), rep->culprit, rep->waiting_on,
            (unsigned long long)rep->seq);
    if (ref->decided) {
        uint8_t msg[GW_BS_VERDICT_MAX_LEN];
        size_t n = gw__bs_encode_verdict(&ref->verdict, msg);
        send_to(ref, r, msg, n);
        return;
    }
    if (ref->first < 0)
        open_case(ref, r);
}

/* A SHRINK from rank r: recorded while the case is open, answered at
 * once once it is decided (bootstrap_shrink.c). */
static void on_shrink(gw_bs_referee_t *ref, int r, const uint8_t *msg, size_t len)
{
    gw_bs_shrink_req_t req;
    const char *why = NULL;
    if (gw__bs_decode_shrink(msg, len, &req, &why) != GW_OK) {
        GW_WARN(ref->log, GW_BS_SUBSYS, "referee: malformed shrink request from rank %d: %s", r,
                why);
        return;
    }
    if (!gw__bs_shrink_decided(ref->shrink)) {
        gw__bs_shrink_request(ref->shrink, r, &req, gw__now_ms());
        return;
    }
    gw_bs_members_t m;
    if (!gw__bs_shrink_answer(ref->shrink, r, &m)) {
        if (gw__bs_shrink_deposed(ref->shrink))
            GW_INFO(ref->log, GW_BS_SUBSYS,
                    "referee: rank %d's shrink request was read after the survivors deposed "
                    "rank 0: it has gone on without rank 0",
                    r);
        else
            GW_WARN(ref->log, GW_BS_SUBSYS,
                    "referee: rank %d asks to shrink after the job shrank without it: it is told "
                    "it was left out",
                    r);
        gw__bs_shrink_left_out(&m);
    }
    uint8_t out[GW_BS_MEMBERS_LEN];
    gw__bs_encode_members(&m, out);
    send_to(ref, r, out, sizeof(out));
}

/* The shrink was just decided: every rank that asked gets its answer,
 * rank 0's own caller last (as a verdict, see conclude). */
static void answer_shrink(gw_bs_referee_t *ref)
{
    for (int k = 1; k <= ref->size; k++) {
        int r = k % ref->size;
        gw_bs_members_t m;
        if (!gw__bs_shrink_answer(ref->shrink, r, &m))
            continue;
        uint8_t out[GW_BS_MEMBERS_LEN];
        gw__bs_encode_members(&m, out);
        send_to(ref, r, out, sizeof(out));
    }
}

/* DEPOSED from rank r: it gave up waiting for this rank 0 (stopped, hung
 * or busy past the window) and goes on under an heir; this rank 0 is left
 * out of the shrink, whenever its own caller asks (bootstrap_shrink.c). */
static void on_deposed(gw_bs_referee_t *ref, int r)
{
    if (gw__bs_shrink_depose(ref->shrink, r))
        answer_shrink(ref);
}

/* A GROW from rank r (bootstrap_grow.c). */
static void on_grow(gw_bs_referee_t *ref, int r, const uint8_t *msg, size_t len)
{
    gw_bs_shrink_req_t req;
    const char *why = NULL;
    if (gw__bs_decode_grow(msg, len, &req, &why) != GW_OK) {
        GW_WARN(ref->log, GW_BS_SUBSYS, "referee: malformed grow request from rank %d: %s", r, why);
        return;
    }
    gw__bs_grow_request(ref->grow, r, &req, gw__now_ms());
}

/* The grow was just decided: the joiners get their places first, then
 * every member that asked, rank 0's own caller last (see conclude). */
static void answer_grow(gw_bs_referee_t *ref, gw_status_t status, uint32_t port)
{
    int joiners = status == GW_OK ? gw__bs_late_joiners(ref->late) : 0;
    int new_size = ref->size + joiners;
    if (joiners > 0) {
        joiners = gw__bs_late_admit(ref->late, ref->size, new_size, port);
        new_size = ref->size + joiners;
        GW_WARN(ref->log, GW_BS_SUBSYS,
                "referee: the job grows from %d to %d ranks: rank(s) %d..%d joined", ref->size,
                new_size, ref->size, new_size - 1);
    }
    for (int k = 1; k <= ref->size; k++) {
        int r = k % ref->size;
        if (!gw__bs_grow_asked(ref->grow, r))
            continue;
        gw_bs_members_t m = {.status = status, .new_rank = -1};
        if (status == GW_OK) {
            m.new_rank = r;
            m.new_size = (uint32_t)new_size;
            m.port = joiners > 0 ? port : 0;
        }
        uint8_t out[GW_BS_GROWN_LEN];
        gw__bs_encode_grown(&m, out);
        send_to(ref, r, out, sizeof(out));
    }
    gw__bs_grow_reset(ref->grow);
}

/* A rank's news for `gradwire status`: kept, the latest only. */
static void on_pulse(gw_bs_referee_t *ref, int r, const uint8_t *msg, size_t len)
{
    seat_t *s = &ref->seats[r];
    const char *why = NULL;
    gw_bs_pulse_t p;
    if (gw__bs_decode_pulse(msg, len, &p, &why) != GW_OK || (p.waiting_on >= ref->size)) {
        GW_TRACE(ref->log, GW_BS_SUBSYS, "referee: malformed pulse from rank %d: %s", r,
                 why ? why : "a rank beyond the job");
        return;
    }
    s->pulse = p;
    s->pulse_at = gw__now_ms();
    s->pulsed = 1;
}

/* A rank's clock reading (the timeline's alignment): echoed at once with
 * ours, so that the rank sees the round trip. */
static void on_clock(gw_bs_referee_t *ref, int r, const uint8_t *msg, size_t len)
{
    uint64_t asked, root;
    if (gw__bs_decode_clock(msg, len, &asked, &root, NULL) != GW_OK)
        return;
    uint8_t out[GW_BS_CLOCK_LEN];
    gw__bs_encode_clock(asked, (uint64_t)gw__now_ns(), out);
    send_to(ref, r, out, sizeof(out));
}

/* The STATUS answer (bootstrap_late.c calls it for a proven asker): every
 * rank's latest pulse and how old it is; a rank gone or never heard from
 * is left out, which the asker reads as "no news". */
static uint8_t *status_of(void *ctx, size_t *len)
{
    gw_bs_referee_t *ref = ctx;
    gw_bs_rank_status_t *rs = calloc((size_t)ref->size, sizeof(*rs));
    if (!rs)
        return NULL;
    uint32_t n = 0;
    int64_t now = gw__now_ms();
    for (int r = 0; r < ref->size; r++) {
        const seat_t *s = &ref->seats[r];
        if (!s->pulsed || s->gone)
            continue;
        rs[n].rank = (uint32_t)r;
        int64_t age = now - s->pulse_at;
        rs[n].age_ms = age < 0                     ? 0
                       : age >= GW_BS_STATUS_NEVER ? GW_BS_STATUS_NEVER - 1
                                                   : (uint32_t)age;
        rs[n].pulse = s->pulse;
        n++;
    }
    uint8_t *msg = gw__bs_encode_status((uint32_t)ref->size, rs, n, len);
    free(rs);
    return msg;
}

static void read_seat(gw_bs_referee_t *ref, int r)
{
    seat_t *s = &ref->seats[r];
    while (!s->gone) {
        ssize_t n = recv(s->fd, s->rx + s->rx_len, sizeof(s->rx) - s->rx_len, MSG_DONTWAIT);
        if (n == 0) {
            seat_gone(ref, r, "closed its connection to rank 0");
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                seat_gone(ref, r, "broke its connection to rank 0");
            return;
        }
        s->rx_len += (size_t)n;
        while (s->rx_len >= GW_BS_HDR_LEN) {
            gw_bs_hdr_t hdr;
            const char *why = "not a report";
            if (gw__bs_decode_hdr(s->rx, GW_BS_HDR_LEN, &hdr, &why) != GW_OK ||
                (hdr.type != GW_BS_REPORT && hdr.type != GW_BS_SHRINK && hdr.type != GW_BS_GROW &&
                 hdr.type != GW_BS_PULSE && hdr.type != GW_BS_CLOCK && hdr.type != GW_BS_DEPOSED)) {
                GW_WARN(ref->log, GW_BS_SUBSYS, "referee: malformed message from rank %d: %s", r,
                        why);
                seat_gone(ref, r, "sent garbage to the referee");
                return;
            }
            size_t len = GW_BS_HDR_LEN + hdr.payload_len;
            if (s->rx_len < len)
                break;
            gw_bs_report_t rep;
            if (hdr.type == GW_BS_SHRINK)
                on_shrink(ref, r, s->rx, len);
            else if (hdr.type == GW_BS_DEPOSED)
                on_deposed(ref, r);
            else if (hdr.type == GW_BS_GROW)
                on_grow(ref, r, s->rx, len);
            else if (hdr.type == GW_BS_PULSE)
                on_pulse(ref, r, s->rx, len);
            else if (hdr.type == GW_BS_CLOCK)
                on_clock(ref, r, s->rx, len);
            else if (gw__bs_decode_report(s->rx, len, &rep, &why) != GW_OK)
                GW_WARN(ref->log, GW_BS_SUBSYS, "referee: malformed report from rank %d: %s", r,
                        why);
            else
                on_report(ref, r, &rep);
            memmove(s->rx, s->rx + len, s->rx_len - len);
            s->rx_len -= len;
        }
    }
}

/* Rank 0 closes its communicator: the ranks that still run (in a
 * sub-communicator of their own) learn that the connection closes because
 * rank 0 left, not because it died, so a failure of theirs afterwards,
 * without a referee, names the rank they saw, not rank 0 (blame.c). */
static void say_bye(gw_bs_referee_t *ref)
{
    uint8_t msg[GW_BS_BYE_LEN];
    gw__bs_encode_bye(msg);
    for (int r = 1; r < ref->size; r++)
        send_to(ref, r, msg, sizeof(msg));
}

static void *referee_main(void *arg)
{
    gw_bs_referee_t *ref = arg;
    for (;;) {
        int n = 0;
        ref->pfds[n++] = (struct pollfd){.fd = ref->stop[0], .events = POLLIN};
        for (int r = 0; r < ref->size; r++) {
            if (ref->seats[r].gone)
                continue;
            ref->pfds[n] = (struct pollfd){.fd = ref->seats[r].fd, .events = POLLIN};
            ref->pfd_rank[n++] = r;
        }
        int seats_end = n;
        n += gw__bs_late_pollfds(ref->late, ref->pfds + n);
        int open = ref->first >= 0 && !ref->decided;
        int64_t wake = open ? ref->decide_by : INT64_MAX;
        if (gw__bs_shrink_deadline(ref->shrink) < wake)
            wake = gw__bs_shrink_deadline(ref->shrink);
        if (gw__bs_late_deadline(ref->late) < wake)
            wake = gw__bs_late_deadline(ref->late);
        if (gw__bs_grow_deadline(ref->grow) < wake)
            wake = gw__bs_grow_deadline(ref->grow);
        int timeout = wake == INT64_MAX ? -1 : gw__sock_remaining_ms(wake);
        int rc = poll(ref->pfds, (nfds_t)n, timeout);
        if (rc < 0 && errno != EINTR) {
            GW_ERROR(ref->log, GW_BS_SUBSYS, "referee: poll failed: %m; it stops");
            break;
        }
        if (rc > 0 && ref->pfds[0].revents) {
            char cmd = 1;
            if (read(ref->stop[0], &cmd, 1) != 1 || cmd != 2) {
                say_bye(ref);
                break;
            }
            /* The late listener's hand-over: the poll set is rebuilt
             * from ref->late on the next turn. */
            pthread_mutex_lock(&ref->swap_mu);
            gw_bs_late_t *old = ref->late;
            ref->late = ref->swap_in;
            ref->swap_in = old;
            ref->swap_done = 1;
            pthread_cond_broadcast(&ref->swap_cv);
            pthread_mutex_unlock(&ref->swap_mu);
            atomic_store_explicit(&ref->parked, gw__bs_late_joiners(ref->late),
                                  memory_order_relaxed);
            continue;
        }
        for (int i = 1; rc > 0 && i < seats_end; i++)
            if (ref->pfds[i].revents)
                read_seat(ref, ref->pfd_rank[i]);
        if (rc >= 0)
            gw__bs_late_events(ref->late, ref->pfds + seats_end, status_of, ref);
        if (ref->first >= 0 && !ref->decided)
            decide(ref, gw__now_ms() >= ref->decide_by);
        if (gw__bs_shrink_decide(ref->shrink, ref->gone_map, gw__now_ms()))
            answer_shrink(ref);
        gw_status_t grown;
        uint32_t port;
        if (gw__bs_grow_decide(ref->grow, ref->gone_map, gw__now_ms(), &grown, &port))
            answer_grow(ref, grown, port);
        atomic_store_explicit(&ref->parked, gw__bs_late_joiners(ref->late), memory_order_relaxed);
    }
    pthread_mutex_lock(&ref->swap_mu);
    ref->exited = 1;
    pthread_cond_broadcast(&ref->swap_cv);
    pthread_mutex_unlock(&ref->swap_mu);
    return NULL;
}

static void referee_free(gw_bs_referee_t *ref)
{
    for (int r = 0; ref->seats && r < ref->size; r++)
        if (ref->seats[r].fd >= 0)
            close(ref->seats[r].fd);
    if (ref->stop[0] >= 0)
        close(ref->stop[0]);
    if (ref->stop[1] >= 0)
        close(ref->stop[1]);
    gw__bs_late_close(ref->late);
    gw__bs_shrink_free(ref->shrink);
    gw__bs_grow_free(ref->grow);
    pthread_mutex_destroy(&ref->swap_mu);
    pthread_cond_destroy(&ref->swap_cv);
    free(ref->gone_map);
    free(ref->seats);
    free(ref->pfds);
    free(ref->pfd_rank);
    free(ref->next);
    free(ref->seen);
    free(ref->accounts);
    free(ref);
}

gw_status_t gw__bs_referee_start(gw_bootstrap_t *bs, int self_fd, int grace_ms,
                                 gw_bs_referee_t **out)
{
    gw_bs_referee_t *ref = calloc(1, sizeof(*ref));
    if (!ref) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "out of memory for the referee");
        return GW_ERR_NO_MEMORY;
    }
    ref->log = bs->log;
    ref->size = bs->size;
    ref->grace_ms = grace_ms;
    ref->op_namer = bs->op_namer;
    ref->first = -1;
    ref->stop[0] = ref->stop[1] = -1;
    size_t n = (size_t)bs->size;
    ref->seats = calloc(n, sizeof(*ref->seats));
    ref->pfds = calloc(n + 1 + GW_BS_LATE_PFDS, sizeof(*ref->pfds));
    ref->pfd_rank = calloc(n + 1, sizeof(*ref->pfd_rank));
    ref->next = calloc(n, sizeof(*ref->next));
    ref->seen = calloc(n, 1);
    ref->accounts = calloc(n, sizeof(*ref->accounts));
    ref->gone_map = calloc(n, 1);
    ref->shrink = gw__bs_shrink_new(bs->log, bs->size);
    ref->grow = gw__bs_grow_new(bs->log, bs->size);
    pthread_mutex_init(&ref->swap_mu, NULL);
    pthread_cond_init(&ref->swap_cv, NULL);
    if (!ref->seats || !ref->pfds || !ref->pfd_rank || !ref->next || !ref->seen || !ref->accounts ||
        !ref->gone_map || !ref->shrink || !ref->grow) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "out of memory for the referee of %d ranks", bs->size);
        referee_free(ref);
        return GW_ERR_NO_MEMORY;
    }
    for (size_t r = 0; r < n; r++)
        ref->seats[r].fd = -1;
    if (pipe2(ref->stop, O_CLOEXEC) != 0) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "pipe for the referee: %m");
        ref->stop[0] = ref->stop[1] = -1;
        referee_free(ref);
        return GW_ERR_SYSTEM;
    }
    /* From here on the seats (and the listener) are the thread's. */
    ref->late = gw__bs_late_open(bs);
    ref->seats[0].fd = self_fd;
    for (int r = 1; r < bs->size; r++) {
        ref->seats[r].fd = bs->fds[r];
        bs->fds[r] = -1;
    }
    /* User signal handlers run on the user's threads, not on this one. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&ref->thread, NULL, referee_main, ref);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "cannot start the referee thread: %s", strerror(rc));
        /* The connections go back to the bootstrap, the socket pair to the
         * caller. */
        for (int r = 1; r < bs->size; r++) {
            bs->fds[r] = ref->seats[r].fd;
            ref->seats[r].fd = -1;
        }
        ref->seats[0].fd = -1;
        referee_free(ref);
        return GW_ERR_SYSTEM;
    }
    *out = ref;
    return GW_OK;
}

int gw__bs_referee_joiners(gw_bs_referee_t *ref)
{
    return ref ? atomic_load_explicit(&ref->parked, memory_order_relaxed) : 0;
}

gw_bs_late_t *gw__bs_referee_swap_late(gw_bs_referee_t *ref, gw_bs_late_t *in)
{
    if (!ref)
        return in;
    pthread_mutex_lock(&ref->swap_mu);
    ref->swap_in = in;
    ref->swap_done = 0;
    char b = 2;
    while (write(ref->stop[1], &b, 1) < 0 && errno == EINTR)
        ;
    while (!ref->swap_done && !ref->exited)
        pthread_cond_wait(&ref->swap_cv, &ref->swap_mu);
    /* A thread that is gone took nothing: `in` comes back. */
    gw_bs_late_t *out = ref->swap_in;
    ref->swap_in = NULL;
    pthread_mutex_unlock(&ref->swap_mu);
    return out;
}

void gw__bs_referee_stop(gw_bs_referee_t *ref)
{
    if (!ref)
        return;
    char b = 1;
    while (write(ref->stop[1], &b, 1) < 0 && errno == EINTR)
        ;
    pthread_join(ref->thread, NULL);
    referee_free(ref);
}
