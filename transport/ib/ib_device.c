/*
 * ib_device.c - which device, port and GID the transport uses, and the one
 * line that says why RDMA is not used when none fits.
 *
 * Every device libibverbs lists is opened and every port queried, so that
 * the choice (GW_IB_HCA, else the first active port; ib_hca.c) sees the whole
 * landscape and a failure can list it ("rxe0:1 (DOWN), mlx5_0:1 (ACTIVE)").
 * Contexts of the devices not chosen are closed again. On RoCE the GID
 * index comes from sysfs (ib_gid.c) unless GW_IB_GID_INDEX gives it; on
 * InfiniBand the LID addresses the port, and a port without one (no subnet
 * manager) is reported as such.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/ib/ib_internal.h"

gw_status_t gw__ib_unavailable(const gw_ib_t *t, gw_status_t st, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* GW_TRANSPORT=ib: a missing device is the user's error, not a fallback. */
    if (t->forced)
        GW_ERROR(t->base.log, GW_IB_SUBSYS, "GW_TRANSPORT=ib, but RDMA is not usable here: %s",
                 msg);
    else
        GW_INFO(t->base.log, GW_IB_SUBSYS, "not using RDMA (the network transport is TCP): %s",
                msg);
    return st;
}

typedef struct enum_state {
    struct ibv_device **list;
    int ndev;
    struct ibv_context **ctxs; /* per device, NULL when it would not open */
    gw_ib_port_info_t *ports;
    int *port_dev; /* device index of each port */
    int nports;
} enum_state_t;

static void enum_free(gw_ib_t *t, enum_state_t *e, struct ibv_context *keep)
{
    for (int d = 0; e->ctxs && d < e->ndev; d++)
        if (e->ctxs[d] && e->ctxs[d] != keep)
            t->api.close_device(e->ctxs[d]);
    if (e->list)
        t->api.free_device_list(e->list);
    free(e->ctxs);
    free(e->ports);
    free(e->port_dev);
}

static const char *port_state_name(enum ibv_port_state s)
{
    switch (s) {
    case IBV_PORT_DOWN:
        return "DOWN";
    case IBV_PORT_INIT:
        return "INIT";
    case IBV_PORT_ARMED:
        return "ARMED";
    case IBV_PORT_ACTIVE:
        return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER:
        return "ACTIVE_DEFER";
    default:
        return "NOP";
    }
}

static gw_status_t enumerate(gw_ib_t *t, enum_state_t *e)
{
    memset(e, 0, sizeof(*e));
    e->list = t->api.get_device_list(&e->ndev);
    if (!e->list)
        return gw__ib_unavailable(
            t, GW_ERR_NOT_FOUND, "no RDMA device found (ibv_get_device_list: %m%s)",
            errno == ENOSYS ? ": this kernel has no RDMA support loaded" : "");
    if (e->ndev == 0)
        return gw__ib_unavailable(t, GW_ERR_NOT_FOUND, "no RDMA device found");
    e->ctxs = calloc((size_t)e->ndev, sizeof(*e->ctxs));
    int cap = e->ndev * 4;
    e->ports = calloc((size_t)cap, sizeof(*e->ports));
    e->port_dev = calloc((size_t)cap, sizeof(*e->port_dev));
    if (!e->ctxs || !e->ports || !e->port_dev)
        return GW_ERR_NO_MEMORY;
    for (int d = 0; d < e->ndev; d++) {
        const char *name = t->api.get_device_name(e->list[d]);
        struct ibv_context *ctx = t->api.open_device(e->list[d]);
        if (!ctx) {
            GW_INFO(t->base.log, GW_IB_SUBSYS, "cannot open RDMA device %s: %m", name);
            continue;
        }
        e->ctxs[d] = ctx;
        struct ibv_device_attr da;
        if (t->api.query_device(ctx, &da) != 0) {
            GW_INFO(t->base.log, GW_IB_SUBSYS, "ibv_query_device(%s) failed", name);
            continue;
        }
        for (int p = 1; p <= da.phys_port_cnt; p++) {
            struct ibv_port_attr pa;
            if (gw__ib_query_port(&t->api, ctx, (uint8_t)p, &pa) != 0)
                continue;
            if (e->nports == cap) {
                cap *= 2;
                gw_ib_port_info_t *np = realloc(e->ports, (size_t)cap * sizeof(*np));
                int *nd = np ? realloc(e->port_dev, (size_t)cap * sizeof(*nd)) : NULL;
                if (np)
                    e->ports = np;
                if (!np || !nd)
                    return GW_ERR_NO_MEMORY;
                e->port_dev = nd;
            }
            gw_ib_port_info_t *pi = &e->ports[e->nports];
            snprintf(pi->device, sizeof(pi->device), "%s", name);
            pi->port = p;
            pi->active = pa.state == IBV_PORT_ACTIVE;
            pi->link_layer = pa.link_layer;
            pi->state_str = port_state_name(pa.state);
            e->port_dev[e->nports++] = d;
        }
    }
    return GW_OK;
}

/* GID index and GID for the chosen port (RoCE: from sysfs unless given). */
static gw_status_t pick_gid(gw_ib_t *t, char *desc, size_t desc_cap)
{
    int roce = t->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
    t->gid_index = t->cfg.gid_index;
    if (t->gid_index < 0 && roce) {
        gw_status_t st =
            gw__ib_gid_pick(t->cfg.sysfs, t->dev_name, t->port_num, &t->gid_index, desc, desc_cap);
        if (st != GW_OK)
            return gw__ib_unavailable(t, GW_ERR_NOT_FOUND, "%s", desc);
    } else if (t->gid_index >= 0) {
        if (gw__ib_gid_check(t->cfg.sysfs, t->dev_name, t->port_num, t->gid_index, roce,
                             t->port_attr.gid_tbl_len, desc, desc_cap) != GW_OK) {
            GW_ERROR(t->base.log, GW_IB_SUBSYS, "%s", desc);
            return GW_ERR_CONFIG;
        }
    } else {
        snprintf(desc, desc_cap, "LID %u", (unsigned)t->port_attr.lid);
        if (t->port_attr.lid == 0)
            return gw__ib_unavailable(
                t, GW_ERR_NOT_FOUND,
                "%s:%d is InfiniBand but has no LID (is a subnet manager running?)", t->dev_name,
                t->port_num);
        return GW_OK;
    }
    static const uint8_t zero[16];
    if (t->gid_index >= t->port_attr.gid_tbl_len ||
        t->api.query_gid(t->ctx, (uint8_t)t->port_num, t->gid_index, &t->gid) != 0 ||
        memcmp(t->gid.raw, zero, sizeof(zero)) == 0) {
        GW_ERROR(t->base.log, GW_IB_SUBSYS,
                 "GW_IB_GID_INDEX=%d: %s port %d has no GID at index %d (its table has %d "
                 "entries; `ibv_devinfo -v` lists them)",
                 t->gid_index, t->dev_name, t->port_num, t->gid_index, t->port_attr.gid_tbl_len);
        return GW_ERR_CONFIG;
    }
    return GW_OK;
}

gw_status_t gw__ib_open_device(gw_ib_t *t, char *gid_desc, size_t gid_cap)
{
    gw_ib_hca_filter_t filter;
    char why[640];
    if (gw__ib_hca_parse(t->cfg.hca, &filter, why, sizeof(why)) != GW_OK) {
        GW_ERROR(t->base.log, GW_IB_SUBSYS, "%s", why);
        return GW_ERR_CONFIG;
    }
    enum_state_t e;
    gw_status_t st = enumerate(t, &e);
    if (st != GW_OK) {
        enum_free(t, &e, NULL);
        return st;
    }
    int rails[GW_IB_MAX_RAILS];
    int n = gw__ib_choose_rails(&filter, e.ports, e.nports, t->cfg.rails, rails, GW_IB_MAX_RAILS,
                                why, sizeof(why));
    if (n < 0) {
        enum_free(t, &e, NULL);
        return gw__ib_unavailable(t, GW_ERR_NOT_FOUND, "%s", why);
    }
    t->nrails = n;
    for (int k = 0; k < n; k++)
        snprintf(t->rail_spec[k], sizeof(t->rail_spec[k]), "=%.62s:%d", e.ports[rails[k]].device,
                 e.ports[rails[k]].port);
    int i = rails[0];
    t->ctx = e.ctxs[e.port_dev[i]];
    t->own_ctx = 1;
    t->port_num = e.ports[i].port;
    snprintf(t->dev_name, sizeof(t->dev_name), "%s", e.ports[i].device);
    enum_free(t, &e, t->ctx);
    if (gw__ib_query_port(&t->api, t->ctx, (uint8_t)t->port_num, &t->port_attr) != 0) {
        GW_ERROR(t->base.log, GW_IB_SUBSYS, "ibv_query_port(%s:%d): %m", t->dev_name, t->port_num);
        return GW_ERR_SYSTEM;
    }
    return pick_gid(t, gid_desc, gid_cap);
}
