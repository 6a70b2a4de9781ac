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

#endif
