/*
 * topk.cu - the k largest |x| by a sampled threshold on the GPU, with the
 * answer of the CPU's selection (collectives/compress/topk_select.c): the
 * same k indices, in increasing order, ties at the boundary going to the
 * lower indices.
 *
 * The steps are the CPU's, with the CPU's plan (cuda_plan.c):
 *  1. A kernel gathers the sample's magnitudes (as order-preserving bit
 *     patterns) at the CPU's sample indices; the sample (a few tens of
 *     thousands of words) goes to the host, which sorts it and reads the
 *     threshold at the CPU's rank: the value at a rank is the same however
 *     it is found, so the threshold is the CPU's.
 *  2. A kernel counts the elements at or above it (an integer count, the
 *     same in any order); with fewer than k the rank is doubled (at most
 *     three tries), with more than the CPU's candidate capacity the exact
 *     path takes over, both exactly when the CPU does.
 *  3. cub::DeviceSelect::If compacts the candidates' indices, in order.
 * Where the CPU then finds the k-th largest by quickselect and picks, the
 * GPU sorts the candidates by (magnitude descending, index ascending) with
 * cub's stable radix sort on the complemented magnitudes, takes the first
 * k, and sorts those indices ascending: the same set, so the same answer.
 * The exact path is the same sort over all n indices.
 *
 * Only the first step's sample and the second's count cross to the host,
 * so the call waits on the stream (twice per try). Work memory comes from
 * the stream-ordered allocator (cudaMallocAsync) and goes back before the
 * call returns.
 */
#include <stdlib.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "collectives/cuda/cuda_device.cuh"
#include "collectives/cuda/cuda_kernels.h"

namespace
{

__device__ __forceinline__ uint32_t absbits(float x) { return __float_as_uint(x) & 0x7fffffffu; }

__global__ void sample_kernel(const float *x, size_t n, size_t s, uint32_t key, uint32_t *sample)
{
    GWD_FOR(j, s)
    {
        size_t i = (size_t)(((uint64_t)gwd_rand32(key ^ 0x5bd1e995u, (uint32_t)j) * n) >> 32);
        sample[j] = absbits(x[i]);
    }
}

__global__ void count_kernel(const float *x, size_t n, uint32_t t, unsigned long long *count)
{
    unsigned long long c = 0;
    GWD_FOR(i, n) { c += absbits(x[i]) >= t; }
    for (int off = 16; off > 0; off /= 2)
        c += __shfl_down_sync(0xffffffffu, c, off);
    if ((threadIdx.x & 31u) == 0 && c)
        atomicAdd(count, c);
}

/* Keys to sort ascending: the complemented magnitudes of the candidates,
 * so that larger magnitudes come first and the stable sort keeps equal
 * magnitudes in index order. */
__global__ void keys_kernel(const float *x, const uint32_t *cand, size_t m, uint32_t *keys)
{
    GWD_FOR(j, m) { keys[j] = ~absbits(x[cand[j]]); }
}

__global__ void iota_kernel(uint32_t *idx, size_t n)
{
    GWD_FOR(i, n) { idx[i] = (uint32_t)i; }
}

struct AtLeast {
    const float *x;
    uint32_t t;
    __device__ bool operator()(uint32_t i) const { return absbits(x[i]) >= t; }
};

/* Stream-ordered work memory, given back on every path. */
struct Pool {
    cudaStream_t s;
    void *p[12];
    int n;
    gw_status_t get(size_t bytes, void **out)
    {
        if (n == 12)
            return GW_ERR_NO_MEMORY;
        gw_status_t st = gw__cuda_status(cudaMallocAsync(out, bytes ? bytes : 1, s));
        if (st == GW_OK)
            p[n++] = *out;
        return st;
    }
    void release()
    {
        while (n > 0)
            cudaFreeAsync(p[--n], s);
    }
};

#define TRY(expr)                     \
    do {                              \
        gw_status_t try_st_ = (expr); \
        if (try_st_ != GW_OK)         \
            return try_st_;           \
    } while (0)

/* idx = the first k of cand[0..m) by (magnitude descending, index
 * ascending), in increasing order. cand is consumed. */
gw_status_t top_of_candidates(Pool &pool, const float *x, uint32_t *cand, size_t m, size_t k,
                              uint32_t *idx)
{
    uint32_t *keys, *keys_out, *cand_out;
    TRY(pool.get(m * sizeof(uint32_t), (void **)&keys));
    TRY(pool.get(m * sizeof(uint32_t), (void **)&keys_out));
    TRY(pool.get(m * sizeof(uint32_t), (void **)&cand_out));
    GW_CUDA_PLAN(plan, m, 1);
    keys_kernel<<<plan.grid, plan.block, 0, pool.s>>>(x, cand, m, keys);
    TRY(gw__cuda_launched());
    size_t tmp_bytes = 0, tmp2 = 0;
    TRY(gw__cuda_status(cub::DeviceRadixSort::SortPairs(nullptr, tmp_bytes, keys, keys_out, cand,
                                                        cand_out, (int64_t)m, 0, 32, pool.s)));
    TRY(gw__cuda_status(
        cub::DeviceRadixSort::SortKeys(nullptr, tmp2, cand_out, idx, (int64_t)k, 0, 32, pool.s)));
    void *tmp;
    TRY(pool.get(tmp_bytes > tmp2 ? tmp_bytes : tmp2, &tmp));
    TRY(gw__cuda_status(cub::DeviceRadixSort::SortPairs(tmp, tmp_bytes, keys, keys_out, cand,
                                                        cand_out, (int64_t)m, 0, 32, pool.s)));
    size_t bytes2 = tmp_bytes > tmp2 ? tmp_bytes : tmp2;
    return gw__cuda_status(
        cub::DeviceRadixSort::SortKeys(tmp, bytes2, cand_out, idx, (int64_t)k, 0, 32, pool.s));
}

gw_status_t exact(Pool &pool, const float *x, size_t n, size_t k, uint32_t *idx)
{
    uint32_t *cand;
    TRY(pool.get(n * sizeof(uint32_t), (void **)&cand));
    GW_CUDA_PLAN(plan, n, 1);
    iota_kernel<<<plan.grid, plan.block, 0, pool.s>>>(cand, n);
    TRY(gw__cuda_launched());
    return top_of_candidates(pool, x, cand, n, k, idx);
}

gw_status_t count_at_least(Pool &pool, const float *x, size_t n, uint32_t t,
                           unsigned long long *dcount, size_t *m)
{
    unsigned long long c = 0;
    TRY(gw__cuda_status(cudaMemsetAsync(dcount, 0, sizeof *dcount, pool.s)));
    GW_CUDA_PLAN(plan, n, 1);
    count_kernel<<<plan.grid, plan.block, 0, pool.s>>>(x, n, t, dcount);
    TRY(gw__cuda_launched());
    TRY(gw__cuda_status(cudaMemcpyAsync(&c, dcount, sizeof c, cudaMemcpyDeviceToHost, pool.s)));
    TRY(gw__cuda_status(cudaStreamSynchronize(pool.s)));
    *m = (size_t)c;
    return GW_OK;
}

gw_status_t sampled(Pool &pool, const float *x, size_t n, size_t k, uint32_t key,
                    const gw__cuda_topk_plan_t *pl, uint32_t *idx, int *path)
{
    const size_t s = pl->sample;
    uint32_t *dsample, *cand;
    unsigned long long *dcount;
    TRY(pool.get(s * sizeof(uint32_t), (void **)&dsample));
    TRY(pool.get(sizeof *dcount, (void **)&dcount));
    TRY(pool.get(pl->cap * sizeof(uint32_t), (void **)&cand));
    uint32_t *hsample = (uint32_t *)malloc(s * sizeof(uint32_t));
    if (!hsample)
        return GW_ERR_NO_MEMORY;
    gw_status_t st = GW_OK;
    GW_CUDA_PLAN(plan, s, 1);
    sample_kernel<<<plan.grid, plan.block, 0, pool.s>>>(x, n, s, key, dsample);
    if ((st = gw__cuda_launched()) == GW_OK)
        st = gw__cuda_status(cudaMemcpyAsync(hsample, dsample, s * sizeof(uint32_t),
                                             cudaMemcpyDeviceToHost, pool.s));
    if (st == GW_OK)
        st = gw__cuda_status(cudaStreamSynchronize(pool.s));
    if (st != GW_OK) {
        free(hsample);
        return st;
    }
    /* Sorted once: each try reads its rank. */
    (void)gw__cuda_rank_value(hsample, s, 0);
    size_t want = pl->want;
    for (int attempt = 0; attempt < pl->attempts && want <= s; attempt++, want *= 2) {
        uint32_t t = hsample[s - want];
        size_t m = 0;
        if ((st = count_at_least(pool, x, n, t, dcount, &m)) != GW_OK)
            break;
        if (m > pl->cap)
            break; /* far too many reach it (many ties): go exact */
        if (m < k)
            continue;
        size_t tmp_bytes = 0;
        AtLeast pred{x, t};
        thrust::counting_iterator<uint32_t> first(0);
        st = gw__cuda_status(cub::DeviceSelect::If(nullptr, tmp_bytes, first, cand, dcount,
                                                   (int64_t)n, pred, pool.s));
        void *tmp;
        if (st == GW_OK)
            st = pool.get(tmp_bytes, &tmp);
        if (st == GW_OK)
            st = gw__cuda_status(cub::DeviceSelect::If(tmp, tmp_bytes, first, cand, dcount,
                                                       (int64_t)n, pred, pool.s));
        if (st == GW_OK)
            st = top_of_candidates(pool, x, cand, m, k, idx);
        if (st == GW_OK && path)
            *path = attempt == 0 ? 1 : 2;
        free(hsample);
        return st;
    }
    free(hsample);
    return st != GW_OK ? st : exact(pool, x, n, k, idx);
}

} // namespace

extern "C" gw_status_t gw__cuda_topk_select(const float *x, size_t n, size_t k, uint32_t key,
                                            uint32_t *idx, int *path, void *stream)
{
    if (path)
        *path = 0;
    if (!x || !idx || k < 1 || k > n || n > 0xffffffffull)
        return GW_ERR_INVALID_ARG;
    Pool pool{gw__cuda_stream(stream), {}, 0};
    if (k == n) {
        GW_CUDA_PLAN(plan, n, 1);
        iota_kernel<<<plan.grid, plan.block, 0, pool.s>>>(idx, n);
        return gw__cuda_launched();
    }
    gw__cuda_topk_plan_t pl;
    gw_status_t st = gw__cuda_topk_plan(n, k, &pl);
    if (st == GW_OK)
        st = pl.exact ? exact(pool, x, n, k, idx) : sampled(pool, x, n, k, key, &pl, idx, path);
    pool.release();
    if (st == GW_OK)
        st = gw__cuda_status(cudaStreamSynchronize(pool.s));
    return st;
}
