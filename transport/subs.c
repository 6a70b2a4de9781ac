/*
 * subs.c - the sub-transports of a composite transport (contract in
 * subs.h).
 */
#include "transport/subs.h"

#include <stdlib.h>

#include "transport/base.h"

/* Forget the requests of sub-transport i that completed. */
static void prune(gw_subs_t *s, gw_sub_t *sub)
{
    for (int k = 0; k < sub->npend;) {
        if (sub->pend[k]->complete) {
            sub->pend[k] = sub->pend[--sub->npend];
            s->completed++;
        } else {
            k++;
        }
    }
}

static void prune_all(gw_subs_t *s)
{
    for (int i = 0; i < s->n; i++)
        prune(s, &s->sub[i]);
}

gw_status_t gw__subs_fail(gw_subs_t *s, int i, gw_status_t st)
{
    gw_transport_t *o = s->owner;
    if (o->failed == GW_OK) {
        const gw_transport_t *t = s->sub[i].t;
        o->failed = st;
        o->culprit = t ? t->culprit : -1;
        o->origin = t ? t->origin : -1;
        o->blame = t ? t->blame : GW_BLAME_NONE;
        /* Their peers hear the failing sub-transport's culprit and origin,
         * as they would from the communicator's own abort. */
        gw_abort_info_t why = {.status = st, .origin = o->origin, .culprit = o->culprit};
        for (int k = 0; k < s->n; k++)
            if (k != i && s->sub[k].t)
                s->sub[k].t->ops->abort(s->sub[k].t, &why);
    }
    prune_all(s);
    return o->failed;
}

gw_status_t gw__subs_post(gw_subs_t *s, int i, gw_request_t *req, int send)
{
    gw_sub_t *sub = &s->sub[i];
    if (sub->npend == sub->cap) {
        int cap = sub->cap ? 2 * sub->cap : 16;
        gw_request_t **p = realloc(sub->pend, (size_t)cap * sizeof(*p));
        if (!p) {
            GW_ERROR(s->owner->log, s->subsys, "out of memory for %d pending requests", cap);
            return GW_ERR_NO_MEMORY;
        }
        sub->pend = p;
        sub->cap = cap;
    }
    gw_status_t st = send ? sub->t->ops->isend(sub->t, req) : sub->t->ops->irecv(sub->t, req);
    if (st == GW_OK && !req->complete)
        sub->pend[sub->npend++] = req;
    if (st != GW_OK && st != GW_ERR_INVALID_ARG)
        return gw__subs_fail(s, i, st); /* the sub-transport broke */
    prune(s, sub);
    return st;
}

gw_status_t gw__subs_progress(gw_subs_t *s, int i, const gw_msg_tag_t *current, int wait_ms)
{
    gw_sub_t *sub = &s->sub[i];
    gw_status_t st = sub->t->ops->progress(sub->t, current, wait_ms);
    prune(s, sub);
    return st == GW_OK ? GW_OK : gw__subs_fail(s, i, st);
}

gw_status_t gw__subs_round(gw_subs_t *s, const gw_msg_tag_t *current)
{
    for (int i = 0; i < s->n; i++) {
        if (!s->sub[i].t)
            continue;
        gw_status_t st = gw__subs_progress(s, i, current, 0);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

uint64_t gw__subs_moved(const gw_subs_t *s)
{
    uint64_t n = s->completed;
    for (int i = 0; i < s->n; i++)
        for (int k = 0; k < s->sub[i].npend; k++)
            n += s->sub[i].pend[k]->bytes_done;
    return n;
}

int gw__subs_busy(const gw_subs_t *s)
{
    int busy = -1;
    for (int i = 0; i < s->n; i++) {
        if (!s->sub[i].t || s->sub[i].npend == 0)
            continue;
        if (busy >= 0)
            return -2;
        busy = i;
    }
    return busy;
}

void gw__subs_abort(gw_subs_t *s, const gw_abort_info_t *why)
{
    gw_transport_t *o = s->owner;
    if (o->failed == GW_OK) {
        o->failed = GW_ERR_ABORTED;
        o->culprit = why ? why->culprit : -1;
        o->origin = why && why->origin >= 0 ? why->origin : o->rank;
        o->blame = GW_BLAME_ABORT;
    }
    for (int i = 0; i < s->n; i++)
        if (s->sub[i].t)
            s->sub[i].t->ops->abort(s->sub[i].t, why);
    prune_all(s);
}

void gw__subs_close(gw_subs_t *s)
{
    for (int i = 0; i < s->n; i++) {
        if (s->sub[i].t)
            s->sub[i].t->ops->close(s->sub[i].t);
        s->sub[i].t = NULL;
        free(s->sub[i].pend);
        s->sub[i].pend = NULL;
        s->sub[i].npend = s->sub[i].cap = 0;
    }
}
