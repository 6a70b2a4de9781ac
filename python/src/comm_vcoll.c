/*
 * comm_vcoll.c - the v-form collectives as Comm methods, which do not fit
 * the call table of comm.c: alltoallv (per-rank counts each way, as torch's
 * all_to_all_single with split sizes needs) and allgatherv (blocks of
 * different sizes, torch's uneven all_gather).
 *
 * Both take the counts as sequences of ints and pack the blocks in rank
 * order (each displacement the sum of the counts before it), the layout
 * torch uses. The size_t arrays the library reads until the call completes
 * live in one bytes object that the Handle keeps.
 */
#include "core.h"

#include <string.h>

/* Read `seq` (size ints >= 0) into counts and prefix sums into displs;
 * total = their sum. Returns 0, or -1 with an exception set naming the
 * call and the argument. */
static int read_counts(PyObject *seq, const char *call, const char *what, size_t size,
                       size_t *counts, size_t *displs, size_t *total)
{
    PyObject *fast = PySequence_Fast(seq, "counts must be a sequence of ints");
    if (fast == NULL)
        return -1;
    if ((size_t)PySequence_Fast_GET_SIZE(fast) != size) {
        gwpy_raise_argument(0, "%s: %s has %zd entries; it needs one per rank (%zu)", call, what,
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
            gwpy_raise_argument(0, "%s: %s[%zu] must be an int >= 0", call, what, i);
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

/* send and out: distinct buffers of one dtype. 0, or -1 with an exception. */
static int distinct_same_type(const char *call, const gwpy_buffer *bufs)
{
    if (bufs[0].view.buf == bufs[1].view.buf && bufs[0].count > 0) {
        gwpy_raise_argument(0, "%s: send and out must be different buffers", call);
        return -1;
    }
    if (bufs[0].dtype != bufs[1].dtype) {
        gwpy_raise_argument(1, "%s: send holds %s and out %s; they must be the same type", call,
                            gw_dtype_name(bufs[0].dtype), gw_dtype_name(bufs[1].dtype));
        return -1;
    }
    return 0;
}

/* The end of a v-call: a Handle that keeps `arrays`, or out. */
static PyObject *finish(gwpy_comm *self, gw_status_t st, gw_handle_t *handle, const char *call,
                        gwpy_buffer *bufs, PyObject *out, PyObject *arrays)
{
    if (st != GW_OK) {
        gwpy_buffer_release(&bufs[0]);
        gwpy_buffer_release(&bufs[1]);
        Py_DECREF(arrays);
        return gwpy_raise(st, call, gw_comm_culprit(self->comm), gwpy_reason(self->comm));
    }
    if (handle) {
        PyObject *h = gwpy_handle_new(self, handle, call, bufs, 2, out, NULL, 0);
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
}

/* A refused call: release what was taken and fail the other ranks, who
 * are in the call, at once. */
static PyObject *refuse(gwpy_comm *self, gwpy_buffer *bufs, PyObject *arrays)
{
    gwpy_buffer_release(&bufs[0]);
    gwpy_buffer_release(&bufs[1]);
    Py_DECREF(arrays);
    gw_comm_abort(self->comm);
    return NULL;
}

static PyObject *alltoallv(PyObject *obj, PyObject *args, PyObject *kw, int nonblocking)
{
    static char *kwlist[] = {"send", "send_counts", "out", "recv_counts", "dtype", NULL};
    const char *call = nonblocking ? "ialltoallv" : "alltoallv";
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
        read_counts(scounts, call, "send_counts", n, a, a + n, &stotal) != 0 ||
        read_counts(rcounts, call, "recv_counts", n, a + 2 * n, a + 3 * n, &rtotal) != 0 ||
        gwpy_buffer_get(send, 0, override, "alltoallv: send", &bufs[0]) != 0 ||
        gwpy_buffer_get(out, 1, override, "alltoallv: out", &bufs[1]) != 0 ||
        distinct_same_type(call, bufs) != 0)
        return refuse(self, bufs, arrays);
    if (bufs[0].count != stotal || bufs[1].count != rtotal) {
        gwpy_raise_argument(0,
                            "%s: send has %zu elements and send_counts sum to %zu; out has "
                            "%zu and recv_counts sum to %zu; each must match",
                            call, bufs[0].count, stotal, bufs[1].count, rtotal);
        return refuse(self, bufs, arrays);
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
    return finish(self, st, handle, call, bufs, out, arrays);
}

static PyObject *allgatherv(PyObject *obj, PyObject *args, PyObject *kw, int nonblocking)
{
    static char *kwlist[] = {"send", "out", "recv_counts", "dtype", NULL};
    const char *call = nonblocking ? "iallgatherv" : "allgatherv";
    gwpy_comm *self = (gwpy_comm *)obj;
    PyObject *send, *out, *rcounts, *dtype_obj = Py_None;
    gw_dtype_t override = GW_DTYPE_COUNT;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|O", kwlist, &send, &out, &rcounts, &dtype_obj))
        return NULL;
    if (gwpy_comm_enter(self) == NULL)
        return NULL;
    size_t n = (size_t)gw_comm_size(self->comm), rtotal = 0;
    int rank = gw_comm_rank(self->comm);
    gwpy_buffer bufs[2];
    memset(bufs, 0, sizeof(bufs));
    PyObject *arrays = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(2 * n * sizeof(size_t)));
    if (arrays == NULL)
        return NULL;
    size_t *a = (size_t *)PyBytes_AS_STRING(arrays); /* rcounts, displs */
    if ((dtype_obj != Py_None && gwpy_parse_dtype(dtype_obj, &override) != 0) ||
        read_counts(rcounts, call, "recv_counts", n, a, a + n, &rtotal) != 0 ||
        gwpy_buffer_get(send, 0, override, "allgatherv: send", &bufs[0]) != 0 ||
        gwpy_buffer_get(out, 1, override, "allgatherv: out", &bufs[1]) != 0 ||
        distinct_same_type(call, bufs) != 0)
        return refuse(self, bufs, arrays);
    if (bufs[0].count != a[rank] || bufs[1].count != rtotal) {
        gwpy_raise_argument(0,
                            "%s: send has %zu elements and recv_counts[%d] is %zu; out has %zu "
                            "and recv_counts sum to %zu; each must match",
                            call, bufs[0].count, rank, a[rank], bufs[1].count, rtotal);
        return refuse(self, bufs, arrays);
    }
    gw_comm_t *comm = self->comm;
    gw_handle_t *handle = NULL;
    gw_status_t st;
    const void *sb = bufs[0].view.buf;
    void *rb = bufs[1].view.buf;
    size_t scount = bufs[0].count;
    gw_dtype_t dtype = bufs[0].dtype;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS;
    st = nonblocking ? gw_iallgatherv(comm, sb, rb, scount, a, a + n, dtype, &handle)
                     : gw_allgatherv(comm, sb, rb, scount, a, a + n, dtype);
    Py_END_ALLOW_THREADS;
    self->busy = 0;
    return finish(self, st, handle, call, bufs, out, arrays);
}

PyObject *gwpy_comm_alltoallv(PyObject *self, PyObject *args, PyObject *kw)
{
    return alltoallv(self, args, kw, 0);
}

PyObject *gwpy_comm_ialltoallv(PyObject *self, PyObject *args, PyObject *kw)
{
    return alltoallv(self, args, kw, 1);
}

PyObject *gwpy_comm_allgatherv(PyObject *self, PyObject *args, PyObject *kw)
{
    return allgatherv(self, args, kw, 0);
}

PyObject *gwpy_comm_iallgatherv(PyObject *self, PyObject *args, PyObject *kw)
{
    return allgatherv(self, args, kw, 1);
}
