"""A killed rank raises on the survivors, naming it, within the timeout:
never a hang. This script is its own launcher (gradwire launch stops the
survivors as soon as one rank dies, before they could report): it starts
N ranks of itself with the variables gw_comm_init_env reads, and the last
rank SIGKILLs itself in the middle of a loop of allreduces. Every survivor
must raise gradwire.Error within GW_TIMEOUT_MS plus the referee's grace,
with culprit = the killed rank, and exit; the driver gives up (and fails)
after twice that.

    fault_test.py N TRANSPORT
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

TIMEOUT_MS = 5000


def worker():
    import numpy as np

    import gradwire

    comm = gradwire.Comm()
    victim = comm.size - 1
    x = np.ones(1 << 18, dtype=np.float32)
    t0 = None
    try:
        for i in range(1000000):
            if i == 20:
                t0 = time.monotonic()
                if comm.rank == victim:
                    os.kill(os.getpid(), signal.SIGKILL)
            comm.allreduce(x, op="max")
        print(json.dumps({"rank": comm.rank, "error": None}), flush=True)
    except gradwire.Error as e:
        took = time.monotonic() - (t0 or time.monotonic())
        print(json.dumps({"rank": comm.rank, "error": type(e).__name__, "status": e.status_name, "culprit": e.culprit, "seconds": took, "message": str(e)}), flush=True)


def main():
    n, transport = int(sys.argv[1]), sys.argv[2]
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = dict(os.environ, GW_SIZE=str(n), GW_ROOT="127.0.0.1:%d" % port, GW_JOB_TOKEN="fault-test-token-%d" % os.getpid(), GW_TIMEOUT_MS=str(TIMEOUT_MS), GW_TRANSPORT=transport)
    procs = [subprocess.Popen([sys.executable, __file__, "--worker"], env=dict(env, GW_RANK=str(r)), stdout=subprocess.PIPE, text=True) for r in range(n)]
    deadline = time.monotonic() + 2 * TIMEOUT_MS / 1000 + 20
    results, failed = {}, []
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            failed.append("rank %d still running after %.0f s: a hang" % (r, 2 * TIMEOUT_MS / 1000 + 20))
            for q in procs:
                q.kill()
            break
        for line in out.splitlines():
            if line.startswith("{"):
                results[r] = json.loads(line)
    victim = n - 1
    if procs[victim].returncode != -signal.SIGKILL:
        failed.append("rank %d was not killed (exit %r)" % (victim, procs[victim].returncode))
    for r in range(victim):
        res = results.get(r)
        print("rank %d: %s" % (r, res), flush=True)
        if res is None or res["error"] is None:
            failed.append("rank %d did not raise" % r)
        elif res["culprit"] != victim:
            failed.append("rank %d blamed %r, not rank %d" % (r, res["culprit"], victim))
        elif res["seconds"] > TIMEOUT_MS / 1000 + 2:
            failed.append("rank %d raised after %.1f s (timeout %.1f s)" % (r, res["seconds"], TIMEOUT_MS / 1000))
        elif "rank %d" % victim not in res["message"]:
            failed.append("rank %d's message does not name rank %d" % (r, victim))
    for f in failed:
        print("FAIL: %s" % f, flush=True)
    print("fault test (%d ranks, %s): %s" % (n, transport, "FAILED" if failed else "passed"), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
    else:
        main()
