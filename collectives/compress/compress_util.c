/*
 * compress_util.c - helpers every codec shares: work buffers kept in the
 * state, the key mixer for random streams, and the clocks of the
 * statistics. (The float <-> 16-bit passes of the casting codecs are in
 * cast_kernels.c.)
 */
#include <stdlib.h>

#include "collectives/compress/codec.h"
#include "common/clock.h"

gw_status_t gw__cz_work(gw__cz_call_t *call, int slot, size_t len, void **out)
{
    gw_compress_state_t *st = call->st;
    if (len <= st->work_len[slot] && st->work[slot]) {
        *out = st->work[slot];
        return GW_OK;
    }
    void *p = NULL;
    size_t alloc = len ? len : 1;
    if (posix_memalign(&p, 64, alloc) != 0) {
        GW_ERROR(&call->comm->log, "compress", "cannot allocate %zu bytes of codec work memory",
                 len);
        return GW_ERR_NO_MEMORY;
    }
    free(st->work[slot]);
    st->work[slot] = p;
    st->work_len[slot] = alloc;
    *out = p;
    return GW_OK;
}

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t gw__cz_mix(uint64_t a, uint64_t b) { return splitmix(splitmix(a) ^ b); }

int64_t gw__cz_now(void) { return gw__now_ns(); }

int64_t gw__cz_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
