/*
 * comm_split.c - sub-communicators as Comm methods: gw_comm_split and
 * gw_comm_dup, behind torch.distributed.new_group.
 *
 * A split's child is a new Comm object of the parent's Python type, made
 * without __init__ (the communicator comes from the library, not from a
 * bootstrap); it is independent of its parent's object and may outlive it.
 */
#include "core.h"

#include <string.h>

PyObject *gwpy_comm_wrap(PyTypeObject *type, gw_comm_t *child)
{
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
        return gwpy_raise(st, "split", gw_comm_culprit(comm), gwpy_reason(comm));
    if (child == NULL)
        Py_RETURN_NONE;
    return gwpy_comm_wrap(Py_TYPE(obj), child);
}

PyObject *gwpy_comm_child(PyObject *obj, const char *what,
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

PyObject *gwpy_comm_dup(PyObject *obj, PyObject *unused)
{
    (void)unused;
    return gwpy_comm_child(obj, "dup", gw_comm_dup);
}
