/*
 * mux.c - the mux transport: routes each peer to the sub-transport that
 * the plan chose for it (contract in select.h; the plan is select.c).
 *
 * Opening. The mux opens every transport the mode allows, in candidate
 * order, and publishes one composite address blob holding each one's own.
 *
 * Connecting. Once every rank's composite blob is known, the plan routes
 * each peer. Each sub-transport is then connected with a blob array in
 * which peers it does not serve are all-zero (the "not mine, skip"
 * convention of transport.h), shared memory first: its peers are all on
 * this host and also connect shared memory first, so nobody waits in a
 * network connect() for a peer that is still busy with shared memory.
 * Transports that carry no peer are closed. The mux then names itself
 * after the transports it kept ("shm+tcp").
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
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "transport/base.h"
#include "transport/host_id.h"
#include "transport/select.h"

#define SUBSYS "select"
#define MUX_MAX_SUBS 3
#define MUX_SPINS 64
#define MUX_YIELD_NS (2LL * 1000000)

/* ---- the mux -------------------------------------------------------------------- */

typedef struct mux_sub {
    const gw_select_candidate_t *c;
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
    char name[32]; /* "shm+tcp": the transports kept, once connected */
} gw_mux_t;

static const gw_transport_ops_t mux_ops;      /* at the end of the file */
static const gw__transport_class_t mux_class; /* likewise */

static int is_mux(const gw_transport_t *t) { return t && t->ops == &mux_ops; }

static gw_mux_t *mux_of(gw_transport_t *t) { return gw__container_of(t, gw_mux_t, base); }

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

static gw_status_t encode_blob(gw_mux_t *m, uint8_t addr[GW_TRANSPORT_ADDR_MAX])
{
    gw_select_kind_t kinds[MUX_MAX_SUBS];
    const uint8_t *blobs[MUX_MAX_SUBS];
    for (int i = 0; i < m->nsubs; i++) {
        kinds[i] = m->subs[i].c->kind;
        blobs[i] = m->subs[i].blob;
    }
    return gw__select_blob_encode(m->base.log, m->mode, m->host_id, m->nsubs, kinds, blobs, addr);
}

gw_status_t gw__select_open(const gw_transport_params_t *params, gw_select_mode_t mode,
                            gw_transport_t **out, uint8_t addr[GW_TRANSPORT_ADDR_MAX])
{
    if (!params || !out || !addr || params->size < 1 || params->rank < 0 ||
        params->rank >= params->size)
        return GW_ERR_INVALID_ARG;
    const gw_logger_t *lg = params->log;
    gw_transport_t *base = NULL;
    gw_status_t st = gw__transport_open_base(&mux_class, params, sizeof(gw_mux_t), &base);
    if (st != GW_OK)
        return st;
    gw_mux_t *m = mux_of(base);
    if (!(m->route = calloc((size_t)params->size, sizeof(*m->route)))) {
        GW_ERROR(lg, SUBSYS, "out of memory for the transport of %d ranks", params->size);
        free(m);
        return GW_ERR_NO_MEMORY;
    }
    m->mode = mode;
    st = gw__host_id_published(lg, &m->host_id);
    if (st != GW_OK)
        goto err_free;
    gw_select_kind_t only = gw__select_mode_only(mode);
    size_t ncandidates;
    const gw_select_candidate_t *candidates = gw__select_candidates(&ncandidates);
    /* A transport asked for by name reports a missing device as an error. */
    gw_transport_params_t sub_params = *params;
    sub_params.forced = only != GW_SEL_NONE;
    /* In auto mode every transport that opens is offered: RDMA for peers
     * that have it too, TCP as well for those that do not (a cluster where
     * only some hosts have RDMA), and the plan takes the first one a pair
     * shares. One that carries no peer is closed again after the plan. */
    for (size_t i = 0; i < ncandidates; i++) {
        const gw_select_candidate_t *c = &candidates[i];
        if (only != GW_SEL_NONE && c->kind != only)
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
                GW_WARN(lg, SUBSYS,
                        "transport %s did not open (%s): peers on this host use the "
                        "network transport",
                        c->name, gw_status_str(st));
                continue;
            }
            if (only == GW_SEL_NONE && i + 1 < ncandidates &&
                (st == GW_ERR_NOT_FOUND || st == GW_ERR_UNSUPPORTED))
                continue;
            goto err_free;
        }
        s->c = c;
        m->nsubs++;
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
static gw_status_t read_blobs(gw_mux_t *m, const uint8_t *all, gw_select_blob_t *views,
                              gw_select_rank_t *ranks)
{
    for (int r = 0; r < m->base.size; r++) {
        if (gw__select_blob_decode(all + (size_t)r * GW_TRANSPORT_ADDR_MAX, &views[r]) != GW_OK) {
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
                               const gw_select_blob_t *views)
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

static gw_status_t mux_connect(gw_transport_t *base, const uint8_t *all)
{
    if (!base || !all)
        return GW_ERR_INVALID_ARG;
    gw_mux_t *m = mux_of(base);
    if (m->base.connected) {
        GW_ERROR(m->base.log, SUBSYS, "connect() called twice");
        return GW_ERR_INVALID_ARG;
    }
    int size = m->base.size;
    gw_select_blob_t *views = calloc((size_t)size, sizeof(*views));
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
    if (m->mode == GW_SELECT_AUTO)
        gw__select_warn_fallbacks(m->base.log, m->base.rank, size, ranks, route);
    for (int r = 0; r < size; r++) {
        m->route[r] = route[r] == GW_SEL_NONE ? -1 : sub_index(m, route[r]);
        if (m->route[r] >= 0)
            m->subs[m->route[r]].used = 1;
    }
    /* Transports in candidate order: shared memory first (see the top). */
    char *name = m->name;
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
        snprintf(name + n, sizeof(m->name) - n, "%s%s", n ? "+" : "", m->subs[s].c->name);
    }
    char plan[512];
    gw__select_describe(route, size, plan, sizeof(plan));
    GW_INFO(m->base.log, SUBSYS, "rank %d: %s", m->base.rank, plan);
    m->base.name = m->name;
    m->base.connected = 1;
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
    if (!m->base.connected)
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
    if (m->base.failed == GW_OK) {
        const gw_transport_t *sub = m->subs[s].t;
        m->base.failed = st;
        m->base.culprit = sub ? sub->culprit : -1;
        m->base.origin = sub ? sub->origin : -1;
        m->base.blame = sub ? sub->blame : GW_BLAME_NONE;
        /* Their peers hear the failing sub-transport's culprit and origin,
         * as they would from the communicator's own abort. */
        gw_abort_info_t why = {.status = st, .origin = m->base.origin, .culprit = m->base.culprit};
        for (int i = 0; i < m->nsubs; i++)
            if (i != s && m->subs[i].t)
                m->subs[i].c->ops->abort(m->subs[i].t, &why);
    }
    prune_all(m);
    return m->base.failed;
}

static gw_status_t post(gw_transport_t *base, gw_request_t *req, int send)
{
    if (!base || !req)
        return GW_ERR_INVALID_ARG;
    gw_mux_t *m = mux_of(base);
    if (!m->base.connected || req->peer < 0 || req->peer >= m->base.size ||
        m->route[req->peer] < 0) {
        GW_ERROR(m->base.log, SUBSYS, "%s: invalid request (peer %d of %d ranks, we are %d%s)",
                 send ? "isend" : "irecv", req->peer, m->base.size, m->base.rank,
                 m->base.connected ? "" : ", not connected");
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
    gw_status_t st = gw__transport_progress_check(base);
    if (st != GW_OK)
        return st;
    gw_mux_t *m = mux_of(base);
    uint64_t before = moved(m);
    st = round_all(m, current);
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
            gw__cpu_relax();
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

static gw_status_t mux_abort(gw_transport_t *base, const gw_abort_info_t *why)
{
    if (!base)
        return GW_ERR_INVALID_ARG;
    gw_mux_t *m = mux_of(base);
    if (m->base.failed == GW_OK) {
        m->base.failed = GW_ERR_ABORTED;
        m->base.culprit = why ? why->culprit : -1;
        m->base.origin = why && why->origin >= 0 ? why->origin : m->base.rank;
        m->base.blame = GW_BLAME_ABORT;
    }
    for (int s = 0; s < m->nsubs; s++)
        if (m->subs[s].t)
            m->subs[s].c->ops->abort(m->subs[s].t, why);
    prune_all(m);
    return GW_OK;
}

static void mux_close(gw_transport_t *base)
{
    if (base)
        mux_free(mux_of(base));
}

/* Routed like a request for the peer. */
static int mux_peek(gw_transport_t *base, int peer, gw_msg_tag_t *tag, size_t *len)
{
    gw_mux_t *m = mux_of(base);
    if (!m->base.connected || peer < 0 || peer >= m->base.size || m->route[peer] < 0)
        return -1;
    const mux_sub_t *s = &m->subs[m->route[peer]];
    return gw__transport_peek(s->t, peer, tag, len);
}

/* Memory registration is per transport and has no peer to route by:
 * UNSUPPORTED until a caller needs it. */
static const gw_transport_ops_t mux_ops = {
    .size = sizeof(gw_transport_ops_t),
    .open = mux_open_auto,
    .connect = mux_connect,
    .isend = mux_isend,
    .irecv = mux_irecv,
    .progress = mux_progress,
    .mem_reg = gw__transport_mem_reg_unsupported,
    .mem_dereg = gw__transport_mem_dereg_unsupported,
    .abort = mux_abort,
    .close = mux_close,
    .peek = mux_peek,
};

/* The mux fails through its sub-transports (mux_fail), not through the
 * base: it keeps no request queue of its own. */
static const gw__transport_class_t mux_class = {
    .size = sizeof(gw__transport_class_t),
    .name = "mux",
    .subsys = SUBSYS,
    .ops = &mux_ops,
};
