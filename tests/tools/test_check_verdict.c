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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static gwc_opts_t defaults(void)
{
    gwc_opts_t o = {0};
    o.lat_factor = 2.1;
    o.tail_factor = 20;
    o.tail_floor_us = 10000;
    o.bw_fraction = 0.93;
    o.host_fraction = 0.5;
    o.line_fraction = 0.5;
    o.coll_fraction = 0.5;
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

/* ---- whole runs, made up: ranks, hosts and link figures fed to the
 * verdict logic (gwc_find_suspects ... gwc_judge), so that no test depends
 * on this machine's speed ---- */

#define MAXR 16
#define MAXL (MAXR * (MAXR - 1) / 2)

typedef struct fake {
    gwc_run_t r;
    gwc_opts_t o;
    gwc_rank_info_t info[MAXR];
    int host_of[MAXR];
    gwc_host_t hosts[MAXR];
    gwc_link_t links[MAXL];
    int64_t wrong_from[MAXR + 1];
} fake_t;

/* nranks ranks on nhosts hosts (rank q on host q % nhosts), every link
 * measured at bw GB/s each way and 20 us. */
static void fake_init(fake_t *f, int nranks, int nhosts, double bw)
{
    memset(f, 0, sizeof(*f));
    f->o = defaults();
    f->o.retest = 1;
    gwc_run_t *r = &f->r;
    r->o = &f->o;
    r->size = nranks;
    r->culprit = -1;
    r->info = f->info;
    r->host_of = f->host_of;
    r->hosts = f->hosts;
    r->links = f->links;
    r->nhosts = nhosts;
    r->do_retest = 1;
    r->coll.wrong_from = f->wrong_from;
    for (int h = 0; h < nhosts; h++) {
        f->hosts[h].first_rank = h;
        f->hosts[h].partner = -1;
        snprintf(f->hosts[h].name, sizeof(f->hosts[h].name), "198.18.0.%d", h + 1);
    }
    for (int q = 0; q < nranks; q++) {
        f->host_of[q] = q % nhosts;
        f->hosts[q % nhosts].nranks++;
        f->info[q].rank = q;
        f->info[q].mtu = 1500;
        f->info[q].link_up = 1;
        f->info[q].speed_mbps = -1;
    }
    r->nlinks = nranks * (nranks - 1) / 2;
    for (int a = 0; a < nranks; a++)
        for (int b = a + 1; b < nranks; b++) {
            gwc_link_t *l = &f->links[gwc_link_index(nranks, a, b)];
            l->a = a;
            l->b = b;
            l->same_host = f->host_of[a] == f->host_of[b];
            l->measured = 1;
            l->host_blamed = -1;
            l->fig = (gwc_fig_t){.lat_p50 = 20, .lat_p99 = 40, .bw_ab = bw, .bw_ba = bw};
        }
}

static gwc_link_t *fake_link(fake_t *f, int a, int b)
{
    return &f->links[gwc_link_index(f->r.size, a, b)];
}

/* Every link's retest figures = its round's (what a retest alone of a
 * link that is really that slow gives). */
static void fake_retest_as_measured(fake_t *f)
{
    for (int i = 0; i < f->r.nlinks; i++)
        if (f->links[i].measured) {
            f->links[i].retest = f->links[i].fig;
            f->links[i].retested = 1;
        }
}

/* Both steps before the verdict, as check_main.c runs them. */
static void fake_judge(fake_t *f)
{
    int *pairs = NULL, distinct = 0;
    int n = gwc_retest_list(&f->r, 0, &pairs, &distinct);
    free(pairs);
    fake_retest_as_measured(f);
    n = gwc_retest_list(&f->r, 1, &pairs, &distinct);
    free(pairs);
    (void)n;
    gwc_judge(&f->r);
}

/* Four hosts; the links 0-1 and 2-3 healthy, the other four slow: more than
 * half the links are suspect, and each is still retested twice. */
Test(check_retests, more_than_half_suspect_each_retested_twice)
{
    static fake_t f;
    fake_init(&f, 4, 4, 0.1);
    fake_link(&f, 0, 1)->fig.bw_ab = fake_link(&f, 0, 1)->fig.bw_ba = 1.0;
    fake_link(&f, 2, 3)->fig.bw_ab = fake_link(&f, 2, 3)->fig.bw_ba = 1.0;
    int *pairs = NULL, distinct = 0;
    int n = gwc_retest_list(&f.r, 0, &pairs, &distinct);
    cr_assert_eq(distinct, 4, "4 suspect links, not %d", distinct);
    cr_assert_eq(n, 8, "each of 4 suspect links twice: 8 retests, not %d", n);
    int seen[4][4] = {{0}};
    for (int i = 0; i < n; i++)
        seen[pairs[2 * i]][pairs[2 * i + 1]]++;
    cr_expect(seen[0][2] == 2 && seen[0][3] == 2 && seen[1][2] == 2 && seen[1][3] == 2);
    cr_expect(seen[0][1] == 0 && seen[2][3] == 0, "healthy links are not retested");
    free(pairs);
}

Test(check_retests, few_suspects_each_retested_twice)
{
    static fake_t f;
    fake_init(&f, 6, 6, 1.0);
    fake_link(&f, 1, 4)->fig.bw_ab = 0.1;
    int *pairs = NULL, distinct = 0;
    int n = gwc_retest_list(&f.r, 0, &pairs, &distinct);
    cr_assert(distinct == 1 && n == 2, "1 suspect twice: distinct %d, retests %d", distinct, n);
    cr_expect(pairs[0] == 1 && pairs[1] == 4 && pairs[2] == 1 && pairs[3] == 4);
    free(pairs);
}

/* ---- links between too few hosts: the NIC line rate, --baseline RATE,
 * or NOT_JUDGED ---- */

static void fake_nic(fake_t *f, int rank, int physical, int mbps)
{
    f->info[rank].physical = physical;
    f->info[rank].speed_mbps = mbps;
    snprintf(f->info[rank].ifname, sizeof(f->info[rank].ifname), "eth0");
}

Test(check_two_hosts, a_slow_link_fails_against_the_line_rate)
{
    static fake_t f;
    fake_init(&f, 2, 2, 0.11); /* 10 GbE at a tenth of its 1.25 GB/s */
    fake_nic(&f, 0, 1, 10000);
    fake_nic(&f, 1, 1, 10000);
    fake_judge(&f);
    gwc_link_t *l = fake_link(&f, 0, 1);
    cr_expect_eq(l->verdict, GWC_FAIL, "%s: %s", gwc_verdict_name(l->verdict), l->cause);
    cr_expect(strstr(l->cause, "line rate") != NULL, "%s", l->cause);
    cr_expect_eq(gwc_exit_status(&f.r), GWC_EXIT_FAIL);
}

Test(check_two_hosts, a_link_near_the_line_rate_passes)
{
    static fake_t f;
    fake_init(&f, 2, 2, 1.1);
    fake_nic(&f, 0, 1, 10000);
    fake_nic(&f, 1, 1, 25000); /* the slower NIC is the line rate */
    fake_judge(&f);
    cr_expect_eq(fake_link(&f, 0, 1)->verdict, GWC_PASS, "%s", fake_link(&f, 0, 1)->cause);
    cr_expect_eq(f.r.verdict, GWC_PASS);
    cr_expect_eq(gwc_exit_status(&f.r), GWC_EXIT_PASS);
    cr_expect_float_eq(gwc_line_rate(&f.r, 0, 1), 1.25, 1e-9);
}

Test(check_two_hosts, without_a_line_rate_they_are_not_judged)
{
    static fake_t f;
    fake_init(&f, 2, 2, 0.11);
    fake_nic(&f, 0, 0, 10000); /* a veth's nominal 10000: not a line rate */
    fake_nic(&f, 1, 0, 10000);
    fake_judge(&f);
    gwc_link_t *l = fake_link(&f, 0, 1);
    cr_expect_eq(l->verdict, GWC_NOT_JUDGED, "%s: %s", gwc_verdict_name(l->verdict), l->cause);
    cr_expect(strstr(l->cause, "cannot judge without --baseline") != NULL, "%s", l->cause);
    cr_expect(strstr(l->cause, "virtual") != NULL, "%s", l->cause);
    cr_expect_eq(f.hosts[0].verdict, GWC_NOT_JUDGED, "%s", f.hosts[0].cause);
    cr_expect_eq(f.r.verdict, GWC_NOT_JUDGED);
    cr_expect_eq(gwc_exit_status(&f.r), GWC_EXIT_NOT_JUDGED);
    cr_expect(isnan(gwc_line_rate(&f.r, 0, 1)));
}

Test(check_two_hosts, unknown_speed_two_ranks_each_not_judged)
{
    static fake_t f;
    fake_init(&f, 4, 2, 0.5); /* 2 hosts, 2 ranks each: 4 links between them */
    for (int q = 0; q < 4; q++)
        fake_nic(&f, q, 1, -1);
    fake_judge(&f);
    for (int i = 0; i < f.r.nlinks; i++)
        if (!f.links[i].same_host)
            cr_expect_eq(f.links[i].verdict, GWC_NOT_JUDGED, "link %d-%d: %s", f.links[i].a,
                         f.links[i].b, f.links[i].cause);
    cr_expect_eq(gwc_exit_status(&f.r), GWC_EXIT_NOT_JUDGED);
}

Test(check_two_hosts, a_baseline_rate_judges_them)
{
    static fake_t f;
    fake_init(&f, 2, 2, 0.11);
    f.o.base_rate = 1.25;
    fake_judge(&f);
    gwc_link_t *l = fake_link(&f, 0, 1);
    cr_expect_eq(l->verdict, GWC_FAIL, "%s: %s", gwc_verdict_name(l->verdict), l->cause);
    cr_expect(strstr(l->cause, "--baseline") != NULL, "%s", l->cause);
    fake_init(&f, 2, 2, 1.2);
    f.o.base_rate = 1.25;
    fake_judge(&f);
    cr_expect_eq(gwc_exit_status(&f.r), GWC_EXIT_PASS, "%s", fake_link(&f, 0, 1)->cause);
}

Test(check_two_hosts, three_hosts_judge_each_other)
{
    static fake_t f;
    fake_init(&f, 3, 3, 1.0); /* no line rate: the hosts are each other's reference */
    fake_judge(&f);
    cr_expect_eq(gwc_exit_status(&f.r), GWC_EXIT_PASS);
    fake_init(&f, 3, 3, 1.0);
    fake_link(&f, 1, 2)->fig.bw_ab = 0.1;
    fake_judge(&f);
    cr_expect_eq(fake_link(&f, 1, 2)->verdict, GWC_FAIL, "%s", fake_link(&f, 1, 2)->cause);
}

Test(check_two_hosts, not_judged_beside_a_warn_still_says_so)
{
    static fake_t f;
    fake_init(&f, 2, 2, 0.5);
    f.info[1].mtu = 9000; /* a WARN on a host */
    fake_judge(&f);
    cr_expect_eq(f.r.verdict, GWC_NOT_JUDGED, "%s", gwc_verdict_name(f.r.verdict));
    cr_expect_eq(gwc_exit_status(&f.r), GWC_EXIT_NOT_JUDGED);
}

Test(check_two_hosts, baseline_rates_parse)
{
    double g = 0;
    cr_expect(gwc_parse_rate("12.5GB/s", &g) == 1 && g == 12.5);
    cr_expect(gwc_parse_rate("100Gbit/s", &g) == 1 && g == 12.5);
    cr_expect(gwc_parse_rate("100Gb/s", &g) == 1 && g == 12.5);
    cr_expect_eq(gwc_parse_rate("base.txt", &g), 0);
    cr_expect_eq(gwc_parse_rate("fastGB/s", &g), -1);
    cr_expect_eq(gwc_parse_rate("0GB/s", &g), -1);
    cr_expect_eq(gwc_parse_rate("GB/s", &g), 0);
}

/* ---- the allreduce's bus bandwidth against the slowest link ---- */

static void fake_coll(fake_t *f, double busbw)
{
    f->r.coll.run = 1;
    f->r.coll.bytes = 16 << 20;
    f->r.coll.busbw = busbw;
    f->r.coll.algbw = busbw * f->r.size / (2.0 * (f->r.size - 1));
    f->r.coll.lat_p50 = 30;
}

Test(check_coll, a_quarter_of_the_link_rate_does_not_pass)
{
    static fake_t f;
    fake_init(&f, 4, 4, 1.0);
    fake_link(&f, 1, 3)->fig.bw_ba = 0.96; /* the slowest link, still healthy */
    fake_coll(&f, 0.25);
    fake_judge(&f);
    gwc_coll_t *c = &f.r.coll;
    cr_expect_eq(c->verdict, GWC_WARN, "%s: %s", gwc_verdict_name(c->verdict), c->cause);
    cr_expect(strstr(c->cause, "slowest link") && strstr(c->cause, "0.960") &&
                  strstr(c->cause, "ranks 1-3"),
              "%s", c->cause);
    fake_init(&f, 4, 4, 1.0);
    fake_coll(&f, 0.1);
    fake_judge(&f);
    cr_expect_eq(c->verdict, GWC_FAIL, "a tenth: %s: %s", gwc_verdict_name(c->verdict), c->cause);
    cr_expect_eq(gwc_exit_status(&f.r), GWC_EXIT_FAIL);
}

Test(check_coll, near_the_slowest_link_passes_and_says_why)
{
    static fake_t f;
    fake_init(&f, 4, 4, 1.0);
    fake_coll(&f, 0.85);
    fake_judge(&f);
    gwc_coll_t *c = &f.r.coll;
    cr_expect_eq(c->verdict, GWC_PASS, "%s", c->cause);
    cr_expect(strstr(c->cause, "85%") != NULL, "%s", c->cause);
    cr_expect_eq(gwc_exit_status(&f.r), GWC_EXIT_PASS);
}

Test(check_coll, one_host_bounds_nothing)
{
    static fake_t f;
    fake_init(&f, 3, 1, 10.0); /* shared memory: memory and the reduction bound it */
    fake_coll(&f, 0.5);
    fake_judge(&f);
    cr_expect_eq(f.r.coll.verdict, GWC_PASS, "%s", f.r.coll.cause);
    cr_expect(strstr(f.r.coll.cause, "not judged") != NULL, "%s", f.r.coll.cause);
}

/* ---- oversubscription: ranks outnumbering their machine's CPUs ---- */

/* Rank q's machine (a kernel: emulated hosts share one) and its CPUs
 * first..first+n-1 in its affinity mask, of online. */
static void fake_cpus(fake_t *f, int q, uint64_t machine, int first, int n, int online)
{
    gwc_rank_info_t *ri = &f->info[q];
    ri->machine_key = machine;
    ri->cpus_online = online;
    ri->cpus_allowed = n;
    memset(ri->cpumask, 0, sizeof(ri->cpumask));
    for (int c = first; c < first + n; c++)
        ri->cpumask[c / 8] |= (uint8_t)(1u << (c % 8));
}

Test(check_oversub, ranks_are_counted_against_their_machines_cpus)
{
    static fake_t f;
    fake_init(&f, 6, 3, 1.0); /* hosts 0 and 1 share a 2-CPU machine, host 2 has 16 */
    for (int q = 0; q < 6; q++) {
        if (q % 3 == 2)
            fake_cpus(&f, q, 7, 0, 16, 16);
        else
            fake_cpus(&f, q, 5, q % 2, 1, 2); /* bound one CPU each, CPUs 0 and 1 */
    }
    gwc_find_oversubscribed(&f.r);
    cr_expect(f.hosts[0].oversubscribed && f.hosts[1].oversubscribed);
    cr_expect_eq(f.hosts[0].machine_ranks, 4);
    cr_expect_eq(f.hosts[0].machine_cpus, 2, "the union of the masks, not %d",
                 f.hosts[0].machine_cpus);
    cr_expect(!f.hosts[2].oversubscribed);
    cr_expect_eq(f.hosts[2].machine_ranks, 2);
    /* A mask wider than one rank's CPU: 4 ranks, each allowed all 8. */
    fake_init(&f, 4, 4, 1.0);
    for (int q = 0; q < 4; q++)
        fake_cpus(&f, q, 9, 0, 8, 8);
    gwc_find_oversubscribed(&f.r);
    cr_expect(!f.hosts[0].oversubscribed, "4 ranks on 8 CPUs");
}

/* Four hosts, host 3 slow on every link, on an oversubscribed machine. */
static void slow_host_3(fake_t *f, int oversub)
{
    fake_init(f, 4, 4, 1.0);
    for (int q = 0; q < 3; q++)
        fake_link(f, q, 3)->fig.bw_ab = 0.2;
    for (int q = 0; q < 4; q++)
        fake_cpus(f, q, (uint64_t)q + 1, 0, 4, 4);
    if (oversub) { /* ranks 2 and 3 on one machine with one CPU */
        fake_cpus(f, 2, 4, 0, 1, 1);
        fake_cpus(f, 3, 4, 0, 1, 1);
    }
    gwc_find_oversubscribed(&f->r);
}

Test(check_oversub, a_slow_host_on_an_oversubscribed_machine_is_inconclusive)
{
    static fake_t f;
    slow_host_3(&f, 1); /* ranks 2 and 3 share host 3's 1 CPU */
    cr_assert(f.hosts[3].oversubscribed && f.hosts[2].oversubscribed);
    fake_judge(&f);
    cr_expect_eq(f.hosts[3].verdict, GWC_NOT_JUDGED, "%s: %s", gwc_verdict_name(f.hosts[3].verdict),
                 f.hosts[3].cause);
    cr_expect(strstr(f.hosts[3].cause, "inconclusive: oversubscribed") != NULL, "%s",
              f.hosts[3].cause);
    for (int i = 0; i < f.r.nlinks; i++)
        cr_expect_neq(f.links[i].verdict, GWC_FAIL, "link %d-%d: %s", f.links[i].a, f.links[i].b,
                      f.links[i].cause);
    cr_expect(strstr(f.r.notes, "oversubscribed: 2 ranks share the 1 CPUs") != NULL, "%s",
              f.r.notes);
    cr_expect_eq(gwc_exit_status(&f.r), GWC_EXIT_NOT_JUDGED);

    slow_host_3(&f, 0); /* the same figures with CPUs to spare: FAIL */
    fake_judge(&f);
    cr_expect_eq(f.hosts[3].verdict, GWC_FAIL, "%s", f.hosts[3].cause);
    cr_expect_eq(gwc_exit_status(&f.r), GWC_EXIT_FAIL);

    slow_host_3(&f, 1);
    f.o.judge_oversubscribed = 1;
    fake_judge(&f);
    cr_expect_eq(f.hosts[3].verdict, GWC_FAIL, "--judge-oversubscribed: %s", f.hosts[3].cause);
    cr_expect(strstr(f.r.notes, "judged anyway") != NULL, "%s", f.r.notes);
}

Test(check_oversub, a_slow_link_is_inconclusive_but_wrong_bytes_fail)
{
    static fake_t f;
    fake_init(&f, 4, 4, 1.0);
    for (int q = 0; q < 4; q++)
        fake_cpus(&f, q, 1, 0, 2, 2); /* one 2-CPU machine, 4 emulated hosts */
    gwc_find_oversubscribed(&f.r);
    fake_link(&f, 1, 2)->fig.bw_ab = 0.2;
    fake_link(&f, 0, 3)->fig.wrong = 64;
    fake_judge(&f);
    gwc_link_t *slow = fake_link(&f, 1, 2), *wrong = fake_link(&f, 0, 3);
    cr_expect_eq(slow->verdict, GWC_NOT_JUDGED, "%s", slow->cause);
    cr_expect(strstr(slow->cause, "inconclusive: oversubscribed (198.18.0.") != NULL, "%s",
              slow->cause);
    cr_expect_eq(wrong->verdict, GWC_FAIL, "%s", wrong->cause);
    cr_expect_eq(gwc_exit_status(&f.r), GWC_EXIT_FAIL);
}

Test(check_oversub, a_slow_allreduce_is_inconclusive)
{
    static fake_t f;
    fake_init(&f, 4, 4, 1.0);
    for (int q = 0; q < 4; q++)
        fake_cpus(&f, q, 1, 0, 2, 2);
    gwc_find_oversubscribed(&f.r);
    fake_coll(&f, 0.1);
    fake_judge(&f);
    cr_expect_eq(f.r.coll.verdict, GWC_NOT_JUDGED, "%s", f.r.coll.cause);
    cr_expect(strstr(f.r.coll.cause, "inconclusive: oversubscribed") != NULL, "%s", f.r.coll.cause);
}
