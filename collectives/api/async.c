/*
 * async.c - non-blocking collectives: a progress thread per communicator.
 *
 * The algorithms are written as straight-line code that waits on the
 * transport. Rather than turn each into a state machine, the first gw_i*
 * call gives the communicator a progress thread that runs queued collectives
 * one after another, in call order, with the very same code; the caller's
 * thread is free to compute (e.g. the rest of backward) meanwhile. From then
 * on blocking calls are queued too and waited for, so every collective still
 * runs on one thread, in the order the application issued them, which is
 * what keeps ranks matched. A communicator that never uses gw_i* calls never
 * gets a thread.
 *
 * Sub-communicators (comm_split.c) share their root's thread and queue,
 * rather than each having its own: the transport is one, so only one
 * thread can drive it at a time anyway, and one queue runs a process's
 * calls on all its communicators in the order it issued them. Separate
 * queues would race for the transport and could run a parent's call
 * before a child's call issued first, in another order on another rank:
 * a deadlock or a mismatch where the application did nothing wrong. Each
 * handle names its own communicator, which the thread runs it on.
 *
 * Handles are allocated per call and freed by gw_wait (or by gw_test when it
 * reports completion). Their `done` flag is atomic, so a finished handle is
 * read without touching the communicator, even after gw_comm_destroy.
 *
 * Every call carries its own execute function in its handle (api.c's for
 * the dense collectives, compress_api.c's for the compressed allreduce,
 * whose handle also carries the compression state), so the scheduler knows
 * no collective and no codec: it only keeps the order. Compressed calls
 * keep their place like every other collective, and their state, its
 * buffers and the transport are only ever used by the progress thread
 * until the handle completes. The store of `done` after the call (under
 * the lock, and sequentially consistent) is what makes the results (a
 * compressed call's new residual and statistics included) visible to the
 * thread that sees the handle done.
 */
#include <pthread.h>
#include <stdlib.h>

#include "collectives/api/api.h"
#include "collectives/comm/comm.h"
#include "collectives/device/device.h"

struct gw_async {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t work;     /* queue became non-empty, or stop */
    pthread_cond_t finished; /* some handle completed */
    gw_handle_t *head, *tail;
    int stopping;
};

static void *progress_thread(void *arg)
{
    gw_comm_t *comm = arg;
    struct gw_async *as = comm->async;
    pthread_mutex_lock(&as->lock);
    for (;;) {
        while (!as->head && !as->stopping)
            pthread_cond_wait(&as->work, &as->lock);
        gw_handle_t *h = as->head;
        if (!h)
            break; /* stopping with an empty queue */
        as->head = h->next;
        if (!as->head)
            as->tail = NULL;
        pthread_mutex_unlock(&as->lock);

        gw__comm_drive_begin(h->comm);
        gw_status_t st = h->execute(h->comm, h);
        gw__comm_drive_end(h->comm);

        pthread_mutex_lock(&as->lock);
        h->status = st;
        atomic_store(&h->done, 1);
        pthread_cond_broadcast(&as->finished);
    }
    pthread_mutex_unlock(&as->lock);
    return NULL;
}

static gw_status_t async_start(gw_comm_t *comm)
{
    struct gw_async *as = calloc(1, sizeof(*as));
    if (!as)
        return GW_ERR_NO_MEMORY;
    pthread_mutex_init(&as->lock, NULL);
    pthread_cond_init(&as->work, NULL);
    pthread_cond_init(&as->finished, NULL);
    comm->async = as;
    int rc = pthread_create(&as->thread, NULL, progress_thread, comm);
    if (rc != 0) {
        GW_ERROR(&comm->log, "async", "cannot start the progress thread: error %d", rc);
        comm->async = NULL;
        pthread_cond_destroy(&as->finished);
        pthread_cond_destroy(&as->work);
        pthread_mutex_destroy(&as->lock);
        free(as);
        return GW_ERR_SYSTEM;
    }
    GW_INFO(&comm->log, "async", "progress thread started for non-blocking collectives");
    return GW_OK;
}

static void enqueue(struct gw_async *as, gw_handle_t *h)
{
    pthread_mutex_lock(&as->lock);
    if (as->tail)
        as->tail->next = h;
    else
        as->head = h;
    as->tail = h;
    pthread_cond_signal(&as->work);
    pthread_mutex_unlock(&as->lock);
}

static gw_status_t wait_done(gw_handle_t *h)
{
    if (!atomic_load(&h->done)) {
        struct gw_async *as = gw__comm_root(h->comm)->async;
        pthread_mutex_lock(&as->lock);
        while (!atomic_load(&h->done))
            pthread_cond_wait(&as->finished, &as->lock);
        pthread_mutex_unlock(&as->lock);
    }
    return h->status;
}

gw_status_t gw__async_run(gw_comm_t *comm, const gw_handle_t *call, const char *what)
{
    if (comm->group) /* inside gw_group_start/end: queued (group.c) */
        return gw__group_add_call(comm, call, what);
    gw_status_t st = gw__comm_enter(comm, what);
    if (st != GW_OK)
        return st;
    st = gw__async_run_unguarded(comm, call, what);
    gw__comm_leave(comm);
    return st;
}

gw_status_t gw__async_run_unguarded(gw_comm_t *comm, const gw_handle_t *call, const char *what)
{
    gw_status_t st = gw__p2p_check_idle(comm, what);
    if (st != GW_OK)
        return st;
    /* Device buffers go through the staged executor (collectives/device). */
    gw_handle_t h = *call;
    if ((st = gw__device_prepare(comm, &h)) != GW_OK)
        return st;
    struct gw_async *as = gw__comm_root(comm)->async;
    if (!as) {
        gw__comm_drive_begin(comm);
        st = h.execute(comm, &h);
        gw__comm_drive_end(comm);
        return st;
    }
    h.next = NULL;
    h.comm = comm;
    atomic_init(&h.done, 0);
    enqueue(as, &h);
    return wait_done(&h);
}

void gw__async_stop(gw_comm_t *comm)
{
    comm = gw__comm_root(comm);
    struct gw_async *as = comm->async;
    if (!as)
        return;
    pthread_mutex_lock(&as->lock);
    as->stopping = 1;
    pthread_cond_signal(&as->work);
    pthread_mutex_unlock(&as->lock);
    /* The thread drains the queue first: every outstanding handle completes
     * (with an error if the communicator failed), so none is left waiting. */
    pthread_join(as->thread, NULL);
    comm->async = NULL;
    pthread_cond_destroy(&as->finished);
    pthread_cond_destroy(&as->work);
    pthread_mutex_destroy(&as->lock);
    free(as);
}

static gw_status_t async_start_entered(gw_comm_t *comm, const gw_handle_t *call,
                                       gw_handle_t **handle);

gw_status_t gw__async_start(gw_comm_t *comm, const gw_handle_t *call, gw_handle_t **handle)
{
    gw_status_t st = gw__group_refuse(comm, "a non-blocking call");
    if (st != GW_OK)
        return st;
    st = gw__comm_enter(comm, "a non-blocking call");
    if (st != GW_OK)
        return st;
    st = async_start_entered(comm, call, handle);
    gw__comm_leave(comm);
    return st;
}

static gw_status_t async_start_entered(gw_comm_t *comm, const gw_handle_t *call,
                                       gw_handle_t **handle)
{
    gw_status_t st = gw__p2p_check_idle(comm, "a non-blocking collective");
    if (st != GW_OK)
        return st;
    gw_comm_t *root = gw__comm_root(comm);
    if (!root->async && (st = async_start(root)) != GW_OK)
        return st;
    gw_handle_t *h = calloc(1, sizeof(*h));
    if (!h)
        return GW_ERR_NO_MEMORY;
    *h = *call;
    if ((st = gw__device_prepare(comm, h)) != GW_OK) {
        free(h);
        return st;
    }
    h->next = NULL;
    h->comm = comm;
    atomic_init(&h->done, 0);
    enqueue(root->async, h);
    *handle = h;
    return GW_OK;
}

gw_status_t gw_test(gw_handle_t *handle, int *done)
{
    if (!handle || !done)
        return GW_ERR_INVALID_ARG;
    if (handle->is_p2p)
        return gw__p2p_handle_test(handle, done);
    if (!atomic_load(&handle->done)) {
        *done = 0;
        return GW_OK;
    }
    gw_status_t st = handle->status;
    free(handle);
    *done = 1;
    return st;
}

gw_status_t gw_wait(gw_handle_t *handle)
{
    if (!handle)
        return GW_ERR_INVALID_ARG;
    if (handle->is_p2p)
        return gw__p2p_handle_wait(handle);
    gw_status_t st = wait_done(handle);
    free(handle);
    return st;
}
