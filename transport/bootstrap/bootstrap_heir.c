/*
 * bootstrap_heir.c - when rank 0 dies, the survivors choose its heir and
 * agree through it on who goes on (gw__bootstrap_succeed, for
 * gw_comm_shrink): the heirs' listeners, opened when the job forms, and a
 * survivor's side of the succession. The heir's side, leading, is
 * bootstrap_heir_lead.c.
 *
 * Why. A shrink agrees through rank 0's referee (bootstrap_shrink.c): one
 * place decides, so everyone it answers has the same answer. When rank 0
 * itself is gone, so is that place; the survivors need another one, and
 * they must all pick the same one without a vote that could itself lose a
 * rank. The rule is the oldest one: the lowest surviving rank.
 *
 * The heirs' listeners. When the job forms (gw__bootstrap_heirs_open, after
 * the transports' all-gather, before the watch), every rank but 0 opens a
 * listening socket on the address it reaches rank 0 from, and one more
 * all-gather gives every rank every rank's heir address (laid out as
 * gw__sock_addr_put does; rank 0's is empty). Nothing is accepted on it
 * while the job is healthy: the kernel queues what connects, and nobody
 * reads it until a succession. Only a process that knows the job token
 * gets anything from it, and only then (below).
 *
 * Choosing the heir. A survivor whose shrink found rank 0's connection
 * closed (GW_ERR_REMOTE: its process is gone; a rank 0 that is stopped or
 * hung is not succeeded, see gw_comm_shrink) tries the ranks 1, 2, ... in
 * order, up to itself. For each it dials the rank's heir listener and asks
 * (HELLO with its rank and a fresh nonce; the heir's CHALLENGE and proof,
 * checked before it proves itself with RESPONSE; then MEMBERS, the heir's
 * decision, bootstrap_msg.h). A refused connection means that rank is
 * gone (its process closed the listener): on to the next at once. A rank
 * that takes the connection but answers nothing within the window plus a
 * margin is stopped or hung: on to the next too. A rank that answers is the
 * heir, and its MEMBERS is this rank's place: a member (new rank, size,
 * the port of the new root on the heir's host) or left out
 * (GW_ERR_ABORTED). Reaching itself, a survivor is the heir and leads.
 * Every survivor walks the same order and gives up on a rank after the
 * same time, so they come to the same heir, at about the same time.
 *
 * Proofs. The handshake is the join's (gw__bs_root_proof and
 * gw__bs_rank_proof) keyed with the job's heir key, HMAC(job token,
 * "gradwire heir" || job id), derived when the job forms (bootstrap.c): only a process of this job can answer or
 * ask, and a proof made for one job, or for its ring or data plane,
 * admits to nothing here.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/sha256.h"
#include "transport/bootstrap/bootstrap_internal.h"

/* What an asker allows beyond the window for an heir to answer: the
 * heir's own walk over the ranks before it takes the same time. */
#define ANSWER_MARGIN_MS 2000

gw_status_t gw__bootstrap_heirs_open(gw_bootstrap_t *bs)
{
    if (!bs || bs->size == 1)
        return GW_OK;
    uint8_t mine[GW_SOCK_ADDR_WIRE];
    memset(mine, 0, sizeof(mine));
    if (bs->rank > 0) {
        struct sockaddr_storage a = bs->local;
        if (a.ss_family == AF_INET)
            ((struct sockaddr_in *)&a)->sin_port = 0;
        else if (a.ss_family == AF_INET6)
            ((struct sockaddr_in6 *)&a)->sin6_port = 0;
        socklen_t sl = sizeof(a);
        bs->heir_lfd = gw__sock_open(a.ss_family);
        if (bs->heir_lfd < 0 || bind(bs->heir_lfd, (struct sockaddr *)&a, bs->local_len) != 0 ||
            listen(bs->heir_lfd, 64) != 0 ||
            getsockname(bs->heir_lfd, (struct sockaddr *)&a, &sl) != 0) {
            char text[GW_BS_ADDR_TEXT];
            gw__sock_addr_str((const struct sockaddr *)&bs->local, text, sizeof(text));
            GW_ERROR(bs->log, GW_BS_SUBSYS,
                     "cannot open the listener on which this rank would lead the job if rank 0 "
                     "died (%s): %m",
                     text);
            return GW_ERR_SYSTEM;
        }
        gw__sock_addr_put(mine, (const struct sockaddr *)&a);
    }
    bs->heirs = malloc((size_t)bs->size * GW_SOCK_ADDR_WIRE);
    if (!bs->heirs) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "out of memory for the heirs' addresses");
        return GW_ERR_NO_MEMORY;
    }
    return gw__bootstrap_allgather(bs, mine, sizeof(mine), bs->heirs);
}

int gw__bs_heir_addr(const gw_bootstrap_t *bs, int r, struct sockaddr_storage *sa, socklen_t *len,
                     char *text, size_t cap)
{
    if (!bs->heirs || r <= 0 || r >= bs->size ||
        gw__sock_addr_get(bs->heirs + (size_t)r * GW_SOCK_ADDR_WIRE, sa, len) != GW_OK)
        return -1;
    if (text)
        gw__sock_addr_str((const struct sockaddr *)sa, text, cap);
    return 0;
}

void gw__bs_heir_host(const struct sockaddr_storage *sa, socklen_t len, char *host, size_t cap)
{
    if (getnameinfo((const struct sockaddr *)sa, len, host, (socklen_t)cap, NULL, 0,
                    NI_NUMERICHOST) != 0)
        snprintf(host, cap, "?");
}

int gw__bs_heir_dial(const struct sockaddr_storage *sa, socklen_t len, int64_t deadline,
                     int *refused)
{
    *refused = 0;
    int fd = gw__sock_open(sa->ss_family);
    if (fd < 0)
        return -1;
    int c = gw__sock_connect(fd, (const struct sockaddr *)sa, len);
    while (c == GW_SOCK_CONNECTING) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int n = poll(&p, 1, gw__sock_remaining_ms(deadline));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* no answer in time (or poll failed): neither gone nor there */
        int e = gw__sock_connect_result(fd, p.revents);
        if (e < 0)
            continue;
        if (e == 0)
            c = GW_SOCK_CONNECTED;
        else
            errno = e;
        break;
    }
    if (c != GW_SOCK_CONNECTED) {
        *refused = errno == ECONNREFUSED;
        close(fd);
        return -1;
    }
    (void)gw__sock_nodelay(fd);
    return fd;
}

int gw__bs_heir_recv(int fd, unsigned mask, int64_t deadline, uint8_t *buf, size_t cap, size_t *len,
                     gw_bs_hdr_t *hdr)
{
    gw_sock_io_t io;
    gw__sock_io_set(&io, buf, GW_BS_HDR_LEN, NULL, 0);
    int r = gw__sock_io_run(fd, &io, 0, deadline);
    if (r != GW_SOCK_IO_DONE)
        return r;
    if (gw__bs_decode_hdr(buf, GW_BS_HDR_LEN, hdr, NULL) != GW_OK ||
        !(mask & GW_BS_TYPE_BIT(hdr->type)) || hdr->payload_len > cap - GW_BS_HDR_LEN)
        return GW_BS_HEIR_MALFORMED;
    gw__sock_io_set(&io, buf + GW_BS_HDR_LEN, hdr->payload_len, NULL, 0);
    r = gw__sock_io_run(fd, &io, 0, deadline);
    *len = GW_BS_HDR_LEN + hdr->payload_len;
    return r;
}

/* Ask rank c, as rank bs->rank, for our place: GW_OK with *m once it
 * answered; GW_ERR_REMOTE when it is gone (*gone set: its listener refused
 * us, or it closed the connection); GW_ERR_TIMEOUT when it said nothing by
 * the deadline; GW_ERR_AUTH or GW_ERR_PROTOCOL when what it said was not
 * the job's. Each logged. */
static gw_status_t ask_heir(gw_bootstrap_t *bs, int c, int64_t deadline, gw_bs_members_t *m,
                            char *host, size_t host_cap)
{
    struct sockaddr_storage sa;
    socklen_t sl;
    char text[GW_BS_ADDR_TEXT];
    if (gw__bs_heir_addr(bs, c, &sa, &sl, text, sizeof(text)) != 0)
        return GW_ERR_REMOTE;
    int refused;
    int fd = gw__bs_heir_dial(&sa, sl, deadline, &refused);
    if (fd < 0) {
        GW_WARN(bs->log, GW_BS_SUBSYS, "succession: rank %d (%s) %s", c, text,
                refused ? "refused the connection: it is gone" : "did not take the connection");
        return refused ? GW_ERR_REMOTE : GW_ERR_TIMEOUT;
    }
    uint8_t buf[GW_BS_SMALL_MSG_MAX], cn[GW_BS_NONCE_LEN];
    size_t len = 0;
    gw_bs_hdr_t hdr;
    gw_status_t st = gw__bs_random_bytes(bs->log, cn, sizeof(cn));
    if (st != GW_OK)
        goto out;
    gw_bs_hello_t hello = {.rank = bs->rank, .size = bs->size};
    memcpy(hello.client_nonce, cn, sizeof(cn));
    gw__bs_encode_hello(&hello, buf);
    gw_sock_io_t io;
    gw__sock_io_set(&io, buf, GW_BS_HELLO_LEN, NULL, 0);
    int r = gw__sock_io_run(fd, &io, 1, deadline);
    if (r == GW_SOCK_IO_DONE)
        r = gw__bs_heir_recv(fd, GW_BS_TYPE_BIT(GW_BS_CHALLENGE), deadline, buf, sizeof(buf), &len,
                             &hdr);
    gw_bs_challenge_t ch;
    if (r == GW_SOCK_IO_DONE && gw__bs_decode_challenge(buf, len, &ch, NULL) != GW_OK)
        r = GW_BS_HEIR_MALFORMED;
    if (r == GW_SOCK_IO_DONE) {
        uint8_t proof[GW_BS_PROOF_LEN];
        gw__bs_root_proof(bs->heir_key, sizeof(bs->heir_key), cn, ch.server_nonce, proof);
        if (!gw__ct_equal(proof, ch.root_proof, sizeof(proof))) {
            GW_ERROR(bs->log, GW_BS_SUBSYS,
                     "succession: whoever answers on rank %d's heir listener (%s) cannot prove "
                     "the job token: not asking it",
                     c, text);
            st = GW_ERR_AUTH;
            goto out;
        }
        gw__bs_rank_proof(bs->heir_key, sizeof(bs->heir_key), ch.server_nonce, cn,
                          (uint32_t)bs->rank, proof);
        gw__bs_encode_response(proof, buf);
        gw__sock_io_set(&io, buf, GW_BS_RESPONSE_LEN, NULL, 0);
        r = gw__sock_io_run(fd, &io, 1, deadline);
    }
    if (r == GW_SOCK_IO_DONE)
        r = gw__bs_heir_recv(fd, GW_BS_TYPE_BIT(GW_BS_MEMBERS), deadline, buf, sizeof(buf), &len,
                             &hdr);
    if (r == GW_SOCK_IO_DONE && gw__bs_decode_members(buf, len, m, NULL) != GW_OK)
        r = GW_BS_HEIR_MALFORMED;
    if (r == GW_SOCK_IO_DONE) {
        gw__bs_heir_host(&sa, sl, host, host_cap);
        st = GW_OK;
    } else if (r == GW_SOCK_IO_TIMEOUT) {
        GW_WARN(bs->log, GW_BS_SUBSYS,
                "succession: rank %d (%s) took the connection but did not answer in time: it is "
                "stopped or hung",
                c, text);
        st = GW_ERR_TIMEOUT;
    } else if (r == GW_BS_HEIR_MALFORMED) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "succession: rank %d (%s) sent something malformed", c,
                 text);
        st = GW_ERR_PROTOCOL;
    } else {
        GW_WARN(bs->log, GW_BS_SUBSYS, "succession: rank %d (%s) closed the connection: it is gone",
                c, text);
        st = GW_ERR_REMOTE;
    }
out:
    close(fd);
    return st;
}

gw_status_t gw__bootstrap_succeed(gw_bootstrap_t *bs, int window_ms, char *root, size_t root_cap,
                                  gw_bs_members_t *out)
{
    if (!bs || bs->size == 1 || !bs->heirs)
        return GW_ERR_UNSUPPORTED;
    unsigned char *gone = calloc((size_t)bs->size, 1);
    if (!gone)
        return GW_ERR_NO_MEMORY;
    gone[0] = 1;
    gw_status_t st = GW_ERR_REMOTE;
    for (int c = 1; c < bs->size; c++) {
        if (c == bs->rank) {
            st = gw__bs_heir_lead(bs, gone, window_ms, root, root_cap, out);
            break;
        }
        char host[NI_MAXHOST];
        int64_t deadline = gw__now_ms() + window_ms + ANSWER_MARGIN_MS;
        st = ask_heir(bs, c, deadline, out, host, sizeof(host));
        if (st == GW_OK) {
            if (out->status == GW_OK)
                gw__bs_new_root(host, out->port, root, root_cap);
            GW_INFO(bs->log, GW_BS_SUBSYS, "succession: rank %d leads the survivors", c);
            break;
        }
        if (st == GW_ERR_AUTH || st == GW_ERR_NO_MEMORY || st == GW_ERR_SYSTEM)
            break;
        gone[c] = 1; /* gone, or no use to anyone: the next one leads */
    }
    free(gone);
    return st;
}
