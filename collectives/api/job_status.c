/*
 * job_status.c - gw_job_status: how a running job's ranks are doing, from
 * its rank 0 (the query is transport/bootstrap/bootstrap_status.c's, the
 * news the ranks' pulses, collectives/comm/pulse.c), turned into the
 * public records with the collectives' names and ages counted to now.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/comm/flight_recorder.h"
#include "collectives/comm/launch_env.h"
#include "common/env.h"
#include "transport/bootstrap/bootstrap.h"

#define DEFAULT_TIMEOUT_MS 2000

gw_status_t gw_job_status(const char *root, const char *token, int timeout_ms,
                          gw_rank_status_t **ranks, int *size)
{
    if (!ranks || !size)
        return GW_ERR_INVALID_ARG;
    gw_logger_t lg;
    gw_status_t st = gw__logger_init(&lg, -1);
    if (st != GW_OK)
        return st;
    char file_token[512];
    if (!root && (st = gw__env_str(&lg, GW_ENV_ROOT, &root)) != GW_OK)
        goto out;
    if (!token && (st = gw__env_str(&lg, GW_ENV_JOB_TOKEN, &token)) == GW_OK && !token)
        st = gw__launch_env_token_file(&lg, file_token, sizeof(file_token), &token);
    if (st != GW_OK)
        goto out;
    uint32_t n = 0, sz = 0;
    struct gw_bs_rank_status *got = NULL;
    st = gw__bootstrap_status(&lg, root, token, timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS,
                              &sz, &got, &n);
    if (st != GW_OK)
        goto out;
    gw_rank_status_t *r = calloc(sz, sizeof(*r));
    if (!r) {
        free(got);
        st = GW_ERR_NO_MEMORY;
        goto out;
    }
    for (uint32_t i = 0; i < sz; i++) {
        r[i].rank = (int)i;
        r[i].waiting_on = -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        const gw_bs_pulse_t *p = &got[i].pulse;
        gw_rank_status_t *o = &r[got[i].rank];
        o->known = 1;
        o->running = (int)p->running;
        if (p->seq)
            snprintf(o->op, sizeof(o->op), "%s", gw__fr_kind_name(p->op_kind));
        o->seq = p->seq;
        o->step = p->step;
        o->waiting_on = p->waiting_on;
        o->age_s = got[i].age_ms / 1e3;
        o->for_s = p->since_ms / 1e3 + o->age_s;
        o->done = p->done;
        o->bytes_sent = p->bytes_sent;
        o->bytes_recv = p->bytes_recv;
        o->npeers = (int)(p->npeers < 16 ? p->npeers : 16);
        for (int k = 0; k < o->npeers; k++) {
            o->peers[k].peer = (int)p->peers[k].peer;
            o->peers[k].sent = p->peers[k].sent;
            o->peers[k].recv = p->peers[k].recv;
        }
    }
    free(got);
    *ranks = r;
    *size = (int)sz;
out:
    explicit_bzero(file_token, sizeof(file_token));
    gw__logger_fini(&lg);
    return st;
}

void gw_job_status_free(gw_rank_status_t *ranks) { free(ranks); }
