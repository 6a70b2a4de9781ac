/*
 * train_elastic.c - `gradwire train --elastic`: synchronous training that
 * survives the loss of ranks.
 *
 * Before every step each rank keeps the state it would need to take that
 * step again: the weights, the momentum, its position and its epoch sums
 * (two such snapshots, the last two steps', swapped, never copied twice).
 * When a step (or the epoch's statistics, or a checkpoint's agreement)
 * fails and the communicator names a culprit other than this rank, the
 * survivors shrink the communicator (gw_comm_shrink: they agree on who is
 * left, renumbered in order, and connect afresh) and roll back to the last
 * step that every survivor completed. Ranks are never more than one step
 * apart: a rank finishes step k's allreduce only when every rank has sent
 * its part of step k, so every survivor has finished step k - 1; the
 * allreduce (MIN) of the steps done says which, and each rank restores
 * the snapshot taken at it. Data parallelism keeps every replica
 * identical, so from there on the survivors are a smaller job with the
 * same model.
 *
 * The global batch stays what --batch says: the survivors split it
 * (b/n samples each, the first b mod n ranks one more) and the loss is
 * still scaled by 1 / global batch, so a step means what it meant before
 * and the learning rate and its schedule need no change. The data is
 * re-sharded over the new world (data_shard.c: rank r of n keeps the
 * samples i with i % n == r), the epoch goes on from the same step with the
 * shuffle replayed on the new shards (the rest of that epoch may repeat
 * or skip a few samples), and the position is renumbered for the new
 * number of steps per epoch. The report says which ranks were lost, at
 * which step, and the time lost (from the start of the step rolled back to
 * until the survivors go on, the failure's detection included).
 *
 * The failed communicators are kept until the run ends: while they live,
 * old rank 0's referee (or, when rank 0 died, the heir that led the
 * survivors in its place) tells a rank that was only stopped and wakes up
 * late that it was left out (it then fails, instead of joining). Rank 0
 * may die like any other: the lowest surviving rank becomes rank 0 of the
 * shrunk job (gw_comm_shrink), and prints the reports from then on. A
 * joiner reaches the job through the root address it was given, rank 0's:
 * after rank 0 died it must be given the new one, which the new rank 0
 * logs. Async SGD and model parallelism are refused with --elastic
 * (options.c).
 *
 * With a codec, each rank's codec states (error-feedback residuals, their
 * step, PowerSGD's Q, DGC's velocity) are part of its snapshot and roll
 * back with the weights: every survivor goes on from its own states of
 * that step, in step with the others (the step is in every compressed
 * message's signature), and the lost ranks' residuals, the error they had
 * not yet fed back, are lost with them. The codec's communicator becomes
 * the shrunk one, and its loss scale follows the new local batches
 * (train_sync.c). A joiner takes rank 0's states with zero residuals
 * (train_grow.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"
#include "train_sync.h"
#include "trainer.h"

/* One step's starting point. */
typedef struct snapshot {
    float *params, *velocity;
    long epoch, step, gstep;
    gw_train_rng_t rng_epoch;
    double ep_loss;
    long ep_correct, ep_seen;
    double at_s; /* when it was taken */
    int valid;
    /* With a codec: this rank's codec states (steps, residuals, PowerSGD's
     * Q, DGC's velocity) as gw_train_codec_save_into writes them. */
    unsigned char *codec;
    size_t codec_len, codec_cap;
} snapshot_t;

#define MAX_RETIRED 64

struct gw_train_elastic {
    snapshot_t snap[2]; /* [cur]: the step in progress, [!cur]: the one before */
    int cur;
    gw_comm_t *retired[MAX_RETIRED]; /* failed communicators, kept (see top) */
    int nretired;
    gw_comm_t *owned; /* the communicator this file made, or NULL */
};

int gw_train_local_batch(int batch, int rank, int world)
{
    return batch / world + (rank < batch % world);
}

void gw_train_elastic_free(gw_train_sync_t *s)
{
    gw_train_elastic_t *el = s->el;
    if (!el)
        return;
    for (int i = 0; i < 2; i++) {
        free(el->snap[i].params);
        free(el->snap[i].velocity);
        free(el->snap[i].codec);
    }
    gw_comm_destroy(el->owned);
    /* The caller's communicator (retired[0]) is the caller's to destroy. */
    for (int i = el->nretired - 1; i >= 1; i--)
        gw_comm_destroy(el->retired[i]);
    free(el);
    s->el = NULL;
}

static gw_status_t ensure(gw_train_sync_t *s)
{
    if (s->el)
        return GW_OK;
    gw_train_elastic_t *el = calloc(1, sizeof(*el));
    if (!el)
        return GW_ERR_NO_MEMORY;
    size_t bytes = s->model.nparams * sizeof(float);
    for (int i = 0; i < 2; i++) {
        el->snap[i].params = malloc(bytes);
        el->snap[i].velocity = malloc(bytes);
        if (!el->snap[i].params || !el->snap[i].velocity) {
            s->el = el;
            gw_train_elastic_free(s);
            fprintf(stderr, "gradwire-train: --elastic: no memory for the step snapshots\n");
            return GW_ERR_NO_MEMORY;
        }
    }
    s->el = el;
    return GW_OK;
}

gw_status_t gw_train_elastic_snapshot(gw_train_sync_t *s)
{
    if (!s->o->elastic)
        return GW_OK;
    gw_status_t st = ensure(s);
    if (st != GW_OK)
        return st;
    gw_train_elastic_t *el = s->el;
    el->cur ^= 1;
    snapshot_t *p = &el->snap[el->cur];
    size_t bytes = s->model.nparams * sizeof(float);
    memcpy(p->params, s->model.params, bytes);
    memcpy(p->velocity, s->sgd.velocity, bytes);
    p->epoch = s->epoch;
    p->step = s->step;
    p->gstep = s->gstep;
    p->rng_epoch = s->rng_epoch;
    p->ep_loss = s->ep_loss;
    p->ep_correct = s->ep_correct;
    p->ep_seen = s->ep_seen;
    p->at_s = gw_kit_now_s();
    p->valid = 0;
    if (s->codec &&
        (st = gw_train_codec_save_into(s->codec, &p->codec, &p->codec_cap, &p->codec_len))) {
        fprintf(stderr, "gradwire-train: --elastic: cannot keep the codec state: %s\n",
                gw_status_name(st));
        return st;
    }
    p->valid = 1;
    return GW_OK;
}

static gw_status_t restore(gw_train_sync_t *s, const snapshot_t *p)
{
    size_t bytes = s->model.nparams * sizeof(float);
    memcpy(s->model.params, p->params, bytes);
    memcpy(s->sgd.velocity, p->velocity, bytes);
    s->epoch = p->epoch;
    s->step = p->step;
    s->gstep = p->gstep;
    /* The shuffle of that epoch replays from here (on the new shards). */
    s->rng = p->rng_epoch;
    s->ep_loss = p->ep_loss;
    s->ep_correct = p->ep_correct;
    s->ep_seen = p->ep_seen;
    /* Each survivor's own codec states as they were (the lost ranks'
     * residuals are lost with them). */
    return s->codec ? gw_train_codec_load(s->codec, p->codec, p->codec_len) : GW_OK;
}

/* This rank's shard and batch in the new world, and the buffers for it. */
gw_status_t gw_train_elastic_reshard(gw_train_sync_t *s)
{
    const gw_train_opts_t *o = s->o;
    gw_train_dataset_free(&s->train);
    gw_train_dataset_free(&s->test);
    gw_status_t st = gw_train_load_data(o, s->rank, s->world, &s->train, &s->test);
    if (st != GW_OK)
        return st;
    s->local_b = (size_t)gw_train_local_batch(o->batch, s->rank, s->world);
    s->batch_stride = s->local_b; /* each rank walks its own shard */
    s->batch_off = 0;
    /* The straggler figures are per rank of one world: start them again. */
    gw_train_straggler_free(&s->strag);
    if ((st = gw_train_straggler_init(&s->strag, o, s->rank, s->world)) != GW_OK)
        return st;
    size_t widest = (size_t)gw_train_local_batch(o->batch, 0, s->world);
    s->spe = (long)(s->train.n / widest);
    if (s->spe == 0 || s->local_b == 0) {
        fprintf(stderr,
                "gradwire-train: --elastic: %d ranks left: %zu samples each, too few for the "
                "global batch %d\n",
                s->world, s->train.n, o->batch);
        return GW_ERR_INVALID_ARG;
    }
    free(s->perm);
    free(s->xb);
    free(s->yb);
    s->perm = malloc(s->train.n * sizeof(uint32_t));
    s->xb = malloc(widest * s->train.dim * sizeof(float));
    s->yb = malloc(widest * sizeof(int32_t));
    if (!s->perm || !s->xb || !s->yb)
        return GW_ERR_NO_MEMORY;
    /* The same step of the same epoch, numbered for the new epoch length. */
    if (s->step >= s->spe)
        s->step = s->spe - 1;
    s->gstep = s->epoch * s->spe + s->step;
    if (s->codec)
        gw_train_codec_set_comm(s->codec, s->comm);
    if ((st = gw_train_sync_buckets(s, s->codec != NULL)) != GW_OK)
        return st;
    gw_train_opts_fingerprint(o, s->world, s->config, sizeof(s->config));
    s->rep.world = s->world;
    return GW_OK;
}

gw_status_t gw_train_elastic_shrink(gw_comm_t *old, gw_status_t failure, gw_comm_t **out,
                                    int32_t **members, char *lost, size_t cap)
{
    int rank = gw_comm_rank(old), old_world = gw_comm_size(old);
    int culprit = gw_comm_culprit(old);
    if (culprit < 0 || culprit == rank) {
        fprintf(stderr,
                "gradwire-train: --elastic: the failure (%s) names %s: nothing to shrink away\n",
                gw_status_name(failure), culprit < 0 ? "no rank" : "this rank");
        return failure;
    }
    gw_comm_t *nc = NULL;
    gw_status_t st = gw_comm_shrink(old, &nc);
    if (st != GW_OK) {
        fprintf(stderr, "gradwire-train: --elastic: rank %d cannot go on: the shrink failed (%s)\n",
                rank, gw_status_name(st));
        return st;
    }
    int world = gw_comm_size(nc);
    int32_t me = rank, *m = calloc((size_t)world, sizeof(*m));
    if (!m)
        st = GW_ERR_NO_MEMORY;
    else if ((st = gw_allgather(nc, &me, m, 1, GW_INT32)) != GW_OK)
        fprintf(stderr, "gradwire-train: --elastic: the shrunk communicator failed: %s\n",
                gw_status_name(st));
    if (st != GW_OK) {
        free(m);
        gw_comm_destroy(nc);
        return st;
    }
    /* The old ranks not among the members (both in order). */
    size_t len = 0;
    lost[0] = '\0';
    for (int r = 0, j = 0; r < old_world; r++) {
        if (j < world && m[j] == r) {
            j++;
            continue;
        }
        if (len < cap)
            len += (size_t)snprintf(lost + len, cap - len, "%s%d", len ? "," : "", r);
    }
    *out = nc;
    if (members)
        *members = m;
    else
        free(m);
    return GW_OK;
}

/* Which old ranks the new communicator lost: printed by rank 0. */
static void say_who(gw_train_sync_t *s, const char *lost, long failed_gstep, double lost_s)
{
    if (s->rank != 0)
        return;
    printf("gradwire-train: --elastic: lost rank(s) %s in step %ld (epoch %ld); %d rank(s) go "
           "on from step %ld (global batch %d, %zu-%d per rank), %.2f s lost\n",
           lost, failed_gstep + 1, s->epoch + 1, s->world, s->gstep, s->o->batch, s->local_b,
           gw_train_local_batch(s->o->batch, s->world - 1, s->world), lost_s);
    if (s->codec)
        printf("gradwire-train: --elastic: codec %s: each survivor's codec state (error-feedback "
               "residual, step %llu) rolled back with the weights; the lost rank(s)' residuals "
               "are dropped\n",
               s->o->codec, (unsigned long long)gw_train_codec_step(s->codec));
    fflush(stdout);
}

gw_status_t gw_train_elastic_adopt(gw_train_sync_t *s, gw_comm_t *nc)
{
    gw_status_t st = ensure(s);
    if (st != GW_OK)
        return st;
    gw_train_elastic_t *el = s->el;
    if (el->nretired == MAX_RETIRED) {
        fprintf(stderr, "gradwire-train: --elastic: %d communicators replaced already; giving up\n",
                MAX_RETIRED);
        return GW_ERR_OVERFLOW;
    }
    el->retired[el->nretired++] = s->comm;
    el->owned = nc;
    s->comm = nc;
    s->rank = gw_comm_rank(nc);
    s->world = gw_comm_size(nc);
    el->snap[0].valid = el->snap[1].valid = 0;
    gw_train_report_world(&s->rep, s->world);
    return gw_train_report_rank(&s->rep, s->rank);
}

gw_status_t gw_train_elastic_recover(gw_train_sync_t *s, gw_status_t failure)
{
    if (!s->o->elastic || !s->el)
        return failure;
    gw_comm_t *old = s->comm;
    gw_train_elastic_t *el = s->el;
    if (el->nretired == MAX_RETIRED) {
        fprintf(stderr, "gradwire-train: --elastic: %d shrinks already; giving up\n", MAX_RETIRED);
        return failure;
    }
    long failed_gstep = s->gstep;
    int old_rank = s->rank;
    gw_comm_t *nc = NULL;
    char lost[512];
    gw_status_t st = gw_train_elastic_shrink(old, failure, &nc, NULL, lost, sizeof(lost));
    if (st != GW_OK)
        return st;
    el->retired[el->nretired++] = old;
    el->owned = nc;
    s->comm = nc;
    s->rank = gw_comm_rank(nc);
    s->world = gw_comm_size(nc);
    gw_train_report_world(&s->rep, s->world);
    if ((st = gw_train_report_rank(&s->rep, s->rank)) != GW_OK)
        return st;
    /* The last step every survivor finished. */
    int64_t done = el->snap[el->cur].gstep;
    if ((st = gw_allreduce(nc, &done, &done, 1, GW_INT64, GW_MIN)) != GW_OK) {
        fprintf(stderr, "gradwire-train: --elastic: the shrunk communicator failed: %s\n",
                gw_status_name(st));
        return st;
    }
    const snapshot_t *back = NULL;
    for (int i = 0; i < 2; i++)
        if (el->snap[i].valid && el->snap[i].gstep == done)
            back = &el->snap[i];
    if (!back) {
        fprintf(stderr,
                "gradwire-train: --elastic: rank %d cannot roll back to step %lld (it holds "
                "steps %ld and %ld)\n",
                old_rank, (long long)done, el->snap[el->cur].gstep, el->snap[el->cur ^ 1].gstep);
        return GW_ERR_INVALID_ARG;
    }
    double since = back->at_s;
    if ((st = restore(s, back)) != GW_OK) {
        fprintf(stderr, "gradwire-train: --elastic: rank %d cannot roll back its codec state: %s\n",
                old_rank, gw_status_name(st));
        return st;
    }
    el->snap[0].valid = el->snap[1].valid = 0;
    /* A rank that had gone into the next grow while the others' last step
     * failed holds that step as its last grow; after the roll-back every
     * survivor must decide alike whether to grow where they resume. */
    s->grown_at = -1;
    if ((st = gw_train_elastic_reshard(s)) != GW_OK)
        return st;
    say_who(s, lost, failed_gstep, gw_kit_now_s() - since);
    return GW_OK;
}
