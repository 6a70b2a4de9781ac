/*
 * fuzz_checkpoint.c - libFuzzer target for the trainer's checkpoint loader
 * (optimizer/checkpoint.c, gw_train_ckpt_read), which reads a file that a
 * crash may have cut short or a disk corrupted; the input reaches it as a
 * memory file by path.
 *
 * The file ends in a CRC-32 of everything before it. Mutations that keep a
 * valid CRC are rare, so the target writes the right CRC over the last four
 * bytes before loading (byte 0's low bit clear; set, the input goes as it
 * is, for the CRC check itself): the checks behind the CRC (sizes against
 * the file, the settings text) are reached too. An accepted checkpoint has
 * a NUL-terminated settings text and arrays of the sizes it announces:
 * nparams parameters, velocity_len momentum values (nparams in format
 * version 1; a --zero rank's shard, any length, in version 2).
 */
#include <zlib.h>

#include "fuzz_util.h"
#include "trainer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int keep_crc = data[0] & 1;
    size_t n = size - 1;
    uint8_t *img = malloc(n + 1);
    if (!img)
        abort();
    memcpy(img, data + 1, n);
    if (!keep_crc && n >= 4) {
        uint32_t crc = (uint32_t)crc32_z(0L, img, n - 4);
        memcpy(img + n - 4, &crc, 4); /* host order, as the writer stores it */
    }
    char path[64];
    int fd = fuzz_memfile(img, n, path, sizeof(path));
    gw_train_ckpt_t c;
    if (gw_train_ckpt_read(path, &c) == GW_OK) {
        FUZZ_CHECK(memchr(c.config, '\0', sizeof(c.config)) != NULL);
        FUZZ_CHECK(c.nparams > 0 && c.params && c.velocity && c.codec_state);
        /* Every byte of the file is accounted for by what was announced. */
        FUZZ_CHECK((c.nparams + c.velocity_len) * sizeof(float) + c.codec_len + 4 < n);
        volatile float sink = 0;
        for (size_t i = 0; i < c.nparams; i++)
            sink += c.params[i];
        for (size_t i = 0; i < c.velocity_len; i++)
            sink += c.velocity[i];
        for (size_t i = 0; i < c.codec_len; i++)
            sink += c.codec_state[i];
        (void)sink;
        gw_train_ckpt_release(&c);
    }
    close(fd);
    free(img);
    return 0;
}
