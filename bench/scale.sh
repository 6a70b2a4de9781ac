#!/usr/bin/env bash
# bench/scale.sh - the cost of creating a communicator at 8..64 ranks on
# one host: for each size, transport and connection mode,
# `gradwire launch -n N` runs tests/worker_scale time, which reports the
# maximum over the ranks of the time from before gw_comm_init to the end
# of the first collective (a ring allreduce) and after an alltoall, and
# the file descriptors and resident memory per rank (max/mean).
#
# Usage: bench/scale.sh [--json FILE] [BUILD_DIR] [SIZES] [REPEATS]
#   defaults: build "8 16 32 64" 3. Prints the machine load first.
#   GW_SCALE_TRANSPORTS: the GW_TRANSPORT values to run (default "tcp auto";
#   "ib" in a Soft-RoCE VM: scripts/rxe-vm -- bench/scale.sh ...).
#   --json FILE: also every run's figures as JSON with the run header
#   (bench/run_header.py; scripts/results.sh scale renders it).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CMDLINE=$(/usr/bin/python3 -c 'import shlex, sys; print(shlex.join(sys.argv[1:]))' "$0" "$@")
json=""
args=()
while [ $# -gt 0 ]; do
    case "$1" in
    --json) json=${2:?--json needs a file}; shift 2 ;;
    *) args+=("$1"); shift ;;
    esac
done
build=${args[0]:-build}
sizes=${args[1]:-"8 16 32 64"}
repeats=${args[2]:-3}
transports=${GW_SCALE_TRANSPORTS:-tcp auto}
work=$(mktemp -d /tmp/gw-scale-XXXXXX)
trap 'rm -rf "$work"' EXIT
[ -z "$json" ] || "$ROOT/bench/run_header.py" begin --command "$CMDLINE" >"$work/header.json"
echo "load: $(cat /proc/loadavg)"
for n in $sizes; do
    for tr in $transports; do
        for mode in eager lazy; do
            i=0
            while [ "$i" -lt "$repeats" ]; do
                line=$(GW_TRANSPORT=$tr GW_CONNECT=$mode GW_TIMEOUT_MS=60000 \
                    "$build/gradwire" launch -n "$n" -- "$build/tests/worker_scale" time 2>&1 |
                    grep 'scale:' | sed 's/^\[ *0\] //') || line="FAILED"
                echo "GW_TRANSPORT=$tr GW_CONNECT=$mode $line" | tee -a "$work/lines"
                i=$((i + 1))
            done
        done
    done
done
echo "load: $(cat /proc/loadavg)"
[ -n "$json" ] || exit 0
/usr/bin/python3 - "$work/lines" "$work/data.json" "$sizes" "$transports" "$repeats" <<'PY'
import json, re, sys
lines, out = sys.argv[1], sys.argv[2]
results, failures = [], []
for line in open(lines):
    m = re.match(r"GW_TRANSPORT=(\S+) GW_CONNECT=(\S+) (.*)", line.strip())
    tr, mode, rest = m.groups()
    if not rest.startswith("scale:"):
        failures.append("%s %s: %s" % (tr, mode, rest[:100]))
        continue
    kv = dict(re.findall(r"(\w+)=(\S+)", rest))
    def mx(k):  # "max/mean" pairs: the maximum over the ranks
        return float(kv[k].split("/")[0])
    results.append({"ranks": int(kv["n"]), "transport": tr, "connect": mode, "picked": kv["transport"],
                    "init_ms": float(kv["init_ms"]), "first_coll_ms": float(kv["first_coll_ms"]),
                    "alltoall_ms": float(kv["alltoall_ms"]), "fds_all_max": mx("fds_all"),
                    "rss_all_kb_max": mx("rss_all_kb")})
json.dump({"benchmark": "scale", "params": {"sizes": sys.argv[3].split(), "transports": sys.argv[4].split(),
           "repeats": int(sys.argv[5])}, "ok": not failures, "failures": failures, "results": results},
          open(out, "w"), indent=1)
PY
"$ROOT/bench/run_header.py" finish "$work/header.json" "$work/data.json" "$json"
