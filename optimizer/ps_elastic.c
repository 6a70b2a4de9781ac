/*
 * ps_elastic.c - `gradwire train --async --elastic`: parameter-server SGD
 * that survives the loss of servers and workers.
 *
 * A failure ends the asynchronous phase on every rank (param_server.c) and
 * the ranks meet on the job's communicator. When that names another rank
 * (dead, or stopped past the timeout), the survivors shrink the job
 * (gw_comm_shrink: they agree on who is left, renumbered in order) and
 * make a new phase of what they hold:
 *
 *  - The weights. A server's shard is its own, current; a lost server's
 *    shard is taken from the worker that pulled it last (the highest
 *    version it received from that server), which is as stale as any
 *    worker's view is in asynchronous SGD: the updates made after that
 *    pull are lost with the server. One allreduce (MAX) of each shard's
 *    freshest version, one (MIN) of who holds it, one (SUM) of the
 *    shards, each from its holder: every rank then has the same weights,
 *    whose test accuracy rank 0 reports with the loss.
 *  - The momentum. Only a server holds its shard's, so a lost server's
 *    shard starts again from zero (said in the report line); the others
 *    come across whole (one allreduce, SUM, each shard from its server).
 *  - The roles. The surviving servers stay servers, in their order, and
 *    split the parameters among them again; with none left, the first
 *    worker becomes the one server, and with no worker left, the last
 *    server works. The workers, as many as are left,
 *    re-shard the training data among them (worker w of W keeps the
 *    samples i with i % W == w, as at the start).
 *  - The rest of the run. The local batch stays what it was, so an update
 *    means what it meant and the learning rate schedule (counted in
 *    updates) goes on; the updates still to make are those planned for
 *    the run less those the servers applied (the most any server
 *    counted), shared by the workers left. The epoch count of the report
 *    goes on from the updates made.
 *
 * The old communicators are kept until the run ends (as train_elastic.c
 * keeps them), so that a stopped rank that wakes late is told it was left
 * out. A process started with --join is admitted while the run goes on
 * (ps_grow.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "param_server.h"

void gw_train_ps_retired_free(gw_train_ps_t *ps)
{
    /* retired[0] is the caller's communicator, the caller's to destroy;
     * the last shrink's is ps->comm. */
    for (int i = ps->nretired - 1; i >= 1; i--)
        gw_comm_destroy(ps->retired[i]);
    if (ps->nretired > 0)
        gw_comm_destroy(ps->comm);
    ps->nretired = 0;
}

/* Who holds each old server's shard best: its server (INT64_MAX) or the
 * worker with the freshest pull; every rank ends with the weights. */
static gw_status_t agree_weights(gw_train_ps_t *ps, int old_S, const size_t *old_lo, int old_server,
                                 int *lost_shards)
{
    int64_t mine[GW_TRAIN_PS_MAX], key[GW_TRAIN_PS_MAX];
    int32_t who[GW_TRAIN_PS_MAX];
    for (int s = 0; s < old_S; s++)
        key[s] = mine[s] =
            old_server == s ? INT64_MAX : (old_server < 0 && ps->pulled ? ps->version[s] : -1);
    gw_status_t st = gw_allreduce(ps->comm, key, key, (size_t)old_S, GW_INT64, GW_MAX);
    if (st != GW_OK)
        return st;
    for (int s = 0; s < old_S; s++)
        who[s] = key[s] >= 0 && mine[s] == key[s] ? ps->rank : INT32_MAX;
    if ((st = gw_allreduce(ps->comm, who, who, (size_t)old_S, GW_INT32, GW_MIN)) != GW_OK)
        return st;
    float *w = ps->model.params;
    *lost_shards = 0;
    for (int s = 0; s < old_S; s++) {
        if (key[s] < 0) {
            fprintf(stderr,
                    "gradwire-train: --elastic: nobody holds the weights of lost server %d's "
                    "shard\n",
                    s);
            return GW_ERR_REMOTE;
        }
        if (key[s] != INT64_MAX)
            (*lost_shards)++;
        if (who[s] != ps->rank)
            memset(w + old_lo[s], 0, (old_lo[s + 1] - old_lo[s]) * sizeof(float));
    }
    return gw_allreduce(ps->comm, w, w, ps->model.nparams, GW_FLOAT32, GW_SUM);
}

/* The momentum of the shards whose servers survived; zero for the rest. */
static gw_status_t agree_momentum(gw_train_ps_t *ps, const size_t *old_lo, int old_server,
                                  float *vel)
{
    size_t n = ps->model.nparams;
    memset(vel, 0, n * sizeof(float));
    if (old_server >= 0 && ps->sgd.velocity)
        memcpy(vel + old_lo[old_server], ps->sgd.velocity + old_lo[old_server],
               (old_lo[old_server + 1] - old_lo[old_server]) * sizeof(float));
    return gw_allreduce(ps->comm, vel, vel, n, GW_FLOAT32, GW_SUM);
}

gw_status_t gw_train_ps_recover(gw_train_ps_t *ps, gw_status_t failure)
{
    gw_comm_t *old = ps->comm;
    if (ps->nretired == GW_TRAIN_PS_RETIRED) {
        fprintf(stderr, "gradwire-train: --elastic: %d shrinks already; giving up\n",
                GW_TRAIN_PS_RETIRED);
        return failure;
    }
    int old_rank = ps->rank, old_S = ps->nservers;
    int old_server = ps->is_server ? ps->index : -1;
    size_t old_lo[GW_TRAIN_PS_MAX + 1];
    memcpy(old_lo, ps->lo, sizeof(old_lo));
    gw_comm_t *nc = NULL;
    int32_t *members = NULL; /* [new rank]: the old rank */
    char lost[512];
    gw_status_t st = gw_train_elastic_shrink(old, failure, &nc, &members, lost, sizeof(lost));
    if (st != GW_OK)
        return st;
    ps->retired[ps->nretired++] = old;
    ps->comm = nc;
    ps->rank = gw_comm_rank(nc);
    ps->world = gw_comm_size(nc);

    float *vel = malloc(ps->model.nparams * sizeof(float) + 1);
    int lost_shards = 0;
    if (!vel) {
        st = GW_ERR_NO_MEMORY;
        goto out;
    }
    int servers_left = 0;
    for (int r = 0; r < ps->world; r++)
        servers_left += members[r] < old_S;
    /* The servers left serve (at least one; the first worker when none
     * is), as long as a worker remains: the last of them works instead. */
    int S = servers_left > 0 ? servers_left : 1;
    if (S > ps->world - 1)
        S = ps->world - 1;
    if (S < 1) {
        fprintf(stderr, "gradwire-train: --elastic: one rank left, and parameter-server "
                        "training needs a server and a worker\n");
        st = GW_ERR_INVALID_ARG;
        goto out;
    }
    /* The updates made: each push reaches every server, which counts it;
     * a worker knows each server's count at its last pull (the count
     * survives in the workers when every server is lost). */
    int64_t applied = ps->is_server ? ps->updates : 0;
    for (int s = 0; !ps->is_server && ps->pulled && s < old_S; s++)
        if (ps->version[s] > applied)
            applied = ps->version[s];
    if ((st = gw_allreduce(nc, &applied, &applied, 1, GW_INT64, GW_MAX)) != GW_OK ||
        (st = agree_weights(ps, old_S, old_lo, old_server, &lost_shards)) != GW_OK ||
        (st = agree_momentum(ps, old_lo, old_server, vel)) != GW_OK)
        goto out;
    /* The new phase's roles, shards and data, and what the weights the
     * survivors go on from are worth. */
    double acc = -1;
    if ((st = gw_train_ps_plan(ps, S)) != GW_OK || (st = gw_train_ps_evaluate(ps, &acc)) != GW_OK)
        goto out;
    long left = gw_train_ps_share_left(ps, applied);
    if (ps->is_server) {
        if (!ps->sgd.velocity && (st = gw_train_sgd_init(&ps->sgd, &ps->model, ps->o->momentum,
                                                         ps->o->weight_decay)) != GW_OK)
            goto out;
        memcpy(ps->sgd.velocity, vel, ps->model.nparams * sizeof(float));
    } else {
        gw_train_sgd_free(&ps->sgd);
    }
    if (ps->rank == 0) {
        printf("gradwire-train: --elastic: lost rank(s) %s after %lld updates; %d server(s) and "
               "%d worker(s) go on with %ld updates left (%zu samples per update) from weights "
               "at %.2f%% test accuracy",
               lost, (long long)applied, ps->nservers, ps->nworkers, left, ps->local_b, 100 * acc);
        if (lost_shards > 0)
            printf("; %d lost server shard(s) taken from the freshest worker copy, their "
                   "momentum restarted at zero",
                   lost_shards);
        if (servers_left == 0)
            printf("; no server was left: the first worker serves");
        else if (S < servers_left)
            printf("; no worker was left: the last server works");
        printf("\n");
        fflush(stdout);
    }
out:
    free(members);
    free(vel);
    if (st != GW_OK)
        fprintf(stderr, "gradwire-train: --elastic: rank %d cannot go on after the shrink: %s\n",
                old_rank, gw_status_name(st));
    return st;
}
