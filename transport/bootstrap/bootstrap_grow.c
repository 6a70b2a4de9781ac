/*
 * bootstrap_grow.c - admitting new processes into a running job at an
 * agreed point, for gw_comm_grow and gw_comm_join
 * (collectives/api/comm_grow.c): the referee's side (rank 0's thread,
 * bootstrap_referee.c calls it) and a member's side.
 *
 * Joiners. A process that wants in connects to the job's root address, the
 * port rank 0 listened on when the job formed and keeps listening on while
 * the job runs (bootstrap_late.c answers there), sends JOIN and proves the
 * job token (bootstrap_joiner.c); rank 0 parks it. It is not part of
 * anything yet: the members compute on undisturbed.
 *
 * Counting. Each time the referee's thread wakes it counts the parked
 * joiners into a word any thread of rank 0 may read (gw_comm_joiners),
 * so that a job with no agreed point of its own (the asynchronous
 * trainer, optimizer/ps_grow.c) can stop and grow when someone waits.
 *
 * Growing. At a point they agree on (the trainer: every epoch boundary),
 * every member sends GROW (rank 0's carries a port it reserved on its host
 * for the grown job's root, as a shrink's does). The referee waits until
 * every member has asked, at most a window from the first request, then
 * counts the parked joiners. With none, every member gets GROWN with its
 * own rank, the same size and port 0: nothing changes, and the call cost
 * one small message each way. With J joiners, every member gets GROWN with
 * its own rank (members keep their order, rank 0 stays 0), the size plus
 * J, and the port; the joiners get ranks size .. size + J - 1 in the order
 * they arrived, the same size and port, and their connection closes. Then
 * all of them build the grown communicator as gw_comm_init builds one.
 * A member that does not ask within the window, or whose connection to
 * rank 0 closes, fails the grow for all who asked (GROWN with
 * GW_ERR_TIMEOUT or GW_ERR_REMOTE); the joiners stay parked for the next.
 *
 * After a shrink or a grow the listener at the original port, with its
 * parked joiners, moves from the old communicator's referee to the new
 * one's (gw__bootstrap_move_late), so that the job's root address stays
 * the one to join through for as long as the job runs. When rank 0 died,
 * the listener died with it: the heir, rank 0 of the shrunk communicator,
 * listens at the job's root port on its own host instead
 * (gw__bootstrap_late_at), so that a replacement joins through the same
 * address when the heir shares rank 0's host (one node, or a root address
 * that moves with a service's IP), and through the heir's host and the
 * same port otherwise. Joiners parked at the dead rank 0 saw their
 * connection close (GW_ERR_REMOTE): they start again.
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "transport/bootstrap/bootstrap_internal.h"

struct gw_bs_grow {
    const gw_logger_t *log;
    int size;
    unsigned char *asked;
    int64_t deadline; /* INT64_MAX: no grow open */
    uint32_t port;
};

gw_bs_grow_t *gw__bs_grow_new(const gw_logger_t *log, int size)
{
    gw_bs_grow_t *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->log = log;
    g->size = size;
    g->deadline = INT64_MAX;
    g->asked = calloc((size_t)size, 1);
    if (!g->asked) {
        free(g);
        return NULL;
    }
    return g;
}

void gw__bs_grow_free(gw_bs_grow_t *g)
{
    if (!g)
        return;
    free(g->asked);
    free(g);
}

void gw__bs_grow_request(gw_bs_grow_t *g, int r, const gw_bs_shrink_req_t *req, int64_t now)
{
    if (g->deadline == INT64_MAX)
        g->deadline = now + (int64_t)req->window_ms;
    g->asked[r] = 1;
    if (r == 0)
        g->port = req->port;
}

int64_t gw__bs_grow_deadline(const gw_bs_grow_t *g) { return g->deadline; }

int gw__bs_grow_decide(gw_bs_grow_t *g, const unsigned char *gone, int64_t now, gw_status_t *status,
                       uint32_t *port)
{
    if (g->deadline == INT64_MAX)
        return 0;
    int everyone = 1, lost = -1;
    for (int r = 0; r < g->size; r++) {
        everyone &= g->asked[r] && !gone[r];
        if (gone[r] && lost < 0)
            lost = r;
    }
    if (everyone && g->port != 0) {
        *status = GW_OK;
    } else if (lost >= 0) {
        *status = GW_ERR_REMOTE;
        GW_WARN(g->log, GW_BS_SUBSYS, "referee: the grow fails: rank %d is gone", lost);
    } else if (now >= g->deadline) {
        int late = 0;
        while (late < g->size && g->asked[late])
            late++;
        *status = GW_ERR_TIMEOUT;
        GW_WARN(g->log, GW_BS_SUBSYS,
                "referee: the grow fails: rank %d did not ask to grow within the window", late);
    } else {
        return 0;
    }
    *port = g->port;
    return 1;
}

int gw__bs_grow_asked(const gw_bs_grow_t *g, int r) { return g->asked[r]; }

void gw__bs_grow_reset(gw_bs_grow_t *g)
{
    memset(g->asked, 0, (size_t)g->size);
    g->deadline = INT64_MAX;
    g->port = 0;
}

/* ---- a member's side ----------------------------------------------------- */

gw_status_t gw__bootstrap_grow(gw_bootstrap_t *bs, int window_ms, char *root, size_t root_cap,
                               gw_bs_members_t *out)
{
    if (!bs || !bs->watching)
        return GW_ERR_UNSUPPORTED;
    char host[256];
    gw_bs_shrink_req_t req;
    int64_t deadline;
    gw_status_t st = gw__bs_new_root_request(bs, window_ms, host, sizeof(host), &req, &deadline);
    if (st != GW_OK)
        return st;
    gw__bs_watch_pump(bs, NULL);
    bs->have_grown = 0; /* an answer to an earlier grow is no answer to this one */
    uint8_t msg[GW_BS_GROW_LEN];
    gw__bs_encode_grow(&req, msg);
    if ((st = gw__bs_watch_ask(bs, msg, sizeof(msg), &bs->have_grown, deadline)) != GW_OK)
        return st;
    bs->have_grown = 0;
    *out = bs->grown;
    if (out->status == GW_OK && out->port != 0)
        gw__bs_new_root(host, out->port, root, root_cap);
    return GW_OK;
}

int gw__bootstrap_joiners(const gw_bootstrap_t *bs)
{
    return bs ? gw__bs_referee_joiners(bs->referee) : 0;
}

void gw__bootstrap_move_late(gw_bootstrap_t *from, gw_bootstrap_t *to)
{
    if (!from || !to || !from->referee || !to->referee)
        return;
    gw_bs_late_t *l = gw__bs_referee_swap_late(from->referee, NULL);
    if (!l)
        return;
    gw__bs_late_set_size(l, to->size);
    gw__bs_late_close(gw__bs_referee_swap_late(to->referee, l));
}

gw_status_t gw__bootstrap_late_at(gw_bootstrap_t *bs, int port)
{
    char host[NI_MAXHOST], pstr[16];
    int old_port;
    if (!bs || !bs->referee || port <= 0 || port > 65535 ||
        gw__parse_hostport(bs->root, host, sizeof(host), &old_port) != GW_OK)
        return GW_ERR_INVALID_ARG;
    snprintf(pstr, sizeof(pstr), "%d", port);
    int fd = -1;
    gw_status_t st = gw__bs_listen_at(bs->log, host, pstr, "the job's root port", &fd);
    if (st != GW_OK) {
        GW_WARN(bs->log, GW_BS_SUBSYS,
                "succession: joiners cannot reach the job at its root port %d on %s; they reach "
                "it at %s",
                port, host, bs->root);
        return st;
    }
    gw_bs_late_t *l = gw__bs_late_open_on(bs, fd);
    if (!l) {
        close(fd);
        return GW_ERR_NO_MEMORY;
    }
    gw__bs_late_close(gw__bs_referee_swap_late(bs->referee, l));
    GW_WARN(bs->log, GW_BS_SUBSYS,
            "succession: joiners reach the job at %s:%d, its root port, on this rank's host", host,
            port);
    return GW_OK;
}
