/*
 * reduce.cu - out[i] = a[i] OP b[i] on the GPU, for every dtype x op, with
 * the bits of the CPU kernels (collectives/reduce_kernels.c).
 *
 * One template kernel takes an operator functor per (dtype, op), as the
 * CPU file generates one loop per pair. Each thread handles 16 bytes of
 * each operand per step (a uint4 load: 4 floats, 8 halves, 16 int8) when
 * out, a and b are 16-byte aligned, which is what lets a memory-bound
 * kernel reach the copy rate; the elements past the last whole vector, or
 * every element of unaligned buffers, take the one-element path. Every
 * thread reads its a and b elements before it writes out's, so exact
 * aliasing (in-place) is as safe as on the CPU.
 *
 * The operators repeat the CPU's definitions: integer sum and product in
 * the unsigned type (wrapping), integer min/max as plain compares; float
 * min/max on the order-preserving integer keys of the bit patterns with
 * NaN picked explicitly (GW__DEFINE_MINMAX); float sum and product as one
 * IEEE operation whose NaNs are made x86's (cuda_device.cuh); halves
 * widened, one float operation (a NaN in a gives a, the CPU's keep_nan_a),
 * rounded back to nearest even (min and max pick on 16-bit keys, the same
 * bits without the conversions). GW_AVG reduces as GW_SUM; the division is
 * gw__cuda_reduce_finish_avg, at the end.
 *
 * The 8-bit floats (E4M3, E5M2) follow fp8_convert.h line for line:
 * widened exactly, one float operation with x86's NaN, rounded back to
 * nearest even, non-saturating (the subnormal rounding uses __fadd_rn, the
 * CPU's float adder in its default mode). Integers also have bitwise
 * and/or/xor; the float operator sets have none (gw__cuda_reduce refuses
 * those pairs before any kernel is chosen). GW_PREMUL_SUM reduces as
 * GW_SUM; gw__cuda_reduce_scale applies the factor first, as
 * gw__reduce_scale does.
 */
#include "collectives/cuda/cuda_device.cuh"
#include "collectives/cuda/cuda_kernels.h"

namespace
{

/* ---- float min/max on keys (reduce_kernels.c's pick) ---------------------- */

__device__ __forceinline__ int32_t key32(uint32_t u)
{
    return (int32_t)(u ^ ((uint32_t)((int32_t)u >> 31) >> 1));
}

__device__ __forceinline__ int16_t key16(uint16_t u)
{
    return (int16_t)(u ^ ((uint16_t)((int16_t)u >> 15) >> 1));
}

__device__ __forceinline__ int64_t key64(uint64_t u)
{
    return (int64_t)(u ^ ((uint64_t)((int64_t)u >> 63) >> 1));
}

__device__ __forceinline__ float pick32(float x, float y, bool want_min)
{
    uint32_t ux = __float_as_uint(x), uy = __float_as_uint(y);
    int32_t kx = key32(ux), ky = key32(uy);
    uint32_t r = (want_min ? kx <= ky : kx >= ky) ? ux : uy;
    r = (uy & 0x7fffffffu) > 0x7f800000u ? uy : r;
    r = (ux & 0x7fffffffu) > 0x7f800000u ? ux : r;
    return __uint_as_float(r);
}

__device__ __forceinline__ double pick64(double x, double y, bool want_min)
{
    uint64_t ux = (uint64_t)__double_as_longlong(x), uy = (uint64_t)__double_as_longlong(y);
    int64_t kx = key64(ux), ky = key64(uy);
    uint64_t r = (want_min ? kx <= ky : kx >= ky) ? ux : uy;
    r = (uy & 0x7fffffffffffffffull) > 0x7ff0000000000000ull ? uy : r;
    r = (ux & 0x7fffffffffffffffull) > 0x7ff0000000000000ull ? ux : r;
    return __longlong_as_double((long long)r);
}

/* ---- operators -------------------------------------------------------------- */

template <typename T, typename U> struct IntOps {
    __device__ static T sum(T x, T y) { return (T)((U)x + (U)y); }
    __device__ static T prod(T x, T y) { return (T)((U)x * (U)y); }
    __device__ static T min(T x, T y) { return x < y ? x : y; }
    __device__ static T max(T x, T y) { return x > y ? x : y; }
    __device__ static T band(T x, T y) { return (T)(x & y); }
    __device__ static T bor(T x, T y) { return (T)(x | y); }
    __device__ static T bxor(T x, T y) { return (T)(x ^ y); }
};

/* The float operator sets have no bitwise ops; these are never launched
 * (gw__cuda_reduce refuses the pairs) and exist so that apply() compiles
 * for every set. */
template <typename T> struct NoBits {
    __device__ static T band(T x, T) { return x; }
    __device__ static T bor(T x, T) { return x; }
    __device__ static T bxor(T x, T) { return x; }
};

struct F32Ops : NoBits<float> {
    __device__ static float sum(float x, float y)
    {
        return gwd_nan_like_x86(x, y, __fadd_rn(x, y));
    }
    __device__ static float prod(float x, float y)
    {
        return gwd_nan_like_x86(x, y, __fmul_rn(x, y));
    }
    __device__ static float min(float x, float y) { return pick32(x, y, true); }
    __device__ static float max(float x, float y) { return pick32(x, y, false); }
};

struct F64Ops : NoBits<double> {
    __device__ static double sum(double x, double y)
    {
        return gwd_nan_like_x86(x, y, __dadd_rn(x, y));
    }
    __device__ static double prod(double x, double y)
    {
        return gwd_nan_like_x86(x, y, __dmul_rn(x, y));
    }
    __device__ static double min(double x, double y) { return pick64(x, y, true); }
    __device__ static double max(double x, double y) { return pick64(x, y, false); }
};

/* Half precision: widen (quieting NaNs, as the CPU's widen does), one float
 * operation, round. The CPU's sum and product keep a's NaN (keep_nan_a) and
 * otherwise take what x86 gives, which gwd_nan_like_x86 reproduces. */
template <bool BF16> struct HalfOps : NoBits<uint16_t> {
    __device__ static float widen(uint16_t h)
    {
        return BF16 ? gwd_bf16_widen(h) : gwd_f16_widen(h);
    }
    __device__ static uint16_t round(float f)
    {
        return BF16 ? gwd_bf16_round(f) : gwd_f16_round(f);
    }
    __device__ static uint16_t sum(uint16_t x, uint16_t y)
    {
        float fx = widen(x), fy = widen(y);
        return round(gwd_nan_like_x86(fx, fy, __fadd_rn(fx, fy)));
    }
    __device__ static uint16_t prod(uint16_t x, uint16_t y)
    {
        float fx = widen(x), fy = widen(y);
        return round(gwd_nan_like_x86(fx, fy, __fmul_rn(fx, fy)));
    }
    /* min and max pick one operand, so they need no float at all: the
     * keys of the halves order them as the keys of their widened floats
     * do, a widened and rounded non-NaN is itself, and a NaN comes back
     * from the round trip with its quiet bit set. Widening and rounding
     * made float16 max 0.76 of the copy rate on an H200; this is the
     * CPU's pick on 16-bit keys, the same bits. */
    __device__ static uint16_t pick16(uint16_t x, uint16_t y, bool want_min)
    {
        const uint16_t inf = BF16 ? 0x7f80u : 0x7c00u, quiet = BF16 ? 0x0040u : 0x0200u;
        int16_t kx = key16(x), ky = key16(y);
        uint16_t r = (want_min ? kx <= ky : kx >= ky) ? x : y;
        r = (y & 0x7fffu) > inf ? (uint16_t)(y | quiet) : r;
        r = (x & 0x7fffu) > inf ? (uint16_t)(x | quiet) : r;
        return r;
    }
    __device__ static uint16_t min(uint16_t x, uint16_t y) { return pick16(x, y, true); }
    __device__ static uint16_t max(uint16_t x, uint16_t y) { return pick16(x, y, false); }
};

/* ---- 8-bit floats (fp8_convert.h) ------------------------------------------ */

__device__ __forceinline__ uint32_t sel(bool c, uint32_t a, uint32_t b) { return c ? a : b; }

__device__ __forceinline__ float e4m3_widen(uint8_t c)
{
    uint32_t sign = (uint32_t)(c & 0x80u) << 24, em = c & 0x7fu;
    uint32_t bits = (em << 20) + (120u << 23);
    uint32_t sub = __float_as_uint(__int2float_rn((int)em)) - (9u << 23);
    bits = sel(em < 0x08u, sub, bits);
    bits = sel(em == 0, 0, bits);
    bits = sel(em == 0x7fu, 0x7fc00000u, bits);
    return __uint_as_float(bits | sign);
}

__device__ __forceinline__ float e5m2_widen(uint8_t c) { return gwd_f16_widen((uint16_t)(c << 8)); }

__device__ __forceinline__ uint8_t e4m3_round(float f)
{
    uint32_t x = __float_as_uint(f), sign = (x >> 24) & 0x80u;
    x &= 0x7fffffffu;
    uint32_t odd = (x >> 20) & 1u;
    uint32_t normal = (x - (120u << 23) + 0x7ffffu + odd) >> 20;
    bool small = x < (121u << 23);
    const uint32_t magic = 141u << 23;
    float t = __fadd_rn(__uint_as_float(x), __uint_as_float(small ? magic : 0u));
    uint32_t o = small ? __float_as_uint(t) - magic : normal;
    o = sel(x >= 0x43f00000u, 0x7fu, o);
    return (uint8_t)(o | sign);
}

__device__ __forceinline__ uint8_t e5m2_round(float f)
{
    uint32_t x = __float_as_uint(f), sign = (x >> 24) & 0x80u;
    x &= 0x7fffffffu;
    uint32_t odd = (x >> 21) & 1u;
    uint32_t normal = (x - (112u << 23) + 0xfffffu + odd) >> 21;
    bool small = x < (113u << 23);
    const uint32_t magic = 134u << 23;
    float t = __fadd_rn(__uint_as_float(x), __uint_as_float(small ? magic : 0u));
    uint32_t o = small ? __float_as_uint(t) - magic : normal;
    o = sel(x >= 0x47800000u, 0x7cu, o);
    o = sel(x > 0x7f800000u, 0x7fu, o);
    return (uint8_t)(o | sign);
}

template <bool E5M2> struct Fp8Ops : NoBits<uint8_t> {
    __device__ static float widen(uint8_t c) { return E5M2 ? e5m2_widen(c) : e4m3_widen(c); }
    __device__ static uint8_t round(float f) { return E5M2 ? e5m2_round(f) : e4m3_round(f); }
    __device__ static uint8_t sum(uint8_t x, uint8_t y)
    {
        float fx = widen(x), fy = widen(y);
        return round(gwd_nan_like_x86(fx, fy, __fadd_rn(fx, fy)));
    }
    __device__ static uint8_t prod(uint8_t x, uint8_t y)
    {
        float fx = widen(x), fy = widen(y);
        return round(gwd_nan_like_x86(fx, fy, __fmul_rn(fx, fy)));
    }
    __device__ static uint8_t min(uint8_t x, uint8_t y)
    {
        return round(pick32(widen(x), widen(y), true));
    }
    __device__ static uint8_t max(uint8_t x, uint8_t y)
    {
        return round(pick32(widen(x), widen(y), false));
    }
};

template <typename T, typename Ops, int OP> __device__ __forceinline__ T apply(T x, T y)
{
    switch (OP) {
    case GW_SUM:
        return Ops::sum(x, y);
    case GW_PROD:
        return Ops::prod(x, y);
    case GW_MIN:
        return Ops::min(x, y);
    case GW_BAND:
        return Ops::band(x, y);
    case GW_BOR:
        return Ops::bor(x, y);
    case GW_BXOR:
        return Ops::bxor(x, y);
    default:
        return Ops::max(x, y);
    }
}

/* ---- the kernels -------------------------------------------------------------- */

template <typename T> union Vec {
    uint4 v;
    T e[16 / sizeof(T)];
};

/* nvec 16-byte vectors of each operand. */
template <typename T, typename Ops, int OP>
__global__ void reduce_vec(T *out, const T *a, const T *b, size_t nvec)
{
    const uint4 *va = reinterpret_cast<const uint4 *>(a);
    const uint4 *vb = reinterpret_cast<const uint4 *>(b);
    uint4 *vo = reinterpret_cast<uint4 *>(out);
    GWD_FOR(i, nvec)
    {
        Vec<T> x, y, r;
        x.v = va[i];
        y.v = vb[i];
#pragma unroll
        for (int j = 0; j < (int)(16 / sizeof(T)); j++)
            r.e[j] = apply<T, Ops, OP>(x.e[j], y.e[j]);
        vo[i] = r.v;
    }
}

template <typename T, typename Ops, int OP>
__global__ void reduce_one(T *out, const T *a, const T *b, size_t n)
{
    GWD_FOR(i, n) { out[i] = apply<T, Ops, OP>(a[i], b[i]); }
}

template <typename T, typename Ops, int OP>
gw_status_t launch(void *out, const void *a, const void *b, size_t count, cudaStream_t s)
{
    T *o = static_cast<T *>(out);
    const T *x = static_cast<const T *>(a), *y = static_cast<const T *>(b);
    const size_t width = gw__cuda_vector_width(sizeof(T));
    size_t nvec = gw__cuda_vector_ok(out, a, b) ? count / width : 0;
    size_t done = nvec * width;
    if (nvec) {
        gw__cuda_launch_t plan;
        gw_status_t st = gw__cuda_plan_launch(nvec, 1, &plan);
        if (st != GW_OK)
            return st;
        reduce_vec<T, Ops, OP><<<plan.grid, plan.block, 0, s>>>(o, x, y, nvec);
        if ((st = gw__cuda_launched()) != GW_OK)
            return st;
    }
    if (done < count) {
        GW_CUDA_PLAN(plan, count - done, 1);
        reduce_one<T, Ops, OP>
            <<<plan.grid, plan.block, 0, s>>>(o + done, x + done, y + done, count - done);
        return gw__cuda_launched();
    }
    return GW_OK;
}

template <typename T, typename Ops>
gw_status_t launch_op(void *out, const void *a, const void *b, size_t count, gw_op_t op,
                      cudaStream_t s)
{
    switch (op) {
    case GW_SUM:
        return launch<T, Ops, GW_SUM>(out, a, b, count, s);
    case GW_PROD:
        return launch<T, Ops, GW_PROD>(out, a, b, count, s);
    case GW_MIN:
        return launch<T, Ops, GW_MIN>(out, a, b, count, s);
    default:
        return launch<T, Ops, GW_MAX>(out, a, b, count, s);
    }
}

/* The integers: the four ops and the bitwise ones. */
template <typename T, typename U>
gw_status_t launch_int(void *out, const void *a, const void *b, size_t count, gw_op_t op,
                       cudaStream_t s)
{
    switch (op) {
    case GW_BAND:
        return launch<T, IntOps<T, U>, GW_BAND>(out, a, b, count, s);
    case GW_BOR:
        return launch<T, IntOps<T, U>, GW_BOR>(out, a, b, count, s);
    case GW_BXOR:
        return launch<T, IntOps<T, U>, GW_BXOR>(out, a, b, count, s);
    default:
        return launch_op<T, IntOps<T, U>>(out, a, b, count, op, s);
    }
}

/* ---- average ------------------------------------------------------------------ */

/* C's division of the promoted values, truncating toward zero. */
template <typename T, typename D> __global__ void div_int(T *p, size_t n, D d)
{
    GWD_FOR(i, n) { p[i] = (T)(p[i] / d); }
}

/* The CPU divides a NaN into itself (quieted, as x86 does). */
__global__ void div_f32(float *p, size_t n, float d)
{
    GWD_FOR(i, n) { p[i] = gwd_nan_like_x86(p[i], d, __fdiv_rn(p[i], d)); }
}

__global__ void div_f64(double *p, size_t n, double d)
{
    GWD_FOR(i, n) { p[i] = gwd_nan_like_x86(p[i], d, __ddiv_rn(p[i], d)); }
}

template <bool E5M2> __global__ void div_fp8(uint8_t *p, size_t n, float d)
{
    GWD_FOR(i, n) { p[i] = Fp8Ops<E5M2>::round(Fp8Ops<E5M2>::widen(p[i]) / d); }
}

/* premul_sum's scaling (gw__reduce_scale): one multiplication by the
 * factor rounded to the compute type, rounded once, x86's NaN. */
__global__ void scale_f32(float *o, const float *x, size_t n, float f)
{
    GWD_FOR(i, n) { o[i] = gwd_nan_like_x86(x[i], f, __fmul_rn(x[i], f)); }
}

__global__ void scale_f64(double *o, const double *x, size_t n, double f)
{
    GWD_FOR(i, n) { o[i] = gwd_nan_like_x86(x[i], f, __dmul_rn(x[i], f)); }
}

template <bool BF16> __global__ void scale_half(uint16_t *o, const uint16_t *x, size_t n, float f)
{
    GWD_FOR(i, n)
    {
        float v = HalfOps<BF16>::widen(x[i]);
        o[i] = HalfOps<BF16>::round(gwd_nan_like_x86(v, f, __fmul_rn(v, f)));
    }
}

template <bool E5M2> __global__ void scale_fp8(uint8_t *o, const uint8_t *x, size_t n, float f)
{
    GWD_FOR(i, n)
    {
        float v = Fp8Ops<E5M2>::widen(x[i]);
        o[i] = Fp8Ops<E5M2>::round(gwd_nan_like_x86(v, f, __fmul_rn(v, f)));
    }
}

template <bool BF16> __global__ void div_half(uint16_t *p, size_t n, float d)
{
    GWD_FOR(i, n)
    {
        float f = HalfOps<BF16>::widen(p[i]);
        p[i] = HalfOps<BF16>::round(gwd_nan_like_x86(f, d, __fdiv_rn(f, d)));
    }
}

} // namespace

extern "C" gw_status_t gw__cuda_reduce(void *out, const void *a, const void *b, size_t count,
                                       gw_dtype_t dtype, gw_op_t op, void *stream)
{
    if (op == GW_AVG || op == GW_PREMUL_SUM)
        op = GW_SUM;
    const bool bitwise = op == GW_BAND || op == GW_BOR || op == GW_BXOR;
    const bool is_int = dtype == GW_INT8 || dtype == GW_UINT8 || dtype == GW_INT32 ||
                        dtype == GW_INT64 || dtype == GW_UINT32 || dtype == GW_UINT64;
    if ((unsigned)dtype >= GW_DTYPE_COUNT || (unsigned)op >= GW_OP_COUNT || (bitwise && !is_int) ||
        (count && (!out || !a || !b)))
        return GW_ERR_INVALID_ARG;
    if (count == 0)
        return GW_OK;
    cudaStream_t s = gw__cuda_stream(stream);
    switch (dtype) {
    case GW_FLOAT32:
        return launch_op<float, F32Ops>(out, a, b, count, op, s);
    case GW_FLOAT64:
        return launch_op<double, F64Ops>(out, a, b, count, op, s);
    case GW_FLOAT16:
        return launch_op<uint16_t, HalfOps<false>>(out, a, b, count, op, s);
    case GW_BFLOAT16:
        return launch_op<uint16_t, HalfOps<true>>(out, a, b, count, op, s);
    case GW_FLOAT8_E4M3:
        return launch_op<uint8_t, Fp8Ops<false>>(out, a, b, count, op, s);
    case GW_FLOAT8_E5M2:
        return launch_op<uint8_t, Fp8Ops<true>>(out, a, b, count, op, s);
    case GW_INT8:
        return launch_int<int8_t, unsigned int>(out, a, b, count, op, s);
    case GW_UINT8:
        return launch_int<uint8_t, unsigned int>(out, a, b, count, op, s);
    case GW_INT32:
        return launch_int<int32_t, uint32_t>(out, a, b, count, op, s);
    case GW_UINT32:
        return launch_int<uint32_t, uint32_t>(out, a, b, count, op, s);
    case GW_UINT64:
        return launch_int<uint64_t, uint64_t>(out, a, b, count, op, s);
    default:
        return launch_int<int64_t, uint64_t>(out, a, b, count, op, s);
    }
}

extern "C" gw_status_t gw__cuda_reduce_scale(void *out, const void *in, size_t count,
                                             gw_dtype_t dtype, double factor, void *stream)
{
    if ((unsigned)dtype >= GW_DTYPE_COUNT || (count && (!out || !in)))
        return GW_ERR_INVALID_ARG;
    if (count == 0)
        return GW_OK;
    cudaStream_t s = gw__cuda_stream(stream);
    GW_CUDA_PLAN(plan, count, 1);
    const float f = (float)factor;
    switch (dtype) {
    case GW_FLOAT32:
        scale_f32<<<plan.grid, plan.block, 0, s>>>((float *)out, (const float *)in, count, f);
        break;
    case GW_FLOAT64:
        scale_f64<<<plan.grid, plan.block, 0, s>>>((double *)out, (const double *)in, count,
                                                   factor);
        break;
    case GW_FLOAT16:
        scale_half<false>
            <<<plan.grid, plan.block, 0, s>>>((uint16_t *)out, (const uint16_t *)in, count, f);
        break;
    case GW_BFLOAT16:
        scale_half<true>
            <<<plan.grid, plan.block, 0, s>>>((uint16_t *)out, (const uint16_t *)in, count, f);
        break;
    case GW_FLOAT8_E4M3:
        scale_fp8<false>
            <<<plan.grid, plan.block, 0, s>>>((uint8_t *)out, (const uint8_t *)in, count, f);
        break;
    case GW_FLOAT8_E5M2:
        scale_fp8<true>
            <<<plan.grid, plan.block, 0, s>>>((uint8_t *)out, (const uint8_t *)in, count, f);
        break;
    default:
        return GW_ERR_INVALID_ARG; /* integers: premul_sum is for floats */
    }
    return gw__cuda_launched();
}

extern "C" gw_status_t gw__cuda_reduce_finish_avg(void *buf, size_t count, gw_dtype_t dtype,
                                                  int nranks, void *stream)
{
    if ((unsigned)dtype >= GW_DTYPE_COUNT || (count && !buf))
        return GW_ERR_INVALID_ARG;
    if (nranks < 2 || count == 0)
        return GW_OK; /* as the CPU: dividing by one changes nothing */
    cudaStream_t s = gw__cuda_stream(stream);
    GW_CUDA_PLAN(plan, count, 1);
    switch (dtype) {
    case GW_FLOAT32:
        div_f32<<<plan.grid, plan.block, 0, s>>>((float *)buf, count, (float)nranks);
        break;
    case GW_FLOAT64:
        div_f64<<<plan.grid, plan.block, 0, s>>>((double *)buf, count, (double)nranks);
        break;
    case GW_FLOAT16:
        div_half<false><<<plan.grid, plan.block, 0, s>>>((uint16_t *)buf, count, (float)nranks);
        break;
    case GW_BFLOAT16:
        div_half<true><<<plan.grid, plan.block, 0, s>>>((uint16_t *)buf, count, (float)nranks);
        break;
    case GW_INT8:
        div_int<int8_t, int><<<plan.grid, plan.block, 0, s>>>((int8_t *)buf, count, nranks);
        break;
    case GW_UINT8:
        div_int<uint8_t, int><<<plan.grid, plan.block, 0, s>>>((uint8_t *)buf, count, nranks);
        break;
    case GW_INT32:
        div_int<int32_t, int32_t><<<plan.grid, plan.block, 0, s>>>((int32_t *)buf, count, nranks);
        break;
    case GW_UINT32:
        div_int<uint32_t, uint32_t>
            <<<plan.grid, plan.block, 0, s>>>((uint32_t *)buf, count, (uint32_t)nranks);
        break;
    case GW_UINT64:
        div_int<uint64_t, uint64_t>
            <<<plan.grid, plan.block, 0, s>>>((uint64_t *)buf, count, (uint64_t)nranks);
        break;
    case GW_FLOAT8_E4M3:
        div_fp8<false><<<plan.grid, plan.block, 0, s>>>((uint8_t *)buf, count, (float)nranks);
        break;
    case GW_FLOAT8_E5M2:
        div_fp8<true><<<plan.grid, plan.block, 0, s>>>((uint8_t *)buf, count, (float)nranks);
        break;
    default:
        div_int<int64_t, int64_t>
            <<<plan.grid, plan.block, 0, s>>>((int64_t *)buf, count, (int64_t)nranks);
        break;
    }
    return gw__cuda_launched();
}
