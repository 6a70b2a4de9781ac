/*
 * fuzz_idx.c - libFuzzer target for the IDX loader of the trainer
 * (optimizer/data_idx.c, gw_train_load_idx), which reads an images file and
 * a labels file, plain or gzipped, named on the command line.
 *
 * Input: byte 0 picks the shard, bytes 1-2 (little-endian) the length of the
 * labels file, which follows; the images file is the rest. Both reach the
 * loader as memory files by path, as the trainer opens them. An accepted
 * pair gives a shard of the announced shape with standardised, finite
 * pixels and labels below the class count.
 */
#include <math.h>

#include "fuzz_util.h"
#include "trainer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    gw_train_shard_t sh = {.n = 1 + ((data[0] >> 1) & 1), .even = (data[0] >> 2) & 1};
    sh.rank = (data[0] & 1) % sh.n;
    size_t llen = (size_t)data[1] | (size_t)data[2] << 8;
    if (llen > size - 3)
        llen = size - 3;
    char lpath[64], ipath[64];
    int lfd = fuzz_memfile(data + 3, llen, lpath, sizeof(lpath));
    int ifd = fuzz_memfile(data + 3 + llen, size - 3 - llen, ipath, sizeof(ipath));
    float norm[2] = {0, 0};
    gw_train_dataset_t d;
    if (gw_train_load_idx(ipath, lpath, (data[0] >> 3) & 1 ? 10 : 0, &sh, norm, &d) == GW_OK) {
        FUZZ_CHECK(d.n == gw_train_shard_size(d.total, &sh));
        FUZZ_CHECK(d.nclasses >= 1 && d.nclasses <= 256);
        FUZZ_CHECK(isfinite(norm[0]) && isfinite(norm[1]) && norm[1] > 0);
        for (size_t i = 0; i < d.n; i++)
            FUZZ_CHECK(d.y[i] >= 0 && d.y[i] < d.nclasses);
        for (size_t i = 0; i < d.n * d.dim; i++)
            FUZZ_CHECK(isfinite(d.x[i]));
        gw_train_dataset_free(&d);
    }
    close(lfd);
    close(ifd);
    return 0;
}
