/*
 * ps_grow.c - `gradwire train --async --elastic` admits new ranks while it
 * runs; `--async --elastic --join` is such a new rank.
 *
 * An asynchronous job has no step that every rank reaches together, so it
 * cannot call gw_comm_grow at an agreed step as the synchronous trainer
 * does (train_grow.c). Instead rank 0, which is server 0 and which every
 * worker pushes to at every step, asks the library after each update it
 * applies whether a process waits to join (gw_comm_joiners: a count rank
 * 0's referee keeps). When one does, server 0 marks its answers, each
 * worker ends the phase at its next pull (it says DONE to every server,
 * as at the end of its run), and the ranks meet on the job's
 * communicator, as after a failure. There they grow (gw_comm_grow): the
 * members keep their ranks, so the servers stay ranks 0..S-1, and each
 * joiner comes after them as a new worker. Then every rank, the joiners
 * too, makes the next phase:
 *
 *  - The run's constants, from rank 0: the local batch (an update keeps
 *    its meaning, as after a shrink), the pushes planned for the whole
 *    run and the number of servers.
 *  - The updates made: every push of the phase reached every server
 *    before its worker pulled, so the servers agree; one allreduce (MAX).
 *  - The weights and the momentum stay where they are: nobody was lost,
 *    each server keeps its shard and that shard's momentum, and every
 *    worker, a joiner too, pulls the weights at the phase's start.
 *  - The roles and the data: the servers keep their shards; the workers,
 *    joiners included, re-shard the training data among them (worker w of
 *    W keeps the samples i with i % W == w), and share the updates left.
 *
 * The old communicator is kept until the run ends, as a shrink's is. A
 * joiner that left before the grow (it gave up waiting) leaves nothing
 * to admit: the members go on among themselves, from the same state.
 */
#include <stdio.h>

#include "param_server.h"

/* The run's constants as rank 0 has them: every rank then plans alike. */
static gw_status_t share_run(gw_train_ps_t *ps, int *nservers)
{
    int64_t c[3] = {(int64_t)ps->local_b, ps->planned, ps->nservers};
    gw_status_t st = gw_broadcast(ps->comm, c, c, 3, GW_INT64, 0);
    if (st != GW_OK)
        return st;
    ps->local_b = (size_t)c[0];
    ps->planned = c[1];
    *nservers = (int)c[2];
    return GW_OK;
}

/* The updates the servers made, on every rank. */
static gw_status_t share_applied(gw_train_ps_t *ps, int64_t *applied)
{
    *applied = ps->is_server ? ps->updates : 0;
    return gw_allreduce(ps->comm, applied, applied, 1, GW_INT64, GW_MAX);
}

gw_status_t gw_train_ps_grow(gw_train_ps_t *ps)
{
    if (ps->nretired == GW_TRAIN_PS_RETIRED) {
        fprintf(stderr, "gradwire-train: --elastic: %d shrinks and grows already; admits no more\n",
                GW_TRAIN_PS_RETIRED);
        return GW_ERR_UNSUPPORTED;
    }
    gw_comm_t *nc = NULL;
    int old_world = ps->world;
    gw_status_t st = gw_comm_grow(ps->comm, &nc);
    if (st != GW_OK)
        return st;
    if (nc) {
        ps->retired[ps->nretired++] = ps->comm;
        ps->comm = nc;
        ps->rank = gw_comm_rank(nc);
        ps->world = gw_comm_size(nc);
    }
    int S = 0;
    int64_t applied = 0;
    if ((st = share_run(ps, &S)) == GW_OK && (st = share_applied(ps, &applied)) == GW_OK)
        st = gw_train_ps_plan(ps, S);
    if (st != GW_OK) {
        fprintf(stderr, "gradwire-train: --elastic: rank %d cannot go on after the grow: %s\n",
                ps->rank, gw_status_name(st));
        return st;
    }
    long left = gw_train_ps_share_left(ps, applied);
    if (ps->rank == 0) {
        char who[64] = "none (the joiner left before the grow)";
        if (ps->world == old_world + 1)
            snprintf(who, sizeof(who), "rank(s) %d", old_world);
        else if (ps->world > old_world)
            snprintf(who, sizeof(who), "rank(s) %d-%d", old_world, ps->world - 1);
        printf("gradwire-train: --elastic: admitted %s after %lld updates; %d server(s) and %d "
               "worker(s) go on with %ld updates left (%zu samples per update)\n",
               who, (long long)applied, ps->nservers, ps->nworkers, left, ps->local_b);
        fflush(stdout);
    }
    return GW_OK;
}

gw_status_t gw_train_ps_joined(gw_train_ps_t *ps)
{
    int S = 0;
    int64_t applied = 0;
    gw_status_t st = gw_train_test_slow(ps->rank, &ps->slow.slow_s_per_sample);
    /* Nothing of its own before the members' first call: the constants,
     * then the data and a model of the right shape to pull the weights
     * into. A joiner comes after the members, a worker among them, so it
     * is a worker too. */
    if (st == GW_OK)
        st = share_run(ps, &S);
    if (st == GW_OK && S >= ps->world)
        st = GW_ERR_PROTOCOL;
    if (st == GW_OK)
        st = gw_train_ps_plan(ps, S);
    if (st == GW_OK)
        st = gw_train_ps_model_init(ps);
    if (st == GW_OK)
        st = share_applied(ps, &applied);
    if (st != GW_OK) {
        fprintf(stderr, "gradwire-train: --join: cannot take the run's state: %s\n",
                gw_status_name(st));
        return st;
    }
    long left = gw_train_ps_share_left(ps, applied);
    printf("gradwire-train: --elastic --join: rank %d of %d (worker %d of %d) after %lld updates, "
           "with %ld of the %ld updates left\n",
           ps->rank, ps->world, ps->index, ps->nworkers, (long long)applied, ps->budget, left);
    fflush(stdout);
    return GW_OK;
}
