/*
 * check_ci.c - the reports for machines and for pages: JUnit XML (a
 * testcase per host, per link and one for the allreduce; FAIL is a
 * <failure>, SKIP is <skipped>, WARN passes with its cause in
 * <system-out>), Markdown (the tables of the terminal report) and a PNG
 * heatmap of the bandwidth matrix drawn by gnuplot (sender rank by
 * receiver rank, GB/s), which is looked for on PATH and reported missing
 * with a clear message, the rest of the check going on.
 *
 * The node checks add a suite "node" with four testcases per host
 * (memory, gemm, nic, gpu; a host without a GPU SKIPs its gpu case with the
 * reason) and a Markdown table; links show their bandwidth as a percentage
 * of the line rate where it is known. With --no-node the suite and the
 * table are left out.
 *
 * Every file is written 0600 (gw_kit_fopen_private); the heatmap's file is
 * created so before gnuplot writes into it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static void xml_str(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t')
                fputc(*s, f);
        }
    }
}

static void testcase(FILE *f, const char *cls, const char *name, gwc_verdict_t v, const char *cause)
{
    fputs("    <testcase classname=\"", f);
    xml_str(f, cls);
    fputs("\" name=\"", f);
    xml_str(f, name);
    fputs("\">", f);
    if (v == GWC_FAIL) {
        fputs("<failure message=\"", f);
        xml_str(f, cause && *cause ? cause : "FAIL");
        fputs("\"/>", f);
    } else if (v == GWC_SKIP) {
        fputs("<skipped message=\"", f);
        xml_str(f, cause && *cause ? cause : "not measured");
        fputs("\"/>", f);
    } else if (v == GWC_NOT_JUDGED) {
        fputs("<skipped message=\"NOT_JUDGED: ", f);
        xml_str(f, cause);
        fputs("\"/>", f);
    } else if (v == GWC_WARN) {
        fputs("<system-out>WARN: ", f);
        xml_str(f, cause);
        fputs("</system-out>", f);
    }
    fputs("</testcase>\n", f);
}

static void suite_head(FILE *f, const char *name, int tests, int failures, int skipped)
{
    fprintf(f,
            "  <testsuite name=\"%s\" tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"%d\">\n",
            name, tests, failures, skipped);
}

/* The node's judged checks of host h, in the reports' order. */
static void node_checks(const gwc_run_t *r, int h, const gwc_node_judged_t *js[GWC_NODE_CHECKS])
{
    const gwc_node_t *n = &r->node;
    js[0] = &n->judged[h][GWC_NODE_MEM];
    js[1] = &n->judged[h][GWC_NODE_GEMM];
    js[2] = &n->nic[h].j;
    js[3] = &n->gpu[h];
}

static const char *const node_check_name[GWC_NODE_CHECKS] = {"memory", "gemm", "nic", "gpu"};

int gwc_write_junit(const gwc_run_t *r, const char *path)
{
    FILE *f = gw_kit_fopen_private(path);
    if (!f) {
        perror(path);
        return -1;
    }
    int hf = 0, hs = 0, lf = 0, ls = 0;
    for (int h = 0; h < r->nhosts; h++) {
        hf += r->hosts[h].verdict == GWC_FAIL;
        hs += r->hosts[h].verdict == GWC_SKIP || r->hosts[h].verdict == GWC_NOT_JUDGED;
    }
    for (int i = 0; i < r->nlinks; i++) {
        lf += r->links[i].verdict == GWC_FAIL;
        ls += r->links[i].verdict == GWC_SKIP || r->links[i].verdict == GWC_NOT_JUDGED;
    }
    int cf = r->coll.verdict == GWC_FAIL,
        cs = r->coll.verdict == GWC_SKIP || r->coll.verdict == GWC_NOT_JUDGED;
    int nn = r->node.run ? r->nhosts * GWC_NODE_CHECKS : 0, nf = 0, ns = 0;
    for (int h = 0; r->node.run && h < r->nhosts; h++) {
        const gwc_node_judged_t *js[GWC_NODE_CHECKS];
        node_checks(r, h, js);
        for (int k = 0; k < GWC_NODE_CHECKS; k++) {
            nf += js[k]->verdict == GWC_FAIL;
            ns += js[k]->verdict == GWC_SKIP || js[k]->verdict == GWC_NOT_JUDGED;
        }
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f,
            "<testsuites name=\"gradwire-check\" tests=\"%d\" failures=\"%d\" errors=\"0\" "
            "skipped=\"%d\" time=\"%.3f\">\n",
            r->nhosts + r->nlinks + 1 + nn, hf + lf + cf + nf, hs + ls + cs + ns, r->elapsed_s);
    suite_head(f, "hosts", r->nhosts, hf, hs);
    for (int h = 0; h < r->nhosts; h++) {
        char name[128];
        snprintf(name, sizeof(name), "host %d %s", h, r->hosts[h].name);
        testcase(f, "gradwire-check.host", name, r->hosts[h].verdict, r->hosts[h].cause);
    }
    fputs("  </testsuite>\n", f);
    suite_head(f, "links", r->nlinks, lf, ls);
    for (int i = 0; i < r->nlinks; i++) {
        const gwc_link_t *l = &r->links[i];
        char name[256];
        snprintf(name, sizeof(name), "link %d-%d %s - %s", l->a, l->b, gwc_host_name(r, l->a),
                 gwc_host_name(r, l->b));
        testcase(f, "gradwire-check.link", name, l->verdict, l->cause);
    }
    fputs("  </testsuite>\n", f);
    suite_head(f, "collectives", 1, cf, cs);
    testcase(f, "gradwire-check.collective", "allreduce", r->coll.verdict, r->coll.cause);
    fputs("  </testsuite>\n", f);
    if (r->node.run) {
        suite_head(f, "node", nn, nf, ns);
        for (int h = 0; h < r->nhosts; h++) {
            const gwc_node_judged_t *js[GWC_NODE_CHECKS];
            node_checks(r, h, js);
            for (int k = 0; k < GWC_NODE_CHECKS; k++) {
                char name[160];
                snprintf(name, sizeof(name), "%s host %d %s", node_check_name[k], h,
                         r->hosts[h].name);
                testcase(f, "gradwire-check.node", name, js[k]->verdict, js[k]->cause);
            }
        }
        fputs("  </testsuite>\n", f);
    }
    fputs("</testsuites>\n", f);
    if (fclose(f) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

int gwc_write_markdown(const gwc_run_t *r, const char *path)
{
    FILE *f = gw_kit_fopen_private(path);
    if (!f) {
        perror(path);
        return -1;
    }
    fprintf(f, "# gradwire check: %s\n\n%d ranks on %d hosts over %s, %.1f s; reference: %s\n\n",
            gwc_verdict_name(r->verdict), r->size, r->nhosts, gw_comm_transport(r->comm),
            r->elapsed_s,
            r->have_base          ? "baseline"
            : r->o->base_rate > 0 ? "the --baseline rate"
                                  : "the cluster's own medians");
    if (r->notes[0])
        fprintf(f, "Notes: %s\n\n", r->notes);
    if (r->failed)
        fprintf(f, "**Job failed:** %s\n\n", r->failure);
    if (r->left_out[0])
        fprintf(f, "**Left out:** %s\n\n", r->left_out);
    fprintf(f, "## Hosts\n\n| host | name | address | interface | MTU | link | verdict | cause |\n"
               "|---|---|---|---|---|---|---|---|\n");
    for (int h = 0; h < r->nhosts; h++) {
        const gwc_rank_info_t *ri = &r->info[r->hosts[h].first_rank];
        fprintf(f, "| %d | %s | %s | %s | %d | %s | %s | %s |\n", h, r->hosts[h].name, ri->addr,
                ri->ifname, ri->mtu,
                ri->link_up == 1   ? "up"
                : ri->link_up == 0 ? "down"
                                   : "?",
                gwc_verdict_name(r->hosts[h].verdict), r->hosts[h].cause);
    }
    if (r->node.run) {
        fprintf(f, "\n## Node\n\n| host | name | check | figure | verdict | cause |\n"
                   "|---|---|---|---|---|---|\n");
        for (int h = 0; h < r->nhosts; h++) {
            const gwc_node_fig_t *nf = &r->node.fig[h];
            const gwc_node_judged_t *js[GWC_NODE_CHECKS];
            node_checks(r, h, js);
            double figs[GWC_NODE_CHECKS] = {nf->v[GWC_NODE_MEM], nf->v[GWC_NODE_GEMM],
                                            r->node.nic[h].pct, nf->v[GWC_NODE_GPU_D2D]};
            static const char *const units[GWC_NODE_CHECKS] = {"GB/s", "GFLOP/s", "% of line rate",
                                                               "GB/s d2d"};
            for (int k = 0; k < GWC_NODE_CHECKS; k++) {
                char fig[48] = "-";
                if (!isnan(figs[k]))
                    snprintf(fig, sizeof(fig), "%.4g %s", figs[k], units[k]);
                fprintf(f, "| %d | %s | %s | %s | %s | %s |\n", h, r->hosts[h].name,
                        node_check_name[k], fig, gwc_verdict_name(js[k]->verdict), js[k]->cause);
            }
        }
    } else if (!r->o->node) {
        fprintf(f, "\n## Node\n\nleft out (--no-node)\n");
    }
    fprintf(f, "\n## Links\n\n| a | b | p50 (us) | p99 (us) | a->b (GB/s) | b->a (GB/s) | "
               "line rate | verdict | cause |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < r->nlinks; i++) {
        const gwc_link_t *l = &r->links[i];
        const gwc_fig_t *g = l->retested ? &l->retest : &l->fig;
        double pct = gwc_link_line_pct(r, l);
        char line[32] = "-";
        if (!isnan(pct))
            snprintf(line, sizeof(line), "%.0f%%", pct);
        fprintf(f, "| %d (%s) | %d (%s) | %.1f | %.1f | %.4f | %.4f | %s | %s | %s |\n", l->a,
                gwc_host_name(r, l->a), l->b, gwc_host_name(r, l->b), g->lat_p50, g->lat_p99,
                g->bw_ab, g->bw_ba, line, gwc_verdict_name(l->verdict), l->cause);
    }
    const gwc_coll_t *c = &r->coll;
    fprintf(f, "\n## Collectives\n\n");
    if (c->run)
        fprintf(f, "allreduce of %zu bytes: busbw %.4f GB/s, 8-byte latency %.1f us: %s %s\n",
                c->bytes, c->busbw, c->lat_p50, gwc_verdict_name(c->verdict), c->cause);
    else
        fprintf(f, "not run\n");
    if (fclose(f) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

int gwc_write_heatmap(const gwc_run_t *r, const char *path)
{
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fprintf(stderr,
                "gradwire-check: --heatmap %s: gnuplot is not installed (Debian package "
                "gnuplot-nox); no heatmap written\n",
                path);
        return -1;
    }
    if (strchr(path, '\'') || strchr(path, '\n')) {
        fprintf(stderr,
                "gradwire-check: --heatmap: a path with a quote or newline cannot be "
                "given to gnuplot: %s\n",
                path);
        return -1;
    }
    FILE *out = gw_kit_fopen_private(path);
    if (!out) {
        perror(path);
        return -1;
    }
    fclose(out);
    char data[] = "/tmp/gradwire-check-heatmap-XXXXXX";
    int fd = mkstemp(data);
    FILE *d = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!d) {
        perror("gradwire-check: heatmap data file");
        return -1;
    }
    int n = r->size;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            double v = NAN;
            if (i != j) {
                const gwc_link_t *l = &r->links[gwc_link_index(n, i, j)];
                const gwc_fig_t *g = l->retested ? &l->retest : &l->fig;
                if (l->measured)
                    v = i < j ? g->bw_ab : g->bw_ba;
            }
            if (isnan(v))
                fprintf(d, "%sNaN", j ? " " : "");
            else
                fprintf(d, "%s%.6g", j ? " " : "", v);
        }
        fputc('\n', d);
    }
    fclose(d);
    int rc = -1;
    /* gnuplot's stderr goes to a file, shown only when it fails (it warns
     * about the empty diagonal otherwise). */
    char cmd[128], errpath[64];
    snprintf(errpath, sizeof(errpath), "%s.err", data);
    snprintf(cmd, sizeof(cmd), "gnuplot 2>'%s'", errpath);
    FILE *g = popen(cmd, "w");
    if (g) {
        fprintf(g,
                "set terminal pngcairo size 900,800\nset output '%s'\n"
                "set xrange [-0.5:%d.5]\nset yrange [%d.5:-0.5]\n"
                "set title 'gradwire check: bandwidth %zu KiB, GB/s (sender by receiver)'\n"
                "set xlabel 'receiver rank'\nset ylabel 'sender rank'\n"
                "set palette defined (0 'red', 0.5 'yellow', 1 'forest-green')\n"
                "set xtics 1\nset ytics 1\nset cbrange [0:*]\nset datafile missing 'NaN'\n"
                "plot '%s' matrix with image notitle\n",
                path, n - 1, n - 1, r->o->bw_bytes >> 10, data);
        rc = pclose(g) == 0 ? 0 : -1;
    }
    unlink(data);
    if (rc != 0) {
        fprintf(stderr, "gradwire-check: gnuplot failed to draw %s:\n", path);
        FILE *e = fopen(errpath, "r");
        char line[256];
        while (e && fgets(line, sizeof(line), e))
            fputs(line, stderr);
        if (e)
            fclose(e);
    }
    unlink(errpath);
    return rc;
}
