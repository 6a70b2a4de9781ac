/*
 * cast_ring.h - the ring allreduce of 16-bit casts shared by the fp16 and
 * bf16 codecs (cast_ring.c).
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
    /* The fused conversions of codec.h (gw__cz_encode_half_rest, ...). */
    void (*encode_rest)(uint16_t *h, float *x, size_t n, float scale, float unscale);
    void (*decode_avg)(float *dst, const uint16_t *src, size_t n, float unscale, float d);
    void (*add)(uint16_t *own, const uint16_t *in, size_t n);
    uint32_t (*prep_encode)(uint16_t *h, float *x, const float *g, const float *res, size_t n,
                            float scale, float unscale);
} gw__cz_cast_t;

/* The codec's prepare() and run() (codec.h), for the cast described. */
uint32_t gw__cz_cast_prepare(gw__cz_call_t *call, const gw__cz_cast_t *cast);
gw_status_t gw__cz_cast_run(gw__cz_call_t *call, const gw__cz_cast_t *cast);

#endif
