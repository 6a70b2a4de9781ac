/*
 * shm_wait.c - waiting between the rounds of the shared-memory transport's
 * progress engine, and the bells that end a wait.
 *
 * When a round moved nothing and the caller allows waiting, the engine
 * polls for up to GW_SHM_SPIN_NS (a message that is about to arrive costs
 * no system call) unless a peer it waits for was last seen on its own CPU
 * (then polling only delays that peer), then yields the core between
 * rounds, and after GW_SHM_YIELD_NS without progress sleeps in a futex wait
 * on the "bell" words of all the peers it waits for (futex_waitv). A peer
 * rings our bell, a counter in our half of the segment (one atomic load
 * when nobody sleeps), after it publishes anything for us: a small publish
 * at the end of the round in which it was made, after one fence for all of
 * them, so that the wait for its stores to reach us overlaps its reading
 * of ours; a larger one, or one followed by a large copy, at once. Ranks may
 * outnumber cores (the test machine has 2 cores and runs 4 to 8 ranks): a
 * rank that sleeps instead of polling leaves the core to the rank it waits
 * for; on the busy test machine, sleeping after 50 us instead of yielding
 * for 2 ms made a 4-rank 32 MiB allreduce about 1.2x faster. A sleep is
 * bounded by GW_SHM_SLEEP_NS so that liveness is still checked.
 *
 * Bells. A sleeper and a publisher must not miss each other: the sleeper
 * announces `sleeping`, fences and looks at the rings once more before it
 * sleeps; the publisher stores its head, fences and looks at `sleeping`.
 * The publisher's fence stalls it until its store has reached the peer,
 * a round trip between cores: on the 2-rank allreduce of 16 bytes that
 * stall was a sixth of the time (perf), and it bought nothing while the
 * peer polled. So a rank also says `drowsy` when it may go to sleep,
 * as it stops polling and at least GW_SHM_DROWSY_NS (20 us) before it
 * sleeps, and clears it when a round moved something; a publisher fences
 * and looks for a sleeper only when the peer's `drowsy` (a relaxed load of
 * a line it rarely writes) is set. A publisher that reads 0 there read it
 * at most a store-buffer drain (nanoseconds: any interrupt or exit to the
 * hypervisor drains it too) before the sleeper's announcement became
 * visible, so its head is visible long before the sleeper's last look 20
 * us later. A missed bell would cost a sleep bounded by GW_SHM_SLEEP_NS,
 * never a hang.
 *
 * A wait costs little beside the message it waits for: a rank writes the
 * CPU it waits on only when that changed (its peers read that line after
 * every publish, to see whether it sleeps), and the clock, which on a
 * virtual machine costs about what the rest of an idle round does, is read
 * once a round, and once every SPIN_CLOCK_ROUNDS rounds while polling.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "transport/shm/shm_internal.h"

#define GW_SHM_SLEEP_NS (2LL * 1000000)            /* the longest single sleep */
#define GW_SHM_CONNECTING_SLEEP_NS (1LL * 1000000) /* ... while a pair is being connected */
#define SPIN_CLOCK_ROUNDS 8u                       /* polling rounds per clock read */

/* After the fence: wake p if it sleeps (or is about to) on our bell. */
static void wake_if_sleeping(gw_shm_peer_t *p)
{
    if (!atomic_load_explicit(&p->its->sleeping, memory_order_relaxed))
        return;
    atomic_fetch_add_explicit(&p->its->bell, 1, memory_order_release);
    syscall(SYS_futex, &p->its->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static int drowsy(const gw_shm_peer_t *p)
{
    return p->its && atomic_load_explicit(&p->its->drowsy, memory_order_relaxed);
}

void gw__shm_ring_due_bells(gw_shm_t *t)
{
    int fenced = 0;
    for (int i = 0; i < t->base.size && t->bells_due > 0; i++) {
        gw_shm_peer_t *p = &t->peers[i];
        if (!p->bell_due)
            continue;
        p->bell_due = 0;
        t->bells_due--;
        if (!drowsy(p))
            continue;
        if (!fenced) { /* as in gw__shm_ring_bell, once for all of them */
            atomic_thread_fence(memory_order_seq_cst);
            fenced = 1;
        }
        wake_if_sleeping(p);
    }
}

void gw__shm_ring_bell(gw_shm_peer_t *p)
{
    if (!drowsy(p))
        return;
    /* Pairs with the fence in sleep_on(): either the sleeper sees what we
     * published before this call, or we see its sleeping flag. */
    atomic_thread_fence(memory_order_seq_cst);
    wake_if_sleeping(p);
}

/* Say on every pair whether we may go to sleep soon (only when it
 * changes: the peers read that line after their publishes). */
static void set_drowsy(gw_shm_t *t, int on, int64_t now)
{
    for (int i = 0; i < t->base.size; i++)
        if (t->peers[i].my)
            atomic_store_explicit(&t->peers[i].my->drowsy, (uint32_t)on, memory_order_relaxed);
    t->drowsy = on;
    t->drowsy_since_ns = now;
}

/* Whether we have been drowsy long enough to sleep: on every pair we
 * would sleep on (a pair set up since we became drowsy has not been told,
 * and starts the count again). */
static int may_sleep(gw_shm_t *t, int64_t now)
{
    if (!t->drowsy) {
        set_drowsy(t, 1, now);
        return 0;
    }
    for (int i = 0; i < t->base.size; i++) {
        gw_shm_peer_t *p = &t->peers[i];
        if (p->my && !atomic_load_explicit(&p->my->drowsy, memory_order_relaxed)) {
            set_drowsy(t, 1, now);
            return 0;
        }
    }
    return now - t->drowsy_since_ns >= GW_SHM_DROWSY_NS;
}

/* Whether we wait for p: a receive posted, or a send not complete. */
static int waits_on(const gw_shm_peer_t *p)
{
    return p->rq_head || p->sq_head || p->dq_head || p->aq_head;
}

/* We start to wait: tell peers which CPU we are on, and poll only if none
 * of the peers we wait for was last seen on the same CPU. A peer that
 * shares our CPU cannot run while we poll, and ranks that wake each other
 * through the futex tend to be placed on one CPU by the scheduler. Measured
 * here (2-rank allreduce of 8 bytes, busy 2-core machine): 8.3 us when
 * always polling 2 us first, 5 us never polling, 4.2 us with this check;
 * ranks pinned to separate CPUs answer each other in 0.6 us by polling. */
static int spin_worth_it(gw_shm_t *t)
{
    int cpu = sched_getcpu();
    int spin = 1;
    for (int i = 0; i < t->base.size; i++) {
        gw_shm_peer_t *p = &t->peers[i];
        if (!p->served || !p->my)
            continue;
        /* Stored only when it changed: the line is also the one the peer
         * reads to see whether we sleep, after every message it sends. */
        if (atomic_load_explicit(&p->my->cpu, memory_order_relaxed) != cpu)
            atomic_store_explicit(&p->my->cpu, cpu, memory_order_relaxed);
        if (waits_on(p) && atomic_load_explicit(&p->its->cpu, memory_order_relaxed) == cpu)
            spin = 0;
    }
    return spin && cpu >= 0;
}

/* Peers we wait for: those with a receive posted or a send pending; all
 * peers still there when we wait for nothing in particular. At most
 * FUTEX_WAITV_MAX. */
static int waited_peers(gw_shm_t *t, gw_shm_peer_t **out)
{
    int n = 0;
    for (int pass = 0; pass < 2 && n == 0; pass++) {
        for (int i = 0; i < t->base.size && n < FUTEX_WAITV_MAX; i++) {
            gw_shm_peer_t *p = &t->peers[i];
            if (!p->served || p->goodbye || !p->my)
                continue;
            if (pass == 1 || waits_on(p))
                out[n++] = p;
        }
    }
    return n;
}

/* Sleep until a peer we wait for rings our bell, at most max_ns. One more
 * round runs after the sleep is announced, so that nothing published
 * before the announcement is slept through. The bells of all those peers
 * are waited on at once (futex_waitv, Linux 5.16); where that is missing,
 * only the first one's, and the others are looked at after the timeout. */
static gw_status_t sleep_on(gw_shm_t *t, const gw_msg_tag_t *current, int64_t max_ns)
{
    gw_shm_peer_t *peers[FUTEX_WAITV_MAX];
    struct futex_waitv w[FUTEX_WAITV_MAX];
    int n = waited_peers(t, peers);
    if (n == 0) {
        struct timespec ts = {0, (long)(max_ns < 1000000 ? max_ns : 1000000)};
        nanosleep(&ts, NULL);
        return GW_OK;
    }
    memset(w, 0, sizeof(w[0]) * (size_t)n);
    for (int i = 0; i < n; i++) {
        /* Not FUTEX_PRIVATE: the words are shared with other processes. */
        w[i].uaddr = (uint64_t)(uintptr_t)&peers[i]->my->bell;
        w[i].val = atomic_load_explicit(&peers[i]->my->bell, memory_order_acquire);
        w[i].flags = FUTEX_32;
        atomic_store_explicit(&peers[i]->my->sleeping, 1, memory_order_relaxed);
    }
    /* A pair being connected moves without ringing bells: look often. */
    if (t->nconnecting > 0 && max_ns > GW_SHM_CONNECTING_SLEEP_NS)
        max_ns = GW_SHM_CONNECTING_SLEEP_NS;
    atomic_thread_fence(memory_order_seq_cst);
    uint64_t before = t->moved;
    int64_t now = gw__now_ns();
    gw_status_t st = gw__shm_round(t, current, now);
    if (st == GW_OK && t->moved == before) {
        struct timespec ts;
        int64_t end = now + max_ns;
        ts.tv_sec = (time_t)(end / 1000000000);
        ts.tv_nsec = (long)(end % 1000000000);
#ifdef SYS_futex_waitv
        if (!t->no_waitv && syscall(SYS_futex_waitv, w, (unsigned)n, 0, &ts, CLOCK_MONOTONIC) < 0 &&
            errno == ENOSYS)
            t->no_waitv = 1;
#else
        t->no_waitv = 1;
#endif
        if (t->no_waitv) {
            struct timespec rel = {(time_t)(max_ns / 1000000000), (long)(max_ns % 1000000000)};
            syscall(SYS_futex, &peers[0]->my->bell, FUTEX_WAIT, (uint32_t)w[0].val, &rel, NULL, 0);
        }
    }
    int rung = 0;
    for (int i = 0; i < n; i++)
        if (peers[i]->my) {
            atomic_store_explicit(&peers[i]->my->sleeping, 0, memory_order_relaxed);
            rung |= atomic_load_explicit(&peers[i]->my->bell, memory_order_relaxed) != w[i].val;
        }
    t->woken += (uint64_t)rung;
    return st;
}

gw_status_t gw__shm_progress(gw_transport_t *base, const gw_msg_tag_t *current, int wait_ms)
{
    gw_shm_t *t = gw__shm_of(base);
    /* A clock read costs about what the rest of an idle round does: it is
     * read once per round, and while polling once per SPIN_CLOCK_ROUNDS
     * rounds (the times it decides by are microseconds or more). */
    int64_t now = gw__now_ns();
    const int64_t deadline = now + (int64_t)(wait_ms > 0 ? wait_ms : 0) * 1000000;
    unsigned polled = 0;
    for (;;) {
        uint64_t before = t->moved;
        gw_status_t st = gw__shm_round(t, current, now);
        if (st != GW_OK)
            return st;
        if (t->moved != before) {
            t->idle_since_ns = 0;
            if (t->drowsy)
                set_drowsy(t, 0, now);
            return GW_OK;
        }
        if (wait_ms > 0 && t->spin && t->idle_since_ns && ++polled % SPIN_CLOCK_ROUNDS != 0 &&
            now - t->idle_since_ns < t->spin_ns) {
            gw__cpu_relax();
            continue;
        }
        now = gw__now_ns();
        if (!t->idle_since_ns) {
            t->idle_since_ns = now;
            t->spin = spin_worth_it(t);
        }
        if (wait_ms <= 0 || now >= deadline)
            return GW_OK;
        int64_t idle = now - t->idle_since_ns;
        if (t->spin && idle < t->spin_ns) {
            gw__cpu_relax();
        } else if (!may_sleep(t, now) || idle < t->yield_ns) {
            sched_yield();
        } else {
            int64_t left = deadline - now;
            uint64_t moved = t->moved;
            st = sleep_on(t, current, left < GW_SHM_SLEEP_NS ? left : GW_SHM_SLEEP_NS);
            if (st != GW_OK)
                return st;
            if (t->moved != moved) {
                t->idle_since_ns = 0;
                set_drowsy(t, 0, now);
                return GW_OK;
            }
        }
    }
}
