/*
 * ib_wire.c - byte layouts of everything the IB transport puts on a wire or
 * in another rank's memory. Integers are big-endian, so that a mixed
 * cluster, or a reader of a packet capture, sees the same bytes.
 *
 * Address blob (GW_TRANSPORT_ADDR_MAX bytes; 98 used, the rest zero):
 *    0 u32 GW_IB_ADDR_MAGIC     4 u8 protocol version   5 u8 connection mode
 *    6 u8 link layer            7 u8 port number        8 u16 LID
 *   10 u8 active MTU (enum)    11 u8 QPs per peer      12 u32 FIFO rkey
 *   16 u64 FIFO address        24 16 bytes GID         40 u8 GID index
 *   41 the listener's socket address as sock.h lays it out (23 bytes):
 *      41 u8 address family (4/6, 0: none)   42 u16 port (TCP or RDMA CM)
 *      44 16 bytes IP address                 60 u32 IPv6 scope id
 *   64 32 bytes device name
 *   96 u16 largest eager message (GW_IB_EAGER)
 *
 * CTS slot (64 bytes, written by the receiver into the sender's FIFO):
 *    0 u64 message index   8 u64 buffer address   16 u64 length
 *   24 u64 tag.seq        32 u32 rkey            36 u32 tag.sig
 *   40 u64 message index again (a slot whose two indexes disagree is torn)
 *   48 u64 eager messages the receiver has taken out of its slots
 *   56 u32 tag.comm_id (the communicator; since version 6)
 *
 * Eager slot header (64 bytes, followed by the payload):
 *    0 u64 message index   8 u64 tag.seq   16 u32 tag.sig   24 u64 length
 *   32 u64 CTS entries the sender has taken out of its FIFO
 *   40 u64 eager messages of the receiver that the sender has taken out of
 *      its own slots (the slots' credit travels both ways)
 *   48 u32 flags (1: the sender waits for a RECEIPT immediate)
 *   52 u32 tag.comm_id (the communicator; since version 6)
 *
 * Out-of-band hello (120 bytes): magic, version, job id[16], from, to,
 * nonce[16], QPs per peer, first PSN, QP numbers[16] (magic, job id, ranks
 * and nonce stand where every hello has them: sock.h; the nonce is the
 * handshake's, transport/sock_auth.c).
 *
 * rdmacm connect request's private data (52 bytes, of the 56 that RoCE
 * carries):
 *    0 u32 GW_IB_CM_MAGIC   4 u8 protocol version   5 u8 zero
 *    6 u16 QP index         8 u32 from (the dialler) 12 u32 to (the acceptor)
 *   16 u16 QPs per peer    18 u16 zero              20 16 bytes job id
 *   36 16 bytes the dialler's nonce
 * rdmacm accept's private data (64 bytes, of 196):
 *    0 u32 GW_IB_CM_REP_MAGIC   4 u8 protocol version   5 u8 zero
 *    6 u16 QP index             8 u32 from (the acceptor) 12 u32 to (the dialler)
 *   16 16 bytes the acceptor's nonce   32 32 bytes the acceptor's proof
 * rdmacm knock's private data (56 bytes, all that RoCE carries; since
 * version 8):
 *    0 u32 GW_IB_CM_MAGIC   4 u8 protocol version   5 u8 zero
 *    6 u16 GW_IB_KNOCK_QP   8 u32 from (the knocker) 12 u32 to (the knocked)
 *   16 u64 the knocker's counter for the pair
 *   24 32 bytes HMAC-SHA256 under the data-plane key over
 *      "gradwire rdmacm: knock" (with its NUL) || job id || bytes 0..23
 * The dialler's proof (32 bytes) is the first message on the QP, a SEND.
 * Both proofs are HMAC-SHA256 under the data-plane key over
 *   label || dialler's nonce || acceptor's nonce || u32 dialler's rank ||
 *   u32 acceptor's rank || u16 QP index,
 * the label "gradwire rdmacm: acceptor" or "gradwire rdmacm: dialler"
 * (with its NUL), so that neither proof can be replayed on another attempt
 * (a fresh nonce of the other side is in it), for another pair or QP, or
 * reflected back as the other side's.
 */
#include <string.h>

#include "common/byteorder.h"
#include "common/sha256.h"
#include "transport/ib/ib_internal.h"
#include "transport/sock.h"

void gw__ib_addr_encode(const gw_ib_addr_t *a, uint8_t blob[GW_TRANSPORT_ADDR_MAX])
{
    memset(blob, 0, GW_TRANSPORT_ADDR_MAX);
    gw__put_be32(blob, GW_IB_ADDR_MAGIC);
    blob[4] = GW_IB_PROTOCOL_VERSION;
    blob[5] = a->cm_mode;
    blob[6] = a->link_layer;
    blob[7] = a->port_num;
    gw__put_be16(blob + 8, a->lid);
    blob[10] = a->mtu;
    blob[11] = a->nqps;
    /* 12..23: zero (the FIFOs' address and key until version 7; each pair
     * now says where its block is when it is set up). */
    memcpy(blob + 24, a->gid, 16);
    blob[40] = a->gid_index;
    gw__sock_addr_put(blob + 41, (const struct sockaddr *)&a->sa);
    size_t n = strnlen(a->device, GW_IB_NAME_MAX - 1);
    memcpy(blob + 64, a->device, n);
    gw__put_be16(blob + 96, a->eager_max);
    blob[98] = a->lazy;
}

gw_status_t gw__ib_addr_decode(const uint8_t blob[GW_TRANSPORT_ADDR_MAX], gw_ib_addr_t *a)
{
    if (gw__get_be32(blob) != GW_IB_ADDR_MAGIC || blob[4] != GW_IB_PROTOCOL_VERSION)
        return GW_ERR_PROTOCOL;
    memset(a, 0, sizeof(*a));
    a->cm_mode = blob[5];
    a->link_layer = blob[6];
    a->port_num = blob[7];
    a->lid = gw__get_be16(blob + 8);
    a->mtu = blob[10];
    a->nqps = blob[11];
    memcpy(a->gid, blob + 24, 16);
    a->gid_index = blob[40];
    socklen_t sa_len;
    if (gw__sock_addr_get(blob + 41, &a->sa, &sa_len) == GW_ERR_PROTOCOL)
        return GW_ERR_PROTOCOL; /* family 0 is fine: no address published */
    memcpy(a->device, blob + 64, GW_IB_NAME_MAX - 1);
    a->device[GW_IB_NAME_MAX - 1] = '\0';
    a->eager_max = gw__get_be16(blob + 96);
    a->lazy = blob[98];
    if ((a->cm_mode != GW_IB_CM_RDMACM && a->cm_mode != GW_IB_CM_OOB) || a->nqps < 1 ||
        a->nqps > GW_IB_MAX_QPS || a->mtu < IBV_MTU_256 || a->mtu > IBV_MTU_4096 ||
        a->eager_max > GW_IB_EAGER_MAX || a->lazy > 1)
        return GW_ERR_PROTOCOL;
    return GW_OK;
}

void gw__ib_cts_encode(const gw_ib_cts_t *c, uint8_t out[GW_IB_CTS_SIZE])
{
    memset(out, 0, GW_IB_CTS_SIZE);
    gw__put_be64(out, c->idx);
    gw__put_be64(out + 8, c->addr);
    gw__put_be64(out + 16, c->len);
    gw__put_be64(out + 24, c->seq);
    gw__put_be32(out + 32, c->rkey);
    gw__put_be32(out + 36, c->sig);
    gw__put_be64(out + 40, c->idx);
    gw__put_be64(out + 48, c->eager_freed);
    gw__put_be32(out + 56, c->comm_id);
}

int gw__ib_cts_decode(const uint8_t in[GW_IB_CTS_SIZE], gw_ib_cts_t *c)
{
    c->idx = gw__get_be64(in);
    c->addr = gw__get_be64(in + 8);
    c->len = gw__get_be64(in + 16);
    c->seq = gw__get_be64(in + 24);
    c->rkey = gw__get_be32(in + 32);
    c->sig = gw__get_be32(in + 36);
    c->eager_freed = gw__get_be64(in + 48);
    c->comm_id = gw__get_be32(in + 56);
    return gw__get_be64(in + 40) == c->idx && c->idx != 0 ? 0 : -1;
}

void gw__ib_eager_hdr_encode(const gw_ib_eager_hdr_t *h, uint8_t out[GW_IB_EAGER_HDR])
{
    memset(out, 0, GW_IB_EAGER_HDR);
    gw__put_be64(out, h->idx);
    gw__put_be64(out + 8, h->seq);
    gw__put_be32(out + 16, h->sig);
    gw__put_be64(out + 24, h->len);
    gw__put_be64(out + 32, h->cts_seen);
    gw__put_be64(out + 40, h->eager_freed);
    gw__put_be32(out + 48, h->flags);
    gw__put_be32(out + 52, h->comm_id);
}

void gw__ib_eager_hdr_decode(const uint8_t in[GW_IB_EAGER_HDR], gw_ib_eager_hdr_t *h)
{
    h->idx = gw__get_be64(in);
    h->seq = gw__get_be64(in + 8);
    h->sig = gw__get_be32(in + 16);
    h->len = gw__get_be64(in + 24);
    h->cts_seen = gw__get_be64(in + 32);
    h->eager_freed = gw__get_be64(in + 40);
    h->flags = gw__get_be32(in + 48);
    h->comm_id = gw__get_be32(in + 52);
}

uint32_t gw__ib_imm_encode(gw_ib_imm_kind_t kind, uint64_t value)
{
    return ((uint32_t)kind << 28) | (uint32_t)(value & GW_IB_IMM_VALUE_MASK);
}

void gw__ib_imm_decode(uint32_t imm, gw_ib_imm_kind_t *kind, uint32_t *value)
{
    *kind = (gw_ib_imm_kind_t)(imm >> 28);
    *value = imm & GW_IB_IMM_VALUE_MASK;
}

void gw__ib_hello_encode(const gw_ib_hello_t *h, uint8_t out[GW_IB_HELLO_SIZE])
{
    memset(out, 0, GW_IB_HELLO_SIZE);
    gw__sock_hello_id_put(out, &h->id);
    gw__put_be32(out + 4, h->version);
    gw__put_be32(out + 48, h->nqps);
    gw__put_be32(out + 52, h->psn);
    for (int k = 0; k < GW_IB_MAX_QPS; k++)
        gw__put_be32(out + 56 + 4 * k, h->qpn[k]);
    gw__put_be64(out + 120, h->blk);
    gw__put_be32(out + 128, h->blk_rkey);
}

void gw__ib_hello_decode(const uint8_t in[GW_IB_HELLO_SIZE], gw_ib_hello_t *h)
{
    gw__sock_hello_id_get(in, &h->id);
    h->version = gw__get_be32(in + 4);
    h->nqps = gw__get_be32(in + 48);
    h->psn = gw__get_be32(in + 52);
    for (int k = 0; k < GW_IB_MAX_QPS; k++)
        h->qpn[k] = gw__get_be32(in + 56 + 4 * k);
    h->blk = gw__get_be64(in + 120);
    h->blk_rkey = gw__get_be32(in + 128);
}

static void cm_head_put(uint8_t *out, uint32_t magic, const gw_ib_cm_pdata_t *p)
{
    gw__put_be32(out, magic);
    out[4] = GW_IB_PROTOCOL_VERSION;
    gw__put_be16(out + 6, p->qp_idx);
    gw__put_be32(out + 8, p->from);
    gw__put_be32(out + 12, p->to);
}

static gw_status_t cm_head_get(const uint8_t *in, size_t len, size_t need, uint32_t magic,
                               gw_ib_cm_pdata_t *p)
{
    if (!in || len < need || gw__get_be32(in) != magic || in[4] != GW_IB_PROTOCOL_VERSION)
        return GW_ERR_PROTOCOL;
    memset(p, 0, sizeof(*p));
    p->qp_idx = gw__get_be16(in + 6);
    p->from = gw__get_be32(in + 8);
    p->to = gw__get_be32(in + 12);
    return GW_OK;
}

void gw__ib_cm_req_encode(const gw_ib_cm_pdata_t *p, uint8_t out[GW_IB_CM_REQ_SIZE])
{
    memset(out, 0, GW_IB_CM_REQ_SIZE);
    cm_head_put(out, GW_IB_CM_MAGIC, p);
    gw__put_be16(out + 16, p->nqps);
    memcpy(out + 20, p->job_id, 16);
    memcpy(out + 36, p->nonce, GW_IB_CM_NONCE_LEN);
}

gw_status_t gw__ib_cm_req_decode(const uint8_t *in, size_t len, gw_ib_cm_pdata_t *p)
{
    if (cm_head_get(in, len, GW_IB_CM_REQ_SIZE, GW_IB_CM_MAGIC, p) != GW_OK)
        return GW_ERR_PROTOCOL;
    p->nqps = gw__get_be16(in + 16);
    memcpy(p->job_id, in + 20, 16);
    memcpy(p->nonce, in + 36, GW_IB_CM_NONCE_LEN);
    return GW_OK;
}

void gw__ib_cm_rep_encode(const gw_ib_cm_pdata_t *p, uint8_t out[GW_IB_CM_REP_SIZE])
{
    memset(out, 0, GW_IB_CM_REP_SIZE);
    cm_head_put(out, GW_IB_CM_REP_MAGIC, p);
    memcpy(out + 16, p->nonce, GW_IB_CM_NONCE_LEN);
    memcpy(out + 32, p->mac, GW_IB_CM_MAC_LEN);
    gw__put_be64(out + 64, p->blk);
    gw__put_be32(out + 72, p->blk_rkey);
}

gw_status_t gw__ib_cm_rep_decode(const uint8_t *in, size_t len, gw_ib_cm_pdata_t *p)
{
    if (cm_head_get(in, len, GW_IB_CM_REP_SIZE, GW_IB_CM_REP_MAGIC, p) != GW_OK)
        return GW_ERR_PROTOCOL;
    memcpy(p->nonce, in + 16, GW_IB_CM_NONCE_LEN);
    memcpy(p->mac, in + 32, GW_IB_CM_MAC_LEN);
    p->blk = gw__get_be64(in + 64);
    p->blk_rkey = gw__get_be32(in + 72);
    return GW_OK;
}

void gw__ib_cm_proof_msg_encode(const uint8_t mac[GW_IB_CM_MAC_LEN], uint64_t blk,
                                uint32_t blk_rkey, uint8_t out[GW_IB_CM_PROOF_SIZE])
{
    memcpy(out, mac, GW_IB_CM_MAC_LEN);
    gw__put_be64(out + GW_IB_CM_MAC_LEN, blk);
    gw__put_be32(out + GW_IB_CM_MAC_LEN + 8, blk_rkey);
}

void gw__ib_cm_proof_msg_decode(const uint8_t in[GW_IB_CM_PROOF_SIZE], uint64_t *blk,
                                uint32_t *blk_rkey)
{
    *blk = gw__get_be64(in + GW_IB_CM_MAC_LEN);
    *blk_rkey = gw__get_be32(in + GW_IB_CM_MAC_LEN + 8);
}

static const char CM_ACCEPTOR[] = "gradwire rdmacm: acceptor";
static const char CM_DIALLER[] = "gradwire rdmacm: dialler";

void gw__ib_cm_proof(const uint8_t key[32], const gw_ib_cm_shake_t *s, int by_acceptor,
                     uint8_t mac[GW_IB_CM_MAC_LEN])
{
    const char *label = by_acceptor ? CM_ACCEPTOR : CM_DIALLER;
    uint8_t fields[4 + 4 + 2 + 8 + 4];
    gw__put_be32(fields, s->dialler);
    gw__put_be32(fields + 4, s->acceptor);
    gw__put_be16(fields + 8, s->qp_idx);
    gw__put_be64(fields + 10, by_acceptor ? s->blk_a : s->blk_d);
    gw__put_be32(fields + 18, by_acceptor ? s->rkey_a : s->rkey_d);
    gw_hmac_sha256_t h;
    gw__hmac_sha256_init(&h, key, 32);
    gw__hmac_sha256_update(&h, label, strlen(label) + 1);
    gw__hmac_sha256_update(&h, s->nonce_d, GW_IB_CM_NONCE_LEN);
    gw__hmac_sha256_update(&h, s->nonce_a, GW_IB_CM_NONCE_LEN);
    gw__hmac_sha256_update(&h, fields, sizeof(fields));
    gw__hmac_sha256_final(&h, mac);
    explicit_bzero(&h, sizeof(h));
}

int gw__ib_cm_proof_ok(const uint8_t key[32], const gw_ib_cm_shake_t *s, int by_acceptor,
                       const uint8_t mac[GW_IB_CM_MAC_LEN])
{
    uint8_t want[GW_IB_CM_MAC_LEN];
    gw__ib_cm_proof(key, s, by_acceptor, want);
    return gw__ct_equal(want, mac, GW_IB_CM_MAC_LEN);
}

static const char CM_KNOCK[] = "gradwire rdmacm: knock";

static void knock_mac(const uint8_t key[32], const uint8_t job_id[16], const uint8_t head[24],
                      uint8_t mac[GW_IB_CM_MAC_LEN])
{
    gw_hmac_sha256_t h;
    gw__hmac_sha256_init(&h, key, 32);
    gw__hmac_sha256_update(&h, CM_KNOCK, sizeof(CM_KNOCK));
    gw__hmac_sha256_update(&h, job_id, 16);
    gw__hmac_sha256_update(&h, head, 24);
    gw__hmac_sha256_final(&h, mac);
    explicit_bzero(&h, sizeof(h));
}

void gw__ib_cm_knock_encode(const uint8_t key[32], const uint8_t job_id[16], uint32_t from,
                            uint32_t to, uint64_t counter, uint8_t out[GW_IB_CM_KNOCK_SIZE])
{
    gw_ib_cm_pdata_t p = {.from = from, .to = to, .qp_idx = GW_IB_KNOCK_QP};
    memset(out, 0, GW_IB_CM_KNOCK_SIZE);
    cm_head_put(out, GW_IB_CM_MAGIC, &p);
    gw__put_be64(out + 16, counter);
    knock_mac(key, job_id, out, out + 24);
}

int gw__ib_cm_knock_check(const uint8_t key[32], const uint8_t job_id[16], uint32_t to,
                          const uint8_t *in, size_t len, uint32_t *from, uint64_t *counter)
{
    gw_ib_cm_pdata_t p;
    if (cm_head_get(in, len, GW_IB_CM_KNOCK_SIZE, GW_IB_CM_MAGIC, &p) != GW_OK ||
        p.qp_idx != GW_IB_KNOCK_QP || p.to != to || in[5] != 0)
        return 0;
    uint8_t want[GW_IB_CM_MAC_LEN];
    knock_mac(key, job_id, in, want);
    if (!gw__ct_equal(want, in + 24, GW_IB_CM_MAC_LEN))
        return 0;
    *from = p.from;
    *counter = gw__get_be64(in + 16);
    return 1;
}

size_t gw__ib_nparts(size_t len, int nqps)
{
    size_t n = gw__transport_nparts(len, GW_IB_MIN_PART, nqps);
    /* No part may exceed the largest write we post. */
    size_t need = (len + GW_IB_MAX_WR_BYTES - 1) / GW_IB_MAX_WR_BYTES;
    return n < need ? need : n;
}
