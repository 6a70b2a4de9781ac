/*
 * train_epoch.c - the epoch loop of synchronous training: steps, periodic
 * and SIGTERM checkpoints, and at the end of each epoch the statistics
 * summed over ranks (loss, accuracy, time split) and the test evaluation,
 * each rank evaluating its own shard of the test set.
 */
#include <string.h>

#include "kit.h"
#include "train_sync.h"

/* Sums over ranks: train loss, correct, seen, test loss, correct, count,
 * then the time split (averaged after the sum). */
enum {
    R_LOSS,
    R_OK,
    R_SEEN,
    R_TLOSS,
    R_TOK,
    R_TN,
    R_COMPUTE,
    R_COMM,
    R_CODEC,
    R_WAIT,
    R_SEEN_NOW, /* this pass's samples (ranks' shares differ with --straggler balance) */
    R_N
};

static gw_status_t end_epoch(gw_train_sync_t *s, double epoch_s, long seen_now)
{
    const gw_train_opts_t *o = s->o;
    double v[R_N] = {0};
    int full = s->step == s->spe;
    int eval = s->test.n > 0 && (!full || (s->epoch + 1) % o->eval_every == 0 ||
                                 s->gstep == (long)o->epochs * s->spe);
    double t_eval = gw_kit_now_s();
    if (eval) {
        long ok = 0;
        gw_train_mlp_evaluate(&s->model, &s->test, &v[R_TLOSS], &ok);
        v[R_TOK] = (double)ok;
        v[R_TN] = (double)s->test.n;
    }
    t_eval = gw_kit_now_s() - t_eval;
    v[R_LOSS] = s->ep_loss;
    v[R_OK] = (double)s->ep_correct;
    v[R_SEEN] = (double)s->ep_seen;
    v[R_COMPUTE] = s->compute_s;
    v[R_COMM] = s->bk.comm_s;
    v[R_CODEC] = s->bk.codec_s;
    v[R_WAIT] = s->bk.wait_s;
    v[R_SEEN_NOW] = (double)seen_now;
    gw_status_t st = gw_allreduce(s->comm, v, v, R_N, GW_FLOAT64, GW_SUM);
    if (st != GW_OK) {
        fprintf(stderr, "gradwire-train: allreduce of the epoch statistics failed: %s\n",
                gw_status_str(st));
        return st;
    }
    double elapsed = s->elapsed0 + (gw_kit_now_s() - s->t_start);
    /* Evaluation is measurement, not training: keep it out of the clock. */
    s->eval_s += t_eval;
    elapsed -= s->eval_s;
    gw_train_epoch_stats_t e = {
        .epoch = (int)s->epoch + 1,
        .loss = v[R_SEEN] > 0 ? v[R_LOSS] / v[R_SEEN] : 0,
        .train_acc = v[R_SEEN] > 0 ? v[R_OK] / v[R_SEEN] : 0,
        .test_loss = v[R_TN] > 0 ? v[R_TLOSS] / v[R_TN] : 0,
        .test_acc = v[R_TN] > 0 ? v[R_TOK] / v[R_TN] : -1,
        .samples_per_s = epoch_s > 0 ? v[R_SEEN_NOW] / epoch_s : 0,
        .compute_s = v[R_COMPUTE] / s->world,
        .comm_s = v[R_COMM] / s->world,
        .codec_s = v[R_CODEC] / s->world,
        .wait_s = v[R_WAIT] / s->world,
        .epoch_s = epoch_s,
        .elapsed_s = elapsed,
        .lr = s->lr,
    };
    if (e.test_acc >= o->target_acc && s->time_to_target < 0)
        s->time_to_target = elapsed;
    s->rep.time_to_target_s = s->time_to_target;
    s->rep.steps = s->gstep;
    s->rep.samples = s->gstep * (long)o->batch;
    s->rep.train_s = elapsed;
    s->total_compute += e.compute_s;
    s->total_samples_local += (long)(v[R_SEEN_NOW] / s->world); /* per rank, on average */
    s->rep.compute_per_sample_s =
        s->total_samples_local ? s->total_compute / (double)s->total_samples_local : 0;
    s->rep.grad_bytes = s->model.nparams * sizeof(float);
    return gw_train_report_epoch(&s->rep, &e);
}

gw_status_t gw_train_sync_loop(gw_train_sync_t *s)
{
    const gw_train_opts_t *o = s->o;
    gw_status_t st;
    long total;
    s->t_start = gw_kit_now_s();
    /* --elastic: after a lost rank the survivors come back here, rolled
     * back and re-sharded, with a new epoch length (train_elastic.c). */
#define ELASTIC_OR_RETURN(call)                                  \
    do {                                                         \
        if ((st = (call)) != GW_OK) {                            \
            if ((st = gw_train_elastic_recover(s, st)) != GW_OK) \
                return st;                                       \
            goto again;                                          \
        }                                                        \
    } while (0)
again:
    total = (long)o->epochs * s->spe;
    if (o->max_steps > 0 && o->max_steps < total)
        total = o->max_steps;
    while (s->gstep < total) {
        /* One pass per epoch, or per remainder of the epoch a checkpoint
         * stopped in. The epoch's sums restart only at its first step (a
         * resumed epoch goes on with the sums from the checkpoint), and the
         * shuffle replays from the generator state the epoch began with. */
        /* --elastic: processes waiting to join come in at an epoch's start
         * (train_grow.c), once per start, unless --grow-every says when: a
         * joiner enters here after the members' grow, and survivors rolled
         * back to the start grew there. */
        if (o->elastic && o->grow_every == 0 && s->step == 0 && s->grown_at != s->gstep) {
            int grew = 0;
            ELASTIC_OR_RETURN(gw_train_grow(s, 0, &grew));
            if (grew)
                goto again; /* a new epoch length */
        }
        if (s->step == 0) {
            s->ep_loss = 0;
            s->ep_correct = s->ep_seen = 0;
        }
        gw_train_sync_begin_epoch(s);
        double e0 = gw_kit_now_s();
        s->compute_s = 0;
        s->bk.comm_s = s->bk.wait_s = s->bk.codec_s = 0;
        long seen0 = s->ep_seen;
        while (s->step < s->spe && s->gstep < total) {
            /* --grow-every N: joiners come in every N steps instead, at
             * any step of an epoch, where the members are; the grow
             * re-shards, and the pass starts again with the new shards and
             * the epoch's shuffle replayed (as after a shrink). */
            if (o->elastic && o->grow_every > 0 && s->gstep % o->grow_every == 0 &&
                s->grown_at != s->gstep) {
                int grew = 0;
                ELASTIC_OR_RETURN(gw_train_grow(s, 1, &grew));
                if (grew)
                    goto again;
            }
            if ((st = gw_train_elastic_snapshot(s)) != GW_OK)
                return st;
            ELASTIC_OR_RETURN(gw_train_sync_step(s));
            gw_train_report_progress(&s->rep, (int)s->epoch + 1, s->step, s->spe,
                                     s->ep_seen ? s->ep_loss / (double)s->ep_seen : 0);
            if (s->stop_recv) {
                if (s->rank == 0)
                    fprintf(stderr, "gradwire-train: SIGTERM: %s step %ld and stopping\n",
                            o->ckpt_dir ? "checkpointing" : "no --checkpoint-dir, not saving",
                            s->gstep);
                s->stopped = 1;
                return o->ckpt_dir ? gw_train_sync_checkpoint(s) : GW_OK;
            }
            if (o->ckpt_dir && o->ckpt_every > 0 && s->gstep % o->ckpt_every == 0 &&
                s->step < s->spe)
                ELASTIC_OR_RETURN(gw_train_sync_checkpoint(s));
        }
        double epoch_s = gw_kit_now_s() - e0;
        ELASTIC_OR_RETURN(end_epoch(s, epoch_s, s->ep_seen - seen0));
        if (s->step == s->spe) {
            s->epoch++;
            s->step = 0;
        }
        if (o->ckpt_dir && (o->ckpt_every > 0 || s->gstep == total))
            ELASTIC_OR_RETURN(gw_train_sync_checkpoint(s));
        /* Every rank has the same statistics, so every rank stops here. */
        if (o->stop_at_target && s->time_to_target >= 0) {
            if (s->rank == 0 && !o->quiet)
                printf("gradwire-train: test accuracy reached %.2f%% after %.2f s of training; "
                       "stopping (--stop-at-target)\n",
                       100 * o->target_acc, s->time_to_target);
            break;
        }
    }
    return GW_OK;
#undef ELASTIC_OR_RETURN
}
