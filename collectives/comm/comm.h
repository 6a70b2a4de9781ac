/*
 * comm.h - the communicator's internals and the core's own interfaces: its
 * state (comm_state.c), the scheduler of non-blocking calls (async.c) and
 * the handles of non-blocking point-to-point calls (p2p_api.c).
 *
 * blame.c agrees with the other ranks, through rank 0's referee, on whom a
 * failure is blamed.
 *
 * Sub-communicators (comm_split.c: gw_comm_split, gw_comm_dup) are
 * communicators like any other to everything above the transport: their
 * own rank, size, sequence numbers, sticky failure, scratch and handles.
 * What they share is the root's: the communicator that gw_comm_init made
 * owns the one transport, the bootstrap (and rank 0's referee), the claim
 * on the transport (`driving`, abort_requested) and the one progress
 * thread with its one queue (async). A child holds a reference on its
 * root (`refs`), and a root that the application destroyed while children
 * live stays allocated, closed to the application, until the last of them
 * is destroyed. A child reaches the transport through `to_root` (its rank
 * -> the root's rank, which is the transport's), and every message it
 * posts carries its communicator id (tag.comm_id, tag.c), which keeps its
 * messages apart from every other communicator's in the transports'
 * matching and mismatch checks. Ranks in gw_comm_blame_t and in the
 * requests' `peer` are root (transport) ranks; comm->culprit and
 * comm->origin are this communicator's own.
 *
 * The algorithms see this through coll.h; the compression layer through
 * compress/codec.h. The scheduler knows no collective and no codec: a call
 * it runs brings its own execute function in its handle.
 */
#ifndef GW_COLLECTIVES_COMM_COMM_H
#define GW_COLLECTIVES_COMM_COMM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "collectives/comm/topo.h"
#include "collectives/msg/tag.h"
#include "collectives/tuning.h"
#include "common/log.h"
#include "gradwire.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/select.h"
#include "transport/transport.h"

struct gw_comm {
    int rank;
    int size;
    gw_logger_t log;
    /* The last ERROR logged through log (gw_last_error(comm)); log.slot
     * points here. A child's log points at its own. */
    gw_log_slot_t last_error;
    int timeout_ms;
    gw_algo_t algo; /* GW_ALGO_AUTO: cost model */
    /* GW_P2P_SEND_STANDARD: public sends ask for no receipt (p2p_api.c) */
    gw_p2p_send_t p2p_send;
    gw_bootstrap_t *bootstrap;
    gw_transport_t *transport; /* NULL when size == 1 */
    gw_tuning_t tuning;
    /* Which ranks share a host and the host-contiguous ring order, from the
     * host ids of the address exchange (topo.h); empty (NULL arrays) for a
     * communicator of one rank: the algorithms then use rank order. */
    gw_topo_t topo;
    uint64_t seq;           /* sequence number of the last collective started */
    gw_msg_tag_t tag;       /* tag of the call in progress (tag.c) */
    gw_sig_memo_t sig_memo; /* the last signatures computed (tag.c) */
    gw_status_t failed;     /* sticky: GW_OK while the communicator is healthy */
    int culprit;            /* the rank the failure is blamed on, -1: none */
    int origin;             /* the rank that first reported the failure */
    int watching;           /* the bootstrap's watch runs: failures go to the referee */
    int blame_wait_ms;      /* how long a failing rank waits for the verdict */
    int64_t watch_due_ms;   /* gw_test: when it next looks at the watch */
    size_t chunk_bytes;     /* pipelining granularity of ring and tree */
    /* Per collective kind, a bit per algorithm already named at INFO: the
     * first call of each kind with each algorithm says which ran (api.c). */
    uint32_t algo_logged[GW_COLL_KIND_END];
    /* Payload bytes of every send posted so far (p2p.c counts them where
     * it posts them), whatever algorithm posted it: the compressed calls'
     * statistics take differences of it. */
    uint64_t bytes_sent;
    /* Non-blocking calls: the progress thread and its queue, created by the
     * first gw_i* call (NULL until then). */
    struct gw_async *async;
    /* The open gw_group_start of this communicator (api/group.c), or NULL. */
    struct gw_group *group;
    /* Set by gw_comm_abort from any thread; the thread driving the transport
     * notices it within one progress round and fails the communicator. */
    atomic_int abort_requested;
    /* 1 while a thread drives the transport (a call on the caller's thread,
     * the progress thread running a queued call, or gw_comm_abort telling
     * the peers): the transport is not thread-safe, so at most one at a time
     * (comm_state.c). */
    atomic_int driving;
    /* The application thread inside a call on this communicator or on any
     * that shares its transport (a root's only; 0: none), how deep (its
     * own thread only), and the id of the communicator it called: see
     * gw__comm_enter. */
    atomic_uintptr_t caller;
    int caller_depth;
    atomic_uint caller_comm;
    /* Scratch memory reused across calls (grown on demand, never shrunk). */
    void *scratch;
    size_t scratch_len;
    /* Non-blocking point-to-point calls not yet completed (p2p_api.c). */
    struct gw_handle *p2p_pending;
    int p2p_npending;
    /* The tagged calls' matching engine (collectives/msg/match.c): NULL
     * until the first tagged call. */
    struct gw_match *match;
    /* ---- sub-communicators (comm_split.c) ---- */
    struct gw_comm *root; /* the communicator that owns the transport; NULL: this one */
    int *to_root;         /* child rank -> root rank; NULL on a root */
    uint32_t id;          /* communicator id in every tag (0: a root) */
    uint32_t splits;      /* gw_comm_split / gw_comm_dup calls made on this one */
    atomic_int refs;      /* a root: 1 while the application holds it, +1 per live child */
    int destroyed;        /* a root the application destroyed while children live */
    /* ---- what gw_comm_shrink (comm_shrink.c) builds the shrunk one with:
     * copies of the resolved settings, NULL where unset (a root only) ---- */
    struct {
        char *token, *transport, *ifname;
        int nsocks;
        /* The job's root port, where joiners knock: the first root's,
         * kept through shrinks and grows (0: none); an heir listens there
         * (comm_shrink.c). */
        int join_port;
    } recipe;
    /* ---- device buffers (collectives/device) ---- */
    gw_buffers_t buffers;     /* gw_comm_set_buffers */
    struct gw_device *device; /* a root's engine and staging; NULL until needed */
    /* The last GW_FR_ENTRIES calls and the timeline (flight_recorder.h);
     * NULL when both are off. */
    struct gw_fr *fr;
};

/* The communicator whose transport, bootstrap, claim and queue this one
 * uses: itself, or the root it was split from. */
static inline gw_comm_t *gw__comm_root(gw_comm_t *comm) { return comm->root ? comm->root : comm; }

/* A rank of this communicator as the transport (the root) names it, and
 * back (-1 for a rank that is not a member, or -1 itself). */
static inline int gw__comm_to_root(const gw_comm_t *comm, int rank)
{
    return rank < 0 || rank >= comm->size || !comm->to_root ? rank : comm->to_root[rank];
}
int gw__comm_from_root(const gw_comm_t *comm, int root_rank);

/* gw_comm_abort was called on this communicator or on any that shares its
 * transport (an abort fails the one transport, so it fails them all). */
static inline int gw__comm_abort_requested(gw_comm_t *comm)
{
    return atomic_load(&comm->abort_requested) ||
           atomic_load(&gw__comm_root(comm)->abort_requested);
}

/* One collective call, as the public API received it. */
typedef struct gw_coll_args {
    gw_coll_kind_t kind;
    const void *sendbuf;
    void *recvbuf;
    size_t count; /* count, sendcount or recvcount, as the call names it */
    gw_dtype_t dtype;
    gw_op_t op;
    int root;
    /* gw_alltoallv and gw_allgatherv (api_more.c): per-rank element counts
     * and displacements, the caller's arrays (valid until completion). */
    const size_t *sendcounts, *sdispls, *recvcounts, *rdispls;
    /* GW_PREMUL_SUM (api.c's *_premul calls): premul says the call carries
     * this rank's factor. */
    double factor;
    int premul;
} gw_coll_args_t;

/* A non-blocking call (gw_handle_t in the public API). A collective's handle
 * is queued for the progress thread (async.c), which runs it with the
 * handle's own execute function; a point-to-point handle (gw_isend,
 * gw_irecv) holds its transport request, which the thread that tests or
 * waits for it progresses (p2p_api.c). */
struct gw_handle {
    struct gw_handle *next; /* the progress thread's queue, or p2p_pending */
    gw_comm_t *comm;
    /* Collectives: run the call on the thread that drives the transport
     * (api.c for the dense collectives, compress_api.c for the compressed
     * allreduce), with args and ctx, the execute function's own data. */
    gw_status_t (*execute)(gw_comm_t *comm, const gw_handle_t *h);
    gw_coll_args_t args;
    void *ctx;
    int is_p2p;
    gw_request_t req;      /* point-to-point only */
    int64_t last_moved_ms; /* point-to-point: when gw_test last saw bytes move */
    size_t last_moved;
    gw_status_t status;
    atomic_int done;
    /* Device buffers (collectives/device): a staged collective runs
     * host_execute on pinned copies; dev_send and dev_recv are the device
     * ordinals of its buffers (-1: host). A staged point-to-point receive
     * lands in `staged` (pinned, staged_len bytes) and is copied to
     * staged_dst when it completes; a staged send's copy is freed then. */
    gw_status_t (*host_execute)(gw_comm_t *comm, const gw_handle_t *h);
    int dev_send, dev_recv;
    void *staged, *staged_dst;
    size_t staged_len;
    /* A tagged receive (gw_irecv_tagged, collectives/msg/match.c): what it
     * accepts (source and tag may be GW_ANY_SOURCE, GW_ANY_TAG), where it
     * waits, and what it matched (status, written to out on success). */
    struct {
        int is_recv;
        int source, tag;
        size_t count;
        uint32_t sig;            /* gw__sig_p2p of count and dtype */
        void *buf;               /* where the payload goes (staged copy included) */
        int matched;             /* a message was assigned to it */
        struct gw__unexp *from;  /* the unexpected message it waits for */
        struct gw_handle *qnext; /* the engine's queue of posted receives */
        gw_msg_status_t got;
        gw_msg_status_t *out;
    } tagged;
};

/* ---- creation (api/comm_init.c) ------------------------------------------ */

/* The timeout when neither the config nor GW_TIMEOUT_MS gives one (ms). */
#define GW_DEFAULT_TIMEOUT_MS 300000

/* ---- shared state (comm_state.c) ----------------------------------------- */

/* Claim the transport for the calling thread (waiting while gw_comm_abort
 * holds it for a moment) and give it back; giving it back also carries out
 * an abort that another thread requested meanwhile. */
void gw__comm_drive_begin(gw_comm_t *comm);
void gw__comm_drive_end(gw_comm_t *comm);

/* An application thread's call on comm (what: its name), as one of the
 * communicators that share a transport (a root and every communicator
 * split or duplicated from it): GW_OK and the family is this thread's
 * until gw__comm_leave (calls nest on one thread). While another thread is
 * inside a call on any of them, the call is refused with
 * GW_ERR_UNSUPPORTED, logged, and the shared transport is aborted: the
 * transport matches messages per pair of ranks in posting order, so two
 * threads would interleave the family's calls in a different order on each
 * rank, which ends in a false mismatch or a hang (comm_split.c). */
gw_status_t gw__comm_enter(gw_comm_t *comm, const char *what);
void gw__comm_leave(gw_comm_t *comm);

/* Scratch buffer of at least len bytes owned by the communicator. */
gw_status_t gw__comm_scratch(gw_comm_t *comm, size_t len, void **out);

/* A failure as this rank sees it, before the referee's verdict. */
typedef struct gw_comm_blame {
    gw_status_t status;
    int culprit; /* -1: nobody */
    int origin;  /* -1: this rank */
    gw_blame_kind_t kind;
    int waiting_on;     /* GW_BLAME_TIMEOUT: the peer waited for, else -1 */
    int64_t stalled_ms; /* ... and for how long */
    int settled;        /* already the referee's verdict */
} gw_comm_blame_t;

/* Mark the communicator failed (first error wins), tell peers via the
 * transport's abort, and return the sticky status. The failure is blamed
 * on the transport's culprit when the transport failed (the peer it
 * named, or the culprit a peer's abort named), on this rank otherwise:
 * then it is this rank's own fault. */
gw_status_t gw__comm_fail(gw_comm_t *comm, gw_status_t status);
/* gw__comm_fail blaming `culprit` (a rank, or -1 for nobody), first
 * reported by `origin` (-1: this rank), found as `kind` says. */
gw_status_t gw__comm_fail_blame(gw_comm_t *comm, gw_status_t status, int culprit, int origin,
                                gw_blame_kind_t kind);
/* The same for a failure described in full; *b is settled first
 * (gw__comm_blame_settle) unless b->settled. */
gw_status_t gw__comm_fail_with(gw_comm_t *comm, gw_comm_blame_t *b);

/* ---- agreeing on the culprit (blame.c) ----------------------------------- */

/* How often a rank that waits, or keeps testing a handle, looks at the
 * bootstrap's watch: one non-blocking read, and only in waits that last. */
#define GW_COMM_WATCH_MS 20

/* After connect: start the bootstrap's watch (rank 0: its referee). A
 * communicator without one blames what each rank saw itself (warned). */
void gw__comm_watch_start(gw_comm_t *comm);
/* The referee's grace period for a communicator of this timeout: also how
 * long rank 0 waits for the others' word when the join fails. */
int gw__comm_grace_ms(int timeout_ms);
/* Report the failure *b to the referee and, unless it is this rank's own,
 * replace status, culprit and origin by the verdict (logging it), or by
 * rank 0 when a timeout got no verdict; bounded by comm->blame_wait_ms. */
void gw__comm_blame_settle(gw_comm_t *comm, gw_comm_blame_t *b);
/* For a rank waiting for reqs (stalled_ms since they last moved): answer
 * the referee's question, and fail the communicator with its verdict if
 * one came. GW_OK or that failure. */
gw_status_t gw__comm_watch(gw_comm_t *comm, gw_request_t *const *reqs, int n, int64_t stalled_ms);

/* ---- news for `gradwire status` (pulse.c) -------------------------------- */

/* Tell rank 0's referee what this rank is doing, unless it did less than
 * GW_COMM_PULSE_MS ago (a root communicator with a recorder and a watch
 * only; never blocks). Returns 1 when it did. */
int gw__comm_pulse(gw_comm_t *comm, int64_t now_ns);
/* The end of a collective whose outcome is `status`: the recorder's entry
 * closed (gw__fr_end), and when a pulse is due, the pulse and a look at
 * the watch: a verdict that came meanwhile fails a call that succeeded
 * (pulse.c says why). Returns the call's status. */
gw_status_t gw__comm_op_end(gw_comm_t *comm, gw_status_t status);

#endif
