/*
 * test_ib_wire.c - byte layouts of the IB transport: address blobs, CTS
 * entries, immediates, out-of-band hellos and rdmacm private data, message
 * striping, and how failed work completions are classified. No RDMA needed.
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
    a.fifo_addr = 0x7f0012345678ULL;
    a.fifo_rkey = 0xdeadbeef;
    struct sockaddr_in *in = (struct sockaddr_in *)&a.sa;
    in->sin_family = AF_INET;
    in->sin_port = htons(4791);
    inet_pton(AF_INET, "198.18.0.1", &in->sin_addr);
    strcpy(a.device, "rxe0");
    a.eager_max = 4000;
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
    cr_assert_eq(b.fifo_addr, a.fifo_addr);
    cr_assert_eq(b.fifo_rkey, a.fifo_rkey);
    char s[64];
    gw__sock_addr_str((struct sockaddr *)&b.sa, s, sizeof(s));
    cr_assert_str_eq(s, "198.18.0.1:4791");
    cr_assert_str_eq(b.device, "rxe0");
    cr_assert_eq(b.eager_max, 4000);
    /* Big-endian on the wire. */
    cr_assert_eq(blob[0], 'G');
    cr_assert_eq(blob[8], 0x12);
    cr_assert_eq(blob[12], 0xde);
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

Test(ib_wire, hello_and_pdata)
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
    uint8_t buf[GW_IB_HELLO_SIZE];
    gw__ib_hello_encode(&h, buf);
    gw__ib_hello_decode(buf, &g);
    cr_assert_eq(memcmp(&h, &g, sizeof(h)), 0);

    gw_ib_cm_pdata_t p = {.magic = GW_IB_CM_MAGIC, .from = 2, .to = 0, .qp_idx = 3, .nqps = 4}, q;
    memcpy(p.job_id, h.id.job_id, 16);
    uint8_t pb[GW_IB_CM_PDATA_SIZE];
    gw__ib_cm_pdata_encode(&p, pb);
    gw__ib_cm_pdata_decode(pb, &q);
    cr_assert_eq(q.magic, p.magic);
    cr_assert_arr_eq(q.job_id, p.job_id, 16);
    cr_assert_eq(q.from, 2u);
    cr_assert_eq(q.to, 0u);
    cr_assert_eq(q.qp_idx, 3);
    cr_assert_eq(q.nqps, 4);
    cr_assert_leq(GW_IB_CM_PDATA_SIZE, 56, "must fit a connect request's private data");
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
