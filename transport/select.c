/*
 * select.c - per-peer transport selection, and the mux transport that
 * routes each peer to the sub-transport chosen for it (contract in
 * select.h).
 *
 * Candidates are tried in a fixed order: shared memory for peers on this
 * host, then the network transports, fastest first. In "auto" mode only
 * the first network transport that opens is used, so a job never silently
 * mixes, say, TCP and RDMA between hosts; a pair of ranks that ended up
 * with no transport in common (one has an RDMA device, the other not) is a
 * configuration error that says so, not a quiet fall back to something
 * slower.
 *
 * The plan needs nothing but the composite blobs, which every rank has
 * identically after the bootstrap's all-gather: for the pair (a, b), shm
 * when both hosts ids are equal and both opened shm, else the first network
 * candidate both opened. Each sub-transport is then connected with a blob
 * array in which peers it does not serve are all-zero (the "not mine, skip"
 * convention of transport.h), shared memory first: its peers are all on
 * this host and also connect shared memory first, so nobody waits in a
 * network connect() for a peer that is still busy with shared memory.
 *
 * Routing. isend/irecv go to the peer's sub-transport. progress() must keep
 * every sub-transport moving without letting one block while another has
 * work: each is first run without waiting; when nothing moved and the
 * caller may wait, a single busy sub-transport (judged by the requests the
 * mux has handed it that are not complete yet) gets the whole wait, since
 * it can block efficiently itself (poll() for TCP, spin/yield/futex for
 * shared memory). With several busy, the mux alternates non-blocking rounds,
 * spinning, then yielding, then letting the last (network) one sleep in
 * poll() for a millisecond at a time.
 *
 * A failure of one sub-transport breaks the mux: the others are aborted at
 * once (telling their peers, as the communicator would anyway), so that
 * every pending request completes and the whole job learns of it.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/clock.h"
#include "transport/select.h"

#define SUBSYS "select"
#define MUX_MAX_SUBS 3
#define MUX_SPINS 64
#define MUX_YIELD_NS (2LL * 1000000)



typedef struct candidate {
    gw_select_kind_t kind;
    const char *name;
    const gw_transport_ops_t *ops;
    int local_only; /* serves only ranks on this host */
} candidate_t;

/* In order of preference. */
static const candidate_t candidates[] = {
    {GW_SEL_SHM, "shm", &gw__shm_transport_ops, 1},
    {GW_SEL_IB, "ib", &gw__ib_transport_ops, 0},
    {GW_SEL_TCP, "tcp", &gw__tcp_transport_ops, 0},
};
#define NCANDIDATES (sizeof(candidates) / sizeof(candidates[0]))

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
    case GW_SEL_SHM: return "shm";
    case GW_SEL_TCP: return "tcp";
    case GW_SEL_IB: return "ib";
    default: return "none";
    }
}

static gw_select_kind_t mode_only(gw_select_mode_t mode)
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
        for (size_t i = 0; i < NCANDIDATES && route[p] == GW_SEL_NONE; i++) {
            const candidate_t *c = &candidates[i];
            if (!(common & GW_SEL_BIT(c->kind)) || (c->local_only && !same_host))
                continue;
            route[p] = c->kind;
        }
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
#define EMIT(...)                                                                                  \
    do {                                                                                           \
        int w__ = snprintf(buf + n, cap - n, __VA_ARGS__);                                         \
        if (w__ < 0 || (size_t)w__ >= cap - n)                                                     \
            return;                                                                                \
        n += (size_t)w__;                                                                          \
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

/* ---- composite blob --------------------------------------------------------------- */

typedef struct blob_view {
    uint64_t host_id;
    gw_select_mode_t mode;
    uint32_t kinds;
    const uint8_t *sub[GW_SEL_IB + 1]; /* each transport's blob in it */
    size_t sub_len[GW_SEL_IB + 1];
} blob_view_t;

static gw_status_t blob_decode(const uint8_t *b, blob_view_t *v)
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

/* ---- the mux -------------------------------------------------------------------- */

typedef struct mux_sub {
    const candidate_t *c;
    gw_transport_t *t;
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    int used;
    /* Requests handed to it that were not complete when last looked at. */
    gw_request_t **pend;
    int npend, cap;
} mux_sub_t;

typedef struct gw_mux {
    gw_transport_t base;
    gw_select_mode_t mode;
    uint64_t host_id;
    mux_sub_t subs[MUX_MAX_SUBS];
    int nsubs;
    int *route; /* peer -> index in subs, -1 for ourselves */
    uint64_t completed;
    int connected;
    gw_status_t failed;
} gw_mux_t;

static const gw_transport_ops_t mux_ops[5]; /* at the end of the file */
#define NMUX_OPS (sizeof(mux_ops) / sizeof(mux_ops[0]))

static int is_mux(const gw_transport_t *t)
{
    return t && t->ops >= &mux_ops[0] && t->ops < &mux_ops[NMUX_OPS];
}

static gw_mux_t *mux_of(gw_transport_t *t) { return (gw_mux_t *)t; }

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void mux_free(gw_mux_t *m)
{
    for (int i = 0; i < m->nsubs; i++) {
        if (m->subs[i].t)
            m->subs[i].c->ops->close(m->subs[i].t);
        free(m->subs[i].pend);
    }
    free(m->route);
    free(m);
}

static size_t trimmed_len(const uint8_t *blob)
{
    size_t n = GW_TRANSPORT_ADDR_MAX;
    while (n > 0 && blob[n - 1] == 0)
        n--;
    return n;
}

static gw_status_t encode_blob(gw_mux_t *m, uint8_t addr[GW_TRANSPORT_ADDR_MAX])
{
    memset(addr, 0, GW_TRANSPORT_ADDR_MAX);
    uint32_t magic = GW_SELECT_ADDR_MAGIC;
    memcpy(addr, &magic, 4);
    addr[4] = GW_SELECT_ADDR_VERSION;
    addr[5] = (uint8_t)m->mode;
    addr[6] = (uint8_t)m->nsubs;
    memcpy(addr + GW_SELECT_ADDR_HOST_OFF, &m->host_id, 8);
    size_t off = GW_SELECT_ADDR_HDR;
    for (int i = 0; i < m->nsubs; i++) {
        size_t len = trimmed_len(m->subs[i].blob);
        if (off + 4 + len > GW_TRANSPORT_ADDR_MAX) {
            GW_ERROR(m->base.log, SUBSYS,
                     "the address of transport %s (%zu bytes) does not fit the %d bytes left of "
                     "the address blob (GW_TRANSPORT_ADDR_MAX): choose fewer transports with "
                     "GW_TRANSPORT",
                     m->subs[i].c->name, len, (int)(GW_TRANSPORT_ADDR_MAX - off - 4));
            return GW_ERR_CONFIG;
        }
        addr[off] = (uint8_t)m->subs[i].c->kind;
        uint16_t l16 = (uint16_t)len;
        memcpy(addr + off + 2, &l16, 2);
        memcpy(addr + off + 4, m->subs[i].blob, len);
        off += 4 + len;
    }
    return GW_OK;
}

gw_status_t gw__select_open(const gw_transport_params_t *params, gw_select_mode_t mode,
                            gw_transport_t **out, uint8_t addr[GW_TRANSPORT_ADDR_MAX])
{
    if (!params || !out || !addr || params->size < 1 || params->rank < 0 ||
        params->rank >= params->size)
        return GW_ERR_INVALID_ARG;
    const gw_logger_t *lg = params->log;
    gw_mux_t *m = calloc(1, sizeof(*m));
    if (!m || !(m->route = calloc((size_t)params->size, sizeof(*m->route)))) {
        GW_ERROR(lg, SUBSYS, "out of memory for the transport of %d ranks", params->size);
        free(m);
        return GW_ERR_NO_MEMORY;
    }
    m->base.ops = &mux_ops[0];
    m->base.log = lg;
    m->base.rank = params->rank;
    m->base.size = params->size;
    m->mode = mode;
    gw_status_t st = gw__host_id(lg, &m->host_id);
    if (st != GW_OK)
        goto err_free;
    gw_select_kind_t only = mode_only(mode);
    /* A transport asked for by name reports a missing device as an error. */
    gw_transport_params_t sub_params = *params;
    sub_params.forced = only != GW_SEL_NONE;
    int have_network = 0;
    for (size_t i = 0; i < NCANDIDATES; i++) {
        const candidate_t *c = &candidates[i];
        if (only != GW_SEL_NONE ? c->kind != only : (!c->local_only && have_network))
            continue;
        mux_sub_t *s = &m->subs[m->nsubs];
        st = c->ops->open(&sub_params, &s->t, s->blob);
        if (st != GW_OK) {
            s->t = NULL;
            /* In auto mode a missing local transport only costs speed, so
             * the job goes on, and says so; a network transport that finds
             * no device (NOT_FOUND, UNSUPPORTED: it logged why) leaves the
             * choice to the next one. A forced transport, the last network
             * one, or any other failure (a bad setting) ends the job. */
            if (only == GW_SEL_NONE && c->local_only) {
                GW_WARN(lg, SUBSYS, "transport %s did not open (%s): peers on this host use the "
                                    "network transport",
                        c->name, gw_status_str(st));
                continue;
            }
            if (only == GW_SEL_NONE && i + 1 < NCANDIDATES &&
                (st == GW_ERR_NOT_FOUND || st == GW_ERR_UNSUPPORTED))
                continue;
            goto err_free;
        }
        s->c = c;
        m->nsubs++;
        have_network |= !c->local_only;
    }
    st = encode_blob(m, addr);
    if (st != GW_OK)
        goto err_free;
    *out = &m->base;
    return GW_OK;

err_free:
    mux_free(m);
    return st;
}

static gw_status_t mux_open_auto(const gw_transport_params_t *params, gw_transport_t **out,
                                 uint8_t addr[GW_TRANSPORT_ADDR_MAX])
{
    return gw__select_open(params, GW_SELECT_AUTO, out, addr);
}

static int sub_index(const gw_mux_t *m, gw_select_kind_t kind)
{
    for (int i = 0; i < m->nsubs; i++)
        if (m->subs[i].c->kind == kind)
            return i;
    return -1;
}

/* Decode every rank's composite blob; the plan's view of each rank. */
static gw_status_t read_blobs(gw_mux_t *m, const uint8_t *all, blob_view_t *views,
                              gw_select_rank_t *ranks)
{
    for (int r = 0; r < m->base.size; r++) {
        if (blob_decode(all + (size_t)r * GW_TRANSPORT_ADDR_MAX, &views[r]) != GW_OK) {
            GW_ERROR(m->base.log, SUBSYS,
                     "the address of rank %d is not a gradwire transport address (version %u): "
                     "do all ranks run the same gradwire?",
                     r, GW_SELECT_ADDR_VERSION);
            return GW_ERR_PROTOCOL;
        }
        ranks[r].host_id = views[r].host_id;
        ranks[r].mode = views[r].mode;
        ranks[r].kinds = views[r].kinds;
    }
    return GW_OK;
}

/* Connect sub-transport s to the peers routed to it. */
static gw_status_t connect_sub(gw_mux_t *m, int s, const gw_select_kind_t *route,
                               const blob_view_t *views)
{
    gw_select_kind_t kind = m->subs[s].c->kind;
    size_t size = (size_t)m->base.size;
    uint8_t *all = calloc(size, GW_TRANSPORT_ADDR_MAX);
    if (!all) {
        GW_ERROR(m->base.log, SUBSYS, "out of memory for %zu addresses", size);
        return GW_ERR_NO_MEMORY;
    }
    for (size_t r = 0; r < size; r++)
        if (route[r] == kind || (int)r == m->base.rank)
            memcpy(all + r * GW_TRANSPORT_ADDR_MAX, views[r].sub[kind], views[r].sub_len[kind]);
    gw_status_t st = m->subs[s].c->ops->connect(m->subs[s].t, all);
    free(all);
    return st;
}

static const gw_transport_ops_t *ops_named(const char *name)
{
    for (size_t i = 1; i < NMUX_OPS; i++)
        if (strcmp(mux_ops[i].name, name) == 0)
            return &mux_ops[i];
    return &mux_ops[0];
}

static gw_status_t mux_connect(gw_transport_t *base, const uint8_t *all)
{
    gw_mux_t *m = mux_of(base);
    if (!m || !all)
        return GW_ERR_INVALID_ARG;
    if (m->connected) {
        GW_ERROR(m->base.log, SUBSYS, "connect() called twice");
        return GW_ERR_INVALID_ARG;
    }
    int size = m->base.size;
    blob_view_t *views = calloc((size_t)size, sizeof(*views));
    gw_select_rank_t *ranks = calloc((size_t)size, sizeof(*ranks));
    gw_select_kind_t *route = calloc((size_t)size, sizeof(*route));
    gw_status_t st = GW_ERR_NO_MEMORY;
    if (!views || !ranks || !route) {
        GW_ERROR(m->base.log, SUBSYS, "out of memory for %d ranks", size);
        goto out;
    }
    st = read_blobs(m, all, views, ranks);
    if (st == GW_OK)
        st = gw__select_plan(m->base.log, m->base.rank, size, ranks, route);
    if (st != GW_OK)
        goto out;
    for (int r = 0; r < size; r++) {
        m->route[r] = route[r] == GW_SEL_NONE ? -1 : sub_index(m, route[r]);
        if (m->route[r] >= 0)
            m->subs[m->route[r]].used = 1;
    }
    /* Transports in candidate order: shared memory first (see the top). */
    char name[32] = "";
    for (int s = 0; s < m->nsubs; s++) {
        if (!m->subs[s].used) {
            GW_TRACE(m->base.log, SUBSYS, "transport %s carries no peer: closing it",
                     m->subs[s].c->name);
            m->subs[s].c->ops->close(m->subs[s].t);
            m->subs[s].t = NULL;
            continue;
        }
        st = connect_sub(m, s, route, views);
        if (st != GW_OK)
            goto out;
        size_t n = strlen(name);
        snprintf(name + n, sizeof(name) - n, "%s%s", n ? "+" : "", m->subs[s].c->name);
    }
    char plan[512];
    gw__select_describe(route, size, plan, sizeof(plan));
    GW_INFO(m->base.log, SUBSYS, "rank %d: %s", m->base.rank, plan);
    m->base.ops = ops_named(name);
    m->connected = 1;
out:
    free(route);
    free(ranks);
    free(views);
    return st;
}

gw_transport_t *gw__select_unwrap(gw_transport_t *t)
{
    if (!is_mux(t))
        return t;
    gw_mux_t *m = mux_of(t);
    if (!m->connected)
        return t;
    int used = -1, n = 0;
    for (int s = 0; s < m->nsubs; s++)
        if (m->subs[s].t) {
            used = s;
            n++;
        }
    if (n != 1)
        return t;
    gw_transport_t *sub = m->subs[used].t;
    m->subs[used].t = NULL;
    mux_free(m);
    return sub;
}

/* ---- routing and progress ------------------------------------------------------------ */

/* Forget the requests of sub-transport s that completed. Must run before
 * control returns to the caller after any call into s: once the caller has
 * seen a request complete it may release it. */
static void prune(gw_mux_t *m, mux_sub_t *s)
{
    for (int i = 0; i < s->npend;) {
        if (s->pend[i]->complete) {
            s->pend[i] = s->pend[--s->npend];
            m->completed++;
        } else {
            i++;
        }
    }
}

static void prune_all(gw_mux_t *m)
{
    for (int s = 0; s < m->nsubs; s++)
        prune(m, &m->subs[s]);
}

/* Sub-transport s failed with st: abort the others so that every request
 * completes and their peers learn of it too. */
static gw_status_t mux_fail(gw_mux_t *m, int s, gw_status_t st)
{
    if (m->failed == GW_OK) {
        m->failed = st;
        for (int i = 0; i < m->nsubs; i++)
            if (i != s && m->subs[i].t)
                m->subs[i].c->ops->abort(m->subs[i].t, st);
    }
    prune_all(m);
    return m->failed;
}

static gw_status_t post(gw_transport_t *base, gw_request_t *req, int send)
{
    gw_mux_t *m = mux_of(base);
    if (!m || !req)
        return GW_ERR_INVALID_ARG;
    if (!m->connected || req->peer < 0 || req->peer >= m->base.size || m->route[req->peer] < 0) {
        GW_ERROR(m->base.log, SUBSYS, "%s: invalid request (peer %d of %d ranks, we are %d%s)",
                 send ? "isend" : "irecv", req->peer, m->base.size, m->base.rank,
                 m->connected ? "" : ", not connected");
        return GW_ERR_INVALID_ARG;
    }
    int si = m->route[req->peer];
    mux_sub_t *s = &m->subs[si];
    if (s->npend == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        gw_request_t **p = realloc(s->pend, (size_t)cap * sizeof(*p));
        if (!p) {
            GW_ERROR(m->base.log, SUBSYS, "out of memory for %d pending requests", cap);
            return GW_ERR_NO_MEMORY;
        }
        s->pend = p;
        s->cap = cap;
    }
    gw_status_t st = send ? s->c->ops->isend(s->t, req) : s->c->ops->irecv(s->t, req);
    if (st == GW_OK && !req->complete)
        s->pend[s->npend++] = req;
    if (st != GW_OK && st != GW_ERR_INVALID_ARG)
        return mux_fail(m, si, st); /* the sub-transport broke */
    prune(m, s);
    return st;
}

static gw_status_t mux_isend(gw_transport_t *base, gw_request_t *req) { return post(base, req, 1); }
static gw_status_t mux_irecv(gw_transport_t *base, gw_request_t *req) { return post(base, req, 0); }

/* Completed requests and bytes moved so far, to tell a round that did
 * something from one that did not. */
static uint64_t moved(const gw_mux_t *m)
{
    uint64_t n = m->completed;
    for (int s = 0; s < m->nsubs; s++)
        for (int i = 0; i < m->subs[s].npend; i++)
            n += m->subs[s].pend[i]->bytes_done;
    return n;
}

static gw_status_t sub_progress(gw_mux_t *m, int s, const gw_msg_tag_t *current, int wait_ms)
{
    mux_sub_t *sub = &m->subs[s];
    gw_status_t st = sub->c->ops->progress(sub->t, current, wait_ms);
    prune(m, sub);
    return st == GW_OK ? GW_OK : mux_fail(m, s, st);
}

/* One non-blocking round over every sub-transport. */
static gw_status_t round_all(gw_mux_t *m, const gw_msg_tag_t *current)
{
    for (int s = 0; s < m->nsubs; s++) {
        if (!m->subs[s].t)
            continue;
        gw_status_t st = sub_progress(m, s, current, 0);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

static gw_status_t mux_progress(gw_transport_t *base, const gw_msg_tag_t *current, int wait_ms)
{
    gw_mux_t *m = mux_of(base);
    if (!m)
        return GW_ERR_INVALID_ARG;
    if (m->failed != GW_OK)
        return m->failed;
    if (!m->connected) {
        GW_ERROR(m->base.log, SUBSYS, "progress() called before connect() succeeded");
        return GW_ERR_INVALID_ARG;
    }
    uint64_t before = moved(m);
    gw_status_t st = round_all(m, current);
    if (st != GW_OK || wait_ms <= 0 || moved(m) != before)
        return st;
    int busy = -1, nbusy = 0, last = -1;
    for (int s = 0; s < m->nsubs; s++) {
        if (!m->subs[s].t)
            continue;
        last = s;
        if (m->subs[s].npend > 0) {
            busy = s;
            nbusy++;
        }
    }
    if (nbusy <= 1)
        return sub_progress(m, nbusy ? busy : last, current, wait_ms);
    int64_t start = gw__now_ns(), deadline = start + (int64_t)wait_ms * 1000000;
    for (int spins = 0;; spins++) {
        int64_t now = gw__now_ns();
        if (now >= deadline)
            return GW_OK;
        if (spins < MUX_SPINS) {
            cpu_relax();
        } else if (now - start < MUX_YIELD_NS) {
            sched_yield();
        } else {
            /* Sleep in the network transport's poll(): it wakes on socket
             * activity, and a millisecond bounds the shared-memory delay. */
            st = sub_progress(m, last, current, 1);
            if (st != GW_OK || moved(m) != before)
                return st;
        }
        st = round_all(m, current);
        if (st != GW_OK || moved(m) != before)
            return st;
    }
}

static gw_status_t mux_abort(gw_transport_t *base, gw_status_t reason)
{
    gw_mux_t *m = mux_of(base);
    if (!m)
        return GW_ERR_INVALID_ARG;
    if (m->failed == GW_OK)
        m->failed = GW_ERR_ABORTED;
    for (int s = 0; s < m->nsubs; s++)
        if (m->subs[s].t)
            m->subs[s].c->ops->abort(m->subs[s].t, reason);
    prune_all(m);
    return GW_OK;
}

static void mux_close(gw_transport_t *base)
{
    gw_mux_t *m = mux_of(base);
    if (m)
        mux_free(m);
}

/* One table per name; the one before connect() is "mux". Memory
 * registration is per transport and has no peer to route by: UNSUPPORTED
 * until a caller needs it. */
#define MUX_OPS(label)                                                                             \
    {                                                                                              \
        .size = sizeof(gw_transport_ops_t), .name = label, .open = mux_open_auto,                  \
        .connect = mux_connect, .isend = mux_isend, .irecv = mux_irecv,                            \
        .progress = mux_progress, .mem_reg = gw__transport_mem_reg_unsupported,                   \
        .mem_dereg = gw__transport_mem_dereg_unsupported, .abort = mux_abort,                      \
        .close = mux_close,                                                                        \
    }
static const gw_transport_ops_t mux_ops[5] = {
    MUX_OPS("mux"), MUX_OPS("shm+tcp"), MUX_OPS("shm+ib"), MUX_OPS("ib+tcp"), MUX_OPS("shm+ib+tcp"),
};
