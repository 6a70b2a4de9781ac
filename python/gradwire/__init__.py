"""gradwire from Python: communicators, collectives, messages and gradient
compression on numpy arrays and CPU torch tensors, without copies.

    import numpy as np, gradwire
    with gradwire.Comm() as comm:            # from the environment (gradwire launch, torchrun, ...)
        x = np.full(1024, comm.rank, dtype=np.float32)
        comm.allreduce(x)                    # in place: x is now the sum over ranks
        h = comm.iallreduce(x, op="max")     # non-blocking: a Handle
        h.wait()

Buffers are any object with the buffer protocol (numpy arrays, memoryviews,
bytearrays, ``tensor.numpy()`` of a CPU torch tensor, which shares the
tensor's memory). They must be C-contiguous, and writable where gradwire
writes; the element type is the buffer's own (float32, float64, float16,
int8, uint8, int32, int64). bfloat16 has no buffer format: pass the bits as
a 2-byte integer buffer and say ``dtype="bfloat16"`` (for a torch tensor,
``t.view(torch.int16).numpy()``).

Errors of the library are raised as gradwire.Error, one subclass per
status (MismatchError, TimeoutError, RemoteError, AbortedError, ...), with
``status``, ``status_name``, ``message`` and ``culprit`` (the rank blamed,
the same on every rank, or None). A call refused before it reaches the
library (a read-only output, a non-contiguous array, the wrong length or
type) raises ArgumentError (a ValueError) or DtypeError (also a TypeError)
and aborts the communicator, as the library's own argument checks fail it,
so that the other ranks, already in the call, fail at once (AbortedError
blaming this rank) instead of waiting out the timeout.

The GIL is released while gradwire works, so other Python threads run
meanwhile. A communicator is used from one thread at a time (a second
thread gets a RuntimeError); give each thread its own.
"""

import builtins as _builtins

from . import _core

__all__ = [
    "Comm",
    "Handle",
    "CompressState",
    "Error",
    "ArgumentError",
    "DtypeError",
    "STATUS",
    "DTYPES",
    "OPS",
    "ALGOS",
    "CODECS",
    "version",
]

__version__ = _core.version()
version = _core.version

# Enums, from the C header (the extension builds these tables from it).
STATUS = dict(_core.STATUS)  # "GW_ERR_TIMEOUT" -> 4
DTYPES = dict(_core.DTYPES)  # "float32" -> 0
OPS = dict(_core.OPS)  # "sum" -> 0
ALGOS = dict(_core.ALGOS)  # "ring" -> 1
CODECS = dict(_core.CODECS)  # "topk" -> 5
for _table in (OPS, DTYPES):
    for _name, _value in _table.items():
        globals()[_name.upper()] = _value  # SUM, MAX, FLOAT32, INT64, ...
for _name, _value in STATUS.items():
    globals()[_name[3:]] = _value  # OK, ERR_TIMEOUT, ...


class Error(Exception):
    """A gradwire status other than GW_OK.

    status: the gw_status_t value; status_name: its name ("GW_ERR_TIMEOUT");
    message: what failed and why; culprit: the rank blamed (the same on
    every rank), or None; reason: the library's own message for it (what
    gradwire logged, gw_last_error), "" when it logged none.
    """

    def __init__(self, message, status=None, culprit=None, reason=""):
        super().__init__(message)
        self.message = message
        self.status = status
        self.culprit = culprit
        self.reason = reason

    @property
    def status_name(self):
        for name, value in STATUS.items():
            if value == self.status:
                return name
        return None


class ArgumentError(Error, ValueError):
    """An argument refused before the library was called (GW_ERR_INVALID_ARG)."""


class DtypeError(ArgumentError, TypeError):
    """A buffer of a type gradwire does not reduce, or of different types."""


# Python's own exceptions that a status also is, so that `except
# TimeoutError` and `except MemoryError` catch gradwire's too.
_ALSO = {
    "GW_ERR_TIMEOUT": _builtins.TimeoutError,
    "GW_ERR_NO_MEMORY": _builtins.MemoryError,
    "GW_ERR_INVALID_ARG": _builtins.ValueError,
    "GW_ERR_UNSUPPORTED": _builtins.NotImplementedError,
    "GW_ERR_OVERFLOW": _builtins.OverflowError,
}


def _class_name(status_name):
    # GW_ERR_INVALID_ARG -> InvalidArgError
    return "".join(w.capitalize() for w in status_name[len("GW_ERR_"):].split("_")) + "Error"


_ERROR_CLASSES = {}
for _name, _value in STATUS.items():
    if _value == 0:
        continue
    _bases = (Error,) + ((_ALSO[_name],) if _name in _ALSO else ())
    _cls = type(
        _class_name(_name),
        _bases,
        {"__doc__": "gradwire status %s (%d)." % (_name, _value), "__module__": __name__},
    )
    globals()[_cls.__name__] = _cls
    __all__.append(_cls.__name__)
    _ERROR_CLASSES[_value] = _cls
_core._register_errors(_ERROR_CLASSES, ArgumentError, DtypeError)

Handle = _core.Handle
CompressState = _core.CompressState


class Comm(_core.Comm):
    """A gradwire communicator.

    Comm() takes everything from the environment (gw_comm_init_env: gradwire
    launch, torchrun, mpirun, srun). Comm(rank=, size=, root="host:port",
    token=, transport="auto"|"tcp"|"shm"|"ib", timeout=seconds,
    socket_ifname=, nsocks=, algo=) sets those fields (rank and size are
    then required); root, token, timeout, transport, socket_ifname, nsocks
    and algo left out come from GW_ROOT, GW_JOB_TOKEN, GW_TIMEOUT_MS, ... as
    gw_comm_init reads them. Creating one is collective.

    Calls (each blocking one returns its output array; the i* ones a Handle
    whose wait() does):
      allreduce(send, out=None, op="sum")      in place when out is None
      broadcast(send, out=None, root=0)
      reduce(send, out=None, op="sum", root=0)
      allgather(send, out=None)                out: (size,) + send.shape, allocated if None
      reduce_scatter(send, out=None, op="sum") out: send[rank]'s shape when send has a row per
                                               rank, else send.shape[0] // size rows; allocated if None
      barrier()
      send(send, peer), recv(buf, peer), sendrecv(send, peer, recv, src)
      gather(send, out, root=0), scatter(send, out, root=0)   out / send given on every rank
      alltoallv(send, send_counts, out, recv_counts)          blocks packed in rank order
      iallreduce(send, out=None, op="sum"), isend(send, peer), irecv(buf, peer), igather, ...
      split(color, key=0) -> Comm or None, dup() -> Comm      sub-communicators (collective)
      shrink() -> Comm                 the survivors, after a call failed on a lost rank
      grow() -> Comm or None           admit processes waiting in Comm.join (None: nobody)
      joiners() -> int                 how many wait in Comm.join (rank 0 knows; any thread)
      Comm.join(root=, token=, wait=)  a new process's Comm in a running job, at its next grow
      allreduce_compressed(state, send, out=None), iallreduce_compressed(...)
    Every buffer call also takes dtype="bfloat16" for 2-byte integer buffers
    holding bfloat16 bits.

    close() (or leaving a `with` block) completes pending handles and
    destroys the communicator; abort() fails it on every rank from any
    thread.
    """

    def allgather(self, send, out=None, dtype=None):
        if out is None:
            out = _empty_like_stacked(send, self.size)
        return _core.Comm.allgather(self, send, out, dtype)

    def reduce_scatter(self, send, out=None, op="sum", dtype=None):
        if out is None:
            out = _empty_like_split(send, self.size)
        return _core.Comm.reduce_scatter(self, send, out, op, dtype)

    @classmethod
    def from_store(cls, store, rank, size, host=None, prefix="gradwire", **kwargs):
        """A Comm whose ranks meet through a key-value store (a
        torch.distributed Store, or any object with set(key, value) and a
        get(key) that blocks until the key is set and returns bytes).

        Rank 0 reserves a free port on `host` (default: MASTER_ADDR, else
        127.0.0.1) and makes a fresh job token, and publishes both under
        `prefix`/root and `prefix`/token; the other ranks read them, so no
        GW_ROOT is needed. The port stays reserved until the communicator
        is made: a socket bound to it with SO_REUSEADDR and never
        listening, which lets the library's root socket (also
        SO_REUSEADDR) bind it and listen, and keeps every other process
        off it (as optimizer/ps_links.c does). `prefix` must differ
        between communicators made through one store. The rest of kwargs
        (transport, timeout, ...) go to Comm().
        """
        import os
        import socket

        reservation = None
        try:
            if rank == 0:
                host = host or os.environ.get("MASTER_ADDR") or "127.0.0.1"
                reservation = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
                reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                reservation.bind((host, 0))
                port = reservation.getsockname()[1]
                root = "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)
                token = os.urandom(16).hex()
                store.set(prefix + "/token", token)
                store.set(prefix + "/root", root)
            else:
                root = _text(store.get(prefix + "/root"))
                token = _text(store.get(prefix + "/token"))
            return cls(rank=rank, size=size, root=root, token=token, **kwargs)
        finally:
            if reservation is not None:
                reservation.close()

    def __repr__(self):
        if self.closed:
            return "<gradwire.Comm closed>"
        return "<gradwire.Comm rank %d of %d over %s>" % (self.rank, self.size, self.transport)


def _text(value):
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


def _numpy():
    try:
        import numpy
    except ImportError as e:  # pragma: no cover - only without numpy
        raise ArgumentError(
            "out=None needs numpy to allocate the output; pass out= yourself", STATUS["GW_ERR_INVALID_ARG"]
        ) from e
    return numpy


def _empty_like_stacked(send, size):
    np = _numpy()
    a = np.asarray(send)
    return np.empty((size,) + a.shape, dtype=a.dtype)


def _empty_like_split(send, size):
    np = _numpy()
    a = np.asarray(send)
    if a.ndim >= 2 and a.shape[0] == size:  # one row per rank: each rank gets its row
        return np.empty(a.shape[1:], dtype=a.dtype)
    if a.ndim >= 1 and a.shape[0] % size == 0:
        return np.empty((a.shape[0] // size,) + a.shape[1:], dtype=a.dtype)
    return np.empty(a.size // size if size else 0, dtype=a.dtype)


def init():
    """A Comm from the environment (the same as Comm())."""
    return Comm()
