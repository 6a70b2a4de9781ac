/*
 * check_report.c - what rank 0 tells: the table on the terminal and the
 * JSON report (the schema is in README.md, "Acceptance testing").
 *
 * The table has three parts: the hosts (address, interface, MTU, link
 * state, RDMA ports, transport, verdict and cause), the links (both ends,
 * the 8-byte latency p50/p99, the 1 MiB bandwidth each way, verdict and
 * cause; a retested link shows the figures it was judged by, alone), and
 * the collectives; then one summary line with the counts per verdict. The
 * JSON carries the same, every host with its address and every link with
 * both ends, so that a CI system or a script can read what a person reads.
 * The node checks (check_node.c) add a table of their own: per host the
 * triad's memory bandwidth, the GEMM rate, the NIC's best link as a
 * percentage of its line rate and the GPU, each with its verdict; every
 * link between hosts also shows its bandwidth as a percentage of the
 * line rate, where that is known.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

const char *gwc_host_name(const gwc_run_t *r, int rank) { return r->hosts[r->host_of[rank]].name; }

/* ---- as the run goes: progress and the failure of the job ---- */

void gwc_progress(const gwc_run_t *r, const char *fmt, ...)
{
    if (r->rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    printf("[check %6.1fs] ", gw_kit_now_s() - r->t0);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

void gwc_job_failed(gwc_run_t *r, const char *phase, gw_status_t st)
{
    r->failed = 1;
    r->culprit = gw_comm_culprit(r->comm);
    if (r->culprit >= 0 && r->info && r->hosts && r->nhosts > 0)
        snprintf(r->failure, sizeof(r->failure), "rank %d on host %s died or hung during %s (%s)",
                 r->culprit, gwc_host_name(r, r->culprit), phase, gw_status_str(st));
    else if (r->culprit >= 0)
        snprintf(r->failure, sizeof(r->failure), "rank %d died or hung during %s (%s)", r->culprit,
                 phase, gw_status_str(st));
    else
        snprintf(r->failure, sizeof(r->failure), "the job failed during %s (%s), naming no rank",
                 phase, gw_status_str(st));
    fprintf(stderr, "gradwire-check: rank %d: %s\n", r->rank, r->failure);
}

static const gwc_fig_t *judged(const gwc_link_t *l) { return l->retested ? &l->retest : &l->fig; }

static void counts(const gwc_run_t *r, int *hosts, int *links)
{
    memset(hosts, 0, 5 * sizeof(int));
    memset(links, 0, 5 * sizeof(int));
    for (int h = 0; h < r->nhosts; h++)
        hosts[r->hosts[h].verdict]++;
    for (int i = 0; i < r->nlinks; i++)
        links[r->links[i].verdict]++;
}

/* A figure with `decimals` decimals and suffix, or "-" when it is NAN,
 * into buf. */
static const char *fig_str(double v, int decimals, const char *suffix, char *buf, size_t cap)
{
    if (isnan(v))
        return "-";
    snprintf(buf, cap, "%.*f%s", decimals, v, suffix);
    return buf;
}

static void print_node(const gwc_run_t *r)
{
    const gwc_node_t *n = &r->node;
    if (!r->o->node) {
        printf("\n== node: left out (--no-node)\n");
        return;
    }
    if (!n->run) {
        printf("\n== node: not run (the check failed first)\n");
        return;
    }
    printf("\n== node (one rank per host measures; memory GB/s, GEMM GFLOP/s, NIC %% of line "
           "rate)\n");
    printf("%-4s %-18s %4s %9s %-10s %9s %-10s %6s %-10s %-10s\n", "host", "name", "thr", "memory",
           "", "gemm", "", "nic%", "", "gpu");
    for (int h = 0; h < r->nhosts; h++) {
        const gwc_node_fig_t *f = &n->fig[h];
        char b1[32], b2[32], b3[32];
        printf("%-4d %-18.18s %4d %9s %-10s %9s %-10s %6s %-10s %-10s\n", h, r->hosts[h].name,
               f->threads, fig_str(f->v[GWC_NODE_MEM], 2, "", b1, sizeof(b1)),
               gwc_verdict_name(n->judged[h][GWC_NODE_MEM].verdict),
               fig_str(f->v[GWC_NODE_GEMM], 1, "", b2, sizeof(b2)),
               gwc_verdict_name(n->judged[h][GWC_NODE_GEMM].verdict),
               fig_str(n->nic[h].pct, 0, "%", b3, sizeof(b3)),
               gwc_verdict_name(n->nic[h].j.verdict), gwc_verdict_name(n->gpu[h].verdict));
    }
    /* The reasons, one line per check that did not PASS. */
    for (int h = 0; h < r->nhosts; h++) {
        const gwc_node_judged_t *js[GWC_NODE_CHECKS] = {
            &n->judged[h][GWC_NODE_MEM], &n->judged[h][GWC_NODE_GEMM], &n->nic[h].j, &n->gpu[h]};
        for (int c = 0; c < GWC_NODE_CHECKS; c++)
            if (js[c]->verdict != GWC_PASS && (c != 3 || h == 0 || n->fig[h].gpu))
                printf("     host %d %s: %s\n", h, gwc_verdict_name(js[c]->verdict), js[c]->cause);
    }
}

void gwc_print_report(const gwc_run_t *r)
{
    printf("\n== hosts (%d, %d ranks)\n", r->nhosts, r->size);
    printf("%-4s %-18s %-16s %-10s %5s %-6s %-22s %-10s %s\n", "host", "name", "address", "iface",
           "mtu", "link", "transport", "", "cause");
    for (int h = 0; h < r->nhosts; h++) {
        const gwc_host_t *host = &r->hosts[h];
        const gwc_rank_info_t *ri = &r->info[host->first_rank];
        printf("%-4d %-18.18s %-16.16s %-10.10s %5d %-6s %-22.22s %-10s %s\n", h, host->name,
               ri->addr, ri->ifname, ri->mtu,
               ri->link_up == 1   ? "up"
               : ri->link_up == 0 ? "DOWN"
                                  : "?",
               ri->transport, gwc_verdict_name(host->verdict), host->cause);
        if (ri->rdma[0])
            printf("     rdma: %s\n", ri->rdma);
    }
    printf("\n== links (8 B latency one way, us; %zu KiB bandwidth, GB/s, and as %% of the line "
           "rate; * = retested alone)\n",
           r->o->bw_bytes >> 10);
    printf("%5s %5s %-16s %-16s %8s %8s %8s %8s %5s %-10s %s\n", "a", "b", "host a", "host b",
           "p50", "p99", "bw a>b", "bw b>a", "line", "", "cause");
    for (int i = 0; i < r->nlinks; i++) {
        const gwc_link_t *l = &r->links[i];
        const gwc_fig_t *f = judged(l);
        if (!l->measured) {
            printf("%5d %5d %-16.16s %-16.16s %8s %8s %8s %8s %5s %-10s %s\n", l->a, l->b,
                   gwc_host_name(r, l->a), gwc_host_name(r, l->b), "-", "-", "-", "-", "-",
                   gwc_verdict_name(l->verdict), l->cause);
            continue;
        }
        char pct[32];
        printf("%5d %5d %-16.16s %-16.16s %8.1f %8.1f %8.4f %8.4f %5s %-10s%s%s\n", l->a, l->b,
               gwc_host_name(r, l->a), gwc_host_name(r, l->b), f->lat_p50, f->lat_p99, f->bw_ab,
               f->bw_ba, fig_str(gwc_link_line_pct(r, l), 0, "%", pct, sizeof(pct)),
               gwc_verdict_name(l->verdict), l->retested ? "*" : " ", l->cause);
    }
    print_node(r);
    const gwc_coll_t *c = &r->coll;
    printf("\n== collectives\n");
    if (c->run)
        printf("allreduce %zu MiB: busbw %.4f GB/s (algbw %.4f); 8 B allreduce %.1f us; %s%s%s\n",
               c->bytes >> 20, c->busbw, c->algbw, c->lat_p50, gwc_verdict_name(c->verdict),
               c->cause[0] ? ": " : "", c->cause);
    else
        printf("not run%s%s\n", c->cause[0] ? ": " : "", c->cause);
    if (r->left_out[0])
        printf("\nleft out: %s\n", r->left_out);
    if (r->notes[0])
        printf("\nnotes: %s\n", r->notes);
    if (r->failed)
        printf("\njob failed: %s\n", r->failure);
    int hc[5], lc[5];
    counts(r, hc, lc);
    printf("\ngradwire check: %s: hosts %d PASS %d WARN %d FAIL %d NOT_JUDGED %d SKIP; links %d "
           "PASS %d WARN %d FAIL %d NOT_JUDGED %d SKIP; %.1f s\n",
           gwc_verdict_name(r->verdict), hc[GWC_PASS], hc[GWC_WARN], hc[GWC_FAIL],
           hc[GWC_NOT_JUDGED], hc[GWC_SKIP], lc[GWC_PASS], lc[GWC_WARN], lc[GWC_FAIL],
           lc[GWC_NOT_JUDGED], lc[GWC_SKIP], r->elapsed_s);
    if (r->verdict == GWC_NOT_JUDGED)
        printf("gradwire check: NOT_JUDGED (exit %d): nothing FAILed, but not everything could be "
               "judged; see the causes above\n",
               GWC_EXIT_NOT_JUDGED);
    fflush(stdout);
}

static void json_fig(gw_kit_json_t *j, const char *key, const gwc_fig_t *f)
{
    gw_kit_json_object(j, key, NULL);
    gw_kit_json_num(j, "lat_p50_us", f->lat_p50);
    gw_kit_json_num(j, "lat_p99_us", f->lat_p99);
    gw_kit_json_num(j, "bw_ab_GBps", f->bw_ab);
    gw_kit_json_num(j, "bw_ba_GBps", f->bw_ba);
    gw_kit_json_int(j, "wrong_bytes", f->wrong);
    gw_kit_json_close(j, NULL);
}

static void json_judged(gw_kit_json_t *j, const gwc_node_judged_t *v)
{
    gw_kit_json_num_or_null(j, "reference", !isnan(v->ref), v->ref);
    gw_kit_json_str(j, "verdict", gwc_verdict_name(v->verdict));
    gw_kit_json_str(j, "cause", v->cause[0] ? v->cause : NULL);
}

/* "node": {"run", "left_out", thresholds, "hosts": [per host: memory, gemm,
 * nic, gpu, each with its figure, reference, verdict and cause]}. */
static void json_node(gw_kit_json_t *j, const gwc_run_t *r)
{
    const gwc_node_t *n = &r->node;
    const gwc_opts_t *o = r->o;
    gw_kit_json_object(j, "node", "\n ");
    gw_kit_json_bool(j, "run", n->run);
    gw_kit_json_str(j, "left_out", !o->node ? "--no-node" : NULL);
    gw_kit_json_uint(j, "node_bytes", o->node_bytes);
    gw_kit_json_int(j, "gemm_n", o->gemm_n);
    gw_kit_json_num(j, "node_time_s", o->node_s);
    gw_kit_json_num(j, "node_fraction", o->node_fraction);
    gw_kit_json_array(j, "hosts", "\n  ");
    for (int h = 0; n->run && h < r->nhosts; h++) {
        const gwc_node_fig_t *f = &n->fig[h];
        gw_kit_json_object(j, NULL, NULL);
        gw_kit_json_int(j, "index", h);
        gw_kit_json_str(j, "name", r->hosts[h].name);
        gw_kit_json_int(j, "rank", r->hosts[h].first_rank);
        gw_kit_json_int(j, "threads", f->threads);
        gw_kit_json_num(j, "seconds", f->seconds);
        gw_kit_json_bool(j, "measured_twice", f->retested);
        static const char *const keys[2] = {"memory", "gemm"};
        static const char *const units[2] = {"triad_GBps", "sgemm_GFLOPps"};
        for (int k = 0; k < 2; k++) {
            gw_kit_json_object(j, keys[k], NULL);
            gw_kit_json_num_or_null(j, units[k], !isnan(f->v[k]), f->v[k]);
            json_judged(j, &n->judged[h][k]);
            gw_kit_json_close(j, NULL);
        }
        const gwc_nic_t *nic = &n->nic[h];
        gw_kit_json_object(j, "nic", NULL);
        gw_kit_json_num_or_null(j, "line_rate_GBps", !isnan(nic->line_GBps), nic->line_GBps);
        gw_kit_json_num_or_null(j, "best_link_GBps", !isnan(nic->best_GBps), nic->best_GBps);
        gw_kit_json_num_or_null(j, "line_rate_pct", !isnan(nic->pct), nic->pct);
        json_judged(j, &nic->j);
        gw_kit_json_close(j, NULL);
        gw_kit_json_object(j, "gpu", NULL);
        gw_kit_json_bool(j, "present", f->gpu);
        gw_kit_json_str(j, f->gpu ? "device" : "why_not", f->gpu_name);
        static const char *const gkeys[3] = {"d2d_GBps", "h2d_GBps", "d2h_GBps"};
        for (int k = 0; k < 3; k++) {
            double v = f->v[GWC_NODE_GPU_D2D + k];
            gw_kit_json_num_or_null(j, gkeys[k], !isnan(v), v);
        }
        gw_kit_json_null(j, "gemm_GFLOPps"); /* not measured yet: needs cuBLAS */
        json_judged(j, &n->gpu[h]);
        gw_kit_json_close(j, NULL);
        gw_kit_json_close(j, NULL);
    }
    gw_kit_json_close(j, "\n ");
    gw_kit_json_close(j, NULL);
}

int gwc_write_json(const gwc_run_t *r, const char *path)
{
    FILE *f = gw_kit_fopen_private(path);
    if (!f) {
        perror(path);
        return -1;
    }
    const gwc_opts_t *o = r->o;
    gw_kit_json_t j;
    gw_kit_json_start(&j, f, 6);
    gw_kit_json_object(&j, NULL, "\n ");
    gw_kit_json_str(&j, "tool", "gradwire-check");
    gw_kit_json_str(&j, "gradwire_version", gw_version());
    gw_kit_json_str(&j, "verdict", gwc_verdict_name(r->verdict));
    gw_kit_json_int(&j, "exit_status", gwc_exit_status(r));
    gw_kit_json_int(&j, "ranks", r->size);
    gw_kit_json_str(&j, "transport", gw_comm_transport(r->comm));
    gw_kit_json_num(&j, "elapsed_s", r->elapsed_s);
    gw_kit_json_str(&j, "reference",
                    r->have_base       ? "baseline"
                    : o->base_rate > 0 ? "rate"
                                       : "cluster");
    gw_kit_json_num_or_null(&j, "baseline_rate_GBps", o->base_rate > 0, o->base_rate);
    gw_kit_json_str(&j, "notes", r->notes[0] ? r->notes : NULL);
    gw_kit_json_object(&j, "thresholds", NULL);
    gw_kit_json_num(&j, "lat_factor", o->lat_factor);
    gw_kit_json_num(&j, "tail_factor", o->tail_factor);
    gw_kit_json_num(&j, "tail_floor_us", o->tail_floor_us);
    gw_kit_json_num(&j, "bw_fraction", o->bw_fraction);
    gw_kit_json_num(&j, "host_fraction", o->host_fraction);
    gw_kit_json_num(&j, "line_fraction", o->line_fraction);
    gw_kit_json_num(&j, "coll_fraction", o->coll_fraction);
    gw_kit_json_bool(&j, "judge_oversubscribed", o->judge_oversubscribed);
    gw_kit_json_close(&j, NULL);
    gw_kit_json_object(&j, "plan", NULL);
    gw_kit_json_int(&j, "lat_iters", r->lat_iters);
    gw_kit_json_int(&j, "bw_iters", r->bw_iters);
    gw_kit_json_uint(&j, "bw_bytes", o->bw_bytes);
    gw_kit_json_int(&j, "rounds", r->rounds_run);
    gw_kit_json_int(&j, "rounds_planned", r->rounds_planned);
    gw_kit_json_bool(&j, "retest", r->do_retest);
    gw_kit_json_bool(&j, "collectives", r->do_coll);
    gw_kit_json_str(&j, "left_out", r->left_out[0] ? r->left_out : NULL);
    gw_kit_json_close(&j, NULL);
    gw_kit_json_object(&j, "reference_cross_host", NULL);
    gw_kit_json_num(&j, "lat_p50_us", r->ref_cross.lat_p50);
    gw_kit_json_num(&j, "lat_p99_us", r->ref_cross.lat_p99);
    gw_kit_json_num(&j, "bw_GBps", r->ref_cross.bw);
    gw_kit_json_close(&j, NULL);
    if (r->failed) {
        gw_kit_json_object(&j, "failure", NULL);
        gw_kit_json_int_or_null(&j, "rank", r->culprit >= 0, r->culprit);
        gw_kit_json_str(&j, "host", r->culprit >= 0 ? gwc_host_name(r, r->culprit) : NULL);
        gw_kit_json_str(&j, "message", r->failure);
        gw_kit_json_close(&j, NULL);
    } else {
        gw_kit_json_null(&j, "failure");
    }
    gw_kit_json_array(&j, "hosts", "\n  ");
    for (int h = 0; h < r->nhosts; h++) {
        const gwc_host_t *host = &r->hosts[h];
        const gwc_rank_info_t *ri = &r->info[host->first_rank];
        gw_kit_json_object(&j, NULL, NULL);
        gw_kit_json_int(&j, "index", h);
        gw_kit_json_str(&j, "name", host->name);
        gw_kit_json_str(&j, "hostname", ri->hostname);
        gw_kit_json_str(&j, "address", ri->addr);
        gw_kit_json_str(&j, "interface", ri->ifname);
        gw_kit_json_int_or_null(&j, "mtu", ri->mtu >= 0, ri->mtu);
        gw_kit_json_str(&j, "link", ri->link_up == 1 ? "up" : ri->link_up == 0 ? "down" : NULL);
        gw_kit_json_str(&j, "operstate", ri->operstate[0] ? ri->operstate : NULL);
        gw_kit_json_int_or_null(&j, "speed_mbps", ri->speed_mbps > 0, ri->speed_mbps);
        gw_kit_json_bool(&j, "line_rate_known", ri->physical && ri->speed_mbps > 0);
        gw_kit_json_int_or_null(&j, "cpus_online", ri->cpus_online > 0, ri->cpus_online);
        gw_kit_json_int(&j, "machine_ranks", host->machine_ranks);
        gw_kit_json_int(&j, "machine_cpus", host->machine_cpus);
        gw_kit_json_bool(&j, "oversubscribed", host->oversubscribed);
        gw_kit_json_str(&j, "rdma", ri->rdma[0] ? ri->rdma : NULL);
        gw_kit_json_str(&j, "transport", ri->transport);
        gw_kit_json_array(&j, "ranks", NULL);
        for (int q = 0; q < r->size; q++)
            if (r->host_of[q] == h)
                gw_kit_json_int(&j, NULL, q);
        gw_kit_json_close(&j, NULL);
        gw_kit_json_int(&j, "bad_links", host->bad_links);
        gw_kit_json_int(&j, "links", host->links);
        gw_kit_json_str(&j, "verdict", gwc_verdict_name(host->verdict));
        gw_kit_json_str(&j, "cause", host->cause[0] ? host->cause : NULL);
        gw_kit_json_close(&j, NULL);
    }
    gw_kit_json_close(&j, "\n ");
    gw_kit_json_array(&j, "links", "\n  ");
    for (int i = 0; i < r->nlinks; i++) {
        const gwc_link_t *l = &r->links[i];
        char tr[96];
        gw_kit_json_object(&j, NULL, NULL);
        for (int e = 0; e < 2; e++) {
            int q = e ? l->b : l->a;
            gw_kit_json_object(&j, e ? "b" : "a", NULL);
            gw_kit_json_int(&j, "rank", q);
            gw_kit_json_str(&j, "host", gwc_host_name(r, q));
            gw_kit_json_str(&j, "address", r->info[q].addr);
            gw_kit_json_close(&j, NULL);
        }
        gwc_transport_to(r, l->a, l->b, tr, sizeof(tr));
        gw_kit_json_str(&j, "transport", tr);
        gw_kit_json_bool(&j, "same_host", l->same_host);
        gw_kit_json_bool(&j, "measured", l->measured);
        if (l->measured)
            json_fig(&j, "round", &l->fig);
        else
            gw_kit_json_null(&j, "round");
        if (l->retested)
            json_fig(&j, "alone", &l->retest);
        else
            gw_kit_json_null(&j, "alone");
        gwc_ref_t ref = gwc_ref_for(r, l);
        gw_kit_json_num_or_null(&j, "reference_bw_GBps", l->measured && !isnan(ref.bw), ref.bw);
        gw_kit_json_str(&j, "reference_bw_is",
                        !l->measured || isnan(ref.bw) ? NULL
                        : ref.bw_what                 ? ref.bw_what
                        : gwc_links_have_base(r)      ? "baseline"
                                                      : "cluster");
        double pct = gwc_link_line_pct(r, l);
        gw_kit_json_num_or_null(&j, "line_rate_pct", !isnan(pct), pct);
        gw_kit_json_str(&j, "verdict", gwc_verdict_name(l->verdict));
        gw_kit_json_str(&j, "cause", l->cause[0] ? l->cause : NULL);
        gw_kit_json_str(&j, "attributed_to",
                        l->host_blamed >= 0 ? r->hosts[l->host_blamed].name : NULL);
        gw_kit_json_close(&j, NULL);
    }
    gw_kit_json_close(&j, "\n ");
    const gwc_coll_t *c = &r->coll;
    gw_kit_json_object(&j, "allreduce", NULL);
    gw_kit_json_bool(&j, "run", c->run);
    gw_kit_json_uint(&j, "bytes", c->bytes);
    gw_kit_json_num_or_null(&j, "busbw_GBps", c->run, c->busbw);
    gw_kit_json_num_or_null(&j, "algbw_GBps", c->run, c->algbw);
    gw_kit_json_num_or_null(&j, "lat_8B_us", c->run, c->lat_p50);
    int ba, bb;
    double bound = gwc_coll_bound(r, &ba, &bb);
    gw_kit_json_num_or_null(&j, "busbw_bound_GBps", !isnan(bound), bound);
    gw_kit_json_array(&j, "wrong_from_rank", NULL);
    for (int q = 0; c->run && q < r->size; q++)
        gw_kit_json_int(&j, NULL, c->wrong_from[q]);
    gw_kit_json_close(&j, NULL);
    gw_kit_json_str(&j, "verdict", gwc_verdict_name(c->verdict));
    gw_kit_json_str(&j, "cause", c->cause[0] ? c->cause : NULL);
    gw_kit_json_close(&j, NULL);
    json_node(&j, r);
    gw_kit_json_close(&j, "\n");
    fputc('\n', f);
    if (fclose(f) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}
