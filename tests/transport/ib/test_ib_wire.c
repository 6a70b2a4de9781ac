/*
 * test_ib_wire.c - byte layouts of the IB transport: address blobs, CTS
 * entries, immediates, out-of-band hellos, rdmacm private data and the
 * proofs of the key in it, message striping, and how failed work
 * completions are classified. No RDMA needed.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <string.h>

#include "transport/ib/ib_internal.h"
#include "transport/sock.h"

static gw_ib_addr_t sample_addr(void)
{
    gw_ib_addr_t a;
    memset(&a, 0, sizeof(a));
    a.cm_mode = GW_IB_CM_RDMACM;
    a.link_layer = IBV_LINK_LAYER_ETHERNET;
    a.port_num = 1;
    a.mtu = IBV_MTU_1024;
    a.lid = 0x1234;
    a.nqps = 4;
    a.gid_index = 3;
    for (int i = 0; i < 16; i++)
        a.gid[i] = (uint8_t)(0xa0 + i);
    struct sockaddr_in *in = (struct sockaddr_in *)&a.sa;
    in->sin_family = AF_INET;
    in->sin_port = htons(4791);
    inet_pton(AF_INET, "198.18.0.1", &in->sin_addr);
    strcpy(a.device, "rxe0");
    a.eager_max = 4000;
    a.lazy = 1;
    return a;
}

Test(ib_wire, addr_round_trip)
{
    gw_ib_addr_t a = sample_addr(), b;
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    gw__ib_addr_encode(&a, blob);
    for (int i = GW_IB_ADDR_SIZE; i < GW_TRANSPORT_ADDR_MAX; i++)
        cr_assert_eq(blob[i], 0, "byte %d beyond the blob's %d bytes is not zero", i,
                     GW_IB_ADDR_SIZE);
    cr_assert_eq(gw__ib_addr_decode(blob, &b), GW_OK);
    cr_assert_eq(b.cm_mode, a.cm_mode);
    cr_assert_eq(b.link_layer, a.link_layer);
    cr_assert_eq(b.port_num, 1);
    cr_assert_eq(b.mtu, IBV_MTU_1024);
    cr_assert_eq(b.lid, 0x1234);
    cr_assert_eq(b.nqps, 4);
    cr_assert_eq(b.gid_index, 3);
    cr_assert_arr_eq(b.gid, a.gid, 16);
    cr_assert_eq(b.lazy, 1);
    char s[64];
    gw__sock_addr_str((struct sockaddr *)&b.sa, s, sizeof(s));
    cr_assert_str_eq(s, "198.18.0.1:4791");
    cr_assert_str_eq(b.device, "rxe0");
    cr_assert_eq(b.eager_max, 4000);
    /* Big-endian on the wire. */
    cr_assert_eq(blob[0], 'G');
    cr_assert_eq(blob[8], 0x12);
    for (int i = 12; i < 24; i++) /* where the FIFO's address was before version 7 */
        cr_assert_eq(blob[i], 0, "byte %d is not zero", i);
}

Test(ib_wire, addr_ipv6)
{
    gw_ib_addr_t a = sample_addr(), b;
    memset(&a.sa, 0, sizeof(a.sa));
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a.sa;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(9);
    in6->sin6_scope_id = 7;
    inet_pton(AF_INET6, "2001:db8::1", &in6->sin6_addr);
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    gw__ib_addr_encode(&a, blob);
    cr_assert_eq(gw__ib_addr_decode(blob, &b), GW_OK);
    char s[64];
    gw__sock_addr_str((struct sockaddr *)&b.sa, s, sizeof(s));
    cr_assert_str_eq(s, "[2001:db8::1]:9");
    cr_assert_eq(((struct sockaddr_in6 *)&b.sa)->sin6_scope_id, 7u);
}

Test(ib_wire, addr_rejects_foreign_blobs)
{
    gw_ib_addr_t a = sample_addr(), b;
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    memset(blob, 0, sizeof(blob));
    cr_assert_eq(gw__ib_addr_decode(blob, &b), GW_ERR_PROTOCOL, "all zero");
    gw__ib_addr_encode(&a, blob);
    blob[4] = 99;
    cr_assert_eq(gw__ib_addr_decode(blob, &b), GW_ERR_PROTOCOL, "version");
    gw__ib_addr_encode(&a, blob);
    blob[11] = GW_IB_MAX_QPS + 1;
    cr_assert_eq(gw__ib_addr_decode(blob, &b), GW_ERR_PROTOCOL, "QPs per peer");
    gw__ib_addr_encode(&a, blob);
    blob[5] = 7;
    cr_assert_eq(gw__ib_addr_decode(blob, &b), GW_ERR_PROTOCOL, "connection mode");
    gw__ib_addr_encode(&a, blob);
    blob[10] = 9;
    cr_assert_eq(gw__ib_addr_decode(blob, &b), GW_ERR_PROTOCOL, "MTU");
    gw__ib_addr_encode(&a, blob);
    blob[41] = 5;
    cr_assert_eq(gw__ib_addr_decode(blob, &b), GW_ERR_PROTOCOL, "address family");
    gw__ib_addr_encode(&a, blob);
    blob[98] = 2;
    cr_assert_eq(gw__ib_addr_decode(blob, &b), GW_ERR_PROTOCOL, "lazy flag");
}

Test(ib_wire, cts_round_trip_and_torn_slots)
{
    gw_ib_cts_t c = {.addr = 0x7fff00001000ULL,
                     .len = 123456789,
                     .seq = 42,
                     .idx = 0x100000001ULL,
                     .rkey = 0x1234abcd,
                     .sig = 0xfeedface,
                     .eager_freed = 77},
                d;
    uint8_t slot[GW_IB_CTS_SIZE];
    gw__ib_cts_encode(&c, slot);
    cr_assert_eq(gw__ib_cts_decode(slot, &d), 0);
    cr_assert_eq(d.addr, c.addr);
    cr_assert_eq(d.len, c.len);
    cr_assert_eq(d.seq, c.seq);
    cr_assert_eq(d.idx, c.idx);
    cr_assert_eq(d.rkey, c.rkey);
    cr_assert_eq(d.sig, c.sig);
    cr_assert_eq(d.eager_freed, 77u);
    /* A slot half overwritten by the next entry: the two indexes differ. */
    gw_ib_cts_t next = c;
    next.idx += GW_IB_FIFO_DEPTH;
    uint8_t slot2[GW_IB_CTS_SIZE];
    gw__ib_cts_encode(&next, slot2);
    memcpy(slot, slot2, 16);
    cr_assert_neq(gw__ib_cts_decode(slot, &d), 0);
    memset(slot, 0, sizeof(slot));
    cr_assert_neq(gw__ib_cts_decode(slot, &d), 0, "an empty slot is not an entry");
}

Test(ib_wire, eager_header)
{
    gw_ib_eager_hdr_t h = {.idx = 0x123456789ULL,
                           .seq = 99,
                           .sig = 0xabcdef01,
                           .len = 4096,
                           .cts_seen = 0x1122334455ULL,
                           .eager_freed = 0x66778899aaULL},
                      g;
    uint8_t buf[GW_IB_EAGER_HDR];
    gw__ib_eager_hdr_encode(&h, buf);
    gw__ib_eager_hdr_decode(buf, &g);
    cr_assert_eq(g.idx, h.idx);
    cr_assert_eq(g.seq, h.seq);
    cr_assert_eq(g.sig, h.sig);
    cr_assert_eq(g.len, h.len);
    cr_assert_eq(g.cts_seen, h.cts_seen);
    cr_assert_eq(g.eager_freed, h.eager_freed);
    cr_assert_eq(buf[0], 0x00);
    cr_assert_eq(buf[3], 0x01, "big-endian");
}

Test(ib_wire, immediates)
{
    gw_ib_imm_kind_t k;
    uint32_t v;
    uint32_t imm = gw__ib_imm_encode(GW_IB_IMM_DATA, 5);
    gw__ib_imm_decode(imm, &k, &v);
    cr_assert_eq(k, GW_IB_IMM_DATA);
    cr_assert_eq(v, 5u);
    /* Indexes wrap at 2^28; a window of 32 messages never spans that. */
    uint64_t big = ((uint64_t)3 << 28) + 77;
    imm = gw__ib_imm_encode(GW_IB_IMM_CTS, big);
    gw__ib_imm_decode(imm, &k, &v);
    cr_assert_eq(k, GW_IB_IMM_CTS);
    cr_assert_eq(v, 77u);
    cr_assert(gw__ib_imm_names(v, big));
    cr_assert_not(gw__ib_imm_names(v, big + 1));
    /* Widened back: the latest count with those bits, up to what was sent
     * (receipts, FREED); one that names none comes back above it. */
    cr_assert_eq(gw__ib_imm_widen(v, big), big);
    cr_assert_eq(gw__ib_imm_widen(v, big + 5), big);
    cr_assert_eq(gw__ib_imm_widen(v, big - 1), big - ((uint64_t)1 << 28));
    cr_assert_gt(gw__ib_imm_widen(5, 3), 3, "a count above what was sent is not taken");
    imm = gw__ib_imm_encode(GW_IB_IMM_ABORT, GW_ERR_MISMATCH);
    gw__ib_imm_decode(imm, &k, &v);
    cr_assert_eq(k, GW_IB_IMM_ABORT);
    cr_assert_eq(gw__ib_abort_status(v), GW_ERR_MISMATCH);
    cr_assert_eq(gw__ib_abort_status(0), GW_ERR_ABORTED);
    cr_assert_eq(gw__ib_abort_status(9999), GW_ERR_ABORTED);
    for (int kind = GW_IB_IMM_DATA; kind <= GW_IB_IMM_EAGER; kind++) {
        gw__ib_imm_decode(gw__ib_imm_encode((gw_ib_imm_kind_t)kind, GW_IB_IMM_VALUE_MASK), &k, &v);
        cr_assert_eq((int)k, kind);
        cr_assert_eq(v, GW_IB_IMM_VALUE_MASK);
    }
}

Test(ib_wire, hello)
{
    gw_ib_hello_t h, g;
    memset(&h, 0, sizeof(h));
    h.id.magic = GW_IB_HELLO_MAGIC;
    h.version = GW_IB_PROTOCOL_VERSION;
    for (int i = 0; i < 16; i++)
        h.id.job_id[i] = (uint8_t)i;
    h.id.from = 3;
    h.id.to = 1;
    h.nqps = GW_IB_MAX_QPS;
    h.psn = 0xabcdef;
    for (int k = 0; k < GW_IB_MAX_QPS; k++)
        h.qpn[k] = 0x100 + (uint32_t)k;
    h.blk = 0x7f0012345000ULL;
    h.blk_rkey = 0xdeadbeef;
    uint8_t buf[GW_IB_HELLO_SIZE];
    gw__ib_hello_encode(&h, buf);
    memset(&g, 0, sizeof(g)); /* the struct's padding: the decoder writes fields only */
    gw__ib_hello_decode(buf, &g);
    cr_assert_eq(memcmp(&h, &g, sizeof(h)), 0);
}

static gw_ib_cm_pdata_t sample_pdata(void)
{
    gw_ib_cm_pdata_t p;
    memset(&p, 0, sizeof(p));
    p.from = 0x01020304;
    p.to = 0x05060708;
    p.qp_idx = 0x090a;
    p.nqps = 0x0b0c;
    for (int i = 0; i < 16; i++) {
        p.job_id[i] = (uint8_t)(0x10 + i);
        p.nonce[i] = (uint8_t)(0x20 + i);
    }
    for (int i = 0; i < GW_IB_CM_MAC_LEN; i++)
        p.mac[i] = (uint8_t)(0x40 + i);
    p.blk = 0x7f0012345000ULL;
    p.blk_rkey = 0xdeadbeef;
    return p;
}

/* The connect request and the accept: every field where the layout in
 * ib_wire.c puts it, room left in what RoCE carries, and the decoders
 * refusing short data, a wrong magic or another version (and each other's
 * messages). */
Test(ib_wire, cm_private_data)
{
    cr_assert_leq(GW_IB_CM_REQ_SIZE, 56, "must fit a connect request's private data over RoCE");
    cr_assert_leq(GW_IB_CM_REP_SIZE, 196, "must fit an accept's private data");
    gw_ib_cm_pdata_t p = sample_pdata(), q;
    uint8_t req[GW_IB_CM_REQ_SIZE];
    gw__ib_cm_req_encode(&p, req);
    static const uint8_t want_req[GW_IB_CM_REQ_SIZE] = {
        0x47, 0x57, 0x49, 0x43, GW_IB_PROTOCOL_VERSION,
        0,    0x09, 0x0a, 1,    2,
        3,    4,    5,    6,    7,
        8,    0x0b, 0x0c, 0,    0,
        0x10, 0x11, 0x12, 0x13, 0x14,
        0x15, 0x16, 0x17, 0x18, 0x19,
        0x1a, 0x1b, 0x1c, 0x1d, 0x1e,
        0x1f, 0x20, 0x21, 0x22, 0x23,
        0x24, 0x25, 0x26, 0x27, 0x28,
        0x29, 0x2a, 0x2b, 0x2c, 0x2d,
        0x2e, 0x2f};
    cr_assert_arr_eq(req, want_req, sizeof(req), "the connect request's layout changed");
    memset(&q, 0xee, sizeof(q));
    cr_assert_eq(gw__ib_cm_req_decode(req, sizeof(req), &q), GW_OK);
    cr_expect_eq(q.from, p.from);
    cr_expect_eq(q.to, p.to);
    cr_expect_eq(q.qp_idx, p.qp_idx);
    cr_expect_eq(q.nqps, p.nqps);
    cr_expect_arr_eq(q.job_id, p.job_id, 16);
    cr_expect_arr_eq(q.nonce, p.nonce, 16);

    uint8_t rep[GW_IB_CM_REP_SIZE];
    gw__ib_cm_rep_encode(&p, rep);
    cr_expect_eq(rep[0], 0x47);
    cr_expect_eq(rep[3], 0x41, "the accept has a magic of its own");
    cr_expect_eq(rep[4], GW_IB_PROTOCOL_VERSION);
    cr_expect_arr_eq(rep + 16, p.nonce, 16);
    cr_expect_arr_eq(rep + 32, p.mac, GW_IB_CM_MAC_LEN);
    memset(&q, 0xee, sizeof(q));
    cr_assert_eq(gw__ib_cm_rep_decode(rep, sizeof(rep), &q), GW_OK);
    cr_expect_eq(q.from, p.from);
    cr_expect_eq(q.to, p.to);
    cr_expect_eq(q.qp_idx, p.qp_idx);
    cr_expect_arr_eq(q.nonce, p.nonce, 16);
    cr_expect_arr_eq(q.mac, p.mac, GW_IB_CM_MAC_LEN);
    cr_expect_eq(q.blk, p.blk);
    cr_expect_eq(q.blk_rkey, p.blk_rkey);
    cr_expect_leq(sizeof(rep), 196, "an accept carries at most 196 bytes");
    /* The dialler's proof message: its MAC first, then its block. */
    uint8_t msg[GW_IB_CM_PROOF_SIZE];
    gw__ib_cm_proof_msg_encode(p.mac, p.blk, p.blk_rkey, msg);
    cr_expect_arr_eq(msg, p.mac, GW_IB_CM_MAC_LEN);
    uint64_t blk = 0;
    uint32_t rkey = 0;
    gw__ib_cm_proof_msg_decode(msg, &blk, &rkey);
    cr_expect_eq(blk, p.blk);
    cr_expect_eq(rkey, p.blk_rkey);
    /* The IB CM hands over the accept's private data padded to 196 bytes. */
    uint8_t padded[196];
    memset(padded, 0, sizeof(padded));
    memcpy(padded, rep, sizeof(rep));
    cr_expect_eq(gw__ib_cm_rep_decode(padded, sizeof(padded), &q), GW_OK);

    cr_expect_eq(gw__ib_cm_req_decode(req, sizeof(req) - 1, &q), GW_ERR_PROTOCOL, "short");
    cr_expect_eq(gw__ib_cm_req_decode(NULL, 0, &q), GW_ERR_PROTOCOL, "none");
    cr_expect_eq(gw__ib_cm_rep_decode(rep, sizeof(rep) - 1, &q), GW_ERR_PROTOCOL, "short");
    cr_expect_eq(gw__ib_cm_req_decode(rep, sizeof(rep), &q), GW_ERR_PROTOCOL,
                 "an accept is not a request");
    cr_expect_eq(gw__ib_cm_rep_decode(req, sizeof(req), &q), GW_ERR_PROTOCOL,
                 "a request is not an accept");
    uint8_t bad[GW_IB_CM_REQ_SIZE];
    memcpy(bad, req, sizeof(bad));
    bad[4] = GW_IB_PROTOCOL_VERSION - 1; /* version 2 had no nonce */
    cr_expect_eq(gw__ib_cm_req_decode(bad, sizeof(bad), &q), GW_ERR_PROTOCOL, "old version");
    memcpy(bad, req, sizeof(bad));
    bad[1] ^= 1;
    cr_expect_eq(gw__ib_cm_req_decode(bad, sizeof(bad), &q), GW_ERR_PROTOCOL, "magic");
    /* The 32-byte layout of version 2 (magic, then the job id). */
    uint8_t v2[32];
    memset(v2, 0, sizeof(v2));
    memcpy(v2, req, 4);
    memcpy(v2 + 4, p.job_id, 16);
    cr_expect_eq(gw__ib_cm_req_decode(v2, sizeof(v2), &q), GW_ERR_PROTOCOL, "version 2");
}

static gw_ib_cm_shake_t sample_shake(void)
{
    gw_ib_cm_shake_t s = {.dialler = 3,
                          .acceptor = 1,
                          .qp_idx = 2,
                          .blk_d = 0x7f0000001000ULL,
                          .blk_a = 0x7f0000042000ULL,
                          .rkey_d = 0x1234,
                          .rkey_a = 0x5678};
    for (int i = 0; i < GW_IB_CM_NONCE_LEN; i++) {
        s.nonce_d[i] = (uint8_t)(0x90 + i);
        s.nonce_a[i] = (uint8_t)(0xb0 + i);
    }
    return s;
}

/* Each side's proof checks out under the key, and nothing else does: not
 * under another key, not over any other nonce of either side (a proof
 * recorded on one attempt is worthless on the next), not for other ranks,
 * another QP or another block of the side's, and not as the other side's
 * (a reflected proof). */
Test(ib_wire, cm_proofs)
{
    uint8_t key[32], other[32], mac[GW_IB_CM_MAC_LEN], mac2[GW_IB_CM_MAC_LEN];
    for (int i = 0; i < 32; i++) {
        key[i] = (uint8_t)(0x5c ^ i);
        other[i] = key[i];
    }
    other[31] ^= 0x80;
    for (int side = 0; side < 2; side++) {
        gw_ib_cm_shake_t s = sample_shake();
        gw__ib_cm_proof(key, &s, side, mac);
        cr_assert(gw__ib_cm_proof_ok(key, &s, side, mac), "side %d: its own proof fails", side);
        cr_expect(!gw__ib_cm_proof_ok(other, &s, side, mac), "side %d: another key", side);
        cr_expect(!gw__ib_cm_proof_ok(key, &s, !side, mac), "side %d: reflected", side);
        gw__ib_cm_proof(key, &s, !side, mac2);
        cr_expect(memcmp(mac, mac2, sizeof(mac)) != 0, "both sides' proofs are the same");
        for (int i = 0; i < GW_IB_CM_NONCE_LEN; i++) {
            gw_ib_cm_shake_t b = sample_shake();
            b.nonce_d[i] ^= 1;
            cr_expect(!gw__ib_cm_proof_ok(key, &b, side, mac), "side %d: dialler nonce byte %d",
                      side, i);
            b = sample_shake();
            b.nonce_a[i] ^= 1;
            cr_expect(!gw__ib_cm_proof_ok(key, &b, side, mac), "side %d: acceptor nonce byte %d",
                      side, i);
        }
        gw_ib_cm_shake_t b = sample_shake();
        b.dialler ^= 1u << 24;
        cr_expect(!gw__ib_cm_proof_ok(key, &b, side, mac), "side %d: dialler rank", side);
        b = sample_shake();
        b.acceptor ^= 1;
        cr_expect(!gw__ib_cm_proof_ok(key, &b, side, mac), "side %d: acceptor rank", side);
        b = sample_shake();
        b.dialler = s.acceptor; /* the ranks swapped */
        b.acceptor = s.dialler;
        cr_expect(!gw__ib_cm_proof_ok(key, &b, side, mac), "side %d: ranks swapped", side);
        b = sample_shake();
        b.qp_idx ^= 0x100;
        cr_expect(!gw__ib_cm_proof_ok(key, &b, side, mac), "side %d: QP index", side);
        /* The block a side names for the pair is its proof's: another one,
         * or another key for it, fails; the other side's does not count. */
        b = sample_shake();
        *(side ? &b.blk_a : &b.blk_d) ^= 0x1000;
        cr_expect(!gw__ib_cm_proof_ok(key, &b, side, mac), "side %d: its block", side);
        b = sample_shake();
        *(side ? &b.rkey_a : &b.rkey_d) ^= 1;
        cr_expect(!gw__ib_cm_proof_ok(key, &b, side, mac), "side %d: its block's key", side);
        b = sample_shake();
        *(side ? &b.blk_d : &b.blk_a) ^= 0x1000;
        cr_expect(gw__ib_cm_proof_ok(key, &b, side, mac), "side %d: the other side's block", side);
        for (int i = 0; i < GW_IB_CM_MAC_LEN; i++) {
            memcpy(mac2, mac, sizeof(mac));
            mac2[i] ^= 0x40;
            cr_expect(!gw__ib_cm_proof_ok(key, &s, side, mac2), "side %d: MAC byte %d", side, i);
        }
    }
}

Test(ib_wire, striping)
{
    cr_assert_eq(gw__ib_nparts(0, 4), 1u);
    cr_assert_eq(gw__ib_nparts(1000, 4), 1u);
    cr_assert_eq(gw__ib_nparts(2 * GW_IB_MIN_PART - 1, 4), 1u);
    cr_assert_eq(gw__ib_nparts(2 * GW_IB_MIN_PART, 4), 2u);
    cr_assert_eq(gw__ib_nparts(100 * GW_IB_MIN_PART, 4), 4u);
    cr_assert_eq(gw__ib_nparts(100 * GW_IB_MIN_PART, 1), 1u);
    /* No part larger than the largest write we post. */
    size_t huge = 5 * GW_IB_MAX_WR_BYTES + 1;
    size_t n = gw__ib_nparts(huge, 2);
    cr_assert_eq(n, 6u);
    size_t sum = 0, off, plen, prev_end = 0;
    for (size_t k = 0; k < n; k++) {
        gw__ib_part_range(huge, n, k, &off, &plen);
        cr_assert_eq(off, prev_end, "parts are contiguous");
        cr_assert_leq(plen, GW_IB_MAX_WR_BYTES);
        prev_end = off + plen;
        sum += plen;
    }
    cr_assert_eq(sum, huge);
    gw__ib_part_range(10, 3, 0, &off, &plen);
    cr_assert_eq(plen, 4u);
    gw__ib_part_range(10, 3, 2, &off, &plen);
    cr_assert_eq(off, 7u);
    cr_assert_eq(plen, 3u);
}

Test(ib_wire, completion_status_classes)
{
    const char *hint = NULL;
    cr_assert_eq(gw__ib_wc_status_class(IBV_WC_RETRY_EXC_ERR, &hint), GW_ERR_REMOTE);
    cr_assert(strstr(hint, "peer is gone") && strstr(hint, "GW_IB_TIMEOUT"), "%s", hint);
    cr_assert_eq(gw__ib_wc_status_class(IBV_WC_REM_ACCESS_ERR, &hint), GW_ERR_REMOTE);
    cr_assert(strstr(hint, "rkey"), "%s", hint);
    cr_assert_eq(gw__ib_wc_status_class(IBV_WC_RNR_RETRY_EXC_ERR, &hint), GW_ERR_REMOTE);
    cr_assert_eq(gw__ib_wc_status_class(IBV_WC_LOC_PROT_ERR, &hint), GW_ERR_SYSTEM);
    cr_assert_eq(gw__ib_wc_status_class(IBV_WC_WR_FLUSH_ERR, &hint), GW_ERR_SYSTEM);
    cr_assert_eq(gw__ib_wc_status_class(IBV_WC_GENERAL_ERR, &hint), GW_ERR_SYSTEM);
    cr_assert_not_null(hint);
}

/* An RDMA CM knock proves the key and carries its counter: it checks out
 * only under the job's key and job id, for the rank it names, whole and
 * unchanged (every byte of it is covered), and it fits the 56 bytes of
 * private data a connect request carries over RoCE. A request of the old
 * layout for the knock QP (job id and a nonce, no proof) is refused: a
 * stranger who read the job id could make it. */
Test(ib_wire, cm_knocks_prove_the_key)
{
    uint8_t key[32], job[16], other[32], k[GW_IB_CM_KNOCK_SIZE], bad[GW_IB_CM_KNOCK_SIZE];
    for (int i = 0; i < 32; i++)
        other[i] = key[i] = (uint8_t)(0x3a + 7 * i);
    other[0] ^= 1;
    for (int i = 0; i < 16; i++)
        job[i] = (uint8_t)(0x40 + i);
    cr_assert_leq(sizeof(k), 56, "a knock must fit a RoCE connect request");
    gw__ib_cm_knock_encode(key, job, 1, 3, 0x0123456789abcdefULL, k);
    uint32_t from = 99;
    uint64_t counter = 0;
    cr_assert(gw__ib_cm_knock_check(key, job, 3, k, sizeof(k), &from, &counter),
              "a genuine knock is refused");
    cr_expect_eq(from, 1);
    cr_expect_eq(counter, 0x0123456789abcdefULL);
    /* As librdmacm hands it over: the 56 bytes, whatever was sent. */
    cr_expect(gw__ib_cm_knock_check(key, job, 3, k, 56, &from, &counter));
    cr_expect(!gw__ib_cm_knock_check(other, job, 3, k, sizeof(k), &from, &counter), "another key");
    uint8_t job2[16];
    memcpy(job2, job, 16);
    job2[15] ^= 1;
    cr_expect(!gw__ib_cm_knock_check(key, job2, 3, k, sizeof(k), &from, &counter), "another job");
    cr_expect(!gw__ib_cm_knock_check(key, job, 2, k, sizeof(k), &from, &counter),
              "for another rank");
    cr_expect(!gw__ib_cm_knock_check(key, job, 3, k, sizeof(k) - 1, &from, &counter), "short");
    for (size_t i = 0; i < sizeof(k); i++) {
        memcpy(bad, k, sizeof(bad));
        bad[i] ^= 0x10;
        cr_expect(!gw__ib_cm_knock_check(key, job, 3, bad, sizeof(bad), &from, &counter),
                  "byte %zu changed and the knock still checks out", i);
    }
    /* The knock of version 7: a request whose QP index says knock, with the
     * job id and a nonce where the proof now stands. */
    gw_ib_cm_pdata_t p = {.from = 1, .to = 3, .qp_idx = GW_IB_KNOCK_QP, .nqps = 1};
    memcpy(p.job_id, job, 16);
    memset(bad, 0, sizeof(bad));
    gw__ib_cm_req_encode(&p, bad);
    cr_expect(!gw__ib_cm_knock_check(key, job, 3, bad, sizeof(bad), &from, &counter),
              "a knock without a proof checks out");
}
