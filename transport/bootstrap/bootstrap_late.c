/*
 * bootstrap_late.c - rank 0 answers processes that arrive after the job
 * formed (contract in bootstrap_internal.h; the referee's thread runs it,
 * bootstrap_referee.c).
 *
 * Why. Once every rank joined, the root's port has nothing left to admit.
 * Closing it made a surplus process (a fifth one started with GW_SIZE=4,
 * a rank started twice, a restarted rank of a job that went on) find the
 * port refused and retry until its own timeout, then fail naming nobody:
 * "could not connect to the root". So rank 0 keeps listening for as long
 * as the job runs and answers each HELLO at once with a REJECT that says
 * why: the job of N ranks has formed, so rank R is taken.
 *
 * Strangers. The referee's thread does this between its own work, so
 * nothing here may block or grow: at most LATE_MAX connections are held
 * at once (a new one pushes out the oldest), each for at most LATE_MS to
 * send its HELLO; at most LATE_ACCEPT_MAX are accepted per wake-up; bytes
 * that are not a HELLO close the connection. A flood of them costs the
 * referee an accept and a close each, and never a real rank's report,
 * which arrives on its own connection. The REJECT says only what a process
 * that reached the port learns anyway (that a job is there, its size): no
 * token is proven, nothing of the job's secrets goes out.
 *
 * Joiners. A process that sends JOIN instead of HELLO asks to join the
 * running job at its members' next grow (bootstrap_grow.c). It proves the
 * job token as a rank does at the join: CHALLENGE with rank 0's proof over
 * both nonces, then its RESPONSE, checked against the token; a wrong one
 * gets REJECT(AUTH) and a WARN line naming its address, and the job goes
 * on; a joiner that finds rank 0's proof wrong (it holds another token)
 * says so with a REJECT, logged the same way. A proven joiner is parked (at most GW_BS_LATE_JOINERS, never pushed
 * out by strangers) until the referee decides a grow and admits the parked
 * joiners with GROWN (their new ranks, after the members', the new size
 * and the new root's port). A parked joiner whose connection closes (it
 * gave up waiting, or died) is forgotten. The handshake's own messages are
 * sent without blocking: they are small, and a fresh connection's buffer
 * holds them.
 *
 * Status queries. `gradwire status` sends STATUS_ASK (a nonce, as JOIN)
 * and proves the job token the same way, for another rank number
 * (GW_BS_STATUS_RANK: a join proof is no status proof); a proven asker
 * gets one STATUS, every rank's latest news as the referee holds it
 * (bootstrap_referee.c), and the connection closes; a wrong proof gets
 * REJECT(AUTH), a WARN line, and nothing of the job. Nothing here waits
 * for a rank: the news is what the ranks sent on their own (PULSE), so a
 * query never slows the job.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/sha256.h"
#include "transport/bootstrap/bootstrap_internal.h"

#define LATE_MAX (GW_BS_LATE_PFDS - 1 - GW_BS_LATE_JOINERS)
#define LATE_MS 1000
#define LATE_ACCEPT_MAX 64

typedef struct late_conn {
    int fd; /* -1: free */
    int64_t deadline;
    size_t got;
    int challenged;                    /* a joiner that has its CHALLENGE: its RESPONSE is next */
    int asks_status;                   /* it sent STATUS_ASK, not JOIN (`gradwire status`) */
    uint8_t buf[GW_BS_REJECT_MAX_LEN]; /* a HELLO, JOIN, RESPONSE or REJECT */
    uint8_t client_nonce[GW_BS_NONCE_LEN], server_nonce[GW_BS_NONCE_LEN];
    char addr[GW_BS_ADDR_TEXT];
} late_conn_t;

typedef struct joiner {
    int fd; /* -1: free */
    int64_t since;
    char addr[GW_BS_ADDR_TEXT];
} joiner_t;

struct gw_bs_late {
    const gw_logger_t *log;
    int lfd;
    int size;
    char root[GW_BS_ROOT_TEXT];
    char *token; /* the job token, for joiners' proofs */
    late_conn_t conns[LATE_MAX];
    joiner_t joiners[GW_BS_LATE_JOINERS];
    gw_bs_status_fn status; /* the referee's STATUS builder, for the events at hand */
    void *status_ctx;
};

gw_bs_late_t *gw__bs_late_open(gw_bootstrap_t *bs)
{
    gw_bs_late_t *l = gw__bs_late_open_on(bs, bs->late_lfd);
    if (l)
        bs->late_lfd = -1;
    return l;
}

gw_bs_late_t *gw__bs_late_open_on(gw_bootstrap_t *bs, int lfd)
{
    if (lfd < 0)
        return NULL;
    gw_bs_late_t *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL; /* then late processes find the port closed, as before */
    l->log = bs->log;
    l->lfd = lfd;
    l->size = bs->size;
    memcpy(l->root, bs->root, sizeof(l->root));
    l->token = strdup(bs->token ? bs->token : "");
    for (int i = 0; i < LATE_MAX; i++)
        l->conns[i].fd = -1;
    for (int i = 0; i < GW_BS_LATE_JOINERS; i++)
        l->joiners[i].fd = -1;
    if (!l->token) {
        free(l);
        return NULL;
    }
    return l;
}

void gw__bs_late_set_size(gw_bs_late_t *l, int size)
{
    if (l)
        l->size = size;
}

void gw__bs_late_close(gw_bs_late_t *l)
{
    if (!l)
        return;
    for (int i = 0; i < LATE_MAX; i++)
        if (l->conns[i].fd >= 0)
            close(l->conns[i].fd);
    for (int i = 0; i < GW_BS_LATE_JOINERS; i++)
        if (l->joiners[i].fd >= 0)
            close(l->joiners[i].fd);
    close(l->lfd);
    explicit_bzero(l->token, strlen(l->token));
    free(l->token);
    free(l);
}

int gw__bs_late_pollfds(gw_bs_late_t *l, struct pollfd *pfds)
{
    if (!l)
        return 0;
    int n = 0;
    pfds[n++] = (struct pollfd){.fd = l->lfd, .events = POLLIN};
    for (int i = 0; i < LATE_MAX; i++)
        pfds[n++] = (struct pollfd){.fd = l->conns[i].fd, .events = POLLIN}; /* -1: ignored */
    for (int i = 0; i < GW_BS_LATE_JOINERS; i++)
        pfds[n++] = (struct pollfd){.fd = l->joiners[i].fd, .events = POLLIN};
    return n;
}

int64_t gw__bs_late_deadline(const gw_bs_late_t *l)
{
    int64_t first = INT64_MAX;
    for (int i = 0; l && i < LATE_MAX; i++)
        if (l->conns[i].fd >= 0 && l->conns[i].deadline < first)
            first = l->conns[i].deadline;
    return first;
}

static void conn_drop(late_conn_t *c)
{
    close(c->fd);
    c->fd = -1;
}

/* A joiner's JOIN (or an asker's STATUS_ASK) is whole in c->buf:
 * challenge it. */
static void joiner_challenge(gw_bs_late_t *l, late_conn_t *c)
{
    if ((c->asks_status ? gw__bs_decode_status_ask(c->buf, c->got, c->client_nonce, NULL)
                        : gw__bs_decode_join(c->buf, c->got, c->client_nonce, NULL)) != GW_OK ||
        gw__bs_random_bytes(l->log, c->server_nonce, sizeof(c->server_nonce)) != GW_OK) {
        conn_drop(c);
        return;
    }
    gw_bs_challenge_t ch;
    memcpy(ch.server_nonce, c->server_nonce, sizeof(ch.server_nonce));
    gw__bs_root_proof(l->token, strlen(l->token), c->client_nonce, c->server_nonce, ch.root_proof);
    uint8_t msg[GW_BS_CHALLENGE_LEN];
    gw__bs_encode_challenge(&ch, msg);
    if (send(c->fd, msg, sizeof(msg), MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(msg)) {
        conn_drop(c);
        return;
    }
    c->challenged = 1;
    c->got = 0;
    c->deadline = gw__now_ms() + LATE_MS;
}

/* A proven asker gets the STATUS and the connection closes. The answer
 * is small (a few hundred bytes a rank) and a fresh connection's buffer
 * takes it; what does not go out at once gets STATUS_SEND_MS, so the
 * referee is never held longer than that. */
#define STATUS_SEND_MS 200
static void answer_status(gw_bs_late_t *l, late_conn_t *c)
{
    size_t len = 0;
    uint8_t *msg = l->status ? l->status(l->status_ctx, &len) : NULL;
    if (!msg) {
        gw__bs_send_reject_nowait(c->fd, GW_ERR_NO_MEMORY, "rank 0 has no memory for a status");
        conn_drop(c);
        return;
    }
    gw_sock_io_t io;
    gw__sock_io_set(&io, msg, len, NULL, 0);
    if (gw__sock_io_run(c->fd, &io, 1, gw__now_ms() + STATUS_SEND_MS) != GW_SOCK_IO_DONE)
        GW_INFO(l->log, GW_BS_SUBSYS, "a status for %s did not go out whole", c->addr);
    else
        GW_TRACE(l->log, GW_BS_SUBSYS, "answered a status query from %s (%zu bytes)", c->addr, len);
    free(msg);
    conn_drop(c);
}

/* A joiner's (or asker's) RESPONSE is whole in c->buf: park the joiner,
 * answer the asker, or refuse either. */
static void joiner_check(gw_bs_late_t *l, late_conn_t *c)
{
    uint8_t got[GW_BS_PROOF_LEN], want[GW_BS_PROOF_LEN];
    if (gw__bs_decode_response(c->buf, c->got, got, NULL) != GW_OK) {
        conn_drop(c);
        return;
    }
    gw__bs_rank_proof(l->token, strlen(l->token), c->server_nonce, c->client_nonce,
                      c->asks_status ? GW_BS_STATUS_RANK : GW_BS_JOINER_RANK, want);
    if (!gw__ct_equal(got, want, sizeof(want)) && c->asks_status) {
        GW_WARN(l->log, GW_BS_SUBSYS,
                "refused a status query from %s: its proof does not match the job token", c->addr);
        gw__bs_send_reject_nowait(c->fd, GW_ERR_AUTH,
                                  "wrong job token: rank 0 cannot verify this query's proof");
        conn_drop(c);
        return;
    }
    if (c->asks_status) {
        answer_status(l, c);
        return;
    }
    if (!gw__ct_equal(got, want, sizeof(want))) {
        GW_WARN(l->log, GW_BS_SUBSYS,
                "refused a process from %s asking to join the job: its proof does not match "
                "the job token (is its GW_JOB_TOKEN the job's?); the job goes on",
                c->addr);
        gw__bs_send_reject_nowait(c->fd, GW_ERR_AUTH,
                                  "wrong job token: rank 0 cannot verify this joiner's proof");
        conn_drop(c);
        return;
    }
    joiner_t *slot = NULL;
    for (int i = 0; i < GW_BS_LATE_JOINERS && !slot; i++)
        if (l->joiners[i].fd < 0)
            slot = &l->joiners[i];
    if (!slot) {
        GW_WARN(l->log, GW_BS_SUBSYS,
                "refused a process from %s asking to join the job: %d joiners wait already",
                c->addr, GW_BS_LATE_JOINERS);
        gw__bs_send_reject_nowait(c->fd, GW_ERR_CONFIG,
                                  "too many processes wait to join this job already");
        conn_drop(c);
        return;
    }
    slot->fd = c->fd;
    slot->since = gw__now_ms();
    memcpy(slot->addr, c->addr, sizeof(slot->addr));
    c->fd = -1;
    GW_INFO(l->log, GW_BS_SUBSYS,
            "a process from %s proved the job token and waits to join at the next grow",
            slot->addr);
}

/* A joiner that could not verify rank 0's proof says so (REJECT) instead
 * of proving itself: another job token, seen from its side. */
static void joiner_gave_up(gw_bs_late_t *l, late_conn_t *c)
{
    gw_bs_reject_t rej;
    if (gw__bs_decode_reject(c->buf, c->got, &rej, NULL) == GW_OK)
        GW_WARN(l->log, GW_BS_SUBSYS,
                "refused a process from %s asking %s: it holds another job token (it could not "
                "verify rank 0's proof: %s); the job goes on",
                c->addr, c->asks_status ? "for the job's status" : "to join the job", rej.reason);
    conn_drop(c);
}

static void reject_late_hello(gw_bs_late_t *l, late_conn_t *c)
{
    gw_bs_hello_t hello;
    if (gw__bs_decode_hello(c->buf, c->got, &hello, NULL) != GW_OK) {
        conn_drop(c);
        return;
    }
    char reason[GW_BS_REASON_MAX + 1];
    if (hello.rank >= 0 && hello.rank < l->size)
        snprintf(reason, sizeof(reason),
                 "the job of %d ranks at %.100s has formed: rank %d is taken (a process started "
                 "twice, or one too many?)",
                 l->size, l->root, (int)hello.rank);
    else
        snprintf(reason, sizeof(reason),
                 "the job of %d ranks at %.100s has formed: it has no rank %d and admits no one",
                 l->size, l->root, (int)hello.rank);
    GW_WARN(l->log, GW_BS_SUBSYS, "rejected a process from %s claiming rank %d of %d: %s", c->addr,
            (int)hello.rank, (int)hello.size, reason);
    /* Its HELLO is read whole, so closing sends a FIN after the REJECT,
     * not a reset that could discard it. */
    gw__bs_send_reject_nowait(c->fd, GW_ERR_CONFIG, reason);
    conn_drop(c);
}

static void conn_read(gw_bs_late_t *l, late_conn_t *c)
{
    /* Read no further than the message at hand: a joiner's next one comes
     * after our answer. */
    size_t want = GW_BS_HDR_LEN;
    gw_bs_hdr_t h;
    if (c->got >= GW_BS_HDR_LEN) {
        if (gw__bs_decode_hdr(c->buf, GW_BS_HDR_LEN, &h, NULL) != GW_OK ||
            GW_BS_HDR_LEN + h.payload_len > sizeof(c->buf)) {
            conn_drop(c); /* not one of ours (a DATA header could claim 256 MiB) */
            return;
        }
        want = GW_BS_HDR_LEN + h.payload_len;
    }
    ssize_t n = recv(c->fd, c->buf + c->got, want - c->got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        conn_drop(c);
        return;
    }
    c->got += (size_t)n;
    if (c->got < GW_BS_HDR_LEN)
        return;
    gw_bs_type_t expect = c->challenged ? GW_BS_RESPONSE : GW_BS_HELLO;
    if (gw__bs_decode_hdr(c->buf, GW_BS_HDR_LEN, &h, NULL) != GW_OK ||
        (h.type != expect && !(h.type == GW_BS_JOIN && !c->challenged) &&
         !(h.type == GW_BS_STATUS_ASK && !c->challenged) &&
         !(h.type == GW_BS_REJECT && c->challenged)) ||
        GW_BS_HDR_LEN + h.payload_len > sizeof(c->buf)) {
        conn_drop(c); /* not one of ours */
        return;
    }
    if (c->got < GW_BS_HDR_LEN + h.payload_len)
        return;
    if (h.type == GW_BS_REJECT)
        joiner_gave_up(l, c);
    else if (h.type == GW_BS_HELLO)
        reject_late_hello(l, c);
    else if (h.type == GW_BS_JOIN || h.type == GW_BS_STATUS_ASK) {
        c->asks_status = h.type == GW_BS_STATUS_ASK;
        joiner_challenge(l, c);
    } else
        joiner_check(l, c);
}

int gw__bs_late_joiners(const gw_bs_late_t *l)
{
    int n = 0;
    for (int i = 0; l && i < GW_BS_LATE_JOINERS; i++)
        n += l->joiners[i].fd >= 0;
    return n;
}

int gw__bs_late_admit(gw_bs_late_t *l, int first_rank, int new_size, uint32_t port)
{
    int rank = first_rank;
    for (int i = 0; l && i < GW_BS_LATE_JOINERS; i++) {
        joiner_t *j = &l->joiners[i];
        if (j->fd < 0)
            continue;
        gw_bs_members_t m = {
            .status = GW_OK, .new_rank = rank, .new_size = (uint32_t)new_size, .port = port};
        uint8_t msg[GW_BS_GROWN_LEN];
        gw__bs_encode_grown(&m, msg);
        if (send(j->fd, msg, sizeof(msg), MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(msg))
            GW_WARN(l->log, GW_BS_SUBSYS,
                    "the joiner from %s did not take its place (rank %d of %d): %m; the grown "
                    "communicator will not form without it",
                    j->addr, rank, new_size);
        GW_INFO(l->log, GW_BS_SUBSYS, "the joiner from %s joins as rank %d of %d", j->addr, rank,
                new_size);
        close(j->fd);
        j->fd = -1;
        rank++;
    }
    return rank - first_rank;
}

static void accept_some(gw_bs_late_t *l)
{
    for (int k = 0; k < LATE_ACCEPT_MAX; k++) {
        char addr[GW_BS_ADDR_TEXT];
        int fd = gw__sock_accept(l->lfd, addr, sizeof(addr));
        if (fd < 0)
            return; /* none waiting, or an error the next wake-up retries */
        late_conn_t *slot = NULL;
        for (int i = 0; i < LATE_MAX && !slot; i++)
            if (l->conns[i].fd < 0)
                slot = &l->conns[i];
        if (!slot) { /* the oldest makes room */
            slot = &l->conns[0];
            for (int i = 1; i < LATE_MAX; i++)
                if (l->conns[i].deadline < slot->deadline)
                    slot = &l->conns[i];
        }
        if (slot->fd >= 0)
            conn_drop(slot);
        slot->fd = fd;
        slot->got = 0;
        slot->challenged = 0;
        slot->asks_status = 0;
        slot->deadline = gw__now_ms() + LATE_MS;
        memcpy(slot->addr, addr, sizeof(addr));
    }
}

void gw__bs_late_events(gw_bs_late_t *l, const struct pollfd *pfds, gw_bs_status_fn status,
                        void *ctx)
{
    if (!l)
        return;
    l->status = status;
    l->status_ctx = ctx;
    for (int i = 0; i < LATE_MAX; i++)
        if (l->conns[i].fd >= 0 && pfds[1 + i].fd == l->conns[i].fd && pfds[1 + i].revents)
            conn_read(l, &l->conns[i]);
    for (int i = 0; i < GW_BS_LATE_JOINERS; i++) {
        joiner_t *j = &l->joiners[i];
        if (j->fd < 0 || pfds[1 + LATE_MAX + i].fd != j->fd || !pfds[1 + LATE_MAX + i].revents)
            continue;
        /* A parked joiner sends nothing more: readable means it left. */
        GW_INFO(l->log, GW_BS_SUBSYS, "the joiner from %s left after waiting %lld ms", j->addr,
                (long long)(gw__now_ms() - j->since));
        close(j->fd);
        j->fd = -1;
    }
    if (pfds[0].revents)
        accept_some(l);
    int64_t now = gw__now_ms();
    for (int i = 0; i < LATE_MAX; i++)
        if (l->conns[i].fd >= 0 && now >= l->conns[i].deadline)
            conn_drop(&l->conns[i]);
}
