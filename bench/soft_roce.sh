#!/usr/bin/env bash
# soft_roce.sh - gradwire over verbs against perftest between two
# Soft-RoCE VMs, as a results campaign: tests/integration/rxe_2vm_perf.sh
# (two VMs booted by scripts/rxe-vm, rank 0 / the perftest client in one,
# rank 1 / the server in the other) at each bandwidth size, with rounds of
# ib_write_bw and gradwire-bench p2p alternating so that the host's load
# falls on both, and the 8-byte latency against ib_write_lat. Each gradwire
# round is divided by the geometric mean of the perftest rounds either side
# of it; the page shows the median of those paired ratios. The VMs run
# without KVM: compare the ratio, never the absolute figures.
#
#   bench/soft_roce.sh [--build DIR] [--rounds N] [--sizes "B..."] [--mib M]
#                      [--no-latency] --json FILE
#     --sizes   bandwidth message sizes in bytes (default "262144 1048576
#               2097152"); --mib: MiB moved per round (default 8)
# Exit status: 0 (the bandwidth target of rxe_2vm_perf.sh met or not: the
# JSON says which), 1 a program failed, 2 usage, 77 no VM possible here.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CMDLINE=$(/usr/bin/python3 -c 'import shlex, sys; print(shlex.join(sys.argv[1:]))' "$0" "$@")
build=build rounds=3 sizes="262144 1048576 2097152" mib=8 lat=1 json=""
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --sizes) sizes=${2:?}; shift 2 ;;
    --mib) mib=${2:?}; shift 2 ;;
    --no-latency) lat=0; shift ;;
    --json) json=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "soft_roce.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[ -n "$json" ] || { echo "soft_roce.sh: --json FILE is required" >&2; exit 2; }
for s in $sizes; do
    case "$s" in '' | *[!0-9]*) echo "soft_roce.sh: --sizes wants byte counts, not '$s'" >&2; exit 2 ;; esac
done
work=$(mktemp -d /tmp/gw-softroce-XXXXXX)
trap 'rm -rf "$work"' EXIT
"$ROOT/bench/run_header.py" begin --command "$CMDLINE" >"$work/header.json" || exit 1
# The VMs are booted here, with a lifetime for the whole campaign:
# rxe_2vm_perf.sh's own cluster lives 900 s, and on a loaded machine, where
# the KVM-less link moves well under 1 MB/s, the rounds of three sizes and
# the latency took longer than that (the last sizes' rounds then failed).
if [ -z "${GW_RXE_2VM_CLUSTER:-}" ]; then
    BUILD_ABS=$(cd "$build" 2>/dev/null && pwd) || { echo "soft_roce.sh: no build directory $build" >&2; exit 1; }
    cdir=$("$ROOT/scripts/rxe-vm" cluster up --no-install --lifetime "${GW_SOFT_ROCE_LIFETIME:-2700}" \
        --ro "$ROOT" --ro "$BUILD_ABS" 2)
    vrc=$?
    [ $vrc -eq 77 ] && { echo "skipped: scripts/rxe-vm cannot start VMs here"; exit 77; }
    [ $vrc -eq 0 ] || { echo "soft_roce.sh: the two VMs did not boot" >&2; exit 1; }
    trap '"$ROOT/scripts/rxe-vm" cluster down --dir "$cdir"; rm -rf "$work"' EXIT
    export GW_RXE_2VM_CLUSTER=$cdir
fi
GW_RXE_PERF_TSV="$work/rounds.tsv" GW_RXE_PERF_SIZES="$sizes" GW_RXE_PERF_MIB="$mib" \
    GW_RXE_PERF_LATENCY="$lat" "$ROOT/tests/integration/rxe_2vm_perf.sh" "$build" "$rounds" | tee "$work/log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 77 ] && exit 77
[ -s "$work/rounds.tsv" ] || { echo "soft_roce.sh: no round measured (status $rc)" >&2; exit 1; }
/usr/bin/python3 - "$work/rounds.tsv" "$work/data.json" "$rc" "$rounds" "$mib" <<'PY' || exit 1
import json, sys
tsv, out, rc, rounds, mib = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
import math
nums = lambda s: [float(x) for x in s.split(",") if x]
results = []
for line in open(tsv):
    kind, size, ib, gw, ratios = line.rstrip("\n").split("\t")
    # A perftest round that reported 0 (ib_write_bw's average printed as
    # 0.000000 GB/s) failed: it and the infinite ratio it made are dropped.
    ib_ok = [v for v in nums(ib) if v > 0]
    r_ok = [v for v in nums(ratios) if math.isfinite(v) and v > 0]
    results.append({"kind": kind, "size": int(size), "perftest": ib_ok, "gradwire": nums(gw),
                    "ratios": r_ok, "dropped": len(nums(ratios)) - len(r_ok) + len(nums(ib)) - len(ib_ok)})
json.dump({"benchmark": "soft-roce", "params": {"rounds": rounds, "mib_per_round": mib,
           "transport": "ib (rxe0, Soft-RoCE)", "hosts": 2},
           "ok": rc in (0, 2), "target_met": rc == 0,
           "failures": [] if rc in (0, 2) else ["rxe_2vm_perf.sh exited %d" % rc],
           "results": results}, open(out, "w"), indent=1)
PY
"$ROOT/bench/run_header.py" finish "$work/header.json" "$work/data.json" "$json" || exit 1
[ "$rc" -eq 2 ] && exit 0
exit "$rc"
