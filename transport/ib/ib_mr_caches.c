/*
 * ib_mr_caches.c - every registration cache of the process, which tell
 * each other of memory mapped anew.
 *
 * A cache notices that a registered buffer was freed and mapped again by a
 * mark on the memory (ib_mr_cache.c): a NUMA policy that a fresh mapping
 * does not have. The mark is the memory's, not the cache's. When one cache
 * registers and marks a new mapping at an address where another cache
 * still holds an entry for the old one, that entry passes its check from
 * then on, and its messages would move the old pages: data lost without
 * an error. This happens whenever two verbs transports live in one
 * process: the rails of one transport (ib_rails.c), or the transports of
 * communicators made by separate gw_comm_init calls (a torch process
 * group beside a communicator of the application's own, several jobs'
 * communicators in one server).
 *
 * So the caches of the process are in one list, and a cache about to mark
 * memory that bears no mark at all announces the range to all the others
 * first. The list is the one piece of process-wide state in gradwire: the
 * memory it guards is process-wide too. The others may be used by other
 * threads at that moment (each communicator's own), so the announcement
 * only queues the range on each of them, under the list's lock; each cache
 * drops its entries over the queued ranges at its next lookup. The order
 * makes it safe without a lock on the lookups themselves: the announcing
 * cache queues before it marks, and a lookup checks the mark before it
 * looks at its queue, so a lookup that sees the new mark also sees the
 * range queued (the lock orders the two), and drops the entry it was
 * about to use.
 */
#include <pthread.h>
#include <stdlib.h>

#include "transport/ib/ib_mr_cache.h"

static pthread_mutex_t caches_lock = PTHREAD_MUTEX_INITIALIZER;
static gw_ib_mr_cache_t *caches; /* every cache between init and fini */

void gw__ib_mr_caches_join(gw_ib_mr_cache_t *c)
{
    pthread_mutex_lock(&caches_lock);
    c->next_in_process = caches;
    caches = c;
    c->in_process = 1;
    pthread_mutex_unlock(&caches_lock);
}

void gw__ib_mr_caches_leave(gw_ib_mr_cache_t *c)
{
    if (!c->in_process)
        return;
    pthread_mutex_lock(&caches_lock);
    for (gw_ib_mr_cache_t **p = &caches; *p; p = &(*p)->next_in_process)
        if (*p == c) {
            *p = c->next_in_process;
            break;
        }
    c->in_process = 0;
    free(c->pending);
    c->pending = NULL;
    c->npending = c->cap_pending = 0;
    atomic_store(&c->has_pending, 0);
    pthread_mutex_unlock(&caches_lock);
}

/* Queue [start, end) on cache o (under the lock). A queue that cannot
 * grow makes o forget every entry at its next lookup instead (has_pending
 * 2), which is always correct, only slower. */
static void queue(gw_ib_mr_cache_t *o, uintptr_t start, uintptr_t end)
{
    if (o->npending == o->cap_pending) {
        size_t cap = o->cap_pending ? 2 * o->cap_pending : 8;
        gw_ib_mr_range_t *p = realloc(o->pending, cap * sizeof(*p));
        if (!p) {
            atomic_store(&o->has_pending, 2);
            return;
        }
        o->pending = p;
        o->cap_pending = cap;
    }
    o->pending[o->npending++] = (gw_ib_mr_range_t){start, end};
    if (atomic_load(&o->has_pending) == 0)
        atomic_store(&o->has_pending, 1);
}

void gw__ib_mr_caches_announce(gw_ib_mr_cache_t *c, uintptr_t start, uintptr_t end)
{
    pthread_mutex_lock(&caches_lock);
    for (gw_ib_mr_cache_t *o = caches; o; o = o->next_in_process)
        if (o != c)
            queue(o, start, end);
    pthread_mutex_unlock(&caches_lock);
}

int gw__ib_mr_caches_drain(gw_ib_mr_cache_t *c)
{
    if (!atomic_load(&c->has_pending))
        return 0;
    pthread_mutex_lock(&caches_lock);
    int all = atomic_load(&c->has_pending) == 2;
    gw_ib_mr_range_t *ranges = c->pending;
    size_t n = c->npending;
    c->pending = NULL;
    c->npending = c->cap_pending = 0;
    atomic_store(&c->has_pending, 0);
    pthread_mutex_unlock(&caches_lock);
    if (all)
        c->foreign += gw__ib_mr_cache_invalidate(c, NULL, SIZE_MAX);
    for (size_t i = 0; !all && i < n; i++)
        c->foreign += gw__ib_mr_cache_invalidate(c, (const void *)ranges[i].start,
                                                 ranges[i].end - ranges[i].start);
    free(ranges);
    return 1;
}
