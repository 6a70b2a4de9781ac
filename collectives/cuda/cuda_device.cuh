/*
 * cuda_device.cuh - what every .cu file of collectives/cuda shares: the one
 * mapping of cudaError_t to gw_status_t, the launch plan, and the device
 * twins of the CPU's scalar helpers.
 *
 * Bitwise equality with the CPU rests on three things:
 *  - the same IEEE operations in the same order: every file is built with
 *    --fmad=false (no fused multiply-add contraction, which the CPU build's
 *    ISO C mode does not do either), -ftz=false and -prec-div=true
 *    (CMakeLists.txt), so a + b, a * b and a / b round exactly as on the CPU;
 *  - the same conversions: the float16/bfloat16 functions below are
 *    collectives/half_convert.h's integer recipes line for line, or for
 *    float16 the hardware's conversions, which round the same way, with
 *    the recipe's result for NaN (the hardware's is canonical, without the
 *    payload);
 *  - the same NaNs: a GPU's arithmetic returns the canonical NaN
 *    0x7fffffff whatever the operands, where x86 returns the NaN operand
 *    (quieted) or, for a NaN it creates (inf - inf, 0 * inf), the "default
 *    NaN" 0xffc00000. gw__cuda_nan_like_x86 puts x86's NaN back, so that
 *    half-precision results (whose rounding keeps the float NaN's sign and
 *    payload) and float results come out with the CPU's bits.
 */
#ifndef GW_COLLECTIVES_CUDA_DEVICE_CUH
#define GW_COLLECTIVES_CUDA_DEVICE_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "collectives/cuda/cuda_plan.h"
#include "gradwire.h"

/* The one translation of CUDA's errors (cuda_status.cu). */
gw_status_t gw__cuda_status(cudaError_t err);

/* cudaGetLastError after a launch, mapped. */
static inline gw_status_t gw__cuda_launched(void) { return gw__cuda_status(cudaGetLastError()); }

static inline cudaStream_t gw__cuda_stream(void *stream) { return (cudaStream_t)stream; }

/* ---- float16 / bfloat16 (half_convert.h, on the device) ------------------ */

__device__ __forceinline__ uint32_t gwd_sel(int cond, uint32_t t, uint32_t f)
{
    return cond ? t : f;
}

/* The integer recipes of half_convert.h, line for line. */
__device__ __forceinline__ float gwd_f16_widen_int(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t bits = (em << 13) + (112u << 23);
    bits += gwd_sel(em >= 0x7c00u, 112u << 23, 0);
    bits |= gwd_sel(em > 0x7c00u, 0x00400000u, 0);
    uint32_t sub = __float_as_uint(__int2float_rn((int32_t)em)) - (24u << 23);
    bits = gwd_sel(em < 0x0400u, sub, bits);
    bits = gwd_sel(em == 0, 0, bits);
    return __uint_as_float(bits | sign);
}

__device__ __forceinline__ uint16_t gwd_f16_round_int(float f)
{
    uint32_t x = __float_as_uint(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    uint32_t odd = (x >> 13) & 1u;
    uint32_t normal = (x - (112u << 23) + 0xfffu + odd) >> 13;
    int small = x < 0x38800000u;
    /* Subnormal halves: the float adder rounds |f| + 0.5 to a multiple of
     * 2^-24, to nearest even (__fadd_rn: never contracted, never flushed). */
    float t = __fadd_rn(__uint_as_float(x), small ? 0.5f : 0.0f);
    uint32_t o = small ? __float_as_uint(t) - 0x3f000000u : normal;
    o = gwd_sel(x >= 0x47800000u, 0x7c00u, o);
    o = gwd_sel(x > 0x7f800000u, 0x7e00u | ((x >> 13) & 0x3ffu), o);
    return (uint16_t)(o | sign);
}

/*
 * What the kernels use: the hardware's conversions (cvt.f32.f16 is exact;
 * cvt.rn.f16.f32 rounds to nearest even, subnormals and overflow to
 * infinity included, which is the CPU's rounding), with the integer
 * recipe's result for NaN, where the hardware's canonical NaN would lose
 * the payload. A dozen integer operations per element made the
 * half-precision reductions compute-bound; one cvt is not.
 */
__device__ __forceinline__ float gwd_f16_widen(uint16_t h)
{
    return (h & 0x7fffu) > 0x7c00u ? gwd_f16_widen_int(h) : __half2float(__ushort_as_half(h));
}

__device__ __forceinline__ uint16_t gwd_f16_round(float f)
{
    return (__float_as_uint(f) & 0x7fffffffu) > 0x7f800000u ? gwd_f16_round_int(f)
                                                            : __half_as_ushort(__float2half_rn(f));
}

__device__ __forceinline__ float gwd_bf16_widen(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    bits |= gwd_sel((h & 0x7fffu) > 0x7f80u, 0x00400000u, 0);
    return __uint_as_float(bits);
}

__device__ __forceinline__ uint16_t gwd_bf16_round(float f)
{
    uint32_t x = __float_as_uint(f);
    uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    r = gwd_sel((x & 0x7fffffffu) > 0x7f800000u, (x >> 16) | 0x0040u, r);
    return (uint16_t)r;
}

/* ---- x86's NaNs ------------------------------------------------------------ */

__device__ __forceinline__ int gwd_isnan32(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

__device__ __forceinline__ int gwd_isnan64(uint64_t u)
{
    return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}

/* r = x OP y as x86 gives it: x's NaN (quieted) if x is one, else y's,
 * else r, with x86's default NaN for a NaN the operation made. */
__device__ __forceinline__ float gwd_nan_like_x86(float x, float y, float r)
{
    uint32_t ux = __float_as_uint(x), uy = __float_as_uint(y), ur = __float_as_uint(r);
    ur = gwd_isnan32(ur) ? 0xffc00000u : ur;
    ur = gwd_isnan32(uy) ? uy | 0x00400000u : ur;
    ur = gwd_isnan32(ux) ? ux | 0x00400000u : ur;
    return __uint_as_float(ur);
}

__device__ __forceinline__ double gwd_nan_like_x86(double x, double y, double r)
{
    uint64_t ux = __double_as_longlong(x), uy = __double_as_longlong(y),
             ur = __double_as_longlong(r);
    ur = gwd_isnan64(ur) ? 0xfff8000000000000ull : ur;
    ur = gwd_isnan64(uy) ? uy | 0x0008000000000000ull : ur;
    ur = gwd_isnan64(ux) ? ux | 0x0008000000000000ull : ur;
    return __longlong_as_double((long long)ur);
}

/* ---- random numbers (codec.h, compress_util.c) ----------------------------- */

__device__ __forceinline__ uint32_t gwd_rand32(uint32_t key, uint32_t i)
{
    uint32_t h = i * 0x9e3779b9u ^ key;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h;
}

__device__ __forceinline__ uint64_t gwd_splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

__device__ __forceinline__ uint64_t gwd_mix(uint64_t a, uint64_t b)
{
    return gwd_splitmix(gwd_splitmix(a) ^ b);
}

/* Grid-stride loop over [0, n). */
#define GWD_FOR(i, n)                                                               \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n); \
         i += (size_t)gridDim.x * blockDim.x)

/* The launch of n items, per_thread each per pass: fills `plan` or returns
 * from the caller (count 0: nothing to launch). */
#define GW_CUDA_PLAN(plan, n, per_thread)                                      \
    gw__cuda_launch_t plan;                                                    \
    do {                                                                       \
        gw_status_t plan_st_ = gw__cuda_plan_launch((n), (per_thread), &plan); \
        if (plan_st_ != GW_OK)                                                 \
            return plan_st_;                                                   \
        if (plan.grid == 0)                                                    \
            return GW_OK;                                                      \
    } while (0)

#endif
