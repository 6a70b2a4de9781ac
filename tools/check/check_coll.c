/*
 * check_coll.c - the collectives' part of the check: allreduce bus
 * bandwidth at a large size and the latency of an 8-byte allreduce, with
 * every result checked so that a wrong contribution names its rank.
 *
 * Data. A sum of int32 in which every rank owns one bit: the ranks are cut
 * into groups of 31, element i belongs to group i mod G (G groups), and
 * rank r contributes its bit 1 << (r mod 31) to the elements of its group
 * where (i / G + r) mod 3 != 0, else 0. The exact sum is then the OR of
 * the bits present, known on every rank, and a wrong element's difference
 * from it says whose bit is wrong: each bit that differs names the rank
 * whose contribution came out wrong there (a bit with no rank, the sign
 * bit or an element outside every group's pattern is counted unnamed).
 * Every rank checks the result it received after the timed calls; the
 * counts per rank are summed over ranks (gw_allreduce) and the verdict
 * fails the host of each rank named (check_verdict.c).
 *
 * Timing. Each call is timed on every rank and the per-call times reduced
 * with max over ranks (a call ends when its last rank is done); the median
 * is reported. algbw = bytes / time, busbw = algbw x 2(n-1)/n, nccl-tests'
 * factor for allreduce. The latency is the median of the 8-byte calls.
 *
 * GW_CHECK_TEST_CORRUPT=R (tests only): rank R flips its own bit in one
 * element of every 4096 of its contribution to the large allreduce, as a
 * host with bad memory or a bad NIC would, to show the attribution work.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define BITS 31

static int32_t contribution(int rank, int groups, size_t i)
{
    if ((int)(i % (size_t)groups) != rank / BITS)
        return 0;
    if ((i / (size_t)groups + (size_t)rank) % 3 == 0)
        return 0;
    return (int32_t)(1u << (rank % BITS));
}

static void fill(int32_t *buf, size_t count, int rank, int groups, int corrupt)
{
    for (size_t i = 0; i < count; i++) {
        buf[i] = contribution(rank, groups, i);
        if (corrupt && i % 4096 == 17)
            buf[i] ^= (int32_t)(1u << (rank % BITS));
    }
}

/* Count, per rank, the elements its bit is wrong in (wrong[0..n)), and in
 * wrong[n] those no rank explains. */
static void check_result(const int32_t *buf, size_t count, int n, int groups, int64_t *wrong)
{
    for (size_t i = 0; i < count; i++) {
        int g = (int)(i % (size_t)groups);
        uint32_t want = 0;
        for (int r = g * BITS; r < n && r < (g + 1) * BITS; r++)
            want |= (uint32_t)contribution(r, groups, i);
        uint32_t diff = (uint32_t)buf[i] ^ want;
        if (!diff)
            continue;
        for (int b = 0; b < 32; b++) {
            if (!(diff & (1u << b)))
                continue;
            int r = g * BITS + b;
            if (b < BITS && r < n)
                wrong[r]++;
            else
                wrong[n]++;
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* iters timed calls of count elements; the median of the per-call maxima. */
static gw_status_t timed(gwc_run_t *r, const int32_t *in, int32_t *out, size_t count, long iters,
                         double *median_s)
{
    double *t = calloc((size_t)iters, sizeof(double)),
           *tmax = calloc((size_t)iters, sizeof(double));
    gw_status_t st = t && tmax ? GW_OK : GW_ERR_NO_MEMORY;
    for (long k = 0; k < iters && st == GW_OK; k++) {
        double t0 = gw_kit_now_s();
        st = gw_allreduce(r->comm, in, out, count, GW_INT32, GW_SUM);
        t[k] = gw_kit_now_s() - t0;
    }
    if (st == GW_OK)
        st = gw_allreduce(r->comm, t, tmax, (size_t)iters, GW_FLOAT64, GW_MAX);
    if (st == GW_OK) {
        qsort(tmax, (size_t)iters, sizeof(double), cmp_double);
        *median_s = tmax[iters / 2];
    }
    free(t);
    free(tmax);
    return st;
}

gw_status_t gwc_collectives(gwc_run_t *r)
{
    gwc_coll_t *c = &r->coll;
    int n = r->size, groups = (n + BITS - 1) / BITS;
    size_t count = r->o->coll_bytes / sizeof(int32_t);
    if (count < (size_t)groups * 3)
        count = (size_t)groups * 3;
    c->bytes = count * sizeof(int32_t);
    const char *corrupt_env = getenv("GW_CHECK_TEST_CORRUPT");
    int corrupt = corrupt_env && atoi(corrupt_env) == r->rank;
    int32_t *in = malloc(count * sizeof(int32_t)), *out = malloc(count * sizeof(int32_t));
    int64_t *wrong = calloc((size_t)n + 1, sizeof(int64_t));
    int64_t *total = calloc((size_t)n + 1, sizeof(int64_t));
    gw_status_t st = in && out && wrong && total ? GW_OK : GW_ERR_NO_MEMORY;
    double secs = NAN, lat = NAN;
    if (st == GW_OK) {
        fill(in, count, r->rank, groups, corrupt);
        memset(out, 0xff, count * sizeof(int32_t));
        st = gw_allreduce(r->comm, in, out, count, GW_INT32, GW_SUM); /* warm-up */
    }
    if (st == GW_OK)
        st = timed(r, in, out, count, r->coll_iters, &secs);
    if (st == GW_OK)
        check_result(out, count, n, groups, wrong);
    /* Small messages: the first 2G elements carry every rank's bit. */
    size_t small = (size_t)groups * 2;
    if (st == GW_OK) {
        gwc_progress(r, "allreduce of %zu bytes: latency", small * sizeof(int32_t));
        fill(in, small, r->rank, groups, 0);
        memset(out, 0xff, small * sizeof(int32_t));
        st = timed(r, in, out, small, r->o->coll_lat_iters, &lat);
    }
    if (st == GW_OK)
        check_result(out, small, n, groups, wrong);
    if (st == GW_OK)
        st = gw_allreduce(r->comm, wrong, total, (size_t)n + 1, GW_INT64, GW_SUM);
    if (st == GW_OK) {
        c->run = 1;
        c->algbw = (double)c->bytes / secs / 1e9;
        c->busbw = c->algbw * 2.0 * (n - 1) / n;
        c->lat_p50 = lat * 1e6;
        c->wrong_from = total;
        c->unattributed = total[n];
        total = NULL;
    }
    free(in);
    free(out);
    free(wrong);
    free(total);
    return st;
}
