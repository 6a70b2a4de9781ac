/*
 * codec_sign.c - 1-bit sign compression with a per-bucket scale and error
 * feedback (EF-SignSGD, Karimireddy et al. 2019).
 *
 * Each rank sends, for every bucket b, the scale s_b = mean |x| over the
 * bucket and one bit per element: the sign bit of x. Its contribution is
 * t = -s_b where the bit is set and +s_b elsewhere; x - t is the residual.
 * Signs of different ranks cannot be added on the way (a sum of signs is no
 * longer one bit), so the messages are exchanged by allgather, and every
 * rank decodes all of them, its own included, from the gathered buffer, in
 * rank order, into a double accumulator that is rounded once: the same
 * bytes decoded the same way give every rank the same bits.
 *
 * The scale is summed in double (exact for buckets up to 2^29 elements of
 * one binade) and divided once, so a constant bucket gets exactly its
 * constant as scale and decodes to it.
 *
 * Message of a rank: ceil(count / 64) 64-bit words of sign bits, then the
 * bucket scales as float32, padded to 8 bytes: about 1/32 of the input.
 */
#include <string.h>

#include "collectives/compress/codec.h"

/* Elements decoded per block into the stack accumulator. */
#define BLOCK 4096

typedef struct layout {
    size_t nwords, nbuckets, bytes;
} layout_t;

static layout_t layout_of(size_t count, size_t bucket)
{
    layout_t l;
    l.nwords = (count + 63) / 64;
    l.nbuckets = count ? (count - 1) / bucket + 1 : 0;
    l.bytes = 8 * l.nwords + 8 * ((l.nbuckets + 1) / 2);
    return l;
}

GW__CZ_HOT static void encode(float *x, size_t count, size_t bucket, const layout_t *l,
                              uint8_t *msg)
{
    uint64_t *words = (uint64_t *)(void *)msg;
    float *scales = (float *)(void *)(msg + 8 * l->nwords);
    memset(msg, 0, l->bytes);
    size_t b = 0;
    for (size_t lo = 0; lo < count; lo += bucket, b++) {
        size_t len = count - lo < bucket ? count - lo : bucket;
        double sum = 0;
        for (size_t i = 0; i < len; i++)
            sum += (double)(x[lo + i] < 0 ? -x[lo + i] : x[lo + i]);
        float s = (float)(sum / (double)len);
        scales[b] = s;
        for (size_t i = lo; i < lo + len; i++) {
            /* -0.0 counts as positive: its sign bit carries no information. */
            uint64_t neg = x[i] < 0;
            words[i >> 6] |= neg << (i & 63);
            x[i] -= neg ? -s : s;
        }
    }
}

/* Validate one peer's scales: they must be finite and non-negative (a
 * corrupt message must not turn into NaN in every rank's result). */
static int scales_ok(const float *scales, size_t nbuckets)
{
    for (size_t b = 0; b < nbuckets; b++)
        if (!(scales[b] >= 0) || gw__cz_absbits(scales[b]) >= 0x7f800000u)
            return 0;
    return 1;
}

GW__CZ_HOT static void decode(const uint8_t *all, int n, size_t count, size_t bucket,
                              const layout_t *l, float *out)
{
    double acc[BLOCK];
    for (size_t lo = 0; lo < count; lo += BLOCK) {
        size_t hi = count - lo < BLOCK ? count : lo + BLOCK;
        memset(acc, 0, sizeof(acc));
        for (int r = 0; r < n; r++) {
            const uint8_t *msg = all + (size_t)r * l->bytes;
            const uint64_t *words = (const uint64_t *)(const void *)msg;
            const float *scales = (const float *)(const void *)(msg + 8 * l->nwords);
            for (size_t i = lo; i < hi;) {
                size_t b = i / bucket, end = (b + 1) * bucket < hi ? (b + 1) * bucket : hi;
                double s = scales[b];
                for (; i < end; i++)
                    acc[i - lo] += (words[i >> 6] >> (i & 63)) & 1 ? -s : s;
            }
        }
        for (size_t i = lo; i < hi; i++)
            out[i] = (float)(acc[i - lo] / (double)n);
    }
}

static gw_status_t sign_run(gw__cz_call_t *call)
{
    const size_t count = call->count, bucket = call->st->cfg.bucket_elements;
    const layout_t l = layout_of(count, bucket);
    int64_t t0 = gw__cz_now();
    void *mem;
    size_t total;
    if (__builtin_mul_overflow(l.bytes, (size_t)call->n, &total))
        return gw__comm_fail(call->comm, GW_ERR_OVERFLOW);
    gw_status_t st = gw__cz_work(call, 1, total, &mem);
    if (st != GW_OK)
        return gw__comm_fail(call->comm, st);
    uint8_t *all = mem, *mine = all + (size_t)call->rank * l.bytes;
    encode(call->x, count, bucket, &l, mine);
    call->encoded_bytes = l.bytes;
    call->encode_ns += gw__cz_now() - t0;

    st = gw__cz_allgather(call, mine, all, l.bytes);
    if (st != GW_OK)
        return st;

    t0 = gw__cz_now();
    for (int r = 0; r < call->n; r++) {
        const uint8_t *msg = all + (size_t)r * l.bytes;
        if (!scales_ok((const float *)(const void *)(msg + 8 * l.nwords), l.nbuckets)) {
            GW_ERROR(&call->comm->log, "compress",
                     "sign codec: rank %d sent a negative or non-finite scale", r);
            return gw__comm_fail(call->comm, GW_ERR_PROTOCOL);
        }
    }
    decode(all, call->n, count, bucket, &l, call->out);
    call->decode_ns += gw__cz_now() - t0;
    return GW_OK;
}

/* The encoding and decoding on their own (codec.h): the reference of the
 * GPU kernels (collectives/cuda/sign.cu). */
void gw__cz_sign_encode(float *x, size_t count, size_t bucket, uint8_t *msg)
{
    const layout_t l = layout_of(count, bucket);
    encode(x, count, bucket, &l, msg);
}

void gw__cz_sign_decode(const uint8_t *all, int n, size_t count, size_t bucket, float *out)
{
    const layout_t l = layout_of(count, bucket);
    decode(all, n, count, bucket, &l, out);
}

const gw__codec_ops_t gw__codec_sign = {
    .size = sizeof(gw__codec_ops_t),
    .codec = GW_CODEC_SIGN,
    .per_bucket_max = 0,
    .run = sign_run,
};
