/*
 * test_algorithms.c - the allreduce algorithms (ring, tree, recursive
 * doubling), run by one thread per rank over the in-memory transport and
 * called directly through their gw__ entry points.
 *
 * Every case checks the result against a serial reference (inputs are
 * chosen so that it is exact), that every rank holds bitwise the same
 * result (also for random non-integer floats and NaN payloads, where only
 * agreement is defined), that sendbuf is untouched out of place, and that
 * nothing is written where it must not be. Small chunk sizes push even
 * short buffers through many pipeline steps.
 *
 * The harness and references are in algo_test_util.h; the other collectives
 * are tested in test_algorithms_collectives.c, failures in
 * test_algorithms_errors.c.
 */
#include "algo_test_util.h"

/* ---------------------------------- allreduce ---------------------------------- */

typedef gw_status_t (*allreduce_fn)(gw_comm_t *, const void *, void *, size_t, gw_dtype_t, gw_op_t);

typedef struct ar_arg {
    allreduce_fn fn;
    const char *name;
    const size_t *counts;
    int ncounts;
    size_t chunk_bytes;
    int all_combos; /* else: a representative subset */
    int alternate;  /* in place for every other case only, to save time */
} ar_arg_t;

static void allreduce_case(ctx_t *c, const ar_arg_t *a, size_t count, gw_dtype_t dt, gw_op_t op,
                           int in_place, uint64_t seed)
{
    size_t es = gw_dtype_size(dt), bytes = count * es;
    unsigned char *in = malloc(bytes + 1), *orig = malloc(bytes + 1), *out = malloc(bytes + 1);
    for (size_t i = 0; i < count; i++)
        gen_exact(dt, op, seed, c->rank, i, in);
    memcpy(orig, in, bytes);
    memset(out, 0xa5, bytes);
    if (in_place)
        memcpy(out, in, bytes);
    c->comm.chunk_bytes = a->chunk_bytes;
    begin(c, GW_COLL_ALLREDUCE, count, dt, op, 0);
    /* count 0 passes NULL buffers, as the API allows. */
    const void *sbuf = count == 0 ? NULL : in_place ? (const void *)out : (const void *)in;
    void *rbuf = count == 0 ? NULL : out;
    gw_status_t st = a->fn(&c->comm, sbuf, rbuf, count, dt, op);
    char what[128];
    snprintf(what, sizeof(what), "%s %s/%s count %zu %s", a->name, gw_dtype_name(dt),
             gw_op_name(op), count, in_place ? "in place" : "out of place");
    CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
    if (st == GW_OK) {
        if (!in_place)
            CHECK(c, memcmp(in, orig, bytes) == 0, "%s: sendbuf was modified", what);
        if (c->rank == 0)
            check_exact(c, what, out, count, dt, op, seed);
    }
    check_agree(c, what, out, st == GW_OK ? bytes : 0);
    free(in);
    free(orig);
    free(out);
}

static void allreduce_exact_body(ctx_t *c, const void *arg)
{
    const ar_arg_t *a = arg;
    static const combo_t subset[] = {
        {GW_FLOAT32, GW_SUM}, {GW_INT64, GW_PROD}, {GW_FLOAT16, GW_SUM}};
    const combo_t *combos = a->all_combos ? exact_combos : subset;
    size_t ncombos = a->all_combos ? NCOMBOS : sizeof(subset) / sizeof(subset[0]);
    uint64_t seed = 1;
    /* Every combination in place and out of place; when alternating, each
     * combination still sees both across the counts. */
    for (int k = 0; k < a->ncounts; k++)
        for (size_t j = 0; j < ncombos; j++)
            for (int in_place = 0; in_place < 2; in_place++)
                if (!a->alternate || (int)((j + (size_t)k) % 2) == in_place)
                    allreduce_case(c, a, a->counts[k], combos[j].dt, combos[j].op, in_place,
                                   seed++);
}

/* Random non-integer floats and NaN payloads: only agreement is defined. */
static void allreduce_agree_body(ctx_t *c, const void *arg)
{
    const ar_arg_t *a = arg;
    static const gw_dtype_t dts[] = {GW_FLOAT32, GW_FLOAT64, GW_BFLOAT16, GW_FLOAT16};
    for (int k = 0; k < a->ncounts; k++) {
        size_t count = a->counts[k];
        /* Long buffers only in the two wide types, to save time. */
        for (int d = 0; d < (count > 1023 ? 2 : 4); d++) {
            gw_dtype_t dt = dts[d];
            size_t es = gw_dtype_size(dt);
            unsigned char *buf = malloc(count * es + 1);
            for (size_t i = 0; i < count; i++) {
                uint64_t x = rnd(77 + (uint64_t)d, c->rank, i);
                double v = (double)(x >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
                if (dt == GW_FLOAT16 || dt == GW_BFLOAT16) {
                    /* Any bit pattern but NaN/Inf: random mantissas. */
                    uint16_t h = (uint16_t)(x & 0xbfff);
                    memcpy(buf + i * 2, &h, 2);
                } else if (dt == GW_FLOAT32) {
                    float f = (float)v;
                    /* NaNs with rank-specific payloads on two ranks per element. */
                    if (i % 5 == 0 && (c->rank == (int)(i % (size_t)c->comm.size) ||
                                       c->rank == (int)((i + 1) % (size_t)c->comm.size))) {
                        uint32_t u = 0x7fc00000u | (uint32_t)(c->rank + 1) << 4 | (uint32_t)(i & 7);
                        memcpy(&f, &u, 4);
                    }
                    memcpy(buf + i * 4, &f, 4);
                } else {
                    memcpy(buf + i * 8, &v, 8);
                }
            }
            c->comm.chunk_bytes = a->chunk_bytes;
            begin(c, GW_COLL_ALLREDUCE, count, dt, GW_SUM, 0);
            gw_status_t st = a->fn(&c->comm, buf, buf, count, dt, GW_SUM);
            char what[96];
            snprintf(what, sizeof(what), "%s random %s sum count %zu", a->name, gw_dtype_name(dt),
                     count);
            CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
            if (st == GW_OK && dt == GW_FLOAT32)
                for (size_t i = 0; i < count; i += 5)
                    CHECK(c, isnan(((float *)(void *)buf)[i]), "%s: element %zu lost its NaN", what,
                          i);
            check_agree(c, what, buf, st == GW_OK ? count * es : 0);
            free(buf);
        }
    }
}

static void allreduce_suite(allreduce_fn fn, const char *name)
{
    static const size_t small[] = {0, 1, 7, 1023};
    static const size_t large[] = {65537};
    ar_arg_t exact = {fn, name, small, 4, 256, 1, 1};
    ar_arg_t big = {fn, name, large, 1, 4096, 0, 0};
    static const size_t agree_counts[] = {1023, 65537};
    ar_arg_t agree = {fn, name, agree_counts, 2, 4096, 0, 0};
    for (size_t k = 0; k < NNS; k++) {
        /* Small buffers in both modes; the rest in the stricter one. */
        job_run(test_ns[k], 10000, 0, allreduce_exact_body, &exact);
        job_run(test_ns[k], 10000, 1, allreduce_exact_body, &exact);
        job_run(test_ns[k], 10000, 1, allreduce_exact_body, &big);
        job_run(test_ns[k], 10000, 1, allreduce_agree_body, &agree);
    }
}

Test(allreduce, ring, .timeout = 120) { allreduce_suite(gw__allreduce_ring, "ring"); }
Test(allreduce, tree, .timeout = 120) { allreduce_suite(gw__allreduce_tree, "tree"); }
Test(allreduce, rd, .timeout = 120) { allreduce_suite(gw__allreduce_rd, "rd"); }
Test(allreduce, direct, .timeout = 120) { allreduce_suite(gw__allreduce_direct, "direct"); }

/* Every rank count from 2 to 16 (tree shapes, folds of non-powers of two),
 * with buffers shorter than, equal to and longer than a chunk. */
Test(allreduce, every_size, .timeout = 120)
{
    static const size_t counts[] = {0, 5, 37, 300};
    static const allreduce_fn fns[] = {gw__allreduce_ring, gw__allreduce_tree, gw__allreduce_rd,
                                       gw__allreduce_direct};
    static const char *const names[] = {"ring", "tree", "rd", "direct"};
    for (int n = 2; n <= 16; n++)
        for (int f = 0; f < 4; f++) {
            ar_arg_t a = {fns[f], names[f], counts, 4, 64, 0, 1};
            job_run(n, 10000, 1, allreduce_exact_body, &a);
        }
}
