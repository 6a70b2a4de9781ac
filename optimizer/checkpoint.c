/*
 * checkpoint.c - training checkpoints: one file per rank and step, written
 * atomically, read back only after every check passes.
 *
 * A file holds everything the rest of the run depends on: weights, the
 * momentum buffer, the codec states (error-feedback residuals, which differ
 * per rank, hence a file per rank; the codec's step; PowerSGD's Q), the
 * shuffle generator's state at the start of the epoch with the position
 * inside the epoch, and the running epoch statistics. The settings that
 * shape the trajectory are stored as text and compared on resume, so a
 * resume with another batch size or seed is refused instead of silently
 * diverging.
 *
 * Layout (host byte order, with an order mark that must read back right):
 *   "GWTRCKPT" | u32 version | u32 0x01020304 | u32 rank | u32 world |
 *   u64 epoch, step_in_epoch, global_step | u64 rng[4] |
 *   f64 elapsed_s, time_to_target_s, epoch_loss_sum | i64 correct, seen |
 *   u32 config length | config bytes | u64 nparams | u64 codec_len |
 *   f32 params[nparams] | f32 velocity[nparams] | codec image[codec_len] |
 *   u32 CRC-32 (zlib) of every byte before it
 * Version 2, written by --zero (zero.c) only, holds the rank's shard of the
 * momentum instead of the whole: "u64 velocity_len" follows codec_len, and
 * velocity has that many floats (the blocks of the rank's buckets, in the
 * plan of that run's rank count and --bucket-kb, which the settings text
 * fixes). Version 1 files are written otherwise, as before.
 *
 * Writing: the whole image goes to a temporary file in the same directory,
 * which is fsynced, renamed over the final name, and the directory fsynced,
 * so a crash at any point leaves either the old file or the new one (and
 * perhaps the temporary, which the next run removes). The
 * trainer then names the step in `latest` the same way, only after every
 * rank has written its file.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "kit.h"
#include "trainer.h"

#define CKPT_MAGIC "GWTRCKPT"
#define CKPT_VERSION 1u
#define CKPT_VERSION_SHARDED 2u
#define CKPT_ORDER 0x01020304u
#define CKPT_MAX_CONFIG 511u
#define CKPT_MAX_FLOATS (1ull << 34)
#define CKPT_MAX_CODEC (1ull << 36)

typedef struct buf {
    unsigned char *p;
    size_t len, cap;
    int oom;
} buf_t;

static void put(buf_t *b, const void *src, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

#define PUT(b, v) put((b), &(v), sizeof(v))

void gw_train_ckpt_path(const char *dir, uint64_t step, uint32_t rank, char *buf, size_t len)
{
    snprintf(buf, len, "%s/ckpt-%08" PRIu64 "-rank%u.gwc", dir, step, rank);
}

/* Write data to dir/name atomically. */
static gw_status_t write_atomic(const char *dir, const char *name, const void *data, size_t len)
{
    char tmp[4096], final[4096];
    snprintf(final, sizeof(final), "%s/%s", dir, name);
    /* A name that says whose it is, so the next run can remove it when a
     * kill leaves it behind (checkpoint_dir.c). */
    gw_train_ckpt_tmp_path(dir, name, tmp, sizeof(tmp));
    /* A checkpoint is the user's model: the user alone may read it. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, GW_KIT_PRIVATE_MODE);
    if (fd < 0) {
        fprintf(stderr, "gradwire-train: cannot create %s: %m\n", tmp);
        return GW_ERR_SYSTEM;
    }
    const unsigned char *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            fprintf(stderr, "gradwire-train: cannot write %s: %m\n", tmp);
            goto err_unlink;
        }
        done += (size_t)w;
    }
    if (fsync(fd) != 0) {
        fprintf(stderr, "gradwire-train: cannot fsync %s: %m\n", tmp);
        goto err_unlink;
    }
    if (close(fd) != 0) {
        fd = -1;
        fprintf(stderr, "gradwire-train: cannot close %s: %m\n", tmp);
        goto err_unlink;
    }
    fd = -1;
    if (rename(tmp, final) != 0) {
        fprintf(stderr, "gradwire-train: cannot rename %s to %s: %m\n", tmp, final);
        goto err_unlink;
    }
    /* The rename itself is durable only once the directory is synced. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        fprintf(stderr, "gradwire-train: cannot fsync directory %s: %m\n", dir);
        if (dfd >= 0)
            close(dfd);
        return GW_ERR_SYSTEM;
    }
    close(dfd);
    return GW_OK;

err_unlink:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return GW_ERR_SYSTEM;
}

gw_status_t gw_train_ckpt_write(const char *dir, const gw_train_ckpt_t *c)
{
    buf_t b = {0};
    uint32_t order = CKPT_ORDER;
    uint32_t clen = (uint32_t)strnlen(c->config, CKPT_MAX_CONFIG);
    uint64_t np = c->nparams, nr = c->codec_len;
    uint64_t nv = c->velocity_len ? c->velocity_len : np;
    uint32_t version = nv != np ? CKPT_VERSION_SHARDED : CKPT_VERSION;
    put(&b, CKPT_MAGIC, 8);
    PUT(&b, version);
    PUT(&b, order);
    PUT(&b, c->rank);
    PUT(&b, c->world);
    PUT(&b, c->epoch);
    PUT(&b, c->step_in_epoch);
    PUT(&b, c->global_step);
    put(&b, c->rng.s, sizeof(c->rng.s));
    PUT(&b, c->elapsed_s);
    PUT(&b, c->time_to_target_s);
    PUT(&b, c->epoch_loss_sum);
    PUT(&b, c->epoch_correct);
    PUT(&b, c->epoch_seen);
    PUT(&b, clen);
    put(&b, c->config, clen);
    PUT(&b, np);
    PUT(&b, nr);
    if (version == CKPT_VERSION_SHARDED)
        PUT(&b, nv);
    put(&b, c->params, np * sizeof(float));
    put(&b, c->velocity, nv * sizeof(float));
    if (nr)
        put(&b, c->codec_state, nr);
    if (b.oom) {
        free(b.p);
        fprintf(stderr, "gradwire-train: out of memory building a checkpoint\n");
        return GW_ERR_NO_MEMORY;
    }
    uint32_t crc = (uint32_t)crc32_z(0L, b.p, b.len);
    PUT(&b, crc);
    if (b.oom) {
        free(b.p);
        fprintf(stderr, "gradwire-train: out of memory building a checkpoint\n");
        return GW_ERR_NO_MEMORY;
    }
    char path[4096];
    gw_train_ckpt_path(dir, c->global_step, c->rank, path, sizeof(path));
    const char *name = strrchr(path, '/') + 1;
    gw_status_t st = write_atomic(dir, name, b.p, b.len);
    free(b.p);
    return st;
}

/* Bounds-checked reading from the file image. */
typedef struct reader {
    const unsigned char *p;
    size_t len, pos;
} reader_t;

static int get(reader_t *r, void *dst, size_t n)
{
    if (r->len - r->pos < n)
        return -1;
    memcpy(dst, r->p + r->pos, n);
    r->pos += n;
    return 0;
}

#define GET(r, v) get((r), &(v), sizeof(v))

static gw_status_t corrupt(const char *path, const char *what)
{
    fprintf(stderr, "gradwire-train: checkpoint %s refused: %s\n", path, what);
    return GW_ERR_PROTOCOL;
}

static gw_status_t read_whole(const char *path, unsigned char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "gradwire-train: cannot open checkpoint %s: %m\n", path);
        return errno == ENOENT ? GW_ERR_NOT_FOUND : GW_ERR_SYSTEM;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        fprintf(stderr, "gradwire-train: cannot stat %s: %m\n", path);
        close(fd);
        return GW_ERR_SYSTEM;
    }
    size_t n = (size_t)sb.st_size, got = 0;
    unsigned char *p = malloc(n + 1);
    if (!p) {
        close(fd);
        fprintf(stderr, "gradwire-train: out of memory reading %s\n", path);
        return GW_ERR_NO_MEMORY;
    }
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r < 0)
                fprintf(stderr, "gradwire-train: cannot read %s: %m\n", path);
            else
                fprintf(stderr, "gradwire-train: %s shrank while being read\n", path);
            free(p);
            close(fd);
            return GW_ERR_SYSTEM;
        }
        got += (size_t)r;
    }
    close(fd);
    *out = p;
    *len = n;
    return GW_OK;
}

gw_status_t gw_train_ckpt_read(const char *path, gw_train_ckpt_t *c)
{
    unsigned char *img;
    size_t len;
    char msg[256];
    gw_status_t st = read_whole(path, &img, &len);
    if (st != GW_OK)
        return st;
    reader_t r = {.p = img, .len = len};
    gw_train_ckpt_t k;
    memset(&k, 0, sizeof(k));
    char magic[8];
    uint32_t version, order, clen;
    uint64_t np, nr, nv;
    st = GW_ERR_PROTOCOL;
    if (get(&r, magic, 8) != 0 || memcmp(magic, CKPT_MAGIC, 8) != 0) {
        corrupt(path, "not a gradwire-train checkpoint (bad magic)");
        goto out;
    }
    if (GET(&r, version) != 0 || GET(&r, order) != 0) {
        corrupt(path, "truncated in the header");
        goto out;
    }
    if (order != CKPT_ORDER) {
        corrupt(path, "written on a machine of the other byte order");
        goto out;
    }
    if (version != CKPT_VERSION && version != CKPT_VERSION_SHARDED) {
        snprintf(msg, sizeof(msg), "format version %u, this build reads versions %u and %u",
                 version, CKPT_VERSION, CKPT_VERSION_SHARDED);
        corrupt(path, msg);
        goto out;
    }
    if (GET(&r, k.rank) || GET(&r, k.world) || GET(&r, k.epoch) || GET(&r, k.step_in_epoch) ||
        GET(&r, k.global_step) || get(&r, k.rng.s, sizeof(k.rng.s)) || GET(&r, k.elapsed_s) ||
        GET(&r, k.time_to_target_s) || GET(&r, k.epoch_loss_sum) || GET(&r, k.epoch_correct) ||
        GET(&r, k.epoch_seen) || GET(&r, clen)) {
        corrupt(path, "truncated in the header");
        goto out;
    }
    if (clen > CKPT_MAX_CONFIG) {
        snprintf(msg, sizeof(msg), "settings text of %u bytes (limit %u): corrupt header", clen,
                 CKPT_MAX_CONFIG);
        corrupt(path, msg);
        goto out;
    }
    if (get(&r, k.config, clen) || GET(&r, np) || GET(&r, nr)) {
        corrupt(path, "truncated in the header");
        goto out;
    }
    nv = np;
    if (version == CKPT_VERSION_SHARDED && GET(&r, nv)) {
        corrupt(path, "truncated in the header");
        goto out;
    }
    k.config[clen] = '\0';
    if (np == 0 || np > CKPT_MAX_FLOATS || nr > CKPT_MAX_CODEC || nv > CKPT_MAX_FLOATS) {
        snprintf(msg, sizeof(msg),
                 "implausible sizes (%" PRIu64 " parameters, %" PRIu64 " momentum values, %" PRIu64
                 " bytes of codec state): corrupt header",
                 np, nv, nr);
        corrupt(path, msg);
        goto out;
    }
    size_t want = r.pos + (np + nv) * sizeof(float) + nr + sizeof(uint32_t);
    if (len != want) {
        snprintf(msg, sizeof(msg), "%s: the file has %zu bytes, its header announces %zu",
                 len < want ? "truncated" : "trailing bytes", len, want);
        corrupt(path, msg);
        goto out;
    }
    uint32_t stored;
    memcpy(&stored, img + len - sizeof(uint32_t), sizeof(stored));
    uint32_t crc = (uint32_t)crc32_z(0L, img, len - sizeof(uint32_t));
    if (crc != stored) {
        snprintf(msg, sizeof(msg),
                 "CRC-32 mismatch (stored %08x, computed %08x): the file is "
                 "corrupt",
                 stored, crc);
        corrupt(path, msg);
        goto out;
    }
    k.nparams = (size_t)np;
    k.codec_len = (size_t)nr;
    k.velocity_len = (size_t)nv;
    k.params = malloc(np * sizeof(float));
    k.velocity = malloc((nv ? nv : 1) * sizeof(float));
    k.codec_state = malloc(nr + 1);
    if (!k.params || !k.velocity || !k.codec_state) {
        fprintf(stderr, "gradwire-train: out of memory reading %s\n", path);
        st = GW_ERR_NO_MEMORY;
        gw_train_ckpt_release(&k);
        goto out;
    }
    get(&r, k.params, np * sizeof(float));
    get(&r, k.velocity, nv * sizeof(float));
    get(&r, k.codec_state, nr);
    *c = k;
    st = GW_OK;
out:
    free(img);
    return st;
}

void gw_train_ckpt_release(gw_train_ckpt_t *c)
{
    free(c->params);
    free(c->velocity);
    free(c->codec_state);
    c->params = c->velocity = NULL;
    c->codec_state = NULL;
}

gw_status_t gw_train_ckpt_set_latest(const char *dir, uint64_t step)
{
    char text[32];
    int n = snprintf(text, sizeof(text), "%" PRIu64 "\n", step);
    return write_atomic(dir, "latest", text, (size_t)n);
}

gw_status_t gw_train_ckpt_get_latest(const char *dir, uint64_t *step)
{
    char path[4096], text[32] = {0};
    snprintf(path, sizeof(path), "%s/latest", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return GW_ERR_NOT_FOUND;
        fprintf(stderr, "gradwire-train: cannot open %s: %m\n", path);
        return GW_ERR_SYSTEM;
    }
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (n == 0 || errno || end == text || (*end != '\n' && *end != '\0')) {
        fprintf(stderr, "gradwire-train: %s does not hold a step number\n", path);
        return GW_ERR_PROTOCOL;
    }
    *step = v;
    return GW_OK;
}

void gw_train_ckpt_prune(const char *dir, uint32_t rank, uint64_t keep_a, uint64_t keep_b)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        unsigned long long step;
        unsigned r;
        char tail[8];
        if (sscanf(e->d_name, "ckpt-%llu-rank%u.%7s", &step, &r, tail) != 3 || r != rank ||
            strcmp(tail, "gwc") != 0 || step == keep_a || step == keep_b)
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}
