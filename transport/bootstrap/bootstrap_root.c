/*
 * bootstrap_root.c - rank 0's side of the bootstrap join: accepting and
 * authenticating every other rank (their side is in bootstrap_client.c, the
 * protocol in bootstrap_msg.h).
 *
 * Rank 0 binds the root address and runs one epoll loop over its listening
 * socket and every connection it accepted. Each connection is a small state
 * machine: read HELLO, write CHALLENGE (our proof that we know the token),
 * read RESPONSE (the rank's proof), then either join or be rejected. All
 * sockets are non-blocking, so a port scanner that connects and sends
 * nothing, or sends half a message, costs one slot until its handshake
 * deadline and never stalls the real ranks that connect beside it. The
 * connections that have not joined yet are held in a bounded table
 * (bootstrap_table.c, which says how the join stays quick while thousands
 * of strangers arrive with the ranks). When size - 1 distinct ranks have
 * joined, rank 0 sends each a WELCOME carrying the job id; the listener
 * stays open for the referee, which answers latecomers (bootstrap_late.c).
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/sha256.h"
#include "transport/bootstrap/bootstrap_root.h"

/* A connection has at most half the job's timeout (and at most 5 s) to
 * finish its handshake: legitimate ranks need milliseconds, and freeing the
 * slots of silent connections early keeps strangers from holding them for
 * the whole job timeout. */
#define HANDSHAKE_MAX_MS 5000
#define HANDSHAKE_MIN_MS 50
#define EVENTS_MAX 256
/* The kernel caps the backlog at net.core.somaxconn (4096 by default). */
#define LISTEN_BACKLOG 65535

/* The names this file's functions have always used. */
typedef gw_bs_join_t join_t;
typedef gw_bs_conn_t conn_t;

gw_status_t gw__bs_listen_at(const gw_logger_t *log, const char *host, const char *port,
                             const char *what, int *out)
{
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        GW_ERROR(log, GW_BS_SUBSYS, "cannot resolve %s %s:%s: %s", what, host, port,
                 gai_strerror(gai));
        return GW_ERR_CONFIG;
    }
    gw_status_t st = GW_ERR_SYSTEM;
    char addr[GW_BS_ADDR_TEXT];
    int fd = -1;
    /* Bind the first address of the name. Falling back to the next one on
     * EADDRINUSE would let ranks that try the first address reach whatever
     * holds it; only an address family this host lacks is skipped. */
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        gw__sock_addr_str(ai->ai_addr, addr, GW_BS_ADDR_TEXT);
        fd = gw__sock_open(ai->ai_family);
        if (fd < 0) {
            if (errno == EAFNOSUPPORT && ai->ai_next)
                continue;
            GW_ERROR(log, GW_BS_SUBSYS, "cannot create a socket for %s %s: %m", what, addr);
            goto out_free;
        }
        int one = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
            GW_ERROR(log, GW_BS_SUBSYS, "setsockopt(SO_REUSEADDR) on %s: %m", addr);
            goto err_close_fd;
        }
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            GW_ERROR(log, GW_BS_SUBSYS,
                     "cannot bind %s %s: %m (is another job using the port, or is the address "
                     "not this host's?)",
                     what, addr);
            goto err_close_fd;
        }
        if (listen(fd, LISTEN_BACKLOG) != 0) {
            GW_ERROR(log, GW_BS_SUBSYS, "cannot listen on %s %s: %m", what, addr);
            goto err_close_fd;
        }
        *out = fd;
        st = GW_OK;
        goto out_free;
    }
    GW_ERROR(log, GW_BS_SUBSYS, "%s %s:%s resolves to no usable address", what, host, port);
    goto out_free;

err_close_fd:
    close(fd);
out_free:
    freeaddrinfo(res);
    return st;
}

static gw_status_t root_listen(gw_bootstrap_t *bs, const char *host, const char *port, int *out)
{
    int fd = -1;
    gw_status_t st = gw__bs_listen_at(bs->log, host, port, "the root address", &fd);
    if (st != GW_OK)
        return st;
    bs->local_len = sizeof(bs->local);
    if (getsockname(fd, (struct sockaddr *)&bs->local, &bs->local_len) != 0) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "getsockname on the root socket %s: %m", bs->root);
        close(fd);
        return GW_ERR_SYSTEM;
    }
    GW_INFO(bs->log, GW_BS_SUBSYS, "rank 0 listening at %s for %d other rank%s", bs->root,
            bs->size - 1, bs->size == 2 ? "" : "s");
    *out = fd;
    return GW_OK;
}

/* Watch the socket for what its state waits on (a connection just accepted
 * is not in the set yet: events 0). */
static void conn_watch(join_t *j, conn_t *c)
{
    if (c->state == GW_BS_CONN_CLOSED)
        return;
    uint32_t want =
        c->state == GW_BS_CONN_CHALLENGE || c->state == GW_BS_CONN_REJECT ? EPOLLOUT : EPOLLIN;
    if (want == c->events)
        return;
    struct epoll_event ev = {.events = want, .data.ptr = c};
    if (epoll_ctl(j->ep, c->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        GW_WARN(j->bs->log, GW_BS_SUBSYS, "epoll_ctl for the connection from %s: %m; dropping it",
                c->addr);
        gw__bs_conn_close(j, c);
        return;
    }
    c->events = want;
}

static void conn_start_read(conn_t *c, gw_bs_conn_state_t state)
{
    c->state = state;
    c->hdr_done = 0;
    gw__sock_io_set(&c->io, c->buf, GW_BS_HDR_LEN, NULL, 0);
}

static void conn_write(join_t *j, conn_t *c);

static void conn_start_write(join_t *j, conn_t *c, gw_bs_conn_state_t state, size_t len)
{
    c->state = state;
    gw__sock_io_set(&c->io, c->buf, len, NULL, 0);
    conn_write(j, c); /* usually completes at once: saves a poll round */
}

static void conn_reject(join_t *j, conn_t *c, gw_status_t status, const char *reason)
{
    conn_start_write(j, c, GW_BS_CONN_REJECT, gw__bs_encode_reject(status, reason, c->buf));
}

static void conn_write(join_t *j, conn_t *c)
{
    int r = gw__sock_io_step(c->fd, &c->io, 1);
    if (r == GW_SOCK_IO_AGAIN)
        return;
    if (r != GW_SOCK_IO_DONE) {
        char why[96];
        snprintf(why, sizeof(why), "send failed: %m");
        if (c->state == GW_BS_CONN_REJECT)
            gw__bs_conn_close(j, c); /* the reason was logged when we rejected it */
        else
            gw__bs_conn_drop(j, c, GW_BS_DROP_LEFT, why);
        return;
    }
    if (c->state == GW_BS_CONN_CHALLENGE)
        conn_start_read(c, GW_BS_CONN_RESPONSE);
    else
        gw__bs_conn_close(j, c); /* GW_BS_CONN_REJECT: the rank has its reason */
}

/* Read the message of the current state. 1: complete, 0: not yet, -1: the
 * connection was dropped. */
static int conn_read(join_t *j, conn_t *c, unsigned accept_mask)
{
    for (;;) {
        int r = gw__sock_io_step(c->fd, &c->io, 0);
        if (r == GW_SOCK_IO_AGAIN)
            return 0;
        if (r == GW_SOCK_IO_EOF) {
            gw__bs_conn_drop(j, c, GW_BS_DROP_LEFT, "closed during the handshake");
            return -1;
        }
        if (r == GW_SOCK_IO_ERROR) {
            char why[96];
            snprintf(why, sizeof(why), "receive failed during the handshake: %m");
            gw__bs_conn_drop(j, c, GW_BS_DROP_LEFT, why);
            return -1;
        }
        if (c->hdr_done)
            return 1;
        const char *why = NULL;
        if (gw__bs_decode_hdr(c->buf, GW_BS_HDR_LEN, &c->hdr, &why) != GW_OK) {
            gw__bs_conn_drop(j, c, GW_BS_DROP_GARBAGE, why);
            return -1;
        }
        if (!(accept_mask & GW_BS_TYPE_BIT(c->hdr.type)) ||
            c->hdr.payload_len > sizeof(c->buf) - GW_BS_HDR_LEN) {
            char text[96];
            snprintf(text, sizeof(text), "unexpected %s message during the handshake",
                     gw__bs_type_name(c->hdr.type));
            gw__bs_conn_drop(j, c, GW_BS_DROP_GARBAGE, text);
            return -1;
        }
        c->hdr_done = 1;
        gw__sock_io_set(&c->io, c->buf, GW_BS_HDR_LEN + c->hdr.payload_len, NULL, 0);
        c->io.done = GW_BS_HDR_LEN;
    }
}

static void conn_on_hello(join_t *j, conn_t *c)
{
    gw_bs_hello_t hello;
    const char *why = NULL;
    if (gw__bs_decode_hello(c->buf, c->io.total, &hello, &why) != GW_OK) {
        gw__bs_conn_drop(j, c, GW_BS_DROP_GARBAGE, why);
        return;
    }
    gw__bs_table_spoke(j, c);
    (void)gw__sock_nodelay(c->fd); /* best effort: only latency is at stake */
    c->rank = hello.rank;
    c->size = hello.size;
    memcpy(c->client_nonce, hello.client_nonce, GW_BS_NONCE_LEN);
    gw_status_t st = gw__bs_random_bytes(j->bs->log, c->server_nonce, GW_BS_NONCE_LEN);
    if (st != GW_OK) {
        j->fatal = st;
        gw__bs_conn_close(j, c);
        return;
    }
    gw_bs_challenge_t ch;
    memcpy(ch.server_nonce, c->server_nonce, GW_BS_NONCE_LEN);
    gw__bs_root_proof(j->key, j->key_len, c->client_nonce, c->server_nonce, ch.root_proof);
    gw__bs_encode_challenge(&ch, c->buf);
    conn_start_write(j, c, GW_BS_CONN_CHALLENGE, GW_BS_CHALLENGE_LEN);
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
            gw__bs_conn_drop(j, c, GW_BS_DROP_GARBAGE, why);
            return;
        }
        snprintf(text, sizeof(text), "%s (the peer, claiming rank %d, says: %s)",
                 rej.status == GW_ERR_AUTH ? "wrong job token" : "the peer gave up", c->rank,
                 rej.reason);
        gw__bs_conn_drop(j, c, GW_BS_DROP_AUTH, text);
        return;
    }
    uint8_t got[GW_BS_PROOF_LEN], want[GW_BS_PROOF_LEN];
    if (gw__bs_decode_response(c->buf, c->io.total, got, &why) != GW_OK) {
        gw__bs_conn_drop(j, c, GW_BS_DROP_GARBAGE, why);
        return;
    }
    gw__bs_rank_proof(j->key, j->key_len, c->server_nonce, c->client_nonce, (uint32_t)c->rank,
                      want);
    if (!gw__ct_equal(got, want, sizeof(want))) {
        /* A rank with another token finds out from our proof and rejects
         * it (above), so a wrong proof comes from a peer that did not check
         * ours: a stranger guessing, or flooding. Like a login prompt, the
         * root answers it late, at the connection's handshake deadline
         * (gw__bs_table_expire): a flood that waits for each answer before
         * it connects again then costs the root a slot per connection, not
         * a handshake every few microseconds. */
        gw__bs_stranger(j, c, GW_BS_DROP_AUTH, "wrong job token");
        gw__bs_table_wrong(j, c);
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
        gw__bs_table_joined(j, c); /* never evicted, never expires */
        GW_INFO(bs->log, GW_BS_SUBSYS, "rank %d joined from %s (%d of %d ranks)", c->rank, c->addr,
                j->joined + 1, bs->size);
        return;
    }
    GW_WARN(bs->log, GW_BS_SUBSYS, "rejected connection from %s: %s", c->addr, text);
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
    if (r == 0)
        GW_WARN(j->bs->log, GW_BS_SUBSYS,
                "dropped connection from %s: rank %d disconnected before every rank joined",
                c->addr, c->rank);
    else if (r < 0)
        GW_WARN(j->bs->log, GW_BS_SUBSYS,
                "dropped connection from %s: rank %d failed before every rank joined: %m", c->addr,
                c->rank);
    else
        GW_WARN(j->bs->log, GW_BS_SUBSYS,
                "dropped connection from %s: rank %d sent data before the welcome", c->addr,
                c->rank);
    gw__bs_conn_close(j, c);
}

void gw__bs_conn_event(join_t *j, conn_t *c)
{
    switch (c->state) {
    case GW_BS_CONN_HELLO:
        if (conn_read(j, c, GW_BS_TYPE_BIT(GW_BS_HELLO)) == 1)
            conn_on_hello(j, c);
        break;
    case GW_BS_CONN_RESPONSE:
        if (conn_read(j, c, GW_BS_TYPE_BIT(GW_BS_RESPONSE) | GW_BS_TYPE_BIT(GW_BS_REJECT)) == 1)
            conn_on_response(j, c);
        break;
    case GW_BS_CONN_CHALLENGE:
    case GW_BS_CONN_REJECT:
        conn_write(j, c);
        break;
    case GW_BS_CONN_WRONG:
        gw__bs_conn_close(j, c); /* it left, or says more: logged already */
        return;
    case GW_BS_CONN_JOINED:
        conn_check_joined(j, c);
        break;
    case GW_BS_CONN_CLOSED:
        return;
    }
    conn_watch(j, c);
}

/* ---- the join ------------------------------------------------------------------ */

/* "1, 3, 5 and 12 more" into missing: the ranks that have not joined;
 * the first of them is returned (-1: none). */
static int missing_ranks(const join_t *j, char *missing, size_t cap)
{
    const gw_bootstrap_t *bs = j->bs;
    size_t n = 0;
    int nmissing = bs->size - 1 - j->joined, first = -1;
    missing[0] = '\0';
    for (int r = 1, listed = 0; r < bs->size && listed < GW_BS_MISSING_LIST_MAX; r++) {
        if (j->by_rank[r])
            continue;
        if (!listed)
            first = r;
        int w = snprintf(missing + n, cap - n, "%s%d", listed ? ", " : "", r);
        n += w > 0 ? (size_t)w : 0;
        listed++;
    }
    if (nmissing > GW_BS_MISSING_LIST_MAX && n < cap)
        snprintf(missing + n, cap - n, " and %d more", nmissing - GW_BS_MISSING_LIST_MAX);
    return first;
}

/* The root's progress line while ranks are missing (see
 * GW_JOIN_PROGRESS_MS): who is in, who is not, where they should dial. */
static void join_progress(const join_t *j, int64_t start, int64_t now, int64_t deadline)
{
    const gw_bootstrap_t *bs = j->bs;
    char missing[256];
    missing_ranks(j, missing, sizeof(missing));
    int nmissing = bs->size - 1 - j->joined;
    GW_WARN(bs->log, GW_BS_SUBSYS,
            "rank 0 has waited %lld s at the root %s: %d of %d ranks joined (rank 0 included); "
            "missing rank%s %s (not started yet, or given another root address or token?); "
            "giving up in %lld s (GW_JOIN_TIMEOUT_MS)",
            (long long)(now - start) / 1000, bs->root, j->joined + 1, bs->size,
            nmissing == 1 ? "" : "s", missing, (long long)(deadline - now) / 1000);
}

static gw_status_t join_timeout(const join_t *j, int64_t waited)
{
    gw_bootstrap_t *bs = j->bs;
    char missing[256];
    int nmissing = bs->size - 1 - j->joined;
    /* The first missing rank is the one every rank names. */
    int first = missing_ranks(j, missing, sizeof(missing));
    if (first >= 0)
        bs->culprit = first;
    GW_ERROR(bs->log, GW_BS_SUBSYS,
             "timed out after %lld ms waiting for ranks to join at %s: %d of %d ranks joined "
             "(rank 0 included); missing rank%s %s",
             (long long)waited, bs->root, j->joined + 1, bs->size, nmissing == 1 ? "" : "s",
             missing);
    /* The ranks that did join wait for their welcome: they learn from us
     * which ranks never came, and whom to blame, instead of timing out with
     * nobody named. */
    char reason[GW_BS_REASON_MAX + 1];
    snprintf(reason, sizeof(reason),
             "gave up after %lld ms: %d of %d ranks joined; missing rank%s %.120s (never started, "
             "killed, or given another root address or token)",
             (long long)waited, j->joined + 1, bs->size, nmissing == 1 ? "" : "s", missing);
    for (int r = 1; r < bs->size; r++)
        if (j->by_rank[r])
            gw__bs_send_verdict_nowait(j->by_rank[r]->fd, GW_ERR_TIMEOUT, bs->culprit, reason);
    return GW_ERR_TIMEOUT;
}

static gw_status_t root_join(join_t *j, int64_t start, int64_t deadline)
{
    gw_bootstrap_t *bs = j->bs;
    struct epoll_event evs[EVENTS_MAX];
    int64_t next_note = start + bs->progress_ms;
    while (j->joined < bs->size - 1) {
        int64_t now = gw__now_ms();
        if (now >= deadline) {
            gw__bs_strangers_summary(j, now, 1);
            return join_timeout(j, now - start);
        }
        if (now >= next_note) {
            join_progress(j, start, now, deadline);
            next_note = now + (int64_t)bs->progress_ms * GW_BS_PROGRESS_EVERY_FACTOR;
        }
        int64_t wake = deadline < next_note ? deadline : next_note;
        if (j->accept_paused_until && j->accept_paused_until < wake)
            wake = j->accept_paused_until;
        if (gw__bs_table_next_deadline(j) < wake)
            wake = gw__bs_table_next_deadline(j);
        if (gw__bs_strangers_summary_due(j) < wake)
            wake = gw__bs_strangers_summary_due(j);
        int n = epoll_wait(j->ep, evs, EVENTS_MAX, gw__sock_remaining_ms(wake));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            GW_ERROR(bs->log, GW_BS_SUBSYS, "epoll_wait on the root connections failed: %m");
            return GW_ERR_SYSTEM;
        }
        int listener = 0;
        for (int k = 0; k < n; k++) {
            if (evs[k].data.ptr)
                gw__bs_conn_event(j, evs[k].data.ptr);
            else
                listener = 1;
        }
        if (j->fatal != GW_OK)
            return j->fatal;
        /* After the events: a rank whose HELLO was just read is no longer
         * among the silent connections when the new ones need room. */
        now = gw__now_ms();
        if (listener || (j->accept_paused_until && now >= j->accept_paused_until))
            gw__bs_table_accept(j);
        if (j->fatal != GW_OK)
            return j->fatal;
        now = gw__now_ms();
        gw__bs_table_expire(j, now);
        gw__bs_table_free_dead(j);
        gw__bs_strangers_summary(j, now, 0);
    }
    gw__bs_strangers_summary(j, gw__now_ms(), 1);
    return GW_OK;
}

/* Every rank is in: stop listening, send the welcomes. The unfinished
 * handshakes left are closed after them (gw__bs_table_cleanup): closing
 * thousands of strangers' sockets takes a while, and the ranks need not
 * wait for it. */
static gw_status_t root_welcome(join_t *j, int64_t deadline)
{
    gw_bootstrap_t *bs = j->bs;
    /* The listener stays open: the referee answers processes that arrive
     * now (bootstrap_late.c) instead of leaving them to time out. */
    bs->late_lfd = j->lfd;
    j->lfd = -1;
    for (int r = 1; r < bs->size; r++) {
        conn_t *c = j->by_rank[r];
        uint8_t msg[GW_BS_WELCOME_LEN];
        gw__bs_encode_welcome(bs->job_id, msg);
        gw_sock_io_t io;
        gw__sock_io_set(&io, msg, sizeof(msg), NULL, 0);
        int rc = gw__sock_io_run(c->fd, &io, 1, deadline);
        if (rc == GW_SOCK_IO_DONE)
            continue;
        char reason[GW_BS_REASON_MAX + 1];
        if (rc == GW_SOCK_IO_TIMEOUT)
            snprintf(reason, sizeof(reason), "timed out sending the welcome to rank %d (%s)", r,
                     c->addr);
        else
            snprintf(reason, sizeof(reason), "rank %d (%s) failed before receiving the welcome: %m",
                     r, c->addr);
        GW_ERROR(bs->log, GW_BS_SUBSYS, "%s", reason);
        bs->culprit = r;
        gw_status_t st = rc == GW_SOCK_IO_TIMEOUT ? GW_ERR_TIMEOUT : GW_ERR_REMOTE;
        /* The others wait for their welcome: they learn why, and whom to
         * blame (a welcome already sent is followed by nothing else, so a
         * rank that has it sees its connection close). */
        for (int k = r + 1; k < bs->size; k++)
            gw__bs_send_verdict_nowait(j->by_rank[k]->fd, st, r, reason);
        return st;
    }
    return GW_OK;
}

gw_status_t gw__bs_root_open(gw_bootstrap_t *bs, const char *host, const char *port,
                             const uint8_t *key, size_t key_len, int64_t start, int64_t deadline)
{
    gw_status_t st = gw__bs_random_bytes(bs->log, bs->job_id, sizeof(bs->job_id));
    if (st != GW_OK)
        return st;
    join_t j;
    memset(&j, 0, sizeof(j));
    j.bs = bs;
    j.key = key;
    j.key_len = key_len;
    j.lfd = -1;
    j.ep = -1;
    j.fatal = GW_OK;
    j.handshake_ms = bs->timeout_ms / 2;
    if (j.handshake_ms > HANDSHAKE_MAX_MS)
        j.handshake_ms = HANDSHAKE_MAX_MS;
    if (j.handshake_ms < HANDSHAKE_MIN_MS)
        j.handshake_ms = HANDSHAKE_MIN_MS;
    gw__bs_table_init(&j);
    j.by_rank = calloc((size_t)bs->size, sizeof(*j.by_rank));
    bs->fds = malloc((size_t)bs->size * sizeof(*bs->fds));
    bs->peer_addr = calloc((size_t)bs->size, sizeof(*bs->peer_addr));
    if (!j.by_rank || !bs->fds || !bs->peer_addr) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "out of memory for %d ranks", bs->size);
        st = GW_ERR_NO_MEMORY;
        goto out_free;
    }
    for (int r = 0; r < bs->size; r++)
        bs->fds[r] = -1;
    j.ep = epoll_create1(EPOLL_CLOEXEC);
    if (j.ep < 0) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "epoll_create1 for the root connections: %m");
        st = GW_ERR_SYSTEM;
        goto out_free;
    }
    st = root_listen(bs, host, port, &j.lfd);
    if (st != GW_OK)
        goto out_free;
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(j.ep, EPOLL_CTL_ADD, j.lfd, &lev) != 0) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "epoll_ctl for the root socket %s: %m", bs->root);
        st = GW_ERR_SYSTEM;
        goto out_free;
    }
    st = root_join(&j, start, deadline);
    if (st == GW_OK)
        st = root_welcome(&j, deadline);
    if (st == GW_OK) {
        /* The joined connections now belong to the bootstrap. */
        for (int r = 1; r < bs->size; r++) {
            bs->fds[r] = j.by_rank[r]->fd;
            memcpy(bs->peer_addr[r], j.by_rank[r]->addr, GW_BS_ADDR_TEXT);
            j.by_rank[r]->fd = -1;
        }
        GW_INFO(bs->log, GW_BS_SUBSYS, "all %d ranks joined at %s", bs->size, bs->root);
    }
out_free:
    if (st != GW_OK && bs->culprit < 0)
        bs->culprit = 0; /* rank 0's own failure: it could not listen, or ran out of memory */
    if (j.lfd >= 0)
        close(j.lfd);
    /* The epoll set goes first: then closing each socket need not take it
     * out of the set. */
    if (j.ep >= 0)
        close(j.ep);
    j.ep = -1;
    gw__bs_table_cleanup(&j);
    for (int r = 1; j.by_rank && r < bs->size; r++) {
        conn_t *c = j.by_rank[r];
        if (!c)
            continue;
        if (c->fd >= 0)
            close(c->fd);
        free(c);
    }
    gw__bs_table_free_dead(&j);
    free(j.by_rank);
    return st;
}
