/*
 * data_synthetic.c - a seeded synthetic classification task, for tests and
 * for benchmarks that should not depend on files: K Gaussian clusters in D
 * dimensions. The class centres come from the seed alone; sample i of a
 * split comes from (seed, split, i) alone, so each rank generates just its
 * own shard and every rank count sees the very same data set. The noise
 * level sets how much the clusters overlap, i.e. how hard the task is.
 */
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

#define SYNTH_MAX_FEATURES 1000000u
#define SYNTH_MAX_SAMPLES 100000000u

gw_status_t gw_train_make_synthetic(uint64_t seed, int split, size_t total, size_t dim,
                                    int nclasses, double noise, const gw_train_shard_t *sh,
                                    gw_train_dataset_t *out)
{
    if (dim == 0 || dim > SYNTH_MAX_FEATURES || nclasses < 2 || nclasses > 65536 ||
        total > SYNTH_MAX_SAMPLES || !(noise >= 0)) {
        fprintf(stderr,
                "gradwire-train: synthetic data needs 1..%u features, 2..65536 classes, at most "
                "%u samples and noise >= 0\n",
                SYNTH_MAX_FEATURES, SYNTH_MAX_SAMPLES);
        return GW_ERR_INVALID_ARG;
    }
    gw_train_dataset_t d = {.dim = dim, .nclasses = nclasses, .total = total};
    d.n = gw_train_shard_size(total, sh);
    float *centres = malloc((size_t)nclasses * dim * sizeof(float));
    d.x = malloc(d.n * dim * sizeof(float) + 1);
    d.y = malloc(d.n * sizeof(int32_t) + 1);
    if (!centres || !d.x || !d.y) {
        fprintf(stderr, "gradwire-train: out of memory for %zu synthetic samples\n", d.n);
        free(centres);
        gw_train_dataset_free(&d);
        return GW_ERR_NO_MEMORY;
    }
    gw_train_rng_t rng;
    gw_train_rng_seed(&rng, gw_train_mix64(seed ^ 0x5ce17e5ull));
    for (size_t i = 0; i < (size_t)nclasses * dim; i++)
        centres[i] = (float)gw_train_rng_normal(&rng);
    size_t k = 0;
    for (size_t i = 0; i < total; i++) {
        if (!gw_train_in_shard(i, total, sh))
            continue;
        gw_train_rng_seed(&rng, gw_train_mix64(seed) ^ gw_train_mix64(((uint64_t)split << 40) ^ i));
        int c = (int)gw_train_rng_below(&rng, (uint64_t)nclasses);
        float *x = d.x + k * dim;
        for (size_t j = 0; j < dim; j++)
            x[j] = centres[(size_t)c * dim + j] + (float)(noise * gw_train_rng_normal(&rng));
        d.y[k++] = c;
    }
    free(centres);
    *out = d;
    return GW_OK;
}
