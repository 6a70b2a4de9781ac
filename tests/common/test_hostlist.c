/* Slurm host list expressions (common/hostlist.c): the expansions
 * `scontrol show hostnames` gives (these were read off Slurm 22.05's), the
 * cases it refuses or garbles, refused with a message, and the limits. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hostlist.h"

/* Expand expr and compare with want, the names joined by spaces. */
static void expect_names(const char *expr, const char *want)
{
    gw_hostlist_t l;
    char err[256];
    gw_status_t st = gw__hostlist_expand(expr, &l, err, sizeof(err));
    cr_assert_eq(st, GW_OK, "\"%s\": %s", expr, err);
    char got[4096] = "";
    for (size_t i = 0; i < l.count; i++)
        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", i ? " " : "", l.names[i]);
    cr_expect_str_eq(got, want, "\"%s\" gave \"%s\", want \"%s\"", expr, got, want);
    gw__hostlist_free(&l);
}

static void expect_refused(const char *expr, const char *message)
{
    gw_hostlist_t l;
    char err[256];
    gw_status_t st = gw__hostlist_expand(expr, &l, err, sizeof(err));
    cr_expect_eq(st, GW_ERR_INVALID_ARG, "\"%s\" accepted", expr);
    cr_expect(strstr(err, message), "\"%s\": message \"%s\" lacks \"%s\"", expr, err, message);
    cr_expect_eq(l.count, 0);
    cr_expect_null(l.names);
}

Test(hostlist, plain_names_and_separators)
{
    expect_names("a", "a");
    expect_names("a,b c\td", "a b c d");
    expect_names(",a,,b,", "a b");
    expect_names("a1,a1", "a1 a1");
    expect_names("a-b", "a-b");
    expect_names("", "");
    expect_names(" , ", "");
}

Test(hostlist, ranges_and_lists)
{
    expect_names("n[1-3]", "n1 n2 n3");
    expect_names("n[5]", "n5");
    expect_names("n[2-2]", "n2");
    expect_names("n[1-2,5,7-8]", "n1 n2 n5 n7 n8");
    expect_names("[1-2]", "1 2");
    expect_names("n[1-2],n[2-3]", "n1 n2 n2 n3");
    expect_names("n-[1-2]", "n-1 n-2");
    expect_names("n[4294967295-4294967296]", "n4294967295 n4294967296");
}

Test(hostlist, zero_padding_follows_the_lower_bound)
{
    expect_names("n[01-03]", "n01 n02 n03");
    expect_names("n[098-101]", "n098 n099 n100 n101");
    expect_names("n[98-101]", "n98 n99 n100 n101");
    expect_names("n[1-003]", "n1 n2 n3");
    expect_names("n[01-3]", "n01 n02 n03");
    expect_names("n[007]", "n007");
    expect_names("n[0001-0003,5]", "n0001 n0002 n0003 n5");
}

Test(hostlist, several_groups_make_every_combination)
{
    expect_names("n[1,3-4]x[2-3],m", "n1x2 n1x3 n3x2 n3x3 n4x2 n4x3 m");
    expect_names("n[1-2][3-4]", "n13 n14 n23 n24");
    /* Slurm's order from three groups on: the last fastest, then the first. */
    expect_names("a[1-2]-[3-4]-[5-6]", "a1-3-5 a1-3-6 a2-3-5 a2-3-6 a1-4-5 a1-4-6 a2-4-5 a2-4-6");
    expect_names("a[1-2]b[1-2]c[1-2]d[1-2]",
                 "a1b1c1d1 a1b1c1d2 a2b1c1d1 a2b1c1d2 a1b2c1d1 a1b2c1d2 a2b2c1d1 a2b2c1d2 "
                 "a1b1c2d1 a1b1c2d2 a2b1c2d1 a2b1c2d2 a1b2c2d1 a1b2c2d2 a2b2c2d1 a2b2c2d2");
    expect_names("rack[1-2]-n[01-02],gpu[1-2]-ib[0-1]",
                 "rack1-n01 rack1-n02 rack2-n01 rack2-n02 gpu1-ib0 gpu1-ib1 gpu2-ib0 gpu2-ib1");
}

Test(hostlist, refused_with_a_reason)
{
    expect_refused("n[1-2", "'[' without ']'");
    expect_refused("n[1-2]]", "']' without '['");
    expect_refused("n]1", "']' without '['");
    expect_refused("x[1-2]y", "after the last bracket");
    expect_refused("x[1-2]y[1]z", "after the last bracket");
    expect_refused("a[]", "empty brackets");
    expect_refused("n[1-]", "not a number");
    expect_refused("n[-2]", "not a number");
    expect_refused("n[a-b]", "not a number");
    expect_refused("n[1,,2]", "not a number");
    expect_refused("n[1-2,]", "not a number");
    expect_refused("n[ 1-2]", "not a number");
    expect_refused("n[3-1]", "ends below its start");
    expect_refused("n[1[2]]", "brackets inside brackets");
    expect_refused("n[99999999999999999999]", "not a number");
    expect_refused("ok,n[3-1]", "ends below its start"); /* nothing of "ok" is kept */
}

Test(hostlist, limits)
{
    gw_hostlist_t l;
    char err[256];
    cr_assert_eq(gw__hostlist_expand("n[1-65536],m[0-65535]", &l, err, sizeof(err)), GW_OK, "%s",
                 err);
    cr_expect_eq(l.count, 131072);
    cr_expect_str_eq(l.names[65535], "n65536");
    cr_expect_str_eq(l.names[131071], "m65535");
    gw__hostlist_free(&l);
    expect_refused("n[1-65537]", "more than 65536 names");
    char longname[300];
    memset(longname, 'x', 255);
    longname[255] = '\0';
    expect_names("", "");
    cr_assert_eq(gw__hostlist_expand(longname, &l, err, sizeof(err)), GW_OK, "%s", err);
    cr_expect_eq(strlen(l.names[0]), 255);
    gw__hostlist_free(&l);
    strcpy(longname + 255, "[1-2]");
    expect_refused(longname, "longer than 255");
    expect_refused("n[1-513]m[1-512]", "\"n[1-513]m[1-512]\" gives more than 262144 names");
    /* Counted before any name is made: 7004^2 names, refused with the
     * element's own message (fuzz_hostlist once spent 11 s making 4 M
     * names of it before the list's running count refused it). */
    expect_refused("BBBBBBB,,n[0-07003]n[0-07003]",
                   "\"n[0-07003]n[0-07003]\" gives more than 262144 names (with the 1 before it)");
    expect_refused("a,b,n[0-65535]m[0-65535]x[1-9]", "with the 2 before it");
    gw_hostlist_t big;
    cr_assert_eq(gw__hostlist_expand("n[1-512]m[1-512]", &big, err, sizeof(err)), GW_OK, "%s", err);
    cr_expect_eq(big.count, 262144);
    cr_expect_str_eq(big.names[262143], "n512m512");
    gw__hostlist_free(&big);
    cr_expect_eq(gw__hostlist_expand(NULL, &l, err, sizeof(err)), GW_ERR_INVALID_ARG);
}
