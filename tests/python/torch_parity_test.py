"""torch.distributed parity of the "gradwire" backend where it used to
differ from gloo (issue 29), with gradwire as the default group (so that
new_group is gw_comm_split, as users get it) and a gloo group over the same
ranks to compare with. Started by tests/python/run.sh parity N (gradwire
launch, env://); arguments name the sections to run (all by default).
Each rank prints "torch parity: N passed, 0 failed".

  all_gather_coalesced  output_lists[j][i] is rank j's input i, with as many
                        inputs as ranks (was transposed) and with fewer (was
                        an error); mixed dtypes, empty tensors
  allreduce_coalesced   the same sums as gloo, and one gradwire call
  Work.wait(timeout)    a barrier that one rank joins late: wait(0.5 s)
                        raises "Timed out" in time, the barrier then completes
  new_group(timeout)    a barrier of a split group made with a 1.5 s timeout
                        that one rank skips fails after ~1.5 s, not the
                        default group's 60 s, with torch's wording
  monitored_barrier     wait_all_ranks names every missing rank, as gloo does
  sparse                a sparse tensor is refused with a TypeError naming it
  complex, bool         broadcast / all_gather / all_to_all_single move them
  all_to_all_single     uneven splits, and bad splits refused as gloo does
  tags                  recv takes the message with its tag, whatever the
                        order they were sent in; batch_isend_irecv in a ring
  anysource             recv(t, src=None) takes each rank's message once and
                        returns its sender, tag by tag (tag 6 sent first,
                        tag 5 received first), as gloo does
"""

import datetime
import sys
import time

import torch
import torch.distributed as dist

import gradwire.torch  # noqa: F401  registers the backend

passed, failed = [0], [0]


def check(what, ok, detail=""):
    if ok:
        passed[0] += 1
    else:
        failed[0] += 1
        print("FAIL %s %s" % (what, detail), flush=True)


def same(a, b):
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def both(gloo, fn):
    """fn(group) on the default (gradwire) group and on gloo."""
    return fn(None), fn(gloo)


def all_gather_coalesced(rank, size, gloo):
    for count in (size, 2, 1):  # as many inputs as ranks (was transposed), and fewer (was an error)

        def run(group):
            inputs = [torch.full((i + 1,), 10 * rank + i, dtype=torch.float64) for i in range(count)]
            outs = [[torch.zeros(i + 1, dtype=torch.float64) for i in range(count)] for _ in range(size)]
            dist.all_gather_coalesced(outs, inputs, group=group)
            return outs

        got, want = both(gloo, run)
        ref = [[torch.full((i + 1,), 10 * j + i, dtype=torch.float64) for i in range(count)] for j in range(size)]
        check("all_gather_coalesced %d inputs vs gloo" % count, same(got, want), "got %s want %s" % (got, want))
        check("all_gather_coalesced %d inputs vs reference" % count, same(got, ref), "got %s" % (got,))
    # Shapes that differ, an empty tensor, a complex one.
    for dtype in (torch.float32, torch.complex64):

        def run(group):
            inputs = [torch.full((2, 2), rank, dtype=dtype), torch.zeros(0, dtype=dtype), torch.full((3,), rank + 0.5, dtype=dtype)]
            outs = [[torch.zeros_like(t) for t in inputs] for _ in range(size)]
            dist.all_gather_coalesced(outs, inputs, group=group)
            return outs

        got, want = both(gloo, run)
        check("all_gather_coalesced shapes %s vs gloo" % dtype, same(got, want), "got %s want %s" % (got, want))


def allreduce_coalesced(rank, size, gloo):
    def run(group):
        ts = [torch.full((5,), rank + 1.0), torch.arange(3, dtype=torch.float32) * rank, torch.ones(2, 2)]
        dist.all_reduce_coalesced(ts, group=group)
        return ts

    got, want = both(gloo, run)
    check("allreduce_coalesced vs gloo", same(got, want), "got %s want %s" % (got, want))
    pg = dist.distributed_c10d._get_default_group()
    calls = []

    class Counting:  # counts the communicator's calls, passing them on
        def __init__(self, comm):
            self._comm = comm

        def __getattr__(self, name):
            calls.append(name)
            return getattr(self._comm, name)

    real, pg.comm = pg.comm, Counting(pg.comm)
    try:
        dist.all_reduce_coalesced([torch.ones(4) for _ in range(5)])
    finally:
        pg.comm = real
    check(
        "allreduce_coalesced is one fused gradwire call",
        calls.count("iallreduce_many") == 1 and "iallreduce" not in calls,
        "calls: %s" % calls,
    )
    # A non-contiguous tensor among them is reduced through a copy and
    # written back; MAX, and integers, as gloo does.
    def run_mixed(group):
        m = (torch.arange(12, dtype=torch.int64).reshape(3, 4) * (rank + 1)).t()
        ts = [torch.full((7,), rank, dtype=torch.int64), m, torch.tensor([rank * 5], dtype=torch.int64)]
        dist.all_reduce_coalesced(ts, op=dist.ReduceOp.MAX, group=group)
        return ts

    got, want = both(gloo, run_mixed)
    check("allreduce_coalesced non-contiguous MAX vs gloo", same(got, want), "got %s want %s" % (got, want))


def work_wait_timeout(rank, size):
    if rank == 0:
        work = dist.barrier(async_op=True)
        t0 = time.monotonic()
        try:
            work.wait(datetime.timedelta(seconds=0.5))
            check("Work.wait(timeout) raises", False, "it returned while rank 1 was away")
        except RuntimeError as e:
            took = time.monotonic() - t0
            check("Work.wait(timeout) raises in time", 0.4 < took < 3.0, "after %.2f s" % took)
            check("Work.wait(timeout) says Timed out", "Timed out" in str(e), str(e))
            check("Work.wait(timeout) is a TimeoutError", isinstance(e, TimeoutError), type(e).__name__)
        work.wait()  # rank 1 joins: the barrier completes
        check("the barrier completes after the timed wait", work.is_success())
    else:
        time.sleep(1.5)
        dist.barrier()


def new_group_timeout(rank, size):
    group = dist.new_group(list(range(size)), timeout=datetime.timedelta(seconds=1.5))
    check("new_group is a split", getattr(group, "origin", None) == "split", getattr(group, "origin", None))
    if rank == 0:
        t0 = time.monotonic()
        try:
            dist.barrier(group=group)
            check("a timed-out barrier raises", False, "it returned")
        except RuntimeError as e:
            took = time.monotonic() - t0
            check("new_group's timeout is honoured", 1.2 < took < 5.0, "failed after %.1f s (timeout 1.5 s)" % took)
            check("the timeout error says Timed out", " Timed out " in str(e), str(e))
    else:
        time.sleep(3.5)
        dist.barrier(group=group)  # the barrier rank 0 gave up on completes; the group goes on
    dist.barrier()


def monitored_barrier(rank, size):
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=10))  # everyone: passes
    check("monitored_barrier passes when all come", True)
    sub = dist.new_group(list(range(size)))
    if rank == 0:
        try:
            sub.monitored_barrier(datetime.timedelta(seconds=0))
            check("monitored_barrier(timeout=0) raises", False, "it returned")
        except RuntimeError as e:
            check("monitored_barrier(timeout=0) says rank 0 timed out", "Rank 0 timed out in monitoredBarrier" in str(e), str(e))
        try:
            sub.monitored_barrier(datetime.timedelta(seconds=1), wait_all_ranks=True)
            check("monitored_barrier raises", False, "it returned")
        except RuntimeError as e:
            want = "Ranks %s failed to pass monitoredBarrier" % ", ".join(str(r) for r in range(1, size))
            check("monitored_barrier(wait_all_ranks) names every missing rank", want in str(e), str(e))


def refusals(rank, size):
    s = torch.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (4,))
    try:
        dist.all_reduce(s)
        check("sparse refused", False, "no error")
    except TypeError as e:
        check("sparse refused clearly", "sparse" in str(e) and "gradwire" in str(e), str(e))
    for name, t in (("complex", torch.tensor([1 + 2j, 3 - 4j]) * (rank + 1)), ("bool", torch.tensor([rank % 2 == 0, True]))):
        got, want = both(None, lambda g: (lambda x: (dist.broadcast(x, 1, group=g), x)[1])(t.clone()))
        check("broadcast %s" % name, same(got, want), "%s %s" % (got, want))
        outs = [torch.zeros_like(t) for _ in range(size)]
        dist.all_gather(outs, t)
        want = [(torch.tensor([1 + 2j, 3 - 4j]) * (j + 1)) if name == "complex" else torch.tensor([j % 2 == 0, True])
                for j in range(size)]
        check("all_gather %s" % name, same(outs, want), "%s" % outs)
    c = torch.tensor([1 + 1j, 2 + 2j]) * (rank + 1)
    dist.all_reduce(c)
    total = sum(range(1, size + 1))
    check("all_reduce complex", same(c, torch.tensor([1 + 1j, 2 + 2j]) * total), str(c))


def alltoall_splits(rank, size, gloo):
    def run(group):
        # rank r sends j+1 rows to rank j; receives r+1 rows from each.
        ins = torch.cat([torch.full((j + 1, 2), 100 * rank + j) for j in range(size)]).float()
        out = torch.zeros((rank + 1) * size, 2)
        dist.all_to_all_single(out, ins, [rank + 1] * size, [j + 1 for j in range(size)], group=group)
        return out

    got, want = both(gloo, run)
    check("all_to_all_single uneven splits vs gloo", same(got, want), "got %s want %s" % (got, want))
    try:
        dist.all_to_all_single(torch.zeros(4), torch.zeros(4), [1] * size, [5] + [0] * (size - 1))
        check("bad splits refused", False, "no error")
    except ValueError as e:
        check("bad splits refused", "split" in str(e), str(e))


def tags(rank, size, gloo):
    """Messages taken by tag, not in posting order, as gloo does; batch_isend_irecv in a ring."""

    def run(group):
        got = {}
        if rank == 0:
            works = [dist.isend(torch.full((tag,), 10.0 * tag), 1, group=group, tag=tag) for tag in (1, 2, 3)]
            for w in works:
                w.wait()
        elif rank == 1:
            for tag in (3, 1, 2):  # not the order they were sent in
                t = torch.zeros(tag)
                dist.recv(t, 0, group=group, tag=tag)
                got[tag] = t
        nxt, prv = (rank + 1) % size, (rank - 1) % size
        out, back = torch.full((4,), float(rank)).to(torch.complex64), torch.zeros(4, dtype=torch.complex64)
        ops = [dist.P2POp(dist.isend, out, nxt, group, tag=7), dist.P2POp(dist.irecv, back, prv, group, tag=7)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        got["ring"] = back
        return [got[k] for k in sorted(got, key=str)]

    mine, theirs = both(gloo, run)
    check("tags and batch_isend_irecv vs gloo", same(mine, theirs), "got %s want %s" % (mine, theirs))
    if rank == 1:
        want = [torch.full((k,), 10.0 * k) for k in (1, 2, 3)]
        check("recv by tag", same(mine[:3], want), "got %s" % (mine[:3],))
    dist.barrier()  # a collective after the messages: none is left pending


def anysource(rank, size, gloo):
    """recv(tensor, src=None): every other rank's message once, its sender returned, by tag."""

    def run(group):
        got = []
        if rank == 0:
            for tag in (5, 6):  # the reverse of the order they were sent in
                for _ in range(size - 1):
                    t = torch.zeros(2)
                    src = dist.recv(t, group=group, tag=tag)
                    got.append((tag, src, t.tolist()))
        else:
            works = [dist.isend(torch.tensor([float(rank), float(tag)]), 0, group=group, tag=tag) for tag in (6, 5)]
            for w in works:
                w.wait()
        return sorted(got)

    mine, theirs = both(gloo, run)
    check("recv from any source vs gloo", mine == theirs, "got %s want %s" % (mine, theirs))
    if rank == 0:
        want = sorted((tag, r, [float(r), float(tag)]) for tag in (5, 6) for r in range(1, size))
        check("recv from any source: each sender once, named", mine == want, "got %s" % (mine,))
    dist.barrier()


def main():
    dist.init_process_group("gradwire", init_method="env://", timeout=datetime.timedelta(seconds=60))
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(list(range(size)), backend="gloo")
    check("default group is gradwire", dist.get_backend() == "gradwire", dist.get_backend())
    sections = [
        ("all_gather_coalesced", lambda: all_gather_coalesced(rank, size, gloo)),
        ("allreduce_coalesced", lambda: allreduce_coalesced(rank, size, gloo)),
        ("refusals", lambda: refusals(rank, size)),
        ("alltoall", lambda: alltoall_splits(rank, size, gloo)),
        ("tags", lambda: tags(rank, size, gloo)),
        ("anysource", lambda: anysource(rank, size, gloo)),
        ("wait_timeout", lambda: work_wait_timeout(rank, size)),
        ("group_timeout", lambda: new_group_timeout(rank, size)),
        ("monitored_barrier", lambda: monitored_barrier(rank, size)),  # last: its failure aborts the communicators
    ]
    chosen = sys.argv[1:] or [name for name, _ in sections]
    for name, run in sections:
        if name in chosen:
            run()
    print("torch parity: %d passed, %d failed" % (passed[0], failed[0]), flush=True)
    sys.stdout.flush()
    import os

    os._exit(0 if failed[0] == 0 else 1)


if __name__ == "__main__":
    main()
