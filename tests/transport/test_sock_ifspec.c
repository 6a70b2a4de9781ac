/* GW_SOCKET_IFNAME's lists (transport/sock_ifspec.c): NCCL_SOCKET_IFNAME's
 * syntax parsed and refused as it should be, and the interface chosen from
 * a made-up host's interfaces (getifaddrs' list, built here), so the rules
 * are checked whatever this machine has. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <string.h>

#include "transport/sock.h"

static gw_ifspec_t parse_ok(const char *text)
{
    gw_ifspec_t spec;
    char err[256] = "";
    cr_assert_eq(gw__ifspec_parse(text, &spec, err, sizeof(err)), GW_OK, "\"%s\": %s", text, err);
    return spec;
}

static void parse_refused(const char *text, const char *message)
{
    gw_ifspec_t spec;
    char err[256] = "";
    cr_expect_eq(gw__ifspec_parse(text, &spec, err, sizeof(err)), GW_ERR_CONFIG, "\"%s\" accepted",
                 text);
    cr_expect(strstr(err, message), "\"%s\": \"%s\" lacks \"%s\"", text, err, message);
}

Test(ifspec, prefixes_exact_names_and_exclusion)
{
    gw_ifspec_t s = parse_ok("eth");
    cr_expect(gw__ifspec_match(&s, "eth0"));
    cr_expect(gw__ifspec_match(&s, "eth"));
    cr_expect(!gw__ifspec_match(&s, "et"));
    cr_expect(!gw__ifspec_match(&s, "ib0"));
    s = parse_ok("=eth0");
    cr_expect(gw__ifspec_match(&s, "eth0"));
    cr_expect(!gw__ifspec_match(&s, "eth01"));
    s = parse_ok("ib,=eth1");
    cr_expect(gw__ifspec_match(&s, "ib0") && gw__ifspec_match(&s, "eth1"));
    cr_expect(!gw__ifspec_match(&s, "eth0"));
    s = parse_ok("^docker,=lo");
    cr_expect(s.exclude);
    cr_expect(!gw__ifspec_match(&s, "docker0") && !gw__ifspec_match(&s, "lo"));
    cr_expect(gw__ifspec_match(&s, "lo1") && gw__ifspec_match(&s, "eth0"));
}

Test(ifspec, malformed_lists_are_refused)
{
    parse_refused("", "names no interface");
    parse_refused("^", "names no interface");
    parse_refused("eth,,ib", "empty name");
    parse_refused("eth,", "empty name");
    parse_refused("=", "empty name");
    parse_refused("^=", "empty name");
    parse_refused("averyveryverylongname", "longer than an interface name");
    parse_refused("eth 0", "not an interface name");
    parse_refused("a/b", "not an interface name");
    parse_refused("eth^", "not an interface name");
    parse_refused("a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "more than 16");
}

/* A made-up host: lo (loopback, 127.0.0.1), docker0 (up, 172.17.0.1),
 * eth0 (down, 10.0.0.2), eth1 (up, no address), ib0 (up, 10.1.0.2). */
static struct sockaddr_in addrs[4];
static struct ifaddrs nodes[5];

static void host_init(void)
{
    const char *names[] = {"lo", "docker0", "eth0", "eth1", "ib0"};
    const char *ips[] = {"127.0.0.1", "172.17.0.1", "10.0.0.2", NULL, "10.1.0.2"};
    unsigned flags[] = {IFF_UP | IFF_LOOPBACK, IFF_UP, 0, IFF_UP, IFF_UP};
    for (int i = 0, a = 0; i < 5; i++) {
        memset(&nodes[i], 0, sizeof(nodes[i]));
        nodes[i].ifa_name = (char *)names[i];
        nodes[i].ifa_flags = flags[i];
        nodes[i].ifa_next = i < 4 ? &nodes[i + 1] : NULL;
        if (ips[i]) {
            addrs[a].sin_family = AF_INET;
            inet_pton(AF_INET, ips[i], &addrs[a].sin_addr);
            nodes[i].ifa_addr = (struct sockaddr *)&addrs[a++];
        }
    }
}

static const char *choose(const char *text, char *why, size_t cap)
{
    gw_ifspec_t s = parse_ok(text);
    const struct ifaddrs *a = gw__ifspec_choose(&s, nodes, why, cap);
    return a ? a->ifa_name : NULL;
}

Test(ifspec, the_first_usable_match_wins, .init = host_init)
{
    char why[512];
    cr_expect_str_eq(choose("lo", why, sizeof(why)), "lo");
    cr_expect_str_eq(choose("ib,docker", why, sizeof(why)), "docker0"); /* kernel order */
    cr_expect_str_eq(choose("eth,ib", why, sizeof(why)), "ib0");        /* eth* unusable */
    cr_expect_str_eq(choose("=ib0", why, sizeof(why)), "ib0");
    /* Exclusion passes over loopback while anything else is left... */
    cr_expect_str_eq(choose("^docker", why, sizeof(why)), "ib0");
    cr_expect_str_eq(choose("^eth", why, sizeof(why)), "docker0");
    /* ...and takes it when nothing else is. */
    cr_expect_str_eq(choose("^docker,ib", why, sizeof(why)), "lo");
}

Test(ifspec, nothing_usable_says_why, .init = host_init)
{
    char why[512];
    cr_expect_null(choose("eth", why, sizeof(why)));
    cr_expect(strstr(why, "eth0: the interface is down"), "%s", why);
    cr_expect(strstr(why, "eth1: the interface has no IPv4 or IPv6 address"), "%s", why);
    cr_expect_null(choose("wlan", why, sizeof(why)));
    cr_expect(strstr(why, "no such interface"), "%s", why);
    cr_expect_null(choose("=eth", why, sizeof(why)));
    cr_expect_null(choose("^lo,docker,eth,ib", why, sizeof(why)));
    cr_expect(strstr(why, "excludes every interface"), "%s", why);
}
