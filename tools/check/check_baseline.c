/*
 * check_baseline.c - the baseline file: the figures of a run on a healthy
 * cluster (--save-baseline FILE), against which a later run is judged
 * (--baseline FILE) instead of against its own medians, so that a cluster
 * that became uniformly slower is caught too.
 *
 * The file is text, one record a line, fields separated by spaces:
 *
 *   gradwire-check-baseline 2
 *   ranks N
 *   allreduce BUSBW_GBPS LAT_US
 *   link A B HOST_A HOST_B LAT_P50_US LAT_P99_US BW_GBPS
 *   ...
 *   node HOST TRIAD_GBPS GEMM_GFLOPS GPU_D2D_GBPS GPU_H2D_GBPS GPU_D2H_GBPS
 *   ...
 *
 * (nan where a figure was not measured). Version 1, without node records,
 * is read as well. A node record holds a host's node checks (memory
 * bandwidth, GEMM, GPU copies; check_node.c); a later run judges each
 * host's figure against its own host's record, matched by name, or
 * against the upper median of the records for a host the baseline lacks
 * (check_node_judge.c), so that one host alone is judged, and a cluster
 * whose every node became slower is caught. A baseline of one host has
 * node records and no links; links between hosts are then judged as
 * without a baseline.
 *
 * A link of the later run is matched by its ranks and the names of their
 * hosts (so a baseline from another placement is not applied to the wrong
 * link); one without a match is judged against the baseline's own medians.
 * The figures saved are those the run judged the link by (alone, when it
 * was retested) and the bandwidth is the lower of the two directions.
 * Lines starting with '#' are comments.
 *
 * A rate instead of a file (--baseline 12.5GB/s, --baseline 100Gbit/s)
 * says what every link between hosts should carry: each is judged against
 * it at --bw-fraction, which judges two hosts whose NICs' line rate is
 * unknown (virtual interfaces), and a cluster uniformly slower than it.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, size_t n)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Also the node checks' reference (check_node_judge.c), from the hosts'
 * figures, and from a baseline's node records (below). */
double gwc_upper_median(const double *x, size_t n, size_t *measured)
{
    double *v = calloc(n > 0 ? n : 1, sizeof(double));
    size_t k = 0;
    for (size_t i = 0; v && i < n; i++)
        if (!isnan(x[i]))
            v[k++] = x[i];
    double ref = NAN;
    if (k > 0) {
        qsort(v, k, sizeof(double), cmp_double);
        ref = v[k / 2]; /* the larger middle one of an even count */
    }
    free(v);
    *measured = k;
    return ref;
}

int gwc_baseline_save(const gwc_run_t *r, const char *path)
{
    /* A baseline needs a link or a node to judge a later run by: one host
     * checked with --no-node has neither, and its file could not be read. */
    int records = 0;
    for (int i = 0; i < r->nlinks; i++)
        records += r->links[i].measured;
    for (int h = 0; r->node.run && r->node.fig && h < r->nhosts; h++)
        records += r->node.fig[h].measured;
    if (records == 0) {
        fprintf(stderr,
                "gradwire-check: %s: no baseline saved: this run measured no link between ranks "
                "and no node (one rank with --no-node)\n",
                path);
        /* The check's set-up made the file, empty, to fail early if it
         * could not be written: it goes, rather than stay as a file that
         * is no baseline. */
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
            unlink(path);
        return -1;
    }
    FILE *f = gw_kit_fopen_private(path);
    if (!f) {
        perror(path);
        return -1;
    }
    fprintf(f, "gradwire-check-baseline 2\n# saved by gradwire-check %s over %s\nranks %d\n",
            gw_version(), r->comm ? gw_comm_transport(r->comm) : "-", r->size);
    fprintf(f, "allreduce %.6g %.6g\n", r->coll.run ? r->coll.busbw : NAN,
            r->coll.run ? r->coll.lat_p50 : NAN);
    for (int i = 0; i < r->nlinks; i++) {
        const gwc_link_t *l = &r->links[i];
        if (!l->measured)
            continue;
        const gwc_fig_t *g = l->retested ? &l->retest : &l->fig;
        double bw = g->bw_ab < g->bw_ba ? g->bw_ab : g->bw_ba;
        fprintf(f, "link %d %d %s %s %.6g %.6g %.6g\n", l->a, l->b, gwc_host_name(r, l->a),
                gwc_host_name(r, l->b), g->lat_p50, g->lat_p99, bw);
    }
    for (int h = 0; r->node.run && r->node.fig && h < r->nhosts; h++) {
        const gwc_node_fig_t *n = &r->node.fig[h];
        if (!n->measured)
            continue;
        fprintf(f, "node %s", r->hosts[h].name);
        for (int k = 0; k < GWC_NODE_FIGURES; k++)
            fprintf(f, " %.6g", n->v[k]);
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

/* A "node HOST F1 .. F5" record into b; 0, or -1 when malformed (or out
 * of memory). A figure is a number or nan; a host given twice keeps its
 * first record. */
static int add_node(gwc_baseline_t *b, const char *line, size_t *capn)
{
    gwc_base_node_t n;
    char v[GWC_NODE_FIGURES][32], extra[2];
    if (sscanf(line, "node %79s %31s %31s %31s %31s %31s %1s", n.host, v[0], v[1], v[2], v[3], v[4],
               extra) != GWC_NODE_FIGURES + 1)
        return -1;
    for (int k = 0; k < GWC_NODE_FIGURES; k++) {
        char *end;
        n.v[k] = strtod(v[k], &end);
        if (*end != '\0' || (!isnan(n.v[k]) && (n.v[k] < 0 || isinf(n.v[k]))))
            return -1;
    }
    for (size_t i = 0; i < b->nnodes; i++)
        if (strcmp(b->nodes[i].host, n.host) == 0)
            return 0;
    if (b->nnodes == *capn) {
        size_t grow = *capn ? 2 * *capn : 16;
        gwc_base_node_t *grown = realloc(b->nodes, grow * sizeof(*grown));
        if (!grown)
            return -1;
        b->nodes = grown;
        *capn = grow;
    }
    b->nodes[b->nnodes++] = n;
    return 0;
}

int gwc_baseline_load(const char *path, gwc_baseline_t *b, char *err, size_t cap)
{
    memset(b, 0, sizeof(*b));
    b->busbw = b->coll_lat = NAN;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, cap, "cannot open the baseline %s: %s", path, strerror(errno));
        return -1;
    }
    char line[512];
    int lineno = 0, header = 0;
    size_t capl = 0, capn = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        int ver, ranks;
        if (!header) {
            if (sscanf(line, "gradwire-check-baseline %d", &ver) != 1 || ver < 1 || ver > 2) {
                snprintf(err, cap, "%s is not a gradwire-check baseline (version 1 or 2)", path);
                goto fail;
            }
            header = 1;
            continue;
        }
        if (sscanf(line, "ranks %d", &ranks) == 1)
            continue;
        if (strncmp(line, "allreduce ", 10) == 0) {
            char s1[32], s2[32];
            if (sscanf(line, "allreduce %31s %31s", s1, s2) != 2)
                goto bad;
            b->busbw = strtod(s1, NULL);
            b->coll_lat = strtod(s2, NULL);
            continue;
        }
        if (strncmp(line, "node ", 5) == 0) {
            if (add_node(b, line, &capn) != 0)
                goto bad;
            continue;
        }
        gwc_base_link_t l;
        char p50[32], p99[32], bw[32];
        if (sscanf(line, "link %d %d %79s %79s %31s %31s %31s", &l.a, &l.b, l.ha, l.hb, p50, p99,
                   bw) != 7)
            goto bad;
        l.lat_p50 = strtod(p50, NULL);
        l.lat_p99 = strtod(p99, NULL);
        l.bw = strtod(bw, NULL);
        if (b->nlinks == capl) {
            capl = capl ? 2 * capl : 64;
            gwc_base_link_t *grown = realloc(b->links, capl * sizeof(*grown));
            if (!grown) {
                snprintf(err, cap, "out of memory reading %s", path);
                goto fail;
            }
            b->links = grown;
        }
        b->links[b->nlinks++] = l;
    }
    fclose(f);
    if (!header || (b->nlinks == 0 && b->nnodes == 0)) {
        snprintf(err, cap, "the baseline %s holds no links and no node records", path);
        gwc_baseline_free(b);
        return -1;
    }
    b->ref.lat_p50 = b->ref.lat_p99 = b->ref.bw = NAN;
    if (b->nlinks == 0)
        return 0;
    double *v = malloc(b->nlinks * sizeof(double));
    if (!v) {
        snprintf(err, cap, "out of memory reading %s", path);
        gwc_baseline_free(b);
        return -1;
    }
    for (size_t i = 0; i < b->nlinks; i++)
        v[i] = b->links[i].bw;
    b->ref.bw = median_of(v, b->nlinks);
    for (size_t i = 0; i < b->nlinks; i++)
        v[i] = b->links[i].lat_p50;
    b->ref.lat_p50 = median_of(v, b->nlinks);
    for (size_t i = 0; i < b->nlinks; i++)
        v[i] = b->links[i].lat_p99;
    b->ref.lat_p99 = median_of(v, b->nlinks);
    free(v);
    return 0;
bad:
    snprintf(err, cap, "%s:%d: not a baseline record: %.60s", path, lineno, line);
fail:
    fclose(f);
    gwc_baseline_free(b);
    return -1;
}

int gwc_parse_rate(const char *arg, double *gbps)
{
    static const struct {
        const char *suffix;
        double to_gbps;
    } units[] = {{"GB/s", 1}, {"Gbit/s", 1 / 8.0}, {"Gb/s", 1 / 8.0}};
    size_t len = strlen(arg);
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
        size_t sl = strlen(units[u].suffix);
        if (len <= sl || strcmp(arg + len - sl, units[u].suffix) != 0)
            continue;
        char num[64];
        double v;
        if (len - sl >= sizeof(num))
            return -1;
        memcpy(num, arg, len - sl);
        num[len - sl] = '\0';
        if (gw_kit_parse_double(num, 1e-6, 1e6, &v) != 0)
            return -1;
        *gbps = v * units[u].to_gbps;
        return 1;
    }
    return 0;
}

const gwc_base_link_t *gwc_baseline_find(const gwc_run_t *r, const gwc_link_t *l)
{
    for (size_t i = 0; i < r->base.nlinks; i++) {
        const gwc_base_link_t *b = &r->base.links[i];
        if (b->a == l->a && b->b == l->b && strcmp(b->ha, gwc_host_name(r, l->a)) == 0 &&
            strcmp(b->hb, gwc_host_name(r, l->b)) == 0)
            return b;
    }
    return NULL;
}

const gwc_base_node_t *gwc_baseline_find_node(const gwc_run_t *r, int h)
{
    for (size_t i = 0; r->have_base && i < r->base.nnodes; i++)
        if (strcmp(r->base.nodes[i].host, r->hosts[h].name) == 0)
            return &r->base.nodes[i];
    return NULL;
}

double gwc_baseline_node_ref(const gwc_baseline_t *b, int k)
{
    /* The upper median, as the hosts' own reference (check_node_judge.c). */
    double *v = malloc((b->nnodes ? b->nnodes : 1) * sizeof(double));
    if (!v)
        return NAN;
    for (size_t i = 0; i < b->nnodes; i++)
        v[i] = b->nodes[i].v[k];
    size_t measured;
    double ref = gwc_upper_median(v, b->nnodes, &measured);
    free(v);
    return ref;
}

void gwc_baseline_free(gwc_baseline_t *b)
{
    free(b->links);
    b->links = NULL;
    b->nlinks = 0;
    free(b->nodes);
    b->nodes = NULL;
    b->nnodes = 0;
}
