/* test_sha256.c - SHA-256 against FIPS 180-4 examples and HMAC-SHA256
 * against RFC 4231, plus incremental hashing and the constant-time compare. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"

static void hex_to_bytes(const char *hex, uint8_t *out, size_t n)
{
    cr_assert_eq(strlen(hex), 2 * n, "test vector has the wrong length");
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        cr_assert_eq(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
}

static void assert_digest(const uint8_t *got, const char *hex, size_t n)
{
    uint8_t want[GW_SHA256_DIGEST_LEN];
    hex_to_bytes(hex, want, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i], "byte %zu: got %02x, want %02x (expected %s)", i, got[i],
                     want[i], hex);
}

static void check_sha(const void *msg, size_t len, const char *hex)
{
    uint8_t d[GW_SHA256_DIGEST_LEN];
    gw__sha256(msg, len, d);
    assert_digest(d, hex, sizeof(d));
}

Test(sha256, fips_examples, .timeout = 10)
{
    check_sha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check_sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* 448 bits: the padding does not fit and needs a second block. */
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    check_sha(two, strlen(two), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* 896 bits: two full blocks of message. */
    const char *multi = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                        "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    check_sha(multi, strlen(multi),
              "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

Test(sha256, padding_boundaries, .timeout = 10)
{
    /* 55 bytes: the length still fits in the last block; 56: it does not;
     * 63 and 64: around a full block. */
    static const struct {
        size_t n;
        const char *hex;
    } v[] = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
    };
    char buf[64];
    memset(buf, 'a', sizeof(buf));
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        check_sha(buf, v[i].n, v[i].hex);
}

static const char *const million_a =
    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

Test(sha256, one_million_a, .timeout = 30)
{
    size_t n = 1000000;
    char *m = malloc(n);
    cr_assert_not_null(m);
    memset(m, 'a', n);
    check_sha(m, n, million_a);
    free(m);
}

Test(sha256, incremental_equals_one_shot, .timeout = 30)
{
    /* Feed the million 'a' in pieces of awkward sizes so that every path of
     * update (partial block, whole blocks, tail) is taken. */
    static const size_t pieces[] = {1, 63, 64, 65, 0, 127, 3, 1000, 17};
    char chunk[1000];
    memset(chunk, 'a', sizeof(chunk));
    gw_sha256_t ctx;
    gw__sha256_init(&ctx);
    size_t left = 1000000;
    for (size_t i = 0; left > 0; i++) {
        size_t n = pieces[i % (sizeof(pieces) / sizeof(pieces[0]))];
        if (n > left)
            n = left;
        gw__sha256_update(&ctx, chunk, n);
        left -= n;
    }
    uint8_t d[GW_SHA256_DIGEST_LEN];
    gw__sha256_final(&ctx, d);
    assert_digest(d, million_a, sizeof(d));
}

static void check_hmac(const void *key, size_t klen, const void *msg, size_t mlen, const char *hex,
                       size_t n)
{
    uint8_t mac[GW_SHA256_DIGEST_LEN];
    gw__hmac_sha256(key, klen, msg, mlen, mac);
    assert_digest(mac, hex, n);
}

Test(hmac_sha256, rfc4231, .timeout = 10)
{
    uint8_t key[131];
    uint8_t data[50];

    memset(key, 0x0b, 20); /* test case 1 */
    check_hmac(key, 20, "Hi There", 8,
               "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", 32);

    const char *m2 = "what do ya want for nothing?"; /* test case 2: key shorter than output */
    check_hmac("Jefe", 4, m2, strlen(m2),
               "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", 32);

    memset(key, 0xaa, 20); /* test case 3 */
    memset(data, 0xdd, 50);
    check_hmac(key, 20, data, 50,
               "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe", 32);

    for (int i = 0; i < 25; i++) /* test case 4 */
        key[i] = (uint8_t)(i + 1);
    memset(data, 0xcd, 50);
    check_hmac(key, 25, data, 50,
               "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b", 32);

    memset(key, 0x0c, 20); /* test case 5: output truncated to 128 bits */
    check_hmac(key, 20, "Test With Truncation", 20, "a3b6167473100ee06e0c796c2955552b", 16);

    memset(key, 0xaa, 131); /* test case 6: key longer than a block is hashed */
    const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    check_hmac(key, 131, m6, strlen(m6),
               "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", 32);

    const char *m7 = "This is a test using a larger than block-size key and a larger than "
                     "block-size data. The key needs to be hashed before being used by the "
                     "HMAC algorithm."; /* test case 7 */
    check_hmac(key, 131, m7, strlen(m7),
               "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2", 32);
}

Test(hmac_sha256, empty_key_and_message, .timeout = 10)
{
    /* The unauthenticated job uses an empty key: it must be well defined. */
    check_hmac(NULL, 0, NULL, 0, "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad",
               32);
}

Test(hmac_sha256, incremental_equals_one_shot, .timeout = 10)
{
    const char *m7 = "This is a test using a larger than block-size key and a larger than "
                     "block-size data. The key needs to be hashed before being used by the "
                     "HMAC algorithm.";
    uint8_t key[131];
    memset(key, 0xaa, sizeof(key));
    gw_hmac_sha256_t ctx;
    gw__hmac_sha256_init(&ctx, key, sizeof(key));
    size_t n = strlen(m7);
    gw__hmac_sha256_update(&ctx, m7, 10);
    gw__hmac_sha256_update(&ctx, m7 + 10, 0);
    gw__hmac_sha256_update(&ctx, m7 + 10, n - 10);
    uint8_t mac[GW_SHA256_DIGEST_LEN];
    gw__hmac_sha256_final(&ctx, mac);
    assert_digest(mac, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2", 32);
}

Test(ct_equal, compares_every_byte, .timeout = 10)
{
    uint8_t a[32], b[32];
    memset(a, 0x5a, sizeof(a));
    memcpy(b, a, sizeof(b));
    cr_assert_eq(gw__ct_equal(a, b, sizeof(a)), 1);
    cr_assert_eq(gw__ct_equal(a, b, 0), 1);
    for (size_t i = 0; i < sizeof(a); i++) {
        b[i] ^= 0x01;
        cr_assert_eq(gw__ct_equal(a, b, sizeof(a)), 0, "difference at byte %zu missed", i);
        b[i] ^= 0x01;
    }
}
