/*
 * cpu_refs.h - the library's CPU kernels that gpu_kernel_check.cu compares
 * the GPU's with, declared for C++: their own headers (codec.h,
 * cast_ring.h) pull in the C-only core. cpu_refs.c includes this header
 * next to those, so that the C compiler rejects any declaration here that
 * drifts from the library's.
 */
#ifndef GW_TESTS_CUDA_CPU_REFS_H
#define GW_TESTS_CUDA_CPU_REFS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void gw__cz_encode_half_rest(uint16_t *h, float *x, size_t n, float scale, float unscale);
void gw__cz_decode_half_avg(float *dst, const uint16_t *src, size_t n, float unscale, float d);
void gw__cz_encode_bf16_rest(uint16_t *h, float *x, size_t n, float scale, float unscale);
void gw__cz_decode_bf16_avg(float *dst, const uint16_t *src, size_t n, float unscale, float d);
uint64_t gw__cz_mix(uint64_t a, uint64_t b);
void gw__cz_int8_quantize(float *x, int8_t *q, uint32_t len, float m, int levels, uint32_t key);
void gw__cz_sign_encode(float *x, size_t count, size_t bucket, uint8_t *msg);
void gw__cz_sign_decode(const uint8_t *all, int n, size_t count, size_t bucket, float *out);
void gw__cz_psgd_orthonormalise(float *p, size_t rows, int r);
void gw__cz_psgd_reconstruct(float *out, float *m, const float *p, const float *qa, const float *ql,
                             size_t rows, size_t cols, int r);

#ifdef __cplusplus
}
#endif

#endif
