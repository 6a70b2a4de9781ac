/*
 * test_device_buffers.c - every collective, the compressed allreduce and
 * every point-to-point call with "device" buffers (ordinary memory that the
 * host copy engine declares device memory, so it is staged exactly as CUDA
 * memory would be) on 2 to 4 real ranks over TCP and shared memory: each
 * result must equal, bit for bit, the same call's result with host buffers.
 * GW_CUDA_CHUNK is 4096 bytes, so buffers of a few KiB are several chunks
 * with a short last one. The data are small integers (exact in float32),
 * so float sums do not depend on how chunks group them. Also: a copy that
 * fails mid-pipeline and a peer that dies mid-pipeline are errors that
 * name the rank, with every rank exiting cleanly (ASan: no leak).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/collectives/device/device_ranks.h"

#define N_AR 2500 /* 10000 bytes of float32: chunks of 4096, 4096, 1808 */

typedef struct bump {
    char *p;
    size_t left;
} bump_t;

static void *take(bump_t *b, size_t len)
{
    len = (len + 63) & ~(size_t)63;
    if (len > b->left)
        return NULL;
    void *p = b->p;
    b->p += len;
    b->left -= len;
    return p;
}

static void fill_f(float *x, size_t n, int rank, int salt)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((int)((i * 7 + (size_t)rank * 13 + (size_t)salt) % 61) - 30);
}

static void fill_i(int32_t *x, size_t n, int rank, int salt)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (int32_t)((i * 2654435761u + (size_t)rank * 40503u + (size_t)salt) % 100000u);
}

/* The call twice, once on host buffers h*, once on device buffers d*, each
 * initialised alike; then the outputs compared. */
#define SAME(e, what, hout, dout, bytes) \
    RCHECK(e, memcmp((hout), (dout), (bytes)) == 0, "%s: device result differs from host", what)

static void every_call(rank_env_t *e, const void *arg)
{
    (void)arg;
    gw_comm_t *c = e->comm;
    const int n = e->size, r = e->rank;
    bump_t b = {e->arena, e->arena_len};
    const size_t cap = 4 * N_AR * sizeof(float) * 4;
    char *h1 = calloc(1, cap), *h2 = calloc(1, cap), *h3 = calloc(1, cap);
    char *d1 = take(&b, cap), *d2 = take(&b, cap), *d3 = take(&b, cap);
    if (!h1 || !h2 || !h3 || !d1 || !d2 || !d3) {
        RFAIL(e, "out of memory");
        return;
    }
    gw_status_t st;
#define BOTH(what, outbytes, init, call_h, call_d)                          \
    do {                                                                    \
        memset(h2, 0x5a, cap);                                              \
        memset(d2, 0x5a, cap);                                              \
        init;                                                               \
        memcpy(d1, h1, cap);                                                \
        memcpy(d3, h3, cap);                                                \
        st = (call_h);                                                      \
        RCHECK(e, st == GW_OK, "%s (host): %s", what, gw_status_str(st));   \
        st = (call_d);                                                      \
        RCHECK(e, st == GW_OK, "%s (device): %s", what, gw_status_str(st)); \
        SAME(e, what, h2, d2, (outbytes));                                  \
        SAME(e, what " (in place or input)", h1, d1, cap);                  \
    } while (0)
    float *hf = (float *)h1;
    int32_t *hi = (int32_t *)h1;
    /* Chunked: allreduce (every op, in and out of place, mixed), broadcast,
     * reduce; shorter than a chunk and empty too. */
    static const gw_op_t ops[] = {GW_SUM, GW_MAX, GW_MIN, GW_AVG, GW_PROD};
    for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
        BOTH("allreduce f32", N_AR * 4, fill_f(hf, N_AR, r, (int)k),
             gw_allreduce(c, h1, h2, N_AR, GW_FLOAT32, ops[k]),
             gw_allreduce(c, d1, d2, N_AR, GW_FLOAT32, ops[k]));
        BOTH("allreduce i32", N_AR * 4, fill_i(hi, N_AR, r, (int)k),
             gw_allreduce(c, h1, h2, N_AR, GW_INT32, ops[k]),
             gw_allreduce(c, d1, d2, N_AR, GW_INT32, ops[k]));
    }
    BOTH("allreduce in place", 0, fill_f(hf, N_AR, r, 9),
         gw_allreduce(c, h1, h1, N_AR, GW_FLOAT32, GW_SUM),
         gw_allreduce(c, d1, d1, N_AR, GW_FLOAT32, GW_SUM));
    BOTH("allreduce short", 100 * 4, fill_f(hf, 100, r, 3),
         gw_allreduce(c, h1, h2, 100, GW_FLOAT32, GW_SUM),
         gw_allreduce(c, d1, d2, 100, GW_FLOAT32, GW_SUM));
    BOTH("allreduce exact chunks", 3072 * 4, fill_f(hf, 3072, r, 4),
         gw_allreduce(c, h1, h2, 3072, GW_FLOAT32, GW_SUM),
         gw_allreduce(c, d1, d2, 3072, GW_FLOAT32, GW_SUM));
    BOTH("allreduce empty", 16, (void)0, gw_allreduce(c, h1, h2, 0, GW_FLOAT32, GW_SUM),
         gw_allreduce(c, d1, d2, 0, GW_FLOAT32, GW_SUM));
    BOTH("allreduce device in, host out", N_AR * 4, fill_f(hf, N_AR, r, 5),
         gw_allreduce(c, h1, h2, N_AR, GW_FLOAT32, GW_SUM),
         gw_allreduce(c, d1, h3, N_AR, GW_FLOAT32, GW_SUM) == GW_OK
             ? (memcpy(d2, h3, N_AR * 4), GW_OK)
             : GW_ERR_SYSTEM);
    BOTH("allreduce host in, device out", N_AR * 4, fill_f(hf, N_AR, r, 6),
         gw_allreduce(c, h1, h2, N_AR, GW_FLOAT32, GW_SUM),
         gw_allreduce(c, h1, d2, N_AR, GW_FLOAT32, GW_SUM));
    BOTH("broadcast", N_AR * 4, fill_f(hf, N_AR, r, 7),
         gw_broadcast(c, h1, h2, N_AR, GW_FLOAT32, 1 % n),
         gw_broadcast(c, d1, d2, N_AR, GW_FLOAT32, 1 % n));
    BOTH("reduce", r == n - 1 ? N_AR * 4 : 0, fill_i(hi, N_AR, r, 8),
         gw_reduce(c, h1, h2, N_AR, GW_INT32, GW_SUM, n - 1),
         gw_reduce(c, d1, d2, N_AR, GW_INT32, GW_SUM, n - 1));
    /* Allgather and reduce-scatter are chunked per block (700 floats per
     * block: several pieces of 4096 / n bytes); the rest staged whole. */
    const size_t m = 700;
    BOTH("allgather", m * n * 4, fill_f(hf, m, r, 10), gw_allgather(c, h1, h2, m, GW_FLOAT32),
         gw_allgather(c, d1, d2, m, GW_FLOAT32));
    BOTH("reduce_scatter", m * 4, fill_f(hf, m * n, r, 11),
         gw_reduce_scatter(c, h1, h2, m, GW_FLOAT32, GW_SUM),
         gw_reduce_scatter(c, d1, d2, m, GW_FLOAT32, GW_SUM));
    BOTH("alltoall", m * n * 4, fill_i(hi, m * n, r, 12), gw_alltoall(c, h1, h2, m, GW_INT32),
         gw_alltoall(c, d1, d2, m, GW_INT32));
    BOTH("alltoall in place", 0, fill_i(hi, m * n, r, 13), gw_alltoall(c, h1, h1, m, GW_INT32),
         gw_alltoall(c, d1, d1, m, GW_INT32));
    size_t sc[8], sd[8], rc[8], rd[8], tot_s = 0, tot_r = 0;
    for (int j = 0; j < n; j++) {
        sc[j] = (size_t)(50 + 31 * r + 7 * j); /* to j: what j expects from r */
        rc[j] = (size_t)(50 + 31 * j + 7 * r);
        sd[j] = tot_s + 3;
        rd[j] = tot_r + 5; /* gaps that stay as they were */
        tot_s += sc[j] + 3;
        tot_r += rc[j] + 5;
    }
    BOTH("alltoallv", tot_r * 4 + 32, fill_i(hi, tot_s + 8, r, 14),
         gw_alltoallv(c, h1, sc, sd, h2, rc, rd, GW_INT32),
         gw_alltoallv(c, d1, sc, sd, d2, rc, rd, GW_INT32));
    BOTH("gather", r == 0 ? m * n * 4 : 0, fill_f(hf, m, r, 15),
         gw_gather(c, h1, h2, m, GW_FLOAT32, 0), gw_gather(c, d1, d2, m, GW_FLOAT32, 0));
    BOTH("scatter", m * 4, fill_f(hf, m * n, r, 16), gw_scatter(c, h1, h2, m, GW_FLOAT32, n - 1),
         gw_scatter(c, d1, d2, m, GW_FLOAT32, n - 1));
    size_t gc[8], gd[8], gtot = 0;
    for (int j = 0; j < n; j++) {
        gc[j] = (size_t)(100 + 13 * j);
        gd[j] = gtot + 2;
        gtot += gc[j] + 2;
    }
    BOTH("allgatherv", gtot * 4, fill_f(hf, gc[r], r, 17),
         gw_allgatherv(c, h1, h2, gc[r], gc, gd, GW_FLOAT32),
         gw_allgatherv(c, d1, d2, gc[r], gc, gd, GW_FLOAT32));
    BOTH("barrier", 0, (void)0, gw_barrier(c), gw_barrier(c));
    /* The compressed allreduce: two states of the same settings. */
    gw_compress_config_t cc;
    gw_compress_config_init(&cc);
    cc.codec = GW_CODEC_INT8;
    cc.min_elements = 0;
    gw_compress_state_t *s1 = NULL, *s2 = NULL;
    if (gw_compress_state_create(&cc, N_AR, 1, &s1) != GW_OK ||
        gw_compress_state_create(&cc, N_AR, 1, &s2) != GW_OK) {
        RFAIL(e, "compress state");
    } else {
        BOTH("allreduce_compressed", N_AR * 4, fill_f(hf, N_AR, r, 18),
             gw_allreduce_compressed(c, s1, (float *)h1, (float *)h2, N_AR),
             gw_allreduce_compressed(c, s2, (float *)d1, (float *)d2, N_AR));
    }
    /* Non-blocking, several in flight, device and host mixed. */
    gw_handle_t *hh[4];
    BOTH("iallreduce + iallgather", N_AR * 4, fill_f(hf, N_AR, r, 19),
         gw_iallreduce(c, h1, h2, N_AR, GW_FLOAT32, GW_SUM, &hh[0]) == GW_OK &&
                 gw_iallgather(c, h1, h3, m, GW_FLOAT32, &hh[1]) == GW_OK &&
                 gw_wait(hh[0]) == GW_OK && gw_wait(hh[1]) == GW_OK
             ? GW_OK
             : GW_ERR_SYSTEM,
         gw_iallreduce(c, d1, d2, N_AR, GW_FLOAT32, GW_SUM, &hh[2]) == GW_OK &&
                 gw_iallgather(c, d1, d3, m, GW_FLOAT32, &hh[3]) == GW_OK &&
                 gw_wait(hh[2]) == GW_OK && gw_wait(hh[3]) == GW_OK
             ? GW_OK
             : GW_ERR_SYSTEM);
    SAME(e, "iallgather", h3, d3, m * n * 4);
    if (s1 && s2) {
        BOTH("iallreduce_compressed", N_AR * 4, fill_f(hf, N_AR, r, 20),
             gw_iallreduce_compressed(c, s1, (float *)h1, (float *)h2, N_AR, &hh[0]) == GW_OK
                 ? gw_wait(hh[0])
                 : GW_ERR_SYSTEM,
             gw_iallreduce_compressed(c, s2, (float *)d1, (float *)d2, N_AR, &hh[1]) == GW_OK
                 ? gw_wait(hh[1])
                 : GW_ERR_SYSTEM);
    }
    gw_compress_state_destroy(s1);
    gw_compress_state_destroy(s2);
    /* Point to point around the ring: device to host, host to device,
     * device to device, blocking and not. */
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    size_t pinned_before = gw__host_engine_live_allocs(&e->engine);
    BOTH("sendrecv", N_AR * 4, fill_f(hf, N_AR, r, 21),
         gw_sendrecv(c, h1, N_AR, next, h2, N_AR, prev, GW_FLOAT32),
         gw_sendrecv(c, d1, N_AR, next, d2, N_AR, prev, GW_FLOAT32));
    BOTH("isend/irecv", N_AR * 4, fill_i(hi, N_AR, r, 22),
         gw_irecv(c, h2, N_AR, GW_INT32, prev, &hh[0]) == GW_OK &&
                 gw_isend(c, h1, N_AR, GW_INT32, next, &hh[1]) == GW_OK &&
                 gw_wait(hh[0]) == GW_OK && gw_wait(hh[1]) == GW_OK
             ? GW_OK
             : GW_ERR_SYSTEM,
         gw_irecv(c, d2, N_AR, GW_INT32, prev, &hh[2]) == GW_OK &&
                 gw_isend(c, d1, N_AR, GW_INT32, next, &hh[3]) == GW_OK &&
                 gw_wait(hh[2]) == GW_OK && gw_wait(hh[3]) == GW_OK
             ? GW_OK
             : GW_ERR_SYSTEM);
    /* Blocking send and receive in pairs (0 to 1, 2 to 3): device to host. */
    const int sender = r % 2 == 0 && r + 1 < n, receiver = r % 2 == 1;
    BOTH("send device, recv host", N_AR * 4, fill_f(hf, N_AR, r, 23),
         sender     ? gw_send(c, h1, N_AR, GW_FLOAT32, r + 1)
         : receiver ? gw_recv(c, h2, N_AR, GW_FLOAT32, r - 1)
                    : GW_OK,
         sender ? gw_send(c, d1, N_AR, GW_FLOAT32, r + 1)
         : receiver
             ? (gw_recv(c, h3, N_AR, GW_FLOAT32, r - 1) == GW_OK ? (memcpy(d2, h3, N_AR * 4), GW_OK)
                                                                 : GW_ERR_SYSTEM)
             : GW_OK);
    /* Completed messages leave their pinned copies in the pool (free for
     * the next message, at most GW_P2P_POOL), never in use. */
    gw_device_t *dev = gw__comm_root(c)->device;
    int busy = 0;
    for (int i = 0; i < GW_P2P_POOL; i++)
        busy += dev->pool[i].p && dev->pool[i].busy;
    RCHECK(e, busy == 0 && gw__host_engine_live_allocs(&e->engine) <= pinned_before + GW_P2P_POOL,
           "point-to-point left %d pinned buffers in use, %zu more pinned in all", busy,
           gw__host_engine_live_allocs(&e->engine) - pinned_before);
    free(h1);
    free(h2);
    free(h3);
}

static void run_every_call(const char *transport, int n)
{
    setenv("GW_CUDA_CHUNK", "4096", 1);
    ranks_opts_t o = {.transport = transport, .n = n, .fail_rank = -1, .arena_len = 1u << 20};
    o.engine.query_delay = 2;
    ranks_run(&o, every_call, NULL);
}

Test(device_buffers, every_call_tcp_2_ranks, .timeout = 120) { run_every_call("tcp", 2); }
Test(device_buffers, every_call_tcp_4_ranks, .timeout = 120) { run_every_call("tcp", 4); }
Test(device_buffers, every_call_shm_3_ranks, .timeout = 120) { run_every_call("shm", 3); }
Test(device_buffers, every_call_shm_4_ranks, .timeout = 120) { run_every_call("shm", 4); }

/* Rank 1's third copy fails (chunk 0 is through, chunk 1's or 2's copy
 * fails): rank 1 reports the engine's error, every rank fails, naming
 * rank 1, and exits cleanly. */
static void copy_fails(rank_env_t *e, const void *arg)
{
    (void)arg;
    float *d = (float *)e->arena;
    fill_f(d, N_AR, e->rank, 1);
    gw_status_t st = gw_allreduce(e->comm, d, d + N_AR, N_AR, GW_FLOAT32, GW_SUM);
    RCHECK(e, st != GW_OK, "a failed copy on rank 1 went unnoticed");
    RCHECK(e, gw_comm_culprit(e->comm) == 1, "blamed rank %d, not 1", gw_comm_culprit(e->comm));
    if (e->rank == 1)
        RCHECK(e, st == GW_ERR_SYSTEM, "rank 1: %s, not the copy's GW_ERR_SYSTEM",
               gw_status_str(st));
}

Test(device_buffers, a_failed_copy_fails_every_rank_naming_it, .timeout = 120)
{
    setenv("GW_CUDA_CHUNK", "4096", 1);
    ranks_opts_t o = {.transport = "tcp", .n = 3, .fail_rank = 1, .fail_copy = 3};
    ranks_run(&o, copy_fails, NULL);
}

/* Rank 1 takes part in chunk 0 only (a host allreduce of one chunk's
 * elements, the same collective on the wire), then dies: rank 0, in the
 * middle of its pipeline, fails with GW_ERR_REMOTE naming rank 1. */
static void peer_dies(rank_env_t *e, const void *arg)
{
    (void)arg;
    float *d = (float *)e->arena;
    fill_f(d, N_AR, e->rank, 1);
    if (e->rank == 1) {
        float part[1024];
        gw_allreduce(e->comm, d, part, 1024, GW_FLOAT32, GW_SUM);
        _exit(9);
    }
    gw_status_t st = gw_allreduce(e->comm, d, d + N_AR, N_AR, GW_FLOAT32, GW_SUM);
    RCHECK(e, st == GW_ERR_REMOTE || st == GW_ERR_ABORTED, "rank 0: %s, not GW_ERR_REMOTE",
           gw_status_str(st));
    RCHECK(e, gw_comm_culprit(e->comm) == 1, "blamed rank %d, not 1", gw_comm_culprit(e->comm));
}

Test(device_buffers, a_peer_dying_mid_pipeline_is_named, .timeout = 120)
{
    setenv("GW_CUDA_CHUNK", "4096", 1);
    ranks_opts_t o = {.transport = "tcp", .n = 2, .fail_rank = -1, .expect_exit = {0, 9}};
    ranks_run(&o, peer_dies, NULL);
}
