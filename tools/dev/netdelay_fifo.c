/*
 * netdelay_fifo.c - the delay line of gradwire-netdelay: frames in arrival
 * order, each behind a 16-byte header with its due time and length, in one
 * ring of bytes.
 *
 * Frames are read straight into the ring (no copy): the reader asks for a
 * slot, a contiguous stretch that takes the largest frame, and then says
 * how long the frame it read there was. When the stretch before the ring's
 * end is too short, the tail wraps to the start and wrap_at remembers where
 * the older records end, so the head jumps there too; only one such wrap
 * can be pending, since the tail cannot pass the head. The queue is bounded
 * by the bytes its records take (limit), like a link's queue in bytes; the
 * ring has room for two more of the largest records than the limit, so it
 * is the limit, not the wasted end of a wrap, that decides when frames are
 * dropped. The ring is mapped without reserving memory: a queue that never
 * fills touches only what it uses.
 */
#include "tools/dev/netdelay_fifo.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

typedef struct rec_hdr {
    int64_t due_ns;
    uint32_t len;
    uint32_t unused;
} rec_hdr_t;

_Static_assert(sizeof(rec_hdr_t) == GW_ND_REC_ALIGN, "record header is one alignment unit");

static size_t rec_size(size_t len)
{
    return GW_ND_REC_ALIGN + ((len + GW_ND_REC_ALIGN - 1) & ~(size_t)(GW_ND_REC_ALIGN - 1));
}

int gw_nd_fifo_init(gw_nd_fifo_t *f, size_t frame_max, size_t limit)
{
    memset(f, 0, sizeof(*f));
    if (frame_max == 0 || frame_max > UINT32_MAX || limit < rec_size(frame_max) ||
        limit > ((size_t)1 << 40)) {
        errno = EINVAL;
        return -1;
    }
    f->frame_max = frame_max;
    f->limit = limit;
    f->cap = rec_size(limit) + 2 * rec_size(frame_max);
    void *p = mmap(NULL, f->cap, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    f->ring = p;
    f->wrap_at = f->cap;
    return 0;
}

void gw_nd_fifo_free(gw_nd_fifo_t *f)
{
    if (f->ring)
        munmap(f->ring, f->cap);
    memset(f, 0, sizeof(*f));
}

uint8_t *gw_nd_fifo_slot(gw_nd_fifo_t *f)
{
    size_t need = rec_size(f->frame_max);
    if (f->bytes + rec_size(1) > f->limit)
        return NULL;
    if (f->frames == 0) {
        f->head = f->tail = 0;
        f->wrap_at = f->cap;
    }
    if (f->wrap_at == f->cap) {
        /* Records in [head, tail): free are [tail, cap) and [0, head). */
        if (f->cap - f->tail >= need)
            return f->ring + f->tail + GW_ND_REC_ALIGN;
        if (f->head < need)
            return NULL;
        f->wrap_at = f->tail;
        f->tail = 0;
    }
    /* Records in [head, wrap_at) and [0, tail): free is [tail, head). */
    if (f->head - f->tail < need)
        return NULL;
    return f->ring + f->tail + GW_ND_REC_ALIGN;
}

int gw_nd_fifo_push(gw_nd_fifo_t *f, size_t len, int64_t due_ns)
{
    size_t rec = rec_size(len);
    if (len > f->frame_max || f->bytes + rec > f->limit)
        return -1;
    rec_hdr_t h = {.due_ns = due_ns, .len = (uint32_t)len, .unused = 0};
    memcpy(f->ring + f->tail, &h, sizeof(h));
    f->tail += rec;
    f->bytes += rec;
    f->frames++;
    return 0;
}

const uint8_t *gw_nd_fifo_front(const gw_nd_fifo_t *f, size_t *len, int64_t *due_ns)
{
    if (f->frames == 0)
        return NULL;
    rec_hdr_t h;
    memcpy(&h, f->ring + f->head, sizeof(h));
    *len = h.len;
    *due_ns = h.due_ns;
    return f->ring + f->head + GW_ND_REC_ALIGN;
}

void gw_nd_fifo_pop(gw_nd_fifo_t *f)
{
    rec_hdr_t h;
    memcpy(&h, f->ring + f->head, sizeof(h));
    size_t rec = rec_size(h.len);
    f->head += rec;
    f->bytes -= rec;
    f->frames--;
    if (f->head == f->wrap_at) {
        f->head = 0;
        f->wrap_at = f->cap;
    }
}
