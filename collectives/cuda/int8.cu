/*
 * int8.cu - the int8 codec's quantization with a shared per-bucket scale,
 * and its decoding, on the GPU (collectives/compress/codec_int8.c).
 *
 * One thread per element, for every bucket at once: element i belongs to
 * bucket b = i / bucket, whose shared maximum gmax[b] (the GW_MAX
 * allreduce of step 2, already on the device) and random stream
 * (uint32_t)gw__cz_mix(rank_key, b) it uses; the element's index within
 * its bucket is the counter of that stream, as on the CPU. The arithmetic
 * is gw__cz_int8_quantize's line for line: v = (x / m) L, floor, the
 * stochastic step with 24 random bits, the residual x - m (q / L), all
 * single IEEE operations, so q and the residual are the CPU's bits. A
 * bucket whose maximum is zero is zero on every rank: q = 0, x untouched
 * (int8_run's memset).
 */
#include "collectives/cuda/cuda_device.cuh"
#include "collectives/cuda/cuda_kernels.h"

namespace
{

__global__ void quantize_kernel(float *x, int8_t *q, size_t n, size_t bucket, const float *gmax,
                                float fl, uint64_t rank_key)
{
    GWD_FOR(i, n)
    {
        size_t b = i / bucket;
        float m = gmax[b];
        if (m == 0.0f) {
            q[i] = 0;
            continue;
        }
        uint32_t key = (uint32_t)gwd_mix(rank_key, (uint64_t)b);
        uint32_t j = (uint32_t)(i - b * bucket);
        float v = __fmul_rn(__fdiv_rn(x[i], m), fl);
        int32_t w = (int32_t)v;
        w -= v < (float)w;
        float frac = __fsub_rn(v, (float)w);
        float u = __fmul_rn((float)(gwd_rand32(key, j) >> 8), 0x1p-24f);
        w += u < frac;
        q[i] = (int8_t)w;
        x[i] = __fsub_rn(x[i], __fmul_rn(m, __fdiv_rn((float)w, fl)));
    }
}

__global__ void dequantize_kernel(float *out, const int8_t *s, size_t n, size_t bucket,
                                  const float *gmax, float denom)
{
    GWD_FOR(i, n) { out[i] = __fmul_rn(gmax[i / bucket], __fdiv_rn((float)s[i], denom)); }
}

} // namespace

extern "C" gw_status_t gw__cuda_int8_quantize(float *x, int8_t *q, size_t count, size_t bucket,
                                              const float *gmax, int levels, uint64_t rank_key,
                                              void *stream)
{
    if (bucket == 0 || levels < 1 || levels > 127 || (count && (!x || !q || !gmax)))
        return GW_ERR_INVALID_ARG;
    GW_CUDA_PLAN(plan, count, 1);
    quantize_kernel<<<plan.grid, plan.block, 0, gw__cuda_stream(stream)>>>(
        x, q, count, bucket, gmax, (float)levels, rank_key);
    return gw__cuda_launched();
}

extern "C" gw_status_t gw__cuda_int8_dequantize(float *out, const int8_t *s, size_t count,
                                                size_t bucket, const float *gmax, float denom,
                                                void *stream)
{
    if (bucket == 0 || (count && (!out || !s || !gmax)))
        return GW_ERR_INVALID_ARG;
    GW_CUDA_PLAN(plan, count, 1);
    dequantize_kernel<<<plan.grid, plan.block, 0, gw__cuda_stream(stream)>>>(out, s, count, bucket,
                                                                             gmax, denom);
    return gw__cuda_launched();
}
