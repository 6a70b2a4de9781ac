/* The cost model: predictions behave as the formulas say, and the choice
 * moves from recursive doubling to tree to ring as messages grow. */
#include <criterion/criterion.h>

#include "collectives/tuning.h"

static gw_tuning_t model(void)
{
    gw_tuning_t t;
    gw__tuning_defaults(&t, "tcp");
    return t;
}

Test(tuning, small_messages_pick_latency_optimal)
{
    gw_tuning_t t = model();
    for (int n = 2; n <= 64; n *= 2)
        cr_expect_eq(gw__tuning_pick(&t, n, 8), GW_ALGO_RD, "n=%d 8 bytes", n);
}

Test(tuning, large_messages_pick_ring)
{
    gw_tuning_t t = model();
    for (int n = 2; n <= 64; n++)
        cr_expect_eq(gw__tuning_pick(&t, n, (size_t)256 << 20), GW_ALGO_RING, "n=%d 256 MiB", n);
}

Test(tuning, medium_messages_on_many_ranks_pick_tree)
{
    gw_tuning_t t = model();
    /* At 1024 ranks the ring's 2(n-1) alpha dominates a 1 MiB message. */
    cr_expect_eq(gw__tuning_pick(&t, 1024, 1 << 20), GW_ALGO_TREE);
}

Test(tuning, predictions_follow_the_formulas)
{
    gw_tuning_t t = {.alpha = 1e-5, .beta = 1e-9, .gamma = 0, .chunk_bytes = 1 << 20};
    /* ring, n=4, S=4000: 6 alpha + 1.5 S beta */
    cr_expect_float_eq(gw__tuning_predict(&t, GW_ALGO_RING, 4, 4000), 6e-5 + 6e-6, 1e-12);
    /* rd, n=4 (power of two): 2 (alpha + S beta) */
    cr_expect_float_eq(gw__tuning_predict(&t, GW_ALGO_RD, 4, 4000), 2 * (1e-5 + 4e-6), 1e-12);
    /* rd, n=5: ceil(log2 5) = 3 rounds plus fold in and out */
    cr_expect_float_eq(gw__tuning_predict(&t, GW_ALGO_RD, 5, 4000), 5 * (1e-5 + 4e-6), 1e-12);
    /* one rank costs nothing */
    cr_expect_float_eq(gw__tuning_predict(&t, GW_ALGO_RING, 1, 4000), 0.0, 1e-15);
}

Test(tuning, predictions_grow_with_size)
{
    gw_tuning_t t = model();
    for (int a = GW_ALGO_RING; a < GW_ALGO_COUNT; a++)
        for (size_t s = 1; s < ((size_t)1 << 30); s *= 4)
            cr_expect_lt(gw__tuning_predict(&t, (gw_algo_t)a, 8, s),
                         gw__tuning_predict(&t, (gw_algo_t)a, 8, s * 4));
}
