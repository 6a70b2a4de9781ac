/*
 * compress_api.c - gw_allreduce_compressed: the steps every codec shares
 * (see codec.h for the order), the dense path, and the statistics.
 *
 * Non-finite gradients are found collectively rather than locally. Each
 * rank sends the maximum |x| of its buckets before anything else, and those
 * maxima are reduced with IEEE maximum, under which a NaN wins over every
 * number and infinity over every finite one. So every rank learns in the
 * same exchange whether any rank holds a NaN or an infinity, and all of them
 * return GW_ERR_INVALID_ARG together. Nobody is left waiting in a
 * collective, so the communicator need not be broken, and nothing has been
 * sent from which a NaN could spread into a peer's result. The exchange is
 * not wasted on other calls: int8 takes its shared scales from it, fp16 its
 * range.
 *
 * A plain invalid argument on one rank (NULL buffer, wrong count) is a
 * programming error the others cannot know about; as in api.c it breaks the
 * communicator so that they fail instead of waiting.
 *
 * The work is done by execute() on whichever thread drives the
 * communicator's transport. gw_allreduce_compressed hands the core's
 * scheduler a handle that carries execute() and the state (gw__async_run,
 * async.c), which runs it right here while the communicator has no
 * progress thread, and otherwise queues it behind the pending non-blocking
 * calls and waits, exactly as api.c does for gw_allreduce; that is also the
 * path of gw_iallreduce_compressed (gw__async_start), minus the wait.
 * Either way a state is only ever touched by one thread at a time.
 *
 * float16 and bfloat16 gradients (gw_allreduce_compressed_dtype) are
 * widened to float32 scratch first, go through exactly the float32 path
 * (residual and codec state stay float32), and the average is rounded back
 * to the input's type once, to nearest even. That final rounding is not
 * fed back (it is below the precision the caller asked for).
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/api/api.h"
#include "collectives/compress/codec.h"
#include "collectives/reduce_half.h"

/* x[0..n) = g + residual, the residual skipped where it is zero (so that x
 * is g bit for bit there, -0.0 included: gw__cz_plus_residual); returns the
 * largest |x| as an order-preserving integer (NaN above infinity above
 * everything). */
GW__CZ_HOT static uint32_t add_residual(const float *g, const float *res, float *x, size_t n)
{
    int32_t m = 0; /* |x| bit patterns are below 2^31: a signed max is enough */
    for (size_t i = 0; i < n; i++) {
        x[i] = gw__cz_plus_residual(g[i], res[i]);
        int32_t a = (int32_t)gw__cz_absbits(x[i]);
        m = a > m ? a : m;
    }
    return (uint32_t)m;
}

GW__CZ_HOT static uint32_t copy_max(const float *g, float *x, size_t n)
{
    int32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        x[i] = g[i];
        int32_t a = (int32_t)gw__cz_absbits(g[i]);
        m = a > m ? a : m;
    }
    return (uint32_t)m;
}

/* Top-k momentum: un = mom u + g (the new velocity), then x = un + res as
 * add_residual forms it, or x = un where res is NULL (no error feedback). */
GW__CZ_HOT static uint32_t add_velocity(const float *g, const float *u, float *un, const float *res,
                                        float *x, size_t n, float mom)
{
    int32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        float v = mom * u[i] + g[i];
        un[i] = v;
        x[i] = res ? gw__cz_plus_residual(v, res[i]) : v;
        int32_t a = (int32_t)gw__cz_absbits(x[i]);
        m = a > m ? a : m;
    }
    return (uint32_t)m;
}

/* x = g + residual (or g without error feedback; with top-k momentum, the
 * new velocity in place of g), and the largest |x| of every bucket. */
static void prepare(const gw_compress_state_t *st, const float *g, float *x, size_t count,
                    size_t bucket, uint32_t *maxbits)
{
    const float *res = st->cfg.error_feedback ? st->residual : NULL;
    const float mom = (float)st->cfg.momentum;
    size_t b = 0;
    for (size_t lo = 0; lo < count; lo += bucket, b++) {
        size_t len = count - lo < bucket ? count - lo : bucket;
        if (st->extra_next)
            maxbits[b] = add_velocity(g + lo, st->extra + lo, st->extra_next + lo,
                                      res ? res + lo : NULL, x + lo, len, mom);
        else
            maxbits[b] =
                res ? add_residual(g + lo, res + lo, x + lo, len) : copy_max(g + lo, x + lo, len);
    }
    if (count == 0)
        maxbits[0] = 0;
}

uint32_t gw__cz_form_x(gw__cz_call_t *call)
{
    uint32_t m;
    prepare(call->st, call->in, call->x, call->count, call->count ? call->count : 1, &m);
    return m;
}

/* Say which element is not finite, on the rank that holds it. */
static void report_nonfinite(gw_comm_t *comm, const gw_compress_state_t *st, const float *g,
                             const float *x, size_t count)
{
    const char *added = st->extra_next ? "its velocity and error-feedback residual are"
                                       : "its error-feedback residual is";
    for (size_t i = 0; i < count; i++) {
        if (gw__cz_absbits(g[i]) >= 0x7f800000u) {
            GW_ERROR(&comm->log, "compress",
                     "gw_allreduce_compressed: gradient element %zu is %s; the step is skipped "
                     "on every rank (no gradient data was sent, the state is unchanged)",
                     i, g[i] != g[i] ? "NaN" : "infinite");
            return;
        }
        if (gw__cz_absbits(x[i]) >= 0x7f800000u) {
            GW_ERROR(&comm->log, "compress",
                     "gw_allreduce_compressed: gradient element %zu (%g) overflows when %s "
                     "added; the step is skipped on every rank",
                     i, (double)g[i], added);
            return;
        }
    }
}

static int is_dense(const gw_compress_state_t *st, int n)
{
    if (!st->ops || st->step < st->cfg.warmup_steps || st->count < st->cfg.min_elements)
        return 1;
    return st->ops->go_dense && st->ops->go_dense(st, n);
}

static gw_status_t run_dense(gw__cz_call_t *call)
{
    gw_comm_t *comm = call->comm;
    /* The algorithm gw_allreduce would choose, so the result is bitwise
     * what gw_allreduce(..., GW_FLOAT32, GW_AVG) gives for the same x. */
    gw_algo_t algo = gw_comm_pick_algo(comm, call->count, GW_FLOAT32);
    gw_status_t st =
        gw__cz_allreduce(call, call->x, call->out, call->count, GW_FLOAT32, GW_SUM, algo);
    if (st != GW_OK)
        return st;
    int64_t t0 = gw__cz_now();
    if ((st = gw__coll_finish_avg(comm, call->out, call->count, GW_FLOAT32, call->n)) != GW_OK)
        return st;
    if (call->count)
        memset(call->x, 0, call->count * sizeof(float)); /* everything was sent */
    call->decode_ns += gw__cz_now() - t0;
    call->encoded_bytes = (uint64_t)call->count * sizeof(float);
    return GW_OK;
}

static void add_stats(gw_compress_stats_t *t, const gw_compress_stats_t *l)
{
    t->calls += l->calls;
    t->compressed_calls += l->compressed_calls;
    t->input_bytes += l->input_bytes;
    t->encoded_bytes += l->encoded_bytes;
    t->bytes_sent += l->bytes_sent;
    t->dense_bytes_sent += l->dense_bytes_sent;
    t->compression_ratio =
        t->bytes_sent ? (double)t->dense_bytes_sent / (double)t->bytes_sent : 0.0;
    t->encode_seconds += l->encode_seconds;
    t->decode_seconds += l->decode_seconds;
    t->comm_seconds += l->comm_seconds;
    t->total_seconds += l->total_seconds;
    t->codec_cpu_seconds += l->codec_cpu_seconds;
}

static void record(gw_compress_state_t *st, const gw__cz_call_t *call, int dense,
                   uint64_t bytes_sent, int64_t prep_ns, int64_t total_ns, int64_t cpu_ns)
{
    gw_compress_stats_t *l = &st->last;
    memset(l, 0, sizeof(*l));
    l->calls = 1;
    l->compressed_calls = dense ? 0 : 1;
    l->input_bytes = (uint64_t)call->count * sizeof(float);
    l->encoded_bytes = call->encoded_bytes;
    l->bytes_sent = bytes_sent;
    l->dense_bytes_sent = gw__cz_ring_bytes(call->count, sizeof(float), call->n, call->rank);
    l->compression_ratio = bytes_sent ? (double)l->dense_bytes_sent / (double)bytes_sent : 0.0;
    l->encode_seconds = (double)(prep_ns + call->encode_ns) / 1e9;
    l->decode_seconds = (double)call->decode_ns / 1e9;
    l->comm_seconds = (double)call->comm_ns / 1e9;
    l->total_seconds = (double)total_ns / 1e9;
    l->codec_cpu_seconds = (double)(cpu_ns - call->comm_cpu_ns) / 1e9;
    add_stats(&st->total, l);
}

static gw_status_t bad_call(gw_comm_t *comm, const char *what, size_t a, size_t b)
{
    GW_ERROR(&comm->log, "compress", "gw_allreduce_compressed: %s (%zu, expected %zu)", what, a, b);
    return gw__comm_fail(comm, GW_ERR_INVALID_ARG);
}

/* Everything after the arguments were found good. */
static gw_status_t compressed(gw__cz_call_t *call, const float *in, int *dense_out,
                              int64_t *prep_ns)
{
    gw_compress_state_t *st = call->st;
    gw_comm_t *comm = call->comm;
    int dense = is_dense(st, call->n);
    size_t bucket = !dense && st->ops->per_bucket_max ? st->cfg.bucket_elements : call->count;
    if (bucket == 0)
        bucket = 1;
    size_t nmax = call->count ? (call->count - 1) / bucket + 1 : 1;
    *dense_out = dense;

    int64_t t0 = gw__cz_now();
    void *mem;
    gw_status_t s = gw__cz_work(call, 0, 2 * nmax * sizeof(uint32_t), &mem);
    if (s != GW_OK)
        return gw__comm_fail(comm, s);
    uint32_t *local = mem, *global = local + nmax;
    if (!dense && st->ops->prepare)
        local[0] = st->ops->prepare(call); /* one maximum (per_bucket_max is 0) */
    else
        prepare(st, in, call->x, call->count, bucket, local);
    *prep_ns = gw__cz_now() - t0;

    s = gw__cz_allreduce(call, local, global, nmax, GW_FLOAT32, GW_MAX, GW_ALGO_AUTO);
    if (s != GW_OK)
        return s;
    int bad = 0;
    for (size_t b = 0; b < nmax; b++)
        bad |= global[b] >= 0x7f800000u; /* |NaN| and |inf| bit patterns */
    if (bad) {
        int mine = 0;
        for (size_t b = 0; b < nmax; b++)
            mine |= local[b] >= 0x7f800000u;
        if (mine) {
            if (call->prepared)
                gw__cz_form_x(call); /* x itself, not a codec's guess at its encoding */
            report_nonfinite(comm, st, in, call->x, call->count);
        } else {
            GW_WARN(&comm->log, "compress",
                    "gw_allreduce_compressed: another rank's gradient holds a NaN or infinity; "
                    "the step is skipped on every rank");
        }
        return GW_ERR_INVALID_ARG;
    }
    /* Settings are known to agree now (the exchange above carried them in
     * its signature), so a limit of the codec is the same on every rank and
     * can be reported without breaking the communicator. */
    if (!dense && st->ops->check_ranks) {
        s = st->ops->check_ranks(st, call->n, &comm->log);
        if (s != GW_OK)
            return s;
    }
    call->gmax = (const float *)(const void *)global;
    call->ngmax = nmax;
    return dense ? run_dense(call) : st->ops->run(call);
}

/* One gw_allreduce_compressed on the thread that drives the transport: the
 * caller's, or the progress thread's. */
static gw_status_t execute(gw_comm_t *comm, gw_compress_state_t *state, const float *in, float *out,
                           size_t count)
{
    if (comm->failed != GW_OK)
        return comm->failed;
    if (!state) {
        GW_ERROR(&comm->log, "compress", "gw_allreduce_compressed: state is NULL");
        return gw__comm_fail(comm, GW_ERR_INVALID_ARG);
    }
    if (count != state->count)
        return bad_call(comm, "count is not the element count of the state", count, state->count);
    if (count > 0 && (!in || !out))
        return bad_call(comm, "NULL buffer with a non-zero count", count, count);

    int64_t t_start = gw__cz_now(), cpu_start = gw__cz_cpu_now();
    gw__cz_call_t call;
    memset(&call, 0, sizeof(call));
    call.comm = comm;
    call.st = state;
    call.n = comm->size;
    call.rank = comm->rank;
    call.count = count;
    call.in = in;
    call.x = state->next;
    call.out = out;
    call.key = gw__cz_mix(state->cfg.seed, state->step);

    const uint64_t sent_before = comm->bytes_sent;
    int dense = 1;
    int64_t prep_ns = 0;
    gw_status_t st = compressed(&call, in, &dense, &prep_ns);
    if (st != GW_OK)
        return st;

    if (state->cfg.error_feedback) {
        float *t = state->residual;
        state->residual = state->next;
        state->next = t;
    }
    if (state->extra_next) {
        float *t = state->extra;
        state->extra = state->extra_next;
        state->extra_next = t;
    }
    state->step++;
    record(state, &call, dense, comm->bytes_sent - sent_before, prep_ns, gw__cz_now() - t_start,
           gw__cz_cpu_now() - cpu_start);
    return GW_OK;
}

/* A float16 or bfloat16 call: widened, the float32 path, rounded back. */
static gw_status_t execute_half(gw_comm_t *comm, gw_compress_state_t *state, const uint16_t *in,
                                uint16_t *out, size_t count, gw_dtype_t dtype)
{
    if (comm->failed != GW_OK)
        return comm->failed;
    if (!state || count != state->count || (count > 0 && (!in || !out)))
        return execute(comm, state, NULL, NULL, count); /* it reports which */
    float *fin = malloc((count ? count : 1) * sizeof(float));
    float *fout = malloc((count ? count : 1) * sizeof(float));
    if (!fin || !fout) {
        free(fin);
        free(fout);
        GW_ERROR(&comm->log, "compress", "gw_allreduce_compressed_dtype: no memory for %zu floats",
                 2 * count);
        return gw__comm_fail(comm, GW_ERR_NO_MEMORY);
    }
    gw_half_isa_t isa = gw__half_isa_best();
    (void)gw__half_widen_isa(fin, in, count, dtype, isa);
    gw_status_t st = execute(comm, state, fin, fout, count);
    if (st == GW_OK)
        (void)gw__half_narrow_isa(out, fout, count, dtype, isa);
    free(fin);
    free(fout);
    return st;
}

static gw_status_t execute_handle(gw_comm_t *comm, const gw_handle_t *h)
{
    switch (h->args.dtype) {
    case GW_FLOAT32:
        return execute(comm, h->ctx, h->args.sendbuf, h->args.recvbuf, h->args.count);
    case GW_FLOAT16:
    case GW_BFLOAT16:
        return execute_half(comm, h->ctx, h->args.sendbuf, h->args.recvbuf, h->args.count,
                            h->args.dtype);
    default:
        GW_ERROR(&comm->log, "compress",
                 "gw_allreduce_compressed_dtype: %s gradients cannot be compressed (float32, "
                 "float16 and bfloat16 can)",
                 gw_dtype_name(h->args.dtype));
        return gw__comm_fail(comm, GW_ERR_INVALID_ARG);
    }
}

/* The handle of a call: the arguments as the signature describes them and
 * the state, run by execute_handle. */
static gw_handle_t describe(gw_compress_state_t *state, const void *in, void *out, size_t count,
                            gw_dtype_t dtype)
{
    gw_handle_t h = {.execute = execute_handle,
                     .args = {.kind = GW_COLL_ALLREDUCE_COMPRESSED,
                              .sendbuf = in,
                              .recvbuf = out,
                              .count = count,
                              .dtype = dtype,
                              .op = GW_AVG},
                     .ctx = state};
    return h;
}

gw_status_t gw_allreduce_compressed(gw_comm_t *comm, gw_compress_state_t *state, const float *in,
                                    float *out, size_t count)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    gw_handle_t call = describe(state, in, out, count, GW_FLOAT32);
    return gw__async_run(comm, &call, "gw_allreduce_compressed");
}

gw_status_t gw_allreduce_compressed_dtype(gw_comm_t *comm, gw_compress_state_t *state,
                                          const void *in, void *out, size_t count, gw_dtype_t dtype)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    gw_handle_t call = describe(state, in, out, count, dtype);
    return gw__async_run(comm, &call, "gw_allreduce_compressed_dtype");
}

gw_status_t gw_iallreduce_compressed_dtype(gw_comm_t *comm, gw_compress_state_t *state,
                                           const void *in, void *out, size_t count,
                                           gw_dtype_t dtype, gw_handle_t **handle)
{
    if (!comm || !handle)
        return GW_ERR_INVALID_ARG;
    gw_handle_t call = describe(state, in, out, count, dtype);
    return gw__async_start(comm, &call, handle);
}

gw_status_t gw_iallreduce_compressed(gw_comm_t *comm, gw_compress_state_t *state, const float *in,
                                     float *out, size_t count, gw_handle_t **handle)
{
    if (!comm || !handle)
        return GW_ERR_INVALID_ARG;
    /* Everything else, a NULL state included, is checked when the call
     * runs, so that it fails the way the blocking call would, in order. */
    gw_handle_t call = describe(state, in, out, count, GW_FLOAT32);
    return gw__async_start(comm, &call, handle);
}

gw_status_t gw_compress_stats_get(const gw_compress_state_t *state, gw_compress_stats_t *last,
                                  gw_compress_stats_t *total)
{
    if (!state)
        return GW_ERR_INVALID_ARG;
    if (last)
        *last = state->last;
    if (total)
        *total = state->total;
    return GW_OK;
}

void gw_compress_stats_reset(gw_compress_state_t *state)
{
    if (!state)
        return;
    memset(&state->last, 0, sizeof(state->last));
    memset(&state->total, 0, sizeof(state->total));
}
