/*
 * sock_ifspec.c - GW_SOCKET_IFNAME as NCCL_SOCKET_IFNAME reads it: which
 * network interface the sockets of the job use (sock.h).
 *
 * The value is a comma-separated list of interface names, each a prefix
 * ("eth" is eth0, eth1, ...) or, after '=', an exact name ("=eth0" is eth0
 * only); with '^' in front the list says which interfaces NOT to use
 * ("^docker,=lo" is anything but docker* and lo). A list of one plain name,
 * the form GW_SOCKET_IFNAME had before it took lists, still means that
 * interface (and any whose name starts with it, as for NCCL).
 *
 * Choice. The interfaces are taken in the kernel's order (getifaddrs,
 * which lists them by index) and the first that matches, is up and has an
 * address wins, as NCCL's first socket does. With an exclusion list a
 * loopback interface is chosen only when nothing else is left: a job's
 * hosts do not meet on loopback, and "^docker" should not land there
 * because lo comes first. When nothing is chosen the error names what the
 * list matched and why each was unusable (down, no address), or that it
 * matched nothing, and lists the interfaces there are.
 */
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "transport/sock.h"

gw_status_t gw__ifspec_parse(const char *text, gw_ifspec_t *spec, char *err, size_t cap)
{
    memset(spec, 0, sizeof(*spec));
    const char *p = text ? text : "";
    if (*p == '^') {
        spec->exclude = 1;
        p++;
    }
    if (!*p) {
        snprintf(err, cap, "\"%s\" names no interface", text ? text : "");
        return GW_ERR_CONFIG;
    }
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int exact = len > 0 && *p == '=';
        const char *name = p + exact;
        size_t nlen = len - (size_t)exact;
        if (nlen == 0) {
            snprintf(err, cap, "\"%s\" has an empty name in its list", text);
            return GW_ERR_CONFIG;
        }
        if (nlen >= IF_NAMESIZE) {
            snprintf(err, cap, "\"%.*s\" in \"%s\" is longer than an interface name can be (%d)",
                     (int)nlen, name, text, IF_NAMESIZE - 1);
            return GW_ERR_CONFIG;
        }
        for (size_t i = 0; i < nlen; i++)
            if (name[i] <= ' ' || name[i] == '/' || name[i] == '^' || name[i] == '=' ||
                name[i] == 0x7f) {
                snprintf(err, cap, "\"%.*s\" in \"%s\" is not an interface name", (int)nlen, name,
                         text);
                return GW_ERR_CONFIG;
            }
        if (spec->count == GW_IFSPEC_MAX) {
            snprintf(err, cap, "\"%s\" lists more than %d interfaces", text, GW_IFSPEC_MAX);
            return GW_ERR_CONFIG;
        }
        memcpy(spec->items[spec->count].name, name, nlen);
        spec->items[spec->count].name[nlen] = '\0';
        spec->items[spec->count].exact = exact;
        spec->count++;
        if (!comma)
            break;
        p = comma + 1;
    }
    return GW_OK;
}

int gw__ifspec_match(const gw_ifspec_t *spec, const char *ifname)
{
    int listed = 0;
    for (int i = 0; i < spec->count && !listed; i++) {
        const char *n = spec->items[i].name;
        listed = spec->items[i].exact ? strcmp(ifname, n) == 0 : strncmp(ifname, n, strlen(n)) == 0;
    }
    return spec->exclude ? !listed : listed;
}

static int family_ok(const struct sockaddr *sa)
{
    return sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6);
}

/* The address of interface name to use: IPv4, else global IPv6, else
 * link-local IPv6. NULL when it has none; *up says whether it is up. */
static const struct ifaddrs *best_address(const struct ifaddrs *all, const char *name, int *up,
                                          int *loopback)
{
    const struct ifaddrs *v4 = NULL, *v6 = NULL, *v6ll = NULL;
    *up = *loopback = 0;
    for (const struct ifaddrs *a = all; a; a = a->ifa_next) {
        if (strcmp(a->ifa_name, name) != 0)
            continue;
        *up |= (a->ifa_flags & IFF_UP) != 0;
        *loopback |= (a->ifa_flags & IFF_LOOPBACK) != 0;
        if (!family_ok(a->ifa_addr))
            continue;
        if (a->ifa_addr->sa_family == AF_INET) {
            if (!v4)
                v4 = a;
        } else if (IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)a->ifa_addr)->sin6_addr)) {
            if (!v6ll)
                v6ll = a;
        } else if (!v6) {
            v6 = a;
        }
    }
    return v4 ? v4 : v6 ? v6 : v6ll;
}

static int first_of_name(const struct ifaddrs *all, const struct ifaddrs *a)
{
    for (const struct ifaddrs *b = all; b != a; b = b->ifa_next)
        if (strcmp(a->ifa_name, b->ifa_name) == 0)
            return 0;
    return 1;
}

/* "eth0: the interface is down; eth1: ..." */
static void append(char *buf, size_t cap, const char *name, const char *what)
{
    size_t n = strlen(buf);
    if (n < cap)
        snprintf(buf + n, cap - n, "%s%s: %s", n ? "; " : "", name, what);
}

const struct ifaddrs *gw__ifspec_choose(const gw_ifspec_t *spec, const struct ifaddrs *all,
                                        char *why, size_t cap)
{
    const struct ifaddrs *loop = NULL;
    why[0] = '\0';
    for (const struct ifaddrs *a = all; a; a = a->ifa_next) {
        if (!first_of_name(all, a) || !gw__ifspec_match(spec, a->ifa_name))
            continue;
        int up, loopback;
        const struct ifaddrs *addr = best_address(all, a->ifa_name, &up, &loopback);
        if (!up) {
            append(why, cap, a->ifa_name, "the interface is down");
            continue;
        }
        if (!addr) {
            append(why, cap, a->ifa_name, "the interface has no IPv4 or IPv6 address");
            continue;
        }
        if (spec->exclude && loopback) {
            if (!loop)
                loop = addr;
            continue;
        }
        return addr;
    }
    if (loop)
        return loop;
    if (!why[0])
        snprintf(why, cap,
                 spec->exclude ? "it excludes every interface"
                               : "no interface matches (no such interface)");
    return NULL;
}
