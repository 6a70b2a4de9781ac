/*
 * comm_elastic.c - a job that loses and gains ranks, from Python: Comm.shrink
 * (gw_comm_shrink), Comm.grow (gw_comm_grow) and the classmethod Comm.join
 * (gw_comm_join), behind the torch backend's shrink, grow and join
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

/* The communicator a shrink or grow of self made, or None (grow with no
 * joiner); raises what the library said when it failed. */
static PyObject *rebuilt(PyObject *obj, const char *what,
                         gw_status_t (*call)(gw_comm_t *, gw_comm_t **))
{
    gwpy_comm *self = (gwpy_comm *)obj;
    if (gwpy_comm_enter(self) == NULL)
        return NULL;
    gw_comm_t *comm = self->comm, *child = NULL;
    gw_status_t st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS;
    st = call(comm, &child);
    Py_END_ALLOW_THREADS;
    self->busy = 0;
    if (st != GW_OK)
        return gwpy_raise(st, what, gw_comm_culprit(comm), gwpy_reason(comm));
    if (child == NULL)
        Py_RETURN_NONE;
    return gwpy_comm_wrap(Py_TYPE(obj), child);
}

PyObject *gwpy_comm_shrink(PyObject *obj, PyObject *unused)
{
    (void)unused;
    return rebuilt(obj, "shrink", gw_comm_shrink);
}

PyObject *gwpy_comm_grow(PyObject *obj, PyObject *unused)
{
    (void)unused;
    return rebuilt(obj, "grow", gw_comm_grow);
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
    gw_config_init(&cfg);
    cfg.root = root;
    cfg.job_token = token;
    cfg.transport = transport;
    cfg.socket_ifname = ifname;
    cfg.nsocks = nsocks;
    if (gwpy_config_timeout_algo(timeout, algo, &cfg) != 0)
        return NULL;
    int wait_ms = 0; /* the library's default: ten minutes */
    if (wait != Py_None) {
        double seconds = PyFloat_AsDouble(wait);
        if (seconds == -1.0 && PyErr_Occurred())
            return NULL;
        if (!(seconds > 0) || seconds > 2e6)
            return gwpy_raise_argument(0, "join: wait must be seconds in (0, 2e6], not %R", wait);
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
