/*
 * test_check_verdict.c - gradwire check's per-link thresholds (gwc_over in
 * tools/check/check_verdict.c), on figures made up to sit either side of
 * each rule.
 *
 * The tail rule's floor came from CI: healthy links of a 4-host emulated
 * cluster on a busy 2-core machine had p99s of 1.0-1.4 ms against a
 * reference of 39 us (25-35x, over the factor of 20), alone and in their
 * round, and failed a check that was about a slow host's bandwidth.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "check.h"

static gwc_opts_t defaults(void)
{
    gwc_opts_t o = {0};
    o.lat_factor = 2.1;
    o.tail_factor = 20;
    o.tail_floor_us = 10000;
    o.bw_fraction = 0.93;
    o.host_fraction = 0.5;
    return o;
}

static const gwc_ref_t ref = {.lat_p50 = 20, .lat_p99 = 39.2, .bw = 0.024};

static int over(const gwc_opts_t *o, gwc_fig_t f, char *why)
{
    return gwc_over(o, &f, &ref, why, 256);
}

static gwc_fig_t healthy(void)
{
    return (gwc_fig_t){.lat_p50 = 21, .lat_p99 = 40, .bw_ab = 0.0239, .bw_ba = 0.0239};
}

Test(check_verdict, healthy_link_is_not_over)
{
    gwc_opts_t o = defaults();
    char why[256];
    cr_expect_not(over(&o, healthy(), why), "%s", why);
}

Test(check_verdict, a_scheduler_tick_in_the_tail_is_not_a_fault)
{
    gwc_opts_t o = defaults();
    char why[256];
    gwc_fig_t f = healthy();
    f.lat_p99 = 1006.1; /* 25.7x the reference, under the 10 ms floor */
    cr_expect_not(over(&o, f, why), "%s", why);
    f.lat_p99 = 9999;
    cr_expect_not(over(&o, f, why), "%s", why);
}

Test(check_verdict, a_retransmission_in_the_tail_is_a_fault)
{
    gwc_opts_t o = defaults();
    char why[256];
    gwc_fig_t f = healthy();
    f.lat_p99 = 204000; /* a 200 ms retransmission timeout */
    cr_assert(over(&o, f, why));
    cr_expect(strstr(why, "latency p99") != NULL, "%s", why);
    f.lat_p99 = 10001;
    cr_expect(over(&o, f, why), "just over the floor and 255x the reference");
}

Test(check_verdict, the_tail_needs_both_the_factor_and_the_floor)
{
    gwc_opts_t o = defaults();
    char why[256];
    gwc_ref_t slow = {.lat_p50 = 2000, .lat_p99 = 5000, .bw = 0.024};
    gwc_fig_t f = healthy();
    f.lat_p99 = 50000; /* over the floor, 10x a slow reference */
    cr_expect_not(gwc_over(&o, &f, &slow, why, sizeof(why)), "%s", why);
    o.tail_floor_us = 0; /* the factor alone, as before the floor */
    f.lat_p99 = 1006.1;
    cr_expect(over(&o, f, why), "with no floor, 25.7x is over 20x");
}

Test(check_verdict, median_latency_bandwidth_and_wrong_bytes)
{
    gwc_opts_t o = defaults();
    char why[256];
    gwc_fig_t f = healthy();
    f.lat_p50 = 43; /* 2.15x */
    cr_expect(over(&o, f, why), "median latency over 2.1x");
    f = healthy();
    f.bw_ba = 0.006;
    cr_expect(over(&o, f, why) && strstr(why, "b->a"), "%s", why);
    f = healthy();
    f.wrong = 1;
    cr_expect(over(&o, f, why) && strstr(why, "wrong"), "%s", why);
    f = healthy();
    f.bw_ab = NAN;
    cr_expect(over(&o, f, why) && strstr(why, "not measured"), "%s", why);
}
