/* The cost model of allgather, reduce-scatter, broadcast and reduce
 * (collectives/tuning_coll.c), and the tuning file's rules and forced
 * algorithms (collectives/tuning_file.c): the choices move from the
 * latency algorithms to the bandwidth ones as messages grow, the file's
 * keys override the measured rules and the model, and a key that names an
 * algorithm a kind lacks is refused naming the line. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "collectives/tuning.h"

static gw_tuning_t on(const char *transport)
{
    gw_tuning_t t;
    gw__tuning_defaults(&t, transport);
    return t;
}

#define MIB ((size_t)1 << 20)

Test(tuning_coll, one_round_exchanges_for_small_messages_over_shm)
{
    /* From 3 ranks: on 2 the one message each way is the ring's one step. */
    gw_tuning_t t = on("shm");
    for (int n = 3; n <= 8; n++) {
        cr_expect_eq(gw__tuning_pick_coll(&t, GW_COLL_ALLGATHER, n, 64, 1), GW_ALGO_DIRECT,
                     "allgather, %d ranks, 64 B", n);
        cr_expect_eq(gw__tuning_pick_coll(&t, GW_COLL_REDUCE_SCATTER, n, 64, 1), GW_ALGO_DIRECT,
                     "reduce_scatter, %d ranks, 64 B", n);
    }
}

Test(tuning_coll, log_rounds_for_small_allgathers_between_hosts)
{
    /* Over TCP each further message of a round costs a system call
     * (alpha_local = alpha): from 4 ranks Bruck's log2 rounds beat both
     * the ring's n - 1 steps and the direct round's n - 1 messages. */
    gw_tuning_t t = on("tcp");
    for (int n = 4; n <= 64; n *= 2)
        cr_expect_eq(gw__tuning_pick_coll(&t, GW_COLL_ALLGATHER, n, 256, 0), GW_ALGO_RD,
                     "allgather, %d ranks, 256 B", n);
}

Test(tuning_coll, rings_for_large_messages)
{
    for (int shm = 0; shm < 2; shm++) {
        gw_tuning_t t = on(shm ? "shm" : "tcp");
        for (int n = 2; n <= 32; n++) {
            cr_expect_eq(gw__tuning_pick_coll(&t, GW_COLL_ALLGATHER, n, 256 * MIB, shm),
                         GW_ALGO_RING, "allgather, %d ranks, shm %d", n, shm);
            cr_expect_eq(gw__tuning_pick_coll(&t, GW_COLL_REDUCE_SCATTER, n, 256 * MIB, shm),
                         GW_ALGO_RING, "reduce_scatter, %d ranks, shm %d", n, shm);
        }
    }
}

Test(tuning_coll, reduce_moves_from_the_tree_to_reduce_scatter_and_gather)
{
    gw_tuning_t t = on("tcp");
    for (int n = 2; n <= 32; n *= 2)
        cr_expect_eq(gw__tuning_pick_coll(&t, GW_COLL_REDUCE, n, 64, 0), GW_ALGO_TREE,
                     "reduce, %d ranks, 64 B", n);
    /* From 4 ranks the tree's root takes the buffer in log2(n) times. */
    for (int n = 4; n <= 32; n *= 2)
        cr_expect_eq(gw__tuning_pick_coll(&t, GW_COLL_REDUCE, n, 256 * MIB, 0), GW_ALGO_RING,
                     "reduce, %d ranks, 256 MiB", n);
}

Test(tuning_coll, predictions_follow_the_formulas)
{
    gw_tuning_t t = {.alpha = 1e-5,
                     .beta = 1e-9,
                     .gamma = 1e-10,
                     .beta_local = 2e-9,
                     .alpha_local = 1e-6,
                     .chunk_bytes = 1000};
    /* allgather, n = 4, S = 4000: ring 3 alpha + 3000 beta; Bruck 2 alpha
     * + 3000 beta + 4000 beta_local; direct alpha + 2 alpha_local + 3000 b. */
    cr_expect_float_eq(gw__tuning_predict_coll(&t, GW_COLL_ALLGATHER, GW_ALGO_RING, 4, 4000, 0),
                       3e-5 + 3e-6, 1e-12);
    cr_expect_float_eq(gw__tuning_predict_coll(&t, GW_COLL_ALLGATHER, GW_ALGO_RD, 4, 4000, 0),
                       2e-5 + 3e-6 + 8e-6, 1e-12);
    cr_expect_float_eq(gw__tuning_predict_coll(&t, GW_COLL_ALLGATHER, GW_ALGO_DIRECT, 4, 4000, 1),
                       1e-5 + 2e-6 + 3000 * 2e-9, 1e-12);
    /* reduce-scatter ring: 3 alpha + 3000 (beta + gamma). */
    cr_expect_float_eq(
        gw__tuning_predict_coll(&t, GW_COLL_REDUCE_SCATTER, GW_ALGO_RING, 4, 4000, 0),
        3e-5 + 3000 * 1.1e-9, 1e-12);
    /* reduce tree, 4 chunks of 1000, d = 2: (4 + 1) 2 (alpha + 1000 (beta + gamma)). */
    cr_expect_float_eq(gw__tuning_predict_coll(&t, GW_COLL_REDUCE, GW_ALGO_TREE, 4, 4000, 0),
                       10 * (1e-5 + 1.1e-6), 1e-12);
    /* broadcast: the cheaper of the binomial tree (10 chunk steps) and
     * the chain (C + n - 2 = 6). */
    cr_expect_float_eq(gw__tuning_predict_coll(&t, GW_COLL_BROADCAST, GW_ALGO_TREE, 4, 4000, 0),
                       6 * (1e-5 + 1e-6), 1e-12);
    /* What a kind lacks is never a candidate. */
    cr_expect(isinf(gw__tuning_predict_coll(&t, GW_COLL_BROADCAST, GW_ALGO_RING, 4, 4000, 0)));
    cr_expect(isinf(gw__tuning_predict_coll(&t, GW_COLL_REDUCE_SCATTER, GW_ALGO_RD, 4, 4000, 0)));
    cr_expect_float_eq(gw__tuning_predict_coll(&t, GW_COLL_ALLGATHER, GW_ALGO_RING, 1, 4000, 0),
                       0.0, 1e-15);
}

Test(tuning_coll, a_forced_algorithm_wins_over_the_model)
{
    gw_tuning_t t = on("tcp");
    t.force[GW_COLL_ALLGATHER] = GW_ALGO_DIRECT;
    cr_expect_eq(gw__tuning_pick_coll(&t, GW_COLL_ALLGATHER, 16, 256 * MIB, 0), GW_ALGO_DIRECT);
    cr_expect_eq(gw__tuning_pick_coll(&t, GW_COLL_REDUCE_SCATTER, 16, 256 * MIB, 0), GW_ALGO_RING,
                 "forcing allgather's algorithm changed reduce-scatter's");
}

static gw_status_t parse(gw_tuning_t *t, const char *text)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    cr_assert_not_null(f);
    gw_logger_t lg = {.level = GW_LOG_ERROR, .file = stderr};
    gw_status_t st = gw__tuning_parse(t, f, "test", &lg);
    fclose(f);
    return st;
}

Test(tuning_coll, the_file_sets_rules_and_forced_algorithms)
{
    gw_tuning_t t = on("shm");
    cr_assert_eq(parse(&t, "gradwire-tuning 1\n"
                           "direct_pair_min = 0      # the 2-rank rule off\n"
                           "tree4_min = 1024\ntree4_end = 2048\n"
                           "direct_shm_min = 131072\n"
                           "direct_large_max_ranks = 0\n"
                           "alpha_local = 2e-6\n"
                           "allgather = ring\nreduce = ring\nallreduce = tree\n"),
                 GW_OK);
    cr_expect_eq(t.direct_pair_min, 0);
    cr_expect_eq(t.direct_shm_min, 131072);
    cr_expect_float_eq(t.alpha_local, 2e-6, 1e-15);
    cr_expect_eq(t.force[GW_COLL_ALLGATHER], GW_ALGO_RING);
    cr_expect_eq(t.force[GW_COLL_REDUCE], GW_ALGO_RING);
    cr_expect_eq(t.force[GW_COLL_ALLREDUCE], GW_ALGO_TREE);
    cr_expect_eq(t.force[GW_COLL_REDUCE_SCATTER], GW_ALGO_AUTO);
    /* The rules follow: 2 ranks at 1 MiB no longer take direct, 4 ranks at
     * 1 KiB take the tree, and no rank count takes direct from 8 MiB. */
    cr_expect_neq(gw__tuning_pick_shm(&t, 2, MIB), GW_ALGO_DIRECT);
    cr_expect_eq(gw__tuning_pick_shm(&t, 4, 1024), GW_ALGO_TREE);
    cr_expect_neq(gw__tuning_pick_shm(&t, 4, 64 * 1024), GW_ALGO_TREE);
    cr_expect_neq(gw__tuning_pick_hosts(&t, 3, 1, 3, 64 * MIB), GW_ALGO_DIRECT);
    cr_expect_eq(gw__tuning_pick_coll(&t, GW_COLL_ALLGATHER, 4, 8, 1), GW_ALGO_RING);
    /* The defaults took them the other way. */
    gw_tuning_t d = on("shm");
    cr_expect_eq(gw__tuning_pick_shm(&d, 2, MIB), GW_ALGO_DIRECT);
    cr_expect_eq(gw__tuning_pick_hosts(&d, 3, 1, 3, 64 * MIB), GW_ALGO_DIRECT);
}

Test(tuning_coll, merge_replaces_only_what_the_file_gave)
{
    gw_tuning_t file;
    memset(&file, 0, sizeof(file));
    gw__tuning_rules_default(&file);
    cr_assert_eq(parse(&file, "gradwire-tuning 1\ntree4_end = 4096\nbroadcast = tree\n"), GW_OK);
    gw_tuning_t t = on("tcp"), before = t;
    gw__tuning_merge(&t, &file);
    cr_expect_eq(t.tree4_end, 4096);
    cr_expect_eq(t.force[GW_COLL_BROADCAST], GW_ALGO_TREE);
    cr_expect_float_eq(t.alpha, before.alpha, 1e-15, "alpha, not in the file, changed");
    cr_expect_eq(t.tree4_min, before.tree4_min);
    cr_expect_eq(t.direct_pair_min, before.direct_pair_min);
    char given[256];
    gw__tuning_describe_file(&file, given, sizeof(given));
    cr_expect_str_eq(given, "tree4_end=4096 broadcast=tree");
}

Test(tuning_coll, an_algorithm_a_kind_lacks_is_refused)
{
    gw_tuning_t t = on("tcp"), before = t;
    cr_expect_eq(parse(&t, "gradwire-tuning 1\nreduce_scatter = rd\n"), GW_ERR_CONFIG);
    cr_expect_eq(parse(&t, "gradwire-tuning 1\nbroadcast = ring\n"), GW_ERR_CONFIG);
    cr_expect_eq(parse(&t, "gradwire-tuning 1\nallgather = fastest\n"), GW_ERR_CONFIG);
    cr_expect_eq(parse(&t, "gradwire-tuning 1\ntree4_min = -1\n"), GW_ERR_CONFIG);
    cr_expect_eq(parse(&t, "gradwire-tuning 1\ndirect_max_ranks = many\n"), GW_ERR_CONFIG);
    cr_expect_eq(parse(&t, "gradwire-tuning 1\nallgather = ring\nallgather = rd\n"), GW_ERR_CONFIG);
    cr_expect_eq(memcmp(&t, &before, sizeof(t)), 0, "a refused file changed the figures");
    cr_expect(gw__tuning_coll_has(GW_COLL_ALLGATHER, GW_ALGO_RD));
    cr_expect(!gw__tuning_coll_has(GW_COLL_BROADCAST, GW_ALGO_RING));
    cr_expect(gw__tuning_coll_has(GW_COLL_BROADCAST, GW_ALGO_AUTO));
}

Test(tuning_coll, written_files_read_back_the_same)
{
    gw_tuning_t t = on("shm");
    t.direct_pair_min = 123456;
    t.tree4_end = 0;
    t.direct_shm_min = 654321;
    t.force[GW_COLL_REDUCE_SCATTER] = GW_ALGO_DIRECT;
    char buf[4096];
    FILE *f = fmemopen(buf, sizeof(buf), "w");
    cr_assert_eq(gw__tuning_write(&t, f), GW_OK);
    fclose(f);
    gw_tuning_t back = on("tcp");
    cr_assert_eq(parse(&back, buf), GW_OK, "%s", buf);
    cr_expect_eq(back.direct_pair_min, 123456);
    cr_expect_eq(back.tree4_end, 0);
    cr_expect_eq(back.direct_shm_min, 654321);
    cr_expect_eq(back.force[GW_COLL_REDUCE_SCATTER], GW_ALGO_DIRECT);
    cr_expect_eq(back.force[GW_COLL_ALLGATHER], GW_ALGO_AUTO);
    cr_expect_float_eq(back.alpha, t.alpha, 1e-15);
    cr_expect_float_eq(back.alpha_local, t.alpha_local, 1e-15);
}
