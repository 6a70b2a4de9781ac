/*
 * comm_split.c - the Comm methods that do not fit the call table of
 * comm.c: the v-form alltoall (per-rank counts, as torch's all_to_all_single
 * with split sizes needs) and sub-communicators (gw_comm_split and
 * gw_comm_dup, behind torch.distributed.new_group).
 *
 * alltoallv takes the counts as sequences of ints and packs the blocks in
 * rank order (each displacement the sum of the counts before it), which is
 * the layout torch uses. The four size_t arrays the library reads until the
 * call completes live in one bytes object that the Handle keeps.
 *
 * A split's child is a new Comm object of the parent's Python type, made
 * without __init__ (the communicator comes from the library, not from a
 * bootstrap); it is independent of its parent's object and may outlive it.
 */
#include "core.h"

#include <string.h>

/* Read `seq` (size ints >= 0) into counts and prefix sums into displs;
 * total = their sum. Returns 0, or -1 with an exception set. */
static int read_counts(PyObject *seq, const char *what, size_t size, size_t *counts, size_t *displs,
                       size_t *total)
{
    PyObject *fast = PySequence_Fast(seq, "alltoallv: counts must be a sequence of ints");
    if (fast == NULL)
        return -1;
    if ((size_t)PySequence_Fast_GET_SIZE(fast) != size) {
        gwpy_raise_argument(0, "alltoallv: %s has %zd entries; it needs one per rank (%zu)", what,
                            PySequence_Fast_GET_SIZE(fast), size);
        Py_DECREF(fast);
        return -1;
    }
    *total = 0;
    for (size_t i = 0; i < size; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, (Py_ssize_t)i));
        if (v < 0) {
            if (PyErr_Occurred())
                PyErr_Clear();
            gwpy_raise_argument(0, "alltoallv: %s[%zu] must be an int >= 0", what, i);
            Py_DECREF(fast);
            return -1;
        }
        counts[i] = (size_t)v;
        displs[i] = *total;
        *total += (size_t)v;
    }
    Py_DECREF(fast);
    return 0;
}

static PyObject *alltoallv(PyObject *obj, PyObject *args, PyObject *kw, int nonblocking)
{
    static char *kwlist[] = {"send", "send_counts", "out", "recv_counts", "dtype", NULL};
    gwpy_comm *self = (gwpy_comm *)obj;
    PyObject *send, *scounts, *out, *rcounts, *dtype_obj = Py_None;
    gw_dtype_t override = GW_DTYPE_COUNT;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO|O", kwlist, &send, &scounts, &out, &rcounts,
                                     &dtype_obj))
        return NULL;
    if (gwpy_comm_enter(self) == NULL)
        return NULL;
    size_t n = (size_t)gw_comm_size(self->comm), stotal = 0, rtotal = 0;
    gwpy_buffer bufs[2];
    memset(bufs, 0, sizeof(bufs));
    PyObject *arrays = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(4 * n * sizeof(size_t)));
    if (arrays == NULL)
        return NULL;
    size_t *a = (size_t *)PyBytes_AS_STRING(arrays); /* scounts, sdispls, rcounts, rdispls */
    if ((dtype_obj != Py_None && gwpy_parse_dtype(dtype_obj, &override) != 0) ||
        read_counts(scounts, "send_counts", n, a, a + n, &stotal) != 0 ||
        read_counts(rcounts, "recv_counts", n, a + 2 * n, a + 3 * n, &rtotal) != 0 ||
        gwpy_buffer_get(send, 0, override, "alltoallv: send", &bufs[0]) != 0 ||
        gwpy_buffer_get(out, 1, override, "alltoallv: out", &bufs[1]) != 0)
        goto refused;
    if (bufs[0].view.buf == bufs[1].view.buf && bufs[0].count > 0) {
        gwpy_raise_argument(0, "alltoallv: send and out must be different buffers");
        goto refused;
    }
    if (bufs[0].dtype != bufs[1].dtype) {
        gwpy_raise_argument(1, "alltoallv: send holds %s and out %s; they must be the same type",
                            gw_dtype_name(bufs[0].dtype), gw_dtype_name(bufs[1].dtype));
        goto refused;
    }
    if (bufs[0].count != stotal || bufs[1].count != rtotal) {
        gwpy_raise_argument(0,
                            "alltoallv: send has %zu elements and send_counts sum to %zu; out has "
                            "%zu and recv_counts sum to %zu; each must match",
                            bufs[0].count, stotal, bufs[1].count, rtotal);
        goto refused;
    }
    gw_comm_t *comm = self->comm;
    gw_handle_t *handle = NULL;
    gw_status_t st;
    const void *sb = bufs[0].view.buf;
    void *rb = bufs[1].view.buf;
    gw_dtype_t dtype = bufs[0].dtype;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS;
    st = nonblocking ? gw_ialltoallv(comm, sb, a, a + n, rb, a + 2 * n, a + 3 * n, dtype, &handle)
                     : gw_alltoallv(comm, sb, a, a + n, rb, a + 2 * n, a + 3 * n, dtype);
    Py_END_ALLOW_THREADS;
    self->busy = 0;
    if (st != GW_OK) {
        gwpy_buffer_release(&bufs[0]);
        gwpy_buffer_release(&bufs[1]);
        Py_DECREF(arrays);
        return gwpy_raise(st, "alltoallv", gw_comm_culprit(comm));
    }
    if (nonblocking) {
        PyObject *h = gwpy_handle_new(self, handle, "ialltoallv", bufs, 2, out, NULL, 0);
        if (h != NULL)
            ((gwpy_handle *)h)->keep = arrays; /* the handle owns the counts now */
        else
            Py_DECREF(arrays);
        return h;
    }
    gwpy_buffer_release(&bufs[0]);
    gwpy_buffer_release(&bufs[1]);
    Py_DECREF(arrays);
    return Py_NewRef(out);

refused:
    gwpy_buffer_release(&bufs[0]);
    gwpy_buffer_release(&bufs[1]);
    Py_DECREF(arrays);
    gw_comm_abort(self->comm); /* the others are in the call: fail them at once */
    return NULL;
}

PyObject *gwpy_comm_alltoallv(PyObject *self, PyObject *args, PyObject *kw)
{
    return alltoallv(self, args, kw, 0);
}

PyObject *gwpy_comm_ialltoallv(PyObject *self, PyObject *args, PyObject *kw)
{
    return alltoallv(self, args, kw, 1);
}

/* A Comm object of self's type around a communicator the library made. */
static PyObject *wrap_child(PyObject *self, gw_comm_t *child)
{
    PyTypeObject *type = Py_TYPE(self);
    gwpy_comm *c = (gwpy_comm *)type->tp_alloc(type, 0);
    if (c == NULL) {
        gw_comm_destroy(child);
        return NULL;
    }
    c->comm = child;
    c->busy = 0;
    c->pending = NULL;
    return (PyObject *)c;
}

PyObject *gwpy_comm_split(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"color", "key", NULL};
    gwpy_comm *self = (gwpy_comm *)obj;
    PyObject *color_obj;
    int key = 0, color = GW_UNDEFINED;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|i", kwlist, &color_obj, &key))
        return NULL;
    if (color_obj != Py_None) {
        long c = PyLong_AsLong(color_obj);
        if (c == -1 && PyErr_Occurred())
            return NULL;
        if (c < 0 || c > 0x7fffffff)
            return gwpy_raise_argument(0, "split: color must be an int >= 0, or None");
        color = (int)c;
    }
    if (gwpy_comm_enter(self) == NULL)
        return NULL;
    gw_comm_t *comm = self->comm, *child = NULL;
    gw_status_t st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS;
    st = gw_comm_split(comm, color, key, &child);
    Py_END_ALLOW_THREADS;
    self->busy = 0;
    if (st != GW_OK)
        return gwpy_raise(st, "split", gw_comm_culprit(comm));
    if (child == NULL)
        Py_RETURN_NONE;
    return wrap_child(obj, child);
}

PyObject *gwpy_comm_dup(PyObject *obj, PyObject *unused)
{
    gwpy_comm *self = (gwpy_comm *)obj;
    (void)unused;
    if (gwpy_comm_enter(self) == NULL)
        return NULL;
    gw_comm_t *comm = self->comm, *child = NULL;
    gw_status_t st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS;
    st = gw_comm_dup(comm, &child);
    Py_END_ALLOW_THREADS;
    self->busy = 0;
    if (st != GW_OK)
        return gwpy_raise(st, "dup", gw_comm_culprit(comm));
    return wrap_child(obj, child);
}
