/*
 * blame.c - whom a failed communicator blames, agreed on by every rank.
 *
 * A rank that fails knows whom it would blame from what it saw itself (the
 * transport's culprit: the peer whose connection broke, whose abort came
 * first, or that it waited for in vain). Those views differ from rank to
 * rank: when rank 2 of 4 is stopped, rank 0 times out waiting for rank 3,
 * which waits for rank 2. So before a rank settles its failure, it reports
 * to rank 0's referee over the bootstrap connection and takes the referee's
 * verdict (transport/bootstrap/bootstrap_referee.c follows the chain to
 * the rank at its end). Its error then names the same rank on every rank,
 * and its abort tells the peers that rank, so even a rank that cannot reach
 * rank 0 any more hears it.
 *
 * What each kind of failure waits for:
 *   - its own fault (a bad argument, gw_comm_abort, no memory): the
 *     verdict that tells the others, which the referee gives at once; it
 *     blames itself, whatever others concluded;
 *   - anything else: the verdict, for at most the referee's grace period
 *     plus a margin. Without one, a rank that timed out blames rank 0,
 *     whose referee did not answer (stopped, hung, or dead: then its
 *     connection closes and the answer comes at once), and any other
 *     keeps the culprit it saw itself; so does every rank once rank 0
 *     closed its communicator (its referee's BYE) while this one, a
 *     sub-communicator without it, went on.
 * A rank that waits in a collective looks at its connection to rank 0 at
 * most every GW_COMM_WATCH_MS (p2p.c, and gw_test in p2p_api.c): it answers
 * the referee's questions, and a verdict that arrives fails it at once,
 * which also frees ranks stuck on a peer that could not send them its
 * abort. A collective that never waits looks once at its end, with the
 * pulse (pulse.c).
 *
 * Sub-communicators (comm_split.c) use their root's referee: it knows the
 * root's ranks, so reports, states and verdicts speak in those (a
 * request's peer is one already, comm.h), and gw__comm_fail_with turns
 * the verdict into the sub-communicator's own ranks.
 */
#include <stdio.h>

#include "collectives/comm/comm.h"
#include "collectives/comm/fr_internal.h"
#include "common/clock.h"

/* The referee's grace period: long enough for every waiting rank to answer
 * its question (they look every GW_COMM_WATCH_MS, and a progress round may
 * sleep 100 ms), short against the timeout that started the case. */
#define GRACE_MIN_MS 200
#define GRACE_MAX_MS 1000
/* What a reporting rank allows beyond the grace for the verdict to arrive. */
#define VERDICT_MARGIN_MS 500

int gw__comm_grace_ms(int timeout_ms)
{
    int grace = timeout_ms / 4;
    return grace < GRACE_MIN_MS ? GRACE_MIN_MS : grace > GRACE_MAX_MS ? GRACE_MAX_MS : grace;
}

void gw__comm_watch_start(gw_comm_t *comm)
{
    int grace = gw__comm_grace_ms(comm->timeout_ms);
    comm->blame_wait_ms = grace + VERDICT_MARGIN_MS;
    gw__bootstrap_set_op_namer(gw__comm_root(comm)->bootstrap, gw__fr_kind_name);
    if (gw__bootstrap_watch_start(gw__comm_root(comm)->bootstrap, grace) != GW_OK) {
        GW_WARN(&comm->log, "coll",
                "no referee: a failure will name the rank this rank blames, which may differ "
                "from the others'");
        return;
    }
    comm->watching = comm->size > 1;
}

static void what_call(const gw_comm_t *comm, char *buf, size_t cap)
{
    if (comm->tag.seq && comm->id)
        snprintf(buf, cap, "collective #%llu of sub-communicator 0x%08x",
                 (unsigned long long)comm->tag.seq, (unsigned)comm->id);
    else if (comm->tag.seq)
        snprintf(buf, cap, "collective #%llu", (unsigned long long)comm->tag.seq);
    else
        snprintf(buf, cap, "point-to-point call");
}

/* Where this rank is, for the referee's verdict: the kind and step of the
 * call in progress, from the flight recorder (left 0 without one). */
static void where(const gw_comm_t *comm, gw_bs_report_t *rep)
{
    const gw_fr_entry_t *e = gw__fr_current(comm->fr);
    if (e && e->seq == comm->tag.seq) {
        rep->op_kind = e->kind;
        rep->step = e->step;
    }
}

static void take_verdict(gw_comm_t *comm, gw_comm_blame_t *b, const gw_bs_verdict_t *v)
{
    b->status = v->status;
    b->culprit = v->culprit;
    b->origin = v->origin;
    char what[80];
    what_call(comm, what, sizeof(what));
    GW_ERROR(&comm->log, "coll", "%s failed (%s): %s (first reported by rank %d)", what,
             gw_status_str(v->status), v->reason, v->origin);
}

void gw__comm_blame_settle(gw_comm_t *comm, gw_comm_blame_t *b)
{
    if (!comm->watching)
        return;
    gw_bs_report_t rep = {
        .kind = b->kind == GW_BLAME_TIMEOUT ? GW_BS_REPORT_STALLED : GW_BS_REPORT_FAILED,
        .status = b->status,
        .culprit = b->culprit,
        .origin = b->origin,
        .blame = (uint32_t)b->kind,
        .waiting_on = b->waiting_on,
        .seq = comm->tag.seq,
        .stalled_ms = b->stalled_ms > 0 ? (uint32_t)b->stalled_ms : 0,
    };
    where(comm, &rep);
    int own = b->kind == GW_BLAME_SELF;
    gw_bs_verdict_t v;
    /* Even our own fault waits for the verdict (which the referee gives at
     * once for it): only then have the others been told. Connections are
     * made on first use, so our abort may reach no peer at all, and a rank
     * that exits right after its failure must not take the news with it. */
    gw_status_t st =
        gw__bootstrap_watch_report(gw__comm_root(comm)->bootstrap, &rep, comm->blame_wait_ms, &v);
    if (own)
        return; /* reported, so that the others learn it; ours stands */
    if (st == GW_OK) {
        take_verdict(comm, b, &v);
        return;
    }
    char what[80];
    what_call(comm, what, sizeof(what));
    if (st == GW_ERR_UNSUPPORTED) {
        /* Rank 0 closed its communicator (its referee said BYE) while this
         * one, a sub-communicator without it, went on: nobody referees. */
        GW_ERROR(&comm->log, "coll",
                 "%s failed (%s): blaming rank %d, as this rank saw it (rank 0 closed its "
                 "communicator, and with it the referee)",
                 what, gw_status_str(b->status), b->culprit);
        return;
    }
    if (b->kind == GW_BLAME_TIMEOUT && gw__comm_to_root(comm, comm->rank) != 0) {
        /* Everyone waits, and rank 0's referee, which every rank reaches,
         * does not say for whom: rank 0 itself is stopped, hung or dead. */
        b->culprit = 0;
        GW_ERROR(&comm->log, "coll",
                 "%s failed (%s): rank 0 %s, so it is blamed (this rank waited for rank %d)", what,
                 gw_status_str(b->status),
                 st == GW_ERR_REMOTE ? "is gone (its connection closed)"
                                     : "gave no verdict in time (stopped or hung)",
                 b->waiting_on);
        return;
    }
    GW_ERROR(&comm->log, "coll", "%s failed (%s): blaming rank %d, as this rank saw it (%s)", what,
             gw_status_str(b->status), b->culprit,
             st == GW_ERR_REMOTE ? "rank 0, the referee, is gone" : "no verdict from rank 0");
}

/* Whether one of reqs is a send still waiting for its receipt. */
static int awaits_receipt(gw_request_t *const *reqs, int n)
{
    for (int i = 0; i < n; i++)
        if (reqs[i] && !reqs[i]->complete && reqs[i]->kind == GW_REQ_SEND &&
            (reqs[i]->flags & GW_REQ_RECEIPT))
            return 1;
    return 0;
}

/* A verdict came while this rank waits for the receipt of a send. The
 * receiver may have accepted that message and rejected a later one in the
 * same progress round, before its receipt went out: then its word comes in
 * its abort, which repeats the last receipt (transport.h), and which it
 * sends only once it has the verdict too, often after ours. Failing at once
 * would fail a message that was delivered. So the transport runs (with no
 * collective's tag: no message conflicts) until no send of reqs waits for
 * its receipt, the transport fails (the peer's abort, or its connection
 * closing), or the verdict's own wait (blame_wait_ms) passes: a peer that
 * hangs after its report delays our error by that much. */
static void hear_receipts(gw_comm_t *comm, gw_request_t *const *reqs, int n)
{
    gw_transport_t *t = comm->transport;
    if (!t || !awaits_receipt(reqs, n))
        return;
    int64_t deadline = gw__now_ms() + comm->blame_wait_ms;
    while (t->failed == GW_OK && awaits_receipt(reqs, n) && gw__now_ms() < deadline)
        if (t->ops->progress(t, NULL, 10) != GW_OK)
            break;
}

gw_status_t gw__comm_watch(gw_comm_t *comm, gw_request_t *const *reqs, int n, int64_t stalled_ms)
{
    if (!comm->watching)
        return GW_OK;
    /* A long wait still tells `gradwire status` where it is (pulse.c). */
    gw__comm_pulse(comm, comm->fr ? gw__fr_now(comm->fr) : 0);
    gw_bs_report_t state = {
        .kind = GW_BS_REPORT_STATE,
        .status = GW_OK,
        .culprit = -1,
        .origin = -1,
        .waiting_on = -1,
        .seq = comm->tag.seq,
        .stalled_ms = stalled_ms > 0 ? (uint32_t)stalled_ms : 0,
    };
    where(comm, &state);
    for (int i = 0; i < n; i++)
        if (reqs[i] && !reqs[i]->complete) {
            state.waiting_on = reqs[i]->peer;
            break;
        }
    gw_bs_verdict_t v;
    if (!gw__bootstrap_watch_poll(gw__comm_root(comm)->bootstrap, &state, &v))
        return GW_OK;
    /* The job failed elsewhere while we waited: the verdict is our error,
     * once the peers had their say about the messages they accepted. */
    hear_receipts(comm, reqs, n);
    gw_comm_blame_t b = {.kind = GW_BLAME_ABORT, .waiting_on = -1, .settled = 1};
    take_verdict(comm, &b, &v);
    return gw__comm_fail_with(comm, &b);
}
