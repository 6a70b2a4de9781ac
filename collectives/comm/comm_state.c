/*
 * comm_state.c - the communicator's shared state helpers: the sticky failure
 * that turns the first error into every later call's answer (with the
 * culprit agreed on with the other ranks first: blame.c), the claim on
 * the transport that lets one thread at a time drive it (the caller's, the
 * progress thread of async.c, or gw_comm_abort's in api/comm_init.c), and the
 * scratch memory the algorithms borrow.
 */
#include <sched.h>
#include <stdlib.h>

#include "collectives/comm/comm.h"
#include "collectives/comm/flight_recorder.h"

gw_status_t gw__comm_fail(gw_comm_t *comm, gw_status_t status)
{
    const gw_transport_t *t = comm->transport;
    if (t && t->failed != GW_OK)
        return gw__comm_fail_blame(comm, status, t->culprit, t->origin, t->blame);
    /* Nothing broke below us: the failure is this rank's own (a bad
     * argument, gw_comm_abort, no memory), and it says so, so that a
     * launcher or a peer learns which rank to look at. Blame speaks in
     * the root's ranks (comm.h). */
    int self = gw__comm_to_root(comm, comm->rank);
    return gw__comm_fail_blame(comm, status, self, self, GW_BLAME_SELF);
}

int gw__comm_from_root(const gw_comm_t *comm, int root_rank)
{
    if (!comm->to_root)
        return root_rank >= 0 && root_rank < comm->size ? root_rank : -1;
    for (int r = 0; r < comm->size; r++)
        if (comm->to_root[r] == root_rank)
            return r;
    return -1;
}

gw_status_t gw__comm_fail_blame(gw_comm_t *comm, gw_status_t status, int culprit, int origin,
                                gw_blame_kind_t kind)
{
    gw_comm_blame_t b = {
        .status = status, .culprit = culprit, .origin = origin, .kind = kind, .waiting_on = -1};
    return gw__comm_fail_with(comm, &b);
}

gw_status_t gw__comm_fail_with(gw_comm_t *comm, gw_comm_blame_t *b)
{
    if (b->status == GW_OK)
        return comm->failed;
    if (comm->failed != GW_OK)
        return comm->failed;
    /* Every rank names the same culprit: the referee's (blame.c). */
    if (!b->settled)
        gw__comm_blame_settle(comm, b);
    gw_status_t status = b->status;
    /* The recorder's picture of this moment: the call in progress, the
     * step it waits in (GW_FR_DUMP). */
    gw__fr_dump(comm->fr, status == GW_ERR_TIMEOUT   ? "timeout"
                          : status == GW_ERR_ABORTED ? "abort"
                                                     : gw_status_name(status));
    comm->failed = status;
    /* b names root ranks; the communicator keeps its own (a sub-
     * communicator's culprit may be no member of it: then -1). */
    const int root_size = gw__comm_root(comm)->size;
    const int culprit = b->culprit >= 0 && b->culprit < root_size ? b->culprit : -1;
    const int origin =
        b->origin >= 0 && b->origin < root_size ? b->origin : gw__comm_to_root(comm, comm->rank);
    comm->culprit = gw__comm_from_root(comm, culprit);
    comm->origin = gw__comm_from_root(comm, origin);
    /* A sub-communicator's transport logs through its root's logger: the
     * cause, which this thread logged just now, becomes the child's last
     * error too (gw_last_error(child)); the lines below only sum it up. */
    if (comm->root && comm->transport && comm->transport->failed != GW_OK)
        gw__log_record_slot(&comm->last_error, gw__log_last_error(NULL));
    if (comm->root && culprit >= 0 && comm->culprit >= 0)
        GW_ERROR_SUMMARY(
            &comm->log, "coll",
            "sub-communicator 0x%08x failed (%s): blaming its rank %d (rank %d of the root "
            "communicator, as the messages above name it)",
            (unsigned)comm->id, gw_status_str(status), comm->culprit, culprit);
    else if (comm->root && culprit >= 0)
        GW_ERROR_SUMMARY(
            &comm->log, "coll",
            "sub-communicator 0x%08x failed (%s): blaming rank %d of the root communicator, "
            "which is not a member of this one",
            (unsigned)comm->id, gw_status_str(status), culprit);
    /* Tell the peers now: they may be blocked on us in this collective, and
     * an abort frame ends their wait with our reason instead of a timeout.
     * It passes on whom we blame and who reported it first, so that a rank
     * that hears of the failure from us blames the same rank, not us. The
     * transport also drops every request still queued, so requests that
     * live on an algorithm's stack are never touched after it returns. */
    if (comm->transport) {
        gw_abort_info_t why = {.status = status, .origin = origin, .culprit = culprit};
        comm->transport->ops->abort(comm->transport, &why);
    }
    return status;
}

/* The claim is a flag, not a mutex, because gw_comm_abort must never wait
 * for a collective to finish: it takes the transport only when nobody holds
 * it, and otherwise leaves the abort to the holder, which sees the request
 * in its next progress round (p2p.c) or, at the latest, when it gives the
 * transport back (gw__comm_drive_end). Both sides set their own flag before
 * they test the other's (sequentially consistent atomics), so one of them
 * always acts. A sub-communicator claims its root's flag: they share one
 * transport (comm.h). */
void gw__comm_drive_begin(gw_comm_t *comm)
{
    atomic_int *driving = &gw__comm_root(comm)->driving;
    int free_ = 0;
    while (!atomic_compare_exchange_weak(driving, &free_, 1)) {
        free_ = 0;
        sched_yield(); /* gw_comm_abort is telling the peers: a moment */
    }
}

void gw__comm_drive_end(gw_comm_t *comm)
{
    atomic_int *driving = &gw__comm_root(comm)->driving;
    atomic_store(driving, 0);
    int free_ = 0;
    if (gw__comm_abort_requested(comm) && atomic_compare_exchange_strong(driving, &free_, 1)) {
        gw__comm_fail(comm, GW_ERR_ABORTED);
        atomic_store(driving, 0);
    }
}

/* The calling thread's identity: the address of a thread-local byte,
 * distinct for every live thread and never 0. */
static _Thread_local char thread_anchor;

gw_status_t gw__comm_enter(gw_comm_t *comm, const char *what)
{
    gw_comm_t *root = gw__comm_root(comm);
    const uintptr_t self = (uintptr_t)&thread_anchor;
    uintptr_t holder = 0;
    if (atomic_compare_exchange_strong(&root->caller, &holder, self)) {
        root->caller_depth = 1;
        /* Only ever read for the refusal's message below: no order needed. */
        atomic_store_explicit(&root->caller_comm, comm->id, memory_order_relaxed);
        return GW_OK;
    }
    if (holder == self) {
        root->caller_depth++;
        return GW_OK;
    }
    /* Waiting would not help: the other thread's call may itself wait for a
     * peer that runs this family's calls in another order. Abort instead,
     * so that no rank waits for calls that can no longer match. */
    const unsigned other = atomic_load_explicit(&root->caller_comm, memory_order_relaxed);
    GW_ERROR(&comm->log, "api",
             "%s on communicator 0x%08x refused: another thread is inside a call on communicator "
             "0x%08x, and the two share a transport (one was split or duplicated from the "
             "other, or they are the same); communicators made by gw_comm_split or gw_comm_dup "
             "must be called from one thread at a time together with the communicator they came "
             "from (see gradwire.h); aborting them",
             what, (unsigned)comm->id, other);
    /* The thread inside learns only that it was aborted: the reason goes
     * into the family's own slot too (gw_last_error(root)). */
    if (root != comm)
        gw__log_record_slot(&root->last_error, gw__log_last_error(NULL));
    atomic_store(&root->abort_requested, 1);
    return GW_ERR_UNSUPPORTED;
}

void gw__comm_leave(gw_comm_t *comm)
{
    gw_comm_t *root = gw__comm_root(comm);
    /* Release, pairing with the next caller's compare-exchange: what this
     * call did happens before that one starts. A sequentially consistent
     * store (xchg on x86) cost a locked instruction on every public call. */
    if (--root->caller_depth == 0)
        atomic_store_explicit(&root->caller, 0, memory_order_release);
}

gw_status_t gw__comm_scratch(gw_comm_t *comm, size_t len, void **out)
{
    if (len <= comm->scratch_len) {
        *out = comm->scratch;
        return GW_OK;
    }
    /* Page-aligned so that later zero-copy transports can register it. */
    void *p = NULL;
    if (posix_memalign(&p, 4096, len) != 0) {
        GW_ERROR(&comm->log, "coll", "cannot allocate %zu bytes of scratch memory", len);
        return GW_ERR_NO_MEMORY;
    }
    free(comm->scratch);
    comm->scratch = p;
    comm->scratch_len = len;
    *out = p;
    return GW_OK;
}
