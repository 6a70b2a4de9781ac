/*
 * train_model_parallel.c - synchronous SGD with the model split over ranks:
 * `--tensor-parallel K`, `--pipeline-parallel K`, and the rest of the ranks
 * data parallel (the grid of parallel_grid.c).
 *
 * The ranks of one model replica (its pp stages times tp slices) share a
 * data shard and, seeded alike, shuffle it alike, so they work on the same
 * local batch; the replicas split the global batch as the data-parallel
 * trainer does. A step is one GPipe step through the stages
 * (pipeline_schedule.c), then the gradients summed over the data-parallel
 * group (one allreduce per step, on the dp communicator), then the same
 * SGD update as sgd.c's on every rank's own share of the parameters. The
 * loss is scaled by 1 / global batch, so the step is the unsplit model's
 * step on the global batch; tests compare the two.
 *
 * Before anything is allocated, each rank computes its share's memory
 * (rank_memory.c) and checks it against --max-rank-memory; the figures of
 * every rank are printed and go into the JSON report, with the pipeline's
 * measured idle ("bubble") fraction per stage next to GPipe's (K-1)/(M+K-1).
 * Checkpoints: each rank writes its own part, resumable on the same grid
 * (train_mp_ckpt.c). What this trainer does not do (codecs, parameter
 * servers) is refused by options.c.
 */
#include <cblas.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kit.h"
#include "train_mp.h"

static gw_status_t coll_fail(const char *what, gw_status_t st)
{
    fprintf(stderr, "gradwire-train: %s failed: %s (%s)\n", what, gw_status_str(st),
            gw_status_name(st));
    return st;
}

/* Whether this rank's loss and accuracy are counted: one per replica. */
static int counts(const mp_run_t *r) { return r->g.pp_rank == r->g.pp - 1 && r->g.tp_rank == 0; }

static gw_status_t report_memory(mp_run_t *r)
{
    const gw_train_grid_t *g = &r->g;
    size_t cap =
        r->local_b; /* the workspace holds one local batch; evaluation goes in such chunks */
    gw_train_mem_t m;
    gw_train_stage_mem(g, g->pp_rank, r->sizes, r->nlayers, cap, &m);
    if (r->o->zero) {
        gw_train_stage_t share;
        gw_train_stage_layout(&share, g, g->pp_rank, r->sizes, r->nlayers);
        gw_train_zero_grid_sizes(&share, g->dp, r->o->zero, r->o->bucket_bytes, &m.optimizer,
                                 &m.grads);
    }
    double mine[4] = {m.params, m.grads, m.optimizer, m.activations};
    r->mem = calloc(4 * (size_t)g->world, sizeof(double));
    if (!r->mem)
        return GW_ERR_NO_MEMORY;
    gw_status_t st = gw_allgather(g->world_comm, mine, r->mem, 4, GW_FLOAT64);
    if (st != GW_OK)
        return coll_fail("allgather of the memory figures", st);
    char who[96];
    snprintf(who, sizeof(who), "rank %d (stage %d, tensor slice %d)", g->rank, g->pp_rank,
             g->tp_rank);
    int32_t ok = gw_train_mem_check(r->o, &m, who, 0) == GW_OK, all = ok;
    if ((st = gw_allreduce(g->world_comm, &ok, &all, 1, GW_INT32, GW_MIN)) != GW_OK)
        return coll_fail("memory agreement", st);
    double most = 0;
    for (int i = 0; i < g->world; i++) {
        double t = r->mem[4 * i] + r->mem[4 * i + 1] + r->mem[4 * i + 2] + r->mem[4 * i + 3];
        most = t > most ? t : most;
    }
    r->rep.rank_memory = most;
    if (g->rank == 0 && !r->o->quiet) {
        gw_train_mem_t dp;
        /* As the data-parallel trainer allocates: 256 rows at least. */
        gw_train_mem_data_parallel(r->sizes, r->nlayers, cap > 256 ? cap : 256, r->local_b, &dp);
        char a[32], b[32];
        gw_train_mem_format(gw_train_mem_total(&dp), a, sizeof(a));
        printf("gradwire-train: memory per rank (parameters + gradients + momentum + "
               "activations; data parallel would need %s):\n",
               a);
        for (int i = 0; i < g->world; i++) {
            const double *x = r->mem + 4 * i;
            gw_train_mem_format(x[0] + x[1] + x[2] + x[3], a, sizeof(a));
            gw_train_mem_format(x[0], b, sizeof(b));
            printf("  rank %2d  data %d stage %d slice %d  %10s  (parameters %s)\n", i,
                   i / (g->tp * g->pp), i / g->tp % g->pp, i % g->tp, a, b);
        }
    }
    return all ? GW_OK : GW_ERR_CONFIG;
}

static gw_status_t setup(mp_run_t *r, gw_comm_t *comm)
{
    const gw_train_opts_t *o = r->o;
    gw_status_t st;
    /* The data shard is the replica's: dp and dp_rank as the grid will
     * have them (when the world does not divide, the grid refuses below). */
    int mp = o->tensor_parallel * o->pipeline_parallel, world = gw_comm_size(comm);
    int dp = world % mp == 0 ? world / mp : 1,
        dp_rank = world % mp == 0 ? gw_comm_rank(comm) / mp : 0;
    if ((st = gw_train_load_data(o, dp_rank, dp, &r->train, &r->test)) != GW_OK)
        return st;
    r->nlayers = o->nhidden + 1;
    r->sizes[0] = (int)r->train.dim;
    r->sizes[r->nlayers] = r->train.nclasses;
    for (int i = 0; i < o->nhidden; i++)
        r->sizes[i + 1] = o->hidden[i];
    if ((st = gw_train_grid_init(&r->g, comm, o, r->sizes, r->nlayers)) != GW_OK)
        return st;
    const gw_train_grid_t *g = &r->g;
    if (o->batch % g->dp != 0) {
        fprintf(stderr,
                "gradwire-train: the global batch %d must be a multiple of the %d data-parallel "
                "replicas (%d ranks / (%d tensor x %d pipeline))\n",
                o->batch, g->dp, g->world, g->tp, g->pp);
        return GW_ERR_INVALID_ARG;
    }
    r->local_b = (size_t)(o->batch / g->dp);
    r->micro = o->micro_batches > 0 ? o->micro_batches : g->pp;
    if (r->local_b % (size_t)r->micro != 0) {
        fprintf(stderr,
                "gradwire-train: the local batch of %zu samples does not split into %d equal "
                "micro-batches\n",
                r->local_b, r->micro);
        return GW_ERR_INVALID_ARG;
    }
    r->spe = (long)(r->train.n / r->local_b);
    if (r->spe == 0) {
        fprintf(stderr,
                "gradwire-train: a replica's %zu training samples are fewer than its "
                "local batch of %zu\n",
                r->train.n, r->local_b);
        return GW_ERR_INVALID_ARG;
    }
    r->nfull = 0;
    for (int l = 0; l < r->nlayers; l++)
        r->nfull += (size_t)r->sizes[l] * (size_t)r->sizes[l + 1] + (size_t)r->sizes[l + 1];
    if ((st = gw_train_report_open(&r->rep, o, g->rank, g->world)) != GW_OK)
        return st;
    if ((st = report_memory(r)) != GW_OK)
        return st;
    gw_train_rng_seed(&r->rng, o->seed);
    size_t cap = r->local_b;
    if ((st = gw_train_stage_init(&r->st, g, r->sizes, r->nlayers, cap, &r->rng)) != GW_OK)
        return st;
    if (o->zero && (st = gw_train_zero_grid_init(&r->zg, g->dp_comm, &r->st, o->zero,
                                                 o->bucket_bytes)) != GW_OK)
        return st;
    r->perm = malloc(r->train.n * sizeof(uint32_t));
    r->xb = malloc(r->local_b * r->train.dim * sizeof(float));
    r->yb = malloc(r->local_b * sizeof(int32_t));
    if (!r->perm || !r->xb || !r->yb) {
        fprintf(stderr, "gradwire-train: out of memory for the batch buffers\n");
        return GW_ERR_NO_MEMORY;
    }
    r->scale = 1.0f / (float)o->batch;
    r->rep.par_dp = g->dp;
    r->rep.par_pp = g->pp;
    r->rep.par_tp = g->tp;
    r->rep.par_micro = r->micro;
    r->rep.par_bubble_theory = (double)(g->pp - 1) / (r->micro + g->pp - 1);
    r->rep.par_memory = r->mem;
    gw_train_mp_fingerprint(r);
    if (o->ckpt_dir && mkdir(o->ckpt_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "gradwire-train: cannot create the checkpoint directory %s: %m\n",
                o->ckpt_dir);
        return GW_ERR_SYSTEM;
    }
    return GW_OK;
}

/* The unsplit model's layout of this rank's share, summed over ranks
 * (each block from one rank: replicas from tensor slice 0 of data shard 0),
 * on rank 0; `extra` one more float, summed likewise. */
static gw_status_t gather_full(mp_run_t *r, const float *local, float extra, float **out)
{
    float *full = calloc(r->nfull + 1, sizeof(float));
    if (!full)
        return GW_ERR_NO_MEMORY;
    if (r->g.dp_rank == 0)
        gw_train_stage_scatter_full(&r->st, local, r->sizes, full, r->g.tp_rank == 0);
    full[r->nfull] = extra;
    gw_status_t st = gw_allreduce(r->g.world_comm, full, full, r->nfull + 1, GW_FLOAT32, GW_SUM);
    if (st != GW_OK) {
        free(full);
        return coll_fail("gathering the unsplit model", st);
    }
    *out = full;
    return GW_OK;
}

static gw_status_t step(mp_run_t *r, long in_epoch, const uint32_t *perm)
{
    const gw_train_opts_t *o = r->o;
    size_t dim = r->train.dim;
    for (size_t j = 0; j < r->local_b; j++) {
        uint32_t i = perm[(size_t)in_epoch * r->local_b + j];
        memcpy(r->xb + j * dim, r->train.x + (size_t)i * dim, dim * sizeof(float));
        r->yb[j] = r->train.y[i];
    }
    double loss = 0;
    long ok = 0;
    gw_status_t st = (o->schedule_1f1b ? gw_train_pipe_step_1f1b : gw_train_pipe_step)(
        &r->st, &r->g, r->xb, r->yb, r->local_b, r->micro, r->scale, &loss, &ok, &r->ps_epoch);
    if (st != GW_OK)
        return st;
    if (counts(r)) {
        r->ep_loss += loss;
        r->ep_correct += ok;
        r->ep_seen += (long)r->local_b;
    }
    if (r->g.dp > 1 && !o->zero) {
        double t0 = gw_kit_now_s();
        st =
            gw_allreduce(r->g.dp_comm, r->st.grads, r->st.grads, r->st.nparams, GW_FLOAT32, GW_SUM);
        r->dp_comm_s += gw_kit_now_s() - t0;
        if (st != GW_OK)
            return coll_fail("the data-parallel gradient allreduce", st);
    }
    if (o->dump_grads && r->gstep == 0) {
        float *full;
        if ((st = gather_full(r, r->st.grads, counts(r) ? (float)(loss / o->batch) : 0, &full)))
            return st;
        if (r->g.rank == 0)
            st = gw_train_save_floats(o->dump_grads, full, r->nfull + 1);
        free(full);
        if (st != GW_OK)
            return st;
    }
    float lr = (float)gw_train_lr_at(o, r->gstep, r->spe);
    if (o->zero) {
        double t0 = gw_kit_now_s();
        st =
            gw_train_zero_grid_step(&r->zg, &r->st, (float)o->momentum, (float)o->weight_decay, lr);
        r->dp_comm_s += gw_kit_now_s() - t0;
        if (st != GW_OK)
            return st;
    } else {
        gw_train_stage_sgd(&r->st, (float)o->momentum, (float)o->weight_decay, lr);
    }
    r->gstep++;
    return GW_OK;
}

enum { S_LOSS, S_OK, S_SEEN, S_TLOSS, S_TOK, S_TN, S_BUSY, S_COMM, S_IDLE, S_N };

static gw_status_t end_epoch(mp_run_t *r, int epoch, double epoch_s, double *elapsed,
                             double *eval_s, long steps)
{
    const gw_train_opts_t *o = r->o;
    double v[S_N] = {0}, t0 = gw_kit_now_s();
    double tl = 0;
    long tok = 0;
    gw_status_t st = GW_OK;
    int eval = r->test.total > 0 && ((epoch % o->eval_every) == 0 || r->gstep >= steps);
    if (eval && (st = gw_train_pipe_evaluate(&r->st, &r->g, &r->test, &tl, &tok)) != GW_OK)
        return st;
    *eval_s += gw_kit_now_s() - t0;
    if (counts(r)) {
        v[S_LOSS] = r->ep_loss;
        v[S_OK] = (double)r->ep_correct;
        v[S_SEEN] = (double)r->ep_seen;
        v[S_TLOSS] = tl;
        v[S_TOK] = (double)tok;
        v[S_TN] = eval ? (double)r->test.n : 0;
    }
    v[S_BUSY] = r->ps_epoch.busy_s;
    v[S_COMM] = r->dp_comm_s + r->st.tp_comm_s;
    v[S_IDLE] = r->ps_epoch.idle_s;
    if ((st = gw_allreduce(r->g.world_comm, v, v, S_N, GW_FLOAT64, GW_SUM)) != GW_OK)
        return coll_fail("allreduce of the epoch statistics", st);
    double w = r->g.world;
    gw_train_epoch_stats_t e = {
        .epoch = epoch,
        .loss = v[S_SEEN] > 0 ? v[S_LOSS] / v[S_SEEN] : 0,
        .train_acc = v[S_SEEN] > 0 ? v[S_OK] / v[S_SEEN] : 0,
        .test_loss = v[S_TN] > 0 ? v[S_TLOSS] / v[S_TN] : 0,
        .test_acc = v[S_TN] > 0 ? v[S_TOK] / v[S_TN] : -1,
        .samples_per_s = epoch_s > 0 ? v[S_SEEN] / epoch_s : 0,
        .compute_s = v[S_BUSY] / w,
        .comm_s = v[S_COMM] / w,
        .wait_s = v[S_IDLE] / w,
        .epoch_s = epoch_s,
        .elapsed_s = *elapsed,
        .lr = gw_train_lr_at(o, r->gstep - 1, r->spe),
    };
    if (e.test_acc >= o->target_acc && r->rep.time_to_target_s < 0)
        r->rep.time_to_target_s = *elapsed;
    r->rep.steps = r->gstep;
    r->rep.samples = r->gstep * (long)o->batch;
    r->rep.train_s = *elapsed;
    r->rep.grad_bytes = r->st.nparams * sizeof(float);
    r->ps.busy_s += r->ps_epoch.busy_s;
    r->ps.idle_s += r->ps_epoch.idle_s;
    r->ps.span_s += r->ps_epoch.span_s;
    memset(&r->ps_epoch, 0, sizeof(r->ps_epoch));
    r->dp_comm_s = r->st.tp_comm_s = 0;
    r->ep_loss = 0;
    r->ep_correct = r->ep_seen = 0;
    return gw_train_report_epoch(&r->rep, &e);
}

/* Each stage's idle fraction, the mean over the ranks that run it. */
static gw_status_t bubbles(mp_run_t *r)
{
    const gw_train_grid_t *g = &r->g;
    double mine[2] = {r->ps.idle_s, r->ps.span_s};
    double *all = calloc(2 * (size_t)g->world, sizeof(double));
    if (!all)
        return GW_ERR_NO_MEMORY;
    gw_status_t st = gw_allgather(g->world_comm, mine, all, 2, GW_FLOAT64);
    if (st != GW_OK) {
        free(all);
        return coll_fail("allgather of the pipeline figures", st);
    }
    for (int s = 0; s < g->pp; s++) {
        double sum = 0;
        int n = 0;
        for (int i = 0; i < g->world; i++)
            if (i / g->tp % g->pp == s && all[2 * i + 1] > 0) {
                sum += all[2 * i] / all[2 * i + 1];
                n++;
            }
        r->rep.par_bubble[s] = n ? sum / n : 0;
    }
    free(all);
    if (g->rank == 0 && !r->o->quiet && g->pp > 1) {
        printf("gradwire-train: pipeline bubble (idle fraction of a step) per stage:");
        for (int s = 0; s < g->pp; s++)
            printf(" %d: %.1f%%", s, 100 * r->rep.par_bubble[s]);
        printf("; GPipe's (K-1)/(M+K-1) with K=%d, M=%d: %.1f%%\n", g->pp, r->micro,
               100 * r->rep.par_bubble_theory);
    }
    return GW_OK;
}

/* With --checkpoint-dir: whether any rank was asked to stop (SIGTERM),
 * agreed after every step, as every rank must checkpoint the same one. */
static gw_status_t stop_agreed(mp_run_t *r, int *stop)
{
    int32_t mine = gw_train_stop_requested(), any = mine;
    gw_status_t st = gw_allreduce(r->g.world_comm, &mine, &any, 1, GW_INT32, GW_MAX);
    if (st != GW_OK)
        return coll_fail("allreduce of the stop flag", st);
    *stop = any != 0;
    return GW_OK;
}

static gw_status_t train(mp_run_t *r)
{
    const gw_train_opts_t *o = r->o;
    long total = (long)o->epochs * r->spe;
    if (o->max_steps > 0 && o->max_steps < total)
        total = o->max_steps;
    double t_start = gw_kit_now_s(), eval_s = 0;
    gw_status_t st;
    /* One pass per epoch, or per remainder of the epoch a checkpoint
     * stopped in: the epoch's sums restart only at its first step, and the
     * shuffle replays from the generator state the epoch began with. */
    while (r->gstep < total) {
        if (r->step == 0) {
            r->ep_loss = 0;
            r->ep_correct = r->ep_seen = 0;
        }
        r->rng_epoch = r->rng;
        for (size_t i = 0; i < r->train.n; i++)
            r->perm[i] = (uint32_t)i;
        if (o->shuffle)
            gw_train_shuffle(r->perm, r->train.n, &r->rng);
        double e0 = gw_kit_now_s();
        while (r->step < r->spe && r->gstep < total) {
            if ((st = step(r, r->step, r->perm)) != GW_OK)
                return st;
            r->step++;
            gw_train_report_progress(&r->rep, (int)r->epoch + 1, r->step, r->spe,
                                     r->ep_seen ? r->ep_loss / (double)r->ep_seen : 0);
            if (!o->ckpt_dir)
                continue;
            int stop;
            if ((st = stop_agreed(r, &stop)) != GW_OK)
                return st;
            double elapsed = r->elapsed0 + gw_kit_now_s() - t_start - eval_s;
            if (stop) {
                if (r->g.rank == 0)
                    fprintf(stderr,
                            "gradwire-train: SIGTERM: checkpointing step %ld and stopping\n",
                            r->gstep);
                r->stopped = 1;
                return gw_train_mp_checkpoint(r, elapsed);
            }
            if (o->ckpt_every > 0 && r->gstep % o->ckpt_every == 0 && r->step < r->spe &&
                (st = gw_train_mp_checkpoint(r, elapsed)) != GW_OK)
                return st;
        }
        double epoch_s = gw_kit_now_s() - e0;
        double elapsed = r->elapsed0 + gw_kit_now_s() - t_start - eval_s;
        if ((st = end_epoch(r, (int)r->epoch + 1, epoch_s, &elapsed, &eval_s, total)) != GW_OK)
            return st;
        if (r->step == r->spe) {
            r->epoch++;
            r->step = 0;
        }
        if (o->ckpt_dir && (o->ckpt_every > 0 || r->gstep == total)) {
            elapsed = r->elapsed0 + gw_kit_now_s() - t_start - eval_s;
            if ((st = gw_train_mp_checkpoint(r, elapsed)) != GW_OK)
                return st;
        }
    }
    return bubbles(r);
}

int gw_train_run_model_parallel(const gw_train_opts_t *o, gw_comm_t *comm)
{
    mp_run_t r;
    memset(&r, 0, sizeof(r));
    r.o = o;
    openblas_set_num_threads(o->threads);
    gw_status_t st = setup(&r, comm);
    /* Every rank reaches this collective, so a rank that failed alone
     * takes the others down with it instead of leaving them waiting. */
    int32_t ok = st == GW_OK, all = ok;
    gw_status_t ast = gw_allreduce(comm, &ok, &all, 1, GW_INT32, GW_MIN);
    if (st == GW_OK)
        st = ast != GW_OK ? ast : all ? GW_OK : GW_ERR_REMOTE;
    if (st == GW_OK && o->resume)
        st = gw_train_mp_resume(&r);
    if (st == GW_OK && r.g.rank == 0 && !o->quiet)
        printf("gradwire-train: %d rank(s) = %d data x %d pipeline x %d tensor, %zu parameters "
               "(%zu on rank 0), global batch %d (%zu per replica, %d micro-batches, %s), %ld "
               "steps/epoch, transport %s%s\n",
               r.g.world, r.g.dp, r.g.pp, r.g.tp, r.nfull, r.st.nparams, o->batch, r.local_b,
               r.micro, o->schedule_1f1b ? "1F1B" : "GPipe", r.spe, gw_comm_transport(comm),
               r.resumed ? ", resumed" : "");
    if (st == GW_OK)
        st = train(&r);
    /* Weights of a stopped run are not final: the checkpoint holds them. */
    if (st == GW_OK && !r.stopped && o->save_weights) {
        float *full;
        if ((st = gather_full(&r, r.st.params, 0, &full)) == GW_OK) {
            if (r.g.rank == 0)
                st = gw_train_save_floats(o->save_weights, full, r.nfull);
            free(full);
        }
    }
    gw_status_t rst =
        r.rep.open ? gw_train_report_close(&r.rep, st == GW_OK ? o->report_json : NULL) : GW_OK;
    if (st == GW_OK)
        st = rst;
    gw_train_zero_grid_free(&r.zg);
    gw_train_stage_free(&r.st);
    gw_train_grid_free(&r.g);
    gw_train_dataset_free(&r.train);
    gw_train_dataset_free(&r.test);
    free(r.perm);
    free(r.xb);
    free(r.yb);
    free(r.mem);
    if (st == GW_OK && r.stopped)
        return 128 + SIGTERM;
    return st == GW_OK ? 0 : 1;
}
