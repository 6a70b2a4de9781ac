/*
 * bootstrap.c - the out-of-band rendezvous of the ranks of one job (contract
 * in bootstrap.h, wire format in bootstrap_msg.h): its public entry points,
 * and the nonces and the best-effort REJECT that all of its parts use.
 *
 * The rendezvous has three parts, one file each, because each is a state
 * machine of its own: rank 0 accepting and authenticating the other ranks
 * (bootstrap_root.c), every other rank connecting to rank 0 and proving
 * itself (bootstrap_client.c), and the all-gathers over the star of
 * connections that the join leaves open (bootstrap_gather.c). This file
 * checks the parameters, hands the join to the part for this rank, and
 * holds what every part needs beyond the sockets themselves (whose
 * non-blocking transfers with deadlines, addresses as text and connection
 * attempts are the socket module's, transport/sock.h, shared with the
 * transports): nonces, and the best-effort REJECT sent on the way out of a
 * failure.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/sha256.h"
#include "transport/bootstrap/bootstrap_internal.h"

/* ---- what every part needs ---------------------------------------------- */

gw_status_t gw__bs_random_bytes(const gw_logger_t *lg, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom((uint8_t *)buf + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            GW_ERROR(lg, GW_BS_SUBSYS, "getrandom failed: %m");
            return GW_ERR_SYSTEM;
        }
        got += (size_t)r;
    }
    return GW_OK;
}

/* Best effort, never blocks: used on the way out of a failure, when the peer
 * may already be gone. The REJECT is small and our side of the stream is at
 * a message boundary whenever this is called, so it goes out whole or not at
 * all. */
void gw__bs_send_reject_nowait(int fd, gw_status_t status, const char *reason)
{
    uint8_t msg[GW_BS_REJECT_MAX_LEN];
    size_t n = gw__bs_encode_reject(status, reason, msg);
    (void)send(fd, msg, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void gw__bs_send_verdict_nowait(int fd, gw_status_t status, int culprit, const char *reason)
{
    gw_bs_verdict_t v = {.status = status, .culprit = culprit, .origin = 0, .seq = 0};
    snprintf(v.reason, sizeof(v.reason), "%s", reason ? reason : "");
    uint8_t msg[GW_BS_VERDICT_MAX_LEN];
    size_t n = gw__bs_encode_verdict(&v, msg);
    (void)send(fd, msg, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* ======================= the public entry points ========================= */

/* No token, no job, unless asked: without a token every connection's proof
 * is made with the empty key, so anyone who can reach the root or a data
 * port joins as a rank and reads the job's data (it was seen to happen: a
 * local stranger was admitted as two ranks of a job that only warned). So
 * a job of several ranks needs a token, from the user (GW_JOB_TOKEN,
 * GW_JOB_TOKEN_FILE) or from its launcher (gradwire launch draws one;
 * under mpirun rank 0 draws one and hands it over through PMIx; the torch
 * backend hands one over through torch's Store), and is refused without;
 * GW_INSECURE=1 lets it run, and then every rank says what that means. */
static gw_status_t check_token(const gw_bootstrap_params_t *params)
{
    if (params->size == 1 || (params->token && params->token[0]))
        return GW_OK;
    if (!params->insecure) {
        GW_ERROR(params->log, GW_BS_SUBSYS,
                 "no job token: a job of %d ranks without one would let anyone who can reach "
                 "its ports join as a rank. Set GW_JOB_TOKEN (a secret, the same on every rank) "
                 "or GW_JOB_TOKEN_FILE (a file readable only by you, holding it), or start the "
                 "job with a launcher that provides one (gradwire launch; mpirun through PMIx; "
                 "torch.distributed with the gradwire backend, through its Store). Under "
                 "torchrun or srun, export GW_JOB_TOKEN before starting it, or point "
                 "GW_JOB_TOKEN_FILE at a file in the job's private directory. GW_INSECURE=1 "
                 "runs without a token, at your own risk",
                 params->size);
        return GW_ERR_CONFIG;
    }
    GW_WARN(params->log, GW_BS_SUBSYS,
            "GW_INSECURE=1 and no job token: this job is unauthenticated; anyone who can reach "
            "its ports (the root %s and every rank's data ports) gets in as a rank and sees its "
            "data",
            params->root ? params->root : "(none)");
    return GW_OK;
}

gw_status_t gw__bootstrap_open(const gw_bootstrap_params_t *params, gw_bootstrap_t **out)
{
    if (!params || !out)
        return GW_ERR_INVALID_ARG;
    if (params->culprit)
        *params->culprit = -1;
    const gw_logger_t *lg = params->log;
    if (params->size < 1) {
        GW_ERROR(lg, GW_BS_SUBSYS, "bootstrap size %d: a job has at least one rank", params->size);
        return GW_ERR_CONFIG;
    }
    if (params->rank < 0 || params->rank >= params->size) {
        GW_ERROR(lg, GW_BS_SUBSYS, "bootstrap rank %d is outside [0, %d)", params->rank,
                 params->size);
        return GW_ERR_CONFIG;
    }
    if (params->timeout_ms <= 0) {
        GW_ERROR(lg, GW_BS_SUBSYS, "bootstrap timeout %d ms: it must be positive",
                 params->timeout_ms);
        return GW_ERR_CONFIG;
    }
    char host[256];
    char port[8] = "";
    if (params->size > 1 || params->root) {
        int p = 0;
        if (!params->root) {
            GW_ERROR(lg, GW_BS_SUBSYS, "no root address (host:port) for a job of %d ranks",
                     params->size);
            return GW_ERR_CONFIG;
        }
        if (gw__parse_hostport(params->root, host, sizeof(host), &p) != GW_OK ||
            strlen(params->root) >= GW_BS_ROOT_TEXT) {
            GW_ERROR(lg, GW_BS_SUBSYS,
                     "root address \"%s\" is not host:port or [ipv6]:port with a port in "
                     "1..65535",
                     params->root);
            return GW_ERR_CONFIG;
        }
        snprintf(port, sizeof(port), "%d", p);
    }
    if (check_token(params) != GW_OK)
        return GW_ERR_CONFIG;
    gw_bootstrap_t *bs = calloc(1, sizeof(*bs));
    if (!bs) {
        GW_ERROR(lg, GW_BS_SUBSYS, "out of memory");
        return GW_ERR_NO_MEMORY;
    }
    bs->rank = params->rank;
    bs->size = params->size;
    bs->timeout_ms = params->timeout_ms;
    bs->join_timeout_ms =
        params->join_timeout_ms > 0 ? params->join_timeout_ms : params->timeout_ms;
    bs->progress_ms = params->join_progress_ms > 0 ? params->join_progress_ms : 10000;
    bs->log = lg;
    bs->failed = GW_OK;
    bs->culprit = -1;
    bs->root_fd = -1;
    bs->late_lfd = -1;
    bs->heir_lfd = -1;
    bs->ring_min = params->ring_min > 0 ? params->ring_min : GW_BOOTSTRAP_RING_MIN_DEFAULT;
    if (params->root)
        memcpy(bs->root, params->root, strlen(params->root) + 1);
    if (params->rank == 0 && params->size > 1 &&
        !(bs->token = strdup(params->token ? params->token : ""))) {
        GW_ERROR(lg, GW_BS_SUBSYS, "out of memory");
        free(bs);
        return GW_ERR_NO_MEMORY;
    }

    const char *token = params->token ? params->token : "";
    const uint8_t *key = (const uint8_t *)token;
    size_t key_len = strlen(token);
    int64_t start = gw__now_ms();
    int64_t deadline = start + bs->join_timeout_ms;
    gw_status_t st;
    if (bs->size == 1)
        st = gw__bs_random_bytes(lg, bs->job_id, sizeof(bs->job_id)); /* no network at all */
    else if (bs->rank == 0)
        st = gw__bs_root_open(bs, host, port, key, key_len, start, deadline);
    else
        st = gw__bs_client_join(bs, host, port, key, key_len, start, deadline);
    if (st != GW_OK) {
        if (params->culprit)
            *params->culprit = bs->culprit;
        gw__bootstrap_close(bs);
        return st;
    }
    /* One place derives the data-plane key, from the token and the job id:
     * a key per job, so a proof seen in one job admits to no other. */
    static const char label[] = "gradwire data plane";
    gw_hmac_sha256_t h;
    gw__hmac_sha256_init(&h, key, key_len);
    gw__hmac_sha256_update(&h, label, sizeof(label) - 1);
    gw__hmac_sha256_update(&h, bs->job_id, sizeof(bs->job_id));
    gw__hmac_sha256_final(&h, bs->data_key);
    /* The ring all-gather's connections prove the token with a key of their
     * own, bound to the job the same way (bootstrap_ring.c). */
    static const char ring_label[] = "gradwire bootstrap ring";
    gw__hmac_sha256_init(&h, key, key_len);
    gw__hmac_sha256_update(&h, ring_label, sizeof(ring_label) - 1);
    gw__hmac_sha256_update(&h, bs->job_id, sizeof(bs->job_id));
    gw__hmac_sha256_final(&h, bs->ring_key);
    /* So do the requests of a succession, when rank 0 died (bootstrap_heir.c). */
    static const char heir_label[] = "gradwire heir";
    gw__hmac_sha256_init(&h, key, key_len);
    gw__hmac_sha256_update(&h, heir_label, sizeof(heir_label) - 1);
    gw__hmac_sha256_update(&h, bs->job_id, sizeof(bs->job_id));
    gw__hmac_sha256_final(&h, bs->heir_key);
    *out = bs;
    return GW_OK;
}

int gw__bootstrap_culprit(const gw_bootstrap_t *bs)
{
    return bs && bs->failed != GW_OK ? bs->culprit : -1;
}

void gw__bootstrap_data_key(const gw_bootstrap_t *bs, uint8_t key[32])
{
    if (bs)
        memcpy(key, bs->data_key, sizeof(bs->data_key));
    else
        memset(key, 0, sizeof(bs->data_key));
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

void gw__bootstrap_close(gw_bootstrap_t *bs)
{
    if (!bs)
        return;
    gw__bs_referee_stop(bs->referee);        /* it holds fds[] while it runs */
    gw__bs_heir_answerer_stop(bs->answerer); /* it holds heir_lfd */
    if (bs->heir_lfd >= 0)
        close(bs->heir_lfd);
    free(bs->heirs);
    explicit_bzero(bs->heir_key, sizeof(bs->heir_key));
    if (bs->root_fd >= 0)
        close(bs->root_fd);
    if (bs->late_lfd >= 0)
        close(bs->late_lfd);
    if (bs->fds)
        for (int r = 0; r < bs->size; r++)
            if (bs->fds[r] >= 0)
                close(bs->fds[r]);
    free(bs->fds);
    free(bs->peer_addr);
    if (bs->token) {
        explicit_bzero(bs->token, strlen(bs->token));
        free(bs->token);
    }
    explicit_bzero(bs->job_id, sizeof(bs->job_id));
    explicit_bzero(bs->data_key, sizeof(bs->data_key));
    explicit_bzero(bs->ring_key, sizeof(bs->ring_key));
    free(bs);
}
