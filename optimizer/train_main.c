/*
 * train_main.c - gradwire-train's entry point: the command line, the
 * communicator, and the choice between synchronous training, parameter-
 * server training and the scaling driver.
 *
 * Ranks come from the environment (`gradwire launch`, torchrun-style
 * variables, mpirun, srun); started alone, without any of those, the
 * trainer runs as a single rank.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"
#include "model_parallel.h"

/* Whether a launcher told us our rank. */
static int launched(void)
{
    static const char *vars[] = {"GW_RANK",  "RANK",         "OMPI_COMM_WORLD_RANK",
                                 "PMI_RANK", "SLURM_PROCID", NULL};
    for (int i = 0; vars[i]; i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

static int check_data(const gw_train_opts_t *o, int rank, int world)
{
    gw_train_dataset_t train, test;
    if (gw_train_load_data(o, rank, world, &train, &test) != GW_OK)
        return 1;
    printf("rank %d of %d: train %zu of %zu samples, test %zu of %zu, %zu features, %d "
           "classes\n",
           rank, world, train.n, train.total, test.n, test.total, train.dim, train.nclasses);
    gw_train_dataset_free(&train);
    gw_train_dataset_free(&test);
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--scaling") == 0 && i + 1 < argc)
            return gw_train_scaling_main(argc, argv, argv[i + 1]);
        if (strncmp(argv[i], "--scaling=", 10) == 0)
            return gw_train_scaling_main(argc, argv, argv[i] + 10);
    }
    gw_train_opts_t o;
    int rc = gw_train_parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.check_data && !launched())
        return check_data(&o, 0, 1);
    /* A model-parallel run without --checkpoint-dir has nothing to save:
     * SIGTERM ends it at once, as it would any program, instead of being
     * held for a checkpoint. */
    int model_parallel = o.tensor_parallel > 1 || o.pipeline_parallel > 1 || o.dump_grads;
    if (!model_parallel || o.ckpt_dir)
        gw_train_install_signals();

    /* Checked by every rank before it joins, so the refusal is a usage
     * error (exit 2) of the command line, not a failed job. */
    int writes_checkpoints = o.ckpt_dir && o.mode != GW_TRAIN_ASYNC;
    if (writes_checkpoints && o.resume && gw_train_ckpt_check_resume(o.ckpt_dir) != GW_OK)
        return 2;

    /* --trace FILE is GW_TRACE=FILE for the library (collectives/comm/
     * trace.c); the step adds its compute spans (train_sync.c). */
    if (o.trace)
        setenv("GW_TRACE", o.trace, 1);
    gw_comm_t *comm = NULL;
    gw_status_t st;
    if (o.join) {
        /* A new rank of a running --elastic job (train_grow.c): its place
         * comes from the job's rank 0 at the members' next epoch start. */
        st = gw_comm_join(NULL, o.join_wait_s * 1000, &comm);
    } else if (launched()) {
        st = gw_comm_init_env(&comm);
    } else {
        gw_config_t cfg;
        gw_config_init(&cfg);
        cfg.rank = 0;
        cfg.size = 1;
        st = gw_comm_init(&cfg, &comm);
    }
    if (st != GW_OK) {
        fprintf(stderr, "gradwire-train: cannot join the job: %s (%s)\n", gw_status_str(st),
                gw_status_name(st));
        return 1;
    }
    /* Before rank 0's first collective call: no rank can be writing yet
     * (checkpoint_dir.c). A joiner is never rank 0 of the first members. */
    if (writes_checkpoints && !o.join && gw_comm_rank(comm) == 0)
        gw_train_ckpt_clean_tmp(o.ckpt_dir);
    if (o.check_data)
        rc = check_data(&o, gw_comm_rank(comm), gw_comm_size(comm));
    else if (model_parallel)
        rc = gw_train_run_model_parallel(&o, comm);
    else if (o.mode == GW_TRAIN_ASYNC)
        rc = gw_train_run_async(&o, comm);
    else
        rc = gw_train_run_sync(&o, comm);
    /* A failed rank aborts, so peers stuck in a collective fail fast
     * instead of waiting for the timeout. */
    if (rc != 0 && rc != 128 + SIGTERM && gw_comm_size(comm) > 1)
        gw_comm_abort(comm);
    int rank = gw_comm_rank(comm), size = gw_comm_size(comm);
    gw_comm_destroy(comm); /* closes this rank's trace file */
    /* Rank 0 merges every rank's timeline once they closed theirs (a rank
     * that is slow to leave gets 10 s). */
    int merged, events;
    if (o.trace && rank == 0 && gw_kit_trace_merge(o.trace, size, 10000, &merged, &events) == 0 &&
        merged)
        fprintf(stderr, "gradwire-train: trace of %d of %d ranks (%d events) in %s\n", merged, size,
                events, o.trace);
    return rc;
}
