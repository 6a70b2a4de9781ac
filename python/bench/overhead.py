#!/usr/bin/env python3
"""What calling gradwire from Python costs: allreduce latency through the
gradwire package against the C gradwire-bench, same sizes, ranks and
iterations, the two runs interleaved (C, Python, C, Python, ...) so that
the machine's load falls on both alike.

    /usr/bin/python3 python/bench/overhead.py [--build build] [-n 4] [--sizes 8,1048576]
        [--iters 500] [--warmup 50] [--reps 3] [--transport auto]

Time per size is measured as gradwire-bench measures it: each iteration
timed on every rank, the slowest rank's time per iteration, the median over
iterations (float32 sum, in place). It also times the binding alone: an
8-byte allreduce on a one-rank communicator, where the library has nothing
to send.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def worker(sizes, iters, warmup):
    import numpy as np

    import gradwire

    comm = gradwire.Comm()
    rows = []
    for nbytes in sizes:
        x = np.ones(max(1, nbytes // 4), dtype=np.float32)
        for _ in range(warmup):
            comm.allreduce(x)
        times = np.zeros(iters, dtype=np.float64)
        clock = time.perf_counter
        for i in range(iters):
            t0 = clock()
            comm.allreduce(x)
            times[i] = clock() - t0
        comm.allreduce(times, op="max")
        rows.append({"size": nbytes, "median_us": float(np.median(times)) * 1e6})
    if comm.rank == 0:
        with gradwire.Comm(rank=0, size=1, root="127.0.0.1:0") as alone:
            x = np.ones(2, dtype=np.float32)
            times = []
            for _ in range(20000):
                t0 = time.perf_counter()
                alone.allreduce(x)
                times.append(time.perf_counter() - t0)
        print(json.dumps({"rows": rows, "binding_us": statistics.median(times) * 1e6}), flush=True)
    comm.close()


def run(cmd, env):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit("overhead: %s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stdout))
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "..", "build"))
    ap.add_argument("-n", "--ranks", type=int, default=4)
    ap.add_argument("--sizes", default="8,1048576")
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--transport", default="auto")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    if a.worker:
        return worker(sizes, a.iters, a.warmup)
    build = os.path.abspath(a.build)
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"), GW_TRANSPORT=a.transport)
    launch = [os.path.join(build, "gradwire"), "launch", "-n", str(a.ranks), "--no-prefix", "--"]
    c_us = {s: [] for s in sizes}
    py_us = {s: [] for s in sizes}
    binding = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.reps):
            for s in sizes:
                path = os.path.join(tmp, "c%d-%d.json" % (rep, s))
                run(launch + [os.path.join(build, "gradwire-bench"), "allreduce", "-b", str(s), "-e", str(s),
                              "-n", str(a.iters), "-w", str(a.warmup), "-c", "0", "--json", path], env)
                with open(path) as f:
                    c_us[s].append(json.load(f)["results"][0]["in_place"]["time_us"]["median"])
            out = run(launch + [sys.executable, os.path.abspath(__file__), "--worker", "--sizes", a.sizes,
                                "--iters", str(a.iters), "--warmup", str(a.warmup)], env)
            res = json.loads([l for l in out.splitlines() if l.startswith("{")][0])
            for row in res["rows"]:
                py_us[row["size"]].append(row["median_us"])
            binding.append(res["binding_us"])
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print("allreduce float32 sum in place, %d ranks, GW_TRANSPORT=%s, %d iterations, %d runs each, "
          "interleaved; load %s" % (a.ranks, a.transport, a.iters, a.reps, " ".join(load)))
    print("%10s %14s %14s %8s %12s" % ("size", "C median us", "Py median us", "Py/C", "Py - C us"))
    for s in sizes:
        c, p = statistics.median(c_us[s]), statistics.median(py_us[s])
        print("%10d %14.2f %14.2f %8.2f %12.2f   (C runs %s; Python runs %s)" % (
            s, c, p, p / c, p - c, ", ".join("%.1f" % v for v in c_us[s]), ", ".join("%.1f" % v for v in py_us[s])))
    print("binding alone (8 B on a one-rank communicator): %.2f us per call (median of runs %s)" % (
        statistics.median(binding), ", ".join("%.2f" % v for v in binding)))


if __name__ == "__main__":
    main()
