/*
 * compress_save.c - checkpoints of a compression state.
 *
 * The image is little-endian whatever the host, so a checkpoint moves
 * between machines:
 *
 *   offset  bytes  field
 *        0      8  magic "GWCSTATE"
 *        8      4  format version (GW_COMPRESS_STATE_VERSION)
 *       12      4  header bytes (HEADER_BYTES)
 *       16      4  codec            20  4  error_feedback
 *       24      4  warmup_steps     28  4  powersgd_rank
 *       32      8  min_elements     40  8  bucket_elements
 *       48      8  topk_ratio (IEEE 754 binary64 bits)
 *       56      8  seed             64  8  rows        72  8  cols
 *       80      8  step             88  8  codec floats (nextra)
 *       96      8  momentum (binary64 bits)                  (version 2)
 *      104  4 * count   residual (binary32 bits)
 *        .  4 * nextra  codec state (PowerSGD's Q, top-k's velocity)
 *      end      8  FNV-1a 64 of every byte before it
 *
 * Version 1 had no momentum field (a 96-byte header, the residual at 96)
 * and is still read, as momentum 0; images are always written in the
 * current version.
 *
 * Loading checks everything before it changes anything: a truncated or
 * corrupt image (wrong magic, size, checksum, a non-finite value), another
 * version, and an image of other settings or another shape are refused with
 * the state untouched. Loading into a state created from the same settings
 * (rather than creating one from the image) means a checkpoint can never
 * switch a run to another codec behind the caller's back.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectives/compress/codec.h"
#include "common/byteorder.h"

#define MAGIC "GWCSTATE"
#define HEADER_BYTES 104
#define HEADER_BYTES_V1 96
#define TRAILER_BYTES 8

uint64_t gw__cz_state_checksum(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void put_floats(uint8_t *p, const float *v, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n)
        memcpy(p, v, n * 4);
#else
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        gw__put_le32(p + 4 * i, u);
    }
#endif
}

static void get_floats(float *v, const uint8_t *p, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n)
        memcpy(v, p, n * 4);
#else
    for (size_t i = 0; i < n; i++) {
        uint32_t u = gw__get_le32(p + 4 * i);
        memcpy(&v[i], &u, 4);
    }
#endif
}

/* Index of the first non-finite float image in p[0..n), or n. */
static size_t first_nonfinite(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((gw__get_le32(p + 4 * i) & 0x7f800000u) == 0x7f800000u)
            return i;
    return n;
}

static size_t image_bytes(const gw_compress_state_t *s, size_t header)
{
    return header + 4 * (s->count + s->nextra) + TRAILER_BYTES;
}

static size_t header_of(uint32_t version) { return version == 1 ? HEADER_BYTES_V1 : HEADER_BYTES; }

gw_status_t gw_compress_state_save(const gw_compress_state_t *state, void *buf, size_t cap,
                                   size_t *len)
{
    if (!state || !len)
        return GW_ERR_INVALID_ARG;
    size_t need = image_bytes(state, HEADER_BYTES);
    *len = need;
    if (!buf)
        return GW_OK;
    if (cap < need)
        return GW_ERR_OVERFLOW;
    const gw_compress_config_t *c = &state->cfg;
    uint8_t *p = buf;
    uint64_t ratio, momentum;
    memcpy(&ratio, &c->topk_ratio, 8);
    memcpy(&momentum, &c->momentum, 8);
    memcpy(p, MAGIC, 8);
    gw__put_le32(p + 8, GW_COMPRESS_STATE_VERSION);
    gw__put_le32(p + 12, HEADER_BYTES);
    gw__put_le32(p + 16, (uint32_t)c->codec);
    gw__put_le32(p + 20, (uint32_t)c->error_feedback);
    gw__put_le32(p + 24, c->warmup_steps);
    gw__put_le32(p + 28, (uint32_t)c->powersgd_rank);
    gw__put_le64(p + 32, c->min_elements);
    gw__put_le64(p + 40, c->bucket_elements);
    gw__put_le64(p + 48, ratio);
    gw__put_le64(p + 56, c->seed);
    gw__put_le64(p + 64, state->rows);
    gw__put_le64(p + 72, state->cols);
    gw__put_le64(p + 80, state->step);
    gw__put_le64(p + 88, state->nextra);
    gw__put_le64(p + 96, momentum);
    put_floats(p + HEADER_BYTES, state->residual, state->count);
    put_floats(p + HEADER_BYTES + 4 * state->count, state->extra, state->nextra);
    gw__put_le64(p + need - TRAILER_BYTES, gw__cz_state_checksum(p, need - TRAILER_BYTES));
    return GW_OK;
}

/* Everything load checks before touching the state. */
static gw_status_t validate(const gw_compress_state_t *s, const uint8_t *p, size_t len,
                            const gw_logger_t *lg)
{
    if (len < HEADER_BYTES_V1 + TRAILER_BYTES || memcmp(p, MAGIC, 8) != 0) {
        GW_ERROR(lg, "compress",
                 "not a compression state image (%zu bytes, bad magic or "
                 "too short)",
                 len);
        return GW_ERR_PROTOCOL;
    }
    uint32_t version = gw__get_le32(p + 8);
    if (version < 1 || version > GW_COMPRESS_STATE_VERSION) {
        GW_ERROR(lg, "compress",
                 "compression state image has format version %u; this library "
                 "reads versions 1 to %d",
                 version, GW_COMPRESS_STATE_VERSION);
        return GW_ERR_UNSUPPORTED;
    }
    const size_t header = header_of(version);
    if (gw__get_le32(p + 12) != header || len < header + TRAILER_BYTES) {
        GW_ERROR(lg, "compress",
                 "compression state image of version %u has a %u-byte header "
                 "(%zu bytes in all), not %zu",
                 version, gw__get_le32(p + 12), len, header);
        return GW_ERR_PROTOCOL;
    }
    if (gw__get_le64(p + len - TRAILER_BYTES) != gw__cz_state_checksum(p, len - TRAILER_BYTES)) {
        GW_ERROR(lg, "compress", "compression state image is corrupt (checksum mismatch)");
        return GW_ERR_PROTOCOL;
    }
    gw_compress_config_t c;
    memset(&c, 0, sizeof(c));
    uint64_t ratio = gw__get_le64(p + 48);
    c.codec = (gw_codec_t)gw__get_le32(p + 16);
    c.error_feedback = (int)gw__get_le32(p + 20);
    c.warmup_steps = gw__get_le32(p + 24);
    c.powersgd_rank = (int)gw__get_le32(p + 28);
    c.min_elements = (size_t)gw__get_le64(p + 32);
    c.bucket_elements = (size_t)gw__get_le64(p + 40);
    memcpy(&c.topk_ratio, &ratio, 8);
    c.seed = gw__get_le64(p + 56);
    if (version >= 2) {
        uint64_t momentum = gw__get_le64(p + 96);
        memcpy(&c.momentum, &momentum, 8);
    }
    const char *diff = gw__cz_config_diff(&c, &s->cfg);
    if (diff) {
        GW_ERROR(lg, "compress",
                 "compression state image was saved with another %s than this "
                 "state's",
                 diff);
        return GW_ERR_MISMATCH;
    }
    uint64_t rows = gw__get_le64(p + 64), cols = gw__get_le64(p + 72),
             nextra = gw__get_le64(p + 88);
    if (rows != s->rows || cols != s->cols) {
        GW_ERROR(lg, "compress",
                 "compression state image is of a %llu x %llu tensor, this "
                 "state of a %zu x %zu one",
                 (unsigned long long)rows, (unsigned long long)cols, s->rows, s->cols);
        return GW_ERR_MISMATCH;
    }
    if (nextra != s->nextra || len != image_bytes(s, header)) {
        GW_ERROR(lg, "compress", "compression state image has %zu bytes, expected %zu", len,
                 image_bytes(s, header));
        return GW_ERR_PROTOCOL;
    }
    size_t nfloats = s->count + s->nextra;
    size_t bad = first_nonfinite(p + header, nfloats);
    if (bad < nfloats) {
        GW_ERROR(lg, "compress",
                 "compression state image holds a NaN or infinity (%s element "
                 "%zu)",
                 bad < s->count ? "residual" : "codec state",
                 bad < s->count ? bad : bad - s->count);
        return GW_ERR_PROTOCOL;
    }
    return GW_OK;
}

gw_status_t gw_compress_state_load(gw_compress_state_t *state, const void *buf, size_t len)
{
    if (!state || (!buf && len > 0))
        return GW_ERR_INVALID_ARG;
    gw_logger_t lg;
    /* A malformed GW_DEBUG is reported here and the default level used;
     * gw_comm_init is where it stops the job. */
    (void)gw__logger_init(&lg, -1);
    const uint8_t *p = buf;
    gw_status_t st = buf ? validate(state, p, len, &lg) : GW_ERR_PROTOCOL;
    if (!buf)
        GW_ERROR(&lg, "compress", "empty compression state image");
    if (st == GW_OK) {
        const size_t header = header_of(gw__get_le32(p + 8));
        state->step = gw__get_le64(p + 80);
        get_floats(state->residual, p + header, state->count);
        get_floats(state->extra, p + header + 4 * state->count, state->nextra);
    }
    gw__logger_fini(&lg);
    return st;
}

/* ---- files ------------------------------------------------------------- */

static gw_status_t write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return GW_ERR_SYSTEM;
        p += w;
        n -= (size_t)w;
    }
    return GW_OK;
}

gw_status_t gw_compress_state_save_file(const gw_compress_state_t *state, const char *path)
{
    if (!state || !path || !*path)
        return GW_ERR_INVALID_ARG;
    size_t len;
    gw_status_t st = gw_compress_state_save(state, NULL, 0, &len);
    if (st != GW_OK)
        return st;
    gw_logger_t lg;
    /* A malformed GW_DEBUG is reported here and the default level used;
     * gw_comm_init is where it stops the job. */
    (void)gw__logger_init(&lg, -1);
    uint8_t *img = malloc(len);
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!img || !tmp) {
        st = GW_ERR_NO_MEMORY;
        goto out_free;
    }
    gw_compress_state_save(state, img, len, &len);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", 12);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        GW_ERROR(&lg, "compress", "cannot create a temporary file next to %s: %m", path);
        st = GW_ERR_SYSTEM;
        goto out_free;
    }
    st = write_all(fd, img, len);
    if (st != GW_OK)
        GW_ERROR(&lg, "compress", "cannot write %s: %m", tmp);
    if (st == GW_OK && fsync(fd) != 0) {
        GW_ERROR(&lg, "compress", "cannot flush %s to disk: %m", tmp);
        st = GW_ERR_SYSTEM;
    }
    if (close(fd) != 0 && st == GW_OK) {
        GW_ERROR(&lg, "compress", "cannot close %s: %m", tmp);
        st = GW_ERR_SYSTEM;
    }
    if (st == GW_OK && rename(tmp, path) != 0) {
        GW_ERROR(&lg, "compress", "cannot rename %s to %s: %m", tmp, path);
        st = GW_ERR_SYSTEM;
    }
    if (st != GW_OK)
        unlink(tmp);
out_free:
    free(tmp);
    free(img);
    gw__logger_fini(&lg);
    return st;
}

gw_status_t gw_compress_state_load_file(gw_compress_state_t *state, const char *path)
{
    if (!state || !path || !*path)
        return GW_ERR_INVALID_ARG;
    gw_logger_t lg;
    /* A malformed GW_DEBUG is reported here and the default level used;
     * gw_comm_init is where it stops the job. */
    (void)gw__logger_init(&lg, -1);
    gw_status_t st = GW_ERR_SYSTEM;
    uint8_t *img = NULL;
    /* Without blocking, and only a regular file: a FIFO named by mistake
     * would otherwise stop the caller in open() (common/file_read.h). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        GW_ERROR(&lg, "compress", "cannot open %s: %m", path);
        goto out;
    }
    struct stat sb;
    int stat_failed = fstat(fd, &sb) != 0;
    if (stat_failed || !S_ISREG(sb.st_mode)) {
        GW_ERROR(&lg, "compress", "cannot read %s: %s", path,
                 stat_failed ? strerror(errno) : "not a regular file");
        goto out_close;
    }
    /* Read at most one byte more than the image can be, so a file that is
     * too long is caught without reading all of it. */
    size_t want = image_bytes(state, HEADER_BYTES) + 1, got = 0;
    img = malloc(want);
    if (!img) {
        st = GW_ERR_NO_MEMORY;
        goto out_close;
    }
    while (got < want) {
        ssize_t r = read(fd, img + got, want - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            GW_ERROR(&lg, "compress", "cannot read %s: %m", path);
            goto out_close;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    st = gw_compress_state_load(state, img, got);
out_close:
    close(fd);
out:
    free(img);
    gw__logger_fini(&lg);
    return st;
}
