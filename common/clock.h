/* clock.h - monotonic time helpers used for timeouts and benchmarks. */
#ifndef GW_COMMON_CLOCK_H
#define GW_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t gw__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int64_t gw__now_ms(void) { return gw__now_ns() / 1000000LL; }

/* Milliseconds on the coarse monotonic clock: it advances once a kernel
 * tick (1 to 10 ms; clock_getres says) and costs a few nanoseconds where
 * the precise one costs 25 or more on a virtual machine. For timeouts of
 * many milliseconds checked on a hot path (a collective's wait, once per
 * call); compare its readings only with each other, never with
 * gw__now_ms()'s, which may be up to a tick ahead. */
static inline int64_t gw__now_coarse_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000LL;
}

#endif
