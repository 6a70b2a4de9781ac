/*
 * reduce_kernels.h - the dtype x op inner loops of every reduction.
 *
 * out[i] = a[i] OP b[i], with the operand order fixed (a first): algorithms
 * rely on a fixed order to give bitwise identical results on every rank even
 * for NaN payloads. out may alias a or b (exactly, not partially).
 * float16 and bfloat16 are computed in float and rounded to nearest-even;
 * for every op a NaN in a gives a's NaN (quieted), so their results are the
 * same bits on every instruction set the kernels run on (reduce_half.h).
 * Integer sum and prod wrap (two's complement, computed unsigned: no UB).
 * min and max propagate NaN (IEEE 754-2019 minimum/maximum), -0 < +0.
 * The 8-bit floats (E4M3, E5M2) are computed in float and rounded back
 * once, non-saturating (fp8_convert.h says why). Bitwise and/or/xor exist
 * for integer dtypes only.
 * GW_AVG reduces as GW_SUM; gw__reduce_finish_avg divides at the end.
 * GW_PREMUL_SUM reduces as GW_SUM; gw__reduce_scale applies the factor to
 * each rank's input first.
 */
#ifndef GW_COLLECTIVES_REDUCE_KERNELS_H
#define GW_COLLECTIVES_REDUCE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "gradwire.h"

void gw__reduce(void *out, const void *a, const void *b, size_t count, gw_dtype_t dtype,
                gw_op_t op);

/* buf[i] /= nranks (integer types: truncation toward zero). */
void gw__reduce_finish_avg(void *buf, size_t count, gw_dtype_t dtype, int nranks);

/* Whether gw__reduce has a kernel for (dtype, op) (GW_AVG and
 * GW_PREMUL_SUM count as GW_SUM): every op for the integer dtypes, every
 * op but the bitwise ones for the float dtypes. */
int gw__reduce_supported(gw_dtype_t dtype, gw_op_t op);
/* float32, float64, float16, bfloat16 and the two 8-bit floats. */
int gw__dtype_is_float(gw_dtype_t dtype);

/* out[i] = in[i] * factor for a float dtype (factor rounded to float, or
 * kept double for float64; one multiplication rounded once); premul_sum's
 * first step. out may alias in exactly. Integer dtypes: nothing is done. */
void gw__reduce_scale(void *out, const void *in, size_t count, gw_dtype_t dtype, double factor);

/* Conversions, exposed for tests and codecs. Round to nearest, ties to even;
 * NaN stays NaN (quiet), overflow goes to infinity. */
float gw__half_to_float(uint16_t h);
uint16_t gw__float_to_half(float f);
float gw__bf16_to_float(uint16_t h);
uint16_t gw__float_to_bf16(float f);
/* OCP FP8 (fp8_convert.h): to nearest even, non-saturating (E4M3 overflow
 * is NaN, E5M2's infinity), NaN canonical (0x7f with the sign). */
float gw__e4m3_to_float(uint8_t c);
uint8_t gw__float_to_e4m3(float f);
float gw__e5m2_to_float(uint8_t c);
uint8_t gw__float_to_e5m2(float f);

#endif
