/*
 * bootstrap_joiner.c - a new process's side of joining a running job
 * (gw_comm_join; the members' side and the whole exchange are described in
 * bootstrap_grow.c, rank 0's answers in bootstrap_late.c).
 *
 * The joiner connects to the job's root address with the same growing
 * pauses a rank uses at the join, sends JOIN with a fresh nonce, checks
 * rank 0's proof before proving itself (a process that merely listens on
 * the port learns nothing from it), answers with its own proof (the rank
 * proof for GW_BS_JOINER_RANK) and then waits for its place: GROWN, sent
 * when the members next grow. Rank 0 refuses a wrong token with
 * REJECT(AUTH), which is logged and returned. The wait is bounded by the
 * caller's wait_ms from the start, connecting included; on expiry the
 * joiner closes its connection (rank 0 forgets it) and returns
 * GW_ERR_TIMEOUT naming the root.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/sha256.h"
#include "transport/bootstrap/bootstrap_internal.h"

/* Rank 0 answers a JOIN at once, unless its referee is busy. */
#define CHALLENGE_MS 10000

/* One whole message of a type in mask (REJECT always), into buf. */
static gw_status_t recv_small(gw_bootstrap_t *bs, int fd, unsigned mask, int64_t deadline,
                              const char *what, uint8_t buf[GW_BS_SMALL_MSG_MAX], size_t *len)
{
    gw_sock_io_t io;
    gw__sock_io_set(&io, buf, GW_BS_HDR_LEN, NULL, 0);
    int r = gw__sock_io_run(fd, &io, 0, deadline);
    gw_bs_hdr_t hdr;
    const char *why = "an unexpected message";
    if (r == GW_SOCK_IO_DONE) {
        if (gw__bs_decode_hdr(buf, GW_BS_HDR_LEN, &hdr, &why) != GW_OK ||
            !((mask | GW_BS_TYPE_BIT(GW_BS_REJECT)) & GW_BS_TYPE_BIT(hdr.type)) ||
            hdr.payload_len > GW_BS_SMALL_MSG_MAX - GW_BS_HDR_LEN) {
            GW_ERROR(bs->log, GW_BS_SUBSYS, "malformed message from the root %s during %s: %s",
                     bs->root, what, why);
            return GW_ERR_PROTOCOL;
        }
        gw__sock_io_set(&io, buf + GW_BS_HDR_LEN, hdr.payload_len, NULL, 0);
        r = gw__sock_io_run(fd, &io, 0, deadline);
    }
    if (r == GW_SOCK_IO_TIMEOUT) {
        GW_ERROR(bs->log, GW_BS_SUBSYS,
                 "timed out after %d ms waiting for %s from rank 0 (root %s): no grow of the job "
                 "admitted this process in time",
                 bs->timeout_ms, what, bs->root);
        return GW_ERR_TIMEOUT;
    }
    if (r != GW_SOCK_IO_DONE) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "rank 0 (root %s) closed the connection during %s",
                 bs->root, what);
        return GW_ERR_REMOTE;
    }
    *len = GW_BS_HDR_LEN + hdr.payload_len;
    if (hdr.type == GW_BS_REJECT)
        return gw__bs_client_take_reject(bs, buf, *len, "refused this joiner");
    return GW_OK;
}

/* The client's half of the token handshake once the root's challenge ch is
 * in (a joiner's, a status query's): the root must prove the token for our
 * nonce (a root that cannot is refused, and told so), then we prove it as
 * proof rank as_rank. who names the client in the messages. */
gw_status_t gw__bs_client_prove(gw_bootstrap_t *bs, int fd, const char *token, const uint8_t *nonce,
                                const gw_bs_challenge_t *ch, uint32_t as_rank, const char *who,
                                int64_t deadline)
{
    uint8_t proof[GW_BS_PROOF_LEN], msg[GW_BS_RESPONSE_LEN];
    gw__bs_root_proof(token, strlen(token), nonce, ch->server_nonce, proof);
    if (!gw__ct_equal(proof, ch->root_proof, sizeof(proof))) {
        GW_ERROR(bs->log, GW_BS_SUBSYS,
                 "authentication with the root %s failed: its proof does not match the job "
                 "token of %s (is GW_JOB_TOKEN the job's?)",
                 bs->root, who);
        char why[128];
        snprintf(why, sizeof(why), "wrong job token: %s cannot verify the proof of rank 0", who);
        gw__bs_send_reject_nowait(fd, GW_ERR_AUTH, why);
        return GW_ERR_AUTH;
    }
    gw__bs_rank_proof(token, strlen(token), ch->server_nonce, nonce, as_rank, proof);
    gw__bs_encode_response(proof, msg);
    gw_sock_io_t io;
    gw__sock_io_set(&io, msg, GW_BS_RESPONSE_LEN, NULL, 0);
    if (gw__sock_io_run(fd, &io, 1, deadline) != GW_SOCK_IO_DONE) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "%s could not prove the job token to the root %s: %m", who,
                 bs->root);
        return GW_ERR_REMOTE;
    }
    return GW_OK;
}

static gw_status_t join_on(gw_bootstrap_t *bs, int fd, const char *token, int64_t deadline,
                           gw_bs_members_t *out)
{
    uint8_t nonce[GW_BS_NONCE_LEN], buf[GW_BS_SMALL_MSG_MAX];
    size_t len = 0;
    gw_status_t st = gw__bs_random_bytes(bs->log, nonce, sizeof(nonce));
    if (st != GW_OK)
        return st;
    gw__bs_encode_join(nonce, buf);
    gw_sock_io_t io;
    gw__sock_io_set(&io, buf, GW_BS_JOIN_LEN, NULL, 0);
    if (gw__sock_io_run(fd, &io, 1, deadline) != GW_SOCK_IO_DONE) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "could not ask rank 0 (root %s) to join: %m", bs->root);
        return GW_ERR_REMOTE;
    }
    int64_t ch_by = gw__now_ms() + CHALLENGE_MS;
    st = recv_small(bs, fd, GW_BS_TYPE_BIT(GW_BS_CHALLENGE), ch_by < deadline ? ch_by : deadline,
                    "the challenge", buf, &len);
    if (st != GW_OK)
        return st;
    gw_bs_challenge_t ch;
    const char *why = NULL;
    if (gw__bs_decode_challenge(buf, len, &ch, &why) != GW_OK) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "malformed challenge from the root %s: %s", bs->root, why);
        return GW_ERR_PROTOCOL;
    }
    if ((st = gw__bs_client_prove(bs, fd, token, nonce, &ch, GW_BS_JOINER_RANK, "a joiner",
                                  deadline)) != GW_OK)
        return st;
    GW_INFO(bs->log, GW_BS_SUBSYS,
            "waiting for the job at %s to grow (at most %d ms from the start)", bs->root,
            bs->timeout_ms);
    st = recv_small(bs, fd, GW_BS_TYPE_BIT(GW_BS_GROWN), deadline, "a place in the job", buf, &len);
    if (st != GW_OK)
        return st;
    if (gw__bs_decode_grown(buf, len, out, &why) != GW_OK || out->status != GW_OK ||
        out->port == 0) {
        GW_ERROR(bs->log, GW_BS_SUBSYS, "malformed place from the root %s: %s", bs->root,
                 why ? why : "no member, or no port");
        return GW_ERR_PROTOCOL;
    }
    return GW_OK;
}

/* The joiner's token, checked before anything is sent: none is refused
 * unless insecure, as a job without one is (bootstrap.c). */
static gw_status_t check_token(const gw_logger_t *lg, const char *token, int insecure,
                               const char *root)
{
    if (token && token[0] && strlen(token) < GW_JOB_TOKEN_MIN) {
        GW_ERROR(lg, GW_BS_SUBSYS,
                 "gw_comm_join: the job token given has %zu characters; a job token has at "
                 "least %d",
                 strlen(token), GW_JOB_TOKEN_MIN);
        return GW_ERR_CONFIG;
    }
    if (token && token[0])
        return GW_OK;
    if (!insecure) {
        GW_ERROR(lg, GW_BS_SUBSYS,
                 "gw_comm_join: no job token: a process joins a job only by proving the job's "
                 "token. Set GW_JOB_TOKEN (the job's secret) or GW_JOB_TOKEN_FILE (a file "
                 "readable only by you, holding it), or pass it in the configuration; "
                 "GW_INSECURE=1 joins a job that runs without a token, at your own risk");
        return GW_ERR_CONFIG;
    }
    GW_WARN(lg, GW_BS_SUBSYS,
            "GW_INSECURE=1 and no job token: joining the job at %s unauthenticated; anyone who "
            "can reach its ports gets in as this process could",
            root ? root : "(none)");
    return GW_OK;
}

gw_status_t gw__bootstrap_join(const gw_logger_t *lg, const char *root, const char *token,
                               int insecure, int wait_ms, char *new_root, size_t cap,
                               gw_bs_members_t *out)
{
    char host[256], port[16];
    int p;
    if (check_token(lg, token, insecure, root) != GW_OK)
        return GW_ERR_CONFIG;
    if (!root || gw__parse_hostport(root, host, sizeof(host), &p) != GW_OK ||
        strlen(root) >= GW_BS_ROOT_TEXT) {
        GW_ERROR(lg, GW_BS_SUBSYS, "root address \"%s\" to join is not host:port",
                 root ? root : "(none: set GW_ROOT)");
        return GW_ERR_CONFIG;
    }
    snprintf(port, sizeof(port), "%d", p);
    gw_bootstrap_t bs = {
        .rank = -1, .timeout_ms = wait_ms, .log = lg, .culprit = -1, .root_fd = -1, .late_lfd = -1};
    memcpy(bs.root, root, strlen(root) + 1);
    int64_t start = gw__now_ms(), deadline = start + wait_ms;
    int fd = -1;
    gw_status_t st = gw__bs_client_connect(&bs, host, port, start, deadline, &fd);
    if (st != GW_OK)
        return st;
    st = join_on(&bs, fd, token ? token : "", deadline, out);
    close(fd);
    if (st == GW_OK)
        gw__bs_new_root(host, out->port, new_root, cap);
    return st;
}
