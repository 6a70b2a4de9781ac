/* test_bootstrap_msg.c - bootstrap message encoding: round trips, and every
 * malformed form (bad magic, version, type, length, truncation, trailing
 * bytes, bad reject contents) rejected with GW_ERR_PROTOCOL. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/sha256.h"
#include "transport/bootstrap/bootstrap_msg.h"

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(seed + 7 * i);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void set_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

Test(bootstrap_msg, header_layout, .timeout = 10)
{
    uint8_t m[GW_BS_WELCOME_LEN];
    uint8_t id[GW_BS_JOB_ID_LEN];
    fill(id, sizeof(id), 1);
    gw__bs_encode_welcome(id, m);
    /* The documented layout, byte by byte: magic "GWBS", version 5, type 5,
     * payload 16, all big-endian. */
    static const uint8_t want[12] = {'G', 'W', 'B', 'S', 0, 5, 0, 5, 0, 0, 0, 16};
    cr_assert_arr_eq(m, want, sizeof(want));
    gw_bs_hdr_t h;
    cr_assert_eq(gw__bs_decode_hdr(m, sizeof(m), &h, NULL), GW_OK);
    cr_assert_eq(h.type, GW_BS_WELCOME);
    cr_assert_eq(h.payload_len, GW_BS_JOB_ID_LEN);
}

Test(bootstrap_msg, hello_round_trip, .timeout = 10)
{
    gw_bs_hello_t in = {.rank = 3, .size = 1000000}, out;
    fill(in.client_nonce, sizeof(in.client_nonce), 9);
    uint8_t m[GW_BS_HELLO_LEN];
    gw__bs_encode_hello(&in, m);
    cr_assert_eq(gw__bs_decode_hello(m, sizeof(m), &out, NULL), GW_OK);
    cr_assert_eq(out.rank, 3);
    cr_assert_eq(out.size, 1000000);
    cr_assert_arr_eq(out.client_nonce, in.client_nonce, GW_BS_NONCE_LEN);
}

Test(bootstrap_msg, challenge_response_welcome_round_trip, .timeout = 10)
{
    gw_bs_challenge_t ch, ch2;
    fill(ch.server_nonce, sizeof(ch.server_nonce), 3);
    fill(ch.root_proof, sizeof(ch.root_proof), 200);
    uint8_t m[GW_BS_CHALLENGE_LEN];
    gw__bs_encode_challenge(&ch, m);
    cr_assert_eq(gw__bs_decode_challenge(m, sizeof(m), &ch2, NULL), GW_OK);
    cr_assert_arr_eq(ch2.server_nonce, ch.server_nonce, GW_BS_NONCE_LEN);
    cr_assert_arr_eq(ch2.root_proof, ch.root_proof, GW_BS_PROOF_LEN);

    uint8_t proof[GW_BS_PROOF_LEN], proof2[GW_BS_PROOF_LEN], r[GW_BS_RESPONSE_LEN];
    fill(proof, sizeof(proof), 77);
    gw__bs_encode_response(proof, r);
    cr_assert_eq(gw__bs_decode_response(r, sizeof(r), proof2, NULL), GW_OK);
    cr_assert_arr_eq(proof2, proof, sizeof(proof));

    uint8_t id[GW_BS_JOB_ID_LEN], id2[GW_BS_JOB_ID_LEN], w[GW_BS_WELCOME_LEN];
    fill(id, sizeof(id), 5);
    gw__bs_encode_welcome(id, w);
    cr_assert_eq(gw__bs_decode_welcome(w, sizeof(w), id2, NULL), GW_OK);
    cr_assert_arr_eq(id2, id, sizeof(id));
}

Test(bootstrap_msg, reject_round_trip_and_sanitising, .timeout = 10)
{
    uint8_t m[GW_BS_REJECT_MAX_LEN];
    gw_bs_reject_t rej;
    size_t n = gw__bs_encode_reject(GW_ERR_CONFIG, "duplicate rank 3", m);
    cr_assert_eq(n, GW_BS_REJECT_MIN_LEN + strlen("duplicate rank 3"));
    cr_assert_eq(gw__bs_decode_reject(m, n, &rej, NULL), GW_OK);
    cr_assert_eq(rej.status, GW_ERR_CONFIG);
    cr_assert_str_eq(rej.reason, "duplicate rank 3");

    n = gw__bs_encode_reject(GW_ERR_AUTH, NULL, m);
    cr_assert_eq(n, GW_BS_REJECT_MIN_LEN);
    cr_assert_eq(gw__bs_decode_reject(m, n, &rej, NULL), GW_OK);
    cr_assert_eq(rej.status, GW_ERR_AUTH);
    cr_assert_str_eq(rej.reason, "");

    /* Control characters would let a peer forge log lines: replaced. */
    n = gw__bs_encode_reject(GW_ERR_REMOTE, "a\nb\x1b[0m\xff", m);
    cr_assert_eq(gw__bs_decode_reject(m, n, &rej, NULL), GW_OK);
    cr_assert_str_eq(rej.reason, "a?b?[0m?");

    /* Long reasons are cut at the maximum. */
    char longer[GW_BS_REASON_MAX + 100];
    memset(longer, 'x', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    n = gw__bs_encode_reject(GW_ERR_MISMATCH, longer, m);
    cr_assert_eq(n, GW_BS_REJECT_MAX_LEN);
    cr_assert_eq(gw__bs_decode_reject(m, n, &rej, NULL), GW_OK);
    cr_assert_eq(strlen(rej.reason), GW_BS_REASON_MAX);
}

Test(bootstrap_msg, data_prefix_round_trip, .timeout = 10)
{
    uint8_t m[GW_BS_DATA_PREFIX_LEN];
    uint32_t n = 0;
    gw__bs_encode_data_prefix(0, m);
    cr_assert_eq(gw__bs_decode_data_prefix(m, sizeof(m), &n, NULL), GW_OK);
    cr_assert_eq(n, 0);
    gw__bs_encode_data_prefix(GW_BS_DATA_MAX, m);
    cr_assert_eq(gw__bs_decode_data_prefix(m, sizeof(m), &n, NULL), GW_OK);
    cr_assert_eq(n, GW_BS_DATA_MAX);
    gw_bs_hdr_t h;
    cr_assert_eq(gw__bs_decode_hdr(m, sizeof(m), &h, NULL), GW_OK);
    cr_assert_eq(h.type, GW_BS_DATA);
    cr_assert_eq(h.payload_len, 4 + GW_BS_DATA_MAX);
}

static void expect_bad_hdr(const uint8_t *m, size_t len, const char *what)
{
    gw_bs_hdr_t h;
    const char *why = NULL;
    cr_assert_eq(gw__bs_decode_hdr(m, len, &h, &why), GW_ERR_PROTOCOL, "%s accepted", what);
    cr_assert_not_null(why, "%s: no explanation", what);
}

Test(bootstrap_msg, header_rejections, .timeout = 10)
{
    uint8_t good[GW_BS_WELCOME_LEN], m[GW_BS_WELCOME_LEN];
    uint8_t id[GW_BS_JOB_ID_LEN] = {0};
    gw__bs_encode_welcome(id, good);

    memcpy(m, good, sizeof(m));
    m[0] = 'H'; /* "HWBS": e.g. an HTTP request */
    expect_bad_hdr(m, sizeof(m), "bad magic");
    memcpy(m, "GET / HTTP/1.1\r\n", 16);
    expect_bad_hdr(m, sizeof(m), "HTTP request");

    memcpy(m, good, sizeof(m));
    m[5] = 1;
    expect_bad_hdr(m, sizeof(m), "version 1 (without the watch)");
    memcpy(m, good, sizeof(m));
    m[5] = 2;
    expect_bad_hdr(m, sizeof(m), "version 2 (without GATHER_START)");
    memcpy(m, good, sizeof(m));
    m[5] = 3;
    expect_bad_hdr(m, sizeof(m), "version 3 (without the ring)");
    memcpy(m, good, sizeof(m));
    m[5] = 4;
    expect_bad_hdr(m, sizeof(m), "version 4 (reports without where)");
    memcpy(m, good, sizeof(m));
    m[5] = 6;
    expect_bad_hdr(m, sizeof(m), "version 6");
    memcpy(m, good, sizeof(m));
    m[4] = 1;
    m[5] = 1;
    expect_bad_hdr(m, sizeof(m), "version 257");

    static const uint16_t bad_types[] = {0, 22, 23, 0x0105, 0xffff};
    for (size_t i = 0; i < sizeof(bad_types) / sizeof(bad_types[0]); i++) {
        memcpy(m, good, sizeof(m));
        m[6] = (uint8_t)(bad_types[i] >> 8);
        m[7] = (uint8_t)bad_types[i];
        expect_bad_hdr(m, sizeof(m), "unknown type");
    }

    for (size_t len = 0; len < GW_BS_HDR_LEN; len++)
        expect_bad_hdr(good, len, "truncated header");
    expect_bad_hdr(NULL, 0, "NULL buffer");
}

/* Header with the given type and payload length. */
static void make_hdr(uint8_t m[GW_BS_HDR_LEN], uint16_t type, uint32_t plen)
{
    set_be32(m, GW_BS_MAGIC);
    m[4] = 0;
    m[5] = GW_BS_VERSION;
    m[6] = (uint8_t)(type >> 8);
    m[7] = (uint8_t)type;
    set_be32(m + 8, plen);
}

Test(bootstrap_msg, payload_length_bounds, .timeout = 10)
{
    static const struct {
        uint16_t type;
        uint32_t min, max;
    } t[] = {
        {GW_BS_HELLO, 40, 40},
        {GW_BS_CHALLENGE, 64, 64},
        {GW_BS_RESPONSE, 32, 32},
        {GW_BS_WELCOME, 16, 16},
        {GW_BS_REJECT, 4, 4 + GW_BS_REASON_MAX},
        {GW_BS_DATA, 4, 4 + GW_BS_DATA_MAX},
        {GW_BS_REPORT, 44, 44},
        {GW_BS_INQUIRE, 12, 12},
        {GW_BS_VERDICT, 20, 20 + GW_BS_REASON_MAX},
        {GW_BS_GATHER_START, 4, 4},
        {GW_BS_RING_OPEN, 0, 0},
        {GW_BS_RING_PEER, 23, 23},
        {GW_BS_BYE, 0, 0},
    };
    uint8_t m[GW_BS_HDR_LEN];
    gw_bs_hdr_t h;
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        make_hdr(m, t[i].type, t[i].min);
        cr_assert_eq(gw__bs_decode_hdr(m, sizeof(m), &h, NULL), GW_OK, "%s min",
                     gw__bs_type_name(t[i].type));
        make_hdr(m, t[i].type, t[i].max);
        cr_assert_eq(gw__bs_decode_hdr(m, sizeof(m), &h, NULL), GW_OK, "%s max",
                     gw__bs_type_name(t[i].type));
        make_hdr(m, t[i].type, t[i].min - 1);
        expect_bad_hdr(m, sizeof(m), "payload below the minimum");
        make_hdr(m, t[i].type, t[i].max + 1);
        expect_bad_hdr(m, sizeof(m), "payload above the maximum");
        make_hdr(m, t[i].type, UINT32_MAX);
        expect_bad_hdr(m, sizeof(m), "payload of 4 GiB");
    }
}

typedef gw_status_t (*decode_fn)(const uint8_t *buf, size_t len, void *out, const char **why);

static gw_status_t dec_hello(const uint8_t *b, size_t n, void *o, const char **w)
{
    return gw__bs_decode_hello(b, n, o, w);
}
static gw_status_t dec_challenge(const uint8_t *b, size_t n, void *o, const char **w)
{
    return gw__bs_decode_challenge(b, n, o, w);
}
static gw_status_t dec_response(const uint8_t *b, size_t n, void *o, const char **w)
{
    return gw__bs_decode_response(b, n, o, w);
}
static gw_status_t dec_welcome(const uint8_t *b, size_t n, void *o, const char **w)
{
    return gw__bs_decode_welcome(b, n, o, w);
}
static gw_status_t dec_reject(const uint8_t *b, size_t n, void *o, const char **w)
{
    return gw__bs_decode_reject(b, n, o, w);
}

/* Every truncation, a trailing byte, and every single-byte change of the
 * header of a valid message must be rejected. */
static void torture(const uint8_t *good, size_t len, decode_fn dec, const char *name)
{
    union {
        gw_bs_hello_t hello;
        gw_bs_challenge_t ch;
        uint8_t bytes[GW_BS_PROOF_LEN];
        gw_bs_reject_t rej;
    } out;
    uint8_t m[GW_BS_SMALL_MSG_MAX + 1];
    cr_assert_leq(len, GW_BS_SMALL_MSG_MAX);
    memcpy(m, good, len);
    cr_assert_eq(dec(m, len, &out, NULL), GW_OK, "%s: valid message refused", name);
    for (size_t n = 0; n < len; n++)
        cr_assert_eq(dec(m, n, &out, NULL), GW_ERR_PROTOCOL, "%s truncated to %zu accepted", name,
                     n);
    m[len] = 0;
    cr_assert_eq(dec(m, len + 1, &out, NULL), GW_ERR_PROTOCOL, "%s with a trailing byte", name);
    static const uint8_t flips[] = {0x01, 0x80, 0xff};
    for (size_t i = 0; i < GW_BS_HDR_LEN; i++)
        for (size_t f = 0; f < sizeof(flips); f++) {
            memcpy(m, good, len);
            m[i] ^= flips[f];
            const char *why = NULL;
            cr_assert_eq(dec(m, len, &out, &why), GW_ERR_PROTOCOL,
                         "%s with header byte %zu ^ 0x%02x accepted", name, i, flips[f]);
            cr_assert_not_null(why);
        }
}

Test(bootstrap_msg, malformed_messages, .timeout = 10)
{
    uint8_t m[GW_BS_SMALL_MSG_MAX];
    gw_bs_hello_t hello = {.rank = 1, .size = 2};
    fill(hello.client_nonce, GW_BS_NONCE_LEN, 1);
    gw__bs_encode_hello(&hello, m);
    torture(m, GW_BS_HELLO_LEN, dec_hello, "hello");

    gw_bs_challenge_t ch;
    fill(ch.server_nonce, GW_BS_NONCE_LEN, 2);
    fill(ch.root_proof, GW_BS_PROOF_LEN, 3);
    gw__bs_encode_challenge(&ch, m);
    torture(m, GW_BS_CHALLENGE_LEN, dec_challenge, "challenge");

    gw__bs_encode_response(ch.root_proof, m);
    torture(m, GW_BS_RESPONSE_LEN, dec_response, "response");

    gw__bs_encode_welcome(ch.root_proof, m);
    torture(m, GW_BS_WELCOME_LEN, dec_welcome, "welcome");

    size_t n = gw__bs_encode_reject(GW_ERR_AUTH, "wrong job token", m);
    torture(m, n, dec_reject, "reject");
}

Test(bootstrap_msg, wrong_type_for_decoder, .timeout = 10)
{
    uint8_t m[GW_BS_SMALL_MSG_MAX];
    uint8_t proof[GW_BS_PROOF_LEN] = {0};
    gw__bs_encode_response(proof, m);
    gw_bs_hello_t hello;
    gw_bs_challenge_t ch;
    uint8_t id[GW_BS_JOB_ID_LEN];
    gw_bs_reject_t rej;
    uint32_t dl;
    cr_assert_eq(gw__bs_decode_hello(m, GW_BS_RESPONSE_LEN, &hello, NULL), GW_ERR_PROTOCOL);
    cr_assert_eq(gw__bs_decode_challenge(m, GW_BS_RESPONSE_LEN, &ch, NULL), GW_ERR_PROTOCOL);
    cr_assert_eq(gw__bs_decode_welcome(m, GW_BS_RESPONSE_LEN, id, NULL), GW_ERR_PROTOCOL);
    cr_assert_eq(gw__bs_decode_reject(m, GW_BS_RESPONSE_LEN, &rej, NULL), GW_ERR_PROTOCOL);
    cr_assert_eq(gw__bs_decode_data_prefix(m, GW_BS_RESPONSE_LEN, &dl, NULL), GW_ERR_PROTOCOL);
    gw__bs_encode_welcome(id, m);
    cr_assert_eq(gw__bs_decode_response(m, GW_BS_WELCOME_LEN, proof, NULL), GW_ERR_PROTOCOL);
}

Test(bootstrap_msg, hello_rank_and_size_must_fit_int, .timeout = 10)
{
    uint8_t m[GW_BS_HELLO_LEN];
    gw_bs_hello_t hello = {.rank = 1, .size = 2}, out;
    memset(hello.client_nonce, 0, sizeof(hello.client_nonce));
    gw__bs_encode_hello(&hello, m);
    set_be32(m + GW_BS_HDR_LEN, 0x80000000u);
    cr_assert_eq(gw__bs_decode_hello(m, sizeof(m), &out, NULL), GW_ERR_PROTOCOL);
    gw__bs_encode_hello(&hello, m);
    set_be32(m + GW_BS_HDR_LEN + 4, 0xffffffffu);
    cr_assert_eq(gw__bs_decode_hello(m, sizeof(m), &out, NULL), GW_ERR_PROTOCOL);
    /* Out-of-range but representable ranks are for the root to refuse with
     * an explanation, not a protocol error. */
    gw__bs_encode_hello(&hello, m);
    set_be32(m + GW_BS_HDR_LEN, 7);
    cr_assert_eq(gw__bs_decode_hello(m, sizeof(m), &out, NULL), GW_OK);
    cr_assert_eq(out.rank, 7);
}

Test(bootstrap_msg, reject_contents_checked, .timeout = 10)
{
    uint8_t m[GW_BS_REJECT_MAX_LEN];
    gw_bs_reject_t rej;
    size_t n = gw__bs_encode_reject(GW_ERR_AUTH, "bad", m);
    static const uint32_t bad_status[] = {GW_OK, 14, 1000, 0xffffffffu};
    for (size_t i = 0; i < sizeof(bad_status) / sizeof(bad_status[0]); i++) {
        set_be32(m + GW_BS_HDR_LEN, bad_status[i]);
        cr_assert_eq(gw__bs_decode_reject(m, n, &rej, NULL), GW_ERR_PROTOCOL, "status %u",
                     bad_status[i]);
    }
    for (uint32_t s = GW_ERR_INVALID_ARG; s <= GW_ERR_CONFIG; s++) {
        set_be32(m + GW_BS_HDR_LEN, s);
        cr_assert_eq(gw__bs_decode_reject(m, n, &rej, NULL), GW_OK, "status %u", s);
        cr_assert_eq((uint32_t)rej.status, s);
    }
    set_be32(m + GW_BS_HDR_LEN, GW_ERR_AUTH);
    m[GW_BS_REJECT_MIN_LEN + 1] = '\n';
    cr_assert_eq(gw__bs_decode_reject(m, n, &rej, NULL), GW_ERR_PROTOCOL);
    m[GW_BS_REJECT_MIN_LEN + 1] = 0;
    cr_assert_eq(gw__bs_decode_reject(m, n, &rej, NULL), GW_ERR_PROTOCOL);
    m[GW_BS_REJECT_MIN_LEN + 1] = 0x80;
    cr_assert_eq(gw__bs_decode_reject(m, n, &rej, NULL), GW_ERR_PROTOCOL);
}

Test(bootstrap_msg, data_prefix_rejections, .timeout = 10)
{
    uint8_t m[GW_BS_DATA_PREFIX_LEN];
    uint32_t n;
    gw__bs_encode_data_prefix(100, m);
    set_be32(m + GW_BS_HDR_LEN, 99); /* inner length disagrees with the header */
    cr_assert_eq(gw__bs_decode_data_prefix(m, sizeof(m), &n, NULL), GW_ERR_PROTOCOL);
    gw__bs_encode_data_prefix(100, m);
    cr_assert_eq(gw__bs_decode_data_prefix(m, sizeof(m) - 1, &n, NULL), GW_ERR_PROTOCOL);
    make_hdr(m, GW_BS_DATA, 4 + GW_BS_DATA_MAX + 1);
    set_be32(m + GW_BS_HDR_LEN, GW_BS_DATA_MAX + 1);
    cr_assert_eq(gw__bs_decode_data_prefix(m, sizeof(m), &n, NULL), GW_ERR_PROTOCOL);
    m[0] ^= 0xff;
    cr_assert_eq(gw__bs_decode_data_prefix(m, sizeof(m), &n, NULL), GW_ERR_PROTOCOL);
}

Test(bootstrap_msg, proofs_follow_the_definition, .timeout = 10)
{
    uint8_t cn[GW_BS_NONCE_LEN], sn[GW_BS_NONCE_LEN];
    fill(cn, sizeof(cn), 10);
    fill(sn, sizeof(sn), 20);
    const char *token = "s3cret";

    uint8_t buf[7 + 2 * GW_BS_NONCE_LEN + 4];
    uint8_t want[GW_BS_PROOF_LEN], got[GW_BS_PROOF_LEN];
    memcpy(buf, "gw-root", 7);
    memcpy(buf + 7, cn, GW_BS_NONCE_LEN);
    memcpy(buf + 7 + GW_BS_NONCE_LEN, sn, GW_BS_NONCE_LEN);
    gw__hmac_sha256(token, strlen(token), buf, 7 + 2 * GW_BS_NONCE_LEN, want);
    gw__bs_root_proof(token, strlen(token), cn, sn, got);
    cr_assert_arr_eq(got, want, sizeof(want));

    memcpy(buf, "gw-rank", 7);
    memcpy(buf + 7, sn, GW_BS_NONCE_LEN);
    memcpy(buf + 7 + GW_BS_NONCE_LEN, cn, GW_BS_NONCE_LEN);
    set_be32(buf + 7 + 2 * GW_BS_NONCE_LEN, 5);
    gw__hmac_sha256(token, strlen(token), buf, sizeof(buf), want);
    gw__bs_rank_proof(token, strlen(token), sn, cn, 5, got);
    cr_assert_arr_eq(got, want, sizeof(want));
    cr_assert_eq(be32(buf + 7 + 2 * GW_BS_NONCE_LEN), 5);

    /* Another rank, another token, or the empty token: other proofs. */
    uint8_t other[GW_BS_PROOF_LEN];
    gw__bs_rank_proof(token, strlen(token), sn, cn, 6, other);
    cr_assert(memcmp(other, got, sizeof(got)) != 0);
    gw__bs_rank_proof("s3cres", 6, sn, cn, 5, other);
    cr_assert(memcmp(other, got, sizeof(got)) != 0);
    gw__bs_rank_proof(NULL, 0, sn, cn, 5, other);
    cr_assert(memcmp(other, got, sizeof(got)) != 0);
    /* The root's proof is never a valid rank proof (distinct labels). */
    gw__bs_root_proof(token, strlen(token), sn, cn, other);
    cr_assert(memcmp(other, got, sizeof(got)) != 0);
}

/* A message without payload (len bytes in buf, just encoded) decodes as
 * its type with payload length 0. */
static void expect_header_only(const uint8_t *buf, size_t len, gw_bs_type_t type)
{
    gw_bs_hdr_t h;
    cr_assert_eq(gw__bs_decode_hdr(buf, len, &h, NULL), GW_OK, "%s", gw__bs_type_name(type));
    cr_assert_eq(h.type, type);
    cr_assert_eq(h.payload_len, 0);
}

Test(bootstrap_msg, type_names, .timeout = 10)
{
    cr_assert_str_eq(gw__bs_type_name(GW_BS_HELLO), "hello");
    cr_assert_str_eq(gw__bs_type_name(GW_BS_DATA), "data");
    cr_assert_str_eq(gw__bs_type_name(GW_BS_BYE), "bye");
    uint8_t bye[GW_BS_BYE_LEN];
    gw__bs_encode_bye(bye);
    expect_header_only(bye, sizeof(bye), GW_BS_BYE);
    cr_assert_str_eq(gw__bs_type_name(0), "unknown");
    cr_assert_str_eq(gw__bs_type_name(99), "unknown");
}

/* The watch's messages: what is encoded comes back, byte layouts as
 * documented, and what cannot be meant is refused. */
Test(bootstrap_msg, watch_messages_round_trip, .timeout = 10)
{
    gw_bs_report_t r = {.kind = GW_BS_REPORT_STALLED,
                        .status = GW_ERR_TIMEOUT,
                        .culprit = 3,
                        .origin = -1,
                        .blame = 5,
                        .waiting_on = 3,
                        .seq = 0x0102030405060708ull,
                        .stalled_ms = 2000,
                        .op_kind = 1,
                        .step = 7};
    uint8_t m[GW_BS_SMALL_MSG_MAX];
    cr_assert_eq(gw__bs_encode_report(&r, m), GW_BS_REPORT_LEN);
    static const uint8_t head[GW_BS_HDR_LEN + 16] = {'G', 'W', 'B',  'S',  0,    5,   0, 7, 0, 0, 0,
                                                     44,  0,   0,    0,    2,    0,   0, 0, 4, 0, 0,
                                                     0,   3,   0xff, 0xff, 0xff, 0xff};
    cr_assert_arr_eq(m, head, sizeof(head));
    gw_bs_report_t g;
    cr_assert_eq(gw__bs_decode_report(m, GW_BS_REPORT_LEN, &g, NULL), GW_OK);
    cr_assert(g.kind == r.kind && g.status == r.status && g.culprit == 3 && g.origin == -1 &&
              g.blame == 5 && g.waiting_on == 3 && g.seq == r.seq && g.stalled_ms == 2000);
    /* Where the rank is (version 5): the kind and step, last. */
    cr_assert(g.op_kind == 1 && g.step == 7);
    static const uint8_t tail[8] = {0, 0, 0, 1, 0, 0, 0, 7};
    cr_assert_arr_eq(m + GW_BS_REPORT_LEN - 8, tail, sizeof(tail));
    m[GW_BS_REPORT_LEN - 6] = 1; /* a kind of 256 and more is no kind */
    cr_assert_eq(gw__bs_decode_report(m, GW_BS_REPORT_LEN, &g, NULL), GW_ERR_PROTOCOL);
    m[GW_BS_REPORT_LEN - 6] = 0;

    gw_bs_inquire_t q = {.reporter = 2, .seq = 9}, gq;
    cr_assert_eq(gw__bs_encode_inquire(&q, m), GW_BS_INQUIRE_LEN);
    cr_assert_eq(gw__bs_decode_inquire(m, GW_BS_INQUIRE_LEN, &gq, NULL), GW_OK);
    cr_assert(gq.reporter == 2 && gq.seq == 9);

    gw_bs_verdict_t v = {.status = GW_ERR_REMOTE, .culprit = 1, .origin = 0, .seq = 4}, gv;
    snprintf(v.reason, sizeof(v.reason), "rank 1 is gone\n(died)");
    size_t n = gw__bs_encode_verdict(&v, m);
    cr_assert_eq(n, GW_BS_VERDICT_MIN_LEN + strlen(v.reason));
    cr_assert_eq(gw__bs_decode_verdict(m, n, &gv, NULL), GW_OK);
    cr_assert(gv.status == GW_ERR_REMOTE && gv.culprit == 1 && gv.origin == 0 && gv.seq == 4);
    cr_assert_str_eq(gv.reason, "rank 1 is gone?(died)", "control bytes are not sent as they are");
    cr_assert_eq(gw__bs_decode_verdict(m, n - 1, &gv, NULL), GW_ERR_PROTOCOL, "truncated");
    cr_assert_eq(gw__bs_decode_report(m, n, &g, NULL), GW_ERR_PROTOCOL, "a verdict as a report");
}

Test(bootstrap_msg, watch_messages_refused, .timeout = 10)
{
    gw_bs_report_t r = {.kind = GW_BS_REPORT_FAILED,
                        .status = GW_ERR_REMOTE,
                        .culprit = 1,
                        .origin = 0,
                        .blame = 3,
                        .waiting_on = -1};
    uint8_t good[GW_BS_REPORT_LEN], m[GW_BS_REPORT_LEN];
    gw_bs_report_t g;
    const char *why = NULL;
    gw__bs_encode_report(&r, good);
    struct {
        size_t at;
        uint32_t value;
        const char *what;
    } bad[] = {
        {GW_BS_HDR_LEN + 0, 0, "kind 0"},
        {GW_BS_HDR_LEN + 0, 4, "kind 4"},
        {GW_BS_HDR_LEN + 4, 0, "a failure with GW_OK"},
        {GW_BS_HDR_LEN + 4, 99, "an unknown status"},
        {GW_BS_HDR_LEN + 8, 0xfffffffe, "culprit -2"},
        {GW_BS_HDR_LEN + 12, 0x80000000u, "origin INT32_MIN"},
        {GW_BS_HDR_LEN + 16, 6, "blame kind 6"},
        {GW_BS_HDR_LEN + 20, 0xfffffff0u, "waiting for rank -16"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memcpy(m, good, sizeof(m));
        set_be32(m + bad[i].at, bad[i].value);
        why = NULL;
        cr_assert_eq(gw__bs_decode_report(m, sizeof(m), &g, &why), GW_ERR_PROTOCOL, "%s accepted",
                     bad[i].what);
        cr_assert_not_null(why, "%s: no explanation", bad[i].what);
    }
    /* A STATE carries GW_OK and nothing else. */
    r.kind = GW_BS_REPORT_STATE;
    r.status = GW_OK;
    gw__bs_encode_report(&r, m);
    cr_assert_eq(gw__bs_decode_report(m, sizeof(m), &g, NULL), GW_OK);
    set_be32(m + GW_BS_HDR_LEN + 4, GW_ERR_TIMEOUT);
    cr_assert_eq(gw__bs_decode_report(m, sizeof(m), &g, NULL), GW_ERR_PROTOCOL);

    gw_bs_verdict_t v = {.status = GW_ERR_TIMEOUT, .culprit = 2, .origin = 0}, gv;
    uint8_t vm[GW_BS_VERDICT_MAX_LEN];
    size_t n = gw__bs_encode_verdict(&v, vm);
    set_be32(vm + GW_BS_HDR_LEN, GW_OK);
    cr_assert_eq(gw__bs_decode_verdict(vm, n, &gv, NULL), GW_ERR_PROTOCOL, "a verdict of GW_OK");
}

/* GATHER_START: rank 0's remaining wait, big-endian after the header. */
Test(bootstrap_msg, gather_start_round_trip_and_refusals, .timeout = 10)
{
    uint8_t m[GW_BS_GATHER_START_LEN];
    gw__bs_encode_gather_start(4321, m);
    cr_assert_eq(m[7], GW_BS_GATHER_START);
    cr_assert_eq(m[12], 0);
    cr_assert_eq(m[14], 0x10);
    cr_assert_eq(m[15], 0xe1);
    uint32_t ms = 0;
    const char *why = NULL;
    cr_assert_eq(gw__bs_decode_gather_start(m, sizeof(m), &ms, &why), GW_OK, "%s", why);
    cr_assert_eq(ms, 4321);
    cr_assert_str_eq(gw__bs_type_name(GW_BS_GATHER_START), "gather start");
    /* Truncated, trailing bytes, another type, a wait beyond an int. */
    cr_assert_eq(gw__bs_decode_gather_start(m, sizeof(m) - 1, &ms, &why), GW_ERR_PROTOCOL);
    uint8_t longer[GW_BS_GATHER_START_LEN + 1];
    memcpy(longer, m, sizeof(m));
    longer[sizeof(m)] = 0;
    cr_assert_eq(gw__bs_decode_gather_start(longer, sizeof(longer), &ms, &why), GW_ERR_PROTOCOL);
    uint8_t data[GW_BS_DATA_PREFIX_LEN];
    gw__bs_encode_data_prefix(0, data);
    cr_assert_eq(gw__bs_decode_gather_start(data, sizeof(data), &ms, &why), GW_ERR_PROTOCOL);
    m[12] = 0x80;
    cr_assert_eq(gw__bs_decode_gather_start(m, sizeof(m), &ms, &why), GW_ERR_PROTOCOL);
    cr_assert(why && strstr(why, "out of range"), "%s", why ? why : "(none)");
}

Test(bootstrap_msg, shrink_and_members_round_trip_and_refusals, .timeout = 10)
{
    const char *why = NULL;
    uint8_t m[GW_BS_SHRINK_LEN];
    gw_bs_shrink_req_t req = {.port = 40123, .window_ms = 2000}, got;
    gw__bs_encode_shrink(&req, m);
    cr_assert_eq(gw__bs_decode_shrink(m, sizeof(m), &got, &why), GW_OK, "%s", why);
    cr_assert(got.port == 40123 && got.window_ms == 2000);
    cr_assert_eq(gw__bs_decode_shrink(m, sizeof(m) - 1, &got, &why), GW_ERR_PROTOCOL);
    m[GW_BS_HDR_LEN + 1] = 0x01; /* port 0x0001xxxx: beyond 65535 */
    cr_assert_eq(gw__bs_decode_shrink(m, sizeof(m), &got, &why), GW_ERR_PROTOCOL);

    uint8_t b[GW_BS_MEMBERS_LEN];
    gw_bs_members_t mem = {.status = GW_OK, .new_rank = 2, .new_size = 3, .port = 40123}, out;
    gw__bs_encode_members(&mem, b);
    cr_assert_eq(gw__bs_decode_members(b, sizeof(b), &out, &why), GW_OK, "%s", why);
    cr_assert(out.status == GW_OK && out.new_rank == 2 && out.new_size == 3 && out.port == 40123);
    /* A member's rank must be below the size; a left-out rank has none. */
    mem.new_rank = 3;
    gw__bs_encode_members(&mem, b);
    cr_assert_eq(gw__bs_decode_members(b, sizeof(b), &out, &why), GW_ERR_PROTOCOL);
    mem = (gw_bs_members_t){.status = GW_ERR_ABORTED, .new_rank = -1};
    gw__bs_encode_members(&mem, b);
    cr_assert_eq(gw__bs_decode_members(b, sizeof(b), &out, &why), GW_OK, "%s", why);
    cr_assert(out.status == GW_ERR_ABORTED && out.new_rank == -1);
    mem.new_rank = 0;
    gw__bs_encode_members(&mem, b);
    cr_assert_eq(gw__bs_decode_members(b, sizeof(b), &out, &why), GW_ERR_PROTOCOL);
    mem = (gw_bs_members_t){.status = (gw_status_t)999, .new_rank = -1};
    gw__bs_encode_members(&mem, b);
    cr_assert_eq(gw__bs_decode_members(b, sizeof(b), &out, &why), GW_ERR_PROTOCOL);
}

Test(bootstrap_msg, join_grow_and_grown_round_trip_and_refusals, .timeout = 10)
{
    const char *why = NULL;
    uint8_t j[GW_BS_JOIN_LEN], nonce[GW_BS_NONCE_LEN], back[GW_BS_NONCE_LEN];
    fill(nonce, sizeof(nonce), 4);
    gw__bs_encode_join(nonce, j);
    cr_assert_eq(gw__bs_decode_join(j, sizeof(j), back, &why), GW_OK, "%s", why);
    cr_assert_arr_eq(back, nonce, sizeof(nonce));
    cr_assert_eq(gw__bs_decode_join(j, sizeof(j) - 1, back, &why), GW_ERR_PROTOCOL);
    /* A HELLO is not a JOIN, nor is a JOIN of another length. */
    gw_bs_hello_t hello = {.rank = 0, .size = 2};
    uint8_t h[GW_BS_HELLO_LEN];
    gw__bs_encode_hello(&hello, h);
    cr_assert_eq(gw__bs_decode_join(h, GW_BS_JOIN_LEN, back, &why), GW_ERR_PROTOCOL);
    j[GW_BS_HDR_LEN - 1] = GW_BS_NONCE_LEN + 1;
    gw_bs_hdr_t hdr;
    cr_assert_eq(gw__bs_decode_hdr(j, GW_BS_HDR_LEN, &hdr, &why), GW_ERR_PROTOCOL);
    cr_assert_str_eq(gw__bs_type_name(GW_BS_JOIN), "join");

    uint8_t g[GW_BS_GROW_LEN];
    gw_bs_shrink_req_t req = {.port = 40999, .window_ms = 30000}, got;
    gw__bs_encode_grow(&req, g);
    cr_assert_eq(gw__bs_decode_grow(g, sizeof(g), &got, &why), GW_OK, "%s", why);
    cr_assert(got.port == 40999 && got.window_ms == 30000);
    /* A GROW is not a SHRINK: the referee must never take one for the other. */
    cr_assert_eq(gw__bs_decode_shrink(g, sizeof(g), &got, &why), GW_ERR_PROTOCOL);
    g[GW_BS_HDR_LEN + 1] = 0x01; /* port beyond 65535 */
    cr_assert_eq(gw__bs_decode_grow(g, sizeof(g), &got, &why), GW_ERR_PROTOCOL);
    req = (gw_bs_shrink_req_t){.port = 0, .window_ms = 0x80000000u}; /* window beyond INT32_MAX */
    gw__bs_encode_grow(&req, g);
    cr_assert_eq(gw__bs_decode_grow(g, sizeof(g), &got, &why), GW_ERR_PROTOCOL);

    uint8_t b[GW_BS_GROWN_LEN];
    gw_bs_members_t m = {.status = GW_OK, .new_rank = 3, .new_size = 4, .port = 40999}, out;
    gw__bs_encode_grown(&m, b);
    cr_assert_eq(gw__bs_decode_grown(b, sizeof(b), &out, &why), GW_OK, "%s", why);
    cr_assert(out.status == GW_OK && out.new_rank == 3 && out.new_size == 4 && out.port == 40999);
    cr_assert_eq(gw__bs_decode_members(b, sizeof(b), &out, &why), GW_ERR_PROTOCOL);
    /* Nobody joined: a member's port 0 is a GROWN's, never a MEMBERS'. */
    m = (gw_bs_members_t){.status = GW_OK, .new_rank = 1, .new_size = 3, .port = 0};
    gw__bs_encode_grown(&m, b);
    cr_assert_eq(gw__bs_decode_grown(b, sizeof(b), &out, &why), GW_OK, "%s", why);
    cr_assert(out.port == 0 && out.new_rank == 1 && out.new_size == 3);
    uint8_t mb[GW_BS_MEMBERS_LEN];
    gw__bs_encode_members(&m, mb);
    cr_assert_eq(gw__bs_decode_members(mb, sizeof(mb), &out, &why), GW_ERR_PROTOCOL);
    /* A rank not below the size; a failed grow with a rank; an unknown status. */
    m = (gw_bs_members_t){.status = GW_OK, .new_rank = 4, .new_size = 4, .port = 1};
    gw__bs_encode_grown(&m, b);
    cr_assert_eq(gw__bs_decode_grown(b, sizeof(b), &out, &why), GW_ERR_PROTOCOL);
    m = (gw_bs_members_t){.status = GW_ERR_TIMEOUT, .new_rank = 0};
    gw__bs_encode_grown(&m, b);
    cr_assert_eq(gw__bs_decode_grown(b, sizeof(b), &out, &why), GW_ERR_PROTOCOL);
    m.new_rank = -1;
    gw__bs_encode_grown(&m, b);
    cr_assert_eq(gw__bs_decode_grown(b, sizeof(b), &out, &why), GW_OK, "%s", why);
    cr_assert(out.status == GW_ERR_TIMEOUT && out.new_rank == -1);
    m.status = (gw_status_t)999;
    gw__bs_encode_grown(&m, b);
    cr_assert_eq(gw__bs_decode_grown(b, sizeof(b), &out, &why), GW_ERR_PROTOCOL);
    m = (gw_bs_members_t){.status = GW_OK, .new_rank = 0, .new_size = 2, .port = 70000};
    gw__bs_encode_grown(&m, b);
    cr_assert_eq(gw__bs_decode_grown(b, sizeof(b), &out, &why), GW_ERR_PROTOCOL);
}

Test(bootstrap_msg, ring_messages_round_trip, .timeout = 10)
{
    uint8_t open[GW_BS_RING_OPEN_LEN];
    gw__bs_encode_ring_open(open);
    expect_header_only(open, sizeof(open), GW_BS_RING_OPEN);

    uint8_t addr[GW_BS_RING_ADDR_LEN], back[GW_BS_RING_ADDR_LEN];
    fill(addr, sizeof(addr), 5);
    uint8_t m[GW_BS_RING_PEER_LEN + 1];
    gw__bs_encode_ring_peer(addr, m);
    cr_assert_eq(gw__bs_decode_ring_peer(m, GW_BS_RING_PEER_LEN, back, NULL), GW_OK);
    cr_assert_arr_eq(back, addr, sizeof(addr));
    cr_assert_eq(gw__bs_decode_ring_peer(m, GW_BS_RING_PEER_LEN - 1, back, NULL), GW_ERR_PROTOCOL,
                 "truncated");
    cr_assert_eq(gw__bs_decode_ring_peer(m, GW_BS_RING_PEER_LEN + 1, back, NULL), GW_ERR_PROTOCOL,
                 "trailing byte");
    cr_assert_eq(gw__bs_decode_ring_peer(open, sizeof(open), back, NULL), GW_ERR_PROTOCOL,
                 "another type");
}
