/*
 * ib_mr_cache.c - the registration cache.
 *
 * RDMA needs every buffer registered (pinned and translated by the NIC)
 * before it moves a byte, and registration costs a system call plus a page
 * table walk per page: far more than sending a small message. Training
 * allreduces the same gradient buffers thousands of times, so each
 * registration is kept after use, keyed by its page-aligned address range,
 * and found again by the next message that falls inside it. Entries are
 * reference counted: one in use by a pending request is never evicted or
 * deregistered under it. Unused entries beyond GW_IB_REG_CACHE_MAX, or
 * beyond the byte budget (half of RLIMIT_MEMLOCK when that is finite), are
 * evicted least recently used first, and a registration that fails with
 * ENOMEM is retried once after evicting every unused entry. A miss whose
 * range overlaps unused entries registers the union and drops them, so
 * buffers that grow or are reached at different offsets do not pile up
 * overlapping registrations.
 *
 * Invalidation. A registration pins the physical pages that backed its
 * range when it was made. When the application frees that memory and the
 * range is mapped again (free() of a large block and malloc() of another,
 * which glibc serves with munmap and mmap at the same address; a heap that
 * shrinks and grows back), a cached entry would still point at the old
 * pages, and data would land there instead of in the new buffer. The
 * kernel does not tell user space about munmap (UCX and Open MPI patch the
 * C library's memory functions to find out, which a library loaded into
 * PyTorch should not do), so the cache marks what it registered instead:
 * the range gets the NUMA memory policy MPOL_LOCAL (mbind), which for
 * memory that is already allocated (registration faulted every page in
 * and pins it) changes nothing, but which a fresh mapping does not have.
 * A cache hit checks the policy of the range's first and last page
 * (get_mempolicy, two cheap system calls): if it is no longer the mark, the
 * mapping was replaced, and the entry is dropped and registered again.
 * The kernel never merges a new mapping, or heap growth, into a region
 * with a policy, so a remapped part always shows. Memory that already has
 * a policy of its own (other than MPOL_LOCAL) keeps it, and that policy
 * serves as the mark.
 *   - covered: munmap/mmap and heap shrink/grow of whole first or last
 *     pages of a cached range; explicit deregistration (the transport's
 *     mem_dereg invalidates the range);
 *   - several caches: the mark is the memory's, not the cache's, so when
 *     one cache marks a new mapping, another cache's entry for the old
 *     one would pass the check. Every cache of the process is in one
 *     list (ib_mr_caches.c), and a cache that registers memory with no
 *     mark yet (gw__ib_mem_fresh: a mapping made since anyone marked it)
 *     first announces the range to the others, which drop their entries
 *     over it before their next hit: the rails of one transport
 *     (ib_rails.c) and the transports of separate communicators alike;
 *   - not covered: a range remapped only in its middle pages (no allocator
 *     does this), and memory whose policy cannot be set (kernels without
 *     NUMA, containers whose seccomp profile forbids mbind): there every
 *     registration is released after its message, which is always correct,
 *     only slower; one INFO line says so. GW_IB_REG_CACHE=0 chooses that
 *     behaviour everywhere.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "transport/ib/ib_internal.h"

/* From <numaif.h>, which needs libnuma's headers for nothing else. */
#define GW_MPOL_DEFAULT 0
#define GW_MPOL_LOCAL 4
#define GW_MPOL_F_ADDR (1 << 1)

static int policy_at(const void *addr, int *mode)
{
    return (int)syscall(SYS_get_mempolicy, mode, NULL, 0UL, addr, (unsigned long)GW_MPOL_F_ADDR);
}

int gw__ib_mem_mark(void *addr, size_t len, int *token)
{
    int first, last;
    const uint8_t *end = (const uint8_t *)addr + (len ? len - 1 : 0);
    if (policy_at(addr, &first) != 0 || policy_at(end, &last) != 0)
        return errno;
    int ours_first = first == GW_MPOL_DEFAULT || first == GW_MPOL_LOCAL;
    int ours_last = last == GW_MPOL_DEFAULT || last == GW_MPOL_LOCAL;
    if (!ours_first || !ours_last) {
        /* The application's own policy: keep it, and use it as the mark
         * if it covers the whole range. */
        if (last != first)
            return EEXIST;
        *token = first;
        return 0;
    }
    if (syscall(SYS_mbind, addr, len, (unsigned long)GW_MPOL_LOCAL, NULL, 0UL, 0U) != 0)
        return errno;
    *token = GW_MPOL_LOCAL;
    return 0;
}

int gw__ib_mem_fresh(const void *addr, size_t len)
{
    int first, last;
    const uint8_t *end = (const uint8_t *)addr + (len ? len - 1 : 0);
    if (policy_at(addr, &first) != 0 || policy_at(end, &last) != 0)
        return 1;
    return first == GW_MPOL_DEFAULT || last == GW_MPOL_DEFAULT;
}

int gw__ib_mem_check(const void *addr, size_t len, int token)
{
    int first, last;
    const uint8_t *end = (const uint8_t *)addr + (len ? len - 1 : 0);
    if (policy_at(addr, &first) != 0 || policy_at(end, &last) != 0)
        return 0;
    return first == token && last == token;
}

void gw__ib_mr_cache_init(gw_ib_mr_cache_t *c, const gw_ib_mr_backend_t *backend, int enabled,
                          size_t max_entries, size_t max_bytes)
{
    memset(c, 0, sizeof(*c));
    c->backend = *backend;
    long page = sysconf(_SC_PAGESIZE);
    c->page = page > 0 ? (size_t)page : 4096;
    c->enabled = enabled;
    c->max_entries = max_entries ? max_entries : 1;
    c->max_bytes = max_bytes ? max_bytes : SIZE_MAX;
    gw__ib_mr_caches_join(c);
}

static void dereg_entry(gw_ib_mr_cache_t *c, gw_ib_mr_entry_t *e)
{
    c->backend.dereg(c->backend.ctx, e->mr);
    c->deregs++;
    free(e);
}

/* Remove entry i from the table (not deregistering it). */
static gw_ib_mr_entry_t *unlink_at(gw_ib_mr_cache_t *c, size_t i)
{
    gw_ib_mr_entry_t *e = c->entries[i];
    c->entries[i] = c->entries[--c->n];
    c->bytes -= e->end - e->start;
    return e;
}

static size_t find(const gw_ib_mr_cache_t *c, const gw_ib_mr_entry_t *e)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->entries[i] == e)
            return i;
    return SIZE_MAX;
}

/* Evict unused entries, oldest first, until the table fits its limits with
 * room for `more` entries of `extra` bytes (all unused ones when force is
 * set). */
static void evict(gw_ib_mr_cache_t *c, size_t more, size_t extra, int force)
{
    for (;;) {
        int over = force || c->n + more > c->max_entries || c->bytes + extra > c->max_bytes;
        if (!over)
            return;
        size_t victim = SIZE_MAX;
        for (size_t i = 0; i < c->n; i++) {
            const gw_ib_mr_entry_t *e = c->entries[i];
            if (e->refs == 0 && (victim == SIZE_MAX || e->last_use < c->entries[victim]->last_use))
                victim = i;
        }
        if (victim == SIZE_MAX)
            return; /* everything left is in use */
        dereg_entry(c, unlink_at(c, victim));
        c->evictions++;
    }
}

static int insert(gw_ib_mr_cache_t *c, gw_ib_mr_entry_t *e)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        gw_ib_mr_entry_t **p = realloc(c->entries, cap * sizeof(*p));
        if (!p)
            return ENOMEM;
        c->entries = p;
        c->cap = cap;
    }
    c->entries[c->n++] = e;
    c->bytes += e->end - e->start;
    return 0;
}

/* Whether entry e still describes the memory at its range. */
static int still_valid(gw_ib_mr_cache_t *c, const gw_ib_mr_entry_t *e)
{
    return !c->backend.check ||
           c->backend.check(c->backend.ctx, (const void *)e->start, e->end - e->start, e->mark);
}

/* A hit: the live entry covering [start, end), dropping stale ones met on
 * the way. */
static gw_ib_mr_entry_t *lookup(gw_ib_mr_cache_t *c, uintptr_t start, uintptr_t end)
{
    for (size_t i = 0; i < c->n;) {
        gw_ib_mr_entry_t *e = c->entries[i];
        if (e->dead || e->start > start || e->end < end) {
            i++;
            continue;
        }
        if (still_valid(c, e))
            return e;
        /* The memory was unmapped and mapped again since it was registered. */
        c->stale++;
        if (e->refs > 0) {
            e->dead = 1; /* the old buffer is still in use (freed too early) */
            i++;
        } else {
            dereg_entry(c, unlink_at(c, i));
        }
    }
    return NULL;
}

int gw__ib_mr_cache_get(gw_ib_mr_cache_t *c, const void *addr, size_t len, gw_ib_mr_entry_t **out)
{
    uintptr_t a = (uintptr_t)addr;
    uintptr_t start = a & ~(uintptr_t)(c->page - 1);
    uintptr_t last = a + (len ? len : 1);
    if (last < a)
        return EINVAL;
    uintptr_t end = (last + c->page - 1) & ~(uintptr_t)(c->page - 1);
    c->clock++;
    /* What other caches announced (ib_mr_caches.c) goes first; then the
     * mark, then the queue again: a hit whose memory another cache has
     * just marked anew is in the queue by then, and goes. */
    gw__ib_mr_caches_drain(c);
    gw_ib_mr_entry_t *e = lookup(c, start, end);
    while (e && gw__ib_mr_caches_drain(c))
        e = lookup(c, start, end);
    if (e) {
        e->refs++;
        e->last_use = c->clock;
        c->hits++;
        *out = e;
        return 0;
    }
    c->misses++;
    /* Grow the range over the unused entries it overlaps, which then go
     * (stale ones too, but without growing over memory that may be gone). */
    uintptr_t want_start = start, want_end = end;
    for (size_t i = 0; i < c->n;) {
        e = c->entries[i];
        if (e->refs == 0 && e->start < end && e->end > start) {
            if (still_valid(c, e)) {
                if (e->start < start)
                    start = e->start;
                if (e->end > end)
                    end = e->end;
            }
            dereg_entry(c, unlink_at(c, i));
            continue;
        }
        i++;
    }
    if (c->enabled)
        evict(c, 1, end - start, 0);
    e = calloc(1, sizeof(*e));
    if (!e)
        return ENOMEM;
    e->start = start;
    e->end = end;
    int err =
        c->backend.reg(c->backend.ctx, (void *)start, end - start, &e->mr, &e->lkey, &e->rkey);
    if (err == ENOMEM || err == EAGAIN) {
        /* Pinned memory is limited (RLIMIT_MEMLOCK, the NIC's tables):
         * give back everything unused and try once more. */
        evict(c, 0, 0, 1);
        err =
            c->backend.reg(c->backend.ctx, (void *)start, end - start, &e->mr, &e->lkey, &e->rkey);
    }
    if (err && (start != want_start || end != want_end)) {
        /* Part of the union is not mapped any more: just what was asked. */
        e->start = start = want_start;
        e->end = end = want_end;
        err =
            c->backend.reg(c->backend.ctx, (void *)start, end - start, &e->mr, &e->lkey, &e->rkey);
    }
    if (err) {
        free(e);
        return err;
    }
    c->regs++;
    /* Marked after registration: the pages exist (registration faulted
     * them in), so the policy only labels the mapping. */
    e->cacheable = c->enabled;
    /* Memory no cache has marked may be a new mapping where another cache
     * still holds an entry for the old one, which would pass its check
     * once this mark is set: the others hear of it first. */
    if (c->enabled && c->backend.fresh &&
        c->backend.fresh(c->backend.ctx, (const void *)start, end - start))
        gw__ib_mr_caches_announce(c, start, end);
    if (c->enabled && c->backend.mark &&
        c->backend.mark(c->backend.ctx, (void *)start, end - start, &e->mark) != 0) {
        e->cacheable = 0;
        c->unmarked++;
    }
    e->refs = 1;
    e->last_use = c->clock;
    if (insert(c, e) != 0) {
        dereg_entry(c, e);
        return ENOMEM;
    }
    *out = e;
    return 0;
}

void gw__ib_mr_cache_put(gw_ib_mr_cache_t *c, gw_ib_mr_entry_t *e)
{
    if (!e || --e->refs > 0)
        return;
    if (e->dead || !e->cacheable) {
        size_t i = find(c, e);
        if (i != SIZE_MAX)
            dereg_entry(c, unlink_at(c, i));
        return;
    }
    evict(c, 0, 0, 0);
}

size_t gw__ib_mr_cache_invalidate(gw_ib_mr_cache_t *c, const void *addr, size_t len)
{
    uintptr_t a = (uintptr_t)addr, b = len > UINTPTR_MAX - a ? UINTPTR_MAX : a + len;
    size_t gone = 0;
    for (size_t i = 0; i < c->n;) {
        gw_ib_mr_entry_t *e = c->entries[i];
        if (e->start < b && e->end > a && !e->dead) {
            gone++;
            if (e->refs > 0) {
                e->dead = 1; /* found no more; deregistered at its last release */
            } else {
                dereg_entry(c, unlink_at(c, i));
                continue;
            }
        }
        i++;
    }
    return gone;
}

void gw__ib_mr_cache_fini(gw_ib_mr_cache_t *c)
{
    gw__ib_mr_caches_leave(c);
    /* Entries still in use belong to requests the closing transport never
     * completes: they go too. */
    while (c->n > 0)
        dereg_entry(c, unlink_at(c, c->n - 1));
    free(c->entries);
    c->entries = NULL;
    c->cap = 0;
}
