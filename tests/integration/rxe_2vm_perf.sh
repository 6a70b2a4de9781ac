#!/usr/bin/env bash
# rxe_2vm_perf.sh - gradwire-bench p2p against perftest between two hosts:
# two Soft-RoCE VMs (scripts/rxe-vm cluster up 2), rank 0 / the perftest
# client in rxevm0, rank 1 / the server in rxevm1, over the virtio-net link
# between them. Rounds alternate, ib_write_bw, gradwire, ib_write_bw, ...,
# and the same for latency (ib_write_lat, gradwire -m lat, both
# busy-polling; gradwire's sends synchronous, its default, then standard,
# GW_P2P_SEND=standard), so that what the host's load does between rounds falls on
# both; each gradwire round is divided by the geometric mean of the
# perftest rounds either side of it. Prints every round and the median of
# the paired ratios. Bandwidth is judged, at 1 MiB and 2 MiB: the median of
# the paired ratios must reach GW_RXE_PERF_BW_TARGET (default 0.95, the
# issue's target); latency is reported (target 1.1x ib_write_lat, not
# judged; GW_RXE_PERF_LATENCY=0 skips it). The VMs run without KVM: the
# figures compare the two programs over the same link, never absolutes.
#
# Usage: rxe_2vm_perf.sh [BUILD_DIR [ROUNDS]]   (default ./build, 5 rounds)
# GW_RXE_PERF_SIZES: the bandwidth sizes in bytes (default "1048576
# 2097152", the judged ones; a size under 1 MiB is measured, not judged).
# GW_RXE_PERF_TSV=FILE appends one line per sandwich (what, bytes, the
# perftest rounds, the gradwire rounds, the paired ratios; comma-separated)
# for bench/soft_roce.sh, which writes the results JSON from it.
# GW_RXE_2VM_CLUSTER=DIR uses running VMs (booted with --ro of the source
# tree and the build, so that they see the current binaries).
# Exit status: 0 the bandwidth target met, 2 not met, 1 a program failed,
# 77 no VM possible here.
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM="$ROOT/scripts/rxe-vm"
BUILD=$(cd "${1:-$ROOT/build}" 2>/dev/null && pwd) || { echo "skipped: no build directory"; exit 77; }
ROUNDS=${2:-5}
# The bandwidth target (#13): gradwire's median paired ratio at 1 MiB and
# 2 MiB must reach it; below it the script exits 2.
BW_TARGET=${GW_RXE_PERF_BW_TARGET:-0.95}
[ -x "$BUILD/gradwire-bench" ] || { echo "skipped: $BUILD/gradwire-bench is not built"; exit 77; }

if [ -n "${GW_RXE_2VM_CLUSTER:-}" ]; then
    cdir=$GW_RXE_2VM_CLUSTER
else
    cdir=$("$VM" cluster up --no-install --lifetime 900 --ro "$ROOT" --ro "$BUILD" 2)
    rc=$?
    [ $rc -eq 77 ] && { echo "skipped: scripts/rxe-vm cannot start VMs here"; exit 77; }
    [ $rc -eq 0 ] || { echo "the two VMs did not boot"; exit 1; }
    # shellcheck disable=SC2064
    trap "'$VM' cluster down --dir '$cdir'" EXIT
fi
export GW_RXE_CLUSTER=$cdir
W=$cdir/shared/perf
mkdir -p "$W"
PORT=18600 JOB=0

perftest() { # TOOL ARGS...: server in rxevm1, client in rxevm0; the client's output in $W/TOOL
    local tool=$1
    shift
    PORT=$((PORT + 1))
    "$VM" cluster exec --timeout 150 1 -- "$tool" -d rxe0 -x 1 -F -p $PORT "$@" >"$W/$tool.server" 2>&1 &
    local spid=$!
    # The client gives up at once when nobody listens yet: try again.
    "$VM" cluster exec --timeout 150 0 -- bash -c \
        'for i in $(seq 40); do "$@" && exit 0; sleep 0.5; done; exit 1' _ \
        "$tool" -d rxe0 -x 1 -F -p $PORT "$@" 198.18.2.2 >"$W/$tool" 2>&1
    local rc=$?
    wait $spid || rc=1
    return $rc
}
gwbench() { # ARGS...: 2 ranks, one per VM; JSON in $W/gw.json
    JOB=$((JOB + 1))
    local token pids=() r rc=0
    token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    for r in 0 1; do
        GW_RANK=$r GW_SIZE=2 GW_ROOT=198.18.2.1:$((29900 + JOB)) GW_JOB_TOKEN=$token GW_TRANSPORT=ib \
            "$VM" cluster exec --timeout 150 $r -- "$BUILD/gradwire-bench" p2p --json "$W/gw.json" "$@" \
            >"$W/gw$r.out" 2>&1 &
        pids+=($!)
    done
    for r in 0 1; do wait "${pids[$r]}" || rc=1; done
    return $rc
}
json_num() { sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -1; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }

# Bandwidth at BW_BYTES (set per sandwich; GW_RXE_PERF_MIB MiB a round,
# default 8): ib_write_bw's BW average
# (MB/s, 2^20 bytes) as GB/s; gradwire's unidirectional GB/s, same window.
BW_BYTES=1048576 BW_ITERS=8 GW_RXE_PERF_MIB=${GW_RXE_PERF_MIB:-8}
bw_ib() { perftest ib_write_bw -s $BW_BYTES -n $BW_ITERS && awk -v b=$BW_BYTES '$1 == b {printf "%.6f", $4 * 1048576 / 1e9}' "$W/ib_write_bw"; }
bw_gw() { gwbench -b $BW_BYTES -e $BW_BYTES -n $BW_ITERS -w 2 -W 16 -m uni -c 0 && json_num "$W/gw.json" uni_GBps; }
lat_ib() { perftest ib_write_lat -s 8 -n 100 && awk '$1 == 8 {print $5}' "$W/ib_write_lat"; }
lat_gw() { GW_IB_SPIN_US=1000000 gwbench -b 8 -e 8 -n 100 -w 5 -m lat -c 0 && json_num "$W/gw.json" p50; }
# The same with standard sends (GW_P2P_SEND=standard: no receipt, as
# MPI_Send and as perftest's writes), the like of ib_write_lat.
lat_gw_std() { GW_P2P_SEND=standard lat_gw; }

# sandwich NAME IB GW KIND BYTES: ROUNDS of GW between ROUNDS+1 of IB; ratios GW / geomean(IB neighbours)
sandwich() {
    local name=$1 ibf=$2 gwf=$3 prev next gw round ratios=() ibs=() gws=()
    prev=$($ibf) || prev=
    [ -n "$prev" ] && ibs+=("$prev")
    for round in $(seq "$ROUNDS"); do
        gw=$($gwf) || gw=
        next=$($ibf) || next=
        [ -n "$next" ] && ibs+=("$next")
        if [ -n "$prev" ] && [ -n "$next" ] && [ -n "$gw" ]; then
            gws+=("$gw")
            ratios+=("$(awk -v g="$gw" -v a="$prev" -v b="$next" 'BEGIN {print g / sqrt(a * b)}')")
            echo "   $name round $round: perftest $prev and $next, gradwire $gw: ratio ${ratios[-1]}"
        else
            echo "   $name round $round: no figure (perftest '$prev' '$next', gradwire '$gw')"
            tail -n 3 "$W"/gw0.out "$W"/ib_write_* 2>/dev/null
        fi
        [ -n "$next" ] && prev=$next
    done
    [ ${#ratios[@]} -gt 0 ] || return 1
    MEDIAN_RATIO=$(printf '%s\n' "${ratios[@]}" | median)
    if [ -n "${GW_RXE_PERF_TSV:-}" ]; then
        local IFS=,
        printf '%s\t%s\t%s\t%s\t%s\n' "$4" "$5" "${ibs[*]}" "${gws[*]}" "${ratios[*]}" >>"$GW_RXE_PERF_TSV"
    fi
    echo "== $name, ${#ratios[@]} rounds: median perftest $(printf '%s\n' "${ibs[@]}" | median), median gradwire $(printf '%s\n' "${gws[@]}" | median), median ratio $MEDIAN_RATIO"
}

echo "== load before: $(cat /proc/loadavg)"
ok=0
# 8 MiB a round: the link between two KVM-less VMs on a loaded 2-core
# machine moved 0.5 MB/s (2026-12-02, load 17), where 50 MiB rounds took
# minutes each. Every message is in flight at once in both programs.
for BW_BYTES in ${GW_RXE_PERF_SIZES:-1048576 2097152}; do
    BW_ITERS=$((GW_RXE_PERF_MIB * 1048576 / BW_BYTES))
    [ $BW_ITERS -ge 5 ] || BW_ITERS=5 # ib_write_bw's least
    if ! sandwich "bandwidth $BW_BYTES B (GB/s)" bw_ib bw_gw bandwidth "$BW_BYTES"; then
        ok=1
    elif [ "$BW_BYTES" -lt 1048576 ]; then
        echo "   bandwidth at $BW_BYTES B: median paired ratio $MEDIAN_RATIO (below 1 MiB: reported, not judged)"
    elif ! awk -v r="$MEDIAN_RATIO" -v t="$BW_TARGET" 'BEGIN {exit !(r >= t)}'; then
        echo "FAIL: bandwidth at $((BW_BYTES >> 20)) MiB: median paired ratio $MEDIAN_RATIO < $BW_TARGET"
        judged=1
    else
        echo "PASS: bandwidth at $((BW_BYTES >> 20)) MiB: median paired ratio $MEDIAN_RATIO >= $BW_TARGET"
    fi
done
if [ "${GW_RXE_PERF_LATENCY:-1}" = 1 ]; then
    sandwich "latency 8 B (us; ib_write_lat typical, gradwire p50)" lat_ib lat_gw latency 8 || ok=1
    echo "   latency: median ratio $MEDIAN_RATIO (target 1.1, reported, not judged)"
    sandwich "latency 8 B, standard sends (us; ib_write_lat typical, gradwire p50)" lat_ib lat_gw_std \
        latency-standard 8 || ok=1
    echo "   latency, standard sends: median ratio $MEDIAN_RATIO (reported, not judged)"
fi
echo "== load after: $(cat /proc/loadavg)"
[ $ok = 0 ] && [ "${judged:-0}" = 1 ] && exit 2
exit $ok
