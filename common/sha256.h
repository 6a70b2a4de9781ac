/*
 * sha256.h - SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), the primitives
 * of the bootstrap's challenge-response on the job token.
 *
 * Written from the standards for this project; no external crypto library is
 * needed to authenticate ranks. Incremental contexts let callers hash data
 * given in pieces (the proofs are hashes of a label and two nonces) without
 * building a concatenated copy. All functions are pure: no global state,
 * safe from any thread on distinct contexts.
 */
#ifndef GW_TRANSPORT_SHA256_H
#define GW_TRANSPORT_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define GW_SHA256_DIGEST_LEN 32
#define GW_SHA256_BLOCK_LEN 64

typedef struct gw_sha256 {
    uint32_t h[8];                      /* intermediate hash value H(i) */
    uint64_t total_len;                 /* bytes hashed so far */
    uint8_t block[GW_SHA256_BLOCK_LEN]; /* partial block not yet compressed */
    size_t block_len;
} gw_sha256_t;

void gw__sha256_init(gw_sha256_t *ctx);
/* len may be 0 (data may then be NULL). */
void gw__sha256_update(gw_sha256_t *ctx, const void *data, size_t len);
/* Writes the digest and wipes the context; re-init before reusing it. */
void gw__sha256_final(gw_sha256_t *ctx, uint8_t digest[GW_SHA256_DIGEST_LEN]);
/* One-shot digest of len bytes. */
void gw__sha256(const void *data, size_t len, uint8_t digest[GW_SHA256_DIGEST_LEN]);

typedef struct gw_hmac_sha256 {
    gw_sha256_t inner; /* H((K ^ ipad) || message ...) */
    gw_sha256_t outer; /* H((K ^ opad) || ...), completed in final */
} gw_hmac_sha256_t;

/* Keys of any length are accepted: longer than a block they are hashed first
 * (RFC 2104 section 2); an empty key (key may be NULL when key_len is 0) is
 * valid and gives the "unauthenticated job" MAC. */
void gw__hmac_sha256_init(gw_hmac_sha256_t *ctx, const void *key, size_t key_len);
void gw__hmac_sha256_update(gw_hmac_sha256_t *ctx, const void *data, size_t len);
void gw__hmac_sha256_final(gw_hmac_sha256_t *ctx, uint8_t mac[GW_SHA256_DIGEST_LEN]);
void gw__hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                     uint8_t mac[GW_SHA256_DIGEST_LEN]);

/* 1 when the n bytes at a and b are equal, 0 otherwise, in time that depends
 * only on n: comparing MACs with memcmp would tell an attacker, by timing,
 * how many leading bytes of a forged proof were right. */
int gw__ct_equal(const void *a, const void *b, size_t n);

#endif
