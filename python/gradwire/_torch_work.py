"""The calls in flight of gradwire's torch backend (gradwire/torch.py): a
Work and the handles behind its future (_Pending, _Work), the thread that
completes a group's calls in order (_Completer), torch's tagged messages
(_Mailbox), and the timeouts torch's callers catch (DistTimeoutError)."""

import collections
import datetime
import threading

import torch
from torch._C._distributed_c10d import Work

import gradwire
from gradwire._torch_tensors import _dense_cpu, _host_only


class DistTimeoutError(gradwire.TimeoutError, RuntimeError):
    """A call of the backend that ran past its timeout. Its message starts
    with "[gradwire] Timed out", torch's own wording (gloo's and the Store's
    "Timed out waiting ..."), so code that catches timeouts by message
    catches it; it is a RuntimeError as gloo's are, and a
    gradwire.TimeoutError (a builtin TimeoutError) with the rank blamed."""


def _timed_out(what, ms, cause=None):
    """The DistTimeoutError for `what` after `ms` milliseconds; `cause`, a
    gradwire.TimeoutError of the library, gives its reason and culprit."""
    text = "[gradwire] Timed out waiting %d ms for %s" % (ms, what)
    if cause is not None:
        text += ": " + str(cause)
    return DistTimeoutError(
        text,
        gradwire.STATUS["GW_ERR_TIMEOUT"],
        getattr(cause, "culprit", None),
        getattr(cause, "reason", ""),
    )


def _seconds(timeout):
    """A timeout as torch passes it (timedelta, seconds, None) in seconds; None or 0: none."""
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
    return seconds if seconds > 0 else None


class _Pending:
    """The gradwire handles of one Work and what completes its future. Whoever
    claims it first (the group's completion thread, or the thread calling
    Work.wait(), which then saves a thread switch) waits for the handles, runs
    `after` (copies into list outputs) and sets the future.

    `limit_s` is the group's timeout where the communicator's own is longer
    (a new_group(timeout=...) made by split keeps its parent's, and the
    library has no per-communicator setting to change it): a timer then
    fails the future with DistTimeoutError at that time, as gloo's call
    fails after the group's timeout. The call itself stays queued in the
    library (its buffers in use) until it completes or the communicator's
    own timeout ends it; the communicator is not aborted, since an abort
    would fail every group split from the same one."""

    __slots__ = ("handles", "future", "result", "after", "what", "limit_s", "_claim", "_settle")

    def __init__(self, handles, future, result, after, what="a collective", limit_s=None):
        self.handles, self.future, self.result, self.after = handles, future, result, after
        self.what, self.limit_s = what, limit_s
        self._claim = threading.Lock()
        self._settle = threading.Lock()
        if limit_s is not None:
            timer = threading.Timer(limit_s, self._expire)
            timer.daemon = True
            timer.start()
            self.future.add_done_callback(lambda _: timer.cancel())

    def claim(self):
        # A timed call is completed by the completion thread only: a waiter
        # blocked in the library could not give up at the time limit.
        return self.limit_s is None and self._claim.acquire(blocking=False)

    def claim_for_thread(self):
        return self._claim.acquire(blocking=False)

    def _set(self, error=None):
        with self._settle:
            if self.future.done():
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(self.result)

    def _expire(self):
        self._set(_timed_out(self.what, self.limit_s * 1000))

    def complete(self):
        try:
            error = None
            for h in self.handles:  # every one, even after a failure: buffers stay in use until then
                try:
                    h.wait()
                except Exception as e:  # noqa: BLE001
                    error = error or e
            if isinstance(error, gradwire.TimeoutError) and not isinstance(error, DistTimeoutError):
                raise _timed_out(self.what, _comm_timeout_ms(error), error)
            if error is not None:
                raise error
            if self.after is not None and not self.future.done():
                self.after()
        except Exception as e:  # noqa: BLE001 - handed to the future
            self._set(e)
        else:
            self._set()
        self.handles = self.after = None


def _comm_timeout_ms(error):
    """The timeout a library's GW_ERR_TIMEOUT ran out (its message names it), else 0."""
    import re

    m = re.search(r"(\d+) ?ms", str(error))
    return int(m.group(1)) if m else 0


class _Work(Work):
    """One call in flight: wait() waits for its future; get_future() is it."""

    def __init__(self, future, result, pending=None, p2p_handle=None, what="a call", source=None):
        super().__init__()
        self._future = future
        self._result = result
        self._pending = pending
        self._p2p = p2p_handle  # isend/irecv: data moves while wait() waits
        self._what = what
        self._source = source  # recv from any source: a callable giving the sender once done

    def wait(self, timeout=None):
        """Wait for the call; with a timeout (a timedelta, as torch passes
        it; 0 or None: none), raise DistTimeoutError ("Timed out ...") when
        it has not completed by then. The call itself goes on (gloo's
        Work.wait(timeout) leaves it too); the group's own timeout still
        ends it."""
        seconds = _seconds(timeout)
        if seconds is not None and not self._future.done():
            self._wait_for(seconds)
        elif self._p2p is not None and not self._future.done():
            self._finish_p2p()
        elif self._pending is not None and self._pending.claim():
            self._pending.complete()
        self._future.wait()
        return True

    def _finish_p2p(self):
        try:
            self._p2p()
            self._future.set_result(self._result)
        except Exception as e:  # noqa: BLE001 - handed to the future
            self._future.set_exception(e)

    def _wait_for(self, seconds):
        done = threading.Event()
        self._future.add_done_callback(lambda _: done.set())
        if self._p2p is not None:
            # A message moves while its Work is waited on: do that in a
            # helper thread, so that this one can give up in time.
            threading.Thread(target=self._finish_p2p, daemon=True).start()
        elif self._pending is not None and self._pending.claim_for_thread():
            threading.Thread(target=self._pending.complete, daemon=True).start()
        if not done.wait(seconds):
            raise _timed_out(self._what, seconds * 1000)

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

    def _source_rank(self):
        if self._source is None:
            raise RuntimeError("gradwire backend: _source_rank() is for a recv from any source")
        self.wait()
        return self._source()

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
            if item.claim_for_thread():
                item.complete()

    def stop(self):
        """Complete what is queued, then end the thread."""
        with self._cond:
            self._stopping = True
            thread = self._thread
            self._cond.notify()
        if thread is not None:
            thread.join()


class _Mailbox:
    """torch's tagged messages on gradwire's (gw_isend_tagged and
    gw_irecv_tagged, docs/guide/p2p.md).

    A message is the tensor's bytes (uint8), sent with torch's tag; a
    receive names its source or None (any rank) and the tag, and takes the
    earliest message that fits, MPI's and gloo's rule, matched by the
    library. A message nobody waits for yet is taken in and held by the
    library, so a wait on one message never stops another from arriving:
    two ranks that each wait for their send to the other complete
    (batch_isend_irecv in a ring). A size that differs from the receive's
    tensor fails both ranks with gradwire.MismatchError naming the
    sender."""

    def __init__(self, pg):
        self._pg = pg

    @staticmethod
    def _bytes(t, what):
        _dense_cpu(t, what)
        _host_only(t, what, "point-to-point messages")
        if not t.is_contiguous():
            raise ValueError("gradwire backend: %s must be contiguous (call .contiguous() first)" % what)
        return t.detach().reshape(-1).view(torch.uint8)

    @staticmethod
    def _tag(tag):
        if tag is None or int(tag) < 0:
            raise ValueError("gradwire backend: a message's tag must be an int >= 0, not %r" % (tag,))
        return int(tag)

    def send(self, t, dst, tag):
        payload = self._bytes(t, "send's tensor")
        with self._pg._lock:
            h = self._pg.comm.isend_tagged(payload.numpy(), dst, self._tag(tag))
        return lambda: h.wait() if payload is not None else None  # payload stays until it is out

    def recv(self, t, src, tag):
        """The receive's finish (raises its error) and its source (once finished)."""
        buf = self._bytes(t, "recv's tensor")
        with self._pg._lock:
            h = self._pg.comm.irecv_tagged(buf.numpy(), src, self._tag(tag))
        return (lambda: h.wait() if buf is not None else None), (lambda: h.status[0])


def _library_timeout_s():
    """The library's timeout of a communicator made without one (GW_TIMEOUT_MS, 300 s by default)."""
    import os

    try:
        return int(os.environ.get("GW_TIMEOUT_MS", "300000")) / 1000.0
    except ValueError:
        return 300.0
