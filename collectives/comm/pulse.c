/*
 * pulse.c - what a rank tells rank 0's referee about itself for `gradwire
 * status`: its newest collective (kind, sequence number, step, whether it
 * is in it and for how long, whom it waits for), how many it completed and
 * the bytes it posted to and from each peer (the flight recorder's), sent
 * as a PULSE over the bootstrap connection the watch already holds
 * (transport/bootstrap/bootstrap_pulse.c).
 *
 * When: after a collective ends (with a look at the watch for a verdict),
 * and from inside a long wait (the watch's look every GW_COMM_WATCH_MS),
 * at most every GW_COMM_PULSE_MS. So the
 * status a query gets is at most that old for a rank that calls
 * collectives, and the query itself costs the ranks nothing: rank 0's
 * referee answers it from what it holds. The cost on a rank is a clock
 * read per collective and one small non-blocking send four times a
 * second; a rank without a recorder (GW_FR_ENTRIES=0) or a watch sends
 * nothing.
 */
#include "collectives/comm/comm.h"
#include "collectives/comm/fr_internal.h"

#define GW_COMM_PULSE_MS 250

/* The peers with the most bytes first, at most GW_BS_PULSE_PEERS of them
 * (a ring's two neighbours, a tree's parent and children). */
static void top_peers(const gw_fr_t *fr, gw_bs_pulse_t *p)
{
    p->npeers = 0;
    for (int r = 0; r < fr->size; r++) {
        uint64_t total = fr->peer_sent[r] + fr->peer_recv[r];
        if (!total)
            continue;
        uint32_t at = p->npeers < GW_BS_PULSE_PEERS ? p->npeers++ : GW_BS_PULSE_PEERS;
        /* Insertion into the sorted list; a peer smaller than all kept
         * ones when the list is full falls off the end. */
        while (at > 0 && p->peers[at - 1].sent + p->peers[at - 1].recv < total) {
            if (at < GW_BS_PULSE_PEERS)
                p->peers[at] = p->peers[at - 1];
            at--;
        }
        if (at < GW_BS_PULSE_PEERS) {
            p->peers[at].peer = (uint32_t)r;
            p->peers[at].sent = fr->peer_sent[r];
            p->peers[at].recv = fr->peer_recv[r];
        }
    }
}

int gw__comm_pulse(gw_comm_t *comm, int64_t now_ns)
{
    gw_fr_t *fr = comm->fr;
    if (!fr || comm->root || !comm->watching ||
        now_ns - fr->pulse_ns < GW_COMM_PULSE_MS * 1000000LL)
        return 0;
    fr->pulse_ns = now_ns;
    gw_bs_pulse_t p = {.waiting_on = -1, .done = fr->done};
    const gw_fr_entry_t *e = gw__fr_current(fr);
    if (e) {
        p.seq = e->seq;
        p.op_kind = e->kind;
        p.step = e->step;
        p.running = fr->running;
        int64_t since = fr->running ? e->t_start_ns : e->t_end_ns;
        p.since_ms = now_ns > since ? (uint32_t)((now_ns - since) / 1000000) : 0;
        if (fr->running && e->step_state == GW_FR_STARTED)
            p.waiting_on = e->step_peer;
    }
    p.bytes_sent = fr->bytes_sent;
    p.bytes_recv = fr->bytes_recv;
    top_peers(fr, &p);
    gw__bootstrap_pulse(comm->bootstrap, &p);
    return 1;
}

gw_status_t gw__comm_op_end(gw_comm_t *comm, gw_status_t status)
{
    gw__fr_end(comm->fr, status);
    /* The entry's end stamp is the time: no clock read of its own. */
    const gw_fr_entry_t *e = gw__fr_current(comm->fr);
    if (!e || !gw__comm_pulse(comm, e->t_end_ns) || status != GW_OK)
        return status;
    /* A rank that was stopped, or busy outside gradwire, while the others
     * gave up on it may find every message of its next collective waiting
     * in its buffers, and the peers' aborts behind them unread: the call
     * completes without a wait, so without a look at the watch (blame.c),
     * and would return GW_OK where every other rank failed. The referee's
     * verdict is there by then; taken here, with the pulse, it costs one
     * non-blocking read four times a second at most. */
    return gw__comm_watch(comm, NULL, 0, 0);
}
