/*
 * topk_select.c - the k largest |x| without sorting, by a sampled threshold
 * (as Deep Gradient Compression does).
 *
 * Sorting n magnitudes costs O(n log n) and touches memory all over; the
 * codec only needs the set of the k largest. So:
 *  1. Draw a random sample of S magnitudes and pick the one that about
 *     1.3 k/n of the sample exceeds: a threshold that, with high probability,
 *     a little more than k elements of the whole buffer reach.
 *  2. One streaming pass collects the candidates at or above it (indices,
 *     in order): that pass is the only O(n) work and it vectorises poorly
 *     only in its rare taken branch.
 *  3. Among the candidates (about 1.3 k), a linear-time selection finds the
 *     exact k-th largest magnitude T; the answer is every candidate above T
 *     and, for ties at T, the first ones by index until there are k.
 * If the sample was unlucky and fewer than k elements reach the threshold,
 * the rank in the sample is doubled and the pass repeated; if too many reach
 * it (more than the candidate buffer), or for small buffers and large k,
 * the selection runs exactly over all n magnitudes instead. Either way the
 * result is the exact top k: sampling only changes the cost.
 *
 * Magnitudes are compared as the integers |x|'s bit patterns form, which
 * order exactly like the values for finite floats and need no float compare.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/compress/codec.h"
#include "collectives/compress/topk_select.h"

/* Below this many elements, or when k is more than 1/EXACT_FRACTION of n,
 * exact selection over everything is as cheap as sampling. */
#define SMALL_N 65536
#define EXACT_FRACTION 8
/* The sample holds at least this many elements and enough that about
 * SAMPLE_HITS of them are expected above the threshold. */
#define SAMPLE_MIN 4096
#define SAMPLE_HITS 256

static gw_status_t arena_get(gw__cz_arena_t *a, size_t len, void **out)
{
    if (len > a->len || !a->buf) {
        void *p = NULL;
        if (posix_memalign(&p, 64, len ? len : 64) != 0)
            return GW_ERR_NO_MEMORY;
        free(a->buf);
        a->buf = p;
        a->len = len ? len : 64;
    }
    *out = a->buf;
    return GW_OK;
}

static void swap(uint32_t *a, size_t i, size_t j)
{
    uint32_t t = a[i];
    a[i] = a[j];
    a[j] = t;
}

uint32_t gw__cz_select_nth(uint32_t *a, size_t n, size_t nth, uint32_t key)
{
    size_t lo = 0, hi = n; /* the answer is in a[lo..hi) */
    uint32_t round = 0;
    while (hi - lo > 16) {
        /* Median of three random elements: expected linear time on any input. */
        size_t len = hi - lo;
        size_t p0 = lo + (size_t)(((uint64_t)gw__cz_rand32(key, round * 3) * len) >> 32);
        size_t p1 = lo + (size_t)(((uint64_t)gw__cz_rand32(key, round * 3 + 1) * len) >> 32);
        size_t p2 = lo + (size_t)(((uint64_t)gw__cz_rand32(key, round * 3 + 2) * len) >> 32);
        round++;
        uint32_t v0 = a[p0], v1 = a[p1], v2 = a[p2];
        uint32_t pivot =
            v0 < v1 ? (v1 < v2 ? v1 : (v0 < v2 ? v2 : v0)) : (v0 < v2 ? v0 : (v1 < v2 ? v2 : v1));
        /* Three-way partition: [lo, lt) < pivot, [lt, gt) == pivot, [gt, hi) >. */
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            if (a[i] < pivot)
                swap(a, lt++, i++);
            else if (a[i] > pivot)
                swap(a, i, --gt);
            else
                i++;
        }
        if (nth < lt)
            hi = lt;
        else if (nth >= gt)
            lo = gt;
        else
            return pivot;
    }
    /* Insertion sort of the last few. */
    for (size_t i = lo + 1; i < hi; i++) {
        uint32_t v = a[i];
        size_t j = i;
        while (j > lo && a[j - 1] > v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
    return a[nth];
}

/* Take from the index list cand[0..m) (increasing) those with magnitude
 * above t, and the first ones equal to t until k are taken. */
static void pick(const float *x, const uint32_t *cand, size_t m, uint32_t t, size_t k,
                 uint32_t *idx)
{
    size_t above = 0;
    for (size_t j = 0; j < m; j++)
        above += gw__cz_absbits(x[cand[j]]) > t;
    size_t ties = k - above, out = 0;
    for (size_t j = 0; j < m && out < k; j++) {
        uint32_t a = gw__cz_absbits(x[cand[j]]);
        if (a > t || (a == t && ties > 0)) {
            ties -= a == t;
            idx[out++] = cand[j];
        }
    }
}

/* Exact: the k-th largest of all n magnitudes, then one pass. */
static gw_status_t exact(const float *x, size_t n, size_t k, uint32_t key, gw__cz_arena_t *arena,
                         uint32_t *idx)
{
    void *mem;
    if (arena_get(arena, n * sizeof(uint32_t), &mem) != GW_OK)
        return GW_ERR_NO_MEMORY;
    uint32_t *keys = mem;
    for (size_t i = 0; i < n; i++)
        keys[i] = gw__cz_absbits(x[i]);
    uint32_t t = gw__cz_select_nth(keys, n, n - k, key);
    size_t above = 0;
    for (size_t i = 0; i < n; i++)
        above += gw__cz_absbits(x[i]) > t;
    size_t ties = k - above, out = 0;
    for (size_t i = 0; i < n && out < k; i++) {
        uint32_t a = gw__cz_absbits(x[i]);
        if (a > t || (a == t && ties > 0)) {
            ties -= a == t;
            idx[out++] = (uint32_t)i;
        }
    }
    return GW_OK;
}

/* Indices of x with magnitude >= t, in order, at most cap of them; returns
 * how many there are in all (possibly more than cap). */
GW__CZ_HOT static size_t scan(const float *x, size_t n, uint32_t t, uint32_t *cand, size_t cap)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (gw__cz_absbits(x[i]) >= t) {
            if (m < cap)
                cand[m] = (uint32_t)i;
            m++;
        }
    }
    return m;
}

gw_status_t gw__cz_topk_select(const float *x, size_t n, size_t k, uint32_t key,
                               gw__cz_arena_t *arena, uint32_t *idx, int *path)
{
    if (path)
        *path = 0;
    if (k >= n) {
        for (size_t i = 0; i < n; i++)
            idx[i] = (uint32_t)i;
        return GW_OK;
    }
    size_t s = (size_t)((double)SAMPLE_HITS * (double)n / (double)k);
    s = s < SAMPLE_MIN ? SAMPLE_MIN : s;
    if (n < SMALL_N || k > n / EXACT_FRACTION || s > n / 4)
        return exact(x, n, k, key, arena, idx);

    /* Arena: sample keys (s), candidate indices (cap), candidate keys (cap). */
    size_t cap = 2 * k + 1024;
    void *mem;
    if (arena_get(arena, (s + 2 * cap) * sizeof(uint32_t), &mem) != GW_OK)
        return GW_ERR_NO_MEMORY;
    uint32_t *sample = mem, *cand = sample + s, *ckeys = cand + cap;

    /* Rank (from the top) of the threshold in the sample: 1.3 times the
     * expected share of k, plus a few for small samples. */
    size_t want = (size_t)(1.3 * (double)s * (double)k / (double)n) + 8;
    for (size_t j = 0; j < s; j++) {
        size_t i = (size_t)(((uint64_t)gw__cz_rand32(key ^ 0x5bd1e995u, (uint32_t)j) * n) >> 32);
        sample[j] = gw__cz_absbits(x[i]);
    }
    for (int attempt = 0; attempt < 3 && want <= s; attempt++, want *= 2) {
        uint32_t t = gw__cz_select_nth(sample, s, s - want, key);
        size_t m = scan(x, n, t, cand, cap);
        if (m > cap)
            break; /* far too many reach it (many ties): go exact */
        if (m < k)
            continue;
        for (size_t j = 0; j < m; j++)
            ckeys[j] = gw__cz_absbits(x[cand[j]]);
        uint32_t tk = gw__cz_select_nth(ckeys, m, m - k, key);
        pick(x, cand, m, tk, k, idx);
        if (path)
            *path = attempt == 0 ? 1 : 2;
        return GW_OK;
    }
    return exact(x, n, k, key, arena, idx);
}
