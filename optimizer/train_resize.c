/*
 * train_resize.c - `--resume` on another number of ranks than wrote the
 * checkpoint.
 *
 * Data parallelism keeps the weights and the momentum identical on every
 * rank, so any rank's file holds the whole model state; a rank that has no
 * file of its own (the job grew) reads rank 0's. What does depend on the
 * number of ranks is the sharding and the local batch: the data is
 * re-sharded over the new world (data_shard.c), the global batch stays as
 * --batch says (split over the ranks, unevenly with --elastic), and the
 * position is renumbered: the same epoch and the same step in it (clamped
 * to the new epoch length), the global step counted again from those, so
 * the learning-rate schedule goes on where it was. The shuffle of that
 * epoch replays from the generator state the checkpoint stores, on the new
 * shards: the rest of the epoch may see a few samples twice or not at
 * all. The epoch's running sums are the writing rank's alone, so that
 * epoch's train loss and accuracy cover part of the epoch; the test
 * figures are exact. A codec's error feedback is per rank and cannot be
 * re-sharded: such a checkpoint resumes only on its own rank count.
 */
#include <stdio.h>
#include <string.h>

#include "train_sync.h"
#include "trainer.h"

gw_status_t gw_train_resume_read(gw_train_sync_t *s, uint64_t step, char *path, size_t cap,
                                 gw_train_ckpt_t *c)
{
    gw_train_ckpt_path(s->o->ckpt_dir, step, 0, path, cap);
    gw_status_t st = gw_train_ckpt_read(path, c);
    if (st != GW_OK || s->rank == 0 || (uint32_t)s->rank >= c->world)
        return st;
    /* A rank of the writing job: its own file (a codec's state is its own).
     * A file of this rank from a larger job of long ago may share the step
     * number (an elastic run renumbers its steps): it is refused. */
    uint32_t world = c->world;
    gw_train_ckpt_release(c);
    gw_train_ckpt_path(s->o->ckpt_dir, step, (uint32_t)s->rank, path, cap);
    if ((st = gw_train_ckpt_read(path, c)) != GW_OK)
        return st;
    if (c->world != world) {
        fprintf(stderr,
                "gradwire-train: checkpoint %s was written by a job of %u ranks, rank 0's of "
                "the same step by %u: the directory is inconsistent\n",
                path, c->world, world);
        gw_train_ckpt_release(c);
        return GW_ERR_CONFIG;
    }
    return GW_OK;
}

int gw_train_resume_other_world(gw_train_sync_t *s, const gw_train_ckpt_t *c, const char *path)
{
    if (c->world == (uint32_t)s->world)
        return 0;
    char theirs[sizeof(s->config)];
    gw_train_opts_fingerprint(s->o, (int)c->world, theirs, sizeof(theirs));
    if (strcmp(theirs, c->config) != 0) {
        fprintf(stderr,
                "gradwire-train: checkpoint %s was written with other settings:\n  checkpoint: "
                "%s\n  this run:   %s\n",
                path, c->config, theirs);
        return -1;
    }
    if (c->codec_len > 0 || s->codec) {
        fprintf(stderr,
                "gradwire-train: checkpoint %s of %u ranks holds a codec's per-rank error "
                "feedback: it resumes on %u ranks only, not %d\n",
                path, c->world, c->world, s->world);
        return -1;
    }
    return 1;
}

void gw_train_resume_renumber(gw_train_sync_t *s, const gw_train_ckpt_t *c)
{
    if (s->step >= s->spe)
        s->step = s->spe - 1;
    s->gstep = s->epoch * s->spe + s->step;
    if (s->rank == 0)
        printf("gradwire-train: resuming a checkpoint of %u ranks on %d: data re-sharded, "
               "global batch %d (%zu per rank), epoch %ld step %ld of %ld\n",
               c->world, s->world, s->o->batch, s->local_b, s->epoch + 1, s->step, s->spe);
}
