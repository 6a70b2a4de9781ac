/*
 * comm_shrink.c - gw_comm_shrink: after a rank died or hung, the survivors
 * make a new communicator of themselves (as ULFM's MPI_Comm_shrink or
 * ncclCommShrink do).
 *
 * Two steps. First the survivors agree on who is left, through rank 0's
 * referee on the old communicator's bootstrap connections (the same
 * connections the blame verdicts travel on; the agreement itself is in
 * transport/bootstrap/bootstrap_shrink.c): each survivor asks, the
 * referee waits until every rank has asked or is gone, at most a window
 * (the communicator's timeout, bounded to [1 s, 30 s]), and tells each
 * rank that asked its new rank (ranks renumbered in the order of the old
 * ones), the new size, and the port rank 0 reserved for the new root.
 * A rank that did not ask in time (stopped, hung) is left out, and when
 * it asks later it is told so (GW_ERR_ABORTED), never let in.
 *
 * Then the members build the new communicator exactly as gw_comm_init
 * builds one, with the settings the old one was made with (kept in
 * comm->recipe): a new bootstrap rooted at old rank 0's host on the new
 * port, authenticated by the same job token, a new job id and data key,
 * a new referee, new transport connections, sequence numbers from 1. So
 * the shrunk communicator is an ordinary root communicator: it can fail,
 * blame and be shrunk again, and nothing of the failed transport (whose
 * state after an abort no collective should trust) is carried over. The
 * old communicator stays failed; keep it until the job no longer needs
 * its rank 0 to answer late ranks, then destroy it.
 *
 * When rank 0 itself died, its referee went with it: the survivors find
 * its connection closed (GW_ERR_REMOTE) and choose an heir instead, the
 * lowest surviving rank, which decides in the referee's place and roots
 * the shrunk communicator on its own host
 * (transport/bootstrap/bootstrap_heir.c). A rank 0 that is stopped, hung
 * or busy outside gradwire past the window (no answer from its referee, or
 * its referee's word that it did not ask) is succeeded too, deposed first:
 * each survivor sends DEPOSED on its connection to the referee and closes
 * it, so that when rank 0 wakes its own shrink is answered left out
 * (GW_ERR_ABORTED) and it never goes on alone beside them. The job's root
 * listener, where joiners knock, is rank 0's: the heir listens at the
 * job's root port on its own host (comm->recipe.join_port,
 * gw__comm_rebuild), so that a replacement still gets in (when a stopped
 * rank 0 still holds that port on the same host, at the port the heir
 * reserved, which it logs). Sub-communicators are not shrunk (shrink
 * their root and split again).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/api/api.h"
#include "collectives/comm/comm.h"
#include "common/env.h"

#define WINDOW_MIN_MS 1000
#define WINDOW_MAX_MS 30000

static char *dup_or_null(const char *s, int *failed)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *failed = 1;
    return d;
}

gw_status_t gw__comm_recipe_keep(gw_comm_t *comm, const gw_comm_resolved_t *r)
{
    int failed = 0;
    comm->recipe.token = dup_or_null(r->token, &failed);
    comm->recipe.transport = dup_or_null(r->transport, &failed);
    comm->recipe.ifname = dup_or_null(r->ifname, &failed);
    comm->recipe.nsocks = r->nsocks;
    comm->recipe.join_port = gw__comm_root_port(r->root);
    return failed ? GW_ERR_NO_MEMORY : GW_OK;
}

int gw__comm_root_port(const char *root)
{
    char host[300];
    int port = 0;
    if (!root || gw__parse_hostport(root, host, sizeof(host), &port) != GW_OK)
        return 0;
    return port;
}

void gw__comm_recipe_free(gw_comm_t *comm)
{
    free(comm->recipe.token);
    free(comm->recipe.transport);
    free(comm->recipe.ifname);
    memset(&comm->recipe, 0, sizeof(comm->recipe));
}

int gw__comm_agree_window_ms(const gw_comm_t *comm)
{
    int w = comm->timeout_ms;
    return w < WINDOW_MIN_MS ? WINDOW_MIN_MS : w > WINDOW_MAX_MS ? WINDOW_MAX_MS : w;
}

gw_status_t gw__comm_rebuild(gw_comm_t *comm, int rank, int size, const char *root,
                             const char *failure, gw_comm_t **out)
{
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = rank;
    cfg.size = size;
    cfg.root = size > 1 ? root : NULL;
    cfg.job_token = comm->recipe.token;
    cfg.timeout_ms = comm->timeout_ms;
    cfg.transport = comm->recipe.transport;
    cfg.socket_ifname = comm->recipe.ifname;
    cfg.nsocks = comm->recipe.nsocks;
    cfg.algo = comm->algo;
    int culprit = -1;
    gw_status_t st = gw_comm_init_culprit(&cfg, out, &culprit);
    if (st != GW_OK) {
        GW_ERROR(&comm->log, "api", "%s (%s): its rank %d is to blame", failure, gw_status_str(st),
                 culprit);
        return st;
    }
    (*out)->p2p_send = comm->p2p_send; /* a gw_comm_set_p2p_send goes on */
    (*out)->recipe.join_port = comm->recipe.join_port;
    /* rank 0: the job's root address goes on with it, for joiners; an heir
     * (rank 0 now, not before: the old rank 0 died with the listener)
     * opens it again on its own host. Joiners are a service to the job,
     * not part of it: without the port, the job goes on. */
    if (comm->rank != 0 && (*out)->rank == 0 && size > 1 && comm->recipe.join_port > 0)
        (void)gw__bootstrap_late_at((*out)->bootstrap, comm->recipe.join_port);
    else
        gw__bootstrap_move_late(comm->bootstrap, (*out)->bootstrap);
    return GW_OK;
}

/* The shrunk communicator: rank `rank` of `size`, rooted at `root`. */
static gw_status_t join_shrunk(gw_comm_t *comm, int rank, int size, const char *root,
                               gw_comm_t **out)
{
    char failure[160];
    snprintf(failure, sizeof(failure),
             "gw_comm_shrink: the survivors agreed on %d ranks, but the shrunk communicator "
             "did not form",
             size);
    return gw__comm_rebuild(comm, rank, size, root, failure, out);
}

gw_status_t gw_comm_shrink(gw_comm_t *comm, gw_comm_t **out)
{
    if (out)
        *out = NULL;
    if (!comm || !out)
        return GW_ERR_INVALID_ARG;
    if (comm->root) {
        GW_ERROR(&comm->log, "api",
                 "gw_comm_shrink: sub-communicator 0x%08x cannot be shrunk: shrink the "
                 "communicator gw_comm_init made, then split the shrunk one",
                 (unsigned)comm->id);
        return GW_ERR_UNSUPPORTED;
    }
    if (comm->size == 1)
        return join_shrunk(comm, 0, 1, NULL, out);
    if (!comm->watching) {
        GW_ERROR(&comm->log, "api",
                 "gw_comm_shrink: this communicator has no referee (its watch did not start), "
                 "so the ranks cannot agree on who is left");
        return GW_ERR_UNSUPPORTED;
    }
    /* A healthy communicator is failed first, so that its peers' calls fail
     * and they come to shrink too, instead of waiting for this rank. */
    if (comm->failed == GW_OK)
        gw_comm_abort(comm);
    char root[300];
    gw_bs_members_t m;
    int window = gw__comm_agree_window_ms(comm);
    gw__comm_drive_begin(comm);
    gw_status_t st = gw__bootstrap_shrink(comm->bootstrap, window, root, sizeof(root), &m);
    gw__comm_drive_end(comm);
    /* Rank 0 stopped or hung (no answer), or busy outside gradwire past the
     * window (its referee answers that it did not ask): depose it, then
     * succeed it as if it had died. A rank 0 that wakes is left out. */
    int deposed =
        comm->rank != 0 && (st == GW_ERR_TIMEOUT || (st == GW_OK && m.status == GW_ERR_TIMEOUT));
    if (deposed) {
        GW_WARN(&comm->log, "api",
                "gw_comm_shrink: %s within %d ms: rank 0 is stopped, hung or busy outside "
                "gradwire; this rank goes on without it (rank 0 is told so, and left out when it "
                "asks) and the lowest surviving rank takes its place",
                st == GW_OK ? "rank 0 did not ask to shrink" : "no answer from rank 0's referee",
                window);
        gw__bootstrap_depose(comm->bootstrap);
        st = GW_ERR_REMOTE;
    }
    if (st == GW_ERR_REMOTE) {
        if (!deposed)
            GW_WARN(&comm->log, "api",
                    "gw_comm_shrink: rank 0 is gone (its connection closed): the lowest "
                    "surviving rank takes its place");
        gw__comm_drive_begin(comm);
        st = gw__bootstrap_succeed(comm->bootstrap, window, root, sizeof(root), &m);
        gw__comm_drive_end(comm);
        if (st != GW_OK) {
            GW_ERROR(&comm->log, "api",
                     "gw_comm_shrink: rank 0 is gone and no surviving rank could lead the others "
                     "(%s): the job cannot go on",
                     gw_status_str(st));
            return st;
        }
    }
    if (st != GW_OK) {
        GW_ERROR(&comm->log, "api",
                 "gw_comm_shrink: no answer from rank 0's referee (%s) within %d ms",
                 gw_status_str(st), window);
        return st;
    }
    if (m.status == GW_ERR_ABORTED && comm->rank == 0) {
        GW_ERROR(&comm->log, "api",
                 "gw_comm_shrink: rank 0 was left out: the survivors found it stopped, hung or "
                 "busy outside gradwire past the %d ms window and went on under the lowest "
                 "surviving rank",
                 window);
        return m.status;
    }
    if (m.status == GW_ERR_ABORTED) {
        GW_ERROR(&comm->log, "api",
                 "gw_comm_shrink: rank %d was left out of the shrunk communicator: it did not "
                 "ask within %d ms of the first survivor (it was stopped, hung or busy "
                 "outside gradwire), and the others went on without it",
                 comm->rank, window);
        return m.status;
    }
    if (m.status != GW_OK) {
        GW_ERROR(&comm->log, "api",
                 "gw_comm_shrink: rank 0 did not ask to shrink within %d ms, and the shrunk "
                 "communicator is built around it: the survivors cannot go on (%s)",
                 window, gw_status_str(m.status));
        return m.status;
    }
    GW_WARN(&comm->log, "api", "gw_comm_shrink: rank %d of %d goes on as rank %d of %u (root %s)",
            comm->rank, comm->size, m.new_rank, m.new_size, root);
    return join_shrunk(comm, m.new_rank, (int)m.new_size, root, out);
}
