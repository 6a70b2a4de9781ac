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
 *        4     2  version        2
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
 *   7 REPORT     rank -> root    u32 kind (1 FAILED, 2 STALLED, 3 STATE),
 *                                u32 status (GW_OK in a STATE),
 *                                i32 culprit, i32 origin, u32 blame (how the
 *                                culprit was found: gw_blame_kind_t),
 *                                i32 waiting_on, u64 seq (the collective it
 *                                is in, 0 none), u32 stalled_ms              36
 *   8 INQUIRE    root -> rank    i32 reporter, u64 seq (what it waits in)    12
 *   9 VERDICT    root -> rank    u32 status (not GW_OK), i32 culprit,
 *                                i32 origin, u64 seq, reason: 0..255 bytes
 *                                of printable ASCII                     20..275
 *  10 GATHER_START root -> rank  u32 wait_ms                                  4
 *  11 SHRINK     rank -> root    u32 port (rank 0: the port of the shrunk
 *                                communicator's root, else 0), u32 window_ms
 *                                (how long the referee waits for the others
 *                                to ask, from the first request)              8
 *  12 MEMBERS    root -> rank    u32 status (GW_OK: a member), i32 new_rank
 *                                (-1: not a member), u32 new_size, u32 port  16
 *  13 JOIN       joiner -> root  client_nonce[32]: a new process asks to join
 *                                the running job (bootstrap_grow.c)          32
 *  14 GROW       rank -> root    u32 port (rank 0: the port of the grown
 *                                communicator's root, else 0), u32 window_ms
 *                                (how long the referee waits for every rank
 *                                to ask, from the first request)              8
 *  15 GROWN      root -> rank,   u32 status, i32 new_rank, u32 new_size,
 *                root -> joiner  u32 port (0 when nobody joined: the
 *                                communicator stays as it is)               16
 *  16 RING_OPEN  root -> rank    (none): this all-gather goes round a ring
 *                                (bootstrap_ring.c); open a ring listener and
 *                                send its port as DATA of 4 bytes (u32)      0
 *  17 RING_PEER  root -> rank    the listener address of the rank's ring
 *                                neighbour (rank + 1 mod size), laid out as
 *                                gw__sock_addr_put does (transport/sock.h)  23
 * Ranks are signed: -1 (all ones) stands for none; the decoders refuse
 * anything below -1, the callers anything not below the job's size.
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
 * that fails locally tells the root with REJECT the same way. A join that
 * times out ends with a REJECT to every rank that did join, naming the
 * missing ranks.
 *
 * Join (bootstrap_grow.c): a joiner sends JOIN, gets a CHALLENGE, proves
 * itself with a RESPONSE whose client_proof is the rank proof for rank
 * 0xffffffff (GW_BS_JOINER_RANK: no rank of any job), then waits for GROWN,
 * or gets REJECT(AUTH) on a wrong token. The members of the job send GROW
 * together; each member and each waiting joiner gets GROWN with its place.
 *
 * Watch (after the last all-gather, for as long as the job runs; see
 * bootstrap_watch.c): a rank whose communicator fails sends a REPORT
 * (FAILED: whom it blames and how it knows; STALLED: it timed out waiting
 * for waiting_on) and waits for the VERDICT. The root's referee asks the
 * ranks that did not report what they wait for (INQUIRE, answered by a
 * STATE report), decides whom to blame, and sends the VERDICT to every
 * rank.
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
/* 2: the watch messages (REPORT, INQUIRE, VERDICT). 3: rank 0 announces
 * the start of its all-gather (GATHER_START). 4: the ring all-gather
 * (RING_OPEN, RING_PEER). 5: a REPORT says where in its collective the
 * rank is (kind and step, from its flight recorder), and reasons may be
 * 511 bytes, room for the verdict's account of where every rank was. */
#define GW_BS_VERSION 5u
#define GW_BS_HDR_LEN 12u
#define GW_BS_NONCE_LEN 32u
#define GW_BS_PROOF_LEN 32u
#define GW_BS_JOB_ID_LEN 16u
#define GW_BS_REASON_MAX 511u
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
#define GW_BS_REPORT_LEN (GW_BS_HDR_LEN + 44u)
#define GW_BS_INQUIRE_LEN (GW_BS_HDR_LEN + 12u)
/* Header plus the u32 milliseconds rank 0 will wait for the blocks. */
#define GW_BS_GATHER_START_LEN (GW_BS_HDR_LEN + 4u)
#define GW_BS_SHRINK_LEN (GW_BS_HDR_LEN + 8u)
#define GW_BS_MEMBERS_LEN (GW_BS_HDR_LEN + 16u)
#define GW_BS_JOIN_LEN (GW_BS_HDR_LEN + GW_BS_NONCE_LEN)
#define GW_BS_GROW_LEN (GW_BS_HDR_LEN + 8u)
#define GW_BS_GROWN_LEN (GW_BS_HDR_LEN + 16u)
#define GW_BS_RING_OPEN_LEN GW_BS_HDR_LEN
#define GW_BS_BYE_LEN GW_BS_HDR_LEN
#define GW_BS_DEPOSED_LEN GW_BS_HDR_LEN
#define GW_BS_RING_ADDR_LEN 23u /* GW_SOCK_ADDR_WIRE */
#define GW_BS_RING_PEER_LEN (GW_BS_HDR_LEN + GW_BS_RING_ADDR_LEN)
/* The rank a joiner's proof is made for (it has none yet). */
#define GW_BS_JOINER_RANK 0xffffffffu
/* The rank a status query's proof is made for: another than a joiner's,
 * so that neither proof passes for the other. */
#define GW_BS_STATUS_RANK 0xfffffffeu
/* PULSE (bootstrap_pulse.c): a fixed part, then up to GW_BS_PULSE_PEERS
 * peers of 20 bytes. STATUS: size and count, then per rank its rank, the
 * age of its news and its PULSE payload; at most GW_BS_STATUS_RANKS. */
#define GW_BS_PULSE_PEERS 16u
#define GW_BS_PULSE_FIXED 56u
#define GW_BS_PULSE_MAX_LEN (GW_BS_HDR_LEN + GW_BS_PULSE_FIXED + 20u * GW_BS_PULSE_PEERS)
#define GW_BS_STATUS_ASK_LEN (GW_BS_HDR_LEN + GW_BS_NONCE_LEN)
#define GW_BS_CLOCK_LEN (GW_BS_HDR_LEN + 16u)
#define GW_BS_STATUS_RANKS 65536u
#define GW_BS_STATUS_MAX_PAYLOAD \
    (8u + GW_BS_STATUS_RANKS * (8u + GW_BS_PULSE_MAX_LEN - GW_BS_HDR_LEN))
#define GW_BS_VERDICT_MIN_LEN (GW_BS_HDR_LEN + 20u)
#define GW_BS_VERDICT_MAX_LEN (GW_BS_VERDICT_MIN_LEN + GW_BS_REASON_MAX)
/* A buffer of this size holds any message other than DATA. */
#define GW_BS_SMALL_MSG_MAX GW_BS_VERDICT_MAX_LEN

typedef enum gw_bs_type {
    GW_BS_HELLO = 1,
    GW_BS_CHALLENGE = 2,
    GW_BS_RESPONSE = 3,
    GW_BS_REJECT = 4,
    GW_BS_WELCOME = 5,
    GW_BS_DATA = 6,
    GW_BS_REPORT = 7,
    GW_BS_INQUIRE = 8,
    GW_BS_VERDICT = 9,
    GW_BS_GATHER_START = 10,
    GW_BS_SHRINK = 11,
    GW_BS_MEMBERS = 12,
    GW_BS_JOIN = 13,
    GW_BS_GROW = 14,
    GW_BS_GROWN = 15,
    GW_BS_RING_OPEN = 16,
    GW_BS_RING_PEER = 17,
    GW_BS_PULSE = 18,                /* a rank's news for `gradwire status` (to the referee) */
    GW_BS_STATUS_ASK = 19,           /* `gradwire status` asks rank 0 (a nonce, as JOIN) */
    GW_BS_STATUS = 20,               /* rank 0's answer, once the asker proved the token */
    GW_BS_CLOCK = 21,                /* a rank's clock reading, echoed with the referee's */
    GW_BS_BYE = 22,                  /* rank 0 closed its communicator: no more verdicts */
    GW_BS_DEPOSED = 23,              /* a survivor goes on without rank 0 (stopped or hung) */
    GW_BS_TYPE_LAST = GW_BS_DEPOSED, /* the highest type (a new one moves it) */
} gw_bs_type_t;

/* What a rank is doing, as it tells the referee every quarter second or
 * so while it calls collectives (bootstrap_pulse.c), and what `gradwire
 * status` gets back for each rank. */
typedef struct gw_bs_pulse {
    uint64_t seq;                    /* its newest collective */
    uint64_t done;                   /* collectives completed */
    uint64_t bytes_sent, bytes_recv; /* posted to and from all peers */
    uint32_t op_kind, step;          /* of the newest collective (kind < 256) */
    uint32_t running;                /* 1: in it now; 0: between collectives */
    int32_t waiting_on;              /* -1: none */
    uint32_t since_ms;               /* in it (running), or since it ended */
    uint32_t npeers;                 /* <= GW_BS_PULSE_PEERS */
    struct {
        uint32_t peer;
        uint64_t sent, recv;
    } peers[GW_BS_PULSE_PEERS];
} gw_bs_pulse_t;

/* One rank in a STATUS: its pulse and how old it was when rank 0 sent it
 * (GW_BS_STATUS_NEVER: no pulse yet). */
#define GW_BS_STATUS_NEVER 0xffffffffu
typedef struct gw_bs_rank_status {
    uint32_t rank;
    uint32_t age_ms;
    gw_bs_pulse_t pulse;
} gw_bs_rank_status_t;

/* PULSE: the encoder returns the length; the decoder refuses a kind >=
 * 256, running other than 0 or 1, waiting_on < -1, more peers than
 * GW_BS_PULSE_PEERS or a length that does not fit npeers. */
size_t gw__bs_encode_pulse(const gw_bs_pulse_t *m, uint8_t out[GW_BS_PULSE_MAX_LEN]);
gw_status_t gw__bs_decode_pulse(const uint8_t *buf, size_t len, gw_bs_pulse_t *out,
                                const char **why);
/* CLOCK: a rank's CLOCK_MONOTONIC when it asked (ns), and rank 0's when
 * its referee answered (0 in the question). */
void gw__bs_encode_clock(uint64_t asked_ns, uint64_t root_ns, uint8_t out[GW_BS_CLOCK_LEN]);
gw_status_t gw__bs_decode_clock(const uint8_t *buf, size_t len, uint64_t *asked_ns,
                                uint64_t *root_ns, const char **why);
/* STATUS_ASK: the asker's nonce (JOIN's layout). */
void gw__bs_encode_status_ask(const uint8_t nonce[GW_BS_NONCE_LEN],
                              uint8_t out[GW_BS_STATUS_ASK_LEN]);
gw_status_t gw__bs_decode_status_ask(const uint8_t *buf, size_t len, uint8_t nonce[GW_BS_NONCE_LEN],
                                     const char **why);
/* STATUS: size ranks' news in one message, malloc'd into *out (*len its
 * length); NULL when memory is short. The decoder gives a malloc'd array
 * of *n records (n <= size <= GW_BS_STATUS_RANKS, ranks < size, each
 * rank once). */
uint8_t *gw__bs_encode_status(uint32_t size, const gw_bs_rank_status_t *r, uint32_t n, size_t *len);
gw_status_t gw__bs_decode_status(const uint8_t *buf, size_t len, uint32_t *size,
                                 gw_bs_rank_status_t **out, uint32_t *n, const char **why);

typedef enum gw_bs_report_kind {
    GW_BS_REPORT_FAILED = 1,  /* the communicator failed: culprit, blame */
    GW_BS_REPORT_STALLED = 2, /* timed out waiting for waiting_on */
    GW_BS_REPORT_STATE = 3,   /* the answer to an INQUIRE */
} gw_bs_report_kind_t;

/* What a rank tells the root's referee. */
typedef struct gw_bs_report {
    uint32_t kind; /* gw_bs_report_kind_t */
    gw_status_t status;
    int32_t culprit;    /* the rank it blames, -1 none */
    int32_t origin;     /* the rank that first reported it, -1 none */
    uint32_t blame;     /* gw_blame_kind_t (transport.h), 0..5 */
    int32_t waiting_on; /* the rank it waits for, -1 none */
    uint64_t seq;       /* the collective it is in (0: none, or point-to-point) */
    uint32_t stalled_ms;
    /* Where in that collective, from its flight recorder (0: unknown):
     * the collective's kind (gw_coll_kind_t, < 256) and its step. */
    uint32_t op_kind;
    uint32_t step;
} gw_bs_report_t;

/* The referee asks a rank what it waits for. */
typedef struct gw_bs_inquire {
    int32_t reporter; /* the rank whose report started the inquiry */
    uint64_t seq;
} gw_bs_inquire_t;

/* Whom the referee blames, and why. */
typedef struct gw_bs_verdict {
    gw_status_t status;
    int32_t culprit; /* -1: no rank could be named */
    int32_t origin;  /* the rank whose report started it */
    uint64_t seq;
    char reason[GW_BS_REASON_MAX + 1]; /* NUL-terminated */
} gw_bs_verdict_t;

/* A rank asks to shrink the job to the ranks that ask (bootstrap_shrink.c). */
typedef struct gw_bs_shrink_req {
    uint32_t port;      /* rank 0: the shrunk job's root port (1..65535); others 0 */
    uint32_t window_ms; /* at most INT32_MAX */
} gw_bs_shrink_req_t;

/* The referee's answer to a SHRINK: this rank's place in the shrunk job. */
typedef struct gw_bs_members {
    gw_status_t status; /* GW_OK: a member; else why not (no member then) */
    int32_t new_rank;   /* -1 unless a member */
    uint32_t new_size;
    uint32_t port; /* the shrunk job's root port on rank 0's host */
} gw_bs_members_t;

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
/* Ranks must be >= -1, the kind and blame known, a REPORT's status a known
 * status (GW_OK only in a STATE), a VERDICT's a known error; the verdict's
 * reason is cut and made printable as a REJECT's is. The encoders return
 * the message length. */
size_t gw__bs_encode_report(const gw_bs_report_t *m, uint8_t out[GW_BS_REPORT_LEN]);
size_t gw__bs_encode_inquire(const gw_bs_inquire_t *m, uint8_t out[GW_BS_INQUIRE_LEN]);
size_t gw__bs_encode_verdict(const gw_bs_verdict_t *m, uint8_t out[GW_BS_VERDICT_MAX_LEN]);

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
gw_status_t gw__bs_decode_report(const uint8_t *buf, size_t len, gw_bs_report_t *out,
                                 const char **why);
gw_status_t gw__bs_decode_inquire(const uint8_t *buf, size_t len, gw_bs_inquire_t *out,
                                  const char **why);
gw_status_t gw__bs_decode_verdict(const uint8_t *buf, size_t len, gw_bs_verdict_t *out,
                                  const char **why);
/* GATHER_START: rank 0 has begun an all-gather and waits wait_ms more for
 * the blocks; a rank that has it waits for rank 0's word that long (plus a
 * margin) even past its own deadline (bootstrap_gather.c). */
void gw__bs_encode_gather_start(uint32_t wait_ms, uint8_t out[GW_BS_GATHER_START_LEN]);
gw_status_t gw__bs_decode_gather_start(const uint8_t *buf, size_t len, uint32_t *wait_ms,
                                       const char **why);
/* SHRINK and MEMBERS: a SHRINK's port is 0..65535 and its window at most
 * INT32_MAX; a MEMBERS' status is a known status, a member (GW_OK) has
 * 0 <= new_rank < new_size and a port in 1..65535, anything else has
 * new_rank -1. */
void gw__bs_encode_shrink(const gw_bs_shrink_req_t *m, uint8_t out[GW_BS_SHRINK_LEN]);
gw_status_t gw__bs_decode_shrink(const uint8_t *buf, size_t len, gw_bs_shrink_req_t *out,
                                 const char **why);
void gw__bs_encode_members(const gw_bs_members_t *m, uint8_t out[GW_BS_MEMBERS_LEN]);
gw_status_t gw__bs_decode_members(const uint8_t *buf, size_t len, gw_bs_members_t *out,
                                  const char **why);
/* JOIN, GROW and GROWN. A GROW is a SHRINK's layout with its checks; a
 * GROWN is a MEMBERS' layout with its checks, except that a member's port
 * may be 0 (nobody joined: the communicator stays) and no port is beyond
 * 65535. */
void gw__bs_encode_join(const uint8_t nonce[GW_BS_NONCE_LEN], uint8_t out[GW_BS_JOIN_LEN]);
gw_status_t gw__bs_decode_join(const uint8_t *buf, size_t len, uint8_t nonce[GW_BS_NONCE_LEN],
                               const char **why);
void gw__bs_encode_grow(const gw_bs_shrink_req_t *m, uint8_t out[GW_BS_GROW_LEN]);
gw_status_t gw__bs_decode_grow(const uint8_t *buf, size_t len, gw_bs_shrink_req_t *out,
                               const char **why);
void gw__bs_encode_grown(const gw_bs_members_t *m, uint8_t out[GW_BS_GROWN_LEN]);
gw_status_t gw__bs_decode_grown(const uint8_t *buf, size_t len, gw_bs_members_t *out,
                                const char **why);
/* RING_OPEN (no payload) and RING_PEER (the neighbour's address, whose
 * contents the caller checks with gw__sock_addr_get). */
void gw__bs_encode_ring_open(uint8_t out[GW_BS_RING_OPEN_LEN]);
/* BYE (no payload): the referee's last word when rank 0 closes. */
void gw__bs_encode_bye(uint8_t out[GW_BS_BYE_LEN]);
/* DEPOSED (no payload): a survivor's last word to a rank 0 that did not
 * answer its shrink in time; it goes on under an heir (bootstrap_shrink.c). */
void gw__bs_encode_deposed(uint8_t out[GW_BS_DEPOSED_LEN]);
void gw__bs_encode_ring_peer(const uint8_t addr[GW_BS_RING_ADDR_LEN],
                             uint8_t out[GW_BS_RING_PEER_LEN]);
gw_status_t gw__bs_decode_ring_peer(const uint8_t *buf, size_t len,
                                    uint8_t addr[GW_BS_RING_ADDR_LEN], const char **why);
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
