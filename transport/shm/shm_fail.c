/*
 * shm_fail.c - the failure path of the shared-memory transport.
 *
 * As in TCP, the first failure breaks the transport for good: it is logged
 * once, at ERROR, naming the peer (rank and pid) and what happened; every
 * pending request completes with it; and every later call returns it. A
 * failure after abort() carries no message (abort() logs its own).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "transport/shm/shm_internal.h"

static void fail_queue(gw_request_t **head, gw_request_t **tail, gw_status_t st)
{
    gw_request_t *r = *head;
    while (r) {
        gw_request_t *next = r->next;
        r->next = NULL;
        r->status = st;
        r->complete = 1;
        r = next;
    }
    *head = *tail = NULL;
}

gw_status_t gw__shm_fail(gw_shm_t *t, gw_status_t st, const char *fmt, ...)
{
    if (t->failed != GW_OK)
        return t->failed;
    if (fmt && t->base.log && t->base.log->level >= GW_LOG_ERROR) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        GW_ERROR(t->base.log, GW_SHM_SUBSYS, "%s", msg);
    }
    t->failed = st;
    for (int i = 0; i < t->base.size; i++) {
        gw_shm_peer_t *p = &t->peers[i];
        /* The receive being filled is still at the head of rq. */
        fail_queue(&p->sq_head, &p->sq_tail, st);
        fail_queue(&p->dq_head, &p->dq_tail, st);
        fail_queue(&p->rq_head, &p->rq_tail, st);
        p->rreq = NULL;
    }
    return st;
}

gw_status_t gw__shm_peer_fail(gw_shm_t *t, const gw_shm_peer_t *p, gw_status_t st,
                              const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return gw__shm_fail(t, st, "rank %d (pid %ld, shared memory) %s", p->rank, (long)p->pid, msg);
}

/* An abort flag holds the peer's status; anything we do not know as a
 * failure status still means the peer aborted. */
gw_status_t gw__shm_abort_status(int32_t flag)
{
    gw_status_t st = (gw_status_t)flag;
    if (flag <= 0 || strcmp(gw_status_name(st), "GW_UNKNOWN_STATUS") == 0)
        return GW_ERR_ABORTED;
    return st;
}
