/*
 * data_idx.c - the IDX format of (Fashion-)MNIST, read through zlib so that
 * gzipped and plain files both work (gzread passes plain files through).
 *
 * An IDX file is a 4-byte magic (0, 0, element type, number of dimensions),
 * the dimensions as big-endian 32-bit integers, then the elements. We read
 * unsigned-byte images (3 dimensions: count, rows, columns) and labels (1
 * dimension). Every rank streams the whole file, since a gzip stream cannot
 * be entered in the middle, but keeps only its own shard; that also lets
 * every rank compute the same normalisation over all samples. Anything that
 * does not add up - wrong magic, wrong type, counts that differ, a file that
 * ends early or goes on after the last element - is refused with a message
 * that names the file and what was wrong.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "trainer.h"

#define IDX_UBYTE 0x08
/* Sanity limits: far above any real IDX data set, low enough that a
 * corrupt header cannot make us allocate the machine away. */
#define IDX_MAX_COUNT 100000000u
#define IDX_MAX_SIDE 65536u

typedef struct idx_file {
    gzFile gz;
    const char *path;
    uint32_t dims[3];
    int ndims;
} idx_file_t;

/* Read exactly len bytes, the part of a `whole`-byte item that starts
 * `before` bytes in; what went wrong is printed with `what`. */
static gw_status_t read_exact(idx_file_t *f, void *buf, size_t len, size_t before, size_t whole,
                              const char *what)
{
    size_t got = 0;
    while (got < len) {
        unsigned chunk = len - got > (1u << 30) ? (1u << 30) : (unsigned)(len - got);
        int n = gzread(f->gz, (char *)buf + got, chunk);
        if (n < 0) {
            int zerr;
            const char *msg = gzerror(f->gz, &zerr);
            fprintf(stderr, "gradwire-train: %s: cannot read %s: %s\n", f->path, what,
                    zerr == Z_ERRNO ? strerror(errno) : msg);
            return GW_ERR_PROTOCOL;
        }
        if (n == 0) {
            fprintf(stderr,
                    "gradwire-train: %s: truncated: the file ends in the %s (%zu of %zu bytes "
                    "read)\n",
                    f->path, what, before + got, whole);
            return GW_ERR_PROTOCOL;
        }
        got += (size_t)n;
    }
    return GW_OK;
}

/* Memory grows with what the files hold, not with what their headers
 * announce: a corrupt header within the sanity limits (10^8 images of
 * 65536 x 65536 pixels) must fail where its short file ends, not in an
 * allocation of gigabytes made before a byte of data was read. So the data
 * is read in chunks of IDX_CHUNK bytes and the buffers that keep it grow
 * geometrically as it arrives. */
#define IDX_CHUNK ((size_t)1 << 16)

/* buf with room for at least need elements of elem bytes (*cap of them
 * now), never more than max (need <= max): buf itself, or moved by
 * realloc; NULL out of memory, buf then left as it was. */
static void *grow(void *buf, size_t *cap, size_t need, size_t max, size_t elem)
{
    if (need <= *cap)
        return buf;
    size_t n = *cap ? *cap : IDX_CHUNK;
    while (n < need)
        n = n > max / 2 ? max : 2 * n;
    if (n > max)
        n = max;
    void *p = realloc(buf, n * elem + 1);
    if (p)
        *cap = n;
    return p;
}

static gw_status_t idx_open(idx_file_t *f, const char *path, int want_dims)
{
    unsigned char magic[4], be[12];
    memset(f, 0, sizeof(*f));
    f->path = path;
    f->gz = gzopen(path, "rb");
    if (!f->gz) {
        fprintf(stderr, "gradwire-train: cannot open %s: %m\n", path);
        return GW_ERR_NOT_FOUND;
    }
    gzbuffer(f->gz, 1 << 17);
    gw_status_t st = read_exact(f, magic, 4, 0, 4, "header");
    if (st != GW_OK)
        goto err_close;
    if (magic[0] != 0 || magic[1] != 0) {
        fprintf(stderr,
                "gradwire-train: %s: not an IDX file (magic %02x %02x %02x %02x, expected 00 "
                "00 08 0%d)\n",
                path, magic[0], magic[1], magic[2], magic[3], want_dims);
        st = GW_ERR_PROTOCOL;
        goto err_close;
    }
    if (magic[2] != IDX_UBYTE || magic[3] != want_dims) {
        fprintf(stderr,
                "gradwire-train: %s: IDX element type 0x%02x with %d dimensions; expected "
                "unsigned bytes (0x08) with %d\n",
                path, magic[2], magic[3], want_dims);
        st = GW_ERR_PROTOCOL;
        goto err_close;
    }
    st = read_exact(f, be, (size_t)want_dims * 4, 4, 4 + (size_t)want_dims * 4, "header");
    if (st != GW_OK)
        goto err_close;
    f->ndims = want_dims;
    for (int i = 0; i < want_dims; i++) {
        const unsigned char *p = be + 4 * i;
        f->dims[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        uint32_t limit = i == 0 ? IDX_MAX_COUNT : IDX_MAX_SIDE;
        if (f->dims[i] == 0 || f->dims[i] > limit) {
            fprintf(stderr, "gradwire-train: %s: dimension %d is %u (allowed 1..%u)\n", path, i,
                    f->dims[i], limit);
            st = GW_ERR_PROTOCOL;
            goto err_close;
        }
    }
    return GW_OK;

err_close:
    gzclose(f->gz);
    f->gz = NULL;
    return st;
}

/* The file must end right after its last element. */
static gw_status_t idx_expect_end(idx_file_t *f)
{
    unsigned char extra;
    int n = gzread(f->gz, &extra, 1);
    if (n == 0)
        return GW_OK;
    if (n < 0) {
        int zerr;
        fprintf(stderr, "gradwire-train: %s: %s\n", f->path, gzerror(f->gz, &zerr));
    } else {
        fprintf(stderr,
                "gradwire-train: %s: malformed: data goes on after the %u items the header "
                "announces\n",
                f->path, f->dims[0]);
    }
    return GW_ERR_PROTOCOL;
}

gw_status_t gw_train_load_idx(const char *images_path, const char *labels_path, int classes,
                              const gw_train_shard_t *sh, float norm[2], gw_train_dataset_t *out)
{
    idx_file_t im, lb;
    gw_train_dataset_t d;
    memset(&d, 0, sizeof(d));
    unsigned char *row = NULL, *labels = NULL;
    gw_status_t st = idx_open(&im, images_path, 3);
    if (st != GW_OK)
        return st;
    st = idx_open(&lb, labels_path, 1);
    if (st != GW_OK)
        goto err_close_images;
    if (im.dims[0] != lb.dims[0]) {
        fprintf(stderr, "gradwire-train: %s holds %u images but %s holds %u labels\n", images_path,
                im.dims[0], labels_path, lb.dims[0]);
        st = GW_ERR_PROTOCOL;
        goto err_close_labels;
    }
    size_t total = im.dims[0], dim = (size_t)im.dims[1] * im.dims[2];
    d.total = total;
    d.dim = dim;
    d.n = gw_train_shard_size(total, sh);
    size_t lcap = 0, xcap = 0, ycap = 0;
    row = malloc(IDX_CHUNK);
    if (!row)
        goto err_oom;
    for (size_t got = 0; got < total;) {
        size_t c = total - got < IDX_CHUNK ? total - got : IDX_CHUNK;
        unsigned char *nl = grow(labels, &lcap, got + c, total, 1);
        if (!nl)
            goto err_oom;
        labels = nl;
        if ((st = read_exact(&lb, labels + got, c, got, total, "labels")) != GW_OK)
            goto err_free;
        got += c;
    }
    if ((st = idx_expect_end(&lb)) != GW_OK)
        goto err_free;
    /* The labels are checked against the classes the data set declares:
     * inferring them from the largest label would turn one corrupt byte
     * into a model with 256 outputs, trained without a word. */
    int maxlab = 0;
    for (size_t i = 0; i < total; i++) {
        if (classes > 0 && labels[i] >= classes) {
            fprintf(stderr,
                    "gradwire-train: %s: record %zu has label %u, outside the data set's %d "
                    "classes (0..%d): the file is corrupt\n",
                    labels_path, i, labels[i], classes, classes - 1);
            st = GW_ERR_PROTOCOL;
            goto err_free;
        }
        maxlab = labels[i] > maxlab ? labels[i] : maxlab;
    }
    d.nclasses = classes > 0 ? classes : maxlab + 1;

    /* Stream the images, keep our shard as raw [0, 1] values and sum every
     * pixel of every sample for the normalisation. */
    double sum = 0, sumsq = 0;
    size_t k = 0;
    for (size_t i = 0; i < total; i++) {
        char what[64];
        snprintf(what, sizeof(what), "pixels of image %zu of %zu", i + 1, total);
        int keep = gw_train_in_shard(i, total, sh);
        for (size_t j = 0; j < dim;) {
            size_t c = dim - j < IDX_CHUNK ? dim - j : IDX_CHUNK;
            if ((st = read_exact(&im, row, c, j, dim, what)) != GW_OK)
                goto err_free;
            double rs = 0, rq = 0;
            for (size_t q = 0; q < c; q++) {
                double v = row[q] / 255.0;
                rs += v;
                rq += v * v;
            }
            sum += rs;
            sumsq += rq;
            if (keep) {
                float *nx = grow(d.x, &xcap, k * dim + j + c, d.n * dim, sizeof(float));
                if (!nx)
                    goto err_oom;
                d.x = nx;
                float *x = d.x + k * dim + j;
                for (size_t q = 0; q < c; q++)
                    x[q] = row[q] / 255.0f;
            }
            j += c;
        }
        if (!keep)
            continue;
        int32_t *ny = grow(d.y, &ycap, k + 1, d.n, sizeof(int32_t));
        if (!ny)
            goto err_oom;
        d.y = ny;
        d.y[k++] = labels[i];
    }
    /* An empty shard still has (empty) arrays, as callers free them. */
    if ((!d.x && !(d.x = malloc(1))) || (!d.y && !(d.y = malloc(1))))
        goto err_oom;
    if ((st = idx_expect_end(&im)) != GW_OK)
        goto err_free;
    if (norm[1] == 0.0f) {
        double n = (double)total * (double)dim, mean = sum / n;
        double var = sumsq / n - mean * mean;
        norm[0] = (float)mean;
        norm[1] = (float)(var > 1e-12 ? sqrt(var) : 1.0);
    }
    for (size_t i = 0; i < d.n * dim; i++)
        d.x[i] = (d.x[i] - norm[0]) / norm[1];
    free(row);
    free(labels);
    gzclose(lb.gz);
    gzclose(im.gz);
    *out = d;
    return GW_OK;

err_oom:
    fprintf(stderr, "gradwire-train: out of memory for %zu samples of %s\n", d.n, images_path);
    st = GW_ERR_NO_MEMORY;
err_free:
    free(row);
    free(labels);
    gw_train_dataset_free(&d);
err_close_labels:
    gzclose(lb.gz);
err_close_images:
    gzclose(im.gz);
    return st;
}
