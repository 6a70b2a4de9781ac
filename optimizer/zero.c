/*
 * zero.c - ZeRO stages 1 and 2 (Rajbhandari et al., "ZeRO: Memory
 * Optimizations Toward Training Trillion Parameter Models") for the
 * synchronous data-parallel trainer, --zero 1|2.
 *
 * Plain data parallelism keeps the whole momentum on every rank and
 * allreduces the whole gradient, so that every rank can apply the same
 * update to the same weights. But a rank only needs to compute the update
 * of a part of the weights if it then sends that part to the others. The
 * flat arrays are cut into units of about --bucket-kb, as the buckets of
 * plain data parallelism are: a unit is a run of rows of one layer's
 * weight matrix (a layer's last unit carries its biases too, which follow
 * its weights in the flat arrays), so that backward can produce the
 * gradient of one unit at a time. Each unit is cut into `world` blocks of
 * part = ceil(count / world) elements; rank r owns block r of every unit,
 * the last blocks holding fewer real elements (or none) when count does
 * not divide. A step:
 *
 *   1. backward produces the units' gradients, from the end of the arrays
 *      (the last layer) to their start;
 *   2. a reduce-scatter of each unit's gradient (padded with zeros to
 *      world * part) leaves on rank r the sum over ranks of block r only;
 *   3. rank r updates its block of the weights with its block of the
 *      momentum (gw_train_sgd_update, sgd.c: the same update, element for
 *      element, as plain data parallelism's);
 *   4. an allgatherv of the unit's weights, with each rank's real block
 *      length, gives every rank the whole updated unit.
 *
 * Stage 1 shards the momentum only: backward writes into a full (padded)
 * gradient array and the reduce-scatter works in place in it. Stage 2
 * shards the gradients as well: backward writes each unit into one of two
 * workspace slots, the reduce-scatter leaves the rank's block in a
 * shard-sized array, and a slot is written again two units later, once its
 * reduce-scatter has been waited for. A rank then holds shard + two units
 * of gradients instead of the whole model: the shard falls as 1/world, the
 * two-unit workspace does not (DeepSpeed's reduce buckets do not either);
 * --bucket-kb trades it against the number of collectives.
 *
 * Overlap: a unit's reduce-scatter is queued as soon as backward has
 * produced its gradient, and runs on the progress thread while backward
 * goes on. A layer's weights are read by backward once more after its
 * weight gradient (for the gradient of the layer below), so the update and
 * allgather of layer l's units wait until then: they are queued after the
 * reduce-scatters of layer l - 1, and the allgathers run while the layers
 * below are differentiated. Whether a collective has finished is never
 * asked (gw_test): every rank queues the same calls in the same order
 * whatever its timing, which is what keeps them matched; the stop flag's
 * allreduce that the step queues first stays ahead of them all. The next
 * forward needs every layer, so the step ends by waiting for the last
 * allgathers: those of layer 0, which backward produces last, are not
 * hidden. --no-overlap waits for each reduce-scatter right after queuing
 * it.
 *
 * Sums: a reduce-scatter and an allreduce may add the ranks' contributions
 * in different orders (the ring reduce-scatter starts block b at rank
 * b + 1, the ring allreduce at rank b, and the library picks its algorithm
 * by size), so with three ranks or more the sums may differ from plain
 * data parallelism's in the last bit. With two ranks every sum is one
 * addition, which commutes. The other difference is the gradient itself:
 * OpenBLAS computes a few rows of dW = dZ^T A (one bucket) with other
 * kernels than the whole matrix, which rounds differently. So with one
 * bucket per layer (--bucket-kb at least the largest layer) on two ranks
 * the steps are bitwise those of plain data parallelism; otherwise they
 * agree to float rounding (tests/optimizer/test_train_zero.c checks both).
 *
 * Checkpoints: each rank writes its shard of the momentum beside the whole
 * weights (checkpoint.c's format version 2). Resuming, every rank reads the
 * shards of all the writers, puts the whole momentum together with the
 * writers' plan (their rank count, the same buckets) and keeps its own
 * blocks in this run's plan, so any rank count, with or without --zero,
 * resumes it.
 */
#include <stdlib.h>
#include <string.h>

#include "kit.h"
#include "zero.h"

static gw_status_t fail(const char *what, int unit, gw_status_t st)
{
    fprintf(stderr, "gradwire-train: --zero: %s of bucket %d failed: %s (%s)\n", what, unit,
            gw_status_str(st), gw_status_name(st));
    return st;
}

/* The units of a model, in backward order: the last layer first, each
 * layer's rows from its last. u may be NULL (count only). Returns how many. */
static int plan(const int *sizes, int nlayers, int world, size_t bucket_bytes,
                gw_train_zero_unit_t *u)
{
    size_t off[GW_TRAIN_MAX_LAYERS], o = 0;
    for (int l = 0; l < nlayers; l++) {
        off[l] = o;
        o += (size_t)sizes[l] * (size_t)sizes[l + 1] + (size_t)sizes[l + 1];
    }
    int k = 0;
    for (int l = nlayers - 1; l >= 0; l--) {
        int in = sizes[l], out = sizes[l + 1];
        int rows = gw_train_zero_unit_rows(bucket_bytes, in);
        for (int r1 = out; r1 > 0; r1 -= rows, k++) {
            int r0 = r1 > rows ? r1 - rows : 0;
            if (!u)
                continue;
            gw_train_zero_unit_t *x = &u[k];
            x->layer = l;
            x->row0 = r0;
            x->row1 = r1;
            x->off = off[l] + (size_t)r0 * (size_t)in;
            x->nw = (size_t)(r1 - r0) * (size_t)in;
            x->count = x->nw + (r1 == out ? (size_t)out : 0);
            x->part = (x->count + (size_t)world - 1) / (size_t)world;
        }
    }
    return k;
}

void gw_train_zero_sizes(const int *sizes, int nlayers, int world, size_t bucket_bytes, int stage,
                         double *grads, double *optimizer)
{
    int nu = plan(sizes, nlayers, world, bucket_bytes, NULL);
    gw_train_zero_unit_t *u = calloc((size_t)nu, sizeof(*u));
    double shard = 0, full = 0, widest = 0;
    if (u) {
        plan(sizes, nlayers, world, bucket_bytes, u);
        for (int i = 0; i < nu; i++) {
            double padded = (double)world * (double)u[i].part;
            shard += (double)u[i].part;
            full += padded;
            widest = padded > widest ? padded : widest;
        }
        free(u);
    }
    *optimizer = shard * sizeof(float);
    *grads = (stage == 1 ? full : shard + 2 * widest) * sizeof(float);
}

gw_status_t gw_train_zero_init(gw_train_zero_t *z, gw_comm_t *comm, gw_train_mlp_t *m, int stage,
                               double momentum, double weight_decay, size_t bucket_bytes,
                               int overlap)
{
    memset(z, 0, sizeof(*z));
    z->stage = stage;
    z->comm = comm;
    z->rank = gw_comm_rank(comm);
    z->world = gw_comm_size(comm);
    z->overlap = overlap;
    z->m = m;
    z->mu = (float)momentum;
    z->wd = (float)weight_decay;
    size_t n = (size_t)z->world, full = 0, widest = 0;
    z->nu = plan(m->sizes, m->nlayers, z->world, bucket_bytes, NULL);
    z->u = calloc((size_t)z->nu, sizeof(*z->u));
    if (!z->u)
        goto oom;
    plan(m->sizes, m->nlayers, z->world, bucket_bytes, z->u);
    for (int i = z->nu - 1; i >= 0; i--) {
        z->ubeg[z->u[i].layer] = i;
        if (i == z->nu - 1 || z->u[i + 1].layer != z->u[i].layer)
            z->uend[z->u[i].layer] = i + 1;
    }
    for (int i = 0; i < z->nu; i++) {
        gw_train_zero_unit_t *x = &z->u[i];
        x->soff = z->shard;
        x->goff = full;
        z->shard += x->part;
        full += n * x->part;
        widest = n * x->part > widest ? n * x->part : widest;
        x->counts = calloc(n, sizeof(size_t));
        x->displs = calloc(n, sizeof(size_t));
        if (!x->counts || !x->displs)
            goto oom;
        gw_train_zero_blocks(x->count, x->part, n, x->counts, x->displs);
    }
    z->velocity = calloc(z->shard, sizeof(float));
    if (!z->velocity)
        goto oom;
    if (stage == 1) {
        z->grad_full = calloc(full, sizeof(float));
        if (!z->grad_full)
            goto oom;
    } else {
        z->slot_len = widest;
        z->grad_shard = calloc(z->shard, sizeof(float));
        z->slot[0] = calloc(widest, sizeof(float));
        z->slot[1] = calloc(widest, sizeof(float));
        if (!z->grad_shard || !z->slot[0] || !z->slot[1])
            goto oom;
    }
    /* The trainer's full gradient array is not used: ours replace it. */
    free(m->grads);
    m->grads = NULL;
    z->mem.params = (double)m->nparams * sizeof(float);
    z->mem.optimizer = (double)z->shard * sizeof(float);
    z->mem.grads = (double)(stage == 1 ? full : z->shard + 2 * widest) * sizeof(float);
    return GW_OK;
oom:
    fprintf(stderr, "gradwire-train: out of memory for the --zero shards\n");
    gw_train_zero_free(z);
    return GW_ERR_NO_MEMORY;
}

void gw_train_zero_free(gw_train_zero_t *z)
{
    if (!z || !z->m)
        return;
    for (int i = 0; z->u && i < z->nu; i++) {
        gw_train_zero_unit_t *x = &z->u[i];
        /* A failed step can leave calls in flight: each must complete. */
        if (x->rs)
            gw_wait(x->rs);
        if (x->ag)
            gw_wait(x->ag);
        free(x->counts);
        free(x->displs);
    }
    free(z->u);
    free(z->velocity);
    free(z->grad_full);
    free(z->grad_shard);
    free(z->slot[0]);
    free(z->slot[1]);
    memset(z, 0, sizeof(*z));
}

/* Where backward writes unit i's gradient (world * part floats). */
static float *grad_buf(gw_train_zero_t *z, int i)
{
    return z->stage == 1 ? z->grad_full + z->u[i].goff : z->slot[i % 2];
}

/* Where the reduce-scatter leaves this rank's block of unit i. */
static float *grad_block(gw_train_zero_t *z, int i)
{
    const gw_train_zero_unit_t *x = &z->u[i];
    return z->stage == 1 ? grad_buf(z, i) + (size_t)z->rank * x->part : z->grad_shard + x->soff;
}

/* Unit i's reduce-scatter has been queued: wait for it. */
static gw_status_t wait_rs(gw_train_zero_t *z, int i)
{
    gw_train_zero_unit_t *x = &z->u[i];
    double t0 = gw_kit_now_s();
    gw_status_t st = gw_wait(x->rs);
    x->rs = NULL;
    z->wait_s += gw_kit_now_s() - t0;
    x->state = 2;
    return st == GW_OK ? GW_OK : fail("reduce-scatter", i, st);
}

/* Backward of unit i into its buffer, then its reduce-scatter. */
static gw_status_t produce(gw_train_zero_t *z, size_t B, int i)
{
    gw_train_zero_unit_t *x = &z->u[i];
    gw_status_t st;
    /* Stage 2: the slot's previous unit must be reduced before it is
     * overwritten. */
    if (z->stage == 2 && i >= 2 && z->u[i - 2].state == 1 && (st = wait_rs(z, i - 2)) != GW_OK)
        return st;
    float *g = grad_buf(z, i);
    gw_train_mlp_backward_weights(z->m, B, x->layer, x->row0, x->row1, g,
                                  x->count > x->nw ? g + x->nw : NULL);
    /* The padding of the last blocks sums zeros, not a slot's stale values. */
    memset(g + x->count, 0, ((size_t)z->world * x->part - x->count) * sizeof(float));
    st = gw_ireduce_scatter(z->comm, g, grad_block(z, i), x->part, GW_FLOAT32, GW_SUM, &x->rs);
    if (st != GW_OK)
        return fail("reduce-scatter", i, st);
    x->state = 1;
    return z->overlap ? GW_OK : wait_rs(z, i);
}

/* Update this rank's block of unit i and queue the allgather of the unit. */
static gw_status_t update_and_gather(gw_train_zero_t *z, int i, float lr)
{
    gw_train_zero_unit_t *x = &z->u[i];
    gw_status_t st;
    if (x->state == 1 && (st = wait_rs(z, i)) != GW_OK)
        return st;
    size_t lo = x->displs[z->rank], hi = lo + x->counts[z->rank];
    float *w = z->m->params + x->off;
    float *v = z->velocity + x->soff;
    const float *g = grad_block(z, i);
    /* Weights [0, nw) with decay, then biases [nw, count) without, each
     * clipped to the block [lo, hi); v and g are indexed from lo. */
    size_t we = hi < x->nw ? hi : x->nw, bs = lo > x->nw ? lo : x->nw;
    if (lo < we)
        gw_train_sgd_update(w + lo, v, g, we - lo, z->mu, z->wd, lr);
    if (bs < hi)
        gw_train_sgd_update(w + bs, v + (bs - lo), g + (bs - lo), hi - bs, z->mu, 0.0f, lr);
    st = gw_iallgatherv(z->comm, w + lo, w, x->counts[z->rank], x->counts, x->displs, GW_FLOAT32,
                        &x->ag);
    if (st != GW_OK)
        return fail("allgather", i, st);
    x->state = 3;
    return GW_OK;
}

static gw_status_t update_layer(gw_train_zero_t *z, int l, float lr)
{
    gw_status_t st = GW_OK;
    for (int i = z->ubeg[l]; i < z->uend[l] && st == GW_OK; i++)
        st = update_and_gather(z, i, lr);
    return st;
}

gw_status_t gw_train_zero_backward_step(gw_train_zero_t *z, size_t B, float lr)
{
    gw_train_mlp_t *m = z->m;
    gw_status_t st = GW_OK;
    for (int l = m->nlayers - 1; l >= 0 && st == GW_OK; l--) {
        for (int i = z->ubeg[l]; i < z->uend[l] && st == GW_OK; i++)
            st = produce(z, B, i);
        /* Layer l + 1's weights were last read for the delta of layer l. */
        if (st == GW_OK && l + 1 < m->nlayers)
            st = update_layer(z, l + 1, lr);
        if (st == GW_OK && l > 0)
            gw_train_mlp_backward_input(m, B, l);
    }
    if (st == GW_OK)
        st = update_layer(z, 0, lr);
    /* The next forward reads every layer: all the allgathers must be in.
     * After a failure every call still in flight is completed too. */
    double t0 = gw_kit_now_s();
    for (int i = 0; i < z->nu; i++) {
        gw_train_zero_unit_t *x = &z->u[i];
        if (x->rs) {
            gw_wait(x->rs);
            x->rs = NULL;
        }
        if (x->ag) {
            gw_status_t ast = gw_wait(x->ag);
            x->ag = NULL;
            if (st == GW_OK && ast != GW_OK)
                st = fail("allgather", i, ast);
        }
        x->state = 0;
    }
    z->wait_s += gw_kit_now_s() - t0;
    return st;
}

gw_status_t gw_train_zero_assemble_velocity(const char *dir, uint64_t step, int world,
                                            const gw_train_mlp_t *m, size_t bucket_bytes,
                                            float *full)
{
    /* The plan the writing run had: its rank count, our model and buckets
     * (the settings text makes --bucket-kb the same). */
    int nu = plan(m->sizes, m->nlayers, world, bucket_bytes, NULL);
    gw_train_zero_unit_t *u = calloc((size_t)nu, sizeof(*u));
    if (!u) {
        fprintf(stderr, "gradwire-train: out of memory to re-shard the momentum\n");
        return GW_ERR_NO_MEMORY;
    }
    plan(m->sizes, m->nlayers, world, bucket_bytes, u);
    size_t shard = 0;
    for (int i = 0; i < nu; i++)
        shard += u[i].part;
    gw_status_t st = GW_OK;
    for (int r = 0; r < world && st == GW_OK; r++) {
        char path[4096];
        gw_train_ckpt_t c;
        gw_train_ckpt_path(dir, step, (uint32_t)r, path, sizeof(path));
        if ((st = gw_train_ckpt_read(path, &c)) != GW_OK)
            break;
        if (c.world != (uint32_t)world || c.rank != (uint32_t)r || c.nparams != m->nparams ||
            c.velocity_len != shard) {
            fprintf(stderr,
                    "gradwire-train: checkpoint %s (rank %u of %u, %zu parameters, %zu momentum "
                    "values) is not rank %d's --zero shard of %zu values of a %d-rank run\n",
                    path, c.rank, c.world, c.nparams, c.velocity_len, r, shard, world);
            st = GW_ERR_CONFIG;
        }
        for (int i = 0, soff = 0; i < nu && st == GW_OK; soff += (int)u[i].part, i++) {
            size_t lo = (size_t)r * u[i].part < u[i].count ? (size_t)r * u[i].part : u[i].count;
            size_t hi = lo + u[i].part < u[i].count ? lo + u[i].part : u[i].count;
            memcpy(full + u[i].off + lo, c.velocity + soff, (hi - lo) * sizeof(float));
        }
        gw_train_ckpt_release(&c);
    }
    free(u);
    return st;
}

void gw_train_zero_load_velocity(gw_train_zero_t *z, const float *full)
{
    for (int i = 0; i < z->nu; i++) {
        const gw_train_zero_unit_t *x = &z->u[i];
        memset(z->velocity + x->soff, 0, x->part * sizeof(float));
        memcpy(z->velocity + x->soff, full + x->off + x->displs[z->rank],
               x->counts[z->rank] * sizeof(float));
    }
}
