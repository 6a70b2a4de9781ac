/*
 * bootstrap_shrink.c - agreeing on who is left after a failure: the
 * referee's side (rank 0's thread, bootstrap_referee.c calls it) and a
 * rank's side (gw__bootstrap_shrink), for gw_comm_shrink
 * (collectives/api/comm_shrink.c).
 *
 * Why through rank 0. Every rank still holds its bootstrap connection to
 * rank 0's referee, the referee sees each of them close when a rank dies,
 * and it already decides whom a failure is blamed on. So it also decides
 * who goes on: one place decides, and everyone it answers has the same
 * answer. No round of votes among the survivors, which could itself lose
 * a rank halfway.
 *
 * The exchange. A survivor sends SHRINK (rank 0's caller also sends the
 * port on which the shrunk job's root will listen: it reserved it on the
 * root's host). The first SHRINK opens the case, with its window (the
 * survivors' timeout, bounded). The referee decides as soon as every rank
 * has either asked or is gone (its connection closed: dead), and at the
 * latest when the window ends: then a rank that is connected but has not
 * asked (stopped, hung, or busy outside gradwire) is left out. The members
 * are the ranks that asked and are still connected, numbered in the order
 * of their old ranks; each gets MEMBERS with its new rank, the new size and
 * the port. A rank that asks after the decision, such as a stopped rank
 * that woke up, gets MEMBERS with GW_ERR_ABORTED and no rank: it was left
 * out, and it learns so instead of joining by surprise (it never learns
 * the port either). Rank 0 must be among those that asked: the shrunk job
 * is built around its new root; without rank 0's request by the window's
 * end, every rank that asked gets GW_ERR_TIMEOUT.
 *
 * Bounded on both sides. The referee never waits past the window; a rank
 * waits for its answer at most the window plus a margin, and sees rank 0's
 * death at once as its connection closing (GW_ERR_REMOTE): then the
 * survivors agree through an heir instead, the lowest surviving rank,
 * which runs this same decision in rank 0's place (bootstrap_heir.c).
 *
 * A rank 0 that is stopped or hung (no answer by the window and the
 * margin), or busy outside gradwire (the referee answers GW_ERR_TIMEOUT:
 * rank 0 did not ask), is succeeded too, but first deposed
 * (gw__bootstrap_depose): the survivor sends DEPOSED and closes its
 * connection to the referee. A rank 0 that wakes finds the DEPOSED ahead
 * of every survivor's goodbye in its connections (one stream each, read in
 * order), so its own shrink is answered left out (GW_ERR_ABORTED) and it
 * never leads a job of one beside the survivors' (gw__bs_shrink_depose).
 * A survivor that deposed a rank 0 whose referee then answered others in
 * time leaves those others building a communicator it will not join: they
 * fail with a timeout, never two jobs.
 * There is one shrink case per bootstrap: the shrunk communicator has its
 * own bootstrap and referee for the next one.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "transport/bootstrap/bootstrap_internal.h"

/* What a rank allows beyond the window for the referee's answer to come. */
#define ANSWER_MARGIN_MS 2000
/* Lost ranks named in the referee's log line, then "and N more". */
#define LOST_LIST_MAX 16

struct gw_bs_shrink {
    const gw_logger_t *log;
    int size;
    unsigned char *asked;
    int32_t *new_rank; /* once decided: the member's new rank, -1 otherwise */
    int64_t deadline;  /* INT64_MAX: no case open */
    int decided;
    gw_status_t status; /* of the decision: GW_OK, or why nobody goes on */
    uint32_t port, new_size;
    int leader;      /* whose request carries the port: 0, or an heir (bootstrap_heir_lead.c) */
    const char *who; /* who decides, for the log: "referee", or "succession" for an heir */
    int deposed;     /* a survivor went on without the leader: the leader is left out */
};

gw_bs_shrink_t *gw__bs_shrink_new(const gw_logger_t *log, int size)
{
    gw_bs_shrink_t *sh = calloc(1, sizeof(*sh));
    if (!sh)
        return NULL;
    sh->log = log;
    sh->size = size;
    sh->asked = calloc((size_t)size, 1);
    sh->new_rank = calloc((size_t)size, sizeof(*sh->new_rank));
    sh->deadline = INT64_MAX;
    sh->who = "referee";
    if (!sh->asked || !sh->new_rank) {
        gw__bs_shrink_free(sh);
        return NULL;
    }
    return sh;
}

void gw__bs_shrink_free(gw_bs_shrink_t *sh)
{
    if (!sh)
        return;
    free(sh->asked);
    free(sh->new_rank);
    free(sh);
}

void gw__bs_shrink_request(gw_bs_shrink_t *sh, int r, const gw_bs_shrink_req_t *req, int64_t now)
{
    if (sh->decided)
        return; /* too late: answered as left out */
    if (sh->deadline == INT64_MAX) {
        sh->deadline = now + (int64_t)req->window_ms;
        GW_INFO(sh->log, GW_BS_SUBSYS,
                "%s: rank %d asks to shrink the job; the others have %u ms to ask too", sh->who, r,
                req->window_ms);
    }
    sh->asked[r] = 1;
    if (r == sh->leader)
        sh->port = req->port;
}

void gw__bs_shrink_lead(gw_bs_shrink_t *sh, int leader)
{
    sh->leader = leader;
    sh->who = "succession";
}

int gw__bs_shrink_asked(const gw_bs_shrink_t *sh, int r) { return sh->asked[r]; }

int64_t gw__bs_shrink_deadline(const gw_bs_shrink_t *sh)
{
    return sh->decided ? INT64_MAX : sh->deadline;
}

int gw__bs_shrink_decided(const gw_bs_shrink_t *sh) { return sh->decided; }

int gw__bs_shrink_decide(gw_bs_shrink_t *sh, const unsigned char *gone, int64_t now)
{
    if (sh->decided || sh->deadline == INT64_MAX)
        return 0;
    int everyone = 1;
    for (int r = 0; r < sh->size; r++)
        everyone &= sh->asked[r] || gone[r];
    int lead = sh->leader;
    if (!(everyone && sh->asked[lead] && !gone[lead]) && now < sh->deadline)
        return 0;
    sh->decided = 1;
    char lost[16 * LOST_LIST_MAX + 32] = "";
    size_t len = 0;
    int nlost = 0;
    for (int r = 0; r < sh->size; r++) {
        int member = sh->asked[r] && !gone[r];
        sh->new_rank[r] = member ? (int32_t)sh->new_size++ : -1;
        if (member)
            continue;
        if (nlost++ < LOST_LIST_MAX && len < sizeof(lost))
            len += (size_t)snprintf(lost + len, sizeof(lost) - len, "%s%d (%s)",
                                    nlost > 1 ? ", " : "", r, gone[r] ? "gone" : "did not ask");
    }
    if (nlost > LOST_LIST_MAX && len < sizeof(lost))
        snprintf(lost + len, sizeof(lost) - len, " and %d more", nlost - LOST_LIST_MAX);
    if (!sh->asked[lead] || gone[lead] || sh->port == 0) {
        sh->status = GW_ERR_TIMEOUT;
        GW_ERROR(sh->log, GW_BS_SUBSYS,
                 "%s: rank %d did not ask to shrink within the window: the job cannot shrink "
                 "without it",
                 sh->who, lead);
        return 1;
    }
    sh->status = GW_OK;
    GW_WARN(sh->log, GW_BS_SUBSYS, "%s: %u of the job's %d ranks go on; left out: %s", sh->who,
            sh->new_size, sh->size, nlost ? lost : "none");
    return 1;
}

int gw__bs_shrink_depose(gw_bs_shrink_t *sh, int by)
{
    if (!sh->deposed)
        GW_WARN(sh->log, GW_BS_SUBSYS,
                "%s: rank %d went on without rank %d, which did not answer its shrink in time "
                "(stopped or hung): rank %d is left out of whatever the survivors make",
                sh->who, by, sh->leader, sh->leader);
    sh->deposed = 1;
    if (sh->decided)
        return 0;
    sh->decided = 1;
    sh->status = GW_ERR_TIMEOUT; /* nobody's new_rank is read: no member */
    return 1;
}

int gw__bs_shrink_deposed(const gw_bs_shrink_t *sh) { return sh->deposed; }

int gw__bs_shrink_answer(const gw_bs_shrink_t *sh, int r, gw_bs_members_t *m)
{
    if (r == sh->leader && sh->deposed) {
        gw__bs_shrink_left_out(m);
        return 1;
    }
    if (!sh->decided || !sh->asked[r])
        return 0;
    memset(m, 0, sizeof(*m));
    m->new_rank = -1;
    m->status = sh->status;
    if (sh->status == GW_OK && sh->new_rank[r] >= 0) {
        m->new_rank = sh->new_rank[r];
        m->new_size = sh->new_size;
        m->port = sh->port;
    } else if (sh->status == GW_OK) {
        m->status = GW_ERR_ABORTED; /* it asked, then its connection closed */
    }
    return 1;
}

void gw__bs_shrink_left_out(gw_bs_members_t *m)
{
    memset(m, 0, sizeof(*m));
    m->status = GW_ERR_ABORTED;
    m->new_rank = -1;
}

/* ---- a rank's side ------------------------------------------------------- */

/* A free TCP port on the root's host, for the shrunk job's root: bound
 * once and released, so that nobody else is listening on it. */
gw_status_t gw__bs_reserve_port(gw_bootstrap_t *bs, const char *host, uint32_t *port)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
    int gai = getaddrinfo(host, "0", &hints, &res);
    if (gai != 0) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "cannot resolve the root host %s for a new root port: %s",
                 host, gai_strerror(gai));
        return GW_ERR_SYSTEM;
    }
    gw_status_t st = GW_ERR_SYSTEM;
    for (struct addrinfo *ai = res; ai && st != GW_OK; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
            *port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&ss)->sin_port);
            st = GW_OK;
        }
        close(fd);
    }
    freeaddrinfo(res);
    if (st != GW_OK)
        GW_ERROR(bs->log, GW_BS_SUBSYS, "no free port for a new root on the root host %s: %m",
                 host);
    return st;
}

gw_status_t gw__bs_new_root_request(gw_bootstrap_t *bs, int window_ms, char *host, size_t host_cap,
                                    gw_bs_shrink_req_t *req, int64_t *deadline)
{
    int old_port;
    if (gw__parse_hostport(bs->root, host, host_cap, &old_port) != GW_OK)
        return GW_ERR_CONFIG;
    *req = (gw_bs_shrink_req_t){.port = 0, .window_ms = (uint32_t)window_ms};
    gw_status_t st;
    if (bs->rank == 0 && (st = gw__bs_reserve_port(bs, host, &req->port)) != GW_OK)
        return st;
    *deadline = gw__now_ms() + window_ms + ANSWER_MARGIN_MS;
    return GW_OK;
}

void gw__bs_new_root(const char *host, uint32_t port, char *root, size_t root_cap)
{
    snprintf(root, root_cap, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
}

gw_status_t gw__bootstrap_shrink(gw_bootstrap_t *bs, int window_ms, char *root, size_t root_cap,
                                 gw_bs_members_t *out)
{
    if (!bs || !bs->watching)
        return GW_ERR_UNSUPPORTED;
    char host[256];
    gw_bs_shrink_req_t req;
    int64_t deadline;
    gw_status_t st = gw__bs_new_root_request(bs, window_ms, host, sizeof(host), &req, &deadline);
    if (st != GW_OK)
        return st;
    gw__bs_watch_pump(bs, NULL);
    uint8_t msg[GW_BS_SHRINK_LEN];
    gw__bs_encode_shrink(&req, msg);
    if ((st = gw__bs_watch_ask(bs, msg, sizeof(msg), &bs->have_members, deadline)) != GW_OK)
        return st;
    *out = bs->members;
    if (out->status == GW_OK)
        gw__bs_new_root(host, out->port, root, root_cap);
    return GW_OK;
}

void gw__bootstrap_depose(gw_bootstrap_t *bs)
{
    if (!bs || !bs->watching || bs->rank == 0 || bs->watch_gone)
        return;
    uint8_t msg[GW_BS_DEPOSED_LEN];
    gw__bs_encode_deposed(msg);
    gw__bs_watch_send(bs, msg, sizeof(msg));
    /* The goodbye after it: a rank 0 that wakes reads DEPOSED first. */
    shutdown(bs->root_fd, SHUT_WR);
    bs->watch_gone = 1;
}
