/*
 * checkpoint_commit.c - one checkpoint step of a job, every rank at once:
 * each rank writes its file (checkpoint.c), then `latest` names the step
 * only once every rank has its file, and nobody goes on (and perhaps
 * exits) before that is durable; then each rank prunes its older files.
 * And the agreement of every rank on the step a resume starts from. Used
 * by the data-parallel trainer (train_sync.c) and the model-parallel one
 * (train_mp_ckpt.c), whose ranks each write their own part.
 */
#include <stdint.h>
#include <stdio.h>

#include "trainer.h"

static gw_status_t agreement_failed(gw_status_t st)
{
    fprintf(stderr, "gradwire-train: checkpoint agreement failed: %s (%s)\n", gw_status_str(st),
            gw_status_name(st));
    return st;
}

gw_status_t gw_train_ckpt_commit(gw_comm_t *comm, const char *dir, const gw_train_ckpt_t *c,
                                 gw_status_t local, uint64_t *last_ckpt)
{
    gw_status_t st = local;
    if (st == GW_OK)
        st = gw_train_ckpt_write(dir, c);
    /* A rank whose write failed passes its status on through the allreduce. */
    int32_t ok = st == GW_OK, all_ok = ok;
    gw_status_t cst = gw_allreduce(comm, &ok, &all_ok, 1, GW_INT32, GW_MIN);
    if (cst != GW_OK)
        return agreement_failed(cst);
    if (!all_ok) {
        fprintf(stderr, "gradwire-train: checkpoint of step %llu failed on some rank\n",
                (unsigned long long)c->global_step);
        return st != GW_OK ? st : GW_ERR_REMOTE;
    }
    if (gw_comm_rank(comm) == 0)
        st = gw_train_ckpt_set_latest(dir, c->global_step);
    ok = st == GW_OK;
    if ((cst = gw_allreduce(comm, &ok, &all_ok, 1, GW_INT32, GW_MIN)) != GW_OK)
        return agreement_failed(cst);
    if (!all_ok)
        return st != GW_OK ? st : GW_ERR_REMOTE;
    gw_train_ckpt_prune(dir, c->rank, c->global_step, *last_ckpt);
    *last_ckpt = c->global_step;
    return GW_OK;
}

gw_status_t gw_train_ckpt_agree_start(gw_comm_t *comm, long gstep, gw_status_t local)
{
    int64_t v[2] = {local == GW_OK ? gstep : -1, local == GW_OK ? -gstep : -INT64_MAX};
    gw_status_t st = gw_allreduce(comm, v, v, 2, GW_INT64, GW_MIN);
    if (st != GW_OK) {
        fprintf(stderr, "gradwire-train: resume agreement failed: %s (%s)\n", gw_status_str(st),
                gw_status_name(st));
        return st;
    }
    if (local != GW_OK)
        return local;
    if (v[0] < 0)
        return GW_ERR_REMOTE; /* another rank failed and said why */
    if (v[0] != -v[1]) {
        fprintf(stderr,
                "gradwire-train: ranks resumed from different steps (%lld..%lld); the "
                "checkpoint directory is inconsistent\n",
                (long long)v[0], (long long)-v[1]);
        return GW_ERR_CONFIG;
    }
    return GW_OK;
}
