/*
 * ib_wire.h - what the verbs transport's ranks say to each other: the
 * protocol's constants (magic numbers, version, slot and message sizes that
 * both ends must agree on) and the byte layouts of the address blob,
 * clear-to-send entries, immediates, eager headers, out-of-band hellos and
 * rdmacm private data, encoded and decoded by ib_wire.c. Everything here is
 * bytes from outside the process: the decoders check every field
 * (tests/transport/ib/test_ib_wire.c, tests/fuzz/fuzz_ib_wire.c).
 */
#ifndef GW_TRANSPORT_IB_WIRE_H
#define GW_TRANSPORT_IB_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/base.h"
#include "transport/sock.h"

#define GW_IB_ADDR_MAGIC 0x47574942u   /* "GWIB" */
#define GW_IB_HELLO_MAGIC 0x4757494fu  /* "GWIO": out-of-band hello */
#define GW_IB_CM_MAGIC 0x47574943u     /* "GWIC": rdmacm connect request */
#define GW_IB_CM_REP_MAGIC 0x47574941u /* "GWIA": rdmacm accept */
/* 2: out-of-band hellos carry a nonce and open with the proof of the
 * data-plane key (transport/sock_auth.c). 3: an abort is announced by an
 * ABORT_FROM immediate naming the rank that first reported the failure and
 * the rank it blames. 4: rdmacm connections prove the key too (their
 * private data carries this version, nonces and the acceptor's proof; the
 * dialler's proof is the first message on the QP: ib_cm.c). 5: an eager
 * message may ask for a receipt (GW_IB_EAGER_RECEIPT), which the receiver
 * gives with a RECEIPT immediate. 7: pairs may connect on first use: the
 * address says whether the rank does (byte 98), and a lower rank asks a
 * higher one to dial it with a knock (a connect request or hello for QP
 * GW_IB_KNOCK_QP, ib_lazy.c); each side of a pair tells the other where
 * its block for the pair is (CTS FIFO and eager slots: GW_IB_PAIR_BLOCK)
 * in the set-up's messages (hello, accept, the dialler's proof), no longer
 * in the address. 8: knocks prove the key and are fresh: an RDMA CM knock
 * is a request of its own layout (GW_IB_CM_KNOCK_SIZE: a counter and an
 * HMAC), an out-of-band one a hello followed by its proof. 9: an eager
 * slot may hold an announcement instead of a message (GW_IB_EAGER_ANNOUNCE:
 * the header of a message that will come through the CTS, no payload). */
#define GW_IB_PROTOCOL_VERSION 9u
#define GW_IB_FIFO_DEPTH 32  /* CTS slots per peer: messages in flight per direction */
#define GW_IB_CTS_SIZE 64    /* bytes of one CTS slot */
#define GW_IB_EAGER_SLOTS 4  /* eager slots per peer and direction */
#define GW_IB_EAGER_HDR 64   /* bytes of an eager slot's header */
#define GW_IB_EAGER_MAX 4096 /* largest eager payload (GW_IB_EAGER lowers it) */
#define GW_IB_EAGER_SLOT (GW_IB_EAGER_HDR + GW_IB_EAGER_MAX)
#define GW_IB_MAX_QPS 16
#define GW_IB_MAX_RAILS 4    /* ports a rank uses at once (GW_IB_RAILS; ib_rails.c) */
#define GW_IB_ADDR_SIZE 99   /* bytes used in the address blob */
#define GW_IB_HELLO_SIZE 132 /* bytes of an out-of-band hello */
/* A rank with several rails (ib_rails.c) publishes its first rail's blob
 * as a rank with one does (bytes 0-98: a rank that has one rail reads
 * only those), then at GW_IB_RAILS_OFF: u32 GW_IB_RAILS_MAGIC, u8 rails,
 * and from GW_IB_RAILS_OFF + 8 the blob of each further rail, every
 * GW_IB_ADDR_SIZE bytes. */
#define GW_IB_RAILS_MAGIC 0x47574952u /* "GWIR" */
#define GW_IB_RAILS_OFF 100
#define GW_IB_RAIL_BLOB(i) ((i) == 0 ? 0 : GW_IB_RAILS_OFF + 8 + ((i)-1) * GW_IB_ADDR_SIZE)
/* rdmacm private data: a connect request carries at most 56 bytes over
 * RoCE (the IB CM's 92 less librdmacm's header), an accept 196. */
#define GW_IB_CM_REQ_SIZE 52
#define GW_IB_CM_REP_SIZE 76
#define GW_IB_CM_KNOCK_SIZE 56 /* a knock's request: every byte RoCE carries */
#define GW_IB_CM_MAC_LEN 32    /* HMAC-SHA256 */
/* The dialler's proof, a SEND: the MAC, then its block for the pair. */
#define GW_IB_CM_PROOF_SIZE 44
#define GW_IB_CM_NONCE_LEN 16
/* The QP index (rdmacm request) or QPs per peer (out-of-band hello) of a
 * knock: "dial me" from a lower rank that wants the pair (ib_lazy.c). */
#define GW_IB_KNOCK_QP 0xffffu
#define GW_IB_NAME_MAX 32 /* device name bytes in the blob */

/* ---- wire formats (ib_wire.c) ------------------------------------------- */

/* What every rank publishes through the bootstrap. */
typedef struct gw_ib_addr {
    uint8_t cm_mode; /* gw_ib_cm_mode_t */
    uint8_t link_layer;
    uint8_t port_num;
    uint8_t mtu; /* enum ibv_mtu, active MTU of the port */
    uint16_t lid;
    uint8_t nqps;
    uint8_t gid_index; /* 255: no GRH (InfiniBand without GW_IB_GID_INDEX) */
    uint8_t gid[16];
    struct sockaddr_storage sa; /* OOB: TCP listener; rdmacm: RDMA CM listener */
    char device[GW_IB_NAME_MAX];
    uint16_t eager_max; /* GW_IB_EAGER of the rank: largest message it sends eagerly */
    uint8_t lazy;       /* it connects pairs on first use (GW_CONNECT=lazy) */
} gw_ib_addr_t;

void gw__ib_addr_encode(const gw_ib_addr_t *a, uint8_t blob[GW_TRANSPORT_ADDR_MAX]);
gw_status_t gw__ib_addr_decode(const uint8_t blob[GW_TRANSPORT_ADDR_MAX], gw_ib_addr_t *a);

/* A clear-to-send entry: the receiver's buffer and what it expects, and
 * how many of our eager messages it has taken out of its slots. */
typedef struct gw_ib_cts {
    uint64_t addr;
    uint64_t len;
    uint64_t seq;
    uint64_t idx; /* message index per peer, from 1 */
    uint32_t rkey;
    uint32_t sig;
    uint64_t eager_freed;
    uint32_t comm_id; /* the communicator of the receive (tag.comm_id) */
} gw_ib_cts_t;

void gw__ib_cts_encode(const gw_ib_cts_t *c, uint8_t out[GW_IB_CTS_SIZE]);
/* 0, or -1 when the slot does not hold a complete entry (its two copies of
 * the index disagree). */
int gw__ib_cts_decode(const uint8_t in[GW_IB_CTS_SIZE], gw_ib_cts_t *c);

/* The header of an eager slot: the message's index, tag and length. */
typedef struct gw_ib_eager_hdr {
    uint64_t idx;
    uint64_t seq;
    uint32_t sig;
    uint64_t len;
    uint64_t cts_seen;    /* CTS entries the sender has taken out of its FIFO */
    uint64_t eager_freed; /* eager messages of the receiver that the sender took out */
    uint32_t flags;       /* GW_IB_EAGER_RECEIPT or 0 */
    uint32_t comm_id;     /* the message's communicator (tag.comm_id) */
} gw_ib_eager_hdr_t;

/* gw_ib_eager_hdr_t.flags: the sender's send completes only with the
 * receiver's RECEIPT immediate (GW_REQ_RECEIPT). */
#define GW_IB_EAGER_RECEIPT 1u
/* ... or: the slot announces message idx (tag and length, up to any
 * length) and holds no payload; the message itself waits for the
 * receiver's CTS, as any message too large to go eagerly
 * (GW_REQ_ANNOUNCE: so that a receiver that peeks sees it). */
#define GW_IB_EAGER_ANNOUNCE 2u

void gw__ib_eager_hdr_encode(const gw_ib_eager_hdr_t *h, uint8_t out[GW_IB_EAGER_HDR]);
void gw__ib_eager_hdr_decode(const uint8_t in[GW_IB_EAGER_HDR], gw_ib_eager_hdr_t *h);

/* Immediate data: 4 bits of kind, 28 bits of message index (or status). */
typedef enum gw_ib_imm_kind {
    GW_IB_IMM_DATA = 1,     /* a part of message idx landed */
    GW_IB_IMM_CTS = 2,      /* CTS entry number `value` landed in our FIFO */
    GW_IB_IMM_MISMATCH = 3, /* the sender refused message idx: tag or length differ */
    GW_IB_IMM_ABORT = 4,    /* the peer aborted; the value is its status */
    GW_IB_IMM_GOODBYE = 5,  /* the peer closed its communicator */
    GW_IB_IMM_EAGER = 6,    /* message idx landed in our next eager slot */
    /* Sent just before ABORT, on the same queue pair (so it lands first):
     * the rank that first reported the failure (upper 14 bits) and the
     * rank it blames (lower 14 bits), GW_IB_IMM_NO_RANK for none. Jobs of
     * more than 16383 ranks name no rank beyond that. */
    GW_IB_IMM_ABORT_FROM = 7,
    /* We matched and accepted the peer's eager messages up to index
     * `value` (cumulative; those that asked for a receipt complete). */
    GW_IB_IMM_RECEIPT = 8,
    /* We took `value` of the peer's eager messages out of our slots
     * (cumulative: its low 28 bits), for a peer that would otherwise hear
     * of it only in a CTS entry or in our eager headers, neither of which
     * may come: a receiver that peeks posts no receive until it sees a
     * message (announcements, GW_IB_EAGER_ANNOUNCE; version 9). */
    GW_IB_IMM_FREED = 9,
} gw_ib_imm_kind_t;

#define GW_IB_IMM_VALUE_MASK 0x0fffffffu
#define GW_IB_IMM_NO_RANK 0x3fffu

uint32_t gw__ib_imm_encode(gw_ib_imm_kind_t kind, uint64_t value); /* host order */
void gw__ib_imm_decode(uint32_t imm, gw_ib_imm_kind_t *kind, uint32_t *value);
/* Whether a 28-bit index from an immediate names message idx. */
static inline int gw__ib_imm_names(uint32_t value, uint64_t idx)
{
    return value == (uint32_t)(idx & GW_IB_IMM_VALUE_MASK);
}
/* The count a 28-bit immediate value stands for: the latest one, at most
 * `latest` (what we sent), with those low bits; more than `latest` only
 * for a value that names none (latest below 2^28 and value above it). */
static inline uint64_t gw__ib_imm_widen(uint32_t value, uint64_t latest)
{
    return latest - ((latest - value) & GW_IB_IMM_VALUE_MASK);
}

/* Out-of-band hello: who we are and our queue pairs for this peer. */
typedef struct gw_ib_hello {
    gw_sock_hello_id_t id; /* magic, job id, from and to rank (sock.h) */
    uint32_t version;
    uint32_t nqps;
    uint32_t psn;
    uint32_t qpn[GW_IB_MAX_QPS];
    uint64_t blk; /* the sender's block for this pair (gw_ib_peer_t.blk) */
    uint32_t blk_rkey;
} gw_ib_hello_t;

void gw__ib_hello_encode(const gw_ib_hello_t *h, uint8_t out[GW_IB_HELLO_SIZE]);
void gw__ib_hello_decode(const uint8_t in[GW_IB_HELLO_SIZE], gw_ib_hello_t *h);

/* rdmacm private data: the connect request {who connects, which QP, the
 * dialler's nonce} and the accept {the acceptor's nonce and proof}. */
typedef struct gw_ib_cm_pdata {
    uint32_t from, to; /* the sender's rank, the receiver's */
    uint16_t qp_idx;
    uint16_t nqps;                     /* request only */
    uint8_t job_id[16];                /* request only */
    uint8_t nonce[GW_IB_CM_NONCE_LEN]; /* the sender's, fresh per attempt */
    uint8_t mac[GW_IB_CM_MAC_LEN];     /* accept only: the acceptor's proof */
    uint64_t blk;                      /* accept only: the acceptor's block for the pair */
    uint32_t blk_rkey;
} gw_ib_cm_pdata_t;

/* The encoders write magic and version; the decoders return
 * GW_ERR_PROTOCOL (and leave *p alone) for fewer than the layout's bytes, a
 * wrong magic or another version. */
void gw__ib_cm_req_encode(const gw_ib_cm_pdata_t *p, uint8_t out[GW_IB_CM_REQ_SIZE]);
gw_status_t gw__ib_cm_req_decode(const uint8_t *in, size_t len, gw_ib_cm_pdata_t *p);
void gw__ib_cm_rep_encode(const gw_ib_cm_pdata_t *p, uint8_t out[GW_IB_CM_REP_SIZE]);
gw_status_t gw__ib_cm_rep_decode(const uint8_t *in, size_t len, gw_ib_cm_pdata_t *p);
/* The dialler's proof message: its MAC and its block for the pair. */
void gw__ib_cm_proof_msg_encode(const uint8_t mac[GW_IB_CM_MAC_LEN], uint64_t blk,
                                uint32_t blk_rkey, uint8_t out[GW_IB_CM_PROOF_SIZE]);
void gw__ib_cm_proof_msg_decode(const uint8_t in[GW_IB_CM_PROOF_SIZE], uint64_t *blk,
                                uint32_t *blk_rkey);

/* What both ends of one rdmacm connection attempt prove the data-plane key
 * over, and the block each names for the pair (its proof covers it: the
 * peer's CTS entries and eager messages are written there). */
typedef struct gw_ib_cm_shake {
    uint32_t dialler, acceptor; /* ranks */
    uint16_t qp_idx;
    uint8_t nonce_d[GW_IB_CM_NONCE_LEN], nonce_a[GW_IB_CM_NONCE_LEN];
    uint64_t blk_d, blk_a;   /* each side's block (gw_ib_peer_t.blk) ... */
    uint32_t rkey_d, rkey_a; /* ... and its key */
} gw_ib_cm_shake_t;

/* The proof of side `by_acceptor` (1: the acceptor's, in the accept; 0: the
 * dialler's, the first message on the QP): HMAC-SHA256 under the key over a
 * label naming the side, both nonces, both ranks, the QP index and the
 * side's own block and key. */
void gw__ib_cm_proof(const uint8_t key[32], const gw_ib_cm_shake_t *s, int by_acceptor,
                     uint8_t mac[GW_IB_CM_MAC_LEN]);
/* 1 when mac is that proof (compared in constant time). */
int gw__ib_cm_proof_ok(const uint8_t key[32], const gw_ib_cm_shake_t *s, int by_acceptor,
                       const uint8_t mac[GW_IB_CM_MAC_LEN]);

/* A knock through the RDMA CM (ib_cm_knock.c): the connect request by
 * which rank `from` asks rank `to` to dial it, with its counter for the
 * pair (it must grow: a knock played back is not fresh) and its proof,
 * HMAC-SHA256 under the data-plane key over a label, the job id and the
 * request's first 24 bytes. */
void gw__ib_cm_knock_encode(const uint8_t key[32], const uint8_t job_id[16], uint32_t from,
                            uint32_t to, uint64_t counter, uint8_t out[GW_IB_CM_KNOCK_SIZE]);
/* 1, with the sender's rank and counter, when in (len bytes) is a whole
 * knock of this version for rank `to` whose proof is right (compared in
 * constant time); else 0. */
int gw__ib_cm_knock_check(const uint8_t key[32], const uint8_t job_id[16], uint32_t to,
                          const uint8_t *in, size_t len, uint32_t *from, uint64_t *counter);

/* Parts of a len-byte message over nqps QPs, and the range of part k: both
 * ends compute them from the length alone. */
size_t gw__ib_nparts(size_t len, int nqps);
#define gw__ib_part_range gw__transport_part_range

#endif
