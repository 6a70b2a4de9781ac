/*
 * worker_scale.c - one rank of the scale test and measurement (test_scale.c,
 * README "Scale").
 *
 * Usage: worker_scale MODE. Started by `gradwire launch -n N`.
 *
 * Mode "time": the cost of creating a communicator and of its connections.
 * Each rank times gw_comm_init_env, then its first collective (a ring
 * allreduce of 1024 floats, which needs the two ring neighbours), then an
 * alltoall (which needs every peer), and counts its open file descriptors
 * (/proc/self/fd), resident memory (VmRSS) and gradwire's shared-memory
 * mappings (/proc/self/maps) after each step. Rank 0
 * prints one line with the maximum over the ranks of each time and the
 * maximum and mean of each count, "scale: n=N ...", for the README; and
 * the minimum of the creation time (last_init_ms): the rank that started
 * last waits for nobody, so its creation is the bootstrap and connection
 * cost alone, without the launcher's start-up skew.
 *
 * Mode "ring" (3 ranks or more, GW_NSOCKS=1, one host, ranks in order): a
 * ring allreduce must open connections to its two ring neighbours only:
 * every rank prints "rank R: ring opened S sockets, T open; M shared-memory
 * maps before, K after" where S is the sockets opened by the allreduce, T
 * all sockets then open, and M and K gradwire's mappings of /dev/shm
 * (each connected pair's segment).
 *
 * Mode "p2p": rank size-1 sends to rank 0 and rank 0 answers, a pair that
 * no collective connected before; rank 0 posts its receive at once and
 * rank size-1 sends 300 ms late. Every rank then checks an allreduce.
 * Prints "rank R: ok".
 *
 * Mode "dead" (3 ranks or more): rank 1 exits right after creation,
 * before any connection to it; rank 2 (which dials rank 1) and rank 0
 * (which waits for rank 1 to dial it) each send to rank 1 and must fail
 * naming rank 1: "rank R: STATUS culprit C after MS ms". Mode "deadtop":
 * the same with the last rank dead and rank 0 alone sending to it (so
 * only rank 0's own knock can reveal the death before the timeout).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../support/fd_count.h"
#include "gradwire.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

static int ring_allreduce(gw_comm_t *comm, float *buf, size_t count)
{
    int size = gw_comm_size(comm);
    for (size_t i = 0; i < count; i++)
        buf[i] = 1.0f;
    gw_status_t st = gw_allreduce(comm, buf, buf, count, GW_FLOAT32, GW_SUM);
    if (st != GW_OK)
        return printf("rank %d: allreduce %s\n", gw_comm_rank(comm), gw_status_str(st)), 1;
    for (size_t i = 0; i < count; i++)
        if (buf[i] != (float)size)
            return printf("rank %d: allreduce gave %g at %zu, want %d\n", gw_comm_rank(comm),
                          buf[i], i, size),
                   1;
    return 0;
}

/* Minimum, maximum and sum over the ranks of n values. */
static gw_status_t reduce_stats(gw_comm_t *comm, double *v, int n, double *min, double *max,
                                double *sum)
{
    gw_status_t st = gw_allreduce(comm, v, max, (size_t)n, GW_FLOAT64, GW_MAX);
    if (st == GW_OK)
        st = gw_allreduce(comm, v, min, (size_t)n, GW_FLOAT64, GW_MIN);
    if (st == GW_OK)
        st = gw_allreduce(comm, v, sum, (size_t)n, GW_FLOAT64, GW_SUM);
    return st;
}

static int time_mode(void)
{
    double t0 = now_ms();
    gw_comm_t *comm = NULL;
    gw_status_t st = gw_comm_init_env(&comm);
    if (st != GW_OK)
        return printf("init: %s\n", gw_status_str(st)), 1;
    double t_init = now_ms() - t0;
    int rank = gw_comm_rank(comm), size = gw_comm_size(comm);
    int fds_init, socks_init, fds_ring, socks_ring, fds_all, socks_all;
    count_fds(&fds_init, &socks_init);
    long rss_init = rss_kb();
    int maps_init = count_shm_maps();
    gw_comm_set_algo(comm, GW_ALGO_RING);
    float buf[1024];
    if (ring_allreduce(comm, buf, 1024))
        return 1;
    double t_first = now_ms() - t0;
    count_fds(&fds_ring, &socks_ring);
    long rss_ring = rss_kb();
    int maps_ring = count_shm_maps();
    float *a = calloc((size_t)size, sizeof(float)), *b = calloc((size_t)size, sizeof(float));
    st = gw_alltoall(comm, a, b, 1, GW_FLOAT32);
    if (st != GW_OK)
        return printf("rank %d: alltoall %s\n", rank, gw_status_str(st)), 1;
    double t_all = now_ms() - t0;
    count_fds(&fds_all, &socks_all);
    long rss_all = rss_kb();
    int maps_all = count_shm_maps();
    enum { NV = 12 };
    double v[NV] = {
        t_init,           t_first,          t_all,           fds_init,  fds_ring,  fds_all,
        (double)rss_init, (double)rss_ring, (double)rss_all, maps_init, maps_ring, maps_all};
    double min[NV], max[NV], sum[NV];
    st = reduce_stats(comm, v, NV, min, max, sum);
    if (st != GW_OK)
        return printf("rank %d: stats %s\n", rank, gw_status_str(st)), 1;
    if (rank == 0)
        printf("scale: n=%d transport=%s init_ms=%.1f last_init_ms=%.1f first_coll_ms=%.1f "
               "alltoall_ms=%.1f fds_init=%.0f/%.1f fds_ring=%.0f/%.1f fds_all=%.0f/%.1f "
               "rss_init_kb=%.0f/%.0f rss_ring_kb=%.0f/%.0f rss_all_kb=%.0f/%.0f "
               "shm_maps_init=%.0f/%.1f shm_maps_ring=%.0f/%.1f shm_maps_all=%.0f/%.1f "
               "(max/mean over ranks; times from before gw_comm_init)\n",
               size, gw_comm_transport(comm), max[0], min[0], max[1], max[2], max[3], sum[3] / size,
               max[4], sum[4] / size, max[5], sum[5] / size, max[6], sum[6] / size, max[7],
               sum[7] / size, max[8], sum[8] / size, max[9], sum[9] / size, max[10], sum[10] / size,
               max[11], sum[11] / size);
    free(a);
    free(b);
    gw_comm_destroy(comm);
    return 0;
}

static int ring_mode(gw_comm_t *comm)
{
    int rank = gw_comm_rank(comm);
    int fds0, socks0, fds1, socks1;
    gw_comm_set_algo(comm, GW_ALGO_RING);
    count_fds(&fds0, &socks0);
    int maps0 = count_shm_maps();
    float buf[4096];
    if (ring_allreduce(comm, buf, 4096))
        return 1;
    count_fds(&fds1, &socks1);
    int maps1 = count_shm_maps();
    printf("rank %d: ring opened %d sockets, %d open; %d shared-memory maps before, %d after\n",
           rank, socks1 - socks0, socks1, maps0, maps1);
    return 0;
}

static int p2p_mode(gw_comm_t *comm)
{
    int rank = gw_comm_rank(comm), size = gw_comm_size(comm);
    int last = size - 1;
    int x = 0;
    gw_status_t st = GW_OK;
    if (rank == 0) {
        st = gw_recv(comm, &x, 1, GW_INT32, last);
        if (st == GW_OK && x != 4242)
            return printf("rank 0: got %d from rank %d, want 4242\n", x, last), 1;
        x = 4343;
        if (st == GW_OK)
            st = gw_send(comm, &x, 1, GW_INT32, last);
    } else if (rank == last) {
        usleep(300 * 1000);
        x = 4242;
        st = gw_send(comm, &x, 1, GW_INT32, 0);
        if (st == GW_OK)
            st = gw_recv(comm, &x, 1, GW_INT32, 0);
        if (st == GW_OK && x != 4343)
            return printf("rank %d: got %d from rank 0, want 4343\n", rank, x), 1;
    }
    if (st != GW_OK)
        return printf("rank %d: p2p %s\n", rank, gw_status_str(st)), 1;
    float buf[256];
    if (ring_allreduce(comm, buf, 256))
        return 1;
    printf("rank %d: ok\n", rank);
    return 0;
}

static int dead_mode(gw_comm_t *comm, int dead)
{
    int rank = gw_comm_rank(comm);
    if (rank == dead) {
        fflush(stdout);
        _exit(0); /* no goodbye, no connection ever made */
    }
    if (rank != 0 && (dead != 1 || rank != 2)) {
        usleep(2000 * 1000); /* the others wait quietly, then leave */
        _exit(0);
    }
    int x = 7;
    double t0 = now_ms();
    gw_status_t st = gw_send(comm, &x, 1, GW_INT32, dead);
    printf("rank %d: %s culprit %d after %.0f ms\n", rank, gw_status_name(st),
           gw_comm_culprit(comm), now_ms() - t0);
    fflush(stdout);
    _exit(0); /* the communicator failed; nobody to say goodbye to */
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "time";
    if (strcmp(mode, "time") == 0)
        return time_mode();
    gw_comm_t *comm = NULL;
    gw_status_t st = gw_comm_init_env(&comm);
    if (st != GW_OK)
        return printf("init: %s\n", gw_status_str(st)), 1;
    int rc;
    if (strcmp(mode, "ring") == 0)
        rc = ring_mode(comm);
    else if (strcmp(mode, "p2p") == 0)
        rc = p2p_mode(comm);
    else if (strcmp(mode, "dead") == 0)
        rc = dead_mode(comm, 1);
    else if (strcmp(mode, "deadtop") == 0)
        rc = dead_mode(comm, gw_comm_size(comm) - 1);
    else
        rc = printf("unknown mode %s\n", mode) > 0 ? 2 : 2;
    gw_comm_destroy(comm);
    return rc;
}
