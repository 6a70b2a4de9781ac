/*
 * data_libsvm.c - the libsvm / svmlight text format, for users' own data:
 * one sample per line, "LABEL INDEX:VALUE INDEX:VALUE ...", indices from 1
 * and strictly ascending, '#' starting a comment, blank lines ignored.
 *
 * The file is read twice: a scan finds the largest index and the classes
 * (so that every rank, and the test set, agree on the shape), then the load
 * keeps this rank's shard as dense rows. Labels are class numbers 0, 1, ...
 * or the binary -1/+1 (read as 0/1). Any malformed line is refused with the
 * file, line and column of the problem, since silently skipping lines would
 * train on something other than what the user gave.
 */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

#define LIBSVM_MAX_INDEX 10000000ul
#define LIBSVM_MAX_CLASSES 65536

typedef struct parser {
    const char *path;
    FILE *f;
    char *line;
    size_t cap;
    unsigned long lineno;
} parser_t;

static gw_status_t bad(const parser_t *p, const char *at, const char *what)
{
    fprintf(stderr, "gradwire-train: %s:%lu:%ld: malformed libsvm line: %s\n", p->path, p->lineno,
            (long)(at - p->line) + 1, what);
    return GW_ERR_PROTOCOL;
}

/* Next non-blank, non-comment line into p->line (comment cut off); 0 at the
 * end of the file, -1 on a read error. */
static int next_line(parser_t *p)
{
    for (;;) {
        errno = 0;
        ssize_t n = getline(&p->line, &p->cap, p->f);
        if (n < 0)
            return ferror(p->f) ? -1 : 0;
        p->lineno++;
        if ((size_t)n != strlen(p->line)) {
            fprintf(stderr, "gradwire-train: %s:%lu: malformed libsvm line: contains a NUL byte\n",
                    p->path, p->lineno);
            return -2;
        }
        char *hash = strchr(p->line, '#');
        if (hash)
            *hash = '\0';
        char *s = p->line;
        while (isspace((unsigned char)*s))
            s++;
        if (*s)
            return 1;
    }
}

typedef void (*feature_fn)(void *ctx, unsigned long index, float value);

/* Parse one line: the label into *label, each feature to fn. */
static gw_status_t parse_line(parser_t *p, int *label, feature_fn fn, void *ctx,
                              unsigned long *max_index)
{
    char *s = p->line, *end;
    while (isspace((unsigned char)*s))
        s++;
    errno = 0;
    double lv = strtod(s, &end);
    if (end == s || (*end && !isspace((unsigned char)*end)))
        return bad(p, s, "the label is not a number");
    if (lv == -1.0)
        *label = 0;
    else if (lv >= 0 && lv < LIBSVM_MAX_CLASSES && lv == floor(lv))
        *label = (int)lv;
    else
        return bad(p, s, "the label must be a class number 0, 1, 2, ... or -1/+1");
    s = end;
    unsigned long prev = 0;
    for (;;) {
        while (isspace((unsigned char)*s))
            s++;
        if (!*s)
            break;
        if (!isdigit((unsigned char)*s))
            return bad(p, s, "expected INDEX:VALUE");
        errno = 0;
        unsigned long idx = strtoul(s, &end, 10);
        if (errno || *end != ':')
            return bad(p, s, "expected INDEX:VALUE");
        if (idx == 0)
            return bad(p, s, "feature indices start at 1");
        if (idx > LIBSVM_MAX_INDEX)
            return bad(p, s, "feature index too large (limit 10000000)");
        if (idx <= prev)
            return bad(p, s, "feature indices must be strictly ascending");
        prev = idx;
        char *v = end + 1;
        errno = 0;
        double val = strtod(v, &end);
        if (end == v || (*end && !isspace((unsigned char)*end)))
            return bad(p, v, "the value is not a number");
        /* Features are stored as float: a value that is finite as a double
         * but beyond FLT_MAX would become an infinity there (and NaNs in
         * training). */
        if (!isfinite(val) || errno == ERANGE || fabs(val) > FLT_MAX)
            return bad(p, v, "the value is not a finite float");
        if (idx > *max_index)
            *max_index = idx;
        if (fn)
            fn(ctx, idx, (float)val);
        s = end;
    }
    return GW_OK;
}

static gw_status_t parser_open(parser_t *p, const char *path)
{
    memset(p, 0, sizeof(*p));
    p->path = path;
    p->f = fopen(path, "r");
    if (!p->f) {
        fprintf(stderr, "gradwire-train: cannot open %s: %m\n", path);
        return GW_ERR_NOT_FOUND;
    }
    return GW_OK;
}

static void parser_close(parser_t *p)
{
    free(p->line);
    fclose(p->f);
}

static gw_status_t read_failed(const parser_t *p, int rc)
{
    if (rc == -1)
        fprintf(stderr, "gradwire-train: cannot read %s: %m\n", p->path);
    return GW_ERR_PROTOCOL;
}

/* The class count of a libsvm file is its largest label plus one: nothing
 * in the file declares it. So a largest label far from the others (255
 * among 0..2, one corrupt byte) would silently train that many outputs. It
 * is refused when more classes between 1 and it have no sample than have
 * one; class 0 may be empty, since many libsvm sets number classes from 1,
 * and a few empty classes (a small set) are fine. */
static gw_status_t check_label_gaps(const char *path, const uint8_t *seen, int maxlab,
                                    unsigned long maxlab_line)
{
#define SEEN(c) (seen[(c) / 8] & (1u << ((c) % 8)))
    int missing = 0, present = 0, first = -1;
    for (int c = 0; c <= maxlab; c++) {
        if (SEEN(c))
            present++;
        else if (c > 0) {
            missing++;
            first = first < 0 ? c : first;
        }
    }
    if (missing <= present)
        return GW_OK;
    int last = first;
    while (last + 1 < maxlab && !SEEN(last + 1))
        last++;
#undef SEEN
    fprintf(stderr,
            "gradwire-train: %s:%lu: label %d leaves classes %d..%d%s without a sample (%d "
            "classes have none, %d do): a corrupt label? Labels are class numbers 0..K-1 (or "
            "1..K)\n",
            path, maxlab_line, maxlab, first, last, missing > last - first + 1 ? " and more" : "",
            missing, present);
    return GW_ERR_PROTOCOL;
}

gw_status_t gw_train_scan_libsvm(const char *path, int training, size_t *max_index, int *nclasses)
{
    parser_t p;
    gw_status_t st = parser_open(&p, path);
    if (st != GW_OK)
        return st;
    unsigned long mx = 0, lines = 0, maxlab_line = 0;
    int maxlab = -1, rc;
    uint8_t *seen = calloc(LIBSVM_MAX_CLASSES / 8, 1);
    if (!seen) {
        parser_close(&p);
        return GW_ERR_NO_MEMORY;
    }
    while ((rc = next_line(&p)) > 0) {
        int label;
        if ((st = parse_line(&p, &label, NULL, NULL, &mx)) != GW_OK)
            goto out;
        seen[label / 8] |= (uint8_t)(1u << (label % 8));
        if (label > maxlab) {
            maxlab = label;
            maxlab_line = p.lineno;
        }
        lines++;
    }
    if (rc < 0) {
        st = read_failed(&p, rc);
        goto out;
    }
    if (lines == 0 || mx == 0) {
        fprintf(stderr, "gradwire-train: %s holds no samples with features\n", path);
        st = GW_ERR_PROTOCOL;
        goto out;
    }
    if (training && (st = check_label_gaps(path, seen, maxlab, maxlab_line)) != GW_OK)
        goto out;
    *max_index = mx;
    *nclasses = maxlab < 1 ? 2 : maxlab + 1;
out:
    free(seen);
    parser_close(&p);
    return st;
}

typedef struct row_ctx {
    float *row;
    size_t dim;
    unsigned long dropped; /* beyond a fixed --features */
} row_ctx_t;

static void put_feature(void *ctx, unsigned long index, float value)
{
    row_ctx_t *r = ctx;
    if (index <= r->dim)
        r->row[index - 1] = value;
    else
        r->dropped++;
}

gw_status_t gw_train_load_libsvm(const char *path, size_t dim, int min_classes,
                                 const gw_train_shard_t *sh, gw_train_dataset_t *out)
{
    size_t max_index = 0;
    int classes = 0;
    gw_status_t st = gw_train_scan_libsvm(path, 0, &max_index, &classes);
    if (st != GW_OK)
        return st;
    if (dim == 0)
        dim = max_index;
    if (min_classes > classes)
        classes = min_classes;
    /* Count the samples: the scan proved every line well formed. */
    parser_t p;
    if ((st = parser_open(&p, path)) != GW_OK)
        return st;
    size_t total = 0;
    int rc;
    while ((rc = next_line(&p)) > 0)
        total++;
    if (rc < 0) {
        st = read_failed(&p, rc);
        parser_close(&p);
        return st;
    }
    rewind(p.f);
    p.lineno = 0;
    gw_train_dataset_t d = {.dim = dim, .nclasses = classes, .total = total};
    d.n = gw_train_shard_size(total, sh);
    d.x = calloc(d.n * dim + 1, sizeof(float));
    d.y = calloc(d.n + 1, sizeof(int32_t));
    if (!d.x || !d.y) {
        fprintf(stderr, "gradwire-train: out of memory for %zu x %zu floats of %s\n", d.n, dim,
                path);
        st = GW_ERR_NO_MEMORY;
        goto err_free;
    }
    row_ctx_t rctx = {.dim = dim};
    size_t i = 0, k = 0;
    unsigned long mx = 0;
    while ((rc = next_line(&p)) > 0) {
        if (gw_train_in_shard(i, total, sh) && k < d.n) {
            int label;
            rctx.row = d.x + k * dim;
            if ((st = parse_line(&p, &label, put_feature, &rctx, &mx)) != GW_OK)
                goto err_free;
            d.y[k++] = label;
        }
        i++;
    }
    if (rc < 0 || k != d.n) {
        fprintf(stderr, "gradwire-train: %s changed while it was being read\n", path);
        st = GW_ERR_PROTOCOL;
        goto err_free;
    }
    if (rctx.dropped)
        fprintf(stderr, "gradwire-train: %s: %lu feature values beyond --features %zu ignored\n",
                path, rctx.dropped, dim);
    parser_close(&p);
    *out = d;
    return GW_OK;

err_free:
    parser_close(&p);
    gw_train_dataset_free(&d);
    return st;
}
