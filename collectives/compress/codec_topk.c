/*
 * codec_topk.c - top-k sparsification with error feedback and, optionally,
 * momentum correction (Deep Gradient Compression, Lin et al. 2018).
 *
 * Each rank keeps the k = ceil(ratio * count) elements of x with the largest
 * magnitudes (topk_select.c: a sampled threshold, not a sort) and sends them
 * as k (index, value) pairs; everything else stays in the residual, and the
 * elements sent leave a residual of exactly zero, so x = transmitted +
 * residual holds bit for bit. Sparse vectors of different ranks have
 * different supports and cannot be summed on the way, so the pairs are
 * exchanged by allgather: 8 k bytes per rank, (n - 1) 8 k bytes on every
 * link, against 2 (n-1)/n 4 count for the dense ring.
 *
 * Decoding walks the n lists (indices increase within each) block by block
 * into a double accumulator, adding the ranks' values in rank order, and
 * rounds each sum divided by n once; elements nobody sent are zero. Every
 * rank decodes the same gathered bytes the same way, its own list included,
 * so all get the same bits.
 * Indices from peers are checked (in range, increasing) before use.
 *
 * Momentum correction. Top-k with error feedback delays most elements by
 * many steps, and an optimizer that applies momentum to the sparse averaged
 * result would apply it to those late, bunched-up updates. DGC moves the
 * momentum before the sparsification instead: every rank keeps a velocity
 * u (the state's extra floats) and accumulates u = m u + g, and v (the
 * residual) accumulates u; compress_api.c does both while it forms x = v.
 * Here, once the k elements are chosen, they are cleared in v (as always)
 * and in u ("momentum factor masking"): an element just sent has delivered
 * its momentum, and letting the old velocity keep pushing it would apply
 * the same momentum twice. The velocity is double-buffered (the new one is
 * written to extra_next and swapped in on success) so a failed call leaves
 * it alone like the residual. With m = 0 none of this runs and the codec is
 * plain top-k with error feedback.
 *
 * Message of a rank: k uint32 indices, then k float32 values.
 */
#include <string.h>

#include "collectives/compress/codec.h"
#include "collectives/compress/topk_select.h"

#define BLOCK 8192

static size_t k_of(const gw_compress_state_t *st)
{
    if (st->count == 0)
        return 0;
    double k = st->cfg.topk_ratio * (double)st->count;
    size_t ki = (size_t)k;
    if ((double)ki < k)
        ki++;
    if (ki < 1)
        ki = 1;
    return ki > st->count ? st->count : ki;
}

/* The velocity of momentum correction: one float per element. */
static size_t topk_extra(const gw_compress_config_t *cfg, size_t rows, size_t cols)
{
    return cfg->momentum != 0 ? rows * cols : 0;
}

static gw_status_t topk_check(const gw_compress_config_t *cfg, size_t rows, size_t cols,
                              const gw_logger_t *lg)
{
    (void)cfg;
    if ((uint64_t)rows * cols > UINT32_MAX) {
        GW_ERROR(lg, "compress",
                 "the top-k codec sends 32-bit indices and cannot serve a "
                 "tensor of %zu x %zu elements (2^32 or more)",
                 rows, cols);
        return GW_ERR_UNSUPPORTED;
    }
    return GW_OK;
}

/* Check one peer's list: indices in range and strictly increasing, values
 * finite. */
static int list_ok(const uint32_t *idx, const float *val, size_t k, size_t count)
{
    for (size_t j = 0; j < k; j++) {
        if (idx[j] >= count || (j > 0 && idx[j] <= idx[j - 1]))
            return 0;
        if (gw__cz_absbits(val[j]) >= 0x7f800000u)
            return 0;
    }
    return 1;
}

/* Only the (at most n k) elements that some rank sent are touched after the
 * output is zeroed: their sums, in rank order, go through a double
 * accumulator per block of indices, which is left zeroed for the next block
 * (an element whose sum is zero keeps the zero the output already has, the
 * value the division would give). */
static void decode(const uint8_t *all, int n, size_t k, size_t count, float *out, size_t *pos)
{
    double acc[BLOCK];
    const size_t bytes = 8 * k;
    memset(acc, 0, sizeof(acc));
    if (count)
        memset(out, 0, count * sizeof(float));
    memset(pos, 0, (size_t)n * sizeof(*pos));
    for (size_t lo = 0; lo < count; lo += BLOCK) {
        size_t hi = count - lo < BLOCK ? count : lo + BLOCK, any = 0;
        for (int r = 0; r < n; r++) {
            const uint32_t *idx = (const uint32_t *)(const void *)(all + (size_t)r * bytes);
            const float *val = (const float *)(const void *)(idx + k);
            for (size_t p = pos[r]; p < k && idx[p] < hi; p++, any++)
                acc[idx[p] - lo] += (double)val[p];
        }
        if (!any)
            continue;
        for (int r = 0; r < n; r++) {
            const uint32_t *idx = (const uint32_t *)(const void *)(all + (size_t)r * bytes);
            size_t p = pos[r];
            for (; p < k && idx[p] < hi; p++) {
                double *a = &acc[idx[p] - lo];
                if (*a != 0) {
                    out[idx[p]] = (float)(*a / (double)n);
                    *a = 0;
                }
            }
            pos[r] = p;
        }
    }
}

static gw_status_t topk_run(gw__cz_call_t *call)
{
    gw_comm_t *comm = call->comm;
    const size_t count = call->count, k = k_of(call->st);
    const size_t bytes = 8 * k;
    int64_t t0 = gw__cz_now();
    void *mem, *posmem;
    gw_status_t st = gw__cz_work(call, 1, bytes * (size_t)call->n, &mem);
    if (st == GW_OK)
        st = gw__cz_work(call, 2, (size_t)call->n * sizeof(size_t), &posmem);
    if (st != GW_OK)
        return gw__comm_fail(comm, st);
    uint8_t *all = mem;
    uint32_t *idx = (uint32_t *)(void *)(all + (size_t)call->rank * bytes);
    float *val = (float *)(void *)(idx + k);

    /* The selection's scratch lives in work slot 3 between calls. */
    gw__cz_arena_t arena = {call->st->work[3], call->st->work_len[3]};
    uint32_t key = (uint32_t)gw__cz_mix(call->key, (uint64_t)call->rank);
    st = k ? gw__cz_topk_select(call->x, count, k, key, &arena, idx, NULL) : GW_OK;
    call->st->work[3] = arena.buf;
    call->st->work_len[3] = arena.len;
    if (st != GW_OK) {
        GW_ERROR(&comm->log, "compress",
                 "top-k: cannot allocate selection memory for %zu "
                 "elements",
                 count);
        return gw__comm_fail(comm, st);
    }
    for (size_t j = 0; j < k; j++) {
        val[j] = call->x[idx[j]];
        call->x[idx[j]] = 0.0f; /* sent whole: nothing left behind */
    }
    float *u = call->st->extra_next; /* the new velocity, with momentum */
    if (u)
        for (size_t j = 0; j < k; j++)
            u[idx[j]] = 0.0f; /* momentum factor masking */
    call->encoded_bytes = bytes;
    call->encode_ns += gw__cz_now() - t0;

    st = gw__cz_allgather(call, idx, all, bytes);
    if (st != GW_OK)
        return st;

    t0 = gw__cz_now();
    for (int r = 0; r < call->n; r++) {
        const uint32_t *ri = (const uint32_t *)(const void *)(all + (size_t)r * bytes);
        if (!list_ok(ri, (const float *)(const void *)(ri + k), k, count)) {
            GW_ERROR(&comm->log, "compress",
                     "top-k: rank %d sent an index out of range or out "
                     "of order, or a non-finite value",
                     r);
            return gw__comm_fail(comm, GW_ERR_PROTOCOL);
        }
    }
    decode(all, call->n, k, count, call->out, posmem);
    call->decode_ns += gw__cz_now() - t0;
    return GW_OK;
}

const gw__codec_ops_t gw__codec_topk = {
    .size = sizeof(gw__codec_ops_t),
    .codec = GW_CODEC_TOPK,
    .per_bucket_max = 0,
    .check = topk_check,
    .extra_floats = topk_extra,
    .run = topk_run,
};
