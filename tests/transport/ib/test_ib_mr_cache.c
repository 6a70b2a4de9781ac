/*
 * test_ib_mr_cache.c - the IB transport's registration cache, over a fake
 * registration backend that records every call (no RDMA needed), and the
 * real mapping marks (mbind/get_mempolicy) that let the cache notice memory
 * that was unmapped and mapped again.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "transport/ib/ib_internal.h"

#define PAGE ((uintptr_t)4096)

typedef struct fake {
    int regs, deregs, live;
    int fail_next; /* errno for the next reg, 0: succeed */
    int fail_count;
    uint32_t next_key;
    /* Mapping generations: bumping gen makes every mark of an older one stale. */
    int gen;
    int unmarkable;
} fake_t;

static int fake_reg(void *ctx, void *addr, size_t len, void **mr, uint32_t *lkey, uint32_t *rkey)
{
    fake_t *f = ctx;
    (void)addr;
    cr_assert_eq((uintptr_t)addr % PAGE, 0u, "registrations are page-aligned");
    cr_assert_eq(len % PAGE, 0u, "registrations cover whole pages");
    if (f->fail_count > 0) {
        f->fail_count--;
        return f->fail_next;
    }
    f->regs++;
    f->live++;
    *mr = malloc(1);
    *lkey = ++f->next_key;
    *rkey = f->next_key | 0x80000000u;
    return 0;
}

static void fake_dereg(void *ctx, void *mr)
{
    fake_t *f = ctx;
    f->deregs++;
    f->live--;
    free(mr);
}

static int fake_mark(void *ctx, void *addr, size_t len, int *token)
{
    fake_t *f = ctx;
    (void)addr;
    (void)len;
    if (f->unmarkable)
        return -1;
    *token = f->gen;
    return 0;
}

static int fake_check(void *ctx, const void *addr, size_t len, int token)
{
    fake_t *f = ctx;
    (void)addr;
    (void)len;
    return token == f->gen;
}

static void setup(gw_ib_mr_cache_t *c, fake_t *f, int enabled, size_t max_entries, size_t max_bytes)
{
    memset(f, 0, sizeof(*f));
    gw_ib_mr_backend_t be = {
        .ctx = f, .reg = fake_reg, .dereg = fake_dereg, .mark = fake_mark, .check = fake_check};
    gw__ib_mr_cache_init(c, &be, enabled, max_entries, max_bytes);
    cr_assert_eq(c->page, PAGE, "these tests assume 4 KiB pages");
}

/* Addresses are never dereferenced by the fake: any numbers do. */
#define A(x) ((void *)(uintptr_t)(0x10000000u + (x)))

static gw_ib_mr_entry_t *get(gw_ib_mr_cache_t *c, uintptr_t off, size_t len)
{
    gw_ib_mr_entry_t *e = NULL;
    int err = gw__ib_mr_cache_get(c, A(off), len, &e);
    cr_assert_eq(err, 0, "get(%#lx, %zu): %s", (unsigned long)off, len, strerror(err));
    cr_assert_not_null(e);
    cr_assert_leq(e->start, (uintptr_t)A(off));
    cr_assert_geq(e->end, (uintptr_t)A(off) + (len ? len : 1));
    return e;
}

Test(ib_mr_cache, repeated_use_registers_once)
{
    gw_ib_mr_cache_t c;
    fake_t f;
    setup(&c, &f, 1, 64, 0);
    gw_ib_mr_entry_t *e = get(&c, 100, 10000);
    cr_assert_eq(e->start, (uintptr_t)A(0));
    cr_assert_eq(e->end, (uintptr_t)A(3 * PAGE));
    for (int i = 0; i < 1000; i++) {
        gw_ib_mr_entry_t *e2 = get(&c, 100, 10000);
        cr_assert_eq(e2, e);
        gw__ib_mr_cache_put(&c, e2);
    }
    gw_ib_mr_entry_t *sub = get(&c, 5000, 100);
    cr_assert_eq(sub, e, "a range inside an entry is a hit");
    cr_assert_eq(e->refs, 2);
    gw__ib_mr_cache_put(&c, sub);
    gw__ib_mr_cache_put(&c, e);
    cr_assert_eq(e->refs, 0);
    cr_assert_eq(f.regs, 1);
    cr_assert_eq(f.deregs, 0, "unused entries stay registered");
    cr_assert_eq(c.hits, 1001u);
    cr_assert_eq(c.misses, 1u);
    gw__ib_mr_cache_fini(&c);
    cr_assert_eq(f.live, 0);
}

Test(ib_mr_cache, overlapping_unused_entries_merge)
{
    gw_ib_mr_cache_t c;
    fake_t f;
    setup(&c, &f, 1, 64, 0);
    gw_ib_mr_entry_t *a = get(&c, 0, 2 * PAGE);
    gw__ib_mr_cache_put(&c, a);
    gw_ib_mr_entry_t *b = get(&c, PAGE, 3 * PAGE);
    cr_assert_eq(b->start, (uintptr_t)A(0), "grown over the unused entry");
    cr_assert_eq(b->end, (uintptr_t)A(4 * PAGE));
    cr_assert_eq(c.n, 1u);
    cr_assert_eq(f.live, 1);
    /* An entry in use is left alone: the new one overlaps it. */
    gw_ib_mr_entry_t *d = get(&c, 3 * PAGE, 2 * PAGE);
    cr_assert_neq(d, b);
    cr_assert_eq(d->start, (uintptr_t)A(3 * PAGE));
    cr_assert_eq(c.n, 2u);
    gw__ib_mr_cache_put(&c, b);
    gw__ib_mr_cache_put(&c, d);
    gw__ib_mr_cache_fini(&c);
    cr_assert_eq(f.live, 0);
}

Test(ib_mr_cache, evicts_least_recently_used)
{
    gw_ib_mr_cache_t c;
    fake_t f;
    setup(&c, &f, 1, 3, 0);
    gw_ib_mr_entry_t *e[3];
    for (int i = 0; i < 3; i++) {
        e[i] = get(&c, (uintptr_t)i * 16 * PAGE, PAGE);
        gw__ib_mr_cache_put(&c, e[i]);
    }
    /* Touch 0 so that 1 is the oldest. */
    gw__ib_mr_cache_put(&c, get(&c, 0, PAGE));
    gw_ib_mr_entry_t *x = get(&c, 100 * PAGE, PAGE);
    cr_assert_eq(c.evictions, 1u);
    cr_assert_eq(c.n, 3u);
    int have1 = 0;
    for (size_t i = 0; i < c.n; i++)
        have1 |= c.entries[i]->start == (uintptr_t)A(16 * PAGE);
    cr_assert_not(have1, "the least recently used entry went");
    /* Entries in use are never evicted, even past the limit. */
    gw_ib_mr_entry_t *y = get(&c, 200 * PAGE, PAGE);
    gw_ib_mr_entry_t *z = get(&c, 300 * PAGE, PAGE);
    gw_ib_mr_entry_t *w = get(&c, 400 * PAGE, PAGE);
    cr_assert_eq(x->refs + y->refs + z->refs + w->refs, 4);
    cr_assert_geq(c.n, 4u);
    gw__ib_mr_cache_put(&c, x);
    gw__ib_mr_cache_put(&c, y);
    gw__ib_mr_cache_put(&c, z);
    gw__ib_mr_cache_put(&c, w);
    cr_assert_leq(c.n, 3u, "released entries are trimmed back to the limit");
    gw__ib_mr_cache_fini(&c);
    cr_assert_eq(f.live, 0);
}

Test(ib_mr_cache, byte_budget)
{
    gw_ib_mr_cache_t c;
    fake_t f;
    setup(&c, &f, 1, 100, 8 * PAGE);
    gw__ib_mr_cache_put(&c, get(&c, 0, 4 * PAGE));
    gw__ib_mr_cache_put(&c, get(&c, 64 * PAGE, 4 * PAGE));
    cr_assert_eq(c.bytes, 8 * PAGE);
    gw__ib_mr_cache_put(&c, get(&c, 128 * PAGE, 2 * PAGE));
    cr_assert_leq(c.bytes, 8 * PAGE);
    cr_assert_eq(c.evictions, 1u);
    gw__ib_mr_cache_fini(&c);
}

Test(ib_mr_cache, disabled_releases_after_use)
{
    gw_ib_mr_cache_t c;
    fake_t f;
    setup(&c, &f, 0, 64, 0);
    for (int i = 0; i < 5; i++)
        gw__ib_mr_cache_put(&c, get(&c, 0, PAGE));
    cr_assert_eq(f.regs, 5);
    cr_assert_eq(f.deregs, 5);
    cr_assert_eq(c.n, 0u);
    /* Two requests on one buffer still share one registration. */
    gw_ib_mr_entry_t *a = get(&c, 0, PAGE), *b = get(&c, 0, PAGE);
    cr_assert_eq(a, b);
    gw__ib_mr_cache_put(&c, a);
    cr_assert_eq(f.live, 1);
    gw__ib_mr_cache_put(&c, b);
    cr_assert_eq(f.live, 0);
    gw__ib_mr_cache_fini(&c);
}

Test(ib_mr_cache, enomem_evicts_and_retries)
{
    gw_ib_mr_cache_t c;
    fake_t f;
    setup(&c, &f, 1, 64, 0);
    for (int i = 0; i < 4; i++)
        gw__ib_mr_cache_put(&c, get(&c, (uintptr_t)i * 16 * PAGE, PAGE));
    gw_ib_mr_entry_t *keep = get(&c, 0, PAGE);
    f.fail_next = ENOMEM;
    f.fail_count = 1;
    gw_ib_mr_entry_t *e = get(&c, 500 * PAGE, PAGE);
    cr_assert_eq(f.live, 2, "every unused entry was given back before the retry");
    cr_assert_eq(c.n, 2u);
    f.fail_count = 2;
    gw_ib_mr_entry_t *g = NULL;
    cr_assert_eq(gw__ib_mr_cache_get(&c, A(900 * PAGE), PAGE, &g), ENOMEM);
    cr_assert_null(g);
    f.fail_next = EFAULT;
    f.fail_count = 1;
    cr_assert_eq(gw__ib_mr_cache_get(&c, A(900 * PAGE), PAGE, &g), EFAULT, "no retry for EFAULT");
    gw__ib_mr_cache_put(&c, keep);
    gw__ib_mr_cache_put(&c, e);
    gw__ib_mr_cache_fini(&c);
    cr_assert_eq(f.live, 0);
}

Test(ib_mr_cache, invalidate)
{
    gw_ib_mr_cache_t c;
    fake_t f;
    setup(&c, &f, 1, 64, 0);
    gw__ib_mr_cache_put(&c, get(&c, 0, PAGE));
    gw_ib_mr_entry_t *busy = get(&c, 16 * PAGE, PAGE);
    gw__ib_mr_cache_invalidate(&c, A(0), 32 * PAGE);
    cr_assert_eq(f.deregs, 1, "the unused entry went at once");
    cr_assert(busy->dead);
    gw_ib_mr_entry_t *fresh = get(&c, 16 * PAGE, PAGE);
    cr_assert_neq(fresh, busy, "an invalidated entry is not found again");
    gw__ib_mr_cache_put(&c, busy);
    cr_assert_eq(f.deregs, 2, "the invalidated entry went at its last release");
    gw__ib_mr_cache_put(&c, fresh);
    cr_assert_eq(f.live, 1);
    gw__ib_mr_cache_fini(&c);
    cr_assert_eq(f.live, 0);
}

Test(ib_mr_cache, remapped_memory_is_registered_again)
{
    gw_ib_mr_cache_t c;
    fake_t f;
    setup(&c, &f, 1, 64, 0);
    gw_ib_mr_entry_t *e = get(&c, 0, 4 * PAGE);
    uint32_t rkey = e->rkey;
    gw__ib_mr_cache_put(&c, e);
    f.gen++; /* the memory was freed and mapped again */
    e = get(&c, 0, 4 * PAGE);
    cr_assert_neq(e->rkey, rkey, "a stale registration was handed out");
    cr_assert_eq(c.stale, 1u);
    cr_assert_eq(f.regs, 2);
    cr_assert_eq(f.live, 1);
    gw__ib_mr_cache_put(&c, e);
    /* Memory that cannot be marked is not kept. */
    f.unmarkable = 1;
    gw__ib_mr_cache_put(&c, get(&c, 64 * PAGE, PAGE));
    cr_assert_eq(c.unmarked, 1u);
    cr_assert_eq(f.live, 1);
    gw__ib_mr_cache_fini(&c);
    cr_assert_eq(f.live, 0);
}

static void *map_at(void *hint, size_t len)
{
    void *p = mmap(hint, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (hint ? MAP_FIXED_NOREPLACE : 0), -1, 0);
    cr_assert_neq(p, MAP_FAILED, "mmap: %s", strerror(errno));
    memset(p, 1, len);
    return p;
}

static int real_mark(void *ctx, void *addr, size_t len, int *token)
{
    (void)ctx;
    return gw__ib_mem_mark(addr, len, token) ? -1 : 0;
}
static int real_check(void *ctx, const void *addr, size_t len, int token)
{
    (void)ctx;
    return gw__ib_mem_check(addr, len, token);
}
static int real_fresh(void *ctx, const void *addr, size_t len)
{
    (void)ctx;
    return gw__ib_mem_fresh(addr, len);
}

/* ---- several caches in one process ------------------------------------------- */

/* The mark as the kernel keeps it: one policy value, the memory's, the
 * same whichever cache set it. "marked" is whether the mapping at the
 * fake addresses bears it; a remap clears it. */
typedef struct shared_mem {
    int marked;
    fake_t regs; /* counts for both caches */
} shared_mem_t;

static int sm_reg(void *ctx, void *addr, size_t len, void **mr, uint32_t *lkey, uint32_t *rkey)
{
    return fake_reg(&((shared_mem_t *)ctx)->regs, addr, len, mr, lkey, rkey);
}
static void sm_dereg(void *ctx, void *mr) { fake_dereg(&((shared_mem_t *)ctx)->regs, mr); }
static int sm_mark(void *ctx, void *addr, size_t len, int *token)
{
    (void)addr;
    (void)len;
    ((shared_mem_t *)ctx)->marked = 1;
    *token = 4; /* MPOL_LOCAL, whoever marks */
    return 0;
}
static int sm_check(void *ctx, const void *addr, size_t len, int token)
{
    (void)addr;
    (void)len;
    return ((shared_mem_t *)ctx)->marked && token == 4;
}
static int sm_fresh(void *ctx, const void *addr, size_t len)
{
    (void)addr;
    (void)len;
    return !((shared_mem_t *)ctx)->marked;
}

/* Two caches (two communicators' transports, or two rails) over one
 * backend: B registers [p, p + len), the application frees that memory and
 * gets new memory at the same address (remap), A registers and marks it,
 * and B asks for the range again. Returns B's entry then, referenced, and
 * B's first key in *old_rkey. The caches stay for the caller to check and
 * finish. */
static gw_ib_mr_entry_t *remap_between(gw_ib_mr_cache_t *a, gw_ib_mr_cache_t *b,
                                       const gw_ib_mr_backend_t *be, void *p, size_t len,
                                       void (*remap)(void *ctx, void *p, size_t len), void *ctx,
                                       uint32_t *old_rkey)
{
    gw__ib_mr_cache_init(a, be, 1, 64, 0);
    gw__ib_mr_cache_init(b, be, 1, 64, 0);
    gw_ib_mr_entry_t *e = NULL;
    cr_assert_eq(gw__ib_mr_cache_get(b, p, len, &e), 0);
    *old_rkey = e->rkey;
    gw__ib_mr_cache_put(b, e);
    remap(ctx, p, len);
    cr_assert_eq(gw__ib_mr_cache_get(a, p, len, &e), 0);
    gw__ib_mr_cache_put(a, e);
    cr_assert_eq(gw__ib_mr_cache_get(b, p, len, &e), 0);
    return e;
}

static void sm_remap(void *ctx, void *p, size_t len)
{
    (void)p;
    (void)len;
    ((shared_mem_t *)ctx)->marked = 0; /* the new mapping bears no mark */
}

/* B's entry for the old memory passes the mark check once A marked the
 * new one; it must not be handed out, which the list of the process's
 * caches sees to (A announced the fresh range to B). */
Test(ib_mr_cache, another_cache_marking_a_new_mapping_is_heard)
{
    shared_mem_t m;
    memset(&m, 0, sizeof(m));
    gw_ib_mr_backend_t be = {.ctx = &m,
                             .reg = sm_reg,
                             .dereg = sm_dereg,
                             .mark = sm_mark,
                             .check = sm_check,
                             .fresh = sm_fresh};
    gw_ib_mr_cache_t a, b;
    uint32_t old_rkey;
    gw_ib_mr_entry_t *e = remap_between(&a, &b, &be, A(0), 4 * PAGE, sm_remap, &m, &old_rkey);
    cr_assert_eq(a.regs, 1u, "A did not register the new memory");
    cr_assert_neq(e->rkey, old_rkey, "cache B handed out its registration of the old memory");
    cr_assert_eq(m.regs.regs, 3, "B did not register the new memory");
    cr_assert_eq(b.foreign, 1u);
    cr_assert_eq(b.hits, 0u);
    gw__ib_mr_cache_put(&b, e);
    /* Memory that was marked already is not announced: A keeps its entry. */
    gw__ib_mr_cache_put(&a, get(&a, 0, 4 * PAGE));
    cr_assert_eq(a.hits, 1u);
    cr_assert_eq(a.foreign, 0u);
    gw__ib_mr_cache_fini(&a);
    /* A cache that left the list is told nothing, and tells nothing. */
    m.marked = 0;
    gw__ib_mr_cache_put(&b, get(&b, 64 * PAGE, PAGE));
    gw__ib_mr_cache_fini(&b);
    cr_assert_eq(m.regs.live, 0);
}

/* The same with the real marks (mbind/get_mempolicy) on real memory, as
 * free() and malloc() of a large block do it: munmap, mmap again at the
 * same address. */
static void real_remap(void *ctx, void *p, size_t len)
{
    (void)ctx;
    munmap(p, len);
    cr_assert_eq(map_at(p, len), p);
}

Test(ib_mr_cache, real_marks_across_two_caches)
{
    size_t len = 16 * PAGE;
    uint8_t *p = map_at(NULL, len);
    int token;
    int err = gw__ib_mem_mark(p, len, &token);
    if (err == ENOSYS || err == EPERM) {
        munmap(p, len);
        cr_skip_test("memory policies unavailable (%s)", strerror(err));
    }
    munmap(p, len);
    p = map_at(p, len);
    fake_t f;
    memset(&f, 0, sizeof(f));
    gw_ib_mr_backend_t be = {.ctx = &f,
                             .reg = fake_reg,
                             .dereg = fake_dereg,
                             .mark = real_mark,
                             .check = real_check,
                             .fresh = real_fresh};
    gw_ib_mr_cache_t a, b;
    uint32_t old_rkey;
    gw_ib_mr_entry_t *e = remap_between(&a, &b, &be, p, len, real_remap, NULL, &old_rkey);
    cr_assert_neq(e->rkey, old_rkey, "cache B handed out its registration of the unmapped memory");
    cr_assert_eq(b.foreign, 1u);
    gw__ib_mr_cache_put(&b, e);
    gw__ib_mr_cache_fini(&a);
    gw__ib_mr_cache_fini(&b);
    munmap(p, len);
}

/* ---- the real marks ------------------------------------------------------------ */

Test(ib_mr_cache, real_marks_notice_munmap_and_mmap)
{
    size_t len = 64 * PAGE;
    uint8_t *p = map_at(NULL, len + PAGE);
    munmap(p + len, PAGE);
    int token = -1;
    int err = gw__ib_mem_mark(p, len, &token);
    if (err == ENOSYS || err == EPERM) {
        munmap(p, len);
        cr_skip_test("this kernel or sandbox does not let us set memory policies (%s)",
                     strerror(err));
    }
    cr_assert_eq(err, 0, "mark: %s", strerror(err));
    cr_assert_eq(gw__ib_mem_check(p, len, token), 1, "a fresh mark holds");
    cr_assert_eq(gw__ib_mem_fresh(p, len), 0, "marked memory counts as fresh");
    cr_assert_eq(gw__ib_mem_check(p + PAGE, 2 * PAGE, token), 1, "inside the marked range");
    /* A neighbour mapped next to it does not pass for it. */
    uint8_t *q = map_at(p + len, PAGE);
    cr_assert_eq(gw__ib_mem_check(q, PAGE, token), 0);
    cr_assert_eq(gw__ib_mem_check(p, len + PAGE, token), 0);
    munmap(q, PAGE);
    /* What free() then malloc() of a large block does. */
    munmap(p, len);
    uint8_t *p2 = map_at(p, len);
    cr_assert_eq(p2, p);
    cr_assert_eq(gw__ib_mem_check(p2, len, token), 0, "the new mapping passed for the old one");
    cr_assert_eq(gw__ib_mem_fresh(p2, len), 1, "a new mapping does not count as fresh");
    /* Only the last pages replaced (a heap that shrank and grew back). */
    cr_assert_eq(gw__ib_mem_mark(p2, len, &token), 0);
    munmap(p2 + len - 4 * PAGE, 4 * PAGE);
    map_at(p2 + len - 4 * PAGE, 4 * PAGE);
    cr_assert_eq(gw__ib_mem_check(p2, len, token), 0, "the replaced tail went unnoticed");
    cr_assert_eq(gw__ib_mem_fresh(p2, len), 1, "a replaced tail does not count as fresh");
    cr_assert_eq(gw__ib_mem_fresh(p2, len - 4 * PAGE), 0);
    munmap(p2, len);
}

Test(ib_mr_cache, real_marks_through_malloc)
{
    /* Large blocks come from mmap and go back with munmap: the second block
     * very likely lands where the first was. */
    size_t len = 8u << 20;
    uint8_t *a = malloc(len);
    cr_assert_not_null(a);
    memset(a, 2, len);
    uintptr_t start = (uintptr_t)a & ~(PAGE - 1);
    size_t span = (((uintptr_t)a + len + PAGE - 1) & ~(PAGE - 1)) - start;
    int token;
    int err = gw__ib_mem_mark((void *)start, span, &token);
    if (err == ENOSYS || err == EPERM) {
        free(a);
        cr_skip_test("memory policies unavailable (%s)", strerror(err));
    }
    cr_assert_eq(err, 0);
    cr_assert_eq(gw__ib_mem_check((void *)start, span, token), 1);
    free(a);
    uint8_t *b = malloc(len);
    cr_assert_not_null(b);
    memset(b, 3, len);
    if ((uintptr_t)b == (uintptr_t)a)
        cr_assert_eq(gw__ib_mem_check((void *)start, span, token), 0,
                     "malloc returned the same address with new memory, and the mark held");
    free(b);
}

Test(ib_mr_cache, real_marks_keep_an_existing_policy)
{
    size_t len = 16 * PAGE;
    uint8_t *p = map_at(NULL, len);
    int token;
    int err = gw__ib_mem_mark(p, len, &token);
    if (err == ENOSYS || err == EPERM) {
        munmap(p, len);
        cr_skip_test("memory policies unavailable (%s)", strerror(err));
    }
    /* A second mark of the same memory sees our policy and keeps it. */
    int token2;
    cr_assert_eq(gw__ib_mem_mark(p, len, &token2), 0);
    cr_assert_eq(token2, token);
    /* A grown range, marked in part, is marked again as a whole. */
    uint8_t *q = map_at(NULL, 2 * len);
    cr_assert_eq(gw__ib_mem_mark(q, len, &token), 0);
    cr_assert_eq(gw__ib_mem_mark(q, 2 * len, &token2), 0);
    cr_assert_eq(gw__ib_mem_check(q, 2 * len, token2), 1);
    /* The application's own policy is kept and serves as the mark; one
     * that covers only part of the range leaves it unmarkable. */
    unsigned long node0 = 1;
    if (syscall(SYS_mbind, p, len / 2, 1UL /* MPOL_PREFERRED */, &node0, 2UL, 0U) == 0) {
        cr_assert_eq(gw__ib_mem_mark(p, len / 2, &token2), 0);
        cr_assert_eq(token2, 1);
        cr_assert_eq(gw__ib_mem_mark(p, len, &token2), EEXIST);
        int mode = -1;
        cr_assert_eq(syscall(SYS_get_mempolicy, &mode, NULL, 0UL, p, 2UL), 0);
        cr_assert_eq(mode, 1, "the application's policy was replaced");
    }
    munmap(p, len);
    munmap(q, 2 * len);
}
