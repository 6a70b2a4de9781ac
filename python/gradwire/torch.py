"""The torch.distributed backend "gradwire": importing this module registers it.

    import torch.distributed as dist
    import gradwire.torch  # noqa: F401  (registers the backend)
    dist.init_process_group("gradwire", init_method="env://")   # or tcp://, file://
    dist.all_reduce(t)                                          # CPU tensors

How it works. ProcessGroupGradwire is a Python subclass of torch's
ProcessGroup (pybind's trampoline forwards the C++ calls of DDP's reducer
and of torch.distributed to these methods). Its communicator meets through
the Store torch gives the creator (gradwire.Comm.from_store: rank 0
reserves its root port and publishes it with a fresh token), so every init
method works and no second port is chosen by the user; the timeout given to
init_process_group is the communicator's (GW timeout), so a dead rank raises
within it.

Every collective is issued with gradwire's non-blocking call (gw_i*: the
library's progress thread runs them in call order, several in flight) and
returns a _Work at once. One completion thread per group waits for the
handles in that same order and completes each Work's torch.futures.Future
(value: the list of output tensors, as gloo's), running the copies that
forms without a contiguous gradwire call need (list outputs of allgather,
gather, alltoall) first; a Work.wait() that comes first does that itself
(no thread switch on a blocking call). Work.wait() waits for the future; get_future() is
what DDP's reducer chains its bucket callbacks on. A failed call sets the
future's exception: wait() raises it (a gradwire.Error naming the rank
blamed, or torch's RuntimeError carrying its message).

Tensors are used in place, never copied, where gradwire has the call
(allreduce, broadcast, reduce, _allgather_base, _reduce_scatter_base,
alltoall_base); they must be CPU, contiguous and of a type gradwire has:
float32, float64, float16, bfloat16 (its bits as int16, dtype "bfloat16"),
int64, int32, int8, uint8. Others (bool, complex, int16) raise TypeError
naming the type. send/recv are gradwire's isend/irecv: their data moves
while this thread waits (Work.wait() from the posting thread), and no
collective may start while one is pending; tags are not matched (messages
to one peer match in posting order, as gradwire's do).
"""

import collections
import datetime
import queue
import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup, Work

import gradwire

__all__ = ["ProcessGroupGradwire", "BACKEND"]

BACKEND = "gradwire"

# torch dtype -> the dtype override gradwire needs (None: the buffer's own).
_DTYPES = {
    torch.float32: None,
    torch.float64: None,
    torch.float16: None,
    torch.bfloat16: "bfloat16",
    torch.int64: None,
    torch.int32: None,
    torch.int8: None,
    torch.uint8: None,
}
_DTYPE_NAMES = "float32, float64, float16, bfloat16, int64, int32, int8, uint8"


def _op_name(op):
    """gradwire's name of a torch ReduceOp (ReduceOp objects compare with the enum values)."""
    R = dist.ReduceOp
    for name, value in (("sum", R.SUM), ("prod", R.PRODUCT), ("min", R.MIN), ("max", R.MAX)):
        if op == value:
            return name
    if hasattr(R, "AVG") and op == R.AVG:
        return "avg"
    raise ValueError(
        "gradwire backend: reduce op %s is not supported (gradwire has SUM, PRODUCT, MIN, MAX, AVG)" % (op,)
    )


def _buffer(t, what):
    """(numpy view sharing t's memory, dtype override) for a tensor gradwire can use in place."""
    if not isinstance(t, torch.Tensor):
        raise TypeError("gradwire backend: %s must be a tensor, not %s" % (what, type(t).__name__))
    if t.device.type != "cpu":
        raise ValueError("gradwire backend: %s is on %s; gradwire moves CPU tensors only" % (what, t.device))
    if t.dtype not in _DTYPES:
        raise TypeError(
            "gradwire backend: %s has dtype %s, which gradwire does not have (it has %s)" % (what, t.dtype, _DTYPE_NAMES)
        )
    if not t.is_contiguous():
        raise ValueError("gradwire backend: %s must be contiguous (call .contiguous() first)" % what)
    t = t.detach()
    override = _DTYPES[t.dtype]
    if override is not None:
        return t.view(torch.int16).numpy(), override
    return t.numpy(), None


def _one(tensors, what):
    if len(tensors) != 1:
        raise ValueError("gradwire backend: %s takes one tensor per process (got %d)" % (what, len(tensors)))
    return tensors[0]


def _same_kind(tensors, like, what):
    for t in tensors:
        if t.dtype != like.dtype or t.numel() != like.numel():
            raise ValueError(
                "gradwire backend: %s: every tensor must have %d elements of %s like the input (one has %d of %s)"
                % (what, like.numel(), like.dtype, t.numel(), t.dtype)
            )


class _Pending:
    """The gradwire handles of one Work and what completes its future. Whoever
    claims it first (the group's completion thread, or the thread calling
    Work.wait(), which then saves a thread switch) waits for the handles, runs
    `after` (copies into list outputs) and sets the future."""

    __slots__ = ("handles", "future", "result", "after", "_claim")

    def __init__(self, handles, future, result, after):
        self.handles, self.future, self.result, self.after = handles, future, result, after
        self._claim = threading.Lock()

    def claim(self):
        return self._claim.acquire(blocking=False)

    def complete(self):
        try:
            error = None
            for h in self.handles:  # every one, even after a failure: buffers stay in use until then
                try:
                    h.wait()
                except Exception as e:  # noqa: BLE001
                    error = error or e
            if error is not None:
                raise error
            if self.after is not None:
                self.after()
        except Exception as e:  # noqa: BLE001 - handed to the future
            self.future.set_exception(e)
        else:
            self.future.set_result(self.result)
        self.handles = self.after = None


class _Work(Work):
    """One call in flight: wait() waits for its future; get_future() is it."""

    def __init__(self, future, result, pending=None, p2p_handle=None):
        super().__init__()
        self._future = future
        self._result = result
        self._pending = pending
        self._p2p = p2p_handle  # isend/irecv: data moves while wait() waits

    def wait(self, timeout=None):
        if self._p2p is not None and not self._future.done():
            try:
                self._p2p.wait()
                self._future.set_result(self._result)
            except Exception as e:  # noqa: BLE001 - handed to the future
                self._future.set_exception(e)
        elif self._pending is not None and self._pending.claim():
            self._pending.complete()
        self._future.wait()
        return True

    def get_future(self):
        return self._future

    def is_completed(self):
        return self._future.done()

    def is_success(self):
        if not self._future.done():
            return False
        try:
            self._future.value()
            return True
        except Exception:  # noqa: BLE001
            return False

    def exception(self):
        try:
            self._future.value()
        except Exception as e:  # noqa: BLE001
            return e
        return None

    def result(self):
        return self._result

    def synchronize(self):
        pass


class _Completer:
    """Completes a group's calls in call order (gradwire completes a
    communicator's collectives in that order; their handles may be waited
    for from any thread), for the futures nobody waits on. Its thread runs
    only while calls are in flight, and a second after: torch 1.13's
    destroy_process_group drops a group without calling shutdown(), and the
    group may live on (an error's traceback held by torch keeps its frames),
    so an idle thread would stay for the life of the process."""

    LINGER_S = 1.0

    def __init__(self, name):
        self._name = name
        self._queue = collections.deque()
        self._cond = threading.Condition()
        self._thread = None
        self._stopping = False

    def submit(self, pending):
        with self._cond:
            self._queue.append(pending)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            else:
                self._cond.notify()

    def _next(self):
        """The next call, or None once idle for LINGER_S (or stopping)."""
        with self._cond:
            if not self._queue and not self._stopping:
                self._cond.wait(self.LINGER_S)
            if not self._queue:
                self._thread = None  # a later submit starts another
                return None
            return self._queue.popleft()

    def _run(self):
        while True:
            item = self._next()
            if item is None:
                return
            if item.claim():
                item.complete()

    def stop(self):
        """Complete what is queued, then end the thread."""
        with self._cond:
            self._stopping = True
            thread = self._thread
            self._cond.notify()
        if thread is not None:
            thread.join()


class ProcessGroupGradwire(ProcessGroup):
    """A torch.distributed process group on a gradwire communicator (`comm`).

    Made by init_process_group("gradwire") / new_group(backend="gradwire")
    through the creator registered below, or directly with a Store, or
    around an existing gradwire.Comm (comm=...)."""

    def __init__(self, store, rank, size, timeout=None, comm=None, prefix="gradwire"):
        super().__init__(rank, size)
        self.origin = "comm" if comm is not None else "store"  # how its communicator was made
        if comm is None:
            seconds = None
            if timeout is not None:
                seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
            kwargs = {"timeout": seconds} if seconds else {}
            comm = gradwire.Comm.from_store(store, rank, size, prefix=prefix, **kwargs)
        if comm.rank != rank or comm.size != size:
            raise ValueError(
                "gradwire backend: the communicator is rank %d of %d, the group wants %d of %d"
                % (comm.rank, comm.size, rank, size)
            )
        self.comm = comm
        self._lock = threading.Lock()  # issue calls from one thread at a time (futures' callbacks may issue)
        self._completer = _Completer("gradwire-pg-%d" % rank)
        # torch 1.13's trampoline keeps only the C++ half of a Python Work:
        # once the Python object is collected, a C++ caller's wait() (DDP's
        # parameter checks, _broadcast_coalesced) reaches the base Work and
        # blocks forever. The latest works stay referenced here for the C++
        # callers that wait right after issuing (later torch versions keep
        # the Python object with the C++ one: PyWorkHolder).
        self._recent = collections.deque(maxlen=256)

    # ---- identity ----------------------------------------------------------
    def name(self):
        return BACKEND

    def _get_backend_name(self):
        return BACKEND

    def getBackendName(self):
        return BACKEND

    def __repr__(self):
        return "<ProcessGroupGradwire rank %d of %d over %s>" % (self.rank(), self.size(), self.comm.transport)

    def shutdown(self):
        """Stop the completion thread and close the communicator."""
        if self._completer is not None:
            self._completer.stop()
            self._completer = None
        self.comm.close()

    # ---- plumbing ----------------------------------------------------------
    def _start(self, issue, result, after=None):
        """Issue the gradwire calls (issue() -> list of handles) and return their Work."""
        future = torch.futures.Future()
        with self._lock:
            pending = _Pending(issue(), future, result, after)
            self._completer.submit(pending)
        return self._keep(_Work(future, result, pending))

    def _keep(self, work):
        self._recent.append(work)
        return work

    # ---- collectives -------------------------------------------------------
    def broadcast(self, tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        t = _one(tensors, "broadcast")
        buf, dt = _buffer(t, "broadcast's tensor")
        return self._start(lambda: [self.comm.ibroadcast(buf, root=root, dtype=dt)], tensors)

    def allreduce(self, tensors, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        t = _one(tensors, "allreduce")
        buf, dt = _buffer(t, "allreduce's tensor")
        return self._start(lambda: [self.comm.iallreduce(buf, op=op, dtype=dt)], tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        bufs = [_buffer(t, "allreduce_coalesced's tensor %d" % i) for i, t in enumerate(tensors)]
        return self._start(lambda: [self.comm.iallreduce(b, op=op, dtype=dt) for b, dt in bufs], tensors)

    def reduce(self, tensors, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        root = opts.rootRank if opts is not None else 0
        t = _one(tensors, "reduce")
        buf, dt = _buffer(t, "reduce's tensor")
        return self._start(lambda: [self.comm.ireduce(buf, op=op, root=root, dtype=dt)], tensors)

    def _allgather_base(self, output, input, opts=None):
        out, dt = _buffer(output, "all_gather_into_tensor's output")
        inp, _ = _buffer(input, "all_gather_into_tensor's input")
        return self._start(lambda: [self.comm.iallgather(inp, out, dtype=dt)], [output])

    def allgather(self, output_lists, inputs, opts=None):
        t = _one(inputs, "allgather")
        outputs = _one(output_lists, "allgather")
        if len(outputs) != self.size():
            raise ValueError("gradwire backend: all_gather needs %d output tensors, got %d" % (self.size(), len(outputs)))
        if any(o.numel() != t.numel() for o in outputs):
            return self._allgather_uneven(outputs, t, output_lists)
        _same_kind(outputs, t, "all_gather")
        flat = torch.empty((self.size(),) + tuple(t.shape), dtype=t.dtype)
        out, dt = _buffer(flat, "all_gather's output")
        inp, _ = _buffer(t, "all_gather's input")

        def scatter_rows():
            for o, row in zip(outputs, flat):
                o.copy_(row.view(o.shape))

        return self._start(lambda: [self.comm.iallgather(inp, out, dtype=dt)], output_lists, scatter_rows)

    def _allgather_uneven(self, outputs, t, output_lists):
        """all_gather whose output tensors differ in size (rank j's input has
        outputs[j].numel() elements): one gradwire allgatherv."""
        counts = [o.numel() for o in outputs]
        if counts[self.rank()] != t.numel():
            raise ValueError(
                "gradwire backend: all_gather: this rank's input has %d elements, its output tensor %d"
                % (t.numel(), counts[self.rank()])
            )
        if any(o.dtype != t.dtype for o in outputs):
            raise ValueError("gradwire backend: all_gather: every output tensor must be %s like the input" % t.dtype)
        flat = torch.empty(sum(counts), dtype=t.dtype)
        out, dt = _buffer(flat, "all_gather's output")
        inp, _ = _buffer(t, "all_gather's input")

        def scatter_blocks():
            for o, block in zip(outputs, torch.split(flat, counts)):
                o.copy_(block.view(o.shape))

        return self._start(lambda: [self.comm.iallgatherv(inp, out, counts, dtype=dt)], output_lists, scatter_blocks)

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        works = [self.allgather([outs], [t]) for outs, t in zip(output_lists, inputs)]
        return self._join(works, output_lists)

    def _reduce_scatter_base(self, output, input, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        out, dt = _buffer(output, "reduce_scatter_tensor's output")
        inp, _ = _buffer(input, "reduce_scatter_tensor's input")
        return self._start(lambda: [self.comm.ireduce_scatter(inp, out, op=op, dtype=dt)], [output])

    def reduce_scatter(self, outputs, input_lists, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        output = _one(outputs, "reduce_scatter")
        inputs = _one(input_lists, "reduce_scatter")
        if len(inputs) != self.size():
            raise ValueError("gradwire backend: reduce_scatter needs %d input tensors, got %d" % (self.size(), len(inputs)))
        _same_kind(inputs, output, "reduce_scatter")
        flat = torch.cat([i.reshape(-1) for i in inputs])
        inp, dt = _buffer(flat, "reduce_scatter's input")
        out, _ = _buffer(output, "reduce_scatter's output")
        return self._start(lambda: [self.comm.ireduce_scatter(inp, out, op=op, dtype=dt)], outputs)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        out, dt = _buffer(output, "all_to_all_single's output")
        inp, _ = _buffer(input, "all_to_all_single's input")
        n = self.size()
        if not output_split_sizes and not input_split_sizes:
            if input.numel() != output.numel() or input.numel() % n != 0:
                raise ValueError(
                    "gradwire backend: all_to_all_single without split sizes needs input and output of the same "
                    "size, a multiple of %d elements (got %d and %d)" % (n, input.numel(), output.numel())
                )
            return self._start(lambda: [self.comm.ialltoall(inp, out, dtype=dt)], [output])
        row_in = input[0].numel() if input.dim() > 0 and input.shape[0] else 1
        row_out = output[0].numel() if output.dim() > 0 and output.shape[0] else 1
        sends = [s * row_in for s in input_split_sizes] if input_split_sizes else [input.numel() // n] * n
        recvs = [s * row_out for s in output_split_sizes] if output_split_sizes else [output.numel() // n] * n
        return self._start(lambda: [self.comm.ialltoallv(inp, sends, out, recvs, dtype=dt)], [output])

    def alltoall(self, outputs, inputs, opts=None):
        n = self.size()
        if len(inputs) != n or len(outputs) != n:
            raise ValueError("gradwire backend: all_to_all needs %d input and output tensors" % n)
        dtype = inputs[0].dtype
        for t in list(inputs) + list(outputs):
            if t.dtype != dtype:
                raise TypeError("gradwire backend: all_to_all: every tensor must be %s (one is %s)" % (dtype, t.dtype))
        flat_in = torch.cat([t.reshape(-1) for t in inputs])
        flat_out = torch.empty(sum(t.numel() for t in outputs), dtype=dtype)
        inp, dt = _buffer(flat_in, "all_to_all's inputs")
        out, _ = _buffer(flat_out, "all_to_all's outputs")
        sends = [t.numel() for t in inputs]
        recvs = [t.numel() for t in outputs]

        def unpack():
            for o, piece in zip(outputs, torch.split(flat_out, recvs)):
                o.copy_(piece.view(o.shape))

        if len(set(sends)) == 1 and sends == recvs:
            issue = lambda: [self.comm.ialltoall(inp, out, dtype=dt)]  # noqa: E731
        else:
            issue = lambda: [self.comm.ialltoallv(inp, sends, out, recvs, dtype=dt)]  # noqa: E731
        return self._start(issue, outputs, unpack)

    def gather(self, output_lists, inputs, opts=None):
        root = opts.rootRank if opts is not None else 0
        t = _one(inputs, "gather")
        flat = torch.empty((self.size(),) + tuple(t.shape), dtype=t.dtype)  # written on root only
        after = None
        if self.rank() == root:
            outputs = _one(output_lists, "gather")
            if len(outputs) != self.size():
                raise ValueError("gradwire backend: gather needs %d output tensors on the root" % self.size())
            _same_kind(outputs, t, "gather")

            def after():
                for o, row in zip(outputs, flat):
                    o.copy_(row.view(o.shape))

        inp, dt = _buffer(t, "gather's input")
        out, _ = _buffer(flat, "gather's output")
        return self._start(lambda: [self.comm.igather(inp, out, root=root, dtype=dt)], output_lists, after)

    def scatter(self, outputs, input_lists, opts=None):
        root = opts.rootRank if opts is not None else 0
        output = _one(outputs, "scatter")
        if self.rank() == root:
            inputs = _one(input_lists, "scatter")
            if len(inputs) != self.size():
                raise ValueError("gradwire backend: scatter needs %d input tensors on the root" % self.size())
            _same_kind(inputs, output, "scatter")
            flat = torch.cat([i.reshape(-1) for i in inputs])
        else:
            flat = torch.empty(self.size() * output.numel(), dtype=output.dtype)  # read on root only
        inp, dt = _buffer(flat, "scatter's input")
        out, _ = _buffer(output, "scatter's output")
        return self._start(lambda: [self.comm.iscatter(inp, out, root=root, dtype=dt)], outputs)

    def barrier(self, opts=None):
        return self._start(lambda: [self.comm.ibarrier()], [])

    # ---- point to point ----------------------------------------------------
    def send(self, tensors, dst, tag=0):
        buf, dt = _buffer(_one(tensors, "send"), "send's tensor")
        with self._lock:
            h = self.comm.isend(buf, dst, dtype=dt)
        return self._keep(_Work(torch.futures.Future(), tensors, p2p_handle=h))

    def recv(self, tensors, src, tag=0):
        buf, dt = _buffer(_one(tensors, "recv"), "recv's tensor")
        with self._lock:
            h = self.comm.irecv(buf, src, dtype=dt)
        return self._keep(_Work(torch.futures.Future(), tensors, p2p_handle=h))

    def recv_anysource(self, tensors, tag=0):
        raise NotImplementedError("gradwire backend: recv from any source is not supported (name the source rank)")

    def monitored_barrier(self, opts=None, wait_all_ranks=False):
        self.barrier().wait()

    # ---- helpers -----------------------------------------------------------
    def _join(self, works, result):
        """One Work for several: its future completes when all have."""
        future = torch.futures.Future()
        all_done = torch.futures.collect_all([w.get_future() for w in works])

        def finish(f):
            try:
                for each in f.value():
                    each.value()
                future.set_result(result)
            except Exception as e:  # noqa: BLE001
                future.set_exception(e)

        all_done.add_done_callback(finish)
        return self._keep(_Work(future, result))


# new_group through gw_comm_split. torch calls a backend's creator on the
# new group's members only, but a split is collective over the parent
# communicator: so new_group itself is wrapped. When the default group is
# gradwire's and the new one is too, every rank (new_group is called by
# all) splits the default communicator first (members by their rank in the
# sorted list, the others with no color) and the creator takes the child
# instead of a fresh rendezvous through the store. Anything else (another
# default backend, new_group imported before this module) rendezvouses
# through the store: a new communicator, equally correct, one bootstrap.
_split_children = []


def _create(store, rank, size, timeout):
    while _split_children:
        child = _split_children.pop(0)
        if child.rank == rank and child.size == size:
            pg = ProcessGroupGradwire(None, rank, size, comm=child)
            pg.origin = "split"
            return pg
        child.close()
    return ProcessGroupGradwire(store, rank, size, timeout)


def _wrap_new_group(new_group):
    def gradwire_new_group(ranks=None, timeout=dist.default_pg_timeout, backend=None, pg_options=None):
        default = dist.distributed_c10d._get_default_group() if dist.is_initialized() else None
        wanted = dist.Backend(backend) if backend is not None else (dist.get_backend() if default is not None else None)
        if isinstance(default, ProcessGroupGradwire) and wanted == BACKEND:
            members = sorted(ranks) if ranks else list(range(dist.get_world_size()))
            me = dist.get_rank()
            with default._lock:
                child = default.comm.split(0 if me in members else None, members.index(me) if me in members else 0)
            if child is not None:
                _split_children.append(child)
        try:
            return new_group(ranks=ranks, timeout=timeout, backend=backend, pg_options=pg_options)
        finally:
            while _split_children:  # not taken (an error on the way): give it back
                _split_children.pop().close()

    gradwire_new_group.__doc__ = new_group.__doc__
    gradwire_new_group.__wrapped__ = new_group
    return gradwire_new_group


if not hasattr(dist.Backend, BACKEND.upper()):
    dist.Backend.register_backend(BACKEND, _create)
    dist.new_group = dist.distributed_c10d.new_group = _wrap_new_group(dist.distributed_c10d.new_group)
