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
 * The per-hop add is done here with the codec's own conversions (F16C where
 * the CPU has it) rather than by the generic ring (allreduce_ring.c with
 * GW_FLOAT16), whose portable conversion loops cost several times more CPU
 * per element, which matters when many ranks share a host.
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

/* Elements converted per block: stack buffers for the widened values. */
#define BLOCK 2048

GW__CZ_HOT static void sub_block(float *x, const float *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] -= t[i];
}

GW__CZ_HOT static void add_block(float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] += b[i];
}

GW__CZ_HOT static void div_block(float *x, size_t n, float d)
{
    for (size_t i = 0; i < n; i++)
        x[i] /= d;
}

/* own[i] = round16(widen(in[i]) + widen(own[i])), the incoming partial sum
 * first. */
static void hop(const gw__cz_cast_t *cast, uint16_t *own, const uint16_t *in, size_t n)
{
    float a[BLOCK], b[BLOCK];
    for (size_t lo = 0; lo < n; lo += BLOCK) {
        size_t len = n - lo < BLOCK ? n - lo : BLOCK;
        cast->decode(a, in + lo, len, 1.0f);
        cast->decode(b, own + lo, len, 1.0f);
        add_block(a, b, len);
        cast->encode(own + lo, a, len, 1.0f);
    }
}

static gw_status_t ring(gw__cz_call_t *call, const gw__cz_cast_t *cast, uint16_t *h,
                        uint16_t *tmp, uint16_t *all, size_t blk)
{
    gw_comm_t *comm = call->comm;
    const int n = call->n, r = call->rank;
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    const size_t bytes = blk * sizeof(uint16_t);
    gw__cz_begin(call, blk, cast->dtype, GW_SUM);
    for (int s = 0; s < n - 1; s++) {
        size_t sb = (size_t)((r - 1 - s + 2 * n) % n), rb = (size_t)((r - 2 - s + 2 * n) % n);
        int64_t t0 = gw__cz_now(), c0 = gw__cz_cpu_now();
        gw_status_t st =
            gw__p2p_sendrecv(comm, right, h + sb * blk, bytes, left, tmp, bytes);
        int64_t t1 = gw__cz_now();
        call->comm_ns += t1 - t0;
        call->comm_cpu_ns += gw__cz_cpu_now() - c0;
        if (st != GW_OK)
            return st;
        hop(cast, h + rb * blk, tmp, blk);
        call->decode_ns += gw__cz_now() - t1;
    }
    return gw__cz_allgather(call, h + (size_t)r * blk, all, bytes);
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
         * is zero, nothing needs to travel, and the residual stays zero. */
        if (count)
            memset(call->out, 0, count * sizeof(float));
        return GW_OK;
    }
    int e;
    frexp((double)m * call->n, &e); /* n max|x| < 2^e */
    int k = cast->max_exp - e;
    if (k > 126)
        k = 126;
    if (k < -126)
        k = -126;
    if (!cast->upscale && k > 0)
        k = 0;
    const float scale = ldexpf(1.0f, k), unscale = ldexpf(1.0f, -k);

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
    float t[BLOCK];
    for (size_t lo = 0; lo < count; lo += BLOCK) {
        size_t len = count - lo < BLOCK ? count - lo : BLOCK;
        cast->encode(h + lo, x + lo, len, scale);
        cast->decode(t, h + lo, len, unscale);
        sub_block(x + lo, t, len);
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
    const float nf = (float)call->n;
    for (size_t lo = 0; lo < count; lo += BLOCK) {
        size_t len = count - lo < BLOCK ? count - lo : BLOCK;
        cast->decode(call->out + lo, all + lo, len, unscale);
        div_block(call->out + lo, len, nf);
    }
    call->decode_ns += gw__cz_now() - t0;
    return GW_OK;
}
