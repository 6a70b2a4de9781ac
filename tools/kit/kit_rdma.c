/*
 * kit_rdma.c - the RDMA ports a host has, as sysfs shows them
 * (/sys/class/infiniband/DEV/ports/N: state, link_layer, gids/K and
 * gid_attrs/types/K), for gradwire check's host sanity and gradwire info.
 * GW_IB_SYSFS moves the root, as it does for the verbs transport. Reading
 * sysfs needs no RDMA library: a host without rdma-core still says what its
 * kernel sees.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"

static int all_zero_gid(const char *gid)
{
    for (const char *c = gid; *c; c++)
        if (*c != '0' && *c != ':')
            return 0;
    return 1;
}

static void read_port(const char dir[1200], gw_kit_rdma_port_t *p)
{
    char path[1300], state[32];
    snprintf(path, sizeof(path), "%s/state", dir);
    gw_kit_read_line(path, state, sizeof(state));
    /* "4: ACTIVE" -> "ACTIVE" */
    const char *st = strchr(state, ':') ? strchr(state, ':') + 1 : state;
    while (*st == ' ')
        st++;
    snprintf(p->state, sizeof(p->state), "%.23s", st[0] ? st : "?");
    snprintf(path, sizeof(path), "%s/link_layer", dir);
    gw_kit_read_line(path, p->link_layer, sizeof(p->link_layer));
    p->ngids = 0;
    for (int k = 0; k < 256 && p->ngids < GW_KIT_RDMA_GIDS; k++) {
        char gid[64];
        snprintf(path, sizeof(path), "%s/gids/%d", dir, k);
        gw_kit_read_line(path, gid, sizeof(gid));
        if (!gid[0])
            break; /* past the table */
        if (all_zero_gid(gid))
            continue;
        p->gids[p->ngids].index = k;
        snprintf(p->gids[p->ngids].gid, sizeof(p->gids[0].gid), "%.47s", gid);
        snprintf(path, sizeof(path), "%s/gid_attrs/types/%d", dir, k);
        gw_kit_read_line(path, p->gids[p->ngids].type, sizeof(p->gids[0].type));
        snprintf(path, sizeof(path), "%s/gid_attrs/ndevs/%d", dir, k);
        gw_kit_read_line(path, p->gids[p->ngids].netdev, sizeof(p->gids[0].netdev));
        p->ngids++;
    }
}

static int by_name(const void *a, const void *b)
{
    const gw_kit_rdma_port_t *x = a, *y = b;
    int c = strcmp(x->device, y->device);
    return c ? c : x->port - y->port;
}

int gw_kit_rdma_ports(gw_kit_rdma_port_t *out, int cap)
{
    const char *root = getenv("GW_IB_SYSFS");
    char base[600];
    snprintf(base, sizeof(base), "%s/class/infiniband", root && root[0] ? root : "/sys");
    DIR *d = opendir(base);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < cap) {
        if (e->d_name[0] == '.')
            continue;
        char ports[900];
        snprintf(ports, sizeof(ports), "%s/%s/ports", base, e->d_name);
        DIR *pd = opendir(ports);
        if (!pd)
            continue;
        struct dirent *p;
        while ((p = readdir(pd)) && n < cap) {
            if (p->d_name[0] == '.')
                continue;
            gw_kit_rdma_port_t *port = &out[n++];
            memset(port, 0, sizeof(*port));
            snprintf(port->device, sizeof(port->device), "%.63s", e->d_name);
            port->port = atoi(p->d_name);
            char dir[1200];
            snprintf(dir, sizeof(dir), "%s/%s", ports, p->d_name);
            read_port(dir, port);
        }
        closedir(pd);
    }
    closedir(d);
    qsort(out, (size_t)n, sizeof(*out), by_name);
    return n;
}
