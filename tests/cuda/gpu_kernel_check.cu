/*
 * gpu_kernel_check.cu - every GPU kernel of collectives/cuda against the
 * library's CPU kernel, and (--bench) their throughput against a
 * device-to-device copy. The one program scripts/gpu-check.sh runs on a
 * machine with a GPU; ctest runs it everywhere (gpu_kernel_check), where
 * without a device it prints "SKIP: no CUDA GPU (cudaGetDeviceCount:
 * ...)" and exits 77, which ctest reports as Skipped.
 *
 * Inputs are random bit patterns of several sizes (odd ones included, and
 * unaligned pointers, which take the kernels' one-element path), with NaNs
 * of random payloads, infinities, signed zeros and subnormals mixed into
 * the float types. Comparisons are bitwise where cuda_kernels.h promises
 * the CPU's bits; where it states a tolerance (float32/float64 sum and
 * product of two NaNs, the sign codec's scale, cuBLAS against OpenBLAS,
 * Gram-Schmidt's sums), the check allows exactly that and says so.
 * Every failure prints a line starting "FAIL:"; the exit status is 1 if
 * there is one.
 */
#include <cblas.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "collectives/cuda/cuda_kernels.h"
#include "tests/cuda/cpu_refs.h"
extern "C" { /* C headers without a guard of their own */
#include "collectives/compress/topk_select.h"
#include "collectives/reduce_kernels.h"
}

static int failures;

#define FAIL(...)                     \
    do {                              \
        printf("FAIL: " __VA_ARGS__); \
        printf("\n");                 \
        failures++;                   \
    } while (0)

#define CK(expr)                                                      \
    do {                                                              \
        cudaError_t ck_ = (expr);                                     \
        if (ck_ != cudaSuccess) {                                     \
            printf("FAIL: %s: %s\n", #expr, cudaGetErrorString(ck_)); \
            exit(1);                                                  \
        }                                                             \
    } while (0)

#define GW(expr)                                       \
    do {                                               \
        gw_status_t gw_ = (expr);                      \
        if (gw_ != GW_OK)                              \
            FAIL("%s: %s", #expr, gw_status_str(gw_)); \
    } while (0)

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Random bits, with specials mixed in for the float types: one element in
 * eight is a NaN (random payload and sign), an infinity, a signed zero or
 * a subnormal. */
static void fill_bits(void *buf, size_t count, gw_dtype_t dtype, uint64_t seed)
{
    size_t es = gw_dtype_size(dtype);
    uint8_t *p = (uint8_t *)buf;
    for (size_t i = 0; i < count; i++) {
        uint64_t r = mix64(seed * 0x100000001b3ull + i), s = mix64(r);
        int special = (r & 7) == 0;
        uint64_t v = s, sign = (r >> 8) & 1;
        switch (dtype) {
        case GW_FLOAT32: {
            const uint32_t sp[4] = {0x7f800001u | (uint32_t)(s & 0x7fffff), 0x7f800000u, 0u,
                                    (uint32_t)(s & 0x7fffff)};
            uint32_t u = special ? sp[(r >> 4) & 3] | (uint32_t)sign << 31
                                 : (uint32_t)((s & 0x807fffffu) | ((0x70u + (s >> 40) % 32) << 23));
            memcpy(p + i * 4, &u, 4);
            continue;
        }
        case GW_FLOAT64: {
            const uint64_t sp[4] = {0x7ff0000000000001ull | (s & 0xfffffffffffffull),
                                    0x7ff0000000000000ull, 0ull, s & 0xfffffffffffffull};
            uint64_t u = special
                             ? sp[(r >> 4) & 3] | sign << 63
                             : (s & 0x800fffffffffffffull) | ((0x3f0ull + (s >> 56) % 32) << 52);
            memcpy(p + i * 8, &u, 8);
            continue;
        }
        case GW_FLOAT16:
        case GW_BFLOAT16: {
            int bf = dtype == GW_BFLOAT16;
            uint16_t mant = bf ? 0x7f : 0x3ff, inf = bf ? 0x7f80 : 0x7c00;
            const uint16_t sp[4] = {(uint16_t)(inf | 1 | (s & mant)), inf, 0, (uint16_t)(s & mant)};
            uint16_t u =
                special ? (uint16_t)(sp[(r >> 4) & 3] | (sign << 15)) : (uint16_t)(s & 0xffff);
            if (!special && (u & inf) == inf)
                u &= (uint16_t)~0x4000; /* keep the random ones finite */
            memcpy(p + i * 2, &u, 2);
            continue;
        }
        default:
            memcpy(p + i * es, &v, es);
        }
    }
}

static int is_nan_bits(const uint8_t *p, gw_dtype_t dtype)
{
    if (dtype == GW_FLOAT32) {
        uint32_t u;
        memcpy(&u, p, 4);
        return (u & 0x7fffffffu) > 0x7f800000u;
    }
    uint64_t u;
    memcpy(&u, p, 8);
    return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}

/* Device buffers with an offset of `shift` elements from an aligned
 * allocation (shift 1: the unaligned path). */
struct Dev {
    void *base = nullptr;
    uint8_t *p = nullptr;
    Dev(size_t bytes, size_t shift_bytes)
    {
        CK(cudaMalloc(&base, bytes + 64));
        p = (uint8_t *)base + shift_bytes;
    }
    ~Dev() { cudaFree(base); }
    void put(const void *h, size_t bytes) { CK(cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice)); }
    void get(void *h, size_t bytes) { CK(cudaMemcpy(h, p, bytes, cudaMemcpyDeviceToHost)); }
};

static const size_t SIZES[] = {1, 7, 1000, 4099, 65536, (1u << 20) + 3};

/* ---- reductions ------------------------------------------------------------- */

static void check_reduce(void)
{
    int checked = 0;
    for (int d = 0; d < GW_DTYPE_COUNT; d++) {
        gw_dtype_t dt = (gw_dtype_t)d;
        size_t es = gw_dtype_size(dt);
        for (size_t n : SIZES) {
            for (int shift = 0; shift < 2; shift++) {
                std::vector<uint8_t> a(n * es), b(n * es), want(n * es), got(n * es);
                fill_bits(a.data(), n, dt, 1000 + n + (size_t)d);
                fill_bits(b.data(), n, dt, 2000 + n + (size_t)d);
                Dev da(n * es, shift * es), db(n * es, shift * es), dout(n * es, shift * es);
                da.put(a.data(), n * es);
                db.put(b.data(), n * es);
                for (int o = 0; o < GW_OP_COUNT; o++) {
                    gw_op_t op = (gw_op_t)o;
                    if (op == GW_AVG || op == GW_PREMUL_SUM)
                        continue; /* reduce as GW_SUM, checked there */
                    if (!gw__reduce_supported(dt, op)) {
                        /* bitwise ops on a float dtype: refused */
                        if (gw__cuda_reduce(dout.p, da.p, db.p, n, dt, op, NULL) !=
                            GW_ERR_INVALID_ARG)
                            FAIL("reduce %s %s is not refused", gw_dtype_name(dt), gw_op_name(op));
                        checked++;
                        continue;
                    }
                    gw__reduce(want.data(), a.data(), b.data(), n, dt, op);
                    /* in place (out == a) on odd sizes, out of place otherwise */
                    int inplace = n & 1;
                    if (inplace)
                        da.put(a.data(), n * es);
                    GW(gw__cuda_reduce(inplace ? da.p : dout.p, da.p, db.p, n, dt, op, NULL));
                    CK(cudaDeviceSynchronize());
                    (inplace ? da : dout).get(got.data(), n * es);
                    size_t bad = 0, first = 0;
                    for (size_t i = 0; i < n; i++) {
                        if (!memcmp(&got[i * es], &want[i * es], es))
                            continue;
                        /* Stated exception: both operands NaN (sum, prod of
                         * float32/float64): any quiet NaN. */
                        if ((dt == GW_FLOAT32 || dt == GW_FLOAT64) && op <= GW_PROD &&
                            is_nan_bits(&a[i * es], dt) && is_nan_bits(&b[i * es], dt) &&
                            is_nan_bits(&got[i * es], dt))
                            continue;
                        if (!bad++)
                            first = i;
                    }
                    if (bad)
                        FAIL("reduce %s %s n=%zu shift=%d: %zu elements differ from gw__reduce "
                             "(first at %zu)",
                             gw_dtype_name(dt), gw_op_name(op), n, shift, bad, first);
                    checked++;
                }
                /* average: buf /= 3 */
                memcpy(want.data(), a.data(), n * es);
                gw__reduce_finish_avg(want.data(), n, dt, 3);
                da.put(a.data(), n * es);
                GW(gw__cuda_reduce_finish_avg(da.p, n, dt, 3, NULL));
                da.get(got.data(), n * es);
                if (memcmp(got.data(), want.data(), n * es))
                    FAIL("finish_avg %s n=%zu shift=%d differs from gw__reduce_finish_avg",
                         gw_dtype_name(dt), n, shift);
                checked++;
                /* premul_sum's scaling: out = a * 0.3 (float dtypes) */
                if (gw__dtype_is_float(dt)) {
                    gw__reduce_scale(want.data(), a.data(), n, dt, 0.3);
                    da.put(a.data(), n * es);
                    GW(gw__cuda_reduce_scale(dout.p, da.p, n, dt, 0.3, NULL));
                    CK(cudaDeviceSynchronize());
                    dout.get(got.data(), n * es);
                    size_t bad = 0;
                    for (size_t i = 0; i < n; i++)
                        if (memcmp(&got[i * es], &want[i * es], es) &&
                            !(dt == GW_FLOAT32 || dt == GW_FLOAT64
                                  ? is_nan_bits(&got[i * es], dt) && is_nan_bits(&want[i * es], dt)
                                  : 0))
                            bad++;
                    if (bad)
                        FAIL("scale %s n=%zu shift=%d: %zu elements differ from gw__reduce_scale",
                             gw_dtype_name(dt), n, shift, bad);
                    checked++;
                } else if (gw__cuda_reduce_scale(dout.p, da.p, n, dt, 0.3, NULL) !=
                           GW_ERR_INVALID_ARG) {
                    FAIL("scale %s is not refused", gw_dtype_name(dt));
                }
            }
        }
    }
    printf("reduce: %d dtype x op x size x alignment cases against gw__reduce, "
           "gw__reduce_finish_avg and gw__reduce_scale (bitwise; float32/64 sum/prod of two "
           "NaNs: any NaN; bitwise ops on floats refused)\n",
           checked);
}

/* ---- casts -------------------------------------------------------------------------- */

static void check_casts(void)
{
    const size_t n = 65536;
    std::vector<uint16_t> h(n), h2(n);
    std::vector<float> f(n), want(n);
    for (size_t i = 0; i < n; i++)
        h[i] = (uint16_t)i;
    Dev dh(n * 2, 0), df(n * 4, 0);
    for (int bf = 0; bf < 2; bf++) {
        gw_dtype_t dt = bf ? GW_BFLOAT16 : GW_FLOAT16;
        dh.put(h.data(), n * 2);
        GW(gw__cuda_half_widen((float *)df.p, (uint16_t *)dh.p, n, dt, NULL));
        df.get(f.data(), n * 4);
        for (size_t i = 0; i < n; i++)
            want[i] = bf ? gw__bf16_to_float(h[i]) : gw__half_to_float(h[i]);
        if (memcmp(f.data(), want.data(), n * 4))
            FAIL("widen %s: the 65536 patterns differ from the CPU", gw_dtype_name(dt));
    }
    /* narrow: 4M random float patterns, all kinds (NaN payloads included). */
    const size_t m = 1u << 22;
    std::vector<float> x(m);
    std::vector<uint16_t> got(m), ref(m);
    fill_bits(x.data(), m, GW_FLOAT32, 77);
    for (size_t i = 0; i < m; i += 3) {
        uint32_t u = (uint32_t)mix64(i);
        memcpy(&x[i], &u, 4);
    }
    Dev dx(m * 4, 0), dq(m * 2, 0);
    dx.put(x.data(), m * 4);
    for (int bf = 0; bf < 2; bf++) {
        gw_dtype_t dt = bf ? GW_BFLOAT16 : GW_FLOAT16;
        GW(gw__cuda_half_narrow((uint16_t *)dq.p, (float *)dx.p, m, dt, NULL));
        dq.get(got.data(), m * 2);
        for (size_t i = 0; i < m; i++)
            ref[i] = bf ? gw__float_to_bf16(x[i]) : gw__float_to_half(x[i]);
        size_t bad = 0;
        for (size_t i = 0; i < m; i++)
            bad += got[i] != ref[i];
        if (bad)
            FAIL("narrow %s: %zu of %zu differ from the CPU", gw_dtype_name(dt), bad, m);
    }
    /* The codec passes, finite inputs (the codecs check). */
    for (size_t i = 0; i < m; i++)
        if (!isfinite(x[i]) || fabsf(x[i]) > 1e4f)
            x[i] = (float)((int64_t)(mix64(i) % 2000001) - 1000000) * 1e-3f;
    for (int bf = 0; bf < 2; bf++) {
        gw_dtype_t dt = bf ? GW_BFLOAT16 : GW_FLOAT16;
        std::vector<float> xc(x), xg(m), dec(m), decg(m);
        (bf ? gw__cz_encode_bf16_rest : gw__cz_encode_half_rest)(ref.data(), xc.data(), m, 0.125f,
                                                                 8.0f);
        dx.put(x.data(), m * 4);
        GW(gw__cuda_cast_encode_rest((uint16_t *)dq.p, (float *)dx.p, m, 0.125f, 8.0f, dt, NULL));
        dq.get(got.data(), m * 2);
        dx.get(xg.data(), m * 4);
        if (memcmp(got.data(), ref.data(), m * 2) || memcmp(xg.data(), xc.data(), m * 4))
            FAIL("cast encode_rest %s differs from gw__cz_encode_*_rest", gw_dtype_name(dt));
        (bf ? gw__cz_decode_bf16_avg : gw__cz_decode_half_avg)(dec.data(), ref.data(), m, 8.0f,
                                                               3.0f);
        GW(gw__cuda_cast_decode_avg((float *)dx.p, (uint16_t *)dq.p, m, 8.0f, 3.0f, dt, NULL));
        dx.get(decg.data(), m * 4);
        if (memcmp(dec.data(), decg.data(), m * 4))
            FAIL("cast decode_avg %s differs from gw__cz_decode_*_avg", gw_dtype_name(dt));
    }
    printf("casts: all 65536 halves/bfloat16s widened, %zu floats narrowed, the codec passes "
           "(bitwise)\n",
           m);
}

/* ---- int8 ------------------------------------------------------------------------ */

static void check_int8(void)
{
    const size_t counts[] = {5, 4096, 100003};
    for (size_t n : counts) {
        const size_t bucket = 4096, nb = (n - 1) / bucket + 1;
        const int levels = 127 / 4;
        const uint64_t rank_key = 0x1234567890abcdefull;
        std::vector<float> x(n), xc, xg(n), gmax(nb, 0.0f), out(n), outg(n);
        std::vector<int8_t> q(n), qg(n);
        for (size_t i = 0; i < n; i++)
            x[i] = (float)((int64_t)(mix64(i + 5) % 20001) - 10000) * 1e-3f;
        if (nb > 1)
            for (size_t i = bucket; i < 2 * bucket && i < n; i++)
                x[i] = 0.0f; /* a zero bucket */
        for (size_t i = 0; i < n; i++)
            gmax[i / bucket] = std::max(gmax[i / bucket], fabsf(x[i]) * 1.5f); /* other ranks */
        xc = x;
        for (size_t b = 0; b < nb; b++) {
            size_t lo = b * bucket, len = std::min(bucket, n - lo);
            if (gmax[b] == 0.0f) {
                memset(&q[lo], 0, len);
                continue;
            }
            gw__cz_int8_quantize(&xc[lo], &q[lo], (uint32_t)len, gmax[b], levels,
                                 (uint32_t)gw__cz_mix(rank_key, b));
        }
        Dev dx(n * 4, 0), dq(n, 0), dm(nb * 4, 0), dout(n * 4, 0);
        dx.put(x.data(), n * 4);
        dm.put(gmax.data(), nb * 4);
        GW(gw__cuda_int8_quantize((float *)dx.p, (int8_t *)dq.p, n, bucket, (float *)dm.p, levels,
                                  rank_key, NULL));
        dx.get(xg.data(), n * 4);
        dq.get(qg.data(), n);
        if (memcmp(q.data(), qg.data(), n) || memcmp(xc.data(), xg.data(), n * 4))
            FAIL("int8 quantize n=%zu differs from gw__cz_int8_quantize", n);
        const float denom = (float)(levels * 4);
        for (size_t i = 0; i < n; i++)
            out[i] = gmax[i / bucket] * ((float)q[i] / denom); /* codec_int8.c's dequantize */
        GW(gw__cuda_int8_dequantize((float *)dout.p, (int8_t *)dq.p, n, bucket, (float *)dm.p,
                                    denom, NULL));
        dout.get(outg.data(), n * 4);
        if (memcmp(out.data(), outg.data(), n * 4))
            FAIL("int8 dequantize n=%zu differs from codec_int8.c's", n);
    }
    printf("int8: quantize and dequantize, 3 sizes, several buckets, a zero bucket (bitwise)\n");
}

/* ---- sign ------------------------------------------------------------------------- */

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void check_sign(void)
{
    const size_t counts[] = {1, 63, 64, 1000, 100003};
    int scale_ulps = 0;
    for (size_t n : counts) {
        const size_t bucket = 512;
        const size_t bytes = gw__cuda_sign_bytes(n, bucket), nw = (n + 63) / 64;
        const size_t nb = (n - 1) / bucket + 1;
        std::vector<float> x(n), xc, xg(n);
        for (size_t i = 0; i < n; i++)
            x[i] = (float)((int64_t)(mix64(i + 9) % 2001) - 1000) * 1e-2f;
        if (n > 3)
            x[3] = -0.0f;
        xc = x;
        std::vector<uint8_t> msg(bytes), msgg(bytes);
        gw__cz_sign_encode(xc.data(), n, bucket, msg.data());
        Dev dx(n * 4, 0), dmsg(bytes, 0);
        dx.put(x.data(), n * 4);
        GW(gw__cuda_sign_encode((float *)dx.p, n, bucket, dmsg.p, NULL));
        dx.get(xg.data(), n * 4);
        dmsg.get(msgg.data(), bytes);
        if (memcmp(msg.data(), msgg.data(), 8 * nw))
            FAIL("sign bits n=%zu differ from gw__cz_sign_encode", n);
        const float *sc = (const float *)(msg.data() + 8 * nw);
        const float *sg = (const float *)(msgg.data() + 8 * nw);
        for (size_t b = 0; b < nb; b++) {
            int64_t d = (int64_t)f2u(sc[b]) - (int64_t)f2u(sg[b]);
            if (d > 1 || d < -1)
                FAIL("sign scale n=%zu bucket %zu: %a vs CPU %a (more than 1 ulp)", n, b, sg[b],
                     sc[b]);
            scale_ulps += d != 0;
            for (size_t i = b * bucket; i < std::min(n, (b + 1) * bucket) && d == 0; i++)
                if (f2u(xc[i]) != f2u(xg[i])) {
                    FAIL("sign residual n=%zu at %zu differs with equal scales", n, i);
                    break;
                }
        }
        /* decode of 3 ranks' messages (the CPU's, so that only decoding is compared) */
        std::vector<uint8_t> all(3 * bytes);
        for (int r = 0; r < 3; r++) {
            std::vector<float> xr(x);
            for (size_t i = 0; i < n; i++)
                xr[i] *= (float)(r + 1) * ((mix64(i * 3 + (size_t)r) & 1) ? -1.0f : 1.0f);
            gw__cz_sign_encode(xr.data(), n, bucket, &all[(size_t)r * bytes]);
        }
        std::vector<float> out(n), outg(n);
        gw__cz_sign_decode(all.data(), 3, n, bucket, out.data());
        Dev dall(3 * bytes, 0), dout(n * 4, 0);
        dall.put(all.data(), 3 * bytes);
        GW(gw__cuda_sign_decode(dall.p, 3, n, bucket, (float *)dout.p, NULL));
        dout.get(outg.data(), n * 4);
        if (memcmp(out.data(), outg.data(), n * 4))
            FAIL("sign decode n=%zu differs from gw__cz_sign_decode", n);
    }
    printf("sign: bits and decode bitwise; %d bucket scales 1 ulp off the CPU's (allowed: tree "
           "vs left-to-right double sums)\n",
           scale_ulps);
}

/* ---- top-k -------------------------------------------------------------------------- */

static void fill_normalish(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = mix64(seed + i);
        x[i] = (float)((int64_t)(r >> 11) - (1ll << 52)) * 0x1p-52f;
        if ((r & 0x3ff) == 0)
            x[i] = (float)(r % 5); /* some ties */
    }
}

/* GPU selection of k of n against gw__cz_topk_select: same indices, same
 * path. Returns the GPU's time in ms (one run after a warm-up, with
 * `time` set). */
static double check_topk_one(size_t n, size_t k, int time, double *cpu_ms)
{
    std::vector<float> x(n);
    fill_normalish(x.data(), n, n * 31 + k);
    std::vector<uint32_t> want(k), got(k);
    gw__cz_arena_t arena = {NULL, 0};
    int cpu_path = -1, gpu_path = -1;
    const uint32_t key = 0xfeedbeefu;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (gw__cz_topk_select(x.data(), n, k, key, &arena, want.data(), &cpu_path) != GW_OK)
        FAIL("CPU topk n=%zu k=%zu failed", n, k);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (cpu_ms)
        *cpu_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    free(arena.buf);
    Dev dx(n * 4, 0), di(k * 4, 0);
    dx.put(x.data(), n * 4);
    float ms = 0;
    for (int run = 0; run < (time ? 2 : 1); run++) {
        CK(cudaEventRecord(e0));
        GW(gw__cuda_topk_select((float *)dx.p, n, k, key, (uint32_t *)di.p, &gpu_path, NULL));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
    }
    di.get(got.data(), k * 4);
    if (gpu_path != cpu_path)
        FAIL("topk n=%zu k=%zu: GPU path %d, CPU path %d", n, k, gpu_path, cpu_path);
    if (memcmp(got.data(), want.data(), k * 4))
        FAIL("topk n=%zu k=%zu: indices differ from gw__cz_topk_select", n, k);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms;
}

static void check_topk(void)
{
    check_topk_one(1000, 10, 0, NULL);
    check_topk_one(100000, 20000, 0, NULL);
    check_topk_one(100003, 1000, 0, NULL);
    check_topk_one((1u << 20) + 1, 10486, 0, NULL);
    check_topk_one(1u << 22, 1, 0, NULL);
    printf("topk: 5 sizes (exact and sampled paths) against gw__cz_topk_select (same indices, "
           "same path)\n");
}

/* ---- PowerSGD ------------------------------------------------------------------------ */

static double max_rel(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num = std::max(num, fabs((double)a[i] - (double)b[i]));
        den = std::max(den, fabs((double)b[i]));
    }
    return den > 0 ? num / den : num;
}

static void check_powersgd(void)
{
    const size_t rows = 1000, cols = 777;
    const int r = 4;
    const size_t rr = (size_t)r;
    std::vector<float> m(rows * cols), q(cols * rr), p(rows * rr), pg(rows * rr), ql(cols * rr),
        qlg(cols * rr);
    for (size_t i = 0; i < m.size(); i++)
        m[i] = (float)((int64_t)(mix64(i) % 20001) - 10000) * 1e-4f;
    for (size_t i = 0; i < q.size(); i++)
        q[i] = (float)((int64_t)(mix64(i + 99) % 2001) - 1000) * 1e-3f;
    gw__cuda_blas_t *blas = NULL;
    GW(gw__cuda_blas_create(&blas));
    if (!blas)
        return;
    Dev dm(m.size() * 4, 0), dq(q.size() * 4, 0), dp(p.size() * 4, 0), dql(ql.size() * 4, 0);
    dm.put(m.data(), m.size() * 4);
    dq.put(q.data(), q.size() * 4);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, r, (int)cols, 1.0f, m.data(),
                (int)cols, q.data(), r, 0.0f, p.data(), r);
    GW(gw__cuda_psgd_project_p(blas, (float *)dm.p, (float *)dq.p, (float *)dp.p, rows, cols, r,
                               NULL));
    dp.get(pg.data(), p.size() * 4);
    double e_p = max_rel(pg.data(), p.data(), p.size());
    /* Gram-Schmidt of the CPU's P on both sides. */
    dp.put(p.data(), p.size() * 4);
    gw__cz_psgd_orthonormalise(p.data(), rows, r);
    GW(gw__cuda_psgd_orthonormalise((float *)dp.p, rows, r, NULL));
    dp.get(pg.data(), p.size() * 4);
    double e_gs = max_rel(pg.data(), p.data(), p.size());
    /* Q = M^T P^ from the CPU's P^. */
    dp.put(p.data(), p.size() * 4);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)cols, r, (int)rows, 1.0f, m.data(),
                (int)cols, p.data(), r, 0.0f, ql.data(), r);
    GW(gw__cuda_psgd_project_q(blas, (float *)dm.p, (float *)dp.p, (float *)dql.p, rows, cols, r,
                               NULL));
    dql.get(qlg.data(), ql.size() * 4);
    double e_q = max_rel(qlg.data(), ql.data(), ql.size());
    /* Transposes and the reconstruction from the CPU's Q: bitwise. */
    std::vector<float> qt(cols * rr), qlt(cols * rr), qtg(cols * rr), qltg(cols * rr);
    for (size_t i = 0; i < cols; i++)
        for (size_t k = 0; k < rr; k++) {
            qlt[k * cols + i] = ql[i * rr + k];
            qt[k * cols + i] = ql[i * rr + k] / 3.0f;
        }
    Dev dqt(qt.size() * 4, 0), dqlt(qt.size() * 4, 0), dout(m.size() * 4, 0);
    dql.put(ql.data(), ql.size() * 4);
    GW(gw__cuda_psgd_transpose((float *)dqt.p, (float *)dql.p, cols, r, 3.0f, NULL));
    GW(gw__cuda_psgd_transpose((float *)dqlt.p, (float *)dql.p, cols, r, 1.0f, NULL));
    dqt.get(qtg.data(), qt.size() * 4);
    dqlt.get(qltg.data(), qt.size() * 4);
    if (memcmp(qt.data(), qtg.data(), qt.size() * 4) ||
        memcmp(qlt.data(), qltg.data(), qt.size() * 4))
        FAIL("PowerSGD transpose differs from codec_powersgd.c's");
    std::vector<float> out(m.size()), outg(m.size()), mc(m), mg(m.size());
    gw__cz_psgd_reconstruct(out.data(), mc.data(), p.data(), qt.data(), qlt.data(), rows, cols, r);
    GW(gw__cuda_psgd_reconstruct((float *)dout.p, (float *)dm.p, (float *)dp.p, (float *)dqt.p,
                                 (float *)dqlt.p, rows, cols, r, NULL));
    dout.get(outg.data(), m.size() * 4);
    dm.get(mg.data(), m.size() * 4);
    if (memcmp(out.data(), outg.data(), m.size() * 4) || memcmp(mc.data(), mg.data(), m.size() * 4))
        FAIL("PowerSGD reconstruct differs from gw__cz_psgd_reconstruct");
    /* Stated tolerances: 1e-5 of the largest element (float sums in another
     * order over 1000 terms), 1e-5 for Gram-Schmidt. */
    if (e_p > 1e-5 || e_q > 1e-5)
        FAIL("PowerSGD sgemm: relative error P %.2e Q %.2e beyond 1e-5", e_p, e_q);
    if (e_gs > 1e-5)
        FAIL("PowerSGD orthonormalise: relative error %.2e beyond 1e-5", e_gs);
    printf("powersgd %zux%zu rank %d: sgemm vs OpenBLAS P %.1e Q %.1e, Gram-Schmidt %.1e "
           "(allowed 1e-5), transpose and reconstruct bitwise\n",
           rows, cols, r, e_p, e_q, e_gs);
    gw__cuda_blas_destroy(blas);
}

/* ---- throughput ------------------------------------------------------------------------ */

/* Median time in ms of `reps` runs of fn (after one warm-up). */
template <typename F> static double median_ms(F fn, int reps = 21)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> t;
    fn();
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(e0));
        fn();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

/* The table: memory traffic (bytes read + written) per second, against the
 * device-to-device copy's (which reads and writes the buffer once). */
static void bench(void)
{
    const size_t bytes = (size_t)64 << 20;
    Dev a(bytes, 0), b(bytes, 0), o(bytes, 0), q(bytes, 0);
    std::vector<float> h(bytes / 4);
    fill_normalish(h.data(), h.size(), 5);
    a.put(h.data(), bytes);
    b.put(h.data(), bytes);
    double copy_ms =
        median_ms([&] { CK(cudaMemcpyAsync(o.p, a.p, bytes, cudaMemcpyDeviceToDevice)); });
    double copy_gbs = 2.0 * (double)bytes / (copy_ms * 1e6);
    printf("\n| kernel (64 MiB) | time (us) | traffic GB/s | vs D2D copy | target |\n");
    printf("|---|---:|---:|---:|---|\n");
    printf("| cudaMemcpy D2D | %.1f | %.1f | 1.00 | |\n", copy_ms * 1e3, copy_gbs);
    const gw_dtype_t dts[] = {GW_FLOAT32, GW_FLOAT16, GW_BFLOAT16, GW_FLOAT64, GW_INT8, GW_INT32};
    const gw_op_t ops[] = {GW_SUM, GW_MAX};
    for (gw_dtype_t dt : dts)
        for (gw_op_t op : ops) {
            size_t n = bytes / gw_dtype_size(dt);
            double ms = median_ms([&] { GW(gw__cuda_reduce(o.p, a.p, b.p, n, dt, op, NULL)); });
            double gbs = 3.0 * (double)bytes / (ms * 1e6), ratio = gbs / copy_gbs;
            printf("| reduce %s %s | %.1f | %.1f | %.2f | >= 0.80 %s |\n", gw_dtype_name(dt),
                   gw_op_name(op), ms * 1e3, gbs, ratio, ratio >= 0.8 ? "met" : "MISSED");
        }
    size_t nf = bytes / 4;
    double ms = median_ms(
        [&] { GW(gw__cuda_half_narrow((uint16_t *)q.p, (float *)a.p, nf, GW_FLOAT16, NULL)); });
    printf("| cast fp32->fp16 | %.1f | %.1f | %.2f | |\n", ms * 1e3,
           1.5 * (double)bytes / (ms * 1e6), 1.5 * (double)bytes / (ms * 1e6) / copy_gbs);
    std::vector<float> gmax(nf / 65536 + 1, 4.0f);
    Dev dg(gmax.size() * 4, 0);
    dg.put(gmax.data(), gmax.size() * 4);
    ms = median_ms([&] {
        GW(gw__cuda_int8_quantize((float *)b.p, (int8_t *)q.p, nf, 65536, (float *)dg.p, 31, 7,
                                  NULL));
    });
    printf("| int8 quantize | %.1f | %.1f | %.2f | |\n", ms * 1e3,
           2.25 * (double)bytes / (ms * 1e6), 2.25 * (double)bytes / (ms * 1e6) / copy_gbs);
    ms = median_ms([&] { GW(gw__cuda_sign_encode((float *)b.p, nf, 65536, q.p, NULL)); });
    printf("| sign encode | %.1f | %.1f | %.2f | |\n", ms * 1e3, 3.03 * (double)bytes / (ms * 1e6),
           3.03 * (double)bytes / (ms * 1e6) / copy_gbs);
    double cpu_ms = 0;
    double topk_ms = check_topk_one((size_t)64 << 20, ((size_t)64 << 20) / 100, 1, &cpu_ms);
    printf(
        "\ntopk 1%% of 64M floats: GPU %.2f ms (same indices as the CPU's, which took %.0f ms)\n",
        topk_ms, cpu_ms);
}

/* ---- without a device ------------------------------------------------------------ */

/* What the launchers decide on the host before any CUDA call: the error
 * mapping, and the argument checks that launch nothing. */
static void check_host_side(void)
{
    static const struct {
        int err;
        gw_status_t want;
    } map[] = {{cudaSuccess, GW_OK},
               {cudaErrorMemoryAllocation, GW_ERR_NO_MEMORY},
               {cudaErrorInvalidValue, GW_ERR_INVALID_ARG},
               {cudaErrorNoDevice, GW_ERR_UNSUPPORTED},
               {cudaErrorInsufficientDriver, GW_ERR_UNSUPPORTED},
               {cudaErrorNoKernelImageForDevice, GW_ERR_UNSUPPORTED},
               {cudaErrorLaunchTimeout, GW_ERR_TIMEOUT},
               {cudaErrorIllegalAddress, GW_ERR_SYSTEM}};
    for (const auto &m : map)
        if (gw__cuda_status_of(m.err) != m.want)
            FAIL("cudaError %d maps to %s, not %s", m.err, gw_status_str(gw__cuda_status_of(m.err)),
                 gw_status_str(m.want));
    float dummy = 0;
    if (gw__cuda_reduce(&dummy, &dummy, &dummy, 1, GW_DTYPE_COUNT, GW_SUM, NULL) !=
            GW_ERR_INVALID_ARG ||
        gw__cuda_reduce(&dummy, &dummy, &dummy, 1, GW_FLOAT32, GW_OP_COUNT, NULL) !=
            GW_ERR_INVALID_ARG ||
        gw__cuda_reduce(NULL, NULL, NULL, 0, GW_FLOAT32, GW_SUM, NULL) != GW_OK ||
        gw__cuda_half_widen(&dummy, NULL, 0, GW_FLOAT32, NULL) != GW_ERR_INVALID_ARG ||
        gw__cuda_int8_quantize(&dummy, NULL, 0, 0, NULL, 31, 0, NULL) != GW_ERR_INVALID_ARG ||
        gw__cuda_topk_select(&dummy, 1, 2, 0, NULL, NULL, NULL) != GW_ERR_INVALID_ARG ||
        gw__cuda_sign_bytes(100, 64) != 8 * 2 + 8)
        FAIL("a launcher's argument checks");
    printf("host side: error mapping and argument checks: %s\n", failures ? "FAILED" : "passed");
}

int main(int argc, char **argv)
{
    check_host_side();
    if (failures)
        return 1;
    int ndev = 0;
    cudaError_t err = cudaGetDeviceCount(&ndev);
    if (err != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA GPU (cudaGetDeviceCount: %s)\n",
               err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device 0: %s, sm_%d%d, %d SMs, %.0f GiB\n", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount, (double)prop.totalGlobalMem / (1 << 30));
    check_reduce();
    check_casts();
    check_int8();
    check_sign();
    check_topk();
    check_powersgd();
    if (argc > 1 && !strcmp(argv[1], "--bench"))
        bench();
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
