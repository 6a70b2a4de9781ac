/*
 * cuda_kernels.h - the GPU kernels of gradwire, callable from C.
 *
 * Every function launches work on `stream` (a cudaStream_t passed as an
 * opaque pointer; NULL: the legacy default stream) and returns as soon as it
 * is queued, unless it says otherwise; pointers are device pointers unless
 * it says otherwise. Errors: GW_ERR_INVALID_ARG for a bad dtype, op or
 * size (nothing is launched), and CUDA's errors as gw__cuda_status maps
 * them (cuda_status.cu): GW_ERR_NO_MEMORY, GW_ERR_UNSUPPORTED (no usable
 * device, no kernel image for it), GW_ERR_SYSTEM. Nothing is logged: the
 * caller knows what was running. No function keeps state between calls;
 * all are thread-safe (for distinct output buffers).
 *
 * Results are bitwise those of the CPU kernels named, except where a
 * function says it differs (a different order of float sums) and by how
 * much. The one GPU check program, tests/cuda/gpu_kernel_check.cu, checks
 * every one of these claims on a GPU.
 */
#ifndef GW_COLLECTIVES_CUDA_KERNELS_H
#define GW_COLLECTIVES_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "gradwire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A cudaError_t (as int) as the launchers report it. */
gw_status_t gw__cuda_status_of(int cuda_error);

/* ---- reduction (reduce.cu): gw__reduce and gw__reduce_finish_avg --------- */

/* out[i] = a[i] OP b[i], every dtype x op, with gw__reduce's rules
 * (reduce_kernels.h): a's NaN first, wrapping integers, IEEE min/max, halves
 * and 8-bit floats rounded once; bitwise ops on a float dtype are
 * GW_ERR_INVALID_ARG. Bitwise equal to gw__reduce, except float32/float64 sum and
 * product where both operands are NaN: the GPU gives a's, the CPU whichever
 * its compiler put first (both quiet NaNs). out may alias a or b exactly. */
gw_status_t gw__cuda_reduce(void *out, const void *a, const void *b, size_t count, gw_dtype_t dtype,
                            gw_op_t op, void *stream);

/* buf[i] /= nranks, as gw__reduce_finish_avg (bitwise). */
gw_status_t gw__cuda_reduce_finish_avg(void *buf, size_t count, gw_dtype_t dtype, int nranks,
                                       void *stream);

/* out[i] = in[i] * factor for a float dtype, as gw__reduce_scale
 * (premul_sum's first step; bitwise, NaN as x86 gives it). out may alias
 * in exactly. GW_ERR_INVALID_ARG for an integer dtype. */
gw_status_t gw__cuda_reduce_scale(void *out, const void *in, size_t count, gw_dtype_t dtype,
                                  double factor, void *stream);

/* ---- casts (cast.cu): half_convert.h and cast_ring.h --------------------- */

/* float <-> GW_FLOAT16 / GW_BFLOAT16, bitwise gw__half_to_float,
 * gw__float_to_half and their bfloat16 twins (NaN payloads kept). */
gw_status_t gw__cuda_half_widen(float *out, const uint16_t *in, size_t count, gw_dtype_t dtype,
                                void *stream);
gw_status_t gw__cuda_half_narrow(uint16_t *out, const float *in, size_t count, gw_dtype_t dtype,
                                 void *stream);
/* The casting codecs' passes, bitwise gw__cz_encode_{half,bf16}_rest and
 * gw__cz_decode_{half,bf16}_avg (cast_ring.h). */
gw_status_t gw__cuda_cast_encode_rest(uint16_t *h, float *x, size_t count, float scale,
                                      float unscale, gw_dtype_t dtype, void *stream);
gw_status_t gw__cuda_cast_decode_avg(float *dst, const uint16_t *src, size_t count, float unscale,
                                     float d, gw_dtype_t dtype, void *stream);

/* ---- int8 with a shared scale (int8.cu): codec_int8.c --------------------- */

/* Every bucket b (bucket elements each, the last one shorter) of x
 * quantized as int8_run does: gmax[b] (device, one float per bucket) is
 * the shared max |x|, levels = 127 / nranks, the random stream of bucket b
 * is (uint32_t)gw__cz_mix(rank_key, b); a bucket with gmax 0 gets q = 0
 * and keeps x. x is left holding the residual. Bitwise equal to
 * gw__cz_int8_quantize per bucket. */
gw_status_t gw__cuda_int8_quantize(float *x, int8_t *q, size_t count, size_t bucket,
                                   const float *gmax, int levels, uint64_t rank_key, void *stream);
/* out = gmax[b] * ((float)s / denom), bitwise codec_int8.c's decoding. */
gw_status_t gw__cuda_int8_dequantize(float *out, const int8_t *s, size_t count, size_t bucket,
                                     const float *gmax, float denom, void *stream);

/* ---- 1-bit sign (sign.cu): codec_sign.c ---------------------------------- */

/* Bytes of one rank's message (codec_sign.c's layout: ceil(count / 64)
 * 64-bit words of sign bits, bit i % 64 of word i / 64, then the bucket
 * scales as float32, padded to 8 bytes). A host function. */
size_t gw__cuda_sign_bytes(size_t count, size_t bucket);
/* Encode x into msg (gw__cuda_sign_bytes) and leave the residual in x.
 * The scale of a bucket is its mean |x| summed in double in a fixed tree
 * order, not the CPU's left-to-right order: the double sums differ in
 * their last bits at most, and the float scale (so the residual) can then
 * differ from the CPU's by one ulp; the sign bits are always the CPU's. */
gw_status_t gw__cuda_sign_encode(float *x, size_t count, size_t bucket, uint8_t *msg, void *stream);
/* Decode n gathered messages (n * gw__cuda_sign_bytes bytes) into their
 * average, bitwise codec_sign.c's decode (same double sums in rank order). */
gw_status_t gw__cuda_sign_decode(const uint8_t *all, int n, size_t count, size_t bucket, float *out,
                                 void *stream);

/* ---- top-k by a sampled threshold (topk.cu): topk_select.c --------------- */

/* idx[0..k) (device) = gw__cz_topk_select's answer for x (device, finite,
 * n < 2^32, 1 <= k <= n) and key: the same indices in the same order, by
 * the same sampling rule (cuda_plan.c). *path (host, may be NULL) as
 * there. Synchronous: it waits on stream for the candidate counts. */
gw_status_t gw__cuda_topk_select(const float *x, size_t n, size_t k, uint32_t key, uint32_t *idx,
                                 int *path, void *stream);

/* ---- PowerSGD (powersgd.cu): codec_powersgd.c ----------------------------- */

/* A cuBLAS handle (created on the current device; one per thread). */
typedef struct gw__cuda_blas gw__cuda_blas_t;
gw_status_t gw__cuda_blas_create(gw__cuda_blas_t **out);
void gw__cuda_blas_destroy(gw__cuda_blas_t *blas);

/* p (rows x r) = m (rows x cols) q (cols x r), and ql (cols x r) =
 * m^T p: cublasSgemm, row-major as codec_powersgd.c. Within cuBLAS's and
 * OpenBLAS's float rounding of each other, not bitwise (as the CPU codec,
 * which keeps BLAS to rank-local products for that reason). */
gw_status_t gw__cuda_psgd_project_p(gw__cuda_blas_t *blas, const float *m, const float *q, float *p,
                                    size_t rows, size_t cols, int r, void *stream);
gw_status_t gw__cuda_psgd_project_q(gw__cuda_blas_t *blas, const float *m, const float *p,
                                    float *ql, size_t rows, size_t cols, int r, void *stream);
/* Gram-Schmidt of p's r columns as codec_powersgd.c's orthonormalise (each
 * projection twice, double sums, the same dependence rule): the dot
 * products are summed in a fixed tree order, not left to right, so the
 * result is within a few float ulps of the CPU's (deterministic on one
 * GPU model). One block: P is small (rows x r). */
gw_status_t gw__cuda_psgd_orthonormalise(float *p, size_t rows, int r, void *stream);
/* t[k * cols + i] = q[i * r + k] / divisor: Q (cols x r) transposed and
 * divided, as psgd_run does for the average (divisor n) and the local copy
 * (divisor 1, exact). Bitwise. */
gw_status_t gw__cuda_psgd_transpose(float *t, const float *q, size_t cols, int r, float divisor,
                                    void *stream);
/* out = p qa^T and, m not NULL, m -= p ql^T (qa, ql r x cols): bitwise
 * codec_powersgd.c's reconstruct (the same float sums in the same order). */
gw_status_t gw__cuda_psgd_reconstruct(float *out, float *m, const float *p, const float *qa,
                                      const float *ql, size_t rows, size_t cols, int r,
                                      void *stream);

#ifdef __cplusplus
}
#endif

#endif
