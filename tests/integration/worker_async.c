/*
 * worker_async.c - one rank of the non-blocking collectives test.
 *
 * Mode "order": several gw_iallreduce calls on distinct buffers, a blocking
 * allreduce and a barrier issued while they are pending, handles completed
 * out of order with gw_wait and gw_test; every result is checked exactly.
 * Mode "abort": rank 0 blocks in an allreduce that rank 1 joins late; a
 * second thread of rank 0 calls gw_comm_abort; rank 0 must return
 * GW_ERR_ABORTED within a second and rank 1 must fail too.
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
    int bad = strcmp(mode, "abort") == 0 ? abort_mode(comm, rank) : order_mode(comm, rank, size);
    gw_comm_destroy(comm);
    if (!bad)
        printf("rank %d: ok\n", rank);
    return bad;
}
