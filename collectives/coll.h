/*
 * coll.h - what the collective algorithms see: the communicator internals,
 * point-to-point helpers that add the current collective's tag and enforce
 * the timeout, and the algorithm entry points (one per file).
 *
 * Algorithms are given validated arguments (non-NULL buffers when count > 0,
 * no overflow, dtype/op in range, op never GW_AVG: the API layer reduces with
 * GW_SUM and divides afterwards) and the tag of the collective is already set
 * in comm->tag. They must:
 *  - exchange messages only through gw__p2p_* (so mismatches and dead peers
 *    are detected and nothing waits past the timeout);
 *  - post matching sends and receives in the same order on both ends of a
 *    pair (messages are matched in order per peer);
 *  - produce bitwise identical results on every rank;
 *  - work for every size >= 2 and count >= 0 (count 0 still exchanges the
 *    zero-length messages so that disagreeing ranks are caught).
 */
#ifndef GW_COLLECTIVES_COLL_H
#define GW_COLLECTIVES_COLL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "collectives/reduce_kernels.h"
#include "collectives/tuning.h"
#include "common/log.h"
#include "gradwire.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/transport.h"

struct gw_comm {
    int rank;
    int size;
    gw_logger_t log;
    int timeout_ms;
    gw_algo_t algo; /* GW_ALGO_AUTO: cost model */
    gw_bootstrap_t *bootstrap;
    gw_transport_t *transport; /* NULL when size == 1 */
    gw_tuning_t tuning;
    uint64_t seq;     /* sequence number of the last collective started */
    gw_msg_tag_t tag; /* tag of the collective in progress */
    gw_status_t failed; /* sticky: GW_OK while the communicator is healthy */
    size_t chunk_bytes; /* pipelining granularity of ring and tree */
    /* Non-blocking calls: the progress thread and its queue, created by the
     * first gw_i* call (NULL until then). */
    struct gw_async *async;
    /* Set by gw_comm_abort from any thread; the thread driving the transport
     * notices it within one progress round and fails the communicator. */
    atomic_int abort_requested;
    /* 1 while a thread drives the transport (a call on the caller's thread,
     * the progress thread running a queued call, or gw_comm_abort telling
     * the peers): the transport is not thread-safe, so at most one at a time
     * (comm_state.c). */
    atomic_int driving;
    /* Scratch memory reused across calls (grown on demand, never shrunk). */
    void *scratch;
    size_t scratch_len;
    /* Non-blocking point-to-point calls not yet completed (p2p_api.c). */
    struct gw_handle *p2p_pending;
    int p2p_npending;
};

/* Kinds of collectives, part of the signature in every message tag. */
typedef enum gw_coll_kind {
    GW_COLL_ALLREDUCE = 1,
    GW_COLL_BROADCAST,
    GW_COLL_REDUCE,
    GW_COLL_ALLGATHER,
    GW_COLL_REDUCE_SCATTER,
    GW_COLL_BARRIER,
    GW_COLL_ALLREDUCE_COMPRESSED, /* gw_allreduce_compressed (collectives/compress) */
} gw_coll_kind_t;

/* One collective call, as the public API received it. */
typedef struct gw_coll_args {
    gw_coll_kind_t kind;
    const void *sendbuf;
    void *recvbuf;
    size_t count; /* count, sendcount or recvcount, as the call names it */
    gw_dtype_t dtype;
    gw_op_t op;
    int root;
} gw_coll_args_t;

/* A non-blocking call (gw_handle_t in the public API). A collective's handle
 * is queued for the progress thread (async.c); a point-to-point handle
 * (gw_isend, gw_irecv) holds its transport request, which the thread that
 * tests or waits for it progresses (p2p_api.c). */
struct gw_handle {
    struct gw_handle *next; /* the progress thread's queue, or p2p_pending */
    gw_comm_t *comm;
    gw_coll_args_t args;
    struct gw_compress_state *cz_state; /* GW_COLL_ALLREDUCE_COMPRESSED only */
    int is_p2p;
    gw_request_t req;       /* point-to-point only */
    int64_t last_moved_ms;  /* point-to-point: when gw_test last saw bytes move */
    size_t last_moved;
    gw_status_t status;
    atomic_int done;
};

/* gw_test and gw_wait of point-to-point handles (p2p_api.c). */
gw_status_t gw__p2p_handle_test(gw_handle_t *h, int *done);
gw_status_t gw__p2p_handle_wait(gw_handle_t *h);
/* Before any collective: point-to-point handles still pending are a usage
 * error (their messages carry the next collective's sequence number), which
 * fails the communicator with GW_ERR_INVALID_ARG naming `what`. */
gw_status_t gw__p2p_check_idle(gw_comm_t *comm, const char *what);
/* gw_comm_destroy: complete pending point-to-point handles with
 * GW_ERR_ABORTED, so that gw_wait on them never touches the freed
 * communicator. */
void gw__p2p_abandon(gw_comm_t *comm);

/* Validate and run one collective on the calling thread, which must be the
 * thread that owns the transport (api.c). */
gw_status_t gw__coll_execute(gw_comm_t *comm, const gw_coll_args_t *args);
/* Run one collective in call order: inline when the communicator has no
 * progress thread, otherwise queued behind pending non-blocking calls and
 * waited for (async.c). */
gw_status_t gw__coll_run(gw_comm_t *comm, const gw_coll_args_t *args);
/* Start a collective: next sequence number and the signature of its
 * arguments, carried in every message as the tag (api.c). */
void gw__coll_begin(gw_comm_t *comm, gw_coll_kind_t kind, size_t count, gw_dtype_t dtype,
                    gw_op_t op, int root, gw_algo_t algo);
/* Stop the progress thread after it finished what is queued (async.c). */
void gw__async_stop(gw_comm_t *comm);

/* Claim the transport for the calling thread (waiting while gw_comm_abort
 * holds it for a moment) and give it back; giving it back also carries out
 * an abort that another thread requested meanwhile (comm_state.c). */
void gw__comm_drive_begin(gw_comm_t *comm);
void gw__comm_drive_end(gw_comm_t *comm);

/* Scratch buffer of at least len bytes owned by the communicator. */
gw_status_t gw__comm_scratch(gw_comm_t *comm, size_t len, void **out);

/* Mark the communicator failed (first error wins), tell peers via the
 * transport's abort, and return the sticky status. */
gw_status_t gw__comm_fail(gw_comm_t *comm, gw_status_t status);

/* Post a send or receive of len bytes to/from peer with the current tag. */
gw_status_t gw__p2p_isend(gw_comm_t *comm, int peer, const void *buf, size_t len,
                          gw_request_t *req);
gw_status_t gw__p2p_irecv(gw_comm_t *comm, int peer, void *buf, size_t len, gw_request_t *req);
/* Drive progress until every request in reqs[0..n) completed (NULL entries
 * are skipped). Fails on the first failed request, on a conflicting tag from
 * any peer, or after timeout_ms without progress. */
gw_status_t gw__p2p_waitall(gw_comm_t *comm, gw_request_t *const *reqs, int n);
/* Drive progress until at least one of reqs[0..n) (non-NULL, not yet
 * consumed) completed; returns its index in *idx. */
gw_status_t gw__p2p_waitany(gw_comm_t *comm, gw_request_t *const *reqs, int n, int *idx);
/* Non-blocking: one progress pass. */
gw_status_t gw__p2p_poll(gw_comm_t *comm);
/* Send to one peer and receive from another (or the same), both posted
 * before waiting, so rings and exchanges cannot deadlock. */
gw_status_t gw__p2p_sendrecv(gw_comm_t *comm, int dst, const void *sbuf, size_t slen, int src,
                             void *rbuf, size_t rlen);

/* Algorithms: one per file. */
gw_status_t gw__allreduce_ring(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                               gw_dtype_t dtype, gw_op_t op);
gw_status_t gw__allreduce_tree(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                               gw_dtype_t dtype, gw_op_t op);
gw_status_t gw__allreduce_rd(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                             gw_dtype_t dtype, gw_op_t op);
gw_status_t gw__broadcast_tree(gw_comm_t *comm, void *buf, size_t count, gw_dtype_t dtype,
                               int root);
gw_status_t gw__reduce_tree(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                            gw_dtype_t dtype, gw_op_t op, int root);
gw_status_t gw__allgather_ring(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                               size_t sendcount, gw_dtype_t dtype);
gw_status_t gw__reduce_scatter_ring(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                    size_t recvcount, gw_dtype_t dtype, gw_op_t op);
gw_status_t gw__barrier_dissemination(gw_comm_t *comm);

#endif
