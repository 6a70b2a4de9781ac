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
library, log2 size axis.

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


def measured_on(run):
    c, p = run["cores"], run["peers"]
    return "\n".join(
        [
            "```{list-table} Measured on",
            ":stub-columns: 1",
            "",
            "* - host",
            "  - %s, %d cores online, %d in the affinity mask" % (run["host"], c["online"], c["affinity"]),
            "* - load average (1, 5, 15 min)",
            "  - %s at the start; %s at the end" % (load_text(run["load"]["start"]), load_text(run["load"]["end"])),
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
    run = doc.get("run", {})
    cores = (run.get("cores") or {}).get("online") or 0
    loads = [(run.get("load") or {}).get(k, [0])[0] for k in ("start", "end")]
    busy = cores and max(loads) > cores
    return "- [%s](docs/results/%s.md), %s to %s%s: %s.%s" % (
        title, name, size_name(min(sizes)), size_name(max(sizes)), ", " + where if where else "",
        "; ".join(parts) or "no peer measured",
        " Measured while the machine was busier than its cores (its page says how busy): "
        "indicative only until measured again." if busy else "")


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
