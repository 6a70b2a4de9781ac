/*
 * codec_int8.c - int8 stochastic quantization with a shared per-bucket scale,
 * summed by an int8 ring allreduce.
 *
 * Scale. Step 2 of every call (codec.h) allreduces the maximum |x| of each
 * bucket with GW_MAX, so every rank knows M_b, the largest magnitude of
 * bucket b on any rank, before it quantizes.
 *
 * Levels. With n ranks each contribution is rounded to an integer in
 * [-L, L], L = floor(127 / n): v = (x / M_b) L, then q = floor(v) + 1 with
 * probability v - floor(v) and floor(v) otherwise, so E[q] = v and the
 * transmitted value t = M_b (q / L) is an unbiased estimate of x. Because
 * every |q| <= L, any sum of n of them lies in [-127, 127]: the ring adds
 * plain int8 values (allreduce_ring.c with GW_INT8) exactly, in any order,
 * one byte per element on the wire in both halves of the ring. The price of
 * dividing the range by n is resolution (L = 15 levels a side on 8 ranks);
 * the alternative, summing in wider integers on the wire, would double or
 * quadruple the bytes. Error feedback and the unbiased rounding recover the
 * resolution over steps; more than 127 ranks cannot be served this way and
 * get GW_ERR_UNSUPPORTED.
 *
 * Decoding turns the integer sum S into M_b (S / (L n)). Everything after the
 * exchange is integer-exact or one fixed sequence of float operations, so
 * all ranks produce the same bits. A constant tensor (every |x| = M_b) gives
 * v = +-L exactly, no randomness, and decodes to exactly the constant.
 *
 * Random numbers come from a counter-based hash of (seed, step, rank,
 * bucket, element): different on every rank (so that rounding errors of
 * different ranks are independent) and reproducible.
 */
#include <string.h>

#include "collectives/compress/codec.h"

static gw_status_t int8_check_ranks(const gw_compress_state_t *st, int nranks,
                                    const gw_logger_t *lg)
{
    (void)st;
    if (nranks > 127) {
        GW_ERROR(lg, "compress",
                 "the int8 codec sums n contributions of [-127/n, 127/n] in "
                 "int8 and cannot serve %d ranks (at most 127)",
                 nranks);
        return GW_ERR_UNSUPPORTED;
    }
    return GW_OK;
}

/* Quantize x[0..len) (one bucket, max |x| over ranks m > 0) into q, leaving
 * x - t in x. The index is 32 bits wide (a bucket has at most 2^31
 * elements), which is what the random stream takes anyway: with a size_t
 * index the vectorised loop spent a fifth of its time narrowing 64-bit
 * lanes. Both clones give the same bits: IEEE divisions, multiplications
 * and subtractions, exact conversions of small integers, integer hashing. */
GW__CZ_HOT void gw__cz_int8_quantize(float *x, int8_t *q, uint32_t len, float m, int levels,
                                     uint32_t key)
{
    const float fl = (float)levels;
    for (uint32_t i = 0; i < len; i++) {
        float v = (x[i] / m) * fl; /* |v| <= L exactly: |x| <= m */
        int32_t w = (int32_t)v;    /* toward zero ... */
        w -= v < (float)w;         /* ... then down: floor(v) */
        float frac = v - (float)w; /* exact, in [0, 1) */
        float u = (float)(gw__cz_rand32(key, i) >> 8) * 0x1p-24f;
        w += u < frac;
        q[i] = (int8_t)w;
        x[i] -= m * ((float)w / fl);
    }
}

/* out = m (s / denom), one bucket. */
GW__CZ_HOT static void dequantize(float *out, const int8_t *s, size_t len, float m, float denom)
{
    for (size_t i = 0; i < len; i++)
        out[i] = m * ((float)s[i] / denom);
}

static gw_status_t int8_run(gw__cz_call_t *call)
{
    const size_t count = call->count, bucket = call->st->cfg.bucket_elements;
    const int levels = 127 / call->n;
    float *x = call->x;
    int64_t t0 = gw__cz_now();
    void *mem;
    gw_status_t st = gw__cz_work(call, 1, count, &mem);
    if (st != GW_OK)
        return gw__comm_fail(call->comm, st);
    int8_t *q = mem;
    uint64_t rank_key = gw__cz_mix(call->key, (uint64_t)call->rank);
    size_t b = 0;
    for (size_t lo = 0; lo < count; lo += bucket, b++) {
        size_t len = count - lo < bucket ? count - lo : bucket;
        float m = call->gmax[b];
        if (m == 0.0f) {
            memset(q + lo, 0, len); /* all zero on every rank; x stays (zero) */
            continue;
        }
        gw__cz_int8_quantize(x + lo, q + lo, (uint32_t)len, m, levels,
                             (uint32_t)gw__cz_mix(rank_key, b));
    }
    call->encoded_bytes = count;
    call->encode_ns += gw__cz_now() - t0;

    st = gw__cz_allreduce(call, q, q, count, GW_INT8, GW_SUM, GW_ALGO_RING);
    if (st != GW_OK)
        return st;

    t0 = gw__cz_now();
    const float denom = (float)(levels * call->n);
    b = 0;
    for (size_t lo = 0; lo < count; lo += bucket, b++) {
        size_t len = count - lo < bucket ? count - lo : bucket;
        dequantize(call->out + lo, q + lo, len, call->gmax[b], denom);
    }
    call->decode_ns += gw__cz_now() - t0;
    return GW_OK;
}

const gw__codec_ops_t gw__codec_int8 = {
    .size = sizeof(gw__codec_ops_t),
    .codec = GW_CODEC_INT8,
    .per_bucket_max = 1,
    .check_ranks = int8_check_ranks,
    .run = int8_run,
};
