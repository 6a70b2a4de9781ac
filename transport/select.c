/*
 * select.c - per-peer transport selection: the modes GW_TRANSPORT accepts,
 * the plan that gives every pair of ranks its transport, and the composite
 * address blob the plan is made from (contract in select.h; the mux that
 * carries out the plan is mux.c).
 *
 * Candidates are tried in a fixed order: shared memory for peers on this
 * host, then the network transports, fastest first. In "auto" mode every
 * transport that opens is offered (mux.c), and each pair takes the first one
 * both ends opened: in a cluster where only some hosts have RDMA, pairs of
 * RDMA hosts use verbs and the others TCP, decided per pair. Such a fall
 * back to something slower is never silent: every rank that has one says
 * so once, at WARN, naming the peers concerned (gw__select_warn_fallbacks).
 * A pair with no transport in common, or a forced transport that a pair
 * cannot use, is a configuration error that says so.
 *
 * The plan needs nothing but the composite blobs, which every rank has
 * identically after the bootstrap's all-gather: for the pair (a, b), shm
 * when both hosts ids are equal and both opened shm, else the first network
 * candidate both opened.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "transport/select.h"

#define SUBSYS "select"

/* In order of preference. */
static const gw_select_candidate_t candidates[] = {
    {GW_SEL_SHM, "shm", &gw__shm_transport_ops, 1},
    {GW_SEL_IB, "ib", &gw__ib_transport_ops, 0},
    {GW_SEL_TCP, "tcp", &gw__tcp_transport_ops, 0},
};
#define NCANDIDATES (sizeof(candidates) / sizeof(candidates[0]))

const gw_select_candidate_t *gw__select_candidates(size_t *n)
{
    *n = NCANDIDATES;
    return candidates;
}

static const struct {
    gw_select_mode_t mode;
    const char *name;
    gw_select_kind_t only; /* GW_SEL_NONE: auto */
} modes[] = {
    {GW_SELECT_AUTO, "auto", GW_SEL_NONE},
    {GW_SELECT_TCP, "tcp", GW_SEL_TCP},
    {GW_SELECT_SHM, "shm", GW_SEL_SHM},
    {GW_SELECT_IB, "ib", GW_SEL_IB},
};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

/* ---- names and modes ------------------------------------------------------ */

gw_status_t gw__select_mode_parse(const char *name, gw_select_mode_t *out)
{
    if (!name || !*name) {
        *out = GW_SELECT_AUTO;
        return GW_OK;
    }
    for (size_t i = 0; i < NMODES; i++) {
        if (strcasecmp(name, modes[i].name) == 0) {
            *out = modes[i].mode;
            return GW_OK;
        }
    }
    return GW_ERR_CONFIG;
}

const char *gw__select_mode_list(void) { return "auto, tcp, shm, ib"; }

const char *gw__select_mode_name(gw_select_mode_t mode)
{
    for (size_t i = 0; i < NMODES; i++)
        if (modes[i].mode == mode)
            return modes[i].name;
    return "unknown";
}

const char *gw__select_kind_name(gw_select_kind_t kind)
{
    switch (kind) {
    case GW_SEL_SHM:
        return "shm";
    case GW_SEL_TCP:
        return "tcp";
    case GW_SEL_IB:
        return "ib";
    default:
        return "none";
    }
}

gw_select_kind_t gw__select_mode_only(gw_select_mode_t mode)
{
    for (size_t i = 0; i < NMODES; i++)
        if (modes[i].mode == mode)
            return modes[i].only;
    return GW_SEL_NONE;
}

/* ---- the plan ------------------------------------------------------------------- */

static void kinds_str(uint32_t kinds, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NCANDIDATES; i++) {
        if (!(kinds & GW_SEL_BIT(candidates[i].kind)))
            continue;
        int w = snprintf(buf + n, cap - n, "%s%s", n ? "," : "", candidates[i].name);
        if (w < 0 || (size_t)w >= cap - n)
            return;
        n += (size_t)w;
    }
    if (n == 0)
        snprintf(buf, cap, "none");
}

/* The transport of a pair that both opened `common`: the first candidate
 * in it that may serve the pair (GW_SEL_NONE when none). */
static gw_select_kind_t pair_kind(uint32_t common, int same_host)
{
    for (size_t i = 0; i < NCANDIDATES; i++) {
        const gw_select_candidate_t *c = &candidates[i];
        if ((common & GW_SEL_BIT(c->kind)) && (!c->local_only || same_host))
            return c->kind;
    }
    return GW_SEL_NONE;
}

gw_status_t gw__select_plan(const gw_logger_t *lg, int rank, int size,
                            const gw_select_rank_t *ranks, gw_select_kind_t *route)
{
    const gw_select_rank_t *me = &ranks[rank];
    for (int p = 0; p < size; p++) {
        route[p] = GW_SEL_NONE;
        if (p == rank)
            continue;
        const gw_select_rank_t *peer = &ranks[p];
        if (peer->mode != me->mode) {
            GW_ERROR(lg, SUBSYS,
                     "rank %d runs with GW_TRANSPORT=%s but this rank with GW_TRANSPORT=%s: set "
                     "the same on every rank",
                     p, gw__select_mode_name(peer->mode), gw__select_mode_name(me->mode));
            return GW_ERR_CONFIG;
        }
        int same_host = peer->host_id == me->host_id;
        uint32_t common = peer->kinds & me->kinds;
        if (me->mode == GW_SELECT_SHM && !same_host) {
            GW_ERROR(lg, SUBSYS,
                     "GW_TRANSPORT=shm, but rank %d is on another host (host id %016llx, ours "
                     "%016llx): shared memory reaches only ranks on this host; use "
                     "GW_TRANSPORT=auto",
                     p, (unsigned long long)peer->host_id, (unsigned long long)me->host_id);
            return GW_ERR_CONFIG;
        }
        route[p] = pair_kind(common, same_host);
        if (route[p] == GW_SEL_NONE) {
            char mine[64], theirs[64];
            kinds_str(me->kinds, mine, sizeof(mine));
            kinds_str(peer->kinds, theirs, sizeof(theirs));
            GW_ERROR(lg, SUBSYS,
                     "no transport connects this rank (%s) with rank %d (%s, %s host): check "
                     "GW_TRANSPORT and the devices on both hosts",
                     mine, p, theirs, same_host ? "same" : "another");
            return GW_ERR_CONFIG;
        }
    }
    return GW_OK;
}

void gw__select_describe(const gw_select_kind_t *route, int size, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
#define EMIT(...)                                          \
    do {                                                   \
        int w__ = snprintf(buf + n, cap - n, __VA_ARGS__); \
        if (w__ < 0 || (size_t)w__ >= cap - n)             \
            return;                                        \
        n += (size_t)w__;                                  \
    } while (0)
    for (size_t i = 0; i < NCANDIDATES; i++) {
        gw_select_kind_t k = candidates[i].kind;
        int count = 0;
        for (int p = 0; p < size; p++)
            count += route[p] == k;
        if (count == 0)
            continue;
        EMIT("%s%s to rank%s ", n ? "; " : "", candidates[i].name, count > 1 ? "s" : "");
        int first = 1;
        for (int p = 0; p < size; p++) {
            if (route[p] != k || (p > 0 && route[p - 1] == k))
                continue;
            int q = p;
            while (q + 1 < size && route[q + 1] == k)
                q++;
            if (!first)
                EMIT(",");
            if (q == p)
                EMIT("%d", p);
            else if (q == p + 1)
                EMIT("%d,%d", p, q);
            else
                EMIT("%d-%d", p, q);
            first = 0;
        }
    }
#undef EMIT
}

/* The network transport faster than `used` that only one end of a pair
 * opened (`either` has it, the pair's common set does not), or GW_SEL_NONE. */
static gw_select_kind_t missed_kind(uint32_t either, gw_select_kind_t used)
{
    for (size_t i = 0; i < NCANDIDATES; i++) {
        const gw_select_candidate_t *c = &candidates[i];
        if (c->kind == used)
            break;
        if (!c->local_only && (either & GW_SEL_BIT(c->kind)))
            return c->kind;
    }
    return GW_SEL_NONE;
}

/* "HEAD ib TAIL: tcp to ranks 2,3" into out. */
static void say_missed(char *out, size_t cap, const char *head, gw_select_kind_t missed,
                       const char *tail, const gw_select_kind_t *peers, int size)
{
    char list[192];
    gw__select_describe(peers, size, list, sizeof(list));
    snprintf(out, cap, "%s %s%s: %s", head, gw__select_kind_name(missed), tail, list);
}

void gw__select_warn_fallbacks(const gw_logger_t *lg, int rank, int size,
                               const gw_select_rank_t *ranks, const gw_select_kind_t *route)
{
    const gw_select_rank_t *me = &ranks[rank];
    /* theirs[p]: peer p lacks a faster transport this rank has; ours[p]:
     * this rank lacks one p has. Both keep the transport used, so that
     * gw__select_describe can name them. */
    gw_select_kind_t *theirs = calloc((size_t)size, sizeof(*theirs));
    gw_select_kind_t *ours = calloc((size_t)size, sizeof(*ours));
    gw_select_kind_t missed_theirs = GW_SEL_NONE, missed_ours = GW_SEL_NONE;
    if (!theirs || !ours)
        goto out; /* a warning is worth no failure */
    for (int p = 0; p < size; p++) {
        if (p == rank || route[p] == GW_SEL_NONE || ranks[p].host_id == me->host_id)
            continue;
        gw_select_kind_t missed = missed_kind(me->kinds | ranks[p].kinds, route[p]);
        if (missed == GW_SEL_NONE)
            continue;
        if (me->kinds & GW_SEL_BIT(missed)) {
            theirs[p] = route[p];
            missed_theirs = missed;
        } else {
            ours[p] = route[p];
            missed_ours = missed;
        }
    }
    if (missed_theirs == GW_SEL_NONE && missed_ours == GW_SEL_NONE)
        goto out;
    char a[320] = "", b[320] = "";
    if (missed_theirs != GW_SEL_NONE)
        say_missed(a, sizeof(a), "peers on other hosts without", missed_theirs,
                   ", which this rank has (their logs say why)", theirs, size);
    if (missed_ours != GW_SEL_NONE)
        say_missed(b, sizeof(b), "this rank has no", missed_ours,
                   " (GW_DEBUG=INFO says why), which these peers on other hosts have", ours, size);
    GW_WARN(lg, SUBSYS, "rank %d falls back to a slower transport for some pairs: %s%s%s", rank, a,
            *a && *b ? "; " : "", b);
out:
    free(theirs);
    free(ours);
}

/* ---- which transports the whole job uses ----------------------------------------- */

/* The kinds masks (GW_SEL_BIT()s, below 16) the ranks of one host opened,
 * and how many ranks opened each. */
#define KIND_MASKS 16

static int by_host(const void *a, const void *b)
{
    const gw_select_rank_t *x = a, *y = b;
    if (x->host_id != y->host_id)
        return x->host_id < y->host_id ? -1 : 1;
    return (x->kinds > y->kinds) - (x->kinds < y->kinds);
}

gw_status_t gw__select_links(int size, const gw_select_rank_t *ranks, uint32_t *intra,
                             uint32_t *inter)
{
    *intra = *inter = 0;
    if (size < 2)
        return GW_OK;
    gw_select_rank_t *sorted = malloc((size_t)size * sizeof(*sorted));
    if (!sorted)
        return GW_ERR_NO_MEMORY;
    memcpy(sorted, ranks, (size_t)size * sizeof(*sorted));
    qsort(sorted, (size_t)size, sizeof(*sorted), by_host);
    /* Per mask: on how many hosts (up to 2) and the first of them. */
    int hosts_with[KIND_MASKS] = {0};
    uint64_t first_host[KIND_MASKS] = {0};
    for (int lo = 0, hi; lo < size; lo = hi) {
        int count[KIND_MASKS] = {0};
        for (hi = lo; hi < size && sorted[hi].host_id == sorted[lo].host_id; hi++)
            count[sorted[hi].kinds % KIND_MASKS]++;
        for (unsigned a = 0; a < KIND_MASKS; a++) {
            if (!count[a])
                continue;
            if (hosts_with[a]++ == 0)
                first_host[a] = sorted[lo].host_id;
            for (unsigned b = a; b < KIND_MASKS; b++)
                if (count[b] && (b != a || count[a] > 1))
                    *intra |= GW_SEL_BIT(pair_kind(a & b, 1));
        }
    }
    for (unsigned a = 0; a < KIND_MASKS; a++)
        for (unsigned b = a; b < KIND_MASKS; b++) {
            /* A pair of ranks on two hosts with these masks exists unless
             * both masks are on one host only, the same one. */
            if (!hosts_with[a] || !hosts_with[b])
                continue;
            if (a == b ? hosts_with[a] < 2
                       : hosts_with[a] < 2 && hosts_with[b] < 2 && first_host[a] == first_host[b])
                continue;
            *inter |= GW_SEL_BIT(pair_kind(a & b, 0));
        }
    free(sorted);
    *intra &= ~GW_SEL_BIT(GW_SEL_NONE);
    *inter &= ~GW_SEL_BIT(GW_SEL_NONE);
    return GW_OK;
}

/* ---- composite blob --------------------------------------------------------------- */

gw_status_t gw__select_blob_decode(const uint8_t *b, gw_select_blob_t *v)
{
    uint32_t magic;
    memcpy(&magic, b, 4);
    if (magic != GW_SELECT_ADDR_MAGIC || b[4] != GW_SELECT_ADDR_VERSION)
        return GW_ERR_PROTOCOL;
    memset(v, 0, sizeof(*v));
    v->mode = (gw_select_mode_t)b[5];
    memcpy(&v->host_id, b + GW_SELECT_ADDR_HOST_OFF, 8);
    size_t off = GW_SELECT_ADDR_HDR;
    for (int e = 0; e < b[6]; e++) {
        if (off + 4 > GW_TRANSPORT_ADDR_MAX)
            return GW_ERR_PROTOCOL;
        uint8_t kind = b[off];
        uint16_t len;
        memcpy(&len, b + off + 2, 2);
        off += 4;
        if (kind == GW_SEL_NONE || kind > GW_SEL_IB || off + len > GW_TRANSPORT_ADDR_MAX ||
            (v->kinds & GW_SEL_BIT(kind)))
            return GW_ERR_PROTOCOL;
        v->kinds |= GW_SEL_BIT(kind);
        v->sub[kind] = b + off;
        v->sub_len[kind] = len;
        off += len;
    }
    return GW_OK;
}

static size_t trimmed_len(const uint8_t *blob)
{
    size_t n = GW_TRANSPORT_ADDR_MAX;
    while (n > 0 && blob[n - 1] == 0)
        n--;
    return n;
}

gw_status_t gw__select_blob_encode(const gw_logger_t *lg, gw_select_mode_t mode, uint64_t host_id,
                                   int n, const gw_select_kind_t *kinds,
                                   const uint8_t *const *blobs, uint8_t addr[GW_TRANSPORT_ADDR_MAX])
{
    memset(addr, 0, GW_TRANSPORT_ADDR_MAX);
    uint32_t magic = GW_SELECT_ADDR_MAGIC;
    memcpy(addr, &magic, 4);
    addr[4] = GW_SELECT_ADDR_VERSION;
    addr[5] = (uint8_t)mode;
    addr[6] = (uint8_t)n;
    memcpy(addr + GW_SELECT_ADDR_HOST_OFF, &host_id, 8);
    size_t off = GW_SELECT_ADDR_HDR;
    for (int i = 0; i < n; i++) {
        size_t len = trimmed_len(blobs[i]);
        if (off + 4 + len > GW_TRANSPORT_ADDR_MAX) {
            GW_ERROR(lg, SUBSYS,
                     "the address of transport %s (%zu bytes) does not fit the %d bytes left of "
                     "the address blob (GW_TRANSPORT_ADDR_MAX): choose fewer transports with "
                     "GW_TRANSPORT",
                     gw__select_kind_name(kinds[i]), len, (int)(GW_TRANSPORT_ADDR_MAX - off - 4));
            return GW_ERR_CONFIG;
        }
        addr[off] = (uint8_t)kinds[i];
        uint16_t l16 = (uint16_t)len;
        memcpy(addr + off + 2, &l16, 2);
        memcpy(addr + off + 4, blobs[i], len);
        off += 4 + len;
    }
    return GW_OK;
}
