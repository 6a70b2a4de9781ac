/*
 * gpu_device_check.c - device buffers in real GPU memory (issue #19 item
 * 5), one process per rank under `gradwire launch -n N`, every rank on
 * GPU 0 (this program links the CUDA runtime, so the library recognises
 * its cudaMalloc'd pointers by itself):
 *
 *   gpu_device_check          every collective, blocking and not, the
 *                             compressed allreduce and point-to-point with
 *                             device buffers, each result checked element by
 *                             element; host and device buffers mixed in one
 *                             call; buffers declared rather than detected;
 *                             and the caller's stream: inputs written by
 *                             copies still queued on it when the call is
 *                             made must be the ones reduced.
 *   gpu_device_check --probe  (no launcher) exit 0 if there is a GPU, else
 *                             say why and exit 77: ctest's first step.
 *   gpu_device_check --bench  allreduce of device buffers against the same
 *                             call on host buffers, 1 MiB to 256 MiB; alone
 *                             (-n 1), the staging pipeline against pinned
 *                             copies in both directions at once.
 *
 * Inputs are small integers, exact in float32, bfloat16 and int32 sums over
 * up to 8 ranks, so every expected value is exact whatever order a
 * reduction takes, and a wrong or stale element shows. Output buffers start
 * as 0xFF bytes (NaN), so an element never written shows too. The ranks
 * agree on the outcome (an allreduce of failure counts): exit 0 when every
 * check passed on every rank, 1 otherwise, 77 without a GPU.
 */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "gradwire.h"

typedef struct ctx {
    gw_comm_t *comm;
    int rank, size;
    int checks, failures;
} ctx_t;

#define CUDA(call) cuda_ok((call), #call, __LINE__)
static void cuda_ok(cudaError_t e, const char *what, int line)
{
    if (e == cudaSuccess)
        return;
    fprintf(stderr, "gpu_device_check: line %d: %s: %s (%s)\n", line, what, cudaGetErrorName(e),
            cudaGetErrorString(e));
    exit(1);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* ---- data ------------------------------------------------------------- */

/* Rank r's input element i: an integer in [-50, 50]. */
static int val(int r, size_t i) { return (int)((i * 7u + (size_t)r * 13u) % 101u) - 50; }

static uint16_t bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); /* exact: small integers have short mantissas */
}

/* n elements of dtype holding val(r, first + i) (bfloat16: a quarter of it,
 * so sums over 8 ranks stay exact). */
static void *fill(gw_dtype_t t, size_t n, int r, size_t first)
{
    size_t es = gw_dtype_size(t);
    char *p = malloc(n * es + 1);
    for (size_t i = 0; i < n; i++) {
        int v = val(r, first + i);
        if (t == GW_FLOAT32) {
            float f = (float)v;
            memcpy(p + i * es, &f, es);
        } else if (t == GW_BFLOAT16) {
            uint16_t h = bf16((float)(v / 4));
            memcpy(p + i * es, &h, es);
        } else {
            int32_t x = v;
            memcpy(p + i * es, &x, es);
        }
    }
    return p;
}

/* op over every rank's fill(t, n, r, first). */
static void *reduced(const ctx_t *c, gw_dtype_t t, gw_op_t op, size_t n, size_t first)
{
    size_t es = gw_dtype_size(t);
    char *p = malloc(n * es + 1);
    for (size_t i = 0; i < n; i++) {
        long acc = op == GW_MAX ? -1000000 : 0;
        for (int r = 0; r < c->size; r++) {
            long v = t == GW_BFLOAT16 ? val(r, first + i) / 4 : val(r, first + i);
            acc = op == GW_MAX ? (v > acc ? v : acc) : acc + v;
        }
        if (t == GW_FLOAT32) {
            float f = (float)acc;
            memcpy(p + i * es, &f, es);
        } else if (t == GW_BFLOAT16) {
            uint16_t h = bf16((float)acc);
            memcpy(p + i * es, &h, es);
        } else {
            int32_t x = (int32_t)acc;
            memcpy(p + i * es, &x, es);
        }
    }
    return p;
}

/* ---- buffers ------------------------------------------------------------ */

typedef struct buf {
    void *p;
    int dev;
    size_t len;
} buf_t;

/* A device or host buffer of len bytes holding init (NULL: 0xFF bytes). */
static buf_t mk(int dev, size_t len, const void *init)
{
    buf_t b = {.dev = dev, .len = len};
    if (dev) {
        CUDA(cudaMalloc(&b.p, len ? len : 1));
        if (init)
            CUDA(cudaMemcpy(b.p, init, len, cudaMemcpyHostToDevice));
        else
            CUDA(cudaMemset(b.p, 0xFF, len));
    } else {
        b.p = malloc(len ? len : 1);
        if (init)
            memcpy(b.p, init, len);
        else
            memset(b.p, 0xFF, len);
    }
    return b;
}

static void *readback(const buf_t *b)
{
    void *h = malloc(b->len + 1);
    if (b->dev)
        CUDA(cudaMemcpy(h, b->p, b->len, cudaMemcpyDeviceToHost));
    else
        memcpy(h, b->p, b->len);
    return h;
}

static void drop(buf_t *b)
{
    if (b->dev)
        CUDA(cudaFree(b->p));
    else
        free(b->p);
    b->p = NULL;
}

/* ---- checks ------------------------------------------------------------- */

static int ok(ctx_t *c, gw_status_t st, const char *what)
{
    if (st == GW_OK)
        return 1;
    c->checks++;
    c->failures++;
    fprintf(stderr, "rank %d: FAIL %s: %s\n", c->rank, what, gw_status_name(st));
    return 0;
}

/* Compare len bytes of b's contents (from byte off) with want. */
static void expect(ctx_t *c, const char *what, const buf_t *b, size_t off, const void *want,
                   size_t len, size_t esize)
{
    char *got = readback(b);
    c->checks++;
    if (memcmp(got + off, want, len) != 0) {
        size_t i = 0;
        while (i < len && got[off + i] == ((const char *)want)[i])
            i++;
        c->failures++;
        fprintf(stderr, "rank %d: FAIL %s: element %zu of %zu differs\n", c->rank, what, i / esize,
                len / esize);
    }
    free(got);
}

/* Allreduce of n elements: send on device or host, receive likewise, or in
 * place (recv_dev < 0). */
static void allreduce_case(ctx_t *c, const char *what, gw_dtype_t t, gw_op_t op, size_t n,
                           int send_dev, int recv_dev)
{
    size_t es = gw_dtype_size(t);
    void *in = fill(t, n, c->rank, 0), *want = reduced(c, t, op, n, 0);
    buf_t s = mk(send_dev, n * es, in);
    buf_t r = recv_dev < 0 ? s : mk(recv_dev, n * es, NULL);
    if (ok(c, gw_allreduce(c->comm, s.p, r.p, n, t, op), what))
        expect(c, what, &r, 0, want, n * es, es);
    if (recv_dev >= 0)
        drop(&r);
    drop(&s);
    free(in);
    free(want);
}

static void broadcast_reduce(ctx_t *c, size_t n)
{
    size_t bytes = n * 4;
    int root = c->size - 1;
    void *in = fill(GW_FLOAT32, n, c->rank, 0), *rootin = fill(GW_FLOAT32, n, root, 0);
    void *sum = reduced(c, GW_FLOAT32, GW_SUM, n, 0);
    buf_t s = mk(1, bytes, in), r = mk(1, bytes, NULL);
    if (ok(c, gw_broadcast(c->comm, s.p, r.p, n, GW_FLOAT32, root), "broadcast"))
        expect(c, "broadcast from the last rank", &r, 0, rootin, bytes, 4);
    drop(&r);
    r = mk(1, bytes, NULL);
    if (ok(c, gw_reduce(c->comm, s.p, c->rank == 0 ? r.p : NULL, n, GW_FLOAT32, GW_SUM, 0),
           "reduce") &&
        c->rank == 0)
        expect(c, "reduce to rank 0", &r, 0, sum, bytes, 4);
    drop(&r);
    drop(&s);
    free(in);
    free(rootin);
    free(sum);
}

/* allgather, reduce_scatter, alltoall, gather, scatter: m elements a block. */
static void block_collectives(ctx_t *c, size_t m)
{
    const size_t n = (size_t)c->size, bytes = m * 4;
    void *mine = fill(GW_FLOAT32, m, c->rank, 0);
    void *mine_all = fill(GW_FLOAT32, n * m, c->rank, 0);
    buf_t s = mk(1, bytes, mine), sall = mk(1, n * bytes, mine_all), r;

    r = mk(1, n * bytes, NULL);
    if (ok(c, gw_allgather(c->comm, s.p, r.p, m, GW_FLOAT32), "allgather"))
        for (int j = 0; j < c->size; j++) {
            void *w = fill(GW_FLOAT32, m, j, 0);
            expect(c, "allgather block", &r, (size_t)j * bytes, w, bytes, 4);
            free(w);
        }
    drop(&r);

    r = mk(1, bytes, NULL);
    if (ok(c, gw_reduce_scatter(c->comm, sall.p, r.p, m, GW_FLOAT32, GW_SUM), "reduce_scatter")) {
        void *w = reduced(c, GW_FLOAT32, GW_SUM, m, (size_t)c->rank * m);
        expect(c, "reduce_scatter", &r, 0, w, bytes, 4);
        free(w);
    }
    drop(&r);

    r = mk(1, n * bytes, NULL);
    if (ok(c, gw_alltoall(c->comm, sall.p, r.p, m, GW_FLOAT32), "alltoall"))
        for (int j = 0; j < c->size; j++) {
            void *w = fill(GW_FLOAT32, m, j, (size_t)c->rank * m);
            expect(c, "alltoall block", &r, (size_t)j * bytes, w, bytes, 4);
            free(w);
        }
    drop(&r);

    int groot = 1 % c->size;
    r = mk(1, n * bytes, NULL);
    if (ok(c, gw_gather(c->comm, s.p, c->rank == groot ? r.p : NULL, m, GW_FLOAT32, groot),
           "gather") &&
        c->rank == groot)
        for (int j = 0; j < c->size; j++) {
            void *w = fill(GW_FLOAT32, m, j, 0);
            expect(c, "gather block", &r, (size_t)j * bytes, w, bytes, 4);
            free(w);
        }
    drop(&r);

    /* Rank 0's sendbuf is fill(0, n*m): rank r gets its block r. */
    r = mk(1, bytes, NULL);
    if (ok(c, gw_scatter(c->comm, c->rank == 0 ? sall.p : NULL, r.p, m, GW_FLOAT32, 0),
           "scatter")) {
        void *w = fill(GW_FLOAT32, m, 0, (size_t)c->rank * m);
        expect(c, "scatter", &r, 0, w, bytes, 4);
        free(w);
    }
    drop(&r);
    drop(&s);
    drop(&sall);
    free(mine);
    free(mine_all);
}

/* allgatherv with gaps between the blocks (which must keep their 0xFF
 * bytes) and alltoallv with uneven pairs. */
static void v_collectives(ctx_t *c, size_t m)
{
    const int n = c->size;
    size_t counts[8], displs[8], total = 0;
    for (int j = 0; j < n; j++) {
        counts[j] = m / 2 + (size_t)j * 1000 + 1;
        displs[j] = total + (size_t)j; /* a gap of j elements before block j */
        total = displs[j] + counts[j];
    }
    void *mine = fill(GW_FLOAT32, counts[c->rank], c->rank, 0);
    buf_t s = mk(1, counts[c->rank] * 4, mine), r = mk(1, total * 4, NULL);
    if (ok(c, gw_allgatherv(c->comm, s.p, r.p, counts[c->rank], counts, displs, GW_FLOAT32),
           "allgatherv")) {
        char *want = malloc(total * 4);
        memset(want, 0xFF, total * 4);
        for (int j = 0; j < n; j++) {
            void *w = fill(GW_FLOAT32, counts[j], j, 0);
            memcpy(want + displs[j] * 4, w, counts[j] * 4);
            free(w);
        }
        expect(c, "allgatherv (gaps untouched)", &r, 0, want, total * 4, 4);
        free(want);
    }
    drop(&s);
    drop(&r);
    free(mine);

    /* Rank a sends (a + b) % 3 * 1000 + 7 elements to rank b: block b of
     * its send buffer is fill(a, count, b * 100000). */
    size_t sc[8], sd[8], rc[8], rd[8], st = 0, rt = 0;
    for (int j = 0; j < n; j++) {
        sc[j] = rc[j] = (size_t)((c->rank + j) % 3) * 1000 + 7;
        sd[j] = st;
        rd[j] = rt;
        st += sc[j];
        rt += rc[j];
    }
    char *send = malloc(st * 4);
    for (int j = 0; j < n; j++) {
        void *w = fill(GW_FLOAT32, sc[j], c->rank, (size_t)j * 100000);
        memcpy(send + sd[j] * 4, w, sc[j] * 4);
        free(w);
    }
    s = mk(1, st * 4, send);
    r = mk(1, rt * 4, NULL);
    if (ok(c, gw_alltoallv(c->comm, s.p, sc, sd, r.p, rc, rd, GW_FLOAT32), "alltoallv"))
        for (int j = 0; j < n; j++) {
            void *w = fill(GW_FLOAT32, rc[j], j, (size_t)c->rank * 100000);
            expect(c, "alltoallv block", &r, rd[j] * 4, w, rc[j] * 4, 4);
            free(w);
        }
    drop(&s);
    drop(&r);
    free(send);
}

/* Non-blocking: two allreduces and an allgather in flight at once. */
static void nonblocking(ctx_t *c, size_t n)
{
    void *in = fill(GW_FLOAT32, n, c->rank, 0), *want = reduced(c, GW_FLOAT32, GW_SUM, n, 0);
    buf_t s = mk(1, n * 4, in), r1 = mk(1, n * 4, NULL), r2 = mk(0, n * 4, NULL);
    buf_t g = mk(1, (size_t)c->size * 4096 * 4, NULL);
    gw_handle_t *h[3] = {NULL, NULL, NULL};
    if (ok(c, gw_iallreduce(c->comm, s.p, r1.p, n, GW_FLOAT32, GW_SUM, &h[0]), "iallreduce") &&
        ok(c, gw_iallreduce(c->comm, s.p, r2.p, n, GW_FLOAT32, GW_SUM, &h[1]), "iallreduce") &&
        ok(c, gw_iallgather(c->comm, s.p, g.p, 4096, GW_FLOAT32, &h[2]), "iallgather")) {
        int good = 1;
        for (int i = 0; i < 3; i++)
            good &= ok(c, gw_wait(h[i]), "gw_wait");
        if (good) {
            expect(c, "iallreduce to device", &r1, 0, want, n * 4, 4);
            expect(c, "iallreduce to host", &r2, 0, want, n * 4, 4);
            for (int j = 0; j < c->size; j++) {
                void *w = fill(GW_FLOAT32, 4096, j, 0);
                expect(c, "iallgather block", &g, (size_t)j * 4096 * 4, w, 4096 * 4, 4);
                free(w);
            }
        }
    }
    drop(&s);
    drop(&r1);
    drop(&r2);
    drop(&g);
    free(in);
    free(want);
}

/* The compressed allreduce on device buffers gives, step after step, the
 * bits the same calls give on host buffers (the codecs run on the staged
 * copies; error feedback carries over in the state). */
static void compressed(ctx_t *c, gw_codec_t codec, size_t n)
{
    gw_compress_config_t cfg;
    gw_compress_config_init(&cfg);
    cfg.codec = codec;
    cfg.seed = 7;
    gw_compress_state_t *sh = NULL, *sd = NULL;
    char what[64];
    snprintf(what, sizeof(what), "compressed allreduce (%s)", gw_codec_name(codec));
    if (!ok(c, gw_compress_state_create(&cfg, n, 1, &sh), what) ||
        !ok(c, gw_compress_state_create(&cfg, n, 1, &sd), what)) {
        gw_compress_state_destroy(sh);
        return;
    }
    float *in = fill(GW_FLOAT32, n, c->rank, 0), *hout = malloc(n * 4);
    buf_t din = mk(1, n * 4, in), dout = mk(1, n * 4, NULL);
    for (int step = 0; step < 3; step++) {
        if (!ok(c, gw_allreduce_compressed(c->comm, sh, in, hout, n), what) ||
            !ok(c, gw_allreduce_compressed(c->comm, sd, din.p, dout.p, n), what))
            break;
        expect(c, what, &dout, 0, hout, n * 4, 4);
    }
    drop(&din);
    drop(&dout);
    free(in);
    free(hout);
    gw_compress_state_destroy(sh);
    gw_compress_state_destroy(sd);
}

/* Point-to-point: sendrecv around the ring, then isend/irecv the other way,
 * device to device and device to host. */
static void p2p(ctx_t *c, size_t n)
{
    int right = (c->rank + 1) % c->size, left = (c->rank + c->size - 1) % c->size;
    void *in = fill(GW_FLOAT32, n, c->rank, 0);
    void *from_left = fill(GW_FLOAT32, n, left, 0), *from_right = fill(GW_FLOAT32, n, right, 0);
    buf_t s = mk(1, n * 4, in), r = mk(1, n * 4, NULL), rh = mk(0, n * 4, NULL);
    if (ok(c, gw_sendrecv(c->comm, s.p, n, right, r.p, n, left, GW_FLOAT32), "sendrecv"))
        expect(c, "sendrecv from the left", &r, 0, from_left, n * 4, 4);
    gw_handle_t *hs = NULL, *hr = NULL;
    if (ok(c, gw_irecv(c->comm, rh.p, n, GW_FLOAT32, right, &hr), "irecv") &&
        ok(c, gw_isend(c->comm, s.p, n, GW_FLOAT32, left, &hs), "isend") &&
        ok(c, gw_wait(hs), "wait isend") && ok(c, gw_wait(hr), "wait irecv"))
        expect(c, "irecv (device to host) from the right", &rh, 0, from_right, n * 4, 4);
    drop(&s);
    drop(&r);
    drop(&rh);
    free(in);
    free(from_left);
    free(from_right);
}

/* The caller's stream: the input is written by a copy queued on it behind
 * about a gigabyte of device-to-device copies, and the call is made at
 * once. Staging that did not wait for the stream would reduce the 0xFF
 * bytes (NaN) that are there before. */
static void caller_stream(ctx_t *c, size_t n)
{
    const size_t big = 256u << 20;
    cudaStream_t st;
    CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    void *a, *b, *pinned;
    CUDA(cudaMalloc(&a, big));
    CUDA(cudaMalloc(&b, big));
    CUDA(cudaMallocHost(&pinned, n * 4));
    float *in = fill(GW_FLOAT32, n, c->rank, 0), *want = reduced(c, GW_FLOAT32, GW_SUM, n, 0);
    memcpy(pinned, in, n * 4);
    buf_t din = mk(1, n * 4, NULL), dout = mk(1, n * 4, NULL);
    if (ok(c, gw_comm_set_cuda_stream(c->comm, st), "gw_comm_set_cuda_stream")) {
        for (int i = 0; i < 4; i++)
            CUDA(cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, big, cudaMemcpyDeviceToDevice, st));
        CUDA(cudaMemcpyAsync(din.p, pinned, n * 4, cudaMemcpyHostToDevice, st));
        int queued = cudaStreamQuery(st) == cudaErrorNotReady;
        if (ok(c, gw_allreduce(c->comm, din.p, dout.p, n, GW_FLOAT32, GW_SUM),
               "allreduce on the caller's stream"))
            expect(c, "allreduce after copies queued on the caller's stream", &dout, 0, want, n * 4,
                   4);
        if (!queued)
            fprintf(stderr, "rank %d: note: the stream's copies had finished before the call\n",
                    c->rank);
        ok(c, gw_comm_set_cuda_stream(c->comm, NULL), "gw_comm_set_cuda_stream(NULL)");
    }
    CUDA(cudaStreamSynchronize(st));
    drop(&din);
    drop(&dout);
    CUDA(cudaFree(a));
    CUDA(cudaFree(b));
    CUDA(cudaFreeHost(pinned));
    CUDA(cudaStreamDestroy(st));
    free(in);
    free(want);
}

static int check_all(ctx_t *c)
{
    const size_t big = 3 * (1u << 20) + 17; /* 4 chunks of 4 MiB, the last 17 elements */
    allreduce_case(c, "allreduce f32 sum, 1 element", GW_FLOAT32, GW_SUM, 1, 1, 1);
    allreduce_case(c, "allreduce f32 sum, 1000", GW_FLOAT32, GW_SUM, 1000, 1, 1);
    allreduce_case(c, "allreduce f32 sum, 4 chunks", GW_FLOAT32, GW_SUM, big, 1, 1);
    allreduce_case(c, "allreduce f32 sum in place, 4 chunks", GW_FLOAT32, GW_SUM, big, 1, -1);
    allreduce_case(c, "allreduce bf16 sum, 4 chunks", GW_BFLOAT16, GW_SUM, 2 * big, 1, 1);
    allreduce_case(c, "allreduce int32 max", GW_INT32, GW_MAX, big, 1, 1);
    allreduce_case(c, "allreduce host -> device", GW_FLOAT32, GW_SUM, big, 0, 1);
    allreduce_case(c, "allreduce device -> host", GW_FLOAT32, GW_SUM, big, 1, 0);
    broadcast_reduce(c, big);
    block_collectives(c, (1u << 20) + 3);
    v_collectives(c, 100000);
    nonblocking(c, big);
    compressed(c, GW_CODEC_INT8, big);
    compressed(c, GW_CODEC_TOPK, big);
    if (c->size > 1)
        p2p(c, big); /* a rank has no peer alone */
    caller_stream(c, big);
    if (ok(c, gw_comm_set_buffers(c->comm, GW_BUFFERS_DEVICE), "gw_comm_set_buffers")) {
        allreduce_case(c, "allreduce, buffers declared device", GW_FLOAT32, GW_SUM, 5000, 1, 1);
        ok(c, gw_comm_set_buffers(c->comm, GW_BUFFERS_AUTO), "gw_comm_set_buffers(AUTO)");
    }
    int32_t f = c->failures, total = 0;
    if (gw_allreduce(c->comm, &f, &total, 1, GW_INT32, GW_SUM) != GW_OK)
        total = -1;
    if (c->rank == 0)
        printf("%s: %d checks per rank on %d ranks (%s), %d failed\n", total == 0 ? "PASS" : "FAIL",
               c->checks, c->size, gw_comm_transport(c->comm), total);
    return total == 0 ? 0 : 1;
}

/* ---- benchmarks --------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define REPS 9

/* This process's CPU time so far (user + system), in us. */
static double cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* Median over REPS of the slowest rank's time of one allreduce, in us;
 * *cpu (may be NULL): this rank's host CPU time per allreduce over the
 * REPS (getrusage: every thread of the process, so the progress threads
 * and the staging too), in us. */
static double time_allreduce_cpu(ctx_t *c, void *s, void *r, size_t n, double *cpu)
{
    double t[REPS], cpu_total = 0;
    for (int i = -2; i < REPS; i++) {
        gw_barrier(c->comm);
        double t0 = now_us(), c0 = cpu_us();
        if (gw_allreduce(c->comm, s, r, n, GW_FLOAT32, GW_SUM) != GW_OK)
            return -1;
        double dt = now_us() - t0, slowest = 0;
        if (i >= 0)
            cpu_total += cpu_us() - c0;
        if (gw_allreduce(c->comm, &dt, &slowest, 1, GW_FLOAT64, GW_MAX) != GW_OK)
            return -1;
        if (i >= 0)
            t[i] = slowest;
    }
    qsort(t, REPS, sizeof(t[0]), cmp_double);
    if (cpu)
        *cpu = cpu_total / REPS;
    return t[REPS / 2];
}

static double time_allreduce(ctx_t *c, void *s, void *r, size_t n)
{
    return time_allreduce_cpu(c, s, r, n, NULL);
}

/* Median of REPS, in us, of len bytes copied down (dir 0), up (1) or both
 * at once on two streams (2), through pinned host memory. */
static double time_pinned(void *dev, void *dev2, void *host, void *host2, size_t len, int dir,
                          cudaStream_t s1, cudaStream_t s2)
{
    double t[REPS];
    for (int i = -2; i < REPS; i++) {
        double t0 = now_us();
        if (dir != 1)
            CUDA(cudaMemcpyAsync(host, dev, len, cudaMemcpyDeviceToHost, s1));
        if (dir != 0)
            CUDA(cudaMemcpyAsync(dev2, host2, len, cudaMemcpyHostToDevice, s2));
        CUDA(cudaStreamSynchronize(s1));
        CUDA(cudaStreamSynchronize(s2));
        if (i >= 0)
            t[i] = now_us() - t0;
    }
    qsort(t, REPS, sizeof(t[0]), cmp_double);
    return t[REPS / 2];
}

static void bench_staging(ctx_t *c)
{
    const char *chunk = getenv("GW_CUDA_CHUNK");
    printf("\nStaging on one rank (an allreduce of one rank copies each chunk down and up\n"
           "again; GW_CUDA_CHUNK=%s): its rate against pinned copies, in GB/s;\n"
           "both = device-to-host and host-to-device of the size at once on two streams,\n"
           "what a perfectly overlapped pipeline could reach:\n\n",
           chunk && *chunk ? chunk : "default");
    printf("| size | pinned D2H | pinned H2D | pinned both | staged allreduce | staged / both |\n"
           "|---|---|---|---|---|---|\n");
    cudaStream_t s1, s2;
    CUDA(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    for (size_t len = 16u << 20; len <= (512u << 20); len *= 4) {
        void *d1, *d2, *h1, *h2;
        CUDA(cudaMalloc(&d1, len));
        CUDA(cudaMalloc(&d2, len));
        CUDA(cudaMallocHost(&h1, len));
        CUDA(cudaMallocHost(&h2, len));
        CUDA(cudaMemset(d1, 0, len));
        double down = time_pinned(d1, d2, h1, h2, len, 0, s1, s2);
        double up = time_pinned(d1, d2, h1, h2, len, 1, s1, s2);
        double both = time_pinned(d1, d2, h1, h2, len, 2, s1, s2);
        double staged = time_allreduce(c, d1, d2, len / 4);
        printf("| %zu MiB | %.1f | %.1f | %.1f | %.1f | %.0f%% |\n", len >> 20, len / down / 1e3,
               len / up / 1e3, len / both / 1e3, len / staged / 1e3, 100.0 * both / staged);
        CUDA(cudaFree(d1));
        CUDA(cudaFree(d2));
        CUDA(cudaFreeHost(h1));
        CUDA(cudaFreeHost(h2));
    }
    CUDA(cudaStreamDestroy(s1));
    CUDA(cudaStreamDestroy(s2));
}

static int bench(ctx_t *c)
{
    const char *where = getenv("GW_CUDA_REDUCE");
    if (c->rank == 0)
        printf("Allreduce (float32 sum, out of place) on %d ranks over %s, all on one GPU:\n"
               "median of %d, the slowest rank's time; host buffers are malloc'd; device\n"
               "buffers reduced on the %s (GW_CUDA_REDUCE); host CPU = rank 0's CPU time\n"
               "per allreduce (getrusage, all its threads)\n\n"
               "| size | host buffers | device buffers | device / host time | host CPU, host "
               "buffers | host CPU, device buffers |\n"
               "|---|---|---|---|---|---|\n",
               c->size, gw_comm_transport(c->comm), REPS,
               where && strcmp(where, "host") == 0 ? "CPU" : "GPU");
    for (size_t len = 1u << 20; len <= (256u << 20); len *= 4) {
        size_t n = len / 4;
        void *in = fill(GW_FLOAT32, n, c->rank, 0);
        buf_t hs = mk(0, len, in), hr = mk(0, len, NULL), ds = mk(1, len, in),
              dr = mk(1, len, NULL);
        double ch = 0, cd = 0;
        double th = time_allreduce_cpu(c, hs.p, hr.p, n, &ch);
        double td = time_allreduce_cpu(c, ds.p, dr.p, n, &cd);
        if (th < 0 || td < 0) {
            fprintf(stderr, "rank %d: an allreduce failed\n", c->rank);
            return 1;
        }
        if (c->rank == 0)
            printf("| %zu MiB | %.0f us (%.2f GB/s) | %.0f us (%.2f GB/s) | %.2f | %.0f us | %.0f "
                   "us |\n",
                   len >> 20, th, len / th / 1e3, td, len / td / 1e3, td / th, ch, cd);
        drop(&hs);
        drop(&hr);
        drop(&ds);
        drop(&dr);
        free(in);
    }
    if (c->size == 1)
        bench_staging(c);
    return 0;
}

int main(int argc, char **argv)
{
    int do_bench = argc > 1 && strcmp(argv[1], "--bench") == 0;
    int probe = argc > 1 && strcmp(argv[1], "--probe") == 0;
    if (argc > 2 || (argc == 2 && !do_bench && !probe)) {
        fprintf(stderr, "usage: gradwire launch -n N -- %s [--bench]\n       %s --probe\n", argv[0],
                argv[0]);
        return 2;
    }
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA GPU (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    if (probe)
        return 0;
    CUDA(cudaSetDevice(0));
    ctx_t c = {0};
    gw_status_t st = gw_comm_init_env(&c.comm);
    if (st != GW_OK) {
        fprintf(stderr, "gpu_device_check: gw_comm_init_env: %s\n", gw_status_name(st));
        return 1;
    }
    c.rank = gw_comm_rank(c.comm);
    c.size = gw_comm_size(c.comm);
    if (c.size > 8) {
        fprintf(stderr, "gpu_device_check: at most 8 ranks\n");
        gw_comm_destroy(c.comm);
        return 2;
    }
    int rc = do_bench ? bench(&c) : check_all(&c);
    gw_comm_destroy(c.comm);
    return rc;
}
