/*
 * check_timing.c - what timing may conclude: the allreduce's bus bandwidth
 * judged against what the measured links allow, and no FAIL on timing
 * gathered where ranks outnumbered their machine's CPUs (check_host.c
 * finds those machines): a rank waiting for a CPU makes its links and the
 * collectives look slow, and a healthy node once FAILed 1 run in 4 so.
 * Such a FAIL becomes NOT_JUDGED, "inconclusive: oversubscribed (...)",
 * unless --judge-oversubscribed; wrong bytes, dead ranks and an interface
 * that is down are no timing and FAIL however busy the host.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

/* Whether timing that involves hosts ha and hb (ha < 0: every host) is no
 * evidence to FAIL on because ranks outnumber CPUs there; the words for it
 * into out. */
static int inconclusive(const gwc_run_t *r, int ha, int hb, char *out, size_t cap)
{
    if (r->o->judge_oversubscribed)
        return 0;
    for (int k = 0; k < r->nhosts; k++) {
        const gwc_host_t *h = &r->hosts[k];
        if ((ha < 0 || k == ha || k == hb) && h->oversubscribed) {
            snprintf(out, cap, "inconclusive: oversubscribed (%.40s: %d ranks on %d CPUs)", h->name,
                     h->machine_ranks, h->machine_cpus);
            return 1;
        }
    }
    return 0;
}

/* v for timing evidence about hosts ha and hb: FAIL becomes NOT_JUDGED,
 * its cause prefixed, where inconclusive. */
gwc_verdict_t gwc_timing_verdict(const gwc_run_t *r, int ha, int hb, gwc_verdict_t v, char *cause,
                                 size_t cap)
{
    char inc[120], was[200];
    if (v != GWC_FAIL || !inconclusive(r, ha, hb, inc, sizeof(inc)))
        return v;
    snprintf(was, sizeof(was), "%s", cause);
    snprintf(cause, cap, "%s: %.*s", inc, (int)(cap > strlen(inc) + 3 ? cap - strlen(inc) - 3 : 0),
             was);
    return GWC_NOT_JUDGED;
}

static double link_bw(const gwc_fig_t *f) { return f->bw_ab < f->bw_ba ? f->bw_ab : f->bw_ba; }

double gwc_coll_bound(const gwc_run_t *r, int *a, int *b)
{
    double bound = NAN;
    *a = *b = -1;
    for (int i = 0; i < r->nlinks; i++) {
        const gwc_link_t *l = &r->links[i];
        if (!l->measured || l->same_host || l->fig.wrong)
            continue;
        double bw = link_bw(l->retested ? &l->retest : &l->fig);
        if (isnan(bw) || !(isnan(bound) || bw < bound))
            continue;
        bound = bw;
        *a = l->a;
        *b = l->b;
    }
    return bound;
}

/* The allreduce's bus bandwidth against what the links allow: a
 * bandwidth-optimal allreduce (ring; hier and direct move no more bytes
 * over the network) reaches about the bandwidth of the slowest link it
 * crosses, busbw being algbw x 2(n-1)/n for that reason (nccl-tests'
 * PERFORMANCE.md). Below --coll-fraction (0.5) of the slowest link
 * between hosts it WARNs, below half of that it FAILs: once correctness
 * was all it judged, and a quarter of the link rate PASSed. Links within a
 * host are no bound: there memory and the reduction itself limit it. */
void gwc_judge_busbw(gwc_run_t *r)
{
    gwc_coll_t *c = &r->coll;
    if (!c->run || c->verdict != GWC_PASS || r->size < 2)
        return;
    int a, b;
    double bound = gwc_coll_bound(r, &a, &b);
    if (isnan(bound) || bound <= 0) {
        snprintf(c->cause, sizeof(c->cause),
                 "correct; busbw not judged: no link between hosts to bound it");
        return;
    }
    double frac = c->busbw / bound, warn = r->o->coll_fraction;
    snprintf(c->cause, sizeof(c->cause),
             "correct; busbw %.0f%% of the slowest link between hosts (%.3f GB/s, ranks %d-%d)%s",
             frac * 100, bound, a, b,
             frac < warn / 2 ? ", under half of --coll-fraction"
             : frac < warn   ? ", under --coll-fraction"
                             : "");
    if (frac < warn / 2)
        c->verdict = gwc_timing_verdict(r, -1, -1, GWC_FAIL, c->cause, sizeof(c->cause));
    else if (frac < warn)
        c->verdict = GWC_WARN;
}
