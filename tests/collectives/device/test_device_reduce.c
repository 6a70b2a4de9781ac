/*
 * test_device_reduce.c - the reductions of device-buffer calls run on the
 * device (collectives/device/device_reduce.c): on 3 real ranks over TCP,
 * with the host copy engine standing in for the GPU (its reduce is the CPU
 * kernel, deferred on the caller's stream until an event behind it is
 * waited for), every dtype x op of allreduce, reduce and reduce-scatter
 * on "device" buffers must
 *   - give the bits the same call gives on host buffers, cut into the same
 *     pieces as the staging pipeline cuts it (GW_CUDA_CHUNK bytes; per
 *     block for reduce-scatter), so that float sums group alike: a wrong
 *     offset, operand order or a read before the device finished differs;
 *   - have had every reduction done by the engine and none by the CPU,
 *     and the host call none by the engine.
 * The data are random bits (NaNs, infinities, wrapping integers included).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/reduce_kernels.h"
#include "tests/collectives/device/device_ranks.h"

#define CHUNK 4096
#define COUNT 2600 /* elements: several chunks and a short last one for every dtype */

static void fill(unsigned char *p, size_t bytes, int rank, int salt)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1) + (uint64_t)salt * 7919u;
    for (size_t i = 0; i < bytes; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (unsigned char)(x >> 24);
    }
}

typedef struct counts {
    uint64_t engine, cpu;
} counts_t;

static counts_t now(rank_env_t *e)
{
    gw_device_t *d = gw__comm_root(e->comm)->device;
    return (counts_t){d->engine_reduces, d->cpu_reduces};
}

static void expect_sides(rank_env_t *e, const char *what, counts_t before, counts_t mid,
                         counts_t after)
{
    RCHECK(e, mid.engine == before.engine, "%s: the host call reduced on the engine", what);
    RCHECK(e, mid.cpu > before.cpu, "%s: the host call did no CPU reduction", what);
    RCHECK(e, after.engine > mid.engine, "%s: the device call did no reduction on the engine",
           what);
    RCHECK(e, after.cpu == mid.cpu, "%s: the device call reduced %llu times on the CPU", what,
           (unsigned long long)(after.cpu - mid.cpu));
}

/* Host reference: the call on each piece the pipeline makes. */
static gw_status_t host_allreduce(gw_comm_t *c, const char *in, char *out, size_t count,
                                  gw_dtype_t dt, gw_op_t op, int root, int is_reduce)
{
    size_t es = gw_dtype_size(dt), pe = CHUNK / es;
    for (size_t first = 0; first < count; first += pe) {
        size_t n = count - first < pe ? count - first : pe;
        gw_status_t st = is_reduce
                             ? gw_reduce(c, in + first * es, out + first * es, n, dt, op, root)
                             : gw_allreduce(c, in + first * es, out + first * es, n, dt, op);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

static gw_status_t host_reduce_scatter(gw_comm_t *c, const char *in, char *out, size_t count,
                                       gw_dtype_t dt, gw_op_t op, int n)
{
    size_t es = gw_dtype_size(dt), pe = CHUNK / (size_t)n / es;
    pe = pe ? pe : 1;
    char *packed = malloc((size_t)n * pe * es);
    if (!packed)
        return GW_ERR_NO_MEMORY;
    gw_status_t st = GW_OK;
    for (size_t first = 0; first < count && st == GW_OK; first += pe) {
        size_t len = (count - first < pe ? count - first : pe) * es;
        for (int j = 0; j < n; j++)
            memcpy(packed + (size_t)j * len, in + ((size_t)j * count + first) * es, len);
        st = gw_reduce_scatter(c, packed, out + first * es, len / es, dt, op);
    }
    free(packed);
    return st;
}

static void every_dtype_and_op(rank_env_t *e, const void *arg)
{
    (void)arg;
    gw_comm_t *c = e->comm;
    const int n = e->size, r = e->rank;
    /* Reductions queue on the caller's stream and run only when waited
     * for: a pipeline that read them early would read old data. */
    void *stream;
    if (e->engine.ops->stream_create(e->engine.impl, &stream) != GW_OK ||
        gw_comm_set_cuda_stream(c, stream) != GW_OK) {
        RFAIL(e, "no stream");
        return;
    }
    const size_t cap = (size_t)n * COUNT * 8;
    char *hin = malloc(cap), *hout = malloc(cap);
    char *din = e->arena, *dout = e->arena + cap;
    if (!hin || !hout || 2 * cap > e->arena_len) {
        RFAIL(e, "out of memory");
        return;
    }
    char what[96];
    for (int dt = 0; dt < GW_DTYPE_COUNT; dt++) {
        size_t es = gw_dtype_size((gw_dtype_t)dt);
        for (int op = 0; op < GW_OP_COUNT; op++) {
            /* The pairs the library has (no bitwise op on a float), and
             * premul_sum only through its own calls (they carry the factor). */
            if (!gw__reduce_supported((gw_dtype_t)dt, (gw_op_t)op) || op == GW_PREMUL_SUM)
                continue;
            for (int kind = 0; kind < 3; kind++) {
                static const char *const names[] = {"allreduce", "reduce", "reduce_scatter"};
                snprintf(what, sizeof(what), "%s dtype %d op %d", names[kind], dt, op);
                size_t in_bytes = (kind == 2 ? (size_t)n : 1) * COUNT * es;
                size_t out_bytes = COUNT * es;
                fill((unsigned char *)hin, in_bytes, r, dt * 16 + op * 3 + kind);
                memcpy(din, hin, in_bytes);
                memset(hout, 0x5a, out_bytes);
                memset(dout, 0x5a, out_bytes);
                counts_t before = now(e);
                gw_status_t sh, sd;
                if (kind == 2)
                    sh = host_reduce_scatter(c, hin, hout, COUNT, (gw_dtype_t)dt, (gw_op_t)op, n);
                else
                    sh = host_allreduce(c, hin, hout, COUNT, (gw_dtype_t)dt, (gw_op_t)op, 1,
                                        kind == 1);
                counts_t mid = now(e);
                if (kind == 0)
                    sd = gw_allreduce(c, din, dout, COUNT, (gw_dtype_t)dt, (gw_op_t)op);
                else if (kind == 1)
                    sd = gw_reduce(c, din, dout, COUNT, (gw_dtype_t)dt, (gw_op_t)op, 1);
                else
                    sd = gw_reduce_scatter(c, din, dout, COUNT, (gw_dtype_t)dt, (gw_op_t)op);
                counts_t after = now(e);
                RCHECK(e, sh == GW_OK && sd == GW_OK, "%s: host %s, device %s", what,
                       gw_status_str(sh), gw_status_str(sd));
                if (sh != GW_OK || sd != GW_OK)
                    goto out;
                if (kind == 1 && r != 1) {
                    /* Off the root nothing is reduced into this rank's
                     * output, but its children's data may pass through. */
                    RCHECK(e, after.cpu == mid.cpu, "%s: the device call reduced on the CPU", what);
                    continue;
                }
                RCHECK(e, memcmp(hout, dout, out_bytes) == 0,
                       "%s: the device result differs from the host's", what);
                RCHECK(e, memcmp(hin, din, in_bytes) == 0, "%s: the input was changed", what);
                expect_sides(e, what, before, mid, after);
            }
        }
    }
out:
    gw_comm_set_cuda_stream(c, NULL);
    e->engine.ops->stream_destroy(e->engine.impl, stream);
    free(hin);
    free(hout);
}

Test(device_reduce, every_dtype_and_op_on_the_device_with_the_cpus_bits, .timeout = 120)
{
    setenv("GW_CUDA_CHUNK", "4096", 1);
    ranks_opts_t o = {.transport = "tcp", .n = 3, .fail_rank = -1, .arena_len = 8u << 20};
    ranks_run(&o, every_dtype_and_op, NULL);
}

/* A reduction the engine fails (the first, on every rank) is the call's
 * error, and the communicator is failed, as for a failed copy. */
static void failing_reduce(rank_env_t *e, const void *arg)
{
    (void)arg;
    float *x = (float *)e->arena;
    for (int i = 0; i < COUNT; i++)
        x[i] = (float)i;
    gw_status_t st = gw_allreduce(e->comm, x, x + COUNT, COUNT, GW_FLOAT32, GW_SUM);
    RCHECK(e, st == GW_ERR_SYSTEM, "the failed reduction gave %s", gw_status_str(st));
    RCHECK(e, gw_barrier(e->comm) != GW_OK, "the communicator is not failed");
}

Test(device_reduce, a_failed_device_reduction_fails_the_call, .timeout = 60)
{
    setenv("GW_CUDA_CHUNK", "4096", 1);
    ranks_opts_t o = {.transport = "tcp",
                      .n = 2,
                      .engine = {.fail_reduce = 1},
                      .fail_rank = -1,
                      .arena_len = 1u << 20};
    ranks_run(&o, failing_reduce, NULL);
}

/* GW_CUDA_REDUCE=host: the old path, the CPU reducing the pinned copies,
 * with the same bits; a bad value is refused when the communicator is
 * made. */
static void on_the_host(rank_env_t *e, const void *arg)
{
    (void)arg;
    float *x = (float *)e->arena, *y = x + COUNT;
    for (int i = 0; i < COUNT; i++)
        x[i] = (float)(i % 97) * 0.37f + (float)e->rank;
    counts_t before = now(e);
    gw_status_t st = gw_allreduce(e->comm, x, y, COUNT, GW_FLOAT32, GW_SUM);
    counts_t after = now(e);
    RCHECK(e, st == GW_OK, "allreduce: %s", gw_status_str(st));
    RCHECK(e, after.engine == before.engine && after.cpu > before.cpu,
           "GW_CUDA_REDUCE=host: %llu engine and %llu CPU reductions",
           (unsigned long long)(after.engine - before.engine),
           (unsigned long long)(after.cpu - before.cpu));
    float want[COUNT];
    RCHECK(e,
           host_allreduce(e->comm, (const char *)x, (char *)want, COUNT, GW_FLOAT32, GW_SUM, 0,
                          0) == GW_OK &&
               memcmp(want, y, sizeof(want)) == 0,
           "GW_CUDA_REDUCE=host: not the host call's bits");
}

Test(device_reduce, gw_cuda_reduce_host_keeps_the_cpu_path, .timeout = 60)
{
    setenv("GW_CUDA_CHUNK", "4096", 1);
    setenv("GW_CUDA_REDUCE", "host", 1);
    ranks_opts_t o = {.transport = "tcp", .n = 2, .fail_rank = -1, .arena_len = 1u << 20};
    ranks_run(&o, on_the_host, NULL);
    setenv("GW_RANK", "0", 1);
    setenv("GW_SIZE", "1", 1);
    setenv("GW_CUDA_REDUCE", "gpu", 1);
    gw_comm_t *comm = NULL;
    cr_expect_eq(gw_comm_init_env(&comm), GW_ERR_CONFIG, "GW_CUDA_REDUCE=gpu was accepted");
    gw_comm_destroy(comm);
    unsetenv("GW_CUDA_REDUCE");
}

/* Point-to-point messages of device buffers take their pinned copies from
 * the pool: 24 messages of sizes 1 to 48 KiB each way (several in flight
 * at once) pin a few buffers, not one per message, and every message
 * arrives intact. */
static void pooled_messages(rank_env_t *e, const void *arg)
{
    (void)arg;
    gw_comm_t *c = e->comm;
    int peer = 1 - e->rank;
    char *out = e->arena, *in = e->arena + (256u << 10);
    size_t before = gw__host_engine_allocs(&e->engine);
    for (int round = 0; round < 8; round++) {
        gw_handle_t *h[6];
        size_t len[3];
        for (int k = 0; k < 3; k++) {
            len[k] = 1024u * (size_t)(1 + (round * 5 + k * 7) % 48);
            for (size_t i = 0; i < len[k]; i++)
                out[k * 65536 + i] =
                    (char)(i * 31 + (size_t)round * 7 + (size_t)k + (size_t)e->rank);
            if (gw_irecv(c, in + k * 65536, len[k], GW_UINT8, peer, &h[2 * k]) != GW_OK ||
                gw_isend(c, out + k * 65536, len[k], GW_UINT8, peer, &h[2 * k + 1]) != GW_OK) {
                RFAIL(e, "round %d: posting failed", round);
                return;
            }
        }
        for (int k = 0; k < 6; k++)
            RCHECK(e, gw_wait(h[k]) == GW_OK, "round %d: message %d failed", round, k);
        for (int k = 0; k < 3; k++)
            for (size_t i = 0; i < len[k]; i++)
                if (in[k * 65536 + i] !=
                    (char)(i * 31 + (size_t)round * 7 + (size_t)k + (size_t)peer)) {
                    RFAIL(e, "round %d message %d: byte %zu is wrong", round, k, i);
                    break;
                }
    }
    size_t made = gw__host_engine_allocs(&e->engine) - before;
    RCHECK(e, made <= 8, "48 messages pinned %zu buffers: the pool is not reused", made);
}

Test(device_reduce, messages_reuse_pooled_pinned_buffers, .timeout = 60)
{
    ranks_opts_t o = {.transport = "tcp", .n = 2, .fail_rank = -1, .arena_len = 1u << 20};
    ranks_run(&o, pooled_messages, NULL);
}
