/*
 * data_load.c - the choice of data source from the options: Fashion-MNIST's
 * four IDX files (the test set normalised with the training set's mean and
 * deviation), the seeded synthetic task (train and test from separate
 * streams of one seed), or a user's libsvm files (whose feature and class
 * counts must agree between train and test, so both files are scanned
 * first). Each loader keeps only this rank's shard (data_shard.c).
 */
#include <stdio.h>
#include <string.h>

#include "trainer.h"

static void join_path(char *buf, size_t len, const char *dir, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

gw_status_t gw_train_load_data(const gw_train_opts_t *o, int shard, int nshards,
                               gw_train_dataset_t *train, gw_train_dataset_t *test)
{
    gw_status_t st;
    gw_train_shard_t tr = {.rank = shard, .n = nshards, .even = 1};
    gw_train_shard_t te = {.rank = shard, .n = nshards, .even = 0};
    float norm[2] = {0, 0};
    memset(train, 0, sizeof(*train));
    memset(test, 0, sizeof(*test));
    switch (o->data) {
    case GW_TRAIN_DATA_FMNIST: {
        char img[4096], lab[4096];
        const char *dir = o->data_dir ? o->data_dir : GW_TRAIN_DEFAULT_FMNIST_DIR;
        join_path(img, sizeof(img), dir, "train-images-idx3-ubyte.gz");
        join_path(lab, sizeof(lab), dir, "train-labels-idx1-ubyte.gz");
        st = gw_train_load_idx(img, lab, GW_TRAIN_FMNIST_CLASSES, &tr, norm, train);
        if (st != GW_OK)
            return st;
        join_path(img, sizeof(img), dir, "t10k-images-idx3-ubyte.gz");
        join_path(lab, sizeof(lab), dir, "t10k-labels-idx1-ubyte.gz");
        st = gw_train_load_idx(img, lab, GW_TRAIN_FMNIST_CLASSES, &te, norm, test);
        break;
    }
    case GW_TRAIN_DATA_SYNTHETIC:
        st = gw_train_make_synthetic(o->seed, 0, o->synth_train, o->synth_features,
                                     o->synth_classes, o->synth_noise, &tr, train);
        if (st != GW_OK)
            return st;
        st = gw_train_make_synthetic(o->seed, 1, o->synth_test, o->synth_features, o->synth_classes,
                                     o->synth_noise, &te, test);
        break;
    case GW_TRAIN_DATA_LIBSVM: {
        /* Train and test must agree on the feature count and classes: take
         * the larger of both files unless --features fixes it. */
        size_t dim = o->features, idx = 0;
        int classes = 0, c2 = 0;
        st = gw_train_scan_libsvm(o->train_file, 1, &idx, &classes);
        if (st != GW_OK)
            return st;
        if (dim == 0)
            dim = idx;
        if (o->test_file) {
            st = gw_train_scan_libsvm(o->test_file, 0, &idx, &c2);
            if (st != GW_OK)
                return st;
            if (o->features == 0 && idx > dim)
                dim = idx;
            if (c2 > classes)
                classes = c2;
        }
        st = gw_train_load_libsvm(o->train_file, dim, classes, &tr, train);
        if (st != GW_OK || !o->test_file)
            return st;
        st = gw_train_load_libsvm(o->test_file, dim, classes, &te, test);
        break;
    }
    default:
        st = GW_ERR_INVALID_ARG;
    }
    if (st != GW_OK) {
        gw_train_dataset_free(train);
        return st;
    }
    if (test->n > 0 && (test->dim != train->dim || test->nclasses > train->nclasses)) {
        fprintf(stderr,
                "gradwire-train: the test set has %zu features and %d classes, the training "
                "set %zu and %d\n",
                test->dim, test->nclasses, train->dim, train->nclasses);
        gw_train_dataset_free(train);
        gw_train_dataset_free(test);
        return GW_ERR_INVALID_ARG;
    }
    return GW_OK;
}
