/*
 * data_shard.c - what every data source shares: the sharding rule, and
 * freeing a loaded shard.
 *
 * Sharding is by stride: rank r of n keeps the samples whose index i has
 * i % n == r, among the first n * floor(total / n), so every rank holds the
 * same number of samples and takes the same number of steps per epoch
 * (collectives must match). With shuffling off, step s of n ranks with a
 * local batch b then sees exactly the samples s*n*b .. (s+1)*n*b - 1, the
 * union batch one rank with batch n*b sees at step s.
 */
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

void gw_train_dataset_free(gw_train_dataset_t *d)
{
    if (!d)
        return;
    free(d->x);
    free(d->y);
    memset(d, 0, sizeof(*d));
}

size_t gw_train_shard_size(size_t total, const gw_train_shard_t *sh)
{
    size_t n = (size_t)sh->n, whole = total / n;
    if (sh->even)
        return whole;
    return whole + ((size_t)sh->rank < total % n);
}

int gw_train_in_shard(size_t i, size_t total, const gw_train_shard_t *sh)
{
    size_t n = (size_t)sh->n;
    if (i % n != (size_t)sh->rank)
        return 0;
    return !sh->even || i < total / n * n;
}
