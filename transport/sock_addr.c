/*
 * sock_addr.c - local addresses of the sockets (sock.h): which one the TCP
 * transport and the verbs transport's out-of-band set-up listen on, how an
 * address reads in a message, and how it travels in an address blob.
 *
 * A wrong interface chosen silently is among the complaints users have most
 * about communication libraries, so the choice here is explicit and logged.
 * GW_SOCKET_IFNAME names the interfaces the way NCCL_SOCKET_IFNAME does
 * (sock_ifspec.c); one that matches nothing usable (no such interface, down,
 * no address) is a configuration error whose message says why and lists the
 * interfaces that do exist, never a quiet fall back to another one. Without
 * it we take the local address of our bootstrap connection to the root: the
 * kernel routed that connection, and every rank reaches the root, so the same
 * interface is the one the job's network is on. IPv4 is preferred on a named
 * interface; IPv6 (global, then link-local with its scope) is used when the
 * interface has no IPv4 address.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "common/byteorder.h"
#include "transport/sock.h"

static int family_ok(const struct sockaddr *sa)
{
    return sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6);
}

/* "lo (127.0.0.1), eth0 (10.0.0.2), wlan0 (no address)": every interface
 * once, with its first IPv4 address, else its first IPv6 address. */
static void list_interfaces(const struct ifaddrs *all, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (const struct ifaddrs *a = all; a; a = a->ifa_next) {
        int seen = 0;
        for (const struct ifaddrs *b = all; b != a; b = b->ifa_next)
            if (strcmp(a->ifa_name, b->ifa_name) == 0)
                seen = 1;
        if (seen)
            continue;
        const struct sockaddr *best = NULL;
        for (const struct ifaddrs *b = a; b; b = b->ifa_next) {
            if (strcmp(a->ifa_name, b->ifa_name) != 0 || !family_ok(b->ifa_addr))
                continue;
            if (!best || (best->sa_family == AF_INET6 && b->ifa_addr->sa_family == AF_INET))
                best = b->ifa_addr;
        }
        char host[INET6_ADDRSTRLEN] = "no address";
        if (best && best->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)best)->sin_addr, host, sizeof(host));
        else if (best)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)best)->sin6_addr, host,
                      sizeof(host));
        int w = snprintf(buf + n, cap - n, "%s%s (%s)", n ? ", " : "", a->ifa_name, host);
        if (w < 0 || (size_t)w >= cap - n)
            return;
        n += (size_t)w;
    }
    if (n == 0)
        snprintf(buf, cap, "none");
}

static gw_status_t pick_ifname(const gw_logger_t *lg, const char *subsys, const char *ifname,
                               struct sockaddr_storage *out, socklen_t *out_len, char *desc,
                               size_t desc_cap)
{
    gw_ifspec_t spec;
    char why[512];
    if (gw__ifspec_parse(ifname, &spec, why, sizeof(why)) != GW_OK) {
        GW_ERROR(lg, subsys,
                 "GW_SOCKET_IFNAME: %s (want interface names or prefixes, comma-separated, "
                 "'=' before an exact name, '^' in front to exclude them)",
                 why);
        return GW_ERR_CONFIG;
    }
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) != 0) {
        GW_ERROR(lg, subsys, "getifaddrs() to look up GW_SOCKET_IFNAME=%s: %m", ifname);
        return GW_ERR_SYSTEM;
    }
    const struct ifaddrs *pick = gw__ifspec_choose(&spec, all, why, sizeof(why));
    if (!pick) {
        char list[1024];
        list_interfaces(all, list, sizeof(list));
        GW_ERROR(lg, subsys, "GW_SOCKET_IFNAME=%s: %s; interfaces on this host: %s", ifname, why,
                 list);
        freeifaddrs(all);
        return GW_ERR_CONFIG;
    }
    memset(out, 0, sizeof(*out));
    if (pick->ifa_addr->sa_family == AF_INET) {
        memcpy(out, pick->ifa_addr, sizeof(struct sockaddr_in));
        ((struct sockaddr_in *)out)->sin_port = 0;
        *out_len = sizeof(struct sockaddr_in);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
        memcpy(in6, pick->ifa_addr, sizeof(*in6));
        in6->sin6_port = 0;
        if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr))
            in6->sin6_scope_id = if_nametoindex(pick->ifa_name);
        *out_len = sizeof(*in6);
    }
    if (spec.count == 1 && !spec.exclude && strcmp(pick->ifa_name, ifname) == 0)
        snprintf(desc, desc_cap, "interface %s, from GW_SOCKET_IFNAME", pick->ifa_name);
    else
        snprintf(desc, desc_cap, "interface %s, from GW_SOCKET_IFNAME=%s", pick->ifa_name, ifname);
    freeifaddrs(all);
    return GW_OK;
}

static int same_host_addr(const struct sockaddr *a, const struct sockaddr *b)
{
    if (!a || !b || a->sa_family != b->sa_family)
        return 0;
    if (a->sa_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                      &((const struct sockaddr_in *)b)->sin_addr, sizeof(struct in_addr)) == 0;
    if (a->sa_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
    return 0;
}

static gw_status_t pick_default(const gw_logger_t *lg, const char *subsys,
                                const struct sockaddr_storage *dflt, socklen_t dflt_len,
                                struct sockaddr_storage *out, socklen_t *out_len, char *desc,
                                size_t desc_cap)
{
    if (!dflt || dflt_len == 0 || !family_ok((const struct sockaddr *)dflt)) {
        GW_ERROR(lg, subsys,
                 "no local address to listen on: the bootstrap gave none and GW_SOCKET_IFNAME "
                 "is not set");
        return GW_ERR_CONFIG;
    }
    memset(out, 0, sizeof(*out));
    if (dflt->ss_family == AF_INET6 &&
        IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)dflt)->sin6_addr)) {
        /* A dual-stack bootstrap socket reports IPv4 peers as ::ffff:a.b.c.d;
         * listen on the plain IPv4 address, which every peer can reach. */
        struct sockaddr_in *in = (struct sockaddr_in *)out;
        in->sin_family = AF_INET;
        memcpy(&in->sin_addr, &((const struct sockaddr_in6 *)dflt)->sin6_addr.s6_addr[12], 4);
        *out_len = sizeof(*in);
    } else if (dflt->ss_family == AF_INET) {
        memcpy(out, dflt, sizeof(struct sockaddr_in));
        ((struct sockaddr_in *)out)->sin_port = 0;
        *out_len = sizeof(struct sockaddr_in);
    } else {
        memcpy(out, dflt, sizeof(struct sockaddr_in6));
        ((struct sockaddr_in6 *)out)->sin6_port = 0;
        *out_len = sizeof(struct sockaddr_in6);
    }
    int wildcard = out->ss_family == AF_INET
                       ? ((struct sockaddr_in *)out)->sin_addr.s_addr == htonl(INADDR_ANY)
                       : IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)out)->sin6_addr);
    char str[64];
    gw__sock_addr_str((const struct sockaddr *)out, str, sizeof(str));
    if (wildcard) {
        GW_ERROR(lg, subsys,
                 "the bootstrap's local address is the wildcard %s, which other ranks cannot "
                 "connect to: set GW_SOCKET_IFNAME to the interface to use",
                 str);
        return GW_ERR_CONFIG;
    }
    /* Name the interface in the log; not finding it is no error (the
     * address may belong to a VRF or a namespace we cannot enumerate). */
    const char *name = NULL;
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) == 0) {
        for (const struct ifaddrs *a = all; a && !name; a = a->ifa_next)
            if (same_host_addr(a->ifa_addr, (const struct sockaddr *)out))
                name = a->ifa_name;
    }
    if (name)
        snprintf(desc, desc_cap, "interface %s, which routes to the bootstrap root", name);
    else
        snprintf(desc, desc_cap, "the address that routes to the bootstrap root");
    if (all)
        freeifaddrs(all);
    return GW_OK;
}

gw_status_t gw__sock_pick_addr(const gw_logger_t *lg, const char *subsys, const char *ifname,
                               const struct sockaddr_storage *dflt, socklen_t dflt_len,
                               struct sockaddr_storage *out, socklen_t *out_len, char *desc,
                               size_t desc_cap)
{
    if (ifname && *ifname)
        return pick_ifname(lg, subsys, ifname, out, out_len, desc, desc_cap);
    return pick_default(lg, subsys, dflt, dflt_len, out, out_len, desc, desc_cap);
}

/* The numeric form that inet_ntop writes, with the interface of a scoped
 * link-local address added the way getnameinfo adds it ("fe80::1%eth0"):
 * without it such an address is ambiguous, and the bootstrap, which printed
 * addresses with getnameinfo, always showed it. */
void gw__sock_addr_str(const struct sockaddr *sa, char *buf, size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        snprintf(buf, cap, "%s:%u", host, (unsigned)ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        char scope[IF_NAMESIZE + 2] = "";
        if (in6->sin6_scope_id != 0 &&
            (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr) || IN6_IS_ADDR_MC_LINKLOCAL(&in6->sin6_addr))) {
            char name[IF_NAMESIZE];
            if (if_indextoname(in6->sin6_scope_id, name))
                snprintf(scope, sizeof(scope), "%%%s", name);
            else
                snprintf(scope, sizeof(scope), "%%%u", (unsigned)in6->sin6_scope_id);
        }
        snprintf(buf, cap, "[%s%s]:%u", host, scope, (unsigned)ntohs(in6->sin6_port));
    } else if (sa->sa_family == AF_UNSPEC) {
        snprintf(buf, cap, "(no address)");
    } else {
        snprintf(buf, cap, "(address family %d)", (int)sa->sa_family);
    }
}

void gw__sock_addr_put(uint8_t out[GW_SOCK_ADDR_WIRE], const struct sockaddr *sa)
{
    memset(out, 0, GW_SOCK_ADDR_WIRE);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        out[0] = 4;
        gw__put_be16(out + 1, ntohs(in->sin_port));
        memcpy(out + 3, &in->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        out[0] = 6;
        gw__put_be16(out + 1, ntohs(in6->sin6_port));
        memcpy(out + 3, &in6->sin6_addr, 16);
        gw__put_be32(out + 19, in6->sin6_scope_id);
    }
}

gw_status_t gw__sock_addr_get(const uint8_t in[GW_SOCK_ADDR_WIRE], struct sockaddr_storage *out,
                              socklen_t *out_len)
{
    memset(out, 0, sizeof(*out));
    *out_len = 0;
    if (in[0] == 4) {
        struct sockaddr_in *v4 = (struct sockaddr_in *)out;
        v4->sin_family = AF_INET;
        v4->sin_port = htons(gw__get_be16(in + 1));
        memcpy(&v4->sin_addr, in + 3, 4);
        *out_len = sizeof(*v4);
        return GW_OK;
    }
    if (in[0] == 6) {
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)out;
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(gw__get_be16(in + 1));
        memcpy(&v6->sin6_addr, in + 3, 16);
        v6->sin6_scope_id = gw__get_be32(in + 19);
        *out_len = sizeof(*v6);
        return GW_OK;
    }
    return in[0] == 0 ? GW_ERR_NOT_FOUND : GW_ERR_PROTOCOL;
}
