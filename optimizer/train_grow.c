/*
 * train_grow.c - `gradwire train --elastic` admits new ranks at the start
 * of every epoch, and with --grow-every N every N steps, at any step of an
 * epoch; `--elastic --join` is such a new rank.
 *
 * At each epoch's start (and every N steps) every rank calls gw_comm_grow. Most of the time
 * nobody waits to join and it returns at once with no new communicator.
 * When processes wait (started with `--elastic --join`, GW_ROOT and
 * GW_JOB_TOKEN of the job), rank 0's referee admits them: members keep
 * their ranks, joiners come after them, and everyone moves to the grown
 * communicator (the old one is kept until the run ends, like a shrink's).
 * Then rank 0 sends what a rank needs to take the next step exactly as the
 * members would: the position (epoch and step; at an epoch's start the
 * epoch's sums are zero), the shuffle generator's state (so every rank
 * draws the same permutation of its shard from here on, as after a
 * restart), the weights and the momentum. Every rank re-shards the data
 * over the new world (rank r of n keeps the samples i with i % n == r) and
 * splits the same global batch --batch over more ranks, as a shrink does
 * over fewer, so a step still means what it meant and the learning rate
 * schedule goes on unchanged.
 *
 * Past an epoch's start the position is a step of it: the generator goes
 * out as it was at the epoch's start and every rank replays the
 * epoch's shuffle on its new shard, as the survivors of a shrink do after
 * their roll-back (the rest of that epoch may repeat or skip a few
 * samples), and each member keeps its sums of the epoch so far (a joiner
 * starts from none), so the epoch's figures count what was trained.
 *
 * A joiner runs the same sequence from its side: it builds its model and
 * data as any rank would (to have the buffers), then takes the state from
 * rank 0 in the same broadcasts the members make, and enters the training
 * loop where the members are. It makes no
 * collective calls of its own before that (no resume agreement, no weight
 * broadcast, no link timing), since the members make none at that point.
 *
 * At the end of an --elastic run the ranks compare a hash of their
 * weights and of their shuffle generator (one allreduce): data parallelism
 * keeps the replicas bitwise identical and every rank draws the same
 * permutation, so a difference means that a shrink's roll-back or a grow's
 * state transfer went wrong, and the run fails saying so rather than
 * report an accuracy that no single model has.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_sync.h"
#include "trainer.h"

/* With a codec, rank 0's codec states go to every rank of the grown
 * communicator (with the warm-up they were made with, which the joiners'
 * own epochs may not give: a shrunk job's are longer); a joiner takes
 * them with its residuals (and DGC's velocity) zeroed, since it has fed
 * nothing back yet, so that its steps and PowerSGD's Q are the members'.
 * The members keep their own. */
static gw_status_t send_codec(gw_train_sync_t *s, int joiner)
{
    if (!s->codec)
        return GW_OK;
    unsigned char *img = NULL;
    size_t len = 0;
    int64_t head[2] = {-1, (int64_t)gw_train_codec_warmup(s->codec)};
    gw_status_t st = GW_OK;
    if (s->rank == 0) {
        if ((st = gw_train_codec_save(s->codec, &img, &len)) == GW_OK)
            head[0] = (int64_t)len;
        else
            fprintf(stderr, "gradwire-train: --elastic: rank 0 cannot save its codec state: %s\n",
                    gw_status_name(st));
    }
    gw_status_t bst = gw_broadcast(s->comm, head, head, 2, GW_INT64, 0);
    if (bst != GW_OK || head[0] < 0) {
        free(img);
        return bst != GW_OK ? bst : GW_ERR_INVALID_ARG;
    }
    len = (size_t)head[0];
    if (s->rank != 0 && !(img = malloc(len + 1))) {
        /* This rank fails; the others' broadcast fails naming it. */
        fprintf(stderr, "gradwire-train: --elastic: no memory for the codec state (%zu bytes)\n",
                len);
        return GW_ERR_NO_MEMORY;
    }
    st = gw_broadcast(s->comm, img, img, len, GW_UINT8, 0);
    if (st == GW_OK && joiner) {
        uint32_t warm = (uint32_t)head[1];
        if (warm != gw_train_codec_warmup(s->codec)) {
            gw_train_codec_t *c = NULL;
            if ((st = gw_train_codec_create(s->comm, s->o, &s->bk, warm, &c)) == GW_OK) {
                gw_train_codec_destroy(s->codec);
                s->codec = c;
            }
        }
        if (st == GW_OK)
            st = gw_train_codec_load(s->codec, img, len);
        if (st == GW_OK)
            st = gw_train_codec_reset_residuals(s->codec);
        if (st != GW_OK)
            fprintf(stderr, "gradwire-train: --join: cannot take the job's codec state: %s\n",
                    gw_status_name(st));
    }
    free(img);
    return st;
}

/* Rank 0's state to every rank of the grown communicator: the generator
 * as the epoch's shuffle starts from it (gw_train_grow rewinds it there
 * when the epoch has begun). */
static gw_status_t send_state(gw_train_sync_t *s, int joiner)
{
    int64_t pos[2 + 4] = {s->epoch, s->step};
    memcpy(pos + 2, s->rng.s, sizeof(s->rng.s));
    gw_status_t st = gw_broadcast(s->comm, pos, pos, 6, GW_INT64, 0);
    if (st == GW_OK)
        st = gw_broadcast(s->comm, s->model.params, s->model.params, s->model.nparams, GW_FLOAT32,
                          0);
    if (st == GW_OK)
        st = gw_broadcast(s->comm, s->sgd.velocity, s->sgd.velocity, s->model.nparams, GW_FLOAT32,
                          0);
    if (st == GW_OK)
        st = send_codec(s, joiner);
    if (st != GW_OK) {
        fprintf(stderr,
                "gradwire-train: --elastic: sending the state to the grown job failed: %s\n",
                gw_status_name(st));
        return st;
    }
    s->epoch = pos[0];
    s->step = pos[1];
    memcpy(s->rng.s, pos + 2, sizeof(s->rng.s));
    if (s->step == 0) { /* mid-epoch, each rank keeps its sums (a joiner's are 0) */
        s->ep_loss = 0;
        s->ep_correct = s->ep_seen = 0;
    }
    s->gstep = s->epoch * s->spe + s->step; /* renumbered again by the re-shard */
    return gw_train_elastic_reshard(s);
}

/* "at the start of epoch E", or "at step G (step S of epoch E)". */
static void where_str(const gw_train_sync_t *s, char *buf, size_t cap)
{
    if (s->step == 0)
        snprintf(buf, cap, "at the start of epoch %ld", s->epoch + 1);
    else
        snprintf(buf, cap, "at step %ld (step %ld of epoch %ld)", s->gstep + 1, s->step + 1,
                 s->epoch + 1);
}

gw_status_t gw_train_grow(gw_train_sync_t *s, int begun, int *grew)
{
    *grew = 0;
    s->grown_at = s->gstep;
    if (s->world < 2)
        return GW_OK; /* one rank has no referee to admit anyone */
    gw_comm_t *nc = NULL;
    int old_world = s->world;
    gw_status_t st = gw_comm_grow(s->comm, &nc);
    if (st != GW_OK) {
        /* A rank died during the grow (or before it, unnoticed): a
         * collective on the communicator fails naming it, the referee's
         * verdict, and the caller shrinks the job as after any failure. */
        int32_t x = 0;
        gw_status_t cst = gw_allreduce(s->comm, &x, &x, 1, GW_INT32, GW_SUM);
        if (cst != GW_OK)
            return cst;
        char where[96];
        where_str(s, where, sizeof(where));
        fprintf(stderr, "gradwire-train: --elastic: rank %d: the grow %s failed (%s)\n", s->rank,
                where, gw_status_name(st));
        return st;
    }
    if (!nc)
        return GW_OK;
    if ((st = gw_train_elastic_adopt(s, nc)) != GW_OK) {
        gw_comm_destroy(nc);
        return st;
    }
    if (begun) /* the epoch's shuffle replays on the new shards */
        s->rng = s->rng_epoch;
    if ((st = send_state(s, 0)) != GW_OK)
        return st;
    s->grown_at = s->gstep;
    *grew = 1;
    if (s->rank == 0) {
        char who[256] = "";
        size_t len = 0;
        for (int r = old_world; r < s->world && len < sizeof(who); r++)
            len +=
                (size_t)snprintf(who + len, sizeof(who) - len, "%s%d", r > old_world ? "," : "", r);
        int last = gw_train_local_batch(s->o->batch, s->world - 1, s->world);
        char per[32];
        if ((int)s->local_b == last)
            snprintf(per, sizeof(per), "%zu", s->local_b);
        else
            snprintf(per, sizeof(per), "%zu-%d", s->local_b, last);
        char where[96];
        where_str(s, where, sizeof(where));
        printf("gradwire-train: --elastic: rank(s) %s joined %s; %d rank(s) go on (global batch "
               "%d, %s per rank)\n",
               who, where, s->world, s->o->batch, per);
        fflush(stdout);
    }
    return GW_OK;
}

gw_status_t gw_train_grow_joined(gw_train_sync_t *s)
{
    s->ep_loss = 0;
    s->ep_correct = s->ep_seen = 0;
    gw_status_t st = send_state(s, 1);
    if (st != GW_OK)
        return st;
    s->grown_at = s->gstep;
    char where[96];
    where_str(s, where, sizeof(where));
    printf("gradwire-train: --join: rank %d of %d joined %s (%zu samples per step%s)\n", s->rank,
           s->world, where, s->local_b,
           s->codec ? "; the codec state of rank 0 with a zero residual" : "");
    fflush(stdout);
    return GW_OK;
}

/* FNV-1a over len bytes. */
static uint64_t fnv1a(const void *data, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

gw_status_t gw_train_elastic_check_replicas(gw_train_sync_t *s)
{
    if (!s->o->elastic || s->world < 2)
        return GW_OK;
    /* The weights, and the shuffle generator: every rank draws the same
     * permutation (and keeps its shard of it), so a joiner that did not
     * get rank 0's generator would train on other samples while its
     * weights, averaged with everyone's, still agree. */
    uint64_t h[2] = {fnv1a(s->model.params, s->model.nparams * sizeof(float)),
                     fnv1a(s->rng.s, sizeof(s->rng.s))};
    /* The smallest and the largest of each hash over the ranks, as signed
     * halves so that one MIN does both. */
    int64_t v[8];
    for (int i = 0; i < 2; i++) {
        v[4 * i] = (int64_t)(h[i] >> 32);
        v[4 * i + 1] = (int64_t)(h[i] & 0xffffffffu);
        v[4 * i + 2] = -v[4 * i];
        v[4 * i + 3] = -v[4 * i + 1];
    }
    gw_status_t st = gw_allreduce(s->comm, v, v, 8, GW_INT64, GW_MIN);
    if (st != GW_OK)
        return st;
    const char *what[2] = {"weights", "shuffle generator states"};
    for (int i = 0; i < 2; i++)
        if (v[4 * i] != -v[4 * i + 2] || v[4 * i + 1] != -v[4 * i + 3]) {
            fprintf(stderr,
                    "gradwire-train: --elastic: rank %d: the %d replicas hold different %s at "
                    "the end (a state transfer or roll-back went wrong)\n",
                    s->rank, s->world, what[i]);
            return GW_ERR_MISMATCH;
        }
    if (s->rank == 0 && !s->o->quiet)
        printf("gradwire-train: --elastic: the %d replicas hold the same weights (hash "
               "%016llx) and shuffle state\n",
               s->world, (unsigned long long)h[0]);
    return GW_OK;
}
