/*
 * ib_hca.c - which device and port to use.
 *
 * GW_IB_HCA follows NCCL_IB_HCA so that cluster configurations carry over:
 * "mlx5_0:1,mlx5_1:1" lists devices (optionally with a port) in order of
 * preference; "^mlx5_2" excludes instead; names match as prefixes ("mlx5"
 * matches every mlx5 device) unless the list starts with "=" ("=mlx5_1"
 * does not match mlx5_10). "^=" excludes exact names. Without GW_IB_HCA the
 * first active port in enumeration order is taken.
 *
 * Several ports make several rails (ib_rails.c): GW_IB_RAILS=N takes the
 * first N active ports in that order; unset, every active port of an
 * include list is a rail (NCCL uses every NIC NCCL_IB_HCA lists), and
 * without one, or with an exclude list, the first active port alone.
 *
 * The choice itself works on a plain array of port descriptions, so the
 * tests can feed it any device landscape; ib_device.c fills the array
 * from ibv_get_device_list and ibv_query_port.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "transport/ib/ib_internal.h"

static int parse_port(const char *s, size_t n, int *port)
{
    if (n == 0 || n > 3)
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < 1 || v > 255)
        return -1;
    *port = v;
    return 0;
}

gw_status_t gw__ib_hca_parse(const char *spec, gw_ib_hca_filter_t *f, char *why, size_t why_cap)
{
    memset(f, 0, sizeof(*f));
    if (!spec)
        return GW_OK;
    const char *s = spec;
    if (*s == '^') {
        f->exclude = 1;
        s++;
    }
    if (*s == '=') {
        f->exact = 1;
        s++;
    }
    if (*s == '\0') {
        if (s != spec) {
            snprintf(why, why_cap, "GW_IB_HCA=\"%s\" lists no device", spec);
            return GW_ERR_CONFIG;
        }
        return GW_OK;
    }
    while (*s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *colon = memchr(s, ':', len);
        size_t name_len = colon ? (size_t)(colon - s) : len;
        if (name_len == 0 || name_len >= sizeof(f->entries[0].name)) {
            snprintf(why, why_cap, "GW_IB_HCA=\"%s\": entry \"%.*s\" has %s device name", spec,
                     (int)len, s, name_len == 0 ? "an empty" : "too long a");
            return GW_ERR_CONFIG;
        }
        if (f->n == GW_IB_HCA_MAX_ENTRIES) {
            snprintf(why, why_cap, "GW_IB_HCA=\"%s\" has more than %d entries", spec,
                     GW_IB_HCA_MAX_ENTRIES);
            return GW_ERR_CONFIG;
        }
        gw_ib_hca_entry_t *e = &f->entries[f->n];
        for (size_t i = 0; i < name_len; i++) {
            if (isspace((unsigned char)s[i]) || s[i] == '^' || s[i] == '=') {
                snprintf(why, why_cap, "GW_IB_HCA=\"%s\": unexpected '%c' in \"%.*s\"", spec, s[i],
                         (int)len, s);
                return GW_ERR_CONFIG;
            }
        }
        memcpy(e->name, s, name_len);
        e->name[name_len] = '\0';
        e->port = -1;
        if (colon && parse_port(colon + 1, len - name_len - 1, &e->port) != 0) {
            snprintf(why, why_cap, "GW_IB_HCA=\"%s\": \"%.*s\" is not a port number in [1, 255]",
                     spec, (int)(len - name_len - 1), colon + 1);
            return GW_ERR_CONFIG;
        }
        f->n++;
        if (!end)
            break;
        s = end + 1;
        if (*s == '\0') {
            snprintf(why, why_cap, "GW_IB_HCA=\"%s\" ends with a comma", spec);
            return GW_ERR_CONFIG;
        }
    }
    return GW_OK;
}

static int entry_matches(const gw_ib_hca_filter_t *f, const gw_ib_hca_entry_t *e,
                         const char *device, int port)
{
    int name_ok =
        f->exact ? strcmp(e->name, device) == 0 : strncmp(e->name, device, strlen(e->name)) == 0;
    return name_ok && (e->port < 0 || e->port == port);
}

int gw__ib_hca_match(const gw_ib_hca_filter_t *f, const char *device, int port)
{
    for (int i = 0; i < f->n; i++)
        if (entry_matches(f, &f->entries[i], device, port))
            return i;
    return -1;
}

/* "rxe0:1 (DOWN), mlx5_0:1 (ACTIVE)" for messages. */
static void list_ports(const gw_ib_port_info_t *ports, int n, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < cap; i++) {
        int w = snprintf(buf + used, cap - used, "%s%s:%d (%s)", i ? ", " : "", ports[i].device,
                         ports[i].port, ports[i].state_str ? ports[i].state_str : "?");
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* Active ports the filter admits, in its order for an include list (each
 * entry's matches in enumeration order, none twice), else in enumeration
 * order; at most cap indices in idx. *matched: ports the filter admits,
 * active or not. */
static int admitted(const gw_ib_hca_filter_t *f, const gw_ib_port_info_t *ports, int n, int *idx,
                    int cap, int *matched)
{
    int k = 0;
    *matched = 0;
    if (f->n > 0 && !f->exclude) {
        for (int e = 0; e < f->n; e++) {
            for (int i = 0; i < n; i++) {
                if (!entry_matches(f, &f->entries[e], ports[i].device, ports[i].port))
                    continue;
                int seen = 0;
                for (int j = 0; j < k; j++)
                    seen |= idx[j] == i;
                /* An earlier entry's match is counted, and listed, once. */
                if (gw__ib_hca_match(f, ports[i].device, ports[i].port) == e)
                    (*matched)++;
                if (ports[i].active && !seen && k < cap)
                    idx[k++] = i;
            }
        }
        return k;
    }
    for (int i = 0; i < n; i++) {
        if (f->exclude && gw__ib_hca_match(f, ports[i].device, ports[i].port) >= 0)
            continue;
        (*matched)++;
        if (ports[i].active && k < cap)
            idx[k++] = i;
    }
    return k;
}

static void none_why(const gw_ib_hca_filter_t *f, int matched, const char *list, char *why,
                     size_t why_cap)
{
    if (f->n > 0 && !f->exclude)
        snprintf(why, why_cap, "GW_IB_HCA %s (ports: %s)",
                 matched ? "matches no active port" : "matches no port", list);
    else if (matched == 0)
        snprintf(why, why_cap, "GW_IB_HCA excludes every port (ports: %s)", list);
    else
        snprintf(why, why_cap, "no active port (ports: %s)", list);
}

int gw__ib_choose_port(const gw_ib_hca_filter_t *f, const gw_ib_port_info_t *ports, int n,
                       char *why, size_t why_cap)
{
    int idx[1];
    return gw__ib_choose_rails(f, ports, n, 1, idx, 1, why, why_cap) > 0 ? idx[0] : -1;
}

int gw__ib_choose_rails(const gw_ib_hca_filter_t *f, const gw_ib_port_info_t *ports, int n,
                        int want, int *idx, int cap, char *why, size_t why_cap)
{
    char list[512];
    if (n == 0) {
        snprintf(why, why_cap, "no RDMA device found");
        return -1;
    }
    list_ports(ports, n, list, sizeof(list));
    int all[GW_IB_MAX_RAILS * 8], matched;
    int found = admitted(f, ports, n, all, (int)(sizeof(all) / sizeof(all[0])), &matched);
    if (found == 0) {
        none_why(f, matched, list, why, why_cap);
        return -1;
    }
    /* Automatic: every active port an include list names, else one. */
    int take = want > 0 ? want : (f->n > 0 && !f->exclude) ? found : 1;
    if (take > cap)
        take = cap;
    if (want > 0 && found < want) {
        snprintf(why, why_cap, "GW_IB_RAILS=%d, but %s only %d active port%s (ports: %s)", want,
                 f->n > 0 && !f->exclude ? "GW_IB_HCA admits" : "there is", found,
                 found == 1 ? "" : "s", list);
        return -1;
    }
    if (take > found)
        take = found;
    for (int i = 0; i < take; i++)
        idx[i] = all[i];
    return take;
}
