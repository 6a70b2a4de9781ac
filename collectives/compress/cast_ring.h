/*
 * cast_ring.h - the ring allreduce of 16-bit casts shared by the fp16 and
 * bf16 codecs (cast_ring.c), and its fused conversion passes
 * (cast_kernels.c).
 */
#ifndef GW_COMPRESS_CAST_RING_H
#define GW_COMPRESS_CAST_RING_H

#include "collectives/compress/codec.h"

/* The two casts differ only in the wire format, its conversions and how far
 * sums may grow before they overflow it. */
typedef struct gw__cz_cast {
    gw_dtype_t dtype; /* GW_FLOAT16 or GW_BFLOAT16: the ring reduces these */
    int max_exp;      /* keep every partial sum below 2^max_exp */
    int upscale;      /* 1: also scale small tensors up into the format's range */
    /* The fused conversions below (gw__cz_encode_half_rest, ...). */
    void (*encode_rest)(uint16_t *h, float *x, size_t n, float scale, float unscale);
    void (*decode_avg)(float *dst, const uint16_t *src, size_t n, float unscale, float d);
    uint32_t (*prep_encode)(uint16_t *h, float *x, const float *g, const float *res, size_t n,
                            float scale, float unscale);
} gw__cz_cast_t;

/* float <-> IEEE half / bfloat16 over arrays, round to nearest even (finite
 * inputs; the caller has checked), in the single passes the casting codecs
 * make, each bitwise equal to the scalar composition named (the
 * conversions of half_convert.h). `scale` multiplies before rounding and
 * `unscale` after widening; powers of two keep them exact.
 *  - encode_*_rest: h = round16(x * scale), then x -= widen(h) * unscale
 *    (the cast and what it lost: x becomes the residual);
 *  - decode_*_avg: dst = (widen(src) * unscale) / d (the average);
 *  - prep_encode_*: step 1 and encode_*_rest in one pass: x = g + res as
 *    step 1 forms it (res NULL: x = g), its image h and residual as
 *    encode_*_rest leaves them; returns the largest |x| as an
 *    order-preserving integer.
 * One pass instead of three over the data: at 64 MiB the separate loops
 * spent more time on the round trips through the temporary than on the
 * conversions. A ring hop's sum is gw__reduce's (reduce_kernels.h). */
void gw__cz_encode_half_rest(uint16_t *h, float *x, size_t n, float scale, float unscale);
void gw__cz_decode_half_avg(float *dst, const uint16_t *src, size_t n, float unscale, float d);
uint32_t gw__cz_prep_encode_half(uint16_t *h, float *x, const float *g, const float *res, size_t n,
                                 float scale, float unscale);
void gw__cz_encode_bf16_rest(uint16_t *h, float *x, size_t n, float scale, float unscale);
void gw__cz_decode_bf16_avg(float *dst, const uint16_t *src, size_t n, float unscale, float d);
uint32_t gw__cz_prep_encode_bf16(uint16_t *h, float *x, const float *g, const float *res, size_t n,
                                 float scale, float unscale);

/* The codec's prepare() and run() (codec.h), for the cast described. */
uint32_t gw__cz_cast_prepare(gw__cz_call_t *call, const gw__cz_cast_t *cast);
gw_status_t gw__cz_cast_run(gw__cz_call_t *call, const gw__cz_cast_t *cast);

#endif
