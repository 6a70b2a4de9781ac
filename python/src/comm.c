/*
 * comm.c - gradwire._core.Comm: a communicator and every collective and
 * point-to-point call of gradwire.h, from one table.
 *
 * A call is a line of GWPY_CALLS below: its Python name, its parameters
 * (which buffers, op, root, peer), how its buffers' element counts relate
 * (the same, gathered: out holds size x send, scattered: send holds size x
 * out) and a small function that makes the C call, blocking or returning a
 * gw_handle_t. One generic method parses the arguments by the table, takes
 * the buffers (contiguity, writability, dtype from the format: module.c),
 * checks the counts, releases the GIL around the library and raises the
 * status as gradwire.Error. Adding a collective is a line in the table and
 * a function of one statement.
 *
 * An argument refused here (a read-only output, the wrong length, an
 * unknown op) aborts the communicator before raising, as the library's own
 * argument checks fail it: the other ranks are already in the call, and
 * they fail at once with GW_ERR_ABORTED, blaming this rank, instead of
 * waiting out the timeout.
 *
 * The Comm type's life and settings (Comm(), close(), abort(), the
 * properties) are in comm_life.c; the calls with a shape of their own in
 * comm_vcoll.c, comm_many.c, comm_split.c and comm_elastic.c.
 */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The parameters a call may take, in the order they are given. */
enum param {
    P_SEND,  /* the input buffer (read-only allowed) */
    P_BUF,   /* the one buffer of a receive (written) */
    P_OUT,   /* the output buffer; None or absent: in place, into send */
    P_RECV,  /* sendrecv's receive buffer (written) */
    P_OP,    /* reduction op, default "sum" */
    P_ROOT,  /* root rank, default 0 */
    P_PEER,  /* peer rank (dst of sendrecv) */
    P_SRC,   /* sendrecv's source rank */
    P_DTYPE, /* "bfloat16" for 2-byte integer buffers of bfloat16 bits */
    P_TAG    /* a tagged message's tag; None: 0 for a send, any for a receive */
};
#define P_END (-1)
static const char *const param_names[] = {"send", "buf",  "out", "recv",  "op",
                                          "root", "peer", "src", "dtype", "tag"};

/* How the element counts of the buffers relate. */
enum count_rule {
    R_ONE,     /* one buffer, or none */
    R_SAME,    /* out has as many elements as send */
    R_GATHER,  /* out has size x send's elements; count is send's */
    R_SCATTER, /* send has size x out's elements; count is out's */
    R_BLOCKS,  /* send and out alike, size blocks; count is a block's */
    R_EACH     /* sendrecv: each buffer its own count */
};

/* What the run and start functions get, with the GIL released. */
struct call_args {
    gw_comm_t *comm;
    const void *send;
    void *out;
    size_t count, recv_count;
    gw_dtype_t dtype;
    gw_op_t op;
    int root, peer, src, tag;
    gw_msg_status_t *msg; /* irecv_tagged: where the status goes (the Handle owns it) */
};

struct call {
    const char *name;
    const int *params; /* ends with P_END */
    enum count_rule rule;
    gw_status_t (*run)(const struct call_args *a);                      /* blocking */
    gw_status_t (*start)(const struct call_args *a, gw_handle_t **out); /* or non-blocking */
    const char *doc;
};

/* ---- The calls ---------------------------------------------------------- */

static const int reduce_all[] = {P_SEND, P_OUT, P_OP, P_DTYPE, P_END};
static const int rooted_reduce[] = {P_SEND, P_OUT, P_OP, P_ROOT, P_DTYPE, P_END};
static const int rooted[] = {P_SEND, P_OUT, P_ROOT, P_DTYPE, P_END};
static const int gather[] = {P_SEND, P_OUT, P_DTYPE, P_END};
static const int none[] = {P_END};
static const int to_peer[] = {P_SEND, P_PEER, P_DTYPE, P_END};
static const int from_peer[] = {P_BUF, P_PEER, P_DTYPE, P_END};
static const int exchange[] = {P_SEND, P_PEER, P_RECV, P_SRC, P_DTYPE, P_END};
static const int rooted_blocks[] = {P_SEND, P_OUT, P_ROOT, P_DTYPE, P_END};
static const int to_peer_tagged[] = {P_SEND, P_PEER, P_TAG, P_DTYPE, P_END};
static const int from_any[] = {P_BUF, P_SRC, P_TAG, P_DTYPE, P_END};

static gw_status_t run_allreduce(const struct call_args *a)
{
    return gw_allreduce(a->comm, a->send, a->out, a->count, a->dtype, a->op);
}
static gw_status_t run_broadcast(const struct call_args *a)
{
    return gw_broadcast(a->comm, a->send, a->out, a->count, a->dtype, a->root);
}
static gw_status_t run_reduce(const struct call_args *a)
{
    return gw_reduce(a->comm, a->send, a->out, a->count, a->dtype, a->op, a->root);
}
static gw_status_t run_allgather(const struct call_args *a)
{
    return gw_allgather(a->comm, a->send, a->out, a->count, a->dtype);
}
static gw_status_t run_reduce_scatter(const struct call_args *a)
{
    return gw_reduce_scatter(a->comm, a->send, a->out, a->count, a->dtype, a->op);
}
static gw_status_t run_barrier(const struct call_args *a) { return gw_barrier(a->comm); }
static gw_status_t run_send(const struct call_args *a)
{
    return gw_send(a->comm, a->send, a->count, a->dtype, a->peer);
}
static gw_status_t run_recv(const struct call_args *a)
{
    return gw_recv(a->comm, a->out, a->count, a->dtype, a->peer);
}
static gw_status_t run_sendrecv(const struct call_args *a)
{
    return gw_sendrecv(a->comm, a->send, a->count, a->peer, a->out, a->recv_count, a->src,
                       a->dtype);
}
static gw_status_t run_alltoall(const struct call_args *a)
{
    return gw_alltoall(a->comm, a->send, a->out, a->count, a->dtype);
}
static gw_status_t run_gather(const struct call_args *a)
{
    return gw_gather(a->comm, a->send, a->out, a->count, a->dtype, a->root);
}
static gw_status_t run_scatter(const struct call_args *a)
{
    return gw_scatter(a->comm, a->send, a->out, a->count, a->dtype, a->root);
}
static gw_status_t start_igather(const struct call_args *a, gw_handle_t **h)
{
    return gw_igather(a->comm, a->send, a->out, a->count, a->dtype, a->root, h);
}
static gw_status_t start_iscatter(const struct call_args *a, gw_handle_t **h)
{
    return gw_iscatter(a->comm, a->send, a->out, a->count, a->dtype, a->root, h);
}
static gw_status_t start_iallreduce(const struct call_args *a, gw_handle_t **h)
{
    return gw_iallreduce(a->comm, a->send, a->out, a->count, a->dtype, a->op, h);
}
static gw_status_t start_ibroadcast(const struct call_args *a, gw_handle_t **h)
{
    return gw_ibroadcast(a->comm, a->send, a->out, a->count, a->dtype, a->root, h);
}
static gw_status_t start_ireduce(const struct call_args *a, gw_handle_t **h)
{
    return gw_ireduce(a->comm, a->send, a->out, a->count, a->dtype, a->op, a->root, h);
}
static gw_status_t start_iallgather(const struct call_args *a, gw_handle_t **h)
{
    return gw_iallgather(a->comm, a->send, a->out, a->count, a->dtype, h);
}
static gw_status_t start_ireduce_scatter(const struct call_args *a, gw_handle_t **h)
{
    return gw_ireduce_scatter(a->comm, a->send, a->out, a->count, a->dtype, a->op, h);
}
static gw_status_t start_ibarrier(const struct call_args *a, gw_handle_t **h)
{
    return gw_ibarrier(a->comm, h);
}
static gw_status_t start_ialltoall(const struct call_args *a, gw_handle_t **h)
{
    return gw_ialltoall(a->comm, a->send, a->out, a->count, a->dtype, h);
}
static gw_status_t start_isend(const struct call_args *a, gw_handle_t **h)
{
    return gw_isend(a->comm, a->send, a->count, a->dtype, a->peer, h);
}
static gw_status_t start_irecv(const struct call_args *a, gw_handle_t **h)
{
    return gw_irecv(a->comm, a->out, a->count, a->dtype, a->peer, h);
}
static gw_status_t start_isend_tagged(const struct call_args *a, gw_handle_t **h)
{
    return gw_isend_tagged(a->comm, a->send, a->count, a->dtype, a->peer, a->tag, h);
}
static gw_status_t start_irecv_tagged(const struct call_args *a, gw_handle_t **h)
{
    return gw_irecv_tagged(a->comm, a->out, a->count, a->dtype, a->src, a->tag, a->msg, h);
}

/* X(name, params, rule, run, start, doc) */
#define GWPY_CALLS(X)                                                                              \
    X(allreduce, reduce_all, R_SAME, run_allreduce, NULL,                                          \
      "allreduce(send, out=None, op='sum', dtype=None) -> out: out = op over ranks of send "       \
      "(in place when out is None or send).")                                                      \
    X(broadcast, rooted, R_SAME, run_broadcast, NULL,                                              \
      "broadcast(send, out=None, root=0, dtype=None) -> out: root's send into every rank's out "   \
      "(in place when out is None).")                                                              \
    X(reduce, rooted_reduce, R_SAME, run_reduce, NULL,                                             \
      "reduce(send, out=None, op='sum', root=0, dtype=None) -> out: op over ranks of send, into "  \
      "root's out only.")                                                                          \
    X(allgather, gather, R_GATHER, run_allgather, NULL,                                            \
      "allgather(send, out, dtype=None) -> out: every rank's send in rank order; out holds size "  \
      "x send's elements.")                                                                        \
    X(reduce_scatter, reduce_all, R_SCATTER, run_reduce_scatter, NULL,                             \
      "reduce_scatter(send, out, op='sum', dtype=None) -> out: block `rank` of op over ranks of "  \
      "send; send holds size x out's elements.")                                                   \
    X(barrier, none, R_ONE, run_barrier, NULL, "barrier(): returns once every rank entered it.")   \
    X(send, to_peer, R_ONE, run_send, NULL,                                                        \
      "send(send, peer, dtype=None): send the buffer to rank peer; returns once it accepted it.")  \
    X(recv, from_peer, R_ONE, run_recv, NULL,                                                      \
      "recv(buf, peer, dtype=None) -> buf: receive from rank peer into buf.")                      \
    X(sendrecv, exchange, R_EACH, run_sendrecv, NULL,                                              \
      "sendrecv(send, peer, recv, src, dtype=None) -> recv: send to peer and receive from src at " \
      "once.")                                                                                     \
    X(alltoall, gather, R_BLOCKS, run_alltoall, NULL,                                              \
      "alltoall(send, out=None, dtype=None) -> out: block j of send to rank j, block j of out "    \
      "from rank j (size blocks each; in place when out is None or send).")                        \
    X(gather, rooted_blocks, R_GATHER, run_gather, NULL,                                           \
      "gather(send, out, root=0, dtype=None) -> out: every rank's send in rank order into root's " \
      "out (size x send's elements; given on every rank, written on root only).")                  \
    X(scatter, rooted_blocks, R_SCATTER, run_scatter, NULL,                                        \
      "scatter(send, out, root=0, dtype=None) -> out: block `rank` of root's send (size x out's "  \
      "elements; given on every rank, read on root only) into out.")                               \
    X(igather, rooted_blocks, R_GATHER, NULL, start_igather,                                       \
      "igather(send, out, root=0, dtype=None) -> Handle: gather on the progress thread.")          \
    X(iscatter, rooted_blocks, R_SCATTER, NULL, start_iscatter,                                    \
      "iscatter(send, out, root=0, dtype=None) -> Handle: scatter on the progress thread.")        \
    X(iallreduce, reduce_all, R_SAME, NULL, start_iallreduce,                                      \
      "iallreduce(send, out=None, op='sum', dtype=None) -> Handle: allreduce on the progress "     \
      "thread; wait() returns out.")                                                               \
    X(ibroadcast, rooted, R_SAME, NULL, start_ibroadcast,                                          \
      "ibroadcast(send, out=None, root=0, dtype=None) -> Handle: broadcast on the progress "       \
      "thread.")                                                                                   \
    X(ireduce, rooted_reduce, R_SAME, NULL, start_ireduce,                                         \
      "ireduce(send, out=None, op='sum', root=0, dtype=None) -> Handle: reduce on the progress "   \
      "thread.")                                                                                   \
    X(iallgather, gather, R_GATHER, NULL, start_iallgather,                                        \
      "iallgather(send, out, dtype=None) -> Handle: allgather on the progress thread.")            \
    X(ireduce_scatter, reduce_all, R_SCATTER, NULL, start_ireduce_scatter,                         \
      "ireduce_scatter(send, out, op='sum', dtype=None) -> Handle: reduce_scatter on the "         \
      "progress thread.")                                                                          \
    X(ibarrier, none, R_ONE, NULL, start_ibarrier,                                                 \
      "ibarrier() -> Handle: a barrier on the progress thread.")                                   \
    X(ialltoall, gather, R_BLOCKS, NULL, start_ialltoall,                                          \
      "ialltoall(send, out=None, dtype=None) -> Handle: alltoall on the progress thread.")         \
    X(isend, to_peer, R_ONE, NULL, start_isend,                                                    \
      "isend(send, peer, dtype=None) -> Handle: a send that moves while this thread tests or "     \
      "waits.")                                                                                    \
    X(irecv, from_peer, R_ONE, NULL, start_irecv,                                                  \
      "irecv(buf, peer, dtype=None) -> Handle: a receive into buf; wait() returns buf.")           \
    X(isend_tagged, to_peer_tagged, R_ONE, NULL, start_isend_tagged,                               \
      "isend_tagged(send, peer, tag=0, dtype=None) -> Handle: a tagged send (gw_isend_tagged); "   \
      "it completes once the receiver took the message in.")                                       \
    X(irecv_tagged, from_any, R_ONE, NULL, start_irecv_tagged,                                     \
      "irecv_tagged(buf, src=None, tag=None, dtype=None) -> Handle: a receive of the earliest "    \
      "message from src (None: any rank) with tag (None: any) into buf (gw_irecv_tagged); once "   \
      "done, Handle.status is (source, tag, count).")

#define GWPY_CALL_ENTRY(name, params, rule, run, start, doc) {#name, params, rule, run, start, doc},
static const struct call calls[] = {GWPY_CALLS(GWPY_CALL_ENTRY)};
#undef GWPY_CALL_ENTRY
#define GWPY_CALL_INDEX(name, params, rule, run, start, doc) CALL_##name,
enum { GWPY_CALLS(GWPY_CALL_INDEX) CALL_COUNT };
#undef GWPY_CALL_INDEX

/* ---- The communicator --------------------------------------------------- */

gw_comm_t *gwpy_comm_enter(gwpy_comm *self)
{
    if (self->comm == NULL) {
        gwpy_raise_argument(0, "the communicator is closed");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "another thread is inside this communicator (a gradwire communicator is "
                        "used from one thread at a time; give each thread its own)");
        return NULL;
    }
    return self->comm;
}

/* The parsed arguments of one call, in param order. */
struct parsed {
    PyObject *value[P_TAG + 1];
};

/* Positional arguments then keywords, by the call's parameter list. */
static int parse_params(const struct call *c, PyObject *args, PyObject *kw, struct parsed *p)
{
    Py_ssize_t nargs = PyTuple_GET_SIZE(args), nparams = 0;
    memset(p, 0, sizeof(*p));
    while (c->params[nparams] != P_END)
        nparams++;
    if (nargs > nparams) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %zd arguments (%zd given)", c->name,
                     nparams, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        p->value[c->params[i]] = PyTuple_GET_ITEM(args, i);
    Py_ssize_t used = 0;
    for (Py_ssize_t i = 0; kw != NULL && i < nparams; i++) {
        PyObject *v = PyDict_GetItemString(kw, param_names[c->params[i]]);
        if (v == NULL)
            continue;
        if (i < nargs) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for '%s'", c->name,
                         param_names[c->params[i]]);
            return -1;
        }
        p->value[c->params[i]] = v;
        used++;
    }
    if (kw != NULL && used != PyDict_GET_SIZE(kw)) {
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument (it takes %s%s%s%s)",
                     c->name, nparams > 0 ? param_names[c->params[0]] : "none",
                     nparams > 1 ? ", " : "", nparams > 1 ? param_names[c->params[1]] : "",
                     nparams > 2 ? ", ..." : "");
        return -1;
    }
    return 0;
}

static int parse_rank(PyObject *v, const char *what, const struct call *c, int *out)
{
    long r = PyLong_AsLong(v);
    if (r == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        gwpy_raise_argument(1, "%s: %s must be an int rank", c->name, what);
        return -1;
    }
    *out = (int)r;
    return 0;
}

/* Everything between the Python arguments and the C call's arguments. */
static int prepare(gwpy_comm *self, const struct call *c, PyObject *args, PyObject *kw,
                   gwpy_buffer bufs[2], struct call_args *a, PyObject **result)
{
    struct parsed p;
    gw_dtype_t override = GW_DTYPE_COUNT;
    memset(a, 0, sizeof(*a));
    a->op = GW_SUM;
    if (parse_params(c, args, kw, &p) != 0)
        return -1;
    for (const int *q = c->params; *q != P_END; q++) {
        int need = *q == P_SEND || *q == P_BUF || *q == P_PEER || *q == P_RECV ||
                   (*q == P_SRC && c->rule == R_EACH) ||
                   (*q == P_OUT && (c->rule == R_GATHER || c->rule == R_SCATTER));
        if (need && (p.value[*q] == NULL || p.value[*q] == Py_None)) {
            gwpy_raise_argument(0, "%s: missing argument '%s'", c->name, param_names[*q]);
            return -1;
        }
    }
    if (p.value[P_DTYPE] != NULL && p.value[P_DTYPE] != Py_None &&
        gwpy_parse_dtype(p.value[P_DTYPE], &override) != 0)
        return -1;
    if (p.value[P_OP] != NULL && gwpy_parse_op(p.value[P_OP], &a->op) != 0)
        return -1;
    if (p.value[P_ROOT] != NULL && parse_rank(p.value[P_ROOT], "root", c, &a->root) != 0)
        return -1;
    if (p.value[P_PEER] != NULL && parse_rank(p.value[P_PEER], "peer", c, &a->peer) != 0)
        return -1;
    a->src = GW_ANY_SOURCE; /* irecv_tagged's src=None; sendrecv requires one */
    if (p.value[P_SRC] != NULL && p.value[P_SRC] != Py_None &&
        parse_rank(p.value[P_SRC], "src", c, &a->src) != 0)
        return -1;
    a->tag = p.value[P_BUF] != NULL ? GW_ANY_TAG : 0;
    if (p.value[P_TAG] != NULL && p.value[P_TAG] != Py_None &&
        parse_rank(p.value[P_TAG], "tag", c, &a->tag) != 0)
        return -1;

    /* Buffers: bufs[0] is read, bufs[1] written. */
    PyObject *in = p.value[P_SEND], *outobj = p.value[P_BUF];
    if (outobj == NULL)
        outobj = p.value[P_RECV];
    if (outobj == NULL && (c->rule == R_SAME || c->rule == R_BLOCKS))
        outobj = (p.value[P_OUT] == NULL || p.value[P_OUT] == Py_None) ? in : p.value[P_OUT];
    else if (outobj == NULL && p.value[P_OUT] != NULL && p.value[P_OUT] != Py_None)
        outobj = p.value[P_OUT];
    char role[64];
    snprintf(role, sizeof(role), "%s: send", c->name);
    if (in != NULL && in != outobj && gwpy_buffer_get(in, 0, override, role, &bufs[0]) != 0)
        return -1;
    snprintf(role, sizeof(role), "%s: %s", c->name,
             in == outobj ? "send (in place)"
                          : param_names[p.value[P_BUF]    ? P_BUF
                                        : p.value[P_RECV] ? P_RECV
                                                          : P_OUT]);
    if (outobj != NULL && gwpy_buffer_get(outobj, 1, override, role, &bufs[1]) != 0)
        return -1;
    if (in != NULL && in == outobj)
        bufs[0] = (gwpy_buffer){
            .view = {.buf = bufs[1].view.buf}, .dtype = bufs[1].dtype, .count = bufs[1].count};
    if (in != NULL && outobj != NULL && bufs[0].dtype != bufs[1].dtype) {
        gwpy_raise_argument(1, "%s: send holds %s and out %s; they must be the same type", c->name,
                            gw_dtype_name(bufs[0].dtype), gw_dtype_name(bufs[1].dtype));
        return -1;
    }
    size_t n = (size_t)gw_comm_size(self->comm);
    size_t ns = bufs[0].count, no = bufs[1].count;
    if ((c->rule == R_SAME && ns != no) || (c->rule == R_GATHER && no != n * ns) ||
        (c->rule == R_SCATTER && ns != n * no) ||
        (c->rule == R_BLOCKS && (ns != no || ns % n != 0))) {
        gwpy_raise_argument(0, "%s: send has %zu elements and out %zu; %s", c->name, ns, no,
                            c->rule == R_SAME     ? "they must be as many"
                            : c->rule == R_GATHER ? "out must hold size x send's"
                            : c->rule == R_BLOCKS ? "they must be as many, size blocks each"
                                                  : "send must hold size x out's");
        return -1;
    }
    a->comm = self->comm;
    a->send = bufs[0].view.buf;
    a->out = bufs[1].view.buf;
    a->dtype = in != NULL ? bufs[0].dtype : bufs[1].dtype;
    a->count = c->rule == R_SCATTER ? no : in != NULL ? ns : no;
    if (c->rule == R_BLOCKS)
        a->count /= n;
    a->recv_count = no;
    *result = outobj != NULL ? outobj : Py_None;
    return 0;
}

static PyObject *dispatch(PyObject *obj, int index, PyObject *args, PyObject *kw)
{
    gwpy_comm *self = (gwpy_comm *)obj;
    const struct call *c = &calls[index];
    gwpy_buffer bufs[2];
    memset(bufs, 0, sizeof(bufs));
    struct call_args a;
    PyObject *result = NULL;
    gw_handle_t *handle = NULL;
    gw_status_t st;
    if (gwpy_comm_enter(self) == NULL)
        return NULL;
    if (prepare(self, c, args, kw, bufs, &a, &result) != 0) {
        gwpy_buffer_release(&bufs[0]);
        gwpy_buffer_release(&bufs[1]);
        gw_comm_abort(self->comm);
        return NULL;
    }
    if (c->start == start_irecv_tagged && (a.msg = calloc(1, sizeof(*a.msg))) == NULL) {
        gwpy_buffer_release(&bufs[0]);
        gwpy_buffer_release(&bufs[1]);
        gw_comm_abort(self->comm);
        return PyErr_NoMemory();
    }
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS;
    st = c->run != NULL ? c->run(&a) : c->start(&a, &handle);
    Py_END_ALLOW_THREADS;
    self->busy = 0;
    if (st != GW_OK) {
        free(a.msg);
        gwpy_buffer_release(&bufs[0]);
        gwpy_buffer_release(&bufs[1]);
        return gwpy_raise(st, c->name, gw_comm_culprit(self->comm), gwpy_reason(self->comm));
    }
    if (c->start != NULL) {
        /* A call with a peer is point-to-point: its handle drives the
         * communicator (see gwpy_handle). */
        int p2p = 0;
        for (const int *q = c->params; *q != P_END; q++)
            p2p |= *q == P_PEER || *q == P_SRC;
        PyObject *h = gwpy_handle_new(self, handle, c->name, bufs, 2, result, NULL, p2p);
        if (h == NULL)
            free(a.msg); /* gwpy_handle_new completed the call */
        else
            ((gwpy_handle *)h)->msg = a.msg;
        return h;
    }
    gwpy_buffer_release(&bufs[0]);
    gwpy_buffer_release(&bufs[1]);
    return Py_NewRef(result);
}

#define GWPY_TRAMPOLINE(name, params, rule, run, start, doc)                   \
    static PyObject *call_##name(PyObject *self, PyObject *args, PyObject *kw) \
    {                                                                          \
        return dispatch(self, CALL_##name, args, kw);                          \
    }
GWPY_CALLS(GWPY_TRAMPOLINE)
#undef GWPY_TRAMPOLINE

#define GWPY_METHOD_ENTRY(name, params, rule, run, start, doc) \
    {#name, (PyCFunction)(void (*)(void))call_##name, METH_VARARGS | METH_KEYWORDS, doc},
static PyMethodDef comm_methods[] = {
    GWPY_CALLS(GWPY_METHOD_ENTRY){
        "allreduce_compressed", (PyCFunction)(void (*)(void))gwpy_comm_allreduce_compressed,
        METH_VARARGS | METH_KEYWORDS,
        "allreduce_compressed(state, send, out=None) -> out: the average over ranks of float32 send "
        "through the state's codec."},
    {"iallreduce_compressed", (PyCFunction)(void (*)(void))gwpy_comm_iallreduce_compressed,
     METH_VARARGS | METH_KEYWORDS,
     "iallreduce_compressed(state, send, out=None) -> Handle: the same on the progress thread; "
     "the state belongs to it until the handle is done."},
    {"allreduce_many", (PyCFunction)(void (*)(void))gwpy_comm_allreduce_many,
     METH_VARARGS | METH_KEYWORDS,
     "allreduce_many(bufs, op='sum', dtype=None) -> bufs: every buffer allreduced in place, fused "
     "into buckets of GW_FUSION_BYTES (gw_allreduce_many)."},
    {"iallreduce_many", (PyCFunction)(void (*)(void))gwpy_comm_iallreduce_many,
     METH_VARARGS | METH_KEYWORDS,
     "iallreduce_many(bufs, op='sum', dtype=None) -> Handle: allreduce_many on the progress "
     "thread; wait() returns bufs."},
    {"alltoallv", (PyCFunction)(void (*)(void))gwpy_comm_alltoallv, METH_VARARGS | METH_KEYWORDS,
     "alltoallv(send, send_counts, out, recv_counts, dtype=None) -> out: send_counts[j] elements "
     "to rank j, recv_counts[j] from rank j, packed in rank order in send and out."},
    {"ialltoallv", (PyCFunction)(void (*)(void))gwpy_comm_ialltoallv, METH_VARARGS | METH_KEYWORDS,
     "ialltoallv(send, send_counts, out, recv_counts, dtype=None) -> Handle: alltoallv on the "
     "progress thread."},
    {"allgatherv", (PyCFunction)(void (*)(void))gwpy_comm_allgatherv, METH_VARARGS | METH_KEYWORDS,
     "allgatherv(send, out, recv_counts, dtype=None) -> out: rank j's send (recv_counts[j] "
     "elements) into out in rank order, on every rank."},
    {"iallgatherv", (PyCFunction)(void (*)(void))gwpy_comm_iallgatherv,
     METH_VARARGS | METH_KEYWORDS,
     "iallgatherv(send, out, recv_counts, dtype=None) -> Handle: allgatherv on the progress "
     "thread."},
    {"split", (PyCFunction)(void (*)(void))gwpy_comm_split, METH_VARARGS | METH_KEYWORDS,
     "split(color, key=0) -> Comm or None: gw_comm_split, collective; color None takes part "
     "without joining (GW_UNDEFINED) and returns None."},
    {"dup", gwpy_comm_dup, METH_NOARGS, "dup() -> Comm: gw_comm_dup, collective."},
    {"shrink", gwpy_comm_shrink, METH_NOARGS,
     "shrink() -> Comm: gw_comm_shrink, after a call failed because a rank died or hung: the "
     "survivors (every one calls it) agree on who is left and get a new communicator of "
     "themselves, renumbered in the old order; when rank 0 died or stopped answering, the "
     "lowest surviving rank becomes rank 0. Raises AbortedError on a rank left out (a rank 0 "
     "the others went on without included), RemoteError or TimeoutError when no surviving "
     "rank could lead. This Comm stays failed: close it when done."},
    {"grow", gwpy_comm_grow, METH_NOARGS,
     "grow() -> Comm or None: gw_comm_grow, collective over the members at a point they agree "
     "on: None (at once) when nobody waits in Comm.join, else a new communicator with the "
     "joiners after the members, who keep their ranks. This Comm stays healthy: close it when "
     "done."},
    {"joiners", gwpy_comm_joiners, METH_NOARGS,
     "joiners() -> int: gw_comm_joiners, how many processes wait in Comm.join for this job's "
     "next grow(). Only rank 0 knows (0 on the others). Not collective; may be called while "
     "another thread is inside this Comm."},
    {"join", (PyCFunction)(void (*)(void))gwpy_comm_join, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "Comm.join(*, root=None, token=None, wait=None, transport=None, timeout=None, "
     "socket_ifname=None, nsocks=0, algo=None) -> Comm: gw_comm_join, a new process joins the "
     "running job whose root address is root (else GW_ROOT) at its members' next grow(), "
     "proving token (else GW_JOB_TOKEN); wait bounds the wait in seconds (None: ten minutes)."},
    {"close", gwpy_comm_close, METH_NOARGS,
     "close(): complete pending handles, then destroy the communicator (idempotent)."},
    {"abort", gwpy_comm_abort, METH_NOARGS,
     "abort(): fail the communicator on every rank (thread-safe; close() afterwards)."},
    {"set_algo", gwpy_comm_set_algo, METH_O,
     "set_algo(algo): the allreduce algorithm of later calls."},
    {"set_cuda_stream", gwpy_comm_set_cuda_stream, METH_O,
     "set_cuda_stream(stream): the CUDA stream (cudaStream_t as an integer; 0: the default) that "
     "calls on device buffers order after and reduce on."},
    {"pick_algo", gwpy_comm_pick_algo, METH_VARARGS,
     "pick_algo(count, dtype) -> str: the algorithm an allreduce of count elements would use."},
    {"__enter__", gwpy_comm_enter_ctx, METH_NOARGS, NULL},
    {"__exit__", gwpy_comm_exit_ctx, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};
#undef GWPY_METHOD_ENTRY

PyTypeObject gwpy_comm_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gradwire._core.Comm",
    .tp_basicsize = sizeof(gwpy_comm),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A gradwire communicator (see gradwire.Comm).",
    .tp_new = PyType_GenericNew,
    .tp_init = gwpy_comm_init,
    .tp_dealloc = gwpy_comm_dealloc,
    .tp_methods = comm_methods,
    .tp_getset = gwpy_comm_getset,
    .tp_weaklistoffset = offsetof(gwpy_comm, weakrefs),
};
