/*
 * cast_ring.c - allreduce of 16-bit casts (the fp16 and bf16 codecs).
 *
 * Each rank rounds its contribution x to the 16-bit format once; what the
 * rounding lost, x - t, is the error-feedback residual, and it is exact: t
 * keeps the leading bits of x, so x - t is x's trailing bits, which a float
 * holds without rounding.
 *
 * The 16-bit contributions are then summed around a ring, 16-bit values on
 * the wire in both halves:
 *  - reduce-scatter, n - 1 steps: the tensor is cut into n blocks of
 *    B = ceil(count / n) elements (the last padded with zeros). At step s
 *    rank r sends block r - 1 - s to its right neighbour and receives block
 *    r - 2 - s from its left one, which it widens to float32 together with
 *    its own contribution, adds, and rounds once back to 16 bits (float32
 *    has more than twice the bits plus two of either format, so this single
 *    float addition followed by one rounding is the correctly rounded 16-bit
 *    sum: no double-rounding error). That block is what it sends next; after
 *    the last step rank r holds the finished sum of block r;
 *  - allgather (gw__cz_allgather: around the ring, or straight to every
 *    peer for small blocks): every rank's finished block reaches every
 *    other rank and is only copied, so every rank decodes the same bits.
 * Each hop's add is the reduce kernel's (gw__reduce with GW_SUM, AVX2 and
 * F16C where the CPU has them). Encoding (cast and residual) and decoding
 * (widen, unscale, divide) are each one fused pass over the data
 * (cast_kernels.c: gw__cz_encode_half_rest and friends), not a chain of
 * loops through a temporary block; the ring itself is written here rather
 * than taken from allreduce_ring.c because its blocks are padded and its
 * allgather half goes straight to every peer for small blocks.
 *
 * Range. Before rounding, the tensor is multiplied by 2^k, the same k on
 * every rank, chosen from the shared max |x| (step 2 of codec.h) so that a
 * sum of n contributions stays below 2^max_exp: no partial sum can overflow
 * fp16's 65504, and a tensor of small gradients is scaled up out of fp16's
 * subnormal range instead of being flushed to zero. Multiplying by a power
 * of two is exact, so the scaling changes no rounding decision of its own.
 * bfloat16 has float32's exponent range and is only ever scaled down (for
 * sums near FLT_MAX).
 *
 * Decoding divides the widened sum by 2^k (exact) and then by n (one
 * correctly rounded division), so constants that survive the cast come out
 * exactly.
 */
#include <math.h>
#include <string.h>

#include "collectives/compress/cast_ring.h"

static gw_status_t ring(gw__cz_call_t *call, const gw__cz_cast_t *cast, uint16_t *h, uint16_t *tmp,
                        uint16_t *all, size_t blk)
{
    gw_comm_t *comm = call->comm;
    const int n = call->n, r = call->rank;
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    const size_t bytes = blk * sizeof(uint16_t);
    gw__cz_begin(call, blk, cast->dtype, GW_SUM);
    for (int s = 0; s < n - 1; s++) {
        size_t sb = (size_t)((r - 1 - s + 2 * n) % n), rb = (size_t)((r - 2 - s + 2 * n) % n);
        int64_t t0 = gw__cz_now(), c0 = gw__cz_cpu_now();
        gw_status_t st = gw__p2p_sendrecv(comm, right, h + sb * blk, bytes, left, tmp, bytes);
        int64_t t1 = gw__cz_now();
        call->comm_ns += t1 - t0;
        call->comm_cpu_ns += gw__cz_cpu_now() - c0;
        if (st != GW_OK)
            return st;
        /* The incoming partial sum first. */
        if ((st = gw__coll_reduce(comm, h + rb * blk, tmp, h + rb * blk, blk, cast->dtype,
                                  GW_SUM)) != GW_OK)
            return st;
        call->decode_ns += gw__cz_now() - t1;
    }
    return gw__cz_allgather(call, h + (size_t)r * blk, all, bytes);
}

/* The scale exponent k for a shared maximum m > 0 over n ranks. */
static int scale_exp(const gw__cz_cast_t *cast, float m, int n)
{
    int e;
    frexp((double)m * n, &e); /* n max|x| < 2^e */
    int k = cast->max_exp - e;
    if (k > 126)
        k = 126;
    if (k < -126)
        k = -126;
    if (!cast->upscale && k > 0)
        k = 0;
    return k;
}

/*
 * Speculation. The scale depends on the maximum of all ranks, known only
 * after step 2, so the straightforward order is one pass to form x and find
 * its maximum, then one to encode it: at 64 MiB both passes are limited by
 * memory bandwidth, not arithmetic. But the scale rarely changes from one
 * call to the next (bfloat16 is practically never scaled; fp16's exponent
 * moves only when the gradients' range crosses a power of two), so this
 * encodes x in the pass that forms it, with the scale of the state's last
 * call, and run() keeps that encoding when the shared maximum gives the
 * same scale; otherwise it forms x again and encodes it afresh. Same
 * operations on the same values either way, so the same bits; only the
 * time differs.
 */
uint32_t gw__cz_cast_prepare(gw__cz_call_t *call, const gw__cz_cast_t *cast)
{
    gw_compress_state_t *st = call->st;
    const size_t count = call->count, n = (size_t)call->n;
    const size_t padded = (count + n - 1) / n * n;
    int guess = st->has_hint ? st->hint : 0;
    void *hm;
    if ((!st->has_hint && cast->upscale) ||
        gw__cz_work(call, 1, padded * sizeof(uint16_t), &hm) != GW_OK)
        return gw__cz_form_x(call); /* no guess worth making (or no memory: run() fails) */
    const float *res = st->cfg.error_feedback ? st->residual : NULL;
    call->prepared = 1;
    call->prepared_guess = guess;
    return cast->prep_encode(hm, call->x, call->in, res, count, ldexpf(1.0f, guess),
                             ldexpf(1.0f, -guess));
}

gw_status_t gw__cz_cast_run(gw__cz_call_t *call, const gw__cz_cast_t *cast)
{
    const size_t count = call->count, n = (size_t)call->n;
    const size_t blk = (count + n - 1) / n, padded = blk * n;
    float *x = call->x;
    const float m = call->gmax[0];
    call->encoded_bytes = (uint64_t)count * 2;
    if (m == 0.0f) {
        /* Every rank's x is zero (all ranks see the same maximum): the sum
         * is zero, nothing needs to travel, and the residual stays zero
         * (x itself, -0.0 included, whatever prepare() guessed). */
        if (call->prepared)
            gw__cz_form_x(call);
        if (count)
            memset(call->out, 0, count * sizeof(float));
        return GW_OK;
    }
    const int k = scale_exp(cast, m, call->n);
    const float scale = ldexpf(1.0f, k), unscale = ldexpf(1.0f, -k);
    call->st->hint = k; /* the next call's guess */
    call->st->has_hint = 1;

    int64_t t0 = gw__cz_now();
    void *hm, *tm, *am;
    gw_status_t st = gw__cz_work(call, 1, padded * sizeof(uint16_t), &hm);
    if (st == GW_OK)
        st = gw__cz_work(call, 2, blk * sizeof(uint16_t), &tm);
    if (st == GW_OK)
        st = gw__cz_work(call, 3, padded * sizeof(uint16_t), &am);
    if (st != GW_OK)
        return gw__comm_fail(call->comm, st);
    uint16_t *h = hm, *all = am;
    if (!call->prepared || call->prepared_guess != k) {
        if (call->prepared)
            gw__cz_form_x(call); /* the guess was wrong: start from x again */
        cast->encode_rest(h, x, count, scale, unscale);
    }
    if (padded > count)
        memset(h + count, 0, (padded - count) * sizeof(uint16_t));
    call->encode_ns += gw__cz_now() - t0;

    if (call->n > 1) {
        if ((st = ring(call, cast, h, tm, all, blk)) != GW_OK)
            return st;
    } else {
        all = h;
    }

    t0 = gw__cz_now();
    cast->decode_avg(call->out, all, count, unscale, (float)call->n);
    call->decode_ns += gw__cz_now() - t0;
    return GW_OK;
}
