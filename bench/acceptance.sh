#!/usr/bin/env bash
# acceptance.sh - how long `gradwire check` takes, phase by phase, as a
# benchmark: for each host count, N emulated hosts (scripts/cluster.sh,
# each link shaped to RATE), one rank per host under `gradwire launch
# --hosts`, and `gradwire check --quick --json`. Rank 0's progress lines
# carry the seconds since the check began, so each phase's time is the
# difference between the lines that close it: host sanity (joined and
# gathered), the link matrix (its circle rounds), the retests of suspect
# links and hosts, and the allreduce; the total is the report's elapsed_s.
# The JSON keeps these with the check's verdict, its plan, and what it
# measured of the links and the allreduce against the link's rate.
#
#   bench/acceptance.sh [--build DIR] [--hosts "N..."] [--rate R]
#                       [--coll-size BYTES] --json FILE
#   defaults: build, hosts "4 8", rate 1gbit, the check's own --coll-size.
# Needs root and network namespaces: exits 77 (skipped) otherwise.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CMDLINE=$(/usr/bin/python3 -c 'import shlex, sys; print(shlex.join(sys.argv[1:]))' "$0" "$@")
build=build hosts="4 8" rate=1gbit coll="" json=""
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=${2:?}; shift 2 ;;
    --hosts) hosts=${2:?}; shift 2 ;;
    --rate) rate=${2:?}; shift 2 ;;
    --coll-size) coll=${2:?}; shift 2 ;;
    --json) json=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "acceptance.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[ -n "$json" ] || { echo "acceptance.sh: --json FILE is required" >&2; exit 2; }
for n in $hosts; do
    case "$n" in '' | *[!0-9]* | 0 | 1) echo "acceptance.sh: --hosts wants counts of 2 or more, not '$n'" >&2; exit 2 ;; esac
done
[ "$(id -u)" -eq 0 ] || { echo "skipped: needs root (network namespaces)"; exit 77; }
GW=$(cd "$build" && pwd)/gradwire
[ -x "$GW" ] || { echo "acceptance.sh: $GW is not built" >&2; exit 1; }
probe="gwacprobe$$x"
ip netns add "$probe" 2>/dev/null || { echo "skipped: cannot create network namespaces here"; exit 77; }
ip netns del "$probe"

PREFIX=gwac$$x
WORK=$(mktemp -d /tmp/gw-accept-XXXXXX)
trap '"$ROOT/scripts/cluster.sh" --prefix "$PREFIX" down >/dev/null 2>&1; rm -rf "$WORK"' EXIT
"$ROOT/bench/run_header.py" begin --command "$CMDLINE" >"$WORK/header.json" || exit 1
for n in $hosts; do
    "$ROOT/scripts/cluster.sh" --prefix "$PREFIX" up "$n" --rate "$rate" >"$WORK/cluster.$n" 2>&1 || {
        cat "$WORK/cluster.$n" >&2
        echo "acceptance.sh: cannot bring up $n emulated hosts" >&2
        exit 1
    }
    extra=()
    [ -z "$coll" ] || extra=(--coll-size "$coll")
    echo "== gradwire check --quick on $n hosts at $rate"
    "$GW" launch --hosts "$PREFIX" -n "$n" -- "$GW" check --quick --json "$WORK/check.$n.json" "${extra[@]}" \
        >"$WORK/check.$n.log" 2>&1
    echo "exit $?" >>"$WORK/check.$n.log"
    grep '\[check\|^exit\|verdict' "$WORK/check.$n.log" | sed 's/^\[ *0\] //'
    "$ROOT/scripts/cluster.sh" --prefix "$PREFIX" down >/dev/null 2>&1
done
/usr/bin/python3 - "$WORK" "$rate" "$hosts" <<'PY' || exit 1
import json, os, re, sys
work, rate, hosts = sys.argv[1], sys.argv[2], [int(h) for h in sys.argv[3].split()]
m = re.match(r"([0-9.]+)(gbit|mbit)$", rate)
link_gbps = float(m.group(1)) / (1 if m.group(2) == "gbit" else 1000) / 8 if m else None  # GB/s
results, failures = [], []
for n in hosts:
    log = open(os.path.join(work, "check.%d.log" % n)).read()
    exit_status = int(re.findall(r"^exit (\d+)$", log, re.M)[-1])
    try:
        rep = json.load(open(os.path.join(work, "check.%d.json" % n)))
    except (OSError, ValueError):
        failures.append("%d hosts: no report (gradwire check exited %d)" % (n, exit_status))
        continue
    if rep.get("verdict") is None:
        failures.append("%d hosts: %s" % (n, rep.get("error")))
        continue
    marks = [(float(t), what) for t, what in re.findall(r"\[check +([0-9.]+)s\] (.*)", log)]
    host_t = next((t for t, w in marks if " hosts over " in w), 0.0)
    rounds = [t for t, w in marks if w.startswith("matrix round")]
    matrix_t = rounds[-1] if rounds else host_t
    coll_t = next((t for t, w in marks if w.startswith("allreduce of")), None)
    total = rep["elapsed_s"]
    retest_end = coll_t if coll_t is not None else total
    phases = {"host sanity": host_t, "link matrix": matrix_t - host_t, "retests": retest_end - matrix_t,
              "collectives": total - coll_t if coll_t is not None else 0.0}
    ref, ar = rep.get("reference_cross_host") or {}, rep.get("allreduce") or {}
    results.append({"hosts": n, "ranks": rep.get("ranks"), "verdict": rep["verdict"], "exit_status": exit_status,
                    "transport": rep.get("transport"), "elapsed_s": total, "phases_s": phases,
                    "rounds": (rep.get("plan") or {}).get("rounds_planned"),
                    "links": len(rep.get("links") or []),
                    "link_bw_GBps": ref.get("bw_GBps"), "link_lat_p50_us": ref.get("lat_p50_us"),
                    "allreduce_busbw_GBps": ar.get("busbw_GBps"), "allreduce_bytes": ar.get("bytes"),
                    "allreduce_lat_8B_us": ar.get("lat_8B_us")})
json.dump({"benchmark": "acceptance", "params": {"hosts": hosts, "rate": rate, "link_GBps": link_gbps,
           "check": "--quick"}, "ok": not failures, "failures": failures, "results": results},
          open(os.path.join(work, "data.json"), "w"), indent=1)
PY
"$ROOT/bench/run_header.py" finish "$WORK/header.json" "$WORK/data.json" "$json" || exit 1
