/*
 * fuzz_compress_state.c - libFuzzer target for the compression state loader
 * (collectives/compress/compress_save.c: gw_compress_state_load and
 * gw_compress_state_load_file), which reads a state image from a checkpoint.
 *
 * Byte 0 picks the settings of the state the image is loaded into (bits 0-2
 * the codec, bit 3 TOPK's momentum; a 4 x 8 tensor), whether the image goes
 * through a file (bit 5) and whether its FNV-1a checksum is left as it is
 * (bit 4); otherwise the target writes
 * the right checksum over the last eight bytes, so that mutations reach the
 * checks behind it. A refused image leaves the state as it was; an accepted
 * one saves back to an image that loads again to the same state.
 */
#include "collectives/compress/codec.h"
#include "fuzz_util.h"
#include "gradwire.h"

#define ROWS 4
#define COLS 8
#define IMAGE_MAX 4096

static gw_compress_state_t *make_state(unsigned pick)
{
    gw_compress_config_t cfg;
    gw_compress_config_init(&cfg);
    cfg.codec = (gw_codec_t)((pick & 7) % GW_CODEC_COUNT);
    cfg.min_elements = 0;
    cfg.powersgd_rank = 2;
    cfg.seed = 42;
    if (cfg.codec == GW_CODEC_TOPK && (pick & 8))
        cfg.momentum = 0.9;
    gw_compress_state_t *s = NULL;
    if (gw_compress_state_create(&cfg, ROWS, COLS, &s) != GW_OK)
        abort();
    return s;
}

static size_t save(const gw_compress_state_t *s, uint8_t *buf)
{
    size_t len = 0;
    FUZZ_CHECK(gw_compress_state_save(s, buf, IMAGE_MAX, &len) == GW_OK);
    return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > IMAGE_MAX)
        return 0;
    unsigned pick = data[0];
    size_t n = size - 1;
    uint8_t *img = malloc(n + 1);
    if (!img)
        abort();
    memcpy(img, data + 1, n);
    if (!(pick & 16) && n >= 8) {
        uint64_t h = gw__cz_state_checksum(img, n - 8);
        for (int i = 0; i < 8; i++)
            img[n - 8 + i] = (uint8_t)(h >> (8 * i)); /* little-endian, as saved */
    }
    gw_compress_state_t *s = make_state(pick);
    static uint8_t before[IMAGE_MAX], after[IMAGE_MAX], again[IMAGE_MAX];
    size_t blen = save(s, before);
    gw_status_t st;
    if (pick & 32) {
        char path[64];
        int fd = fuzz_memfile(img, n, path, sizeof(path));
        st = gw_compress_state_load_file(s, path);
        close(fd);
    } else {
        st = gw_compress_state_load(s, img, n);
    }
    size_t alen = save(s, after);
    if (st != GW_OK) {
        FUZZ_CHECK(st == GW_ERR_PROTOCOL || st == GW_ERR_MISMATCH || st == GW_ERR_UNSUPPORTED);
        FUZZ_CHECK(alen == blen && memcmp(after, before, blen) == 0);
    } else {
        gw_compress_state_t *t = make_state(pick);
        FUZZ_CHECK(gw_compress_state_load(t, after, alen) == GW_OK);
        FUZZ_CHECK(save(t, again) == alen && memcmp(again, after, alen) == 0);
        FUZZ_CHECK(gw_compress_state_step(t) == gw_compress_state_step(s));
        gw_compress_state_destroy(t);
    }
    gw_compress_state_destroy(s);
    free(img);
    return 0;
}
