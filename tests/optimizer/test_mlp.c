/*
 * Unit tests of the trainer's model and optimizer, compiled together with
 * their sources: backward against central finite differences, the order in
 * which backward reports finished gradients (what bucketing relies on), the
 * SGD update and the learning-rate schedule (linear scaling, warm-up).
 */
#include <criterion/criterion.h>
#include <math.h>

#include "optimizer/model_mlp.c"
#include "optimizer/rng.c"
#include "optimizer/sgd.c"

#define B 6

static void fill(float *a, size_t n, gw_train_rng_t *r, double sd)
{
    for (size_t i = 0; i < n; i++)
        a[i] = (float)(sd * gw_train_rng_normal(r));
}

/* The mean cross-entropy of the batch, in double for the differences. */
static double loss_of(gw_train_mlp_t *m, const float *x, const int32_t *y)
{
    double sum = 0;
    long ok = 0;
    gw_train_mlp_forward(m, x, B);
    gw_train_mlp_loss(m, y, B, 1.0f / B, &sum, &ok);
    return sum / B;
}

typedef struct order {
    size_t last;
    int calls;
    int decreasing;
} order_t;

static gw_status_t record(void *ctx, size_t from)
{
    order_t *o = ctx;
    if (from >= o->last)
        o->decreasing = 0;
    o->last = from;
    o->calls++;
    return GW_OK;
}

Test(mlp, backward_matches_finite_differences)
{
    int sizes[] = {5, 7, 6, 4};
    gw_train_rng_t rng;
    gw_train_rng_seed(&rng, 42);
    gw_train_mlp_t m;
    cr_assert_eq(gw_train_mlp_init(&m, sizes, 4, B, &rng), GW_OK);
    /* Non-zero biases, so that the bias gradients matter too. */
    for (int l = 0; l < m.nlayers; l++)
        fill(m.params + m.b_off[l], (size_t)sizes[l + 1], &rng, 0.3);
    float x[B * 5];
    int32_t y[B];
    fill(x, B * 5, &rng, 1.0);
    for (int i = 0; i < B; i++)
        y[i] = (int32_t)gw_train_rng_below(&rng, 4);

    loss_of(&m, x, y);
    order_t ord = {.last = SIZE_MAX, .decreasing = 1};
    cr_assert_eq(gw_train_mlp_backward(&m, B, record, &ord), GW_OK);
    cr_assert_eq(ord.calls, 3, "one report per layer");
    cr_assert(ord.decreasing, "layers must finish from the end of the array to its start");
    cr_assert_eq(ord.last, 0, "the last report covers the whole array");

    float *g = malloc(m.nparams * sizeof(float));
    memcpy(g, m.grads, m.nparams * sizeof(float));
    double norm = 0;
    const float eps = 1e-2f;
    for (size_t i = 0; i < m.nparams; i++) {
        float keep = m.params[i];
        m.params[i] = keep + eps;
        double up = loss_of(&m, x, y);
        m.params[i] = keep - eps;
        double down = loss_of(&m, x, y);
        m.params[i] = keep;
        double fd = (up - down) / (2.0 * eps);
        norm += fd * fd;
        cr_assert(fabs(fd - g[i]) <= 1e-3 + 1e-2 * fabs(fd),
                  "parameter %zu: backward %.6g, finite difference %.6g", i, g[i], fd);
    }
    cr_assert(norm > 1e-4, "the gradient must not vanish (norm^2 %g)", norm);
    free(g);
    gw_train_mlp_free(&m);
}

Test(mlp, loss_counts_correct_and_scales_delta)
{
    int sizes[] = {2, 3};
    gw_train_rng_t rng;
    gw_train_rng_seed(&rng, 1);
    gw_train_mlp_t m;
    cr_assert_eq(gw_train_mlp_init(&m, sizes, 2, 2, &rng), GW_OK);
    memset(m.params, 0, m.nparams * sizeof(float));
    m.params[m.b_off[0] + 2] = 5.0f; /* class 2 wins for every input */
    float x[4] = {1, 2, 3, 4};
    int32_t y[2] = {2, 0};
    double loss = 0;
    long ok = 0;
    gw_train_mlp_forward(&m, x, 2);
    gw_train_mlp_loss(&m, y, 2, 0.5f, &loss, &ok);
    cr_assert_eq(ok, 1);
    double p2 = exp(5.0) / (2.0 + exp(5.0));
    cr_assert_float_eq(loss, -log(p2) - log(1.0 / (2.0 + exp(5.0))), 1e-5);
    /* delta = (p - onehot) * scale */
    cr_assert_float_eq(m.delta[1][2], (float)((p2 - 1.0) * 0.5), 1e-6);
    cr_assert_float_eq(m.delta[1][3], (float)((1.0 / (2.0 + exp(5.0)) - 1.0) * 0.5), 1e-6);
    gw_train_mlp_free(&m);
}

Test(sgd, momentum_and_weight_decay_on_weights_only)
{
    int sizes[] = {1, 1};
    gw_train_rng_t rng;
    gw_train_rng_seed(&rng, 1);
    gw_train_mlp_t m;
    gw_train_sgd_t s;
    cr_assert_eq(gw_train_mlp_init(&m, sizes, 2, 1, &rng), GW_OK);
    cr_assert_eq(gw_train_sgd_init(&s, &m, 0.5, 0.1), GW_OK);
    m.params[0] = 2.0f; /* weight */
    m.params[1] = 2.0f; /* bias */
    float g[2] = {1.0f, 1.0f};
    gw_train_sgd_step(&s, &m, g, 0.1f);
    /* v = g + wd w = 1.2 for the weight, 1 for the bias */
    cr_assert_float_eq(m.params[0], 2.0f - 0.12f, 1e-6);
    cr_assert_float_eq(m.params[1], 2.0f - 0.1f, 1e-6);
    gw_train_sgd_step(&s, &m, g, 0.1f);
    /* v = 0.5 * 1.2 + 1 + 0.1 * 1.88 = 1.788 */
    cr_assert_float_eq(m.params[0], 1.88f - 0.1788f, 1e-6);
    cr_assert_float_eq(m.params[1], 1.9f - 0.15f, 1e-6);
    gw_train_sgd_free(&s);
    gw_train_mlp_free(&m);
}

Test(sgd, linear_scaling_rule_with_warmup)
{
    gw_train_opts_t o;
    memset(&o, 0, sizeof(o));
    o.lr = 0.1;
    o.batch = 512;
    o.lr_ref_batch = 128;
    o.epochs = 10;
    o.warmup_epochs = 2;
    o.decay = GW_TRAIN_DECAY_NONE;
    long spe = 100;
    cr_assert_float_eq(gw_train_lr_at(&o, 0, spe), 0.1, 1e-12, "warm-up starts unscaled");
    cr_assert_float_eq(gw_train_lr_at(&o, 100, spe), 0.25, 1e-12, "halfway up");
    cr_assert_float_eq(gw_train_lr_at(&o, 200, spe), 0.4, 1e-12, "lr * 512 / 128 after");
    cr_assert_float_eq(gw_train_lr_at(&o, 999, spe), 0.4, 1e-12);
    o.decay = GW_TRAIN_DECAY_COSINE;
    cr_assert_float_eq(gw_train_lr_at(&o, 200, spe), 0.4, 1e-12);
    cr_assert_float_eq(gw_train_lr_at(&o, 600, spe), 0.2, 1e-12, "cosine halfway");
    cr_assert(gw_train_lr_at(&o, 999, spe) < 1e-4);
    o.warmup_epochs = 0;
    cr_assert_float_eq(gw_train_lr_at(&o, 0, spe), 0.4, 1e-12, "no warm-up: scaled at once");
    /* A batch below the reference scales the rate down, with no climb. */
    o.batch = 32;
    o.warmup_epochs = 2;
    o.decay = GW_TRAIN_DECAY_NONE;
    cr_assert_float_eq(gw_train_lr_at(&o, 0, spe), 0.025, 1e-12);
    cr_assert_float_eq(gw_train_lr_at(&o, 150, spe), 0.025, 1e-12);
}

Test(rng, shuffle_is_a_seeded_permutation)
{
    uint32_t a[100], b[100];
    gw_train_rng_t r1, r2;
    gw_train_rng_seed(&r1, 7);
    gw_train_rng_seed(&r2, 7);
    for (uint32_t i = 0; i < 100; i++)
        a[i] = b[i] = i;
    gw_train_shuffle(a, 100, &r1);
    gw_train_shuffle(b, 100, &r2);
    cr_assert_arr_eq(a, b, sizeof(a), "same seed, same order");
    int seen[100] = {0}, moved = 0;
    for (int i = 0; i < 100; i++) {
        seen[a[i]]++;
        moved += a[i] != (uint32_t)i;
    }
    for (int i = 0; i < 100; i++)
        cr_assert_eq(seen[i], 1);
    cr_assert(moved > 50);
}
