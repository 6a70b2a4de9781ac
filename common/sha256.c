/*
 * sha256.c - SHA-256 as specified in FIPS 180-4 section 6.2, and HMAC as in
 * RFC 2104.
 *
 * SHA-256 pads the message to a multiple of 64 bytes (a 1 bit, zeros, and
 * the bit length as a 64-bit big-endian integer), then folds each 64-byte
 * block into eight 32-bit state words: the block is expanded into a
 * 64-word message schedule W, and 64 rounds mix W[t] and the constant K[t]
 * into working variables a..h, which are added back into the state. The
 * digest is the final state written big-endian.
 *
 * HMAC(K, m) = H((K0 ^ opad) || H((K0 ^ ipad) || m)) where K0 is the key
 * padded with zeros to a block (or its digest, when longer than a block).
 */
#include "common/sha256.h"
#include "common/byteorder.h"

#include <string.h>

/* First 32 bits of the fractional parts of the cube roots of the first 64
 * primes (FIPS 180-4 section 4.2.2). */
static const uint32_t K[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u,
    0xab1c5ed5u, 0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu,
    0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu,
    0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau, 0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u,
    0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu,
    0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u, 0xa2bfe8a1u, 0xa81a664bu,
    0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u, 0x19a4c116u,
    0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u,
    0xc67178f2u,
};

/* First 32 bits of the fractional parts of the square roots of the first 8
 * primes (FIPS 180-4 section 5.3.3). */
static const uint32_t H0[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                               0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};

static inline uint32_t rotr(uint32_t x, unsigned n) { return (x >> n) | (x << (32u - n)); }

/* The six logical functions of FIPS 180-4 section 4.1.2. */
static inline uint32_t ch(uint32_t x, uint32_t y, uint32_t z) { return (x & y) ^ (~x & z); }
static inline uint32_t maj(uint32_t x, uint32_t y, uint32_t z)
{
    return (x & y) ^ (x & z) ^ (y & z);
}
static inline uint32_t big_sigma0(uint32_t x) { return rotr(x, 2) ^ rotr(x, 13) ^ rotr(x, 22); }
static inline uint32_t big_sigma1(uint32_t x) { return rotr(x, 6) ^ rotr(x, 11) ^ rotr(x, 25); }
static inline uint32_t small_sigma0(uint32_t x) { return rotr(x, 7) ^ rotr(x, 18) ^ (x >> 3); }
static inline uint32_t small_sigma1(uint32_t x) { return rotr(x, 17) ^ rotr(x, 19) ^ (x >> 10); }

/* Fold one 64-byte block into the state (FIPS 180-4 section 6.2.2). */
static void compress(uint32_t h[8], const uint8_t block[GW_SHA256_BLOCK_LEN])
{
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = gw__get_be32(block + 4 * t);
    for (int t = 16; t < 64; t++)
        w[t] = small_sigma1(w[t - 2]) + w[t - 7] + small_sigma0(w[t - 15]) + w[t - 16];

    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    uint32_t e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t t1 = hh + big_sigma1(e) + ch(e, f, g) + K[t] + w[t];
        uint32_t t2 = big_sigma0(a) + maj(a, b, c);
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

void gw__sha256_init(gw_sha256_t *ctx)
{
    memcpy(ctx->h, H0, sizeof(H0));
    ctx->total_len = 0;
    ctx->block_len = 0;
}

void gw__sha256_update(gw_sha256_t *ctx, const void *data, size_t len)
{
    if (len == 0)
        return; /* data may be NULL; memcpy must not see it */
    const uint8_t *p = data;
    ctx->total_len += len;
    if (ctx->block_len > 0) {
        size_t take = GW_SHA256_BLOCK_LEN - ctx->block_len;
        if (take > len)
            take = len;
        memcpy(ctx->block + ctx->block_len, p, take);
        ctx->block_len += take;
        p += take;
        len -= take;
        if (ctx->block_len < GW_SHA256_BLOCK_LEN)
            return;
        compress(ctx->h, ctx->block);
        ctx->block_len = 0;
    }
    /* Whole blocks straight from the caller's buffer, no copy. */
    while (len >= GW_SHA256_BLOCK_LEN) {
        compress(ctx->h, p);
        p += GW_SHA256_BLOCK_LEN;
        len -= GW_SHA256_BLOCK_LEN;
    }
    if (len > 0) {
        memcpy(ctx->block, p, len);
        ctx->block_len = len;
    }
}

void gw__sha256_final(gw_sha256_t *ctx, uint8_t digest[GW_SHA256_DIGEST_LEN])
{
    uint64_t bits = ctx->total_len * 8u;
    /* Padding (section 5.1.1): a 0x80 byte, zeros up to 56 mod 64, and the
     * message length in bits as a 64-bit big-endian integer. When fewer than
     * 8 bytes remain after the 0x80, the length goes in an extra block. */
    ctx->block[ctx->block_len++] = 0x80;
    if (ctx->block_len > GW_SHA256_BLOCK_LEN - 8) {
        memset(ctx->block + ctx->block_len, 0, GW_SHA256_BLOCK_LEN - ctx->block_len);
        compress(ctx->h, ctx->block);
        ctx->block_len = 0;
    }
    memset(ctx->block + ctx->block_len, 0, GW_SHA256_BLOCK_LEN - 8 - ctx->block_len);
    gw__put_be32(ctx->block + 56, (uint32_t)(bits >> 32));
    gw__put_be32(ctx->block + 60, (uint32_t)bits);
    compress(ctx->h, ctx->block);
    for (int i = 0; i < 8; i++)
        gw__put_be32(digest + 4 * i, ctx->h[i]);
    /* The state of a keyed hash is as secret as the key; explicit_bzero is
     * not optimised away as a dead store. */
    explicit_bzero(ctx, sizeof(*ctx));
}

void gw__sha256(const void *data, size_t len, uint8_t digest[GW_SHA256_DIGEST_LEN])
{
    gw_sha256_t ctx;
    gw__sha256_init(&ctx);
    gw__sha256_update(&ctx, data, len);
    gw__sha256_final(&ctx, digest);
}

void gw__hmac_sha256_init(gw_hmac_sha256_t *ctx, const void *key, size_t key_len)
{
    uint8_t k0[GW_SHA256_BLOCK_LEN];
    uint8_t pad[GW_SHA256_BLOCK_LEN];
    memset(k0, 0, sizeof(k0));
    if (key_len > GW_SHA256_BLOCK_LEN)
        gw__sha256(key, key_len, k0);
    else if (key_len > 0)
        memcpy(k0, key, key_len);

    for (size_t i = 0; i < sizeof(pad); i++)
        pad[i] = k0[i] ^ 0x36u;
    gw__sha256_init(&ctx->inner);
    gw__sha256_update(&ctx->inner, pad, sizeof(pad));
    for (size_t i = 0; i < sizeof(pad); i++)
        pad[i] = k0[i] ^ 0x5cu;
    gw__sha256_init(&ctx->outer);
    gw__sha256_update(&ctx->outer, pad, sizeof(pad));
    explicit_bzero(k0, sizeof(k0));
    explicit_bzero(pad, sizeof(pad));
}

void gw__hmac_sha256_update(gw_hmac_sha256_t *ctx, const void *data, size_t len)
{
    gw__sha256_update(&ctx->inner, data, len);
}

void gw__hmac_sha256_final(gw_hmac_sha256_t *ctx, uint8_t mac[GW_SHA256_DIGEST_LEN])
{
    uint8_t inner_digest[GW_SHA256_DIGEST_LEN];
    gw__sha256_final(&ctx->inner, inner_digest);
    gw__sha256_update(&ctx->outer, inner_digest, sizeof(inner_digest));
    gw__sha256_final(&ctx->outer, mac);
    explicit_bzero(inner_digest, sizeof(inner_digest));
}

void gw__hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                     uint8_t mac[GW_SHA256_DIGEST_LEN])
{
    gw_hmac_sha256_t ctx;
    gw__hmac_sha256_init(&ctx, key, key_len);
    gw__hmac_sha256_update(&ctx, data, len);
    gw__hmac_sha256_final(&ctx, mac);
}

int gw__ct_equal(const void *a, const void *b, size_t n)
{
    const volatile uint8_t *pa = a;
    const volatile uint8_t *pb = b;
    uint8_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (uint8_t)(pa[i] ^ pb[i]);
    return diff == 0;
}
