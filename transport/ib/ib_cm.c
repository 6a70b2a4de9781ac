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
 * RDMA CM id per QP, and the lower rank accept what proves to be ours;
 * connecting on first use (ib_lazy.c), the same happens for one pair when
 * its first request is posted, driven by progress() instead of connect().
 * Everything runs on one non-blocking event channel under one deadline;
 * failed attempts are retried with the growing pauses of every socket
 * that dials (transport/sock.h).
 *
 * Proof of the key. The job id is no secret (rank 0 sends it in clear in
 * the bootstrap's WELCOME, and it names shared-memory segments), so a
 * request that carries it proves nothing. Each connection proves the job's
 * data-plane key both ways instead, as the TCP transport and the
 * out-of-band mode do (transport/sock_auth.c), over fresh nonces of both
 * sides, in the three messages an RC connection has room for (layouts and
 * proofs: ib_wire.c):
 *   1. the connect request's private data: ranks, QP index, QPs per peer,
 *      job id and a fresh nonce of the dialler (52 of the 56 bytes RoCE
 *      carries);
 *   2. the accept's private data: a fresh nonce of the acceptor and its
 *      proof, an HMAC under the key over both nonces, both ranks, the QP
 *      index and the direction;
 *   3. the dialler's proof, the same HMAC under the other direction's
 *      label, as the first message on the new QP: a 32-byte SEND that the
 *      acceptor's first receive takes into a buffer of its own.
 * Why on the QP: librdmacm has no third exchange of private data (the RTU
 * carries none), and a second connect request with the proof would double
 * the round trips and leave the acceptor holding state between two
 * connections; the QP exists anyway, and its first message arrives before
 * anything else the dialler sends on it. The dialler checks the acceptor's
 * proof before it sends a byte (a wrong one: WARN, disconnect, try again).
 *
 * Until its proof has arrived and checked out, an incoming connection is
 * only a candidate, held apart from the job (ib_cm_cand.c): it holds no
 * rank's slot and nothing that arrives on its QP counts.
 *
 * The acceptor learns of proofs from the CQ, which connect() therefore
 * polls while candidates wait, with the same completion handling as
 * progress(): a peer whose connections are all up may start sending before
 * this rank's connect() returns.
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
#include <sys/random.h>

#include "common/clock.h"
#include "transport/ib/ib_cm.h"

#define RESOLVE_MS 2000

gw_ib_cm_conn_t *gw__ib_cm_conn_of(gw_ib_t *t, int peer, int qp)
{
    int i = (peer < t->base.rank ? peer : peer - 1) * t->nqps + qp;
    return &t->cm_conns[i];
}

uint8_t *gw__ib_cm_proof_buf(gw_ib_t *t, int slot)
{
    return t->cm_auth_mem + (size_t)slot * GW_IB_CM_PROOF_SLOT;
}

gw_status_t gw__ib_cm_nonce(gw_ib_t *t, uint8_t out[GW_IB_CM_NONCE_LEN])
{
    /* Up to 256 bytes, getrandom() returns them all once the pool is ready. */
    if (getrandom(out, GW_IB_CM_NONCE_LEN, 0) == GW_IB_CM_NONCE_LEN)
        return GW_OK;
    GW_ERROR(t->base.log, GW_IB_SUBSYS, "getrandom() for an RDMA CM nonce: %m");
    return GW_ERR_SYSTEM;
}

void gw__ib_cm_peer_str(struct rdma_cm_id *id, char *buf, size_t cap)
{
    gw__sock_addr_str((const struct sockaddr *)&id->route.addr.dst_addr, buf, cap);
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
    static const char *const drop_kinds[CM_DROP_KINDS] = {"failed or gone before their proof",
                                                          "garbage", "wrong proof or replay",
                                                          "not for us", "evicted"};
    snprintf(t->cm_where, sizeof(t->cm_where), "the RDMA CM listener %s", str);
    t->cm_strangers = (gw_sock_strangers_t){.log = lg,
                                            .subsys = GW_IB_SUBSYS,
                                            .where = t->cm_where,
                                            .kind_names = drop_kinds,
                                            .nkinds = CM_DROP_KINDS};
    return GW_OK;
}

void gw__ib_cm_drop_id(gw_ib_t *t, gw_ib_cm_conn_t *c)
{
    gw_ib_peer_t *p = &t->peers[c->peer];
    if (c->id) {
        if (c->id->qp) {
            gw__ib_cm_retire_qpn(t, c->id->qp->qp_num);
            t->api.cm_destroy_qp(c->id);
        }
        t->api.destroy_id(c->id);
        t->qpn_dirty = 1;
    }
    c->id = NULL;
    p->qp[c->qp] = NULL;
    p->cm_id[c->qp] = NULL;
}

static void retry(gw_ib_t *t, gw_ib_cm_conn_t *c, const char *why)
{
    snprintf(c->why, sizeof(c->why), "%s", why);
    int pause = gw__sock_retry_arm(&c->retry);
    GW_TRACE(t->base.log, GW_IB_SUBSYS, "RDMA CM connection %d to %s: %s; retrying in %d ms", c->qp,
             t->peers[c->peer].desc, why, pause);
    gw__ib_cm_drop_id(t, c);
    c->state = c->out ? CM_WAIT : CM_IDLE;
}

void gw__ib_cm_ack_timeout(gw_ib_t *t, struct rdma_cm_id *id)
{
    uint8_t timeout = (uint8_t)t->cfg.timeout;
    if (t->api.set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
                          sizeof(timeout)) != 0)
        GW_TRACE(t->base.log, GW_IB_SUBSYS, "rdma_set_option(ACK_TIMEOUT): %m");
}

void gw__ib_cm_src_addr(const gw_ib_t *t, struct sockaddr_storage *src)
{
    memcpy(src, &t->local.sa, sizeof(*src));
    if (src->ss_family == AF_INET)
        ((struct sockaddr_in *)src)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)src)->sin6_port = 0;
}

void gw__ib_cm_out_start(gw_ib_t *t, gw_ib_cm_conn_t *c)
{
    gw_ib_peer_t *p = &t->peers[c->peer];
    char why[128];
    if (t->api.create_id(t->cm_channel, &c->id, c, RDMA_PS_TCP) != 0) {
        snprintf(why, sizeof(why), "rdma_create_id: %s", strerror(errno));
        c->id = NULL;
        retry(t, c, why);
        return;
    }
    gw__ib_cm_ack_timeout(t, c->id);
    struct sockaddr_storage src;
    gw__ib_cm_src_addr(t, &src);
    if (t->api.resolve_addr(c->id, (struct sockaddr *)&src, (struct sockaddr *)&p->addr.sa,
                            RESOLVE_MS) != 0) {
        snprintf(why, sizeof(why), "rdma_resolve_addr: %s", strerror(errno));
        retry(t, c, why);
        return;
    }
    c->state = CM_ADDR;
}

/* A QP on id, on our PD and CQ. */
gw_status_t gw__ib_cm_create_qp(gw_ib_t *t, struct rdma_cm_id *id, const char *whom)
{
    struct ibv_qp_init_attr ia;
    for (;;) {
        gw__ib_qp_init_attr(t, &ia);
        if (t->api.cm_create_qp(id, t->pd, &ia) == 0)
            break;
        int err = errno;
        if (gw__ib_qp_inline_retry(t, err))
            continue;
        errno = err;
        GW_ERROR(t->base.log, GW_IB_SUBSYS, "rdma_create_qp for %s: %m", whom);
        return gw__ib_errno_status(err);
    }
    gw__ib_qp_created(t, &ia);
    return GW_OK;
}

void gw__ib_cm_param(gw_ib_t *t, struct rdma_conn_param *cp, const uint8_t *pdata, size_t len)
{
    memset(cp, 0, sizeof(*cp));
    cp->private_data = pdata;
    cp->private_data_len = (uint8_t)len;
    cp->responder_resources = 1;
    cp->initiator_depth = 1;
    cp->retry_count = (uint8_t)t->cfg.retry_cnt;
    cp->rnr_retry_count = 7;
}

/* The dialler's side, once the route is known: create c's QP and send the
 * connect request with a fresh nonce. A call that fails is retried like
 * any failed attempt. */
static gw_status_t dial(gw_ib_t *t, gw_ib_cm_conn_t *c)
{
    gw_ib_peer_t *p = &t->peers[c->peer];
    char whom[160];
    snprintf(whom, sizeof(whom), "%s, QP %d", p->desc, c->qp);
    gw_status_t st = gw__ib_pair_block(t, p);
    if (st == GW_OK)
        st = gw__ib_cq_room(t, p);
    if (st == GW_OK)
        st = gw__ib_cm_create_qp(t, c->id, whom);
    if (st == GW_OK)
        st = gw__ib_cm_nonce(t, c->nonce);
    if (st != GW_OK)
        return st;
    p->qp[c->qp] = c->id->qp;
    p->cm_id[c->qp] = c->id;
    t->qpn_dirty = 1;
    if ((st = gw__ib_qp_post_recvs(t, p, c->qp, GW_IB_WQ_DEPTH)) != GW_OK)
        return st;
    gw_ib_cm_pdata_t pd = {.from = (uint32_t)t->base.rank,
                           .to = (uint32_t)c->peer,
                           .qp_idx = (uint16_t)c->qp,
                           .nqps = (uint16_t)t->nqps};
    memcpy(pd.job_id, t->job_id, 16);
    memcpy(pd.nonce, c->nonce, GW_IB_CM_NONCE_LEN);
    uint8_t buf[GW_IB_CM_REQ_SIZE];
    gw__ib_cm_req_encode(&pd, buf);
    struct rdma_conn_param cp;
    gw__ib_cm_param(t, &cp, buf, sizeof(buf));
    if (t->api.connect(c->id, &cp) != 0) {
        char why[128];
        snprintf(why, sizeof(why), "rdma_connect: %s", strerror(errno));
        retry(t, c, why);
        return GW_OK;
    }
    c->state = CM_CONNECTING;
    return GW_OK;
}

/* The dialler's side, ESTABLISHED: the accept must carry the acceptor's
 * proof over our nonce; then ours goes out as the first message on the QP
 * and the connection is up. */
static gw_status_t on_accepted(gw_ib_t *t, gw_ib_cm_conn_t *c, const uint8_t *pdata, size_t len)
{
    gw_ib_peer_t *p = &t->peers[c->peer];
    gw_ib_cm_pdata_t pd;
    gw_ib_cm_shake_t sh = {.dialler = (uint32_t)t->base.rank,
                           .acceptor = (uint32_t)c->peer,
                           .qp_idx = (uint16_t)c->qp};
    memcpy(sh.nonce_d, c->nonce, GW_IB_CM_NONCE_LEN);
    const char *bad = NULL;
    if (gw__ib_cm_rep_decode(pdata, len, &pd) != GW_OK)
        bad = "its accept is not a gradwire accept of this version";
    else if (pd.from != (uint32_t)c->peer || pd.to != (uint32_t)t->base.rank ||
             pd.qp_idx != (uint16_t)c->qp)
        bad = "its accept names other ranks or another QP";
    else {
        memcpy(sh.nonce_a, pd.nonce, GW_IB_CM_NONCE_LEN);
        sh.blk_a = pd.blk;
        sh.rkey_a = pd.blk_rkey;
    }
    if (!bad && !gw__ib_cm_proof_ok(t->data_key, &sh, 1, pd.mac))
        bad = "its accept has a wrong proof (it does not know the job token)";
    if (bad) {
        char addr[64], why[192];
        gw__ib_cm_peer_str(c->id, addr, sizeof(addr));
        GW_WARN(t->base.log, GW_IB_SUBSYS,
                "RDMA CM connection %d to %s at %s: %s: disconnecting and trying again", c->qp,
                p->desc, addr, bad);
        snprintf(why, sizeof(why), "%s answered: %s", addr, bad);
        t->api.disconnect(c->id);
        retry(t, c, why);
        return GW_OK;
    }
    p->rblk = pd.blk; /* where we write CTS entries and eager messages */
    p->rblk_rkey = pd.blk_rkey;
    int slot = GW_IB_CM_CANDS + (int)(c - t->cm_conns);
    uint8_t *buf = gw__ib_cm_proof_buf(t, slot), mac[GW_IB_CM_MAC_LEN];
    sh.blk_d = (uint64_t)(uintptr_t)p->blk;
    sh.rkey_d = gw__ib_blk_rkey(t, p);
    gw__ib_cm_proof(t->data_key, &sh, 0, mac);
    gw__ib_cm_proof_msg_encode(mac, sh.blk_d, sh.rkey_d, buf);
    struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)buf,
                          .length = GW_IB_CM_PROOF_SIZE,
                          .lkey = t->cm_auth_mr->lkey};
    struct ibv_send_wr wr = {.wr_id = GW_IB_WR_PROOF_SEND,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED,
                             .sg_list = &sge,
                             .num_sge = 1},
                       *badwr = NULL;
    int rc = ibv_post_send(c->id->qp, &wr, &badwr);
    if (rc != 0) {
        char why[128];
        snprintf(why, sizeof(why), "posting our proof: %s", strerror(rc));
        t->api.disconnect(c->id);
        retry(t, c, why);
        return GW_OK;
    }
    p->sq_used[c->qp]++;
    c->state = CM_UP;
    p->qp_up++;
    return GW_OK;
}

/* Handle one event of the connection phase. */
static gw_status_t on_event(gw_ib_t *t, enum rdma_cm_event_type type, int status,
                            struct rdma_cm_id *id, const uint8_t *pdata, size_t pdata_len)
{
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
        gw__ib_cm_on_request(t, id, pdata, pdata_len);
        return GW_OK;
    }
    gw_ib_cm_cand_t *k = gw__ib_cm_cand_of(t, id->context);
    if (k) {
        gw__ib_cm_cand_event(t, k, type, status);
        return GW_OK;
    }
    gw_ib_peer_t *knocked = gw__ib_cm_knock_of(t, id->context);
    if (knocked)
        return gw__ib_cm_knock_event(t, knocked, type, status);
    gw_ib_cm_conn_t *c = id->context;
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
        return dial(t, c);
    case RDMA_CM_EVENT_ESTABLISHED:
        /* An accepted connection is up once proven (cand_admit), whether
         * or not its ESTABLISHED came first. */
        return c->out && c->state == CM_CONNECTING ? on_accepted(t, c, pdata, pdata_len) : GW_OK;
    default:
        snprintf(why, sizeof(why), "%s (status %d)", t->api.event_str(type), status);
        if (t->lazy && type == RDMA_CM_EVENT_REJECTED && status == GW_IB_REJ_INVALID_SERVICE_ID &&
            gw__ib_dial_give_up(t, p, "its host refused our request to connect"))
            return GW_OK;
        if (t->lazy && type == RDMA_CM_EVENT_REJECTED && status == GW_IB_REJ_INVALID_SERVICE_ID)
            /* Connecting on first use, the peer has listened since before
             * the address exchange: nobody there means it is gone. */
            return gw__ib_peer_fail(t, p, GW_ERR_REMOTE,
                                    "no longer listens at its RDMA CM address (our request to "
                                    "connect was refused by its host): it closed its "
                                    "communicator or died");
        if (c->state == CM_UP) {
            /* Only a disconnect can follow; during connect() it means the
             * peer gave up on this connection (it failed, timed out, or
             * found our proof wrong). */
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
int gw__ib_cm_next_event(gw_ib_t *t, gw_status_t *st, int connecting)
{
    struct rdma_cm_event *ev;
    if (t->api.get_cm_event(t->cm_channel, &ev) != 0)
        return 0;
    enum rdma_cm_event_type type = ev->event;
    int status = ev->status;
    struct rdma_cm_id *id = ev->id;
    uint8_t pdata[256];
    size_t plen = 0;
    if ((type == RDMA_CM_EVENT_CONNECT_REQUEST || type == RDMA_CM_EVENT_ESTABLISHED) &&
        ev->param.conn.private_data) {
        plen = ev->param.conn.private_data_len;
        if (plen > sizeof(pdata))
            plen = sizeof(pdata);
        memcpy(pdata, ev->param.conn.private_data, plen);
    }
    t->api.ack_cm_event(ev);
    /* Requests, candidates and knocks have no conn. */
    gw_ib_cm_conn_t *c = type == RDMA_CM_EVENT_CONNECT_REQUEST ||
                                 gw__ib_cm_cand_of(t, id->context) ||
                                 gw__ib_cm_knock_of(t, id->context)
                             ? NULL
                             : id->context;
    /* Connecting on first use, pairs are set up after connect() too: the
     * events of those not up yet are the set-up's. */
    int setting_up = t->lazy && !(c && c->state == CM_UP) && type != RDMA_CM_EVENT_DEVICE_REMOVAL;
    if (connecting || setting_up) {
        *st = on_event(t, type, status, id, pdata, plen);
        return 1;
    }
    /* A candidate outlives connect() only when connect() failed. */
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
    while (st == GW_OK && gw__ib_cm_next_event(t, &st, 0))
        ;
    gw__sock_strangers_summary(&t->cm_strangers, gw__now_ms(), 0, NULL);
    /* After connect() every failure is the transport's (logged already
     * where it happened). */
    if (st != GW_OK && t->base.failed == GW_OK)
        return gw__ib_fail(t, st, NULL);
    return t->base.failed;
}

void gw__ib_cm_teardown(gw_ib_t *t)
{
    if (t->cm_strangers.log)
        gw__sock_strangers_summary(&t->cm_strangers, gw__now_ms(), 1, NULL);
    for (int r = 0; t->peers && r < t->base.size; r++)
        gw__ib_cm_knock_end(t, &t->peers[r]);
    for (int i = 0; t->cm_conns && i < t->ncm_conns; i++) {
        gw_ib_cm_conn_t *c = &t->cm_conns[i];
        if (!c->id)
            continue;
        if (c->state == CM_UP)
            t->api.disconnect(c->id);
        gw__ib_cm_drop_id(t, c);
    }
    gw__ib_cm_cands_free(t);
    if (t->cm_auth_mr)
        t->api.dereg_mr(t->cm_auth_mr);
    t->cm_auth_mr = NULL;
    free(t->cm_auth_mem);
    t->cm_auth_mem = NULL;
    free(t->cm_conns);
    t->cm_conns = NULL;
    t->ncm_conns = 0;
}
