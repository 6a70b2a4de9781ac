"""The GIL is released while gradwire works (gradwire launch -n N).

Rank 0 enters an allreduce that the last rank joins only 0.45 s later
(0.7 s after a barrier that starts the attempt, 0.25 s of which rank 0
spends measuring its counter), so rank 0's call waits inside gradwire
that long. On a loaded machine rank 0 may reach its call late, when the
last rank is nearly due: a call under 0.2 s is too short to judge, and
the ranks repeat the attempt (agreed by an allreduce), up to 5 times. A second Python thread on
rank 0 counts meanwhile: with the GIL released it counts hundreds of
thousands (at about its free rate, measured first); with the GIL held
through the call it could not run at all (one switch interval, 5 ms, at
most before the call). The same for a
handle's wait(). A third thread that calls into the busy communicator
gets a RuntimeError instead of entering a communicator that is not
thread-safe.
"""

import sys
import threading
import time

import numpy as np

import gradwire

failures = []


def check(cond, what):
    print("%s: %s" % ("ok" if cond else "FAIL", what), flush=True)
    if not cond:
        failures.append(what)


class Counter(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.count = 0
        self.stop = False

    def run(self):
        while not self.stop:
            self.count += 1


def attempt(comm, fn):
    """One measurement: (elapsed, share, counts) of the call on a measuring
    rank, None on the late one."""
    comm.barrier()
    if comm.rank == comm.size - 1:
        time.sleep(0.7)
        fn()
        return None
    c = Counter()
    c.start()
    # The counter's rate while this thread sleeps (GIL released), to compare with.
    time.sleep(0.05)
    before, t0 = c.count, time.monotonic()
    time.sleep(0.2)
    rate = (c.count - before) / (time.monotonic() - t0)
    before, t0 = c.count, time.monotonic()
    fn()
    during = c.count - before
    elapsed = time.monotonic() - t0
    c.stop = True
    c.join()
    # A held GIL lets the counter run for one switch interval (5 ms) of the
    # ~0.4 s call at most, about 1% of its free rate; released, it runs at
    # about the free rate (half of it at worst, on a loaded machine).
    share = during / (rate * elapsed) if rate > 0 else 0
    return elapsed, share, during


def counted(comm, fn, what):
    """Judge fn on the measuring ranks; returns how many times fn ran."""
    for n in range(1, 6):
        got = attempt(comm, fn)
        short = np.array([1.0 if got is not None and got[0] <= 0.2 else 0.0], dtype=np.float32)
        comm.allreduce(short)
        if short[0] == 0 or n == 5:
            break
        print("rank %d: %s: a call too short to judge, again" % (comm.rank, what), flush=True)
    if got is not None:
        elapsed, share, during = got
        check(elapsed > 0.2 and share > 0.25, "%s: another thread ran at %.0f%% of its free rate during the %.2f s call (%d counts)" % (what, 100 * share, elapsed, during))
    return n


def main():
    comm = gradwire.Comm()
    x = np.ones(1 << 20, dtype=np.float32)
    # Each allreduce of x multiplies it by the size: counted tells how often.
    times = counted(comm, lambda: comm.allreduce(x), "blocking allreduce")
    times += counted(comm, lambda: comm.iallreduce(x).wait(), "iallreduce's wait()")
    counted(comm, lambda: comm.barrier(), "barrier")
    # A second thread inside the same communicator is refused.
    if comm.rank == 0:
        errors = []

        def intruder():
            time.sleep(0.2)
            try:
                comm.allreduce(np.ones(4, np.float32))
            except RuntimeError as e:
                errors.append(e)

        t = threading.Thread(target=intruder)
        t.start()
        comm.allreduce(x)
        t.join()
        check(len(errors) == 1 and "another thread" in str(errors[0]), "a second thread in a busy communicator gets RuntimeError")
    elif comm.rank == comm.size - 1:
        time.sleep(0.7)
        comm.allreduce(x)
    else:
        comm.allreduce(x)
    check(np.all(x == comm.size ** (times + 1)), "the results are right (%r)" % x[0])
    comm.close()
    print("gil test: %d failed" % len(failures), flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
