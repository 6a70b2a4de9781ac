/*
 * bench_p2p.c - `gradwire-bench p2p`: point-to-point bandwidth and latency
 * between ranks 0 and 1, over whatever transport the communicator chose, in
 * the manner of perftest (ib_write_bw, ib_write_lat) so that the two can be
 * run side by side on one link and compared; with --pairs all or serial,
 * between every pair of ranks (bench_p2p_pairs.c). This file measures one
 * pair: its lower rank leads (sends in uni, times every mode), the other
 * answers (a caller may swap the roles by setting the pair's lead). It is
 * the static library gradwire_p2p, which gradwire-check's link matrix
 * shares; the command's options and tables are bench_p2p_cmd.c.
 *
 * For each message size:
 *   - uni: rank 0 sends `iters` messages back to back, rank 1 receives
 *     them and answers with one byte; bandwidth = iters * size / time, timed
 *     on rank 0 from the first send to the answer. Up to `window` messages
 *     are in flight (gw_isend/gw_irecv; a new one is posted as the oldest
 *     completes), as perftest keeps its tx-depth of writes outstanding;
 *     -W 1 sends one at a time with the blocking calls;
 *   - bidir: both ranks do the same in both directions at once (with -W 1,
 *     gw_sendrecv); bandwidth = 2 * iters * size / time (both directions,
 *     as ib_write_bw -b reports);
 *   - lat: `iters` ping-pongs; each iteration's latency is half its round
 *     trip, reported as median, 90th and 99th percentile, min and max, as
 *     ib_write_lat does (its "typical" is the median).
 * Each mode runs `warmup` untimed iterations first. Every message of a
 * direction uses the same buffer, as perftest's do. GB/s = 1e9 bytes/s.
 *
 * With -c 1 (default) the send buffers hold a pattern of the sender and
 * the size, the receive buffers start with bytes that differ from it
 * everywhere, and after each mode's timed loop the last message received
 * is compared with the pattern (outside the timing); rank 1 reports its
 * count of wrong bytes to rank 0. Ranks beyond 1 take no part and exit
 * (but with --pairs).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_p2p.h"

#define MODE_UNI GW_P2P_MODE_UNI
#define MODE_BIDIR GW_P2P_MODE_BIDIR
#define MODE_LAT GW_P2P_MODE_LAT

static uint8_t pattern(int from, size_t size, size_t i)
{
    return (uint8_t)((size_t)from * 131 + size * 7 + i * 29 + (i >> 8));
}

/* Before a mode's timed loop: our pattern in the send buffer, and in the
 * receive buffer something that differs from the peer's everywhere. */
static void prepare(uint8_t *sbuf, uint8_t *rbuf, int rank, int peer, size_t size, int check)
{
    for (size_t i = 0; check && i < size; i++) {
        sbuf[i] = pattern(rank, size, i);
        rbuf[i] = (uint8_t)~pattern(peer, size, i);
    }
}

/* After it: the last message received must be the peer's pattern. */
static int64_t wrong_bytes(const uint8_t *buf, int from, size_t size, int check)
{
    int64_t w = 0;
    for (size_t i = 0; check && i < size; i++)
        w += buf[i] != pattern(from, size, i);
    return w;
}

/* n messages of one direction (send or receive) with up to `window` in
 * flight: post until the window is full, then complete the oldest and post
 * the next. On failure the outstanding handles are still completed (the
 * communicator has failed, so they return at once). */
static gw_status_t stream(gw_p2p_pair_t *r, int send, size_t size, long n, gw_handle_t **ring)
{
    long window = r->o->window, posted = 0, completed = 0;
    gw_status_t st = GW_OK;
    while (completed < n) {
        while (st == GW_OK && posted < n && posted - completed < window) {
            gw_handle_t **h = &ring[posted % window];
            st = send ? gw_isend(r->comm, r->sbuf, size, GW_UINT8, r->peer, h)
                      : gw_irecv(r->comm, r->rbuf, size, GW_UINT8, r->peer, h);
            if (st == GW_OK)
                posted++;
        }
        if (completed == posted)
            break;
        gw_status_t w = gw_wait(ring[completed % window]);
        completed++;
        if (st == GW_OK)
            st = w;
    }
    return st;
}

/* Both directions at once: a window of receives and one of sends, the
 * oldest of each completed in turn. */
static gw_status_t stream_both(gw_p2p_pair_t *r, size_t size, long n, gw_handle_t **ring)
{
    long window = r->o->window, posted = 0, completed = 0;
    gw_handle_t **sends = ring, **recvs = ring + window;
    gw_status_t st = GW_OK;
    while (completed < n) {
        while (st == GW_OK && posted < n && posted - completed < window) {
            st = gw_irecv(r->comm, r->rbuf, size, GW_UINT8, r->peer, &recvs[posted % window]);
            if (st != GW_OK)
                break;
            st = gw_isend(r->comm, r->sbuf, size, GW_UINT8, r->peer, &sends[posted % window]);
            if (st != GW_OK) { /* the receive is posted: complete it below */
                gw_wait(recvs[posted % window]);
                break;
            }
            posted++;
        }
        if (completed == posted)
            break;
        gw_status_t ws = gw_wait(sends[completed % window]);
        gw_status_t wr = gw_wait(recvs[completed % window]);
        completed++;
        if (st == GW_OK)
            st = ws != GW_OK ? ws : wr;
    }
    return st;
}

static gw_status_t run_uni(gw_p2p_pair_t *r, size_t size, long n, double *secs)
{
    uint8_t ack = 0;
    gw_status_t st = GW_OK;
    double t0 = gw_kit_now_s();
    if (r->o->window > 1)
        st = stream(r, r->lead, size, n, r->ring);
    for (long i = 0; r->o->window == 1 && i < n && st == GW_OK; i++)
        st = r->lead ? gw_send(r->comm, r->sbuf, size, GW_UINT8, r->peer)
                     : gw_recv(r->comm, r->rbuf, size, GW_UINT8, r->peer);
    if (st == GW_OK)
        st = r->lead ? gw_recv(r->comm, &ack, 1, GW_UINT8, r->peer)
                     : gw_send(r->comm, &ack, 1, GW_UINT8, r->peer);
    *secs = gw_kit_now_s() - t0;
    return st;
}

static gw_status_t run_bidir(gw_p2p_pair_t *r, size_t size, long n, double *secs)
{
    gw_status_t st = GW_OK;
    double t0 = gw_kit_now_s();
    if (r->o->window > 1)
        st = stream_both(r, size, n, r->ring);
    for (long i = 0; r->o->window == 1 && i < n && st == GW_OK; i++)
        st = gw_sendrecv(r->comm, r->sbuf, size, r->peer, r->rbuf, size, r->peer, GW_UINT8);
    *secs = gw_kit_now_s() - t0;
    return st;
}

/* Ping-pong; lat (the leader's) receives half of each round trip in us. */
static gw_status_t run_lat(gw_p2p_pair_t *r, size_t size, long n, double *lat)
{
    gw_status_t st = GW_OK;
    for (long i = 0; i < n && st == GW_OK; i++) {
        double t0 = gw_kit_now_s();
        if (r->lead) {
            st = gw_send(r->comm, r->sbuf, size, GW_UINT8, r->peer);
            if (st == GW_OK)
                st = gw_recv(r->comm, r->rbuf, size, GW_UINT8, r->peer);
        } else {
            st = gw_recv(r->comm, r->rbuf, size, GW_UINT8, r->peer);
            if (st == GW_OK)
                st = gw_send(r->comm, r->sbuf, size, GW_UINT8, r->peer);
        }
        if (lat)
            lat[i] = (gw_kit_now_s() - t0) * 1e6 / 2;
    }
    return st;
}

/* Warm-up, then the timed loop, then the check of what arrived. */
static gw_status_t run_mode(gw_p2p_pair_t *r, int mode, size_t size, double *secs, double *lat)
{
    const gw_p2p_opts_t *o = r->o;
    gw_status_t st = GW_OK;
    double warm;
    prepare(r->sbuf, r->rbuf, r->rank, r->peer, size, o->check);
    if (mode == MODE_UNI) {
        if ((st = run_uni(r, size, o->sw.warmup, &warm)) == GW_OK)
            st = run_uni(r, size, o->sw.iters, secs);
    } else if (mode == MODE_BIDIR) {
        if ((st = run_bidir(r, size, o->sw.warmup, &warm)) == GW_OK)
            st = run_bidir(r, size, o->sw.iters, secs);
    } else {
        if ((st = run_lat(r, size, o->sw.warmup, NULL)) == GW_OK)
            st = run_lat(r, size, o->sw.iters, lat);
    }
    int received = mode != MODE_UNI || !r->lead;
    if (st == GW_OK && received)
        r->wrong += wrong_bytes(r->rbuf, r->peer, size, o->check);
    return st;
}

gw_status_t gw_p2p_run_size(gw_p2p_pair_t *r, size_t size, gw_p2p_result_t *res)
{
    const gw_p2p_opts_t *o = r->o;
    double secs, *lat = r->lat;
    int64_t before = r->wrong;
    gw_status_t st = GW_OK;
    res->bytes = size;
    res->wrong = 0;
    res->uni = res->bidir = res->p50 = res->p90 = res->p99 = res->min = res->max = NAN;
    if (o->modes & MODE_UNI) {
        if ((st = run_mode(r, MODE_UNI, size, &secs, NULL)) != GW_OK)
            return st;
        res->uni = (double)o->sw.iters * (double)size / secs / 1e9;
    }
    if (o->modes & MODE_BIDIR) {
        if ((st = run_mode(r, MODE_BIDIR, size, &secs, NULL)) != GW_OK)
            return st;
        res->bidir = 2.0 * (double)o->sw.iters * (double)size / secs / 1e9;
    }
    if (o->modes & MODE_LAT) {
        if ((st = run_mode(r, MODE_LAT, size, &secs, lat)) != GW_OK)
            return st;
        size_t n = (size_t)o->sw.iters;
        gw_kit_sort(lat, n);
        res->p50 = gw_kit_percentile_sorted(lat, n, 50);
        res->p90 = gw_kit_percentile_sorted(lat, n, 90);
        res->p99 = gw_kit_percentile_sorted(lat, n, 99);
        res->min = lat[0];
        res->max = lat[o->sw.iters - 1];
    }
    res->wrong = r->wrong - before;
    return GW_OK;
}

void gw_p2p_pair_with(gw_p2p_pair_t *p, int peer)
{
    p->peer = peer;
    p->lead = p->rank < peer;
}

int gw_p2p_pair_open(gw_p2p_pair_t *p, const gw_p2p_opts_t *o, gw_comm_t *comm, int rank)
{
    size_t cap = o->sw.maxbytes ? o->sw.maxbytes : 1;
    *p = (gw_p2p_pair_t){.o = o, .comm = comm, .rank = rank, .peer = -1};
    p->sbuf = calloc(1, cap);
    p->rbuf = calloc(1, cap);
    p->ring = calloc(2 * (size_t)o->window, sizeof(*p->ring));
    p->lat = calloc((size_t)o->sw.iters, sizeof(double));
    if (!p->sbuf || !p->rbuf || !p->ring || !p->lat) {
        fprintf(stderr, "p2p pair: rank %d: out of memory for %zu-byte buffers\n", rank,
                o->sw.maxbytes);
        gw_p2p_pair_close(p);
        return -1;
    }
    return 0;
}

void gw_p2p_pair_close(gw_p2p_pair_t *p)
{
    free(p->sbuf);
    free(p->rbuf);
    free(p->ring);
    free(p->lat);
    p->sbuf = p->rbuf = NULL;
    p->ring = NULL;
    p->lat = NULL;
}

int gw_p2p_circle_partner(int n, int rank, int k)
{
    int m = n + (n & 1); /* with the phantom rank m - 1 when n is odd */
    int q;
    if (rank == m - 1)
        q = k;
    else if (rank == k)
        q = m - 1;
    else
        q = ((2 * k - rank) % (m - 1) + (m - 1)) % (m - 1);
    return q < n ? q : -1;
}

size_t gw_p2p_sizes(const gw_p2p_opts_t *o, size_t *sizes, size_t cap)
{
    size_t n = 0;
    for (size_t s = o->sw.minbytes; n < cap; s = s ? s * (size_t)o->sw.factor : 1) {
        sizes[n++] = s;
        if (s >= o->sw.maxbytes || (s > 0 && s > o->sw.maxbytes / (size_t)o->sw.factor))
            break;
    }
    return n;
}
