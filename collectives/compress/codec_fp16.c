/*
 * codec_fp16.c - IEEE half-precision casting with error feedback.
 *
 * Two bytes per element on the wire in both halves of a ring allreduce; the
 * ring accumulates each hop in float32 and rounds once per hop, and the
 * tensor is scaled by a shared power of two so that no sum can exceed fp16's
 * range (cast_ring.c tells the whole story). What the cast of this rank's
 * own contribution loses is kept, exactly, as the residual.
 */
#include "collectives/compress/cast_ring.h"

/* Partial sums stay below 2^15, well under fp16's largest value, 65504. */
static const gw__cz_cast_t fp16_cast = {
    .dtype = GW_FLOAT16,
    .max_exp = 15,
    .upscale = 1,
    .encode_rest = gw__cz_encode_half_rest,
    .decode_avg = gw__cz_decode_half_avg,
    .prep_encode = gw__cz_prep_encode_half,
};

static uint32_t fp16_prepare(gw__cz_call_t *call) { return gw__cz_cast_prepare(call, &fp16_cast); }
static gw_status_t fp16_run(gw__cz_call_t *call) { return gw__cz_cast_run(call, &fp16_cast); }

const gw__codec_ops_t gw__codec_fp16 = {
    .size = sizeof(gw__codec_ops_t),
    .codec = GW_CODEC_FP16,
    .per_bucket_max = 0,
    .prepare = fp16_prepare,
    .run = fp16_run,
};
