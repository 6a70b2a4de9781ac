/*
 * param_server.h - the state of parameter-server (asynchronous) training,
 * shared by param_server.c (the server and worker loops) and ps_links.c
 * (the per-pair communicators they talk over).
 */
#ifndef GW_OPTIMIZER_PARAM_SERVER_H
#define GW_OPTIMIZER_PARAM_SERVER_H

#include <pthread.h>

#include "trainer.h"

#define GW_TRAIN_PS_MAX 256 /* servers and workers, each */

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

    /* Server side, under lock. */
    pthread_mutex_t lock;
    pthread_cond_t moved; /* a worker's clock advanced or a worker finished */
    gw_train_sgd_t sgd;
    long updates;
    long *clock;
    int *done;
    long max_gap, max_lag;
    gw_status_t failed;

    /* Worker side: the largest lead this worker saw itself have over the
     * mean clock of the other workers, from the versions the servers sent
     * back (a check of the staleness bound that does not read the server's
     * own bookkeeping). */
    double max_lead;
} gw_train_ps_t;

gw_status_t gw_train_ps_links_exchange(gw_train_ps_t *ps);
void gw_train_ps_links_release(gw_train_ps_t *ps);
gw_status_t gw_train_ps_link_open(const gw_train_ps_t *ps, int server, int worker, int as_server,
                                  gw_comm_t **out);

#endif
