/*
 * tag.h - the one home of message tags and argument signatures.
 *
 * Every message carries a tag: the sequence number of the call it belongs
 * to and a 32-bit signature of that call's arguments. The transports match
 * each message with the receive posted for it (exact tag and length) and,
 * while a rank is in a collective, check the messages nobody claimed yet
 * against that collective's tag (gw__tag_conflicts in transport.h), so
 * ranks that disagree about a call fail with GW_ERR_MISMATCH instead of
 * exchanging wrongly sized data. That detection is only as good as the tags
 * stamped here: every collective (dense, or a phase of a compressed one) and
 * every point-to-point message takes its signature and its tag from this
 * file, so the rules are the same for all of them.
 *
 * Every tag also names its communicator (comm_id: 0 for a communicator
 * gw_comm_init made, the id its members agreed on for one that
 * gw_comm_split or gw_comm_dup made), so that communicators sharing one
 * transport keep their own sequence numbers: messages of different
 * communicators never match each other and never conflict.
 *
 * A signature is FNV-1a over 64-bit words that describe the call, each word
 * hashed least significant byte first. The words and their order are part
 * of the wire format: changing them changes every tag.
 */
#ifndef GW_COLLECTIVES_MSG_TAG_H
#define GW_COLLECTIVES_MSG_TAG_H

#include <stddef.h>
#include <stdint.h>

#include "gradwire.h"

typedef struct gw_comm gw_comm_t;

/* Kinds of collectives, the first word of every collective's signature. */
typedef enum gw_coll_kind {
    GW_COLL_ALLREDUCE = 1,
    GW_COLL_BROADCAST,
    GW_COLL_REDUCE,
    GW_COLL_ALLGATHER,
    GW_COLL_REDUCE_SCATTER,
    GW_COLL_BARRIER,
    GW_COLL_ALLREDUCE_COMPRESSED, /* gw_allreduce_compressed (collectives/compress) */
    /* api_more.c. gw_allgatherv's count word is a digest of its counts
     * (every rank must pass the same); gw_alltoallv's is 0 (its counts
     * differ by rank: each pair's lengths are checked per message). */
    GW_COLL_ALLTOALL,
    GW_COLL_ALLTOALLV,
    GW_COLL_GATHER,
    GW_COLL_SCATTER,
    GW_COLL_ALLGATHERV,
    GW_COLL_KIND_END, /* one past the last kind */
} gw_coll_kind_t;

/* The first word of a point-to-point message's signature: distinct from
 * every gw_coll_kind_t. */
#define GW__SIG_P2P_KIND 0x70327000u

/* FNV-1a over words[0..n). */
uint32_t gw__sig_words(const uint64_t *words, size_t n);

/* The last collective's and the last point-to-point message's signature
 * of a communicator, with the words they were computed from. A loop makes
 * the same call again and again (a training step's allreduce, a
 * ping-pong's send and receive), and FNV-1a, one dependent multiply per
 * byte, took 40-50 ns over a collective's six words: a tenth of a 2-rank
 * allreduce of 16 bytes over shared memory. A repeated call now compares
 * its words and takes the signature kept; the values are FNV-1a's as
 * before (the wire format is unchanged). Each is touched only by its kind
 * of call, which the communicator already runs one at a time. */
typedef struct gw_sig_memo {
    uint64_t coll_words[6];
    uint32_t coll_sig;
    int coll_valid;
    size_t p2p_count;
    gw_dtype_t p2p_dtype;
    uint32_t p2p_sig;
    int p2p_valid;
} gw_sig_memo_t;

/* A collective's arguments: kind, count, dtype, op, root, algorithm. */
uint32_t gw__sig_coll(gw_coll_kind_t kind, size_t count, gw_dtype_t dtype, gw_op_t op, int root,
                      gw_algo_t algo);

/* One point-to-point message: its element count and dtype. */
uint32_t gw__sig_p2p(size_t count, gw_dtype_t dtype);
/* The same, through comm's memo (gw_sig_memo_t). */
uint32_t gw__comm_sig_p2p(gw_comm_t *comm, size_t count, gw_dtype_t dtype);

/* Start a collective: the next sequence number, with signature sig, becomes
 * the tag of every message the algorithms post until the next call. */
void gw__tag_collective(gw_comm_t *comm, uint32_t sig);

/* Shorthand for a dense collective: gw__tag_collective with gw__sig_coll. */
void gw__coll_begin(gw_comm_t *comm, gw_coll_kind_t kind, size_t count, gw_dtype_t dtype,
                    gw_op_t op, int root, gw_algo_t algo);

/* Tag a point-to-point message. It carries the sequence number the next
 * collective will have (the sequence itself does not advance), so that a
 * peer still in the previous collective leaves it alone and a peer that
 * starts the next collective instead of receiving it sees the same number
 * with another signature: see p2p_api.c. */
void gw__tag_p2p(gw_comm_t *comm, uint32_t sig);

/* The empty tag (sequence 0), which no message conflicts with: the tag of
 * a rank waiting for point-to-point messages outside any collective. */
void gw__tag_clear(gw_comm_t *comm);

#endif
