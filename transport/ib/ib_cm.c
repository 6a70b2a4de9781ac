/*
 * ib_cm.c - connect() through librdmacm, the default on RoCE.
 *
 * The RDMA connection manager does for RDMA what TCP's handshake does for
 * sockets: it resolves an IP address to a device, port, GID and path,
 * exchanges QP numbers and PSNs in its CM messages, moves both QPs through
 * RTR and RTS with the path's MTU, and later tells each side when the other
 * disconnects, including when the kernel tears a dead process's
 * connections down. So at open() every rank binds an RDMA CM listener to the
 * IP address behind its GID (RoCE GIDs are IP addresses) and publishes it;
 * connect() then has the higher rank of each pair resolve and connect one
 * RDMA CM id per QP, with private data {job id, ranks, QP index, QPs per
 * peer}, and the lower rank accept what checks out (rejecting strangers).
 * Everything runs on one non-blocking event channel under one deadline;
 * failed attempts are retried with the growing pauses of every socket
 * that dials (transport/sock.h).
 *
 * After connect() the channel stays in progress()'s poll set: a
 * DISCONNECTED event from a peer that did not say goodbye fails the
 * transport at once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "transport/ib/ib_internal.h"
#include "transport/sock.h"

#define RESOLVE_MS 2000

typedef enum cm_state { CM_IDLE, CM_WAIT, CM_ADDR, CM_ROUTE, CM_CONNECTING, CM_UP } cm_state_t;

struct gw_ib_cm_conn {
    int used; /* the peer is ours (see transport.h on all-zero blobs) */
    int peer, qp;
    int out; /* we connect (the peer's rank is lower) */
    cm_state_t state;
    struct rdma_cm_id *id;
    gw_sock_retry_t retry; /* CM_WAIT: when to try again */
    char why[128];
};

typedef struct gw_ib_cm_conn cm_conn_t;

static cm_conn_t *conn_of(gw_ib_t *t, int peer, int qp)
{
    int i = (peer < t->base.rank ? peer : peer - 1) * t->nqps + qp;
    return &t->cm_conns[i];
}

/* The IP address of our GID: RoCE GIDs are IPv4-mapped or IPv6 addresses. */
static void gid_sockaddr(const gw_ib_t *t, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    const uint8_t *g = t->gid.raw;
    static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(g, v4, sizeof(v4)) == 0) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        memcpy(&in->sin_addr, g + 12, 4);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        in6->sin6_family = AF_INET6;
        memcpy(&in6->sin6_addr, g, 16);
    }
}

gw_status_t gw__ib_cm_listen(gw_ib_t *t, char *desc, size_t desc_cap)
{
    const gw_logger_t *lg = t->base.log;
    struct sockaddr_storage ss;
    char str[64];
    gid_sockaddr(t, &ss);
    gw__sock_addr_str((const struct sockaddr *)&ss, str, sizeof(str));
    t->cm_channel = t->api.create_event_channel();
    if (!t->cm_channel) {
        GW_ERROR(lg, GW_IB_SUBSYS, "rdma_create_event_channel: %m");
        return GW_ERR_SYSTEM;
    }
    int fl = fcntl(t->cm_channel->fd, F_GETFL);
    if (fl < 0 || fcntl(t->cm_channel->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
        GW_ERROR(lg, GW_IB_SUBSYS, "making the RDMA CM channel non-blocking: %m");
        return GW_ERR_SYSTEM;
    }
    if (t->api.create_id(t->cm_channel, &t->listen_id, NULL, RDMA_PS_TCP) != 0) {
        GW_ERROR(lg, GW_IB_SUBSYS, "rdma_create_id: %m");
        return GW_ERR_SYSTEM;
    }
    if (t->api.bind_addr(t->listen_id, (struct sockaddr *)&ss) != 0) {
        GW_ERROR(lg, GW_IB_SUBSYS,
                 "binding the RDMA CM to %s (the address of %s:%d GID index %d): %m", str,
                 t->dev_name, t->port_num, t->gid_index);
        return GW_ERR_SYSTEM;
    }
    if (t->api.listen(t->listen_id, t->base.size * t->nqps + 16) != 0) {
        GW_ERROR(lg, GW_IB_SUBSYS, "rdma_listen on %s: %m", str);
        return GW_ERR_SYSTEM;
    }
    struct ibv_context *ctx = t->listen_id->verbs;
    const char *name = ctx ? t->api.get_device_name(ctx->device) : "no device";
    if (!ctx || strcmp(name, t->dev_name) != 0) {
        GW_ERROR(lg, GW_IB_SUBSYS,
                 "%s belongs to %s, not to the chosen %s: set GW_IB_HCA, GW_IB_GID_INDEX or "
                 "GW_IB_CM=oob",
                 str, name, t->dev_name);
        return GW_ERR_CONFIG;
    }
    /* Everything (PD, CQ, QPs) must live on librdmacm's context of the
     * device, not on the one we opened to enumerate. */
    if (t->own_ctx)
        t->api.close_device(t->ctx);
    t->ctx = ctx;
    t->own_ctx = 0;
    uint16_t port = ntohs(t->api.get_src_port(t->listen_id));
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
    memcpy(&t->local.sa, &ss, sizeof(ss));
    gw__sock_addr_str((const struct sockaddr *)&ss, str, sizeof(str));
    snprintf(desc, desc_cap, "through the RDMA CM at %s", str);
    return GW_OK;
}

static void drop_id(gw_ib_t *t, cm_conn_t *c)
{
    gw_ib_peer_t *p = &t->peers[c->peer];
    if (c->id) {
        if (c->id->qp)
            t->api.cm_destroy_qp(c->id);
        t->api.destroy_id(c->id);
    }
    c->id = NULL;
    p->qp[c->qp] = NULL;
    p->cm_id[c->qp] = NULL;
}

static void retry(gw_ib_t *t, cm_conn_t *c, const char *why)
{
    snprintf(c->why, sizeof(c->why), "%s", why);
    int pause = gw__sock_retry_arm(&c->retry);
    GW_TRACE(t->base.log, GW_IB_SUBSYS, "RDMA CM connection %d to %s: %s; retrying in %d ms", c->qp,
             t->peers[c->peer].desc, why, pause);
    drop_id(t, c);
    c->state = c->out ? CM_WAIT : CM_IDLE;
}

static void set_ack_timeout(gw_ib_t *t, struct rdma_cm_id *id)
{
    uint8_t timeout = (uint8_t)t->cfg.timeout;
    if (t->api.set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
                          sizeof(timeout)) != 0)
        GW_TRACE(t->base.log, GW_IB_SUBSYS, "rdma_set_option(ACK_TIMEOUT): %m");
}

static void out_start(gw_ib_t *t, cm_conn_t *c)
{
    gw_ib_peer_t *p = &t->peers[c->peer];
    char why[128];
    if (t->api.create_id(t->cm_channel, &c->id, c, RDMA_PS_TCP) != 0) {
        snprintf(why, sizeof(why), "rdma_create_id: %s", strerror(errno));
        c->id = NULL;
        retry(t, c, why);
        return;
    }
    set_ack_timeout(t, c->id);
    struct sockaddr_storage src;
    memcpy(&src, &t->local.sa, sizeof(src));
    if (src.ss_family == AF_INET)
        ((struct sockaddr_in *)&src)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)&src)->sin6_port = 0;
    if (t->api.resolve_addr(c->id, (struct sockaddr *)&src, (struct sockaddr *)&p->addr.sa,
                            RESOLVE_MS) != 0) {
        snprintf(why, sizeof(why), "rdma_resolve_addr: %s", strerror(errno));
        retry(t, c, why);
        return;
    }
    c->state = CM_ADDR;
}

static gw_status_t make_qp(gw_ib_t *t, cm_conn_t *c)
{
    gw_ib_peer_t *p = &t->peers[c->peer];
    struct ibv_qp_init_attr ia;
    for (;;) {
        gw__ib_qp_init_attr(t, &ia);
        if (t->api.cm_create_qp(c->id, t->pd, &ia) == 0)
            break;
        int err = errno;
        if (gw__ib_qp_inline_retry(t, err))
            continue;
        errno = err;
        GW_ERROR(t->base.log, GW_IB_SUBSYS, "rdma_create_qp for %s, QP %d: %m", p->desc, c->qp);
        return gw__ib_errno_status(err);
    }
    gw__ib_qp_created(t, &ia);
    p->qp[c->qp] = c->id->qp;
    p->cm_id[c->qp] = c->id;
    return gw__ib_qp_post_recvs(t, p, c->qp, GW_IB_WQ_DEPTH);
}

static void conn_param(gw_ib_t *t, struct rdma_conn_param *cp, uint8_t *pdata, int peer, int qp)
{
    gw_ib_cm_pdata_t pd = {.magic = GW_IB_CM_MAGIC,
                           .from = (uint32_t)t->base.rank,
                           .to = (uint32_t)peer,
                           .qp_idx = (uint16_t)qp,
                           .nqps = (uint16_t)t->nqps};
    memcpy(pd.job_id, t->job_id, 16);
    gw__ib_cm_pdata_encode(&pd, pdata);
    memset(cp, 0, sizeof(*cp));
    cp->private_data = pdata;
    cp->private_data_len = GW_IB_CM_PDATA_SIZE;
    cp->responder_resources = 1;
    cp->initiator_depth = 1;
    cp->retry_count = (uint8_t)t->cfg.retry_cnt;
    cp->rnr_retry_count = 7;
}

/* Create c's QP and offer the connection on c->id: rdma_accept for a
 * request we received, rdma_connect for one we make. A call that fails is
 * retried like any failed attempt. */
static gw_status_t offer(gw_ib_t *t, cm_conn_t *c, int accepting)
{
    gw_status_t st = make_qp(t, c);
    if (st != GW_OK)
        return st;
    uint8_t buf[GW_IB_CM_PDATA_SIZE];
    struct rdma_conn_param cp;
    conn_param(t, &cp, buf, c->peer, c->qp);
    if ((accepting ? t->api.accept(c->id, &cp) : t->api.connect(c->id, &cp)) != 0) {
        char why[128];
        snprintf(why, sizeof(why), "%s: %s", accepting ? "rdma_accept" : "rdma_connect",
                 strerror(errno));
        retry(t, c, why);
        return GW_OK;
    }
    c->state = CM_CONNECTING;
    return GW_OK;
}

/* A connection request: check it is one of ours and accept it. */
static gw_status_t on_request(gw_ib_t *t, struct rdma_cm_id *id, const uint8_t *pdata,
                              size_t pdata_len)
{
    gw_ib_cm_pdata_t pd;
    memset(&pd, 0, sizeof(pd));
    if (pdata_len >= GW_IB_CM_PDATA_SIZE)
        gw__ib_cm_pdata_decode(pdata, &pd);
    if (pd.magic != GW_IB_CM_MAGIC || memcmp(pd.job_id, t->job_id, 16) != 0 ||
        pd.to != (uint32_t)t->base.rank || pd.from <= (uint32_t)t->base.rank ||
        pd.from >= (uint32_t)t->base.size || pd.qp_idx >= t->nqps || !t->peers[pd.from].active) {
        GW_WARN(t->base.log, GW_IB_SUBSYS,
                "rejecting an RDMA CM connection request that is not from this job (magic "
                "0x%08x, rank %u -> %u, QP %u)",
                (unsigned)pd.magic, (unsigned)pd.from, (unsigned)pd.to, (unsigned)pd.qp_idx);
        t->api.reject(id, NULL, 0);
        t->api.destroy_id(id);
        return GW_OK;
    }
    cm_conn_t *c = conn_of(t, (int)pd.from, pd.qp_idx);
    if (pd.nqps != t->nqps) {
        GW_ERROR(t->base.log, GW_IB_SUBSYS, "%s uses %u QPs per peer, this rank %d (GW_IB_QPS)",
                 t->peers[c->peer].desc, (unsigned)pd.nqps, t->nqps);
        t->api.reject(id, NULL, 0);
        t->api.destroy_id(id);
        return GW_ERR_CONFIG;
    }
    if (c->id) /* a retry of an attempt that failed on the other side */
        drop_id(t, c);
    c->id = id;
    id->context = c;
    set_ack_timeout(t, id);
    return offer(t, c, 1);
}

/* Handle one event of the connection phase. */
static gw_status_t on_event(gw_ib_t *t, enum rdma_cm_event_type type, int status,
                            struct rdma_cm_id *id, const uint8_t *pdata, size_t pdata_len)
{
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST)
        return on_request(t, id, pdata, pdata_len);
    cm_conn_t *c = id->context;
    if (!c)
        return GW_OK;
    gw_ib_peer_t *p = &t->peers[c->peer];
    char why[128];
    switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
        if (t->api.resolve_route(id, RESOLVE_MS) != 0) {
            snprintf(why, sizeof(why), "rdma_resolve_route: %s", strerror(errno));
            retry(t, c, why);
        } else {
            c->state = CM_ROUTE;
        }
        return GW_OK;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
        return offer(t, c, 0);
    case RDMA_CM_EVENT_ESTABLISHED:
        c->state = CM_UP;
        p->qp_up++;
        return GW_OK;
    default:
        snprintf(why, sizeof(why), "%s (status %d)", t->api.event_str(type), status);
        if (c->state == CM_UP) {
            /* Only a disconnect can follow; during connect() it means the
             * peer gave up on this connection (it failed or timed out). */
            GW_ERROR(t->base.log, GW_IB_SUBSYS, "%s: connection %d lost during setup: %s", p->desc,
                     c->qp, why);
            return GW_ERR_REMOTE;
        }
        retry(t, c, why);
        return GW_OK;
    }
}

/* Take one event off the channel; its data is copied and the event acked
 * before anything can destroy its id. 1: handled one, 0: none left. */
static int next_event(gw_ib_t *t, gw_status_t *st, int connecting)
{
    struct rdma_cm_event *ev;
    if (t->api.get_cm_event(t->cm_channel, &ev) != 0)
        return 0;
    enum rdma_cm_event_type type = ev->event;
    int status = ev->status;
    struct rdma_cm_id *id = ev->id;
    uint8_t pdata[64];
    size_t plen = 0;
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST && ev->param.conn.private_data) {
        plen = ev->param.conn.private_data_len;
        if (plen > sizeof(pdata))
            plen = sizeof(pdata);
        memcpy(pdata, ev->param.conn.private_data, plen);
    }
    t->api.ack_cm_event(ev);
    if (connecting) {
        *st = on_event(t, type, status, id, pdata, plen);
        return 1;
    }
    cm_conn_t *c = type == RDMA_CM_EVENT_CONNECT_REQUEST ? NULL : id->context;
    switch (type) {
    case RDMA_CM_EVENT_CONNECT_REQUEST:
        /* Every pair is connected already: a late stranger. */
        t->api.reject(id, NULL, 0);
        t->api.destroy_id(id);
        break;
    case RDMA_CM_EVENT_DISCONNECTED:
        if (c)
            *st = gw__ib_peer_gone(t, &t->peers[c->peer], "disconnected its RDMA CM connection");
        break;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
        *st = gw__ib_fail(t, GW_ERR_SYSTEM, "device %s was removed", t->dev_name);
        break;
    default:
        GW_TRACE(t->base.log, GW_IB_SUBSYS, "RDMA CM event %s (status %d)", t->api.event_str(type),
                 status);
        break;
    }
    return 1;
}

gw_status_t gw__ib_cm_poll_events(gw_ib_t *t)
{
    gw_status_t st = GW_OK;
    while (st == GW_OK && next_event(t, &st, 0))
        ;
    return st != GW_OK ? st : t->base.failed;
}

static void report_missing(gw_ib_t *t)
{
    for (int i = 0; i < t->ncm_conns; i++) {
        const cm_conn_t *c = &t->cm_conns[i];
        if (!c->used || c->state == CM_UP)
            continue;
        GW_ERROR(t->base.log, GW_IB_SUBSYS,
                 "RDMA CM connection %d with %s not established after %d ms%s%s", c->qp,
                 t->peers[c->peer].desc, t->timeout_ms, c->why[0] ? ": last error: " : "", c->why);
    }
}

gw_status_t gw__ib_cm_connect(gw_ib_t *t)
{
    t->ncm_conns = (t->base.size - 1) * t->nqps;
    t->cm_conns = calloc((size_t)(t->ncm_conns > 0 ? t->ncm_conns : 1), sizeof(*t->cm_conns));
    if (!t->cm_conns)
        return GW_ERR_NO_MEMORY;
    for (int r = 0; r < t->base.size; r++) {
        if (!t->peers[r].active)
            continue;
        for (int k = 0; k < t->nqps; k++) {
            cm_conn_t *c = conn_of(t, r, k);
            c->used = 1;
            c->peer = r;
            c->qp = k;
            c->out = r < t->base.rank;
            c->state = c->out ? CM_WAIT : CM_IDLE;
            gw__sock_retry_init(&c->retry);
        }
    }
    int64_t deadline = gw__now_ms() + t->timeout_ms;
    for (;;) {
        int up = 0;
        int64_t now = gw__now_ms(), wake = deadline;
        for (int i = 0; i < t->ncm_conns; i++) {
            cm_conn_t *c = &t->cm_conns[i];
            if (!c->used) {
                up++;
                continue;
            }
            if (c->state == CM_WAIT && now >= c->retry.at)
                out_start(t, c);
            if (c->state == CM_WAIT && c->retry.at < wake)
                wake = c->retry.at;
            up += c->state == CM_UP;
        }
        if (up == t->ncm_conns)
            return GW_OK;
        if (now >= deadline) {
            report_missing(t);
            return GW_ERR_TIMEOUT;
        }
        struct pollfd pfd = {.fd = t->cm_channel->fd, .events = POLLIN};
        int rc = poll(&pfd, 1, (int)(wake > now ? wake - now : 0));
        if (rc < 0 && errno != EINTR) {
            GW_ERROR(t->base.log, GW_IB_SUBSYS, "poll() on the RDMA CM channel: %m");
            return GW_ERR_SYSTEM;
        }
        gw_status_t st = GW_OK;
        while (st == GW_OK && next_event(t, &st, 1))
            ;
        if (st != GW_OK)
            return st;
    }
}

void gw__ib_cm_teardown(gw_ib_t *t)
{
    for (int i = 0; t->cm_conns && i < t->ncm_conns; i++) {
        cm_conn_t *c = &t->cm_conns[i];
        if (!c->id)
            continue;
        if (c->state == CM_UP)
            t->api.disconnect(c->id);
        drop_id(t, c);
    }
    free(t->cm_conns);
    t->cm_conns = NULL;
    t->ncm_conns = 0;
}
