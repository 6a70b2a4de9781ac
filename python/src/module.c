/*
 * module.c - gradwire._core, the CPython extension under the gradwire
 * package: its enum tables, errors and buffer checks.
 *
 * Enums come from the C header, never copied by hand: the status codes by
 * expanding GW_STATUS_MAP, the dtypes, ops, algorithms and codecs by asking
 * the library for the name of every value below the header's *_COUNT. The
 * module exports them as dicts (name -> value), from which gradwire's
 * __init__.py makes its constants and one exception class per status.
 *
 * Errors: the Python package registers its classes here
 * (_register_errors), and gwpy_raise looks the status up in them. A
 * module-level dict is the one piece of state this extension keeps, as
 * every CPython module does for its exception types.
 *
 * Buffers: any object with the buffer protocol (numpy arrays, memoryviews,
 * bytearrays, the numpy() view of a CPU torch tensor) is used in place;
 * nothing is copied. The element type comes from the buffer's format, so
 * a float32 array is reduced as float32 and an int64 one as int64, and a
 * format gradwire has no type for is refused rather than reinterpreted.
 */
#include "core.h"

#include <stdarg.h>
#include <string.h>

static PyObject *error_classes;  /* status value -> gradwire.Error subclass */
static PyObject *argument_error; /* gradwire.ArgumentError */
static PyObject *dtype_error;    /* gradwire.DtypeError */

const char *gwpy_reason(gw_comm_t *comm)
{
    const char *r = comm != NULL ? gw_last_error(comm) : "";
    return r[0] != '\0' ? r : gw_last_error(NULL);
}

PyObject *gwpy_raise(gw_status_t status, const char *what, int culprit, const char *reason)
{
    if (reason == NULL)
        reason = gw_last_error(NULL);
    PyObject *cls = NULL, *key = PyLong_FromLong((long)status);
    if (key != NULL && error_classes != NULL)
        cls = PyDict_GetItemWithError(error_classes, key);
    Py_XDECREF(key);
    if (cls == NULL && PyErr_Occurred())
        return NULL;
    if (cls == NULL)
        cls = PyExc_RuntimeError;
    PyObject *exc;
    PyObject *msg;
    /* The reason is the library's own message: a Python exception that
     * said only "invalid configuration" would leave the user to find the
     * log line that says which variable and why. */
    const char *sep = reason[0] != '\0' ? ": " : "";
    if (culprit >= 0)
        msg = PyUnicode_FromFormat("%s: %s (%s), blaming rank %d%s%s", what, gw_status_str(status),
                                   gw_status_name(status), culprit, sep, reason);
    else
        msg = PyUnicode_FromFormat("%s: %s (%s)%s%s", what, gw_status_str(status),
                                   gw_status_name(status), sep, reason);
    if (msg == NULL)
        return NULL;
    PyObject *culprit_obj = culprit >= 0 ? PyLong_FromLong(culprit) : Py_NewRef(Py_None);
    PyObject *reason_obj = PyUnicode_DecodeUTF8(reason, (Py_ssize_t)strlen(reason), "replace");
    if (reason_obj == NULL) {
        Py_DECREF(msg);
        Py_DECREF(culprit_obj);
        return NULL;
    }
    exc = PyObject_CallFunction(cls, "OiNN", msg, (int)status, culprit_obj, reason_obj);
    Py_DECREF(msg);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

PyObject *gwpy_raise_argument(int is_dtype, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (msg == NULL)
        return NULL;
    PyObject *cls = is_dtype ? dtype_error : argument_error;
    if (cls == NULL)
        cls = is_dtype ? PyExc_TypeError : PyExc_ValueError;
    PyObject *exc = PyObject_CallFunction(cls, "OiOs", msg, (int)GW_ERR_INVALID_ARG, Py_None, "");
    Py_DECREF(msg);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* The gradwire dtype of a buffer format of native byte order, or
 * GW_DTYPE_COUNT. Integer codes are matched by size, since 'l' is 8 bytes
 * here and 4 on other ABIs. */
static gw_dtype_t dtype_of_format(const char *format, Py_ssize_t itemsize)
{
    if (format == NULL)
        format = "B";
    if (*format == '@' || *format == '=' || *format == '<')
        format++;
    if (format[0] == '\0' || format[1] != '\0')
        return GW_DTYPE_COUNT;
    switch (format[0]) {
    case 'f':
        return itemsize == 4 ? GW_FLOAT32 : GW_DTYPE_COUNT;
    case 'd':
        return itemsize == 8 ? GW_FLOAT64 : GW_DTYPE_COUNT;
    case 'e':
        return itemsize == 2 ? GW_FLOAT16 : GW_DTYPE_COUNT;
    case 'b':
        return GW_INT8;
    case 'B':
        return GW_UINT8;
    case 'i':
    case 'l':
    case 'q':
        return itemsize == 4 ? GW_INT32 : itemsize == 8 ? GW_INT64 : GW_DTYPE_COUNT;
    case 'I':
    case 'L':
    case 'Q':
        return itemsize == 4 ? GW_UINT32 : itemsize == 8 ? GW_UINT64 : GW_DTYPE_COUNT;
    default:
        return GW_DTYPE_COUNT;
    }
}

/* dtype of a __cuda_array_interface__ typestr ("<f4", "|i1", ...). */
static gw_dtype_t dtype_of_typestr(const char *t, Py_ssize_t *itemsize)
{
    static const struct {
        const char *typestr;
        gw_dtype_t dtype;
    } map[] = {{"<f4", GW_FLOAT32}, {"<f8", GW_FLOAT64},     {"<f2", GW_FLOAT16},
               {"|i1", GW_INT8},    {"|u1", GW_UINT8},       {"<i4", GW_INT32},
               {"<i8", GW_INT64},   {"<i2", GW_DTYPE_COUNT}, {"<u2", GW_DTYPE_COUNT}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(t, map[i].typestr) == 0) {
            *itemsize = t[2] - '0';
            return map[i].dtype;
        }
    *itemsize = 0;
    return GW_DTYPE_COUNT;
}

/* A CUDA array (torch's CUDA tensors, CuPy, Numba): its
 * __cuda_array_interface__ (version 2 or later) gives the device pointer,
 * which the library stages or reduces on the device (docs/guide/cuda.md).
 * The view holds a reference to obj and no exported buffer. */
static int cuda_array_get(PyObject *obj, PyObject *cai, int writable, gw_dtype_t dtype_override,
                          const char *role, gwpy_buffer *out)
{
    PyObject *shape = PyDict_Check(cai) ? PyDict_GetItemString(cai, "shape") : NULL;
    PyObject *typestr = PyDict_Check(cai) ? PyDict_GetItemString(cai, "typestr") : NULL;
    PyObject *data = PyDict_Check(cai) ? PyDict_GetItemString(cai, "data") : NULL;
    PyObject *strides = PyDict_Check(cai) ? PyDict_GetItemString(cai, "strides") : NULL;
    if (!shape || !PyTuple_Check(shape) || !typestr || !PyUnicode_Check(typestr) || !data ||
        !PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2) {
        gwpy_raise_argument(0, "%s: the %.100s's __cuda_array_interface__ is malformed", role,
                            Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t itemsize;
    const char *ts = PyUnicode_AsUTF8(typestr);
    if (!ts)
        return -1;
    gw_dtype_t dtype = dtype_of_typestr(ts, &itemsize);
    if (dtype_override == GW_BFLOAT16) {
        if (itemsize != 2) {
            gwpy_raise_argument(1, "%s: dtype='bfloat16' needs 2-byte integers, not '%s'", role,
                                ts);
            return -1;
        }
        dtype = GW_BFLOAT16;
    } else if (dtype_override != GW_DTYPE_COUNT && dtype != dtype_override) {
        gwpy_raise_argument(1, "%s: the CUDA array holds '%s', not %s", role, ts,
                            gw_dtype_name(dtype_override));
        return -1;
    }
    if (dtype == GW_DTYPE_COUNT) {
        gwpy_raise_argument(1, "%s: gradwire has no type for CUDA array type '%s'", role, ts);
        return -1;
    }
    Py_ssize_t count = 1, expect = itemsize;
    for (Py_ssize_t i = PyTuple_GET_SIZE(shape) - 1; i >= 0; i--) {
        Py_ssize_t dim = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
        if (dim < 0 || (dim > 0 && count > PY_SSIZE_T_MAX / itemsize / dim)) {
            if (!PyErr_Occurred())
                gwpy_raise_argument(0, "%s: the CUDA array's shape is not valid", role);
            return -1;
        }
        if (strides && strides != Py_None && dim > 1) {
            Py_ssize_t st = PyTuple_Check(strides) && i < PyTuple_GET_SIZE(strides)
                                ? PyLong_AsSsize_t(PyTuple_GET_ITEM(strides, i))
                                : -1;
            if (st != expect) {
                PyErr_Clear();
                gwpy_raise_argument(0, "%s: the CUDA array is not C-contiguous (use .contiguous())",
                                    role);
                return -1;
            }
        }
        expect *= dim;
        count *= dim;
    }
    void *ptr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
    if (PyErr_Occurred())
        return -1;
    if (writable && PyObject_IsTrue(PyTuple_GET_ITEM(data, 1))) {
        gwpy_raise_argument(0, "%s: the CUDA array is read-only; gradwire writes its result there",
                            role);
        return -1;
    }
    out->view.buf = ptr;
    out->view.obj = Py_NewRef(obj); /* released by PyBuffer_Release: a DECREF */
    out->view.len = count * itemsize;
    out->view.itemsize = itemsize;
    out->view.readonly = !writable;
    out->dtype = dtype;
    out->count = (size_t)count;
    return 0;
}

int gwpy_buffer_get(PyObject *obj, int writable, gw_dtype_t dtype_override, const char *role,
                    gwpy_buffer *out)
{
    int flags = PyBUF_FORMAT | PyBUF_STRIDES | (writable ? PyBUF_WRITABLE : 0);
    memset(out, 0, sizeof(*out));
    if (!PyObject_CheckBuffer(obj) && PyObject_HasAttrString(obj, "__cuda_array_interface__")) {
        PyObject *cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
        if (!cai)
            return -1;
        int rc = cuda_array_get(obj, cai, writable, dtype_override, role, out);
        Py_DECREF(cai);
        if (rc != 0)
            memset(out, 0, sizeof(*out));
        return rc;
    }
    if (!PyObject_CheckBuffer(obj)) {
        gwpy_raise_argument(1,
                            "%s: a %.100s has no buffer (pass a numpy array or a CPU tensor's "
                            ".numpy())",
                            role, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (PyObject_GetBuffer(obj, &out->view, flags) != 0) {
        PyErr_Clear();
        /* Tell why: ask again without the writable flag. */
        if (writable && PyObject_GetBuffer(obj, &out->view, PyBUF_FORMAT | PyBUF_STRIDES) == 0) {
            PyBuffer_Release(&out->view);
            gwpy_raise_argument(0, "%s: the buffer is read-only; gradwire writes its result there",
                                role);
        } else {
            gwpy_raise_argument(0, "%s: the %.100s does not export a buffer gradwire can use", role,
                                Py_TYPE(obj)->tp_name);
        }
        return -1;
    }
    if (!PyBuffer_IsContiguous(&out->view, 'C')) {
        gwpy_raise_argument(0,
                            "%s: the buffer is not C-contiguous (use numpy.ascontiguousarray "
                            "or .contiguous(), and pass the copy both ways)",
                            role);
        goto fail;
    }
    gw_dtype_t dtype = dtype_of_format(out->view.format, out->view.itemsize);
    if (dtype_override == GW_BFLOAT16) {
        const char *f = out->view.format ? out->view.format : "B";
        if (*f == '@' || *f == '=' || *f == '<')
            f++;
        if (out->view.itemsize != 2 || (strcmp(f, "H") != 0 && strcmp(f, "h") != 0)) {
            gwpy_raise_argument(1,
                                "%s: dtype='bfloat16' needs a buffer of 2-byte integers (the "
                                "bits, e.g. tensor.view(torch.int16).numpy()), not format '%s'",
                                role, out->view.format ? out->view.format : "B");
            goto fail;
        }
        dtype = GW_BFLOAT16;
    } else if (dtype_override == GW_FLOAT8_E4M3 || dtype_override == GW_FLOAT8_E5M2) {
        if (out->view.itemsize != 1) {
            gwpy_raise_argument(1,
                                "%s: dtype='%s' needs a buffer of bytes (the bits, e.g. "
                                "tensor.view(torch.uint8).numpy()), not %zd-byte items",
                                role, gw_dtype_name(dtype_override), out->view.itemsize);
            goto fail;
        }
        dtype = dtype_override;
    } else if ((dtype_override == GW_UINT32 && (dtype == GW_INT32 || dtype == GW_UINT32)) ||
               (dtype_override == GW_UINT64 && (dtype == GW_INT64 || dtype == GW_UINT64))) {
        dtype = dtype_override; /* the bits of a signed view (torch.uint32 as int32) */
    } else if (dtype_override != GW_DTYPE_COUNT) {
        if (dtype != dtype_override) {
            gwpy_raise_argument(1, "%s: the buffer holds %s, not %s", role,
                                dtype == GW_DTYPE_COUNT ? "another type" : gw_dtype_name(dtype),
                                gw_dtype_name(dtype_override));
            goto fail;
        }
    }
    if (dtype == GW_DTYPE_COUNT) {
        gwpy_raise_argument(1,
                            "%s: gradwire has no type for buffer format '%s' (%zd-byte items); "
                            "it reduces float32, float64, float16, int8, uint8, int32, int64, "
                            "uint32 and uint64 (bfloat16 and the float8 types by dtype=)",
                            role, out->view.format ? out->view.format : "B", out->view.itemsize);
        goto fail;
    }
    out->dtype = dtype;
    out->count = (size_t)(out->view.len / out->view.itemsize);
    return 0;
fail:
    PyBuffer_Release(&out->view);
    memset(out, 0, sizeof(*out));
    return -1;
}

void gwpy_buffer_release(gwpy_buffer *buf)
{
    if (buf->view.obj != NULL)
        PyBuffer_Release(&buf->view);
    memset(buf, 0, sizeof(*buf));
}

/* An enum argument given by name (parsed by the library) or by value. */
static int parse_enum(PyObject *obj, const char *what, int count,
                      gw_status_t (*parse)(const char *, void *), int *out)
{
    if (PyUnicode_Check(obj)) {
        const char *name = PyUnicode_AsUTF8(obj);
        if (name == NULL)
            return -1;
        if (parse(name, out) != GW_OK) {
            gwpy_raise_argument(0, "unknown %s '%s'", what, name);
            return -1;
        }
        return 0;
    }
    long v = PyLong_AsLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        gwpy_raise_argument(1, "%s must be a name or an int, not %.100s", what,
                            Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (v < 0 || v >= count) {
        gwpy_raise_argument(0, "%s %ld out of range [0, %d)", what, v, count);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static gw_status_t parse_op_name(const char *s, void *out) { return gw_op_parse(s, out); }
static gw_status_t parse_dtype_name(const char *s, void *out) { return gw_dtype_parse(s, out); }
static gw_status_t parse_algo_name(const char *s, void *out) { return gw_algo_parse(s, out); }

int gwpy_parse_op(PyObject *obj, gw_op_t *out)
{
    int v;
    if (parse_enum(obj, "op", GW_OP_COUNT, parse_op_name, &v) != 0)
        return -1;
    *out = (gw_op_t)v;
    return 0;
}

int gwpy_parse_dtype(PyObject *obj, gw_dtype_t *out)
{
    int v;
    if (parse_enum(obj, "dtype", GW_DTYPE_COUNT, parse_dtype_name, &v) != 0)
        return -1;
    *out = (gw_dtype_t)v;
    return 0;
}

int gwpy_parse_algo(PyObject *obj, gw_algo_t *out)
{
    int v;
    if (parse_enum(obj, "algo", GW_ALGO_COUNT, parse_algo_name, &v) != 0)
        return -1;
    *out = (gw_algo_t)v;
    return 0;
}

static PyObject *register_errors(PyObject *module, PyObject *args)
{
    PyObject *classes, *arg, *dtype;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!OO", &PyDict_Type, &classes, &arg, &dtype))
        return NULL;
    Py_XSETREF(error_classes, Py_NewRef(classes));
    Py_XSETREF(argument_error, Py_NewRef(arg));
    Py_XSETREF(dtype_error, Py_NewRef(dtype));
    Py_RETURN_NONE;
}

static PyObject *version(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyUnicode_FromString(gw_version());
}

static PyMethodDef module_methods[] = {
    {"_register_errors", register_errors, METH_VARARGS,
     "_register_errors(classes, ArgumentError, DtypeError): the exception classes gradwire raises "
     "(classes maps a status value to its class)."},
    {"version", version, METH_NOARGS, "The library's version, \"MAJOR.MINOR.PATCH\"."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "gradwire._core",
    .m_doc = "gradwire's C extension: communicators, collectives, messages and compression "
             "states on objects with the buffer protocol. Use it through the gradwire package.",
    .m_size = -1,
    .m_methods = module_methods,
};

/* Add {name: value} for values 0 .. count-1, named by the library. */
static int add_enum(PyObject *module, const char *attr, int count, const char *(*name)(int))
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return -1;
    for (int v = 0; v < count; v++) {
        PyObject *value = PyLong_FromLong(v);
        if (value == NULL || PyDict_SetItemString(d, name(v), value) != 0) {
            Py_XDECREF(value);
            Py_DECREF(d);
            return -1;
        }
        Py_DECREF(value);
    }
    return PyModule_AddObject(module, attr, d) == 0 ? 0 : (Py_DECREF(d), -1);
}

static const char *dtype_name(int v) { return gw_dtype_name((gw_dtype_t)v); }
static const char *op_name(int v) { return gw_op_name((gw_op_t)v); }
static const char *algo_name(int v) { return gw_algo_name((gw_algo_t)v); }
static const char *codec_name(int v) { return gw_codec_name((gw_codec_t)v); }

static int add_statuses(PyObject *module)
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return -1;
#define GWPY_STATUS_ENTRY(name, value, text)                       \
    do {                                                           \
        PyObject *v = PyLong_FromLong(value);                      \
        if (v == NULL || PyDict_SetItemString(d, #name, v) != 0) { \
            Py_XDECREF(v);                                         \
            Py_DECREF(d);                                          \
            return -1;                                             \
        }                                                          \
        Py_DECREF(v);                                              \
    } while (0);
    GW_STATUS_MAP(GWPY_STATUS_ENTRY)
#undef GWPY_STATUS_ENTRY
    return PyModule_AddObject(module, "STATUS", d) == 0 ? 0 : (Py_DECREF(d), -1);
}

PyMODINIT_FUNC PyInit__core(void)
{
    if (PyType_Ready(&gwpy_comm_type) < 0 || PyType_Ready(&gwpy_handle_type) < 0 ||
        PyType_Ready(&gwpy_compress_state_type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (add_statuses(m) != 0 || add_enum(m, "DTYPES", GW_DTYPE_COUNT, dtype_name) != 0 ||
        add_enum(m, "OPS", GW_OP_COUNT, op_name) != 0 ||
        add_enum(m, "ALGOS", GW_ALGO_COUNT, algo_name) != 0 ||
        add_enum(m, "CODECS", GW_CODEC_COUNT, codec_name) != 0 ||
        PyModule_AddIntConstant(m, "COMPRESS_STATE_VERSION", GW_COMPRESS_STATE_VERSION) != 0)
        goto fail;
    PyObject *hv =
        PyUnicode_FromFormat("%d.%d.%d", GW_VERSION_MAJOR, GW_VERSION_MINOR, GW_VERSION_PATCH);
    if (hv == NULL || PyModule_AddObject(m, "HEADER_VERSION", hv) != 0) {
        Py_XDECREF(hv);
        goto fail;
    }
    Py_INCREF(&gwpy_comm_type);
    if (PyModule_AddObject(m, "Comm", (PyObject *)&gwpy_comm_type) != 0)
        goto fail;
    Py_INCREF(&gwpy_handle_type);
    if (PyModule_AddObject(m, "Handle", (PyObject *)&gwpy_handle_type) != 0)
        goto fail;
    Py_INCREF(&gwpy_compress_state_type);
    if (PyModule_AddObject(m, "CompressState", (PyObject *)&gwpy_compress_state_type) != 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
