/*
 * bootstrap.h - out-of-band rendezvous of the ranks of one job.
 *
 * Rank 0 listens at the root address; every other rank connects (retrying
 * with growing sleeps until the timeout) and the two prove to each other that
 * they know the job token by HMAC-SHA256 challenge-response: the token never
 * crosses the wire. Connections that fail the handshake (wrong token, garbage,
 * a port scanner that sends nothing) are logged and dropped while rank 0 keeps
 * waiting for the real ranks. Once all ranks are in, rank 0 sends each a
 * random 16-byte job id; the listener stays open so that a process that
 * arrives later is told at once that the job formed (bootstrap_late.c). The star of connections
 * stays open for small all-gathers (transport addresses, later out-of-band
 * RDMA connection data), and then, for as long as the job runs, for the
 * watch: a rank whose communicator fails reports to rank 0's referee, which
 * decides whom to blame and tells every rank (bootstrap_watch.c).
 */
#ifndef GW_TRANSPORT_BOOTSTRAP_H
#define GW_TRANSPORT_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/log.h"
#include "gradwire.h"
#include "transport/bootstrap/bootstrap_msg.h"

typedef struct gw_bootstrap gw_bootstrap_t;

typedef struct gw_bootstrap_params {
    int rank;
    int size;
    const char *root;  /* "host:port" */
    const char *token; /* NULL or "": no token, refused unless insecure */
    int timeout_ms;    /* overall budget for open() and each later call */
    /* The budget for open()'s join (every rank reaching the root), kept
     * apart from timeout_ms so a slow start need not lengthen the
     * collectives' timeout (GW_JOIN_TIMEOUT_MS). 0: timeout_ms. */
    int join_timeout_ms;
    /* The first "still waiting to join" line this long after the start,
     * then every GW_BS_PROGRESS_EVERY_FACTOR times as long
     * (GW_JOIN_PROGRESS_MS). 0: 10 s. */
    int join_progress_ms;
    const gw_logger_t *log;
    int *culprit; /* optional: where open() writes the rank its failure blames (-1 none) */
    /* All-gathers go round a ring of rank-to-rank connections instead of
     * through rank 0 from this many ranks on (GW_BOOTSTRAP_RING_MIN); rank
     * 0's value decides for every rank. 0: GW_BOOTSTRAP_RING_MIN_DEFAULT. */
    int ring_min;
    /* A job of several ranks without a token is refused (GW_ERR_CONFIG,
     * saying how to give one) unless this is set (GW_INSECURE=1): then it
     * runs, and every rank warns that anyone who reaches a port gets in. */
    int insecure;
} gw_bootstrap_params_t;

#define GW_BOOTSTRAP_RING_MIN_DEFAULT 256
/* The fewest characters of a job token (GW_JOB_TOKEN's registry entry,
 * GW_JOB_TOKEN_FILE, a token in gw_config_t). */
#define GW_JOB_TOKEN_MIN 16

/* Join the job. Rank 0 binds the root address and waits for size - 1
 * authenticated ranks; others connect to it. Errors: GW_ERR_TIMEOUT (message
 * names the root address and how many ranks joined; when rank 0 gives up,
 * every rank that did join is told which ranks are missing and names them
 * too), GW_ERR_AUTH (token
 * mismatch, on the connecting rank), GW_ERR_CONFIG (rank/size disagreement,
 * duplicate rank, no token without params->insecure), GW_ERR_SYSTEM (bind failed: address in use, ...). On
 * failure *params->culprit (when set) is the rank to blame, the same on
 * every rank that got rank 0's word: the missing rank (the first, when
 * several are), rank 0 when it could not be reached or gave no word in
 * time, this rank when rank 0 refused it; -1 when none can be named. */
gw_status_t gw__bootstrap_open(const gw_bootstrap_params_t *params, gw_bootstrap_t **out);

/* The job id chosen by rank 0 (same on every rank). */
void gw__bootstrap_job_id(const gw_bootstrap_t *bs, uint8_t job_id[16]);

/* The key that the transports' data connections prove knowledge of:
 * HMAC-SHA256(job token, "gradwire data plane" || job id), the same on every
 * rank. Without a token (GW_INSECURE=1 only) it is derived from the empty
 * key, so anyone who learns the job id can compute it: every rank warns
 * that the job, its data connections included, is unauthenticated. */
void gw__bootstrap_data_key(const gw_bootstrap_t *bs, uint8_t key[32]);

/* Local address of this rank's connection towards rank 0 (for rank 0: the
 * address it listens on, port excluded meaning). Used to pick the interface. */
gw_status_t gw__bootstrap_local_addr(const gw_bootstrap_t *bs, struct sockaddr_storage *addr,
                                     socklen_t *len);

/* all[r * len ... ] = rank r's `mine` (len bytes, same len on every rank).
 * When it fails, rank 0 tells every rank whom to blame
 * (gw__bootstrap_culprit); a rank waits for that word up to its timeout
 * plus a second. From rank 0's ring_min ranks on, rank 0 collects the
 * blocks and hands out ring neighbours, and the result goes round a ring
 * of authenticated rank-to-rank connections (bootstrap_ring_gather.c);
 * rank 0 then sends O(size x len) bytes instead of size^2 x len, and each
 * rank's part of the ring gets its own timeout. */
gw_status_t gw__bootstrap_allgather(gw_bootstrap_t *bs, const void *mine, size_t len, void *all);

/* The rank the bootstrap's failure blames (an all-gather's or the
 * settle's), -1 while it has not failed or when none could be named. */
int gw__bootstrap_culprit(const gw_bootstrap_t *bs);

/* The join's last step, after the data plane connected or failed to (see
 * bootstrap_settle.c): every rank tells rank 0 its outcome (mine, and the
 * rank it suspects when it failed, -1 none) and rank 0 answers that every
 * rank connected, or with whom to blame: a rank that died (its connection
 * closed), one that said nothing within grace_ms after the first failure
 * (stopped or hung), else the rank the failed ranks suspect most. GW_OK
 * when every rank connected; else this rank's own failure (mine), or the
 * verdict's status, with gw__bootstrap_culprit set. */
gw_status_t gw__bootstrap_settle(gw_bootstrap_t *bs, gw_status_t mine, int suspect, int grace_ms);

/* ---- the watch, after the last all-gather ------------------------------ */

/* Start the watch: from now on the star of connections carries reports
 * and verdicts only (no all-gather may follow). Rank 0 starts the referee,
 * a thread that owns the connections to the other ranks and talks to its
 * own rank through a socket pair, so that it answers even while rank 0's
 * caller computes. grace_ms bounds how long it waits for answers before it
 * decides. GW_ERR_SYSTEM or GW_ERR_NO_MEMORY (logged) when it cannot start;
 * a job of one rank has nothing to watch (GW_OK, nothing started). */
gw_status_t gw__bootstrap_watch_start(gw_bootstrap_t *bs, int grace_ms);

/* How the referee names the kinds of collective that reports carry
 * (gw_bs_report_t.op_kind), so its verdict can say where each rank was;
 * set before gw__bootstrap_watch_start (NULL: by number). The layer above
 * owns the kinds, so it lends the names. */
typedef const char *(*gw_bs_op_namer_t)(uint32_t op_kind);

/* Send this rank's news to rank 0's referee (a PULSE, for `gradwire
 * status`): nothing when the watch does not run or rank 0 is gone, and
 * nothing when the connection's buffer is full (the next pulse will do). */
struct gw_bs_pulse;
void gw__bootstrap_pulse(gw_bootstrap_t *bs, const struct gw_bs_pulse *p);

/* This rank's CLOCK_MONOTONIC against rank 0's, measured through the
 * watch's connection (a few round trips to the referee): *offset_ns is
 * rank 0's clock minus this rank's, give or take half of *rtt_ns. For the
 * timeline (GW_TRACE), right after gw__bootstrap_watch_start.
 * GW_ERR_UNSUPPORTED without a watch, GW_ERR_TIMEOUT without an answer. */
gw_status_t gw__bootstrap_clock(gw_bootstrap_t *bs, int64_t *offset_ns, int64_t *rtt_ns);

/* Ask the job whose root is `root` (host:port) how its ranks are doing,
 * proving `token` (bootstrap_status.c): every rank's latest news as rank
 * 0's referee holds it, malloc'd into *ranks (*n of the job's *size
 * ranks). GW_ERR_AUTH when either side cannot verify the other's proof,
 * GW_ERR_TIMEOUT after timeout_ms, GW_ERR_CONFIG for a bad root or
 * token; each logged. */
struct gw_bs_rank_status;
gw_status_t gw__bootstrap_status(const gw_logger_t *lg, const char *root, const char *token,
                                 int timeout_ms, uint32_t *size, struct gw_bs_rank_status **ranks,
                                 uint32_t *n);
void gw__bootstrap_set_op_namer(gw_bootstrap_t *bs, gw_bs_op_namer_t namer);

/* Whether the watch runs and rank 0 can still be reached. */
int gw__bootstrap_watching(const gw_bootstrap_t *bs);

/* Look at what the referee sent, without blocking: an INQUIRE is answered
 * with *state (a STATE report of what this rank waits for, when state is
 * not NULL). Returns 1 with *verdict once a verdict has come (and again on
 * every later call), 0 otherwise, also when the watch is not running or
 * rank 0 is gone. */
int gw__bootstrap_watch_poll(gw_bootstrap_t *bs, const gw_bs_report_t *state,
                             gw_bs_verdict_t *verdict);

/* Send a FAILED or STALLED report to the referee and wait up to wait_ms
 * (0: not at all) for its verdict: GW_OK with *verdict (also when it had
 * come before), GW_ERR_TIMEOUT when none came in time, GW_ERR_REMOTE when
 * rank 0 cannot be reached (its connection closed or broke without a word:
 * it died), GW_ERR_UNSUPPORTED when the watch is not running (also once
 * rank 0 closed its communicator and its referee said BYE). */
gw_status_t gw__bootstrap_watch_report(gw_bootstrap_t *bs, const gw_bs_report_t *report,
                                       int wait_ms, gw_bs_verdict_t *verdict);

/* Ask rank 0's referee to shrink the job to the ranks that ask within
 * window_ms of the first that did (bootstrap_shrink.c says how it
 * decides). GW_OK with *members: a member (status GW_OK, its new rank and
 * size, and in root the shrunk job's root address, "host:port" on rank 0's
 * host), or not (status GW_ERR_ABORTED: left out, it asked too late or
 * its connection closed; GW_ERR_TIMEOUT: rank 0 did not ask in time).
 * GW_ERR_REMOTE when rank 0 is gone, GW_ERR_TIMEOUT when no answer came
 * within the window plus a margin, GW_ERR_UNSUPPORTED without the watch,
 * GW_ERR_SYSTEM when rank 0 finds no port. One shrink per bootstrap. */
gw_status_t gw__bootstrap_shrink(gw_bootstrap_t *bs, int window_ms, char *root, size_t root_cap,
                                 gw_bs_members_t *members);

/* Open this rank's heir listener and all-gather every rank's (the last
 * all-gather before the watch; bootstrap_heir.c says why): a rank of a
 * job that loses rank 0 leads, or asks the lowest surviving rank, through
 * them. GW_ERR_SYSTEM when the listener cannot be opened, else the
 * all-gather's status. A job of one rank has none (GW_OK). */
gw_status_t gw__bootstrap_heirs_open(gw_bootstrap_t *bs);

/* Rank 0 did not answer this rank's shrink in time (gw__bootstrap_shrink
 * said GW_ERR_TIMEOUT, or its referee answered GW_ERR_TIMEOUT: rank 0 did
 * not ask): tell its referee that this rank goes on without it (DEPOSED)
 * and close the connection, before gw__bootstrap_succeed. A rank 0 that
 * wakes is then left out of any shrink (bootstrap_shrink.c). Not on rank 0. */
void gw__bootstrap_depose(gw_bootstrap_t *bs);
/* Rank 0 is gone (gw__bootstrap_shrink said GW_ERR_REMOTE): agree with the
 * other survivors, through the lowest surviving rank, on who goes on
 * (bootstrap_heir.c). GW_OK with *members as gw__bootstrap_shrink gives
 * them (a member, with the new root's "host:port" on the heir's host in
 * root; or status GW_ERR_ABORTED: left out, or the group did not
 * outnumber the ranks alive elsewhere); GW_ERR_UNSUPPORTED without the
 * heirs' table; GW_ERR_AUTH when an heir could not prove the token; else
 * the last heir's failure. */
gw_status_t gw__bootstrap_succeed(gw_bootstrap_t *bs, int window_ms, char *root, size_t root_cap,
                                  gw_bs_members_t *members);

/* Stops the referee first (rank 0). NULL-safe. */
/* Ask rank 0's referee to admit the processes waiting to join
 * (bootstrap_grow.c says how): every rank asks, within window_ms of the
 * first. On GW_OK, *out is this rank's place: out->port 0 when nobody
 * joined (nothing changes), else out->new_rank, out->new_size and the grown
 * job's root "host:port" in root; out->status GW_ERR_TIMEOUT or
 * GW_ERR_REMOTE when a rank did not ask in time or is gone. GW_ERR_REMOTE
 * or GW_ERR_TIMEOUT when rank 0 is gone or says nothing; GW_ERR_UNSUPPORTED
 * without a watch. */
gw_status_t gw__bootstrap_grow(gw_bootstrap_t *bs, int window_ms, char *root, size_t root_cap,
                               gw_bs_members_t *out);
/* A new process: ask the job at root (token: its job token, NULL for none)
 * to admit it, and wait at most wait_ms for its place (*out, and the grown
 * job's root in new_root). Without a token it is refused before it
 * connects (GW_ERR_CONFIG, saying how to set one) unless insecure
 * (GW_INSECURE=1: it warns and joins a job that has none), as a job
 * without one is (gw__bootstrap_open); a token shorter than
 * GW_JOB_TOKEN_MIN is refused too. GW_ERR_AUTH when rank 0 refuses the
 * token, GW_ERR_TIMEOUT naming the root, GW_ERR_REMOTE when rank 0 closes
 * the connection, GW_ERR_CONFIG for a bad root; each logged. */
gw_status_t gw__bootstrap_join(const gw_logger_t *lg, const char *root, const char *token,
                               int insecure, int wait_ms, char *new_root, size_t cap,
                               gw_bs_members_t *out);
/* Rank 0: how many processes wait to be admitted at the next grow (parked
 * by the referee, which counts them each time its thread wakes; a joiner
 * is counted once it proved the job token). 0 on other ranks and without
 * a referee. Safe from any thread. */
int gw__bootstrap_joiners(const gw_bootstrap_t *bs);
/* Rank 0, after a shrink or grow: the job's root listener and the joiners
 * waiting on it move from one bootstrap's referee to the other's. A no-op
 * unless both have a referee. */
void gw__bootstrap_move_late(gw_bootstrap_t *from, gw_bootstrap_t *to);
/* Rank 0 of a communicator an heir roots (the succession: the job's root
 * listener died with rank 0): listen for joiners and late processes on
 * port, the job's root port, on this root's host, in place of the port
 * the heir reserved. GW_ERR_INVALID_ARG without a referee or port; the
 * listener's errors (the port taken on this host), logged; the reserved
 * port keeps answering then. */
gw_status_t gw__bootstrap_late_at(gw_bootstrap_t *bs, int port);
void gw__bootstrap_close(gw_bootstrap_t *bs);

#endif
