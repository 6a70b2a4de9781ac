/*
 * test_ib_hca.c - the IB transport's choice of device, port and GID, without
 * RDMA hardware: GW_IB_HCA parsing and matching, the port choice over made-up
 * device landscapes, and the RoCE GID choice over fake sysfs trees built in
 * a temporary directory.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/ib/ib_internal.h"

static gw_ib_hca_filter_t parse_ok(const char *spec)
{
    gw_ib_hca_filter_t f;
    char why[256] = "";
    gw_status_t st = gw__ib_hca_parse(spec, &f, why, sizeof(why));
    cr_assert_eq(st, GW_OK, "parsing \"%s\" failed: %s", spec ? spec : "(null)", why);
    return f;
}

static void parse_bad(const char *spec, const char *needle)
{
    gw_ib_hca_filter_t f;
    char why[256] = "";
    gw_status_t st = gw__ib_hca_parse(spec, &f, why, sizeof(why));
    cr_assert_eq(st, GW_ERR_CONFIG, "\"%s\" was accepted", spec);
    cr_assert(strstr(why, needle), "reason for \"%s\" is \"%s\", expected it to mention \"%s\"",
              spec, why, needle);
}

Test(ib_hca, parse_lists)
{
    gw_ib_hca_filter_t f = parse_ok(NULL);
    cr_assert_eq(f.n, 0);
    f = parse_ok("");
    cr_assert_eq(f.n, 0);
    f = parse_ok("mlx5_0:1,mlx5_1:2,rxe");
    cr_assert_eq(f.n, 3);
    cr_assert_not(f.exclude);
    cr_assert_not(f.exact);
    cr_assert_str_eq(f.entries[0].name, "mlx5_0");
    cr_assert_eq(f.entries[0].port, 1);
    cr_assert_str_eq(f.entries[1].name, "mlx5_1");
    cr_assert_eq(f.entries[1].port, 2);
    cr_assert_str_eq(f.entries[2].name, "rxe");
    cr_assert_eq(f.entries[2].port, -1);
    f = parse_ok("^=mlx5_1");
    cr_assert(f.exclude);
    cr_assert(f.exact);
    cr_assert_eq(f.n, 1);
    f = parse_ok("=mlx5_1:1");
    cr_assert(f.exact);
    cr_assert_not(f.exclude);
}

Test(ib_hca, parse_errors)
{
    parse_bad("mlx5_0:", "port");
    parse_bad("mlx5_0:0", "port");
    parse_bad("mlx5_0:x", "port");
    parse_bad("mlx5_0:256", "port");
    parse_bad(":1", "empty");
    parse_bad("a,,b", "empty");
    parse_bad("a,", "comma");
    parse_bad("^", "no device");
    parse_bad("a b", "unexpected");
    parse_bad("a,^b", "unexpected");
    char longname[100];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    parse_bad(longname, "too long");
}

Test(ib_hca, match_prefix_exact_and_port)
{
    gw_ib_hca_filter_t f = parse_ok("mlx5_1");
    cr_assert_eq(gw__ib_hca_match(&f, "mlx5_1", 1), 0);
    cr_assert_eq(gw__ib_hca_match(&f, "mlx5_10", 1), 0, "prefix matching, as NCCL");
    cr_assert_eq(gw__ib_hca_match(&f, "mlx5_0", 1), -1);
    f = parse_ok("=mlx5_1");
    cr_assert_eq(gw__ib_hca_match(&f, "mlx5_10", 1), -1, "= requires the exact name");
    cr_assert_eq(gw__ib_hca_match(&f, "mlx5_1", 2), 0);
    f = parse_ok("mlx5_0:2,rxe0");
    cr_assert_eq(gw__ib_hca_match(&f, "mlx5_0", 1), -1, "port 1 is not listed");
    cr_assert_eq(gw__ib_hca_match(&f, "mlx5_0", 2), 0);
    cr_assert_eq(gw__ib_hca_match(&f, "rxe0", 1), 1);
}

#define PORT(dev, p, act)                                                             \
    {                                                                                 \
        .device = dev, .port = p, .active = act, .state_str = act ? "ACTIVE" : "DOWN" \
    }

Test(ib_hca, choose_port)
{
    gw_ib_port_info_t ports[] = {
        PORT("mlx5_0", 1, 0),
        PORT("mlx5_0", 2, 1),
        PORT("mlx5_1", 1, 1),
        PORT("rxe0", 1, 1),
    };
    int n = (int)(sizeof(ports) / sizeof(ports[0]));
    char why[512];
    gw_ib_hca_filter_t f = parse_ok(NULL);
    cr_assert_eq(gw__ib_choose_port(&f, ports, n, why, sizeof(why)), 1,
                 "the first active port in enumeration order");
    f = parse_ok("rxe0,mlx5_1");
    cr_assert_eq(gw__ib_choose_port(&f, ports, n, why, sizeof(why)), 3,
                 "the include list's order wins over enumeration order");
    f = parse_ok("^mlx5_0");
    cr_assert_eq(gw__ib_choose_port(&f, ports, n, why, sizeof(why)), 2);
    f = parse_ok("^mlx5");
    cr_assert_eq(gw__ib_choose_port(&f, ports, n, why, sizeof(why)), 3);
    f = parse_ok("mlx5_0:1");
    cr_assert_eq(gw__ib_choose_port(&f, ports, n, why, sizeof(why)), -1);
    cr_assert(strstr(why, "no active port") && strstr(why, "mlx5_0:1 (DOWN)"), "why: %s", why);
    f = parse_ok("qib");
    cr_assert_eq(gw__ib_choose_port(&f, ports, n, why, sizeof(why)), -1);
    cr_assert(strstr(why, "matches no port"), "why: %s", why);
    f = parse_ok("^mlx5,rxe");
    cr_assert_eq(gw__ib_choose_port(&f, ports, n, why, sizeof(why)), -1);
    cr_assert(strstr(why, "excludes every port"), "why: %s", why);
    cr_assert_eq(gw__ib_choose_port(&f, ports, 0, why, sizeof(why)), -1);
    cr_assert(strstr(why, "no RDMA device"), "why: %s", why);
    gw_ib_port_info_t down[] = {PORT("mlx5_0", 1, 0)};
    f = parse_ok(NULL);
    cr_assert_eq(gw__ib_choose_port(&f, down, 1, why, sizeof(why)), -1);
    cr_assert(strstr(why, "no active port"), "why: %s", why);
}

/* Rails: the ports, in order, as indices into ports[]. */
static int rails(const char *spec, int want, const gw_ib_port_info_t *ports, int n, int *idx,
                 char *why)
{
    gw_ib_hca_filter_t f = parse_ok(spec);
    return gw__ib_choose_rails(&f, ports, n, want, idx, GW_IB_MAX_RAILS, why, 512);
}

Test(ib_hca, choose_rails)
{
    gw_ib_port_info_t ports[] = {
        PORT("mlx5_0", 1, 0), PORT("mlx5_0", 2, 1), PORT("mlx5_1", 1, 1),
        PORT("mlx5_2", 1, 1), PORT("rxe0", 1, 1),
    };
    int n = (int)(sizeof(ports) / sizeof(ports[0]));
    int idx[GW_IB_MAX_RAILS];
    char why[512];
    /* Automatic: one rail without a list, or with an exclude list. */
    cr_assert_eq(rails(NULL, 0, ports, n, idx, why), 1);
    cr_assert_eq(idx[0], 1);
    cr_assert_eq(rails("^mlx5_0", 0, ports, n, idx, why), 1);
    cr_assert_eq(idx[0], 2);
    /* Every active port an include list names, in its order, once, the
     * inactive one left out. */
    cr_assert_eq(rails("rxe0,mlx5_1,mlx5_0", 0, ports, n, idx, why), 3);
    cr_assert(idx[0] == 4 && idx[1] == 2 && idx[2] == 1, "%d %d %d", idx[0], idx[1], idx[2]);
    cr_assert_eq(rails("mlx5,mlx5_1", 0, ports, n, idx, why), 3, "a prefix, then a repeat");
    cr_assert(idx[0] == 1 && idx[1] == 2 && idx[2] == 3, "%d %d %d", idx[0], idx[1], idx[2]);
    /* GW_IB_RAILS=N: the first N, with or without a list. */
    cr_assert_eq(rails(NULL, 2, ports, n, idx, why), 2);
    cr_assert(idx[0] == 1 && idx[1] == 2, "%d %d", idx[0], idx[1]);
    cr_assert_eq(rails("rxe0,mlx5", 1, ports, n, idx, why), 1);
    cr_assert_eq(idx[0], 4);
    cr_assert_eq(rails("^rxe", 4, ports, n, idx, why), -1);
    cr_assert(strstr(why, "GW_IB_RAILS=4, but there is only 3 active ports") &&
                  strstr(why, "mlx5_0:1 (DOWN)"),
              "why: %s", why);
    cr_assert_eq(rails("mlx5_0,rxe0", 2, ports, n, idx, why), 2);
    cr_assert_eq(rails("mlx5_0:1,rxe0", 2, ports, n, idx, why), -1);
    cr_assert(strstr(why, "GW_IB_HCA admits only 1 active port"), "why: %s", why);
    /* No more than the most rails, and the first rail is choose_port's. */
    cr_assert_eq(rails("mlx5,rxe,mlx5_0:2", 0, ports, n, idx, why), 4);
    gw_ib_hca_filter_t f = parse_ok("rxe0,mlx5_1");
    cr_assert_eq(rails("rxe0,mlx5_1", 0, ports, n, idx, why), 2);
    cr_assert_eq(idx[0], gw__ib_choose_port(&f, ports, n, why, sizeof(why)));
    cr_assert_eq(rails("qib", 0, ports, n, idx, why), -1);
    cr_assert(strstr(why, "matches no port"), "why: %s", why);
}

/* ---- GIDs on fake sysfs trees ------------------------------------------------ */

typedef struct fake_gid {
    int index;
    const char *gid;  /* sysfs text, or NULL: an entry that reads as nothing */
    const char *type; /* gid_attrs/types text, or NULL: unreadable */
} fake_gid_t;

static char *make_tree(const char *dev, int port, const fake_gid_t *gids, int n)
{
    char tmpl[] = "/tmp/gw-ib-sysfs-XXXXXX";
    char *root = mkdtemp(tmpl);
    cr_assert_not_null(root);
    root = strdup(root);
    char path[512];
    const char *parts[] = {"class", "infiniband", dev, "ports", NULL};
    snprintf(path, sizeof(path), "%s", root);
    for (int i = 0; parts[i]; i++) {
        strcat(path, "/");
        strcat(path, parts[i]);
        mkdir(path, 0755);
    }
    char base[256];
    snprintf(base, sizeof(base), "%.200s/%d", path, port);
    mkdir(base, 0755);
    snprintf(path, sizeof(path), "%s/gids", base);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/gid_attrs", base);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/gid_attrs/types", base);
    mkdir(path, 0755);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/gids/%d", base, gids[i].index);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        if (gids[i].gid)
            fprintf(f, "%s\n", gids[i].gid);
        fclose(f); /* an empty file reads as nothing, like the kernel's EINVAL */
        snprintf(path, sizeof(path), "%s/gid_attrs/types/%d", base, gids[i].index);
        if (gids[i].type) {
            f = fopen(path, "w");
            cr_assert_not_null(f);
            fprintf(f, "%s\n", gids[i].type);
            fclose(f);
        }
    }
    return root;
}

static void remove_tree(const char *root)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    cr_assert_eq(system(cmd), 0);
}

#define ZERO "0000:0000:0000:0000:0000:0000:0000:0000"
#define LL "fe80:0000:0000:0000:8cdd:c7ff:fe62:01f5"
#define V4(last) "0000:0000:0000:0000:0000:ffff:c612:00" last
#define V6 "2001:0db8:0000:0000:0000:0000:0000:0001"
#define V1 "IB/RoCE v1"
#define V2 "RoCE v2"

static void expect_pick(const fake_gid_t *gids, int n, int want, const char *needle)
{
    char *root = make_tree("rxe0", 1, gids, n);
    int index = -1;
    char desc[256] = "";
    gw_status_t st = gw__ib_gid_pick(root, "rxe0", 1, &index, desc, sizeof(desc));
    remove_tree(root);
    free(root);
    if (want < 0) {
        cr_assert_eq(st, GW_ERR_NOT_FOUND, "a GID was chosen: %s", desc);
    } else {
        cr_assert_eq(st, GW_OK, "no GID chosen: %s", desc);
        cr_assert_eq(index, want, "chose %d, expected %d (%s)", index, want, desc);
    }
    if (needle)
        cr_assert(strstr(desc, needle), "description \"%s\" lacks \"%s\"", desc, needle);
}

Test(ib_gid, prefers_roce_v2_ipv4)
{
    /* What rxe and mlx5 show for an interface with one IPv4 address: v1 and
     * v2 link-local GIDs, then v1 and v2 IPv4-mapped ones. */
    fake_gid_t g[] = {{0, LL, V1}, {1, LL, V2}, {2, V4("01"), V1}, {3, V4("01"), V2}};
    expect_pick(g, 4, 3, "RoCE v2, ::ffff:198.18.0.1");
}

Test(ib_gid, v2_ipv6_before_v1_ipv4)
{
    fake_gid_t g[] = {{0, LL, V1}, {1, V4("02"), V1}, {2, V6, V2}};
    expect_pick(g, 3, 2, "2001:db8::1");
}

Test(ib_gid, first_of_equals)
{
    fake_gid_t g[] = {{0, LL, V1}, {5, V4("07"), V2}, {3, V4("05"), V2}};
    expect_pick(g, 3, 3, "198.18.0.5");
}

Test(ib_gid, skips_zero_and_unreadable)
{
    fake_gid_t g[] = {{0, ZERO, V2}, {1, V4("01"), NULL}, {2, NULL, V2}, {3, V4("09"), V1}};
    expect_pick(g, 4, 3, "IB/RoCE v1");
}

Test(ib_gid, link_local_only_as_last_resort)
{
    fake_gid_t g[] = {{0, LL, V1}, {1, LL, V2}};
    expect_pick(g, 2, 1, "link-local");
}

Test(ib_gid, nothing_usable)
{
    fake_gid_t g[] = {{0, ZERO, V1}, {1, ZERO, V2}};
    expect_pick(g, 2, -1, "no usable RoCE GID");
    expect_pick(g, 0, -1, "0 entries");
}

Test(ib_gid, missing_port)
{
    int index;
    char desc[256];
    cr_assert_eq(gw__ib_gid_pick("/nonexistent", "rxe0", 1, &index, desc, sizeof(desc)),
                 GW_ERR_NOT_FOUND);
    cr_assert(strstr(desc, "cannot list"), "%s", desc);
}

Test(ib_gid, parse_and_print)
{
    uint8_t g[16];
    cr_assert_eq(gw__ib_gid_parse(V4("01"), g), 0);
    cr_assert_eq(g[10], 0xff);
    cr_assert_eq(g[12], 0xc6);
    cr_assert_eq(g[15], 0x01);
    char s[64];
    gw__ib_gid_str(g, s, sizeof(s));
    cr_assert_str_eq(s, "::ffff:198.18.0.1");
    cr_assert_eq(gw__ib_gid_parse(LL "\n", g), 0);
    cr_assert_eq(g[0], 0xfe);
    cr_assert_neq(gw__ib_gid_parse("fe80::1", g), 0);
    cr_assert_neq(gw__ib_gid_parse(LL ":0000", g), 0);
    cr_assert_neq(gw__ib_gid_parse("zz80:0000:0000:0000:8cdd:c7ff:fe62:01f5", g), 0);
}

/* ---- a GID index the user gave (GW_IB_GID_INDEX) ----------------------------- */

static gw_status_t check_index(const fake_gid_t *gids, int n, int index, int roce, int table_len,
                               char *desc, size_t cap)
{
    char *root = make_tree("rxe0", 1, gids, n);
    gw_status_t st = gw__ib_gid_check(root, "rxe0", 1, index, roce, table_len, desc, cap);
    remove_tree(root);
    free(root);
    return st;
}

static void expect_refused(const fake_gid_t *gids, int n, int index, int roce, const char *why,
                           const char *usable)
{
    char desc[512] = "";
    gw_status_t st = check_index(gids, n, index, roce, 8, desc, sizeof(desc));
    cr_assert_eq(st, GW_ERR_CONFIG, "index %d accepted: %s", index, desc);
    char head[64];
    snprintf(head, sizeof(head), "GW_IB_GID_INDEX=%d: rxe0 port 1 ", index);
    cr_assert(strstr(desc, head), "\"%s\" does not name the variable, device and port", desc);
    cr_assert(strstr(desc, why), "\"%s\" lacks \"%s\"", desc, why);
    cr_assert(strstr(desc, usable), "\"%s\" lacks \"%s\"", desc, usable);
}

/* What rxe shows: entries 0..7, two link-local and two IPv4 ones, the
 * rest unused (they read as zeros or not at all). */
static const fake_gid_t rxe_table[] = {
    {0, LL, V1},   {1, LL, V2},     {2, V4("02"), V1}, {3, V4("02"), V2},
    {4, ZERO, V2}, {5, NULL, NULL}, {6, ZERO, V1},     {7, ZERO, V2},
};
#define RXE_USABLE                                                                           \
    "usable indices: 0 (IB/RoCE v1, fe80::8cdd:c7ff:fe62:1f5, link-local), 1 (RoCE v2, "     \
    "fe80::8cdd:c7ff:fe62:1f5, link-local), 2 (IB/RoCE v1, ::ffff:198.18.0.2), 3 (RoCE v2, " \
    "::ffff:198.18.0.2)"

Test(ib_gid_index, out_of_range_names_the_table_and_the_usable_ones)
{
    expect_refused(rxe_table, 8, 200, 1, "has no GID at index 200 (its table has 8 entries, 0..7)",
                   RXE_USABLE);
}

Test(ib_gid_index, unused_entries_are_refused)
{
    expect_refused(rxe_table, 8, 4, 1, "index 4 (the entry is unused: all zeros)", RXE_USABLE);
    expect_refused(rxe_table, 8, 5, 1, "index 5 (the entry is unused", RXE_USABLE);
}

Test(ib_gid_index, an_entry_of_another_type_is_refused_on_roce)
{
    fake_gid_t g[] = {{0, V4("02"), "IB"}, {1, V4("02"), V2}, {2, V4("03"), NULL}};
    expect_refused(g, 3, 0, 1, "of type 'IB', which is not RoCE v1 or v2",
                   "usable indices: 1 (RoCE v2, ::ffff:198.18.0.2) (or unset it");
    expect_refused(g, 3, 2, 1, "cannot tell the RoCE version of GID index 2", "usable indices: 1 ");
    /* On InfiniBand the type does not matter, only that the GID is set. */
    char desc[512];
    cr_assert_eq(check_index(g, 3, 0, 0, 8, desc, sizeof(desc)), GW_OK, "%s", desc);
}

Test(ib_gid_index, nothing_usable_says_so)
{
    fake_gid_t g[] = {{0, ZERO, V1}, {1, ZERO, V2}};
    expect_refused(g, 2, 1, 1, "index 1 (the entry is unused", "no entry of its 2 is usable");
}

Test(ib_gid_index, a_good_index_is_described)
{
    char desc[512];
    cr_assert_eq(check_index(rxe_table, 8, 3, 1, 8, desc, sizeof(desc)), GW_OK, "%s", desc);
    cr_assert(strstr(desc, "GID index 3 (RoCE v2, ::ffff:198.18.0.2, from GW_IB_GID_INDEX)"), "%s",
              desc);
    cr_assert_eq(check_index(rxe_table, 8, 1, 1, 8, desc, sizeof(desc)), GW_OK, "%s", desc);
    cr_assert(strstr(desc, "link-local: other subnets are out of reach"), "%s", desc);
}

Test(ib_gid_index, without_sysfs_only_the_range_is_checked)
{
    char desc[512];
    cr_assert_eq(gw__ib_gid_check("/nonexistent", "rxe0", 1, 3, 1, 8, desc, sizeof(desc)), GW_OK,
                 "%s", desc);
    cr_assert_eq(gw__ib_gid_check("/nonexistent", "rxe0", 1, 8, 1, 8, desc, sizeof(desc)),
                 GW_ERR_CONFIG);
    cr_assert(strstr(desc, "GW_IB_GID_INDEX=8: rxe0 port 1 has no GID at index 8"), "%s", desc);
}
