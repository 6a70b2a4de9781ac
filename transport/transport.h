/*
 * transport.h - the interface every transport implements: move framed
 * messages between two ranks of one job.
 *
 * A transport instance connects this rank to every other rank it is given
 * an address for: all of them in connect(), or each when the first request
 * for it is posted (params.lazy: GW_CONNECT=lazy, the default). Messages
 * between a pair of ranks are delivered in the order they were posted, and matched in posting
 * order against the receives posted for that peer: the n-th receive posted
 * for peer p gets the n-th message p sent to us.
 *
 * Every message carries a tag (collective sequence number and a signature of
 * the collective's arguments) and its length. A receive whose posted tag or
 * length differs from the incoming message's fails with GW_ERR_MISMATCH
 * before a byte of payload is written to the user's buffer. That is how ranks
 * that called a collective with different arguments get an error instead of
 * corrupted memory.
 *
 * Progress is explicit and single-threaded: nothing moves unless the owner
 * calls progress(). progress() also reads ahead the header of the next
 * message on connections that have no posted receive (never payload), so that
 * a message from a collective that disagrees with ours is detected even when
 * no receive would ever be posted for it (see gw__tag_conflicts).
 *
 * Failure: a peer that closes without a goodbye, resets, sends garbage or an
 * abort frame fails every pending request and every later call with an error
 * naming that peer (GW_ERR_REMOTE, or the status carried by the abort frame).
 * An abort frame also carries whom its sender blames and which rank first
 * reported the failure (gw_abort_info_t), so that a failure relayed from
 * rank to rank keeps naming the rank at fault, not the messenger.
 */
#ifndef GW_TRANSPORT_H
#define GW_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/log.h"
#include "gradwire.h"

/* Bytes of a transport address blob exchanged through the bootstrap. The
 * selection layer (select.h) packs the blobs of several transports and a
 * host id into one blob of this size, so each transport should keep its own
 * well below it (TCP uses 28 bytes, shared memory 32, verbs 99 and 108 +
 * 99 more for each rail after the first, up to 4: 405). */
#define GW_TRANSPORT_ADDR_MAX 512

typedef struct gw_msg_tag {
    uint64_t seq; /* collective sequence number on the communicator, from 1 */
    uint32_t sig; /* hash of (collective kind, count, dtype, op, root, algo) */
    /* The communicator the message belongs to: 0 for one that gw_comm_init
     * made, an id every member agreed on for a sub-communicator
     * (collectives/api/comm_split.c), which shares its root's transport.
     * Sequence numbers of different communicators are unrelated. */
    uint32_t comm_id;
} gw_msg_tag_t;

/* Non-zero when a pending header with tag `pending` proves that the peer is
 * in a collective that disagrees with ours (`current`): same communicator
 * and sequence number but another signature, or an older sequence number
 * of the same communicator, which we will never receive. A newer sequence
 * number is fine (the peer finished early), and so is any message of
 * another communicator: the peer may be in that one's next call while we
 * finish ours (a sub-communicator's, or its parent's). */
static inline int gw__tag_conflicts(const gw_msg_tag_t *pending, const gw_msg_tag_t *current)
{
    return pending->comm_id == current->comm_id &&
           (pending->seq < current->seq ||
            (pending->seq == current->seq && pending->sig != current->sig));
}

/* Whether a message tagged `got` is the one a receive tagged `want` waits
 * for (the length is checked besides). */
static inline int gw__tag_equal(const gw_msg_tag_t *got, const gw_msg_tag_t *want)
{
    return got->seq == want->seq && got->sig == want->sig && got->comm_id == want->comm_id;
}

typedef enum gw_req_kind { GW_REQ_SEND = 1, GW_REQ_RECV = 2 } gw_req_kind_t;

/* gw_request_t.flags, set by the caller before isend.
 * GW_REQ_RECEIPT: the send completes only once the receiver has matched
 * it against its receive and accepted it (tag and length agree), not when
 * the data has left: the receiver's transport answers with a receipt, a
 * control frame (or shared counter, or immediate) outside message matching
 * that names the message by its index in the pair's send order. A receiver
 * that rejects the message fails and aborts, and the abort (status, origin,
 * culprit) fails the send; the receipt still due goes out with or before
 * the abort, so the messages accepted before it complete with GW_OK (a
 * sender that hears of the failure from the referee first waits a while
 * for that abort: blame.c). The public point-to-point calls ask for it; the
 * collectives' own sends do not (their results are checked anyway) and
 * cost nothing extra. A receipt that never comes is a stall like any other:
 * GW_ERR_TIMEOUT after the caller's timeout, naming the peer. */
#define GW_REQ_RECEIPT 1u
/* GW_REQ_GATED: the send's `gate` is set (gw_req_gate_t, below); without
 * the flag the field is never read. */
#define GW_REQ_GATED 2u
/* GW_REQ_ANNOUNCE: the send's receiver finds its messages by peek()
 * (below: the tagged point-to-point calls). A transport whose receiver
 * would learn of a message only once it posted a receive for it (verbs:
 * a large message waits for the receiver's clear-to-send) tells the
 * receiver of the message first, so that its peek() shows it. On a
 * receive: it is posted for a message that peek() showed, which was sent
 * with the flag. A composite transport (the verbs rails) sends such a
 * message whole over the one sub-transport its peek() looks at, never
 * cut into parts, and takes the receive from there. The others, whose
 * messages' headers arrive anyway, ignore the flag. */
#define GW_REQ_ANNOUNCE 4u

/* The parts of one message that a composite transport sends over several
 * of its own (the verbs rails: transport/ib/ib_rails.c) share a gate: a
 * send with one checks the receiver's tag and length for its part as
 * usual, failing on a mismatch, and counts itself in `matched`, but moves
 * no payload until all `need` parts were matched so. So a receive that
 * disagrees with any part keeps every byte of its buffer untouched, as
 * the contract above promises. Only the verbs transport, the only one
 * that is ever given gated sends, honours it. */
typedef struct gw_req_gate {
    int need;
    int matched;
} gw_req_gate_t;

/* A request is storage owned by the caller, filled in before isend/irecv and
 * left untouched by the caller until `complete` is non-zero. The transport
 * links it into its queues through `next` and may use `priv` freely. */
typedef struct gw_request {
    gw_req_kind_t kind;
    int peer;
    gw_msg_tag_t tag;
    void *buf; /* const for sends */
    size_t len;
    unsigned flags;      /* GW_REQ_RECEIPT, _GATED, _ANNOUNCE or 0; the transport only reads it */
    gw_req_gate_t *gate; /* GW_REQ_GATED sends: the gate of their message's parts */
    /* Written by the transport: */
    int complete;       /* set once, when the request finished or failed */
    gw_status_t status; /* GW_OK or the failure, valid when complete */
    size_t bytes_done;
    struct gw_request *next;
    uint64_t priv[8];
} gw_request_t;

typedef struct gw_transport gw_transport_t; /* each implementation embeds this first */

/* What an abort tells the peers (and what a peer's abort told us): the
 * status, the rank that first reported the failure, and the rank it is
 * blamed on; -1 where a rank is not known. A rank that aborts because a
 * peer aborted passes the peer's origin and culprit on unchanged. */
typedef struct gw_abort_info {
    gw_status_t status; /* GW_OK is sent as GW_ERR_ABORTED */
    int origin;
    int culprit;
} gw_abort_info_t;

/* How a transport came to name its culprit (gw_transport_t.blame), which
 * decides how far the name is to be trusted: a peer that sent garbage or
 * another collective's message is at fault beyond doubt; a connection that
 * broke may be a death or a peer that aborted in the middle of a message;
 * an abort names whom its sender blamed. */
typedef enum gw_blame_kind {
    GW_BLAME_NONE = 0,    /* no rank named */
    GW_BLAME_SELF = 1,    /* this rank's own fault */
    GW_BLAME_PEER = 2,    /* the peer sent something wrong (mismatch, protocol) */
    GW_BLAME_LOST = 3,    /* the connection broke, or the peer's process is gone */
    GW_BLAME_ABORT = 4,   /* the peer aborted, naming culprit and origin */
    GW_BLAME_TIMEOUT = 5, /* we waited for the peer in vain */
} gw_blame_kind_t;

typedef struct gw_transport_params {
    int rank;
    int size;
    const gw_logger_t *log;
    int timeout_ms;     /* connection establishment budget */
    const char *ifname; /* GW_SOCKET_IFNAME, or NULL */
    int nsocks;         /* sockets (or QPs) per peer, >= 1 */
    uint8_t job_id[16]; /* random per job, from the bootstrap root; no secret */
    /* HMAC(job token, "gradwire data plane" || job id), from the bootstrap
     * (gw__bootstrap_data_key): every data connection proves knowledge of
     * it before it counts. Never the token itself, so a transport that
     * leaks its state leaks nothing that admits to another job. */
    uint8_t data_key[32];
    /* The local address of our bootstrap connection to the root: the
     * interface that routes to the root, used when no ifname is given. */
    struct sockaddr_storage default_addr;
    socklen_t default_addr_len;
    /* The user asked for this transport by name (GW_TRANSPORT): finding no
     * device is then an error to log as one, not a reason to let the next
     * transport take over quietly. */
    int forced;
    /* Connect to a peer when the first request for it is posted, not all
     * of them in connect() (GW_CONNECT=lazy, the communicator's default). */
    int lazy;
} gw_transport_params_t;

typedef struct gw_transport_ops {
    size_t size; /* sizeof(gw_transport_ops_t), for forward compatibility */
    /* Create an instance and start listening; fills our address blob
     * (at most GW_TRANSPORT_ADDR_MAX bytes) to be exchanged via bootstrap. */
    gw_status_t (*open)(const gw_transport_params_t *params, gw_transport_t **out,
                        uint8_t addr[GW_TRANSPORT_ADDR_MAX]);
    /* Connect to every peer given all ranks' address blobs (size *
     * GW_TRANSPORT_ADDR_MAX bytes, ours included). Returns once every
     * connection is up and verified (job id, ranks), or fails naming the peer;
     * a lazy transport (params.lazy) only reads the addresses here and
     * connects a peer when the first request for it is posted.
     * A peer whose blob is all zero is not this transport's: another one
     * carries it (select.h). Skip it: no connection, nothing expected from
     * it, and no request is ever posted for it. */
    gw_status_t (*connect)(gw_transport_t *t, const uint8_t *all_addrs);
    gw_status_t (*isend)(gw_transport_t *t, gw_request_t *req);
    gw_status_t (*irecv)(gw_transport_t *t, gw_request_t *req);
    /* Move data on every connection; wait at most wait_ms for activity when
     * nothing can be done right away (0: never block). `current` is the tag
     * of the collective in progress, or NULL. Returns GW_OK, or the error
     * that broke the transport (after failing the pending requests). */
    gw_status_t (*progress)(gw_transport_t *t, const gw_msg_tag_t *current, int wait_ms);
    /* Register memory for zero-copy transports; TCP returns UNSUPPORTED. */
    gw_status_t (*mem_reg)(gw_transport_t *t, void *buf, size_t len, void **handle);
    gw_status_t (*mem_dereg)(gw_transport_t *t, void *handle);
    /* Fail the transport (if it has not failed yet), tell every peer that
     * we abort, with why->status, why->origin and why->culprit, and drop
     * the connections. Never waits on a peer for long (each transport's
     * shutdown budget). */
    gw_status_t (*abort)(gw_transport_t *t, const gw_abort_info_t *why);
    /* Say goodbye to every peer, close and free. NULL-safe. */
    void (*close)(gw_transport_t *t);
    /* The tag and length of the next message from peer, when its header
     * has arrived (read ahead) and no receive for peer is posted: 1. 0
     * when none has arrived yet or a receive is posted; -1 when this
     * transport cannot tell (NULL in the table means the same). Never
     * consumes, never blocks. The tagged point-to-point calls post a
     * receive only for a message they saw here (collectives/msg/match.c),
     * so they never take another message of the pair. */
    int (*peek)(gw_transport_t *t, int peer, gw_msg_tag_t *tag, size_t *len);
} gw_transport_ops_t;

typedef struct gw__transport_class gw__transport_class_t; /* transport/base.h */

/* The base every implementation embeds first; the fields from `cls` on are
 * kept by the base's functions (transport/base.h), not by callers. */
struct gw_transport {
    const gw_transport_ops_t *ops;
    /* What the instance is, for logs and gw_comm_transport(): "tcp",
     * "shm", "ib", or the mux's "mux" before connect() and "shm+tcp" etc.
     * after it. Lives as long as the instance. */
    const char *name;
    const gw_logger_t *log;
    int rank;
    int size;
    const gw__transport_class_t *cls;
    int connected;      /* connect() succeeded */
    gw_status_t failed; /* sticky: GW_OK while healthy */
    /* The rank the first failure is blamed on (gw__transport_peer_fail's
     * peer, or the culprit a peer's abort named), the rank that first
     * reported it (this rank for a failure detected here, a peer's abort's
     * origin otherwise), -1 when not known, and how the culprit was found.
     * Valid once failed != GW_OK. */
    int culprit;
    int origin;
    gw_blame_kind_t blame;
};

/* Abort t with `status`, naming no culprit (tests, and callers that know
 * nothing of blame). */
static inline gw_status_t gw__transport_abort(gw_transport_t *t, gw_status_t status)
{
    gw_abort_info_t why = {.status = status, .origin = -1, .culprit = -1};
    return t->ops->abort(t, &why);
}

/* t->ops->peek, or -1 where the transport has none. */
static inline int gw__transport_peek(gw_transport_t *t, int peer, gw_msg_tag_t *tag, size_t *len)
{
    return t->ops->peek ? t->ops->peek(t, peer, tag, len) : -1;
}

extern const gw_transport_ops_t gw__tcp_transport_ops;
extern const gw_transport_ops_t gw__shm_transport_ops; /* ranks on this host */

/* Stubs for unsupported slots. */
gw_status_t gw__transport_mem_reg_unsupported(gw_transport_t *t, void *buf, size_t len,
                                              void **handle);
gw_status_t gw__transport_mem_dereg_unsupported(gw_transport_t *t, void *handle);

#endif
