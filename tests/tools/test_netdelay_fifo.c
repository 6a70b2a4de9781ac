/*
 * test_netdelay_fifo.c - the delay line of gradwire-netdelay
 * (tools/dev/netdelay_fifo.c): frames come out whole, in the order they
 * went in, with their due times, across many wraps of the ring; the byte
 * limit drops the frame that would exceed it and nothing else.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tools/dev/netdelay_fifo.h"

#define FRAME_MAX 9000

/* Frame k: length from a fixed pseudo-random sequence, bytes from k. */
static size_t frame_len(unsigned k) { return 1 + (k * 2654435761u >> 7) % FRAME_MAX; }

static void fill(uint8_t *p, size_t len, unsigned k)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(k * 31 + i);
}

static int same(const uint8_t *p, size_t len, unsigned k)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != (uint8_t)(k * 31 + i))
            return 0;
    return 1;
}

/* Push frame k; returns 0 when queued. */
static int push(gw_nd_fifo_t *f, unsigned k)
{
    uint8_t *slot = gw_nd_fifo_slot(f);
    if (!slot)
        return -1;
    fill(slot, frame_len(k), k);
    return gw_nd_fifo_push(f, frame_len(k), (int64_t)k * 1000);
}

/* Pop the oldest frame and check it is frame k. */
static void pop_expect(gw_nd_fifo_t *f, unsigned k)
{
    size_t len = 0;
    int64_t due = -1;
    const uint8_t *p = gw_nd_fifo_front(f, &len, &due);
    cr_assert_not_null(p, "frame %u missing", k);
    cr_assert_eq(len, frame_len(k), "frame %u: length %zu, want %zu", k, len, frame_len(k));
    cr_assert_eq(due, (int64_t)k * 1000, "frame %u: due %lld", k, (long long)due);
    cr_assert(same(p, len, k), "frame %u: bytes differ", k);
    gw_nd_fifo_pop(f);
}

Test(netdelay_fifo, order_and_bytes_across_many_wraps)
{
    gw_nd_fifo_t f;
    cr_assert_eq(gw_nd_fifo_init(&f, FRAME_MAX, 64 * 1024), 0);
    unsigned in = 0, out = 0;
    /* Fill to the limit, drain a few, refill: the tail wraps over and over
     * with the head at every offset. */
    for (int round = 0; round < 2000; round++) {
        while (push(&f, in) == 0)
            in++;
        cr_assert(f.bytes <= f.limit, "queued %zu bytes over the limit %zu", f.bytes, f.limit);
        int n = 1 + round % 5;
        for (int k = 0; k < n && out < in; k++)
            pop_expect(&f, out++);
    }
    while (out < in)
        pop_expect(&f, out++);
    size_t len;
    int64_t due;
    cr_assert_null(gw_nd_fifo_front(&f, &len, &due), "frames left after all were taken");
    cr_assert_eq(f.bytes, 0);
    cr_assert(in > 5000, "only %u frames went through", in);
    gw_nd_fifo_free(&f);
}

Test(netdelay_fifo, limit_drops_only_what_exceeds_it)
{
    gw_nd_fifo_t f;
    /* Room for exactly ten 1008-byte frames (16-byte header each). */
    cr_assert_eq(gw_nd_fifo_init(&f, 1008, 10 * 1024), 0);
    for (int k = 0; k < 10; k++) {
        uint8_t *slot = gw_nd_fifo_slot(&f);
        cr_assert_not_null(slot, "frame %d refused below the limit", k);
        cr_assert_eq(gw_nd_fifo_push(&f, 1008, k), 0, "frame %d refused below the limit", k);
    }
    uint8_t *slot = gw_nd_fifo_slot(&f);
    cr_assert(!slot || gw_nd_fifo_push(&f, 1008, 10) != 0, "an 11th frame went over the limit");
    cr_assert_eq(f.frames, 10);
    gw_nd_fifo_pop(&f);
    cr_assert_not_null(gw_nd_fifo_slot(&f), "no room after a frame left");
    cr_assert_eq(gw_nd_fifo_push(&f, 1008, 11), 0);
    gw_nd_fifo_free(&f);
}

Test(netdelay_fifo, bad_sizes_are_refused)
{
    gw_nd_fifo_t f;
    cr_assert_neq(gw_nd_fifo_init(&f, 0, 1 << 20), 0, "frame_max 0 accepted");
    cr_assert_neq(gw_nd_fifo_init(&f, 9000, 100), 0, "a limit below one frame accepted");
}
