/*
 * test_compress_harness.h - one thread per rank over the in-memory transport
 * (mem_transport.c), with communicators built by hand as in
 * test_algorithms.c, for the gradient-compression tests. Header-only: each
 * test_compress*.c includes it once.
 *
 * Worker threads never assert (that would skip the other ranks' cleanup and
 * leave them waiting); they note failures, which job_run reports at the end.
 */
#ifndef GW_TESTS_COMPRESS_HARNESS_H
#define GW_TESTS_COMPRESS_HARNESS_H

#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rank_threads.h"
#include "collectives/coll.h"
#include "collectives/compress/codec.h"

/* Run body on n threads (n = 1: a communicator of one rank, no transport),
 * with the cost model's defaults, as gw_comm_init sets them. */
static inline void job_run(int n, body_fn body, const void *arg)
{
    threads_opts_t o = {.timeout_ms = 20000, .rendezvous = 1, .tuning = 1};
    threads_run(n, &o, body, arg);
}

/* ---- inputs ---- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A gradient-like value: roughly normal (sum of four uniforms), with a
 * per-element scale spread over a few decades, distinct per (seed, rank, i). */
static inline float grad(uint64_t seed, int rank, size_t i)
{
    uint64_t h = mix64(seed * 0x100000001b3ull ^ (uint64_t)rank << 40 ^ (uint64_t)i);
    double s = 0;
    for (int k = 0; k < 4; k++)
        s += (double)((h >> (16 * k)) & 0xffff) / 65536.0 - 0.5;
    double decade = pow(10.0, -(double)(mix64(h) % 3));
    return (float)(s * decade);
}

static inline gw_compress_config_t config(gw_codec_t codec)
{
    gw_compress_config_t cfg;
    gw_compress_config_init(&cfg);
    cfg.codec = codec;
    cfg.min_elements = 0;
    cfg.bucket_elements = 256;
    cfg.topk_ratio = 0.05;
    cfg.powersgd_rank = 2;
    return cfg;
}

/* A rows x cols shape for count elements: PowerSGD wants a matrix. */
static inline void shape_of(size_t count, size_t *rows, size_t *cols)
{
    size_t c = 1;
    for (size_t d = 2; d * d <= count; d++)
        if (count % d == 0)
            c = d;
    *rows = count / c;
    *cols = c;
}

static const gw_codec_t all_codecs[] = {GW_CODEC_NONE,    GW_CODEC_FP16, GW_CODEC_BF16,
                                        GW_CODEC_INT8,    GW_CODEC_SIGN, GW_CODEC_TOPK,
                                        GW_CODEC_POWERSGD};
#define NCODECS (sizeof(all_codecs) / sizeof(all_codecs[0]))

#endif
