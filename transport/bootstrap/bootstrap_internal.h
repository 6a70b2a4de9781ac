/*
 * bootstrap_internal.h - state and helpers shared by the files of the
 * bootstrap rendezvous (contract in bootstrap.h, wire format in
 * bootstrap_msg.h).
 *
 *   bootstrap.c         the public entry points (open, job id, local address,
 *                       close), nonces and the best-effort REJECT
 *   bootstrap_client.c  ranks > 0: connecting to rank 0 and proving the token
 *   bootstrap_root.c    rank 0: the join state machine over every connection
 *   bootstrap_gather.c  the all-gather on both sides, with its failures
 *                       propagated by REJECT; for jobs of GW_BOOTSTRAP_RING_MIN
 *                       ranks or more, rank 0 hands out ring neighbours
 *   bootstrap_ring.c    one rank's part of the ring all-gather: its
 *                       listener, its neighbours' connections, the blocks
 *   bootstrap_ring_gather.c  the ring all-gather driven on rank 0 and on
 *                       the others, and rank 0's verdict on it
 *   bootstrap_late.c    rank 0, while the job runs: a REJECT for each process
 *                       that arrives after the job formed
 *   bootstrap_settle.c  the join's last step: every rank's connect outcome to
 *                       rank 0, which answers go or whom to blame (both
 *                       sides of such an outcome round are shared with the
 *                       ring all-gather's end)
 *   bootstrap_watch.c   after the all-gathers: a rank's reports to the
 *                       referee and the verdicts it gets back
 *   bootstrap_referee.c rank 0's referee thread: collects reports, asks the
 *                       other ranks what they wait for, decides whom to
 *                       blame and tells every rank
 *   bootstrap_shrink.c  after a failure: who goes on in a shrunk job, decided
 *                       by the referee, asked for by each survivor
 *   bootstrap_grow.c    at an agreed point: the members ask the referee to
 *                       admit the processes waiting to join
 *   bootstrap_joiner.c  a new process's side: proving the token, waiting for
 *                       its place
 *   bootstrap_heir.c    when rank 0 died: the heirs' listeners, and a
 *                       survivor's walk to the lowest surviving rank
 *   bootstrap_heir_lead.c  that rank's side: it decides who goes on, and
 *                       answers the late ones
 *
 * The sockets themselves (transfers with deadlines, addresses as text,
 * connection attempts and their pauses) are transport/sock.h's, shared with
 * the transports.
 *
 * See the comment at the top of each file for how its part works and why.
 */
#ifndef GW_TRANSPORT_BOOTSTRAP_INTERNAL_H
#define GW_TRANSPORT_BOOTSTRAP_INTERNAL_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/bootstrap_msg.h"
#include "transport/sock.h"

#define GW_BS_SUBSYS "bootstrap"
#define GW_BS_ADDR_TEXT 160 /* a peer address as text, "[v6]:port" included */
#define GW_BS_ROOT_TEXT 272 /* the configured root address, for messages */
/* Timeout messages name at most this many missing ranks, then "and N more". */
#define GW_BS_MISSING_LIST_MAX 16
/* Waiting to join, both sides say so at WARN (the default level: a wrong
 * GW_ROOT must not cost minutes of silence) progress_ms after they began
 * (GW_JOIN_PROGRESS_MS, 10 s by default), and then at this many times
 * that interval, until the join timeout. */
#define GW_BS_PROGRESS_EVERY_FACTOR 3
#define GW_BS_TYPE_BIT(t) (1u << (unsigned)(t))

struct gw_bootstrap {
    int rank;
    int size;
    int timeout_ms;
    int join_timeout_ms; /* the join's budget (GW_JOIN_TIMEOUT_MS), timeout_ms after it */
    int progress_ms;     /* the first "still waiting" line (GW_JOIN_PROGRESS_MS) */
    const gw_logger_t *log;
    char root[GW_BS_ROOT_TEXT]; /* "host:port" as configured, for messages */
    uint8_t job_id[GW_BS_JOB_ID_LEN];
    uint8_t data_key[32];               /* see gw__bootstrap_data_key */
    uint8_t ring_key[32];               /* the ring's handshake key (bootstrap_ring.c) */
    int ring_min;                       /* the ring from this many ranks on (rank 0's) */
    uint64_t sent_bytes;                /* rank 0: bytes sent by the last all-gather */
    struct sockaddr_storage local;      /* see gw__bootstrap_local_addr */
    socklen_t local_len;                /* 0 when there is none (size 1) */
    gw_status_t failed;                 /* sticky: the first error of an all-gather */
    int culprit;                        /* the rank the failure blames, -1 none */
    int64_t gathered_at;                /* when the last all-gather ended (gw__now_ms) */
    int root_fd;                        /* ranks > 0: the connection to rank 0 */
    int *fds;                           /* rank 0: fds[r] talks to rank r (fds[0] = -1) */
    char (*peer_addr)[GW_BS_ADDR_TEXT]; /* rank 0: peer address of each rank */
    /* The watch (bootstrap_watch.c). On rank 0, root_fd is its end of the
     * socket pair to the referee, which owns fds[] from then on. */
    int watching;
    int watch_gone;                   /* rank 0's connection closed or broke */
    int watch_bye;                    /* ... after rank 0 said BYE: it closed */
    uint8_t wrx[GW_BS_SMALL_MSG_MAX]; /* bytes of a message not yet whole */
    size_t wrx_len;
    int have_verdict;
    gw_bs_verdict_t verdict;
    int have_members; /* the referee answered our SHRINK (bootstrap_shrink.c) */
    gw_bs_members_t members;
    struct gw_bs_referee *referee; /* rank 0 */
    gw_bs_op_namer_t op_namer;     /* gw__bootstrap_set_op_namer */
    int have_clock;                /* the referee answered our CLOCK (gw__bootstrap_clock) */
    uint64_t clock_asked, clock_root;
    int late_lfd;   /* rank 0: the root's listener, kept for late processes */
    char *token;    /* rank 0: the job token, for joiners' proofs */
    int have_grown; /* the referee answered our GROW (bootstrap_grow.c) */
    gw_bs_members_t grown;
    /* The succession (bootstrap_heir.c): this rank's heir listener (ranks
     * > 0, -1 none), every rank's heir address (size x GW_SOCK_ADDR_WIRE,
     * rank 0's empty), the handshake's key, and after this rank led, the
     * thread that answers late requests. */
    int heir_lfd;
    uint8_t *heirs;
    uint8_t heir_key[32];
    struct gw_bs_answerer *answerer;
};

/* ---- what every part needs (bootstrap.c) -------------------------------- */

/* Nonces and the job id; logs and returns GW_ERR_SYSTEM on failure. */
gw_status_t gw__bs_random_bytes(const gw_logger_t *lg, void *buf, size_t n);
/* A REJECT that never blocks and may be lost: for the way out of a failure,
 * at a message boundary of our side of the stream. */
void gw__bs_send_reject_nowait(int fd, gw_status_t status, const char *reason);
/* The same for rank 0's word on a failed join or all-gather: a VERDICT
 * (origin 0, no collective) naming the rank to blame, so that every rank
 * names the same one (-1: none). */
void gw__bs_send_verdict_nowait(int fd, gw_status_t status, int culprit, const char *reason);

/* ---- the parts ----------------------------------------------------------- */

/* bootstrap_client.c: join as rank bs->rank > 0; on success bs->root_fd,
 * bs->local and bs->job_id are set. */
gw_status_t gw__bs_client_join(gw_bootstrap_t *bs, const char *host, const char *port,
                               const uint8_t *key, size_t key_len, int64_t start, int64_t deadline);
/* bootstrap_client.c: connect to the root host:port, retrying with growing
 * pauses until the deadline (GW_ERR_TIMEOUT, logged, naming the root). */
gw_status_t gw__bs_client_connect(gw_bootstrap_t *bs, const char *host, const char *port,
                                  int64_t start, int64_t deadline, int *out);
/* bootstrap_client.c: log rank 0's REJECT (msg, len bytes) and return its
 * status; "when" completes "rank 0 (root ...) ...". */
gw_status_t gw__bs_client_take_reject(const gw_bootstrap_t *bs, const uint8_t *msg, size_t len,
                                      const char *when);
/* bootstrap_client.c: the same for rank 0's VERDICT, whose culprit goes to
 * bs->culprit. */
gw_status_t gw__bs_client_take_verdict(gw_bootstrap_t *bs, const uint8_t *msg, size_t len,
                                       const char *when);
/* bootstrap_joiner.c: the client's half of the token handshake once rank
 * 0's challenge ch is in, for a joiner and a status query alike: check the
 * root's proof for our nonce (refusing a root that cannot prove the token,
 * and telling it), then send ours as proof rank as_rank; who names the
 * client in messages ("a joiner"). */
gw_status_t gw__bs_client_prove(gw_bootstrap_t *bs, int fd, const char *token, const uint8_t *nonce,
                                const gw_bs_challenge_t *ch, uint32_t as_rank, const char *who,
                                int64_t deadline);

/* bootstrap_where.c: where every rank was, grouped, into buf[0 .. cap)
 * (cut quietly at its end): accounts[r] is what rank r said of itself
 * last (NULL: nothing), gone[r] whether its connection is gone, namer names
 * the collectives (NULL: numbers only); done is size bytes of scratch. */
void gw__bs_where_all(const gw_bs_report_t *const *accounts, const unsigned char *gone, int size,
                      gw_bs_op_namer_t namer, unsigned char *done, char *buf, size_t cap);

/* bootstrap_referee.c: start the referee over bs->fds (which it takes
 * over: bs->fds[r] becomes -1) and self_fd, its end of the socket pair to
 * rank 0's own caller; stop it (NULL-safe), closing what it holds. */
typedef struct gw_bs_referee gw_bs_referee_t;
typedef struct gw_bs_late gw_bs_late_t;
gw_status_t gw__bs_referee_start(gw_bootstrap_t *bs, int self_fd, int grace_ms,
                                 gw_bs_referee_t **out);
void gw__bs_referee_stop(gw_bs_referee_t *ref);
/* bootstrap_referee.c: the referee's thread takes `in` (NULL: none) as its
 * late listener and hands back the one it had (bootstrap_grow.c moves the
 * job's root listener from one communicator to the next with it). */
gw_bs_late_t *gw__bs_referee_swap_late(gw_bs_referee_t *ref, gw_bs_late_t *in);
/* bootstrap_referee.c: the joiners parked at ref's late listener as of its
 * thread's last turn (0 for NULL); safe from any thread. */
int gw__bs_referee_joiners(gw_bs_referee_t *ref);

/* bootstrap_watch.c: read what rank 0 sent and act on each whole message
 * (answering an INQUIRE with *state when it is not NULL), and send one
 * small message to it (-1 when the connection broke: watch_gone is set). */
void gw__bs_watch_pump(gw_bootstrap_t *bs, const gw_bs_report_t *state);
int gw__bs_watch_send(gw_bootstrap_t *bs, const uint8_t *msg, size_t len);
/* bootstrap_watch.c: send msg to rank 0's referee and pump the connection
 * until *answered is set (by the answer's handler) or deadline passes:
 * GW_ERR_REMOTE when the connection to rank 0 is gone, GW_ERR_TIMEOUT at
 * the deadline. What a shrink and a grow do once their request is made. */
gw_status_t gw__bs_watch_ask(gw_bootstrap_t *bs, const uint8_t *msg, size_t len,
                             const int *answered, int64_t deadline);

/* bootstrap_shrink.c, the referee's side: one shrink case over size ranks
 * (NULL: no memory). request records rank r's SHRINK at `now` (the first
 * opens the case); decide decides when it can (every rank asked or is gone,
 * rank 0 among those that asked; or the window ended), returning 1 the
 * moment it does, with gone[r] set for each rank whose connection closed;
 * deadline is when the open case ends (INT64_MAX: none open); answer gives
 * a decided case's MEMBERS for r (0 when r did not ask before the
 * decision: then left_out is its answer). */
typedef struct gw_bs_shrink gw_bs_shrink_t;
gw_bs_shrink_t *gw__bs_shrink_new(const gw_logger_t *log, int size);
void gw__bs_shrink_free(gw_bs_shrink_t *sh);
void gw__bs_shrink_request(gw_bs_shrink_t *sh, int r, const gw_bs_shrink_req_t *req, int64_t now);
int gw__bs_shrink_decide(gw_bs_shrink_t *sh, const unsigned char *gone, int64_t now);
int gw__bs_shrink_decided(const gw_bs_shrink_t *sh);
int64_t gw__bs_shrink_deadline(const gw_bs_shrink_t *sh);
int gw__bs_shrink_answer(const gw_bs_shrink_t *sh, int r, gw_bs_members_t *m);
void gw__bs_shrink_left_out(gw_bs_members_t *m);
/* The rank whose request carries the port and without which nobody goes
 * on: 0 (the referee's case) unless an heir leads (bootstrap_heir_lead.c). */
void gw__bs_shrink_lead(gw_bs_shrink_t *sh, int leader);
/* Whether rank r asked. */
int gw__bs_shrink_asked(const gw_bs_shrink_t *sh, int r);
/* Rank `by` sent DEPOSED: it found the leader (rank 0) stopped or hung and
 * goes on under an heir. The case is decided at once if it was open or not
 * yet opened (GW_ERR_TIMEOUT for every rank that asked, so that they go to
 * the succession too); from then on the leader's own answer is left out
 * (GW_ERR_ABORTED), whenever it asks. Returns 1 when this decided the case
 * (the caller answers those that asked). */
int gw__bs_shrink_depose(gw_bs_shrink_t *sh, int by);
/* Whether a rank sent DEPOSED. */
int gw__bs_shrink_deposed(const gw_bs_shrink_t *sh);

/* ---- the succession (bootstrap_heir.c, bootstrap_heir_lead.c) ----------- */

/* gw__bs_heir_recv's result for a message that is not the one expected
 * (beside the GW_SOCK_IO_* results). */
#define GW_BS_HEIR_MALFORMED 100
/* Rank r's heir listener address (and as text, when text is not NULL);
 * -1 when it has none (rank 0, or no table). */
int gw__bs_heir_addr(const gw_bootstrap_t *bs, int r, struct sockaddr_storage *sa, socklen_t *len,
                     char *text, size_t cap);
/* The numeric host of an heir address (an IPv6 link-local one with its
 * scope), for the new root's address. */
void gw__bs_heir_host(const struct sockaddr_storage *sa, socklen_t len, char *host, size_t cap);
/* One connection attempt until deadline: the connected socket, or -1 with
 * *refused set when the address refused it (nobody listens: the process
 * is gone), clear when it did not answer in time. */
int gw__bs_heir_dial(const struct sockaddr_storage *sa, socklen_t len, int64_t deadline,
                     int *refused);
/* One whole message of a type in mask into buf (cap bytes), waiting until
 * deadline: a GW_SOCK_IO_* result, or GW_BS_HEIR_MALFORMED. */
int gw__bs_heir_recv(int fd, unsigned mask, int64_t deadline, uint8_t *buf, size_t cap, size_t *len,
                     gw_bs_hdr_t *hdr);
/* This rank leads: gone[r] set for the ranks known gone (or silent) before
 * it; *out its own place, root the new root's address. */
gw_status_t gw__bs_heir_lead(gw_bootstrap_t *bs, unsigned char *gone, int window_ms, char *root,
                             size_t root_cap, gw_bs_members_t *out);
/* Start the thread that answers late requests on the heir listener
 * (without memory or a thread, late ranks wait out their window instead). */
void gw__bs_heir_answer_late(gw_bootstrap_t *bs);
void gw__bs_heir_answerer_stop(struct gw_bs_answerer *w);
/* bootstrap_shrink.c: a free TCP port on host, bound once and released. */
gw_status_t gw__bs_reserve_port(gw_bootstrap_t *bs, const char *host, uint32_t *port);
/* bootstrap_shrink.c, for a member's shrink or grow: the root's host
 * (parsed from the bootstrap's root address, into host), the request (the
 * window; on rank 0 the port reserved there for the new root) and the
 * deadline for the referee's answer (the window plus a margin).
 * GW_ERR_CONFIG for a root address that does not parse; the reservation's
 * error on rank 0. */
gw_status_t gw__bs_new_root_request(gw_bootstrap_t *bs, int window_ms, char *host, size_t host_cap,
                                    gw_bs_shrink_req_t *req, int64_t *deadline);
/* "host:port", or "[host]:port" for an IPv6 host, into root. */
void gw__bs_new_root(const char *host, uint32_t port, char *root, size_t root_cap);

/* bootstrap_grow.c, the referee's side: one grow at a time over size
 * ranks (NULL: no memory). request records rank r's GROW (the first opens
 * it, for its window); decide returns 1 once every rank asked (*status
 * GW_OK, *port rank 0's port), a rank is gone (GW_ERR_REMOTE) or the
 * window ended (GW_ERR_TIMEOUT); asked says whether r asked; reset closes
 * it for the next; deadline: INT64_MAX when none is open. */
typedef struct gw_bs_grow gw_bs_grow_t;
gw_bs_grow_t *gw__bs_grow_new(const gw_logger_t *log, int size);
void gw__bs_grow_free(gw_bs_grow_t *g);
void gw__bs_grow_request(gw_bs_grow_t *g, int r, const gw_bs_shrink_req_t *req, int64_t now);
int gw__bs_grow_decide(gw_bs_grow_t *g, const unsigned char *gone, int64_t now, gw_status_t *status,
                       uint32_t *port);
int gw__bs_grow_asked(const gw_bs_grow_t *g, int r);
void gw__bs_grow_reset(gw_bs_grow_t *g);
int64_t gw__bs_grow_deadline(const gw_bs_grow_t *g);

/* bootstrap_late.c: rank 0's answers to processes that arrive after the
 * job formed, run by the referee's thread. open takes bs->late_lfd (NULL
 * when there is none, or no memory); pollfds writes GW_BS_LATE_PFDS
 * entries (the listener first) and returns how many; events handles what
 * poll() reported in them; deadline is when the oldest held connection
 * expires (INT64_MAX: none); close is NULL-safe. */
#define GW_BS_LATE_JOINERS 8
#define GW_BS_LATE_PFDS (17 + GW_BS_LATE_JOINERS)
typedef struct gw_bs_late gw_bs_late_t;
gw_bs_late_t *gw__bs_late_open(gw_bootstrap_t *bs);
/* The same on the listener lfd, which it owns only when it returns one. */
gw_bs_late_t *gw__bs_late_open_on(gw_bootstrap_t *bs, int lfd);
/* A listening TCP socket at host:port (SO_REUSEADDR), what naming it in
 * the errors, which are logged (bootstrap_root.c). */
gw_status_t gw__bs_listen_at(const gw_logger_t *log, const char *host, const char *port,
                             const char *what, int *out);
int gw__bs_late_pollfds(gw_bs_late_t *l, struct pollfd *pfds);
/* status builds the STATUS answer for a process that proved the job token
 * after a STATUS_ASK (malloc'd message, NULL when memory is short). */
typedef uint8_t *(*gw_bs_status_fn)(void *ctx, size_t *len);
void gw__bs_late_events(gw_bs_late_t *l, const struct pollfd *pfds, gw_bs_status_fn status,
                        void *ctx);
int64_t gw__bs_late_deadline(const gw_bs_late_t *l);
void gw__bs_late_close(gw_bs_late_t *l);
/* Joiners (processes that sent JOIN and proved the job token): joiners
 * counts those waiting; admit sends each its GROWN (ranks from first_rank,
 * in the order they arrived), closes them and returns how many it
 * admitted; set_size is the job's size after a shrink or a grow, for the
 * REJECTs' text. All NULL-safe. */
int gw__bs_late_joiners(const gw_bs_late_t *l);
int gw__bs_late_admit(gw_bs_late_t *l, int first_rank, int new_size, uint32_t port);
void gw__bs_late_set_size(gw_bs_late_t *l, int size);

/* bootstrap_ring.c: one rank's part of the ring all-gather. listen opens
 * the ring listener on near's address (any port; *port says which) and
 * logs; start gives it the next rank's listener address, the length of a
 * block and the result buffer, which holds this rank's own block already,
 * and the deadline. The caller polls: pollfds writes at most
 * GW_BS_RING_PFDS entries and returns how many, wait_ms says how long
 * poll() may wait, and events (called after every poll(), with or without
 * events) moves the ring on and returns GW_BS_RING_BUSY, _DONE or _FAILED
 * (logged; outcome gives the status and the neighbour to blame). close
 * is NULL-safe. */
#define GW_BS_RING_PFDS 8
enum { GW_BS_RING_BUSY, GW_BS_RING_DONE, GW_BS_RING_FAILED };
typedef struct gw_bs_ring gw_bs_ring_t;
gw_status_t gw__bs_ring_listen(gw_bootstrap_t *bs, const struct sockaddr_storage *near,
                               socklen_t near_len, gw_bs_ring_t **out, uint32_t *port);
void gw__bs_ring_start(gw_bs_ring_t *g, const struct sockaddr_storage *next, socklen_t next_len,
                       size_t len, uint8_t *all, int64_t deadline);
int gw__bs_ring_pollfds(gw_bs_ring_t *g, struct pollfd *pfds);
int gw__bs_ring_wait_ms(const gw_bs_ring_t *g);
int gw__bs_ring_events(gw_bs_ring_t *g, const struct pollfd *pfds, int n);
gw_status_t gw__bs_ring_outcome(const gw_bs_ring_t *g, int *suspect);
uint64_t gw__bs_ring_bytes_sent(const gw_bs_ring_t *g);
void gw__bs_ring_close(gw_bs_ring_t *g);

/* bootstrap_ring_gather.c: the ring all-gather once rank 0 has handed out
 * the neighbours. Rank 0 (root_run) runs its own part while it reads every
 * rank's outcome over the star, then answers every rank go or whom to
 * blame (bs->culprit); a rank > 0 (client) opens its listener, sends rank
 * 0 its port, gets its neighbour's address, runs its part and reports.
 * Both return the all-gather's status. */
gw_status_t gw__bs_ring_root_run(gw_bootstrap_t *bs, gw_bs_ring_t *g, int64_t ring_deadline);
gw_status_t gw__bs_ring_client(gw_bootstrap_t *bs, const void *mine, size_t len, uint8_t *all);
/* How long rank 0 waits, after the ring's deadline or a rank's failure,
 * for the others' word before it decides. */
int gw__bs_ring_grace_ms(int timeout_ms);

/* bootstrap_settle.c, rank 0's side of an outcome round (the settle's, and
 * the ring all-gather's end): one seat per rank, each rank's REPORT read
 * into it, and whom to blame when not every rank succeeded. */
typedef enum gw_bs_seat_state {
    GW_BS_SEAT_PENDING,
    GW_BS_SEAT_OK,
    GW_BS_SEAT_FAILED,
    GW_BS_SEAT_GONE
} gw_bs_seat_state_t;

typedef struct gw_bs_seat {
    gw_bs_seat_state_t state;
    gw_sock_io_t io;
    uint8_t buf[GW_BS_REPORT_LEN];
    gw_bs_report_t rep;
} gw_bs_seat_t;

/* How a round's log lines and verdicts name it. */
typedef struct gw_bs_round_words {
    const char *outcome;       /* "its connect": a malformed outcome of ... */
    const char *during;        /* "while the ranks ...": when a rank left */
    const char *silent;        /* "say whether ...": a silent rank did not ... */
    const char *silent_others; /* appended to that when others failed ("" none) */
    const char *failed;        /* "failed to ...": n of m ranks ... */
} gw_bs_round_words_t;

/* Read what rank r sent into its seat (a malformed report counts as rank
 * r failing with GW_ERR_PROTOCOL and blaming itself, with a WARN). */
void gw__bs_seat_read(gw_bootstrap_t *bs, int r, gw_bs_seat_t *s, const gw_bs_round_words_t *w);
/* The verdict when not every seat is OK: a gone rank, else a silent one,
 * else the rank the failed ranks blame most (votes: size zeroed ints).
 * first_failed is the rank whose failure came first (-1: the lowest failed
 * rank, if any); it is the verdict's origin and gives its status. */
void gw__bs_round_decide(gw_bootstrap_t *bs, const gw_bs_seat_t *seats, int first_failed,
                         int *votes, const gw_bs_round_words_t *w, gw_bs_verdict_t *v);

/* bootstrap_settle.c: a rank > 0 reports mine (and its suspect) to rank 0
 * and waits for go or a verdict until since + timeout + grace + a margin
 * (from now, when that is past); `when` ("while ...") and `ended` ("rank
 * 0 ... <ended>: <verdict>") name the exchange in log lines. Returns mine
 * when it failed, else rank 0's word; with verdict_wins, a verdict's
 * status even when mine failed (so that every rank returns the job's one
 * answer). What the settle does on a rank > 0, shared with the ring's end. */
gw_status_t gw__bs_client_outcome(gw_bootstrap_t *bs, gw_status_t mine, int suspect, int grace_ms,
                                  int64_t since, const char *when, const char *ended,
                                  int verdict_wins);

/* bootstrap_root.c: listen, accept size - 1 ranks and welcome them; on
 * success bs->fds, bs->peer_addr, bs->local and bs->job_id are set (bs->fds
 * and bs->peer_addr may be set on failure too: gw__bootstrap_close frees
 * them). */
gw_status_t gw__bs_root_open(gw_bootstrap_t *bs, const char *host, const char *port,
                             const uint8_t *key, size_t key_len, int64_t start, int64_t deadline);

#endif
