/*
 * train_mp_ckpt.c - checkpoints of a model-parallel run (--tensor-parallel,
 * --pipeline-parallel, the rest data parallel).
 *
 * No rank holds the whole model, so each writes its own part in the
 * trainer's checkpoint format (checkpoint.c): its stage's share of the
 * parameters and of the momentum (or, with --zero, its shard of the
 * momentum: format version 2), with the position (epoch, step, the shuffle
 * generator as the epoch began, the epoch's sums) and the settings, to
 * which the grid is added: data x pipeline x tensor, the micro-batches,
 * the schedule and --zero. `latest` names a step once every rank has its
 * file (checkpoint_commit.c).
 *
 * A part only fits the same place of the same grid: resuming on another
 * grid is refused, saying the checkpoint's grid and this run's (the
 * data-parallel trainer can resume on another rank count because every
 * rank holds the whole model; here a checkpoint would have to be re-split,
 * which this trainer does not do).
 */
#include <stdio.h>
#include <string.h>

#include "train_mp.h"

void gw_train_mp_fingerprint(mp_run_t *r)
{
    const gw_train_opts_t *o = r->o;
    gw_train_opts_fingerprint(o, r->g.world, r->config, sizeof(r->config));
    size_t used = strlen(r->config);
    snprintf(r->config + used, sizeof(r->config) - used,
             " grid=%ddata,%dpipeline,%dtensor micro=%d schedule=%s zero=%d", r->g.dp, r->g.pp,
             r->g.tp, r->micro, o->schedule_1f1b ? "1f1b" : "gpipe", o->zero);
}

gw_status_t gw_train_mp_checkpoint(mp_run_t *r, double elapsed_s)
{
    gw_train_ckpt_t c;
    memset(&c, 0, sizeof(c));
    c.rank = (uint32_t)r->g.rank;
    c.world = (uint32_t)r->g.world;
    c.epoch = (uint64_t)r->epoch;
    c.step_in_epoch = (uint64_t)r->step;
    c.global_step = (uint64_t)r->gstep;
    /* At an epoch boundary the next epoch has not shuffled yet. */
    c.rng = r->step == 0 ? r->rng : r->rng_epoch;
    c.elapsed_s = elapsed_s;
    c.time_to_target_s = r->rep.time_to_target_s;
    c.epoch_loss_sum = r->ep_loss;
    c.epoch_correct = r->ep_correct;
    c.epoch_seen = r->ep_seen;
    snprintf(c.config, sizeof(c.config), "%s", r->config);
    c.nparams = r->st.nparams;
    c.params = r->st.params;
    c.velocity = r->o->zero ? r->zg.velocity : r->st.velocity;
    c.velocity_len = r->o->zero ? r->zg.vlen : r->st.nparams;
    return gw_train_ckpt_commit(r->g.world_comm, r->o->ckpt_dir, &c, GW_OK, &r->last_ckpt);
}

/* The grid part of a recorded configuration ("" when there is none). */
static const char *grid_of(const char *config)
{
    const char *g = strstr(config, " grid=");
    return g ? g + 1 : "";
}

/* This rank's part of the latest step into r, checked. */
static gw_status_t load(mp_run_t *r)
{
    uint64_t step;
    gw_status_t st = gw_train_ckpt_get_latest(r->o->ckpt_dir, &step);
    if (st == GW_ERR_NOT_FOUND) {
        if (r->g.rank == 0)
            fprintf(stderr, "gradwire-train: no checkpoint in %s yet; starting from scratch\n",
                    r->o->ckpt_dir);
        return GW_OK;
    }
    if (st != GW_OK)
        return st;
    char path[4096];
    gw_train_ckpt_path(r->o->ckpt_dir, step, (uint32_t)r->g.rank, path, sizeof(path));
    gw_train_ckpt_t c;
    if ((st = gw_train_ckpt_read(path, &c)) != GW_OK)
        return st;
    size_t vlen = r->o->zero ? r->zg.vlen : r->st.nparams;
    float *velocity = r->o->zero ? r->zg.velocity : r->st.velocity;
    st = GW_ERR_CONFIG;
    if (strcmp(grid_of(c.config), grid_of(r->config)) != 0) {
        fprintf(stderr,
                "gradwire-train: checkpoint %s was written by a model-parallel run on another "
                "grid:\n  checkpoint: %s\n  this run:   %s\n"
                "a model-parallel checkpoint resumes only on the grid that wrote it (each rank "
                "holds its own part of the model); run with the checkpoint's --tensor-parallel, "
                "--pipeline-parallel, rank count, --micro-batches, --schedule and --zero\n",
                path, grid_of(c.config)[0] ? grid_of(c.config) : "(none: a data-parallel run)",
                grid_of(r->config));
    } else if (strcmp(c.config, r->config) != 0) {
        fprintf(stderr,
                "gradwire-train: checkpoint %s was written with other settings:\n  checkpoint: "
                "%s\n  this run:   %s\n",
                path, c.config, r->config);
    } else if (c.rank != (uint32_t)r->g.rank || c.world != (uint32_t)r->g.world) {
        fprintf(stderr, "gradwire-train: checkpoint %s belongs to rank %u of %u, not %d of %d\n",
                path, c.rank, c.world, r->g.rank, r->g.world);
    } else if (c.nparams != r->st.nparams || c.velocity_len != vlen || c.codec_len != 0) {
        fprintf(stderr,
                "gradwire-train: checkpoint %s holds %zu parameters and %zu momentum values; "
                "this rank's part has %zu and %zu\n",
                path, c.nparams, c.velocity_len, r->st.nparams, vlen);
    } else if (c.step_in_epoch > (uint64_t)r->spe || c.global_step != step) {
        fprintf(stderr, "gradwire-train: checkpoint %s has an impossible position\n", path);
    } else {
        memcpy(r->st.params, c.params, c.nparams * sizeof(float));
        memcpy(velocity, c.velocity, vlen * sizeof(float));
        r->rng = c.rng;
        r->epoch = (long)c.epoch;
        r->step = (long)c.step_in_epoch;
        r->gstep = (long)c.global_step;
        r->elapsed0 = c.elapsed_s;
        r->rep.time_to_target_s = c.time_to_target_s;
        r->ep_loss = c.epoch_loss_sum;
        r->ep_correct = (long)c.epoch_correct;
        r->ep_seen = (long)c.epoch_seen;
        r->last_ckpt = step;
        r->resumed = 1;
        st = GW_OK;
    }
    gw_train_ckpt_release(&c);
    return st;
}

gw_status_t gw_train_mp_resume(mp_run_t *r)
{
    return gw_train_ckpt_agree_start(r->g.world_comm, r->gstep, load(r));
}
