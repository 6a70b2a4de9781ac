/*
 * bootstrap_msg.h - the wire format of the bootstrap rendezvous: encoding and
 * decoding of its messages as pure functions (no I/O, no state), so that
 * every malformed form can be unit-tested without sockets.
 *
 * Framing. Every message is a 12-byte header followed by its payload. All
 * integers are unsigned and big-endian (network byte order):
 *
 *   offset  size  field
 *        0     4  magic          0x47574253 ("GWBS")
 *        4     2  version        1
 *        6     2  type           see below
 *        8     4  payload length bytes that follow the header
 *
 * Messages (payload layouts; lengths are exact unless a range is given):
 *
 *   1 HELLO      rank -> root    u32 rank, u32 size, client_nonce[32]        40
 *   2 CHALLENGE  root -> rank    server_nonce[32], root_proof[32]            64
 *   3 RESPONSE   rank -> root    client_proof[32]                            32
 *   4 REJECT     either way      u32 status (a gw_status_t other than GW_OK),
 *                                reason: 0..255 bytes of printable ASCII,
 *                                not NUL-terminated                     4..259
 *   5 WELCOME    root -> rank    job_id[16]                                  16
 *   6 DATA       either way      u32 len, then len bytes           4 + len, with
 *                                len <= GW_BS_DATA_MAX
 *
 * Proofs are HMAC-SHA256 keyed with the job token (empty key when the job
 * has none):
 *   root_proof  = HMAC(token, "gw-root" || client_nonce || server_nonce)
 *   client_proof = HMAC(token, "gw-rank" || server_nonce || client_nonce ||
 *                       rank as u32 big-endian)
 * The labels keep a proof of one role from being replayed as the other, and
 * each side's fresh nonce keeps old proofs from being replayed at all.
 *
 * Exchange. Join: HELLO, CHALLENGE, then RESPONSE (or REJECT(AUTH) when the
 * rank finds that the root's proof does not match its token), then WELCOME
 * once every rank has joined, or REJECT when the root refuses the rank (wrong
 * token, size disagreement, duplicate rank). All-gather: every rank sends
 * DATA of its own len bytes to the root; the root answers DATA of size * len
 * bytes in rank order, or REJECT (length mismatch, a dead rank, a timeout)
 * so that every rank fails with the root's reason instead of waiting. A rank
 * that fails locally tells the root with REJECT the same way.
 *
 * Decoders check the magic, the version, that the type is known, and bound
 * the payload length for the type, and return GW_ERR_PROTOCOL on anything
 * malformed, with a short static explanation in *why for logs (why may be
 * NULL). Message decoders take exactly one whole message: a truncated buffer
 * or trailing bytes are malformed too.
 */
#ifndef GW_TRANSPORT_BOOTSTRAP_MSG_H
#define GW_TRANSPORT_BOOTSTRAP_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "gradwire.h"

#define GW_BS_MAGIC 0x47574253u /* "GWBS" */
#define GW_BS_VERSION 1u
#define GW_BS_HDR_LEN 12u
#define GW_BS_NONCE_LEN 32u
#define GW_BS_PROOF_LEN 32u
#define GW_BS_JOB_ID_LEN 16u
#define GW_BS_REASON_MAX 255u
/* The bootstrap all-gather carries addresses and connection data, not
 * tensors: one rank contributes at most 1 MiB, a whole gather at most
 * 256 MiB. */
#define GW_BS_DATA_RANK_MAX (1u << 20)
#define GW_BS_DATA_MAX (256u << 20)

/* Whole message lengths, header included. */
#define GW_BS_HELLO_LEN (GW_BS_HDR_LEN + 8u + GW_BS_NONCE_LEN)
#define GW_BS_CHALLENGE_LEN (GW_BS_HDR_LEN + GW_BS_NONCE_LEN + GW_BS_PROOF_LEN)
#define GW_BS_RESPONSE_LEN (GW_BS_HDR_LEN + GW_BS_PROOF_LEN)
#define GW_BS_WELCOME_LEN (GW_BS_HDR_LEN + GW_BS_JOB_ID_LEN)
#define GW_BS_REJECT_MIN_LEN (GW_BS_HDR_LEN + 4u)
#define GW_BS_REJECT_MAX_LEN (GW_BS_REJECT_MIN_LEN + GW_BS_REASON_MAX)
/* Header plus the u32 len of DATA; the bytes follow. */
#define GW_BS_DATA_PREFIX_LEN (GW_BS_HDR_LEN + 4u)
/* A buffer of this size holds any message other than DATA. */
#define GW_BS_SMALL_MSG_MAX GW_BS_REJECT_MAX_LEN

typedef enum gw_bs_type {
    GW_BS_HELLO = 1,
    GW_BS_CHALLENGE = 2,
    GW_BS_RESPONSE = 3,
    GW_BS_REJECT = 4,
    GW_BS_WELCOME = 5,
    GW_BS_DATA = 6,
} gw_bs_type_t;

typedef struct gw_bs_hdr {
    gw_bs_type_t type;
    uint32_t payload_len;
} gw_bs_hdr_t;

typedef struct gw_bs_hello {
    int32_t rank; /* as claimed by the sender: checked by the root, not here */
    int32_t size;
    uint8_t client_nonce[GW_BS_NONCE_LEN];
} gw_bs_hello_t;

typedef struct gw_bs_challenge {
    uint8_t server_nonce[GW_BS_NONCE_LEN];
    uint8_t root_proof[GW_BS_PROOF_LEN];
} gw_bs_challenge_t;

typedef struct gw_bs_reject {
    gw_status_t status;
    char reason[GW_BS_REASON_MAX + 1]; /* NUL-terminated */
} gw_bs_reject_t;

/* Lower-case name of a message type ("hello"), "unknown" otherwise. */
const char *gw__bs_type_name(uint32_t type);

/* Encoders write one whole message into out and never fail. hello->rank and
 * size must be non-negative. */
void gw__bs_encode_hello(const gw_bs_hello_t *m, uint8_t out[GW_BS_HELLO_LEN]);
void gw__bs_encode_challenge(const gw_bs_challenge_t *m, uint8_t out[GW_BS_CHALLENGE_LEN]);
void gw__bs_encode_response(const uint8_t proof[GW_BS_PROOF_LEN], uint8_t out[GW_BS_RESPONSE_LEN]);
void gw__bs_encode_welcome(const uint8_t job_id[GW_BS_JOB_ID_LEN], uint8_t out[GW_BS_WELCOME_LEN]);
/* reason may be NULL; it is cut at GW_BS_REASON_MAX bytes and any byte that
 * is not printable ASCII becomes '?'. status must not be GW_OK. Returns the
 * message length. */
size_t gw__bs_encode_reject(gw_status_t status, const char *reason,
                            uint8_t out[GW_BS_REJECT_MAX_LEN]);
/* The header and length of a DATA message of len bytes (len <=
 * GW_BS_DATA_MAX); the caller sends the bytes after it. */
void gw__bs_encode_data_prefix(uint32_t len, uint8_t out[GW_BS_DATA_PREFIX_LEN]);

/* The header alone, from the first len bytes of buf (len >= GW_BS_HDR_LEN):
 * checks magic, version, type and the payload length bound for the type. */
gw_status_t gw__bs_decode_hdr(const uint8_t *buf, size_t len, gw_bs_hdr_t *out, const char **why);
gw_status_t gw__bs_decode_hello(const uint8_t *buf, size_t len, gw_bs_hello_t *out,
                                const char **why);
gw_status_t gw__bs_decode_challenge(const uint8_t *buf, size_t len, gw_bs_challenge_t *out,
                                    const char **why);
gw_status_t gw__bs_decode_response(const uint8_t *buf, size_t len, uint8_t proof[GW_BS_PROOF_LEN],
                                   const char **why);
gw_status_t gw__bs_decode_welcome(const uint8_t *buf, size_t len, uint8_t job_id[GW_BS_JOB_ID_LEN],
                                  const char **why);
gw_status_t gw__bs_decode_reject(const uint8_t *buf, size_t len, gw_bs_reject_t *out,
                                 const char **why);
/* The first GW_BS_DATA_PREFIX_LEN bytes of a DATA message: *data_len is its
 * len field, checked against the header's payload length. */
gw_status_t gw__bs_decode_data_prefix(const uint8_t *buf, size_t len, uint32_t *data_len,
                                      const char **why);

/* The proofs defined above. token may be NULL when token_len is 0. */
void gw__bs_root_proof(const void *token, size_t token_len,
                       const uint8_t client_nonce[GW_BS_NONCE_LEN],
                       const uint8_t server_nonce[GW_BS_NONCE_LEN], uint8_t out[GW_BS_PROOF_LEN]);
void gw__bs_rank_proof(const void *token, size_t token_len,
                       const uint8_t server_nonce[GW_BS_NONCE_LEN],
                       const uint8_t client_nonce[GW_BS_NONCE_LEN], uint32_t rank,
                       uint8_t out[GW_BS_PROOF_LEN]);

#endif
