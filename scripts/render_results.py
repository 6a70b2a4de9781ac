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
where a curve says more (img/CAMPAIGN-WHAT.png): results_bodies.py, with
the formatting both share in results_format.py. A page of a run whose
load exceeded the machine's cores when it started says that its figures
are indicative only.

  render_results.py [--data DIR] [--out DIR] [--no-plots] [CAMPAIGN...]

The page depends on the JSON alone, so tests/results/check_results.sh can
render again into a temporary folder and require the committed page to be
the same. Python's standard library only, plus gnuplot (gnuplot-nox).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

from results_bodies import BODIES
from results_format import busy, fmt, measured_on, median, size_name

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
