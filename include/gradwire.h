/*
 * gradwire.h - the one public header of gradwire, a communication backend
 * for distributed training: collectives (allreduce, broadcast, reduce,
 * allgather, reduce-scatter, barrier, alltoall(v), gather, scatter,
 * allgatherv), blocking and non-blocking, compressed allreduce and messages
 * between two ranks, over shared memory between ranks of one host and RDMA
 * verbs (InfiniBand, RoCE) or TCP between hosts, chosen per pair of ranks
 * behind the same interface.
 *
 * Conventions that hold for every function below unless it says otherwise
 * (the C API guide, docs/guide/c-api.md, explains each):
 *  - Fallible functions return a gw_status_t (GW_OK is success); output
 *    parameters are written only on success; gw_last_error() says why.
 *  - Threads: call one communicator, and the family gw_comm_split and
 *    gw_comm_dup made from it (they share one transport), from one thread at
 *    a time, in the same order on every rank. A call from a second thread
 *    is refused with GW_ERR_UNSUPPORTED and aborts the family's transport,
 *    so no rank waits for calls that can no longer match. Communicators
 *    from separate gw_comm_init calls may be used from different threads.
 *    gw_status_str, gw_version, gw_last_error and gw_comm_abort are safe
 *    from any thread.
 *  - Collectives (blocking or gw_i*) are called by every rank in the same
 *    order with matching arguments. A mismatch fails with GW_ERR_MISMATCH
 *    on every rank, and a rank whose call fails passes its status on to
 *    the peers: nothing corrupts memory or hangs. A failed communicator
 *    returns that error from every later call: destroy it.
 *  - No progress for GW_TIMEOUT_MS fails with GW_ERR_TIMEOUT, a dead peer
 *    with GW_ERR_REMOTE; every rank names the same culprit
 *    (gw_comm_culprit), agreed with rank 0's referee within a bounded wait.
 *  - Buffers belong to the caller and are not retained after a call
 *    returns. Out-of-place buffers must not overlap; in-place calls pass
 *    the same pointer (the exact forms: docs/guide/c-api.md).
 */
#ifndef GRADWIRE_H
#define GRADWIRE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the library's exported functions (everything else is hidden). */
#if defined(__GNUC__)
#define GW_API __attribute__((visibility("default")))
#else
#define GW_API
#endif

/* ---- Version ------------------------------------------------------------- */

#define GW_VERSION_MAJOR 0
#define GW_VERSION_MINOR 1
#define GW_VERSION_PATCH 0
/* One integer that orders versions: major * 10000 + minor * 100 + patch. */
#define GW_VERSION_CODE (GW_VERSION_MAJOR * 10000 + GW_VERSION_MINOR * 100 + GW_VERSION_PATCH)

/* The library's version as "MAJOR.MINOR.PATCH" (static storage; never NULL).
 * Compare with GW_VERSION_* to detect a header/library mismatch. */
GW_API const char *gw_version(void);

/* ---- Status codes -------------------------------------------------------- */

/* Status codes. The X-macro keeps codes and their strings together. */
#define GW_STATUS_MAP(X)                                                          \
    X(GW_OK, 0, "success")                                                        \
    X(GW_ERR_INVALID_ARG, 1, "invalid argument")                                  \
    X(GW_ERR_NO_MEMORY, 2, "out of memory")                                       \
    X(GW_ERR_SYSTEM, 3, "system call failed")                                     \
    X(GW_ERR_TIMEOUT, 4, "timed out")                                             \
    X(GW_ERR_REMOTE, 5, "remote peer failed or closed the connection")            \
    X(GW_ERR_AUTH, 6, "authentication failed (job token mismatch)")               \
    X(GW_ERR_PROTOCOL, 7, "protocol error (malformed or unexpected message)")     \
    X(GW_ERR_MISMATCH, 8, "ranks called the collective with different arguments") \
    X(GW_ERR_UNSUPPORTED, 9, "operation not supported")                           \
    X(GW_ERR_ABORTED, 10, "communicator was aborted")                             \
    X(GW_ERR_OVERFLOW, 11, "size overflow")                                       \
    X(GW_ERR_NOT_FOUND, 12, "not found")                                          \
    X(GW_ERR_CONFIG, 13, "invalid configuration")

typedef enum gw_status {
#define GW__STATUS_ENUM(name, value, text) name = value,
    GW_STATUS_MAP(GW__STATUS_ENUM)
#undef GW__STATUS_ENUM
} gw_status_t;

/* A short English description of a status ("timed out"). Never NULL; unknown
 * values give "unknown status". Thread-safe, static storage. */
GW_API const char *gw_status_str(gw_status_t status);
/* The enumerator's name ("GW_ERR_TIMEOUT"), for logs and tests. */
GW_API const char *gw_status_name(gw_status_t status);

/* ---- Element types, operations and algorithms ---------------------------- */

/* Element types. float16 is IEEE binary16, bfloat16 is the top half of a
 * binary32; both are reduced through float with round-to-nearest-even.
 * The 8-bit floats are OCP FP8's (torch.float8_e4m3fn, torch.float8_e5m2):
 * E4M3 has no infinities, one NaN per sign (S.1111.111) and a largest
 * finite 448; E5M2 is IEEE-like (infinities, NaN, largest 57344). Every
 * reduction widens them to float, computes once and rounds back to
 * nearest, ties to even, as torch's conversion does; a result too large
 * for E4M3 (|x| > 464, which would round past 448) is NaN, not 448
 * (non-saturating: an overflowed sum stays visible), and for E5M2 it is
 * infinity. A NaN comes back as that sign's canonical NaN (0x7f / 0xff). */
typedef enum gw_dtype {
    GW_FLOAT32 = 0,
    GW_FLOAT64,
    GW_FLOAT16,
    GW_BFLOAT16,
    GW_INT8,
    GW_UINT8,
    GW_INT32,
    GW_INT64,
    GW_FLOAT8_E4M3, /* "float8_e4m3" (alias "float8_e4m3fn", "e4m3") */
    GW_FLOAT8_E5M2, /* "float8_e5m2" (alias "e5m2") */
    GW_UINT32,
    GW_UINT64,
    GW_DTYPE_COUNT
} gw_dtype_t;

/* Reduction operations. GW_AVG is the sum divided by the number of ranks
 * (integer types: the wrapped two's-complement sum divided with truncation
 * toward zero). GW_MIN and GW_MAX propagate NaN (IEEE 754-2019 minimum and
 * maximum) and order -0 below +0. GW_BAND, GW_BOR and GW_BXOR are bitwise
 * and, or and exclusive or, for integer dtypes only (a float dtype is
 * GW_ERR_INVALID_ARG). GW_PREMUL_SUM is the sum of every rank's input
 * multiplied by that rank's factor: it needs the factor, so it is only
 * accepted by the *_premul calls (gw_allreduce_premul); elsewhere it is
 * GW_ERR_INVALID_ARG. */
typedef enum gw_op {
    GW_SUM = 0,
    GW_PROD,
    GW_MIN,
    GW_MAX,
    GW_AVG,
    GW_BAND,
    GW_BOR,
    GW_BXOR,
    GW_PREMUL_SUM,
    GW_OP_COUNT
} gw_op_t;

/* Allreduce algorithms. GW_ALGO_AUTO lets the cost model choose per message
 * size, rank count and hosts; the environment variable GW_ALGO (ring, tree,
 * rd, hier, direct) overrides AUTO. Every algorithm gives bitwise identical results on every
 * rank. */
typedef enum gw_algo {
    GW_ALGO_AUTO = 0,
    GW_ALGO_RING,   /* reduce-scatter + allgather around a ring, pipelined */
    GW_ALGO_TREE,   /* pipelined double binary tree */
    GW_ALGO_RD,     /* recursive doubling: latency-optimised for small messages */
    GW_ALGO_HIER,   /* inside each host, across hosts, inside again (several ranks per host) */
    GW_ALGO_DIRECT, /* every rank exchanges with all peers at once (one host, shared memory) */
    GW_ALGO_COUNT
} gw_algo_t;

/* Size in bytes of one element, or 0 for an unknown dtype. */
GW_API size_t gw_dtype_size(gw_dtype_t dtype);
/* Lower-case names ("float32", "sum", "ring"); "unknown" for bad values. */
GW_API const char *gw_dtype_name(gw_dtype_t dtype);
GW_API const char *gw_op_name(gw_op_t op);
GW_API const char *gw_algo_name(gw_algo_t algo);
/* Parse those names (and common aliases: "float", "fp16", "bf16", "half",
 * "double", "int", "long", "e4m3", "e5m2", "uint", "ulong"; ops "and",
 * "or", "xor"). GW_ERR_INVALID_ARG for an unknown name. */
GW_API gw_status_t gw_dtype_parse(const char *name, gw_dtype_t *out);
GW_API gw_status_t gw_op_parse(const char *name, gw_op_t *out);
GW_API gw_status_t gw_algo_parse(const char *name, gw_algo_t *out);

/* ---- Configuration ------------------------------------------------------- */

/* Configuration structs (gw_config_t, gw_compress_config_t) can grow
 * without breaking programs built against an older header, as NCCL's
 * ncclConfig_t does: each starts with its size as the caller's header
 * declared it, a magic number and the header's version. The library reads
 * only the bytes the caller's struct has and keeps its defaults for fields
 * added since. So a struct must be initialised, with its _INITIALIZER macro
 * or its _init function, before fields are set; one that was not (a wrong
 * magic or an impossible size) is refused with GW_ERR_INVALID_ARG. */
#define GW_CONFIG_MAGIC 0x67774346u /* "gwCF" */

/* Communicator configuration. Initialise with GW_CONFIG_INITIALIZER or
 * gw_config_init(), then set the fields you know. Fields left at their
 * initial value (-1 for integers, NULL for strings, 0 for timeout_ms and
 * nsocks) are taken from the environment (GW_ROOT, GW_JOB_TOKEN,
 * GW_TIMEOUT_MS, GW_TRANSPORT, GW_SOCKET_IFNAME, GW_NSOCKS, GW_ALGO: see
 * docs/reference/environment.md), then from built-in defaults. */
typedef struct gw_config {
    size_t struct_size;        /* sizeof(gw_config_t): set by the initializer */
    unsigned int magic;        /* GW_CONFIG_MAGIC: set by the initializer */
    unsigned int version;      /* GW_VERSION_CODE: set by the initializer */
    int rank;                  /* this process's rank, 0 <= rank < size */
    int size;                  /* number of ranks */
    const char *root;          /* rank 0's bootstrap address "host:port" */
    const char *job_token;     /* shared secret; NULL: GW_JOB_TOKEN(_FILE), else the
                                * job is refused unless GW_INSECURE=1 */
    int timeout_ms;            /* no-progress timeout for init and calls */
    const char *transport;     /* "auto", "tcp", "shm" or "ib"; NULL: GW_TRANSPORT, else auto */
    const char *socket_ifname; /* network interface for TCP data sockets */
    int nsocks;                /* TCP sockets per peer, 1..16; 0: GW_NSOCKS, else 1 */
    gw_algo_t algo;            /* allreduce algorithm, GW_ALGO_AUTO default */
} gw_config_t;

/* Every field "unset" (see above), as gw_config_init() leaves it. */
#define GW_CONFIG_INITIALIZER                                                                     \
    {                                                                                             \
        sizeof(gw_config_t), GW_CONFIG_MAGIC, GW_VERSION_CODE, -1, -1, NULL, NULL, 0, NULL, NULL, \
            0, GW_ALGO_AUTO                                                                       \
    }

/* Fill *cfg with "unset" values (see above). Never fails for non-NULL cfg. */
GW_API void gw_config_init(gw_config_t *cfg);

/* ---- Communicators ------------------------------------------------------- */

/* Opaque communicator handle. */
typedef struct gw_comm gw_comm_t;

/* Create a communicator: every rank calls this with the same size, root and
 * token. Rank 0 listens on root; the others connect to it (retrying with
 * backoff until the timeout), authenticate by challenge-response on the job
 * token (the token itself never crosses the wire), exchange transport
 * addresses and connect to each other. Collective over all ranks; blocks
 * until every rank has joined or the timeout expires.
 * Errors: GW_ERR_INVALID_ARG / GW_ERR_CONFIG for bad configuration (message
 * logged naming the field), GW_ERR_TIMEOUT naming the root address when it
 * cannot be reached, GW_ERR_AUTH on a token mismatch, GW_ERR_SYSTEM;
 * GW_ERR_CONFIG at once, with rank 0's reason, for a process that arrives
 * after the job formed (its rank is taken). On success *out owns the
 * communicator; free it with gw_comm_destroy(). gw_comm_init_culprit
 * (below) says whom a failed creation blames. */
GW_API gw_status_t gw_comm_init(const gw_config_t *cfg, gw_comm_t **out);

/* Like gw_comm_init with every field taken from the environment: rank and
 * size from GW_RANK/GW_SIZE, RANK/WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK/
 * OMPI_COMM_WORLD_SIZE (Open MPI), PMI_RANK/PMI_SIZE (MPICH, Hydra) or
 * SLURM_PROCID/SLURM_NTASKS (srun); root from GW_ROOT or MASTER_ADDR and
 * MASTER_PORT. GW_ERR_CONFIG names the variable that is missing or bad. */
GW_API gw_status_t gw_comm_init_env(gw_comm_t **out);

/* gw_comm_init (cfg not NULL) or gw_comm_init_env (cfg NULL) that also
 * says whom a failed creation blames, for a program that has no
 * communicator to ask gw_comm_culprit: *culprit (when culprit is not NULL;
 * written on failure too, -1 on success) is the same rank on every rank
 * that heard from rank 0: a rank missing at the join (the first, when
 * several are), a rank that died, was stopped or hung while the ranks
 * exchanged addresses or connected their data plane (rank 0 collects
 * every rank's outcome and decides), rank 0 when it could not be reached
 * or said nothing in time, this rank for its own bad configuration or a
 * refusal by rank 0 (another token, size or rank); -1 when no rank could
 * be named (also for a configuration without a valid rank). The error
 * log names it too ("blaming rank K"). A rank waits for rank 0's word
 * at most the timeout plus the referee's grace and a margin. */
GW_API gw_status_t gw_comm_init_culprit(const gw_config_t *cfg, gw_comm_t **out, int *culprit);

/* What a rank started on this node, now, with this environment, would use,
 * and why not the rest, without joining a job or sending anything
 * (`gradwire info`): the logger's, the launcher's and the communicator's
 * variables checked by the code gw_comm_init_env runs (under a PMIx server
 * the launcher is named, not asked), then every transport of this build
 * opened as rank 0 of a two-rank job would open it, forced, and closed
 * again: its interface and address, shared memory, RDMA device, port and
 * GID, or why it cannot. buf receives one finding per line,
 * "SECTION\tNAME\tVERDICT\tTEXT\n": SECTION "build" (version, build type,
 * optional parts), "log", "launcher", "config" or "transport"; VERDICT "ok", "info", "error" (a malformed setting: a rank
 * would refuse to start) or "unusable" (a transport this node cannot
 * offer). GW_OK, or GW_ERR_CONFIG when a setting is malformed (the report
 * is complete either way), GW_ERR_NO_MEMORY when it did not fit in cap
 * bytes (16 KiB is plenty), GW_ERR_INVALID_ARG for a NULL buf or cap 0. */
GW_API gw_status_t gw_node_probe(char *buf, size_t cap);

/* Release a communicator: tells peers goodbye, closes connections, frees
 * memory. Not collective and does not block on peers. NULL is a no-op.
 * Communicators split from it (gw_comm_split) keep its connections open
 * until the last of them is destroyed too. */
GW_API gw_status_t gw_comm_destroy(gw_comm_t *comm);

/* Rank and size of a communicator (-1 for NULL). */
GW_API int gw_comm_rank(const gw_comm_t *comm);
GW_API int gw_comm_size(const gw_comm_t *comm);
/* Name of the transport in use: "shm", "tcp" or "ib" when every peer uses the
 * same one, "shm+tcp", "shm+ib", "ib+tcp" or "shm+ib+tcp" for a mix (e.g. shared
 * memory on this host, a network to others), "self" for one rank, "none" for
 * NULL. */
GW_API const char *gw_comm_transport(const gw_comm_t *comm);

/* Add a span of the application's own (compute, I/O) to the timeline that
 * GW_TRACE writes, beside the collectives' spans, so that their overlap is
 * visible: `name` from start_ns to end_ns, both CLOCK_MONOTONIC
 * nanoseconds, under category `cat` (NULL: "app"). Names are cut at 63
 * bytes, and a byte JSON would need to escape becomes '_'. GW_OK and
 * nothing written when tracing is off; GW_ERR_INVALID_ARG for a NULL comm
 * or end_ns < start_ns. Call it from the thread that calls the collectives
 * (not thread-safe against them). */
GW_API gw_status_t gw_trace_span(gw_comm_t *comm, const char *name, const char *cat,
                                 int64_t start_ns, int64_t end_ns);

/* One peer of a rank in gw_rank_status_t: bytes posted to and from it. */
typedef struct gw_rank_peer {
    int peer;
    uint64_t sent, recv;
} gw_rank_peer_t;

/* One rank of a running job, as gw_job_status reports it. */
typedef struct gw_rank_status {
    int rank;
    int known;           /* 0: rank 0 has no news of it (none yet, or it is gone) */
    int running;         /* 1: inside a collective now; 0: between two */
    char op[24];         /* its newest collective's kind ("allreduce"); "" for none */
    uint64_t seq;        /* ... and sequence number */
    unsigned step;       /* ... and step (the waits it began) */
    int waiting_on;      /* the rank its current step waits for, -1: none */
    double for_s;        /* in that collective (running) or since it ended, until now */
    double age_s;        /* how old rank 0's news of this rank is */
    uint64_t done;       /* collectives completed */
    uint64_t bytes_sent; /* posted to send, to all peers */
    uint64_t bytes_recv; /* posted to receive */
    int npeers;          /* peers with traffic, the busiest first (at most 16) */
    gw_rank_peer_t peers[16];
} gw_rank_status_t;

/* Ask a running job how every rank is doing (`gradwire status`): rank 0
 * answers from the news each rank sends it every quarter second while it
 * calls collectives, so the query never waits for a rank nor slows one.
 * root: the job's root address, host:port (NULL: GW_ROOT); token: the
 * job token (NULL: GW_JOB_TOKEN or GW_JOB_TOKEN_FILE's), which this
 * process proves and rank 0 proves back. On GW_OK *ranks is a malloc'd
 * array of *size entries, one per rank (free with gw_job_status_free).
 * GW_ERR_AUTH for a wrong token (rank 0 says nothing of the job),
 * GW_ERR_TIMEOUT after timeout_ms (<= 0: 2000), GW_ERR_CONFIG without a
 * root or token, GW_ERR_REMOTE when nobody answers there; each logged.
 * Thread-safe; needs no communicator. */
GW_API gw_status_t gw_job_status(const char *root, const char *token, int timeout_ms,
                                 gw_rank_status_t **ranks, int *size);
GW_API void gw_job_status_free(gw_rank_status_t *ranks);

/* ---- Failures: abort, blame, shrink, grow and join ----------------------- */

/* Mark the communicator failed and tell every peer, so that their pending
 * and later calls fail with GW_ERR_ABORTED instead of waiting. Safe to call
 * from any thread (e.g. a watchdog) while another thread is inside a
 * collective on the same communicator: that collective fails within about
 * 100 ms. Does not free: call gw_comm_destroy() afterwards. Communicators
 * split from one gw_comm_init share its transport, so aborting one aborts
 * all of them (gw_comm_split). */
GW_API gw_status_t gw_comm_abort(gw_comm_t *comm);

/* What went wrong, in full (as NCCL's ncclGetLastError): the message of the
 * last error gradwire logged. With comm NULL, the last error logged on the
 * calling thread, whichever communicator (or none: a failed gw_comm_init,
 * a malformed GW_* variable) it came from. With a communicator, the last
 * error logged about that communicator, from whichever thread drove it, so
 * that a watchdog or the thread that waits for a handle can ask. Errors
 * are recorded whatever GW_DEBUG says (even NONE), without the log line's
 * host, pid and time prefix, at most 1023 bytes. A later success does not
 * clear it: read it when a call has returned an error (a status whose
 * reason was not logged, such as GW_ERR_INVALID_ARG for a NULL argument,
 * leaves the previous message in place). Never NULL: "" when nothing was
 * recorded. The string belongs to the calling thread and stays valid until
 * its next call into gradwire. Thread-safe: any thread may ask about any
 * live communicator while others use it. */
GW_API const char *gw_last_error(gw_comm_t *comm);

/* The rank blamed for the communicator's failure, the same on every rank:
 * the rank that died, was stopped or hung, fell behind (was busy outside
 * gradwire while the others waited for it), disagreed or passed a bad
 * argument, as rank 0's referee found it by following who waits for whom
 * (not the neighbour this rank waited for, nor the rank whose abort
 * reached it first). Without a verdict (rank 0 unreachable) it is the rank
 * this rank saw at fault, as the aborts relayed it, or rank 0 after a
 * timeout. This rank's own when the failure was its own (an invalid
 * argument, gw_comm_abort, no memory): a launcher tells the rank at fault
 * from its victims. -1 while the communicator is healthy, when no rank
 * could be named, and for NULL. A rank of this communicator: on one made
 * by gw_comm_split, -1 when the culprit is not one of its members. */
GW_API int gw_comm_culprit(const gw_comm_t *comm);

/* Survive a lost rank (as ULFM's MPI_Comm_shrink): after a call on comm
 * failed because a rank died or hung, every survivor calls this. Rank 0's
 * referee agrees on who is left (the ranks that ask within a window of
 * comm's timeout bounded to [1 s, 30 s]); *out is a new communicator of
 * exactly those ranks, renumbered in old-rank order (rank 0 stays 0), with
 * comm's settings and token. When rank 0 itself died, or is stopped, hung
 * or busy outside gradwire past the window (then deposed first: when it
 * wakes, its own shrink fails with GW_ERR_ABORTED), the lowest surviving
 * rank takes its referee's place and becomes rank 0 of *out, rooted on its
 * host; the group goes on only when it outnumbers the ranks that are alive
 * but did not ask. comm stays failed: destroy it when the job no longer
 * needs it to answer late ranks (they are told they were left out).
 * Collective over the survivors; not thread-safe against other calls on
 * comm. Errors, *out NULL: GW_ERR_ABORTED for a rank left out (it must
 * leave the job); GW_ERR_TIMEOUT when no surviving rank could lead; the
 * new communicator's join errors; GW_ERR_UNSUPPORTED for a
 * sub-communicator; GW_ERR_INVALID_ARG for NULL. The protocol:
 * docs/design/failures.md. */
GW_API gw_status_t gw_comm_shrink(gw_comm_t *comm, gw_comm_t **out);

/* Admit the processes waiting in gw_comm_join at a point the members agree
 * on (an epoch boundary): every rank of comm calls this there. With no
 * joiner it returns GW_OK, *out NULL, at once: go on with comm. With J
 * joiners *out is a new communicator of size + J ranks: comm's ranks keep
 * theirs, the joiners follow in arrival order; comm stays healthy (destroy
 * it when done). Collective over comm; not thread-safe against other calls
 * on comm; blocks at most a window (comm's timeout bounded to [1 s, 30 s])
 * plus the new join. Errors, *out NULL: comm's own failure status;
 * GW_ERR_TIMEOUT when a rank did not call within the window, GW_ERR_REMOTE
 * when a rank or rank 0 is gone (comm itself is not failed: its next call
 * says whether a rank is lost); the new communicator's join errors;
 * GW_ERR_UNSUPPORTED for a sub-communicator; GW_ERR_INVALID_ARG for NULL.
 * The protocol: docs/design/failures.md. */
GW_API gw_status_t gw_comm_grow(gw_comm_t *comm, gw_comm_t **out);

/* How many processes wait in gw_comm_join to be admitted at comm's next
 * gw_comm_grow, as rank 0's referee counts them (a process counts once it
 * proved the job token; the count is refreshed each time the referee's
 * thread wakes, so it may trail a new arrival by a moment). Only rank 0
 * knows: *n is 0 on every other rank. Not collective; safe from any
 * thread, also while other calls on comm run, so that a rank can decide
 * when to call gw_comm_grow (an asynchronous trainer ends its phase for
 * it). GW_ERR_UNSUPPORTED for a sub-communicator; GW_ERR_INVALID_ARG for
 * NULL. */
GW_API gw_status_t gw_comm_joiners(gw_comm_t *comm, int *n);

/* Join a running job as a new rank: connect to its root (cfg->root, else
 * GW_ROOT: the original rank 0's address), prove the job token (cfg, else
 * GW_JOB_TOKEN or GW_JOB_TOKEN_FILE; without one refused unless
 * GW_INSECURE=1) and wait until the members next call gw_comm_grow; *out
 * is then this process's communicator in the grown job. cfg may be NULL;
 * its rank and size are ignored, its other fields used as gw_comm_init
 * uses them. wait_ms bounds the whole wait (0: ten minutes). Blocking.
 * Errors, *out NULL, each logged: GW_ERR_TIMEOUT naming the root when no
 * grow admitted it in time; GW_ERR_AUTH when a token was refused;
 * GW_ERR_REMOTE when the job ended; GW_ERR_CONFIG for a missing, short or
 * bad root or token; the new communicator's join errors;
 * GW_ERR_INVALID_ARG for a NULL out or a negative wait_ms. */
GW_API gw_status_t gw_comm_join(const gw_config_t *cfg, int wait_ms, gw_comm_t **out);

/* ---- Sub-communicators --------------------------------------------------- */
/*
 * gw_comm_split makes, collectively over `comm` (every rank calls it), one
 * new communicator per color: the ranks that passed the same color, ranked
 * by (key, rank in comm), as MPI_Comm_split does. A rank that passes
 * GW_UNDEFINED takes part and gets *out = NULL. gw_comm_dup is a split in
 * which every rank keeps its rank. The new communicator is built on
 * comm's connections: no bootstrap, no listening port, no new connection;
 * the split costs one all-gather of (color, key) over comm. It has its own
 * rank, size, sequence numbers and failure state, and every call works on
 * it (collectives blocking or not, compressed, point-to-point); its
 * messages never match another communicator's. Ranks that share two
 * communicators must issue their calls on them in the same order (one
 * progress thread runs a process's calls on all its communicators in the
 * order issued); ranks that share none may run them at the same time.
 * All communicators split from one gw_comm_init share its transport: when
 * it fails, each fails at its next call that uses it, and gw_comm_abort
 * on any aborts them all. gw_comm_culprit speaks in the communicator's
 * own ranks (-1 when the culprit is no member of it). Destroy in any
 * order: the transport stays until the last communicator using it is
 * destroyed. Errors: GW_ERR_INVALID_ARG (NULL, or a negative color other
 * than GW_UNDEFINED, which fails comm), GW_ERR_MISMATCH when ranks made
 * different numbers of splits or one calls gw_comm_dup and another
 * gw_comm_split, comm's sticky error, GW_ERR_NO_MEMORY. */
#define GW_UNDEFINED (-32766)
GW_API gw_status_t gw_comm_split(gw_comm_t *comm, int color, int key, gw_comm_t **out);
GW_API gw_status_t gw_comm_dup(gw_comm_t *comm, gw_comm_t **out);

/* ---- Collectives --------------------------------------------------------- */

/* Choose the allreduce algorithm for later calls (GW_ALGO_AUTO: cost model).
 * Every rank must choose the same; a difference is reported as a mismatch. */
GW_API gw_status_t gw_comm_set_algo(gw_comm_t *comm, gw_algo_t algo);
/* The algorithm that an allreduce of count elements of dtype would use now. */
GW_API gw_algo_t gw_comm_pick_algo(const gw_comm_t *comm, size_t count, gw_dtype_t dtype);

/* recvbuf[i] = op over ranks of sendbuf[i], on every rank. sendbuf ==
 * recvbuf is in place. count 0 is allowed (still checks that the ranks agree).
 * NULL buffers are GW_ERR_INVALID_ARG when count > 0; count * size of dtype
 * overflowing size_t is GW_ERR_OVERFLOW. */
GW_API gw_status_t gw_allreduce(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                gw_dtype_t dtype, gw_op_t op);

/* Copy root's sendbuf into every rank's recvbuf. sendbuf is read on root
 * only (may be NULL elsewhere); sendbuf == recvbuf on root is in place. */
GW_API gw_status_t gw_broadcast(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                gw_dtype_t dtype, int root);

/* recvbuf[i] on root = op over ranks of sendbuf[i]. recvbuf is written on
 * root only (may be NULL elsewhere). */
GW_API gw_status_t gw_reduce(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                             gw_dtype_t dtype, gw_op_t op, int root);

/* recvbuf (size * sendcount elements) = the concatenation of every rank's
 * sendbuf in rank order. In place: sendbuf == recvbuf + rank * sendcount
 * elements. */
GW_API gw_status_t gw_allgather(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                size_t sendcount, gw_dtype_t dtype);

/* sendbuf holds size * recvcount elements; rank r receives in recvbuf the
 * reduction over ranks of block r. In place: recvbuf == sendbuf + rank *
 * recvcount elements. */
GW_API gw_status_t gw_reduce_scatter(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t recvcount, gw_dtype_t dtype, gw_op_t op);

/* Returns on every rank only after every rank has entered it. */
GW_API gw_status_t gw_barrier(gw_comm_t *comm);

/* premul_sum: gw_allreduce, gw_reduce and gw_reduce_scatter with op
 * GW_PREMUL_SUM, the sum over ranks of factor * sendbuf[i], where each rank
 * passes its own factor (they may differ; torch's ReduceOp.PREMUL_SUM,
 * e.g. 1/world_size for an average that cannot overflow). Float dtypes
 * only: the factor is rounded to float (kept double for GW_FLOAT64), each
 * element multiplied and rounded once to the dtype, then summed as
 * GW_SUM does. sendbuf is not modified (the scaled copy is the library's,
 * count elements of scratch memory per call). Errors as the plain calls,
 * plus GW_ERR_INVALID_ARG for an integer dtype or a factor that is NaN or
 * infinite; GW_ERR_NO_MEMORY when the scratch copy does not fit. */
GW_API gw_status_t gw_allreduce_premul(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                       size_t count, gw_dtype_t dtype, double factor);
GW_API gw_status_t gw_reduce_premul(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                    size_t count, gw_dtype_t dtype, double factor, int root);
GW_API gw_status_t gw_reduce_scatter_premul(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                            size_t recvcount, gw_dtype_t dtype, double factor);

/* ---- Collectives that move blocks ---------------------------------------- */
/*
 * Counts and displacements are in elements of dtype. Every rank passes the
 * same count, dtype and root (a difference is GW_ERR_MISMATCH on every
 * rank, as above); the v-forms' per-rank arrays are described at each. In
 * place is by pointer, as for gw_allgather. NULL buffers with something to
 * move are GW_ERR_INVALID_ARG, sizes that overflow GW_ERR_OVERFLOW. */

/* sendbuf holds size blocks of count elements, block j for rank j; rank r
 * receives in block j of recvbuf (size * count elements) rank j's block r.
 * In place: sendbuf == recvbuf (the blocks are replaced; a copy of what is
 * sent goes through the communicator's scratch memory). Pairwise exchange:
 * see collectives/alltoall_pairwise.c. */
GW_API gw_status_t gw_alltoall(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                               gw_dtype_t dtype);

/* alltoall with per-pair sizes: this rank sends sendcounts[j] elements at
 * sendbuf + sdispls[j] to rank j and receives recvcounts[j] elements from
 * rank j at recvbuf + rdispls[j] (size entries each). Counts differ by rank;
 * what must agree is each pair's: rank a's sendcounts[b] == rank b's
 * recvcounts[a]. A pair that disagrees (or a rank whose sendcounts[rank] !=
 * recvcounts[rank]) fails the call on every rank with GW_ERR_MISMATCH: the
 * call ends with a dissemination barrier (log2(size) empty messages per
 * rank) so that no rank returns GW_OK while another failed. In place:
 * sendbuf == recvbuf; then the rank sends what recvcounts and rdispls
 * describe (sendcounts and sdispls are ignored and may be NULL), so the
 * counts must be symmetric (recvcounts[j] here == recvcounts[rank] on j). */
GW_API gw_status_t gw_alltoallv(gw_comm_t *comm, const void *sendbuf, const size_t *sendcounts,
                                const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                                const size_t *rdispls, gw_dtype_t dtype);

/* root's recvbuf (size * count elements) = the concatenation of every rank's
 * sendbuf (count elements) in rank order; recvbuf is written on root only
 * (may be NULL elsewhere). In place on root: sendbuf == recvbuf + root *
 * count elements. Linear (each rank sends to root directly: see
 * collectives/gather_linear.c), after a barrier under the call's tag. */
GW_API gw_status_t gw_gather(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                             gw_dtype_t dtype, int root);

/* Rank r's recvbuf (count elements) = block r of root's sendbuf (size *
 * count elements); sendbuf is read on root only (may be NULL elsewhere).
 * In place on root: recvbuf == sendbuf + root * count elements. Linear,
 * after a barrier under the call's tag (collectives/scatter_linear.c). */
GW_API gw_status_t gw_scatter(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                              gw_dtype_t dtype, int root);

/* allgather of blocks of different sizes (PyTorch's uneven all_gather):
 * rank j's sendbuf (sendcount elements, which must equal its
 * recvcounts[j]) lands at recvbuf + displs[j] on every rank. recvcounts
 * (size entries) must be the same on every rank (a digest of them is in
 * the call's signature); displs are each rank's own layout. In place:
 * sendbuf == recvbuf + displs[rank] elements. Ring: see
 * collectives/allgatherv_ring.c. */
GW_API gw_status_t gw_allgatherv(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                 size_t sendcount, const size_t *recvcounts, const size_t *displs,
                                 gw_dtype_t dtype);

/* ---- Non-blocking collectives -------------------------------------------- */
/*
 * A non-blocking call queues the collective and returns at once with a
 * handle; the communicator's progress thread (started by the first such
 * call) runs queued collectives in call order while the caller computes.
 * Blocking calls made afterwards queue behind the pending ones, so the order
 * in which a rank issues collectives is the order they run in, on every
 * rank. Buffers must stay valid and untouched until the handle completes.
 * Handles may be tested and waited for from any thread, in any order; each
 * must be completed (gw_wait, or gw_test reporting done) exactly once.
 * gw_comm_destroy first lets every queued collective finish. */
typedef struct gw_handle gw_handle_t;

/* Non-blocking gw_allreduce. Argument errors are reported when the handle
 * completes. Errors here: GW_ERR_INVALID_ARG (NULL comm or handle),
 * GW_ERR_NO_MEMORY, GW_ERR_SYSTEM (the progress thread could not start). */
GW_API gw_status_t gw_iallreduce(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                 gw_dtype_t dtype, gw_op_t op, gw_handle_t **handle);

/* Non-blocking forms of every other collective, with the blocking call's
 * arguments and rules and the same handles, queue and errors as
 * gw_iallreduce: each runs on the progress thread in call order with every
 * other collective of the communicator (blocking, non-blocking or
 * compressed), so completion is in call order per communicator. The
 * v-forms' count and displacement arrays, like the buffers, must stay valid
 * and untouched until the handle completes. */
GW_API gw_status_t gw_ibroadcast(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                 gw_dtype_t dtype, int root, gw_handle_t **handle);
GW_API gw_status_t gw_ireduce(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                              gw_dtype_t dtype, gw_op_t op, int root, gw_handle_t **handle);
GW_API gw_status_t gw_iallgather(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                 size_t sendcount, gw_dtype_t dtype, gw_handle_t **handle);
GW_API gw_status_t gw_ireduce_scatter(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                      size_t recvcount, gw_dtype_t dtype, gw_op_t op,
                                      gw_handle_t **handle);
GW_API gw_status_t gw_ibarrier(gw_comm_t *comm, gw_handle_t **handle);
GW_API gw_status_t gw_ialltoall(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                gw_dtype_t dtype, gw_handle_t **handle);
GW_API gw_status_t gw_ialltoallv(gw_comm_t *comm, const void *sendbuf, const size_t *sendcounts,
                                 const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                                 const size_t *rdispls, gw_dtype_t dtype, gw_handle_t **handle);
GW_API gw_status_t gw_igather(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                              gw_dtype_t dtype, int root, gw_handle_t **handle);
GW_API gw_status_t gw_iscatter(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                               gw_dtype_t dtype, int root, gw_handle_t **handle);
GW_API gw_status_t gw_iallgatherv(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                  size_t sendcount, const size_t *recvcounts, const size_t *displs,
                                  gw_dtype_t dtype, gw_handle_t **handle);
GW_API gw_status_t gw_ireduce_premul(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t count, gw_dtype_t dtype, double factor, int root,
                                     gw_handle_t **handle);
GW_API gw_status_t gw_iallreduce_premul(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                        size_t count, gw_dtype_t dtype, double factor,
                                        gw_handle_t **handle);
GW_API gw_status_t gw_ireduce_scatter_premul(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                                             size_t recvcount, gw_dtype_t dtype, double factor,
                                             gw_handle_t **handle);

/* *done = 0 and GW_OK while the collective runs; once it has finished,
 * *done = 1, the handle is released and the collective's status returned. */
GW_API gw_status_t gw_test(gw_handle_t *handle, int *done);

/* Wait for the collective, release the handle, return its status. */
GW_API gw_status_t gw_wait(gw_handle_t *handle);

/* ---- Gradient compression ------------------------------------------------ */
/*
 * gw_allreduce_compressed() (float16 and bfloat16 inputs:
 * gw_allreduce_compressed_dtype) averages float32 gradients like
 * gw_allreduce(..., GW_FLOAT32, GW_AVG), but sends them through a lossy
 * codec: FP16, BF16, INT8 (stochastic rounding, n <= 127 ranks), SIGN
 * (EF-SignSGD), TOPK (with DGC's momentum correction when momentum > 0) or
 * POWERSGD (rank r, warm-started). What a codec drops is kept in an
 * error-feedback residual the caller owns (gw_compress_state_t, one per
 * tensor or bucket) and added to the next step. Every rank ends with
 * bitwise identical results. A NaN or infinity in any rank's input fails
 * the call on every rank with GW_ERR_INVALID_ARG, output and state
 * untouched and the communicator usable (skip the step and go on). How
 * each codec works on the wire: docs/design/compression.md.
 */

/* Codecs. */
typedef enum gw_codec {
    GW_CODEC_NONE = 0,
    GW_CODEC_FP16,
    GW_CODEC_BF16,
    GW_CODEC_INT8,
    GW_CODEC_SIGN,
    GW_CODEC_TOPK,
    GW_CODEC_POWERSGD,
    GW_CODEC_COUNT
} gw_codec_t;

/* Lower-case names ("none", "fp16", "bf16", "int8", "sign", "topk",
 * "powersgd"); "unknown" for bad values. gw_codec_parse also accepts
 * "dense", "float16", "bfloat16", "top-k" and "1bit"; GW_ERR_INVALID_ARG for
 * an unknown name. Thread-safe. */
GW_API const char *gw_codec_name(gw_codec_t codec);
GW_API gw_status_t gw_codec_parse(const char *name, gw_codec_t *out);

/* Settings of a compression state. Initialise with
 * GW_COMPRESS_CONFIG_INITIALIZER or gw_compress_config_init() and change
 * what you need (the first three fields are the struct's size, magic and
 * version: see GW_CONFIG_MAGIC). Every rank must use the same settings for
 * the same tensor: they are part of every message's signature, so ranks
 * that differ fail with GW_ERR_MISMATCH. */
typedef struct gw_compress_config {
    size_t struct_size;     /* sizeof(gw_compress_config_t): set by the initializer */
    unsigned int magic;     /* GW_CONFIG_MAGIC: set by the initializer */
    unsigned int version;   /* GW_VERSION_CODE: set by the initializer */
    gw_codec_t codec;       /* default GW_CODEC_NONE */
    int error_feedback;     /* 1 (default): carry what was not sent to the next
                             * step; 0: drop it */
    uint32_t warmup_steps;  /* calls that use the dense allreduce before the
                             * codec starts (default 0) */
    size_t min_elements;    /* tensors with fewer elements go dense
                             * (default 1024; 0 compresses everything) */
    size_t bucket_elements; /* elements per scale of INT8 and SIGN
                             * (default 4096; 1 .. 2^31) */
    double topk_ratio;      /* fraction TOPK keeps, in (0, 1] (default 0.01) */
    int powersgd_rank;      /* r of POWERSGD, 1 .. 1024 (default 4) */
    uint64_t seed;          /* shared by all ranks: stochastic rounding, top-k
                             * sampling and PowerSGD's initial Q derive from it,
                             * the step and the rank */
    double momentum;        /* TOPK only: DGC momentum correction factor m in
                             * [0, 1), used as the nearest float;
                             * 0 (default) turns it off. The velocity (one
                             * float per element) is saved with the state. */
} gw_compress_config_t;

/* The defaults above, as gw_compress_config_init() sets them. */
#define GW_COMPRESS_CONFIG_INITIALIZER                                                             \
    {                                                                                              \
        sizeof(gw_compress_config_t), GW_CONFIG_MAGIC, GW_VERSION_CODE, GW_CODEC_NONE, 1, 0, 1024, \
            4096, 0.01, 4, 0x6772616477697265ull, 0.0                                              \
    }

/* Fill *cfg with the defaults above. NULL is a no-op. */
GW_API void gw_compress_config_init(gw_compress_config_t *cfg);

/* Compression state of one tensor: the configuration, the tensor's shape,
 * the step counter, the error-feedback residual (one float per element) and
 * the codec's own state (PowerSGD's Q), plus statistics. Owned by the caller.
 * A state is not thread-safe: use it from one thread, in one call at a time;
 * different states may be used concurrently (with different communicators).
 * A non-blocking call (gw_iallreduce_compressed) owns the state until its
 * handle completes. */
typedef struct gw_compress_state gw_compress_state_t;

/* Create the state for a tensor of rows x cols float32 elements (row-major;
 * only PowerSGD uses the shape, other codecs see rows * cols elements, so
 * vectors may pass cols = 1). The residual starts at zero, the step at 0.
 * Errors: GW_ERR_INVALID_ARG for NULL pointers or settings out of range
 * (logged naming the field), GW_ERR_OVERFLOW when rows * cols elements do
 * not fit in memory, GW_ERR_UNSUPPORTED for TOPK with 2^32 elements or more,
 * GW_ERR_NO_MEMORY. Free with gw_compress_state_destroy(). */
GW_API gw_status_t gw_compress_state_create(const gw_compress_config_t *cfg, size_t rows,
                                            size_t cols, gw_compress_state_t **out);

/* Free a state and everything it holds. NULL is a no-op. */
GW_API void gw_compress_state_destroy(gw_compress_state_t *state);

/* Number of successful gw_allreduce_compressed calls on this state (warm-up
 * and dense calls included). 0 for NULL. */
GW_API uint64_t gw_compress_state_step(const gw_compress_state_t *state);

/* Zero what is this rank's own in a state: the error-feedback residual and,
 * for TOPK with momentum, DGC's velocity (both accumulate this rank's own
 * gradients). The step and PowerSGD's Q, which every rank holds alike, are
 * kept. For a rank that takes another rank's saved state (a replacement
 * joining a running job: load the image of a rank already in it, then
 * reset), so that it goes on in step with the others without replaying
 * their errors. GW_ERR_INVALID_ARG for NULL. */
GW_API gw_status_t gw_compress_state_reset_residual(gw_compress_state_t *state);

/* Serialise the state (format version GW_COMPRESS_STATE_VERSION: settings,
 * shape, step, residual, codec state, checksum; little-endian) into buf of
 * cap bytes; *len receives the size. buf NULL (or cap too small: then
 * GW_ERR_OVERFLOW) only reports the size needed. Statistics are not saved.
 * Version 2 added the momentum setting and velocity; version 1 images (no
 * momentum) still load. */
#define GW_COMPRESS_STATE_VERSION 2
GW_API gw_status_t gw_compress_state_save(const gw_compress_state_t *state, void *buf, size_t cap,
                                          size_t *len);

/* Replace a state's step, residual and codec state by a saved image. The
 * image must come from a state with the same settings and shape: the state
 * is created first (gw_compress_state_create) and then loaded, so a
 * checkpoint cannot silently change the codec. Errors (the state is then
 * unchanged): GW_ERR_INVALID_ARG for NULL pointers; GW_ERR_PROTOCOL for a
 * truncated or corrupt image (bad magic, size or checksum, non-finite
 * values); GW_ERR_UNSUPPORTED for another format version; GW_ERR_MISMATCH
 * when the settings or shape differ (logged naming the field). */
GW_API gw_status_t gw_compress_state_load(gw_compress_state_t *state, const void *buf, size_t len);

/* gw_compress_state_save / _load through a file (written whole to a
 * temporary file in the same directory, then renamed over path, so a crash
 * never leaves half a checkpoint). GW_ERR_SYSTEM when the file cannot be
 * written or read (logged with the reason); otherwise as above. */
GW_API gw_status_t gw_compress_state_save_file(const gw_compress_state_t *state, const char *path);
GW_API gw_status_t gw_compress_state_load_file(gw_compress_state_t *state, const char *path);

/* out[i] = the average over ranks of in[i] (plus each rank's residual),
 * through the state's codec; count must equal rows * cols of the state.
 * in == out is in place. Collective: every rank calls it in the same order
 * with a state of the same settings, shape and step. Uses the dense
 * allreduce (bitwise equal to gw_allreduce(..., GW_FLOAT32, GW_AVG), of the
 * velocity when top-k momentum is on) while the step is below warmup_steps,
 * when count < min_elements and with GW_CODEC_NONE. On success the
 * residual, the velocity and the step advance; on any error the state is
 * unchanged. Once the communicator has non-blocking calls pending, this
 * call queues behind them and waits (see gw_iallreduce_compressed).
 * Errors: GW_ERR_INVALID_ARG for NULL pointers, a count that is not the
 * state's, or a NaN or infinity (see above: then every rank fails alike and
 * the communicator stays usable); GW_ERR_UNSUPPORTED for INT8 with more than
 * 127 ranks; GW_ERR_MISMATCH when ranks' settings, shapes or steps differ;
 * and every error of gw_allreduce, which break the communicator as usual. */
GW_API gw_status_t gw_allreduce_compressed(gw_comm_t *comm, gw_compress_state_t *state,
                                           const float *in, float *out, size_t count);

/* Non-blocking gw_allreduce_compressed, completed by gw_test or gw_wait and
 * queued in call order with the communicator's other collectives, like
 * gw_iallreduce; results are bitwise the blocking call's. Until the handle
 * completes, state, in and out belong to the library: do not touch them
 * (nor call gw_compress_stats_get or gw_compress_state_step, _save, _load
 * or _destroy on the state). Several calls may be in flight, on one state or several; they run
 * one after another. Errors here: GW_ERR_INVALID_ARG (NULL comm or handle),
 * GW_ERR_NO_MEMORY, GW_ERR_SYSTEM (no progress thread); every other error
 * is the handle's status, as the blocking call would have returned it.
 * docs/guide/compression.md has the details (codec CPU time, threads). */
GW_API gw_status_t gw_iallreduce_compressed(gw_comm_t *comm, gw_compress_state_t *state,
                                            const float *in, float *out, size_t count,
                                            gw_handle_t **handle);

/* gw_allreduce_compressed and gw_iallreduce_compressed for gradients of
 * dtype GW_FLOAT32, GW_FLOAT16 or GW_BFLOAT16 (in and out: count elements
 * of dtype). Halves are widened to float32 (exactly), compressed and
 * averaged as float32 gradients are (the state, its residual and every
 * codec stay float32: the state is made as for float32), and the average
 * is rounded back to dtype once, to nearest even; that last rounding is
 * not part of the residual. Every rank passes the same dtype. Another
 * dtype is GW_ERR_INVALID_ARG (the communicator is failed, as for a wrong
 * count); GW_ERR_NO_MEMORY when the float32 copies (8 bytes per element)
 * do not fit. Otherwise as the float32 calls. */
GW_API gw_status_t gw_allreduce_compressed_dtype(gw_comm_t *comm, gw_compress_state_t *state,
                                                 const void *in, void *out, size_t count,
                                                 gw_dtype_t dtype);
GW_API gw_status_t gw_iallreduce_compressed_dtype(gw_comm_t *comm, gw_compress_state_t *state,
                                                  const void *in, void *out, size_t count,
                                                  gw_dtype_t dtype, gw_handle_t **handle);

/* What the calls on a state cost. Bytes count payload only (not the
 * transport's framing). */
typedef struct gw_compress_stats {
    uint64_t calls;            /* successful calls */
    uint64_t compressed_calls; /* of which went through the codec */
    uint64_t input_bytes;      /* 4 * count per call */
    uint64_t encoded_bytes;    /* this rank's encoded contribution (input bytes
                                * for dense calls) */
    uint64_t bytes_sent;       /* payload this rank sent, every phase included
                                * (agreeing on scales, checks) */
    uint64_t dense_bytes_sent; /* what a ring gw_allreduce of the same input
                                * sends from this rank: 2 (n-1)/n x input */
    double compression_ratio;  /* dense_bytes_sent / bytes_sent (0 if nothing
                                * was sent, e.g. one rank) */
    double encode_seconds;     /* error feedback, encoding, selection */
    double decode_seconds;     /* decoding and averaging */
    double comm_seconds;       /* inside the exchanges */
    double total_seconds;      /* whole calls */
    double codec_cpu_seconds;  /* CPU time of the calling thread outside the
                                * exchanges: the codec's cost on one core,
                                * whatever else the machine is doing */
} gw_compress_stats_t;

/* The last successful call's figures (*last) and the sums since creation or
 * the last reset (*total, with compression_ratio recomputed from the sums).
 * Either pointer may be NULL. GW_ERR_INVALID_ARG for a NULL state. */
GW_API gw_status_t gw_compress_stats_get(const gw_compress_state_t *state,
                                         gw_compress_stats_t *last, gw_compress_stats_t *total);
/* Zero both (the step and the residual are not touched). */
GW_API void gw_compress_stats_reset(gw_compress_state_t *state);

/* ---- Point-to-point messages --------------------------------------------- */
/*
 * Messages between two ranks of a communicator, over the collectives'
 * transport; only the two ranks take part. The n-th gw_send from a to b
 * meets the n-th gw_recv that b posts for a, with the same count and
 * dtype, or both fail with GW_ERR_MISMATCH (the receive's buffer not
 * written). Sends are synchronous by default (GW_P2P_SEND_SYNC, below):
 * one completes when the receiver has accepted it, so two ranks that both
 * gw_send first wait for each other until GW_TIMEOUT_MS (use gw_sendrecv
 * or gw_isend/gw_irecv for exchanges). A rank must not start a collective
 * while a peer still waits for a message from it. Errors:
 * GW_ERR_INVALID_ARG (NULL comm, peer out of range or the caller, NULL
 * buffer with count > 0, unknown dtype), GW_ERR_OVERFLOW, GW_ERR_TIMEOUT
 * (naming the peer), GW_ERR_REMOTE; any failure breaks the communicator.
 * Receipts: docs/design/architecture.md.
 */

/* When a send (gw_send, gw_isend's handle, gw_sendrecv's send half, and
 * the tagged forms) completes; GW_P2P_SEND chooses for communicators made
 * from the environment, gw_comm_set_p2p_send for one communicator (and
 * those it is shrunk, grown or split into).
 *   GW_P2P_SEND_SYNC: once the receiver matched the message and accepted
 *     it (MPI_Ssend). A message the receiver refuses fails the send itself
 *     with GW_ERR_MISMATCH and the receiver's culprit; a send nobody
 *     receives fails with GW_ERR_TIMEOUT naming the receiver. It costs a
 *     receipt, one more frame the other way per message.
 *   GW_P2P_SEND_STANDARD: as MPI_Send, once the buffer may be reused: the
 *     message is on its way (copied into the transport's buffers: socket,
 *     ring or the receiver's eager slot); what does not fit there waits
 *     for the matching receive (verbs: its clear-to-send). No receipt: a
 *     ping-pong costs one frame each way.
 *     The receiver still checks every message before a byte reaches its
 *     buffer and fails with GW_ERR_MISMATCH naming the culprit, and the
 *     sender learns it from the receiver's abort in a later call (at the
 *     latest one that waits on that peer), not in the send, which returned
 *     GW_OK. A small send to a rank that never receives returns GW_OK once
 *     the pair is connected (GW_CONNECT=lazy connects it when both ranks
 *     are in a call that uses it); the transport holds the message
 *     (bounded: the socket, ring or slots a pair has) until the receiver
 *     takes it, and later sends wait for room. */
typedef enum gw_p2p_send {
    GW_P2P_SEND_SYNC = 0,
    GW_P2P_SEND_STANDARD = 1,
} gw_p2p_send_t;

/* Choose how comm's later sends complete (see above). The two ranks of a
 * pair need not choose alike: it is the sender's choice. Errors:
 * GW_ERR_INVALID_ARG (NULL comm, unknown mode). */
GW_API gw_status_t gw_comm_set_p2p_send(gw_comm_t *comm, gw_p2p_send_t mode);
/* How comm's sends complete now (GW_P2P_SEND_SYNC for NULL). */
GW_API gw_p2p_send_t gw_comm_p2p_send(const gw_comm_t *comm);

/* Send count elements of dtype from buf to rank peer; returns once the peer
 * matched and accepted the message (see Matching above; under
 * GW_P2P_SEND_STANDARD once buf may be reused). */
GW_API gw_status_t gw_send(gw_comm_t *comm, const void *buf, size_t count, gw_dtype_t dtype,
                           int peer);

/* Receive count elements of dtype from rank peer into buf. */
GW_API gw_status_t gw_recv(gw_comm_t *comm, void *buf, size_t count, gw_dtype_t dtype, int peer);

/* Non-blocking gw_send and gw_recv: post the message and return at once
 * with a handle, completed by gw_test or gw_wait like a collective's. The
 * buffer must stay valid and untouched until then. Any number may be
 * outstanding; they match in posting order as the blocking calls do, so a
 * window of messages to one peer travels back to back (gradwire-bench p2p
 * -W). No thread runs them: data moves while this rank tests or waits for
 * any handle, or makes a blocking point-to-point call; test and wait for
 * them from the thread that posted them. No collective may start while any
 * is pending (it fails with GW_ERR_INVALID_ARG); gw_comm_destroy completes
 * leftovers with GW_ERR_ABORTED. gw_test fails with GW_ERR_TIMEOUT after
 * GW_TIMEOUT_MS without bytes moving. Errors as gw_send and gw_recv. */
GW_API gw_status_t gw_isend(gw_comm_t *comm, const void *buf, size_t count, gw_dtype_t dtype,
                            int peer, gw_handle_t **handle);
GW_API gw_status_t gw_irecv(gw_comm_t *comm, void *buf, size_t count, gw_dtype_t dtype, int peer,
                            gw_handle_t **handle);

/* Send to dst and receive from src at once (dst and src may be the same
 * rank): both directions move together, so exchanges in rings or pairs
 * cannot deadlock. sendbuf and recvbuf must not overlap. */
GW_API gw_status_t gw_sendrecv(gw_comm_t *comm, const void *sendbuf, size_t sendcount, int dst,
                               void *recvbuf, size_t recvcount, int src, gw_dtype_t dtype);

/*
 * Tagged messages, matched as MPI's: a receive names a source or
 * GW_ANY_SOURCE and a tag (>= 0) or GW_ANY_TAG and takes the earliest
 * message that fits; one source's messages with one tag never overtake
 * each other. Count and dtype must match (GW_ERR_MISMATCH naming the
 * sender). A message nobody waits for yet is held, at most 64 MiB per
 * communicator (past it GW_ERR_NO_MEMORY naming the sender); a send
 * completes once the receiver took its message in (GW_P2P_SEND_STANDARD:
 * once its buffer may be reused). No untagged messages in flight between
 * the same two ranks meanwhile; otherwise the rules above hold (no
 * collective while one is pending). Shared memory, TCP and verbs (over
 * several rails a tagged message goes whole over one). Details:
 * docs/guide/c-api.md.
 */
#define GW_ANY_SOURCE (-1)
#define GW_ANY_TAG (-1)
typedef struct gw_msg_status {
    int source; /* the sender's rank */
    int tag;
    size_t count; /* elements received */
} gw_msg_status_t;
GW_API gw_status_t gw_send_tagged(gw_comm_t *comm, const void *buf, size_t count, gw_dtype_t dtype,
                                  int peer, int tag);
/* *status (may be NULL): the message's source, tag and count. */
GW_API gw_status_t gw_recv_tagged(gw_comm_t *comm, void *buf, size_t count, gw_dtype_t dtype,
                                  int source, int tag, gw_msg_status_t *status);
GW_API gw_status_t gw_isend_tagged(gw_comm_t *comm, const void *buf, size_t count, gw_dtype_t dtype,
                                   int peer, int tag, gw_handle_t **handle);
/* *status (may be NULL) is written when the handle completes with GW_OK
 * and must stay valid until then. */
GW_API gw_status_t gw_irecv_tagged(gw_comm_t *comm, void *buf, size_t count, gw_dtype_t dtype,
                                   int source, int tag, gw_msg_status_t *status,
                                   gw_handle_t **handle);

/* ---- Grouped calls and fusion -------------------------------------------- */
/*
 * gw_group_start and gw_group_end bracket calls that progress as one
 * operation, as NCCL's ncclGroupStart/End do. Between them the blocking
 * collectives of this header's Collectives section (allreduce, its premul
 * form, broadcast, reduce, allgather, reduce-scatter, barrier), the
 * collectives that move blocks (alltoall(v), gather, scatter, allgatherv)
 * and gw_send, gw_recv and gw_sendrecv return GW_OK at once, having only
 * been queued (a bad argument is reported by gw_group_end); their buffers
 * and count arrays must stay valid and untouched until gw_group_end
 * returns. gw_group_end issues them: first the collectives in call order,
 * each run of consecutive allreduces with one dtype and op (messages
 * queued between them aside) fused into buckets as gw_allreduce_many
 * does; then every point-to-point message,
 * all posted at once and progressed in one loop, so that a send and the
 * matching receive queued in groups on both ranks cannot deadlock, in
 * whatever order each rank queued them. Every rank must group the same
 * collectives (as it would issue them); messages pair up as outside a
 * group (the n-th send from a to b with the n-th receive of b from a).
 * Groups nest (an inner gw_group_end only counts down). Other calls
 * (non-blocking ones, compressed allreduce, split, dup) inside a group
 * are refused with GW_ERR_UNSUPPORTED. gw_group_end returns the first
 * failure of the calls it issued (later ones are not issued then: the
 * communicator is broken anyway) and GW_OK otherwise. Errors:
 * GW_ERR_INVALID_ARG (NULL comm, gw_group_end without a start),
 * GW_ERR_NO_MEMORY (queueing; the group is then failed and gw_group_end
 * says so). One thread per communicator, as every call.
 */
GW_API gw_status_t gw_group_start(gw_comm_t *comm);
GW_API gw_status_t gw_group_end(gw_comm_t *comm);

/*
 * Allreduce each of n buffers in place (bufs[i] holds counts[i] elements
 * of dtype), as n gw_allreduce calls would, but fused (Horovod's tensor
 * fusion): consecutive buffers are packed into buckets of at most
 * GW_FUSION_BYTES bytes (64 MiB unless set; 0 turns fusion off), each
 * bucket reduced by one allreduce and unpacked; a buffer larger than the
 * threshold is reduced alone, in place, without a copy. Results are
 * bitwise those of the separate calls (the reduction is elementwise; the
 * algorithm picked for a bucket's size may differ, and every algorithm
 * gives the same bits). Every rank passes the same n, counts, dtype and op
 * and the same GW_FUSION_BYTES (a difference that changes the buckets is
 * GW_ERR_MISMATCH). op: any but GW_PREMUL_SUM. Buffers on a CUDA device
 * are reduced one by one. Errors: as gw_allreduce, GW_ERR_INVALID_ARG for
 * NULL arrays with n > 0 or a NULL buffer with a count, GW_ERR_NO_MEMORY
 * for the bucket (min(total, threshold) bytes of scratch per call).
 */
GW_API gw_status_t gw_allreduce_many(gw_comm_t *comm, void *const bufs[], const size_t counts[],
                                     size_t n, gw_dtype_t dtype, gw_op_t op);
/* Non-blocking gw_allreduce_many: queued like every non-blocking call
 * (gw_iallreduce), the buffers reduced on the progress thread; bufs,
 * counts and the buffers must stay valid and untouched until the handle
 * completes. Host buffers only: a device buffer fails the handle with
 * GW_ERR_UNSUPPORTED. Argument errors are reported when it completes. */
GW_API gw_status_t gw_iallreduce_many(gw_comm_t *comm, void *const bufs[], const size_t counts[],
                                      size_t n, gw_dtype_t dtype, gw_op_t op, gw_handle_t **handle);

/* ---- Device buffers (CUDA) ----------------------------------------------- */
/*
 * Every call accepts CUDA device pointers, in any mix with host pointers;
 * data is staged through pinned host memory (allreduce, broadcast and
 * reduce in overlapped chunks of GW_CUDA_CHUNK bytes). Every rank must pass
 * device or host buffers alike to one chunked call, or all fail with
 * GW_ERR_MISMATCH. The CUDA part is the plugin libgradwire-cuda.so, opened
 * on first need; libgradwire never links the CUDA runtime. A device buffer
 * that cannot be staged (no plugin, libcudart or driver) fails with
 * GW_ERR_UNSUPPORTED naming what is missing. Details: docs/guide/cuda.md.
 */

/* What a communicator's buffers are. */
typedef enum gw_buffers {
    GW_BUFFERS_AUTO = 0, /* ask the CUDA runtime, when one is loaded (default) */
    GW_BUFFERS_HOST,     /* host memory only: never ask */
    GW_BUFFERS_DEVICE    /* device memory: stage every buffer (ordinal from
                          * the runtime, else device 0), and fail clearly
                          * when that is impossible */
} gw_buffers_t;

/* Declare what comm's buffers are, from the next call on (sub-communicators
 * have their own setting, AUTO at creation). Not thread-safe: not while a
 * call on comm is in flight. GW_ERR_INVALID_ARG for NULL or a bad value. */
GW_API gw_status_t gw_comm_set_buffers(gw_comm_t *comm, gw_buffers_t buffers);

/* The CUDA stream (a cudaStream_t) that the application's work on comm's
 * device buffers runs on: staging waits for what is queued on it when a
 * call starts (so a kernel that produced the data finishes first), and a
 * call completes only when its results are on the device. NULL (default):
 * the legacy default stream. Shared by the communicators split from comm.
 * Not thread-safe, as gw_comm_set_buffers. */
GW_API gw_status_t gw_comm_set_cuda_stream(gw_comm_t *comm, void *stream);

/* What this process's CUDA part is (`gradwire info`). */
typedef struct gw_cuda_info {
    int built;            /* the library was built with GW_CUDA (the plugin exists) */
    int loaded;           /* the plugin loaded and the runtime found a driver */
    int runtime_loaded;   /* a CUDA runtime was already in this process */
    int device_count;     /* devices it sees */
    char plugin[256];     /* the plugin's path as opened, or as looked for */
    char why[256];        /* when !loaded: plugin missing, libcudart missing, no
                         * driver (cudaErrorInsufficientDriver) or no device
                         * (cudaErrorNoDevice), in one line */
    char devices[8][128]; /* the first 8 devices' names */
} gw_cuda_info_t;

/* Fill *out by opening the plugin and asking the runtime (then closing
 * both). GW_OK whether or not CUDA is usable (see loaded and why);
 * GW_ERR_INVALID_ARG for NULL. Thread-safe. */
GW_API gw_status_t gw_cuda_info(gw_cuda_info_t *out);

#ifdef __cplusplus
}
#endif
#endif /* GRADWIRE_H */
