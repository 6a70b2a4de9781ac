/*
 * bootstrap_status.c - `gradwire status`'s side of the status query: ask
 * a running job's rank 0 (its root address) how every rank is doing,
 * proving the job token first (bootstrap_late.c answers; the messages are
 * bootstrap_pulse.c's).
 *
 * The exchange is a joiner's (bootstrap_joiner.c) with another first
 * message and another rank in the proof: STATUS_ASK with our nonce;
 * rank 0's CHALLENGE, whose proof we check against the token (a process
 * that holds another token learns nothing and says so); our RESPONSE;
 * then rank 0's STATUS, or a REJECT when it could not verify us. Every
 * read is bounded by the caller's deadline.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/sha256.h"
#include "transport/bootstrap/bootstrap_internal.h"

/* One whole message into a malloc'd buffer: a CHALLENGE, a STATUS or a
 * REJECT (each within its type's bounds, which decode_hdr checks). */
static gw_status_t recv_msg(gw_bootstrap_t *bs, int fd, int64_t deadline, const char *what,
                            uint8_t **out, size_t *len, gw_bs_type_t *type)
{
    uint8_t hdr_buf[GW_BS_HDR_LEN];
    gw_sock_io_t io;
    gw__sock_io_set(&io, hdr_buf, GW_BS_HDR_LEN, NULL, 0);
    int r = gw__sock_io_run(fd, &io, 0, deadline);
    gw_bs_hdr_t h;
    const char *why = "an unexpected message";
    if (r == GW_SOCK_IO_DONE &&
        (gw__bs_decode_hdr(hdr_buf, GW_BS_HDR_LEN, &h, &why) != GW_OK ||
         (h.type != GW_BS_CHALLENGE && h.type != GW_BS_STATUS && h.type != GW_BS_REJECT))) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "malformed message from the root %s during %s: %s",
                 bs->root, what, why);
        return GW_ERR_PROTOCOL;
    }
    uint8_t *buf = NULL;
    if (r == GW_SOCK_IO_DONE) {
        if (!(buf = malloc(GW_BS_HDR_LEN + (size_t)h.payload_len)))
            return GW_ERR_NO_MEMORY;
        memcpy(buf, hdr_buf, GW_BS_HDR_LEN);
        gw__sock_io_set(&io, buf + GW_BS_HDR_LEN, h.payload_len, NULL, 0);
        r = gw__sock_io_run(fd, &io, 0, deadline);
    }
    if (r != GW_SOCK_IO_DONE) {
        free(buf);
        GW_ERROR(bs->log, GW_BS_SUBSYS, "%s from the root %s: %s", what, bs->root,
                 r == GW_SOCK_IO_TIMEOUT ? "no answer in time"
                                         : "the connection closed (a job of one rank, or one "
                                           "that is not a gradwire job of this version?)");
        return r == GW_SOCK_IO_TIMEOUT ? GW_ERR_TIMEOUT : GW_ERR_REMOTE;
    }
    *out = buf;
    *len = GW_BS_HDR_LEN + h.payload_len;
    *type = h.type;
    if (h.type == GW_BS_REJECT) {
        gw_status_t st = gw__bs_client_take_reject(bs, buf, *len, "refused the status query");
        free(buf);
        return st;
    }
    return GW_OK;
}

static gw_status_t ask_on(gw_bootstrap_t *bs, int fd, const char *token, int64_t deadline,
                          uint32_t *size, gw_bs_rank_status_t **ranks, uint32_t *n)
{
    uint8_t nonce[GW_BS_NONCE_LEN], msg[GW_BS_CHALLENGE_LEN];
    gw_status_t st = gw__bs_random_bytes(bs->log, nonce, sizeof(nonce));
    if (st != GW_OK)
        return st;
    gw__bs_encode_status_ask(nonce, msg);
    gw_sock_io_t io;
    gw__sock_io_set(&io, msg, GW_BS_STATUS_ASK_LEN, NULL, 0);
    if (gw__sock_io_run(fd, &io, 1, deadline) != GW_SOCK_IO_DONE) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "could not ask the root %s: %m", bs->root);
        return GW_ERR_REMOTE;
    }
    uint8_t *buf;
    size_t len;
    gw_bs_type_t type;
    if ((st = recv_msg(bs, fd, deadline, "the challenge", &buf, &len, &type)) != GW_OK)
        return st;
    gw_bs_challenge_t ch;
    const char *why = NULL;
    st = type == GW_BS_CHALLENGE ? gw__bs_decode_challenge(buf, len, &ch, &why) : GW_ERR_PROTOCOL;
    free(buf);
    if (st != GW_OK) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "malformed challenge from the root %s: %s", bs->root,
                 why ? why : "not a challenge");
        return GW_ERR_PROTOCOL;
    }
    if ((st = gw__bs_client_prove(bs, fd, token, nonce, &ch, GW_BS_STATUS_RANK, "a status query",
                                  deadline)) != GW_OK)
        return st;
    if ((st = recv_msg(bs, fd, deadline, "the status", &buf, &len, &type)) != GW_OK)
        return st;
    st = type == GW_BS_STATUS ? gw__bs_decode_status(buf, len, size, ranks, n, &why)
                              : GW_ERR_PROTOCOL;
    free(buf);
    if (st != GW_OK)
        GW_ERROR(bs->log, GW_BS_SUBSYS, "malformed status from the root %s: %s", bs->root,
                 why ? why : "not a status");
    return st;
}

gw_status_t gw__bootstrap_status(const gw_logger_t *lg, const char *root, const char *token,
                                 int timeout_ms, uint32_t *size, gw_bs_rank_status_t **ranks,
                                 uint32_t *n)
{
    char host[256], port[16];
    int p;
    if (!token || strlen(token) < GW_JOB_TOKEN_MIN) {
        GW_ERROR(lg, GW_BS_SUBSYS,
                 "a status query proves the job token: give the job's (GW_JOB_TOKEN or "
                 "GW_JOB_TOKEN_FILE, %d characters or more)",
                 GW_JOB_TOKEN_MIN);
        return GW_ERR_CONFIG;
    }
    if (!root || gw__parse_hostport(root, host, sizeof(host), &p) != GW_OK ||
        strlen(root) >= GW_BS_ROOT_TEXT) {
        GW_ERROR(lg, GW_BS_SUBSYS, "root address \"%s\" is not host:port",
                 root ? root : "(none: set GW_ROOT)");
        return GW_ERR_CONFIG;
    }
    snprintf(port, sizeof(port), "%d", p);
    gw_bootstrap_t bs = {.rank = -1,
                         .timeout_ms = timeout_ms,
                         .log = lg,
                         .culprit = -1,
                         .root_fd = -1,
                         .late_lfd = -1};
    memcpy(bs.root, root, strlen(root) + 1);
    int64_t start = gw__now_ms(), deadline = start + timeout_ms;
    int fd = -1;
    gw_status_t st = gw__bs_client_connect(&bs, host, port, start, deadline, &fd);
    if (st != GW_OK)
        return st;
    st = ask_on(&bs, fd, token, deadline, size, ranks, n);
    close(fd);
    return st;
}
