/*
 * core.h - what the files of gradwire's CPython extension (gradwire._core)
 * share: the Comm, Handle and CompressState objects, the buffer checks that
 * turn any object with the buffer protocol into a pointer, a count and a
 * gw_dtype_t, and the one place that turns a gw_status_t into a Python
 * exception (gradwire.Error and its subclasses, defined in Python).
 *
 * Every file here is built on include/gradwire.h only, as a user would.
 */
#ifndef GW_PYTHON_CORE_H
#define GW_PYTHON_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "gradwire.h"

/* A communicator. `busy` is set (with the GIL held) while a call runs
 * without the GIL, so that a second thread gets a clear error instead of
 * entering a communicator that is not thread-safe. Handles still pending
 * are kept in a list so that close() can complete them before the
 * communicator goes. */
typedef struct gwpy_comm {
    PyObject_HEAD gw_comm_t *comm;
    int busy;
    struct gwpy_handle *pending; /* doubly linked through the handles */
    PyObject *weakrefs;
} gwpy_comm;

/* A non-blocking call in flight: the gw_handle_t, the buffers it uses
 * (held as Py_buffer views, which keep the arrays alive and stop their
 * exporters from resizing them) and what wait() returns. */
typedef struct gwpy_handle {
    PyObject_HEAD gw_handle_t *handle;
    gwpy_comm *owner;   /* strong reference */
    const char *what;   /* the call's name, for errors */
    Py_buffer views[2]; /* send, recv (.obj NULL when unused) */
    PyObject *result;   /* what wait() returns (the output array) */
    PyObject *state;    /* a CompressState owned until done, or NULL */
    PyObject *keep;     /* anything else the call reads until done (alltoallv's counts) */
    gw_status_t status; /* once done */
    int culprit;        /* the rank blamed when status is not GW_OK */
    char reason[1024];  /* gw_last_error when it finished, if status is not GW_OK */
    int done, busy;
    /* isend/irecv: data moves only while the posting thread tests or
     * waits, which is use of the communicator: only that thread may, and
     * not while another call is inside it. */
    int drives_comm;
    unsigned long thread;
    gw_msg_status_t *msg; /* irecv_tagged: its status, written when done (owned), or NULL */
    struct gwpy_handle *prev, *next;
} gwpy_handle;

/* A gradient-compression state (gw_compress_state_t). `inflight` counts the
 * non-blocking calls that own it: the library owns the state until they
 * complete, so every method refuses meanwhile. */
typedef struct gwpy_compress_state {
    PyObject_HEAD gw_compress_state_t *state;
    gw_compress_config_t config;
    size_t rows, cols;
    int inflight;
} gwpy_compress_state;

extern PyTypeObject gwpy_comm_type;
extern PyTypeObject gwpy_handle_type;
extern PyTypeObject gwpy_compress_state_type;

/* Raise the gradwire.Error subclass registered for `status` with a message
 * "WHAT: DESCRIPTION (GW_ERR_NAME): REASON" and the culprit rank (-1:
 * none), as the exception's status, message, culprit and reason
 * attributes. REASON is what the library logged (gw_last_error): reason,
 * or with reason NULL the calling thread's last error; nothing is added
 * when it is empty. Returns NULL. */
PyObject *gwpy_raise(gw_status_t status, const char *what, int culprit, const char *reason);
/* The reason to raise a failed call on comm with: the communicator's last
 * error, or the calling thread's when the communicator has none (an error
 * logged before it existed, or by a logger of its own). Valid until the
 * thread's next call into gradwire. */
const char *gwpy_reason(gw_comm_t *comm);
/* Raise gradwire.ArgumentError (a ValueError; DtypeError, also a
 * TypeError, when dtype_error is set) for a bad argument found before the
 * library was called. Returns NULL. */
PyObject *gwpy_raise_argument(int dtype_error, const char *fmt, ...);

/* A buffer taken from a Python object: the view, its element type and
 * element count. */
typedef struct gwpy_buffer {
    Py_buffer view;
    gw_dtype_t dtype;
    size_t count;
} gwpy_buffer;

/* Take obj's buffer (C-contiguous; writable when `writable`), its dtype
 * from the buffer's format ('f', 'd', 'e', 'b', 'B', 'i', 'l', 'q' of
 * native byte order), or `dtype_override` (GW_BFLOAT16 only, for 2-byte
 * integer buffers that hold bfloat16 bits) when it is not GW_DTYPE_COUNT.
 * `role` names the argument in errors ("send", "out"). Returns 0, or -1
 * with an exception set and nothing held. */
int gwpy_buffer_get(PyObject *obj, int writable, gw_dtype_t dtype_override, const char *role,
                    gwpy_buffer *out);
void gwpy_buffer_release(gwpy_buffer *buf);

/* An op, dtype or algorithm given as its name ("sum") or its value. */
int gwpy_parse_op(PyObject *obj, gw_op_t *out);
int gwpy_parse_dtype(PyObject *obj, gw_dtype_t *out);
int gwpy_parse_algo(PyObject *obj, gw_algo_t *out);

/* The Comm's gw_comm_t, or NULL with an exception set when it is closed or
 * another thread is inside it. */
gw_comm_t *gwpy_comm_enter(gwpy_comm *self);

/* A Handle for a call that has started: takes over the views in bufs
 * (their .obj set to NULL in the caller's copies), keeps `result` and
 * `state` (either may be NULL) and links itself into the owner's list. */
PyObject *gwpy_handle_new(gwpy_comm *owner, gw_handle_t *handle, const char *what,
                          gwpy_buffer *bufs, int nbufs, PyObject *result, PyObject *state,
                          int drives_comm);
/* Wait for every pending handle of a Comm (close() does this before
 * destroying it). */
void gwpy_comm_complete_pending(gwpy_comm *self);

/* The Comm methods of the compressed allreduce (compress_state.c). */
PyObject *gwpy_comm_allreduce_compressed(PyObject *self, PyObject *args, PyObject *kw);
PyObject *gwpy_comm_iallreduce_compressed(PyObject *self, PyObject *args, PyObject *kw);

/* Comm methods outside the call table: the v-form collectives, whose
 * count arrays the handle keeps (comm_vcoll.c), and sub-communicators
 * (comm_split.c). */
PyObject *gwpy_comm_alltoallv(PyObject *self, PyObject *args, PyObject *kw);
/* gw_allreduce_many and gw_iallreduce_many (comm_many.c). */
PyObject *gwpy_comm_allreduce_many(PyObject *self, PyObject *args, PyObject *kw);
PyObject *gwpy_comm_iallreduce_many(PyObject *self, PyObject *args, PyObject *kw);
PyObject *gwpy_comm_ialltoallv(PyObject *self, PyObject *args, PyObject *kw);
PyObject *gwpy_comm_allgatherv(PyObject *self, PyObject *args, PyObject *kw);
PyObject *gwpy_comm_iallgatherv(PyObject *self, PyObject *args, PyObject *kw);
PyObject *gwpy_comm_split(PyObject *self, PyObject *args, PyObject *kw);
PyObject *gwpy_comm_dup(PyObject *self, PyObject *unused);
/* A Comm object of type `type` (self's, or the class a classmethod was
 * called on) around a communicator the library made (comm_split.c); NULL
 * with an exception set, child destroyed, when out of memory. */
PyObject *gwpy_comm_wrap(PyTypeObject *type, gw_comm_t *child);
/* What call(self's communicator, &child) made, as a Comm of self's type,
 * or None when it made none; raises what the library said when it failed
 * (`what` names the call). The GIL is released and self busy meanwhile
 * (comm_split.c: dup, and the elastic calls). */
PyObject *gwpy_comm_child(PyObject *self, const char *what,
                          gw_status_t (*call)(gw_comm_t *, gw_comm_t **));
/* The elastic calls: gw_comm_shrink, gw_comm_grow, gw_comm_join
 * (comm_elastic.c). */
PyObject *gwpy_comm_shrink(PyObject *self, PyObject *unused);
PyObject *gwpy_comm_grow(PyObject *self, PyObject *unused);
PyObject *gwpy_comm_joiners(PyObject *self, PyObject *unused);
PyObject *gwpy_comm_join(PyObject *cls, PyObject *args, PyObject *kw);
/* obj as seconds in (0, 2e6] (what names it in the error); -1 with an
 * exception set otherwise. */
int gwpy_seconds(PyObject *obj, const char *what, double *seconds);
/* A configuration (gw_config_init) with the fields Comm() and Comm.join()
 * both take: timeout in seconds or None, algo a name, a value or None; -1
 * with an exception set when either is malformed. */
int gwpy_config_fill(gw_config_t *cfg, const char *root, const char *token, const char *transport,
                     const char *ifname, int nsocks, PyObject *timeout, PyObject *algo);
/* The Comm type's life and settings (comm_life.c): its tp_init and
 * tp_dealloc, the methods outside the call table and the properties. */
int gwpy_comm_init(PyObject *obj, PyObject *args, PyObject *kw);
void gwpy_comm_dealloc(PyObject *obj);
PyObject *gwpy_comm_close(PyObject *obj, PyObject *unused);
PyObject *gwpy_comm_abort(PyObject *obj, PyObject *unused);
PyObject *gwpy_comm_enter_ctx(PyObject *obj, PyObject *unused);
PyObject *gwpy_comm_exit_ctx(PyObject *obj, PyObject *args);
PyObject *gwpy_comm_set_algo(PyObject *obj, PyObject *arg);
PyObject *gwpy_comm_set_cuda_stream(PyObject *obj, PyObject *arg);
PyObject *gwpy_comm_pick_algo(PyObject *obj, PyObject *args);
extern PyGetSetDef gwpy_comm_getset[];

#endif /* GW_PYTHON_CORE_H */
