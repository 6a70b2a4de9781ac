#!/usr/bin/env bash
# torch_suite.sh - torch's own distributed test base on gloo and on
# gradwire, side by side: tests/python/run.sh suite runs the tests of
# tests/python/torch_suite.list (torch.testing._internal.distributed, as
# torch's test_distributed_spawn.py runs it; 3 ranks) once on "gloo" and
# once on "gradwire", in this order, and each test's outcome (pass, fail,
# error, skip) and first line of reason go into one table.
#
#   python/bench/torch_suite.sh [BUILD] [--json FILE] [--ranks N] [NAME...]
#
# BUILD is the build directory (default build; its python/ holds the
# module). NAMEs pick tests (default: the list). --json FILE: the outcomes
# as JSON with the run header (bench/run_header.py; scripts/results.sh
# torch-suite renders it into docs/results/torch-suite.md). About 4 minutes
# per backend on an idle 2-core machine. Exit 0 when both ran (whatever
# their outcomes), 1 when a backend's run produced no results, 2 usage.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CMDLINE=$(/usr/bin/python3 -c 'import shlex, sys; print(shlex.join(sys.argv[1:]))' "$0" "$@")
build="$ROOT/build" json="" ranks=3 names=()
while [ $# -gt 0 ]; do
    case "$1" in
    --json) json="${2:?--json needs a file}"; shift 2 ;;
    --ranks) ranks="${2:?--ranks needs a number}"; shift 2 ;;
    -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "torch_suite.sh: unknown option $1" >&2; exit 2 ;;
    *) if [ -d "$1" ] && [ ${#names[@]} -eq 0 ] && [ "$build" = "$ROOT/build" ]; then build="$1"; else names+=("$1"); fi; shift ;;
    esac
done
[ -d "$build/python" ] || { echo "torch_suite.sh: no $build/python: build gradwire first" >&2; exit 2; }
build=$(cd "$build" && pwd) # run.sh runs the suite from a directory of its own
work=$(mktemp -d /tmp/gw-torchsuite-XXXXXX)
trap 'rm -rf "$work"' EXIT
[ -z "$json" ] || "$ROOT/bench/run_header.py" begin --command "$CMDLINE" --ranks "$ranks" >"$work/header.json"
for backend in gloo gradwire; do
    start=$(date +%s)
    GW_PY_TORCH_SUITE=1 GW_PY_BUILD="$build" GW_PY_SUITE_RANKS="$ranks" GW_PY_SUITE_OUT="$work/$backend.tsv" \
        "$ROOT/tests/python/run.sh" suite "$backend" ${names[@]+"${names[@]}"} >"$work/$backend.log" 2>&1 || true
    echo $(($(date +%s) - start)) >"$work/$backend.secs"
    if [ ! -s "$work/$backend.tsv" ]; then
        echo "torch_suite.sh: the run on $backend produced no results:" >&2
        tail -n 20 "$work/$backend.log" >&2
        exit 1
    fi
done
/usr/bin/python3 - "$work" "$ranks" "$json" "$ROOT" <<'PY'
import json, os, sys
work, ranks, out, root = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
runs, order = {}, []
for b in ("gloo", "gradwire"):
    runs[b] = {}
    with open(os.path.join(work, b + ".tsv")) as f:
        for line in f:
            name, outcome, why = (line.rstrip("\n").split("\t") + ["", ""])[:3]
            runs[b][name] = {"outcome": outcome, "reason": why}
            if name not in order:
                order.append(name)
results = [{"test": t, "gloo": runs["gloo"].get(t), "gradwire": runs["gradwire"].get(t)} for t in order]
for b in ("gloo", "gradwire"):
    n = {}
    for r in runs[b].values():
        n[r["outcome"]] = n.get(r["outcome"], 0) + 1
    print("%-9s %s" % (b, ", ".join("%d %s" % (v, k) for k, v in sorted(n.items()))))
for r in results:
    g, w = r["gloo"] or {}, r["gradwire"] or {}
    if g.get("outcome") != w.get("outcome"):
        print("differs: %s: gloo %s, gradwire %s (%s)" % (r["test"], g.get("outcome"), w.get("outcome"),
                                                         w.get("reason") or g.get("reason")))
if out:
    import subprocess
    import torch
    doc = {"benchmark": "torch-suite", "ranks": ranks, "results": results,
           "params": {"ranks": ranks, "tests": len(order), "torch": torch.__version__,
                      "python": "%d.%d" % sys.version_info[:2],
                      "seconds": {b: int(open(os.path.join(work, b + ".secs")).read()) for b in runs}}}
    data = os.path.join(work, "data.json")
    with open(data, "w") as f:
        json.dump(doc, f, indent=1)
    subprocess.run([os.path.join(root, "bench/run_header.py"), "finish",
                    os.path.join(work, "header.json"), data, out], check=True)
PY
