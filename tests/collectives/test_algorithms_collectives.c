/*
 * test_algorithms_collectives.c - the collectives other than allreduce:
 * broadcast and reduce from every root, allgather and reduce-scatter in and
 * out of place, and the dissemination barrier, at every rank count of
 * test_ns and counts that make one chunk or many.
 *
 * As in test_algorithms.c, results are checked against exact references
 * (algo_test_util.h), operands that are not outputs must stay untouched, and
 * non-root receive buffers must not be written.
 */
#include "algo_test_util.h"

/* ---------------------------------- broadcast ---------------------------------- */

typedef struct sized_arg {
    const size_t *counts;
    int ncounts;
    size_t chunk_bytes; /* for counts up to 1023; 4 KiB beyond, to keep the run short */
} sized_arg_t;

static size_t chunk_for(const sized_arg_t *a, size_t count)
{
    return count > 1023 ? 4096 : a->chunk_bytes;
}

static void broadcast_body(ctx_t *c, const void *arg)
{
    const sized_arg_t *a = arg;
    static const gw_dtype_t dts[] = {GW_INT32, GW_FLOAT16, GW_UINT8};
    int n = c->comm.size;
    for (int k = 0; k < a->ncounts; k++)
        for (int root = 0; root < n; root++) {
            int d = (root + k) % 3;
            size_t count = a->counts[k], bytes = count * gw_dtype_size(dts[d]);
            uint64_t seed = 1000 + (uint64_t)(k * 97 + d * 31 + root);
            unsigned char *buf = malloc(bytes + 1);
            for (size_t i = 0; i < bytes; i++)
                buf[i] = c->rank == root ? (unsigned char)rnd(seed, root, i) : 0xa5;
            c->comm.chunk_bytes = chunk_for(a, count);
            begin(c, GW_COLL_BROADCAST, count, dts[d], GW_SUM, root);
            gw_status_t st = gw__broadcast_tree(&c->comm, count ? buf : NULL, count, dts[d], root);
            char what[96];
            snprintf(what, sizeof(what), "broadcast %s count %zu root %d", gw_dtype_name(dts[d]),
                     count, root);
            CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
            for (size_t i = 0; st == GW_OK && i < bytes; i++) {
                if (buf[i] != (unsigned char)rnd(seed, root, i)) {
                    note(c, "%s: byte %zu differs from the root's", what, i);
                    break;
                }
            }
            sync_all(c); /* the next root must not overtake anyone */
            free(buf);
        }
}

Test(broadcast, every_root, .timeout = 60)
{
    /* 128-byte chunks: 7 elements fit one chunk (binomial tree), 100 make
     * one to four (tree or chain, depending on n and the dtype), 1023 and
     * more make many (chain). */
    static const size_t counts[] = {0, 1, 7, 100, 1023, 65537};
    sized_arg_t a = {counts, 6, 128};
    for (size_t k = 0; k < NNS; k++)
        job_run(test_ns[k], 10000, 1, broadcast_body, &a);
}

/* ----------------------------------- reduce ------------------------------------ */

static void reduce_body(ctx_t *c, const void *arg)
{
    const sized_arg_t *a = arg;
    static const combo_t combos[] = {{GW_INT32, GW_SUM},   {GW_FLOAT64, GW_MAX},
                                     {GW_FLOAT16, GW_SUM}, {GW_INT64, GW_PROD},
                                     {GW_FLOAT32, GW_SUM}, {GW_INT8, GW_MIN}};
    int n = c->comm.size;
    uint64_t seed = 5000;
    const size_t ncombos = sizeof(combos) / sizeof(combos[0]);
    /* Every root for every count; the dtype/op pairs rotate over the roots. */
    for (int k = 0; k < a->ncounts; k++)
        for (int root = 0; root < n; root++) {
            size_t j = ((size_t)root + (size_t)k) % ncombos;
            gw_dtype_t dt = combos[j].dt;
            gw_op_t op = combos[j].op;
            size_t count = a->counts[k], bytes = count * gw_dtype_size(dt);
            int in_place = (root + k) % 2 == 1 && c->rank == root;
            /* Non-roots pass NULL, or (every other case) a sentinel buffer
             * that must stay untouched. */
            int sentinel = (root / 2 + k) % 2 == 0;
            seed++;
            unsigned char *in = malloc(bytes + 1), *orig = malloc(bytes + 1);
            unsigned char *out = malloc(bytes + 1);
            for (size_t i = 0; i < count; i++)
                gen_exact(dt, op, seed, c->rank, i, in);
            memcpy(orig, in, bytes);
            memset(out, 0x5a, bytes);
            if (in_place)
                memcpy(out, in, bytes);
            void *rbuf = c->rank == root || sentinel ? out : NULL;
            const void *sbuf = in_place ? (const void *)out : (const void *)in;
            if (count == 0)
                sbuf = rbuf = NULL;
            c->comm.chunk_bytes = chunk_for(a, count);
            begin(c, GW_COLL_REDUCE, count, dt, op, root);
            gw_status_t st = gw__reduce_tree(&c->comm, sbuf, rbuf, count, dt, op, root);
            char what[128];
            snprintf(what, sizeof(what), "reduce %s/%s count %zu root %d%s", gw_dtype_name(dt),
                     gw_op_name(op), count, root, in_place ? " in place" : "");
            CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
            if (st == GW_OK) {
                if (!in_place)
                    CHECK(c, memcmp(in, orig, bytes) == 0, "%s: sendbuf was modified", what);
                if (c->rank == root) {
                    check_exact(c, what, out, count, dt, op, seed);
                } else {
                    for (size_t i = 0; i < bytes; i++)
                        if (out[i] != 0x5a) {
                            note(c, "%s: non-root recvbuf written at byte %zu", what, i);
                            break;
                        }
                }
            }
            sync_all(c);
            free(in);
            free(orig);
            free(out);
        }
}

Test(reduce, every_root, .timeout = 60)
{
    static const size_t counts[] = {0, 1, 7, 1023, 20000};
    sized_arg_t a = {counts, 5, 256};
    for (size_t k = 0; k < NNS; k++)
        job_run(test_ns[k], 10000, 1, reduce_body, &a);
}

/* ---------------------------------- allgather ---------------------------------- */

static void allgather_body(ctx_t *c, const void *arg)
{
    const sized_arg_t *a = arg;
    int n = c->comm.size;
    static const gw_dtype_t dts[] = {GW_INT32, GW_FLOAT64, GW_UINT8};
    for (int k = 0; k < a->ncounts; k++)
        for (int d = 0; d < 3; d++)
            for (int in_place = 0; in_place < 2; in_place++) {
                gw_dtype_t dt = dts[d];
                size_t m = a->counts[k], bytes = m * gw_dtype_size(dt);
                uint64_t seed = 9000 + (uint64_t)(k * 7 + d * 2 + in_place);
                unsigned char *in = malloc(bytes + 1), *orig = malloc(bytes + 1);
                unsigned char *out = malloc((size_t)n * bytes + 1);
                for (size_t i = 0; i < bytes; i++)
                    in[i] = (unsigned char)rnd(seed, c->rank, i);
                memcpy(orig, in, bytes);
                memset(out, 0xa5, (size_t)n * bytes);
                const void *sbuf = in;
                if (in_place) {
                    memcpy(out + (size_t)c->rank * bytes, in, bytes);
                    sbuf = out + (size_t)c->rank * bytes;
                }
                c->comm.chunk_bytes = chunk_for(a, m);
                begin(c, GW_COLL_ALLGATHER, m, dt, GW_SUM, 0);
                gw_status_t st =
                    gw__allgather_ring(&c->comm, m ? sbuf : NULL, m ? out : NULL, m, dt);
                char what[96];
                snprintf(what, sizeof(what), "allgather %s count %zu%s", gw_dtype_name(dt), m,
                         in_place ? " in place" : "");
                CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
                if (st == GW_OK) {
                    CHECK(c, memcmp(in, orig, bytes) == 0, "%s: sendbuf was modified", what);
                    for (int r = 0; r < n; r++)
                        for (size_t i = 0; i < bytes; i++)
                            if (out[(size_t)r * bytes + i] != (unsigned char)rnd(seed, r, i)) {
                                note(c, "%s: block %d byte %zu wrong", what, r, i);
                                r = n;
                                break;
                            }
                }
                sync_all(c);
                free(in);
                free(orig);
                free(out);
            }
}

Test(allgather, in_and_out_of_place, .timeout = 60)
{
    static const size_t counts[] = {0, 1, 7, 1023, 20000};
    sized_arg_t a = {counts, 5, 256};
    for (size_t k = 0; k < NNS; k++)
        job_run(test_ns[k], 10000, 1, allgather_body, &a);
}

/* -------------------------------- reduce-scatter -------------------------------- */

static void reduce_scatter_body(ctx_t *c, const void *arg)
{
    const sized_arg_t *a = arg;
    static const combo_t combos[] = {{GW_INT32, GW_SUM},   {GW_FLOAT32, GW_SUM},
                                     {GW_FLOAT64, GW_MIN}, {GW_INT64, GW_PROD},
                                     {GW_FLOAT16, GW_SUM}, {GW_BFLOAT16, GW_SUM}};
    int n = c->comm.size;
    uint64_t seed = 13000;
    for (int k = 0; k < a->ncounts; k++)
        for (size_t j = 0; j < sizeof(combos) / sizeof(combos[0]); j++)
            for (int in_place = 0; in_place < 2; in_place++) {
                gw_dtype_t dt = combos[j].dt;
                gw_op_t op = combos[j].op;
                size_t m = a->counts[k], es = gw_dtype_size(dt), total = (size_t)n * m;
                seed++;
                unsigned char *in = malloc(total * es + 1), *orig = malloc(total * es + 1);
                unsigned char *out = malloc(m * es + 1);
                for (size_t i = 0; i < total; i++)
                    gen_exact(dt, op, seed, c->rank, i, in);
                memcpy(orig, in, total * es);
                memset(out, 0xa5, m * es);
                void *rbuf = in_place ? in + (size_t)c->rank * m * es : out;
                c->comm.chunk_bytes = chunk_for(a, m);
                begin(c, GW_COLL_REDUCE_SCATTER, m, dt, op, 0);
                gw_status_t st =
                    gw__reduce_scatter_ring(&c->comm, m ? in : NULL, m ? rbuf : NULL, m, dt, op);
                char what[128];
                snprintf(what, sizeof(what), "reduce_scatter %s/%s count %zu%s", gw_dtype_name(dt),
                         gw_op_name(op), m, in_place ? " in place" : "");
                CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
                if (st == GW_OK) {
                    /* Everything but our own block of sendbuf stays as it was
                     * (all of it out of place). */
                    for (int b = 0; b < n; b++) {
                        if (in_place && b == c->rank)
                            continue;
                        size_t off = (size_t)b * m * es;
                        CHECK(c, memcmp(in + off, orig + off, m * es) == 0,
                              "%s: block %d of sendbuf was modified", what, b);
                    }
                    /* Check against the reference of our block: element i of
                     * the result is element rank * m + i of the inputs. */
                    for (size_t i = 0; i < m; i++) {
                        double fv;
                        int64_t iv;
                        ref_exact(dt, op, seed, n, (size_t)c->rank * m + i, &fv, &iv);
                        if (is_float(dt) ? get_f(dt, rbuf, i) != fv : get_i(dt, rbuf, i) != iv) {
                            note(c, "%s: element %zu is %g/%lld, expected %g/%lld", what, i,
                                 get_f(dt, rbuf, i), (long long)get_i(dt, rbuf, i), fv,
                                 (long long)iv);
                            break;
                        }
                    }
                }
                sync_all(c);
                free(in);
                free(orig);
                free(out);
            }
}

Test(reduce_scatter, in_and_out_of_place, .timeout = 60)
{
    static const size_t counts[] = {0, 1, 7, 1023, 5000};
    sized_arg_t a = {counts, 5, 256};
    for (size_t k = 0; k < NNS; k++)
        job_run(test_ns[k], 10000, 1, reduce_scatter_body, &a);
}

/* ----------------------------------- barrier ----------------------------------- */

static void barrier_body(ctx_t *c, const void *arg)
{
    (void)arg;
    int n = c->comm.size;
    for (int round = 1; round <= 20; round++) {
        /* One rank per round arrives late; nobody may leave before it came. */
        if (round % n == c->rank)
            usleep(2000);
        atomic_fetch_add(&c->job->counter, 1);
        begin(c, GW_COLL_BARRIER, 0, GW_UINT8, GW_SUM, 0);
        gw_status_t st = gw__barrier_dissemination(&c->comm);
        CHECK(c, st == GW_OK, "barrier round %d: %s", round, gw_status_name(st));
        int seen = atomic_load(&c->job->counter);
        CHECK(c, seen >= round * n, "barrier round %d: left after %d arrivals, expected %d", round,
              seen, round * n);
        sync_all(c); /* nobody starts the next round before all checked */
    }
}

Test(barrier, waits_for_everyone, .timeout = 60)
{
    for (int n = 2; n <= 9; n++)
        job_run(n, 10000, 1, barrier_body, NULL);
}
