/*
 * netdelay_fifo.h - the delay line of gradwire-netdelay (netdelay.c): a
 * first-in first-out queue of frames, each with the time it is due, in one
 * ring of bytes bounded by a byte limit, as a link's queue is.
 */
#ifndef GW_TOOLS_DEV_NETDELAY_FIFO_H
#define GW_TOOLS_DEV_NETDELAY_FIFO_H

#include <stddef.h>
#include <stdint.h>

/* Each frame is stored behind a header of this many bytes and its record
 * padded to a multiple of it. */
#define GW_ND_REC_ALIGN 16

typedef struct gw_nd_fifo {
    uint8_t *ring;
    size_t cap;       /* bytes of ring: limit + 2 records of the largest frame */
    size_t frame_max; /* the largest frame a slot takes */
    size_t limit;     /* the most bytes of records queued at once */
    size_t head;      /* the oldest record */
    size_t tail;      /* where the next record goes */
    size_t wrap_at;   /* where the records before the tail's wrap end; cap: none */
    size_t bytes;     /* bytes of records queued (headers and padding too) */
    size_t frames;    /* frames queued */
} gw_nd_fifo_t;

/* A ring for frames of at most frame_max bytes, holding at most limit
 * bytes of records (limit >= one record of frame_max). Returns 0, or -1
 * with errno set (ENOMEM, EINVAL). The memory is mapped lazily: pages are
 * touched only when frames reach them. */
int gw_nd_fifo_init(gw_nd_fifo_t *f, size_t frame_max, size_t limit);
void gw_nd_fifo_free(gw_nd_fifo_t *f);

/* Where the next frame can be read into (frame_max bytes), or NULL when
 * the queue has no room for a frame of frame_max: the caller then drops
 * the frame (drop-tail). */
uint8_t *gw_nd_fifo_slot(gw_nd_fifo_t *f);

/* Queue the len bytes (len <= frame_max) just read into the slot, due at
 * due_ns. Returns 0, or -1 when they would take the queue over its limit
 * (the frame is then dropped: nothing is queued). */
int gw_nd_fifo_push(gw_nd_fifo_t *f, size_t len, int64_t due_ns);

/* The oldest frame: its bytes, length and due time; NULL when empty. */
const uint8_t *gw_nd_fifo_front(const gw_nd_fifo_t *f, size_t *len, int64_t *due_ns);

/* Remove the oldest frame (the queue must not be empty). */
void gw_nd_fifo_pop(gw_nd_fifo_t *f);

#endif
