/*
 * sock.h - the TCP sockets that the TCP transport, the out-of-band set-up of
 * the verbs transport (ib_oob.c) and the bootstrap share: local addresses
 * (which one to listen on, as text, in an address blob), dialling with
 * growing pauses, accepting, and non-blocking transfers with deadlines.
 *
 *   sock.c       dialling, accepting, retries, transfers
 *   sock_addr.c  the choice of the local address, addresses as text and in
 *                address blobs
 *   sock_auth.c  the mutual proof of the job's data-plane key that opens
 *                every TCP data connection and every out-of-band verbs one,
 *                and the proof that every knock carries
 *   sock_strangers.c  connections that did not prove the key, logged with
 *                a bound
 *   sock_ifspec.c  GW_SOCKET_IFNAME's interface lists (NCCL's syntax)
 *
 * Each user keeps its own protocol (hellos, what makes a stranger, what a
 * time-out says); what lives here is what they did the same way, so that a
 * fix to how a socket is dialled, retried or read is made once.
 */
#ifndef GW_TRANSPORT_SOCK_H
#define GW_TRANSPORT_SOCK_H

#include <net/if.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "common/log.h"
#include "gradwire.h"

/* ---- addresses (sock_addr.c) --------------------------------------------- */

/* Choose the local address to listen on (port 0): the interface named by
 * ifname (GW_SOCKET_IFNAME) when it is set, else the local address of our
 * bootstrap connection (dflt). `desc` says why, for the INFO log. GW_ERR_CONFIG,
 * logged under subsys, when ifname names no usable interface or there is no
 * usable default; GW_ERR_SYSTEM when the interfaces cannot be listed. */
gw_status_t gw__sock_pick_addr(const gw_logger_t *lg, const char *subsys, const char *ifname,
                               const struct sockaddr_storage *dflt, socklen_t dflt_len,
                               struct sockaddr_storage *out, socklen_t *out_len, char *desc,
                               size_t desc_cap);

/* GW_SOCKET_IFNAME parsed (sock_ifspec.c): prefixes or '='-exact names,
 * comma-separated, all excluded with a leading '^'. */
#define GW_IFSPEC_MAX 16
typedef struct gw_ifspec {
    int exclude, count;
    struct {
        char name[IF_NAMESIZE];
        int exact;
    } items[GW_IFSPEC_MAX];
} gw_ifspec_t;

/* GW_ERR_CONFIG with what is wrong in err[0..cap) for an empty list, an
 * empty item, a name too long or with white space or '/' in it. */
gw_status_t gw__ifspec_parse(const char *text, gw_ifspec_t *spec, char *err, size_t cap);

/* Whether interface ifname may be used. */
int gw__ifspec_match(const gw_ifspec_t *spec, const char *ifname);

/* The address (an entry of all) of the first interface the spec allows
 * that is up and has one; NULL with the reasons in why[0..cap). */
struct ifaddrs;
const struct ifaddrs *gw__ifspec_choose(const gw_ifspec_t *spec, const struct ifaddrs *all,
                                        char *why, size_t cap);

/* "1.2.3.4:5", "[::1]:5" or, for a scoped link-local address,
 * "[fe80::1%eth0]:5"; "(no address)" for AF_UNSPEC, "(address family N)"
 * for the others. */
void gw__sock_addr_str(const struct sockaddr *sa, char *buf, size_t cap);

/* A socket address inside an address blob (GW_SOCK_ADDR_WIRE bytes, big
 * endian), as the TCP and the verbs transport both lay it out:
 *    0 u8 family (4, 6, or 0: none)   1 u16 port
 *    3 16 bytes address (IPv4: the first 4, the rest zero)
 *   19 u32 IPv6 scope id (IPv4: zero) */
#define GW_SOCK_ADDR_WIRE 23
/* AF_INET and AF_INET6 are written, anything else as family 0 (all zero). */
void gw__sock_addr_put(uint8_t out[GW_SOCK_ADDR_WIRE], const struct sockaddr *sa);
/* GW_OK for family 4 or 6; GW_ERR_NOT_FOUND for family 0 (out zeroed, length
 * 0); GW_ERR_PROTOCOL for any other family byte. The port is not checked:
 * whether 0 is acceptable is the caller's business. */
gw_status_t gw__sock_addr_get(const uint8_t in[GW_SOCK_ADDR_WIRE], struct sockaddr_storage *out,
                              socklen_t *out_len);

/* ---- dialling, accepting, retries (sock.c) --------------------------------- */

/* Pauses between attempts to connect: 10 ms, doubling up to 1 s. Every user
 * dials a peer that may simply not listen yet, so trying again costs nothing
 * until its deadline, and the growth keeps a dead peer from costing CPU. */
#define GW_SOCK_RETRY_FIRST_MS 10
#define GW_SOCK_RETRY_MAX_MS 1000

typedef struct gw_sock_retry {
    int64_t at;   /* gw__now_ms() time of the next attempt */
    int delay_ms; /* the pause that the next gw__sock_retry_arm takes */
} gw_sock_retry_t;

/* The first attempt is due at once. */
void gw__sock_retry_init(gw_sock_retry_t *r);
/* Schedule the next attempt after the current pause (r->at), double the
 * pause for the one after, and return the pause taken. */
int gw__sock_retry_arm(gw_sock_retry_t *r);

enum { GW_SOCK_CONNECTED, GW_SOCK_CONNECTING, GW_SOCK_FAILED };

/* One peer that we dial until it answers: the socket of the current
 * attempt, where the attempt stands, when the next one is due, and why the
 * last one failed. */
typedef struct gw_sock_dial {
    int fd;    /* -1 between attempts */
    int state; /* GW_SOCK_CONNECTING (waiting for its time or for connect()),
                * GW_SOCK_CONNECTED once connected, until gw__sock_dial_failed */
    gw_sock_retry_t retry;
    char why[128]; /* the last failure, for the time-out message; "" before any */
} gw_sock_dial_t;

/* No socket yet, the first attempt due at once. */
void gw__sock_dial_init(gw_sock_dial_t *d);
/* Move the attempt on: start one when it is due (prep, when not NULL, sets
 * the new socket's options before connect(), as options that the TCP
 * handshake negotiates must be), and finish it once poll() reported revents
 * on its socket (0: not polled). GW_SOCK_CONNECTED once d->fd is connected;
 * GW_SOCK_CONNECTING while waiting; GW_SOCK_FAILED when this attempt failed,
 * errno and *what ("socket()" or "connect") saying why: pass them on to
 * gw__sock_dial_failed. */
int gw__sock_dial_step(gw_sock_dial_t *d, const struct sockaddr *sa, socklen_t len, short revents,
                       void (*prep)(void *arg, int fd), void *arg, const char **what);
/* poll() events for the attempt: POLLOUT while connect() is under way, else
 * none (waiting for its time, or connected: then the caller's protocol
 * decides). */
short gw__sock_dial_events(const gw_sock_dial_t *d);
/* The attempt, or the handshake on its connection, failed and errno says
 * why: keep "what: <strerror(errno)>" in d->why, close its socket and
 * schedule the next attempt. Returns the pause before it, for the caller's
 * log line. */
int gw__sock_dial_failed(gw_sock_dial_t *d, const char *what);

/* A non-blocking, close-on-exec stream socket of the family; -1 with errno. */
int gw__sock_open(int family);
/* connect() on a socket from gw__sock_open: GW_SOCK_CONNECTED,
 * GW_SOCK_CONNECTING (wait for POLLOUT, then gw__sock_connect_result) or
 * GW_SOCK_FAILED (errno says why; the socket stays open). */
int gw__sock_connect(int fd, const struct sockaddr *sa, socklen_t len);
/* After poll() reported revents on a connecting socket: -1 while it is
 * still connecting, else 0 (connected) or the errno the attempt failed with. */
int gw__sock_connect_result(int fd, short revents);
/* Accept one connection on a non-blocking listener, non-blocking itself,
 * with the peer's address as text in addr (may be NULL); -1 with errno
 * (EAGAIN: none waiting). */
int gw__sock_accept(int lfd, char *addr, size_t addr_cap);
/* TCP_NODELAY: small handshake messages and headers go out at once rather
 * than wait for an ACK that the peer delays. 0, or -1 with errno. */
int gw__sock_nodelay(int fd);

/* Milliseconds until deadline (gw__now_ms() time), 0 once it has passed. */
int gw__sock_remaining_ms(int64_t deadline);

/* ---- hellos (sock.c) ------------------------------------------------------ */

/* The hellos of the TCP transport and of the verbs transport's out-of-band
 * set-up open alike: with them a connection says which job and which pair
 * of ranks it joins, and carries the sender's fresh nonce for the proof of
 * the job's data-plane key (sock_auth.c), at the same places in both
 * (big-endian):
 *    0 u32 magic (each protocol its own)   4 the protocol's version (its layout)
 *    8 job id (16 bytes)                  24 u32 from rank   28 u32 to rank
 *   32 nonce (16 bytes, written by the handshake)
 * What follows is the protocol's. The job id only tells jobs apart (it is
 * no secret: it is in shared-memory names); the proof is what admits. */
#define GW_SOCK_HELLO_ID_SIZE 48
#define GW_SOCK_NONCE_LEN 16
#define GW_SOCK_NONCE_AT 32

typedef struct gw_sock_hello_id {
    uint32_t magic;
    uint8_t job_id[16];
    uint32_t from, to;
} gw_sock_hello_id_t;

/* Writes bytes 0-3 and 8-31 and zeroes the nonce; bytes 4-7 are the
 * caller's. */
void gw__sock_hello_id_put(uint8_t out[GW_SOCK_HELLO_ID_SIZE], const gw_sock_hello_id_t *id);
void gw__sock_hello_id_get(const uint8_t in[GW_SOCK_HELLO_ID_SIZE], gw_sock_hello_id_t *id);

/* ---- the mutual proof of the data-plane key (sock_auth.c) -------------------- */

/* The key that every data connection of a job proves knowledge of: derived
 * by the bootstrap from the job token and the job id (never the token
 * itself), carried in gw_transport_params_t.data_key. */
#define GW_SOCK_KEY_LEN 32
#define GW_SOCK_MAC_LEN 32
#define GW_SOCK_HELLO_MAX 160 /* the largest hello a protocol may use */
#define GW_SOCK_SEEN_MAX 256  /* dialler nonces remembered to name replays */

/* The nonces of the hellos an acceptor has seen during one connect(), so
 * that a hello recorded and played back is named as a replay (its proof
 * would fail anyway: our nonce is fresh). Oldest forgotten first. */
typedef struct gw_sock_seen {
    uint8_t nonce[GW_SOCK_SEEN_MAX][GW_SOCK_NONCE_LEN];
    unsigned n, next;
} gw_sock_seen_t;

/* What gw__sock_shake_step reports. */
enum {
    GW_SHAKE_AGAIN,  /* wait for gw__sock_shake_events() on the socket */
    GW_SHAKE_HELLO,  /* acceptor: the dialler's hello is in theirs[]: check its
                      * ids, then gw__sock_shake_reply() or drop the connection */
    GW_SHAKE_REPLY,  /* dialler: the acceptor's hello is in theirs[]: check its
                      * ids, then gw__sock_shake_confirm() */
    GW_SHAKE_PROVEN, /* acceptor: the dialler proved the key: decide whether the
                      * connection counts, then gw__sock_shake_admit() */
    GW_SHAKE_DONE,   /* both sides proved the key and the acceptor admitted us */
    GW_SHAKE_KNOCK,  /* acceptor, after gw__sock_shake_knock: the knock proved the
                      * key (its hello is in theirs[]) */
    GW_SHAKE_FAILED, /* why[] says what: "wrong proof", "replayed", garbage,
                      * or the socket failed (io: GW_SOCK_IO_EOF/_ERROR, errno) */
};

/* One side of the handshake on one connection:
 *   dialler -> acceptor  its hello (nonce Nd)
 *   acceptor -> dialler  its hello (nonce Na) and MAC("acceptor", both hellos)
 *   dialler -> acceptor  MAC("dialler", both hellos)
 *   acceptor -> dialler  one byte: admitted
 * The MACs are HMAC-SHA256 under the data-plane key over a label and both
 * hellos as sent (magic, version, job id, both ranks, both nonces and the
 * protocol's fields such as the socket index), so neither proof can be
 * replayed on another connection or reflected back to its sender, and each
 * side checks the other's with a constant-time compare before the
 * connection counts. The last byte tells the dialler that the connection
 * counts: an acceptor may still drop a proven connection (a duplicate). */
typedef struct gw_sock_shake {
    int dialler;
    int phase; /* private */
    uint32_t magic;
    int io; /* GW_SHAKE_FAILED: the socket's result, or GW_SOCK_IO_DONE */
    uint8_t key[GW_SOCK_KEY_LEN];
    gw_sock_seen_t *seen; /* acceptor: the caller's replay memory, or NULL */
    uint8_t mine[GW_SOCK_HELLO_MAX], theirs[GW_SOCK_HELLO_MAX];
    size_t mine_len, theirs_len;
    uint8_t buf[GW_SOCK_HELLO_MAX + GW_SOCK_MAC_LEN];
    size_t len, done;
    char why[96];
} gw_sock_shake_t;

/* The dialler's side: hello (hello_len bytes, its nonce filled in here from
 * getrandom) is sent first; the answer is a hello of reply_len bytes.
 * GW_ERR_SYSTEM (logged under subsys) when no random bytes can be had. */
gw_status_t gw__sock_shake_dial(gw_sock_shake_t *sh, const gw_logger_t *lg, const char *subsys,
                                const uint8_t key[GW_SOCK_KEY_LEN], uint32_t magic,
                                const uint8_t *hello, size_t hello_len, size_t reply_len);
/* The acceptor's side: it waits for a hello of hello_len bytes opening with
 * magic (anything else after 4 bytes is garbage). seen may be NULL. */
void gw__sock_shake_accept(gw_sock_shake_t *sh, const uint8_t key[GW_SOCK_KEY_LEN], uint32_t magic,
                           size_t hello_len, gw_sock_seen_t *seen);
/* Move the handshake as far as the non-blocking socket allows. */
int gw__sock_shake_step(int fd, gw_sock_shake_t *sh);
/* poll() events the handshake waits for (0 while the caller must act). */
short gw__sock_shake_events(const gw_sock_shake_t *sh);
/* Acceptor, after GW_SHAKE_HELLO: answer with our hello (its nonce filled
 * in here). GW_ERR_SYSTEM (logged) without random bytes. */
gw_status_t gw__sock_shake_reply(gw_sock_shake_t *sh, const gw_logger_t *lg, const char *subsys,
                                 const uint8_t *reply, size_t reply_len);
/* Dialler, after GW_SHAKE_REPLY: 0 and our proof queued when the
 * acceptor's proof is right; -1 ("wrong proof" in why) when not. */
int gw__sock_shake_confirm(gw_sock_shake_t *sh);
/* Acceptor, after GW_SHAKE_PROVEN: tell the dialler that it is admitted. */
void gw__sock_shake_admit(gw_sock_shake_t *sh);
/* Forget the key and the nonces. */
void gw__sock_shake_wipe(gw_sock_shake_t *sh);

/* ---- knocks (sock_auth.c) ------------------------------------------------------ */

/* A knock (TCP and verbs out of band, connecting on first use) asks a
 * higher rank to dial us. It is the protocol's hello followed by its proof,
 * HMAC-SHA256 under the data-plane key over a label and the hello as sent
 * (magic, version, job id, both ranks, the nonce), sent on a connection
 * that is closed at once. The nonce is the sender's knock counter for the
 * pair (8 bytes, big-endian) and 8 random bytes: the acceptor acts on a
 * proven knock only when its counter is above the last it acted on from
 * that rank (gw__sock_knock_fresh), so a knock recorded and played back
 * moves nobody. */
#define GW_SOCK_KNOCK_COUNTER_LEN 8

/* The next knock counter after *counter, stored there: the larger of
 * *counter + 1 and the wall clock in microseconds (the RDMA CM's knocks,
 * which are no hellos, count with it too). */
uint64_t gw__sock_knock_next(uint64_t *counter);
/* Send the knock hello (len bytes, its nonce filled in here from
 * *counter, which grows: the larger of *counter + 1 and the wall clock in
 * microseconds, so that a restarted sender starts above what it sent
 * before) and its proof under key at once: one knock fits any socket
 * buffer, so nothing waits. 0 when it went whole, else -1 (errno). */
int gw__sock_send_knock(int fd, const uint8_t key[GW_SOCK_KEY_LEN], uint8_t *hello, size_t len,
                        uint64_t *counter);
/* The acceptor, after GW_SHAKE_HELLO for a hello that says it is a knock:
 * read the knock's proof; gw__sock_shake_step then reports GW_SHAKE_KNOCK
 * (proven: check gw__sock_knock_fresh, then act) or GW_SHAKE_FAILED ("wrong
 * knock proof" in why). */
void gw__sock_shake_knock(gw_sock_shake_t *sh);
/* A proven knock's hello (sh->theirs): 1, and *last updated, when its
 * counter is above *last (the last one acted on from its sender); 0 for a
 * replay. */
int gw__sock_knock_fresh(uint64_t *last, const uint8_t *hello);

/* ---- strangers on a listening port, logged with a bound (sock_strangers.c) ---- */

/* Connections that did not prove the key (scanners, health checks,
 * another job, impostors, floods) are logged one by one at WARN for the
 * first GW_SOCK_STRANGERS_LOGGED, then only counted by kind and summed up
 * in one line at most every GW_SOCK_STRANGER_SUMMARY_MS (each still at
 * TRACE), so a flood costs a few lines, not megabytes. The bootstrap root
 * and the TCP transport's listener share it. */
#define GW_SOCK_STRANGERS_LOGGED 16
#define GW_SOCK_STRANGER_SUMMARY_MS 1000
#define GW_SOCK_STRANGER_KINDS 8

typedef struct gw_sock_strangers {
    const gw_logger_t *log;
    const char *subsys;
    const char *where;             /* "our port 1.2.3.4:5", for the lines */
    const char *const *kind_names; /* nkinds names, for the summary */
    int nkinds;
    long total;                           /* every stranger so far */
    long logged;                          /* logged one by one so far */
    long dropped[GW_SOCK_STRANGER_KINDS]; /* counted since the last summary */
    int64_t summary_at;                   /* gw__now_ms() of the last summary */
} gw_sock_strangers_t;

/* One more stranger of kind: 1 when the caller logs it at WARN itself (one
 * of the first), 0 when it was counted (log it at TRACE); the last one
 * logged one by one is followed by a line saying that the rest are counted. */
int gw__sock_stranger(gw_sock_strangers_t *s, int kind);
/* One line for the strangers counted since the last one, when due (at most
 * every GW_SOCK_STRANGER_SUMMARY_MS) or forced; tail (may be NULL) ends it. */
void gw__sock_strangers_summary(gw_sock_strangers_t *s, int64_t now, int force, const char *tail);
/* When the next summary is due (INT64_MAX: nothing counted). */
int64_t gw__sock_strangers_due(const gw_sock_strangers_t *s);

/* ---- non-blocking transfers of up to two segments (sock.c) ----------------- */

typedef struct gw_sock_io {
    struct iovec iov[2];
    size_t total;
    size_t done;
} gw_sock_io_t;

enum { GW_SOCK_IO_DONE, GW_SOCK_IO_AGAIN, GW_SOCK_IO_EOF, GW_SOCK_IO_ERROR, GW_SOCK_IO_TIMEOUT };

/* Describe a transfer of alen bytes at a then blen bytes at b (either may
 * be empty), none of it done. */
void gw__sock_io_set(gw_sock_io_t *io, void *a, size_t alen, void *b, size_t blen);
/* Move as much as the (non-blocking) socket takes now: GW_SOCK_IO_DONE,
 * _AGAIN, _EOF (reading only) or _ERROR (errno set). Never raises SIGPIPE. */
int gw__sock_io_step(int fd, gw_sock_io_t *io, int writing);
/* gw__sock_io_step on buf[0, len) of which *done bytes have moved already:
 * for state that is itself moved around, so that it may keep no pointer. */
int gw__sock_io_buf(int fd, void *buf, size_t len, size_t *done, int writing);
/* Finish the transfer, waiting at most until deadline (then _TIMEOUT). */
int gw__sock_io_run(int fd, gw_sock_io_t *io, int writing, int64_t deadline);

#endif
