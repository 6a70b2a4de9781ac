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
naming the type (calls that only move data move any dtype as bytes).
send/recv are gradwire's tagged messages (gw_isend_tagged,
gw_irecv_tagged: _Mailbox), torch's tag their tag; recv(tensor, src=None)
takes the earliest message with its tag from any rank and returns the
sender. Their data moves while a Work of theirs is waited on, and no
collective may start while one is pending.

The tensors' checks and views are in _torch_tensors.py; the Work, its
completion thread and the mailbox in _torch_work.py.
"""

import collections
import datetime
import threading
import time

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup

try:  # torch >= 2.0: a ProcessGroup holds one Backend per device; a backend plugin is a Backend
    from torch._C._distributed_c10d import Backend as _BackendBase
except ImportError:  # torch 1.x: the plugin is the ProcessGroup itself
    _BackendBase = ProcessGroup

import gradwire
from gradwire._torch_tensors import (
    _buffer,
    _dense_cpu,
    _first_cuda,
    _host_only,
    _moved,
    _one,
    _op_name,
    _reducible,
    _same_kind,
)
from gradwire._torch_work import (
    DistTimeoutError,
    _Completer,
    _library_timeout_s,
    _Mailbox,
    _Pending,
    _seconds,
    _Work,
)

# The public class's public name (it is defined beside the Work it fails).
DistTimeoutError.__module__ = __name__

__all__ = ["ProcessGroupGradwire", "BACKEND", "DistTimeoutError"]

BACKEND = "gradwire"


class ProcessGroupGradwire(_BackendBase):
    """A torch.distributed process group on a gradwire communicator (`comm`).

    Made by init_process_group("gradwire") / new_group(backend="gradwire")
    through the creator registered below, or directly with a Store, or
    around an existing gradwire.Comm (comm=...)."""

    def __init__(self, store, rank, size, timeout=None, comm=None, prefix="gradwire", comm_timeout=None):
        super().__init__(rank, size)
        self.origin = "comm" if comm is not None else "store"  # how its communicator was made
        seconds = _seconds(timeout)
        if comm is None:
            kwargs = {"timeout": seconds} if seconds else {}
            comm = gradwire.Comm.from_store(store, rank, size, prefix=prefix, **kwargs)
            comm_timeout = seconds
        # The group's timeout, and the communicator's (a child of a split
        # keeps its parent's; None: the library's, GW_TIMEOUT_MS). Where the
        # group's is shorter, each call is timed here (_Pending).
        self.timeout_s = seconds
        self.comm_timeout_s = _seconds(comm_timeout) or _library_timeout_s()
        self._limit_s = seconds if seconds is not None and seconds < self.comm_timeout_s else None
        if comm.rank != rank or comm.size != size:
            raise ValueError(
                "gradwire backend: the communicator is rank %d of %d, the group wants %d of %d"
                % (comm.rank, comm.size, rank, size)
            )
        self.comm = comm
        self._lock = threading.Lock()  # issue calls from one thread at a time (futures' callbacks may issue)
        self._completer = _Completer("gradwire-pg-%d" % rank)
        self._mailbox = _Mailbox(self)  # send/recv with torch's tags
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

    # ---- a group that loses and gains ranks ---------------------------------
    # gw_comm_shrink, gw_comm_grow and gw_comm_join (docs/design/failures.md)
    # under torchft's per-step quorum (python/examples/torch_quorum.py): each
    # returns a new group of this class and leaves this one as it was, for
    # the caller to shutdown() once the new one is in use (rank 0's old
    # group answers a rank that asks to shrink too late: keep it until the
    # new group has run a call).
    def shrink(self):
        """After a call of this group failed because a rank died or hung,
        every survivor calls this: a new group of the survivors, renumbered
        in the old order (rank 0 stays 0; when it died or stopped answering,
        the lowest surviving rank takes its place). Raises
        gradwire.AbortedError on a rank left out (it asked too late, or it
        is a rank 0 the others went on without: it must leave the job),
        gradwire.RemoteError or TimeoutError when no surviving rank could
        lead."""
        self._drain()
        with self._lock:
            return self._successor(self.comm.shrink())

    def grow(self):
        """The quorum's admission, collective over the members at a point
        they agree on (any step): None, after one small message to rank 0
        and back, when nobody waits in join(); else a new group with the
        joiners after the members, who keep their ranks."""
        self._drain()
        with self._lock:
            grown = self.comm.grow()
        return None if grown is None else self._successor(grown)

    @classmethod
    def join(cls, store=None, prefix="gradwire", root=None, token=None, wait=None, timeout=None):
        """A new process's group in a running job, at its members' next
        grow(): the job's root address and token from `store` (where the
        group made through it published them under `prefix`), else from
        root and token (else GW_ROOT and GW_JOB_TOKEN). wait bounds the
        wait in seconds (None: ten minutes); timeout is the group's, as
        init_process_group's (give the members' own)."""
        if store is not None:
            root = root or gradwire._text(store.get(prefix + "/root"))
            token = token or gradwire._text(store.get(prefix + "/token"))
        seconds = _seconds(timeout)
        comm = gradwire.Comm.join(root=root, token=token, wait=wait, timeout=seconds)
        return cls(None, comm.rank, comm.size, timeout=timeout, comm=comm, comm_timeout=seconds)

    def _drain(self):
        """Let every Work issued so far complete (a failed group's fail at
        once), so that nothing else is inside the communicator while the
        ranks agree."""
        if self._completer is not None:
            self._completer.stop()
            self._completer = _Completer("gradwire-pg-%d" % self.rank())

    def _successor(self, comm):
        return type(self)(None, comm.rank, comm.size, timeout=self.timeout_s, comm=comm,
                          comm_timeout=self.comm_timeout_s)

    # ---- plumbing ----------------------------------------------------------
    def _start(self, issue, result, after=None, what="a collective"):
        """Issue the gradwire calls (issue() -> list of handles) and return their Work.
        CUDA tensors: the calls order after, and reduce on, torch's current
        stream of their device (docs/guide/cuda.md)."""
        cuda = _first_cuda(result)
        if cuda is not None:
            self.comm.set_cuda_stream(torch.cuda.current_stream(cuda.device).cuda_stream)
        future = torch.futures.Future()
        with self._lock:
            pending = _Pending(issue(), future, result, after, what, self._limit_s)
            self._completer.submit(pending)
        return self._keep(_Work(future, result, pending, what=what))

    def _done(self, result):
        """A Work already complete: a call with nothing to move (every tensor empty)."""
        future = torch.futures.Future()
        future.set_result(result)
        return self._keep(_Work(future, result))

    def _keep(self, work):
        self._recent.append(work)
        return work

    # ---- collectives -------------------------------------------------------
    def broadcast(self, tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        t = _one(tensors, "broadcast")
        buf, dt, _ = _moved(t, "broadcast's tensor")
        return self._start(lambda: [self.comm.ibroadcast(buf, root=root, dtype=dt)], tensors, what="broadcast")

    def allreduce(self, tensors, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        t = _one(tensors, "allreduce")
        buf, dt = _buffer(_reducible(t, op), "allreduce's tensor")
        return self._start(lambda: [self.comm.iallreduce(buf, op=op, dtype=dt)], tensors, what="allreduce")

    def allreduce_coalesced(self, tensors, opts=None):
        """One gradwire allreduce of the tensors packed end to end (one call,
        not one per tensor), unpacked into them when it completes. They must
        share a dtype, as gloo's allreduce_coalesced requires."""
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        if not tensors:
            return self._done(tensors)
        for i, t in enumerate(tensors):
            _dense_cpu(t, "allreduce_coalesced's tensor %d" % i)
            if t.dtype != tensors[0].dtype:
                raise TypeError(
                    "gradwire backend: allreduce_coalesced: every tensor must be %s like the first (tensor %d is %s)"
                    % (tensors[0].dtype, i, t.dtype)
                )
        # Each contiguous tensor is reduced where it is, fused into buckets by
        # the library (gw_iallreduce_many, GW_FUSION_BYTES); a tensor that is
        # not contiguous goes through a contiguous copy, copied back after.
        work = [_reducible(t, op) for t in tensors]
        staged = [w if w.is_contiguous() else w.contiguous() for w in work]
        bufs = [_buffer(s, "allreduce_coalesced's tensor %d" % i) for i, s in enumerate(staged)]
        dt = bufs[0][1]

        def unpack():
            for w, s in zip(work, staged):
                if s is not w:
                    w.copy_(s)

        return self._start(
            lambda: [self.comm.iallreduce_many([b for b, _ in bufs], op=op, dtype=dt)],
            tensors,
            unpack,
            "allreduce_coalesced",
        )

    def reduce(self, tensors, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        root = opts.rootRank if opts is not None else 0
        t = _one(tensors, "reduce")
        buf, dt = _buffer(_reducible(t, op), "reduce's tensor")
        return self._start(lambda: [self.comm.ireduce(buf, op=op, root=root, dtype=dt)], tensors, what="reduce")

    def _allgather_base(self, output, input, opts=None):
        out, dt, _ = _moved(output, "all_gather_into_tensor's output")
        inp, _, _ = _moved(input, "all_gather_into_tensor's input")
        return self._start(lambda: [self.comm.iallgather(inp, out, dtype=dt)], [output], what="all_gather_into_tensor")

    def allgather(self, output_lists, inputs, opts=None):
        t = _one(inputs, "allgather")
        outputs = _one(output_lists, "allgather")
        if len(outputs) != self.size():
            raise ValueError("gradwire backend: all_gather needs %d output tensors, got %d" % (self.size(), len(outputs)))
        if any(o.numel() != t.numel() for o in outputs):
            return self._allgather_uneven(outputs, t, output_lists)
        _same_kind(outputs, t, "all_gather")
        flat = torch.empty((self.size(),) + tuple(t.shape), dtype=t.dtype)
        out, dt, _ = _moved(flat, "all_gather's output")
        inp, _, _ = _moved(t, "all_gather's input")

        def scatter_rows():
            for o, row in zip(outputs, flat):
                o.copy_(row.view(o.shape))

        return self._start(lambda: [self.comm.iallgather(inp, out, dtype=dt)], output_lists, scatter_rows, "all_gather")

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
        out, dt, scale = _moved(flat, "all_gather's output")
        inp, _, _ = _moved(t, "all_gather's input")

        def scatter_blocks():
            for o, block in zip(outputs, torch.split(flat, counts)):
                o.copy_(block.view(o.shape))

        wire = [c * scale for c in counts]
        return self._start(lambda: [self.comm.iallgatherv(inp, out, wire, dtype=dt)], output_lists, scatter_blocks, "all_gather")

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        """torch's layout: output_lists[j][i] receives rank j's inputs[i].
        One gradwire allgather of every input's bytes packed end to end (so
        the tensors may differ in dtype and shape, or be empty), unpacked
        into each rank's list when it completes."""
        n = self.size()
        if len(output_lists) != n:
            raise ValueError(
                "gradwire backend: all_gather_coalesced needs %d output lists (one per rank), got %d" % (n, len(output_lists))
            )
        for j, outs in enumerate(output_lists):
            if len(outs) != len(inputs):
                raise ValueError(
                    "gradwire backend: all_gather_coalesced: output list %d has %d tensors for %d inputs"
                    % (j, len(outs), len(inputs))
                )
            for i, (o, t) in enumerate(zip(outs, inputs)):
                if o.dtype != t.dtype or o.numel() != t.numel():
                    raise ValueError(
                        "gradwire backend: all_gather_coalesced: output %d of rank %d must have %d elements of %s "
                        "like input %d (it has %d of %s)" % (i, j, t.numel(), t.dtype, i, o.numel(), o.dtype)
                    )
        for i, t in enumerate(inputs):
            _dense_cpu(t, "all_gather_coalesced's input %d" % i)
            _host_only(t, "all_gather_coalesced's input %d" % i, "all_gather_coalesced")
        sizes = [t.numel() * t.element_size() for t in inputs]
        if sum(sizes) == 0:
            return self._done(output_lists)
        packed = torch.cat([t.detach().contiguous().reshape(-1).view(torch.uint8) for t in inputs])
        gathered = torch.empty((n, packed.numel()), dtype=torch.uint8)
        inp, out = packed.numpy(), gathered.numpy()

        def unpack():
            for outs, row in zip(output_lists, gathered):
                for o, piece in zip(outs, torch.split(row, sizes)):
                    o.copy_(piece.view(o.dtype).view(o.shape))

        return self._start(lambda: [self.comm.iallgather(inp, out)], output_lists, unpack, "all_gather_coalesced")

    def _reduce_scatter_base(self, output, input, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        out, dt = _buffer(_reducible(output, op), "reduce_scatter_tensor's output")
        inp, _ = _buffer(_reducible(input, op), "reduce_scatter_tensor's input")
        return self._start(
            lambda: [self.comm.ireduce_scatter(inp, out, op=op, dtype=dt)], [output], what="reduce_scatter_tensor"
        )

    def reduce_scatter(self, outputs, input_lists, opts=None):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        output = _one(outputs, "reduce_scatter")
        inputs = _one(input_lists, "reduce_scatter")
        if len(inputs) != self.size():
            raise ValueError("gradwire backend: reduce_scatter needs %d input tensors, got %d" % (self.size(), len(inputs)))
        _same_kind(inputs, output, "reduce_scatter")
        flat = torch.cat([_reducible(i, op).reshape(-1) for i in inputs])
        inp, dt = _buffer(flat, "reduce_scatter's input")
        out, _ = _buffer(_reducible(output, op), "reduce_scatter's output")
        return self._start(lambda: [self.comm.ireduce_scatter(inp, out, op=op, dtype=dt)], outputs, what="reduce_scatter")

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        out, dt, scale = _moved(output, "all_to_all_single's output")
        inp, _, _ = _moved(input, "all_to_all_single's input")
        n = self.size()
        if not output_split_sizes and not input_split_sizes:
            if input.numel() != output.numel() or input.numel() % n != 0:
                raise ValueError(
                    "gradwire backend: all_to_all_single without split sizes needs input and output of the same "
                    "size, a multiple of %d elements (got %d and %d)" % (n, input.numel(), output.numel())
                )
            if input.numel() == 0:
                return self._done([output])
            return self._start(lambda: [self.comm.ialltoall(inp, out, dtype=dt)], [output], what="all_to_all_single")
        for name, t, splits in (("input", input, input_split_sizes), ("output", output, output_split_sizes)):
            if splits and (len(splits) != n or sum(splits) != (t.shape[0] if t.dim() else 1)):
                raise ValueError(
                    "gradwire backend: all_to_all_single: %s_split_sizes %s must be %d sizes adding up to the %s's "
                    "first dimension (%d)" % (name, list(splits), n, name, t.shape[0] if t.dim() else 1)
                )
            if not splits and (t.shape[0] if t.dim() else 1) % n:
                raise ValueError(
                    "gradwire backend: all_to_all_single: without %s_split_sizes the %s's first dimension (%d) must "
                    "be a multiple of %d" % (name, name, t.shape[0] if t.dim() else 1, n)
                )
        row_in = input[0].numel() if input.dim() > 0 and input.shape[0] else 1
        row_out = output[0].numel() if output.dim() > 0 and output.shape[0] else 1
        sends = [s * row_in for s in input_split_sizes] if input_split_sizes else [input.numel() // n] * n
        recvs = [s * row_out for s in output_split_sizes] if output_split_sizes else [output.numel() // n] * n
        sends, recvs = [c * scale for c in sends], [c * scale for c in recvs]
        return self._start(lambda: [self.comm.ialltoallv(inp, sends, out, recvs, dtype=dt)], [output], what="all_to_all_single")

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
        inp, dt, scale = _moved(flat_in, "all_to_all's inputs")
        out, _, _ = _moved(flat_out, "all_to_all's outputs")
        sends = [t.numel() * scale for t in inputs]
        recvs = [t.numel() * scale for t in outputs]

        def unpack():
            for o, piece in zip(outputs, torch.split(flat_out, [t.numel() for t in outputs])):
                o.copy_(piece.view(o.shape))

        if len(set(sends)) == 1 and sends == recvs:
            issue = lambda: [self.comm.ialltoall(inp, out, dtype=dt)]  # noqa: E731
        else:
            issue = lambda: [self.comm.ialltoallv(inp, sends, out, recvs, dtype=dt)]  # noqa: E731
        return self._start(issue, outputs, unpack, "all_to_all")

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

        inp, dt, _ = _moved(t, "gather's input")
        out, _, _ = _moved(flat, "gather's output")
        return self._start(lambda: [self.comm.igather(inp, out, root=root, dtype=dt)], output_lists, after, "gather")

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
        inp, dt, _ = _moved(flat, "scatter's input")
        out, _, _ = _moved(output, "scatter's output")
        return self._start(lambda: [self.comm.iscatter(inp, out, root=root, dtype=dt)], outputs, what="scatter")

    def barrier(self, opts=None):
        return self._start(lambda: [self.comm.ibarrier()], [], what="barrier")

    # ---- point to point ----------------------------------------------------
    def send(self, tensors, dst, tag=0):
        finish = self._mailbox.send(_one(tensors, "send"), dst, tag)
        return self._keep(_Work(torch.futures.Future(), tensors, p2p_handle=finish, what="send to rank %d" % dst))

    def recv(self, tensors, src, tag=0):
        finish, source = self._mailbox.recv(_one(tensors, "recv"), src, tag)
        return self._keep(
            _Work(torch.futures.Future(), tensors, p2p_handle=finish, what="recv from rank %d" % src, source=source)
        )

    def recv_anysource(self, tensors, tag=0):
        """torch's recv(tensor, src=None): the earliest message with tag
        from any rank; the Work's _source_rank() (what dist.recv returns)
        is the sender."""
        finish, source = self._mailbox.recv(_one(tensors, "recv"), None, tag)
        return self._keep(
            _Work(torch.futures.Future(), tensors, p2p_handle=finish, what="recv from any rank", source=source)
        )

    # batch_isend_irecv brackets its posts with these. gradwire's messages
    # are already in flight together once posted (they move while any of
    # them is waited on), so the batch needs nothing more.
    def _start_coalescing(self):
        pass

    def _end_coalescing(self, reqs=None):
        pass

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """gloo's monitored barrier: every other rank sends to rank 0 and
        waits for its answer; rank 0 waits for each rank's message until
        `timeout` (the group's when None) and raises naming the first rank
        that did not come ("Rank 2 failed to pass monitoredBarrier in 1000
        ms"), or every such rank with wait_all_ranks ("Ranks 1, 2 failed
        ..."); a rank that rank 0 did not answer in time raises too. The
        messages of a failed barrier cannot be taken back, so a failure
        aborts the communicator (the group is unusable after it, on every
        rank) rather than leave them to match a later message."""
        if isinstance(timeout, dist.BarrierOptions):
            timeout = timeout.timeout
        if timeout is None:
            seconds = self.timeout_s if self.timeout_s is not None else self.comm_timeout_s
        else:  # here 0 means no time at all, as gloo's
            seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
        ms = int(round(seconds * 1000))
        deadline = time.monotonic() + seconds
        me, n = self.rank(), self.size()
        token = torch.zeros(1, dtype=torch.uint8)
        if n == 1:
            return
        if seconds <= 0:  # nothing posted: nothing left behind
            raise DistTimeoutError(
                "Rank %d timed out in monitoredBarrier after %d ms (gradwire: Timed out)" % (me, ms),
                gradwire.STATUS["GW_ERR_TIMEOUT"],
            )
        if me != 0:
            buf, ack = token.numpy(), torch.zeros(1, dtype=torch.uint8).numpy()
            with self._lock:
                handles = [self.comm.isend(buf, 0), self.comm.irecv(ack, 0)]
            if not self._poll(handles, deadline)[1]:
                self.comm.abort()
                raise DistTimeoutError(
                    "Rank %d successfully reached monitoredBarrier, but received errors while waiting for send/recv "
                    "from rank 0 (gradwire: Timed out after %d ms)" % (me, ms),
                    gradwire.STATUS["GW_ERR_TIMEOUT"],
                    0,
                )
            return
        bufs = [torch.zeros(1, dtype=torch.uint8).numpy() for _ in range(n)]
        with self._lock:
            handles = [self.comm.irecv(bufs[r], r) for r in range(1, n)]
        done, _ = self._poll(handles, deadline)
        missing = [r for r, ok in zip(range(1, n), done) if not ok]
        if missing:
            self.comm.abort()
            if wait_all_ranks:
                text = "Ranks %s failed to pass monitoredBarrier in %d ms" % (", ".join(map(str, missing)), ms)
            else:
                text = "Rank %d failed to pass monitoredBarrier in %d ms" % (missing[0], ms)
            raise DistTimeoutError(text + " (gradwire: Timed out)", gradwire.STATUS["GW_ERR_TIMEOUT"], missing[0])
        with self._lock:
            acks = [self.comm.isend(token.numpy(), r) for r in range(1, n)]
        for h in acks:
            h.wait()

    @staticmethod
    def _poll(handles, deadline):
        """Test the handles (their messages move while tested) until all are
        done or the deadline passes: (done flags, all done). A handle's
        failure counts as not done."""
        done = [False] * len(handles)
        pause = 1e-5
        while True:
            for i, h in enumerate(handles):
                if not done[i]:
                    try:
                        done[i] = bool(h.test())
                    except gradwire.Error:
                        done[i] = None
            if all(d is not False for d in done) or time.monotonic() >= deadline:
                flags = [d is True for d in done]
                return flags, all(flags)
            time.sleep(pause)
            pause = min(pause * 2, 0.005)


# new_group through gw_comm_split. torch calls a backend's creator on the
# new group's members only, but a split is collective over the parent
# communicator: so new_group itself is wrapped. When the default group is
# gradwire's and the new one is too, every rank (new_group is called by
# all) splits the default communicator first (members by their rank in the
# sorted list, the others with no color) and the creator takes the child
# instead of a fresh rendezvous through the store. Anything else (another
# default backend, new_group imported before this module) rendezvouses
# through the store: a new communicator, equally correct, one bootstrap.
_split_children = []  # (child communicator, its parent's timeout in seconds)


def _create(store, rank, size, timeout):
    while _split_children:
        child, parent_timeout = _split_children.pop(0)
        if child.rank == rank and child.size == size:
            pg = ProcessGroupGradwire(None, rank, size, timeout, comm=child, comm_timeout=parent_timeout)
            pg.origin = "split"
            return pg
        child.close()
    return ProcessGroupGradwire(store, rank, size, timeout)


def _wrap_new_group(new_group):
    def gradwire_new_group(ranks=None, timeout=dist.default_pg_timeout, backend=None, pg_options=None):
        default = dist.distributed_c10d._get_default_group() if dist.is_initialized() else None
        wanted = dist.Backend(backend) if backend is not None else (dist.get_backend() if default is not None else None)
        default = gradwire_backend(default)
        if default is not None and wanted == BACKEND:
            members = sorted(ranks) if ranks else list(range(dist.get_world_size()))
            me = dist.get_rank()
            with default._lock:
                child = default.comm.split(0 if me in members else None, members.index(me) if me in members else 0)
            if child is not None:
                _split_children.append((child, default.comm_timeout_s))
        try:
            return new_group(ranks=ranks, timeout=timeout, backend=backend, pg_options=pg_options)
        finally:
            while _split_children:  # not taken (an error on the way): give it back
                _split_children.pop()[0].close()

    gradwire_new_group.__doc__ = new_group.__doc__
    gradwire_new_group.__wrapped__ = new_group
    return gradwire_new_group


def _wrap_monitored_barrier(monitored_barrier):
    """torch's monitored_barrier refuses every backend but gloo by name:
    on a gradwire group it goes to the group's own (gloo's semantics)."""

    def gradwire_monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
        pg = dist.distributed_c10d._get_default_group() if group is None or group is dist.group.WORLD else group
        pg = gradwire_backend(pg)
        if pg is not None:
            return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)
        return monitored_barrier(group=group, timeout=timeout, wait_all_ranks=wait_all_ranks)

    gradwire_monitored_barrier.__doc__ = monitored_barrier.__doc__
    gradwire_monitored_barrier.__wrapped__ = monitored_barrier
    return gradwire_monitored_barrier


def gradwire_backend(group):
    """The ProcessGroupGradwire of a group, or None: on torch 1.x the group
    itself; on torch 2.x, where a ProcessGroup holds a Backend per device,
    its CPU backend."""
    if isinstance(group, ProcessGroupGradwire):
        return group
    get = getattr(group, "_get_backend", None)
    if get is not None:
        try:
            backend = get(torch.device("cpu"))
        except (RuntimeError, ValueError):
            return None
        return backend if isinstance(backend, ProcessGroupGradwire) else None
    return None


def _register():
    import inspect

    try:
        takes_devices = "devices" in inspect.signature(dist.Backend.register_backend).parameters
    except (TypeError, ValueError):
        takes_devices = False
    if takes_devices:  # torch >= 2.1: the creator makes the CPU Backend of each group
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "cuda"])
    else:
        dist.Backend.register_backend(BACKEND, _create)


if not hasattr(dist.Backend, BACKEND.upper()):
    _register()
    dist.new_group = dist.distributed_c10d.new_group = _wrap_new_group(dist.distributed_c10d.new_group)
    dist.monitored_barrier = dist.distributed_c10d.monitored_barrier = _wrap_monitored_barrier(
        dist.distributed_c10d.monitored_barrier
    )
