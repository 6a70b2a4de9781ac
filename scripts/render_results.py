#!/usr/bin/python3
"""render_results.py - docs/results pages from the campaigns' JSON.

Figures in the documentation are data, never typed: every campaign of
scripts/results.sh stores its JSON (with bench/run_header.py's run header)
under docs/results/data/CAMPAIGN.json, and this script turns each into
docs/results/CAMPAIGN.md (MyST Markdown: a title, what was measured, the
table of sizes with each library's busbw and time and the ratio of the
reference to each peer, and a "Measured on" block from the run header) and
two PNG plots drawn by gnuplot, img/CAMPAIGN-busbw.png and
img/CAMPAIGN-latency.png: busbw and time against size, one line per
library, log2 size axis. The campaigns whose figures are not busbw against
size (scale, train-accuracy, elastic, stragglers, acceptance, soft-roce:
BODIES below, by the JSON's "benchmark") get their own tables, every claim
a ratio against the peer or reference measured in the same run, and a plot
where a curve says more (img/CAMPAIGN-WHAT.png). A page of a run whose
load exceeded the machine's cores when it started says that its figures
are indicative only.

  render_results.py [--data DIR] [--out DIR] [--no-plots] [CAMPAIGN...]

The page depends on the JSON alone, so tests/results/check_results.sh can
render again into a temporary folder and require the committed page to be
the same. Python's standard library only, plus gnuplot (gnuplot-nox).
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What each campaign is, in the page's words. scripts/results.sh runs them.
CAMPAIGNS = {
    "compare-local": (
        "Side by side with Gloo and Open MPI (one host, TCP)",
        "gradwire's allreduce against Gloo (ring_chunked, halving_doubling) and Open MPI "
        "(btl tcp, and vader: shared memory) on one host: every library's nccl-tests-style "
        "driver on the same sizes and ranks, the runs of the libraries interleaved so that a "
        "change in the machine's load falls on all of them alike (bench/compare.sh --local). "
        "gradwire runs over loopback TCP (GW_TRANSPORT=tcp).",
    ),
    "compare-emulated": (
        "Side by side with Gloo and Open MPI (emulated hosts)",
        "gradwire's allreduce against Gloo and Open MPI across emulated hosts: network "
        "namespaces whose links are shaped with tc, so that the link, not memcpy, is the "
        "bottleneck (bench/compare.sh --emulated).",
    ),
    "flight-recorder": (
        "The flight recorder's cost on small allreduces",
        "The same 2-rank allreduce over shared memory, where a collective costs least and any "
        "bookkeeping shows most, with the flight recorder off (GW_FR_ENTRIES=0) and at its "
        "default of 256 entries (bench/compare.sh --local with two gradwire variants, the runs "
        "interleaved). A ratio above 1 is what recording costs.",
    ),
    "shm": (
        "Shared memory on one host",
        "gradwire's allreduce over its shared-memory transport (GW_TRANSPORT=shm) against "
        "Open MPI's shared-memory path (btl vader), on one host, interleaved runs "
        "(bench/compare.sh --local with a shared-memory gradwire variant).",
    ),
    "compression": (
        "Compression codecs against the dense allreduce",
        "gradwire's gradient compression codecs (fp16, bf16, int8, sign, top-k, PowerSGD) "
        "against the dense allreduce of the same float32 tensor, on one host "
        "(gradwire-bench compress under gradwire launch). The bandwidth is algbw of the "
        "uncompressed tensor (size / time), so a codec that sends fewer bytes can exceed the "
        "dense figure; a ratio below 1 is a codec faster than dense.",
    ),
    "sweep": (
        "Auto against the fixed algorithms",
        "gradwire's allreduce with each fixed algorithm and with auto (the cost model's choice), "
        "on the same sizes and ranks, repetitions interleaved (bench/sweep.sh). The ratio "
        "column is auto's busbw over each fixed algorithm's (at least 1: auto is as fast); "
        "the last column names what auto picked.",
    ),
    "pytorch": (
        "PyTorch: the gradwire backend against gloo",
        "torch.distributed all_reduce (float32 SUM, in place) through the gradwire backend "
        "(gradwire.torch, a process group over the same ranks) against PyTorch's gloo backend, "
        "in one job, the runs of the two alternating so that the machine's load falls on both "
        "(python/bench/torch_compare.sh --json, on Debian's torch).",
    ),
    "scale": (
        "Communicator creation at scale",
        "The cost of creating a communicator on one host as the ranks grow: for each rank count, "
        "transport and connection mode (GW_CONNECT eager: every connection at gw_comm_init; lazy: "
        "on first use), `gradwire launch -n N` runs tests/worker_scale, which reports the most "
        "over the ranks of the time from before gw_comm_init to its return (creation) and to the "
        "end of the first collective, a ring allreduce, and the file descriptors and resident "
        "memory per rank (bench/scale.sh --json).",
    ),
    "train-accuracy": (
        "Training accuracy and cost",
        "`gradwire train` on Fashion-MNIST (MLP 784-256-128-10, global batch 128) on 1, 4 and 8 "
        "local ranks with the same global batch, and on 4 ranks with each gradient compression "
        "codec (bench/train_accuracy.sh --json). Each run is compared with its reference in the "
        "same campaign: the rank counts with 1 rank, the codecs with the dense 4-rank run.",
    ),
    "zero": (
        "ZeRO: sharded optimizer state",
        "`gradwire train --zero 1|2` on Fashion-MNIST (MLP 784-256-128-10, global batch 128, "
        "256 KiB buckets) against plain data parallelism on 2 and 4 local ranks: the test "
        "accuracy and what rank 0 holds for the parameters, the gradients and the momentum, "
        "from each run's own report (bench/train_zero.sh --json). --zero 1 shards the momentum, "
        "--zero 2 the reduced gradients too (plus a two-bucket workspace that does not shrink).",
    ),
    "elastic": (
        "Elastic training: ranks lost in epoch 2, rank 0 among them",
        "Fashion-MNIST on 4 ranks over shared memory, against an un-killed run of the same job "
        "(bench/train_elastic.sh --json): an elastic run (`gradwire launch --elastic`, `gradwire "
        "train --elastic`) whose rank 2 is killed a quarter into epoch 2, so that the 3 survivors "
        "shrink the job and go on with the same global batch; and one whose rank 0 is killed there, "
        "and then, a quarter of an epoch later, rank 1, which had taken its place, so that the job "
        "ends on ranks 2 and 3.",
    ),
    "stragglers": (
        "Stragglers: --straggler balance",
        "A slow node for real: emulated hosts (scripts/cluster.sh, 1 Gbit/s links), one "
        "`gradwire train` rank on each, the last host's rank held to a CPU quota (a cgroup). The "
        "same seeded job runs without mitigation (--straggler none) and with --straggler balance, "
        "which moves samples of the global batch away from the slow rank; the figures are the "
        "trainer's own per-rank step, compute and wait times (bench/stragglers.sh --json; "
        "tests/optimizer/straggler_hosts.sh judges the behaviour).",
    ),
    "fusion": (
        "Tensor fusion: many small allreduces",
        "64 allreduces of 4 KiB (float32) per rank, fused (gw_allreduce_many: torch's "
        "all_reduce_coalesced on a gradwire group, and the group's Comm.allreduce_many) against "
        "the same calls one by one and against torch gloo's allreduce_coalesced, taking turns "
        "iteration by iteration in one job on this host; an iteration's time is the slowest "
        "rank's, after a barrier, every result checked (bench/fusion.sh --json).",
    ),
    "acceptance": (
        "Acceptance testing: gradwire check's own timings",
        "How long `gradwire check --quick` takes on emulated hosts (scripts/cluster.sh, one rank "
        "per host, links shaped with tc), phase by phase: host sanity, the link matrix, the "
        "retests of suspect links and hosts, and the allreduce; each phase's time is read from "
        "rank 0's progress lines, the total is the report's elapsed_s (bench/acceptance.sh "
        "--json).",
    ),
    "latency": (
        "Small-message latency against Open MPI",
        "gradwire's allreduce and point-to-point ping-pong from 8 B to 64 KiB against Open MPI's, "
        "on one host, over shared memory (gradwire shm, Open MPI btl vader) and loopback TCP "
        "(gradwire tcp, Open MPI btl tcp), on 2 and 4 ranks, bound to cores and unbound "
        "(bench/latency.sh --json). Each configuration runs gradwire, then Open MPI, and the "
        "repetitions go round every configuration, so that the machine's load falls on both. "
        "Allreduce: the in-place median of the slowest rank per iteration (gradwire-bench "
        "allreduce, bench/peers/mpi_allreduce); ping-pong: the median half round trip "
        "(gradwire-bench p2p -m lat, bench/peers/mpi_pingpong, as osu_latency), with standard "
        "sends on both sides (GW_P2P_SEND=standard against MPI_Send: a send completes once its "
        "buffer may be reused) and with synchronous ones (gradwire's default against MPI_Ssend: "
        "once the receiver matched the message).",
    ),
    "torch-suite": (
        "torch's distributed test base: gradwire against gloo",
        "torch's own tests of a process-group backend (torch.testing._internal.distributed's "
        "DistributedTest, shipped with Debian's python3-torch, run as torch's "
        "test_distributed_spawn.py runs it: a process per rank, the default group through "
        "file://) on gloo and on gradwire, one after the other, over the CPU tests of "
        "tests/python/torch_suite.list (python/bench/torch_suite.sh --json). gradwire runs the "
        "suite as gloo: every group the suite asks gloo for is made on gradwire "
        "(tests/python/torch_suite.py says how). Outcomes, not timings: a test passes, fails, "
        "errs or is skipped by the suite itself, with the first line of its reason.",
    ),
    "soft-roce": (
        "Soft-RoCE: gradwire over verbs against perftest",
        "gradwire-bench p2p over the verbs transport (GW_TRANSPORT=ib) against perftest's "
        "ib_write_bw and ib_write_lat between two QEMU VMs with Soft-RoCE (rxe0) devices, over "
        "the virtio-net link between them (scripts/rxe-vm; bench/soft_roce.sh --json runs "
        "tests/integration/rxe_2vm_perf.sh). Rounds alternate, perftest, gradwire, perftest, "
        "..., and each gradwire round is divided by the geometric mean of the perftest rounds "
        "either side of it. The VMs run without KVM on a shared machine: compare the ratios, "
        "never the absolute figures.",
    ),
}

SUFFIX = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")]


def normalize(doc):
    """gradwire-bench compress's report in the shape of the others: one
    "library" per codec, dense the reference, algbw of the uncompressed
    tensor in place of busbw, min and max over the timed calls."""
    if doc.get("benchmark") != "compress":
        return doc
    libs, by = [], {}
    for r in doc["results"]:
        if r["codec"] not in libs:
            libs.append(r["codec"])
        by.setdefault(r["size"], {})[r["codec"]] = {"time_us": r["time_us"], "busbw": r["algbw"]}
    p = doc.get("params", {})
    return dict(doc, libraries=libs, reference="dense" if "dense" in libs else libs[0],
                results=[{"size": s, "libraries": by[s]} for s in sorted(by)], bw="algbw",
                spread="timed calls", iters=p.get("iters"), warmup=p.get("warmup_iters"),
                method="time: median over the timed calls of each call's time (max over ranks); "
                       "algbw = uncompressed float32 size / time")


def size_name(s):
    for v, u in SUFFIX:
        if s >= v and s % v == 0:
            return "%d %siB" % (s // v, u)
    return "%d B" % s


def fmt(v, digits):
    return "-" if v is None else "%.*f" % (digits, v)


def table(doc, what):
    """The busbw table (with the ratios, and what auto picked) or the time
    table: one row per size, one column per library."""
    libs, ref = doc["libraries"], doc["reference"]
    peers = [l for l in libs if l != ref]
    busbw = what == "busbw"
    picked = busbw and any("auto_picked" in r for r in doc["results"])
    head = ["size"] + libs
    if busbw:
        head += ["%s / %s" % (ref, p) for p in peers]
    if picked:
        head.append("auto picked")
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * (len(head) - picked) + "---|" * picked]
    for r in doc["results"]:
        per = r["libraries"]
        cells = [size_name(r["size"])]
        for l in libs:
            e = per.get(l)
            if busbw:
                cells.append(fmt(e and e["busbw"], 4))
            elif e:
                t = e["time_us"]
                cells.append("%.1f (%.1f to %.1f)" % (t["median"], t["min"], t["max"]))
            else:
                cells.append("-")
        if busbw:
            rb = per.get(ref, {}).get("busbw")
            for p in peers:
                pb = per.get(p, {}).get("busbw")
                cells.append("%.2f" % (rb / pb) if rb and pb else "-")
        if picked:
            cells.append(", ".join(r.get("auto_picked", [])) or "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def load_text(v):
    return ", ".join("%.2f" % x for x in v) if v else "-"


def busy(run):
    """Whether the machine was busier than its cores when the run started
    (its figures are then indicative only). The 1-minute load average at
    the start is what else ran (scripts/results.sh lets the load of the
    campaign before settle first); the one at the end counts the
    benchmark's own ranks, as many as the cores or more, so it is shown
    but judges nothing."""
    cores = (run.get("cores") or {}).get("online") or 0
    start = ((run.get("load") or {}).get("start") or [0])[0]
    return bool(cores and start > cores)


def measured_on(run):
    c, p = run["cores"], run["peers"]
    note = []
    if busy(run):
        note = ["```{note}",
                "The machine was busier than its %d cores when this run started (load average below): the "
                "figures are indicative only until measured again; the ratios, measured in the same "
                "run, say more than the absolute figures." % c["online"], "```", ""]
    return "\n".join(
        note + [
            "```{list-table} Measured on",
            ":stub-columns: 1",
            "",
            "* - host",
            "  - %s, %d cores online, %d in the affinity mask" % (run["host"], c["online"], c["affinity"]),
            "* - load average (1, 5, 15 min)",
            "  - %s at the start; %s at the end (with the benchmark's own ranks)" % (load_text(run["load"]["start"]), load_text(run["load"]["end"])),
            "* - date (UTC)",
            "  - %s to %s" % (run["date"], run.get("date_end", "?")),
            "* - gradwire commit",
            "  - `%s`" % run["commit"],
            "* - command",
            "  - `%s`" % run["command"],
            "* - peers",
            "  - Open MPI %s; Gloo (Debian libgloo-dev) %s; torch (Debian python3-torch) %s"
            % (p.get("open_mpi") or "absent", p.get("gloo") or "absent", p.get("torch") or "absent"),
            "```",
        ]
    )


def params(doc):
    keys = ("mode", "ranks", "hosts", "rate", "mtu", "transport", "dtype", "op", "place",
            "repeats", "iters", "warmup")
    out = ["%s %s" % (k, doc[k]) for k in keys if doc.get(k) not in (None, "")]
    for name, env in sorted((doc.get("variants") or {}).items()):
        if env:
            out.append("%s: %s" % (name, " ".join(env)))
    return ", ".join(out)


def page(name, doc):
    title, about = CAMPAIGNS.get(name, (name, ""))
    bw = doc.get("bw", "busbw")
    ok = doc.get("ok", True)
    parts = [
        "# " + title,
        "",
        "<!-- Generated by scripts/render_results.py from data/%s.json: do not edit; "
        "run scripts/results.sh %s to measure again. -->" % (name, name),
        "",
        about,
        "",
        "Parameters: %s." % params(doc),
        "",
        "Measure again and render: `scripts/results.sh %s`; render the committed JSON only: "
        "`scripts/results.sh --render-only %s`." % (name, name),
        "",
    ]
    if not ok:
        why = doc.get("failures") or ["see the command's output"]
        parts += ["```{warning}", "A run of this campaign failed or had wrong elements: %s." % "; ".join(why),
                  "```", ""]
    parts += [
        "![%s against size](img/%s-busbw.png)" % (bw, name),
        "",
        "![time against size](img/%s-latency.png)" % name,
        "",
        "%s in GB/s, and the ratio of %s's %s to each other's:" % (bw, doc["reference"], bw),
        "",
        table(doc, "busbw"),
        "",
        "Time in microseconds: the median, and the least and the most of the %s:"
        % doc.get("spread", "runs' medians"),
        "",
        table(doc, "time"),
        "",
        "%s in GB/s (1e9 bytes/s), time in microseconds. %s. A ratio is %s's %s over "
        "that library's, measured in the one campaign (> 1: %s is faster). "
        "Compare ratios, not figures from different pages: this machine is shared, and the "
        "load below says how busy it was."
        % (bw, doc.get("method", "").capitalize() or "Median time", doc["reference"], bw,
           doc["reference"]),
        "",
        measured_on(doc["run"]),
        "",
    ]
    return "\n".join(parts)


GNUPLOT = """set terminal pngcairo size 900,560 font ',10' noenhanced
set output '{out}'
set title '{title}'
set logscale x 2
set format x '%.0b%BB'
set xlabel 'size (bytes)'
set ylabel '{ylabel}'
{logy}
set key top left
set grid
plot {plots}
"""


def plots(name, doc, imgdir, work):
    title = CAMPAIGNS.get(name, (name,))[0].replace("'", "")
    bw = doc.get("bw", "busbw")
    for what, ylabel, logy in (("busbw", bw + " (GB/s)", ""), ("latency", "time (us)", "set logscale y 10")):
        items = []
        for i, lib in enumerate(doc["libraries"]):
            path = os.path.join(work, "%s.%d.dat" % (what, i))
            with open(path, "w") as f:
                for r in doc["results"]:
                    e = r["libraries"].get(lib)
                    if e:
                        v = e["busbw"] if what == "busbw" else e["time_us"]["median"]
                        if v is not None:
                            f.write("%d %.9g\n" % (r["size"], v))
            items.append("'%s' using 1:2 with linespoints title '%s'" % (path, lib))
        script = GNUPLOT.format(out=os.path.join(imgdir, "%s-%s.png" % (name, what)), title=title,
                                ylabel=ylabel, logy=logy, plots=", ".join(items))
        p = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
        if p.returncode != 0:
            sys.exit("render_results.py: gnuplot failed on %s-%s.png:\n%s" % (name, what, p.stderr))


# ---- campaigns whose figures are not busbw against size ----
#
# Each returns the page's body (parameters, tables, the claims as ratios
# against the peer or the reference measured in the same run) and the plots
# to draw: (suffix, title, xlabel, ylabel, logx, logy, [(label, [(x, y)])]).


def md_table(head, rows, align=None):
    align = align or ["---:"] * len(head)
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def ratio(a, b, digits=2):
    return "%.*f" % (digits, a / b) if a is not None and b else "-"


def med_or_none(v):
    v = [x for x in v if x is not None]
    return median(v) if v else None


def body_scale(doc):
    rs = doc["results"]
    configs = []
    for r in rs:
        c = (r["transport"], r["connect"])
        if c not in configs:
            configs.append(c)
    ranks = sorted({r["ranks"] for r in rs})

    def med(n, c, key):
        return med_or_none([r[key] for r in rs if r["ranks"] == n and (r["transport"], r["connect"]) == c])

    head = ["ranks"] + ["%s %s: creation / first collective (ms)" % c for c in configs]
    trs = sorted({c[0] for c in configs})
    pairs = [t for t in trs if (t, "eager") in configs and (t, "lazy") in configs]
    head += ["%s lazy / eager creation" % t for t in pairs]
    rows = []
    for n in ranks:
        row = [str(n)]
        for c in configs:
            a, b = med(n, c, "init_ms"), med(n, c, "first_coll_ms")
            row.append("%s / %s" % (fmt(a, 1), fmt(b, 1)))
        for t in pairs:
            row.append(ratio(med(n, (t, "lazy"), "init_ms"), med(n, (t, "eager"), "init_ms")))
        rows.append(row)
    mem_head = ["ranks"] + ["%s %s: fds / RSS MiB (most per rank)" % c for c in configs]
    mem = [[str(n)] + ["%s / %s" % (fmt(med(n, c, "fds_all_max"), 0),
                                    fmt((med(n, c, "rss_all_kb_max") or 0) / 1024 or None, 1))
                       for c in configs] for n in ranks]
    growth = []
    if len(ranks) > 1:
        for c in configs:
            a, b = med(ranks[0], c, "init_ms"), med(ranks[-1], c, "init_ms")
            growth.append("%s %s: %s times the creation time at %d ranks for %.0f times the ranks"
                          % (c[0], c[1], ratio(b, a), ranks[0], ranks[-1] / ranks[0]))
    text = ["Creation time (ms; the median over the repeats of the most over the ranks), and the "
            "ratio of lazy to eager connection set-up measured in the same campaign:", "",
            md_table(head, rows), ""]
    if growth:
        text += ["From %d to %d ranks: %s." % (ranks[0], ranks[-1], "; ".join(growth)), ""]
    text += ["File descriptors and resident memory after the alltoall (every connection made), the "
             "most over the ranks, median over the repeats:", "", md_table(mem_head, mem), ""]
    series = []
    for c in configs:
        for key, what in (("init_ms", "creation"), ("first_coll_ms", "first collective")):
            series.append(("%s %s: %s" % (c[0], c[1], what), [(n, med(n, c, key)) for n in ranks]))
    plot = ("time", "Communicator creation against ranks (one host)", "ranks", "time (ms)", True, False,
            series)
    params = "ranks %s, transports %s, repeats %s" % (
        " ".join(str(n) for n in ranks), " ".join(trs), doc.get("params", {}).get("repeats"))
    return params, text, [plot]


def pct(v):
    return "-" if v is None else "%.2f%%" % (100 * v)


def body_train_accuracy(doc):
    rs = doc["results"]
    by = {r["run"]: r for r in rs}
    rows = []
    for r in rs:
        ref = "r1" if r["codec"] == "dense" and r["run"] != "r1" else ("r4" if r["codec"] != "dense" else None)
        ref_r = by.get(ref) if ref else None
        name = "%d rank%s%s" % (r["ranks"], "s" if r["ranks"] > 1 else "",
                                "" if r["codec"] == "dense" else ", " + r["codec"])
        diff = ("%+.2f points" % (100 * (r["final_test_acc"] - ref_r["final_test_acc"]))
                if ref_r and r["final_test_acc"] is not None and ref_r["final_test_acc"] is not None else "-")
        rows.append([name, pct(r["final_test_acc"]), fmt(r["final_loss"], 4), fmt(r["train_s"], 1),
                     fmt(r.get("samples_per_s"), 0),
                     ("%s: %s" % ("1 rank" if ref == "r1" else "4 ranks dense", diff)) if ref_r else "reference",
                     ratio(r["train_s"], ref_r["train_s"]) if ref_r else "-"])
    head = ["run", "test accuracy", "final loss", "training (s)", "samples/s", "accuracy vs reference",
            "time / reference's"]
    text = ["Each run against its reference in this campaign (the rank counts against 1 rank, the "
            "codecs against the dense run on 4 ranks): the difference in test accuracy and the ratio "
            "of the training times (< 1: faster).", "",
            md_table(head, rows, ["---", "---:", "---:", "---:", "---:", "---", "---:"]), ""]
    p = doc.get("params", {})
    warm = p.get("codec_warmup_epochs")
    return ("data %s, %s epoch(s), global batch %s%s" % (
        p.get("data"), p.get("epochs"), p.get("global_batch"),
        "" if warm is None else ", the codecs after %s dense epoch(s)" % warm), text, [])


def body_zero(doc):
    rs = doc["results"]
    plain = {r["ranks"]: r for r in rs if r["zero"] == 0}
    rows = []
    for r in rs:
        ref = plain.get(r["ranks"])
        is_ref = ref is r
        diff = ("%+.2f points" % (100 * (r["final_test_acc"] - ref["final_test_acc"]))
                if ref and not is_ref else "reference")
        rows.append(["%d" % r["ranks"], "plain" if r["zero"] == 0 else "--zero %d" % r["zero"],
                     pct(r["final_test_acc"]), diff, fmt(r["final_loss"], 4),
                     "%d" % r["params_bytes"], "%d" % r["grads_bytes"], "%d" % r["optimizer_bytes"],
                     ratio(r["grads_bytes"] + r["optimizer_bytes"],
                           ref["grads_bytes"] + ref["optimizer_bytes"]) if ref else "-",
                     fmt(r["train_s"], 1)])
    head = ["ranks", "run", "test accuracy", "vs plain", "final loss", "parameters (B)",
            "gradients (B)", "momentum (B)", "gradients + momentum / plain's", "training (s)"]
    text = ["Each --zero run against plain data parallelism on the same number of ranks: the "
            "difference in test accuracy, and the bytes of gradients and momentum per rank "
            "as a ratio of plain's.", "",
            md_table(head, rows, ["---:", "---", "---:", "---", "---:", "---:", "---:", "---:",
                                  "---:", "---:"]), ""]
    p = doc.get("params", {})
    return ("data %s, %s epoch(s), global batch %s, %s KiB buckets" % (
        p.get("data"), p.get("epochs"), p.get("global_batch"), p.get("bucket_kb")), text, [])


def body_elastic(doc):
    rs = doc["results"]
    base = next((r for r in rs if r["run"] == "un-killed"), None)
    rows = []
    for r in rs:
        rows.append([r["run"], pct(r["final_test_acc"]), fmt(r["final_loss"], 4), fmt(r["train_s"], 1),
                     ratio(r["train_s"], base and base["train_s"]) if base else "-"])
    text = [md_table(["run", "test accuracy", "final loss", "training (s)", "time / un-killed's"], rows,
                     ["---", "---:", "---:", "---:", "---:"]), ""]
    for el in (r for r in rs if r is not base):
        # Older data keeps the one elastic run's losses beside the results.
        lost = el.get("lost") or ([doc["lost"]] if doc.get("lost") else [])
        said = []
        for x in lost:
            said.append("rank(s) %s of %d in step %d (epoch %d), %.2f s lost; %d went on"
                        % (x["ranks"], x["survivors"] + len(x["ranks"].split(",")), x["step"], x["epoch"],
                           x["lost_s"], x["survivors"]))
        line = "%s: lost %s." % (el["run"], "; then ".join(said)) if said else "%s: no loss reported." % el["run"]
        if base and base["final_test_acc"] is not None and el["final_test_acc"] is not None:
            line += (" Against the un-killed run of the same job: %+.2f points of test accuracy, %s times its "
                     "training time." % (100 * (el["final_test_acc"] - base["final_test_acc"]),
                                         ratio(el["train_s"], base["train_s"])))
        text += [line, ""]
    if any(r["run"].startswith("elastic (rank 0") for r in rs):
        text += ["Ranks are numbered in the communicator they were lost from: in the run that loses rank 0 "
                 "and then rank 1, the second loss is rank 0 of the 3 that went on (the job's rank 1, which "
                 "had taken rank 0's place). Each time the lowest surviving rank led the others in the "
                 "dead rank 0's place (docs/design/failures.md, the succession).", ""]
    p = doc.get("params", {})
    killed = "rank %s killed" % p.get("killed_rank")
    if p.get("killed_ranks_then"):
        killed += "; ranks %s killed one after the other" % " then ".join(map(str, p["killed_ranks_then"]))
    return ("data %s, %s epochs, global batch %s, %s ranks over %s, %s"
            % (p.get("data"), p.get("epochs"), p.get("global_batch"), p.get("ranks"), p.get("transport"),
               killed), text, [])


def ms(v):
    return fmt(None if v is None else 1e3 * v, 1)


def body_stragglers(doc):
    rs = {r["straggler"]: r for r in doc["results"]}
    slow = doc.get("params", {}).get("slow_rank")
    rows = []
    for mode, r in rs.items():
        for k in r["ranks"]:
            rows.append([mode, "%d%s" % (k["rank"], " (slowed)" if k["rank"] == slow else ""), k["batch"],
                         "%s / %s" % (ms(k["step_median_s"]), ms(k["step_p90_s"])),
                         "%s / %s" % (ms(k["compute_median_s"]), ms(k["compute_p90_s"])),
                         "%s / %s" % (ms(k["wait_median_s"]), ms(k["wait_p90_s"])), pct(k["wait_share"])])
    head = ["--straggler", "rank", "batch share", "step median / p90 (ms)", "compute median / p90 (ms)",
            "wait median / p90 (ms)", "waited beyond the slowest"]
    text = ["Per rank, from the trainer's reports (\"slowed\" is the rank under the CPU quota; on a "
            "machine busier than its cores every rank is starved of CPU, and the quota may then bind "
            "less than the load does: the trainer's verdict names the rank that was slowest):", "",
            md_table(head, rows, ["---", "---", "---:", "---:", "---:", "---:", "---:"]), ""]
    none, bal = rs.get("none"), rs.get("balance")
    if none and bal:
        summ = [["slowest rank (the trainer's verdict)", none.get("slowest_rank"), bal.get("slowest_rank"), ""],
                ["time per epoch (s)", fmt(none["epoch_s"], 2), fmt(bal["epoch_s"], 2),
                 ratio(bal["epoch_s"], none["epoch_s"])],
                ["wait share of the run", pct(none["wait_share"]), pct(bal["wait_share"]),
                 ratio(bal["wait_share"], none["wait_share"])],
                ["final loss", fmt(none["final_loss"], 4), fmt(bal["final_loss"], 4),
                 ratio(bal["final_loss"], none["final_loss"], 3)]]
        nb = {k["rank"]: k for k in none["ranks"]}
        for k in bal["ranks"]:
            if k["rank"] != slow and k["rank"] in nb:
                summ.append(["rank %d's median wait (ms)" % k["rank"], ms(nb[k["rank"]]["wait_median_s"]),
                             ms(k["wait_median_s"]), ratio(k["wait_median_s"], nb[k["rank"]]["wait_median_s"])])
        text += ["Balanced against unmitigated, in the same campaign (a ratio below 1: balance is "
                 "faster or waits less):", "",
                 md_table(["figure", "none", "balance", "balance / none"], summ, ["---", "---:", "---:", "---:"]),
                 ""]
    p = doc.get("params", {})
    return ("%s hosts at %s, rank %s held to %s%% of one CPU; gradwire train %s"
            % (p.get("hosts"), p.get("rate"), slow, p.get("cpu_quota_pct"), p.get("train")), text, [])


def body_fusion(doc):
    rows = [[r["config"], r["iters"]] + [fmt(1e3 * r[k], 3) for k in ("median_s", "min_s", "max_s")]
            for r in doc["results"]]
    text = ["Per configuration, the median over iterations of the slowest rank's time for all the "
            "tensors, and its range:", "",
            md_table(["configuration", "iterations", "median (ms)", "min (ms)", "max (ms)"], rows,
                     ["---", "---:", "---:", "---:", "---:"]), "",
            "Ratios of the medians, measured side by side in this run (above 1: the second is faster):", "",
            md_table(["ratio", "value"], [[k, "%.2fx" % v] for k, v in doc.get("ratios", {}).items()],
                     ["---", "---:"]), ""]
    p = doc.get("params", {})
    return ("%s ranks, %s tensors of %s bytes (%s), %s iterations after %s of warm-up" % (
        p.get("ranks"), p.get("tensors"), p.get("bytes"), p.get("dtype"), p.get("iters"), p.get("warmup")),
        text, [])


def body_acceptance(doc):
    p = doc.get("params", {})
    link = p.get("link_GBps")
    phases = ["host sanity", "link matrix", "retests", "collectives"]
    rows = []
    for r in doc["results"]:
        tot = r["elapsed_s"]
        cells = [r["hosts"], r["verdict"], fmt(tot, 1)]
        for ph in phases:
            v = r["phases_s"].get(ph)
            cells.append("%s (%s)" % (fmt(v, 1), "%.0f%%" % (100 * v / tot) if v is not None and tot else "-"))
        cells += [r.get("rounds", "-"), ratio(r.get("link_bw_GBps"), link), ratio(r.get("allreduce_busbw_GBps"), link)]
        rows.append(cells)
    head = ["hosts", "verdict", "total (s)"] + ["%s (s, share)" % ph for ph in phases] + [
        "matrix rounds", "link bw / link rate", "allreduce busbw / link rate"]
    text = ["Each phase's time and its share of the whole check; the bandwidths the check measured, "
            "as ratios to the links' shaped rate (%s, %s GB/s):" % (p.get("rate"), fmt(link, 3)), "",
            md_table(head, rows), ""]
    res = doc["results"]
    if len(res) > 1 and res[0]["elapsed_s"]:
        text += ["From %d to %d hosts the check took %s times as long." % (
            res[0]["hosts"], res[-1]["hosts"], ratio(res[-1]["elapsed_s"], res[0]["elapsed_s"])), ""]
    series = [(ph, [(r["hosts"], r["phases_s"].get(ph)) for r in res]) for ph in phases]
    series.append(("total", [(r["hosts"], r["elapsed_s"]) for r in res]))
    plots = [("phases", "gradwire check --quick: time per phase against hosts", "hosts", "time (s)", False,
              False, series)] if len(res) > 1 else []
    return "hosts %s, links at %s, gradwire check %s" % (
        " ".join(str(h) for h in p.get("hosts", [])), p.get("rate"), p.get("check")), text, plots


def sig(v):
    return "-" if v is None else "%.4g" % v


def body_soft_roce(doc):
    rows, bw = [], []
    for r in doc["results"]:
        what = {"bandwidth": "bandwidth (GB/s)",
                "latency-standard": "latency (us; gradwire p50, standard sends)"}.get(
                    r["kind"], "latency (us; gradwire p50, synchronous sends)")
        # Only finite ratios: a perftest round that reported 0 is a failed
        # round, not an infinitely fast gradwire.
        ratios = [x for x in r["ratios"] if math.isfinite(x) and x > 0]
        rows.append([size_name(r["size"]), what, sig(med_or_none([x for x in r["perftest"] if x > 0])),
                     sig(med_or_none(r["gradwire"])),
                     "%.2f (%.2f to %.2f)" % (median(ratios), min(ratios), max(ratios)) if ratios else "-",
                     len(ratios)])
        if r["kind"] == "bandwidth":
            bw.append(r)
    head = ["size", "figure", "perftest (median)", "gradwire (median)",
            "gradwire / perftest, paired (median, range)", "rounds"]
    text = ["gradwire's figure over perftest's, each gradwire round paired with the perftest rounds "
            "either side of it (bandwidth: > 1 is gradwire faster; latency: < 1 is gradwire "
            "faster); a perftest round that reported 0 failed and is left out, with its ratio. "
            "rxe_2vm_perf.sh's bandwidth target (the median paired ratio at 1 MiB and "
            "2 MiB at least 0.95) %s." % ("was met in this run" if doc.get("target_met") else
                              "was not met in this run" if doc.get("ok", True) else
                              "could not be judged: the run failed"), "",
            md_table(head, rows, ["---:", "---", "---:", "---:", "---:", "---:"]), ""]
    plots = []
    if bw:
        series = [("gradwire (gradwire-bench p2p)", [(r["size"], med_or_none(r["gradwire"])) for r in bw]),
                  ("perftest ib_write_bw", [(r["size"], med_or_none(r["perftest"])) for r in bw])]
        plots.append(("busbw", "Soft-RoCE between two VMs: bandwidth against size", "size (bytes)",
                      "bandwidth (GB/s)", "size", False, series))
    p = doc.get("params", {})
    return ("%s hosts (VMs), transport %s, %s rounds of %s MiB" % (
        p.get("hosts"), p.get("transport"), p.get("rounds"), p.get("mib_per_round")), text, plots)


# The latency campaign's kinds of run (bench/latency.sh), as the page names
# them, and the MPI call each ping-pong's peer sends with.
LATENCY_KINDS = {
    "allreduce": "allreduce",
    "pingpong": "ping-pong (half round trip)",
    "pingpong-standard": "ping-pong (half round trip), standard sends (GW_P2P_SEND=standard; MPI_Send)",
    "pingpong-sync": "ping-pong (half round trip), synchronous sends (gradwire's default; MPI_Ssend)",
}
LATENCY_PEER_SEND = {"pingpong-standard": ", MPI_Send", "pingpong-sync": ", MPI_Ssend"}


def body_latency(doc):
    p = doc.get("params", {})
    groups = {}
    for r in doc["results"]:
        groups.setdefault((r["kind"], r["transport"], r["ranks"], r["bind"]), []).append(r)
    peer = {"shm": "Open MPI vader", "tcp": "Open MPI tcp"}
    text, plots, met, judged = [], [], 0, 0
    for (kind, tr, n, bind), rows in sorted(groups.items()):
        out, gser, mser = [], [], []
        for r in sorted(rows, key=lambda r: r["size"]):
            g, m = med_or_none(r["gradwire_us"]), med_or_none(r["openmpi_us"])
            ratio = g / m if g and m else None
            if ratio is not None:
                judged += 1
                met += ratio <= 1
            out.append([size_name(r["size"]), sig(g), sig(m), "-" if ratio is None else "%.2f" % ratio,
                        "%d / %d" % (len(r["gradwire_us"]), len(r["openmpi_us"]))])
            gser.append((r["size"], g))
            mser.append((r["size"], m))
        what = LATENCY_KINDS.get(kind, kind)
        mpi = peer.get(tr, "Open MPI") + LATENCY_PEER_SEND.get(kind, "")
        text += ["%s, %s, %d ranks, %s:" % (what, tr, n, "bound to cores" if bind == "core" else "unbound"), "",
                 md_table(["size", "gradwire (us)", "%s (us)" % mpi,
                           "gradwire / Open MPI", "runs"], out, ["---:", "---:", "---:", "---:", "---:"]), ""]
        plots.append(("%s-%s-%d-%s" % (kind, tr, n, bind), "%s over %s, %d ranks, %s: time against size"
                      % (what, tr, n, "bound" if bind == "core" else "unbound"), "size (bytes)", "time (us)",
                      "size", True, [("gradwire", gser), (mpi, mser)]))
    head = ["Times in microseconds, the median over the runs of each run's median; a ratio below 1 is "
            "gradwire faster. The target of issue 30 (every size at or below Open MPI's time) is met "
            "in %d of the %d rows measured in this run%s." % (
                met, judged, "" if not busy(doc.get("run", {})) else
                ", measured while the machine was busier than its cores: indicative only"), ""]
    if p.get("skipped"):
        head += ["Not measured here: %s." % "; ".join(p["skipped"]), ""]
    return ("ranks %s, %s, transports %s, %s timed iterations (%s warm-up) per run, %s runs" % (
        " and ".join(str(x) for x in p.get("ranks", [])), " and ".join(
            "bound" if b == "core" else "unbound" for b in p.get("binds", [])),
        " and ".join(p.get("transports", [])), p.get("iters"), p.get("warmup"), p.get("reps")),
        head + text, plots)


# What a test that passes on gloo and not on gradwire tells of the backend,
# where its one-line reason does not say it: the page's "why" column.
SUITE_WHY = {
    "test_get_backend": "an artefact of running the suite as gloo: get_backend() says "
                        "\"gradwire\" where the suite expects \"gloo\"",
    "test_sparse_all_reduce_sum": "sparse tensors are refused with a TypeError that says so; gloo "
                                  "reduces them",
}


def body_torch_suite(doc):
    rs, backends = doc["results"], ("gloo", "gradwire")
    kinds = ("pass", "fail", "error", "skip")
    counts = {b: {k: 0 for k in kinds} for b in backends}
    for r in rs:
        for b in backends:
            o = (r.get(b) or {}).get("outcome")
            if o in counts[b]:
                counts[b][o] += 1
    text = [md_table(["backend"] + list(kinds), [[b] + ["%d" % counts[b][k] for k in kinds]
                                                  for b in backends],
                     ["---"] + ["---:"] * len(kinds)), ""]
    differ = [r for r in rs if (r.get("gloo") or {}).get("outcome")
              != (r.get("gradwire") or {}).get("outcome")]
    if differ:
        text += ["The tests whose outcome differs:", ""]
        rows = []
        for r in differ:
            g, w = r.get("gloo") or {}, r.get("gradwire") or {}
            why = SUITE_WHY.get(r["test"]) or w.get("reason") or g.get("reason") or ""
            rows.append(["`%s`" % r["test"], g.get("outcome", "not run"), w.get("outcome", "not run"),
                         why.replace("|", "\\|")])
        text += [md_table(["test", "gloo", "gradwire", "why"], rows, ["---"] * 4), ""]
    else:
        text += ["Every test has the same outcome on both.", ""]
    same = [r for r in rs if r not in differ and (r.get("gloo") or {}).get("outcome") in ("error", "fail", "skip")]
    if same:
        text += ["Not passing on either, with the same outcome on both (the suite's own reasons):", ""]
        text += [md_table(["test", "outcome", "reason"],
                          [["`%s`" % r["test"], r["gloo"]["outcome"],
                            (r["gloo"].get("reason") or "").replace("|", "\\|")] for r in same],
                          ["---"] * 3), ""]
    p = doc.get("params", {})
    secs = p.get("seconds", {})
    return ("%s tests of the list, %s ranks, torch %s, Python %s; the runs took %s s (gloo) and %s s "
            "(gradwire)" % (p.get("tests"), p.get("ranks"), p.get("torch"), p.get("python"),
                            secs.get("gloo"), secs.get("gradwire")), text, [])


BODIES = {"scale": body_scale, "torch-suite": body_torch_suite, "train-accuracy": body_train_accuracy, "elastic": body_elastic,
          "stragglers": body_stragglers, "acceptance": body_acceptance, "soft-roce": body_soft_roce,
          "fusion": body_fusion, "latency": body_latency, "zero": body_zero}


def custom_page(name, doc):
    title, about = CAMPAIGNS.get(name, (name, ""))
    par, text, plots = BODIES[doc["benchmark"]](doc)
    parts = ["# " + title, "",
             "<!-- Generated by scripts/render_results.py from data/%s.json: do not edit; "
             "run scripts/results.sh %s to measure again. -->" % (name, name), "",
             about, "", "Parameters: %s." % par, "",
             "Measure again and render: `scripts/results.sh %s`; render the committed JSON only: "
             "`scripts/results.sh --render-only %s`." % (name, name), ""]
    if not doc.get("ok", True):
        why = doc.get("failures") or ["see the command's output"]
        parts += ["```{warning}", "A run of this campaign failed: %s." % "; ".join(why), "```", ""]
    for pl in plots:
        parts += ["![%s](img/%s-%s.png)" % (pl[1], name, pl[0]), ""]
    parts += text
    parts += ["Compare ratios, not figures from different pages: this machine is shared, and the "
              "load below says how busy it was.", "", measured_on(doc["run"]), ""]
    return "\n".join(parts), plots


CUSTOM_GNUPLOT = """set terminal pngcairo size 900,560 font ',10' noenhanced
set output '{out}'
set title '{title}'
{logx}
set xlabel '{xlabel}'
set ylabel '{ylabel}'
{logy}
set key top left
set grid
plot {plots}
"""


def custom_plots(name, plots, imgdir, work):
    for suffix, title, xlabel, ylabel, logx, logy, series in plots:
        items = []
        for i, (label, pts) in enumerate(series):
            path = os.path.join(work, "%s.%d.dat" % (suffix, i))
            with open(path, "w") as f:
                for x, y in pts:
                    if y is not None:
                        f.write("%.9g %.9g\n" % (x, y))
            items.append("'%s' using 1:2 with linespoints title '%s'" % (path, label.replace("'", "")))
        lx = ("set logscale x 2\nset format x '%.0b%BB'" if logx == "size"
              else "set logscale x 2" if logx else "")
        script = CUSTOM_GNUPLOT.format(out=os.path.join(imgdir, "%s-%s.png" % (name, suffix)),
                                       title=title.replace("'", ""), xlabel=xlabel, ylabel=ylabel, logx=lx,
                                       logy="set logscale y 10" if logy else "", plots=", ".join(items))
        p = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
        if p.returncode != 0:
            sys.exit("render_results.py: gnuplot failed on %s-%s.png:\n%s" % (name, suffix, p.stderr))


# The README's headline results: these campaigns, in this order, each as
# the median over its sizes of the reference's busbw over each peer's, with
# the range, linking to its page. Written between the README's markers, so
# the README holds no figure typed by hand either.
HEADLINES = ["compare-emulated", "compare-local", "shm"]
BEGIN = "<!-- results:begin (scripts/render_results.py writes this list; do not edit) -->"
END = "<!-- results:end -->"


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def headline(name, doc):
    title = CAMPAIGNS.get(name, (name,))[0]
    ref, sizes = doc["reference"], [r["size"] for r in doc["results"]]
    parts = []
    for peer in [l for l in doc["libraries"] if l != ref]:
        ratios = []
        for r in doc["results"]:
            rb = r["libraries"].get(ref, {}).get("busbw")
            pb = r["libraries"].get(peer, {}).get("busbw")
            if rb and pb:
                ratios.append(rb / pb)
        if ratios:
            parts.append("%s / %s %.2f (%.2f to %.2f)" % (ref, peer, median(ratios), min(ratios),
                                                         max(ratios)))
    where = ", ".join(x for x in ("%s ranks" % doc["ranks"] if doc.get("ranks") else "",
                                  "%s hosts" % doc["hosts"] if doc.get("hosts") else "") if x)
    # A run on a machine busier than its cores is said to be so (the page
    # has the figures), so a headline never passes for a quiet run's.
    return "- [%s](docs/results/%s.md), %s to %s%s: %s.%s" % (
        title, name, size_name(min(sizes)), size_name(max(sizes)), ", " + where if where else "",
        "; ".join(parts) or "no peer measured",
        " Started while the machine was busier than its cores (its page says how busy): "
        "indicative only until measured again." if busy(doc.get("run", {})) else "")


def write_readme(path, docs):
    """Replace the block between the README's markers with the headlines
    of the campaigns that have data."""
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit("render_results.py: %s has no results markers" % path)
    lines = [headline(n, docs[n]) for n in HEADLINES if n in docs]
    block = BEGIN + "\n" + "\n".join(lines or ["- (nothing measured yet)"]) + "\n" + END
    head, rest = text.split(BEGIN, 1)
    with open(path, "w") as f:
        f.write(head + block + rest.split(END, 1)[1])


def main(argv):
    ap = argparse.ArgumentParser(description="render docs/results pages from the campaigns' JSON")
    ap.add_argument("--data", default=os.path.join(ROOT, "docs/results/data"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs/results"))
    ap.add_argument("--no-plots", action="store_true", help="pages only (no gnuplot)")
    ap.add_argument("--readme", help="also write the headline results into this README's block")
    ap.add_argument("campaigns", nargs="*")
    a = ap.parse_args(argv)
    names = a.campaigns or sorted(f[:-5] for f in os.listdir(a.data) if f.endswith(".json"))
    if not a.no_plots and not shutil.which("gnuplot"):
        sys.exit("render_results.py: gnuplot is not installed (Debian package gnuplot-nox)")
    os.makedirs(os.path.join(a.out, "img"), exist_ok=True)
    docs = {}
    for name in names:
        path = os.path.join(a.data, name + ".json")
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit("render_results.py: %s: %s" % (path, e))
        if "run" not in doc or not doc.get("results"):
            sys.exit("render_results.py: %s: no run header or no results" % path)
        if doc.get("benchmark") in BODIES:
            text, cplots = custom_page(name, doc)
            with open(os.path.join(a.out, name + ".md"), "w") as f:
                f.write(text)
            if not a.no_plots:
                with tempfile.TemporaryDirectory() as work:
                    custom_plots(name, cplots, os.path.join(a.out, "img"), work)
            print("rendered %s" % os.path.join(a.out, name + ".md"))
            continue
        doc = normalize(doc)
        docs[name] = doc
        with open(os.path.join(a.out, name + ".md"), "w") as f:
            f.write(page(name, doc))
        if not a.no_plots:
            with tempfile.TemporaryDirectory() as work:
                plots(name, doc, os.path.join(a.out, "img"), work)
        print("rendered %s" % os.path.join(a.out, name + ".md"))
    if a.readme:
        for name in HEADLINES:  # every headline, whichever campaigns were asked for
            path = os.path.join(a.data, name + ".json")
            if name not in docs and os.path.exists(path):
                with open(path) as f:
                    docs[name] = normalize(json.load(f))
        write_readme(a.readme, docs)
        print("rendered the headline results of %s" % a.readme)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
