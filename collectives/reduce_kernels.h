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
 * GW_AVG reduces as GW_SUM; gw__reduce_finish_avg divides at the end.
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

/* Conversions, exposed for tests and codecs. Round to nearest, ties to even;
 * NaN stays NaN (quiet), overflow goes to infinity. */
float gw__half_to_float(uint16_t h);
uint16_t gw__float_to_half(float f);
float gw__bf16_to_float(uint16_t h);
uint16_t gw__float_to_bf16(float f);

#endif
