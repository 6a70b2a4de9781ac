/*
 * bootstrap_client.c - the bootstrap join of ranks > 0 (rank 0's side is in
 * bootstrap_root.c, the protocol in bootstrap_msg.h).
 *
 * Every rank other than 0 resolves the root, connects with growing sleeps
 * between attempts (rank 0 may start last), checks the root's proof before
 * proving itself, and then waits for the WELCOME. One rank talks to one
 * peer, so blocking on each message with a deadline is all it needs; rank
 * 0, which serves many connections at once, is the side with the poll loop.
 *
 * A root flooded by strangers drops the oldest connections that have not
 * spoken yet to make room for new ones (bootstrap_table.c), and a rank that
 * connected while the root was busy can be among them before its HELLO is
 * read. So a connection that rank 0 closes before its challenge arrives is
 * not a failure: the rank connects again, until its deadline.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/sha256.h"
#include "transport/bootstrap/bootstrap_internal.h"

/* A SYN that the root's kernel dropped (its accept queue full of strangers'
 * connections) is sent again only after 1 s, then 3 s: an attempt that has
 * not connected within 250 ms (doubling, up to 4 s) is given up and the
 * rank dials again, which sends a new SYN at once. */
#define CONNECT_ATTEMPT_FIRST_MS 250
#define CONNECT_ATTEMPT_MAX_MS 4000
/* How long past rank 0's own deadline a joined rank waits for its welcome
 * or for rank 0's word on who is missing. */
#define WELCOME_MARGIN_MS 1000

static int try_connect(const struct addrinfo *ai, int64_t deadline, int *err)
{
    int fd = gw__sock_open(ai->ai_family);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    int state = gw__sock_connect(fd, ai->ai_addr, ai->ai_addrlen);
    while (state == GW_SOCK_CONNECTING) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int r = poll(&p, 1, gw__sock_remaining_ms(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            errno = r == 0 ? ETIMEDOUT : errno;
            state = GW_SOCK_FAILED;
            break;
        }
        int soerr = gw__sock_connect_result(fd, p.revents);
        if (soerr > 0)
            errno = soerr;
        if (soerr >= 0)
            state = soerr == 0 ? GW_SOCK_CONNECTED : GW_SOCK_FAILED;
    }
    if (state == GW_SOCK_FAILED) {
        *err = errno;
        close(fd);
        return -1;
    }
    (void)gw__sock_nodelay(fd); /* best effort: only latency is at stake */
    return fd;
}

/* Connect to the root, retrying (rank 0 may not listen yet) with sleeps of
 * 10 ms doubling to 1 s, until the deadline; each attempt is given up after
 * attempt_ms (see CONNECT_ATTEMPT_FIRST_MS). */
gw_status_t gw__bs_client_connect(gw_bootstrap_t *bs, const char *host, const char *port,
                                  int64_t start, int64_t deadline, int *out)
{
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    gw_sock_retry_t retry;
    gw__sock_retry_init(&retry);
    int attempts = 0, last_errno = 0, last_gai = 0;
    int attempt_ms = CONNECT_ATTEMPT_FIRST_MS;
    char last_addr[GW_BS_ADDR_TEXT] = "no address";
    int64_t next_note = start + bs->progress_ms;
    for (;;) {
        struct addrinfo *res = NULL;
        int gai = getaddrinfo(host, port, &hints, &res);
        attempts++;
        if (gai == 0) {
            last_gai = 0;
            for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                gw__sock_addr_str(ai->ai_addr, last_addr, GW_BS_ADDR_TEXT);
                int64_t give_up = gw__now_ms() + attempt_ms;
                int fd = try_connect(ai, give_up < deadline ? give_up : deadline, &last_errno);
                if (fd >= 0) {
                    freeaddrinfo(res);
                    GW_TRACE(bs->log, GW_BS_SUBSYS,
                             "connected to the root %s (%s) after %d attempt%s", bs->root,
                             last_addr, attempts, attempts == 1 ? "" : "s");
                    *out = fd;
                    return GW_OK;
                }
                if (last_errno == ETIMEDOUT && attempt_ms < CONNECT_ATTEMPT_MAX_MS)
                    attempt_ms *= 2;
            }
            freeaddrinfo(res);
        } else if (gai == EAI_AGAIN || gai == EAI_NONAME || gai == EAI_FAIL || gai == EAI_NODATA) {
            /* The name may not exist yet (a scheduler that registers hosts
             * as they start): keep trying like a refused connection. */
            last_gai = gai;
        } else {
            GW_ERROR(bs->log, GW_BS_SUBSYS, "cannot resolve the root address %s: %s", bs->root,
                     gai_strerror(gai));
            return GW_ERR_CONFIG;
        }
        int wait = gw__sock_remaining_ms(deadline);
        if (wait == 0)
            break;
        int64_t now = gw__now_ms();
        if (now >= next_note) {
            next_note = now + (int64_t)bs->progress_ms * GW_BS_PROGRESS_EVERY_FACTOR;
            GW_WARN(bs->log, GW_BS_SUBSYS,
                    "rank %d still cannot reach the root %s (%s) after %lld s and %d attempts: "
                    "%s; is rank 0 running, and is the root address (GW_ROOT, MASTER_ADDR) the "
                    "same on every rank? Giving up in %lld s (GW_JOIN_TIMEOUT_MS)",
                    bs->rank, bs->root, last_addr, (long long)(now - start) / 1000, attempts,
                    last_gai ? gai_strerror(last_gai) : strerror(last_errno),
                    (long long)(deadline - now) / 1000);
        }
        int pause = gw__sock_retry_arm(&retry);
        poll(NULL, 0, pause < wait ? pause : wait);
    }
    long long tried = (long long)(gw__now_ms() - start);
    if (last_gai != 0) {
        GW_ERROR(bs->log, GW_BS_SUBSYS,
                 "could not resolve the root address %s for %lld ms (%d attempts): %s", bs->root,
                 tried, attempts, gai_strerror(last_gai));
    } else {
        errno = last_errno;
        GW_ERROR(bs->log, GW_BS_SUBSYS,
                 "could not connect to the root %s (%s) for %lld ms (%d attempts): %m; is rank 0 "
                 "running, and is the root address the same on every rank?",
                 bs->root, last_addr, tried, attempts);
    }
    return GW_ERR_TIMEOUT;
}

static gw_status_t client_io_error(const gw_bootstrap_t *bs, int r, const char *what)
{
    if (r == GW_SOCK_IO_TIMEOUT) {
        GW_ERROR(bs->log, GW_BS_SUBSYS,
                 "timed out after %d ms waiting for %s from rank 0 (root %s)", bs->timeout_ms, what,
                 bs->root);
        return GW_ERR_TIMEOUT;
    }
    if (r == GW_SOCK_IO_EOF)
        GW_ERROR(bs->log, GW_BS_SUBSYS, "rank 0 (root %s) closed the connection during %s",
                 bs->root, what);
    else
        GW_ERROR(bs->log, GW_BS_SUBSYS, "connection to rank 0 (root %s) failed during %s: %m",
                 bs->root, what);
    return GW_ERR_REMOTE;
}

static gw_status_t client_send(const gw_bootstrap_t *bs, int fd, uint8_t *msg, size_t len,
                               int64_t deadline, const char *what)
{
    gw_sock_io_t io;
    gw__sock_io_set(&io, msg, len, NULL, 0);
    int r = gw__sock_io_run(fd, &io, 1, deadline);
    return r == GW_SOCK_IO_DONE ? GW_OK : client_io_error(bs, r, what);
}

/* Log the root's REJECT and return the status it carries. */
gw_status_t gw__bs_client_take_reject(const gw_bootstrap_t *bs, const uint8_t *msg, size_t len,
                                      const char *when)
{
    gw_bs_reject_t rej;
    const char *why = NULL;
    if (gw__bs_decode_reject(msg, len, &rej, &why) != GW_OK) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "malformed reject from rank 0 (root %s): %s", bs->root,
                 why);
        return GW_ERR_PROTOCOL;
    }
    GW_ERROR(bs->log, GW_BS_SUBSYS, "rank 0 (root %s) %s: %s [%s]", bs->root, when, rej.reason,
             gw_status_name(rej.status));
    return rej.status;
}

gw_status_t gw__bs_client_take_verdict(gw_bootstrap_t *bs, const uint8_t *msg, size_t len,
                                       const char *when)
{
    gw_bs_verdict_t v;
    const char *why = NULL;
    if (gw__bs_decode_verdict(msg, len, &v, &why) != GW_OK || v.culprit >= bs->size) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "malformed verdict from rank 0 (root %s): %s", bs->root,
                 why ? why : "it names a rank outside the job");
        bs->culprit = 0;
        return GW_ERR_PROTOCOL;
    }
    bs->culprit = v.culprit;
    GW_ERROR(bs->log, GW_BS_SUBSYS, "rank 0 (root %s) %s: %s [%s; blaming rank %d]", bs->root, when,
             v.reason, gw_status_name(v.status), v.culprit);
    return v.status;
}

/* The root closed or reset the connection before a byte of its answer:
 * it dropped us unheard. */
static int dropped_unheard(int r, const gw_sock_io_t *io)
{
    return io->done == 0 && (r == GW_SOCK_IO_EOF ||
                             (r == GW_SOCK_IO_ERROR && (errno == ECONNRESET || errno == EPIPE)));
}

/* Read one whole handshake message whose type is in accept_mask. When
 * dropped is not NULL and the root closes the connection before a byte of
 * the message, *dropped is set and GW_ERR_REMOTE returned, unlogged. */
static gw_status_t client_recv_small(const gw_bootstrap_t *bs, int fd, unsigned accept_mask,
                                     int64_t deadline, const char *what,
                                     uint8_t buf[GW_BS_SMALL_MSG_MAX], gw_bs_hdr_t *hdr,
                                     int *dropped)
{
    gw_sock_io_t io;
    gw__sock_io_set(&io, buf, GW_BS_HDR_LEN, NULL, 0);
    int r = gw__sock_io_run(fd, &io, 0, deadline);
    if (r != GW_SOCK_IO_DONE && dropped && dropped_unheard(r, &io)) {
        *dropped = 1;
        return GW_ERR_REMOTE;
    }
    if (r != GW_SOCK_IO_DONE)
        return client_io_error(bs, r, what);
    const char *why = NULL;
    if (gw__bs_decode_hdr(buf, GW_BS_HDR_LEN, hdr, &why) != GW_OK) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "malformed message from the root %s during %s: %s",
                 bs->root, what, why);
        return GW_ERR_PROTOCOL;
    }
    if (!(accept_mask & GW_BS_TYPE_BIT(hdr->type)) ||
        hdr->payload_len > GW_BS_SMALL_MSG_MAX - GW_BS_HDR_LEN) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "unexpected %s message from the root %s during %s",
                 gw__bs_type_name(hdr->type), bs->root, what);
        return GW_ERR_PROTOCOL;
    }
    gw__sock_io_set(&io, buf + GW_BS_HDR_LEN, hdr->payload_len, NULL, 0);
    r = gw__sock_io_run(fd, &io, 0, deadline);
    return r == GW_SOCK_IO_DONE ? GW_OK : client_io_error(bs, r, what);
}

/* Read rank 0's answer: a message of `type`, whose whole length goes to
 * *len, or a REJECT, which is logged and whose status is returned. dropped:
 * as client_recv_small. */
static gw_status_t client_recv_answer(gw_bootstrap_t *bs, int fd, gw_bs_type_t type,
                                      int64_t deadline, const char *what,
                                      uint8_t buf[GW_BS_SMALL_MSG_MAX], size_t *len, int *dropped)
{
    gw_bs_hdr_t hdr;
    unsigned mask = GW_BS_TYPE_BIT(type) | GW_BS_TYPE_BIT(GW_BS_REJECT);
    if (type == GW_BS_WELCOME)
        mask |= GW_BS_TYPE_BIT(GW_BS_VERDICT); /* a join that failed: whom to blame */
    gw_status_t st = client_recv_small(bs, fd, mask, deadline, what, buf, &hdr, dropped);
    if (st != GW_OK)
        return st;
    *len = GW_BS_HDR_LEN + hdr.payload_len;
    if (hdr.type == GW_BS_VERDICT)
        return gw__bs_client_take_verdict(bs, buf, *len, "ended the join");
    if (hdr.type == GW_BS_REJECT)
        return gw__bs_client_take_reject(
            bs, buf, *len, type == GW_BS_WELCOME ? "ended the join" : "rejected this rank");
    return GW_OK;
}

/* Connect, send the HELLO (with a fresh nonce each time) and read the
 * CHALLENGE; connect again when the root drops the connection unheard (see
 * the top of the file). */
static gw_status_t client_hello(gw_bootstrap_t *bs, const char *host, const char *port,
                                int64_t start, int64_t deadline, gw_bs_hello_t *hello, int *out,
                                uint8_t buf[GW_BS_SMALL_MSG_MAX], size_t *len)
{
    gw_sock_retry_t retry;
    gw__sock_retry_init(&retry);
    for (int attempt = 1;; attempt++) {
        gw_status_t st =
            gw__bs_random_bytes(bs->log, hello->client_nonce, sizeof(hello->client_nonce));
        if (st != GW_OK)
            return st;
        int fd = -1;
        st = gw__bs_client_connect(bs, host, port, start, deadline, &fd);
        if (st != GW_OK)
            return st;
        int dropped = 0;
        gw__bs_encode_hello(hello, buf);
        gw_sock_io_t io;
        gw__sock_io_set(&io, buf, GW_BS_HELLO_LEN, NULL, 0);
        int r = gw__sock_io_run(fd, &io, 1, deadline);
        if (r == GW_SOCK_IO_ERROR && (errno == ECONNRESET || errno == EPIPE))
            dropped = 1; /* closed before it read our HELLO */
        else if (r != GW_SOCK_IO_DONE)
            st = client_io_error(bs, r, "the hello");
        else
            st = client_recv_answer(bs, fd, GW_BS_CHALLENGE, deadline, "the challenge", buf, len,
                                    &dropped);
        if (!dropped) {
            if (st == GW_OK)
                *out = fd;
            else
                close(fd);
            return st;
        }
        close(fd);
        int wait = gw__sock_remaining_ms(deadline);
        if (wait == 0) {
            GW_ERROR(bs->log, GW_BS_SUBSYS,
                     "rank 0 (root %s) closed every connection of this rank before its challenge "
                     "(%d attempts in %lld ms): is the root flooded by other connections?",
                     bs->root, attempt, (long long)(gw__now_ms() - start));
            return GW_ERR_TIMEOUT;
        }
        int pause = gw__sock_retry_arm(&retry);
        if (attempt == 1)
            GW_INFO(bs->log, GW_BS_SUBSYS,
                    "rank 0 (root %s) closed the connection before its challenge (a root that "
                    "strangers flood drops connections it has not heard from yet); connecting "
                    "again",
                    bs->root);
        poll(NULL, 0, pause < wait ? pause : wait);
    }
}

/* Until rank 0's answer can be read (or welcome_by), saying so at WARN
 * from GW_JOIN_PROGRESS_MS after start on: this rank is in, the
 * others are not yet, and rank 0's own lines name them. */
static void wait_for_welcome(const gw_bootstrap_t *bs, int fd, int64_t start, int64_t welcome_by)
{
    int64_t next_note = start + bs->progress_ms;
    for (;;) {
        int64_t now = gw__now_ms();
        if (now >= welcome_by)
            return;
        if (now >= next_note) {
            next_note = now + (int64_t)bs->progress_ms * GW_BS_PROGRESS_EVERY_FACTOR;
            GW_WARN(bs->log, GW_BS_SUBSYS,
                    "rank %d reached the root %s and has waited %lld s for the other ranks of "
                    "%d to join (rank 0's log names the missing ones); giving up in %lld s "
                    "(GW_JOIN_TIMEOUT_MS)",
                    bs->rank, bs->root, (long long)(now - start) / 1000, bs->size,
                    (long long)(welcome_by - now) / 1000);
        }
        int64_t wake = next_note < welcome_by ? next_note : welcome_by;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, gw__sock_remaining_ms(wake));
        if (r > 0 || (r < 0 && errno != EINTR))
            return; /* readable, closed or failed: the read that follows says which */
    }
}

gw_status_t gw__bs_client_join(gw_bootstrap_t *bs, const char *host, const char *port,
                               const uint8_t *key, size_t key_len, int64_t start, int64_t deadline)
{
    gw_bs_hello_t hello = {.rank = bs->rank, .size = bs->size};
    int fd = -1;
    uint8_t buf[GW_BS_SMALL_MSG_MAX];
    size_t len = 0;
    gw_status_t st = client_hello(bs, host, port, start, deadline, &hello, &fd, buf, &len);
    if (st != GW_OK)
        goto out_blame;
    bs->local_len = sizeof(bs->local);
    if (getsockname(fd, (struct sockaddr *)&bs->local, &bs->local_len) != 0) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "getsockname on the connection to the root %s: %m",
                 bs->root);
        st = GW_ERR_SYSTEM;
        goto err_close_fd;
    }

    gw_bs_challenge_t ch;
    const char *why = NULL;
    if (gw__bs_decode_challenge(buf, len, &ch, &why) != GW_OK) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "malformed challenge from the root %s: %s", bs->root, why);
        st = GW_ERR_PROTOCOL;
        goto err_close_fd;
    }
    /* Check the root before proving ourselves: a process that merely
     * listens on the root's port learns nothing from us. */
    uint8_t proof[GW_BS_PROOF_LEN];
    gw__bs_root_proof(key, key_len, hello.client_nonce, ch.server_nonce, proof);
    if (!gw__ct_equal(proof, ch.root_proof, sizeof(proof))) {
        GW_ERROR(bs->log, GW_BS_SUBSYS,
                 "authentication with the root %s failed: its proof does not match this rank's "
                 "job token (is GW_JOB_TOKEN the same on every rank?)",
                 bs->root);
        char reason[GW_BS_REASON_MAX + 1];
        snprintf(reason, sizeof(reason),
                 "wrong job token: rank %d cannot verify the proof of rank 0", bs->rank);
        gw__bs_send_reject_nowait(fd, GW_ERR_AUTH, reason);
        st = GW_ERR_AUTH;
        goto err_close_fd;
    }
    gw__bs_rank_proof(key, key_len, ch.server_nonce, hello.client_nonce, (uint32_t)bs->rank, proof);
    gw__bs_encode_response(proof, buf);
    st = client_send(bs, fd, buf, GW_BS_RESPONSE_LEN, deadline, "the response");
    if (st != GW_OK)
        goto err_close_fd;

    /* Rank 0 was listening when we got in, so it gives up on the join
     * within its own timeout from now, and then tells us which ranks are
     * missing: wait for that rather than time out naming nobody. */
    int64_t welcome_by = gw__now_ms() + bs->join_timeout_ms + WELCOME_MARGIN_MS;
    if (welcome_by < deadline)
        welcome_by = deadline;
    wait_for_welcome(bs, fd, start, welcome_by);
    st = client_recv_answer(bs, fd, GW_BS_WELCOME, welcome_by,
                            "the join (waiting for every rank to join)", buf, &len, NULL);
    if (st != GW_OK)
        goto err_close_fd;
    if (gw__bs_decode_welcome(buf, len, bs->job_id, &why) != GW_OK) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "malformed welcome from the root %s: %s", bs->root, why);
        st = GW_ERR_PROTOCOL;
        goto err_close_fd;
    }
    bs->root_fd = fd;
    GW_INFO(bs->log, GW_BS_SUBSYS, "rank %d of %d joined the job at %s", bs->rank, bs->size,
            bs->root);
    return GW_OK;

err_close_fd:
    close(fd);
out_blame:
    /* Unless rank 0 named the culprit: refused by rank 0 (another token,
     * size or rank, a bad root address), this rank is at fault; otherwise
     * rank 0 could not be reached, closed the connection or said nothing
     * in time. */
    if (bs->culprit < 0)
        bs->culprit = st == GW_ERR_AUTH || st == GW_ERR_CONFIG ? bs->rank : 0;
    return st;
}
