/*
 * comm_life.c - a Comm's life and settings outside the call table
 * (comm.c): Comm() from arguments or the launcher's environment, close(),
 * abort(), the context manager, the algorithm and CUDA stream of later
 * calls, and the properties (rank, size, culprit, transport, closed,
 * p2p_send).
 */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gwpy_seconds(PyObject *obj, const char *what, double *seconds)
{
    *seconds = PyFloat_AsDouble(obj);
    if (*seconds == -1.0 && PyErr_Occurred())
        return -1;
    if (!(*seconds > 0) || *seconds > 2e6) {
        gwpy_raise_argument(0, "%s must be seconds in (0, 2e6], not %R", what, obj);
        return -1;
    }
    return 0;
}

int gwpy_config_fill(gw_config_t *cfg, const char *root, const char *token, const char *transport,
                     const char *ifname, int nsocks, PyObject *timeout, PyObject *algo)
{
    gw_config_init(cfg);
    cfg->root = root;
    cfg->job_token = token;
    cfg->transport = transport;
    cfg->socket_ifname = ifname;
    cfg->nsocks = nsocks;
    double seconds;
    if (timeout != Py_None) {
        if (gwpy_seconds(timeout, "timeout", &seconds) != 0)
            return -1;
        cfg->timeout_ms = (int)(seconds * 1000.0 + 0.5);
        if (cfg->timeout_ms < 1)
            cfg->timeout_ms = 1;
    }
    if (algo != Py_None && gwpy_parse_algo(algo, &cfg->algo) != 0)
        return -1;
    return 0;
}

/* Comm(*, rank, size, root=None, token=None, transport=None, timeout=None
 * (seconds), socket_ifname=None, nsocks=0, algo=None): gw_comm_init, which
 * takes the fields left unset from GW_ROOT, GW_JOB_TOKEN, GW_TIMEOUT_MS, ...
 * (but never rank and size, hence required). No arguments at all:
 * gw_comm_init_env, everything from the launcher's environment. */
int gwpy_comm_init(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"rank",    "size",          "root",   "token", "transport",
                             "timeout", "socket_ifname", "nsocks", "algo",  NULL};
    gwpy_comm *self = (gwpy_comm *)obj;
    int rank = -1, size = -1, nsocks = 0;
    const char *root = NULL, *token = NULL, *transport = NULL, *ifname = NULL;
    PyObject *timeout = Py_None, *algo = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$iizzzOziO", kwlist, &rank, &size, &root, &token,
                                     &transport, &timeout, &ifname, &nsocks, &algo))
        return -1;
    if (self->comm != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Comm.__init__ called twice");
        return -1;
    }
    gw_config_t cfg;
    if (gwpy_config_fill(&cfg, root, token, transport, ifname, nsocks, timeout, algo) != 0)
        return -1;
    cfg.rank = rank;
    cfg.size = size;
    int from_env = rank == -1 && size == -1 && root == NULL && token == NULL && transport == NULL &&
                   timeout == Py_None && ifname == NULL && nsocks == 0 && algo == Py_None;
    if (!from_env && (rank < 0 || size < 1)) {
        gwpy_raise_argument(0, "Comm: give rank and size with the other arguments (the library "
                               "reads only root, token, timeout, transport, interface, sockets "
                               "and algorithm from the environment), or no arguments at all to "
                               "take everything from it");
        return -1;
    }
    gw_comm_t *comm = NULL;
    int culprit = -1;
    gw_status_t st;
    Py_BEGIN_ALLOW_THREADS;
    st = gw_comm_init_culprit(from_env ? NULL : &cfg, &comm, &culprit);
    Py_END_ALLOW_THREADS;
    if (st != GW_OK) {
        gwpy_raise(st, from_env ? "Comm (from the environment)" : "Comm", culprit, NULL);
        return -1;
    }
    self->comm = comm;
    return 0;
}

PyObject *gwpy_comm_close(PyObject *obj, PyObject *unused)
{
    gwpy_comm *self = (gwpy_comm *)obj;
    (void)unused;
    if (self->comm == NULL)
        Py_RETURN_NONE;
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "close: another thread is inside this communicator");
        return NULL;
    }
    gwpy_comm_complete_pending(self);
    gw_comm_t *comm = self->comm;
    self->comm = NULL;
    Py_BEGIN_ALLOW_THREADS;
    gw_comm_destroy(comm);
    Py_END_ALLOW_THREADS;
    Py_RETURN_NONE;
}

PyObject *gwpy_comm_abort(PyObject *obj, PyObject *unused)
{
    gwpy_comm *self = (gwpy_comm *)obj;
    (void)unused;
    if (self->comm != NULL)
        gw_comm_abort(self->comm); /* thread-safe: no busy check */
    Py_RETURN_NONE;
}

PyObject *gwpy_comm_enter_ctx(PyObject *obj, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(obj);
}

PyObject *gwpy_comm_exit_ctx(PyObject *obj, PyObject *args)
{
    (void)args;
    PyObject *r = gwpy_comm_close(obj, NULL);
    Py_XDECREF(r);
    if (r == NULL)
        return NULL;
    Py_RETURN_FALSE;
}

PyObject *gwpy_comm_set_algo(PyObject *obj, PyObject *arg)
{
    gwpy_comm *self = (gwpy_comm *)obj;
    gw_algo_t algo;
    if (gwpy_comm_enter(self) == NULL || gwpy_parse_algo(arg, &algo) != 0)
        return NULL;
    gw_status_t st = gw_comm_set_algo(self->comm, algo);
    if (st != GW_OK)
        return gwpy_raise(st, "set_algo", gw_comm_culprit(self->comm), gwpy_reason(self->comm));
    Py_RETURN_NONE;
}

/* set_cuda_stream(handle): the cudaStream_t (an integer, 0: the default
 * stream) that device-buffer calls order after and reduce on. */
PyObject *gwpy_comm_set_cuda_stream(PyObject *obj, PyObject *arg)
{
    gwpy_comm *self = (gwpy_comm *)obj;
    void *stream = PyLong_AsVoidPtr(arg);
    if (PyErr_Occurred() || gwpy_comm_enter(self) == NULL)
        return NULL;
    gw_status_t st = gw_comm_set_cuda_stream(self->comm, stream);
    if (st != GW_OK)
        return gwpy_raise(st, "set_cuda_stream", gw_comm_culprit(self->comm),
                          gwpy_reason(self->comm));
    Py_RETURN_NONE;
}

PyObject *gwpy_comm_pick_algo(PyObject *obj, PyObject *args)
{
    gwpy_comm *self = (gwpy_comm *)obj;
    Py_ssize_t count;
    PyObject *dtype_obj;
    gw_dtype_t dtype;
    if (!PyArg_ParseTuple(args, "nO", &count, &dtype_obj) || gwpy_comm_enter(self) == NULL ||
        gwpy_parse_dtype(dtype_obj, &dtype) != 0)
        return NULL;
    if (count < 0)
        return gwpy_raise_argument(0, "pick_algo: count must be >= 0");
    return PyUnicode_FromString(gw_algo_name(gw_comm_pick_algo(self->comm, (size_t)count, dtype)));
}

static PyObject *comm_get_int(PyObject *obj, void *which)
{
    gwpy_comm *self = (gwpy_comm *)obj;
    if (self->comm == NULL && which != (void *)2)
        return gwpy_raise_argument(0, "the communicator is closed");
    int v = which == (void *)0   ? gw_comm_rank(self->comm)
            : which == (void *)1 ? gw_comm_size(self->comm)
                                 : gw_comm_culprit(self->comm);
    if (which == (void *)2 && v < 0)
        Py_RETURN_NONE;
    return PyLong_FromLong(v);
}

static PyObject *comm_get_transport(PyObject *obj, void *unused)
{
    (void)unused;
    return PyUnicode_FromString(gw_comm_transport(((gwpy_comm *)obj)->comm));
}

/* p2p_send: "sync" or "standard" (gw_comm_set_p2p_send). */
static PyObject *comm_get_p2p_send(PyObject *obj, void *unused)
{
    (void)unused;
    gwpy_comm *self = (gwpy_comm *)obj;
    if (gwpy_comm_enter(self) == NULL)
        return NULL;
    return PyUnicode_FromString(gw_comm_p2p_send(self->comm) == GW_P2P_SEND_STANDARD ? "standard"
                                                                                     : "sync");
}

static int comm_set_p2p_send(PyObject *obj, PyObject *value, void *unused)
{
    (void)unused;
    gwpy_comm *self = (gwpy_comm *)obj;
    const char *s = value && PyUnicode_Check(value) ? PyUnicode_AsUTF8(value) : NULL;
    if (!s || (strcmp(s, "sync") != 0 && strcmp(s, "standard") != 0)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "p2p_send must be 'sync' or 'standard'");
        return -1;
    }
    if (gwpy_comm_enter(self) == NULL)
        return -1;
    gw_p2p_send_t mode = strcmp(s, "standard") == 0 ? GW_P2P_SEND_STANDARD : GW_P2P_SEND_SYNC;
    gw_status_t st = gw_comm_set_p2p_send(self->comm, mode);
    if (st != GW_OK) {
        gwpy_raise(st, "p2p_send", gw_comm_culprit(self->comm), gwpy_reason(self->comm));
        return -1;
    }
    return 0;
}

static PyObject *comm_get_closed(PyObject *obj, void *unused)
{
    (void)unused;
    return PyBool_FromLong(((gwpy_comm *)obj)->comm == NULL);
}

void gwpy_comm_dealloc(PyObject *obj)
{
    gwpy_comm *self = (gwpy_comm *)obj;
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs(obj);
    /* Handles hold a reference, so none is pending here. */
    if (self->comm != NULL)
        gw_comm_destroy(self->comm);
    Py_TYPE(obj)->tp_free(obj);
}

PyGetSetDef gwpy_comm_getset[] = {
    {"rank", comm_get_int, NULL, "This process's rank.", (void *)0},
    {"size", comm_get_int, NULL, "The number of ranks.", (void *)1},
    {"culprit", comm_get_int, NULL, "The rank blamed for the failure, or None.", (void *)2},
    {"transport", comm_get_transport, NULL, "The transport in use (shm, tcp, ib, a mix).", NULL},
    {"closed", comm_get_closed, NULL, "Whether close() was called.", NULL},
    {"p2p_send", comm_get_p2p_send, comm_set_p2p_send,
     "How sends complete: 'sync' (once the receiver accepted them) or 'standard' (as MPI_Send); "
     "GW_P2P_SEND by default.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
