/*
 * codec_bf16.c - bfloat16 casting with error feedback.
 *
 * bfloat16 keeps float32's exponent and 8 bits of mantissa: two bytes per
 * element on the wire, the ring accumulating each hop in float32 and
 * rounding once per hop (cast_ring.c). It needs no scaling for range except
 * near FLT_MAX; what the cast of this rank's contribution loses is kept,
 * exactly, as the residual.
 */
#include "collectives/compress/cast_ring.h"

static const gw__cz_cast_t bf16_cast = {
    .dtype = GW_BFLOAT16,
    .max_exp = 126,
    .upscale = 0,
    .encode_rest = gw__cz_encode_bf16_rest,
    .decode_avg = gw__cz_decode_bf16_avg,
    .prep_encode = gw__cz_prep_encode_bf16,
};

static uint32_t bf16_prepare(gw__cz_call_t *call) { return gw__cz_cast_prepare(call, &bf16_cast); }
static gw_status_t bf16_run(gw__cz_call_t *call) { return gw__cz_cast_run(call, &bf16_cast); }

const gw__codec_ops_t gw__codec_bf16 = {
    .size = sizeof(gw__codec_ops_t),
    .codec = GW_CODEC_BF16,
    .per_bucket_max = 0,
    .prepare = bf16_prepare,
    .run = bf16_run,
};
