/*
 * param_server.h - the state of parameter-server (asynchronous) training,
 * shared by param_server.c (the server and worker loops) and ps_links.c
 * (the per-pair communicators they talk over).
 */
#ifndef GW_OPTIMIZER_PARAM_SERVER_H
#define GW_OPTIMIZER_PARAM_SERVER_H

#include <pthread.h>

#include "straggler.h"
#include "trainer.h"

#define GW_TRAIN_PS_MAX 256    /* servers and workers, each */
#define GW_TRAIN_PS_RETIRED 64 /* --elastic: shrinks a run survives */

typedef struct gw_train_ps {
    const gw_train_opts_t *o;
    gw_comm_t *comm; /* the job's: setup and the final gathering only */
    int rank, world, nservers, nworkers;
    int is_server, index; /* server s or worker w */
    char addr[GW_TRAIN_PS_MAX][64];
    int *port;    /* [server * nworkers + worker] */
    int *hold_fd; /* server: [worker] a socket holding that port until its link is up, or -1 */

    gw_train_dataset_t train, test;
    gw_train_mlp_t model;           /* the full model (servers own a shard of it) */
    size_t lo[GW_TRAIN_PS_MAX + 1]; /* server s owns params [lo[s], lo[s+1]) */
    size_t local_b;
    long spe; /* steps per epoch of one worker */

    /* The phase: the pushes each worker makes in it (all of the run's
     * without --elastic; what is left of them, shared by the survivors,
     * after a shrink), and the epoch its first pass counts as. */
    long budget;
    long epoch0;
    long planned; /* pushes of the whole run, over all workers */

    /* Server side, under lock. */
    pthread_mutex_t lock;
    gw_comm_t **links;    /* [worker], set once open: aborted on the first failure */
    pthread_cond_t moved; /* a worker's clock advanced or a worker finished */
    gw_train_sgd_t sgd;
    long updates;
    long *clock;
    int *done;
    long max_gap, max_lag;
    gw_status_t failed;
    /* --elastic, rank 0 (server 0): a process waits to join, so this phase
     * ends at every worker's next pull (ps_grow.c admits it). */
    int grow_now;

    /* Worker side: the largest lead this worker saw itself have over the
     * mean clock of the other workers, from the versions the servers sent
     * back (a check of the staleness bound that does not read the server's
     * own bookkeeping). */
    double max_lead;
    gw_train_straggler_t slow;        /* only its test slowdown (GW_TRAIN_TEST_SLOW, job rank) */
    int64_t version[GW_TRAIN_PS_MAX]; /* the server versions of the weights it holds */
    int pulled;                       /* it holds weights pulled from every server */
    int grow_seen;                    /* server 0 ended the phase to admit a joiner */

    /* --elastic (ps_elastic.c): the communicators shrinks replaced, kept
     * until the end as train_elastic.c keeps them. */
    gw_comm_t *retired[GW_TRAIN_PS_RETIRED];
    int nretired;
} gw_train_ps_t;

/* ---- param_server.c: a phase's roles, shards and data ---- */
gw_status_t gw_train_ps_plan(gw_train_ps_t *ps, int nservers);
/* The model of the data ps holds (gw_train_ps_plan loaded it), with room
 * for ps->local_b samples a step, its weights drawn from the seed, and the
 * servers' shards of it. */
gw_status_t gw_train_ps_model_init(gw_train_ps_t *ps);
/* The rest of the run once `applied` of its planned pushes are made, for
 * a phase planned by gw_train_ps_plan: this rank's share of the pushes
 * left (ps->budget: the workers split them, the first ones one more) and
 * the epoch the phase starts in (ps->epoch0); a server counts the pushes
 * made as its own (ps->updates). Returns the pushes left. */
long gw_train_ps_share_left(gw_train_ps_t *ps, int64_t applied);
/* The test accuracy of the weights every rank holds (each rank evaluates
 * its shard of the test set; one allreduce). */
gw_status_t gw_train_ps_evaluate(gw_train_ps_t *ps, double *acc);

/* ---- ps_elastic.c ---- */
/* After the asynchronous phase failed on the job's communicator with
 * another rank to blame: shrink, agree on the weights and the momentum
 * that survived, split the roles and the rest of the run over the
 * survivors. GW_OK: run another phase on ps->comm. */
gw_status_t gw_train_ps_recover(gw_train_ps_t *ps, gw_status_t failure);
void gw_train_ps_retired_free(gw_train_ps_t *ps);

/* ---- ps_grow.c ---- */
/* After a phase that rank 0 ended for a process waiting to join: admit it
 * (gw_comm_grow), and make the next phase with it as a worker. GW_OK: run
 * another phase on ps->comm. */
gw_status_t gw_train_ps_grow(gw_train_ps_t *ps);
/* A process started with --join, admitted on comm: take the run's state
 * from the members as they make their next phase. GW_OK: run it. */
gw_status_t gw_train_ps_joined(gw_train_ps_t *ps);

gw_status_t gw_train_ps_links_exchange(gw_train_ps_t *ps);
void gw_train_ps_links_release(gw_train_ps_t *ps);
gw_status_t gw_train_ps_link_open(const gw_train_ps_t *ps, int server, int worker, int as_server,
                                  gw_comm_t **out);

#endif
