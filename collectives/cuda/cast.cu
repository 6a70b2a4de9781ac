/*
 * cast.cu - float <-> float16 / bfloat16 on the GPU, with the bits of
 * collectives/half_convert.h, and the casting codecs' two passes
 * (collectives/compress/cast_kernels.c).
 *
 * The conversions are cuda_device.cuh's: bfloat16 by the CPU's integer
 * recipe, float16 by the hardware's cvt instructions, which round the same
 * way, with the recipe taking over for NaN (the hardware's NaN is
 * canonical, where gradwire keeps a NaN's sign and payload). Each thread
 * converts one element per pass.
 *
 * The codec passes do per element exactly what cast_kernels.c's scalar
 * loops do, in the same order (no FMA: cuda_device.cuh):
 *  - encode_rest: h = round16(x * scale), then x -= widen(h) * unscale;
 *  - decode_avg:  dst = (widen(src) * unscale) / d.
 */
#include "collectives/cuda/cuda_device.cuh"
#include "collectives/cuda/cuda_kernels.h"

namespace
{

template <bool BF16> __device__ __forceinline__ float widen(uint16_t h)
{
    return BF16 ? gwd_bf16_widen(h) : gwd_f16_widen(h);
}

template <bool BF16> __device__ __forceinline__ uint16_t round16(float f)
{
    return BF16 ? gwd_bf16_round(f) : gwd_f16_round(f);
}

template <bool BF16> __global__ void widen_kernel(float *out, const uint16_t *in, size_t n)
{
    GWD_FOR(i, n) { out[i] = widen<BF16>(in[i]); }
}

template <bool BF16> __global__ void narrow_kernel(uint16_t *out, const float *in, size_t n)
{
    GWD_FOR(i, n) { out[i] = round16<BF16>(in[i]); }
}

template <bool BF16>
__global__ void encode_rest_kernel(uint16_t *h, float *x, size_t n, float scale, float unscale)
{
    GWD_FOR(i, n)
    {
        uint16_t b = round16<BF16>(__fmul_rn(x[i], scale));
        h[i] = b;
        x[i] = __fsub_rn(x[i], __fmul_rn(widen<BF16>(b), unscale));
    }
}

template <bool BF16>
__global__ void decode_avg_kernel(float *dst, const uint16_t *src, size_t n, float unscale, float d)
{
    GWD_FOR(i, n) { dst[i] = __fdiv_rn(__fmul_rn(widen<BF16>(src[i]), unscale), d); }
}

gw_status_t check(gw_dtype_t dtype, size_t count, const void *p, const void *q)
{
    if (dtype != GW_FLOAT16 && dtype != GW_BFLOAT16)
        return GW_ERR_INVALID_ARG;
    return count && (!p || !q) ? GW_ERR_INVALID_ARG : GW_OK;
}

} // namespace

extern "C" gw_status_t gw__cuda_half_widen(float *out, const uint16_t *in, size_t count,
                                           gw_dtype_t dtype, void *stream)
{
    gw_status_t st = check(dtype, count, out, in);
    if (st != GW_OK)
        return st;
    GW_CUDA_PLAN(plan, count, 1);
    cudaStream_t s = gw__cuda_stream(stream);
    if (dtype == GW_BFLOAT16)
        widen_kernel<true><<<plan.grid, plan.block, 0, s>>>(out, in, count);
    else
        widen_kernel<false><<<plan.grid, plan.block, 0, s>>>(out, in, count);
    return gw__cuda_launched();
}

extern "C" gw_status_t gw__cuda_half_narrow(uint16_t *out, const float *in, size_t count,
                                            gw_dtype_t dtype, void *stream)
{
    gw_status_t st = check(dtype, count, out, in);
    if (st != GW_OK)
        return st;
    GW_CUDA_PLAN(plan, count, 1);
    cudaStream_t s = gw__cuda_stream(stream);
    if (dtype == GW_BFLOAT16)
        narrow_kernel<true><<<plan.grid, plan.block, 0, s>>>(out, in, count);
    else
        narrow_kernel<false><<<plan.grid, plan.block, 0, s>>>(out, in, count);
    return gw__cuda_launched();
}

extern "C" gw_status_t gw__cuda_cast_encode_rest(uint16_t *h, float *x, size_t count, float scale,
                                                 float unscale, gw_dtype_t dtype, void *stream)
{
    gw_status_t st = check(dtype, count, h, x);
    if (st != GW_OK)
        return st;
    GW_CUDA_PLAN(plan, count, 1);
    cudaStream_t s = gw__cuda_stream(stream);
    if (dtype == GW_BFLOAT16)
        encode_rest_kernel<true><<<plan.grid, plan.block, 0, s>>>(h, x, count, scale, unscale);
    else
        encode_rest_kernel<false><<<plan.grid, plan.block, 0, s>>>(h, x, count, scale, unscale);
    return gw__cuda_launched();
}

extern "C" gw_status_t gw__cuda_cast_decode_avg(float *dst, const uint16_t *src, size_t count,
                                                float unscale, float d, gw_dtype_t dtype,
                                                void *stream)
{
    gw_status_t st = check(dtype, count, dst, src);
    if (st != GW_OK)
        return st;
    GW_CUDA_PLAN(plan, count, 1);
    cudaStream_t s = gw__cuda_stream(stream);
    if (dtype == GW_BFLOAT16)
        decode_avg_kernel<true><<<plan.grid, plan.block, 0, s>>>(dst, src, count, unscale, d);
    else
        decode_avg_kernel<false><<<plan.grid, plan.block, 0, s>>>(dst, src, count, unscale, d);
    return gw__cuda_launched();
}
