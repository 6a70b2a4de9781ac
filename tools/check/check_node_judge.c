/*
 * check_node_judge.c - the node's figures judged against the other hosts',
 * and the NIC against its line rate.
 *
 * Memory bandwidth and the GEMM rate. A host is judged against the hosts'
 * reference: the upper median of their figures (the larger middle one of
 * an even count). A median, because one slow host moves only its own
 * figure; the upper one, because a node's noise is one-sided (a host does
 * not run faster than it can, but a busy or throttled one runs slower), so
 * that on four hosts, two of them at half speed, the reference is the
 * healthy pair's and the slow pair FAILs. A host FAILs under
 * --node-fraction (0.7) x the reference, and WARNs under halfway between
 * that and the reference (0.85 x): a host with half its memory channels
 * populated, or throttled to half its clock, FAILs; one 20% off WARNs.
 * Like the links' speed, the reference needs GWC_MIN_WITNESSES (3) hosts:
 * on one host there is nothing to compare with, and on two, which one is
 * slow cannot be told, so the figure is reported, not judged (a SKIP that
 * leaves the exit status alone). With --baseline FILE whose node records
 * (check_baseline.c) hold the figure, a host is judged against its own
 * record, matched by its name, or, where the baseline has none for it,
 * against the upper median of the baseline's hosts: one host alone is
 * then judged, and a cluster whose every node became slower since the
 * baseline FAILs where its own medians would not see it. A
 * FAIL on a host whose machine has more ranks than CPUs becomes
 * NOT_JUDGED, "inconclusive: oversubscribed", unless
 * --judge-oversubscribed, as for the network's timing (check_timing.c).
 * A host under the WARN bound was measured twice (check_node.c) and is
 * judged by the better of its figures, its cause saying so.
 * These rules are gwc_node_judge_figure, a pure function over the hosts'
 * figures, unit-tested in tests/tools/test_check_node.c.
 *
 * The NIC. Each host's best link to another host (the slower direction of
 * its judged figures), as a percentage of its interface's line rate, as
 * ClusterKit reports it: WARN under --line-fraction (0.5) of it (one TCP
 * stream may not fill a fast NIC, so the links themselves are judged
 * against each other, check_verdict.c, and this only WARNs); SKIP with the
 * reason where the line rate is unknown (a veth or bridge reports a
 * nominal speed) or no link to another host was measured.
 *
 * The GPU, when one is present: its figures are reported, and judged
 * against the other hosts' as above (the worst of the three copies); a
 * host without one SKIPs with the reason.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

const char *const gwc_node_figure_name[GWC_NODE_FIGURES] = {
    "memory bandwidth (triad)", "GEMM (sgemm)", "GPU device-to-device copy",
    "GPU host-to-device copy", "GPU device-to-host copy"};
const char *const gwc_node_figure_unit[GWC_NODE_FIGURES] = {"GB/s", "GFLOP/s", "GB/s", "GB/s",
                                                            "GB/s"};

void gwc_node_judge_figure(const char *what, const char *unit, const double *fig,
                           const int *oversub, int n, double fraction, int judge_oversub,
                           gwc_node_judged_t *out)
{
    gwc_node_judge_figure_base(what, unit, fig, NULL, NAN, oversub, n, fraction, judge_oversub,
                               out);
}

void gwc_node_judge_figure_base(const char *what, const char *unit, const double *fig,
                                const double *base, double base_ref, const int *oversub, int n,
                                double fraction, int judge_oversub, gwc_node_judged_t *out)
{
    size_t k;
    double hosts_ref = gwc_upper_median(fig, n > 0 ? (size_t)n : 0, &k);
    if (k < GWC_MIN_WITNESSES)
        hosts_ref = NAN;
    for (int h = 0; h < n; h++) {
        gwc_node_judged_t *o = &out[h];
        /* The reference: the host's own baseline figure, the baseline's
         * hosts', or this run's hosts'. */
        double ref = hosts_ref;
        const char *of = "the hosts'";
        if (base && !isnan(base[h])) {
            ref = base[h];
            of = "its baseline's";
        } else if (base && !isnan(base_ref)) {
            ref = base_ref;
            of = "the baseline's hosts'";
        }
        o->ref = ref;
        if (isnan(fig[h])) {
            o->verdict = GWC_SKIP;
            snprintf(o->cause, sizeof(o->cause), "%s: not measured", what);
            continue;
        }
        if (isnan(ref)) {
            /* Reported, and not held against the run: a check of one or
             * two hosts (the commonest: "is this node sane?") would
             * otherwise exit 3 for want of hosts it was never given;
             * --baseline FILE with node records judges them. */
            o->verdict = GWC_SKIP;
            snprintf(o->cause, sizeof(o->cause),
                     "%s %.3g %s: reported, not judged: a reference needs %d hosts (%d "
                     "measured) or a --baseline with this figure",
                     what, fig[h], unit, GWC_MIN_WITNESSES, (int)k);
            continue;
        }
        double frac = ref > 0 ? fig[h] / ref : 1;
        if (frac < fraction) {
            o->verdict = GWC_FAIL;
            snprintf(o->cause, sizeof(o->cause), "%s %.3g %s = %.0f%% of %s %.3g (< %.0f%%)", what,
                     fig[h], unit, frac * 100, of, ref, fraction * 100);
            if (oversub && oversub[h] && !judge_oversub) {
                char was[200];
                snprintf(was, sizeof(was), "%s", o->cause);
                snprintf(o->cause, sizeof(o->cause), "inconclusive: oversubscribed: %.160s", was);
                o->verdict = GWC_NOT_JUDGED;
            }
        } else if (frac < (1 + fraction) / 2) {
            o->verdict = GWC_WARN;
            snprintf(o->cause, sizeof(o->cause), "%s %.3g %s = %.0f%% of %s %.3g (< %.0f%%)", what,
                     fig[h], unit, frac * 100, of, ref, (1 + fraction) / 2 * 100);
        } else {
            o->verdict = GWC_PASS;
            snprintf(o->cause, sizeof(o->cause), "%s %.3g %s = %.0f%% of %s %.3g", what, fig[h],
                     unit, frac * 100, of, ref);
        }
    }
}

double gwc_link_line_pct(const gwc_run_t *r, const gwc_link_t *l)
{
    if (!l->measured || l->same_host)
        return NAN;
    double line = gwc_line_rate(r, l->a, l->b);
    const gwc_fig_t *f = l->retested ? &l->retest : &l->fig;
    double bw = f->bw_ab < f->bw_ba ? f->bw_ab : f->bw_ba;
    return isnan(line) || line <= 0 ? NAN : bw / line * 100;
}

static void judge_nic(gwc_run_t *r, int h, gwc_nic_t *nic)
{
    const gwc_rank_info_t *ri = &r->info[r->hosts[h].first_rank];
    nic->line_GBps = ri->physical && ri->speed_mbps > 0 ? ri->speed_mbps / 8000.0 : NAN;
    nic->best_GBps = nic->pct = NAN;
    for (int i = 0; i < r->nlinks; i++) {
        const gwc_link_t *l = &r->links[i];
        if (!l->measured || l->same_host || (r->host_of[l->a] != h && r->host_of[l->b] != h))
            continue;
        const gwc_fig_t *f = l->retested ? &l->retest : &l->fig;
        double bw = f->bw_ab < f->bw_ba ? f->bw_ab : f->bw_ba;
        if (!isnan(bw) && (isnan(nic->best_GBps) || bw > nic->best_GBps))
            nic->best_GBps = bw;
    }
    gwc_node_judged_t *j = &nic->j;
    j->ref = nic->line_GBps;
    if (isnan(nic->line_GBps)) {
        j->verdict = GWC_SKIP;
        snprintf(j->cause, sizeof(j->cause), "NIC: no line rate (%.16s %s)", ri->ifname,
                 !ri->physical ? "is virtual" : "reports no speed");
        return;
    }
    if (isnan(nic->best_GBps)) {
        j->verdict = GWC_SKIP;
        snprintf(j->cause, sizeof(j->cause),
                 "NIC %.16s %.0f Gbit/s: no link to another host measured", ri->ifname,
                 nic->line_GBps * 8);
        return;
    }
    nic->pct = nic->best_GBps / nic->line_GBps * 100;
    int low = nic->pct < r->o->line_fraction * 100;
    j->verdict = low ? GWC_WARN : GWC_PASS;
    snprintf(j->cause, sizeof(j->cause),
             "NIC %.16s: best link %.3f GB/s = %.0f%% of its %.0f Gbit/s line rate%s", ri->ifname,
             nic->best_GBps, nic->pct, nic->line_GBps * 8, low ? " (< --line-fraction)" : "");
}

/* The GPU's verdict on each host: the worst of its copies' (figures
 * GWC_NODE_GPU_D2D..D2H), or SKIP with the reason there is none. */
static void judge_gpu(gwc_run_t *r, int h)
{
    gwc_node_t *n = &r->node;
    gwc_node_judged_t *g = &n->gpu[h];
    const gwc_node_fig_t *f = &n->fig[h];
    g->ref = NAN;
    if (!f->gpu) {
        g->verdict = GWC_SKIP;
        snprintf(g->cause, sizeof(g->cause), "GPU not present: %.150s", f->gpu_name);
        return;
    }
    g->verdict = GWC_SKIP;
    g->cause[0] = '\0';
    for (int k = GWC_NODE_GPU_D2D; k <= GWC_NODE_GPU_D2H; k++) {
        const gwc_node_judged_t *j = &n->judged[h][k];
        if (j->verdict > g->verdict || (j->verdict == g->verdict && !g->cause[0])) {
            g->verdict = j->verdict;
            snprintf(g->cause, sizeof(g->cause), "%s", j->cause);
        }
    }
}

void gwc_judge_node(gwc_run_t *r)
{
    gwc_node_t *n = &r->node;
    if (!n->run || !n->fig)
        return;
    int nh = r->nhosts;
    double *fig = calloc((size_t)nh, sizeof(double));
    int *oversub = calloc((size_t)nh, sizeof(int));
    if (!fig || !oversub) {
        free(fig);
        free(oversub);
        return;
    }
    for (int h = 0; h < nh; h++)
        oversub[h] = r->hosts[h].oversubscribed;
    gwc_node_judged_t *out = calloc((size_t)nh, sizeof(*out));
    /* With a baseline that has node records: each host's own record. */
    double *base = r->have_base && r->base.nnodes ? calloc((size_t)nh, sizeof(double)) : NULL;
    for (int k = 0; out && k < GWC_NODE_FIGURES; k++) {
        for (int h = 0; h < nh; h++) {
            fig[h] = n->fig[h].measured ? n->fig[h].v[k] : NAN;
            if (base) {
                const gwc_base_node_t *b = gwc_baseline_find_node(r, h);
                base[h] = b ? b->v[k] : NAN;
            }
        }
        gwc_node_judge_figure_base(gwc_node_figure_name[k], gwc_node_figure_unit[k], fig, base,
                                   base ? gwc_baseline_node_ref(&r->base, k) : NAN, oversub, nh,
                                   r->o->node_fraction, r->o->judge_oversubscribed, out);
        for (int h = 0; h < nh; h++) {
            n->judged[h][k] = out[h];
            /* A figure not measured says why, when its host knows. */
            if (isnan(fig[h]) && n->fig[h].measured && n->fig[h].why[k][0])
                snprintf(n->judged[h][k].cause, sizeof(n->judged[h][k].cause), "%s: %.150s",
                         gwc_node_figure_name[k], n->fig[h].why[k]);
            else if (isnan(fig[h]) && !n->fig[h].measured)
                snprintf(n->judged[h][k].cause, sizeof(n->judged[h][k].cause),
                         "%s: not measured (the check failed first)", gwc_node_figure_name[k]);
            /* A suspect measured twice: the figure is the better one. */
            gwc_node_judged_t *j = &n->judged[h][k];
            size_t used = strlen(j->cause);
            if (n->fig[h].retested && (j->verdict == GWC_FAIL || j->verdict == GWC_WARN))
                snprintf(j->cause + used, sizeof(j->cause) - used, "%s",
                         "; the better of 2 measurements");
        }
    }
    free(base);
    free(out);
    free(fig);
    free(oversub);
    for (int h = 0; h < nh; h++) {
        judge_nic(r, h, &n->nic[h]);
        judge_gpu(r, h);
        /* Into the host's verdict: what is wrong, and what could not be
         * judged (a SKIP, such as no GPU, says nothing against a host). */
        const gwc_node_judged_t *js[GWC_NODE_CHECKS] = {
            &n->judged[h][GWC_NODE_MEM], &n->judged[h][GWC_NODE_GEMM], &n->nic[h].j, &n->gpu[h]};
        for (int c = 0; c < GWC_NODE_CHECKS; c++) {
            gwc_verdict_t v = js[c]->verdict;
            if (v == GWC_FAIL || v == GWC_WARN || v == GWC_NOT_JUDGED)
                gwc_host_note(&r->hosts[h], v, js[c]->cause);
        }
    }
}
