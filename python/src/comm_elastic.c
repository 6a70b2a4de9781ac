/*
 * comm_elastic.c - a job that loses and gains ranks, from Python: Comm.shrink
 * (gw_comm_shrink), Comm.grow (gw_comm_grow), Comm.joiners
 * (gw_comm_joiners) and the classmethod Comm.join (gw_comm_join), behind the torch backend's shrink, grow and join
 * (python/gradwire/torch.py) and a torchft-style quorum on them
 * (python/examples/torch_quorum.py).
 *
 * Each returns a new Comm of the caller's Python type, made without
 * __init__ as a split's child is (comm_split.c): shrink and grow leave the
 * Comm they are called on as it was (failed after a shrink, healthy after a
 * grow), for the caller to close once the new one is in use. The GIL is
 * released while the ranks agree and the new communicator forms; the Comm
 * is busy meanwhile, so another thread's call on it is refused, not run
 * beside the agreement.
 */
#include "core.h"

PyObject *gwpy_comm_shrink(PyObject *obj, PyObject *unused)
{
    (void)unused;
    return gwpy_comm_child(obj, "shrink", gw_comm_shrink);
}

PyObject *gwpy_comm_grow(PyObject *obj, PyObject *unused)
{
    (void)unused;
    return gwpy_comm_child(obj, "grow", gw_comm_grow);
}

/* Not collective and thread-safe in the library, so no busy check: a
 * thread may ask while another is inside grow() or a collective on the
 * same Comm (an asynchronous trainer's loop deciding when to grow). The
 * GIL is held throughout, so close() (which clears comm under the GIL
 * before it destroys it) cannot free it meanwhile. */
PyObject *gwpy_comm_joiners(PyObject *obj, PyObject *unused)
{
    (void)unused;
    gwpy_comm *self = (gwpy_comm *)obj;
    if (self->comm == NULL)
        return gwpy_raise_argument(0, "joiners: the communicator is closed");
    int n = 0;
    gw_status_t st = gw_comm_joiners(self->comm, &n);
    if (st != GW_OK)
        return gwpy_raise(st, "joiners", -1, gwpy_reason(self->comm));
    return PyLong_FromLong(n);
}

PyObject *gwpy_comm_join(PyObject *cls, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"root",          "token",  "wait", "transport", "timeout",
                             "socket_ifname", "nsocks", "algo", NULL};
    const char *root = NULL, *token = NULL, *transport = NULL, *ifname = NULL;
    PyObject *wait = Py_None, *timeout = Py_None, *algo = Py_None;
    int nsocks = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$zzOzOziO", kwlist, &root, &token, &wait,
                                     &transport, &timeout, &ifname, &nsocks, &algo))
        return NULL;
    gw_config_t cfg;
    if (gwpy_config_fill(&cfg, root, token, transport, ifname, nsocks, timeout, algo) != 0)
        return NULL;
    int wait_ms = 0; /* the library's default: ten minutes */
    double seconds;
    if (wait != Py_None) {
        if (gwpy_seconds(wait, "join: wait", &seconds) != 0)
            return NULL;
        wait_ms = (int)(seconds * 1000.0 + 0.999); /* rounded up */
    }
    gw_comm_t *comm = NULL;
    gw_status_t st;
    Py_BEGIN_ALLOW_THREADS;
    st = gw_comm_join(&cfg, wait_ms, &comm);
    Py_END_ALLOW_THREADS;
    if (st != GW_OK)
        return gwpy_raise(st, "join", -1, NULL);
    return gwpy_comm_wrap((PyTypeObject *)cls, comm);
}
