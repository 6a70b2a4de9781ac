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
 * A failure of one sub-transport breaks the mux (transport/subs.h): the others are aborted at
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
#include "transport/subs.h"

#define SUBSYS "select"
#define MUX_MAX_SUBS 3
#define MUX_SPINS 64
#define MUX_YIELD_NS (2LL * 1000000)

/* ---- the mux -------------------------------------------------------------------- */

typedef struct gw_mux {
    gw_transport_t base;
    gw_select_mode_t mode;
    uint64_t host_id;
    /* The transports opened, in candidate order: sub-transport i is
     * subs.sub[i] (transport/subs.h), the candidate cand[i], its own
     * address blob[i]; used[i]: the plan routes a peer to it. */
    const gw_select_candidate_t *cand[MUX_MAX_SUBS];
    uint8_t blob[MUX_MAX_SUBS][GW_TRANSPORT_ADDR_MAX];
    int used[MUX_MAX_SUBS];
    gw_sub_t sub[MUX_MAX_SUBS];
    gw_subs_t subs;
    int *route;    /* peer -> index in subs, -1 for ourselves */
    char name[32]; /* "shm+tcp": the transports kept, once connected */
} gw_mux_t;

static const gw_transport_ops_t mux_ops;      /* at the end of the file */
static const gw__transport_class_t mux_class; /* likewise */

static int is_mux(const gw_transport_t *t) { return t && t->ops == &mux_ops; }

static gw_mux_t *mux_of(gw_transport_t *t) { return gw__container_of(t, gw_mux_t, base); }

static void mux_free(gw_mux_t *m)
{
    gw__subs_close(&m->subs);
    free(m->route);
    free(m);
}

static gw_status_t encode_blob(gw_mux_t *m, uint8_t addr[GW_TRANSPORT_ADDR_MAX])
{
    gw_select_kind_t kinds[MUX_MAX_SUBS];
    const uint8_t *blobs[MUX_MAX_SUBS];
    for (int i = 0; i < m->subs.n; i++) {
        kinds[i] = m->cand[i]->kind;
        blobs[i] = m->blob[i];
    }
    return gw__select_blob_encode(m->base.log, m->mode, m->host_id, m->subs.n, kinds, blobs, addr);
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
    m->subs = (gw_subs_t){.owner = &m->base, .subsys = SUBSYS, .sub = m->sub};
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
        int n = m->subs.n;
        st = c->ops->open(&sub_params, &m->sub[n].t, m->blob[n]);
        if (st != GW_OK) {
            m->sub[n].t = NULL;
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
        m->cand[n] = c;
        m->subs.n++;
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
    for (int i = 0; i < m->subs.n; i++)
        if (m->cand[i]->kind == kind)
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
    gw_select_kind_t kind = m->cand[s]->kind;
    size_t size = (size_t)m->base.size;
    uint8_t *all = calloc(size, GW_TRANSPORT_ADDR_MAX);
    if (!all) {
        GW_ERROR(m->base.log, SUBSYS, "out of memory for %zu addresses", size);
        return GW_ERR_NO_MEMORY;
    }
    for (size_t r = 0; r < size; r++)
        if (route[r] == kind || (int)r == m->base.rank)
            memcpy(all + r * GW_TRANSPORT_ADDR_MAX, views[r].sub[kind], views[r].sub_len[kind]);
    gw_status_t st = m->sub[s].t->ops->connect(m->sub[s].t, all);
    free(all);
    return st;
}

static gw_status_t mux_connect(gw_transport_t *base, const uint8_t *all)
{
    gw_status_t st = gw__transport_connect_check(base, all, 0);
    if (st != GW_OK)
        return st;
    gw_mux_t *m = mux_of(base);
    int size = m->base.size;
    gw_select_blob_t *views = calloc((size_t)size, sizeof(*views));
    gw_select_rank_t *ranks = calloc((size_t)size, sizeof(*ranks));
    gw_select_kind_t *route = calloc((size_t)size, sizeof(*route));
    st = GW_ERR_NO_MEMORY;
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
            m->used[m->route[r]] = 1;
    }
    /* Transports in candidate order: shared memory first (see the top). */
    char *name = m->name;
    for (int s = 0; s < m->subs.n; s++) {
        if (!m->used[s]) {
            GW_TRACE(m->base.log, SUBSYS, "transport %s carries no peer: closing it",
                     m->cand[s]->name);
            m->sub[s].t->ops->close(m->sub[s].t);
            m->sub[s].t = NULL;
            continue;
        }
        st = connect_sub(m, s, route, views);
        if (st != GW_OK)
            goto out;
        size_t n = strlen(name);
        snprintf(name + n, sizeof(m->name) - n, "%s%s", n ? "+" : "", m->cand[s]->name);
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
    for (int s = 0; s < m->subs.n; s++)
        if (m->sub[s].t) {
            used = s;
            n++;
        }
    if (n != 1)
        return t;
    gw_transport_t *sub = m->sub[used].t;
    m->sub[used].t = NULL;
    mux_free(m);
    return sub;
}

/* ---- routing and progress ------------------------------------------------------------ */

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
    return gw__subs_post(&m->subs, m->route[req->peer], req, send);
}

static gw_status_t mux_isend(gw_transport_t *base, gw_request_t *req) { return post(base, req, 1); }
static gw_status_t mux_irecv(gw_transport_t *base, gw_request_t *req) { return post(base, req, 0); }

static gw_status_t mux_progress(gw_transport_t *base, const gw_msg_tag_t *current, int wait_ms)
{
    gw_status_t st = gw__transport_progress_check(base);
    if (st != GW_OK)
        return st;
    gw_mux_t *m = mux_of(base);
    gw_subs_t *subs = &m->subs;
    uint64_t before = gw__subs_moved(subs);
    st = gw__subs_round(subs, current);
    if (st != GW_OK || wait_ms <= 0 || gw__subs_moved(subs) != before)
        return st;
    int last = -1;
    for (int s = 0; s < subs->n; s++)
        if (m->sub[s].t)
            last = s;
    int busy = gw__subs_busy(subs);
    if (busy != -2)
        return gw__subs_progress(subs, busy >= 0 ? busy : last, current, wait_ms);
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
            st = gw__subs_progress(subs, last, current, 1);
            if (st != GW_OK || gw__subs_moved(subs) != before)
                return st;
        }
        st = gw__subs_round(subs, current);
        if (st != GW_OK || gw__subs_moved(subs) != before)
            return st;
    }
}

static gw_status_t mux_abort(gw_transport_t *base, const gw_abort_info_t *why)
{
    if (!base)
        return GW_ERR_INVALID_ARG;
    gw__subs_abort(&mux_of(base)->subs, why);
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
    return gw__transport_peek(m->sub[m->route[peer]].t, peer, tag, len);
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
