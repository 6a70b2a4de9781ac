/*
 * api.h - what the entry points (collectives/api/) share among themselves:
 * the resolved configuration of gw_comm_init, the communicator's
 * lifecycle (release, shrink and grow's rebuild), the argument checks, the
 * cost model's figures at creation, the non-blocking scheduler and the
 * point-to-point handles. Nothing below the entry layer (the algorithms,
 * collectives/msg, collectives/comm, collectives/device) includes it: they
 * are called by it, never the other way round (docs/design/architecture.md).
 * gw_allreduce_compressed (collectives/compress/compress_api.c) is an
 * entry point too, and uses the scheduler.
 */
#ifndef GW_COLLECTIVES_API_API_H
#define GW_COLLECTIVES_API_API_H

#include "collectives/api/config.h"
#include "collectives/comm/comm.h"

/* comm_split.c: gw_comm_destroy of a child, and of a root, which may have
 * to outlive the application's handle. */
void gw__comm_release(gw_comm_t *comm);

/* The resolved configuration, with every string owned by the caller's config
 * or the environment (both outlive gw_comm_init). */
typedef struct gw_comm_resolved {
    int rank, size;
    const char *root;
    const char *token;
    int timeout_ms;
    int join_timeout_ms;  /* GW_JOIN_TIMEOUT_MS, timeout_ms by default */
    int join_progress_ms; /* GW_JOIN_PROGRESS_MS */
    const char *transport;
    const char *ifname;
    int nsocks;
    gw_algo_t algo;
    gw_p2p_send_t p2p_send; /* GW_P2P_SEND */
    size_t chunk_bytes;
    gw_select_mode_t mode; /* from transport */
    int lazy;              /* GW_CONNECT: lazy (default) or eager */
    int ring_min;          /* GW_BOOTSTRAP_RING_MIN: the bootstrap's ring from this size on */
    int insecure;          /* GW_INSECURE=1: a job without a token is let run (warned) */
} gw_comm_resolved_t;

/* Explicit fields of cfg first, then the GW_* variables: GW_ERR_CONFIG,
 * logged on lg naming the variable, when one is malformed. No I/O. Also
 * what gw_node_probe (probe.c) checks the environment with. */
gw_status_t gw__comm_resolve(const gw_config_t *cfg, const gw_logger_t *lg, gw_comm_resolved_t *r);

/* comm_shrink.c: keep copies of r's settings for a later shrink, and free
 * them. GW_ERR_NO_MEMORY when they do not fit. */
gw_status_t gw__comm_recipe_keep(gw_comm_t *comm, const gw_comm_resolved_t *r);
/* The port of a "host:port" root address (recipe.join_port), 0 for NULL
 * or a malformed one. */
int gw__comm_root_port(const char *root);
void gw__comm_recipe_free(gw_comm_t *comm);

/* comm_shrink.c, for the shrink and the grow (comm_grow.c): how long rank
 * 0's referee waits for every rank to ask (comm's timeout bounded to
 * [1 s, 30 s]), and the new communicator they agreed on, rank `rank` of
 * `size` rooted at `root` (NULL for one rank), built with comm's settings;
 * on success rank 0's listener for joiners moves on to it, on failure one
 * ERROR line: `failure`, the status and the rank blamed. */
int gw__comm_agree_window_ms(const gw_comm_t *comm);
gw_status_t gw__comm_rebuild(gw_comm_t *comm, int rank, int size, const char *root,
                             const char *failure, gw_comm_t **out);

/* ---- argument checks (overlap.c) ----------------------------------------- */

/* GW_OK unless sendbuf's send_bytes and recvbuf's recv_bytes share a byte
 * and sendbuf is not in_place_send (the call's one in-place layout): then
 * GW_ERR_INVALID_ARG, logged naming fn and both ranges. NULL buffers and
 * empty ranges never overlap. */
gw_status_t gw__check_overlap(gw_comm_t *comm, const char *fn, const void *sendbuf,
                              size_t send_bytes, const void *recvbuf, size_t recv_bytes,
                              const void *in_place_send);

/* ---- the cost model's figures (comm_tuning.c) ---------------------------- */

/* GW_TUNING_FILE's figures into *file, NaN (chunk_bytes 0) for every key it
 * does not give, nothing but NaN when it is unset; GW_ERR_CONFIG as
 * gw__tuning_load_env. */
gw_status_t gw__comm_tuning_file(gw_tuning_t *file, const gw_logger_t *lg);
/* comm->tuning and comm->chunk_bytes: the defaults of the transports
 * `intra` and `inter` (GW_TUNING_LINK_* bits; gw__tuning_links), the keys
 * file gives over them, then chunk_bytes (GW_CHUNK_BYTES) unless 0. */
void gw__comm_tuning_apply(gw_comm_t *comm, unsigned intra, unsigned inter, const gw_tuning_t *file,
                           size_t chunk_bytes);
/* The same with the transports every rank's address (all, size x
 * GW_TRANSPORT_ADDR_MAX bytes) makes the plan choose; identical on every
 * rank. GW_ERR_PROTOCOL for an address not ours, GW_ERR_NO_MEMORY. */
gw_status_t gw__comm_tuning_from_addrs(gw_comm_t *comm, const uint8_t *all, const gw_tuning_t *file,
                                       size_t chunk_bytes);

/* ---- the scheduler (async.c) --------------------------------------------- */

/* Run the call `call` describes (execute, args, ctx) in call order: inline
 * when the communicator has no progress thread, otherwise queued behind the
 * pending non-blocking calls and waited for. `what` names the call in the
 * error of a collective started while point-to-point handles are pending. */
gw_status_t gw__async_run(gw_comm_t *comm, const gw_handle_t *call, const char *what);
/* The same without gw__comm_enter: for gw_comm_destroy, which waits for its
 * queued calls whatever another thread does meanwhile. */
gw_status_t gw__async_run_unguarded(gw_comm_t *comm, const gw_handle_t *call, const char *what);
/* Queue a copy of `call` as a new handle, starting the progress thread first
 * if need be. */
gw_status_t gw__async_start(gw_comm_t *comm, const gw_handle_t *call, gw_handle_t **handle);
/* Stop the progress thread (the root's: sub-communicators share it) after
 * it finished what is queued. */
void gw__async_stop(gw_comm_t *comm);

/* ---- point-to-point handles (p2p_api.c) ---------------------------------- */

/* gw_test and gw_wait of point-to-point handles. */
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

/* ---- dispatch (api.c) --------------------------------------------------- */

/* Validate and run one collective on the calling thread, which must be the
 * thread that owns the transport (api.c). */
gw_status_t gw__coll_execute(gw_comm_t *comm, const gw_coll_args_t *args);

/* The one allreduce dispatch (api.c): run algo (ring for GW_ALGO_RING and
 * anything unknown) under the tag already stamped. gw_allreduce and every
 * allreduce phase of a compressed call come through here. */
gw_status_t gw__allreduce_algo(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                               gw_dtype_t dtype, gw_op_t op, gw_algo_t algo);

/* ---- grouped calls and fusion (group.c, allreduce_many.c) ---------------- */

/* Inside gw_group_start/end (comm->group set): queue a copy of the blocking
 * call `call` (a collective described by its args, no ctx) and return
 * GW_OK; a call that cannot be queued (one with a ctx: compressed, split)
 * is GW_ERR_UNSUPPORTED naming `what`. */
gw_status_t gw__group_add_call(gw_comm_t *comm, const gw_handle_t *call, const char *what);
/* Queue a message: is_send, the buffer, count elements of dtype, the peer. */
gw_status_t gw__group_add_p2p(gw_comm_t *comm, int is_send, void *buf, size_t count,
                              gw_dtype_t dtype, int peer);
/* A call that has no place in a group (non-blocking ones): when comm has
 * an open group, GW_ERR_UNSUPPORTED, logged naming `what`; else GW_OK. */
gw_status_t gw__group_refuse(gw_comm_t *comm, const char *what);
/* Free a group gw_comm_destroy finds still open, its calls never issued
 * (logged at WARN); nothing when none is open. */
void gw__group_discard(gw_comm_t *comm);

/* n allreduces (sends[i] -> recvs[i], counts[i] elements; sends[i] ==
 * recvs[i] in place), fused into buckets of GW_FUSION_BYTES. */
gw_status_t gw__allreduce_fused(gw_comm_t *comm, const void *const sends[], void *const recvs[],
                                const size_t counts[], size_t n, gw_dtype_t dtype, gw_op_t op);

#endif /* GW_COLLECTIVES_API_API_H */
