/*
 * train_sync.c - synchronous data-parallel SGD.
 *
 * Every rank holds the whole model and a shard of the data. A step: each
 * rank takes its next local batch (global batch / ranks samples), runs
 * forward and backward, and while backward runs the gradient buckets are
 * summed over ranks by gw_iallreduce (buckets.c), or averaged through a
 * codec by gw_iallreduce_compressed (codec.c). The loss is scaled by
 * 1 / global batch (1 / local batch with a codec, which averages), so the
 * reduced gradient is exactly the gradient of the mean loss over the union
 * of the local batches: one step of N ranks is one step of one rank on the
 * union batch, up to the order of the float additions. Every rank then
 * applies the same update to the same weights, so the replicas stay
 * identical without ever sending weights.
 *
 * Alongside the buckets each step carries a one-integer allreduce (MAX) of
 * "SIGTERM seen", launched first and waited for last, so that all ranks
 * agree on the step after which they checkpoint and stop, even though the
 * signal reaches them at different moments.
 */
#include <cblas.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit.h"
#include "model_parallel.h"
#include "train_sync.h"
#include "trainer.h"

static gw_status_t coll_fail(const char *what, gw_status_t st)
{
    fprintf(stderr, "gradwire-train: %s failed: %s (%s)\n", what, gw_status_str(st),
            gw_status_name(st));
    return st;
}

static gw_status_t setup(gw_train_sync_t *s)
{
    const gw_train_opts_t *o = s->o;
    gw_status_t st;
    if ((st = gw_train_straggler_init(&s->strag, o, s->rank, s->world)) != GW_OK)
        return st;
    int balance = s->strag.balance;
    if (balance && o->batch < s->world) {
        fprintf(stderr,
                "gradwire-train: --straggler balance needs a global batch of at least "
                "one sample per rank (%d ranks, --batch %d)\n",
                s->world, o->batch);
        return GW_ERR_INVALID_ARG;
    }
    /* --elastic splits the global batch over whoever is left, unevenly if
     * need be (train_elastic.c). */
    if (!balance && o->batch % s->world != 0 && !(o->elastic && o->batch >= s->world)) {
        fprintf(stderr, "gradwire-train: the global batch %d must be a multiple of the %d ranks\n",
                o->batch, s->world);
        return GW_ERR_INVALID_ARG;
    }
    if (balance) {
        s->local_b = (size_t)s->strag.batch[s->rank];
        s->batch_stride = (size_t)o->batch;
        s->batch_off = (size_t)s->strag.offset[s->rank];
        st = gw_train_straggler_load_data(o, s->rank, s->world, &s->train, &s->test);
    } else {
        s->local_b = (size_t)gw_train_local_batch(o->batch, s->rank, s->world);
        s->batch_stride = s->local_b;
        s->batch_off = 0;
        st = gw_train_load_data(o, s->rank, s->world, &s->train, &s->test);
    }
    if (st != GW_OK)
        return st;
    s->spe = (long)(s->train.n / (balance ? s->batch_stride
                                          : (size_t)gw_train_local_batch(o->batch, 0, s->world)));
    if (s->spe == 0) {
        fprintf(stderr,
                "gradwire-train: each of the %d ranks holds %zu training samples, fewer than "
                "its local batch of %zu\n",
                s->world, s->train.n, s->local_b);
        return GW_ERR_INVALID_ARG;
    }
    int sizes[GW_TRAIN_MAX_LAYERS + 1], ns = 0;
    sizes[ns++] = (int)s->train.dim;
    for (int i = 0; i < o->nhidden; i++)
        sizes[ns++] = o->hidden[i];
    sizes[ns++] = s->train.nclasses;
    gw_train_rng_seed(&s->rng, o->seed);
    /* Balanced, a rank's share can grow to nearly the global batch;
     * --elastic: room for any share of it the survivors get. */
    size_t most = balance || o->elastic ? (size_t)o->batch : s->local_b;
    size_t cap = most > 256 ? most : 256;
    /* The whole model on every rank: checked before it is allocated. */
    char who[96] = "each data-parallel rank (the whole model)";
    if (o->zero) {
        gw_train_mem_zero(o->zero, s->world, o->bucket_bytes, sizes, ns - 1, cap, s->local_b,
                          &s->mem);
        snprintf(who, sizeof(who), "each data-parallel rank (ZeRO-%d over %d ranks)", o->zero,
                 s->world);
    } else {
        gw_train_mem_data_parallel(sizes, ns - 1, cap, s->local_b, &s->mem);
    }
    if ((st = gw_train_mem_check(o, &s->mem, who, 1)))
        return st;
    if ((st = gw_train_mlp_init(&s->model, sizes, ns, cap, &s->rng)) != GW_OK)
        return st;
    /* A codec only matters with peers; on one rank there is nothing to
     * send, unless --elastic may bring peers later (its states must then
     * be as far along as theirs: train_grow.c). */
    int codec = strcmp(o->codec, "none") != 0 && (s->world > 1 || o->elastic);
    /* DGC's codec returns the momentum-corrected update: the optimizer must
     * not add momentum of its own, and weight decay goes into the gradient
     * before the codec (buckets.c). On one rank there is no codec and DGC
     * is dense momentum SGD with the DGC factor, which the optimizer does. */
    int dgc = o->dgc_momentum > 0;
    double mom = dgc ? (codec ? 0.0 : o->dgc_momentum) : o->momentum;
    double wd = dgc && codec ? 0.0 : o->weight_decay;
    if (o->zero) {
        if ((st = gw_train_zero_init(&s->zero, s->comm, &s->model, o->zero, mom, wd,
                                     o->bucket_bytes, o->overlap)) != GW_OK)
            return st;
        /* What was allocated, not the plan: they must agree. */
        s->mem.params = s->zero.mem.params;
        s->mem.grads = s->zero.mem.grads;
        s->mem.optimizer = s->zero.mem.optimizer;
    } else if ((st = gw_train_sgd_init(&s->sgd, &s->model, mom, wd)) != GW_OK) {
        return st;
    }
    s->perm = malloc(s->train.n * sizeof(uint32_t));
    s->xb = malloc(most * s->train.dim * sizeof(float));
    s->yb = malloc(most * sizeof(int32_t));
    if (!s->perm || !s->xb || !s->yb) {
        fprintf(stderr, "gradwire-train: out of memory for the batch buffers\n");
        return GW_ERR_NO_MEMORY;
    }
    if (!codec && strcmp(o->codec, "none") != 0) {
        gw_codec_t parsed;
        if (gw_codec_parse(o->codec, &parsed) != GW_OK) {
            fprintf(stderr, "gradwire-train: unknown --codec \"%s\"\n", o->codec);
            return GW_ERR_INVALID_ARG;
        }
    }
    if (!o->zero && (st = gw_train_sync_buckets(s, codec)) != GW_OK)
        return st;
    if (o->zero)
        s->grad_scale = 1.0f / (float)o->batch;
    gw_train_opts_fingerprint(o, s->world, s->config, sizeof(s->config));
    s->time_to_target = -1;
    if (o->ckpt_dir && mkdir(o->ckpt_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "gradwire-train: cannot create the checkpoint directory %s: %m\n",
                o->ckpt_dir);
        return GW_ERR_SYSTEM;
    }
    st = gw_train_report_open(&s->rep, o, s->rank, s->world);
    s->rep.rank_memory = gw_train_mem_total(&s->mem);
    s->rep.dp_memory[0] = s->mem.params;
    s->rep.dp_memory[1] = s->mem.grads;
    s->rep.dp_memory[2] = s->mem.optimizer;
    s->rep.dp_memory[3] = s->mem.activations;
    s->rep.zero = o->zero;
    s->rep.straggler = &s->strag;
    return st;
}

/* The dense path sums over the ranks, so the loss is scaled by 1 / global
 * batch. The compressed call averages over them: each rank scales by
 * world / global batch, so that the average is the global batch's mean
 * also when the local batches differ by one (--elastic splits the batch
 * over whoever is left); when they are equal that is 1 / local batch,
 * computed so, as it always was. */
static float grad_scale(const gw_train_sync_t *s)
{
    const gw_train_opts_t *o = s->o;
    if (!s->codec)
        return 1.0f / (float)o->batch;
    if (o->batch % s->world == 0)
        return 1.0f / (float)s->local_b;
    return (float)s->world / (float)o->batch;
}

gw_status_t gw_train_sync_buckets(gw_train_sync_t *s, int codec)
{
    const gw_train_opts_t *o = s->o;
    gw_train_buckets_free(&s->bk);
    gw_comm_t *c = s->world > 1 || codec ? s->comm : NULL;
    gw_status_t st =
        gw_train_buckets_init(&s->bk, c, &s->model, o->bucket_bytes, o->overlap, codec);
    if (st != GW_OK)
        return st;
    /* The codec's states follow the buckets' shapes (one per tensor). */
    if (codec && !s->codec &&
        (st = gw_train_codec_create(s->comm, o, &s->bk, gw_train_codec_warmup_steps(o, s->spe),
                                    &s->codec)) != GW_OK)
        return st;
    if (codec) {
        s->bk.codec = s->codec;
        s->bk.blocking = !o->overlap;
        /* DGC: weight decay goes into the gradient, through the codec's
         * momentum (buckets.c). */
        s->bk.grad_decay = o->dgc_momentum > 0 ? (float)o->weight_decay : 0.0f;
    }
    s->grad_scale = grad_scale(s);
    return GW_OK;
}

static void teardown(gw_train_sync_t *s)
{
    gw_train_elastic_free(s);
    gw_train_buckets_free(&s->bk);
    gw_train_codec_destroy(s->codec);
    gw_train_sgd_free(&s->sgd);
    gw_train_zero_free(&s->zero);
    gw_train_mlp_free(&s->model);
    gw_train_dataset_free(&s->train);
    gw_train_dataset_free(&s->test);
    free(s->perm);
    free(s->xb);
    free(s->yb);
    gw_train_straggler_free(&s->strag);
}

static gw_status_t time_allreduce_into(gw_train_sync_t *s, float *buf, size_t count, int reps,
                                       double *out);

/* Median time of `reps` allreduces of count floats, the largest over ranks. */
static gw_status_t time_allreduce(gw_train_sync_t *s, size_t count, int reps, double *out)
{
    /* Scratch: gradients are overwritten by backward (--zero keeps none). */
    float *buf = s->model.grads ? s->model.grads : malloc(count * sizeof(float));
    gw_status_t st = time_allreduce_into(s, buf, count, reps, out);
    if (buf != s->model.grads)
        free(buf);
    return st;
}

static gw_status_t time_allreduce_into(gw_train_sync_t *s, float *buf, size_t count, int reps,
                                       double *out)
{
    double t[32];
    gw_status_t st;
    if (!buf) {
        fprintf(stderr, "gradwire-train: out of memory for the link measurement\n");
        return GW_ERR_NO_MEMORY;
    }
    for (int i = -2; i < reps; i++) {
        double t0 = gw_kit_now_s();
        if ((st = gw_allreduce(s->comm, buf, buf, count, GW_FLOAT32, GW_SUM)) != GW_OK)
            return coll_fail("timing allreduce", st);
        if (i >= 0)
            t[i] = gw_kit_now_s() - t0;
    }
    for (int i = 1; i < reps; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    double med = t[reps / 2];
    if ((st = gw_allreduce(s->comm, &med, &med, 1, GW_FLOAT64, GW_MAX)) != GW_OK)
        return coll_fail("timing allreduce", st);
    *out = med;
    return GW_OK;
}

/* Link figures for the scaling projection, with the ring model
 * t(S) = 2(n-1) alpha + 2 (n-1)/n S beta. */
static gw_status_t measure_link(gw_train_sync_t *s)
{
    double t1, tb;
    size_t n = s->model.nparams;
    gw_status_t st;
    if (s->world < 2)
        return GW_OK;
    if ((st = time_allreduce(s, 1, 15, &t1)) != GW_OK || (st = time_allreduce(s, n, 5, &tb)))
        return st;
    double w = s->world;
    s->rep.alpha_s = t1 / (2 * (w - 1));
    double bytes = 2 * (w - 1) / w * (double)n * sizeof(float);
    s->rep.beta_s_per_byte = tb > t1 ? (tb - t1) / bytes : 0;
    s->rep.allreduce_s = tb;
    return GW_OK;
}

static void gather_batch(gw_train_sync_t *s, long step)
{
    size_t dim = s->train.dim;
    for (size_t j = 0; j < s->local_b; j++) {
        uint32_t i = s->perm[(size_t)step * s->batch_stride + s->batch_off + j];
        memcpy(s->xb + j * dim, s->train.x + (size_t)i * dim, dim * sizeof(float));
        s->yb[j] = s->train.y[i];
    }
}

void gw_train_sync_begin_epoch(gw_train_sync_t *s)
{
    s->rng_epoch = s->rng; /* what a checkpoint stores: the shuffle replays from it */
    for (size_t i = 0; i < s->train.n; i++)
        s->perm[i] = (uint32_t)i;
    if (s->o->shuffle)
        gw_train_shuffle(s->perm, s->train.n, &s->rng);
}

gw_status_t gw_train_sync_step(gw_train_sync_t *s)
{
    gw_status_t st = GW_OK;
    gw_handle_t *stop_h = NULL;
    /* Every collective of the step, compressed or not, goes through the
     * library's queue in call order, so the stop flag is simply the first
     * of them (even the blocking compressed calls of --no-overlap queue
     * behind it). */
    if (s->world > 1) {
        s->stop_send = gw_train_stop_requested();
        if ((st = gw_iallreduce(s->comm, &s->stop_send, &s->stop_recv, 1, GW_INT32, GW_MAX,
                                &stop_h)) != GW_OK)
            return coll_fail("allreduce of the stop flag", st);
    } else {
        s->stop_recv = gw_train_stop_requested();
    }
    double t0 = gw_kit_now_s();
    gather_batch(s, s->step);
    gw_train_straggler_slow(&s->strag, s->local_b);
    gw_train_mlp_forward(&s->model, s->xb, s->local_b);
    gw_train_mlp_loss(&s->model, s->yb, s->local_b, s->grad_scale, &s->ep_loss, &s->ep_correct);
    s->ep_seen += (long)s->local_b;
    float lr = (float)gw_train_lr_at(s->o, s->gstep, s->spe);
    s->lr = lr;
    double t1, t2;
    if (s->o->zero) {
        /* Backward, reduce-scatter, update and allgather interleave
         * (zero.c): what the training thread waited for is the wait, the
         * rest compute. */
        double w0 = s->zero.wait_s;
        st = gw_train_zero_backward_step(&s->zero, s->local_b, lr);
        double waited = s->zero.wait_s - w0;
        s->bk.wait_s += waited;
        t2 = gw_kit_now_s();
        t1 = t2 - waited;
    } else {
        st = gw_train_mlp_backward(&s->model, s->local_b, gw_train_buckets_ready, &s->bk);
        t1 = gw_kit_now_s();
        gw_status_t fst = gw_train_buckets_finish(&s->bk);
        if (st == GW_OK)
            st = fst;
        t2 = gw_kit_now_s();
        if (st == GW_OK)
            gw_train_sgd_step(&s->sgd, &s->model, s->model.grads, lr);
    }
    double t3 = gw_kit_now_s();
    /* Between layers this thread only queues buckets; the codec runs on the
     * progress thread (or, blocking, inside finish), so everything outside
     * finish is compute. */
    s->compute_s += (t1 - t0) + (t3 - t2);
    /* The timeline (--trace): this step's compute beside the collectives
     * the progress thread runs meanwhile (nothing when tracing is off). */
    gw_trace_span(s->comm, "forward+backward", "compute", (int64_t)(t0 * 1e9), (int64_t)(t1 * 1e9));
    gw_trace_span(s->comm, "sgd step", "compute", (int64_t)(t2 * 1e9), (int64_t)(t3 * 1e9));
    if (stop_h) {
        gw_status_t sst = gw_wait(stop_h);
        if (st == GW_OK && sst != GW_OK)
            st = sst;
    }
    if (st != GW_OK)
        return coll_fail("the gradient allreduce", st);
    s->step++;
    s->gstep++;
    /* Stragglers: this step's times; balanced, perhaps a new split. */
    st = gw_train_straggler_step(&s->strag, s->comm, t1 - t0, t3 - t2, t2 - t1, gw_kit_now_s() - t0,
                                 s->local_b);
    if (s->strag.balance) {
        s->local_b = (size_t)s->strag.batch[s->rank];
        s->batch_off = (size_t)s->strag.offset[s->rank];
    }
    return st;
}

gw_status_t gw_train_sync_checkpoint(gw_train_sync_t *s)
{
    gw_train_ckpt_t c;
    memset(&c, 0, sizeof(c));
    c.rank = (uint32_t)s->rank;
    c.world = (uint32_t)s->world;
    c.epoch = (uint64_t)s->epoch;
    c.step_in_epoch = (uint64_t)s->step;
    c.global_step = (uint64_t)s->gstep;
    /* At an epoch boundary the next epoch has not shuffled yet. */
    c.rng = s->step == 0 ? s->rng : s->rng_epoch;
    c.elapsed_s = s->elapsed0 + (gw_kit_now_s() - s->t_start) - s->eval_s;
    c.time_to_target_s = s->time_to_target;
    c.epoch_loss_sum = s->ep_loss;
    c.epoch_correct = s->ep_correct;
    c.epoch_seen = s->ep_seen;
    snprintf(c.config, sizeof(c.config), "%s", s->config);
    c.nparams = s->model.nparams;
    c.params = s->model.params;
    c.velocity = s->sgd.velocity;
    gw_status_t st = GW_OK;
    if (s->o->zero) {
        /* This rank's shard only (format version 2): resuming puts the
         * shards of every rank together (zero.c). */
        c.velocity = s->zero.velocity;
        c.velocity_len = s->zero.shard;
    }
    if (s->codec && (st = gw_train_codec_save(s->codec, &c.codec_state, &c.codec_len)) != GW_OK)
        fprintf(stderr, "gradwire-train: cannot save the codec state: %s\n", gw_status_str(st));
    st = gw_train_ckpt_commit(s->comm, s->o->ckpt_dir, &c, st, &s->last_ckpt);
    free(c.codec_state);
    return st;
}

static gw_status_t resume(gw_train_sync_t *s)
{
    uint64_t step;
    gw_status_t st = gw_train_ckpt_get_latest(s->o->ckpt_dir, &step);
    if (st == GW_ERR_NOT_FOUND) {
        if (s->rank == 0)
            fprintf(stderr, "gradwire-train: no checkpoint in %s yet; starting from scratch\n",
                    s->o->ckpt_dir);
        return GW_OK;
    }
    if (st != GW_OK)
        return st;
    char path[4096];
    gw_train_ckpt_t c;
    /* Rank 0's file says how many ranks wrote the step; a rank beyond them
     * takes rank 0's state, the same on every rank (train_resize.c). */
    if ((st = gw_train_resume_read(s, step, path, sizeof(path), &c)) != GW_OK)
        return st;
    int other_world = gw_train_resume_other_world(s, &c, path);
    st = GW_ERR_CONFIG;
    if (other_world < 0) {
        /* refused, said why */
    } else if (strcmp(c.config, s->config) != 0 && !other_world) {
        fprintf(stderr,
                "gradwire-train: checkpoint %s was written with other settings:\n  checkpoint: "
                "%s\n  this run:   %s\n",
                path, c.config, s->config);
    } else if (!other_world && (c.rank != (uint32_t)s->rank || c.world != (uint32_t)s->world)) {
        fprintf(stderr, "gradwire-train: checkpoint %s belongs to rank %u of %u, not %d of %d\n",
                path, c.rank, c.world, s->rank, s->world);
    } else if (c.nparams != s->model.nparams || (c.codec_len > 0) != (s->codec != NULL)) {
        fprintf(stderr,
                "gradwire-train: checkpoint %s holds %zu parameters %s codec state; this run "
                "has %zu %s\n",
                path, c.nparams, c.codec_len ? "with" : "without", s->model.nparams,
                s->codec ? "with a codec" : "without");
    } else if (!other_world && (c.step_in_epoch > (uint64_t)s->spe || c.global_step != step)) {
        fprintf(stderr, "gradwire-train: checkpoint %s has an impossible position\n", path);
    } else {
        st = GW_OK;
    }
    if (st == GW_OK && s->codec)
        st = gw_train_codec_load(s->codec, c.codec_state, c.codec_len);
    /* A --zero checkpoint holds shards: the whole momentum is put together
     * from every rank's file (on this run's rank count or another). */
    float *full = NULL;
    if (st == GW_OK && c.velocity_len != c.nparams) {
        if (!(full = malloc(c.nparams * sizeof(float)))) {
            fprintf(stderr, "gradwire-train: out of memory to re-shard the momentum\n");
            st = GW_ERR_NO_MEMORY;
        } else {
            st = gw_train_zero_assemble_velocity(s->o->ckpt_dir, step, (int)c.world, &s->model,
                                                 s->o->bucket_bytes, full);
        }
    }
    const float *velocity = full ? full : c.velocity;
    if (st == GW_OK) {
        memcpy(s->model.params, c.params, c.nparams * sizeof(float));
        if (s->o->zero)
            gw_train_zero_load_velocity(&s->zero, velocity);
        else
            memcpy(s->sgd.velocity, velocity, c.nparams * sizeof(float));
        s->rng = c.rng;
        s->epoch = (long)c.epoch;
        s->step = (long)c.step_in_epoch;
        s->gstep = (long)c.global_step;
        s->elapsed0 = c.elapsed_s;
        s->time_to_target = c.time_to_target_s;
        s->ep_loss = c.epoch_loss_sum;
        s->ep_correct = (long)c.epoch_correct;
        s->ep_seen = (long)c.epoch_seen;
        s->last_ckpt = step;
        s->resumed = 1;
        if (other_world)
            gw_train_resume_renumber(s, &c);
    }
    free(full);
    gw_train_ckpt_release(&c);
    return st;
}

int gw_train_run_sync(const gw_train_opts_t *o, gw_comm_t *comm)
{
    gw_train_sync_t s;
    memset(&s, 0, sizeof(s));
    s.o = o;
    s.comm = comm;
    s.rank = gw_comm_rank(comm);
    s.world = gw_comm_size(comm);
    s.grown_at = -1;
    openblas_set_num_threads(o->threads);
    gw_status_t st = setup(&s);
    if (o->join) {
        /* A joiner takes the job's state where the members are: at the
         * broadcasts that follow their grow (train_grow.c). When its setup
         * fails, main aborts its communicator, which fails the members'
         * broadcast instead of leaving them waiting. */
        if (st == GW_OK)
            st = gw_train_grow_joined(&s);
        if (st != GW_OK)
            goto out;
        goto train;
    }
    if (o->resume && st == GW_OK)
        st = resume(&s);
    /* Every rank reaches this collective, whatever happened before it, so a
     * rank that failed to load takes the others down with it. */
    if ((st = gw_train_ckpt_agree_start(s.comm, s.gstep, st)) != GW_OK)
        goto out;
    if (!s.resumed && s.world > 1) {
        /* Same seed, same weights; the broadcast guards against ranks whose
         * libm rounds differently. */
        if ((st = gw_broadcast(comm, s.model.params, s.model.params, s.model.nparams, GW_FLOAT32,
                               0)) != GW_OK) {
            coll_fail("weight broadcast", st);
            goto out;
        }
    }
    if ((st = measure_link(&s)) != GW_OK)
        goto out;
train:
    if (s.rank == 0 && !o->quiet)
        printf("gradwire-train: %d rank(s), %zu parameters, global batch %d (%zu per rank), "
               "%ld steps/epoch, %zu buckets, transport %s%s\n",
               s.world, s.model.nparams, o->batch, s.local_b, s.spe, (size_t)s.bk.nb,
               gw_comm_transport(comm), s.resumed ? ", resumed" : "");
    fflush(stdout); /* a log watcher (train_elastic_test.sh) sees the start at once */
    if (s.rank == 0 && !o->quiet && o->zero) {
        char p[32], g[32], m[32], t[32];
        gw_train_mem_format(s.mem.params, p, sizeof(p));
        gw_train_mem_format(s.mem.grads, g, sizeof(g));
        gw_train_mem_format(s.mem.optimizer, m, sizeof(m));
        gw_train_mem_format(gw_train_mem_total(&s.mem), t, sizeof(t));
        printf("gradwire-train: ZeRO-%d over %d ranks, %d buckets; memory per rank: "
               "parameters %s, gradients %s (%.0f bytes), optimizer state %s (%.0f bytes), "
               "%s in all\n",
               o->zero, s.world, s.zero.nu, p, g, s.mem.grads, m, s.mem.optimizer, t);
    }
    if (s.rank == 0 && !o->quiet && o->max_rank_memory) {
        char need[32], budget[32];
        gw_train_mem_format(gw_train_mem_total(&s.mem), need, sizeof(need));
        gw_train_mem_format((double)o->max_rank_memory, budget, sizeof(budget));
        printf(o->zero ? "gradwire-train: memory per rank %s, --max-rank-memory %s\n"
                       : "gradwire-train: memory per rank %s (every rank holds the whole model), "
                         "--max-rank-memory %s\n",
               need, budget);
    }
    st = gw_train_sync_loop(&s);
    if (st == GW_OK && !s.stopped)
        st = gw_train_elastic_check_replicas(&s);
    if (st == GW_OK && s.world > 1 &&
        (st = gw_train_straggler_summarise(&s.strag, s.comm)) == GW_OK && s.rank == 0 && !o->quiet)
        gw_train_straggler_print(&s.strag, stdout);
out:
    /* Weights of a stopped run are not final: the checkpoint holds them. */
    if (st == GW_OK && !s.stopped && o->save_weights && s.rank == 0)
        st = gw_train_save_floats(o->save_weights, s.model.params, s.model.nparams);
    /* A failed run writes no JSON report: half a report would read as a result. */
    gw_status_t rst =
        s.rep.open ? gw_train_report_close(&s.rep, st == GW_OK ? o->report_json : NULL) : GW_OK;
    if (st == GW_OK)
        st = rst;
    teardown(&s);
    if (s.stopped)
        return 128 + SIGTERM;
    return st == GW_OK ? 0 : 1;
}
