/*
 * ib_mr_cache.h - the verbs transport's registration cache (ib_mr_cache.c)
 * and the list of every cache of the process (ib_mr_caches.c). Apart from
 * ib_internal.h so that its tests need nothing of the transport's.
 */
#ifndef GW_TRANSPORT_IB_MR_CACHE_H
#define GW_TRANSPORT_IB_MR_CACHE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gw_ib_mr_entry {
    uintptr_t start, end; /* page-aligned [start, end) */
    void *mr;             /* the backend's handle (struct ibv_mr * in the transport) */
    uint32_t lkey, rkey;
    int refs;          /* requests and explicit registrations using it */
    int explicit_refs; /* of which mem_reg() calls */
    int dead;          /* invalidated while in use: deregistered at the last release */
    int cacheable;     /* its mapping could be marked: kept after use */
    int mark;          /* what the backend's check compares */
    uint64_t last_use;
} gw_ib_mr_entry_t;

/* The registration backend: the transport registers with ibv_reg_mr; the
 * tests with a fake that records calls. reg returns 0 or an errno. mark and
 * check (both optional) tell whether a range is still the mapping that was
 * registered: mark returns 0 and a token, or -1 when the range cannot be
 * marked (then the entry is not kept after use); check returns 1 while the
 * mapping is the one marked, 0 once it was replaced. */
typedef struct gw_ib_mr_backend {
    void *ctx;
    int (*reg)(void *ctx, void *addr, size_t len, void **mr, uint32_t *lkey, uint32_t *rkey);
    void (*dereg)(void *ctx, void *mr);
    int (*mark)(void *ctx, void *addr, size_t len, int *token);
    int (*check)(void *ctx, const void *addr, size_t len, int token);
    /* Optional: 1 when [addr, addr + len) bears no mark at all (a mapping
     * made since anyone marked it), which the other caches must hear of
     * before this one marks it (ib_mr_caches.c). */
    int (*fresh)(void *ctx, const void *addr, size_t len);
} gw_ib_mr_backend_t;

/* The real mark and check: a NUMA memory policy on the registered range
 * (see ib_mr_cache.c). gw__ib_mem_mark returns 0 or an errno. */
int gw__ib_mem_mark(void *addr, size_t len, int *token);
int gw__ib_mem_check(const void *addr, size_t len, int token);
/* Whether [addr, addr + len) has no mark at its first or last page: a
 * mapping made since anyone marked it (or never marked). */
int gw__ib_mem_fresh(const void *addr, size_t len);

typedef struct gw_ib_mr_range {
    uintptr_t start, end;
} gw_ib_mr_range_t;

typedef struct gw_ib_mr_cache {
    gw_ib_mr_backend_t backend;
    size_t page;
    int enabled;        /* 0: every entry is released at its last use */
    size_t max_entries; /* unused entries beyond this are evicted, oldest first */
    size_t max_bytes;   /* likewise for the bytes registered */
    gw_ib_mr_entry_t **entries;
    size_t n, cap;
    size_t bytes;
    uint64_t clock;
    uint64_t hits, misses, evictions, regs, deregs, stale, unmarked;
    /* Every cache of the process (ib_mr_caches.c): the list, and the
     * ranges other caches found mapped anew, dropped here at the next get. */
    struct gw_ib_mr_cache *next_in_process;
    int in_process;
    gw_ib_mr_range_t *pending;
    size_t npending, cap_pending;
    atomic_int has_pending;
    uint64_t foreign; /* entries dropped because another cache saw their memory mapped anew */
} gw_ib_mr_cache_t;

void gw__ib_mr_cache_init(gw_ib_mr_cache_t *c, const gw_ib_mr_backend_t *backend, int enabled,
                          size_t max_entries, size_t max_bytes);
/* An entry covering [addr, addr + len), registering the page-aligned range
 * when none does (merging unused entries it overlaps), with a reference for
 * the caller. 0, or the backend's errno (ENOMEM after evicting every unused
 * entry and trying again). */
int gw__ib_mr_cache_get(gw_ib_mr_cache_t *c, const void *addr, size_t len, gw_ib_mr_entry_t **out);
/* Drop a reference; an entry of a disabled cache, or an invalidated one, is
 * deregistered at its last release. */
void gw__ib_mr_cache_put(gw_ib_mr_cache_t *c, gw_ib_mr_entry_t *e);
/* The memory [addr, addr + len) is going away: forget every entry that
 * overlaps it (deregistered now, or at its last release when in use).
 * Returns how many it forgot. */
size_t gw__ib_mr_cache_invalidate(gw_ib_mr_cache_t *c, const void *addr, size_t len);
/* Deregister everything (entries still referenced included). */
void gw__ib_mr_cache_fini(gw_ib_mr_cache_t *c);

/* ---- every cache of the process (ib_mr_caches.c) ---- */
/* Join and leave the process's list (init and fini do). */
void gw__ib_mr_caches_join(gw_ib_mr_cache_t *c);
void gw__ib_mr_caches_leave(gw_ib_mr_cache_t *c);
/* c is about to mark [start, end), which bears no mark: every other cache
 * of the process forgets its entries over that range at its next get. */
void gw__ib_mr_caches_announce(gw_ib_mr_cache_t *c, uintptr_t start, uintptr_t end);
/* Forget the entries over the ranges other caches announced; 1 when there
 * were any (then a hit just found may be gone). */
int gw__ib_mr_caches_drain(gw_ib_mr_cache_t *c);

#endif
