/*
 * param_server.c - asynchronous SGD with parameter servers.
 *
 * Ranks 0..S-1 are servers, each owning a contiguous shard of the flat
 * parameter array with its momentum buffer; the other ranks are workers,
 * each with a shard of the training data. A worker loops: compute the
 * gradient of its next local batch on the weights it has, push each
 * server's part of it, pull each server's fresh weights. A server applies
 * every push as it arrives (SGD with momentum and weight decay, the
 * learning rate following the schedule as if one worker made every
 * update) and answers with its current shard. Workers never wait for each
 * other, except at the staleness bound: as in stale synchronous parallel
 * (Ho et al., 2013) a worker whose clock (pushes so far) is more than
 * --staleness ahead of the slowest unfinished worker gets its weights only
 * once the slowest catches up. --staleness 0 is lock-step; a large value is
 * plain asynchronous SGD.
 *
 * Each server runs one thread per worker, each on its own two-rank
 * communicator (ps_links.c), so a slow worker only ever holds up its own
 * thread. The job's communicator is used before (exchanging addresses) and
 * after (assembling the final weights, evaluating them) the asynchronous
 * phase, never during it.
 *
 * Messages on a pair link, all blocking: the server first sends its shard
 * (header + weights); then each round the worker sends a header {PUSH, its
 * clock, the weight version it computed on} and its gradient shard, and the
 * server answers with a header {_, version, _, grow} and the new weights
 * (grow: 1 when rank 0 ends the phase for a joiner); at the end the worker
 * sends {DONE}.
 *
 * A failure ends the phase on every rank: the server thread that meets it
 * aborts all of its server's links (gw_comm_abort, safe from any thread),
 * so each worker's next pull from that server fails, and a worker that
 * fails closes its links to every server, whose threads then fail in
 * turn. Every rank then meets the others on the job's communicator. With
 * --elastic, when that fails naming another rank (dead, or stopped past
 * the timeout), the survivors shrink the job and run the rest of it as a
 * new phase (ps_elastic.c). With --elastic, rank 0 (server 0) also ends
 * the phase when a process waits to join: its answers carry a flag, each
 * worker stops at its next pull and says DONE, and the ranks grow the job
 * and run the rest of it with the joiner as a worker (ps_grow.c).
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"
#include "param_server.h"

enum { MSG_PUSH = 1, MSG_DONE = 2 };
#define HDR 4 /* int64 words: type, clock, version seen, spare */

typedef struct link_arg {
    gw_train_ps_t *ps;
    int worker;
    gw_comm_t *link;
    gw_status_t st;
} link_arg_t;

static gw_status_t fail(const char *what, gw_status_t st)
{
    fprintf(stderr, "gradwire-train: %s: %s (%s)\n", what, gw_status_str(st), gw_status_name(st));
    return st;
}

/* The learning rate after `updates` pushes: the schedule of one worker
 * with the local batch that made every update. */
static float server_lr(const gw_train_ps_t *ps, long updates)
{
    gw_train_opts_t one = *ps->o;
    one.batch = (int)ps->local_b;
    return (float)gw_train_lr_at(&one, updates, ps->spe * ps->nworkers);
}

static long min_active_clock(const gw_train_ps_t *ps)
{
    long m = -1;
    for (int w = 0; w < ps->nworkers; w++)
        if (!ps->done[w] && (m < 0 || ps->clock[w] < m))
            m = ps->clock[w];
    return m;
}

/* The first failure on a server: every link is aborted, so every worker
 * learns at its next pull that the phase is over (under ps->lock). */
static void fail_all_locked(gw_train_ps_t *ps, gw_status_t st)
{
    if (ps->failed == GW_OK)
        ps->failed = st;
    for (int w = 0; ps->links && w < ps->nworkers; w++)
        if (ps->links[w])
            gw_comm_abort(ps->links[w]);
    pthread_cond_broadcast(&ps->moved);
}

/* One server thread: serves one worker until it says DONE. */
static void *serve(void *arg)
{
    link_arg_t *la = arg;
    gw_train_ps_t *ps = la->ps;
    int w = la->worker, s = ps->index;
    size_t lo = ps->lo[s], n = ps->lo[s + 1] - lo;
    /* The gradient lands at its place in a full-size array, so the SGD
     * step indexes it like the parameters. */
    float *grad = malloc(ps->model.nparams * sizeof(float)), *out = malloc(n * sizeof(float) + 1);
    int64_t hdr[HDR] = {0};
    gw_status_t st = GW_OK;
    if (!grad || !out) {
        st = GW_ERR_NO_MEMORY;
        goto out;
    }
    gw_train_mlp_t *m = &ps->model;
    pthread_mutex_lock(&ps->lock);
    memcpy(out, m->params + lo, n * sizeof(float));
    hdr[1] = ps->updates;
    pthread_mutex_unlock(&ps->lock);
    if ((st = gw_send(la->link, hdr, HDR, GW_INT64, 1)) != GW_OK ||
        (st = gw_send(la->link, out, n, GW_FLOAT32, 1)) != GW_OK)
        goto out;
    for (;;) {
        if ((st = gw_recv(la->link, hdr, HDR, GW_INT64, 1)) != GW_OK)
            break;
        if (hdr[0] == MSG_DONE)
            break;
        if (hdr[0] != MSG_PUSH) {
            fprintf(stderr, "gradwire-train: server %d: worker %d sent message type %lld\n", s, w,
                    (long long)hdr[0]);
            st = GW_ERR_PROTOCOL;
            break;
        }
        if ((st = gw_recv(la->link, grad + lo, n, GW_FLOAT32, 1)) != GW_OK)
            break;
        pthread_mutex_lock(&ps->lock);
        long lag = ps->updates - hdr[2];
        if (lag > ps->max_lag)
            ps->max_lag = lag;
        /* The SGD step on this server's shard only: the velocity and
         * params of the other shards are other servers' business. */
        gw_train_sgd_step_range(&ps->sgd, m, grad, lo, lo + n, server_lr(ps, ps->updates));
        ps->updates++;
        ps->clock[w] = hdr[1];
        pthread_cond_broadcast(&ps->moved);
        while (!ps->failed && ps->clock[w] - min_active_clock(ps) > ps->o->staleness)
            pthread_cond_wait(&ps->moved, &ps->lock);
        /* The gap the bound held (not the one a failure woke it at: a
         * dead worker's clock stands still until its thread ends). */
        long gap = 0;
        for (int v = 0; !ps->failed && v < ps->nworkers; v++)
            if (!ps->done[v] && ps->clock[w] - ps->clock[v] > gap)
                gap = ps->clock[w] - ps->clock[v];
        if (gap > ps->max_gap)
            ps->max_gap = gap;
        memcpy(out, m->params + lo, n * sizeof(float));
        hdr[1] = ps->updates;
        /* A process waits to join (rank 0 knows, and is server 0): the
         * phase ends, each worker told at its next pull (ps_grow.c). */
        int joiners = 0;
        if (ps->o->elastic && ps->rank == 0 && !ps->grow_now &&
            gw_comm_joiners(ps->comm, &joiners) == GW_OK && joiners > 0)
            ps->grow_now = 1;
        hdr[3] = ps->grow_now;
        st = ps->failed;
        pthread_mutex_unlock(&ps->lock);
        if (st != GW_OK)
            break;
        if ((st = gw_send(la->link, hdr, HDR, GW_INT64, 1)) != GW_OK ||
            (st = gw_send(la->link, out, n, GW_FLOAT32, 1)) != GW_OK)
            break;
    }
out:
    pthread_mutex_lock(&ps->lock);
    ps->done[w] = 1;
    /* Only the first failure is news: the others are its aborts. */
    int first = st != GW_OK && ps->failed == GW_OK;
    if (st != GW_OK)
        fail_all_locked(ps, st); /* also wakes threads waiting on a worker that is gone */
    pthread_cond_broadcast(&ps->moved);
    pthread_mutex_unlock(&ps->lock);
    if (first)
        fprintf(stderr, "gradwire-train: server %d, worker %d: %s\n", s, w, gw_status_str(st));
    la->st = st;
    free(grad);
    free(out);
    return NULL;
}

/* Open a thread per worker; each opens its own link, then serves. */
static void *open_and_serve(void *arg)
{
    link_arg_t *la = arg;
    gw_train_ps_t *ps = la->ps;
    la->st = gw_train_ps_link_open(ps, ps->index, la->worker, 1, &la->link);
    pthread_mutex_lock(&ps->lock);
    if (la->st != GW_OK) {
        ps->done[la->worker] = 1;
        fail_all_locked(ps, la->st);
        pthread_mutex_unlock(&ps->lock);
        return NULL;
    }
    ps->links[la->worker] = la->link;
    if (ps->failed != GW_OK) /* the phase ended while this link opened */
        gw_comm_abort(la->link);
    pthread_mutex_unlock(&ps->lock);
    return serve(arg);
}

static gw_status_t run_server(gw_train_ps_t *ps)
{
    int W = ps->nworkers;
    link_arg_t *la = calloc((size_t)W, sizeof(*la));
    pthread_t *th = calloc((size_t)W, sizeof(*th));
    gw_status_t st = GW_OK;
    ps->failed = GW_OK;
    ps->grow_now = 0;
    ps->links = calloc((size_t)W, sizeof(*ps->links));
    if (!la || !th || !ps->links) {
        free(la);
        free(th);
        free(ps->links);
        ps->links = NULL;
        return GW_ERR_NO_MEMORY;
    }
    int started = 0;
    for (int w = 0; w < W; w++, started++) {
        la[w] = (link_arg_t){.ps = ps, .worker = w};
        if (pthread_create(&th[w], NULL, open_and_serve, &la[w]) != 0) {
            fprintf(stderr, "gradwire-train: cannot start a server thread\n");
            st = GW_ERR_SYSTEM;
            break;
        }
    }
    if (st != GW_OK) { /* the threads started must not wait for the others */
        pthread_mutex_lock(&ps->lock);
        fail_all_locked(ps, st);
        pthread_mutex_unlock(&ps->lock);
    }
    for (int w = 0; w < started; w++)
        pthread_join(th[w], NULL);
    for (int w = 0; w < started; w++) {
        if (la[w].link)
            gw_comm_destroy(la[w].link);
        if (la[w].st != GW_OK && st == GW_OK)
            st = la[w].st;
    }
    free(ps->links);
    ps->links = NULL;
    free(la);
    free(th);
    return st;
}

typedef struct worker_stats {
    double compute_s, push_s, pull_s;
    double loss;
    long correct, seen;
} worker_stats_t;

static gw_status_t pull(gw_train_ps_t *ps, gw_comm_t **links)
{
    int64_t *version = ps->version;
    for (int s = 0; s < ps->nservers; s++) {
        int64_t hdr[HDR];
        size_t lo = ps->lo[s], n = ps->lo[s + 1] - lo;
        gw_status_t st = gw_recv(links[s], hdr, HDR, GW_INT64, 0);
        if (st == GW_OK)
            st = gw_recv(links[s], ps->model.params + lo, n, GW_FLOAT32, 0);
        if (st != GW_OK)
            return fail("pulling weights", st);
        version[s] = hdr[1];
        if (hdr[3])
            ps->grow_seen = 1; /* server 0 ends the phase for a joiner */
    }
    ps->pulled = 1;
    return GW_OK;
}

static gw_status_t push(gw_train_ps_t *ps, gw_comm_t **links, long clock, const int64_t *version)
{
    for (int s = 0; s < ps->nservers; s++) {
        int64_t hdr[HDR] = {MSG_PUSH, clock, version[s], 0};
        size_t lo = ps->lo[s], n = ps->lo[s + 1] - lo;
        gw_status_t st = gw_send(links[s], hdr, HDR, GW_INT64, 0);
        if (st == GW_OK)
            st = gw_send(links[s], ps->model.grads + lo, n, GW_FLOAT32, 0);
        if (st != GW_OK)
            return fail("pushing gradients", st);
    }
    return GW_OK;
}

/* Worker 0 reports per epoch what it sees: its own training loss and
 * accuracy, and the test accuracy of the weights it holds now. */
static gw_status_t worker_epoch_report(gw_train_ps_t *ps, gw_train_report_t *rep, int epoch,
                                       const worker_stats_t *ws, double epoch_s, double elapsed,
                                       long seen_now, gw_train_dataset_t *test_full, double *tta)
{
    double tloss = 0;
    long tok = 0;
    if (test_full->n)
        gw_train_mlp_evaluate(&ps->model, test_full, &tloss, &tok);
    gw_train_epoch_stats_t e = {
        .epoch = epoch,
        .loss = ws->seen ? ws->loss / (double)ws->seen : 0,
        .train_acc = ws->seen ? (double)ws->correct / (double)ws->seen : 0,
        .test_loss = test_full->n ? tloss / (double)test_full->n : 0,
        .test_acc = test_full->n ? (double)tok / (double)test_full->n : -1,
        /* Worker 0's rate times the workers: an estimate, the workers
         * do not stop at the same moment. */
        .samples_per_s = epoch_s > 0 ? (double)seen_now * ps->nworkers / epoch_s : 0,
        .compute_s = ws->compute_s,
        .comm_s = ws->push_s,
        .wait_s = ws->pull_s,
        .epoch_s = epoch_s,
        .elapsed_s = elapsed,
        .lr = server_lr(ps, (long)epoch * ps->spe * ps->nworkers),
    };
    if (e.test_acc >= ps->o->target_acc && *tta < 0)
        *tta = elapsed;
    rep->time_to_target_s = *tta;
    return gw_train_report_epoch(rep, &e);
}

static gw_status_t run_worker(gw_train_ps_t *ps, gw_train_report_t *rep, double *train_s,
                              long *samples)
{
    const gw_train_opts_t *o = ps->o;
    int S = ps->nservers, w = ps->index;
    gw_comm_t *links[GW_TRAIN_PS_MAX] = {0};
    const int64_t *version = ps->version;
    uint32_t *perm = malloc(ps->train.n * sizeof(uint32_t));
    float *xb = malloc(ps->local_b * ps->train.dim * sizeof(float));
    int32_t *yb = malloc(ps->local_b * sizeof(int32_t));
    gw_train_dataset_t tmp, test_full = {0};
    gw_status_t st = GW_OK;
    double t_start = gw_kit_now_s(), tta = -1;
    if (!perm || !xb || !yb) {
        st = GW_ERR_NO_MEMORY;
        goto out;
    }
    /* Worker 0 judges the weights on the whole test set. */
    if (w == 0 && (st = gw_train_load_data(o, 0, 1, &tmp, &test_full)) != GW_OK)
        goto out;
    if (w == 0)
        gw_train_dataset_free(&tmp);
    for (int s = 0; s < S; s++)
        if ((st = gw_train_ps_link_open(ps, s, w, 0, &links[s])) != GW_OK)
            goto out;
    /* The weights as the servers have them now (a new phase's servers
     * may hold weights another rank pulled last). */
    ps->pulled = 0;
    ps->grow_seen = 0;
    if ((st = pull(ps, links)) != GW_OK)
        goto out;
    gw_train_rng_t rng;
    gw_train_rng_seed(&rng, gw_train_mix64(o->seed) ^ (uint64_t)w ^ ((uint64_t)ps->epoch0 << 32));
    long clock = 0, total = ps->budget;
    for (int epoch = (int)ps->epoch0; clock < total; epoch++) {
        worker_stats_t ws = {0};
        double e0 = gw_kit_now_s();
        for (size_t i = 0; i < ps->train.n; i++)
            perm[i] = (uint32_t)i;
        if (o->shuffle)
            gw_train_shuffle(perm, ps->train.n, &rng);
        long step;
        for (step = 0; step < ps->spe && clock < total; step++) {
            double t0 = gw_kit_now_s();
            for (size_t j = 0; j < ps->local_b; j++) {
                uint32_t i = perm[(size_t)step * ps->local_b + j];
                memcpy(xb + j * ps->train.dim, ps->train.x + (size_t)i * ps->train.dim,
                       ps->train.dim * sizeof(float));
                yb[j] = ps->train.y[i];
            }
            gw_train_mlp_forward(&ps->model, xb, ps->local_b);
            gw_train_mlp_loss(&ps->model, yb, ps->local_b, 1.0f / (float)ps->local_b, &ws.loss,
                              &ws.correct);
            ws.seen += (long)ps->local_b;
            gw_train_mlp_backward(&ps->model, ps->local_b, NULL, NULL);
            gw_train_straggler_slow(&ps->slow, ps->local_b);
            double t1 = gw_kit_now_s();
            clock++;
            if ((st = push(ps, links, clock, version)) != GW_OK)
                goto out;
            double t2 = gw_kit_now_s();
            if ((st = pull(ps, links)) != GW_OK)
                goto out;
            double t3 = gw_kit_now_s();
            /* A server's version counts every push it applied, so after
             * this worker's push `clock` it is this clock plus the other
             * workers' clocks at that server. Under the staleness bound
             * none of them trails this one by more than --staleness. */
            for (int s = 0; s < S && ps->nworkers > 1; s++) {
                double others = (double)(version[s] - clock) / (ps->nworkers - 1);
                if ((double)clock - others > ps->max_lead)
                    ps->max_lead = (double)clock - others;
            }
            ws.compute_s += t1 - t0;
            ws.push_s += t2 - t1;
            ws.pull_s += t3 - t2;
            if (w == 0)
                gw_train_report_progress(rep, epoch + 1, step + 1, ps->spe,
                                         ws.loss / (double)ws.seen);
            if (ps->grow_seen) {
                step++;
                break;
            }
        }
        if (ps->grow_seen && step < ps->spe && clock < total) {
            /* The phase ends within an epoch: its samples count, its
             * report comes from the next phase, as after a shrink. */
            *samples += ws.seen;
            break;
        }
        double now = gw_kit_now_s();
        *samples += ws.seen;
        if (w == 0 && (st = worker_epoch_report(ps, rep, epoch + 1, &ws, now - e0, now - t_start,
                                                ws.seen, &test_full, &tta)) != GW_OK)
            goto out;
        if (ps->grow_seen)
            break;
    }
    for (int s = 0; s < S; s++) {
        int64_t hdr[HDR] = {MSG_DONE, clock, 0, 0};
        if ((st = gw_send(links[s], hdr, HDR, GW_INT64, 0)) != GW_OK) {
            fail("saying goodbye to a server", st);
            goto out;
        }
    }
out:
    *train_s += gw_kit_now_s() - t_start; /* a failed phase's time was spent too */
    /* On a failure the servers must hear of it now, not at a timeout. */
    for (int s = 0; st != GW_OK && s < S; s++)
        if (links[s])
            gw_comm_abort(links[s]);
    for (int s = 0; s < S; s++)
        gw_comm_destroy(links[s]);
    gw_train_dataset_free(&test_full);
    free(perm);
    free(xb);
    free(yb);
    return st;
}

/* Server s owns params [lo[s], lo[s+1]): equal parts of the model. */
static void split_shards(gw_train_ps_t *ps)
{
    for (int s = 0; s <= ps->nservers; s++)
        ps->lo[s] = ps->model.nparams * (size_t)s / (size_t)ps->nservers;
}

gw_status_t gw_train_ps_plan(gw_train_ps_t *ps, int S)
{
    const gw_train_opts_t *o = ps->o;
    int W = ps->world - S;
    if (W < 1 || S > GW_TRAIN_PS_MAX || W > GW_TRAIN_PS_MAX) {
        fprintf(stderr,
                "gradwire-train: --async with %d server(s) needs at least %d ranks (servers plus "
                "one worker; at most %d of each), not %d\n",
                S, S + 1, GW_TRAIN_PS_MAX, ps->world);
        return GW_ERR_CONFIG;
    }
    /* The last phase's reservations, counted by its number of workers
     * (a grow adds some: hold_fd was sized for the old count). */
    gw_train_ps_links_release(ps);
    free(ps->hold_fd);
    ps->hold_fd = NULL;
    ps->nservers = S;
    ps->nworkers = W;
    ps->is_server = ps->rank < S;
    ps->index = ps->is_server ? ps->rank : ps->rank - S;
    /* Servers load the data too: it gives them the model's shape, and
     * every rank then agrees on it without a message. */
    gw_train_dataset_free(&ps->train);
    gw_train_dataset_free(&ps->test);
    gw_status_t st = gw_train_load_data(o, ps->is_server ? 0 : ps->index, W, &ps->train, &ps->test);
    if (st != GW_OK)
        return st;
    ps->spe = (long)(ps->train.n / ps->local_b);
    if (ps->spe == 0) {
        fprintf(stderr, "gradwire-train: each worker holds %zu samples, fewer than its batch %zu\n",
                ps->train.n, ps->local_b);
        return GW_ERR_INVALID_ARG;
    }
    split_shards(ps); /* the first phase's, once the model exists (setup) */
    free(ps->port);
    free(ps->clock);
    free(ps->done);
    ps->port = calloc((size_t)S * (size_t)W, sizeof(int));
    ps->clock = calloc((size_t)W, sizeof(long));
    ps->done = calloc((size_t)W, sizeof(int));
    ps->hold_fd = malloc((size_t)W * sizeof(int));
    if (!ps->port || !ps->clock || !ps->done || !ps->hold_fd)
        return GW_ERR_NO_MEMORY;
    for (int w = 0; w < W; w++)
        ps->hold_fd[w] = -1;
    return GW_OK;
}

long gw_train_ps_share_left(gw_train_ps_t *ps, int64_t applied)
{
    long left = ps->planned > applied ? ps->planned - (long)applied : 0;
    ps->budget = left / ps->nworkers + (!ps->is_server && ps->index < left % ps->nworkers);
    long per_epoch = ps->spe * ps->nworkers;
    ps->epoch0 = per_epoch > 0 ? (long)applied / per_epoch : 0;
    if (ps->is_server)
        ps->updates = (long)applied;
    return left;
}

gw_status_t gw_train_ps_model_init(gw_train_ps_t *ps)
{
    const gw_train_opts_t *o = ps->o;
    int sizes[GW_TRAIN_MAX_LAYERS + 1], ns = 0;
    sizes[ns++] = (int)ps->train.dim;
    for (int i = 0; i < o->nhidden; i++)
        sizes[ns++] = o->hidden[i];
    sizes[ns++] = ps->train.nclasses;
    gw_train_rng_t rng;
    gw_train_rng_seed(&rng, o->seed);
    size_t cap = ps->local_b > 256 ? ps->local_b : 256;
    gw_status_t st = gw_train_mlp_init(&ps->model, sizes, ns, cap, &rng);
    if (st == GW_OK)
        split_shards(ps);
    return st;
}

static gw_status_t setup(gw_train_ps_t *ps)
{
    const gw_train_opts_t *o = ps->o;
    int W = ps->world - o->servers;
    if (W >= 1 && o->batch % W != 0) {
        fprintf(stderr,
                "gradwire-train: the global batch %d must be a multiple of the %d workers\n",
                o->batch, W);
        return GW_ERR_INVALID_ARG;
    }
    /* The local batch stays this all run: after a shrink (--elastic) an
     * update still means what it meant, and the schedule is unchanged. */
    ps->local_b = W >= 1 ? (size_t)(o->batch / W) : 1;
    gw_status_t st = gw_train_test_slow(ps->rank, &ps->slow.slow_s_per_sample);
    if (st == GW_OK)
        st = gw_train_ps_plan(ps, o->servers);
    if (st != GW_OK || (st = gw_train_ps_model_init(ps)) != GW_OK)
        return st;
    ps->budget = (long)o->epochs * ps->spe;
    if (o->max_steps > 0 && o->max_steps < ps->budget)
        ps->budget = o->max_steps;
    ps->planned = ps->budget * ps->nworkers;
    if (ps->is_server)
        return gw_train_sgd_init(&ps->sgd, &ps->model, o->momentum, o->weight_decay);
    return GW_OK;
}

/* After the asynchronous phase: the servers' shards make the final
 * weights on every rank, and every rank evaluates its part of the test set. */
static gw_status_t finish(gw_train_ps_t *ps, double *acc)
{
    gw_train_mlp_t *m = &ps->model;
    if (ps->is_server) {
        size_t lo = ps->lo[ps->index], hi = ps->lo[ps->index + 1];
        memset(m->params, 0, lo * sizeof(float));
        memset(m->params + hi, 0, (m->nparams - hi) * sizeof(float));
    } else {
        memset(m->params, 0, m->nparams * sizeof(float));
    }
    gw_status_t st = gw_allreduce(ps->comm, m->params, m->params, m->nparams, GW_FLOAT32, GW_SUM);
    if (st != GW_OK)
        return fail("assembling the final weights", st);
    return gw_train_ps_evaluate(ps, acc);
}

gw_status_t gw_train_ps_evaluate(gw_train_ps_t *ps, double *acc)
{
    gw_train_mlp_t *m = &ps->model;
    gw_status_t st;
    gw_train_dataset_t tr, te;
    if ((st = gw_train_load_data(ps->o, ps->rank, ps->world, &tr, &te)) != GW_OK)
        return st;
    gw_train_dataset_free(&tr);
    double v[3] = {0, 0, (double)te.n};
    long ok = 0;
    gw_train_mlp_evaluate(m, &te, &v[0], &ok);
    v[1] = (double)ok;
    gw_train_dataset_free(&te);
    if ((st = gw_allreduce(ps->comm, v, v, 3, GW_FLOAT64, GW_SUM)) != GW_OK)
        return fail("evaluating the final weights", st);
    *acc = v[2] > 0 ? v[1] / v[2] : -1;
    return GW_OK;
}

int gw_train_run_async(const gw_train_opts_t *o, gw_comm_t *comm)
{
    gw_train_ps_t ps;
    memset(&ps, 0, sizeof(ps));
    ps.o = o;
    ps.comm = comm;
    ps.rank = gw_comm_rank(comm);
    ps.world = gw_comm_size(comm);
    pthread_mutex_init(&ps.lock, NULL);
    pthread_cond_init(&ps.moved, NULL);
    openblas_set_num_threads(o->threads);
    if (o->ckpt_dir || o->resume) {
        fprintf(stderr, "gradwire-train: checkpoints are for synchronous training; --async "
                        "does not write or resume them\n");
        return 2;
    }
    gw_train_report_t rep;
    memset(&rep, 0, sizeof(rep));
    /* A joiner (--join) takes the run's state from the members instead. */
    gw_status_t st = o->join ? gw_train_ps_joined(&ps) : setup(&ps);
    double train_s = 0, acc = -1, v[3], mx[3];
    long samples = 0;
    int is_w0 = 0;
    for (;;) {
        /* Everyone joins the exchange, so a rank that failed to set up
         * takes the others down instead of leaving them waiting. */
        gw_status_t xst = gw_train_ps_links_exchange(&ps);
        if (st == GW_OK)
            st = xst;
        is_w0 = !ps.is_server && ps.index == 0;
        if (st == GW_OK && rep.open && rep.world != ps.world)
            gw_train_report_world(&rep, ps.world); /* shrunk or grown */
        if (st == GW_OK)
            st = rep.open ? gw_train_report_rank(&rep, is_w0 ? 0 : 1)
                          : gw_train_report_open(&rep, o, is_w0 ? 0 : 1, ps.world);
        if (st == GW_OK && is_w0 && !o->quiet && ps.nretired == 0)
            printf("gradwire-train: parameter-server SGD, %d server(s), %d worker(s), %zu "
                   "parameters, global batch %d (%zu per worker), staleness bound %d\n",
                   ps.nservers, ps.nworkers, ps.model.nparams, o->batch, ps.local_b, o->staleness);
        if (st == GW_OK)
            st = ps.is_server ? run_server(&ps) : run_worker(&ps, &rep, &train_s, &samples);
        /* The asynchronous phase is over on this rank; gather what it did. */
        v[0] = st == GW_OK ? 0 : 1;
        v[1] = (double)samples;
        v[2] = ps.grow_now || ps.grow_seen; /* the phase ended for a joiner */
        gw_status_t cst = gw_allreduce(ps.comm, v, v, 3, GW_FLOAT64, GW_SUM);
        if (cst == GW_OK && v[0] == 0 && v[2] > 0) {
            /* Admit it, and go on with it as a worker; a rank lost on
             * the way is a failure like any other. */
            if ((cst = gw_train_ps_grow(&ps)) == GW_OK)
                continue;
        }
        if (cst != GW_OK && o->elastic) {
            /* A rank is gone or stopped: the survivors go on without it. */
            if ((cst = gw_train_ps_recover(&ps, cst)) == GW_OK) {
                st = GW_OK;
                continue;
            }
        }
        mx[0] = train_s;
        mx[1] = (double)(ps.is_server ? ps.max_gap : 0);
        mx[2] = ps.max_lead;
        if (cst == GW_OK)
            cst = gw_allreduce(ps.comm, mx, mx, 3, GW_FLOAT64, GW_MAX);
        if (cst != GW_OK)
            st = st != GW_OK ? st : fail("gathering the results", cst);
        else if (st == GW_OK && v[0] > 0)
            st = GW_ERR_REMOTE;
        break;
    }
    if (st == GW_OK)
        st = finish(&ps, &acc);
    if (st == GW_OK && is_w0) {
        if (!o->quiet)
            printf("gradwire-train: final weights (assembled from the servers): test accuracy "
                   "%.2f%%; %.0f samples in %.2f s (%.0f samples/s); largest clock gap between "
                   "workers %ld (bound %d); largest lead of a worker over the others' mean "
                   "clock, from the versions it received, %.2f\n",
                   100 * acc, v[1], mx[0], mx[0] > 0 ? v[1] / mx[0] : 0, (long)mx[1], o->staleness,
                   mx[2]);
        rep.steps = (long)(v[1] / (double)ps.local_b);
        rep.samples = (long)v[1];
        rep.train_s = mx[0];
        rep.compute_per_sample_s = NAN; /* workers do not report theirs */
        rep.grad_bytes = ps.model.nparams * sizeof(float);
        if (rep.nepochs > 0)
            rep.epochs[rep.nepochs - 1].test_acc = acc;
    }
    if (st == GW_OK && o->save_weights && ps.rank == 0)
        st = gw_train_save_floats(o->save_weights, ps.model.params, ps.model.nparams);
    if (rep.open) {
        gw_status_t rst = gw_train_report_close(&rep, st == GW_OK ? o->report_json : NULL);
        if (st == GW_OK)
            st = rst;
    }
    gw_train_sgd_free(&ps.sgd);
    gw_train_mlp_free(&ps.model);
    gw_train_dataset_free(&ps.train);
    gw_train_dataset_free(&ps.test);
    gw_train_ps_links_release(&ps);
    gw_train_ps_retired_free(&ps);
    free(ps.hold_fd);
    free(ps.port);
    free(ps.clock);
    free(ps.done);
    pthread_cond_destroy(&ps.moved);
    pthread_mutex_destroy(&ps.lock);
    return st == GW_OK ? 0 : 1;
}
