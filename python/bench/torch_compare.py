"""torch.distributed all_reduce and DDP, backend gradwire against gloo, in
one job, interleaved. Run as every rank of a job (python/bench/torch_compare.sh
starts one on this host or across emulated hosts):

    torch_compare.py allreduce [--sizes 8,1K,...] [--reps 5] [--budget 0.3] [--json FILE]
    torch_compare.py ddp [--reps 5] [--steps 10] [--width 1024]

gloo is the default group (env://), gradwire a new_group(backend="gradwire")
over the same ranks; every run alternates the two (which goes first
alternates too), so a change in the machine's load hits both alike.

allreduce: float32 SUM in place, per size `iters` calls timed as one loop
after warm-up (iters from --budget seconds per measurement), the time per
call of the slowest rank. busbw = 2 (n-1)/n * bytes / time, as nccl-tests.
The table: per size the median over the runs of each backend's time and
busbw, and the ratio gradwire/gloo of the busbws. --json FILE (rank 0)
writes the same runs in bench/compare.sh's shape (libraries, reference,
per size each library's busbw and its time's median, least and most over
the runs), which torch_compare.sh --json completes with the run header.

ddp: an MLP (width x width layers) under DDP, SGD, samples per second of
the slowest rank over --steps steps after warm-up, for gloo, gradwire, and
gradwire with the fp16 and PowerSGD compression hooks (gradwire.ddp_hooks).
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


def parse_size(s):
    s = s.strip()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def human(b):
    for unit, v in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= v:
            return "%g %s" % (b / v, unit)
    return "%d B" % b


def slowest(value):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def time_allreduce(group, t, iters):
    for _ in range(2):
        dist.all_reduce(t, group=group)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t, group=group)
    return slowest((time.perf_counter() - t0) / iters)


def allreduce(args, groups):
    n = dist.get_world_size()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    results = {(name, b): [] for name in groups for b in sizes}
    iters = {}
    for b in sizes:  # iterations per size: about --budget seconds on gloo's first try
        t = torch.ones(max(1, b // 4))
        one = time_allreduce(groups["gloo"], t, 3)
        iters[b] = int(max(3, min(2000, args.budget / max(one, 1e-7))))
    for rep in range(args.reps):
        order = list(groups) if rep % 2 == 0 else list(reversed(list(groups)))
        for b in sizes:
            t = torch.ones(max(1, b // 4))
            for name in order:
                results[(name, b)].append(time_allreduce(groups[name], t, iters[b]))
    if dist.get_rank() != 0:
        return
    link = args.link_gbit / 8 if args.link_gbit else None  # GB/s
    print("| size | iters | gloo time | gloo busbw | gradwire time | gradwire busbw | gradwire / gloo |" + (" gradwire / link |" if link else ""))
    print("|---|---|---|---|---|---|---|" + ("---|" if link else ""))
    for b in sizes:
        row = ["%s" % human(b), "%d" % iters[b]]
        bw = {}
        for name in ("gloo", "gradwire"):
            med = statistics.median(results[(name, b)])
            bw[name] = 2 * (n - 1) / n * b / med / 1e9
            row += ["%.1f us" % (med * 1e6), "%.3f GB/s" % bw[name]]
        row.append("%.2fx" % (bw["gradwire"] / bw["gloo"]))
        if link:
            row.append("%.1f%%" % (100 * bw["gradwire"] / link))
        print("| " + " | ".join(row) + " |", flush=True)
    if args.json:
        write_json(args, groups, sizes, iters, results, n)


def write_json(args, groups, sizes, iters, results, n):
    """The runs in bench/compare.sh's JSON shape, gradwire the reference."""
    rows = []
    for b in sizes:
        per = {}
        for name in ("gradwire", "gloo"):
            ts = results[(name, b)]
            med = statistics.median(ts)
            per[name] = {"busbw": 2 * (n - 1) / n * b / med / 1e9,
                         "time_us": {"median": med * 1e6, "min": min(ts) * 1e6, "max": max(ts) * 1e6},
                         "runs_us": [t * 1e6 for t in ts]}
        rows.append({"size": b, "iters": iters[b], "libraries": per})
    doc = {"benchmark": "torch-compare", "op": "all_reduce", "dtype": "float32", "ranks": n,
           "transport": groups["gradwire"].comm.transport, "repeats": args.reps,
           "libraries": ["gradwire", "gloo"], "reference": "gradwire", "spread": "runs",
           "torch": torch.__version__, "link_gbit": args.link_gbit or None,
           "method": "time: median over the runs of the slowest rank's time per call (iters calls timed "
                     "as one loop); busbw = 2 (n-1)/n * size / time",
           "results": rows}
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def ddp(args, groups):
    from gradwire.ddp_hooks import GradwireHookState, compression_hook

    w = args.width
    configs = [("gloo", groups["gloo"], None), ("gradwire", groups["gradwire"], None)]
    for codec, settings in (("fp16", {}), ("powersgd", {"powersgd_rank": 4})):
        configs.append(("gradwire + %s hook" % codec, groups["gradwire"], (codec, settings)))
    results = {c[0]: [] for c in configs}
    for rep in range(args.reps):
        for name, group, hook in configs if rep % 2 == 0 else list(reversed(configs)):
            torch.manual_seed(0)
            model = torch.nn.Sequential(*[m for _ in range(args.layers) for m in (torch.nn.Linear(w, w), torch.nn.ReLU())])
            model = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
            if hook is not None:
                model.register_comm_hook(GradwireHookState(hook[0], process_group=group, **hook[1]), compression_hook)
            opt = torch.optim.SGD(model.parameters(), lr=1e-3)
            x = torch.randn(args.batch, w)

            def step():
                opt.zero_grad()
                model(x).square().mean().backward()
                opt.step()

            for _ in range(2):
                step()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step()
            took = slowest(time.perf_counter() - t0)
            results[name].append(args.batch * dist.get_world_size() * args.steps / took)
    if dist.get_rank() != 0:
        return
    params = args.layers * (w * w + w)
    print("DDP: %d layers of %dx%d (%.1f M parameters, %s of float32 gradients), batch %d per rank, %d ranks, %d steps x %d runs"
          % (args.layers, w, w, params / 1e6, human(4 * params), args.batch, dist.get_world_size(), args.steps, args.reps))
    print("| configuration | samples/s (median) | runs | vs gloo |")
    print("|---|---|---|---|")
    base = statistics.median(results["gloo"])
    for name, _, _ in configs:
        med = statistics.median(results[name])
        print("| %s | %.0f | %s | %.2fx |" % (name, med, " ".join("%.0f" % v for v in results[name]), med / base), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["allreduce", "ddp"])
    p.add_argument("--sizes", default="8,1K,64K,1M,4M,16M,64M")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--budget", type=float, default=0.3, help="seconds per measurement (sets iters)")
    p.add_argument("--link-gbit", type=float, default=0, help="link rate (Gbit/s): adds busbw as a share of it")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--json", help="allreduce: also write the runs as JSON to this file (rank 0)")
    args = p.parse_args()
    if args.json and args.mode != "allreduce":
        p.error("--json is for the allreduce mode")
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=300))
    groups = {"gloo": dist.group.WORLD, "gradwire": dist.new_group(backend="gradwire")}
    if dist.get_rank() == 0:
        print("# %s, %d ranks, gradwire over %s" % (args.mode, dist.get_world_size(), groups["gradwire"].comm.transport), flush=True)
    {"allreduce": allreduce, "ddp": ddp}[args.mode](args, groups)
    dist.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
