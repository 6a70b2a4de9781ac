"""The gradwire Python API on every rank of a job (gradwire launch -n N):
every collective and point-to-point call against a numpy reference, for
every dtype and op, in place and out of place; handles; compression
states; local argument errors; and, at the end, ranks that disagree
(MismatchError on every rank, the same culprit) and a rank whose call is
refused locally (AbortedError on the others, blaming it).

Each rank's input is a deterministic function of its rank, so every rank
computes the reference for all ranks itself. Integer-valued data keeps
float sums exact, whatever order the algorithm adds in.
"""

import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np

import gradwire

failures = []
passed = 0


def check(cond, what):
    global passed
    if cond:
        passed += 1
    else:
        failures.append(what)
        print("FAIL: %s" % what, flush=True)


def expect(exc_type, fn, what):
    try:
        fn()
    except exc_type as e:
        check(True, what)
        return e
    except Exception as e:  # noqa: BLE001 - report anything else as a failure
        check(False, "%s: raised %r, not %s" % (what, e, exc_type.__name__))
        return None
    check(False, "%s: no exception (wanted %s)" % (what, exc_type.__name__))
    return None


DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.int8, np.uint8]
OPS = ["sum", "prod", "min", "max", "avg"]


def data(rank, n, dtype, op):
    # Small integers, so that sums and products of up to 3 ranks fit int8
    # and float16 exactly; prod keeps |x| <= 2.
    i = np.arange(n)
    signed = np.dtype(dtype).kind in "fi"
    if op == "prod":
        v = (i + rank) % 3 - (1 if signed else 0)
    else:
        v = (i * 7 + rank * 5) % 11 - (5 if signed else 0)
    return v.astype(dtype)


def reference(size, n, dtype, op):
    xs = [data(r, n, dtype, op).astype(np.float64 if np.dtype(dtype).kind == "f" else np.int64) for r in range(size)]
    if op == "sum":
        out = sum(xs)
    elif op == "prod":
        out = np.prod(xs, axis=0)
    elif op == "min":
        out = np.min(xs, axis=0)
    elif op == "max":
        out = np.max(xs, axis=0)
    else:
        s = sum(xs)
        if np.dtype(dtype).kind == "f":
            out = s / size
        else:
            # The library divides the wrapped sum with truncation toward zero.
            wrapped = s.astype(dtype).astype(np.int64)
            out = np.trunc(wrapped / size).astype(np.int64)
    return out.astype(dtype)


def same(a, b, dtype):
    if np.dtype(dtype).kind == "f":
        return np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=2e-3 if dtype == np.float16 else 1e-6)
    return np.array_equal(a, b)


def test_allreduce(comm):
    n = 1000
    for dtype in DTYPES:
        for op in OPS:
            want = reference(comm.size, n, dtype, op)
            x = data(comm.rank, n, dtype, op)
            out = np.zeros_like(x)
            r = comm.allreduce(x, out, op=op)
            check(r is out and same(out, want, dtype), "allreduce %s %s out of place" % (np.dtype(dtype).name, op))
            check(np.array_equal(x, data(comm.rank, n, dtype, op)), "allreduce %s %s left send alone" % (np.dtype(dtype).name, op))
            r = comm.allreduce(x, op=op)
            check(r is x and same(x, want, dtype), "allreduce %s %s in place" % (np.dtype(dtype).name, op))
    # Ops by value and by name; a 2-D array is reduced as its elements.
    x = np.ones((4, 5), dtype=np.float32)
    comm.allreduce(x, op=gradwire.SUM)
    check(np.all(x == comm.size) and x.shape == (4, 5), "allreduce of a 2-D array, op by value")
    # bfloat16: the bits of float32 values with exact bfloat16 forms.
    f = np.arange(64, dtype=np.float32) + comm.rank
    bits = (f.view(np.uint32) >> 16).astype(np.uint16)
    comm.allreduce(bits, dtype="bfloat16")
    back = (bits.astype(np.uint32) << 16).view(np.float32)
    want = sum(np.arange(64, dtype=np.float32) + r for r in range(comm.size))
    check(np.array_equal(back, want), "allreduce bfloat16 bits (dtype='bfloat16')")
    # Zero elements still agree.
    comm.allreduce(np.zeros(0, dtype=np.float32))
    check(True, "allreduce of zero elements")


def test_rooted(comm):
    for root in range(comm.size):
        for dtype in (np.float32, np.int64, np.float16):
            x = data(comm.rank, 333, dtype, "sum")
            b = x.copy()
            comm.broadcast(b, root=root)
            check(np.array_equal(b, data(root, 333, dtype, "sum")), "broadcast %s root %d in place" % (np.dtype(dtype).name, root))
            out = np.zeros_like(x)
            comm.broadcast(x, out, root=root)
            check(np.array_equal(out, data(root, 333, dtype, "sum")), "broadcast %s root %d out of place" % (np.dtype(dtype).name, root))
            out = np.full_like(x, 99)
            comm.reduce(x, out, op="max", root=root)
            want = reference(comm.size, 333, dtype, "max") if comm.rank == root else np.full_like(x, 99)
            check(np.array_equal(out, want), "reduce %s max root %d (out untouched off the root)" % (np.dtype(dtype).name, root))


def test_gather_scatter(comm):
    n, size, rank = 17, comm.size, comm.rank
    for dtype in (np.float32, np.float64, np.int32, np.int8):
        x = data(rank, n, dtype, "sum")
        want = np.stack([data(r, n, dtype, "sum") for r in range(size)])
        out = comm.allgather(x)
        check(out.shape == (size, n) and np.array_equal(out, want), "allgather %s, out allocated" % np.dtype(dtype).name)
        out = np.zeros(size * n, dtype=dtype)
        comm.allgather(x, out)
        check(np.array_equal(out, want.ravel()), "allgather %s into out" % np.dtype(dtype).name)
        buf = np.zeros((size, n), dtype=dtype)
        buf[rank] = x
        comm.allgather(buf[rank], buf)
        check(np.array_equal(buf, want), "allgather %s in place" % np.dtype(dtype).name)

        big = np.stack([data(rank * 3 + b, n, dtype, "sum") for b in range(size)])
        full = sum(np.stack([data(r * 3 + b, n, dtype, "sum") for b in range(size)]).astype(np.int64) for r in range(size))
        want_block = full[rank].astype(dtype)
        out = comm.reduce_scatter(big)
        check(out.shape == (n,) and same(out, want_block, dtype), "reduce_scatter %s, out allocated" % np.dtype(dtype).name)
        buf = big.copy()
        comm.reduce_scatter(buf, buf[rank])
        check(same(buf[rank], want_block, dtype), "reduce_scatter %s in place" % np.dtype(dtype).name)
    comm.barrier()
    check(True, "barrier")


def test_p2p(comm):
    size, rank = comm.size, comm.rank
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    for dtype in (np.float32, np.int64, np.uint8):
        x = data(rank, 1000, dtype, "sum")
        got = np.zeros_like(x)
        r = comm.sendrecv(x, nxt, got, prv)
        check(r is got and np.array_equal(got, data(prv, 1000, dtype, "sum")), "sendrecv ring %s" % np.dtype(dtype).name)
    # Blocking send/recv between rank 0 and every other rank, in turn.
    for peer in range(1, size):
        if rank == 0:
            comm.send(np.arange(100, dtype=np.int32) * peer, peer)
            got = comm.recv(np.zeros(100, dtype=np.int32), peer)
            check(np.array_equal(got, np.arange(100, dtype=np.int32) + peer), "send/recv with rank %d" % peer)
        elif rank == peer:
            got = comm.recv(np.zeros(100, dtype=np.int32), 0)
            check(np.array_equal(got, np.arange(100, dtype=np.int32) * peer), "recv from rank 0")
            comm.send(np.arange(100, dtype=np.int32) + peer, 0)
    comm.barrier()
    # A window of isend/irecv in both directions around the ring.
    sends = [np.full(256, rank * 100 + k, dtype=np.float64) for k in range(4)]
    recvs = [np.zeros(256, dtype=np.float64) for _ in range(4)]
    hs = [comm.irecv(b, prv) for b in recvs] + [comm.isend(b, nxt) for b in sends]
    while not all(h.test() for h in hs):
        pass
    check(all(h.done for h in hs), "isend/irecv handles done")
    check(all(np.all(recvs[k] == prv * 100 + k) for k in range(4)), "irecv window received in order")
    r = [h.wait() for h in hs]
    check(r[0] is recvs[0] and r[-1] is None, "wait() after test(): irecv returns its buffer, isend None")
    # A point-to-point handle moves data only on its own thread.
    got = np.zeros(8, dtype=np.int32)
    hs = [comm.irecv(got, prv), comm.isend(np.full(8, rank, dtype=np.int32), nxt)]
    errors = []

    def other():
        try:
            hs[0].wait()
        except RuntimeError as e:
            errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    check(len(errors) == 1 and "thread that posted it" in str(errors[0]), "an irecv handle refuses another thread")
    for h in hs:
        h.wait()
    check(np.all(got == prv), "and completes on its own thread")
    # Standard completion (as MPI_Send): the same messages, no receipts.
    check(comm.p2p_send == "sync", "sends are sync by default, not %r" % comm.p2p_send)
    comm.p2p_send = "standard"
    check(comm.p2p_send == "standard", "p2p_send set to standard")
    x = np.arange(64, dtype=np.float32) + rank
    got = comm.sendrecv(x, nxt, np.zeros_like(x), prv)
    check(np.array_equal(got, np.arange(64, dtype=np.float32) + prv), "sendrecv with standard sends")
    try:
        comm.p2p_send = "eager"
        check(False, "p2p_send = 'eager' was taken")
    except ValueError as e:
        check("'sync' or 'standard'" in str(e), "p2p_send refuses another word: %s" % e)
    comm.p2p_send = "sync"


def test_tagged(comm):
    """isend_tagged / irecv_tagged: every other rank's message at rank 0 from
    any source and any tag, each once, Handle.status naming it; a tag picks."""
    size, rank = comm.size, comm.rank
    if rank == 0:
        seen = []
        for _ in range(size - 1):
            got = np.zeros(3, dtype=np.int32)
            h = comm.irecv_tagged(got, None, None)
            check(h.status is None, "irecv_tagged: no status before it completes")
            r = h.wait()
            src, tag, count = h.status
            check(r is got and got[0] == src and got[1] == tag and count == 3, "irecv_tagged status %s for %s" % (h.status, got))
            seen.append(src)
        check(sorted(seen) == list(range(1, size)), "irecv_tagged from any source: each rank once (%s)" % seen)
        comm.barrier()  # rank 1's next messages come after it: the any-tag receives above cannot take them
        got = np.zeros(2, dtype=np.float64)
        h = comm.irecv_tagged(got, src=1, tag=9)  # sent before the tag 8 one below
        h8 = comm.irecv_tagged(np.zeros(1, dtype=np.float64), 1, 8)
        h.wait()
        h8.wait()
        check(h.status == (1, 9, 2) and got[1] == 9.0 and h8.status == (1, 8, 1), "irecv_tagged picks by tag")
    else:
        comm.isend_tagged(np.array([rank, 10 + rank, 0], dtype=np.int32), 0, 10 + rank).wait()
        comm.barrier()
        if rank == 1:
            hs = [comm.isend_tagged(np.array([8.0]), 0, tag=8), comm.isend_tagged(np.array([0.0, 9.0]), 0, 9)]
            for h in hs:
                h.wait()
    comm.barrier()


def test_nonblocking(comm):
    xs = [np.full(10000, comm.rank + k, dtype=np.float32) for k in range(5)]
    hs = [comm.iallreduce(x, op="sum") for x in xs]
    outs = [h.wait() for h in hs]
    base = sum(range(comm.size))
    check(all(o is x for o, x in zip(outs, xs)), "iallreduce wait() returns the array")
    check(all(np.all(x == base + k * comm.size) for k, x in enumerate(xs)), "five iallreduce in flight")
    out = np.zeros(10, dtype=np.int64)
    h = comm.iallreduce(np.ones(10, dtype=np.int64), out, op="max")
    del h  # a dropped handle completes in its destructor
    check(np.all(out == 1), "a dropped handle completed its call")
    # The handle alone keeps a temporary array alive until the call is done.
    r = comm.iallreduce(np.full(5000, 2.0)).wait()
    check(r.shape == (5000,) and np.all(r == 2.0 * comm.size), "a handle keeps its temporary array alive")
    # No references leak per call, blocking or not.
    x, out = np.ones(16, np.float32), np.zeros(16, np.float32)
    before = (sys.getrefcount(x), sys.getrefcount(out))
    for _ in range(200):
        comm.allreduce(x, out)
        comm.iallreduce(x, out).wait()
    check((sys.getrefcount(x), sys.getrefcount(out)) == before, "no reference leaks per call")
    # A handle waited for from another thread.
    x = np.ones(1 << 16, dtype=np.float64)
    h = comm.iallreduce(x)
    result = []
    t = threading.Thread(target=lambda: result.append(h.wait()))
    t.start()
    t.join()
    check(result and result[0] is x and np.all(x == comm.size), "handle waited for on another thread")


def test_many_and_new_dtypes(comm):
    # allreduce_many: buffers of several sizes, each reduced in place.
    xs = [np.full(n, comm.rank + k, dtype=np.float32) for k, n in enumerate((1, 0, 300, 5, 4096))]
    out = comm.allreduce_many(xs, op="sum")
    base = sum(range(comm.size))
    check(out is xs, "allreduce_many returns its list")
    check(all(np.all(x == base + k * comm.size) for k, x in enumerate(xs)), "allreduce_many sums each buffer")
    ys = [np.arange(10, dtype=np.int64) * (comm.rank + 1), np.full(3, comm.rank, dtype=np.int64)]
    check(comm.iallreduce_many(ys, op="max").wait() is ys, "iallreduce_many wait() returns the list")
    check(np.all(ys[0] == np.arange(10) * comm.size) and np.all(ys[1] == comm.size - 1), "iallreduce_many max")
    # uint32 and uint64 buffers, bitwise ops.
    u = np.full(4, 1 << comm.rank, dtype=np.uint32)
    comm.allreduce(u, op="bor")
    check(np.all(u == (1 << comm.size) - 1), "uint32 bor")
    v = np.full(4, 0xFFFF0000FFFF0000 | (1 << comm.rank), dtype=np.uint64)
    comm.allreduce(v, op="band")
    check(np.all(v == (0xFFFF0000FFFF0000 if comm.size > 1 else 0xFFFF0000FFFF0001)), "uint64 band")
    # float8 e4m3 as its bytes: 1.0 is 0x38, the sum over ranks of 1.0 is size.
    e = np.full(8, 0x38, dtype=np.uint8)
    comm.allreduce(e, op="sum", dtype="float8_e4m3")
    want = {1: 0x38, 2: 0x40, 3: 0x44, 4: 0x48}[comm.size]
    check(np.all(e == want), "float8_e4m3 sum: %s" % e)


def test_alltoall_and_more_nonblocking(comm):
    n, b = comm.size, 7
    send = np.arange(n * b, dtype=np.int64) + 1000 * comm.rank
    out = comm.alltoall(send, np.zeros(n * b, dtype=np.int64))
    want = np.concatenate([np.arange(comm.rank * b, (comm.rank + 1) * b) + 1000 * j for j in range(n)])
    check(np.array_equal(out, want), "alltoall: block j from rank j")
    inplace = send.copy()
    comm.alltoall(inplace)
    check(np.array_equal(inplace, want), "alltoall in place")
    x = np.full(64, float(comm.rank), dtype=np.float32)
    hb = comm.ibroadcast(x.copy(), root=n - 1)
    hr = comm.ireduce(x.copy(), op="max", root=0)
    g = np.zeros(64 * n, dtype=np.float32)
    hg = comm.iallgather(x, g)
    rs = np.zeros(8, dtype=np.float32)
    hs = comm.ireduce_scatter(np.ones(8 * n, dtype=np.float32), rs)
    hbar = comm.ibarrier()
    ha = comm.ialltoall(send.copy())
    outs = [h.wait() for h in (hb, hr, hg, hs)]
    hbar.wait()
    check(np.all(outs[0] == n - 1), "ibroadcast from the last rank")
    check(comm.rank != 0 or np.all(outs[1] == n - 1), "ireduce max on root 0")
    check(np.array_equal(outs[2], np.repeat(np.arange(n, dtype=np.float32), 64)), "iallgather")
    check(np.all(outs[3] == n), "ireduce_scatter")
    check(np.array_equal(ha.wait(), want), "ialltoall in place")


def test_compressed(comm):
    n = 4096
    g = (np.arange(n, dtype=np.float32) % 13 - 6) * (comm.rank + 1)
    want = sum((np.arange(n, dtype=np.float32) % 13 - 6) * (r + 1) for r in range(comm.size)) / comm.size
    st = gradwire.CompressState(n, codec="none")
    out = comm.allreduce_compressed(st, g, np.zeros(n, np.float32))
    check(np.allclose(out, want, rtol=1e-6), "allreduce_compressed codec none = average")
    check(st.step == 1 and st.stats()["total"]["calls"] == 1, "state step and stats after one call")
    fp = gradwire.CompressState(n, 1, "fp16", min_elements=0)
    out = np.zeros(n, np.float32)
    comm.allreduce_compressed(fp, g, out)
    check(np.allclose(out, want, atol=1e-2), "allreduce_compressed fp16 close to the average")
    s = fp.stats()
    check(s["last"]["compressed_calls"] == 1 and s["total"]["bytes_sent"] > 0, "fp16 stats count a compressed call")
    check(comm.size == 1 or s["total"]["compression_ratio"] > 1.5, "fp16 sends about half the dense bytes")
    image = fp.save()
    fp2 = gradwire.CompressState(n, 1, "fp16", min_elements=0)
    fp2.load(image)
    check(fp2.step == fp.step == 1 and fp2.save() == image, "state save/load round trip")
    expect(gradwire.MismatchError, lambda: gradwire.CompressState(n, 1, "int8", min_elements=0).load(image), "loading another codec's image")
    topk = gradwire.CompressState(n, codec="topk", topk_ratio=0.1, min_elements=0, momentum=0.5)
    hs = [comm.iallreduce_compressed(topk, g.copy()) for _ in range(3)]
    expect(RuntimeError, topk.save, "a state owned by pending calls refuses save()")
    outs = [h.wait() for h in hs]
    check(topk.step == 3 and all(o.shape == (n,) for o in outs), "three iallreduce_compressed on one state")
    path = "/tmp/gw-py-state-%d-%d" % (os.getpid(), comm.rank)
    topk.save_file(path)
    t2 = gradwire.CompressState(n, codec="topk", topk_ratio=0.1, min_elements=0, momentum=0.5)
    t2.load_file(path)
    os.unlink(path)
    check(t2.step == 3, "state save_file/load_file")
    before = t2.save()
    t2.reset_residual()
    after = t2.save()
    t2.reset_residual()
    check(t2.step == 3 and after != before and t2.save() == after, "reset_residual keeps the step, zeroes the rest once")
    check(st.config["codec"] == "none" and topk.config["momentum"] == 0.5 and topk.shape == (n, 1), "state config and shape")


class _CudaArray:
    """An object with only __cuda_array_interface__ (what torch's CUDA
    tensors, CuPy and Numba arrays give), here over host memory: a process
    without a CUDA runtime reads it as host memory, so the interface's
    parsing is checked without a GPU (tests/cuda checks device memory)."""

    def __init__(self, arr, readonly=False, strides=None, typestr=None):
        self.arr = arr
        self.__cuda_array_interface__ = {
            "shape": arr.shape,
            "typestr": typestr or arr.dtype.str,
            "data": (arr.ctypes.data, readonly),
            "strides": strides,
            "version": 2,
        }


def test_cuda_array_interface(comm):
    x = data(comm.rank, 1000, np.float32, "sum")
    want = reference(comm.size, 1000, np.float32, "sum")
    out = np.zeros(1000, np.float32)
    comm.allreduce(_CudaArray(x), _CudaArray(out))
    check(same(out, want, np.float32), "allreduce through __cuda_array_interface__ (send and out)")
    y = x.copy()
    comm.allreduce(_CudaArray(y))
    check(same(y, want, np.float32), "allreduce in place through __cuda_array_interface__")
    b = np.arange(6, dtype=np.int16).reshape(2, 3)
    comm.broadcast(_CudaArray(b), dtype="bfloat16")
    check(np.array_equal(b, np.arange(6, dtype=np.int16).reshape(2, 3)), "a 2-d bfloat16 CUDA array")
    comm.set_cuda_stream(0)

    def one():
        return gradwire.Comm(rank=0, size=1, root="127.0.0.1:0", token="t")

    z = np.zeros(8, np.float32)
    for bad, what, exc in (
        (_CudaArray(z, readonly=True), "read-only", gradwire.ArgumentError),
        (_CudaArray(np.zeros((2, 4), np.float32), strides=(4, 8)), "not C-contiguous", gradwire.ArgumentError),
        (_CudaArray(z, typestr="<c8"), "no type for CUDA array type '<c8'", gradwire.DtypeError),
    ):
        e = expect(exc, lambda: one().allreduce(bad), "a CUDA array that is " + what)
        check(e is not None and what in str(e), "the CUDA array error says: " + what)


def test_local_errors():
    # Each refusal aborts its communicator, so each gets a one-rank one.
    def one():
        return gradwire.Comm(rank=0, size=1, root="127.0.0.1:0", token="t")

    x = np.arange(20, dtype=np.float32)
    e = expect(gradwire.ArgumentError, lambda: one().allreduce(x[::2]), "non-contiguous array")
    check(e is not None and "C-contiguous" in str(e) and isinstance(e, ValueError), "non-contiguous: the message says so")
    ro = x.copy()
    ro.flags.writeable = False
    e = expect(gradwire.ArgumentError, lambda: one().allreduce(ro), "read-only array in place")
    check(e is not None and "read-only" in str(e), "read-only: the message says so")
    c = one()
    check(np.array_equal(c.allreduce(ro, np.zeros(20, np.float32)), x), "read-only send with an out is fine")
    e = expect(gradwire.DtypeError, lambda: one().allreduce(np.zeros(4, np.uint16)), "uint16 (no gradwire type)")
    check(e is not None and isinstance(e, TypeError) and "uint16" not in str(e) and "'H'" in str(e), "dtype error names the format")
    expect(gradwire.DtypeError, lambda: one().allreduce(x, np.zeros(20, np.float64)), "send and out of different types")
    expect(gradwire.DtypeError, lambda: one().allreduce(x, dtype="bfloat16"), "bfloat16 on a float32 buffer")
    expect(gradwire.ArgumentError, lambda: one().allreduce(x, np.zeros(19, np.float32)), "out of the wrong length")
    expect(gradwire.ArgumentError, lambda: one().allgather(x, np.zeros(19, np.float32)), "allgather out of the wrong length")
    expect(gradwire.ArgumentError, lambda: one().allreduce(x, op="median"), "unknown op")
    expect(gradwire.DtypeError, lambda: one().allreduce([1.0, 2.0]), "a list has no buffer")
    expect(TypeError, lambda: one().allreduce(x, bogus=1), "unknown keyword")
    c = one()
    expect(gradwire.ArgumentError, lambda: c.allreduce(x[::2]), "a refused call")
    e = expect(gradwire.AbortedError, lambda: c.allreduce(x), "the communicator is aborted after a refused call")
    check(e is not None and e.status == gradwire.STATUS["GW_ERR_ABORTED"] and e.status_name == "GW_ERR_ABORTED" and e.culprit == 0, "AbortedError carries status, name and culprit")
    c.close()
    expect(gradwire.ArgumentError, lambda: c.allreduce(x), "a closed communicator")
    e = expect(gradwire.Error, lambda: gradwire.Comm(rank=0, size=2, root="127.0.0.1:1", timeout=0.5), "no root to join")
    check(e is not None and isinstance(e, (gradwire.TimeoutError, gradwire.ConfigError, gradwire.SystemError)), "joining a missing root: %r" % (e,))
    # The library's own reason travels with the exception (gw_last_error),
    # not only "invalid configuration (GW_ERR_CONFIG)".
    os.environ["GW_ALGO"] = "sideways"
    try:
        e = expect(gradwire.ConfigError, lambda: gradwire.Comm(rank=0, size=1, root="127.0.0.1:0"), "a malformed GW_ALGO")
    finally:
        del os.environ["GW_ALGO"]
    check(e is not None and "GW_ALGO" in e.reason and "sideways" in str(e) and e.reason in str(e), "ConfigError carries the logged reason: %r" % (e,))
    check(gradwire.ArgumentError("x", 1).reason == "", "an Error made without a reason has an empty one")
    # Send and out that share memory other than exactly (in place) are
    # refused by the library, naming the call, instead of a wrong element.
    buf = np.arange(21, dtype=np.float32)
    check(np.shares_memory(buf[:20], buf[1:21]), "the views overlap")
    e = expect(gradwire.InvalidArgError, lambda: one().allreduce(buf[:20], buf[1:21]), "allreduce: send and out partly overlap")
    check(e is not None and "overlap" in e.reason and "gw_allreduce" in str(e), "the overlap refusal names the call: %r" % (e,))
    check(np.array_equal(buf, np.arange(21, dtype=np.float32)), "a refused overlap leaves the data alone")
    e = expect(gradwire.InvalidArgError, lambda: one().allgather(buf[:10], buf[5:15]), "allgather: send and out partly overlap")
    y = np.arange(20, dtype=np.float32)
    check(np.array_equal(one().allreduce(y, y), np.arange(20, dtype=np.float32)), "send is out: in place, allowed")
    # The elastic calls' own refusals (the quorum test, quorum_test.py,
    # runs them through a real loss and a real join).
    with one() as c, c.shrink() as alone:
        check(type(alone) is gradwire.Comm and alone.size == 1 and alone.rank == 0, "shrink of one rank: a Comm of one")
    e = expect(gradwire.UnsupportedError, lambda: one().grow(), "grow of one rank (no referee to admit anyone)")
    check(e is not None and "referee" in e.reason, "grow of one rank says why: %r" % (e,))
    e = expect(gradwire.ConfigError, lambda: gradwire.Comm.join(root="127.0.0.1:1", token="short"), "join with a short token")
    check(e is not None and "at least" in str(e), "the short token's refusal says why: %r" % (e,))
    expect(gradwire.ArgumentError, lambda: gradwire.Comm.join(root="127.0.0.1:1", token="t" * 16, wait=-1), "join with a negative wait")
    with socket.socket() as held:  # a port of ours that nobody listens on
        held.bind(("127.0.0.1", 0))
        nobody = "127.0.0.1:%d" % held.getsockname()[1]
        t0 = time.monotonic()
        e = expect(gradwire.TimeoutError, lambda: gradwire.Comm.join(root=nobody, token="t" * 16, wait=0.5), "join with no job at the root")
        check(e is not None and nobody in str(e) and time.monotonic() - t0 < 30, "join's timeout names the root: %r" % (e,))
    with gradwire.Comm(rank=0, size=1, root="127.0.0.1:0") as c:
        check(c.size == 1 and c.transport == "self", "Comm as a context manager")
    check(c.closed, "left the with block: closed")


def test_torch(comm):
    try:
        import torch
    except ImportError:
        print("note: torch is not installed for %s: its tensors are not tried" % sys.executable, flush=True)
        return
    t = torch.full((8, 8), float(comm.rank))
    comm.allreduce(t.numpy())
    check(torch.all(t == sum(range(comm.size))).item(), "a CPU torch tensor reduced in place through .numpy()")
    for dt in (torch.float64, torch.int64, torch.float16, torch.int32):
        t = torch.arange(100).to(dt) + comm.rank
        view = t.numpy()
        check(view.ctypes.data == t.data_ptr(), "a %s tensor's numpy() view shares its memory" % dt)
        h = comm.iallreduce(view, op="max")
        h.wait()
        check(torch.equal(t, torch.arange(100).to(dt) + comm.size - 1), "iallreduce max on a %s tensor, in place" % dt)
    t = torch.zeros(4, 6)
    expect(gradwire.ArgumentError, lambda: gradwire.Comm(rank=0, size=1, root="127.0.0.1:0").allreduce(t.t().numpy()), "a transposed tensor is not contiguous")
    b = torch.arange(16, dtype=torch.float32).to(torch.bfloat16)
    comm.allreduce(b.view(torch.int16).numpy(), dtype="bfloat16")
    check(torch.equal(b.float(), torch.arange(16, dtype=torch.float32) * comm.size), "a bfloat16 torch tensor")


def test_disagreement(comm):
    # Ranks that disagree about the length: MismatchError on every rank,
    # naming the same culprit (checked by allgathering it over a new
    # communicator would need one; each rank prints it, the shell compares).
    n = 100 + (1 if comm.rank == comm.size - 1 else 0)
    e = expect(gradwire.MismatchError, lambda: comm.allreduce(np.ones(n, np.float32)), "lengths that differ across ranks")
    culprit = e.culprit if e is not None else None
    check(culprit is not None and 0 <= culprit < comm.size, "the mismatch names a culprit (%r)" % culprit)
    print("mismatch culprit %r" % culprit, flush=True)
    expect(gradwire.MismatchError, lambda: comm.barrier(), "the communicator stays failed")
    comm.close()


def free_port(comm):
    # A port for a second job, chosen by rank 0 and broadcast: (port, the
    # socket that holds it on rank 0, else None). Rank 0 keeps it bound
    # until the second job starts, so that no socket of the tests between
    # (or of another test beside this one) is given it as an ephemeral
    # port: CI once saw the second job's root fail with EADDRINUSE when the
    # port was released at once.
    port = np.zeros(1, dtype=np.int64)
    holder = None
    if comm.rank == 0:
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        port[0] = holder.getsockname()[1]
    comm.broadcast(port)
    return int(port[0]), holder


def test_refused_on_one_rank(rank, size, port, holder):
    # One rank's call is refused locally; the others are told at once. A
    # second job on a root of its own (the first one's rank 0 may still be
    # on the old root), whose port rank 0 has held until now.
    if holder is not None:
        holder.close()
    comm = gradwire.Comm(rank=rank, size=size, root="127.0.0.1:%d" % port, token=os.environ.get("GW_JOB_TOKEN"), timeout=60)
    x = np.ones(64, dtype=np.float32)
    if comm.rank == 1:
        x.flags.writeable = False
        expect(gradwire.ArgumentError, lambda: comm.allreduce(x), "rank 1: its read-only buffer is refused")
    else:
        e = expect(gradwire.AbortedError, lambda: comm.allreduce(x), "the other ranks fail too, without waiting out the timeout")
        check(e is not None and e.culprit == 1, "and blame rank 1 (%r)" % (e.culprit if e else None))
    comm.close()


class DirectoryStore:
    """A torch-Store-like set/get over files in a directory the ranks share."""

    def __init__(self, path):
        self.path = path
        os.makedirs(path, exist_ok=True)

    def set(self, key, value):
        name = os.path.join(self.path, key.replace("/", "_"))
        with open(name + ".tmp", "w") as f:
            f.write(value)
        os.rename(name + ".tmp", name)

    def get(self, key):
        name = os.path.join(self.path, key.replace("/", "_"))
        for _ in range(6000):
            if os.path.exists(name):
                with open(name, "rb") as f:
                    return f.read()
            time.sleep(0.01)
        raise TimeoutError("store key %s" % key)


def test_from_store(rank, size):
    base = os.environ.get("GW_PY_STORE_DIR", "/tmp")
    store = DirectoryStore(os.path.join(base, "gw-py-store-%s" % os.environ.get("GW_JOB_TOKEN", "x")[:16]))
    with gradwire.Comm.from_store(store, rank, size, prefix="job1", timeout=60) as c:
        x = np.full(10, rank, dtype=np.int64)
        c.allreduce(x)
        check(c.rank == rank and c.size == size and np.all(x == sum(range(size))), "Comm.from_store: ranks meet through a store")
    c.close()
    if rank == 0:
        check(len(bytes.fromhex(store.get("job1/token").decode())) == 16, "from_store publishes a fresh 16-byte token")


def test_rooted_blocks_and_split(comm):
    """gather, scatter (blocking and not), alltoallv with uneven counts, split and dup."""
    rank, size = comm.rank, comm.size
    for root in range(size):
        out = np.zeros((size, 7), dtype=np.float64)
        comm.gather(np.full(7, rank + 0.5), out, root=root)
        want = np.repeat((np.arange(size) + 0.5)[:, None], 7, axis=1)
        check(np.array_equal(out, want) if rank == root else np.all(out == 0), "gather root %d" % root)
        send = np.arange(size * 3, dtype=np.int64).reshape(size, 3) * (root + 1)
        got = np.zeros(3, dtype=np.int64)
        comm.iscatter(send if rank == root else np.zeros_like(send), got, root=root).wait()
        check(np.array_equal(got, send[rank]), "iscatter root %d" % root)
    # rank r sends j + r + 1 elements to rank j, valued 100 r + j
    sends = [j + rank + 1 for j in range(size)]
    recvs = [rank + j + 1 for j in range(size)]
    send = np.concatenate([np.full(k, 100 * rank + j, dtype=np.int32) for j, k in enumerate(sends)])
    out = np.zeros(sum(recvs), dtype=np.int32)
    comm.ialltoallv(send, sends, out, recvs).wait()
    want = np.concatenate([np.full(k, 100 * j + rank, dtype=np.int32) for j, k in enumerate(recvs)])
    check(np.array_equal(out, want), "ialltoallv with uneven counts")
    out2 = np.zeros_like(out)
    comm.alltoallv(send, sends, out2, recvs)
    check(np.array_equal(out2, want), "alltoallv with uneven counts")
    # allgatherv: rank j contributes 2 j + 1 elements valued 10 j + i
    counts = [2 * j + 1 for j in range(size)]
    mine = np.arange(counts[rank], dtype=np.float64) + 10 * rank
    want = np.concatenate([np.arange(k, dtype=np.float64) + 10 * j for j, k in enumerate(counts)])
    got = np.zeros(sum(counts))
    comm.allgatherv(mine, got, counts)
    check(np.array_equal(got, want), "allgatherv with uneven blocks")
    got = np.zeros(sum(counts))
    comm.iallgatherv(mine, got, counts).wait()
    check(np.array_equal(got, want), "iallgatherv with uneven blocks")
    half = comm.split(rank % 2, key=-rank)
    x = np.array([rank], dtype=np.int64)
    half.allreduce(x)
    members = [r for r in range(size) if r % 2 == rank % 2]
    check(half.size == len(members) and half.rank == sorted(members, reverse=True).index(rank) and x[0] == sum(members), "split by parity, ranked by key")
    half.close()
    check(comm.split(None) is None if rank == 0 else comm.split(0).size == size - 1, "split: color None takes part, gets None")
    check(comm.grow() is None, "grow with nobody waiting: None, the same members")
    with comm.dup() as twin:
        y = np.ones(3)
        twin.allreduce(y)
        check(isinstance(twin, type(comm)) and twin.rank == rank and np.all(y == size), "dup")


JOINER = """
import sys, numpy as np, gradwire
with gradwire.Comm.join(wait=60) as c:
    x = np.ones(4)
    c.allreduce(x)
    sys.exit(0 if c.rank == c.size - 1 and np.all(x == c.size) else 1)
"""


def test_joiners(comm):
    """Comm.joiners: 0 with nobody waiting; on 3 ranks a real process in
    Comm.join, counted by rank 0 alone, then admitted by grow()."""
    rank, size = comm.rank, comm.size
    check(comm.joiners() == 0, "joiners with nobody waiting: 0")
    half = comm.split(0)
    expect(gradwire.UnsupportedError, half.joiners, "joiners on a sub-communicator")
    half.close()
    expect(gradwire.ArgumentError, half.joiners, "joiners on a closed communicator")
    if size != 3:
        return
    seen = np.zeros(1, dtype=np.int64)
    child = None
    if rank == 0:
        env = {k: v for k, v in os.environ.items() if k not in ("GW_RANK", "GW_SIZE")}
        child = subprocess.Popen([sys.executable, "-c", JOINER], env=env)
        deadline = time.monotonic() + 60
        while comm.joiners() == 0 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        seen[0] = comm.joiners()
    comm.broadcast(seen, root=0)
    check(seen[0] == 1, "joiners: rank 0 counts the process waiting in Comm.join (%d)" % seen[0])
    check(rank == 0 or comm.joiners() == 0, "joiners: only rank 0 knows")
    grown = comm.grow()
    check(grown is not None and grown.size == size + 1 and grown.rank == rank, "grow admits the joiner")
    if grown is not None:
        x = np.ones(4)
        grown.allreduce(x)
        check(np.all(x == size + 1), "the grown communicator reduces over the joiner")
        check(grown.joiners() == 0, "joiners after the grow: 0")
        grown.close()
    if child is not None:
        check(child.wait(timeout=60) == 0, "the joiner ran in the grown job")


def main():
    comm = gradwire.Comm()
    if comm.rank == 0:
        print("gradwire %s, %d ranks over %s" % (gradwire.__version__, comm.size, comm.transport), flush=True)
    rank, size = comm.rank, comm.size
    port, holder = free_port(comm)
    test_allreduce(comm)
    test_rooted(comm)
    test_gather_scatter(comm)
    test_rooted_blocks_and_split(comm)
    test_joiners(comm)
    test_p2p(comm)
    test_tagged(comm)
    test_nonblocking(comm)
    test_many_and_new_dtypes(comm)
    test_alltoall_and_more_nonblocking(comm)
    test_compressed(comm)
    test_torch(comm)
    test_cuda_array_interface(comm)
    test_local_errors()
    test_from_store(rank, size)
    test_disagreement(comm)
    test_refused_on_one_rank(rank, size, port, holder)
    print("python api: %d passed, %d failed" % (passed, len(failures)), flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
