/*
 * check_pairs.c - the link matrix: latency and bandwidth between every pair
 * of ranks over the transport the job really uses, measured by
 * gradwire-bench p2p's pair engine (bench_p2p.c), and the serial retests.
 *
 * Schedule. n-1 rounds of n/2 pairs at once (for odd n, n rounds with one
 * rank resting in each), by the circle method of round-robin tournaments:
 * rank m-1 (m = n rounded up to even; rank n is a phantom when n is odd)
 * meets rank k in round k, every other rank r meets (2k - r) mod (m-1).
 * Every rank is busy in every round and each link carries one pair, as
 * ClusterKit loads a network. A retest runs one pair per round, so that
 * its figures are the link's own, not what it got of a host shared with
 * the other pairs of a round.
 *
 * A pair's measurement, each with every byte checked:
 *   - latency: ping-pong of 8-byte messages, the lower rank timing; the
 *     median and 99th percentile of the one-way time (half a round trip);
 *   - bandwidth: bw_bytes messages streamed with a window of 16, first from
 *     the lower rank to the higher, then back, each timed by its sender, so
 *     that a host which is slow or lossy only when sending is seen too.
 * A link retested more than once keeps the better of its figures (the
 * highest bandwidth, the lowest latencies: noise on a busy host only makes
 * them worse) and the wrong bytes of every run.
 * Then every rank's record (partner, figures, wrong bytes) is gathered to
 * rank 0 with gw_allgather, which also keeps the rounds in step. A failed
 * call fails the communicator: every rank stops at the same gather and the
 * failure is reported with its culprit (check_main.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct round_rec {
    int32_t peer;
    int32_t pad;
    double lat_p50, lat_p99, bw_sent;
    int64_t wrong;
} round_rec_t;

int gwc_link_index(int n, int a, int b)
{
    if (a > b) {
        int t = a;
        a = b;
        b = t;
    }
    /* pairs (0,1), (0,2), ..., (0,n-1), (1,2), ... */
    return a * n - a * (a + 1) / 2 + (b - a - 1);
}

/* This rank's measurement with peer into rec. */
static gw_status_t measure(gwc_run_t *r, int peer, round_rec_t *rec)
{
    gw_p2p_opts_t lo, bo;
    memset(&lo, 0, sizeof(lo));
    lo.sw.minbytes = lo.sw.maxbytes = 8;
    lo.sw.factor = 2;
    lo.sw.iters = r->lat_iters;
    lo.sw.warmup = r->lat_iters < 20 ? 3 : 10;
    lo.window = 1;
    lo.modes = GW_P2P_MODE_LAT;
    lo.check = 1;
    bo = lo;
    bo.sw.minbytes = bo.sw.maxbytes = r->o->bw_bytes;
    bo.sw.iters = r->bw_iters;
    bo.sw.warmup = 2;
    bo.window = 16;
    bo.modes = GW_P2P_MODE_UNI;
    gw_p2p_pair_t lp, bp;
    if (gw_p2p_pair_open(&lp, &lo, r->comm, r->rank) != 0)
        return GW_ERR_NO_MEMORY;
    if (gw_p2p_pair_open(&bp, &bo, r->comm, r->rank) != 0) {
        gw_p2p_pair_close(&lp);
        return GW_ERR_NO_MEMORY;
    }
    gw_p2p_result_t res;
    gw_p2p_pair_with(&lp, peer);
    gw_status_t st = gw_p2p_run_size(&lp, 8, &res);
    if (st == GW_OK && lp.lead) {
        rec->lat_p50 = res.p50;
        rec->lat_p99 = res.p99;
    }
    gw_p2p_pair_with(&bp, peer);
    for (int dir = 0; dir < 2 && st == GW_OK; dir++) {
        /* dir 0: the lower rank sends; dir 1: the higher one. */
        bp.lead = (r->rank < peer) == (dir == 0);
        st = gw_p2p_run_size(&bp, r->o->bw_bytes, &res);
        if (st == GW_OK && bp.lead)
            rec->bw_sent = res.uni;
    }
    rec->wrong = lp.wrong + bp.wrong;
    gw_p2p_pair_close(&lp);
    gw_p2p_pair_close(&bp);
    return st;
}

gw_status_t gwc_round(gwc_run_t *r, const int *peer, int retest)
{
    round_rec_t mine;
    memset(&mine, 0, sizeof(mine));
    mine.peer = peer[r->rank];
    mine.lat_p50 = mine.lat_p99 = mine.bw_sent = NAN;
    gw_status_t st = GW_OK;
    if (mine.peer >= 0)
        st = measure(r, mine.peer, &mine);
    if (st != GW_OK)
        return st;
    round_rec_t *all = calloc((size_t)r->size, sizeof(*all));
    if (!all)
        return GW_ERR_NO_MEMORY;
    st = gw_allgather(r->comm, &mine, all, sizeof(mine), GW_UINT8);
    if (st == GW_OK && r->rank == 0) {
        for (int q = 0; q < r->size; q++) {
            int p = all[q].peer;
            if (p <= q)
                continue; /* resting, or stored from the lower rank */
            gwc_link_t *l = &r->links[gwc_link_index(r->size, q, p)];
            gwc_fig_t *f = retest ? &l->retest : &l->fig;
            gwc_fig_t g = {all[q].lat_p50, all[q].lat_p99, all[q].bw_sent, all[p].bw_sent,
                           all[q].wrong + all[p].wrong};
            if (retest && l->retested) { /* the better of the retests, wrong bytes of all */
                g.lat_p50 = fmin(g.lat_p50, f->lat_p50);
                g.lat_p99 = fmin(g.lat_p99, f->lat_p99);
                g.bw_ab = fmax(g.bw_ab, f->bw_ab);
                g.bw_ba = fmax(g.bw_ba, f->bw_ba);
                g.wrong += f->wrong;
            }
            *f = g;
            if (retest)
                l->retested = 1;
            else
                l->measured = 1;
        }
    }
    free(all);
    return st;
}

gw_status_t gwc_matrix_round(gwc_run_t *r, int k)
{
    int *peer = malloc((size_t)r->size * sizeof(int));
    if (!peer)
        return GW_ERR_NO_MEMORY;
    for (int q = 0; q < r->size; q++)
        peer[q] = gw_p2p_circle_partner(r->size, q, k);
    gw_status_t st = gwc_round(r, peer, 0);
    free(peer);
    return st;
}

gw_status_t gwc_retest(gwc_run_t *r, const int *pairs, int npairs)
{
    int32_t n = r->rank == 0 ? npairs : 0;
    gw_status_t st = gw_broadcast(r->comm, &n, &n, 1, GW_INT32, 0);
    if (st != GW_OK || n == 0)
        return st;
    int32_t *list = calloc(2 * (size_t)n, sizeof(int32_t));
    int *peer = malloc((size_t)r->size * sizeof(int));
    if (!list || !peer) {
        free(list);
        free(peer);
        return GW_ERR_NO_MEMORY;
    }
    if (r->rank == 0)
        for (int i = 0; i < 2 * n; i++)
            list[i] = pairs[i];
    st = gw_broadcast(r->comm, list, list, 2 * (size_t)n, GW_INT32, 0);
    for (int i = 0; i < n && st == GW_OK; i++) {
        for (int q = 0; q < r->size; q++)
            peer[q] = -1;
        peer[list[2 * i]] = list[2 * i + 1];
        peer[list[2 * i + 1]] = list[2 * i];
        gwc_progress(r, "retest %d/%d: ranks %d and %d alone", i + 1, (int)n, (int)list[2 * i],
                     (int)list[2 * i + 1]);
        st = gwc_round(r, peer, 1);
    }
    free(list);
    free(peer);
    return st;
}

int gwc_retest_list(gwc_run_t *r, int hosts, int **out, int *distinct)
{
    /* Room for every link twice: when more than half the links are
     * suspect, the second copy must still fit (it once did not, and such
     * links were retested once while the progress line said twice). */
    int cap = r->nlinks > 0 ? r->nlinks : 1, n = 0;
    int *pairs = calloc(4 * (size_t)cap, sizeof(int));
    *out = NULL;
    *distinct = 0;
    if (!pairs)
        return -1;
    n = hosts ? gwc_find_suspect_hosts(r, pairs, cap) : gwc_find_suspects(r, pairs, cap);
    *(hosts ? &r->hosts_found : &r->suspects_found) = 1;
    int kept = 0;
    for (int i = 0; i < n; i++) {
        const gwc_link_t *l = &r->links[gwc_link_index(r->size, pairs[2 * i], pairs[2 * i + 1])];
        if (hosts && l->retested)
            continue;
        pairs[2 * kept] = pairs[2 * i];
        pairs[2 * kept + 1] = pairs[2 * i + 1];
        kept++;
    }
    n = kept;
    *distinct = n;
    /* Suspect links twice, all of them once and then again: a link is
     * bad only when both retests are (the better one is kept). */
    if (!hosts && n > 0) {
        memcpy(pairs + 2 * n, pairs, 2 * (size_t)n * sizeof(int));
        n *= 2;
    }
    *out = pairs;
    return n;
}
