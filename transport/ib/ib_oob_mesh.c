/*
 * ib_oob_mesh.c - every out-of-band connection of a rank at once (ib_oob.c
 * has one connection's handshake): the dials to lower ranks, the accepts
 * from higher ones, the strangers among them, and connect()'s loop under
 * one deadline; connecting on first use (ib_lazy.c), the same mesh after
 * connect(), moved by progress() without waiting.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/clock.h"
#include "transport/ib/ib_oob.h"

static gw_status_t accept_new(mesh_t *m)
{
    for (;;) {
        char addr[sizeof(m->c[0].addr)];
        int fd = gw__sock_accept(m->t->listen_fd, addr, sizeof(addr));
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
                return GW_OK;
            GW_ERROR(gw__ib_oob_log(m), GW_IB_SUBSYS, "accept() on the out-of-band listener: %m");
            return GW_ERR_SYSTEM;
        }
        /* The slot of an incoming connection that is over (a stranger
         * dropped, a peer handed over) serves again: otherwise strangers
         * that came and went would use the table up, and a rank that
         * connects after them would be turned away until the deadline. */
        int live = 0;
        conn_t *c = NULL, *oldest = NULL;
        for (int i = 0; i < m->n; i++) {
            conn_t *o = &m->c[i];
            if (!o->out && o->peer < 0 && o->s.fd >= 0) {
                live++;
                if (!oldest || o->accepted < oldest->accepted)
                    oldest = o;
            }
            if (!c && !o->out && o->s.fd < 0 && o->phase == P_DONE)
                c = o;
        }
        if (!c && m->n < m->cap)
            c = &m->c[m->n++];
        if (live >= MAX_STRANGERS) {
            /* Unproven connections that say nothing would hold every slot
             * until the deadline: the one that has waited longest makes
             * room, as in the TCP transport. A rank dropped this way sees
             * EOF and dials again. Its slot is left for a later accept:
             * poll() may have reported events on its socket. */
            gw__ib_oob_drop(m, oldest, OOB_DROP_EVICTED,
                            "too many unproven out-of-band connections");
        }
        if (!c) { /* not expected: the table has room for every rank and MAX_STRANGERS more */
            close(fd);
            continue;
        }
        memset(c, 0, sizeof(*c));
        c->accepted = m->accepts++;
        gw__sock_dial_init(&c->s);
        c->s.fd = fd;
        c->peer = -1;
        c->phase = P_SHAKE;
        memcpy(c->addr, addr, sizeof(c->addr));
        gw__sock_shake_accept(&c->sh, m->t->data_key, GW_IB_HELLO_MAGIC, GW_IB_HELLO_SIZE,
                              &m->seen);
    }
}

/* The QPs for rank r (INIT, receives posted) and our first PSN towards
 * it, unless they exist. */
gw_status_t gw__ib_oob_peer_qps(mesh_t *m, int r)
{
    gw_ib_t *t = m->t;
    gw_ib_peer_t *p = &t->peers[r];
    if (p->qp[0])
        return GW_OK;
    gw_status_t bst = gw__ib_pair_block(t, p);
    if (bst == GW_OK)
        bst = gw__ib_cq_room(t, p);
    if (bst != GW_OK)
        return bst;
    for (int k = 0; k < t->nqps; k++) {
        gw_status_t st = gw__ib_qp_create(t, p, k);
        if (st == GW_OK)
            st = gw__ib_qp_post_recvs(t, p, k, GW_IB_WQ_DEPTH);
        if (st != GW_OK)
            return st;
    }
    t->qpn_dirty = 1;
    uint32_t psn = 0;
    if (getrandom(&psn, sizeof(psn), 0) != (ssize_t)sizeof(psn))
        psn = (uint32_t)gw__now_ns() ^ ((uint32_t)r << 16);
    m->peer_psn[r] = psn & 0xffffff;
    return GW_OK;
}

/* Dial rank r (lower than ours): its QPs, and a connection to its listener. */
static gw_status_t add_out(mesh_t *m, int r)
{
    gw_status_t st = gw__ib_oob_peer_qps(m, r);
    if (st != GW_OK)
        return st;
    /* A slot that is over serves again: connecting on first use, a dial
     * given up (gw__ib_dial_give_up) is made again later. */
    conn_t *c = NULL;
    for (int i = 0; !c && i < m->n; i++)
        if (m->c[i].s.fd < 0 && m->c[i].phase == P_DONE)
            c = &m->c[i];
    if (!c && m->n >= m->cap)
        return GW_ERR_NO_MEMORY; /* not expected: room for every rank */
    if (!c)
        c = &m->c[m->n++];
    memset(c, 0, sizeof(*c));
    gw__sock_dial_init(&c->s);
    c->peer = r;
    c->out = 1;
    c->phase = P_DIAL;
    return GW_OK;
}

static void report_missing(mesh_t *m)
{
    gw_ib_t *t = m->t;
    for (int r = 0; r < t->base.size; r++) {
        if (!t->peers[r].active || t->peers[r].oob_fd >= 0)
            continue;
        const char *why = "";
        for (int i = 0; i < m->n; i++)
            if (m->c[i].out && m->c[i].peer == r && m->c[i].s.why[0])
                why = m->c[i].s.why;
        GW_ERROR(gw__ib_oob_log(m), GW_IB_SUBSYS,
                 "no out-of-band connection with %s after %d ms%s%s (is it alive, and does a "
                 "firewall let TCP through?)",
                 t->peers[r].desc, t->timeout_ms, why[0] ? ": last error: " : "", why);
    }
}

/* One round: poll the listener and every connection for up to wait_ms
 * (less when a dial's retry is due sooner), accept, and move what poll()
 * reported. */
static gw_status_t mesh_round(mesh_t *m, int64_t wake)
{
    gw_ib_t *t = m->t;
    int np = 0;
    m->pfds[np++] = (struct pollfd){.fd = t->listen_fd, .events = POLLIN};
    for (int i = 0; i < m->n; i++) {
        conn_t *c = &m->c[i];
        short ev = c->phase == P_SEND         ? POLLOUT
                   : c->phase == P_RECV_READY ? POLLIN
                   : c->phase == P_SHAKE      ? gw__sock_shake_events(&c->sh)
                                              : 0;
        if (c->phase == P_DIAL)
            ev = gw__sock_dial_events(&c->s);
        if (c->phase == P_DIAL && c->s.fd < 0 && c->s.retry.at < wake)
            wake = c->s.retry.at;
        m->pfds[np++] = (struct pollfd){.fd = ev ? c->s.fd : -1, .events = ev};
    }
    int64_t now = gw__now_ms();
    int rc = poll(m->pfds, (nfds_t)np, (int)(wake > now ? wake - now : 0));
    if (rc < 0 && errno != EINTR) {
        GW_ERROR(gw__ib_oob_log(m), GW_IB_SUBSYS, "poll() while connecting out of band: %m");
        return GW_ERR_SYSTEM;
    }
    if (rc <= 0)
        return GW_OK;
    gw_status_t st = GW_OK;
    if (m->pfds[0].revents && (st = accept_new(m)) != GW_OK)
        return st;
    for (int i = 0; i + 1 < np; i++)
        if (m->pfds[i + 1].revents &&
            (st = gw__ib_oob_step(m, &m->c[i], m->pfds[i + 1].revents)) != GW_OK)
            return st;
    return GW_OK;
}

static gw_status_t step_all(mesh_t *m)
{
    for (int i = 0; i < m->n; i++) {
        gw_status_t st = gw__ib_oob_step(m, &m->c[i], 0);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

static void mesh_free(mesh_t *m)
{
    if (!m)
        return;
    gw__sock_strangers_summary(&m->strangers, gw__now_ms(), 1, NULL);
    for (int i = 0; m->c && i < m->n; i++)
        if (m->c[i].s.fd >= 0)
            close(m->c[i].s.fd);
    if (m->c) /* the handshakes hold the key */
        explicit_bzero(m->c, (size_t)m->cap * sizeof(*m->c));
    free(m->c);
    free(m->peer_psn);
    free(m->pfds);
    free(m);
}

static mesh_t *mesh_alloc(gw_ib_t *t)
{
    mesh_t *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->t = t;
    m->cap = t->base.size + MAX_STRANGERS + 8;
    m->c = calloc((size_t)m->cap, sizeof(*m->c));
    m->peer_psn = calloc((size_t)t->base.size, sizeof(*m->peer_psn));
    m->pfds = calloc((size_t)m->cap + 1, sizeof(*m->pfds));
    if (!m->c || !m->peer_psn || !m->pfds) {
        mesh_free(m);
        return NULL;
    }
    static const char *const drop_kinds[OOB_DROP_KINDS] = {
        "closed or silent", "garbage", "wrong proof or replay", "not for us", "evicted"};
    char addr[64];
    gw__sock_addr_str((const struct sockaddr *)&t->local.sa, addr, sizeof(addr));
    snprintf(m->where, sizeof(m->where), "the out-of-band port %s", addr);
    m->strangers = (gw_sock_strangers_t){.log = t->base.log,
                                         .subsys = GW_IB_SUBSYS,
                                         .where = m->where,
                                         .kind_names = drop_kinds,
                                         .nkinds = OOB_DROP_KINDS};
    return m;
}

gw_status_t gw__ib_oob_connect(gw_ib_t *t)
{
    mesh_t *m = mesh_alloc(t);
    if (!m) {
        GW_ERROR(t->base.log, GW_IB_SUBSYS, "out of memory for the out-of-band set-up");
        return GW_ERR_NO_MEMORY;
    }
    if (t->lazy) {
        t->oob = m; /* pairs are connected on first use (ib_lazy.c) */
        return GW_OK;
    }
    gw_status_t st = GW_OK;
    for (int r = 0; st == GW_OK && r < t->base.size; r++) {
        if (!t->peers[r].active)
            continue;
        m->pending++;
        st = r < t->base.rank ? add_out(m, r) : gw__ib_oob_peer_qps(m, r);
    }
    int64_t deadline = gw__now_ms() + t->timeout_ms;
    while (st == GW_OK && m->pending > 0) {
        if ((st = step_all(m)) != GW_OK || m->pending == 0)
            break;
        if (gw__now_ms() >= deadline) {
            report_missing(m);
            st = GW_ERR_TIMEOUT;
            break;
        }
        st = mesh_round(m, deadline);
        gw__sock_strangers_summary(&m->strangers, gw__now_ms(), 0, NULL);
    }
    mesh_free(m);
    /* The listener is not needed any more; strangers get refused. */
    if (st == GW_OK && t->listen_fd >= 0) {
        close(t->listen_fd);
        t->listen_fd = -1;
    }
    return st;
}

/* ---- connecting on first use (ib_lazy.c) --------------------------------- */

gw_status_t gw__ib_oob_dial_peer(gw_ib_t *t, gw_ib_peer_t *p)
{
    return t->oob ? add_out(t->oob, p->rank) : GW_OK;
}

int gw__ib_oob_dial_stop(gw_ib_t *t, gw_ib_peer_t *p)
{
    mesh_t *m = t->oob;
    for (int i = 0; m && i < m->n; i++) {
        conn_t *c = &m->c[i];
        if (c->out && c->peer == p->rank && c->phase != P_DONE && c->phase != P_DIAL &&
            c->phase != P_SHAKE)
            return -1; /* both proofs crossed: its QPs moved */
    }
    for (int i = 0; m && i < m->n; i++) {
        conn_t *c = &m->c[i];
        if (!c->out || c->peer != p->rank || c->phase == P_DONE)
            continue;
        if (c->s.fd >= 0)
            close(c->s.fd);
        c->s.fd = -1;
        c->phase = P_DONE;
        gw__sock_shake_wipe(&c->sh);
    }
    return 0;
}

const char *gw__ib_oob_dial_why(gw_ib_t *t, const gw_ib_peer_t *p)
{
    const char *why = "";
    for (int i = 0; t->oob && i < t->oob->n; i++)
        if (t->oob->c[i].out && t->oob->c[i].peer == p->rank && t->oob->c[i].s.why[0])
            why = t->oob->c[i].s.why;
    return why;
}

gw_status_t gw__ib_oob_lazy_step(gw_ib_t *t)
{
    mesh_t *m = t->oob;
    if (!m)
        return GW_OK;
    gw_status_t st = gw__ib_oob_knocks_step(t);
    if (st == GW_OK)
        st = step_all(m);
    if (st == GW_OK)
        st = mesh_round(m, gw__now_ms()); /* no waiting */
    gw__sock_strangers_summary(&m->strangers, gw__now_ms(), 0, NULL);
    return st;
}

int gw__ib_oob_busy(const gw_ib_t *t)
{
    for (int i = 0; t->oob && i < t->oob->n; i++)
        if (t->oob->c[i].s.fd >= 0 || (t->oob->c[i].out && t->oob->c[i].phase != P_DONE))
            return 1;
    for (int r = 0; t->oob && r < t->base.size; r++)
        if (t->peers[r].knock_fd >= 0)
            return 1;
    return 0;
}

void gw__ib_oob_free(gw_ib_t *t)
{
    for (int r = 0; t->peers && r < t->base.size; r++)
        if (t->peers[r].knock_fd >= 0) {
            close(t->peers[r].knock_fd);
            t->peers[r].knock_fd = -1;
        }
    mesh_free(t->oob);
    t->oob = NULL;
}
