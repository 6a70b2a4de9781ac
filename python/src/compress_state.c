/*
 * compress_state.c - gradwire._core.CompressState (gw_compress_state_t)
 * and the Comm methods that use one: allreduce_compressed and
 * iallreduce_compressed.
 *
 * A state belongs to one tensor (or bucket): its settings, shape, step,
 * error-feedback residual and codec state live in the library; this object
 * owns it and frees it with itself. While a non-blocking call owns it
 * (`inflight`), every method refuses, as the header requires. save()
 * returns the library's image as bytes, so a training checkpoint can hold
 * it; load() puts one back into a state created with the same settings.
 */
#include "core.h"

#include <string.h>

static int state_init(PyObject *obj, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"rows",          "cols",         "codec",           "error_feedback",
                             "warmup_steps",  "min_elements", "bucket_elements", "topk_ratio",
                             "powersgd_rank", "seed",         "momentum",        NULL};
    gwpy_compress_state *self = (gwpy_compress_state *)obj;
    gw_compress_config_t cfg;
    gw_compress_config_init(&cfg);
    Py_ssize_t rows, cols = 1, min_elements = (Py_ssize_t)cfg.min_elements,
                     bucket = (Py_ssize_t)cfg.bucket_elements;
    PyObject *codec = NULL;
    int error_feedback = cfg.error_feedback;
    unsigned int warmup = cfg.warmup_steps;
    unsigned long long seed = cfg.seed;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n|nO$pInndiKd", kwlist, &rows, &cols, &codec,
                                     &error_feedback, &warmup, &min_elements, &bucket,
                                     &cfg.topk_ratio, &cfg.powersgd_rank, &seed, &cfg.momentum))
        return -1;
    if (self->state != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "CompressState.__init__ called twice");
        return -1;
    }
    if (codec != NULL && PyUnicode_Check(codec)) {
        const char *name = PyUnicode_AsUTF8(codec);
        if (name == NULL)
            return -1;
        if (gw_codec_parse(name, &cfg.codec) != GW_OK) {
            gwpy_raise_argument(0, "unknown codec '%s'", name);
            return -1;
        }
    } else if (codec != NULL) {
        long v = PyLong_AsLong(codec);
        if ((v == -1 && PyErr_Occurred()) || v < 0 || v >= GW_CODEC_COUNT) {
            PyErr_Clear();
            gwpy_raise_argument(0, "codec must be a codec name or value, not %R", codec);
            return -1;
        }
        cfg.codec = (gw_codec_t)v;
    }
    if (rows < 0 || cols < 0 || min_elements < 0 || bucket < 0) {
        gwpy_raise_argument(0, "rows, cols, min_elements and bucket_elements must be >= 0");
        return -1;
    }
    cfg.error_feedback = error_feedback;
    cfg.warmup_steps = warmup;
    cfg.min_elements = (size_t)min_elements;
    cfg.bucket_elements = (size_t)bucket;
    cfg.seed = seed;
    gw_status_t st = gw_compress_state_create(&cfg, (size_t)rows, (size_t)cols, &self->state);
    if (st != GW_OK) {
        gwpy_raise(st, "CompressState", -1, NULL);
        return -1;
    }
    self->config = cfg;
    self->rows = (size_t)rows;
    self->cols = (size_t)cols;
    self->inflight = 0;
    return 0;
}

static gw_compress_state_t *state_enter(gwpy_compress_state *self, const char *what)
{
    if (self->state == NULL) {
        gwpy_raise_argument(0, "%s: the CompressState was not initialised", what);
        return NULL;
    }
    if (self->inflight > 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: a non-blocking compressed allreduce owns this state; wait for its "
                     "handle first",
                     what);
        return NULL;
    }
    return self->state;
}

static PyObject *state_save(PyObject *obj, PyObject *unused)
{
    gw_compress_state_t *s = state_enter((gwpy_compress_state *)obj, "save");
    size_t len = 0;
    (void)unused;
    if (s == NULL)
        return NULL;
    gw_status_t st = gw_compress_state_save(s, NULL, 0, &len);
    if (st != GW_OK && st != GW_ERR_OVERFLOW)
        return gwpy_raise(st, "CompressState.save", -1, NULL);
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
    if (bytes == NULL)
        return NULL;
    st = gw_compress_state_save(s, PyBytes_AS_STRING(bytes), len, &len);
    if (st != GW_OK) {
        Py_DECREF(bytes);
        return gwpy_raise(st, "CompressState.save", -1, NULL);
    }
    return bytes;
}

static PyObject *state_load(PyObject *obj, PyObject *arg)
{
    gw_compress_state_t *s = state_enter((gwpy_compress_state *)obj, "load");
    Py_buffer view;
    if (s == NULL || PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) != 0)
        return NULL;
    gw_status_t st = gw_compress_state_load(s, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    if (st != GW_OK)
        return gwpy_raise(st, "CompressState.load", -1, NULL);
    Py_RETURN_NONE;
}

static PyObject *state_reset_residual(PyObject *obj, PyObject *unused)
{
    gw_compress_state_t *s = state_enter((gwpy_compress_state *)obj, "reset_residual");
    (void)unused;
    if (s == NULL)
        return NULL;
    gw_status_t st = gw_compress_state_reset_residual(s);
    if (st != GW_OK)
        return gwpy_raise(st, "CompressState.reset_residual", -1, NULL);
    Py_RETURN_NONE;
}

static PyObject *state_file(PyObject *obj, PyObject *arg, int save)
{
    gw_compress_state_t *s =
        state_enter((gwpy_compress_state *)obj, save ? "save_file" : "load_file");
    PyObject *path = NULL;
    if (s == NULL || !PyUnicode_FSConverter(arg, &path))
        return NULL;
    gw_status_t st;
    const char *p = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS;
    st = save ? gw_compress_state_save_file(s, p) : gw_compress_state_load_file(s, p);
    Py_END_ALLOW_THREADS;
    Py_DECREF(path);
    if (st != GW_OK)
        return gwpy_raise(st, save ? "CompressState.save_file" : "CompressState.load_file", -1,
                          NULL);
    Py_RETURN_NONE;
}

static PyObject *state_save_file(PyObject *obj, PyObject *arg) { return state_file(obj, arg, 1); }
static PyObject *state_load_file(PyObject *obj, PyObject *arg) { return state_file(obj, arg, 0); }

static PyObject *stats_dict(const gw_compress_stats_t *s)
{
    return Py_BuildValue(
        "{sKsKsKsKsKsKsdsdsdsdsdsd}", "calls", (unsigned long long)s->calls, "compressed_calls",
        (unsigned long long)s->compressed_calls, "input_bytes", (unsigned long long)s->input_bytes,
        "encoded_bytes", (unsigned long long)s->encoded_bytes, "bytes_sent",
        (unsigned long long)s->bytes_sent, "dense_bytes_sent",
        (unsigned long long)s->dense_bytes_sent, "compression_ratio", s->compression_ratio,
        "encode_seconds", s->encode_seconds, "decode_seconds", s->decode_seconds, "comm_seconds",
        s->comm_seconds, "total_seconds", s->total_seconds, "codec_cpu_seconds",
        s->codec_cpu_seconds);
}

static PyObject *state_stats(PyObject *obj, PyObject *unused)
{
    gw_compress_state_t *s = state_enter((gwpy_compress_state *)obj, "stats");
    gw_compress_stats_t last, total;
    (void)unused;
    if (s == NULL)
        return NULL;
    gw_status_t st = gw_compress_stats_get(s, &last, &total);
    if (st != GW_OK)
        return gwpy_raise(st, "CompressState.stats", -1, NULL);
    PyObject *l = stats_dict(&last), *t = stats_dict(&total);
    if (l == NULL || t == NULL) {
        Py_XDECREF(l);
        Py_XDECREF(t);
        return NULL;
    }
    return Py_BuildValue("{sNsN}", "last", l, "total", t);
}

static PyObject *state_reset_stats(PyObject *obj, PyObject *unused)
{
    gw_compress_state_t *s = state_enter((gwpy_compress_state *)obj, "reset_stats");
    (void)unused;
    if (s == NULL)
        return NULL;
    gw_compress_stats_reset(s);
    Py_RETURN_NONE;
}

static PyObject *state_get(PyObject *obj, void *which)
{
    gwpy_compress_state *self = (gwpy_compress_state *)obj;
    const gw_compress_config_t *c = &self->config;
    if (which == (void *)0) {
        gw_compress_state_t *s = state_enter(self, "step");
        return s == NULL ? NULL : PyLong_FromUnsignedLongLong(gw_compress_state_step(s));
    }
    if (which == (void *)1)
        return Py_BuildValue("(nn)", (Py_ssize_t)self->rows, (Py_ssize_t)self->cols);
    return Py_BuildValue("{sssisIsnsnsdsisKsd}", "codec", gw_codec_name(c->codec), "error_feedback",
                         c->error_feedback, "warmup_steps", c->warmup_steps, "min_elements",
                         (Py_ssize_t)c->min_elements, "bucket_elements",
                         (Py_ssize_t)c->bucket_elements, "topk_ratio", c->topk_ratio,
                         "powersgd_rank", c->powersgd_rank, "seed", (unsigned long long)c->seed,
                         "momentum", c->momentum);
}

static void state_dealloc(PyObject *obj)
{
    gwpy_compress_state *self = (gwpy_compress_state *)obj;
    gw_compress_state_destroy(self->state); /* handles hold a reference: none in flight */
    Py_TYPE(obj)->tp_free(obj);
}

/* allreduce_compressed(state, send, out=None) and its non-blocking form. */
static PyObject *compressed(PyObject *obj, PyObject *args, PyObject *kw, int nonblocking)
{
    static char *kwlist[] = {"state", "send", "out", NULL};
    const char *what = nonblocking ? "iallreduce_compressed" : "allreduce_compressed";
    gwpy_comm *self = (gwpy_comm *)obj;
    PyObject *state_obj, *send, *out = Py_None;
    gwpy_buffer bufs[2];
    memset(bufs, 0, sizeof(bufs));
    if (gwpy_comm_enter(self) == NULL)
        return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O|O", kwlist, &gwpy_compress_state_type,
                                     &state_obj, &send, &out))
        goto fail_abort;
    gwpy_compress_state *state = (gwpy_compress_state *)state_obj;
    /* A state that queued calls own is fine here: this call queues behind
     * them and they run in call order. */
    if (state->state == NULL) {
        gwpy_raise_argument(0, "%s: the CompressState was not initialised", what);
        goto fail_abort;
    }
    if (out == Py_None)
        out = send;
    if (out != send &&
        gwpy_buffer_get(send, 0, GW_FLOAT32,
                        nonblocking ? "iallreduce_compressed: send" : "allreduce_compressed: send",
                        &bufs[0]) != 0)
        goto fail_abort;
    if (gwpy_buffer_get(out, 1, GW_FLOAT32,
                        out == send ? "compressed allreduce: send (in place)"
                                    : "compressed allreduce: out",
                        &bufs[1]) != 0)
        goto fail_abort;
    const void *in = out == send ? bufs[1].view.buf : bufs[0].view.buf;
    size_t count = bufs[1].count, want = state->rows * state->cols;
    if ((out != send && bufs[0].count != count) || count != want) {
        gwpy_raise_argument(0, "%s: the state is for %zu elements; send has %zu, out %zu", what,
                            want, out == send ? count : bufs[0].count, count);
        goto fail_abort;
    }
    gw_status_t st;
    gw_handle_t *handle = NULL;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS;
    if (nonblocking)
        st = gw_iallreduce_compressed(self->comm, state->state, in, bufs[1].view.buf, count,
                                      &handle);
    else
        st = gw_allreduce_compressed(self->comm, state->state, in, bufs[1].view.buf, count);
    Py_END_ALLOW_THREADS;
    self->busy = 0;
    if (st != GW_OK) {
        gwpy_buffer_release(&bufs[0]);
        gwpy_buffer_release(&bufs[1]);
        return gwpy_raise(st, what, gw_comm_culprit(self->comm), gwpy_reason(self->comm));
    }
    if (nonblocking) {
        state->inflight++;
        return gwpy_handle_new(self, handle, what, bufs, 2, out, state_obj, 0);
    }
    gwpy_buffer_release(&bufs[0]);
    gwpy_buffer_release(&bufs[1]);
    return Py_NewRef(out);
fail_abort:
    gwpy_buffer_release(&bufs[0]);
    gwpy_buffer_release(&bufs[1]);
    gw_comm_abort(self->comm);
    return NULL;
}

PyObject *gwpy_comm_allreduce_compressed(PyObject *self, PyObject *args, PyObject *kw)
{
    return compressed(self, args, kw, 0);
}

PyObject *gwpy_comm_iallreduce_compressed(PyObject *self, PyObject *args, PyObject *kw)
{
    return compressed(self, args, kw, 1);
}

static PyMethodDef state_methods[] = {
    {"save", state_save, METH_NOARGS,
     "save() -> bytes: the state's image (settings, step, "
     "residual, codec state), for a checkpoint."},
    {"load", state_load, METH_O,
     "load(image): put a saved image back (the state must have the same settings and shape)."},
    {"reset_residual", state_reset_residual, METH_NOARGS,
     "reset_residual(): zero this rank's own part (the error-feedback residual, DGC's "
     "velocity), keep the step and PowerSGD's Q: for a rank that loaded another rank's image "
     "to join a running job."},
    {"save_file", state_save_file, METH_O, "save_file(path): save() into a file, atomically."},
    {"load_file", state_load_file, METH_O, "load_file(path): load() from a file."},
    {"stats", state_stats, METH_NOARGS,
     "stats() -> {'last': {...}, 'total': {...}}: what the calls cost (bytes, seconds, ratio)."},
    {"reset_stats", state_reset_stats, METH_NOARGS, "reset_stats(): zero the statistics."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef state_getset[] = {
    {"step", state_get, NULL, "Successful calls on this state.", (void *)0},
    {"shape", state_get, NULL, "(rows, cols).", (void *)1},
    {"config", state_get, NULL, "The settings, as a dict.", (void *)2},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject gwpy_compress_state_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gradwire._core.CompressState",
    .tp_basicsize = sizeof(gwpy_compress_state),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "CompressState(rows, cols=1, codec='none', *, error_feedback=True, warmup_steps=0, "
              "min_elements=1024, bucket_elements=4096, topk_ratio=0.01, powersgd_rank=4, "
              "seed=0, momentum=0.0): the compression state of one float32 tensor.",
    .tp_new = PyType_GenericNew,
    .tp_init = state_init,
    .tp_dealloc = state_dealloc,
    .tp_methods = state_methods,
    .tp_getset = state_getset,
};
