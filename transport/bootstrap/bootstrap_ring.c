/*
 * bootstrap_ring.c - one rank's part of the ring all-gather: its ring
 * listener, the connection it dials to its neighbour, the one it accepts
 * from the rank before it, and the blocks that go round (who drives it,
 * and how its outcome becomes one verdict, is bootstrap_ring_gather.c).
 *
 * How data moves. Rank r dials rank r + 1 (mod size) at the address rank 0
 * gave it and accepts rank r - 1 on its own listener. Block b of the
 * result is rank b's contribution. In step s (0 .. size - 2) rank r sends
 * block r - s to its next and receives block r - 1 - s from its previous
 * rank: what it receives in step s it sends on in step s + 1, so after
 * size - 1 steps every rank holds every block, and each rank, rank 0
 * included, has sent (size - 1) x len bytes. Each block travels as one
 * DATA message, so its length is checked on arrival.
 *
 * Who may connect. A ring connection is authenticated like the join
 * (bootstrap_msg.h): the dialler sends HELLO with its rank and a fresh
 * nonce, the listener answers CHALLENGE with its own nonce and its proof,
 * the dialler checks that proof before it answers with its own. Both
 * proofs are the join's (gw__bs_root_proof, gw__bs_rank_proof), keyed with
 * the job's ring key, HMAC(job token, "gradwire bootstrap ring" || job
 * id): only a process that knows the token can compute it, and a proof
 * made for one job admits to no other. The listener admits only the rank
 * before it, with the job's size. Anything else that connects (a stranger,
 * a wrong token, garbage, a connection that says nothing within the
 * handshake's time) is dropped with a WARN while the ring goes on; a few
 * such connections are held at once, the oldest dropped first to make
 * room. Once the rank before it is in, the listener closes.
 *
 * Failures name a neighbour. The next rank refusing the connection (its
 * listener is gone: it died), closing or breaking it names that rank; the
 * previous rank closing its connection, or sending a malformed block,
 * names it; when the deadline passes, the rank named is the one this rank
 * waits for (the next while its connection is not through, else the
 * previous). A next that dropped our connection before its challenge (its
 * table of unfinished handshakes was full of strangers) is dialled again.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/sha256.h"
#include "transport/bootstrap/bootstrap_internal.h"

/* Unfinished handshakes held on the listener at once. */
#define RING_PENDING 4
/* A connection has this long (at most half the timeout) to finish its
 * handshake on the listener; a neighbour needs milliseconds. */
#define SHAKE_MAX_MS 5000

typedef enum in_stage { IN_FREE, IN_HELLO, IN_CHALLENGE, IN_RESPONSE } in_stage_t;

typedef struct ring_in {
    int fd;
    in_stage_t stage;
    gw_sock_io_t io;
    uint8_t buf[GW_BS_CHALLENGE_LEN];
    uint8_t cn[GW_BS_NONCE_LEN], sn[GW_BS_NONCE_LEN];
    int64_t since, deadline;
    char addr[GW_BS_ADDR_TEXT];
} ring_in_t;

typedef enum out_stage {
    OUT_IDLE, /* waiting to dial (first, or again) */
    OUT_CONNECTING,
    OUT_HELLO,
    OUT_CHALLENGE,
    OUT_RESPONSE,
    OUT_DATA,
    OUT_DONE
} out_stage_t;

/* What a pollfd entry stands for. */
enum { P_LISTEN, P_OUT, P_IN, P_PENDING };

struct gw_bs_ring {
    gw_bootstrap_t *bs;
    int n, rank, next, prev;
    size_t len;
    uint8_t *all;
    int64_t deadline;
    int lfd;
    char laddr[GW_BS_ADDR_TEXT];
    /* towards the next rank */
    struct sockaddr_storage next_addr;
    socklen_t next_len;
    char next_text[GW_BS_ADDR_TEXT];
    int out_fd;
    out_stage_t out;
    gw_sock_io_t oio;
    uint8_t obuf[GW_BS_CHALLENGE_LEN];
    uint8_t ocn[GW_BS_NONCE_LEN];
    gw_sock_retry_t retry;
    int64_t redial_at;
    int sent; /* blocks whose sending started; the last one may be under way */
    int sending;
    uint8_t oprefix[GW_BS_DATA_PREFIX_LEN];
    /* from the previous rank */
    ring_in_t pend[RING_PENDING];
    int in_fd;
    gw_sock_io_t iio;
    uint8_t iprefix[GW_BS_DATA_PREFIX_LEN];
    int recvd;
    /* pollfd bookkeeping */
    int kind[GW_BS_RING_PFDS], slot[GW_BS_RING_PFDS];
    /* the outcome */
    int result; /* GW_BS_RING_BUSY, _DONE or _FAILED */
    gw_status_t status;
    int suspect;
    uint64_t bytes_sent;
};

static int ring_fail(gw_bs_ring_t *g, gw_status_t st, int suspect, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int ring_fail(gw_bs_ring_t *g, gw_status_t st, int suspect, const char *fmt, ...)
{
    char text[GW_BS_REASON_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    GW_ERROR(g->bs->log, GW_BS_SUBSYS, "ring all-gather: %s", text);
    g->result = GW_BS_RING_FAILED;
    g->status = st;
    g->suspect = suspect;
    return g->result;
}

static void in_drop(gw_bs_ring_t *g, ring_in_t *p, const char *why)
{
    GW_WARN(g->bs->log, GW_BS_SUBSYS,
            "ring listener %s: dropped connection from %s after %lld ms: %s (expected rank %d)",
            g->laddr, p->addr, (long long)(gw__now_ms() - p->since), why, g->prev);
    close(p->fd);
    p->fd = -1;
    p->stage = IN_FREE;
}

gw_status_t gw__bs_ring_listen(gw_bootstrap_t *bs, const struct sockaddr_storage *near,
                               socklen_t near_len, gw_bs_ring_t **out, uint32_t *port)
{
    gw_bs_ring_t *g = calloc(1, sizeof(*g));
    if (!g) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "out of memory for the ring all-gather");
        return GW_ERR_NO_MEMORY;
    }
    g->bs = bs;
    g->n = bs->size;
    g->rank = bs->rank;
    g->next = (bs->rank + 1) % bs->size;
    g->prev = (bs->rank + bs->size - 1) % bs->size;
    g->out_fd = g->in_fd = -1;
    for (int i = 0; i < RING_PENDING; i++)
        g->pend[i].fd = -1;
    g->result = GW_BS_RING_BUSY;
    g->suspect = -1;
    struct sockaddr_storage a = *near;
    if (a.ss_family == AF_INET)
        ((struct sockaddr_in *)&a)->sin_port = 0;
    else if (a.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&a)->sin6_port = 0;
    g->lfd = gw__sock_open(a.ss_family);
    socklen_t sl = sizeof(a);
    if (g->lfd < 0 || bind(g->lfd, (struct sockaddr *)&a, near_len) != 0 ||
        listen(g->lfd, 64) != 0 || getsockname(g->lfd, (struct sockaddr *)&a, &sl) != 0) {
        gw__sock_addr_str((const struct sockaddr *)near, g->laddr, sizeof(g->laddr));
        GW_ERROR(bs->log, GW_BS_SUBSYS, "cannot listen for the ring all-gather on %s: %m",
                 g->laddr);
        gw__bs_ring_close(g);
        return GW_ERR_SYSTEM;
    }
    gw__sock_addr_str((const struct sockaddr *)&a, g->laddr, sizeof(g->laddr));
    *port = a.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&a)->sin_port)
                                   : ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
    GW_INFO(bs->log, GW_BS_SUBSYS, "ring all-gather: rank %d listens on %s for rank %d", bs->rank,
            g->laddr, g->prev);
    *out = g;
    return GW_OK;
}

void gw__bs_ring_start(gw_bs_ring_t *g, const struct sockaddr_storage *next, socklen_t next_len,
                       size_t len, uint8_t *all, int64_t deadline)
{
    g->next_addr = *next;
    g->next_len = next_len;
    gw__sock_addr_str((const struct sockaddr *)next, g->next_text, sizeof(g->next_text));
    g->len = len;
    g->all = all;
    g->deadline = deadline;
    g->out = OUT_IDLE;
    g->redial_at = 0;
    gw__sock_retry_init(&g->retry);
    gw__bs_encode_data_prefix((uint32_t)len, g->oprefix);
    if (g->n < 2)
        g->result = GW_BS_RING_DONE;
}

/* ---- towards the next rank ------------------------------------------------ */

static void out_close(gw_bs_ring_t *g)
{
    if (g->out_fd >= 0)
        close(g->out_fd);
    g->out_fd = -1;
}

static int out_dial(gw_bs_ring_t *g)
{
    if (gw__bs_random_bytes(g->bs->log, g->ocn, sizeof(g->ocn)) != GW_OK)
        return ring_fail(g, GW_ERR_SYSTEM, g->rank, "no nonce for the handshake with rank %d",
                         g->next);
    g->out_fd = gw__sock_open(g->next_addr.ss_family);
    if (g->out_fd < 0)
        return ring_fail(g, GW_ERR_SYSTEM, g->rank, "socket() for rank %d: %m", g->next);
    int c = gw__sock_connect(g->out_fd, (struct sockaddr *)&g->next_addr, g->next_len);
    if (c == GW_SOCK_FAILED)
        return ring_fail(g, GW_ERR_REMOTE, g->next,
                         "rank %d (%s) refused our ring connection, so its ring listener is gone: "
                         "it probably died (%m)",
                         g->next, g->next_text);
    g->out = OUT_CONNECTING;
    if (c == GW_SOCK_CONNECTED)
        g->out = OUT_HELLO; /* the HELLO is set up below */
    return GW_BS_RING_BUSY;
}

static void out_hello(gw_bs_ring_t *g)
{
    (void)gw__sock_nodelay(g->out_fd);
    gw_bs_hello_t h = {.rank = g->rank, .size = g->n};
    memcpy(h.client_nonce, g->ocn, sizeof(h.client_nonce));
    gw__bs_encode_hello(&h, g->obuf);
    gw__sock_io_set(&g->oio, g->obuf, GW_BS_HELLO_LEN, NULL, 0);
    g->out = OUT_HELLO;
}

/* The next rank closed our connection before a byte of its challenge: it
 * dropped us unheard; dial again after a pause, until the deadline. */
static int out_redial(gw_bs_ring_t *g)
{
    out_close(g);
    int pause = gw__sock_retry_arm(&g->retry);
    GW_INFO(g->bs->log, GW_BS_SUBSYS,
            "ring all-gather: rank %d (%s) closed our connection before its challenge; dialling "
            "again in %d ms",
            g->next, g->next_text, pause);
    g->redial_at = gw__now_ms() + pause;
    g->out = OUT_IDLE;
    return GW_BS_RING_BUSY;
}

/* Set up the next block to send, when the one before it is through and
 * its data has arrived. */
static void out_next_block(gw_bs_ring_t *g)
{
    if (g->sending || g->sent >= g->n - 1 || (g->sent > 0 && g->recvd < g->sent))
        return;
    int b = ((g->rank - g->sent) % g->n + g->n) % g->n;
    gw__sock_io_set(&g->oio, g->oprefix, sizeof(g->oprefix),
                    g->len ? g->all + (size_t)b * g->len : NULL, g->len);
    g->sending = 1;
    g->sent++;
}

static int out_step(gw_bs_ring_t *g, short revents)
{
    if (g->out == OUT_CONNECTING) {
        int err = gw__sock_connect_result(g->out_fd, revents);
        if (err < 0)
            return GW_BS_RING_BUSY;
        if (err > 0) {
            errno = err;
            return ring_fail(g, GW_ERR_REMOTE, g->next,
                             "rank %d (%s) refused our ring connection, so its ring listener is "
                             "gone: it probably died (%m)",
                             g->next, g->next_text);
        }
        out_hello(g);
    }
    for (;;) {
        int writing = g->out != OUT_CHALLENGE;
        if (g->out == OUT_DATA && !g->sending) {
            out_next_block(g);
            if (!g->sending) {
                if (g->sent == g->n - 1) {
                    g->out = OUT_DONE;
                    out_close(g); /* the kernel still delivers what it holds */
                }
                return GW_BS_RING_BUSY;
            }
        }
        size_t before = g->oio.done;
        int io = gw__sock_io_step(g->out_fd, &g->oio, writing);
        if (writing)
            g->bytes_sent += g->oio.done - before;
        if (io == GW_SOCK_IO_AGAIN)
            return GW_BS_RING_BUSY;
        if (io != GW_SOCK_IO_DONE) {
            int unheard = g->out == OUT_CHALLENGE && g->oio.done == 0 &&
                          (io == GW_SOCK_IO_EOF || errno == ECONNRESET);
            if (unheard && gw__now_ms() < g->deadline)
                return out_redial(g);
            if (io == GW_SOCK_IO_EOF)
                return ring_fail(g, GW_ERR_REMOTE, g->next,
                                 "rank %d (%s) closed our ring connection (did it exit?)", g->next,
                                 g->next_text);
            return ring_fail(g, GW_ERR_REMOTE, g->next,
                             "the ring connection to rank %d (%s) failed: %m", g->next,
                             g->next_text);
        }
        if (g->out == OUT_HELLO) {
            g->out = OUT_CHALLENGE;
            gw__sock_io_set(&g->oio, g->obuf, GW_BS_CHALLENGE_LEN, NULL, 0);
        } else if (g->out == OUT_CHALLENGE) {
            gw_bs_challenge_t ch;
            const char *why = NULL;
            if (gw__bs_decode_challenge(g->obuf, GW_BS_CHALLENGE_LEN, &ch, &why) != GW_OK)
                return ring_fail(g, GW_ERR_PROTOCOL, g->next,
                                 "rank %d (%s) sent a malformed challenge: %s", g->next,
                                 g->next_text, why);
            uint8_t proof[GW_BS_PROOF_LEN];
            gw__bs_root_proof(g->bs->ring_key, sizeof(g->bs->ring_key), g->ocn, ch.server_nonce,
                              proof);
            if (!gw__ct_equal(proof, ch.root_proof, sizeof(proof)))
                return ring_fail(g, GW_ERR_AUTH, g->next,
                                 "the process at %s, given as rank %d's ring address, cannot prove "
                                 "the job token",
                                 g->next_text, g->next);
            gw__bs_rank_proof(g->bs->ring_key, sizeof(g->bs->ring_key), ch.server_nonce, g->ocn,
                              (uint32_t)g->rank, proof);
            gw__bs_encode_response(proof, g->obuf);
            gw__sock_io_set(&g->oio, g->obuf, GW_BS_RESPONSE_LEN, NULL, 0);
            g->out = OUT_RESPONSE;
        } else if (g->out == OUT_RESPONSE) {
            GW_TRACE(g->bs->log, GW_BS_SUBSYS, "ring all-gather: connected to rank %d (%s)",
                     g->next, g->next_text);
            g->out = OUT_DATA;
        } else { /* OUT_DATA: a block went */
            g->sending = 0;
        }
    }
}

/* ---- from the previous rank ------------------------------------------------- */

static int in_step(gw_bs_ring_t *g)
{
    for (;;) {
        int io = gw__sock_io_step(g->in_fd, &g->iio, 0);
        if (io == GW_SOCK_IO_AGAIN)
            return GW_BS_RING_BUSY;
        if (io == GW_SOCK_IO_EOF)
            return ring_fail(g, GW_ERR_REMOTE, g->prev,
                             "rank %d closed its ring connection after %d of %d blocks (did it "
                             "exit?)",
                             g->prev, g->recvd, g->n - 1);
        if (io != GW_SOCK_IO_DONE)
            return ring_fail(g, GW_ERR_REMOTE, g->prev,
                             "the ring connection from rank %d failed after %d of %d blocks: %m",
                             g->prev, g->recvd, g->n - 1);
        gw_bs_hdr_t h;
        uint32_t dl = 0;
        const char *why = NULL;
        if (gw__bs_decode_hdr(g->iprefix, GW_BS_HDR_LEN, &h, &why) != GW_OK ||
            h.type != GW_BS_DATA ||
            gw__bs_decode_data_prefix(g->iprefix, sizeof(g->iprefix), &dl, &why) != GW_OK ||
            dl != g->len)
            return ring_fail(g, GW_ERR_PROTOCOL, g->prev,
                             "rank %d sent a malformed block on the ring: %s", g->prev,
                             why ? why : "not a DATA message of the all-gather's length");
        g->recvd++;
        if (g->recvd == g->n - 1) {
            close(g->in_fd);
            g->in_fd = -1;
            return GW_BS_RING_BUSY;
        }
        int b = ((g->rank - 1 - g->recvd) % g->n + g->n) % g->n;
        gw__sock_io_set(&g->iio, g->iprefix, sizeof(g->iprefix),
                        g->len ? g->all + (size_t)b * g->len : NULL, g->len);
    }
}

static void in_admit(gw_bs_ring_t *g, ring_in_t *p)
{
    GW_TRACE(g->bs->log, GW_BS_SUBSYS, "ring all-gather: rank %d (%s) is in", g->prev, p->addr);
    g->in_fd = p->fd;
    p->fd = -1;
    p->stage = IN_FREE;
    for (int i = 0; i < RING_PENDING; i++)
        if (g->pend[i].stage != IN_FREE)
            in_drop(g, &g->pend[i], "the neighbour is in already");
    close(g->lfd);
    g->lfd = -1;
    int b = ((g->rank - 1) % g->n + g->n) % g->n;
    gw__sock_io_set(&g->iio, g->iprefix, sizeof(g->iprefix),
                    g->len ? g->all + (size_t)b * g->len : NULL, g->len);
}

/* Move one unfinished handshake on: HELLO in, CHALLENGE out, RESPONSE in. */
static void pending_step(gw_bs_ring_t *g, ring_in_t *p)
{
    for (;;) {
        int writing = p->stage == IN_CHALLENGE;
        size_t before = p->io.done;
        int io = gw__sock_io_step(p->fd, &p->io, writing);
        if (writing)
            g->bytes_sent += p->io.done - before;
        if (io == GW_SOCK_IO_AGAIN)
            return;
        if (io != GW_SOCK_IO_DONE) {
            in_drop(g, p, "it closed the connection during the handshake");
            return;
        }
        const char *why = NULL;
        char text[128];
        if (p->stage == IN_HELLO) {
            gw_bs_hello_t h;
            if (gw__bs_decode_hello(p->buf, GW_BS_HELLO_LEN, &h, &why) != GW_OK) {
                snprintf(text, sizeof(text), "malformed hello: %s", why);
                in_drop(g, p, text);
                return;
            }
            if (h.rank != g->prev || h.size != g->n) {
                snprintf(text, sizeof(text), "it claims rank %d of %d", (int)h.rank, (int)h.size);
                in_drop(g, p, text);
                return;
            }
            gw_bs_challenge_t ch;
            memcpy(p->cn, h.client_nonce, sizeof(p->cn));
            if (gw__bs_random_bytes(g->bs->log, p->sn, sizeof(p->sn)) != GW_OK) {
                in_drop(g, p, "no nonce");
                return;
            }
            memcpy(ch.server_nonce, p->sn, sizeof(p->sn));
            gw__bs_root_proof(g->bs->ring_key, sizeof(g->bs->ring_key), p->cn, p->sn,
                              ch.root_proof);
            gw__bs_encode_challenge(&ch, p->buf);
            gw__sock_io_set(&p->io, p->buf, GW_BS_CHALLENGE_LEN, NULL, 0);
            p->stage = IN_CHALLENGE;
        } else if (p->stage == IN_CHALLENGE) {
            gw__sock_io_set(&p->io, p->buf, GW_BS_RESPONSE_LEN, NULL, 0);
            p->stage = IN_RESPONSE;
        } else {
            uint8_t got[GW_BS_PROOF_LEN], want[GW_BS_PROOF_LEN];
            if (gw__bs_decode_response(p->buf, GW_BS_RESPONSE_LEN, got, &why) != GW_OK) {
                snprintf(text, sizeof(text), "malformed response: %s", why);
                in_drop(g, p, text);
                return;
            }
            gw__bs_rank_proof(g->bs->ring_key, sizeof(g->bs->ring_key), p->sn, p->cn,
                              (uint32_t)g->prev, want);
            if (!gw__ct_equal(got, want, sizeof(want))) {
                gw__bs_send_reject_nowait(p->fd, GW_ERR_AUTH, "wrong job token");
                in_drop(g, p, "its proof does not match the job token");
                return;
            }
            in_admit(g, p);
            return;
        }
    }
}

static void listener_accept(gw_bs_ring_t *g)
{
    for (;;) {
        char addr[GW_BS_ADDR_TEXT];
        int fd = gw__sock_accept(g->lfd, addr, sizeof(addr));
        if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
            /* The connection stays queued and the listener readable: were
             * we to wait, poll() would spin until the deadline. Make room
             * by dropping the oldest unfinished handshake (a stranger, or
             * a slow rank r - 1 that will dial again), else give up now:
             * this rank has no descriptor left for its neighbour. */
            ring_in_t *oldest = NULL;
            for (int i = 0; i < RING_PENDING; i++)
                if (g->pend[i].stage != IN_FREE && (!oldest || g->pend[i].since < oldest->since))
                    oldest = &g->pend[i];
            if (oldest) {
                in_drop(g, oldest, "out of file descriptors (the oldest handshake goes)");
                continue;
            }
            ring_fail(g, GW_ERR_SYSTEM, g->rank,
                      "accepting rank %d's ring connection: %m (raise the limit on open files, "
                      "ulimit -n)",
                      g->prev);
            return;
        }
        if (fd < 0)
            return; /* EAGAIN, or an error that the next accept may not have */
        ring_in_t *p = NULL, *oldest = NULL;
        for (int i = 0; i < RING_PENDING && !p; i++) {
            if (g->pend[i].stage == IN_FREE)
                p = &g->pend[i];
            else if (!oldest || g->pend[i].since < oldest->since)
                oldest = &g->pend[i];
        }
        if (!p) {
            in_drop(g, oldest, "too many unfinished handshakes (the oldest goes)");
            p = oldest;
        }
        int64_t now = gw__now_ms();
        int shake = g->bs->timeout_ms / 2 < SHAKE_MAX_MS ? g->bs->timeout_ms / 2 : SHAKE_MAX_MS;
        *p = (ring_in_t){.fd = fd, .stage = IN_HELLO, .since = now, .deadline = now + shake};
        snprintf(p->addr, sizeof(p->addr), "%s", addr);
        gw__sock_io_set(&p->io, p->buf, GW_BS_HELLO_LEN, NULL, 0);
    }
}

/* ---- the caller's poll loop --------------------------------------------------- */

int gw__bs_ring_pollfds(gw_bs_ring_t *g, struct pollfd *pfds)
{
    int n = 0;
    if (g->result != GW_BS_RING_BUSY)
        return 0;
    if (g->lfd >= 0) {
        pfds[n] = (struct pollfd){.fd = g->lfd, .events = POLLIN};
        g->kind[n++] = P_LISTEN;
    }
    for (int i = 0; i < RING_PENDING; i++) {
        ring_in_t *p = &g->pend[i];
        if (p->stage == IN_FREE)
            continue;
        pfds[n] =
            (struct pollfd){.fd = p->fd, .events = p->stage == IN_CHALLENGE ? POLLOUT : POLLIN};
        g->slot[n] = i;
        g->kind[n++] = P_PENDING;
    }
    if (g->out_fd >= 0) {
        short ev = g->out == OUT_CHALLENGE ? POLLIN : POLLOUT;
        if (g->out == OUT_DATA && !g->sending) {
            out_next_block(g);
            ev = g->sending ? POLLOUT : 0;
        }
        pfds[n] = (struct pollfd){.fd = g->out_fd, .events = ev};
        g->kind[n++] = P_OUT;
    }
    if (g->in_fd >= 0) {
        pfds[n] = (struct pollfd){.fd = g->in_fd, .events = POLLIN};
        g->kind[n++] = P_IN;
    }
    return n;
}

int gw__bs_ring_wait_ms(const gw_bs_ring_t *g)
{
    int64_t t = g->deadline;
    if (g->out == OUT_IDLE && g->redial_at < t)
        t = g->redial_at;
    for (int i = 0; i < RING_PENDING; i++)
        if (g->pend[i].stage != IN_FREE && g->pend[i].deadline < t)
            t = g->pend[i].deadline;
    return gw__sock_remaining_ms(t);
}

int gw__bs_ring_events(gw_bs_ring_t *g, const struct pollfd *pfds, int n)
{
    for (int i = 0; i < n && g->result == GW_BS_RING_BUSY; i++) {
        short re = pfds[i].revents;
        if (!re)
            continue;
        if (g->kind[i] == P_LISTEN && g->lfd >= 0)
            listener_accept(g);
        else if (g->kind[i] == P_PENDING && g->pend[g->slot[i]].stage != IN_FREE)
            pending_step(g, &g->pend[g->slot[i]]);
        else if (g->kind[i] == P_IN && g->in_fd >= 0)
            in_step(g);
        else if (g->kind[i] == P_OUT && g->out_fd >= 0) {
            if (g->out == OUT_DATA && !g->sending && (re & (POLLERR | POLLHUP)))
                ring_fail(g, GW_ERR_REMOTE, g->next,
                          "rank %d (%s) closed our ring connection after %d of %d blocks (did "
                          "it exit?)",
                          g->next, g->next_text, g->sent, g->n - 1);
            else
                out_step(g, re);
        }
    }
    if (g->result != GW_BS_RING_BUSY)
        return g->result;
    int64_t now = gw__now_ms();
    for (int i = 0; i < RING_PENDING; i++)
        if (g->pend[i].stage != IN_FREE && now >= g->pend[i].deadline)
            in_drop(g, &g->pend[i], "its handshake timed out");
    if (g->out == OUT_IDLE && now >= g->redial_at && out_dial(g) == GW_BS_RING_BUSY &&
        g->out == OUT_HELLO) {
        out_hello(g);
        out_step(g, 0);
    }
    if (g->result != GW_BS_RING_BUSY)
        return g->result;
    if (g->out == OUT_DATA && !g->sending && g->out_fd >= 0)
        out_step(g, 0); /* a block that arrived may go on now */
    if (g->result != GW_BS_RING_BUSY)
        return g->result;
    if (g->out == OUT_DONE && g->recvd == g->n - 1)
        return g->result = GW_BS_RING_DONE;
    if (now >= g->deadline) {
        if (g->out < OUT_DATA)
            return ring_fail(g, GW_ERR_TIMEOUT, g->next,
                             "timed out after %d ms connecting to rank %d (%s) (stopped or hung?)",
                             g->bs->timeout_ms, g->next, g->next_text);
        if (g->in_fd < 0 && g->recvd < g->n - 1)
            return ring_fail(g, GW_ERR_TIMEOUT, g->prev,
                             "timed out after %d ms: rank %d never connected to our ring "
                             "listener %s (stopped or hung?)",
                             g->bs->timeout_ms, g->prev, g->laddr);
        if (g->recvd < g->n - 1)
            return ring_fail(g, GW_ERR_TIMEOUT, g->prev,
                             "timed out after %d ms waiting for rank %d's block %d of %d "
                             "(stopped or hung?)",
                             g->bs->timeout_ms, g->prev, g->recvd + 1, g->n - 1);
        return ring_fail(g, GW_ERR_TIMEOUT, g->next,
                         "timed out after %d ms sending to rank %d (%s) (stopped or hung?)",
                         g->bs->timeout_ms, g->next, g->next_text);
    }
    return GW_BS_RING_BUSY;
}

gw_status_t gw__bs_ring_outcome(const gw_bs_ring_t *g, int *suspect)
{
    *suspect = g->suspect;
    return g->result == GW_BS_RING_DONE     ? GW_OK
           : g->result == GW_BS_RING_FAILED ? g->status
                                            : GW_ERR_ABORTED;
}

uint64_t gw__bs_ring_bytes_sent(const gw_bs_ring_t *g) { return g ? g->bytes_sent : 0; }

void gw__bs_ring_close(gw_bs_ring_t *g)
{
    if (!g)
        return;
    if (g->lfd >= 0)
        close(g->lfd);
    out_close(g);
    if (g->in_fd >= 0)
        close(g->in_fd);
    for (int i = 0; i < RING_PENDING; i++)
        if (g->pend[i].fd >= 0)
            close(g->pend[i].fd);
    free(g);
}
