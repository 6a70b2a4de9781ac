/*
 * reduce_half.h - the float16 and bfloat16 kernels on a chosen instruction
 * set.
 *
 * gw__reduce already runs the fastest kernels the CPU supports; this header
 * is for the code that must choose: the tests, which run every instruction
 * set against the portable kernels (they must agree bit for bit, NaN
 * payloads included), and the kernel benchmark, which times them side by
 * side. Every instruction set gives exactly the results documented in
 * reduce_kernels.h: round to nearest even, NaN quieted with its payload.
 */
#ifndef GW_COLLECTIVES_REDUCE_HALF_H
#define GW_COLLECTIVES_REDUCE_HALF_H

#include <stddef.h>
#include <stdint.h>

#include "gradwire.h"

typedef enum gw_half_isa {
    GW_HALF_ISA_PORTABLE = 0, /* plain C (SSE2 on x86-64): every CPU */
    GW_HALF_ISA_AVX2,         /* x86-64 AVX2 with F16C (no FMA) */
    GW_HALF_ISA_COUNT
} gw_half_isa_t;

/* The fastest instruction set of this CPU, the one gw__reduce uses. It reads
 * the CPU model that libgcc detects once, in a constructor, before main:
 * thread-safe, and cheap enough to ask on every call. */
gw_half_isa_t gw__half_isa_best(void);

/* Whether isa runs on this CPU (and was built for this architecture). */
int gw__half_isa_supported(gw_half_isa_t isa);

/* "portable", "avx2"; "unknown" for a bad value. */
const char *gw__half_isa_name(gw_half_isa_t isa);

/*
 * gw__reduce for GW_FLOAT16 or GW_BFLOAT16 on isa, with the same aliasing
 * rules. GW_ERR_UNSUPPORTED when this CPU lacks isa, GW_ERR_INVALID_ARG for
 * another dtype or an unknown op; out is left untouched then.
 */
gw_status_t gw__reduce_half_isa(void *out, const void *a, const void *b, size_t count,
                                gw_dtype_t dtype, gw_op_t op, gw_half_isa_t isa);

/*
 * Bulk conversions between GW_FLOAT16 or GW_BFLOAT16 and float, element for
 * element equal to gw__half_to_float, gw__float_to_half and their bfloat16
 * twins. in and out must not overlap. Errors as for gw__reduce_half_isa.
 */
gw_status_t gw__half_widen_isa(float *out, const uint16_t *in, size_t count, gw_dtype_t dtype,
                               gw_half_isa_t isa);
gw_status_t gw__half_narrow_isa(uint16_t *out, const float *in, size_t count, gw_dtype_t dtype,
                                gw_half_isa_t isa);

/*
 * The AVX2 kernels (reduce_half_avx2.c), built on x86-64 only, with GCC's
 * per-function target attributes so that the rest of the library keeps the
 * baseline instruction set. Call them only where gw__half_isa_supported
 * (GW_HALF_ISA_AVX2) is true; dtype and op are valid (op < GW_AVG: GW_AVG
 * reduces as GW_SUM, which the caller maps). GCC only: clang's
 * __builtin_cpu_supports does not know "f16c" (and the portable kernels'
 * ivdep pragmas are GCC's too).
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GW__HALF_HAVE_AVX2 1
void gw__reduce_half_avx2(void *out, const void *a, const void *b, size_t count, gw_dtype_t dtype,
                          gw_op_t op);
void gw__half_widen_avx2(float *out, const uint16_t *in, size_t count, gw_dtype_t dtype);
void gw__half_narrow_avx2(uint16_t *out, const float *in, size_t count, gw_dtype_t dtype);
#else
#define GW__HALF_HAVE_AVX2 0
#endif

#endif
