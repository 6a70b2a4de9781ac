/*
 * sign.cu - the 1-bit sign codec's encoding and decoding on the GPU
 * (collectives/compress/codec_sign.c), in its message layout: ceil(count /
 * 64) 64-bit words of sign bits (element i is bit i % 64 of word i / 64,
 * little-endian), then one float32 scale per bucket, padded to 8 bytes.
 *
 * Encoding takes two kernels. The first gives each bucket one block, which
 * sums |x| in double over a fixed stride and then a fixed tree, and
 * writes the scale s_b = sum / len: the CPU sums left to right, so the two
 * double sums can differ in their last bits and, rarely, the float scale by
 * one ulp (the tests state that tolerance). The second gives each element
 * one thread: a warp's 32 sign bits are one __ballot_sync, i.e. the
 * 32-bit half of a 64-bit word, which little-endian memory puts exactly
 * where the CPU's word has them, and each thread leaves x - (+-s) behind.
 * -0.0 counts as positive, as on the CPU.
 *
 * Decoding is one thread per element, adding the n ranks' +-s in rank
 * order into a double and dividing once: the CPU's sums, in the CPU's
 * order, so bitwise the CPU's result.
 */
#include "collectives/cuda/cuda_device.cuh"
#include "collectives/cuda/cuda_kernels.h"

namespace
{

constexpr unsigned SCALE_THREADS = 512;

size_t nwords_of(size_t count) { return (count + 63) / 64; }

size_t nbuckets_of(size_t count, size_t bucket) { return count ? (count - 1) / bucket + 1 : 0; }

__global__ void scale_kernel(const float *x, size_t count, size_t bucket, float *scales)
{
    __shared__ double part[SCALE_THREADS];
    size_t b = blockIdx.x, lo = b * bucket;
    size_t len = count - lo < bucket ? count - lo : bucket;
    double sum = 0;
    for (size_t i = threadIdx.x; i < len; i += blockDim.x)
        sum = __dadd_rn(sum, (double)fabsf(x[lo + i]));
    part[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            part[threadIdx.x] = __dadd_rn(part[threadIdx.x], part[threadIdx.x + half]);
        __syncthreads();
    }
    if (threadIdx.x == 0)
        scales[b] = (float)__ddiv_rn(part[0], (double)len);
}

/* Whole warps walk the buffer, so that every lane of a warp takes part in
 * its ballot; lanes past count vote 0. */
__global__ void bits_kernel(float *x, size_t count, size_t bucket, const float *scales,
                            uint32_t *words)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const unsigned lane = threadIdx.x & 31u;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i - lane < count; i += stride) {
        bool in = i < count;
        float v = in ? x[i] : 0.0f;
        bool neg = in && v < 0;
        uint32_t word = __ballot_sync(0xffffffffu, neg);
        if (lane == 0)
            words[i >> 5] = word;
        if (in) {
            float s = scales[i / bucket];
            x[i] = __fsub_rn(v, neg ? -s : s);
        }
    }
}

__global__ void decode_kernel(const uint8_t *all, int n, size_t count, size_t bucket, size_t bytes,
                              size_t nwords, float *out)
{
    GWD_FOR(i, count)
    {
        size_t b = i / bucket;
        double acc = 0;
        for (int r = 0; r < n; r++) {
            const uint8_t *msg = all + (size_t)r * bytes;
            const uint64_t *words = reinterpret_cast<const uint64_t *>(msg);
            const float *scales = reinterpret_cast<const float *>(msg + 8 * nwords);
            double s = scales[b];
            acc = __dadd_rn(acc, (words[i >> 6] >> (i & 63)) & 1 ? -s : s);
        }
        out[i] = (float)__ddiv_rn(acc, (double)n);
    }
}

} // namespace

extern "C" size_t gw__cuda_sign_bytes(size_t count, size_t bucket)
{
    if (bucket == 0)
        return 0;
    return 8 * nwords_of(count) + 8 * ((nbuckets_of(count, bucket) + 1) / 2);
}

extern "C" gw_status_t gw__cuda_sign_encode(float *x, size_t count, size_t bucket, uint8_t *msg,
                                            void *stream)
{
    if (bucket == 0 || (count && (!x || !msg)))
        return GW_ERR_INVALID_ARG;
    if (count == 0)
        return GW_OK;
    size_t nb = nbuckets_of(count, bucket), nwords = nwords_of(count);
    if (nb > 0x7fffffffu)
        return GW_ERR_UNSUPPORTED; /* one block per bucket */
    cudaStream_t s = gw__cuda_stream(stream);
    gw_status_t st =
        gw__cuda_status(cudaMemsetAsync(msg, 0, gw__cuda_sign_bytes(count, bucket), s));
    if (st != GW_OK)
        return st;
    float *scales = reinterpret_cast<float *>(msg + 8 * nwords);
    scale_kernel<<<(unsigned)nb, SCALE_THREADS, 0, s>>>(x, count, bucket, scales);
    if ((st = gw__cuda_launched()) != GW_OK)
        return st;
    GW_CUDA_PLAN(plan, count, 1);
    bits_kernel<<<plan.grid, plan.block, 0, s>>>(x, count, bucket, scales,
                                                 reinterpret_cast<uint32_t *>(msg));
    return gw__cuda_launched();
}

extern "C" gw_status_t gw__cuda_sign_decode(const uint8_t *all, int n, size_t count, size_t bucket,
                                            float *out, void *stream)
{
    if (bucket == 0 || n < 1 || (count && (!all || !out)))
        return GW_ERR_INVALID_ARG;
    GW_CUDA_PLAN(plan, count, 1);
    decode_kernel<<<plan.grid, plan.block, 0, gw__cuda_stream(stream)>>>(
        all, n, count, bucket, gw__cuda_sign_bytes(count, bucket), nwords_of(count), out);
    return gw__cuda_launched();
}
