/*
 * The trainer's data loaders, through `gradwire-train --check-data`: IDX
 * files (plain and gzipped) and libsvm files that are valid load with the
 * right shapes and shards; truncated and malformed ones are refused with an
 * error naming the file and the problem. Also the synthetic generator's
 * shards, which must partition the same data set for every rank count.
 */
#include "train_util.h"

/* ---- IDX ---------------------------------------------------------------- */

static size_t idx_images(unsigned char *buf, unsigned n, unsigned rows, unsigned cols)
{
    unsigned char *p = buf;
    unsigned dims[3] = {n, rows, cols};
    *p++ = 0;
    *p++ = 0;
    *p++ = 0x08;
    *p++ = 3;
    for (int i = 0; i < 3; i++) {
        *p++ = (unsigned char)(dims[i] >> 24);
        *p++ = (unsigned char)(dims[i] >> 16);
        *p++ = (unsigned char)(dims[i] >> 8);
        *p++ = (unsigned char)dims[i];
    }
    for (unsigned i = 0; i < n * rows * cols; i++)
        *p++ = (unsigned char)(i * 7);
    return (size_t)(p - buf);
}

static size_t idx_labels(unsigned char *buf, unsigned n, unsigned classes)
{
    unsigned char *p = buf;
    *p++ = 0;
    *p++ = 0;
    *p++ = 0x08;
    *p++ = 1;
    *p++ = (unsigned char)(n >> 24);
    *p++ = (unsigned char)(n >> 16);
    *p++ = (unsigned char)(n >> 8);
    *p++ = (unsigned char)n;
    for (unsigned i = 0; i < n; i++)
        *p++ = (unsigned char)(i % classes);
    return (size_t)(p - buf);
}

static char dir[256];
static unsigned char img[4096], lab[256], tim[4096], tlab[256];
static size_t nimg, nlab, ntim, ntlab;

static void put(const char *name, const void *p, size_t len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    write_bin(path, p, len);
}

/* A valid data set: 30 training and 10 test images of 4x5, 3 classes.
 * Plain IDX under the .gz names: gzread passes plain data through. */
static void write_valid(void)
{
    nimg = idx_images(img, 30, 4, 5);
    nlab = idx_labels(lab, 30, 3);
    ntim = idx_images(tim, 10, 4, 5);
    ntlab = idx_labels(tlab, 10, 3);
    put("train-images-idx3-ubyte.gz", img, nimg);
    put("train-labels-idx1-ubyte.gz", lab, nlab);
    put("t10k-images-idx3-ubyte.gz", tim, ntim);
    put("t10k-labels-idx1-ubyte.gz", tlab, ntlab);
}

static void setup_dir(void)
{
    char *d = make_tmpdir("idx");
    cr_assert_not_null(d, "cannot make a temporary directory");
    snprintf(dir, sizeof(dir), "%s", d);
    free(d);
    write_valid();
}

static void teardown_dir(void) { remove_tree(dir); }

static run_result_t check_idx(int ranks)
{
    char *args[] = {"--data", "fashion-mnist", "--data-dir", dir, "--check-data", NULL};
    return train_run(ranks, args, 60);
}

static void expect_idx_error(const char *what)
{
    run_result_t r = check_idx(0);
    cr_assert(r.exited && r.status == 1, "a bad IDX file was accepted (status %d):\n%s", r.status,
              r.output);
    cr_assert(strstr(r.output, what) != NULL, "expected \"%s\" in:\n%s", what, r.output);
    cr_assert(strstr(r.output, dir) != NULL, "the error must name the file:\n%s", r.output);
    free(r.output);
    write_valid();
}

Test(idx, valid_files_load_and_shard, .init = setup_dir, .fini = teardown_dir, .timeout = 60)
{
    run_result_t r = check_idx(0);
    cr_assert(r.exited && r.status == 0, "%s", r.output);
    /* Fashion-MNIST declares 10 classes, whatever labels the files use. */
    cr_assert(strstr(r.output, "train 30 of 30 samples, test 10 of 10, 20 features, 10 classes"),
              "%s", r.output);
    free(r.output);
    /* Four ranks: 30 = 4 x 7 + 2 training samples (the 2 are dropped so
     * every rank takes the same steps); all 10 test samples are kept. */
    r = check_idx(4);
    cr_assert(r.exited && r.status == 0, "%s", r.output);
    cr_assert(strstr(r.output, "rank 0 of 4: train 7 of 30 samples, test 3 of 10"), "%s", r.output);
    cr_assert(strstr(r.output, "rank 3 of 4: train 7 of 30 samples, test 2 of 10"), "%s", r.output);
    free(r.output);
}

Test(idx, gzipped_files_load, .init = setup_dir, .fini = teardown_dir, .timeout = 60)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && for f in *.gz; do mv $f x && gzip -c x > $f && rm x; done", dir);
    cr_assert_eq(system(cmd), 0);
    run_result_t r = check_idx(0);
    cr_assert(r.exited && r.status == 0, "%s", r.output);
    cr_assert(strstr(r.output, "train 30 of 30 samples"), "%s", r.output);
    free(r.output);
    /* Cut the compressed stream short. */
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && head -c 60 train-images-idx3-ubyte.gz > x && mv x "
             "train-images-idx3-ubyte.gz",
             dir);
    cr_assert_eq(system(cmd), 0);
    r = check_idx(0);
    cr_assert(r.exited && r.status == 1, "%s", r.output);
    cr_assert(strstr(r.output, "train-images-idx3-ubyte.gz"), "%s", r.output);
    cr_assert(strstr(r.output, "truncated") || strstr(r.output, "unexpected end"), "%s", r.output);
    free(r.output);
}

Test(idx, malformed_files_are_refused, .init = setup_dir, .fini = teardown_dir, .timeout = 120)
{
    put("train-images-idx3-ubyte.gz", img, nimg - 3);
    expect_idx_error("truncated: the file ends in the pixels of image 30 of 30");
    put("train-images-idx3-ubyte.gz", img, 10);
    expect_idx_error("truncated: the file ends in the header");
    put("train-labels-idx1-ubyte.gz", lab, nlab - 1);
    expect_idx_error("truncated: the file ends in the labels");

    unsigned char bad[4096];
    memcpy(bad, img, nimg);
    bad[0] = 0x1f;
    put("train-images-idx3-ubyte.gz", bad, nimg);
    expect_idx_error("not an IDX file");
    memcpy(bad, img, nimg);
    bad[2] = 0x0d; /* float elements */
    put("train-images-idx3-ubyte.gz", bad, nimg);
    expect_idx_error("element type 0x0d");
    put("train-images-idx3-ubyte.gz", lab, nlab); /* labels where images belong */
    expect_idx_error("with 1 dimensions; expected unsigned bytes (0x08) with 3");

    memcpy(bad, img, nimg);
    bad[nimg] = 1;
    put("train-images-idx3-ubyte.gz", bad, nimg + 1);
    expect_idx_error("data goes on after the 30 items");

    size_t n = idx_labels(bad, 29, 3);
    put("train-labels-idx1-ubyte.gz", bad, n);
    expect_idx_error("holds 30 images but");

    memcpy(bad, img, nimg);
    memset(bad + 4, 0xff, 4); /* 4 billion images */
    put("train-images-idx3-ubyte.gz", bad, nimg);
    expect_idx_error("dimension 0 is 4294967295");

    /* A header within the limits that announces 30 images of 65536 x 65536
     * pixels, in a file of a few hundred bytes: refused where the file ends,
     * without first allocating what the header announces (fuzz_idx found
     * the loader asking for that much). */
    memcpy(bad, img, nimg);
    memcpy(bad + 8, (unsigned char[]){0, 1, 0, 0, 0, 1, 0, 0}, 8);
    put("train-images-idx3-ubyte.gz", bad, nimg);
    expect_idx_error("truncated: the file ends in the pixels of image 1 of 30");

    char path[512];
    snprintf(path, sizeof(path), "%s/t10k-labels-idx1-ubyte.gz", dir);
    unlink(path);
    expect_idx_error("cannot open");
}

/* One corrupt label byte must not make a 256-class model: Fashion-MNIST has
 * 10 classes, and a label outside them names the file, record and value. */
Test(idx, a_label_outside_the_classes_is_refused, .init = setup_dir, .fini = teardown_dir,
     .timeout = 60)
{
    unsigned char bad[256];
    memcpy(bad, lab, nlab);
    bad[8 + 17] = 255; /* the header is 8 bytes: record 17 (from 0) */
    put("train-labels-idx1-ubyte.gz", bad, nlab);
    expect_idx_error("train-labels-idx1-ubyte.gz: record 17 has label 255");
    memcpy(bad, tlab, ntlab);
    bad[8 + 9] = 10;
    put("t10k-labels-idx1-ubyte.gz", bad, ntlab);
    expect_idx_error("t10k-labels-idx1-ubyte.gz: record 9 has label 10");
}

Test(idx, training_runs_on_the_small_set, .init = setup_dir, .fini = teardown_dir, .timeout = 60)
{
    char *args[] = {"--data-dir", dir, "--batch", "6", "--epochs", "2", "--hidden", "8", NULL};
    run_result_t r = train_run(2, args, 60);
    cr_assert(r.exited && r.status == 0, "%s", r.output);
    cr_assert(strstr(r.output, "epoch   2"), "%s", r.output);
    free(r.output);
}

/* ---- libsvm ----------------------------------------------------------------- */

static void libsvm_file(const char *path, const char *text) { write_bin(path, text, strlen(text)); }

static run_result_t check_libsvm(const char *train, const char *test, int ranks)
{
    char *args[] = {
        "--data",     "libsvm", "--train", (char *)train, "--check-data", test ? "--test" : NULL,
        (char *)test, NULL};
    return train_run(ranks, args, 60);
}

Test(libsvm, valid_files_load, .timeout = 60)
{
    char *d = make_tmpdir("svm");
    cr_assert_not_null(d, "cannot make a temporary directory");
    char tr[512], te[512];
    snprintf(tr, sizeof(tr), "%s/train.svm", d);
    snprintf(te, sizeof(te), "%s/test.svm", d);
    libsvm_file(tr, "# a comment line\n"
                    "+1 1:0.5 3:-2 # trailing comment\n"
                    "-1 2:1e-3\n"
                    "\n"
                    "+1 1:1 2:2 3:3\n"
                    "-1 3:0.25\n");
    libsvm_file(te, "1 5:1\n-1 1:2\n");
    run_result_t r = check_libsvm(tr, te, 0);
    cr_assert(r.exited && r.status == 0, "%s", r.output);
    /* The test set's index 5 widens both sets to 5 features. */
    cr_assert(strstr(r.output, "train 4 of 4 samples, test 2 of 2, 5 features, 2 classes"), "%s",
              r.output);
    free(r.output);
    r = check_libsvm(tr, NULL, 2);
    cr_assert(r.exited && r.status == 0, "%s", r.output);
    cr_assert(strstr(r.output, "rank 1 of 2: train 2 of 4 samples, test 0 of 0, 3 features"), "%s",
              r.output);
    free(r.output);
    remove_tree(d);
    free(d);
}

static void expect_libsvm_error(const char *text, const char *what)
{
    char *d = make_tmpdir("svmbad");
    cr_assert_not_null(d, "cannot make a temporary directory");
    char tr[512];
    snprintf(tr, sizeof(tr), "%s/bad.svm", d);
    libsvm_file(tr, text);
    run_result_t r = check_libsvm(tr, NULL, 0);
    cr_assert(r.exited && r.status == 1, "accepted:\n%s\n---\n%s", text, r.output);
    cr_assert(strstr(r.output, what) != NULL, "expected \"%s\" in:\n%s", what, r.output);
    free(r.output);
    remove_tree(d);
    free(d);
}

/* A libsvm file declares no class count: it is the largest label plus one,
 * so a corrupt 255 among labels 0..2 would train 256 classes. A label that
 * leaves classes without any sample between 1 and itself is refused, naming
 * the line; 1-based labels (no class 0, as many libsvm sets) still load. */
Test(libsvm, a_label_far_outside_the_others_is_refused, .timeout = 60)
{
    expect_libsvm_error("0 1:1\n1 1:1\n2 1:1\n255 1:1\n1 2:1\n",
                        "bad.svm:4: label 255 leaves classes 3..254 without a sample");
    char *d = make_tmpdir("svm1");
    cr_assert_not_null(d, "cannot make a temporary directory");
    char tr[512];
    snprintf(tr, sizeof(tr), "%s/one-based.svm", d);
    libsvm_file(tr, "1 1:1\n2 1:2\n3 2:1\n");
    run_result_t r = check_libsvm(tr, NULL, 0);
    cr_expect(r.exited && r.status == 0, "%s", r.output);
    cr_expect(strstr(r.output, "4 classes"), "%s", r.output);
    free(r.output);
    remove_tree(d);
    free(d);
}

Test(libsvm, malformed_lines_are_refused_with_their_position, .timeout = 120)
{
    expect_libsvm_error("1 1:1\n0 2:x\n", "bad.svm:2:5: malformed libsvm line: the value is not");
    expect_libsvm_error("1 1:1\nabc 2:1\n", "bad.svm:2:1: malformed libsvm line: the label");
    expect_libsvm_error("1 1:1 1:2\n", ":1:7: malformed libsvm line: feature indices must be "
                                       "strictly ascending");
    expect_libsvm_error("1 0:1\n", ":1:3: malformed libsvm line: feature indices start at 1");
    expect_libsvm_error("1 3 4\n", "expected INDEX:VALUE");
    expect_libsvm_error("1.5 1:1\n", "the label must be a class number");
    expect_libsvm_error("1 1:1e999\n", "not a finite float");
    /* Finite as a double, infinite as the float it is stored in (fuzz_libsvm). */
    expect_libsvm_error("1 1:1\n0 2:-1e40\n",
                        "bad.svm:2:5: malformed libsvm line: the value is not "
                        "a finite float");
    expect_libsvm_error("1 1:1 2:", "the value is not a number");
    expect_libsvm_error("# only a comment\n\n", "holds no samples");
}

Test(libsvm, missing_file_is_named, .timeout = 60)
{
    run_result_t r = check_libsvm("/nonexistent/x.svm", NULL, 0);
    cr_assert(r.exited && r.status == 1);
    cr_assert(strstr(r.output, "cannot open /nonexistent/x.svm: No such file"), "%s", r.output);
    free(r.output);
}

/* ---- synthetic -------------------------------------------------------------- */

Test(synthetic, shards_partition_the_same_set, .timeout = 60)
{
    char *args[] = {"--data", "synthetic", "--synthetic", "103,21,4,3,1", "--check-data", NULL};
    run_result_t r = train_run(3, args, 60);
    cr_assert(r.exited && r.status == 0, "%s", r.output);
    cr_assert(strstr(r.output, "rank 0 of 3: train 34 of 103 samples, test 7 of 21, 4 features, "
                               "3 classes"),
              "%s", r.output);
    free(r.output);
}
