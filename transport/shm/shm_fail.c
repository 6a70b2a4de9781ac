/*
 * shm_fail.c - the failure path of the shared-memory transport.
 *
 * As in every transport, the first failure breaks the transport for good:
 * the base (transport/base.c) logs it once, at ERROR, naming the peer by
 * rank and pid (gw__shm_describe_peer), and keeps it as the status every
 * later call returns; here, every pending request completes with it
 * (gw__shm_fail_pending). A failure after abort() carries no message
 * (abort() logs its own). A peer's abort flag comes with the rank that
 * first reported the failure and the rank it blames, which the failure
 * takes over (gw__shm_peer_aborted).
 */
#include <stdio.h>

#include "transport/shm/shm_internal.h"

void gw__shm_fail_pending(gw_transport_t *base, gw_status_t st)
{
    gw_shm_t *t = gw__shm_of(base);
    for (int i = 0; i < t->base.size; i++) {
        gw_shm_peer_t *p = &t->peers[i];
        /* The receive being filled is still at the head of rq. */
        gw__req_queue_fail(&p->sq_head, &p->sq_tail, st);
        gw__req_queue_fail(&p->dq_head, &p->dq_tail, st);
        gw__req_queue_fail(&p->aq_head, &p->aq_tail, st);
        gw__req_queue_fail(&p->rq_head, &p->rq_tail, st);
        p->rreq = NULL;
    }
}

gw_status_t gw__shm_peer_aborted(gw_shm_t *t, gw_shm_peer_t *p, int32_t ab)
{
    gw_abort_info_t got = {
        .status = gw__transport_abort_status(ab),
        .origin = gw__transport_abort_rank(
            atomic_load_explicit(&p->its->abort_origin, memory_order_relaxed), t->base.size),
        .culprit = gw__transport_abort_rank(
            atomic_load_explicit(&p->its->abort_culprit, memory_order_relaxed), t->base.size),
    };
    return gw__transport_peer_aborted(&t->base, p->rank, &got);
}

void gw__shm_tell_abort(gw_shm_peer_t *p, const gw_abort_info_t *why)
{
    atomic_store_explicit(&p->my->abort_origin, why->origin, memory_order_relaxed);
    atomic_store_explicit(&p->my->abort_culprit, why->culprit, memory_order_relaxed);
    atomic_store_explicit(&p->my->abort_status, (int32_t)why->status, memory_order_release);
}

void gw__shm_describe_peer(const gw_transport_t *base, int peer, char *buf, size_t cap)
{
    const gw_shm_t *t = gw__container_of(base, gw_shm_t, base);
    snprintf(buf, cap, "rank %d (pid %ld, shared memory)", peer, (long)t->peers[peer].pid);
}
