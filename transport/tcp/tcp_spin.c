/*
 * tcp_spin.c - how a TCP rank waits: poll(), after a brief spin of
 * non-blocking polls (GW_TCP_SPIN_US) that takes an answer a few
 * microseconds away without the wake-up, and that stands down when spinning
 * does not pay (tcp_progress.c calls it for every wait).
 */
#include <poll.h>

#include "common/clock.h"
#include "transport/tcp/tcp_internal.h"

/* A spin that ends without an answer GW_TCP_SPIN_MISSES times in a row
 * means the peers answer slower than the spin (they share our core, or the
 * host has more ranks than cores, where spinning only delays them): the
 * next GW_TCP_SPIN_REST waits then sleep at once before spinning is tried
 * again. */
#define GW_TCP_SPIN_MISSES 4
#define GW_TCP_SPIN_REST 64

/* poll() that, before it lets the thread sleep, asks again without
 * waiting for up to spin_ns: an answer that is a few microseconds away
 * is then taken without the wake-up (on ranks bound to their own cores,
 * a wake-up across cores costs more than the message). The spin runs in
 * the caller's thread, and only while it waits anyway. */
static int counted_poll(gw_tcp_t *t, int np, int timeout)
{
    t->npolls++;
    return poll(t->pfds, (nfds_t)np, timeout);
}

int gw__tcp_poll_spin(gw_tcp_t *t, int np, int timeout)
{
    if (timeout == 0 || t->spin_ns <= 0)
        return counted_poll(t, np, timeout);
    if (t->spin_rest > 0) {
        t->spin_rest--;
        return counted_poll(t, np, timeout);
    }
    int64_t start = gw__now_ns();
    for (;;) {
        int n = counted_poll(t, np, 0);
        if (n != 0) {
            t->spin_misses = 0;
            return n;
        }
        int64_t spent = gw__now_ns() - start;
        if (spent >= t->spin_ns) {
            if (++t->spin_misses >= GW_TCP_SPIN_MISSES) {
                t->spin_misses = 0;
                t->spin_rest = GW_TCP_SPIN_REST;
            }
            int left = timeout - (int)(spent / 1000000);
            return counted_poll(t, np, timeout < 0 ? -1 : (left > 0 ? left : 0));
        }
    }
}
