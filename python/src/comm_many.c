/*
 * comm_many.c - Comm.allreduce_many and Comm.iallreduce_many: gw_allreduce_many
 * (tensor fusion) over a sequence of buffers, each reduced in place.
 *
 * The library reads an array of pointers and one of counts until the call
 * completes, and writes every buffer. Both arrays live in one bytes object,
 * and every buffer is held as a memoryview (an export of its object, so
 * numpy cannot resize it meanwhile); a Handle keeps the tuple of the two
 * until it is done, as it keeps alltoallv's counts.
 */
#include "core.h"

#include <string.h>

/* Take every buffer of seq (writable, one dtype). On success *keep is
 * (views, arrays) and ptrs/counts point into arrays; -1 with an exception
 * set otherwise. */
static int take_buffers(PyObject *seq, gw_dtype_t override, const char *call, PyObject **keep,
                        void ***ptrs, size_t **counts, size_t *n, gw_dtype_t *dtype)
{
    PyObject *fast = PySequence_Fast(seq, "allreduce_many: bufs must be a sequence of arrays");
    if (fast == NULL)
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    PyObject *views = PyTuple_New(len);
    PyObject *arrays =
        PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((size_t)(len ? len : 1) * 2 * sizeof(void *)));
    if (views == NULL || arrays == NULL)
        goto fail;
    void **p = (void **)PyBytes_AS_STRING(arrays);
    size_t *c = (size_t *)(p + len);
    *dtype = override;
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *obj = PySequence_Fast_GET_ITEM(fast, i);
        char role[64];
        snprintf(role, sizeof(role), "%s: bufs[%zd]", call, i);
        gwpy_buffer b;
        if (gwpy_buffer_get(obj, 1, override, role, &b) != 0)
            goto fail;
        if (i > 0 && b.dtype != *dtype) {
            gwpy_raise_argument(1, "%s: bufs[%zd] holds %s, bufs[0] %s: one dtype for all", call, i,
                                gw_dtype_name(b.dtype), gw_dtype_name(*dtype));
            gwpy_buffer_release(&b);
            goto fail;
        }
        *dtype = b.dtype;
        p[i] = b.view.buf;
        c[i] = b.count;
        gwpy_buffer_release(&b);
        PyObject *mv = PyMemoryView_FromObject(obj); /* holds the export */
        if (mv == NULL)
            goto fail;
        PyTuple_SET_ITEM(views, i, mv);
    }
    if (len == 0 && *dtype == GW_DTYPE_COUNT)
        *dtype = GW_FLOAT32;
    *keep = PyTuple_Pack(2, views, arrays);
    Py_DECREF(views);
    Py_DECREF(arrays);
    Py_DECREF(fast);
    if (*keep == NULL)
        return -1;
    *ptrs = p;
    *counts = c;
    *n = (size_t)len;
    return 0;
fail:
    Py_XDECREF(views);
    Py_XDECREF(arrays);
    Py_DECREF(fast);
    return -1;
}

static PyObject *many(PyObject *obj, PyObject *args, PyObject *kw, int nonblocking)
{
    static char *kwlist[] = {"bufs", "op", "dtype", NULL};
    const char *call = nonblocking ? "iallreduce_many" : "allreduce_many";
    gwpy_comm *self = (gwpy_comm *)obj;
    PyObject *seq, *op_obj = NULL, *dtype_obj = Py_None;
    gw_op_t op = GW_SUM;
    gw_dtype_t override = GW_DTYPE_COUNT, dtype;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO", kwlist, &seq, &op_obj, &dtype_obj))
        return NULL;
    if ((op_obj != NULL && gwpy_parse_op(op_obj, &op) != 0) ||
        (dtype_obj != Py_None && gwpy_parse_dtype(dtype_obj, &override) != 0))
        return NULL;
    if (gwpy_comm_enter(self) == NULL)
        return NULL;
    PyObject *keep = NULL;
    void **ptrs;
    size_t *counts, n;
    if (take_buffers(seq, override, call, &keep, &ptrs, &counts, &n, &dtype) != 0) {
        gw_comm_abort(self->comm); /* the other ranks are in the call: fail them now */
        return NULL;
    }
    gw_comm_t *comm = self->comm;
    gw_handle_t *handle = NULL;
    gw_status_t st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS;
    st = nonblocking ? gw_iallreduce_many(comm, ptrs, counts, n, dtype, op, &handle)
                     : gw_allreduce_many(comm, ptrs, counts, n, dtype, op);
    Py_END_ALLOW_THREADS;
    self->busy = 0;
    if (st != GW_OK) {
        Py_DECREF(keep);
        return gwpy_raise(st, call, gw_comm_culprit(self->comm), gwpy_reason(self->comm));
    }
    if (!nonblocking) {
        Py_DECREF(keep);
        return Py_NewRef(seq);
    }
    PyObject *h = gwpy_handle_new(self, handle, call, NULL, 0, seq, NULL, 0);
    if (h != NULL)
        ((gwpy_handle *)h)->keep = keep; /* the handle owns the buffers and arrays now */
    else
        Py_DECREF(keep);
    return h;
}

PyObject *gwpy_comm_allreduce_many(PyObject *self, PyObject *args, PyObject *kw)
{
    return many(self, args, kw, 0);
}

PyObject *gwpy_comm_iallreduce_many(PyObject *self, PyObject *args, PyObject *kw)
{
    return many(self, args, kw, 1);
}
