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
    void (*encode)(uint16_t *dst, const float *src, size_t n, float scale);
    void (*decode)(float *dst, const uint16_t *src, size_t n, float scale);
} gw__cz_cast_t;

gw_status_t gw__cz_cast_run(gw__cz_call_t *call, const gw__cz_cast_t *cast);

#endif
