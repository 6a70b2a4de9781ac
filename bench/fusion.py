"""fusion.py - many small allreduces, fused against one by one, gradwire
against torch gloo's allreduce_coalesced, interleaved in one job (run by
bench/fusion.sh under `gradwire launch`).

Configurations, each on the same T tensors of B bytes (float32) per rank:
  gradwire fused (torch)      dist.all_reduce_coalesced on a gradwire group
                              (one gw_iallreduce_many: buckets of GW_FUSION_BYTES)
  gradwire one by one (torch) T dist.all_reduce calls on the gradwire group
  gradwire fused (C)          the group's Comm.allreduce_many (gw_allreduce_many)
  gradwire one by one (C)     T Comm.allreduce calls (gw_allreduce each)
  gloo coalesced              dist.all_reduce_coalesced on the gloo group
  gloo one by one             T dist.all_reduce calls on the gloo group

One iteration is one configuration's T allreduces, timed on each rank
after a gloo barrier; its time is the slowest rank's (a MAX allreduce of
the times at the end). Configurations take turns iteration by iteration,
so a burst of load on this shared machine hits them alike. Every result is
checked (sums of rank-dependent integers, exact in float32).

  fusion.py [--tensors T] [--bytes B] [--iters N] [--warmup W] [--json FILE]
"""
import argparse
import datetime
import json
import statistics
import sys
import time

import torch
import torch.distributed as dist

import gradwire.torch  # noqa: F401  registers the backend


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tensors", type=int, default=64)
    ap.add_argument("--bytes", type=int, default=4096)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=300))
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.group.WORLD
    gw = dist.new_group(backend="gradwire")
    # The gradwire group's communicator, for the C-level configurations: the
    # group itself on torch 1.13, its CPU backend on torch 2.x.
    comm = getattr(gw, "comm", None)
    if comm is None and hasattr(gw, "_get_backend"):
        comm = getattr(gw._get_backend(torch.device("cpu")), "comm", None)
    n = a.bytes // 4
    ts = [torch.zeros(n) for _ in range(a.tensors)]
    arrays = [t.numpy() for t in ts]

    def fill():
        for k, t in enumerate(ts):
            t.fill_(float(rank + k))

    def check(what):
        want = [float(size * k + size * (size - 1) // 2) for k in range(a.tensors)]
        bad = [k for k, t in enumerate(ts) if not bool((t == want[k]).all())]
        if bad:
            sys.exit("fusion.py: rank %d: %s: tensors %s are wrong" % (rank, what, bad[:5]))

    configs = [
        ("gradwire fused (torch)", lambda: dist.all_reduce_coalesced(ts, group=gw)),
        ("gradwire one by one (torch)", lambda: [dist.all_reduce(t, group=gw) for t in ts]),
        ("gloo coalesced", lambda: dist.all_reduce_coalesced(ts, group=gloo)),
        ("gloo one by one", lambda: [dist.all_reduce(t, group=gloo) for t in ts]),
    ]
    if comm is not None:
        configs += [
            ("gradwire fused (C)", lambda: comm.allreduce_many(arrays)),
            ("gradwire one by one (C)", lambda: [comm.allreduce(x) for x in arrays]),
        ]
    times = {name: [] for name, _ in configs}
    for it in range(a.warmup + a.iters):
        for name, run in configs:
            fill()
            dist.barrier(group=gloo)
            t0 = time.perf_counter()
            run()
            dt = time.perf_counter() - t0
            check(name)
            if it >= a.warmup:
                times[name].append(dt)
    # The slowest rank's time per iteration.
    for name in times:
        v = torch.tensor(times[name], dtype=torch.float64)
        dist.all_reduce(v, op=dist.ReduceOp.MAX, group=gloo)
        times[name] = v.tolist()
    if rank == 0:
        results = []
        for name, _ in configs:
            v = times[name]
            results.append({"config": name, "median_s": statistics.median(v), "min_s": min(v), "max_s": max(v),
                            "iters": len(v)})
        med = {r["config"]: r["median_s"] for r in results}
        ratios = {
            "torch: one by one / fused": med["gradwire one by one (torch)"] / med["gradwire fused (torch)"],
            "torch: gloo coalesced / gradwire fused": med["gloo coalesced"] / med["gradwire fused (torch)"],
        }
        if comm is not None:
            ratios["C: one by one / fused"] = med["gradwire one by one (C)"] / med["gradwire fused (C)"]
        print("# %d ranks, %d tensors of %d bytes, %d iterations (median of the slowest rank's time)"
              % (size, a.tensors, a.bytes, a.iters))
        print("| configuration | median (ms) | min (ms) | max (ms) |")
        print("|---|---:|---:|---:|")
        for r in results:
            print("| %s | %.3f | %.3f | %.3f |" % (r["config"], 1e3 * r["median_s"], 1e3 * r["min_s"],
                                                   1e3 * r["max_s"]))
        for k, v in ratios.items():
            print("# %s: %.2fx" % (k, v))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"benchmark": "fusion", "ok": True, "ranks": size,
                           "params": {"ranks": size, "tensors": a.tensors, "bytes": a.bytes, "iters": a.iters,
                                      "warmup": a.warmup, "dtype": "float32"},
                           "results": results, "ratios": ratios}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
