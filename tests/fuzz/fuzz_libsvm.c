/*
 * fuzz_libsvm.c - libFuzzer target for the libsvm/svmlight loader of the
 * trainer (optimizer/data_libsvm.c: gw_train_scan_libsvm and
 * gw_train_load_libsvm), which reads the user's text files by path; the
 * input reaches it as a memory file.
 *
 * Byte 0 picks the shard and whether the feature count is taken from the
 * file or fixed (smaller than some indices, so that values are dropped);
 * the rest is the file. Both scans run: as a test file's (what the load
 * does) and as a training file's, which also refuses labels that leave
 * most classes empty. An accepted file gives labels below the class count
 * and finite features, and a scan that agrees with the load.
 *
 * The rows are dense by design: a file of a few lines with feature index
 * 10^7 (the format's limit) is gigabytes of floats, which is what the file
 * asks for rather than a header's lie (the loader allocates after the scan
 * has read every line). Such inputs are scanned but not loaded here, to keep
 * within libFuzzer's memory limit and its time limit: at 256 MiB a 158-byte
 * file of 35 lines reaching index 1666666 (233 MB of floats, each checked
 * finite under the sanitizers) took 11 s on a loaded 2-core machine and
 * was reported as a timeout; 16 MiB still loads every file of a few lines
 * with indices up to a hundred thousand.
 */
#define DENSE_BYTES_MAX ((size_t)16 << 20)
#include <math.h>

#include "fuzz_util.h"
#include "trainer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    gw_train_shard_t sh = {.n = 1 + ((data[0] >> 1) & 1), .even = (data[0] >> 2) & 1};
    sh.rank = (data[0] & 1) % sh.n;
    size_t dim = (data[0] >> 3) & 1 ? 3 : 0;
    int min_classes = (data[0] >> 4) & 3;
    char path[64];
    int fd = fuzz_memfile(data + 1, size - 1, path, sizeof(path));
    size_t max_index = 0;
    int classes = 0;
    /* The load scans as for a test file (no check of the labels' gaps);
     * the training file's scan refuses more, never less. */
    gw_status_t scan = gw_train_scan_libsvm(path, 0, &max_index, &classes);
    size_t train_index = 0;
    int train_classes = 0;
    gw_status_t train_scan = gw_train_scan_libsvm(path, 1, &train_index, &train_classes);
    FUZZ_CHECK(train_scan != GW_OK || scan == GW_OK);
    size_t lines = 1;
    for (size_t i = 1; i < size; i++)
        lines += data[i] == '\n';
    if (scan == GW_OK && lines * (dim ? dim : max_index) > DENSE_BYTES_MAX / sizeof(float)) {
        close(fd);
        return 0;
    }
    gw_train_dataset_t d;
    gw_status_t st = gw_train_load_libsvm(path, dim, min_classes, &sh, &d);
    FUZZ_CHECK((scan == GW_OK) == (st == GW_OK));
    if (st == GW_OK) {
        FUZZ_CHECK(d.dim == (dim ? dim : max_index));
        FUZZ_CHECK(d.nclasses >= classes && d.nclasses >= min_classes);
        FUZZ_CHECK(d.n == gw_train_shard_size(d.total, &sh));
        for (size_t i = 0; i < d.n; i++)
            FUZZ_CHECK(d.y[i] >= 0 && d.y[i] < d.nclasses);
        for (size_t i = 0; i < d.n * d.dim; i++)
            FUZZ_CHECK(isfinite(d.x[i]));
        gw_train_dataset_free(&d);
    }
    close(fd);
    return 0;
}
