/*
 * bootstrap_heir_lead.c - the heir's side of a succession (the survivors'
 * side, and why there is one, is bootstrap_heir.c): the lowest surviving
 * rank takes the survivors' requests on its heir listener, decides who goes
 * on, and then answers the late ones for as long as the old communicator
 * lives.
 *
 * Deciding. The heir runs the shrink's decision (gw_bs_shrink_t,
 * bootstrap_shrink.c) with itself in rank 0's place: the first request is
 * its own, with the port it reserved on its host for the new root; the
 * ranks before it are gone (dead, or silent when the survivors tried them
 * in turn); a survivor that proved the token and asked is counted; one
 * whose connection closes after it asked is gone. It decides as soon as
 * every rank has asked or is gone, at the latest when the window ends.
 *
 * A majority of what it cannot account for. A rank that neither asked nor
 * is known to be gone may be stopped or hung, or may be a survivor that
 * chose another heir: a rank stopped across the succession that wakes
 * after it, finds the ranks before it gone, and leads alone. Two groups
 * would then go on as one job. So before the heir goes on it dials the
 * heir listener of every such rank: a refused connection is a rank that
 * is gone (its process closed the listener), one that connects is alive
 * somewhere. The group goes on only when its members outnumber the ranks
 * alive elsewhere; otherwise every member gets GW_ERR_ABORTED, saying so.
 * Two groups can never both outnumber what the other holds.
 *
 * Late askers. Once decided, the heir answers every later request on its
 * heir listener with MEMBERS(GW_ERR_ABORTED): left out. A thread of the
 * old bootstrap does it (the answerer), after the same handshake, until
 * that bootstrap is closed: so a rank that was only slow learns that the
 * others went on, as a shrink through rank 0's referee tells it, instead
 * of leading a group of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/sha256.h"
#include "transport/bootstrap/bootstrap_internal.h"

/* A request's handshake must be through within this (a survivor needs
 * milliseconds); strangers are dropped after it. */
#define SHAKE_MS 5000
/* How long the majority's probe of a rank's heir listener may take. */
#define PROBE_MS 1000

typedef enum { ASK_FREE, ASK_HELLO, ASK_RESPONSE, ASK_ASKED } ask_stage_t;

typedef struct asker {
    int fd;
    ask_stage_t stage;
    int rank;
    int64_t until;
    size_t got;
    uint8_t buf[GW_BS_HELLO_LEN];
    uint8_t cn[GW_BS_NONCE_LEN], sn[GW_BS_NONCE_LEN];
    char addr[GW_BS_ADDR_TEXT];
} asker_t;

struct gw_bs_answerer {
    pthread_t thread;
    int stop[2]; /* a byte on stop[1] ends the thread */
    int lfd;
    const gw_logger_t *log;
    uint8_t key[32];
    int size;
};

static void drop(asker_t *a)
{
    if (a->fd >= 0)
        close(a->fd);
    memset(a, 0, sizeof(*a));
    a->fd = -1;
}

/* The challenge for a HELLO that came whole: this job's size, a rank after
 * the heir's that has not asked yet. */
static void on_hello(gw_bootstrap_t *bs, asker_t *a, asker_t *all, int n)
{
    gw_bs_hello_t h;
    if (gw__bs_decode_hello(a->buf, GW_BS_HELLO_LEN, &h, NULL) != GW_OK || h.size != bs->size ||
        h.rank <= bs->rank || h.rank >= bs->size) {
        GW_WARN(bs->log, GW_BS_SUBSYS,
                "succession: dropped a connection from %s: not a survivor of this job", a->addr);
        drop(a);
        return;
    }
    for (int i = 0; i < n; i++)
        if (&all[i] != a && all[i].stage == ASK_ASKED && all[i].rank == h.rank) {
            GW_WARN(bs->log, GW_BS_SUBSYS,
                    "succession: dropped a second request for rank %d (from %s)", h.rank, a->addr);
            drop(a);
            return;
        }
    a->rank = h.rank;
    memcpy(a->cn, h.client_nonce, sizeof(a->cn));
    gw_bs_challenge_t ch;
    if (gw__bs_random_bytes(bs->log, a->sn, sizeof(a->sn)) != GW_OK) {
        drop(a);
        return;
    }
    memcpy(ch.server_nonce, a->sn, sizeof(a->sn));
    gw__bs_root_proof(bs->heir_key, sizeof(bs->heir_key), a->cn, a->sn, ch.root_proof);
    uint8_t msg[GW_BS_CHALLENGE_LEN];
    gw__bs_encode_challenge(&ch, msg);
    size_t done = 0;
    if (gw__sock_io_buf(a->fd, msg, sizeof(msg), &done, 1) != GW_SOCK_IO_DONE) {
        drop(a); /* a fresh connection's buffer holds 76 bytes: it is gone */
        return;
    }
    a->stage = ASK_RESPONSE;
    a->got = 0;
}

/* The RESPONSE came whole: the rank's proof, or the connection goes. */
static void on_response(gw_bootstrap_t *bs, asker_t *a, gw_bs_shrink_t *sh, int64_t now)
{
    uint8_t proof[GW_BS_PROOF_LEN], want[GW_BS_PROOF_LEN];
    if (gw__bs_decode_response(a->buf, GW_BS_RESPONSE_LEN, proof, NULL) != GW_OK) {
        drop(a);
        return;
    }
    gw__bs_rank_proof(bs->heir_key, sizeof(bs->heir_key), a->sn, a->cn, (uint32_t)a->rank, want);
    if (!gw__ct_equal(proof, want, sizeof(want))) {
        GW_WARN(bs->log, GW_BS_SUBSYS,
                "succession: %s claimed rank %d but cannot prove the job token: dropped", a->addr,
                a->rank);
        gw__bs_send_reject_nowait(a->fd, GW_ERR_AUTH, "wrong job token");
        drop(a);
        return;
    }
    gw_bs_shrink_req_t req = {.port = 0, .window_ms = 0};
    gw__bs_shrink_request(sh, a->rank, &req, now);
    a->stage = ASK_ASKED;
}

/* Move one connection on: readable, or its time is up. */
static void step(gw_bootstrap_t *bs, asker_t *a, asker_t *all, int n, gw_bs_shrink_t *sh,
                 unsigned char *gone, short revents, int64_t now)
{
    if (a->stage == ASK_ASKED) {
        if (revents & (POLLIN | POLLHUP | POLLERR)) {
            GW_WARN(bs->log, GW_BS_SUBSYS, "succession: rank %d asked, then went away", a->rank);
            gone[a->rank] = 1;
            drop(a);
        }
        return;
    }
    if (now >= a->until) {
        GW_WARN(bs->log, GW_BS_SUBSYS, "succession: dropped %s: it did not finish its request",
                a->addr);
        drop(a);
        return;
    }
    if (!revents)
        return;
    size_t want = a->stage == ASK_HELLO ? GW_BS_HELLO_LEN : GW_BS_RESPONSE_LEN;
    int r = gw__sock_io_buf(a->fd, a->buf, want, &a->got, 0);
    if (r == GW_SOCK_IO_AGAIN)
        return;
    if (r != GW_SOCK_IO_DONE) {
        drop(a);
        return;
    }
    if (a->stage == ASK_HELLO)
        on_hello(bs, a, all, n);
    else
        on_response(bs, a, sh, now);
}

/* Take what waits on the heir listener. When every place is taken, the
 * oldest unfinished handshake makes room (strangers that connect and say
 * nothing cannot keep the survivors out); a survivor that asked keeps its
 * place. */
static void accept_some(gw_bootstrap_t *bs, asker_t *all, int n, int64_t now)
{
    for (;;) {
        asker_t *slot = NULL, *oldest = NULL;
        for (int i = 0; i < n && !slot; i++) {
            if (all[i].fd < 0)
                slot = &all[i];
            else if (all[i].stage != ASK_ASKED && (!oldest || all[i].until < oldest->until))
                oldest = &all[i];
        }
        char addr[GW_BS_ADDR_TEXT];
        int fd = gw__sock_accept(bs->heir_lfd, addr, sizeof(addr));
        if (fd < 0)
            return;
        if (!slot && oldest) {
            GW_WARN(bs->log, GW_BS_SUBSYS,
                    "succession: dropped %s to make room: it did not finish its request",
                    oldest->addr);
            drop(oldest);
            slot = oldest;
        }
        if (!slot) {
            close(fd);
            continue;
        }
        slot->fd = fd;
        slot->stage = ASK_HELLO;
        slot->until = now + SHAKE_MS;
        slot->got = 0;
        memcpy(slot->addr, addr, sizeof(addr));
    }
}

/* The members must outnumber the ranks alive elsewhere (see the top). */
static int majority(gw_bootstrap_t *bs, const gw_bs_shrink_t *sh, unsigned char *gone,
                    const asker_t *all, int n)
{
    int members = 1, elsewhere = 0; /* the heir itself */
    for (int i = 0; i < n; i++)
        members += all[i].stage == ASK_ASKED;
    for (int r = 1; r < bs->size; r++) {
        if (r == bs->rank || gw__bs_shrink_asked(sh, r))
            continue;
        struct sockaddr_storage sa;
        socklen_t sl;
        int refused = 0;
        if (gw__bs_heir_addr(bs, r, &sa, &sl, NULL, 0) == 0) {
            int fd = gw__bs_heir_dial(&sa, sl, gw__now_ms() + PROBE_MS, &refused);
            if (fd >= 0)
                close(fd);
        }
        if (refused)
            gone[r] = 1;
        else
            elsewhere++;
    }
    if (members > elsewhere)
        return 1;
    GW_ERROR(bs->log, GW_BS_SUBSYS,
             "succession: %d survivor(s) asked, and %d rank(s) that did not ask are alive: they "
             "may have gone on without this group, so it does not go on",
             members, elsewhere);
    return 0;
}

gw_status_t gw__bs_heir_lead(gw_bootstrap_t *bs, unsigned char *gone, int window_ms, char *root,
                             size_t root_cap, gw_bs_members_t *out)
{
    char host[NI_MAXHOST];
    struct sockaddr_storage self;
    socklen_t sl;
    if (gw__bs_heir_addr(bs, bs->rank, &self, &sl, NULL, 0) != 0 || bs->heir_lfd < 0)
        return GW_ERR_UNSUPPORTED;
    gw__bs_heir_host(&self, sl, host, sizeof(host));
    gw_bs_shrink_req_t req = {.window_ms = (uint32_t)window_ms};
    gw_status_t st = gw__bs_reserve_port(bs, host, &req.port);
    if (st != GW_OK)
        return st;
    gw_bs_shrink_t *sh = gw__bs_shrink_new(bs->log, bs->size);
    int n = bs->size + 4; /* every survivor, and a few strangers at once */
    asker_t *all = calloc((size_t)n, sizeof(*all));
    struct pollfd *pfds = calloc((size_t)n + 1, sizeof(*pfds));
    if (!sh || !all || !pfds) {
        gw__bs_shrink_free(sh);
        free(all);
        free(pfds);
        return GW_ERR_NO_MEMORY;
    }
    for (int i = 0; i < n; i++)
        all[i].fd = -1;
    gw__bs_shrink_lead(sh, bs->rank);
    GW_WARN(bs->log, GW_BS_SUBSYS,
            "succession: rank 0 is gone and the ranks before this one too: rank %d leads the "
            "survivors; they have %d ms to ask",
            bs->rank, window_ms);
    gw__bs_shrink_request(sh, bs->rank, &req, gw__now_ms());
    while (!gw__bs_shrink_decide(sh, gone, gw__now_ms())) {
        int64_t now = gw__now_ms(), wake = gw__bs_shrink_deadline(sh);
        pfds[0] = (struct pollfd){.fd = bs->heir_lfd, .events = POLLIN};
        for (int i = 0; i < n; i++) {
            pfds[i + 1] = (struct pollfd){.fd = all[i].fd, .events = POLLIN};
            if (all[i].fd >= 0 && all[i].stage != ASK_ASKED && all[i].until < wake)
                wake = all[i].until;
        }
        int ms = wake <= now ? 0 : wake - now > 1000 ? 1000 : (int)(wake - now);
        if (poll(pfds, (nfds_t)n + 1, ms) < 0 && errno != EINTR)
            break;
        now = gw__now_ms();
        for (int i = 0; i < n; i++)
            if (all[i].fd >= 0)
                step(bs, &all[i], all, n, sh, gone, pfds[i + 1].revents, now);
        if (pfds[0].revents & POLLIN)
            accept_some(bs, all, n, now);
    }
    int go_on = gw__bs_shrink_decided(sh) && majority(bs, sh, gone, all, n);
    for (int i = 0; i < n; i++) {
        if (all[i].stage == ASK_ASKED) {
            gw_bs_members_t m;
            if (!go_on || !gw__bs_shrink_answer(sh, all[i].rank, &m))
                gw__bs_shrink_left_out(&m);
            uint8_t msg[GW_BS_MEMBERS_LEN];
            gw__bs_encode_members(&m, msg);
            size_t done = 0;
            (void)gw__sock_io_buf(all[i].fd, msg, sizeof(msg), &done, 1);
        }
        drop(&all[i]);
    }
    if (!go_on || !gw__bs_shrink_answer(sh, bs->rank, out))
        gw__bs_shrink_left_out(out);
    else if (out->status == GW_OK)
        gw__bs_new_root(host, out->port, root, root_cap);
    gw__bs_shrink_free(sh);
    free(all);
    free(pfds);
    gw__bs_heir_answer_late(bs);
    return GW_OK;
}

/* ---- the answerer: late requests get "left out" ---------------------------- */

static void answer_one(struct gw_bs_answerer *w, int fd, const char *addr)
{
    int64_t deadline = gw__now_ms() + SHAKE_MS;
    uint8_t buf[GW_BS_SMALL_MSG_MAX];
    size_t len = 0;
    gw_bs_hdr_t hdr;
    gw_bs_hello_t h;
    if (gw__bs_heir_recv(fd, GW_BS_TYPE_BIT(GW_BS_HELLO), deadline, buf, sizeof(buf), &len, &hdr) !=
            GW_SOCK_IO_DONE ||
        gw__bs_decode_hello(buf, len, &h, NULL) != GW_OK || h.size != w->size)
        return;
    gw_bs_challenge_t ch;
    if (gw__bs_random_bytes(w->log, ch.server_nonce, sizeof(ch.server_nonce)) != GW_OK)
        return;
    gw__bs_root_proof(w->key, sizeof(w->key), h.client_nonce, ch.server_nonce, ch.root_proof);
    gw__bs_encode_challenge(&ch, buf);
    gw_sock_io_t io;
    gw__sock_io_set(&io, buf, GW_BS_CHALLENGE_LEN, NULL, 0);
    if (gw__sock_io_run(fd, &io, 1, deadline) != GW_SOCK_IO_DONE ||
        gw__bs_heir_recv(fd, GW_BS_TYPE_BIT(GW_BS_RESPONSE), deadline, buf, sizeof(buf), &len,
                         &hdr) != GW_SOCK_IO_DONE)
        return;
    uint8_t proof[GW_BS_PROOF_LEN], want[GW_BS_PROOF_LEN];
    gw__bs_rank_proof(w->key, sizeof(w->key), ch.server_nonce, h.client_nonce, (uint32_t)h.rank,
                      want);
    if (gw__bs_decode_response(buf, len, proof, NULL) != GW_OK ||
        !gw__ct_equal(proof, want, sizeof(want))) {
        GW_WARN(w->log, GW_BS_SUBSYS,
                "succession: %s claimed rank %d but cannot prove the job token: dropped", addr,
                h.rank);
        return;
    }
    gw_bs_members_t m;
    gw__bs_shrink_left_out(&m);
    gw__bs_encode_members(&m, buf);
    gw__sock_io_set(&io, buf, GW_BS_MEMBERS_LEN, NULL, 0);
    (void)gw__sock_io_run(fd, &io, 1, deadline);
    GW_WARN(w->log, GW_BS_SUBSYS,
            "succession: rank %d asked after the survivors went on: told it was left out", h.rank);
}

static void *answer_late(void *arg)
{
    struct gw_bs_answerer *w = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = w->stop[0], .events = POLLIN},
                              {.fd = w->lfd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[0].revents)
            break;
        if (!(p[1].revents & POLLIN))
            continue;
        char addr[GW_BS_ADDR_TEXT];
        int fd = gw__sock_accept(w->lfd, addr, sizeof(addr));
        if (fd < 0)
            continue;
        answer_one(w, fd, addr);
        close(fd);
    }
    return NULL;
}

void gw__bs_heir_answer_late(gw_bootstrap_t *bs)
{
    struct gw_bs_answerer *w = calloc(1, sizeof(*w));
    if (!w)
        return; /* late ranks then wait out their window instead */
    w->lfd = bs->heir_lfd;
    w->log = bs->log;
    w->size = bs->size;
    memcpy(w->key, bs->heir_key, sizeof(w->key));
    if (pipe2(w->stop, O_CLOEXEC) != 0) {
        free(w);
        return;
    }
    if (pthread_create(&w->thread, NULL, answer_late, w) != 0) {
        close(w->stop[0]);
        close(w->stop[1]);
        free(w);
        return;
    }
    bs->answerer = w;
}

void gw__bs_heir_answerer_stop(struct gw_bs_answerer *w)
{
    if (!w)
        return;
    char b = 1;
    (void)!write(w->stop[1], &b, 1);
    pthread_join(w->thread, NULL);
    close(w->stop[0]);
    close(w->stop[1]);
    explicit_bzero(w->key, sizeof(w->key));
    free(w);
}
