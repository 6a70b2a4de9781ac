/*
 * test_topo.c - the topology (core/topo.c), the host-contiguous rings and
 * the hierarchical allreduce (allreduce_hier.c), one thread per rank over
 * the in-memory transport with host ids given to each communicator as
 * gw_comm_init would get them from the address exchange.
 *
 * - The ordering function on uneven hosts, the launcher's r mod H
 *   placement, block placement, one host and one rank per host.
 * - The ring allreduce, reduce-scatter and allgather under r mod H and
 *   block placement: exact against the serial reference, and bitwise the
 *   same outputs (blocks in the caller's rank order) in both.
 * - The hierarchical allreduce, through the allreduce dispatch as
 *   GW_ALGO_HIER, against the serial reference for every dtype/op, on
 *   hosts of 3+1+2 ranks (interleaved), 2 and 4 ranks per host, one host
 *   and one rank per host, counts 0, 1, fewer than the ranks, odd and
 *   long; random floats and NaN payloads must agree bitwise on every rank.
 * - The cost model picks it for large buffers when several ranks share a
 *   host and there are several hosts, and never otherwise.
 */
#include "algo_test_util.h"
#include "collectives/api/api.h"
#include "collectives/comm/topo.h"

/* ---------------------------------- ordering ---------------------------------- */

static void expect_order(const uint64_t *ids, int n, const int *order, int nhosts, int local_max)
{
    gw_topo_t t;
    cr_assert_eq(gw__topo_build(ids, n, &t), GW_OK);
    cr_expect_eq(t.nhosts, nhosts);
    cr_expect_eq(t.local_max, local_max);
    for (int p = 0; p < n; p++) {
        cr_expect_eq(t.order[p], order[p], "position %d: rank %d, expected %d", p, t.order[p],
                     order[p]);
        cr_expect_eq(t.pos[t.order[p]], p, "pos is not the inverse of order at %d", p);
    }
    /* Every host's ranks are contiguous, ascending, and its own. */
    cr_expect_eq(t.host_first[0], 0);
    cr_expect_eq(t.host_first[t.nhosts], n);
    for (int h = 0; h < t.nhosts; h++) {
        const int *r = gw__topo_host_ranks(&t, h);
        for (int i = 0; i < gw__topo_host_size(&t, h); i++) {
            cr_expect_eq(t.host_of[r[i]], h);
            cr_expect_eq(ids[r[i]], ids[r[0]]);
            if (i > 0)
                cr_expect_lt(r[i - 1], r[i]);
        }
    }
    gw__topo_free(&t);
}

Test(topo, order_uneven_hosts)
{
    /* Hosts A (ranks 0, 3, 5), B (1), C (2, 4): 3 + 1 + 2. */
    const uint64_t ids[] = {0xa, 0xb, 0xc, 0xa, 0xc, 0xa};
    const int order[] = {0, 3, 5, 1, 2, 4};
    expect_order(ids, 6, order, 3, 3);
}

Test(topo, order_launcher_placement_and_block)
{
    uint64_t rmod[8], block[8];
    for (int r = 0; r < 8; r++) {
        rmod[r] = 100 + (uint64_t)(r % 4);
        block[r] = 100 + (uint64_t)(r / 2);
    }
    const int rmod_order[] = {0, 4, 1, 5, 2, 6, 3, 7};
    const int identity[] = {0, 1, 2, 3, 4, 5, 6, 7};
    expect_order(rmod, 8, rmod_order, 4, 2);
    expect_order(block, 8, identity, 4, 2);
    /* Host ids need not be in any order: hosts are numbered by lowest rank. */
    const uint64_t backwards[] = {9, 8, 7, 9, 8, 7, 9, 8};
    const int back_order[] = {0, 3, 6, 1, 4, 7, 2, 5};
    expect_order(backwards, 8, back_order, 3, 3);
}

Test(topo, order_one_host_and_one_rank_per_host)
{
    const uint64_t same[] = {5, 5, 5, 5};
    const uint64_t apart[] = {1, 2, 3, 4};
    const int identity[] = {0, 1, 2, 3};
    expect_order(same, 4, identity, 1, 4);
    expect_order(apart, 4, identity, 4, 1);
    expect_order(same, 1, identity, 1, 1);
}

/* ------------------------------ host-ordered rings ------------------------------ */

/* FNV-1a over every output of one rank, to compare placements bitwise. */
static uint64_t fnv(uint64_t h, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

typedef struct rings_arg {
    uint64_t digest[MAXN];
} rings_arg_t;

static void rings_body(ctx_t *c, const void *arg)
{
    rings_arg_t *a = (rings_arg_t *)(uintptr_t)arg;
    const int n = c->comm.size;
    static const size_t counts[] = {0, 1, 5, 1023};
    static const combo_t combos[] = {
        {GW_FLOAT32, GW_SUM}, {GW_INT64, GW_PROD}, {GW_BFLOAT16, GW_SUM}, {GW_INT8, GW_MAX}};
    uint64_t h = 0xcbf29ce484222325ull, seed = 1;
    c->comm.chunk_bytes = 256;
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
        for (size_t j = 0; j < sizeof(combos) / sizeof(combos[0]); j++, seed++) {
            gw_dtype_t dt = combos[j].dt;
            gw_op_t op = combos[j].op;
            size_t m = counts[k], es = gw_dtype_size(dt), total = m * (size_t)n;
            unsigned char *in = malloc(total * es + 1), *out = malloc(total * es + 1);
            char what[96];
            /* allreduce of m elements */
            for (size_t i = 0; i < m; i++)
                gen_exact(dt, op, seed, c->rank, i, in);
            begin(c, GW_COLL_ALLREDUCE, m, dt, op, 0);
            gw_status_t st = gw__allreduce_ring(&c->comm, m ? in : NULL, m ? out : NULL, m, dt, op);
            snprintf(what, sizeof(what), "ring allreduce %s/%s count %zu", gw_dtype_name(dt),
                     gw_op_name(op), m);
            CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
            if (st == GW_OK)
                check_exact(c, what, out, m, dt, op, seed);
            h = fnv(h, out, m * es);
            /* reduce-scatter of n blocks of m: rank r gets block r */
            for (size_t i = 0; i < total; i++)
                gen_exact(dt, op, seed, c->rank, i, in);
            begin(c, GW_COLL_REDUCE_SCATTER, m, dt, op, 0);
            st = gw__reduce_scatter_ring(&c->comm, m ? in : NULL, m ? out : NULL, m, dt, op);
            snprintf(what, sizeof(what), "ring reduce_scatter %s/%s count %zu", gw_dtype_name(dt),
                     gw_op_name(op), m);
            CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
            if (st == GW_OK && m > 0) {
                /* Rank r's block is elements r m .. r m + m - 1 of the inputs. */
                for (size_t i = 0; i < m; i++) {
                    double fv;
                    int64_t iv;
                    ref_exact(dt, op, seed, n, (size_t)c->rank * m + i, &fv, &iv);
                    int bad = is_float(dt) ? get_f(dt, out, i) != fv : get_i(dt, out, i) != iv;
                    if (bad) {
                        note(c, "%s: element %zu of rank %d's block is wrong", what, i, c->rank);
                        break;
                    }
                }
            }
            h = fnv(h, out, m * es);
            /* allgather: block r is rank r's input */
            for (size_t i = 0; i < m; i++)
                gen_exact(dt, op, seed, c->rank, i, in);
            begin(c, GW_COLL_ALLGATHER, m, dt, GW_SUM, 0);
            st = gw__allgather_ring(&c->comm, m ? in : NULL, m ? out : NULL, m, dt);
            snprintf(what, sizeof(what), "ring allgather %s count %zu", gw_dtype_name(dt), m);
            CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
            unsigned char *theirs = malloc(m * es + 1);
            for (int r = 0; st == GW_OK && r < n; r++) {
                for (size_t i = 0; i < m; i++)
                    gen_exact(dt, op, seed, r, i, theirs);
                if (m > 0 && memcmp(out + (size_t)r * m * es, theirs, m * es) != 0) {
                    note(c, "%s: block %d is not rank %d's input", what, r, r);
                    break;
                }
            }
            free(theirs);
            h = fnv(h, out, total * es);
            free(in);
            free(out);
        }
    a->digest[c->rank] = h;
}

Test(topo, rings_same_results_under_any_placement, .timeout = 120)
{
    for (int hosts = 2; hosts <= 4; hosts++) {
        const int n = 2 * hosts;
        uint64_t rmod[MAXN], block[MAXN];
        for (int r = 0; r < n; r++) {
            rmod[r] = (uint64_t)(r % hosts);
            block[r] = (uint64_t)(r / 2);
        }
        rings_arg_t by_rmod, by_block, none;
        memset(&by_rmod, 0, sizeof(by_rmod));
        memset(&by_block, 0, sizeof(by_block));
        memset(&none, 0, sizeof(none));
        threads_opts_t o = {.timeout_ms = 10000, .rendezvous = 1, .host_ids = rmod};
        threads_run(n, &o, rings_body, &by_rmod);
        o.host_ids = block;
        threads_run(n, &o, rings_body, &by_block);
        o.host_ids = NULL;
        threads_run(n, &o, rings_body, &none);
        for (int r = 0; r < n; r++) {
            cr_expect_eq(by_rmod.digest[r], by_block.digest[r],
                         "%d hosts: rank %d's outputs differ between r mod H and block placement",
                         hosts, r);
            cr_expect_eq(by_rmod.digest[r], none.digest[r],
                         "%d hosts: rank %d's outputs differ from the rank-order ring", hosts, r);
        }
    }
}

/* ----------------------------- hierarchical allreduce ----------------------------- */

typedef struct hier_arg {
    const size_t *counts;
    int ncounts;
    int all_combos;
} hier_arg_t;

static void hier_case(ctx_t *c, size_t count, gw_dtype_t dt, gw_op_t op, int in_place,
                      uint64_t seed)
{
    size_t es = gw_dtype_size(dt), bytes = count * es;
    unsigned char *in = malloc(bytes + 1), *orig = malloc(bytes + 1), *out = malloc(bytes + 8);
    for (size_t i = 0; i < count; i++)
        gen_exact(dt, op, seed, c->rank, i, in);
    memcpy(orig, in, bytes);
    memset(out, 0xa5, bytes + 8);
    if (in_place)
        memcpy(out, in, bytes);
    begin(c, GW_COLL_ALLREDUCE, count, dt, op, 0);
    const void *sbuf = count == 0 ? NULL : in_place ? (const void *)out : (const void *)in;
    void *rbuf = count == 0 ? NULL : out;
    gw_status_t st = gw__allreduce_algo(&c->comm, sbuf, rbuf, count, dt, op, GW_ALGO_HIER);
    char what[128];
    snprintf(what, sizeof(what), "hier %s/%s count %zu %s", gw_dtype_name(dt), gw_op_name(op),
             count, in_place ? "in place" : "out of place");
    CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
    if (st == GW_OK) {
        if (!in_place)
            CHECK(c, memcmp(in, orig, bytes) == 0, "%s: sendbuf was modified", what);
        check_exact(c, what, out, count, dt, op, seed);
        for (size_t i = 0; i < 8; i++)
            CHECK(c, out[bytes + i] == 0xa5, "%s: wrote past the end", what);
    }
    check_agree(c, what, out, st == GW_OK ? bytes : 0);
    free(in);
    free(orig);
    free(out);
}

static void hier_exact_body(ctx_t *c, const void *arg)
{
    const hier_arg_t *a = arg;
    static const combo_t subset[] = {{GW_FLOAT32, GW_SUM}, {GW_INT64, GW_PROD}};
    const combo_t *combos = a->all_combos ? exact_combos : subset;
    size_t ncombos = a->all_combos ? NCOMBOS : 2;
    uint64_t seed = 1;
    c->comm.chunk_bytes = 256;
    for (int k = 0; k < a->ncounts; k++)
        for (size_t j = 0; j < ncombos; j++)
            for (int in_place = 0; in_place < 2; in_place++)
                hier_case(c, a->counts[k], combos[j].dt, combos[j].op, in_place, seed++);
}

/* Random floats and NaN payloads: every rank must hold the same bits. */
static void hier_agree_body(ctx_t *c, const void *arg)
{
    (void)arg;
    const size_t count = 4099;
    float *buf = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) {
        uint64_t x = rnd(91, c->rank, i);
        buf[i] = (float)((double)(x >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
        if (i % 7 == 0 && c->rank == (int)(i % (size_t)c->comm.size)) {
            uint32_t u = 0x7fc00000u | (uint32_t)(c->rank + 1) << 4;
            memcpy(&buf[i], &u, 4);
        }
    }
    c->comm.chunk_bytes = 1024;
    begin(c, GW_COLL_ALLREDUCE, count, GW_FLOAT32, GW_SUM, 0);
    gw_status_t st = gw__allreduce_hier(&c->comm, buf, buf, count, GW_FLOAT32, GW_SUM);
    CHECK(c, st == GW_OK, "hier random: %s", gw_status_name(st));
    for (size_t i = 0; st == GW_OK && i < count; i += 7)
        CHECK(c, isnan(buf[i]), "hier random: element %zu lost its NaN", i);
    check_agree(c, "hier random float32 sum", buf, st == GW_OK ? count * sizeof(float) : 0);
    free(buf);
}

typedef struct layout {
    const char *name;
    int n;
    uint64_t ids[MAXN];
} layout_t;

static const layout_t layouts[] = {
    {"3+1+2 interleaved", 6, {0, 1, 2, 0, 2, 0}},
    {"4 hosts of 2, r mod 4", 8, {0, 1, 2, 3, 0, 1, 2, 3}},
    {"2 hosts of 4, r mod 2", 8, {0, 1, 0, 1, 0, 1, 0, 1}},
    {"2+2+1 block", 5, {0, 0, 1, 1, 2}},
    {"1+3", 4, {0, 1, 1, 1}},
    {"one host of 4", 4, {7, 7, 7, 7}},
    {"one rank per host", 3, {1, 2, 3}},
};
#define NLAYOUTS (sizeof(layouts) / sizeof(layouts[0]))

static void hier_on_every_layout(const hier_arg_t *a, body_fn body, int rendezvous)
{
    for (size_t l = 0; l < NLAYOUTS; l++) {
        threads_opts_t o = {.timeout_ms = 10000,
                            .rendezvous = rendezvous,
                            .label = layouts[l].name,
                            .host_ids = layouts[l].ids};
        threads_run(layouts[l].n, &o, body, a);
    }
}

Test(hier, every_dtype_op_small_counts, .timeout = 180)
{
    static const size_t counts[] = {0, 1, 3, 7, 1023};
    hier_arg_t a = {counts, 5, 1};
    hier_on_every_layout(&a, hier_exact_body, 1);
}

Test(hier, eager_and_long, .timeout = 180)
{
    static const size_t counts[] = {5, 65537};
    hier_arg_t a = {counts, 2, 0};
    hier_on_every_layout(&a, hier_exact_body, 0);
    hier_on_every_layout(&a, hier_exact_body, 1);
}

Test(hier, random_floats_agree_bitwise, .timeout = 60)
{
    hier_on_every_layout(NULL, hier_agree_body, 1);
}

/* ---------------------------------- cost model ---------------------------------- */

Test(hier, chosen_by_the_cost_model)
{
    gw_tuning_t t;
    gw__tuning_defaults(&t, "tcp");
    const size_t big = (size_t)32 << 20;
    cr_expect_eq(gw__tuning_pick_hosts(&t, 8, 4, 2, big), GW_ALGO_HIER, "8 ranks on 4 hosts");
    cr_expect_eq(gw__tuning_pick_hosts(&t, 8, 2, 4, big), GW_ALGO_HIER, "8 ranks on 2 hosts");
    cr_expect_eq(gw__tuning_pick_hosts(&t, 6, 3, 3, big), GW_ALGO_HIER, "3+1+2");
    /* On one host too (its local phases alone: two rounds where the ring
     * takes 14 steps), but not with one rank per host. */
    cr_expect_eq(gw__tuning_pick_hosts(&t, 8, 1, 8, big), GW_ALGO_HIER, "one host");
    cr_expect_neq(gw__tuning_pick_hosts(&t, 8, 8, 1, big), GW_ALGO_HIER);
    cr_expect_neq(gw__tuning_pick(&t, 8, big), GW_ALGO_HIER);
    /* Small messages stay with the latency algorithm. */
    cr_expect_eq(gw__tuning_pick_hosts(&t, 8, 4, 2, 8), GW_ALGO_RD);
    /* Figures from a tuning file: 1 Gbit/s links (8 ns a byte) and shared
     * memory at 6 ns a byte in hier's local phases (8 ranks on 2 busy
     * cores, README): hier. Shared memory slower than the link: the ring,
     * which overlaps its local edges with the network anyway. */
    gw_tuning_t m = t;
    static const char file[] = "gradwire-tuning 1\nbeta = 8e-9\nbeta_local = 6e-9\n";
    FILE *f = fmemopen((void *)(uintptr_t)file, sizeof(file) - 1, "r");
    cr_assert_not_null(f);
    gw_logger_t lg = {.level = GW_LOG_ERROR, .file = stderr};
    cr_assert_eq(gw__tuning_parse(&m, f, "test", &lg), GW_OK);
    fclose(f);
    cr_expect_float_eq(m.beta_local, 6e-9, 1e-20);
    cr_expect_eq(gw__tuning_pick_hosts(&m, 8, 4, 2, big), GW_ALGO_HIER, "1 Gbit/s");
    cr_expect_eq(gw__tuning_pick_hosts(&m, 8, 2, 4, big), GW_ALGO_HIER, "1 Gbit/s, 4 per host");
    m.beta_local = 20e-9;
    cr_expect_eq(gw__tuning_pick_hosts(&m, 8, 4, 2, big), GW_ALGO_RING, "slow shared memory");
    /* Its prediction with one rank per host is the ring's. */
    cr_expect_float_eq(gw__tuning_predict_hosts(&t, GW_ALGO_HIER, 8, 8, 1, big),
                       gw__tuning_predict(&t, GW_ALGO_RING, 8, big), 1e-12);
}

/* ------------------------------------ trees ------------------------------------ */

/* A communicator with only what the tree order reads: size and topology. */
static void fake_comm(gw_comm_t *comm, const uint64_t *ids, int n)
{
    memset(comm, 0, sizeof(*comm));
    comm->size = n;
    cr_assert_eq(gw__topo_build(ids, n, &comm->topo), GW_OK);
}

Test(trees, order_starts_at_the_root_and_keeps_hosts_contiguous)
{
    for (size_t l = 0; l < NLAYOUTS; l++) {
        const layout_t *L = &layouts[l];
        gw_comm_t comm;
        fake_comm(&comm, L->ids, L->n);
        const gw_topo_t *t = &comm.topo;
        for (int root = 0; root < L->n; root++) {
            cr_expect_eq(gw__tree_rank(&comm, root, 0), root, "%s: index 0 is not the root",
                         L->name);
            int seen[MAXN] = {0}, host_done[MAXN] = {0}, cur = -1;
            for (int v = 0; v < L->n; v++) {
                int r = gw__tree_rank(&comm, root, v);
                cr_assert(r >= 0 && r < L->n && !seen[r], "%s root %d: index %d -> rank %d",
                          L->name, root, v, r);
                seen[r] = 1;
                cr_expect_eq(gw__tree_index(&comm, root, r), v, "%s root %d: not the inverse",
                             L->name, root);
                int h = t->host_of[r];
                if (v < gw__topo_host_size(t, t->host_of[root]))
                    cr_expect_eq(h, t->host_of[root],
                                 "%s root %d: index %d is not on the "
                                 "root's host",
                                 L->name, root, v);
                if (h != cur) {
                    cr_expect(!host_done[h], "%s root %d: host %d's ranks are split", L->name, root,
                              h);
                    if (cur >= 0)
                        host_done[cur] = 1;
                    cur = h;
                }
            }
        }
        gw__topo_free(&comm.topo);
    }
}

/* Edges of the binomial tree from root that join two hosts. */
static int binomial_cross_edges(const gw_comm_t *comm, int root)
{
    int cross = 0;
    for (int v = 0; v < comm->size; v++) {
        int kids[GW__BINOMIAL_MAX_KIDS], parent;
        int nk = gw__binomial_node(comm->size, v, 1, kids, &parent);
        int r = gw__tree_rank(comm, root, v);
        for (int k = 0; k < nk; k++)
            cross +=
                comm->topo.host_of[r] != comm->topo.host_of[gw__tree_rank(comm, root, kids[k])];
    }
    return cross;
}

Test(trees, binomial_crosses_each_host_once_under_the_launchers_placement)
{
    /* gradwire launch --hosts: rank r on host r mod H. In rank order every
     * edge of the tree joins two hosts. */
    for (int hosts = 2; hosts <= 4; hosts *= 2)
        for (int per = 2; per <= 4; per *= 2) {
            const int n = hosts * per;
            uint64_t ids[MAXN];
            for (int r = 0; r < n; r++)
                ids[r] = (uint64_t)(r % hosts);
            gw_comm_t comm;
            fake_comm(&comm, ids, n);
            for (int root = 0; root < n; root++)
                cr_expect_eq(binomial_cross_edges(&comm, root), hosts - 1,
                             "%d hosts of %d, root %d: %d edges cross hosts", hosts, per, root,
                             binomial_cross_edges(&comm, root));
            gw__topo_free(&comm.topo);
        }
}

/* Broadcast from every root, reduce to every root and the double binary
 * tree allreduce, exact, over the layouts' placements. */
static void trees_body(ctx_t *c, const void *arg)
{
    (void)arg;
    const int n = c->comm.size;
    static const size_t counts[] = {1, 7, 1023};
    uint64_t seed = 300;
    c->comm.chunk_bytes = 256;
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        const size_t m = counts[k];
        const gw_dtype_t dt = k % 2 ? GW_INT64 : GW_FLOAT32;
        const gw_op_t op = k % 2 ? GW_PROD : GW_SUM;
        const size_t es = gw_dtype_size(dt);
        unsigned char *in = malloc(m * es), *out = malloc(m * es);
        char what[96];
        for (int root = 0; root < n; root++, seed++) {
            for (size_t i = 0; i < m * es; i++)
                out[i] = c->rank == root ? (unsigned char)rnd(seed, root, i) : 0xa5;
            begin(c, GW_COLL_BROADCAST, m, dt, op, root);
            gw_status_t st = gw__broadcast_tree(&c->comm, out, m, dt, root);
            snprintf(what, sizeof(what), "broadcast count %zu root %d", m, root);
            CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
            for (size_t i = 0; st == GW_OK && i < m * es; i++)
                if (out[i] != (unsigned char)rnd(seed, root, i)) {
                    note(c, "%s: byte %zu differs from the root's", what, i);
                    break;
                }
            sync_all(c);
            for (size_t i = 0; i < m; i++)
                gen_exact(dt, op, seed, c->rank, i, in);
            begin(c, GW_COLL_REDUCE, m, dt, op, root);
            st = gw__reduce_tree(&c->comm, in, c->rank == root ? out : NULL, m, dt, op, root);
            snprintf(what, sizeof(what), "reduce count %zu root %d", m, root);
            CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
            if (st == GW_OK && c->rank == root)
                check_exact(c, what, out, m, dt, op, seed);
            sync_all(c);
        }
        for (size_t i = 0; i < m; i++)
            gen_exact(dt, op, seed, c->rank, i, in);
        begin(c, GW_COLL_ALLREDUCE, m, dt, op, 0);
        gw_status_t st = gw__allreduce_tree(&c->comm, in, out, m, dt, op);
        snprintf(what, sizeof(what), "tree allreduce count %zu", m);
        CHECK(c, st == GW_OK, "%s: %s", what, gw_status_name(st));
        if (st == GW_OK)
            check_exact(c, what, out, m, dt, op, seed);
        seed++;
        free(in);
        free(out);
    }
}

Test(trees, exact_under_every_placement, .timeout = 120)
{
    for (size_t l = 0; l < NLAYOUTS; l++) {
        threads_opts_t o = {.timeout_ms = 10000,
                            .rendezvous = 1,
                            .label = layouts[l].name,
                            .host_ids = layouts[l].ids};
        threads_run(layouts[l].n, &o, trees_body, NULL);
    }
}
