/*
 * handle.c - gradwire._core.Handle: a non-blocking call in flight
 * (iallreduce, isend, irecv, iallreduce_compressed).
 *
 * The library owns the buffers until the call completes, so the handle
 * holds their buffer views (which keep the arrays alive and stop numpy
 * from resizing them) and its communicator, and the compressed call's
 * state, until then. wait() releases the GIL while it waits and returns the
 * output array; test() says whether the call is done. Both raise the call's
 * status as gradwire.Error, once done, every time they are asked again.
 *
 * A handle dropped before it completed is waited for by its destructor: the
 * library would otherwise write into freed memory. Comm.close() completes
 * every pending handle first (gw_comm_destroy would complete them with
 * GW_ERR_ABORTED and leave the handles dangling); their wait() then reports
 * how the call ended.
 */
#include "core.h"

#include <stdlib.h>

#include <string.h>

static void unlink_pending(gwpy_handle *h)
{
    if (h->prev != NULL)
        h->prev->next = h->next;
    else if (h->owner != NULL && h->owner->pending == h)
        h->owner->pending = h->next;
    if (h->next != NULL)
        h->next->prev = h->prev;
    h->prev = h->next = NULL;
}

/* The call has finished with status st: give back what it owned. */
static void finish(gwpy_handle *h, gw_status_t st)
{
    h->done = 1;
    h->status = st;
    h->culprit = st != GW_OK && h->owner->comm != NULL ? gw_comm_culprit(h->owner->comm) : -1;
    /* The reason now: the communicator may be gone when it is raised. */
    snprintf(h->reason, sizeof(h->reason), "%s", st != GW_OK ? gwpy_reason(h->owner->comm) : "");
    h->handle = NULL;
    for (int i = 0; i < 2; i++)
        if (h->views[i].obj != NULL)
            PyBuffer_Release(&h->views[i]);
    if (h->state != NULL) {
        ((gwpy_compress_state *)h->state)->inflight--;
        Py_CLEAR(h->state);
    }
    Py_CLEAR(h->keep);
    unlink_pending(h);
}

/* Wait without the GIL (the handle marked busy meanwhile). */
static void wait_released(gwpy_handle *h)
{
    gw_status_t st;
    gw_handle_t *handle = h->handle;
    h->busy = 1;
    h->owner->busy += h->drives_comm;
    Py_BEGIN_ALLOW_THREADS;
    st = gw_wait(handle);
    Py_END_ALLOW_THREADS;
    h->owner->busy -= h->drives_comm;
    h->busy = 0;
    finish(h, st);
}

PyObject *gwpy_handle_new(gwpy_comm *owner, gw_handle_t *handle, const char *what,
                          gwpy_buffer *bufs, int nbufs, PyObject *result, PyObject *state,
                          int drives_comm)
{
    gwpy_handle *h = PyObject_New(gwpy_handle, &gwpy_handle_type);
    if (h == NULL) {
        /* The call runs regardless: complete it before the buffers go. */
        Py_BEGIN_ALLOW_THREADS;
        gw_wait(handle);
        Py_END_ALLOW_THREADS;
        for (int i = 0; i < nbufs; i++)
            gwpy_buffer_release(&bufs[i]);
        return NULL;
    }
    h->handle = handle;
    h->owner = (gwpy_comm *)Py_NewRef((PyObject *)owner);
    h->what = what;
    memset(h->views, 0, sizeof(h->views));
    for (int i = 0; i < nbufs && i < 2; i++) {
        h->views[i] = bufs[i].view;
        memset(&bufs[i], 0, sizeof(bufs[i]));
    }
    h->result = Py_XNewRef(result);
    h->state = Py_XNewRef(state);
    h->keep = NULL;
    h->status = GW_OK;
    h->culprit = -1;
    h->done = 0;
    h->busy = 0;
    h->drives_comm = drives_comm;
    h->thread = PyThread_get_thread_ident();
    h->msg = NULL;
    h->prev = NULL;
    h->next = owner->pending;
    if (owner->pending != NULL)
        owner->pending->prev = h;
    owner->pending = h;
    return (PyObject *)h;
}

void gwpy_comm_complete_pending(gwpy_comm *self)
{
    while (self->pending != NULL) {
        gwpy_handle *h = self->pending;
        if (h->busy) { /* another thread waits on it: let it finish */
            Py_BEGIN_ALLOW_THREADS;
            Py_END_ALLOW_THREADS;
            continue;
        }
        wait_released(h);
    }
}

static int handle_check(gwpy_handle *h)
{
    if (h->busy) {
        PyErr_SetString(PyExc_RuntimeError, "another thread is waiting for this handle");
        return -1;
    }
    if (h->done || !h->drives_comm)
        return 0;
    if (h->thread != PyThread_get_thread_ident()) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: test or wait for a point-to-point handle from the thread that posted it "
                     "(its data moves while that thread does)",
                     h->what);
        return -1;
    }
    if (h->owner->busy) {
        PyErr_Format(PyExc_RuntimeError, "%s: another thread is inside this communicator", h->what);
        return -1;
    }
    return 0;
}

static PyObject *handle_outcome(gwpy_handle *h)
{
    if (h->status != GW_OK)
        return gwpy_raise(h->status, h->what, h->culprit, h->reason);
    return Py_NewRef(h->result != NULL ? h->result : Py_None);
}

static PyObject *handle_wait(PyObject *obj, PyObject *unused)
{
    gwpy_handle *h = (gwpy_handle *)obj;
    (void)unused;
    if (handle_check(h) != 0)
        return NULL;
    if (!h->done)
        wait_released(h);
    return handle_outcome(h);
}

static PyObject *handle_test(PyObject *obj, PyObject *unused)
{
    gwpy_handle *h = (gwpy_handle *)obj;
    (void)unused;
    if (handle_check(h) != 0)
        return NULL;
    if (!h->done) {
        int done = 0;
        gw_status_t st;
        gw_handle_t *handle = h->handle;
        h->busy = 1;
        h->owner->busy += h->drives_comm;
        Py_BEGIN_ALLOW_THREADS;
        st = gw_test(handle, &done);
        Py_END_ALLOW_THREADS;
        h->owner->busy -= h->drives_comm;
        h->busy = 0;
        if (!done && st == GW_OK)
            Py_RETURN_FALSE;
        finish(h, st);
    }
    PyObject *r = handle_outcome(h);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_TRUE;
}

static PyObject *handle_get_done(PyObject *obj, void *unused)
{
    (void)unused;
    return PyBool_FromLong(((gwpy_handle *)obj)->done);
}

/* irecv_tagged's (source, tag, count) once it succeeded; None before, or
 * for any other call. */
static PyObject *handle_get_status(PyObject *obj, void *unused)
{
    gwpy_handle *h = (gwpy_handle *)obj;
    (void)unused;
    if (h->msg == NULL || !h->done || h->status != GW_OK)
        Py_RETURN_NONE;
    return Py_BuildValue("(iin)", h->msg->source, h->msg->tag, (Py_ssize_t)h->msg->count);
}

static PyObject *handle_repr(PyObject *obj)
{
    gwpy_handle *h = (gwpy_handle *)obj;
    if (!h->done)
        return PyUnicode_FromFormat("<gradwire.Handle %s pending>", h->what);
    return PyUnicode_FromFormat("<gradwire.Handle %s done: %s>", h->what,
                                gw_status_name(h->status));
}

static void handle_dealloc(PyObject *obj)
{
    gwpy_handle *h = (gwpy_handle *)obj;
    if (!h->done)
        wait_released(h);
    Py_CLEAR(h->result);
    Py_CLEAR(h->state);
    Py_CLEAR(h->keep);
    Py_CLEAR(h->owner);
    free(h->msg);
    PyObject_Free(obj);
}

static PyMethodDef handle_methods[] = {
    {"wait", handle_wait, METH_NOARGS,
     "wait() -> out: wait for the call (GIL released); its output array, or None for a send. "
     "Raises gradwire.Error with the call's status."},
    {"test", handle_test, METH_NOARGS,
     "test() -> bool: whether the call is done (raises its error once done). isend/irecv move "
     "data only while their thread tests or waits."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef handle_getset[] = {
    {"done", handle_get_done, NULL, "Whether the call has completed (test() or wait()).", NULL},
    {"status", handle_get_status, NULL,
     "irecv_tagged: (source, tag, count) of the message it got, once done; None otherwise.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject gwpy_handle_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gradwire._core.Handle",
    .tp_basicsize = sizeof(gwpy_handle),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A non-blocking call in flight: test() or wait() for it.",
    .tp_dealloc = handle_dealloc,
    .tp_methods = handle_methods,
    .tp_getset = handle_getset,
    .tp_repr = handle_repr,
};
