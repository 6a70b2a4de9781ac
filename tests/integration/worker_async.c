/*
 * worker_async.c - one rank of the non-blocking collectives test.
 *
 * Mode "order": several gw_iallreduce calls on distinct buffers, a blocking
 * allreduce and a barrier issued while they are pending, handles completed
 * out of order with gw_wait and gw_test; every result is checked exactly.
 * Mode "abort": rank 0 blocks in an allreduce that rank 1 joins late; a
 * second thread of rank 0 calls gw_comm_abort; rank 0 must return
 * GW_ERR_ABORTED within a second and rank 1 must fail too.
 * Mode "every": every non-blocking collective pending at once (see
 * every_mode).
 * Prints "rank R: ok" or the failure, exits 0 / 1.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gradwire.h"

#define NOPS 6

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int order_mode(gw_comm_t *comm, int rank, int size)
{
    size_t counts[NOPS] = {1, 1000, 65537, 0, 300000, 7};
    float *bufs[NOPS];
    gw_handle_t *h[NOPS];
    for (int k = 0; k < NOPS; k++) {
        bufs[k] = malloc((counts[k] + 1) * sizeof(float));
        for (size_t i = 0; i < counts[k]; i++)
            bufs[k][i] = (float)((rank + 1) * (k + 1) + (int)(i % 5));
        if (gw_iallreduce(comm, bufs[k], bufs[k], counts[k], GW_FLOAT32, GW_SUM, &h[k]) != GW_OK)
            return 1;
    }
    /* A blocking call queues behind the pending ones. */
    int64_t x = rank, xsum = 0;
    gw_status_t st = gw_allreduce(comm, &x, &xsum, 1, GW_INT64, GW_SUM);
    if (st != GW_OK || xsum != (int64_t)size * (size - 1) / 2) {
        printf("rank %d: blocking allreduce among pending ones: %s, %lld\n", rank,
               gw_status_str(st), (long long)xsum);
        return 1;
    }
    if (gw_barrier(comm) != GW_OK)
        return 1;
    /* Complete out of order: the last with gw_test polling, the rest waited. */
    int done = 0;
    while (!done) {
        st = gw_test(h[NOPS - 1], &done);
        if (st != GW_OK) {
            printf("rank %d: gw_test: %s\n", rank, gw_status_str(st));
            return 1;
        }
    }
    for (int k = NOPS - 2; k >= 0; k--) {
        st = gw_wait(h[k]);
        if (st != GW_OK) {
            printf("rank %d: gw_wait %d: %s\n", rank, k, gw_status_str(st));
            return 1;
        }
    }
    for (int k = 0; k < NOPS; k++) {
        for (size_t i = 0; i < counts[k]; i++) {
            float want = (float)((k + 1) * size * (size + 1) / 2 + size * (int)(i % 5));
            if (bufs[k][i] != want) {
                printf("rank %d: op %d element %zu = %g, want %g\n", rank, k, i, bufs[k][i], want);
                return 1;
            }
        }
        free(bufs[k]);
    }
    return 0;
}

/* Mode "every": one of each non-blocking collective, all pending at once
 * (a blocking gw_alltoall queued among them), completed in reverse call
 * order. Completion is in call order, so once the last handle is done
 * gw_test must find every earlier one done too. Results are checked
 * exactly (int32: every value is a small integer). */
#define M 37 /* elements per block: odd, several per rank */
#define NEVERY 11

static int32_t val(int r, int j, int i) { return r * 100000 + j * 1000 + i; }

static int every_mode(gw_comm_t *comm, int rank, int n)
{
    size_t nm = (size_t)n * M;
    int32_t *bc = malloc(M * 4), *red = malloc(M * 4), *ag = malloc(nm * 4), *rsin = malloc(nm * 4),
            *rs = malloc(M * 4), *a2s = malloc(nm * 4), *a2r = malloc(nm * 4),
            *a2vs = malloc(nm * 4), *a2vr = malloc(nm * 4), *gs = malloc(M * 4),
            *gr = malloc(nm * 4), *ss = malloc(nm * 4), *sr = malloc(M * 4), *agv = malloc(nm * 4),
            *mine = malloc(M * 4), *ar = malloc(M * 4), *b2s = malloc(nm * 4),
            *b2r = malloc(nm * 4);
    size_t *cnt = malloc((size_t)n * sizeof(size_t)), *dsp = malloc((size_t)n * sizeof(size_t));
    for (int j = 0; j < n; j++) {
        cnt[j] = (size_t)(j % 3) * 11 + 1; /* allgatherv: uneven; alltoallv: every pair M */
        dsp[j] = (size_t)j * M;
    }
    size_t full[64], fdsp[64];
    for (int j = 0; j < n && j < 64; j++) {
        full[j] = M;
        fdsp[j] = (size_t)(n - 1 - j) * M; /* alltoallv receives in reverse order */
    }
    for (int i = 0; i < M; i++) {
        bc[i] = rank == 0 ? val(0, 0, i) : -1;
        mine[i] = val(rank, 0, i);
        ar[i] = val(rank, 0, i);
        gs[i] = val(rank, 1, i);
    }
    for (size_t k = 0; k < nm; k++) {
        int j = (int)(k / M), i = (int)(k % M);
        rsin[k] = val(rank, j, i);
        a2s[k] = val(rank, j, i);
        a2vs[k] = val(rank, j, i) + 7;
        ss[k] = val(rank, j, i) + 11; /* only the root's is sent */
        b2s[k] = val(rank, j, i) - 3;
    }
    gw_handle_t *h[NEVERY];
    gw_status_t st[NEVERY + 1];
    int k = 0;
    st[k] = gw_ibroadcast(comm, bc, bc, M, GW_INT32, 0, &h[k]), k++;
    st[k] = gw_ireduce(comm, mine, red, M, GW_INT32, GW_SUM, n - 1, &h[k]), k++;
    st[k] = gw_iallgather(comm, mine, ag, M, GW_INT32, &h[k]), k++;
    st[k] = gw_ireduce_scatter(comm, rsin, rs, M, GW_INT32, GW_SUM, &h[k]), k++;
    st[k] = gw_ibarrier(comm, &h[k]), k++;
    st[k] = gw_ialltoall(comm, a2s, a2r, M, GW_INT32, &h[k]), k++;
    st[k] = gw_ialltoallv(comm, a2vs, full, dsp, a2vr, full, fdsp, GW_INT32, &h[k]), k++;
    st[NEVERY] = gw_alltoall(comm, b2s, b2r, M, GW_INT32); /* blocking, queued behind */
    st[k] = gw_igather(comm, gs, gr, M, GW_INT32, n / 2, &h[k]), k++;
    st[k] = gw_iscatter(comm, ss, sr, M, GW_INT32, 2 % n, &h[k]), k++;
    st[k] = gw_iallgatherv(comm, mine, agv, cnt[rank], cnt, dsp, GW_INT32, &h[k]), k++;
    st[k] = gw_iallreduce(comm, ar, ar, M, GW_INT32, GW_SUM, &h[k]), k++;
    for (int q = 0; q <= NEVERY; q++)
        if (st[q] != GW_OK) {
            printf("rank %d: call %d: %s\n", rank, q, gw_status_str(st[q]));
            return 1;
        }
    gw_status_t w = gw_wait(h[NEVERY - 1]);
    if (w != GW_OK) {
        printf("rank %d: the last handle: %s\n", rank, gw_status_str(w));
        return 1;
    }
    for (int q = NEVERY - 2; q >= 0; q--) {
        int done = 0;
        w = gw_test(h[q], &done);
        if (w != GW_OK || !done) {
            printf("rank %d: handle %d after the last completed: %s, done %d\n", rank, q,
                   gw_status_str(w), done);
            return 1;
        }
    }
    int64_t sum_r = (int64_t)n * (n - 1) / 2;
    int bad = 0;
#define EXPECT(cond, what, idx)                                               \
    do {                                                                      \
        if (!(cond) && !bad++)                                                \
            printf("rank %d: %s element %d wrong\n", rank, what, (int)(idx)); \
    } while (0)
    for (int i = 0; i < M; i++) {
        EXPECT(bc[i] == val(0, 0, i), "ibroadcast", i);
        if (rank == n - 1)
            EXPECT(red[i] == (int32_t)(sum_r * 100000 + n * i), "ireduce", i);
        EXPECT(rs[i] == (int32_t)(sum_r * 100000 + n * (rank * 1000 + i)), "ireduce_scatter", i);
        EXPECT(sr[i] == val(2 % n, rank, i) + 11, "iscatter", i);
        EXPECT(ar[i] == (int32_t)(sum_r * 100000 + n * i), "iallreduce", i);
    }
    for (size_t q = 0; q < nm; q++) {
        int j = (int)(q / M), i = (int)(q % M);
        EXPECT(ag[q] == val(j, 0, i), "iallgather", q);
        EXPECT(a2r[q] == val(j, rank, i), "ialltoall", q);
        EXPECT(b2r[q] == val(j, rank, i) - 3, "alltoall among them", q);
        EXPECT(a2vr[(size_t)(n - 1 - j) * M + (size_t)i] == val(j, rank, i) + 7, "ialltoallv", q);
        if (rank == n / 2)
            EXPECT(gr[q] == val(j, 1, i), "igather", q);
        if ((size_t)i < cnt[j])
            EXPECT(agv[dsp[j] + (size_t)i] == val(j, 0, i), "iallgatherv", q);
    }
#undef EXPECT
    free(bc), free(red), free(ag), free(rsin), free(rs), free(a2s), free(a2r), free(a2vs);
    free(a2vr), free(gs), free(gr), free(ss), free(sr), free(agv), free(mine), free(ar);
    free(b2s), free(b2r), free(cnt), free(dsp);
    return bad != 0;
}

static void *aborter(void *arg)
{
    usleep(300000);
    gw_comm_abort(arg);
    return NULL;
}

static int abort_mode(gw_comm_t *comm, int rank)
{
    float v[16] = {0};
    if (rank == 1)
        sleep(2); /* late: rank 0 is blocked when its watchdog aborts */
    pthread_t t;
    if (rank == 0)
        pthread_create(&t, NULL, aborter, comm);
    double t0 = now_s();
    gw_status_t st = gw_allreduce(comm, v, v, 16, GW_FLOAT32, GW_SUM);
    double dt = now_s() - t0;
    if (rank == 0)
        pthread_join(t, NULL);
    printf("rank %d: %s after %.2f s\n", rank, gw_status_name(st), dt);
    if (rank == 0)
        return !(st == GW_ERR_ABORTED && dt < 1.5);
    return st == GW_OK;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "order";
    gw_comm_t *comm;
    gw_status_t st = gw_comm_init_env(&comm);
    if (st != GW_OK) {
        fprintf(stderr, "init: %s\n", gw_status_str(st));
        return 1;
    }
    int rank = gw_comm_rank(comm), size = gw_comm_size(comm);
    int bad = strcmp(mode, "abort") == 0   ? abort_mode(comm, rank)
              : strcmp(mode, "every") == 0 ? every_mode(comm, rank, size)
                                           : order_mode(comm, rank, size);
    gw_comm_destroy(comm);
    if (!bad)
        printf("rank %d: ok\n", rank);
    return bad;
}
