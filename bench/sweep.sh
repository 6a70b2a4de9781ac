#!/usr/bin/env bash
# sweep.sh - is `auto` the right choice? gradwire-bench allreduce with every
# fixed algorithm and with auto, at the same sizes and ranks, in one run:
# per size, each algorithm's time (the median over the repetitions of each
# run's median), the algorithm auto picked, and auto's time over the best
# fixed algorithm's (issue #16 item 7's target: within 1.10 at every size).
# The repetitions interleave the algorithms (a different order each time),
# so that a change in the machine's load falls on all of them alike.
#
#   bench/sweep.sh [options]
#     -n N            ranks (default 4), on this host unless --hosts
#     --hosts P       across the emulated hosts of scripts/cluster.sh --prefix P
#     --transport T   GW_TRANSPORT for the ranks (default: the environment's, or auto)
#     --algos LIST    fixed algorithms, comma-separated (default: every one
#                     gradwire-bench allreduce --help lists)
#     -b, -e, -f      sizes as gradwire-bench (default 8, 64M, 4)
#     --iters N       timed iterations per size (default 10)
#     --reps R        repetitions (default 3)
#     --bind B        the launcher's --bind (auto, core, none; default: its own)
#     --build DIR     build directory (default ./build)
#     --json FILE     also write the table as JSON, with the run header of
#                     bench/run_header.py (scripts/results.sh renders it)
# Prints a Markdown table. Exit status 0, 1 when a run failed, 2 for usage.
# It reports and judges nothing: a benchmark, not a test.
set -u
here=$(cd "$(dirname "$0")" && pwd)
cmdline="$0$(printf ' %q' "$@")"
build="$here/../build"
n=4 hosts="" transport="${GW_TRANSPORT:-}" algos="" b=8 e=64M f=4 iters=10 reps=3 json="" bind=""
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        -n) n=$2; shift 2 ;;
        --hosts) hosts=$2; shift 2 ;;
        --transport) transport=$2; shift 2 ;;
        --algos) algos=$2; shift 2 ;;
        -b) b=$2; shift 2 ;;
        -e) e=$2; shift 2 ;;
        -f) f=$2; shift 2 ;;
        --iters) iters=$2; shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        --bind) bind=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        --json) json=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "sweep.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for v in n iters reps; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "sweep.sh: $v must be a positive number, not '${!v}'" >&2; exit 2; }
done
bench="$build/gradwire-bench"
launcher="$build/gradwire"
[ -x "$bench" ] && [ -x "$launcher" ] || { echo "sweep.sh: build $build first (gradwire, gradwire-bench)" >&2; exit 2; }
if [ -z "$algos" ]; then
    # "-a, --algo A   auto (default), ring, tree, rd, hier": all but auto.
    algos=$("$bench" allreduce --help 2>&1 | sed -n 's/.*--algo A *auto (default), *//p' | tr -d ' ')
    [ -n "$algos" ] || { echo "sweep.sh: cannot read the algorithms from gradwire-bench allreduce --help" >&2; exit 2; }
fi
IFS=, read -r -a fixed <<<"$algos"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
launch=("$launcher" launch -n "$n")
[ -n "$hosts" ] && launch+=(--hosts "$hosts")
[ -n "$bind" ] && launch+=(--bind "$bind")
[ -n "$transport" ] && export GW_TRANSPORT="$transport"
all=(auto "${fixed[@]}")
if [ -n "$json" ]; then
    "$here/run_header.py" begin --command "$cmdline" >"$out/header.json" ||
        { echo "sweep.sh: cannot write the run header" >&2; exit 1; }
fi
echo "# sweep: $n ranks${hosts:+ on hosts $hosts}${bind:+, --bind $bind}, GW_TRANSPORT=${GW_TRANSPORT:-auto}, sizes $b..$e x$f, $reps reps;" \
    "gradwire $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?'), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq 1 "$reps"); do
    # Rotate the order each repetition.
    for k in $(seq 0 $((${#all[@]} - 1))); do
        a=${all[$(((k + r) % ${#all[@]}))]}
        if ! "${launch[@]}" -- "$bench" allreduce -b "$b" -e "$e" -f "$f" -n "$iters" -w 2 -c 0 \
            --algo "$a" --json "$out/$a.$r.json" >"$out/$a.$r.log" 2>&1; then
            echo "sweep.sh: $a (repetition $r) failed:" >&2
            tail -5 "$out/$a.$r.log" >&2
            exit 1
        fi
    done
done
/usr/bin/python3 - "$out" "$reps" "$json" "$n" "$iters" "${GW_TRANSPORT:-auto}" "${all[@]}" <<'PY' || exit 1
import json, statistics, sys
out, reps, jpath, n, iters, transport, algos = (sys.argv[1], int(sys.argv[2]), sys.argv[3],
                                                int(sys.argv[4]), int(sys.argv[5]), sys.argv[6],
                                                sys.argv[7:])
times, picked = {}, {}
for a in algos:
    for r in range(1, reps + 1):
        d = json.load(open(f"{out}/{a}.{r}.json"))
        for res in d["results"]:
            times.setdefault((a, res["size"]), []).append(res["out_of_place"]["time_us"]["median"])
            if a == "auto":
                picked.setdefault(res["size"], set()).add(res.get("algo", "?"))
sizes = sorted({s for (_, s) in times})
fixed = [a for a in algos if a != "auto"]
print("| size | " + " | ".join(fixed) + " | auto (picked) | auto / best |")
print("|---:|" + "---:|" * len(fixed) + "---|---:|")
rows, worst = [], 0.0
for s in sizes:
    med = {a: statistics.median(times[(a, s)]) for a in algos if (a, s) in times}
    best = min(fixed, key=lambda a: med.get(a, float("inf")))
    ratio = med["auto"] / med[best]
    worst = max(worst, ratio)
    cells = [("**%.1f**" if a == best else "%.1f") % med[a] for a in fixed]
    mark = "" if ratio <= 1.10 else " (over 1.10)"
    size = f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB" if s >= 1 << 10 else f"{s} B"
    print(f"| {size} | " + " | ".join(cells) +
          f" | {med['auto']:.1f} ({','.join(sorted(picked.get(s, {'?'})))}) | {ratio:.2f}{mark} |")
    rows.append({"size": s, "median_us": med, "best": best, "auto_picked": sorted(picked.get(s, [])),
                 "auto_over_best": ratio})
print(f"\ntimes in us (median over {reps} runs of each run's median); worst auto / best: {worst:.2f}")
if jpath:
    # The rows above, and every algorithm's figures in the shape of
    # bench/compare.sh's JSON (one "library" per algorithm, auto the
    # reference), which scripts/render_results.py draws.
    results = []
    for s in sizes:
        per = {}
        for a in algos:
            v = times.get((a, s))
            if v:
                m = statistics.median(v)
                per[a] = {"time_us": {"median": m, "min": min(v), "max": max(v)},
                          "busbw": s / m / 1e3 * 2 * (n - 1) / n if m > 0 else None, "runs": len(v)}
        results.append({"size": s, "libraries": per, "auto_picked": sorted(picked.get(s, []))})
    doc = {"benchmark": "sweep", "collective": "allreduce", "ranks": n, "transport": transport,
           "repeats": reps, "iters": iters,
           "units": {"size": "bytes", "time": "us", "bandwidth": "GB/s (1e9 bytes/s)"},
           "method": "time: median over repetitions of each run's out-of-place median time "
                     "(max over ranks); busbw = size / time x 2(n-1)/n",
           "libraries": algos, "reference": "auto", "results": results, "rows": rows,
           "worst_auto_over_best": worst}
    json.dump(doc, open(out + "/data.json", "w"), indent=1)
PY
if [ -n "$json" ]; then
    "$here/run_header.py" finish "$out/header.json" "$out/data.json" "$json" || exit 1
fi
