"""Allreduce of the same tensors through torch.distributed's gloo backend and
through gradwire's, in one run: N ranks on this machine (all on one GPU with
--device cuda), float32 sum, sizes 1-256 MiB, median of REPS of the slowest
rank's time, busbw as nccl-tests defines it (2 (n-1)/n bytes / time). gloo
stages CUDA tensors through host memory, which makes it the peer that runs
on one GPU. A backend that refuses the tensors (gradwire before it took
CUDA tensors) gives a row with its error instead of a time.

  python3 bench/device_vs_gloo.py --ranks 2 --device cuda [--max-mib 256] [--json OUT]

Prints a Markdown table; --json writes the rows for the results pages.
Rank processes are spawned here (torch.multiprocessing) on 127.0.0.1.
"""

import argparse
import datetime
import json
import os
import socket
import sys
import time

REPS = 9


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def time_backend(dist, torch, group, x, device, rank, n):
    """(median of REPS of the slowest rank's allreduce time in seconds,
    whether every element of the last result is the sum)."""
    times = []
    for i in range(REPS + 2):
        x.fill_(float(rank + 1))
        dist.barrier(group=group)
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        dist.all_reduce(x, group=group)
        if device == "cuda":
            torch.cuda.synchronize()
        dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(dt, op=dist.ReduceOp.MAX, group=group)  # through gloo: CPU tensor
        if i >= 2:
            times.append(dt.item())
    times.sort()
    return times[len(times) // 2], bool((x == float(n * (n + 1) // 2)).all().item())


def rank_main(rank, n, port, device, max_mib, out_path):
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(n))
    timeout = datetime.timedelta(seconds=120)
    dist.init_process_group("gloo", rank=rank, world_size=n, timeout=timeout)
    groups = {"gloo": dist.group.WORLD}
    why = {}
    try:
        import gradwire.torch  # noqa: F401  registers the backend

        groups["gradwire"] = dist.new_group(backend="gradwire", timeout=timeout)
    except Exception as e:  # the package is not built or not importable here
        why["gradwire"] = "%s: %s" % (type(e).__name__, e)
    rows = []
    mib = 1
    while mib <= max_mib:
        count = (mib << 20) // 4
        row = {"bytes": mib << 20, "ranks": n, "device": device}
        for name in ("gloo", "gradwire"):
            if name not in groups:
                row[name] = {"error": why[name]}
                continue
            x = torch.full((count,), float(rank + 1), dtype=torch.float32, device=device)
            try:
                t, ok = time_backend(dist, torch, groups[name], x, device, rank, n)
                row[name] = {"time_s": t, "busbw_gbps": 2.0 * (n - 1) / n * (mib << 20) / t / 1e9, "checked": ok}
            except Exception as e:
                row[name] = {"error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")}
        rows.append(row)
        mib *= 4
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--max-mib", type=int, default=256)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    import torch
    import torch.multiprocessing as mp

    if a.device == "cuda" and not torch.cuda.is_available():
        print("skipped: torch %s has no CUDA device here" % torch.__version__)
        return 77
    out = a.json or "/tmp/gw-device-vs-gloo-%d.json" % os.getpid()
    mp.spawn(rank_main, args=(a.ranks, free_port(), a.device, a.max_mib, out), nprocs=a.ranks, join=True)
    with open(out) as f:
        rows = json.load(f)
    print(
        "Allreduce float32 sum, %d ranks, %s tensors, torch %s: median of %d, slowest rank; busbw GB/s"
        % (a.ranks, a.device, torch.__version__, REPS)
    )
    print("\n| size | gloo | gradwire | gradwire / gloo busbw |\n|---|---|---|---|")

    def cell(r):
        if "time_s" not in r:
            return "error: " + r["error"]
        return "%.2f (%.0f us)%s" % (r["busbw_gbps"], r["time_s"] * 1e6, "" if r["checked"] else " WRONG SUM")

    for r in rows:
        g, w = r["gloo"], r["gradwire"]
        ratio = "%.2f" % (w["busbw_gbps"] / g["busbw_gbps"]) if "time_s" in g and "time_s" in w else "-"
        print("| %d MiB | %s | %s | %s |" % (r["bytes"] >> 20, cell(g), cell(w), ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
