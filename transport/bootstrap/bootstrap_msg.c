/*
 * bootstrap_msg.c - encoding and decoding of bootstrap messages (the format
 * is documented in bootstrap_msg.h) and the HMAC proofs of the handshake.
 *
 * Decoding is deliberately paranoid: these bytes come from whoever connects
 * to the root's port, before anything is authenticated. Every field is
 * checked and every length is bounded before a caller can act on it, and
 * the reason text of REJECT, which ends up in logs, is restricted to
 * printable ASCII so a peer cannot forge log lines.
 */
#include "transport/bootstrap/bootstrap_msg.h"
#include "common/byteorder.h"

#include <string.h>

#include "common/sha256.h"

const char *gw__bs_type_name(uint32_t type)
{
    switch (type) {
    case GW_BS_HELLO:
        return "hello";
    case GW_BS_CHALLENGE:
        return "challenge";
    case GW_BS_RESPONSE:
        return "response";
    case GW_BS_REJECT:
        return "reject";
    case GW_BS_WELCOME:
        return "welcome";
    case GW_BS_DATA:
        return "data";
    case GW_BS_REPORT:
        return "report";
    case GW_BS_INQUIRE:
        return "inquire";
    case GW_BS_VERDICT:
        return "verdict";
    case GW_BS_GATHER_START:
        return "gather start";
    case GW_BS_SHRINK:
        return "shrink";
    case GW_BS_MEMBERS:
        return "members";
    case GW_BS_JOIN:
        return "join";
    case GW_BS_GROW:
        return "grow";
    case GW_BS_GROWN:
        return "grown";
    case GW_BS_RING_OPEN:
        return "ring open";
    case GW_BS_BYE:
        return "bye";
    case GW_BS_DEPOSED:
        return "deposed";
    case GW_BS_RING_PEER:
        return "ring peer";
    case GW_BS_PULSE:
        return "pulse";
    case GW_BS_STATUS_ASK:
        return "status ask";
    case GW_BS_STATUS:
        return "status";
    case GW_BS_CLOCK:
        return "clock";
    }
    return "unknown";
}

static void put_hdr(uint8_t *out, gw_bs_type_t type, uint32_t payload_len)
{
    gw__put_be32(out, GW_BS_MAGIC);
    gw__put_be16(out + 4, GW_BS_VERSION);
    gw__put_be16(out + 6, (uint16_t)type);
    gw__put_be32(out + 8, payload_len);
}

void gw__bs_encode_hello(const gw_bs_hello_t *m, uint8_t out[GW_BS_HELLO_LEN])
{
    put_hdr(out, GW_BS_HELLO, GW_BS_HELLO_LEN - GW_BS_HDR_LEN);
    gw__put_be32(out + GW_BS_HDR_LEN, (uint32_t)m->rank);
    gw__put_be32(out + GW_BS_HDR_LEN + 4, (uint32_t)m->size);
    memcpy(out + GW_BS_HDR_LEN + 8, m->client_nonce, GW_BS_NONCE_LEN);
}

void gw__bs_encode_challenge(const gw_bs_challenge_t *m, uint8_t out[GW_BS_CHALLENGE_LEN])
{
    put_hdr(out, GW_BS_CHALLENGE, GW_BS_CHALLENGE_LEN - GW_BS_HDR_LEN);
    memcpy(out + GW_BS_HDR_LEN, m->server_nonce, GW_BS_NONCE_LEN);
    memcpy(out + GW_BS_HDR_LEN + GW_BS_NONCE_LEN, m->root_proof, GW_BS_PROOF_LEN);
}

void gw__bs_encode_response(const uint8_t proof[GW_BS_PROOF_LEN], uint8_t out[GW_BS_RESPONSE_LEN])
{
    put_hdr(out, GW_BS_RESPONSE, GW_BS_PROOF_LEN);
    memcpy(out + GW_BS_HDR_LEN, proof, GW_BS_PROOF_LEN);
}

void gw__bs_encode_welcome(const uint8_t job_id[GW_BS_JOB_ID_LEN], uint8_t out[GW_BS_WELCOME_LEN])
{
    put_hdr(out, GW_BS_WELCOME, GW_BS_JOB_ID_LEN);
    memcpy(out + GW_BS_HDR_LEN, job_id, GW_BS_JOB_ID_LEN);
}

static int printable(uint8_t c) { return c >= 0x20 && c <= 0x7e; }

size_t gw__bs_encode_reject(gw_status_t status, const char *reason,
                            uint8_t out[GW_BS_REJECT_MAX_LEN])
{
    size_t n = reason ? strnlen(reason, GW_BS_REASON_MAX) : 0;
    put_hdr(out, GW_BS_REJECT, (uint32_t)(4 + n));
    gw__put_be32(out + GW_BS_HDR_LEN, (uint32_t)status);
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)reason[i];
        out[GW_BS_REJECT_MIN_LEN + i] = printable(c) ? c : (uint8_t)'?';
    }
    return GW_BS_REJECT_MIN_LEN + n;
}

void gw__bs_encode_data_prefix(uint32_t len, uint8_t out[GW_BS_DATA_PREFIX_LEN])
{
    put_hdr(out, GW_BS_DATA, 4 + len);
    gw__put_be32(out + GW_BS_HDR_LEN, len);
}

size_t gw__bs_encode_report(const gw_bs_report_t *m, uint8_t out[GW_BS_REPORT_LEN])
{
    uint8_t *p = out + GW_BS_HDR_LEN;
    put_hdr(out, GW_BS_REPORT, GW_BS_REPORT_LEN - GW_BS_HDR_LEN);
    gw__put_be32(p, m->kind);
    gw__put_be32(p + 4, (uint32_t)m->status);
    gw__put_be32(p + 8, (uint32_t)m->culprit);
    gw__put_be32(p + 12, (uint32_t)m->origin);
    gw__put_be32(p + 16, m->blame);
    gw__put_be32(p + 20, (uint32_t)m->waiting_on);
    gw__put_be64(p + 24, m->seq);
    gw__put_be32(p + 32, m->stalled_ms);
    gw__put_be32(p + 36, m->op_kind);
    gw__put_be32(p + 40, m->step);
    return GW_BS_REPORT_LEN;
}

size_t gw__bs_encode_inquire(const gw_bs_inquire_t *m, uint8_t out[GW_BS_INQUIRE_LEN])
{
    put_hdr(out, GW_BS_INQUIRE, GW_BS_INQUIRE_LEN - GW_BS_HDR_LEN);
    gw__put_be32(out + GW_BS_HDR_LEN, (uint32_t)m->reporter);
    gw__put_be64(out + GW_BS_HDR_LEN + 4, m->seq);
    return GW_BS_INQUIRE_LEN;
}

size_t gw__bs_encode_verdict(const gw_bs_verdict_t *m, uint8_t out[GW_BS_VERDICT_MAX_LEN])
{
    size_t n = strnlen(m->reason, GW_BS_REASON_MAX);
    uint8_t *p = out + GW_BS_HDR_LEN;
    put_hdr(out, GW_BS_VERDICT, (uint32_t)(GW_BS_VERDICT_MIN_LEN - GW_BS_HDR_LEN + n));
    gw__put_be32(p, (uint32_t)m->status);
    gw__put_be32(p + 4, (uint32_t)m->culprit);
    gw__put_be32(p + 8, (uint32_t)m->origin);
    gw__put_be64(p + 12, m->seq);
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)m->reason[i];
        out[GW_BS_VERDICT_MIN_LEN + i] = printable(c) ? c : (uint8_t)'?';
    }
    return GW_BS_VERDICT_MIN_LEN + n;
}

static gw_status_t malformed(const char **why, const char *text)
{
    if (why)
        *why = text;
    return GW_ERR_PROTOCOL;
}

gw_status_t gw__bs_decode_hdr(const uint8_t *buf, size_t len, gw_bs_hdr_t *out, const char **why)
{
    if (!buf || len < GW_BS_HDR_LEN)
        return malformed(why, "truncated header");
    if (gw__get_be32(buf) != GW_BS_MAGIC)
        return malformed(why, "bad magic (not a gradwire bootstrap message)");
    if (gw__get_be16(buf + 4) != GW_BS_VERSION)
        return malformed(why, "unsupported protocol version");
    uint16_t type = gw__get_be16(buf + 6);
    uint32_t plen = gw__get_be32(buf + 8);
    uint32_t min, max;
    switch (type) {
    case GW_BS_HELLO:
        min = max = GW_BS_HELLO_LEN - GW_BS_HDR_LEN;
        break;
    case GW_BS_CHALLENGE:
        min = max = GW_BS_CHALLENGE_LEN - GW_BS_HDR_LEN;
        break;
    case GW_BS_RESPONSE:
        min = max = GW_BS_RESPONSE_LEN - GW_BS_HDR_LEN;
        break;
    case GW_BS_WELCOME:
        min = max = GW_BS_WELCOME_LEN - GW_BS_HDR_LEN;
        break;
    case GW_BS_REJECT:
        min = 4;
        max = 4 + GW_BS_REASON_MAX;
        break;
    case GW_BS_DATA:
        min = 4;
        max = 4 + GW_BS_DATA_MAX;
        break;
    case GW_BS_REPORT:
        min = max = GW_BS_REPORT_LEN - GW_BS_HDR_LEN;
        break;
    case GW_BS_INQUIRE:
        min = max = GW_BS_INQUIRE_LEN - GW_BS_HDR_LEN;
        break;
    case GW_BS_GATHER_START:
        min = max = GW_BS_GATHER_START_LEN - GW_BS_HDR_LEN;
        break;
    case GW_BS_SHRINK:
        min = max = GW_BS_SHRINK_LEN - GW_BS_HDR_LEN;
        break;
    case GW_BS_MEMBERS:
        min = max = GW_BS_MEMBERS_LEN - GW_BS_HDR_LEN;
        break;
    case GW_BS_JOIN:
        min = max = GW_BS_JOIN_LEN - GW_BS_HDR_LEN;
        break;
    case GW_BS_GROW:
        min = max = GW_BS_GROW_LEN - GW_BS_HDR_LEN;
        break;
    case GW_BS_GROWN:
        min = max = GW_BS_GROWN_LEN - GW_BS_HDR_LEN;
        break;
    case GW_BS_RING_OPEN:
    case GW_BS_BYE:
    case GW_BS_DEPOSED:
        min = max = 0;
        break;
    case GW_BS_RING_PEER:
        min = max = GW_BS_RING_ADDR_LEN;
        break;
    case GW_BS_PULSE:
        min = GW_BS_PULSE_FIXED;
        max = GW_BS_PULSE_MAX_LEN - GW_BS_HDR_LEN;
        break;
    case GW_BS_STATUS_ASK:
        min = max = GW_BS_STATUS_ASK_LEN - GW_BS_HDR_LEN;
        break;
    case GW_BS_CLOCK:
        min = max = GW_BS_CLOCK_LEN - GW_BS_HDR_LEN;
        break;
    case GW_BS_STATUS:
        min = 8;
        max = GW_BS_STATUS_MAX_PAYLOAD;
        break;
    case GW_BS_VERDICT:
        min = GW_BS_VERDICT_MIN_LEN - GW_BS_HDR_LEN;
        max = GW_BS_VERDICT_MAX_LEN - GW_BS_HDR_LEN;
        break;
    default:
        return malformed(why, "unknown message type");
    }
    if (plen < min || plen > max)
        return malformed(why, "payload length out of bounds for the message type");
    out->type = (gw_bs_type_t)type;
    out->payload_len = plen;
    return GW_OK;
}

/* Header check shared by the whole-message decoders: the right type and
 * exactly one message in buf, whose payload is then buf + GW_BS_HDR_LEN. */
static gw_status_t whole(const uint8_t *buf, size_t len, gw_bs_type_t type, gw_bs_hdr_t *hdr,
                         const char **why)
{
    gw_status_t st = gw__bs_decode_hdr(buf, len, hdr, why);
    if (st != GW_OK)
        return st;
    if (hdr->type != type)
        return malformed(why, "unexpected message type");
    if (len < GW_BS_HDR_LEN + (size_t)hdr->payload_len)
        return malformed(why, "truncated message");
    if (len > GW_BS_HDR_LEN + (size_t)hdr->payload_len)
        return malformed(why, "trailing bytes after the message");
    return GW_OK;
}

/* A message of `type` whose payload has a fixed length (decode_hdr bounds
 * it exactly): its first alen bytes copied to a, the blen after them to b. */
static gw_status_t fixed(const uint8_t *buf, size_t len, gw_bs_type_t type, void *a, size_t alen,
                         void *b, size_t blen, const char **why)
{
    gw_bs_hdr_t hdr;
    gw_status_t st = whole(buf, len, type, &hdr, why);
    if (st != GW_OK)
        return st;
    memcpy(a, buf + GW_BS_HDR_LEN, alen);
    if (blen)
        memcpy(b, buf + GW_BS_HDR_LEN + alen, blen);
    return GW_OK;
}

gw_status_t gw__bs_decode_hello(const uint8_t *buf, size_t len, gw_bs_hello_t *out,
                                const char **why)
{
    uint8_t ranks[8], nonce[GW_BS_NONCE_LEN];
    gw_status_t st = fixed(buf, len, GW_BS_HELLO, ranks, sizeof(ranks), nonce, sizeof(nonce), why);
    if (st != GW_OK)
        return st;
    uint32_t rank = gw__get_be32(ranks), size = gw__get_be32(ranks + 4);
    if (rank > INT32_MAX || size > INT32_MAX)
        return malformed(why, "rank or size does not fit a 32-bit signed integer");
    out->rank = (int32_t)rank;
    out->size = (int32_t)size;
    memcpy(out->client_nonce, nonce, GW_BS_NONCE_LEN);
    return GW_OK;
}

gw_status_t gw__bs_decode_challenge(const uint8_t *buf, size_t len, gw_bs_challenge_t *out,
                                    const char **why)
{
    return fixed(buf, len, GW_BS_CHALLENGE, out->server_nonce, GW_BS_NONCE_LEN, out->root_proof,
                 GW_BS_PROOF_LEN, why);
}

gw_status_t gw__bs_decode_response(const uint8_t *buf, size_t len, uint8_t proof[GW_BS_PROOF_LEN],
                                   const char **why)
{
    return fixed(buf, len, GW_BS_RESPONSE, proof, GW_BS_PROOF_LEN, NULL, 0, why);
}

gw_status_t gw__bs_decode_welcome(const uint8_t *buf, size_t len, uint8_t job_id[GW_BS_JOB_ID_LEN],
                                  const char **why)
{
    return fixed(buf, len, GW_BS_WELCOME, job_id, GW_BS_JOB_ID_LEN, NULL, 0, why);
}

/* Only statuses this library defines may travel in a REJECT. */
static int known_error(uint32_t v)
{
    switch (v) {
#define GW__BS_STATUS_CASE(name, value, text) case value:
        GW_STATUS_MAP(GW__BS_STATUS_CASE)
#undef GW__BS_STATUS_CASE
        return v != GW_OK;
    }
    return 0;
}

gw_status_t gw__bs_decode_reject(const uint8_t *buf, size_t len, gw_bs_reject_t *out,
                                 const char **why)
{
    gw_bs_hdr_t hdr;
    gw_status_t st = whole(buf, len, GW_BS_REJECT, &hdr, why);
    if (st != GW_OK)
        return st;
    const uint8_t *p = buf + GW_BS_HDR_LEN;
    uint32_t status = gw__get_be32(p);
    if (!known_error(status))
        return malformed(why, "reject carries an unknown status");
    size_t n = hdr.payload_len - 4;
    for (size_t i = 0; i < n; i++)
        if (!printable(p[4 + i]))
            return malformed(why, "reject reason is not printable ASCII");
    out->status = (gw_status_t)status;
    memcpy(out->reason, p + 4, n);
    out->reason[n] = '\0';
    return GW_OK;
}

/* A rank on the wire: -1 (none) or a non-negative 32-bit integer. */
static int get_rank(const uint8_t *p, int32_t *out)
{
    int32_t v = (int32_t)gw__get_be32(p);
    if (v < -1)
        return -1;
    *out = v;
    return 0;
}

gw_status_t gw__bs_decode_report(const uint8_t *buf, size_t len, gw_bs_report_t *out,
                                 const char **why)
{
    uint8_t p[GW_BS_REPORT_LEN - GW_BS_HDR_LEN];
    gw_status_t st = fixed(buf, len, GW_BS_REPORT, p, sizeof(p), NULL, 0, why);
    if (st != GW_OK)
        return st;
    gw_bs_report_t m;
    m.kind = gw__get_be32(p);
    uint32_t status = gw__get_be32(p + 4);
    m.blame = gw__get_be32(p + 16);
    m.seq = gw__get_be64(p + 24);
    m.stalled_ms = gw__get_be32(p + 32);
    m.op_kind = gw__get_be32(p + 36);
    m.step = gw__get_be32(p + 40);
    if (m.op_kind > 255)
        return malformed(why, "report names an unknown kind of collective");
    if (m.kind < GW_BS_REPORT_FAILED || m.kind > GW_BS_REPORT_STATE)
        return malformed(why, "report of an unknown kind");
    if (m.kind == GW_BS_REPORT_STATE ? status != GW_OK : !known_error(status))
        return malformed(why, "report carries an unknown or unfitting status");
    if (m.blame > 5)
        return malformed(why, "report names an unknown kind of blame");
    if (get_rank(p + 8, &m.culprit) || get_rank(p + 12, &m.origin) ||
        get_rank(p + 20, &m.waiting_on))
        return malformed(why, "report names a negative rank other than -1");
    m.status = (gw_status_t)status;
    *out = m;
    return GW_OK;
}

gw_status_t gw__bs_decode_inquire(const uint8_t *buf, size_t len, gw_bs_inquire_t *out,
                                  const char **why)
{
    uint8_t p[GW_BS_INQUIRE_LEN - GW_BS_HDR_LEN];
    gw_status_t st = fixed(buf, len, GW_BS_INQUIRE, p, sizeof(p), NULL, 0, why);
    if (st != GW_OK)
        return st;
    gw_bs_inquire_t m;
    if (get_rank(p, &m.reporter))
        return malformed(why, "inquiry names a negative rank other than -1");
    m.seq = gw__get_be64(p + 4);
    *out = m;
    return GW_OK;
}

gw_status_t gw__bs_decode_verdict(const uint8_t *buf, size_t len, gw_bs_verdict_t *out,
                                  const char **why)
{
    gw_bs_hdr_t hdr;
    gw_status_t st = whole(buf, len, GW_BS_VERDICT, &hdr, why);
    if (st != GW_OK)
        return st;
    const uint8_t *p = buf + GW_BS_HDR_LEN;
    uint32_t status = gw__get_be32(p);
    if (!known_error(status))
        return malformed(why, "verdict carries an unknown status");
    gw_bs_verdict_t m;
    if (get_rank(p + 4, &m.culprit) || get_rank(p + 8, &m.origin))
        return malformed(why, "verdict names a negative rank other than -1");
    m.seq = gw__get_be64(p + 12);
    size_t n = hdr.payload_len - (GW_BS_VERDICT_MIN_LEN - GW_BS_HDR_LEN);
    for (size_t i = 0; i < n; i++)
        if (!printable(p[20 + i]))
            return malformed(why, "verdict reason is not printable ASCII");
    m.status = (gw_status_t)status;
    memcpy(m.reason, p + 20, n);
    m.reason[n] = '\0';
    *out = m;
    return GW_OK;
}

gw_status_t gw__bs_decode_data_prefix(const uint8_t *buf, size_t len, uint32_t *data_len,
                                      const char **why)
{
    gw_bs_hdr_t hdr;
    gw_status_t st = gw__bs_decode_hdr(buf, len, &hdr, why);
    if (st != GW_OK)
        return st;
    if (hdr.type != GW_BS_DATA)
        return malformed(why, "unexpected message type");
    if (len < GW_BS_DATA_PREFIX_LEN)
        return malformed(why, "truncated message");
    uint32_t n = gw__get_be32(buf + GW_BS_HDR_LEN);
    if (n != hdr.payload_len - 4)
        return malformed(why, "data length disagrees with the payload length");
    *data_len = n;
    return GW_OK;
}

void gw__bs_root_proof(const void *token, size_t token_len,
                       const uint8_t client_nonce[GW_BS_NONCE_LEN],
                       const uint8_t server_nonce[GW_BS_NONCE_LEN], uint8_t out[GW_BS_PROOF_LEN])
{
    gw_hmac_sha256_t h;
    gw__hmac_sha256_init(&h, token, token_len);
    gw__hmac_sha256_update(&h, "gw-root", 7);
    gw__hmac_sha256_update(&h, client_nonce, GW_BS_NONCE_LEN);
    gw__hmac_sha256_update(&h, server_nonce, GW_BS_NONCE_LEN);
    gw__hmac_sha256_final(&h, out);
}

void gw__bs_rank_proof(const void *token, size_t token_len,
                       const uint8_t server_nonce[GW_BS_NONCE_LEN],
                       const uint8_t client_nonce[GW_BS_NONCE_LEN], uint32_t rank,
                       uint8_t out[GW_BS_PROOF_LEN])
{
    uint8_t r[4];
    gw__put_be32(r, rank);
    gw_hmac_sha256_t h;
    gw__hmac_sha256_init(&h, token, token_len);
    gw__hmac_sha256_update(&h, "gw-rank", 7);
    gw__hmac_sha256_update(&h, server_nonce, GW_BS_NONCE_LEN);
    gw__hmac_sha256_update(&h, client_nonce, GW_BS_NONCE_LEN);
    gw__hmac_sha256_update(&h, r, sizeof(r));
    gw__hmac_sha256_final(&h, out);
}

void gw__bs_encode_gather_start(uint32_t wait_ms, uint8_t out[GW_BS_GATHER_START_LEN])
{
    put_hdr(out, GW_BS_GATHER_START, 4);
    gw__put_be32(out + GW_BS_HDR_LEN, wait_ms);
}

gw_status_t gw__bs_decode_gather_start(const uint8_t *buf, size_t len, uint32_t *wait_ms,
                                       const char **why)
{
    gw_bs_hdr_t h;
    gw_status_t st = whole(buf, len, GW_BS_GATHER_START, &h, why);
    if (st != GW_OK)
        return st;
    uint32_t ms = gw__get_be32(buf + GW_BS_HDR_LEN);
    /* GW_TIMEOUT_MS is an int of milliseconds; more is not rank 0's. */
    if (ms > (uint32_t)INT32_MAX)
        return malformed(why, "gather start: wait out of range");
    *wait_ms = ms;
    return GW_OK;
}

/* SHRINK and GROW share a layout and its checks. */
static void encode_request(gw_bs_type_t type, const gw_bs_shrink_req_t *m, uint8_t *out)
{
    put_hdr(out, type, 8);
    gw__put_be32(out + GW_BS_HDR_LEN, m->port);
    gw__put_be32(out + GW_BS_HDR_LEN + 4, m->window_ms);
}

static gw_status_t decode_request(gw_bs_type_t type, const uint8_t *buf, size_t len,
                                  gw_bs_shrink_req_t *out, const char **why)
{
    gw_bs_hdr_t h;
    gw_status_t st = whole(buf, len, type, &h, why);
    if (st != GW_OK)
        return st;
    uint32_t port = gw__get_be32(buf + GW_BS_HDR_LEN);
    uint32_t window = gw__get_be32(buf + GW_BS_HDR_LEN + 4);
    if (port > 65535)
        return malformed(why, type == GW_BS_GROW ? "grow: port out of range"
                                                 : "shrink: port out of range");
    if (window > (uint32_t)INT32_MAX)
        return malformed(why, type == GW_BS_GROW ? "grow: window out of range"
                                                 : "shrink: window out of range");
    out->port = port;
    out->window_ms = window;
    return GW_OK;
}

void gw__bs_encode_shrink(const gw_bs_shrink_req_t *m, uint8_t out[GW_BS_SHRINK_LEN])
{
    encode_request(GW_BS_SHRINK, m, out);
}

gw_status_t gw__bs_decode_shrink(const uint8_t *buf, size_t len, gw_bs_shrink_req_t *out,
                                 const char **why)
{
    return decode_request(GW_BS_SHRINK, buf, len, out, why);
}

void gw__bs_encode_grow(const gw_bs_shrink_req_t *m, uint8_t out[GW_BS_GROW_LEN])
{
    encode_request(GW_BS_GROW, m, out);
}

gw_status_t gw__bs_decode_grow(const uint8_t *buf, size_t len, gw_bs_shrink_req_t *out,
                               const char **why)
{
    return decode_request(GW_BS_GROW, buf, len, out, why);
}

/* MEMBERS and GROWN share a layout; a GROWN member's port may be 0. */
static void encode_place(gw_bs_type_t type, const gw_bs_members_t *m, uint8_t *out)
{
    put_hdr(out, type, 16);
    gw__put_be32(out + GW_BS_HDR_LEN, (uint32_t)m->status);
    gw__put_be32(out + GW_BS_HDR_LEN + 4, (uint32_t)m->new_rank);
    gw__put_be32(out + GW_BS_HDR_LEN + 8, m->new_size);
    gw__put_be32(out + GW_BS_HDR_LEN + 12, m->port);
}

static gw_status_t decode_place(gw_bs_type_t type, const uint8_t *buf, size_t len,
                                gw_bs_members_t *out, const char **why)
{
    gw_bs_hdr_t h;
    gw_status_t st = whole(buf, len, type, &h, why);
    if (st != GW_OK)
        return st;
    int grown = type == GW_BS_GROWN;
    uint32_t status = gw__get_be32(buf + GW_BS_HDR_LEN);
    int32_t rank = (int32_t)gw__get_be32(buf + GW_BS_HDR_LEN + 4);
    uint32_t size = gw__get_be32(buf + GW_BS_HDR_LEN + 8);
    uint32_t port = gw__get_be32(buf + GW_BS_HDR_LEN + 12);
    if (status != GW_OK && !known_error(status))
        return malformed(why, grown ? "grown: unknown status" : "members: unknown status");
    if (grown && port > 65535)
        return malformed(why, "grown: port out of range");
    if (status == GW_OK) {
        if (rank < 0 || (uint32_t)rank >= size || (port == 0 && !grown) || port > 65535)
            return malformed(why, grown ? "grown: a member's rank, size or port out of range"
                                        : "members: a member's rank, size or port out of range");
    } else if (rank != -1) {
        return malformed(why,
                         grown ? "grown: a rank for no member" : "members: a rank for no member");
    }
    out->status = (gw_status_t)status;
    out->new_rank = rank;
    out->new_size = size;
    out->port = port;
    return GW_OK;
}

void gw__bs_encode_members(const gw_bs_members_t *m, uint8_t out[GW_BS_MEMBERS_LEN])
{
    encode_place(GW_BS_MEMBERS, m, out);
}

gw_status_t gw__bs_decode_members(const uint8_t *buf, size_t len, gw_bs_members_t *out,
                                  const char **why)
{
    return decode_place(GW_BS_MEMBERS, buf, len, out, why);
}

void gw__bs_encode_grown(const gw_bs_members_t *m, uint8_t out[GW_BS_GROWN_LEN])
{
    encode_place(GW_BS_GROWN, m, out);
}

gw_status_t gw__bs_decode_grown(const uint8_t *buf, size_t len, gw_bs_members_t *out,
                                const char **why)
{
    return decode_place(GW_BS_GROWN, buf, len, out, why);
}

void gw__bs_encode_join(const uint8_t nonce[GW_BS_NONCE_LEN], uint8_t out[GW_BS_JOIN_LEN])
{
    put_hdr(out, GW_BS_JOIN, GW_BS_NONCE_LEN);
    memcpy(out + GW_BS_HDR_LEN, nonce, GW_BS_NONCE_LEN);
}

gw_status_t gw__bs_decode_join(const uint8_t *buf, size_t len, uint8_t nonce[GW_BS_NONCE_LEN],
                               const char **why)
{
    gw_bs_hdr_t h;
    gw_status_t st = whole(buf, len, GW_BS_JOIN, &h, why);
    if (st != GW_OK)
        return st;
    memcpy(nonce, buf + GW_BS_HDR_LEN, GW_BS_NONCE_LEN);
    return GW_OK;
}

void gw__bs_encode_ring_open(uint8_t out[GW_BS_RING_OPEN_LEN]) { put_hdr(out, GW_BS_RING_OPEN, 0); }

void gw__bs_encode_bye(uint8_t out[GW_BS_BYE_LEN]) { put_hdr(out, GW_BS_BYE, 0); }

void gw__bs_encode_deposed(uint8_t out[GW_BS_DEPOSED_LEN]) { put_hdr(out, GW_BS_DEPOSED, 0); }

void gw__bs_encode_ring_peer(const uint8_t addr[GW_BS_RING_ADDR_LEN],
                             uint8_t out[GW_BS_RING_PEER_LEN])
{
    put_hdr(out, GW_BS_RING_PEER, GW_BS_RING_ADDR_LEN);
    memcpy(out + GW_BS_HDR_LEN, addr, GW_BS_RING_ADDR_LEN);
}

gw_status_t gw__bs_decode_ring_peer(const uint8_t *buf, size_t len,
                                    uint8_t addr[GW_BS_RING_ADDR_LEN], const char **why)
{
    return fixed(buf, len, GW_BS_RING_PEER, addr, GW_BS_RING_ADDR_LEN, NULL, 0, why);
}
