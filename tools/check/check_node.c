/*
 * check_node.c - the node checks: each host's memory bandwidth (a
 * STREAM-like triad), GEMM rate (check_gemm.c) and GPU (check_gpu.c),
 * measured by the host's first rank, gathered to rank 0 and judged against
 * the other hosts' (check_node_judge.c).
 *
 * One measurement per host, not per rank: the figures are the host's, and
 * ranks that share a host would share its memory channels and cores, each
 * measuring a fraction that depends on how many ranks the launcher put
 * there. The host's first rank measures on as many threads as its CPU
 * affinity allows (a rank bound to a few cores measures those, as its
 * training job would run), while the host's other ranks wait in a barrier
 * (the library's wait sleeps in poll after a brief spin, tcp_spin.c).
 *
 * A host whose memory, GEMM or GPU figure comes out under the WARN bound
 * against the others' (check_node_judge.c) measures once more, in a round
 * of its own (in turns again), and each figure keeps the better of its
 * two: on this 2-core machine, shared by other work, a healthy emulated
 * host once measured 1% of the others in its turn, a burst of load that a
 * second measurement does not meet; a host that is really slow is slow
 * both times. Like the links' retests, it costs only the suspects.
 *
 * Hosts that share a machine (one kernel: emulated hosts in namespaces,
 * containers; check_host.c's machine_key) measure in turns, one host per
 * machine at a time, so that none of them measures the others' load; hosts
 * on machines of their own all measure at once, so a real cluster pays for
 * one host's measurement, and an emulated cluster for its hosts in series.
 *
 * The triad a[i] = b[i] + s * c[i] over three arrays of --node-size bytes
 * each (default 32 MiB, several times a server's last-level cache; STREAM's
 * rule is four times), split among the threads, each of which first
 * touches its own part (so that on a NUMA host its pages are on its node).
 * Counted as STREAM counts it, 24 bytes per element (the write-allocate
 * read of a is not counted). After one pass that touches the pages, passes
 * are timed until --node-time (0.2 s) has passed, and the rate is the
 * bytes over that whole time, not the best pass: a host held to 10% of a
 * CPU by a CFS quota runs whole short passes inside one period's quota, so
 * a best pass would look healthy, while 0.2 s spans two 100 ms periods.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct triad_part {
    double *a, *b, *c;
    size_t lo, hi;
    int touch;
} triad_part_t;

static void *triad_thread(void *arg)
{
    triad_part_t *p = arg;
    double *restrict a = p->a;
    const double *restrict b = p->b, *restrict c = p->c;
    if (p->touch) {
        for (size_t i = p->lo; i < p->hi; i++) {
            p->a[i] = 0;
            p->b[i] = 1;
            p->c[i] = 2;
        }
    }
    const double s = 3.0;
    for (size_t i = p->lo; i < p->hi; i++)
        a[i] = b[i] + s * c[i];
    return NULL;
}

/* One pass on every thread; 0, or -1 when a thread could not start. */
static int triad_pass(triad_part_t *parts, pthread_t *tids, int threads, int touch)
{
    int started = 0, rc = 0;
    for (int t = 0; t < threads; t++) {
        parts[t].touch = touch;
        if (t > 0 && pthread_create(&tids[t], NULL, triad_thread, &parts[t]) != 0) {
            rc = -1;
            break;
        }
        started = t + 1;
    }
    if (started > 0)
        triad_thread(&parts[0]);
    for (int t = 1; t < started; t++)
        pthread_join(tids[t], NULL);
    return rc;
}

double gwc_triad(size_t bytes, int threads, double min_s, char *why, size_t cap)
{
    size_t n = bytes / sizeof(double);
    if (threads < 1)
        threads = 1;
    if (n < (size_t)threads)
        n = (size_t)threads;
    double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));
    double *c = malloc(n * sizeof(double));
    triad_part_t *parts = calloc((size_t)threads, sizeof(*parts));
    pthread_t *tids = calloc((size_t)threads, sizeof(*tids));
    double rate = NAN;
    if (!a || !b || !c || !parts || !tids) {
        snprintf(why, cap, "cannot allocate 3 x %zu bytes", n * sizeof(double));
        goto out;
    }
    for (int t = 0; t < threads; t++)
        parts[t] = (triad_part_t){
            a, b, c, n * (size_t)t / (size_t)threads, n * (size_t)(t + 1) / (size_t)threads, 0};
    if (triad_pass(parts, tids, threads, 1) != 0) {
        snprintf(why, cap, "cannot start %d threads", threads);
        goto out;
    }
    long passes = 0;
    double t0 = gw_kit_now_s(), elapsed = 0;
    do {
        if (triad_pass(parts, tids, threads, 0) != 0) {
            snprintf(why, cap, "cannot start %d threads", threads);
            goto out;
        }
        passes++;
        elapsed = gw_kit_now_s() - t0;
    } while (elapsed < min_s);
    /* The result is used, so that the passes are not optimised away. */
    if (a[n / 2] != 7.0) {
        snprintf(why, cap, "the triad computed %g, not 7", a[n / 2]);
        goto out;
    }
    rate = 24.0 * (double)n * (double)passes / elapsed / 1e9;
out:
    free(a);
    free(b);
    free(c);
    free(parts);
    free(tids);
    return rate;
}

void gwc_node_free(gwc_node_t *n)
{
    free(n->fig);
    free(n->judged);
    free(n->nic);
    free(n->gpu);
    memset(n, 0, sizeof(*n));
}

/* This host's turn among the hosts on its machine that measure this round
 * (sel[h]; sel NULL: all), and how many turns the round has. */
static int my_turn(const gwc_run_t *r, const int32_t *sel, int *turns)
{
    int mine = 0;
    *turns = 0;
    for (int h = 0; h < r->nhosts; h++) {
        if (sel && !sel[h])
            continue;
        uint64_t key = r->info[r->hosts[h].first_rank].machine_key;
        int k = 0;
        for (int g = 0; g < h; g++)
            k += (!sel || sel[g]) && r->info[r->hosts[g].first_rank].machine_key == key;
        if (k + 1 > *turns)
            *turns = k + 1;
        if (h == r->host_of[r->rank])
            mine = k;
    }
    return mine;
}

static void measure(const gwc_run_t *r, gwc_node_fig_t *f)
{
    const gwc_opts_t *o = r->o;
    int threads = r->info[r->rank].cpus_allowed;
    if (threads < 1)
        threads = r->info[r->rank].cpus_online > 0 ? r->info[r->rank].cpus_online : 1;
    if (threads > 256)
        threads = 256;
    double t0 = gw_kit_now_s();
    f->measured = 1;
    f->threads = threads;
    f->v[GWC_NODE_MEM] =
        gwc_triad(o->node_bytes, threads, o->node_s, f->why[GWC_NODE_MEM], sizeof(f->why[0]));
    f->v[GWC_NODE_GEMM] =
        gwc_gemm(o->gemm_n, threads, o->node_s, f->why[GWC_NODE_GEMM], sizeof(f->why[0]));
    gwc_gpu_measure(f, o->node_bytes, o->node_s);
    f->seconds = gw_kit_now_s() - t0;
}

/* One round: the selected hosts (sel NULL: every host) measure, in turns
 * per machine, and every rank's record is gathered into all[]. */
static gw_status_t round_of(gwc_run_t *r, const int32_t *sel, const char *what, gwc_node_fig_t *all)
{
    gwc_node_fig_t mine;
    memset(&mine, 0, sizeof(mine));
    for (int k = 0; k < GWC_NODE_FIGURES; k++)
        mine.v[k] = NAN;
    int turns, turn = my_turn(r, sel, &turns);
    int h = r->host_of[r->rank];
    int leader = r->hosts[h].first_rank == r->rank && (!sel || sel[h]);
    gw_status_t st = GW_OK;
    for (int t = 0; t < turns && st == GW_OK; t++) {
        if (leader && t == turn)
            measure(r, &mine);
        st = gw_barrier(r->comm);
        if (st == GW_OK && turns > 1)
            gwc_progress(r, "node checks%s: turn %d/%d done (hosts sharing a machine take turns)",
                         what, t + 1, turns);
    }
    if (st != GW_OK)
        return st;
    return gw_allgather(r->comm, &mine, all, sizeof(mine), GW_UINT8);
}

/* Rank 0: the hosts whose memory, GEMM or GPU figure is under the WARN
 * bound against the others' (judged as the verdict will be, but
 * oversubscribed or not), into sel[]. */
static void suspects(const gwc_run_t *r, const gwc_node_fig_t *all, int32_t *sel)
{
    int nh = r->nhosts;
    double *fig = calloc((size_t)nh, sizeof(double));
    gwc_node_judged_t *out = calloc((size_t)nh, sizeof(*out));
    memset(sel, 0, (size_t)nh * sizeof(*sel));
    for (int k = 0; fig && out && k < GWC_NODE_FIGURES; k++) {
        for (int h = 0; h < nh; h++)
            fig[h] = all[r->hosts[h].first_rank].v[k];
        gwc_node_judge_figure(gwc_node_figure_name[k], gwc_node_figure_unit[k], fig, NULL, nh,
                              r->o->node_fraction, 1, out);
        for (int h = 0; h < nh; h++)
            sel[h] |= out[h].verdict == GWC_WARN || out[h].verdict == GWC_FAIL;
    }
    free(fig);
    free(out);
}

/* Rank 0: the selected hosts' second figures into all[] (each the better
 * of its two), and marked done. */
static void merge(const gwc_run_t *r, const int32_t *sel, const gwc_node_fig_t *again,
                  gwc_node_fig_t *all, int32_t *done)
{
    for (int h = 0; h < r->nhosts; h++) {
        gwc_node_fig_t *f = &all[r->hosts[h].first_rank];
        const gwc_node_fig_t *g = &again[r->hosts[h].first_rank];
        if (!sel[h] || !g->measured)
            continue;
        done[h] = 1;
        f->retested = 1;
        f->seconds += g->seconds;
        for (int k = 0; k < GWC_NODE_FIGURES; k++)
            if (!isnan(g->v[k]) && (isnan(f->v[k]) || g->v[k] > f->v[k]))
                f->v[k] = g->v[k];
    }
}

gw_status_t gwc_node_checks(gwc_run_t *r)
{
    int nh = r->nhosts;
    gwc_node_fig_t *all = calloc((size_t)r->size, sizeof(*all));
    gwc_node_fig_t *again = calloc((size_t)r->size, sizeof(*again));
    int32_t *sel = calloc((size_t)nh + 1, sizeof(*sel));
    int32_t *done = calloc((size_t)nh, sizeof(*done));
    gw_status_t st = all && again && sel && done ? GW_OK : GW_ERR_NO_MEMORY;
    if (st == GW_OK)
        st = round_of(r, NULL, "", all);
    /* Suspects measure again: a healthy host that met a burst of load in
     * its turn is fine the second time, a slow one is slow again; each
     * figure keeps the better of the two (noise only slows a host). The
     * better figures can raise the reference and put a host measured once
     * under it: such a host gets its second measurement too, in one more
     * round at most. */
    for (int pass = 0; st == GW_OK && pass < 2; pass++) {
        if (r->rank == 0) {
            suspects(r, all, sel);
            sel[nh] = 0;
            for (int h = 0; h < nh; h++) {
                sel[h] = sel[h] && !done[h];
                sel[nh] += sel[h] != 0;
            }
            if (sel[nh] > 0)
                gwc_progress(r, "node checks: %d host(s) below the others, measured again",
                             sel[nh]);
        }
        st = gw_broadcast(r->comm, sel, sel, (size_t)nh + 1, GW_INT32, 0);
        if (st != GW_OK || sel[nh] == 0)
            break;
        st = round_of(r, sel, " (again)", again);
        if (st == GW_OK && r->rank == 0)
            merge(r, sel, again, all, done);
    }
    if (st == GW_OK && r->rank == 0) {
        gwc_node_t *n = &r->node;
        n->fig = calloc((size_t)nh, sizeof(*n->fig));
        n->judged = calloc((size_t)nh, sizeof(*n->judged));
        n->nic = calloc((size_t)nh, sizeof(*n->nic));
        n->gpu = calloc((size_t)nh, sizeof(*n->gpu));
        if (!n->fig || !n->judged || !n->nic || !n->gpu) {
            gwc_node_free(n);
            st = GW_ERR_NO_MEMORY;
        } else {
            for (int h = 0; h < nh; h++)
                n->fig[h] = all[r->hosts[h].first_rank];
            n->run = 1;
        }
    }
    free(all);
    free(again);
    free(sel);
    free(done);
    return st;
}
