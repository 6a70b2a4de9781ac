#!/usr/bin/env bash
# latency.sh - small-message latency, gradwire against Open MPI in the same
# run: allreduce from 8 B to 64 KiB on 2 and 4 ranks, over shared memory
# (gradwire shm, Open MPI btl vader) and loopback TCP (gradwire tcp, Open
# MPI btl tcp), ranks bound to cores and unbound; and the point-to-point
# ping-pong of 2 ranks (gradwire-bench p2p -m lat against
# bench/peers/mpi_pingpong, both osu_latency's half round trip) twice:
# standard sends (GW_P2P_SEND=standard against MPI_Send, "pingpong-standard")
# and synchronous ones (gradwire's default against MPI_Ssend,
# "pingpong-sync").
#
#   bench/latency.sh [--build DIR] [--json FILE] [-b MIN] [-e MAX]
#                    [--ranks "2 4"] [--binds "core none"]
#                    [--transports "shm tcp"] [-n ITERS] [-w WARMUP]
#                    [--reps R]
#
# Every configuration runs gradwire and then Open MPI, and the repetitions
# go round all configurations before the next one starts, so that a change
# in the machine's load falls on both libraries alike. Allreduce times are
# gradwire-bench's and mpi_allreduce's in-place median of the slowest rank
# per iteration (-a 3); ping-pong times are the median half round trip.
# A bound configuration whose ranks outnumber this machine's cores is
# skipped (binding would put two ranks on one core) and listed as such.
# With --json, rank 0's reports of every run are gathered into one JSON
# object with the run header of bench/run_header.py ("benchmark":
# "latency"), which scripts/render_results.py renders as
# docs/results/latency.md. Exit status: 0, 1 when a run failed (the
# others still ran; the JSON says which), 2 for a bad command line, 77
# when Open MPI's drivers are not built.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=build
JSON=""
MINB=8
MAXB=64K
RANKS="2 4"
BINDS="core none"
TRANSPORTS="shm tcp"
ITERS=1000
WARMUP=100
REPS=2
CMDLINE="bench/latency.sh $*"

usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --build) B=$2; shift 2 ;;
        --json) JSON=$2; shift 2 ;;
        -b) MINB=$2; shift 2 ;;
        -e) MAXB=$2; shift 2 ;;
        --ranks) RANKS=$2; shift 2 ;;
        --binds) BINDS=$2; shift 2 ;;
        --transports) TRANSPORTS=$2; shift 2 ;;
        -n) ITERS=$2; shift 2 ;;
        -w) WARMUP=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "latency.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for v in "$ITERS" "$WARMUP" "$REPS"; do
    [[ "$v" =~ ^[0-9]+$ ]] || { echo "latency.sh: -n, -w and --reps take numbers, not '$v'" >&2; exit 2; }
done
for b in $BINDS; do
    case "$b" in core|none) ;; *) echo "latency.sh: --binds takes core and none, not '$b'" >&2; exit 2 ;; esac
done
for t in $TRANSPORTS; do
    case "$t" in shm|tcp) ;; *) echo "latency.sh: --transports takes shm and tcp, not '$t'" >&2; exit 2 ;; esac
done
GW="$B/gradwire"
BENCH="$B/gradwire-bench"
MPI_AR="$B/bench/peers/mpi_allreduce"
MPI_PP="$B/bench/peers/mpi_pingpong"
for f in "$GW" "$BENCH"; do
    [ -x "$f" ] || { echo "latency.sh: $f is not built" >&2; exit 2; }
done
if [ ! -x "$MPI_AR" ] || [ ! -x "$MPI_PP" ] || ! command -v mpirun >/dev/null; then
    echo "skipped: Open MPI's drivers ($MPI_AR, $MPI_PP) or mpirun are missing (libopenmpi-dev openmpi-bin)" >&2
    exit 77
fi
CORES=$(nproc)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
MAXRANKS=2
for n in $RANKS; do [ "$n" -gt "$MAXRANKS" ] && MAXRANKS=$n; done
/usr/bin/python3 "$ROOT/bench/run_header.py" begin --command "$CMDLINE" --ranks "$MAXRANKS" >"$WORK/header.json"

btl() { [ "$1" = shm ] && echo vader,self || echo tcp,self; }
# Open MPI over TCP on loopback only, like gradwire's runs.
mpi_tcp_opts() { [ "$1" = tcp ] && echo "--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"; }

failed=0
runs=()
# run KIND LIB TRANSPORT RANKS BIND REP CMD...: one run, its JSON kept as
# WORK/KIND.LIB.TRANSPORT.RANKS.BIND.REP.json and listed in runs.
run() {
    local kind=$1 lib=$2 tr=$3 n=$4 bind=$5 rep=$6
    shift 6
    local out="$WORK/$kind.$lib.$tr.$n.$bind.$rep.json"
    echo "== $kind $lib $tr ranks $n bind $bind rep $rep (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    if timeout 600 "$@" --json "$out" >"$out.log" 2>&1 && [ -s "$out" ]; then
        runs+=("$out")
    else
        echo "latency.sh: $kind $lib $tr ranks $n bind $bind failed:" >&2
        tail -5 "$out.log" >&2
        echo "$kind $lib $tr ranks $n bind $bind rep $rep" >>"$WORK/failures"
        failed=1
    fi
}

for rep in $(seq 1 "$REPS"); do
    for n in $RANKS; do
        for bind in $BINDS; do
            if [ "$bind" = core ] && [ "$n" -gt "$CORES" ]; then
                echo "bound ranks $n > cores $CORES" >>"$WORK/skipped"
                continue
            fi
            mpibind=$([ "$bind" = core ] && echo core || echo none)
            for tr in $TRANSPORTS; do
                run allreduce gradwire "$tr" "$n" "$bind" "$rep" env GW_TRANSPORT="$tr" \
                    "$GW" launch -n "$n" --bind "$bind" -- "$BENCH" allreduce \
                    -b "$MINB" -e "$MAXB" -n "$ITERS" -w "$WARMUP" -c 0
                # shellcheck disable=SC2046
                run allreduce openmpi "$tr" "$n" "$bind" "$rep" mpirun --allow-run-as-root \
                    --oversubscribe -np "$n" --bind-to "$mpibind" --mca btl "$(btl "$tr")" \
                    $(mpi_tcp_opts "$tr") "$MPI_AR" -b "$MINB" -e "$MAXB" -n "$ITERS" \
                    -w "$WARMUP" -c 0
                for send in standard sync; do
                    [ "$n" = 2 ] || continue
                    run "pingpong-$send" gradwire "$tr" 2 "$bind" "$rep" env GW_TRANSPORT="$tr" \
                        GW_P2P_SEND="$send" "$GW" launch -n 2 --bind "$bind" -- "$BENCH" p2p \
                        -m lat -f 2 -b "$MINB" -e "$MAXB" -n "$ITERS" -w "$WARMUP" -c 0
                    # shellcheck disable=SC2046
                    run "pingpong-$send" openmpi "$tr" 2 "$bind" "$rep" mpirun --allow-run-as-root \
                        --oversubscribe -np 2 --bind-to "$mpibind" --mca btl "$(btl "$tr")" \
                        $(mpi_tcp_opts "$tr") "$MPI_PP" -b "$MINB" -e "$MAXB" -n "$ITERS" \
                        -w "$WARMUP" $([ "$send" = sync ] && echo --sync)
                done
            done
        done
    done
done

# Gather: one row per (kind, transport, ranks, bind, size) with each
# library's figure per repetition.
/usr/bin/python3 - "$WORK" "$ITERS" "$WARMUP" "$REPS" "$RANKS" "$BINDS" "$TRANSPORTS" "${runs[@]}" >"$WORK/data.json" <<'EOF'
import json, os, sys
work, iters, warmup, reps, ranks, binds, trs = sys.argv[1:8]
rows = {}
for path in sys.argv[8:]:
    kind, lib, tr, n, bind, rep = os.path.basename(path)[:-5].split(".")
    with open(path) as f:
        doc = json.load(f)
    for r in doc.get("results", []):
        if kind == "allreduce":
            size, t = r["size"], r["in_place"]["time_us"]["median"]
        else:
            size, t = r["bytes"], (r.get("lat_us") or {}).get("p50")
        if t is None:
            continue
        key = (kind, tr, int(n), bind, size)
        rows.setdefault(key, {"gradwire": [], "openmpi": []})[lib].append(t)
def read(name):
    p = os.path.join(work, name)
    return open(p).read().split("\n")[:-1] if os.path.exists(p) else []
results = [{"kind": k[0], "transport": k[1], "ranks": k[2], "bind": k[3], "size": k[4],
            "gradwire_us": v["gradwire"], "openmpi_us": v["openmpi"]}
           for k, v in sorted(rows.items())]
failures = read("failures")
print(json.dumps({"benchmark": "latency",
                  "params": {"iters": int(iters), "warmup": int(warmup), "reps": int(reps),
                             "ranks": [int(x) for x in ranks.split()], "binds": binds.split(),
                             "transports": trs.split(), "skipped": sorted(set(read("skipped")))},
                  "results": results, "ok": not failures, "failures": failures}))
EOF
if [ -n "$JSON" ]; then
    /usr/bin/python3 "$ROOT/bench/run_header.py" finish "$WORK/header.json" "$WORK/data.json" "$JSON" || exit 1
fi
/usr/bin/python3 - "$WORK/data.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
med = lambda v: sorted(v)[len(v) // 2] if v else None
print("# %-9s %-4s %5s %-4s %8s %12s %12s %8s" % ("kind", "tr", "ranks", "bind", "size", "gradwire_us", "openmpi_us", "ratio"))
for r in d["results"]:
    g, m = med(r["gradwire_us"]), med(r["openmpi_us"])
    print("  %-9s %-4s %5d %-4s %8d %12s %12s %8s" % (r["kind"], r["transport"], r["ranks"], r["bind"], r["size"],
          "%.2f" % g if g else "-", "%.2f" % m if m else "-", "%.2f" % (g / m) if g and m else "-"))
EOF
exit "$failed"
