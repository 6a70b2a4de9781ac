/*
 * comm_grow.c - gw_comm_grow and gw_comm_join: a running job admits new
 * processes (a replacement for a rank it lost, or more ranks) at a point
 * its members agree on, such as an epoch boundary.
 *
 * A new process calls gw_comm_join with the job's root address (the one
 * the job was started with: rank 0 keeps listening there while the job
 * runs, and after a shrink or a grow the listener moves on to the new
 * communicator) and the job token (the caller's, GW_JOB_TOKEN or
 * GW_JOB_TOKEN_FILE's, as gw_comm_init_env finds it; without one it is
 * refused before it connects, unless GW_INSECURE=1, as a job without one
 * is). It proves the token as a rank proves it at the join, and waits. The members call gw_comm_grow at their agreed
 * point; rank 0's referee tells each how many are waiting
 * (transport/bootstrap/bootstrap_grow.c). With none, the call returns at
 * once with *out NULL: one small message to rank 0 and back. With some,
 * members and joiners build a new communicator exactly as a shrink does
 * (a new root on rank 0's host at a port it reserved, the same job token
 * and settings, a new job id and data key, new connections and sequence
 * numbers from 1): members keep their ranks, the joiners come after them
 * in the order they arrived.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/api/api.h"
#include "collectives/comm/comm.h"
#include "collectives/comm/launch_env.h"
#include "common/env.h"

/* A joiner's wait when its caller gives none: an epoch of a real job. */
#define JOIN_WAIT_DEFAULT_MS 600000

gw_status_t gw_comm_grow(gw_comm_t *comm, gw_comm_t **out)
{
    if (out)
        *out = NULL;
    if (!comm || !out)
        return GW_ERR_INVALID_ARG;
    if (comm->root) {
        GW_ERROR(&comm->log, "api",
                 "gw_comm_grow: sub-communicator 0x%08x cannot grow: grow the communicator "
                 "gw_comm_init made, then split the grown one",
                 (unsigned)comm->id);
        return GW_ERR_UNSUPPORTED;
    }
    if (comm->failed != GW_OK)
        return comm->failed;
    if (!comm->watching) {
        GW_ERROR(&comm->log, "api",
                 "gw_comm_grow: this communicator has no referee (one rank, or its watch did not "
                 "start), so it cannot admit anyone");
        return GW_ERR_UNSUPPORTED;
    }
    int w = gw__comm_agree_window_ms(comm);
    char root[300] = "";
    gw_bs_members_t m;
    gw__comm_drive_begin(comm);
    gw_status_t st = gw__bootstrap_grow(comm->bootstrap, w, root, sizeof(root), &m);
    gw__comm_drive_end(comm);
    if (st == GW_OK && m.status != GW_OK)
        st = m.status;
    if (st != GW_OK) {
        GW_ERROR(&comm->log, "api",
                 "gw_comm_grow: the members did not agree to grow within %d ms (%s): a rank did "
                 "not call gw_comm_grow in time, or is gone",
                 w, gw_status_str(st));
        return st;
    }
    if (m.port == 0)
        return GW_OK; /* nobody waits to join: comm goes on */
    GW_WARN(&comm->log, "api", "gw_comm_grow: the job grows from %d to %u ranks (root %s)",
            comm->size, m.new_size, root);
    char failure[160];
    snprintf(failure, sizeof(failure),
             "gw_comm_grow: the job grew to %u ranks, but the grown communicator did not form",
             m.new_size);
    return gw__comm_rebuild(comm, m.new_rank, (int)m.new_size, root, failure, out);
}

gw_status_t gw_comm_joiners(gw_comm_t *comm, int *n)
{
    if (n)
        *n = 0;
    if (!comm || !n)
        return GW_ERR_INVALID_ARG;
    /* A sub-communicator has no late listener: its root's job has (grow
     * the communicator gw_comm_init made). Read without a lock, from any
     * thread: the bootstrap lives as long as comm, the count is atomic. */
    if (comm->root) {
        GW_ERROR(&comm->log, "api",
                 "gw_comm_joiners: sub-communicator 0x%08x admits nobody: ask the communicator "
                 "gw_comm_init made, which gw_comm_grow grows",
                 (unsigned)comm->id);
        return GW_ERR_UNSUPPORTED;
    }
    *n = comm->rank == 0 ? gw__bootstrap_joiners(comm->bootstrap) : 0;
    return GW_OK;
}

gw_status_t gw_comm_join(const gw_config_t *cfg, int wait_ms, gw_comm_t **out)
{
    if (out)
        *out = NULL;
    if (!out || wait_ms < 0)
        return GW_ERR_INVALID_ARG;
    gw_config_t c;
    gw_logger_t lg;
    gw_status_t st = gw__logger_init(&lg, -1);
    if (st != GW_OK)
        return st;
    if (cfg && (st = gw__config_import(cfg, &c, &lg)) != GW_OK) {
        gw__logger_fini(&lg);
        return st;
    }
    if (!cfg)
        gw_config_init(&c);
    if (!c.root)
        c.root = getenv("GW_ROOT");
    /* The token as gw_comm_init_env finds it (the caller's, GW_JOB_TOKEN,
     * GW_JOB_TOKEN_FILE's first line); without one the bootstrap refuses
     * to join unless GW_INSECURE=1, as it refuses to form a job. */
    char file_token[512];
    long insecure = 0;
    st = gw__env_check_all(&lg, 0); /* as gw_comm_init: every set GW_* is checked */
    if (st == GW_OK && !c.job_token)
        st = gw__env_str(&lg, GW_ENV_JOB_TOKEN, &c.job_token);
    if (st == GW_OK && !c.job_token)
        st = gw__launch_env_token_file(&lg, file_token, sizeof(file_token), &c.job_token);
    if (st == GW_OK)
        st = gw__env_int(&lg, GW_ENV_INSECURE, &insecure);
    char root[300];
    gw_bs_members_t m;
    if (st == GW_OK)
        st = gw__bootstrap_join(&lg, c.root, c.job_token, (int)insecure,
                                wait_ms ? wait_ms : JOIN_WAIT_DEFAULT_MS, root, sizeof(root), &m);
    if (st == GW_OK)
        GW_INFO(&lg, "api", "gw_comm_join: admitted as rank %d of %u (root %s)", m.new_rank,
                m.new_size, root);
    gw__logger_fini(&lg);
    if (st == GW_OK) {
        /* The address it knocked at is the job's root port for it too:
         * were it rank 0's heir one day, it would listen there. */
        int join_port = gw__comm_root_port(c.root);
        c.rank = m.new_rank;
        c.size = (int)m.new_size;
        c.root = root;
        st = gw_comm_init(&c, out);
        if (st == GW_OK)
            (*out)->recipe.join_port = join_port;
    }
    explicit_bzero(file_token, sizeof(file_token));
    return st;
}
