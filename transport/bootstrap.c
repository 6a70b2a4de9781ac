/*
 * bootstrap.c - the out-of-band rendezvous of the ranks of one job (contract
 * in bootstrap.h, wire format in bootstrap_msg.h).
 *
 * Rank 0 binds the root address and runs one poll() loop over its listening
 * socket and every connection it accepted. Each connection is a small state
 * machine: read HELLO, write CHALLENGE (our proof that we know the token),
 * read RESPONSE (the rank's proof), then either join or be rejected. All
 * sockets are non-blocking, so a port scanner that connects and sends
 * nothing, or sends half a message, costs one slot until its handshake
 * deadline and never stalls the real ranks that connect beside it. When
 * size - 1 distinct ranks have joined, rank 0 closes the listener and sends
 * each a WELCOME carrying the job id.
 *
 * Every other rank resolves the root, connects with growing sleeps between
 * attempts (rank 0 may start last), checks the root's proof before proving
 * itself, and then waits for the WELCOME.
 *
 * The star of connections stays open for all-gathers: every rank sends its
 * block to rank 0, which answers the concatenation once it has all blocks.
 * Rank 0 multiplexes its connections with poll() again, so a rank that dies
 * is noticed as soon as its connection closes, whatever order the others
 * arrive in. When anything goes wrong, rank 0 sends every rank a REJECT with
 * the reason before giving up, so nobody waits for a result that will not
 * come; a rank that fails locally tells rank 0 the same way.
 */
#include "bootstrap.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bootstrap_msg.h"
#include "common/clock.h"
#include "common/env.h"
#include "sha256.h"

#define SUBSYS "bootstrap"
#define ADDR_TEXT 160
#define ROOT_TEXT 272
/* A connection has at most half the job's timeout (and at most 5 s) to
 * finish its handshake: legitimate ranks need milliseconds, and freeing the
 * slots of silent connections early keeps PENDING_MAX strangers from
 * locking the real ranks out for the whole job timeout. */
#define HANDSHAKE_MAX_MS 5000
#define HANDSHAKE_MIN_MS 50
/* Unfinished handshakes held at once; beyond that, new connections wait in
 * the kernel's backlog until a slot frees. */
#define PENDING_MAX 1024
#define CONNECT_SLEEP_MIN_MS 10
#define CONNECT_SLEEP_MAX_MS 1000
#define ACCEPT_PAUSE_MS 100
#define MISSING_LIST_MAX 16
#define TYPE_BIT(t) (1u << (unsigned)(t))

struct gw_bootstrap {
    int rank;
    int size;
    int timeout_ms;
    const gw_logger_t *log;
    char root[ROOT_TEXT]; /* "host:port" as configured, for messages */
    uint8_t job_id[GW_BS_JOB_ID_LEN];
    struct sockaddr_storage local; /* see gw__bootstrap_local_addr */
    socklen_t local_len;           /* 0 when there is none (size 1) */
    gw_status_t failed;            /* sticky: the first error of an all-gather */
    int root_fd;                   /* ranks > 0: the connection to rank 0 */
    int *fds;                      /* rank 0: fds[r] talks to rank r (fds[0] = -1) */
    char (*peer_addr)[ADDR_TEXT];  /* rank 0: peer address of each rank */
};

/* ---- small helpers ------------------------------------------------------ */

static int remaining_ms(int64_t deadline)
{
    int64_t left = deadline - gw__now_ms();
    if (left <= 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

static void format_addr(const struct sockaddr *sa, socklen_t len, char out[ADDR_TEXT])
{
    char host[128], serv[16];
    if (getnameinfo(sa, len, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        snprintf(out, ADDR_TEXT, "(unknown address)");
    else if (sa->sa_family == AF_INET6)
        snprintf(out, ADDR_TEXT, "[%s]:%s", host, serv);
    else
        snprintf(out, ADDR_TEXT, "%s:%s", host, serv);
}

static gw_status_t random_bytes(const gw_logger_t *lg, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom((uint8_t *)buf + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            GW_ERROR(lg, SUBSYS, "getrandom failed: %m");
            return GW_ERR_SYSTEM;
        }
        got += (size_t)r;
    }
    return GW_OK;
}

/* Small handshake messages go out whole; waiting for the peer's ACK before
 * sending the next one (Nagle) would only add latency. Failure is harmless. */
static void set_nodelay(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Best effort, never blocks: used on the way out of a failure, when the peer
 * may already be gone. The REJECT is small and our side of the stream is at
 * a message boundary whenever this is called, so it goes out whole or not at
 * all. */
static void send_reject_nowait(int fd, gw_status_t status, const char *reason)
{
    uint8_t msg[GW_BS_REJECT_MAX_LEN];
    size_t n = gw__bs_encode_reject(status, reason, msg);
    (void)send(fd, msg, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* ---- non-blocking transfers of up to two segments ----------------------- */

typedef struct bs_io {
    struct iovec iov[2];
    size_t total;
    size_t done;
} bs_io_t;

enum { IO_DONE, IO_AGAIN, IO_EOF, IO_ERROR, IO_TIMEOUT };

static void io_set(bs_io_t *io, void *a, size_t alen, void *b, size_t blen)
{
    io->iov[0].iov_base = a;
    io->iov[0].iov_len = alen;
    io->iov[1].iov_base = b;
    io->iov[1].iov_len = blen;
    io->total = alen + blen;
    io->done = 0;
}

/* Move as much as the socket takes now. IO_ERROR leaves errno set. */
static int io_step(int fd, bs_io_t *io, int writing)
{
    while (io->done < io->total) {
        struct iovec v[2];
        int n = 0;
        size_t skip = io->done;
        for (int i = 0; i < 2; i++) {
            if (skip >= io->iov[i].iov_len) {
                skip -= io->iov[i].iov_len;
                continue;
            }
            v[n].iov_base = (uint8_t *)io->iov[i].iov_base + skip;
            v[n].iov_len = io->iov[i].iov_len - skip;
            skip = 0;
            n++;
        }
        struct msghdr mh;
        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = v;
        mh.msg_iovlen = (size_t)n;
        /* MSG_NOSIGNAL: a peer that died must give an error, not SIGPIPE. */
        ssize_t r = writing ? sendmsg(fd, &mh, MSG_NOSIGNAL) : recvmsg(fd, &mh, 0);
        if (r > 0) {
            io->done += (size_t)r;
            continue;
        }
        if (r == 0 && !writing)
            return IO_EOF;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return IO_AGAIN;
        return IO_ERROR;
    }
    return IO_DONE;
}

/* Finish a transfer on one socket, waiting at most until deadline. */
static int io_run(int fd, bs_io_t *io, int writing, int64_t deadline)
{
    for (;;) {
        int r = io_step(fd, io, writing);
        if (r != IO_AGAIN)
            return r;
        int wait = remaining_ms(deadline);
        if (wait == 0)
            return IO_TIMEOUT;
        struct pollfd p = {.fd = fd, .events = writing ? POLLOUT : POLLIN};
        if (poll(&p, 1, wait) < 0 && errno != EINTR)
            return IO_ERROR;
    }
}

/* ======================= ranks > 0: joining ============================== */

static int try_connect(const struct addrinfo *ai, int64_t deadline, int *err)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            *err = errno;
            close(fd);
            return -1;
        }
        for (;;) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int r = poll(&p, 1, remaining_ms(deadline));
            if (r > 0)
                break;
            if (r < 0 && errno == EINTR)
                continue;
            *err = r == 0 ? ETIMEDOUT : errno;
            close(fd);
            return -1;
        }
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
            soerr = errno;
        if (soerr != 0) {
            *err = soerr;
            close(fd);
            return -1;
        }
    }
    set_nodelay(fd);
    return fd;
}

/* Connect to the root, retrying (rank 0 may not listen yet) with sleeps of
 * 10 ms doubling to 1 s, until the deadline. */
static gw_status_t client_connect(gw_bootstrap_t *bs, const char *host, const char *port,
                                  int64_t start, int64_t deadline, int *out)
{
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int sleep_ms = CONNECT_SLEEP_MIN_MS, attempts = 0, last_errno = 0, last_gai = 0;
    char last_addr[ADDR_TEXT] = "no address";
    for (;;) {
        struct addrinfo *res = NULL;
        int gai = getaddrinfo(host, port, &hints, &res);
        attempts++;
        if (gai == 0) {
            last_gai = 0;
            for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                format_addr(ai->ai_addr, ai->ai_addrlen, last_addr);
                int fd = try_connect(ai, deadline, &last_errno);
                if (fd >= 0) {
                    freeaddrinfo(res);
                    GW_TRACE(bs->log, SUBSYS, "connected to the root %s (%s) after %d attempt%s",
                             bs->root, last_addr, attempts, attempts == 1 ? "" : "s");
                    *out = fd;
                    return GW_OK;
                }
            }
            freeaddrinfo(res);
        } else if (gai == EAI_AGAIN || gai == EAI_NONAME || gai == EAI_FAIL ||
                   gai == EAI_NODATA) {
            /* The name may not exist yet (a scheduler that registers hosts
             * as they start): keep trying like a refused connection. */
            last_gai = gai;
        } else {
            GW_ERROR(bs->log, SUBSYS, "cannot resolve the root address %s: %s", bs->root,
                     gai_strerror(gai));
            return GW_ERR_CONFIG;
        }
        int wait = remaining_ms(deadline);
        if (wait == 0)
            break;
        poll(NULL, 0, sleep_ms < wait ? sleep_ms : wait);
        sleep_ms = sleep_ms * 2 > CONNECT_SLEEP_MAX_MS ? CONNECT_SLEEP_MAX_MS : sleep_ms * 2;
    }
    long long tried = (long long)(gw__now_ms() - start);
    if (last_gai != 0) {
        GW_ERROR(bs->log, SUBSYS,
                 "could not resolve the root address %s for %lld ms (%d attempts): %s", bs->root,
                 tried, attempts, gai_strerror(last_gai));
    } else {
        errno = last_errno;
        GW_ERROR(bs->log, SUBSYS,
                 "could not connect to the root %s (%s) for %lld ms (%d attempts): %m; is rank 0 "
                 "running, and is the root address the same on every rank?",
                 bs->root, last_addr, tried, attempts);
    }
    return GW_ERR_TIMEOUT;
}

static gw_status_t client_io_error(const gw_bootstrap_t *bs, int r, const char *what)
{
    if (r == IO_TIMEOUT) {
        GW_ERROR(bs->log, SUBSYS, "timed out after %d ms waiting for %s from rank 0 (root %s)",
                 bs->timeout_ms, what, bs->root);
        return GW_ERR_TIMEOUT;
    }
    if (r == IO_EOF)
        GW_ERROR(bs->log, SUBSYS, "rank 0 (root %s) closed the connection during %s", bs->root,
                 what);
    else
        GW_ERROR(bs->log, SUBSYS, "connection to rank 0 (root %s) failed during %s: %m",
                 bs->root, what);
    return GW_ERR_REMOTE;
}

static gw_status_t client_send(const gw_bootstrap_t *bs, int fd, uint8_t *msg, size_t len,
                               int64_t deadline, const char *what)
{
    bs_io_t io;
    io_set(&io, msg, len, NULL, 0);
    int r = io_run(fd, &io, 1, deadline);
    return r == IO_DONE ? GW_OK : client_io_error(bs, r, what);
}

/* Log the root's REJECT and return the status it carries. */
static gw_status_t client_take_reject(const gw_bootstrap_t *bs, const uint8_t *msg, size_t len,
                                      const char *when)
{
    gw_bs_reject_t rej;
    const char *why = NULL;
    if (gw__bs_decode_reject(msg, len, &rej, &why) != GW_OK) {
        GW_ERROR(bs->log, SUBSYS, "malformed reject from rank 0 (root %s): %s", bs->root, why);
        return GW_ERR_PROTOCOL;
    }
    GW_ERROR(bs->log, SUBSYS, "rank 0 (root %s) %s: %s [%s]", bs->root, when, rej.reason,
             gw_status_name(rej.status));
    return rej.status;
}

/* Read one whole handshake message whose type is in accept_mask. */
static gw_status_t client_recv_small(const gw_bootstrap_t *bs, int fd, unsigned accept_mask,
                                     int64_t deadline, const char *what,
                                     uint8_t buf[GW_BS_SMALL_MSG_MAX], gw_bs_hdr_t *hdr)
{
    bs_io_t io;
    io_set(&io, buf, GW_BS_HDR_LEN, NULL, 0);
    int r = io_run(fd, &io, 0, deadline);
    if (r != IO_DONE)
        return client_io_error(bs, r, what);
    const char *why = NULL;
    if (gw__bs_decode_hdr(buf, GW_BS_HDR_LEN, hdr, &why) != GW_OK) {
        GW_ERROR(bs->log, SUBSYS, "malformed message from the root %s during %s: %s", bs->root,
                 what, why);
        return GW_ERR_PROTOCOL;
    }
    if (!(accept_mask & TYPE_BIT(hdr->type)) ||
        hdr->payload_len > GW_BS_SMALL_MSG_MAX - GW_BS_HDR_LEN) {
        GW_ERROR(bs->log, SUBSYS, "unexpected %s message from the root %s during %s",
                 gw__bs_type_name(hdr->type), bs->root, what);
        return GW_ERR_PROTOCOL;
    }
    io_set(&io, buf + GW_BS_HDR_LEN, hdr->payload_len, NULL, 0);
    r = io_run(fd, &io, 0, deadline);
    return r == IO_DONE ? GW_OK : client_io_error(bs, r, what);
}

static gw_status_t client_join(gw_bootstrap_t *bs, const char *host, const char *port,
                               const uint8_t *key, size_t key_len, int64_t start,
                               int64_t deadline)
{
    int fd = -1;
    gw_status_t st = client_connect(bs, host, port, start, deadline, &fd);
    if (st != GW_OK)
        return st;
    bs->local_len = sizeof(bs->local);
    if (getsockname(fd, (struct sockaddr *)&bs->local, &bs->local_len) != 0) {
        GW_ERROR(bs->log, SUBSYS, "getsockname on the connection to the root %s: %m", bs->root);
        st = GW_ERR_SYSTEM;
        goto err_close_fd;
    }

    gw_bs_hello_t hello = {.rank = bs->rank, .size = bs->size};
    st = random_bytes(bs->log, hello.client_nonce, sizeof(hello.client_nonce));
    if (st != GW_OK)
        goto err_close_fd;
    uint8_t buf[GW_BS_SMALL_MSG_MAX];
    gw__bs_encode_hello(&hello, buf);
    st = client_send(bs, fd, buf, GW_BS_HELLO_LEN, deadline, "the hello");
    if (st != GW_OK)
        goto err_close_fd;

    gw_bs_hdr_t hdr;
    st = client_recv_small(bs, fd, TYPE_BIT(GW_BS_CHALLENGE) | TYPE_BIT(GW_BS_REJECT), deadline,
                           "the challenge", buf, &hdr);
    if (st != GW_OK)
        goto err_close_fd;
    if (hdr.type == GW_BS_REJECT) {
        st = client_take_reject(bs, buf, GW_BS_HDR_LEN + hdr.payload_len, "rejected this rank");
        goto err_close_fd;
    }
    gw_bs_challenge_t ch;
    const char *why = NULL;
    if (gw__bs_decode_challenge(buf, GW_BS_HDR_LEN + hdr.payload_len, &ch, &why) != GW_OK) {
        GW_ERROR(bs->log, SUBSYS, "malformed challenge from the root %s: %s", bs->root, why);
        st = GW_ERR_PROTOCOL;
        goto err_close_fd;
    }
    /* Check the root before proving ourselves: a process that merely
     * listens on the root's port learns nothing from us. */
    uint8_t proof[GW_BS_PROOF_LEN];
    gw__bs_root_proof(key, key_len, hello.client_nonce, ch.server_nonce, proof);
    if (!gw__ct_equal(proof, ch.root_proof, sizeof(proof))) {
        GW_ERROR(bs->log, SUBSYS,
                 "authentication with the root %s failed: its proof does not match this rank's "
                 "job token (is GW_JOB_TOKEN the same on every rank?)",
                 bs->root);
        char reason[GW_BS_REASON_MAX + 1];
        snprintf(reason, sizeof(reason),
                 "wrong job token: rank %d cannot verify the proof of rank 0", bs->rank);
        send_reject_nowait(fd, GW_ERR_AUTH, reason);
        st = GW_ERR_AUTH;
        goto err_close_fd;
    }
    gw__bs_rank_proof(key, key_len, ch.server_nonce, hello.client_nonce, (uint32_t)bs->rank,
                      proof);
    gw__bs_encode_response(proof, buf);
    st = client_send(bs, fd, buf, GW_BS_RESPONSE_LEN, deadline, "the response");
    if (st != GW_OK)
        goto err_close_fd;

    st = client_recv_small(bs, fd, TYPE_BIT(GW_BS_WELCOME) | TYPE_BIT(GW_BS_REJECT), deadline,
                           "the join (waiting for every rank to join)", buf, &hdr);
    if (st != GW_OK)
        goto err_close_fd;
    if (hdr.type == GW_BS_REJECT) {
        st = client_take_reject(bs, buf, GW_BS_HDR_LEN + hdr.payload_len, "rejected this rank");
        goto err_close_fd;
    }
    if (gw__bs_decode_welcome(buf, GW_BS_HDR_LEN + hdr.payload_len, bs->job_id, &why) != GW_OK) {
        GW_ERROR(bs->log, SUBSYS, "malformed welcome from the root %s: %s", bs->root, why);
        st = GW_ERR_PROTOCOL;
        goto err_close_fd;
    }
    bs->root_fd = fd;
    GW_INFO(bs->log, SUBSYS, "rank %d of %d joined the job at %s", bs->rank, bs->size, bs->root);
    return GW_OK;

err_close_fd:
    close(fd);
    return st;
}

/* ======================= rank 0: accepting the ranks ===================== */

typedef enum conn_state {
    CONN_HELLO,     /* reading the HELLO */
    CONN_CHALLENGE, /* writing the CHALLENGE */
    CONN_RESPONSE,  /* reading the RESPONSE (or the rank's REJECT) */
    CONN_REJECT,    /* writing our REJECT; closed once it is out */
    CONN_JOINED,    /* authenticated and accepted, waiting for the others */
    CONN_CLOSED,    /* dropped; removed from the table at the end of the pass */
} conn_state_t;

typedef struct conn {
    int fd;
    conn_state_t state;
    int rank; /* as claimed in the HELLO */
    int size;
    int64_t deadline; /* of the handshake */
    int hdr_done;     /* the header of the message being read is decoded */
    gw_bs_hdr_t hdr;
    bs_io_t io;
    char addr[ADDR_TEXT];
    uint8_t client_nonce[GW_BS_NONCE_LEN];
    uint8_t server_nonce[GW_BS_NONCE_LEN];
    uint8_t buf[GW_BS_SMALL_MSG_MAX];
} conn_t;

typedef struct join {
    gw_bootstrap_t *bs;
    const uint8_t *key;
    size_t key_len;
    int lfd;
    int handshake_ms;
    conn_t **conns;
    size_t nconns, cap;
    conn_t **by_rank; /* [size]: the joined connection of each rank */
    int joined;       /* ranks other than 0 */
    gw_status_t fatal;
    int64_t accept_paused_until;
    int cap_warned;
    struct pollfd *pfds;
    size_t pfds_cap;
} join_t;

static gw_status_t root_listen(gw_bootstrap_t *bs, const char *host, const char *port, int *out)
{
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        GW_ERROR(bs->log, SUBSYS, "cannot resolve the root address %s: %s", bs->root,
                 gai_strerror(gai));
        return GW_ERR_CONFIG;
    }
    gw_status_t st = GW_ERR_SYSTEM;
    char addr[ADDR_TEXT];
    int fd = -1;
    /* Bind the first address of the name. Falling back to the next one on
     * EADDRINUSE would let ranks that try the first address reach whatever
     * holds it; only an address family this host lacks is skipped. */
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        format_addr(ai->ai_addr, ai->ai_addrlen, addr);
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
        if (fd < 0) {
            if (errno == EAFNOSUPPORT && ai->ai_next)
                continue;
            GW_ERROR(bs->log, SUBSYS, "cannot create a socket for the root address %s (%s): %m",
                     bs->root, addr);
            goto out_free;
        }
        int one = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
            GW_ERROR(bs->log, SUBSYS, "setsockopt(SO_REUSEADDR) on %s: %m", addr);
            goto err_close_fd;
        }
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            GW_ERROR(bs->log, SUBSYS,
                     "cannot bind the root address %s (%s): %m (is another job using the port, "
                     "or is this host not the root?)",
                     bs->root, addr);
            goto err_close_fd;
        }
        if (listen(fd, SOMAXCONN) != 0) {
            GW_ERROR(bs->log, SUBSYS, "cannot listen on the root address %s (%s): %m", bs->root,
                     addr);
            goto err_close_fd;
        }
        bs->local_len = sizeof(bs->local);
        if (getsockname(fd, (struct sockaddr *)&bs->local, &bs->local_len) != 0) {
            GW_ERROR(bs->log, SUBSYS, "getsockname on the root socket %s: %m", addr);
            goto err_close_fd;
        }
        GW_INFO(bs->log, SUBSYS, "rank 0 listening at %s (%s) for %d other rank%s", bs->root,
                addr, bs->size - 1, bs->size == 2 ? "" : "s");
        *out = fd;
        st = GW_OK;
        goto out_free;
    }
    GW_ERROR(bs->log, SUBSYS, "the root address %s resolves to no usable address", bs->root);
    goto out_free;

err_close_fd:
    close(fd);
out_free:
    freeaddrinfo(res);
    return st;
}

/* The connection leaves the table at the end of this pass. */
static void conn_close(join_t *j, conn_t *c)
{
    if (c->state == CONN_JOINED && j->by_rank[c->rank] == c) {
        j->by_rank[c->rank] = NULL;
        j->joined--;
    }
    close(c->fd);
    c->fd = -1;
    c->state = CONN_CLOSED;
}

static void conn_drop(join_t *j, conn_t *c, const char *why)
{
    GW_WARN(j->bs->log, SUBSYS, "dropped connection from %s: %s", c->addr, why);
    conn_close(j, c);
}

static void conn_start_read(conn_t *c, conn_state_t state)
{
    c->state = state;
    c->hdr_done = 0;
    io_set(&c->io, c->buf, GW_BS_HDR_LEN, NULL, 0);
}

static void conn_write(join_t *j, conn_t *c);

static void conn_start_write(join_t *j, conn_t *c, conn_state_t state, size_t len)
{
    c->state = state;
    io_set(&c->io, c->buf, len, NULL, 0);
    conn_write(j, c); /* usually completes at once: saves a poll round */
}

static void conn_reject(join_t *j, conn_t *c, gw_status_t status, const char *reason)
{
    conn_start_write(j, c, CONN_REJECT, gw__bs_encode_reject(status, reason, c->buf));
}

static void conn_write(join_t *j, conn_t *c)
{
    int r = io_step(c->fd, &c->io, 1);
    if (r == IO_AGAIN)
        return;
    if (r != IO_DONE) {
        char why[96];
        snprintf(why, sizeof(why), "send failed: %m");
        if (c->state == CONN_REJECT)
            conn_close(j, c); /* the reason was logged when we rejected it */
        else
            conn_drop(j, c, why);
        return;
    }
    if (c->state == CONN_CHALLENGE)
        conn_start_read(c, CONN_RESPONSE);
    else
        conn_close(j, c); /* CONN_REJECT: the rank has its reason */
}

/* Read the message of the current state. 1: complete, 0: not yet, -1: the
 * connection was dropped. */
static int conn_read(join_t *j, conn_t *c, unsigned accept_mask)
{
    for (;;) {
        int r = io_step(c->fd, &c->io, 0);
        if (r == IO_AGAIN)
            return 0;
        if (r == IO_EOF) {
            conn_drop(j, c, "closed during the handshake");
            return -1;
        }
        if (r == IO_ERROR) {
            char why[96];
            snprintf(why, sizeof(why), "receive failed during the handshake: %m");
            conn_drop(j, c, why);
            return -1;
        }
        if (c->hdr_done)
            return 1;
        const char *why = NULL;
        if (gw__bs_decode_hdr(c->buf, GW_BS_HDR_LEN, &c->hdr, &why) != GW_OK) {
            conn_drop(j, c, why);
            return -1;
        }
        if (!(accept_mask & TYPE_BIT(c->hdr.type)) ||
            c->hdr.payload_len > sizeof(c->buf) - GW_BS_HDR_LEN) {
            char text[96];
            snprintf(text, sizeof(text), "unexpected %s message during the handshake",
                     gw__bs_type_name(c->hdr.type));
            conn_drop(j, c, text);
            return -1;
        }
        c->hdr_done = 1;
        io_set(&c->io, c->buf, GW_BS_HDR_LEN + c->hdr.payload_len, NULL, 0);
        c->io.done = GW_BS_HDR_LEN;
    }
}

static void conn_on_hello(join_t *j, conn_t *c)
{
    gw_bs_hello_t hello;
    const char *why = NULL;
    if (gw__bs_decode_hello(c->buf, c->io.total, &hello, &why) != GW_OK) {
        conn_drop(j, c, why);
        return;
    }
    c->rank = hello.rank;
    c->size = hello.size;
    memcpy(c->client_nonce, hello.client_nonce, GW_BS_NONCE_LEN);
    gw_status_t st = random_bytes(j->bs->log, c->server_nonce, GW_BS_NONCE_LEN);
    if (st != GW_OK) {
        j->fatal = st;
        conn_close(j, c);
        return;
    }
    gw_bs_challenge_t ch;
    memcpy(ch.server_nonce, c->server_nonce, GW_BS_NONCE_LEN);
    gw__bs_root_proof(j->key, j->key_len, c->client_nonce, c->server_nonce, ch.root_proof);
    gw__bs_encode_challenge(&ch, c->buf);
    conn_start_write(j, c, CONN_CHALLENGE, GW_BS_CHALLENGE_LEN);
}

static void conn_on_response(join_t *j, conn_t *c)
{
    const gw_bootstrap_t *bs = j->bs;
    const char *why = NULL;
    char text[GW_BS_REASON_MAX + 128];
    if (c->hdr.type == GW_BS_REJECT) {
        /* The rank could not verify our proof, or gave up for its own reason. */
        gw_bs_reject_t rej;
        if (gw__bs_decode_reject(c->buf, c->io.total, &rej, &why) != GW_OK) {
            conn_drop(j, c, why);
            return;
        }
        snprintf(text, sizeof(text), "%s (the peer, claiming rank %d, says: %s)",
                 rej.status == GW_ERR_AUTH ? "wrong job token" : "the peer gave up", c->rank,
                 rej.reason);
        conn_drop(j, c, text);
        return;
    }
    uint8_t got[GW_BS_PROOF_LEN], want[GW_BS_PROOF_LEN];
    if (gw__bs_decode_response(c->buf, c->io.total, got, &why) != GW_OK) {
        conn_drop(j, c, why);
        return;
    }
    gw__bs_rank_proof(j->key, j->key_len, c->server_nonce, c->client_nonce, (uint32_t)c->rank,
                      want);
    if (!gw__ct_equal(got, want, sizeof(want))) {
        GW_WARN(bs->log, SUBSYS, "dropped connection from %s: wrong job token", c->addr);
        conn_reject(j, c, GW_ERR_AUTH, "wrong job token: rank 0 rejects this rank's proof");
        return;
    }
    /* Authenticated: now the rank's claims are worth an explanation. */
    if (c->size != bs->size)
        snprintf(text, sizeof(text), "job size mismatch: rank %d says %d ranks, rank 0 says %d",
                 c->rank, c->size, bs->size);
    else if (c->rank < 1 || c->rank >= bs->size)
        snprintf(text, sizeof(text), "rank %d is outside [1, %d)", c->rank, bs->size);
    else if (j->by_rank[c->rank])
        snprintf(text, sizeof(text), "duplicate rank: rank %d already joined from %s", c->rank,
                 j->by_rank[c->rank]->addr);
    else {
        c->state = CONN_JOINED;
        j->by_rank[c->rank] = c;
        j->joined++;
        GW_INFO(bs->log, SUBSYS, "rank %d joined from %s (%d of %d ranks)", c->rank, c->addr,
                j->joined + 1, bs->size);
        return;
    }
    GW_WARN(bs->log, SUBSYS, "rejected connection from %s: %s", c->addr, text);
    conn_reject(j, c, GW_ERR_CONFIG, text);
}

/* A joined rank says nothing until the WELCOME: readable means it left (or
 * misbehaves). Its rank becomes free again, so a restarted process can take
 * it within the job's timeout. */
static void conn_check_joined(join_t *j, conn_t *c)
{
    uint8_t b;
    ssize_t r = recv(c->fd, &b, 1, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    char why[128];
    if (r == 0)
        snprintf(why, sizeof(why), "rank %d disconnected before every rank joined", c->rank);
    else if (r < 0)
        snprintf(why, sizeof(why), "rank %d failed before every rank joined: %m", c->rank);
    else
        snprintf(why, sizeof(why), "rank %d sent data before the welcome", c->rank);
    conn_drop(j, c, why);
}

static void conn_event(join_t *j, conn_t *c)
{
    switch (c->state) {
    case CONN_HELLO:
        if (conn_read(j, c, TYPE_BIT(GW_BS_HELLO)) == 1)
            conn_on_hello(j, c);
        break;
    case CONN_RESPONSE:
        if (conn_read(j, c, TYPE_BIT(GW_BS_RESPONSE) | TYPE_BIT(GW_BS_REJECT)) == 1)
            conn_on_response(j, c);
        break;
    case CONN_CHALLENGE:
    case CONN_REJECT:
        conn_write(j, c);
        break;
    case CONN_JOINED:
        conn_check_joined(j, c);
        break;
    case CONN_CLOSED:
        break;
    }
}

static size_t pending_count(const join_t *j)
{
    return j->nconns - (size_t)j->joined;
}

static void accept_all(join_t *j)
{
    const gw_bootstrap_t *bs = j->bs;
    while (pending_count(j) < PENDING_MAX) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(j->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                /* Out of descriptors or memory: let handshakes finish or
                 * expire, and try again a little later. */
                GW_WARN(bs->log, SUBSYS, "accept on %s failed: %m; retrying in %d ms", bs->root,
                        ACCEPT_PAUSE_MS);
                j->accept_paused_until = gw__now_ms() + ACCEPT_PAUSE_MS;
            }
            return;
        }
        if (j->nconns == j->cap) {
            size_t cap = j->cap ? 2 * j->cap : 16;
            conn_t **grown = realloc(j->conns, cap * sizeof(*grown));
            if (!grown) {
                close(fd);
                GW_WARN(bs->log, SUBSYS, "out of memory accepting a connection on %s", bs->root);
                j->accept_paused_until = gw__now_ms() + ACCEPT_PAUSE_MS;
                return;
            }
            j->conns = grown;
            j->cap = cap;
        }
        conn_t *c = calloc(1, sizeof(*c));
        if (!c) {
            close(fd);
            GW_WARN(bs->log, SUBSYS, "out of memory accepting a connection on %s", bs->root);
            j->accept_paused_until = gw__now_ms() + ACCEPT_PAUSE_MS;
            return;
        }
        c->fd = fd;
        c->rank = -1;
        c->deadline = gw__now_ms() + j->handshake_ms;
        format_addr((struct sockaddr *)&ss, sl, c->addr);
        set_nodelay(fd);
        conn_start_read(c, CONN_HELLO);
        j->conns[j->nconns++] = c;
        GW_TRACE(bs->log, SUBSYS, "connection from %s", c->addr);
    }
    if (!j->cap_warned) {
        j->cap_warned = 1;
        GW_WARN(bs->log, SUBSYS,
                "%d unfinished handshakes on %s: new connections wait until some finish or "
                "expire",
                PENDING_MAX, bs->root);
    }
}

/* Free closed connections and compact the table. */
static void sweep(join_t *j)
{
    size_t k = 0;
    for (size_t i = 0; i < j->nconns; i++) {
        if (j->conns[i]->state == CONN_CLOSED)
            free(j->conns[i]);
        else
            j->conns[k++] = j->conns[i];
    }
    j->nconns = k;
}

static gw_status_t join_timeout(const join_t *j, int64_t waited)
{
    const gw_bootstrap_t *bs = j->bs;
    char missing[256];
    size_t n = 0;
    int nmissing = bs->size - 1 - j->joined;
    missing[0] = '\0';
    for (int r = 1, listed = 0; r < bs->size && listed < MISSING_LIST_MAX; r++) {
        if (j->by_rank[r])
            continue;
        int w = snprintf(missing + n, sizeof(missing) - n, "%s%d", listed ? ", " : "", r);
        n += w > 0 ? (size_t)w : 0;
        listed++;
    }
    if (nmissing > MISSING_LIST_MAX)
        snprintf(missing + n, sizeof(missing) - n, " and %d more", nmissing - MISSING_LIST_MAX);
    GW_ERROR(bs->log, SUBSYS,
             "timed out after %lld ms waiting for ranks to join at %s: %d of %d ranks joined "
             "(rank 0 included); missing rank%s %s",
             (long long)waited, bs->root, j->joined + 1, bs->size, nmissing == 1 ? "" : "s",
             missing);
    return GW_ERR_TIMEOUT;
}

static gw_status_t root_join(join_t *j, int64_t start, int64_t deadline)
{
    gw_bootstrap_t *bs = j->bs;
    while (j->joined < bs->size - 1) {
        int64_t now = gw__now_ms();
        if (now >= deadline)
            return join_timeout(j, now - start);
        if (j->pfds_cap < j->nconns + 1) {
            size_t cap = 2 * (j->nconns + 1);
            struct pollfd *grown = realloc(j->pfds, cap * sizeof(*grown));
            if (!grown) {
                GW_ERROR(bs->log, SUBSYS, "out of memory polling %zu connections", j->nconns);
                return GW_ERR_NO_MEMORY;
            }
            j->pfds = grown;
            j->pfds_cap = cap;
        }
        int64_t wake = deadline;
        int accepting = pending_count(j) < PENDING_MAX;
        if (accepting && now < j->accept_paused_until) {
            accepting = 0;
            wake = j->accept_paused_until;
        }
        j->pfds[0] = (struct pollfd){.fd = accepting ? j->lfd : -1, .events = POLLIN};
        for (size_t i = 0; i < j->nconns; i++) {
            conn_t *c = j->conns[i];
            int writing = c->state == CONN_CHALLENGE || c->state == CONN_REJECT;
            j->pfds[i + 1] = (struct pollfd){.fd = c->fd, .events = writing ? POLLOUT : POLLIN};
            if (c->state != CONN_JOINED && c->deadline < wake)
                wake = c->deadline;
        }
        size_t polled = j->nconns;
        int r = poll(j->pfds, polled + 1, remaining_ms(wake));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            GW_ERROR(bs->log, SUBSYS, "poll on the root connections failed: %m");
            return GW_ERR_SYSTEM;
        }
        for (size_t i = 0; i < polled; i++)
            if (j->pfds[i + 1].revents)
                conn_event(j, j->conns[i]);
        if (j->fatal != GW_OK)
            return j->fatal;
        now = gw__now_ms();
        for (size_t i = 0; i < polled; i++) {
            conn_t *c = j->conns[i];
            if (c->state != CONN_JOINED && c->state != CONN_CLOSED && now >= c->deadline) {
                char why[96];
                snprintf(why, sizeof(why), "no complete handshake within %d ms", j->handshake_ms);
                if (c->state == CONN_REJECT)
                    conn_close(j, c);
                else
                    conn_drop(j, c, why);
            }
        }
        sweep(j);
        if (j->pfds[0].revents)
            accept_all(j);
    }
    return GW_OK;
}

/* Every rank is in: stop listening, drop the stragglers, send the welcomes. */
static gw_status_t root_welcome(join_t *j, int64_t deadline)
{
    gw_bootstrap_t *bs = j->bs;
    close(j->lfd);
    j->lfd = -1;
    for (size_t i = 0; i < j->nconns; i++) {
        conn_t *c = j->conns[i];
        if (c->state != CONN_JOINED) {
            GW_INFO(bs->log, SUBSYS, "closing connection from %s: every rank has joined",
                    c->addr);
            conn_close(j, c);
        }
    }
    sweep(j);
    for (int r = 1; r < bs->size; r++) {
        conn_t *c = j->by_rank[r];
        uint8_t msg[GW_BS_WELCOME_LEN];
        gw__bs_encode_welcome(bs->job_id, msg);
        bs_io_t io;
        io_set(&io, msg, sizeof(msg), NULL, 0);
        int rc = io_run(c->fd, &io, 1, deadline);
        if (rc == IO_TIMEOUT) {
            GW_ERROR(bs->log, SUBSYS, "timed out sending the welcome to rank %d (%s)", r,
                     c->addr);
            return GW_ERR_TIMEOUT;
        }
        if (rc != IO_DONE) {
            GW_ERROR(bs->log, SUBSYS, "rank %d (%s) failed before receiving the welcome: %m", r,
                     c->addr);
            return GW_ERR_REMOTE;
        }
    }
    return GW_OK;
}

static gw_status_t root_open(gw_bootstrap_t *bs, const char *host, const char *port,
                             const uint8_t *key, size_t key_len, int64_t start, int64_t deadline)
{
    if (key_len == 0)
        GW_WARN(bs->log, SUBSYS,
                "no job token (GW_JOB_TOKEN) is set: the job at %s is unauthenticated, and any "
                "process that can reach it can join as a rank",
                bs->root);
    gw_status_t st = random_bytes(bs->log, bs->job_id, sizeof(bs->job_id));
    if (st != GW_OK)
        return st;
    join_t j;
    memset(&j, 0, sizeof(j));
    j.bs = bs;
    j.key = key;
    j.key_len = key_len;
    j.lfd = -1;
    j.fatal = GW_OK;
    j.handshake_ms = bs->timeout_ms / 2;
    if (j.handshake_ms > HANDSHAKE_MAX_MS)
        j.handshake_ms = HANDSHAKE_MAX_MS;
    if (j.handshake_ms < HANDSHAKE_MIN_MS)
        j.handshake_ms = HANDSHAKE_MIN_MS;
    j.by_rank = calloc((size_t)bs->size, sizeof(*j.by_rank));
    bs->fds = malloc((size_t)bs->size * sizeof(*bs->fds));
    bs->peer_addr = calloc((size_t)bs->size, sizeof(*bs->peer_addr));
    if (!j.by_rank || !bs->fds || !bs->peer_addr) {
        GW_ERROR(bs->log, SUBSYS, "out of memory for %d ranks", bs->size);
        st = GW_ERR_NO_MEMORY;
        goto out_free;
    }
    for (int r = 0; r < bs->size; r++)
        bs->fds[r] = -1;
    st = root_listen(bs, host, port, &j.lfd);
    if (st != GW_OK)
        goto out_free;
    st = root_join(&j, start, deadline);
    if (st == GW_OK)
        st = root_welcome(&j, deadline);
    if (st == GW_OK) {
        /* The joined connections now belong to the bootstrap. */
        for (int r = 1; r < bs->size; r++) {
            bs->fds[r] = j.by_rank[r]->fd;
            memcpy(bs->peer_addr[r], j.by_rank[r]->addr, ADDR_TEXT);
            j.by_rank[r]->fd = -1;
        }
        GW_INFO(bs->log, SUBSYS, "all %d ranks joined at %s", bs->size, bs->root);
    }
    if (j.lfd >= 0)
        close(j.lfd);
out_free:
    for (size_t i = 0; i < j.nconns; i++) {
        if (j.conns[i]->fd >= 0)
            close(j.conns[i]->fd);
        free(j.conns[i]);
    }
    free(j.conns);
    free(j.pfds);
    free(j.by_rank);
    return st;
}

/* ======================= the all-gather =================================== */

typedef enum gather_stage { G_HDR, G_BODY, G_REJECT, G_HAVE, G_SEND, G_SENT } gather_stage_t;

typedef struct gather_peer {
    gather_stage_t stage;
    bs_io_t io;
    uint8_t buf[GW_BS_SMALL_MSG_MAX];
} gather_peer_t;

/* Why the all-gather failed on rank 0, and what the other ranks are told. */
typedef struct gather_fail {
    gw_status_t local;
    gw_status_t remote;
    char reason[GW_BS_REASON_MAX + 1];
} gather_fail_t;

static gw_status_t gather_set_fail(const gw_bootstrap_t *bs, gather_fail_t *f, gw_status_t local,
                                   gw_status_t remote, const char *reason)
{
    f->local = local;
    f->remote = remote;
    size_t n = strnlen(reason, sizeof(f->reason) - 1); /* the wire carries at most this */
    memcpy(f->reason, reason, n);
    f->reason[n] = '\0';
    GW_ERROR(bs->log, SUBSYS, "bootstrap all-gather failed: %s", f->reason);
    return local;
}

/* Advance the receive from rank r. Returns GW_OK (maybe not finished yet:
 * see p->stage) or the failure, described in *f. */
static gw_status_t gather_recv(gw_bootstrap_t *bs, int r, gather_peer_t *p, size_t len,
                               uint8_t *all, gather_fail_t *f)
{
    char text[GW_BS_REASON_MAX + 64];
    const char *why = NULL;
    for (;;) {
        int io = io_step(bs->fds[r], &p->io, 0);
        if (io == IO_AGAIN)
            return GW_OK;
        if (io == IO_EOF || io == IO_ERROR) {
            if (io == IO_EOF)
                snprintf(text, sizeof(text),
                         "rank %d (%s) closed its bootstrap connection (did it exit?)", r,
                         bs->peer_addr[r]);
            else
                snprintf(text, sizeof(text), "the bootstrap connection to rank %d (%s) failed: %m",
                         r, bs->peer_addr[r]);
            return gather_set_fail(bs, f, GW_ERR_REMOTE, GW_ERR_REMOTE, text);
        }
        if (p->stage == G_HDR) {
            gw_bs_hdr_t h;
            if (gw__bs_decode_hdr(p->buf, GW_BS_HDR_LEN, &h, &why) != GW_OK)
                goto malformed;
            if (h.type == GW_BS_DATA) {
                if ((size_t)h.payload_len - 4 != len) {
                    snprintf(text, sizeof(text),
                             "length mismatch: rank %d contributes %lu bytes, rank 0 %zu bytes "
                             "(every rank must pass the same length)",
                             r, (unsigned long)h.payload_len - 4, len);
                    return gather_set_fail(bs, f, GW_ERR_MISMATCH, GW_ERR_MISMATCH, text);
                }
                p->stage = G_BODY;
                io_set(&p->io, p->buf, GW_BS_DATA_PREFIX_LEN, len ? all + (size_t)r * len : NULL,
                       len);
                p->io.done = GW_BS_HDR_LEN;
            } else if (h.type == GW_BS_REJECT) {
                p->stage = G_REJECT;
                io_set(&p->io, p->buf, GW_BS_HDR_LEN + h.payload_len, NULL, 0);
                p->io.done = GW_BS_HDR_LEN;
            } else {
                why = "unexpected message type";
                goto malformed;
            }
        } else if (p->stage == G_BODY) {
            uint32_t n;
            if (gw__bs_decode_data_prefix(p->buf, GW_BS_DATA_PREFIX_LEN, &n, &why) != GW_OK)
                goto malformed;
            p->stage = G_HAVE;
            return GW_OK;
        } else {
            gw_bs_reject_t rej;
            if (gw__bs_decode_reject(p->buf, p->io.total, &rej, &why) != GW_OK)
                goto malformed;
            snprintf(text, sizeof(text), "rank %d failed: %s", r, rej.reason);
            return gather_set_fail(bs, f, GW_ERR_REMOTE, GW_ERR_REMOTE, text);
        }
    }
malformed:
    snprintf(text, sizeof(text), "rank %d sent a malformed message: %s", r, why);
    return gather_set_fail(bs, f, GW_ERR_PROTOCOL, GW_ERR_REMOTE, text);
}

/* Tell every rank why the all-gather failed, where our side of its stream
 * is at a message boundary (a half-sent result can only be cut short), then
 * close our sending side so that nobody waits for more. */
static void gather_abort(gw_bootstrap_t *bs, const gather_peer_t *peers, const gather_fail_t *f)
{
    for (int r = 1; r < bs->size; r++) {
        if (bs->fds[r] < 0)
            continue;
        if (!peers || peers[r].stage != G_SEND || peers[r].io.done == 0)
            send_reject_nowait(bs->fds[r], f->remote, f->reason);
        shutdown(bs->fds[r], SHUT_WR);
    }
}

static gw_status_t gather_wait(gw_bootstrap_t *bs, gather_peer_t *peers, struct pollfd *pfds,
                               int *who, gather_stage_t stage, int64_t start, int64_t deadline,
                               gather_fail_t *f, size_t len, uint8_t *all)
{
    char text[GW_BS_REASON_MAX + 1];
    for (;;) {
        int n = 0;
        for (int r = 1; r < bs->size; r++) {
            int active = stage == G_SEND ? peers[r].stage == G_SEND
                                         : peers[r].stage < G_HAVE;
            if (active) {
                pfds[n] = (struct pollfd){.fd = bs->fds[r],
                                          .events = stage == G_SEND ? POLLOUT : POLLIN};
                who[n++] = r;
            }
        }
        if (n == 0)
            return GW_OK;
        int wait = remaining_ms(deadline);
        if (wait == 0) {
            size_t k = (size_t)snprintf(text, sizeof(text),
                                        "rank 0 timed out after %lld ms %s rank%s",
                                        (long long)(gw__now_ms() - start),
                                        stage == G_SEND ? "sending the result to"
                                                        : "waiting for the data of",
                                        n == 1 ? "" : "s");
            for (int i = 0; i < n && i < MISSING_LIST_MAX && k < sizeof(text); i++)
                k += (size_t)snprintf(text + k, sizeof(text) - k, "%s %d", i ? "," : "", who[i]);
            if (n > MISSING_LIST_MAX && k < sizeof(text))
                snprintf(text + k, sizeof(text) - k, " and %d more", n - MISSING_LIST_MAX);
            return gather_set_fail(bs, f, GW_ERR_TIMEOUT, GW_ERR_TIMEOUT, text);
        }
        int pr = poll(pfds, (nfds_t)n, wait);
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            snprintf(text, sizeof(text), "poll on rank 0 failed: %m");
            return gather_set_fail(bs, f, GW_ERR_SYSTEM, GW_ERR_REMOTE, text);
        }
        for (int i = 0; i < n; i++) {
            if (!pfds[i].revents)
                continue;
            int r = who[i];
            if (stage != G_SEND) {
                gw_status_t st = gather_recv(bs, r, &peers[r], len, all, f);
                if (st != GW_OK)
                    return st;
                continue;
            }
            int io = io_step(bs->fds[r], &peers[r].io, 1);
            if (io == IO_DONE) {
                peers[r].stage = G_SENT;
            } else if (io != IO_AGAIN) {
                snprintf(text, sizeof(text),
                         "rank %d (%s) failed while receiving the result: %m", r,
                         bs->peer_addr[r]);
                return gather_set_fail(bs, f, GW_ERR_REMOTE, GW_ERR_REMOTE, text);
            }
        }
    }
}

static gw_status_t root_allgather(gw_bootstrap_t *bs, const void *mine, size_t len, uint8_t *all,
                                  int64_t start, int64_t deadline)
{
    gather_fail_t f;
    gather_peer_t *peers = calloc((size_t)bs->size, sizeof(*peers));
    struct pollfd *pfds = calloc((size_t)bs->size, sizeof(*pfds));
    int *who = calloc((size_t)bs->size, sizeof(*who));
    if (!peers || !pfds || !who) {
        gather_set_fail(bs, &f, GW_ERR_NO_MEMORY, GW_ERR_REMOTE, "rank 0 is out of memory");
        goto err_abort;
    }
    if (len > 0)
        memmove(all, mine, len);
    for (int r = 1; r < bs->size; r++) {
        peers[r].stage = G_HDR;
        io_set(&peers[r].io, peers[r].buf, GW_BS_HDR_LEN, NULL, 0);
    }
    if (gather_wait(bs, peers, pfds, who, G_HDR, start, deadline, &f, len, all) != GW_OK)
        goto err_abort;

    uint8_t prefix[GW_BS_DATA_PREFIX_LEN];
    gw__bs_encode_data_prefix((uint32_t)((size_t)bs->size * len), prefix);
    for (int r = 1; r < bs->size; r++) {
        peers[r].stage = G_SEND;
        io_set(&peers[r].io, prefix, sizeof(prefix), all, (size_t)bs->size * len);
    }
    if (gather_wait(bs, peers, pfds, who, G_SEND, start, deadline, &f, len, all) != GW_OK)
        goto err_abort;
    free(who);
    free(pfds);
    free(peers);
    return GW_OK;

err_abort:
    gather_abort(bs, peers, &f);
    free(who);
    free(pfds);
    free(peers);
    return f.local;
}

static gw_status_t client_allgather(gw_bootstrap_t *bs, const void *mine, size_t len,
                                    uint8_t *all, int64_t deadline)
{
    int fd = bs->root_fd;
    size_t total = (size_t)bs->size * len;
    uint8_t prefix[GW_BS_DATA_PREFIX_LEN];
    gw__bs_encode_data_prefix((uint32_t)len, prefix);
    bs_io_t tx, rx;
    io_set(&tx, prefix, sizeof(prefix), (void *)mine, len);
    uint8_t in[GW_BS_SMALL_MSG_MAX];
    io_set(&rx, in, GW_BS_HDR_LEN, NULL, 0);
    gather_stage_t rstage = G_HDR;
    int send_errno = 0;
    const char *why = NULL;
    /* Send our block and read the answer in one loop: if rank 0 gives up
     * (a mismatch, a dead rank) its REJECT arrives while we may still be
     * sending, and must not wait behind a send that will never finish. */
    for (;;) {
        if (tx.done == tx.total && rstage == G_HAVE)
            return GW_OK;
        int wait = remaining_ms(deadline);
        if (wait == 0) {
            GW_ERROR(bs->log, SUBSYS,
                     "bootstrap all-gather timed out after %d ms waiting for rank 0 (root %s)",
                     bs->timeout_ms, bs->root);
            return GW_ERR_TIMEOUT;
        }
        int sending = tx.done < tx.total && send_errno == 0;
        struct pollfd p = {.fd = fd, .events = (short)(POLLIN | (sending ? POLLOUT : 0))};
        int pr = poll(&p, 1, wait);
        if (pr < 0 && errno != EINTR) {
            GW_ERROR(bs->log, SUBSYS, "poll on the connection to rank 0 failed: %m");
            return GW_ERR_SYSTEM;
        }
        if (pr <= 0)
            continue;
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            int io = io_step(fd, &rx, 0);
            if (io == IO_EOF || io == IO_ERROR) {
                if (send_errno)
                    errno = send_errno;
                if (io == IO_EOF && !send_errno)
                    GW_ERROR(bs->log, SUBSYS,
                             "rank 0 (root %s) closed the bootstrap connection during the "
                             "all-gather (did it exit?)",
                             bs->root);
                else
                    GW_ERROR(bs->log, SUBSYS,
                             "the bootstrap connection to rank 0 (root %s) failed during the "
                             "all-gather: %m",
                             bs->root);
                return GW_ERR_REMOTE;
            }
            if (io == IO_DONE && rstage == G_HDR) {
                gw_bs_hdr_t h;
                if (gw__bs_decode_hdr(in, GW_BS_HDR_LEN, &h, &why) != GW_OK)
                    goto malformed;
                if (h.type == GW_BS_REJECT) {
                    rstage = G_REJECT;
                    io_set(&rx, in, GW_BS_HDR_LEN + h.payload_len, NULL, 0);
                } else if (h.type == GW_BS_DATA && (size_t)h.payload_len - 4 == total) {
                    rstage = G_BODY;
                    io_set(&rx, in, GW_BS_DATA_PREFIX_LEN, all, total);
                } else {
                    why = h.type == GW_BS_DATA ? "result of the wrong length"
                                               : "unexpected message type";
                    goto malformed;
                }
                rx.done = GW_BS_HDR_LEN;
                io = io_step(fd, &rx, 0);
                if (io == IO_EOF || io == IO_ERROR)
                    continue; /* reported by the next pass */
            }
            if (io == IO_DONE && rstage == G_REJECT)
                return client_take_reject(bs, in, rx.total, "ended the all-gather");
            if (io == IO_DONE && rstage == G_BODY) {
                uint32_t n;
                if (gw__bs_decode_data_prefix(in, GW_BS_DATA_PREFIX_LEN, &n, &why) != GW_OK)
                    goto malformed;
                rstage = G_HAVE;
            }
        }
        if (sending && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
            /* A failed send is reported once the receive side tells why
             * (rank 0's REJECT, or the end of the connection). */
            if (io_step(fd, &tx, 1) == IO_ERROR)
                send_errno = errno;
        }
    }
malformed:
    GW_ERROR(bs->log, SUBSYS, "malformed all-gather message from rank 0 (root %s): %s", bs->root,
             why);
    return GW_ERR_PROTOCOL;
}

/* ======================= the public entry points ========================= */

gw_status_t gw__bootstrap_open(const gw_bootstrap_params_t *params, gw_bootstrap_t **out)
{
    if (!params || !out)
        return GW_ERR_INVALID_ARG;
    const gw_logger_t *lg = params->log;
    if (params->size < 1) {
        GW_ERROR(lg, SUBSYS, "bootstrap size %d: a job has at least one rank", params->size);
        return GW_ERR_CONFIG;
    }
    if (params->rank < 0 || params->rank >= params->size) {
        GW_ERROR(lg, SUBSYS, "bootstrap rank %d is outside [0, %d)", params->rank, params->size);
        return GW_ERR_CONFIG;
    }
    if (params->timeout_ms <= 0) {
        GW_ERROR(lg, SUBSYS, "bootstrap timeout %d ms: it must be positive", params->timeout_ms);
        return GW_ERR_CONFIG;
    }
    char host[256];
    char port[8] = "";
    if (params->size > 1 || params->root) {
        int p = 0;
        if (!params->root) {
            GW_ERROR(lg, SUBSYS, "no root address (host:port) for a job of %d ranks",
                     params->size);
            return GW_ERR_CONFIG;
        }
        if (gw__parse_hostport(params->root, host, sizeof(host), &p) != GW_OK ||
            strlen(params->root) >= ROOT_TEXT) {
            GW_ERROR(lg, SUBSYS,
                     "root address \"%s\" is not host:port or [ipv6]:port with a port in "
                     "1..65535",
                     params->root);
            return GW_ERR_CONFIG;
        }
        snprintf(port, sizeof(port), "%d", p);
    }
    gw_bootstrap_t *bs = calloc(1, sizeof(*bs));
    if (!bs) {
        GW_ERROR(lg, SUBSYS, "out of memory");
        return GW_ERR_NO_MEMORY;
    }
    bs->rank = params->rank;
    bs->size = params->size;
    bs->timeout_ms = params->timeout_ms;
    bs->log = lg;
    bs->failed = GW_OK;
    bs->root_fd = -1;
    if (params->root)
        memcpy(bs->root, params->root, strlen(params->root) + 1);

    const char *token = params->token ? params->token : "";
    const uint8_t *key = (const uint8_t *)token;
    size_t key_len = strlen(token);
    int64_t start = gw__now_ms();
    int64_t deadline = start + params->timeout_ms;
    gw_status_t st;
    if (bs->size == 1)
        st = random_bytes(lg, bs->job_id, sizeof(bs->job_id)); /* no network at all */
    else if (bs->rank == 0)
        st = root_open(bs, host, port, key, key_len, start, deadline);
    else
        st = client_join(bs, host, port, key, key_len, start, deadline);
    if (st != GW_OK) {
        gw__bootstrap_close(bs);
        return st;
    }
    *out = bs;
    return GW_OK;
}

void gw__bootstrap_job_id(const gw_bootstrap_t *bs, uint8_t job_id[16])
{
    if (bs)
        memcpy(job_id, bs->job_id, GW_BS_JOB_ID_LEN);
    else
        memset(job_id, 0, GW_BS_JOB_ID_LEN);
}

gw_status_t gw__bootstrap_local_addr(const gw_bootstrap_t *bs, struct sockaddr_storage *addr,
                                     socklen_t *len)
{
    if (!bs || !addr || !len)
        return GW_ERR_INVALID_ARG;
    if (bs->local_len == 0)
        return GW_ERR_NOT_FOUND; /* a one-rank job has no connection */
    memcpy(addr, &bs->local, sizeof(*addr));
    *len = bs->local_len;
    return GW_OK;
}

gw_status_t gw__bootstrap_allgather(gw_bootstrap_t *bs, const void *mine, size_t len, void *all)
{
    if (!bs)
        return GW_ERR_INVALID_ARG;
    if (bs->failed != GW_OK)
        return bs->failed;
    gw_status_t st = GW_OK;
    char reason[GW_BS_REASON_MAX + 1];
    if (len > GW_BS_DATA_RANK_MAX || len > GW_BS_DATA_MAX / (size_t)bs->size) {
        snprintf(reason, sizeof(reason),
                 "rank %d: bootstrap all-gather of %zu bytes per rank over %d ranks exceeds the "
                 "limits (%u bytes per rank, %u in all)",
                 bs->rank, len, bs->size, GW_BS_DATA_RANK_MAX, GW_BS_DATA_MAX);
        st = GW_ERR_INVALID_ARG;
    } else if (len > 0 && (!mine || !all)) {
        snprintf(reason, sizeof(reason), "rank %d: bootstrap all-gather with a NULL buffer",
                 bs->rank);
        st = GW_ERR_INVALID_ARG;
    }
    if (st != GW_OK) {
        GW_ERROR(bs->log, SUBSYS, "%s", reason);
        /* The other ranks are told, so that they fail now rather than time out. */
        if (bs->rank == 0 && bs->size > 1) {
            gather_fail_t f = {.local = st, .remote = GW_ERR_REMOTE};
            snprintf(f.reason, sizeof(f.reason), "%s", reason);
            gather_abort(bs, NULL, &f);
        } else if (bs->root_fd >= 0) {
            send_reject_nowait(bs->root_fd, st, reason);
            shutdown(bs->root_fd, SHUT_WR);
        }
        bs->failed = st;
        return st;
    }
    int64_t start = gw__now_ms();
    int64_t deadline = start + bs->timeout_ms;
    if (bs->size == 1) {
        if (len > 0)
            memmove(all, mine, len);
        return GW_OK;
    }
    if (bs->rank == 0) {
        st = root_allgather(bs, mine, len, all, start, deadline);
    } else {
        st = client_allgather(bs, mine, len, all, deadline);
        if (st != GW_OK)
            shutdown(bs->root_fd, SHUT_RDWR); /* rank 0 sees us leave at once */
    }
    if (st != GW_OK)
        bs->failed = st;
    return st;
}

void gw__bootstrap_close(gw_bootstrap_t *bs)
{
    if (!bs)
        return;
    if (bs->root_fd >= 0)
        close(bs->root_fd);
    if (bs->fds)
        for (int r = 0; r < bs->size; r++)
            if (bs->fds[r] >= 0)
                close(bs->fds[r]);
    free(bs->fds);
    free(bs->peer_addr);
    explicit_bzero(bs->job_id, sizeof(bs->job_id));
    free(bs);
}
