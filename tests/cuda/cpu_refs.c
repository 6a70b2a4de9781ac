/*
 * cpu_refs.c - checks, by compiling, that cpu_refs.h declares the library's
 * CPU kernels exactly as the library does (conflicting declarations are an
 * error in C). Nothing to run.
 */
#include "tests/cuda/cpu_refs.h"
#include "collectives/compress/cast_ring.h"
#include "collectives/compress/codec.h"
