/*
 * check_verdict.c - PASS / WARN / FAIL for every link and host, and whose
 * fault a bad link is.
 *
 * References. Without a baseline, links are judged against the cluster's
 * own figures, robustly: for every host its best bandwidth to another host
 * and the median of its links' median and 99th-percentile latencies, then
 * the median of each over the hosts. Bandwidth takes the best because its
 * noise is one-sided: a link does not run faster than it can, but a sender
 * short of CPU or a retransmission makes it slower (on a loaded 4-host
 * cluster one such link and the link to a slow host made up the median of
 * two healthy hosts, and the reference fell to the slow host's level).
 * Latency tails are wide on any busy host (p99 from 15 us to 30 ms on
 * healthy emulated links here), so their reference is a median. A slow host
 * moves only its own figures, not the median over the hosts, even when
 * half the links of a small cluster touch it. Links within a host (several
 * ranks per host, shared memory) get a reference of their own, the same
 * way. With --baseline, a
 * link's reference is its own figure in the baseline (the baseline's
 * median for a link it lacks), so a cluster that is uniformly slower than
 * when the baseline was saved is caught too.
 *
 * Too few to judge by each other. The cluster's reference stands on the
 * hosts: between two hosts every host's best link to another is the same
 * link (or, with several ranks per host, the best of the links through
 * the same two NICs), so a link would be its own reference and a link 10x
 * too slow PASSed. Between fewer than GWC_MIN_WITNESSES (3) hosts, without
 * --baseline, a link's bandwidth is judged against the NIC line rate (the
 * slower end's /sys/class/net speed, only for an interface that is a
 * device's: a veth or bridge reports a nominal speed), bad under
 * --line-fraction (0.5) of it: a single TCP stream may not fill a fast NIC,
 * so the bar is lower than --bw-fraction's. With no line rate known the
 * link is NOT_JUDGED ("cannot judge without --baseline"), and so is the
 * run (exit status 3), never a PASS. --baseline RATE (GB/s or Gbit/s) is
 * the reference of every link between hosts, at --bw-fraction.
 *
 * A link is over a threshold when (defaults in the spirit of ClusterKit,
 * which calls a pair bad at 2.1x the best latency or under 93% of the best
 * bandwidth; ours are relative to the references above, and options):
 *   - any byte arrived wrong (always; no retest clears it);
 *   - its median 8-byte latency is above --lat-factor (2.1) x the reference;
 *   - its 99th percentile is above --tail-factor (20) x the reference's (a
 *     lost packet costs a retransmission timeout, hundreds of times a
 *     round trip, so loss shows here first; at 10, healthy links of a busy
 *     8-host emulated cluster failed alone at 12-14x a reference of 85 us),
 *     and above --tail-floor-us (10 ms): a lost packet costs at least that
 *     (Linux TCP's tail-loss probe waits at least 10 ms, its retransmission
 *     timeout 200 ms; a verbs QP's retransmission timeout is milliseconds
 *     too), while a process that merely lost its CPU for a scheduler tick
 *     or two waits 1-4 ms (healthy links of a 4-host emulated cluster on a
 *     busy 2-core CI machine had p99s of 1.0-1.4 ms, 25-35x a reference of
 *     39 us, alone and in their round);
 *   - its bandwidth in either direction is below --bw-fraction (0.93) x the
 *     reference.
 * Steps:
 *   1. suspects: links over a threshold in the circle rounds;
 *   2. each suspect is retested alone (no other pair running), twice, the
 *      better figures kept; it is bad when still over, else it WARNs (it
 *      suffered from its round);
 *   3. a host with more than --host-fraction (0.5) of its links to other
 *      hosts bad (and at least two such links) is suspect, worst first, its
 *      links then left out of the other hosts' counts; each is retested
 *      alone against a known-good partner (a host without a bad link): still
 *      bad, or fine but with two or more links to healthy hosts bad in both
 *      of their retests (loss is intermittent: one clean retest does not
 *      clear it), the host FAILs and its bad links are attributed to it
 *      (FAIL, cause "host X"); else it WARNs (its partners may be bad);
 *   4. a bad link between two hosts that did not FAIL is a link FAIL, and
 *      both of its hosts WARN;
 *   5. a rank whose allreduce contribution came out wrong FAILs its host;
 *      a rank that died or hung FAILs its host (check_main.c); the
 *      allreduce's busbw is judged against the slowest link between hosts
 *      (check_timing.c: WARN under --coll-fraction, FAIL under half of it);
 *   6. host sanity: an interface that is down FAILs the host; an RDMA port
 *      that is not ACTIVE, or an MTU unlike the other hosts', WARNs; the
 *      node checks (memory bandwidth, GEMM, NIC, GPU) add their FAIL, WARN
 *      or NOT_JUDGED to the host's (check_node_judge.c);
 *   7. a link between too few hosts with no line rate is NOT_JUDGED, and
 *      so are its hosts; a FAIL from timing where ranks outnumber CPUs is
 *      NOT_JUDGED, "inconclusive: oversubscribed" (check_timing.c). The
 *      run is FAIL if anything FAILed, else NOT_JUDGED if anything was
 *      (exit 3), else the worse of PASS and WARN.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

const char *gwc_verdict_name(gwc_verdict_t v)
{
    switch (v) {
    case GWC_PASS:
        return "PASS";
    case GWC_WARN:
        return "WARN";
    case GWC_FAIL:
        return "FAIL";
    case GWC_NOT_JUDGED:
        return "NOT_JUDGED";
    default:
        return "SKIP";
    }
}

static double bw_of(const gwc_fig_t *f) { return f->bw_ab < f->bw_ba ? f->bw_ab : f->bw_ba; }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    if (n == 0)
        return NAN;
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The robust reference over the measured links with same_host == same:
 * per host its best bandwidth and the medians of its latencies, then the
 * median of those over the hosts. */
static gwc_ref_t reference(const gwc_run_t *r, int same, int *witnesses)
{
    gwc_ref_t ref = {NAN, NAN, NAN, NULL, 0};
    size_t nh = (size_t)r->nhosts, nl = (size_t)(r->nlinks > 0 ? r->nlinks : 1);
    double *bw = calloc(nh, sizeof(double)), *p50 = calloc(nh, sizeof(double));
    double *p99 = calloc(nh, sizeof(double));
    double *lb = calloc(nl, sizeof(double)), *l50 = calloc(nl, sizeof(double));
    double *l99 = calloc(nl, sizeof(double));
    int n = 0;
    for (int h = 0; bw && p50 && p99 && lb && l50 && l99 && h < r->nhosts; h++) {
        int k = 0;
        for (int i = 0; i < r->nlinks; i++) {
            const gwc_link_t *l = &r->links[i];
            if (!l->measured || l->same_host != same || l->fig.wrong)
                continue;
            if (r->host_of[l->a] != h && r->host_of[l->b] != h)
                continue;
            lb[k] = bw_of(&l->fig);
            l50[k] = l->fig.lat_p50;
            l99[k] = l->fig.lat_p99;
            k++;
        }
        if (k == 0)
            continue;
        qsort(lb, (size_t)k, sizeof(double), cmp_double);
        bw[n] = lb[k - 1]; /* the host's best link */
        p50[n] = median(l50, k);
        p99[n] = median(l99, k);
        n++;
    }
    if (n > 0) {
        ref.bw = median(bw, n);
        ref.lat_p50 = median(p50, n);
        ref.lat_p99 = median(p99, n);
    }
    free(bw);
    free(p50);
    free(p99);
    free(lb);
    free(l50);
    free(l99);
    *witnesses = n;
    return ref;
}

double gwc_line_rate(const gwc_run_t *r, int a, int b)
{
    const gwc_rank_info_t *x = &r->info[a], *y = &r->info[b];
    if (!x->physical || !y->physical || x->speed_mbps <= 0 || y->speed_mbps <= 0)
        return NAN;
    int mbps = x->speed_mbps < y->speed_mbps ? x->speed_mbps : y->speed_mbps;
    return mbps / 8000.0; /* Mbit/s to GB/s */
}

/* Why link l's speed has no reference, into out. */
static void unjudged_why(const gwc_run_t *r, const gwc_link_t *l, char *out, size_t cap)
{
    const gwc_rank_info_t *x = &r->info[l->a];
    if (x->physical && x->speed_mbps > 0)
        x = &r->info[l->b];
    snprintf(out, cap,
             "cannot judge without --baseline: between %d hosts a link would be its own "
             "reference, and %s's line rate is unknown (%.16s %s)",
             r->ref_cross_n, gwc_host_name(r, x->rank), x->ifname,
             !x->physical ? "is virtual" : "reports no speed");
}

gwc_ref_t gwc_ref_for(const gwc_run_t *r, const gwc_link_t *l)
{
    if (gwc_links_have_base(r)) {
        const gwc_base_link_t *b = gwc_baseline_find(r, l);
        if (b)
            return (gwc_ref_t){b->lat_p50, b->lat_p99, b->bw, NULL, 0};
        return r->base.ref;
    }
    gwc_ref_t ref = l->same_host ? r->ref_same : r->ref_cross;
    if (l->same_host)
        return ref;
    if (r->o->base_rate > 0) {
        ref.bw = r->o->base_rate;
        ref.bw_what = "--baseline";
        return ref;
    }
    if (r->ref_cross_n >= GWC_MIN_WITNESSES)
        return ref;
    /* Too few hosts to judge each other by: the NIC line rate, or nothing
     * (NAN: the link's speed is not judged, GWC_NOT_JUDGED). */
    ref.bw = gwc_line_rate(r, l->a, l->b);
    ref.bw_what = "the line rate";
    ref.bw_frac = r->o->line_fraction;
    return ref;
}

int gwc_over(const gwc_opts_t *o, const gwc_fig_t *f, const gwc_ref_t *ref, char *why, size_t cap)
{
    size_t used = 0;
    int over = 0;
    why[0] = '\0';
#define ADD(...)                                                           \
    do {                                                                   \
        int n_ = snprintf(why + used, cap - used, "%s", used ? "; " : ""); \
        if (n_ > 0 && (size_t)n_ < cap - used)                             \
            used += (size_t)n_;                                            \
        n_ = snprintf(why + used, cap - used, __VA_ARGS__);                \
        if (n_ > 0 && (size_t)n_ < cap - used)                             \
            used += (size_t)n_;                                            \
        over = 1;                                                          \
    } while (0)
    if (f->wrong)
        ADD("%lld bytes arrived wrong", (long long)f->wrong);
    if (!isnan(ref->lat_p50) && f->lat_p50 > o->lat_factor * ref->lat_p50)
        ADD("latency p50 %.1f us > %.2gx %.1f", f->lat_p50, o->lat_factor, ref->lat_p50);
    if (!isnan(ref->lat_p99) && f->lat_p99 > o->tail_factor * ref->lat_p99 &&
        f->lat_p99 > o->tail_floor_us)
        ADD("latency p99 %.1f us > %.3gx %.1f and > %.0f us", f->lat_p99, o->tail_factor,
            ref->lat_p99, o->tail_floor_us);
    double frac = ref->bw_frac > 0 ? ref->bw_frac : o->bw_fraction;
    const char *what = ref->bw_what ? ref->bw_what : "", *sp = ref->bw_what ? " " : "";
    if (!isnan(ref->bw) && f->bw_ab < frac * ref->bw)
        ADD("bandwidth a->b %.3f GB/s < %.0f%% of %s%s%.3f", f->bw_ab, frac * 100, what, sp,
            ref->bw);
    if (!isnan(ref->bw) && f->bw_ba < frac * ref->bw)
        ADD("bandwidth b->a %.3f GB/s < %.0f%% of %s%s%.3f", f->bw_ba, frac * 100, what, sp,
            ref->bw);
    if (isnan(f->lat_p50) || isnan(f->bw_ab) || isnan(f->bw_ba))
        ADD("not measured");
#undef ADD
    return over;
}

int gwc_find_suspects(gwc_run_t *r, int *pairs, int cap)
{
    r->ref_cross = reference(r, 0, &r->ref_cross_n);
    r->ref_same = reference(r, 1, &r->ref_same_n);
    int n = 0;
    for (int i = 0; i < r->nlinks; i++) {
        gwc_link_t *l = &r->links[i];
        char why[200];
        if (!l->measured)
            continue;
        gwc_ref_t ref = gwc_ref_for(r, l);
        l->unjudged = !l->same_host && isnan(ref.bw);
        l->suspect = gwc_over(r->o, &l->fig, &ref, why, sizeof(why));
        l->bad = l->suspect;
        snprintf(l->cause, sizeof(l->cause), "%s", why);
        /* Wrong bytes are never retested away. */
        if (l->suspect && !l->fig.wrong && n < cap) {
            pairs[2 * n] = l->a;
            pairs[2 * n + 1] = l->b;
            n++;
        }
    }
    return n;
}

/* A link's badness after its retest (if any), with the cause. */
static void settle_link(gwc_run_t *r, gwc_link_t *l)
{
    if (!l->suspect || !l->retested || l->fig.wrong)
        return;
    char why[200];
    gwc_ref_t ref = gwc_ref_for(r, l);
    l->bad = gwc_over(r->o, &l->retest, &ref, why, sizeof(why));
    if (l->bad)
        snprintf(l->cause, sizeof(l->cause), "%.180s (also alone)", why);
    else {
        char was[200];
        snprintf(was, sizeof(was), "%s", l->cause);
        snprintf(l->cause, sizeof(l->cause), "in its round: %.150s; fine alone", was);
    }
}

int gwc_find_suspect_hosts(gwc_run_t *r, int *pairs, int cap)
{
    for (int i = 0; i < r->nlinks; i++)
        settle_link(r, &r->links[i]);
    for (int h = 0; h < r->nhosts; h++) {
        r->hosts[h].bad_links = r->hosts[h].links = 0;
        r->hosts[h].partner = -1;
        r->hosts[h].suspect = 0;
    }
    for (int i = 0; i < r->nlinks; i++) {
        const gwc_link_t *l = &r->links[i];
        if (!l->measured || l->same_host)
            continue;
        int ha = r->host_of[l->a], hb = r->host_of[l->b];
        r->hosts[ha].links++;
        r->hosts[hb].links++;
        r->hosts[ha].bad_links += l->bad;
        r->hosts[hb].bad_links += l->bad;
    }
    /* Suspects, worst first: a host's links to hosts already suspect are
     * left out of its count, so that a healthy host with one noisy link and
     * one to the bad host is not taken for a bad one. */
    for (;;) {
        int worst = -1, worst_bad = 0;
        double worst_frac = 0;
        for (int h = 0; h < r->nhosts; h++) {
            if (r->hosts[h].suspect)
                continue;
            int bad = 0, all = 0;
            for (int i = 0; i < r->nlinks; i++) {
                const gwc_link_t *l = &r->links[i];
                int ha = r->host_of[l->a], hb = r->host_of[l->b];
                if (!l->measured || l->same_host || (ha != h && hb != h) ||
                    r->hosts[ha == h ? hb : ha].suspect)
                    continue;
                all++;
                bad += l->bad;
            }
            double frac = all ? (double)bad / all : 0;
            if (all >= 2 && frac > r->o->host_fraction &&
                (frac > worst_frac || (frac == worst_frac && bad > worst_bad))) {
                worst = h;
                worst_frac = frac;
                worst_bad = bad;
            }
        }
        if (worst < 0)
            break;
        r->hosts[worst].suspect = 1;
    }
    /* The known-good partner: a host that is not suspect, with the fewest
     * bad links (those to the suspects do not count against it). */
    int good = -1, good_bad = 0;
    for (int h = 0; h < r->nhosts; h++) {
        if (r->hosts[h].suspect || r->hosts[h].links == 0)
            continue;
        int own = 0;
        for (int i = 0; i < r->nlinks; i++) {
            const gwc_link_t *l = &r->links[i];
            int ha = r->host_of[l->a], hb = r->host_of[l->b];
            if (l->measured && !l->same_host && l->bad && (ha == h || hb == h) &&
                !r->hosts[ha == h ? hb : ha].suspect)
                own++;
        }
        if (good < 0 || own < good_bad) {
            good = h;
            good_bad = own;
        }
    }
    int n = 0;
    for (int h = 0; h < r->nhosts; h++) {
        gwc_host_t *host = &r->hosts[h];
        if (!host->suspect || good < 0 || good_bad > 0)
            continue;
        host->partner = r->hosts[good].first_rank;
        if (n < cap) {
            pairs[2 * n] = host->first_rank < host->partner ? host->first_rank : host->partner;
            pairs[2 * n + 1] = host->first_rank < host->partner ? host->partner : host->first_rank;
            n++;
        }
    }
    return n;
}

static void worsen(gwc_verdict_t *v, gwc_verdict_t w)
{
    if (w > *v)
        *v = w;
}

static void host_note(gwc_host_t *h, gwc_verdict_t v, const char *text)
{
    size_t used = strlen(h->cause);
    if (v < h->verdict && used)
        return; /* a milder note does not push out the reason for a worse verdict */
    if (v > h->verdict)
        used = 0;
    snprintf(h->cause + used, sizeof(h->cause) - used, "%s%s", used ? "; " : "", text);
    worsen(&h->verdict, v);
}

void gwc_host_note(gwc_host_t *h, gwc_verdict_t v, const char *text) { host_note(h, v, text); }

static void judge_sanity(gwc_run_t *r)
{
    int mtus[64], counts[64], nm = 0, common = -1, best = 0;
    for (int h = 0; h < r->nhosts; h++) {
        int m = r->info[r->hosts[h].first_rank].mtu, k;
        for (k = 0; k < nm && mtus[k] != m; k++)
            ;
        if (k == nm && nm < 64) {
            mtus[nm] = m;
            counts[nm++] = 0;
        }
        if (k < nm && ++counts[k] > best) {
            best = counts[k];
            common = m;
        }
    }
    for (int h = 0; h < r->nhosts; h++) {
        gwc_host_t *host = &r->hosts[h];
        const gwc_rank_info_t *ri = &r->info[host->first_rank];
        char text[160];
        if (ri->link_up == 0) {
            snprintf(text, sizeof(text), "interface %s towards the root is not up and running",
                     ri->ifname);
            host_note(host, GWC_FAIL, text);
        }
        if (ri->mtu != common) {
            snprintf(text, sizeof(text), "MTU %d unlike the other hosts' %d", ri->mtu, common);
            host_note(host, GWC_WARN, text);
        }
        if (ri->rdma[0] && strstr(ri->rdma, "DOWN"))
            host_note(host, GWC_WARN, "an RDMA port is not ACTIVE");
    }
}

static void add_note(gwc_run_t *r, const char *text)
{
    size_t used = strlen(r->notes);
    snprintf(r->notes + used, sizeof(r->notes) - used, "%s%s", used ? "; " : "", text);
}

/* What the verdicts could not look at, said once for the run. */
static void judge_notes(gwc_run_t *r)
{
    int same = 0, cross = 0;
    for (int i = 0; i < r->nlinks; i++) {
        same += r->links[i].measured && r->links[i].same_host;
        cross += r->links[i].measured && !r->links[i].same_host;
    }
    uint64_t seen[8];
    int nseen = 0;
    for (int h = 0; h < r->nhosts; h++) {
        const gwc_host_t *host = &r->hosts[h];
        uint64_t key = r->info[host->first_rank].machine_key;
        int k;
        for (k = 0; k < nseen && seen[k] != key; k++)
            ;
        if (!host->oversubscribed || k < nseen || nseen == 8)
            continue;
        seen[nseen++] = key;
        char text[200];
        snprintf(text, sizeof(text), "oversubscribed: %d ranks share the %d CPUs of %.40s%s (%s)",
                 host->machine_ranks, host->machine_cpus, host->name,
                 r->nhosts > 1 ? "'s machine" : "",
                 r->o->judge_oversubscribed ? "timing judged anyway, --judge-oversubscribed"
                                            : "timing there is no evidence to FAIL on");
        add_note(r, text);
    }
    if (gwc_links_have_base(r))
        return;
    if (same == 1)
        add_note(r, "the speed of the one link within a host is not judged: it would be its "
                    "own reference (--baseline FILE judges it)");
    if (cross > 0 && r->ref_cross_n < GWC_MIN_WITNESSES && r->nhosts == r->size)
        add_note(r, "latency between hosts is not judged: between 2 hosts a link would be its "
                    "own reference (--baseline FILE judges it)");
}

void gwc_judge(gwc_run_t *r)
{
    r->notes[0] = '\0';
    char text[200];
    for (int h = 0; h < r->nhosts; h++) {
        r->hosts[h].verdict = GWC_SKIP;
        r->hosts[h].cause[0] = '\0';
    }
    judge_sanity(r);
    /* Suspect hosts, against their known-good partner. */
    for (int h = 0; h < r->nhosts; h++) {
        gwc_host_t *host = &r->hosts[h];
        if (!host->suspect)
            continue;
        if (host->partner < 0) {
            snprintf(text, sizeof(text),
                     "%d of %d links to other hosts bad; no known-good host "
                     "to retest against",
                     host->bad_links, host->links);
            host_note(host, gwc_timing_verdict(r, h, h, GWC_FAIL, text, sizeof(text)), text);
            continue;
        }
        gwc_link_t *l = &r->links[gwc_link_index(r->size, host->first_rank, host->partner)];
        char why[200];
        gwc_ref_t ref = gwc_ref_for(r, l);
        int still = !l->retested || gwc_over(r->o, &l->retest, &ref, why, sizeof(why));
        if (!l->retested)
            snprintf(why, sizeof(why), "not retested");
        /* An intermittent fault (loss) can come out clean in one retest:
         * two or more links bad in both of their own retests, to hosts
         * that are not suspect, outweigh it. */
        int confirmed = 0;
        for (int i = 0; i < r->nlinks; i++) {
            const gwc_link_t *k = &r->links[i];
            int ka = r->host_of[k->a], kb = r->host_of[k->b];
            if (k->bad && k->retested && !k->same_host && (ka == h || kb == h) &&
                !r->hosts[ka == h ? kb : ka].suspect)
                confirmed++;
        }
        if (!still && confirmed >= 2) {
            still = 1;
            snprintf(why, sizeof(why),
                     "fine once against it, but %d links to healthy hosts bad "
                     "in both of their retests (an intermittent fault)",
                     confirmed);
        }
        snprintf(text, sizeof(text),
                 "%d of %d links to other hosts bad; %s alone against "
                 "known-good %s%s%.90s",
                 host->bad_links, host->links, still ? "confirmed" : "but fine",
                 gwc_host_name(r, host->partner), still ? ": " : "", still ? why : "");
        host_note(host,
                  gwc_timing_verdict(r, h, r->host_of[host->partner], still ? GWC_FAIL : GWC_WARN,
                                     text, sizeof(text)),
                  text);
    }
    /* Links: attributed to a failed host, or their own. */
    for (int i = 0; i < r->nlinks; i++) {
        gwc_link_t *l = &r->links[i];
        l->host_blamed = -1;
        if (!l->measured) {
            l->verdict = GWC_SKIP;
            if (!l->cause[0])
                snprintf(l->cause, sizeof(l->cause), "not measured");
            continue;
        }
        if (!l->bad && l->unjudged) {
            /* Not a PASS: nothing said how fast it should be. */
            char was[200], why[200];
            snprintf(was, sizeof(was), "%s", l->suspect ? l->cause : "");
            unjudged_why(r, l, why, sizeof(why));
            snprintf(l->cause, sizeof(l->cause), "%.150s%s%.45s", why, was[0] ? "; " : "", was);
            l->verdict = GWC_NOT_JUDGED;
            int hs[2] = {r->host_of[l->a], r->host_of[l->b]};
            for (int e = 0; e < 2; e++)
                host_note(&r->hosts[hs[e]], GWC_NOT_JUDGED,
                          "the speed of its links to other hosts cannot be judged without "
                          "--baseline");
            continue;
        }
        if (!l->bad) {
            l->verdict = l->suspect ? GWC_WARN : GWC_PASS;
            continue;
        }
        if (r->failed && r->do_retest && !l->retested && !l->fig.wrong) {
            /* The job failed before its retest: a suspect, not a verdict. */
            char was[200];
            snprintf(was, sizeof(was), "%s", l->cause);
            snprintf(l->cause, sizeof(l->cause), "not retested (the job failed): %.150s", was);
            l->verdict = GWC_WARN;
            continue;
        }
        l->verdict = GWC_FAIL;
        int ha = r->host_of[l->a], hb = r->host_of[l->b];
        int blamed = r->hosts[ha].suspect && r->hosts[ha].verdict == GWC_FAIL   ? ha
                     : r->hosts[hb].suspect && r->hosts[hb].verdict == GWC_FAIL ? hb
                                                                                : -1;
        char was[200];
        snprintf(was, sizeof(was), "%s", l->cause);
        if (blamed >= 0) {
            l->host_blamed = blamed;
            snprintf(l->cause, sizeof(l->cause), "host %.40s: %.150s", r->hosts[blamed].name, was);
        } else {
            snprintf(l->cause, sizeof(l->cause), "link: %.170s", was);
            /* Wrong bytes are no timing: they FAIL however busy the host. */
            if (!l->fig.wrong && !l->retest.wrong)
                l->verdict = gwc_timing_verdict(r, ha, hb, GWC_FAIL, l->cause, sizeof(l->cause));
            if (l->verdict == GWC_NOT_JUDGED) {
                snprintf(text, sizeof(text),
                         "the timing of a link %s is inconclusive (oversubscribed)",
                         l->same_host ? "between its own ranks" : "to another host");
                host_note(&r->hosts[ha], GWC_NOT_JUDGED, text);
                host_note(&r->hosts[hb], GWC_NOT_JUDGED, text);
            } else if (!l->same_host) {
                snprintf(text, sizeof(text), "bad link to %s", r->hosts[hb].name);
                host_note(&r->hosts[ha], GWC_WARN, text);
                snprintf(text, sizeof(text), "bad link to %s", r->hosts[ha].name);
                host_note(&r->hosts[hb], GWC_WARN, text);
            } else {
                host_note(&r->hosts[ha], GWC_FAIL, "bad link between its own ranks");
            }
        }
    }
    /* Collectives: wrong contributions name their rank's host. */
    gwc_coll_t *c = &r->coll;
    c->verdict = c->run ? GWC_PASS : GWC_SKIP;
    for (int q = 0; c->run && q < r->size; q++) {
        if (!c->wrong_from[q])
            continue;
        snprintf(text, sizeof(text),
                 "allreduce: rank %d's contribution came out wrong in %lld "
                 "elements",
                 q, (long long)c->wrong_from[q]);
        host_note(&r->hosts[r->host_of[q]], GWC_FAIL, text);
        c->verdict = GWC_FAIL;
        snprintf(c->cause, sizeof(c->cause), "%s", text);
    }
    if (c->run && c->unattributed) {
        c->verdict = GWC_FAIL;
        snprintf(c->cause, sizeof(c->cause), "%lld wrong bits that name no rank",
                 (long long)c->unattributed);
    }
    if (c->run && r->have_base && c->verdict == GWC_PASS) {
        if (!isnan(r->base.busbw) && c->busbw < r->o->bw_fraction * r->base.busbw) {
            snprintf(c->cause, sizeof(c->cause), "busbw %.3f GB/s < %.0f%% of the baseline's %.3f",
                     c->busbw, r->o->bw_fraction * 100, r->base.busbw);
            c->verdict = gwc_timing_verdict(r, -1, -1, GWC_FAIL, c->cause, sizeof(c->cause));
        } else if (!isnan(r->base.coll_lat) && c->lat_p50 > r->o->lat_factor * r->base.coll_lat) {
            c->verdict = GWC_WARN;
            snprintf(c->cause, sizeof(c->cause), "latency %.1f us > %.2gx the baseline's %.1f",
                     c->lat_p50, r->o->lat_factor, r->base.coll_lat);
        }
    }
    gwc_judge_busbw(r);
    /* The node checks (check_node_judge.c). */
    gwc_judge_node(r);
    /* A rank that failed the job. */
    if (r->failed) {
        if (r->culprit >= 0 && r->culprit < r->size)
            host_note(&r->hosts[r->host_of[r->culprit]], GWC_FAIL, r->failure);
    }
    /* Hosts that something was measured on and nothing was wrong with. */
    for (int h = 0; h < r->nhosts; h++) {
        gwc_host_t *host = &r->hosts[h];
        if (host->verdict == GWC_SKIP &&
            (host->links > 0 || c->run || r->node.run || r->size == 1 || r->nhosts == 1))
            host->verdict = r->failed && !host->links ? GWC_SKIP : GWC_PASS;
    }
    judge_notes(r);
    /* The run: FAIL when anything FAILed; else NOT_JUDGED when anything
     * could not be judged, even beside a WARN, so that the exit status
     * says it (GWC_EXIT_NOT_JUDGED); else the worst of PASS and WARN. */
    gwc_verdict_t worst = r->failed ? GWC_FAIL : GWC_PASS;
    int unjudged = c->verdict == GWC_NOT_JUDGED;
    for (int h = 0; h < r->nhosts; h++) {
        worsen(&worst, r->hosts[h].verdict);
        unjudged |= r->hosts[h].verdict == GWC_NOT_JUDGED;
    }
    for (int i = 0; i < r->nlinks; i++) {
        worsen(&worst, r->links[i].verdict);
        unjudged |= r->links[i].verdict == GWC_NOT_JUDGED;
    }
    worsen(&worst, c->verdict);
    r->verdict = worst != GWC_FAIL && unjudged ? GWC_NOT_JUDGED : worst;
}

int gwc_exit_status(const gwc_run_t *r)
{
    if (r->failed || r->verdict == GWC_FAIL)
        return GWC_EXIT_FAIL;
    return r->verdict == GWC_NOT_JUDGED ? GWC_EXIT_NOT_JUDGED : GWC_EXIT_PASS;
}
