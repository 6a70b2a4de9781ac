#!/usr/bin/env bash
# rxe_vm_test.sh - the InfiniBand verbs transport on the real kernel verbs
# stack: Soft-RoCE (rdma_rxe) in a QEMU VM started by scripts/rxe-vm, which
# runs this same script inside with --inside. There it runs, over rxe0:
#   - the transport's device tests (test_ib_live): messages between
#     transports over rxe0 (sizes, striping, eager messages, mismatches,
#     abort, goodbye, the registration cache and its invalidation of
#     remapped memory), and the point-to-point API over ib (test_ib_p2p);
#   - allreduce (ring, tree, recursive doubling), broadcast and allgather on
#     2, 3 and 4 ranks under `gradwire launch` with GW_TRANSPORT=ib, both
#     connection modes, one and several QPs per peer; results checked
#     against a serial reference and bitwise across ranks;
#   - fault cases: a mismatched count, a peer killed between collectives and
#     one killed in the middle of one (the survivors get an error, none
#     hangs), and the port going down under a running job (async event);
#   - gradwire-bench p2p side by side with perftest's ib_write_bw and
#     ib_write_lat on the same device, reporting the ratios (no assertion on
#     speed: the VM runs without KVM, and these figures only compare).
#
# The unit tests of the transport that need no RDMA (test_ib_hca, _wire,
# _mr_cache, _load) run on the host with the rest of the suite.
#
# Usage: rxe_vm_test.sh [BUILD_DIR]   (default: ./build of the source tree)
# Exit status: 0 all passed, 1 a check failed, 77 skipped (no VM possible
# here, or this build does not offer GW_TRANSPORT=ib), with the reason.
# GW_RXE_VM_TIMEOUT limits the part inside the VM (default 450 s; booting
# and shutting down add well under a minute).
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SELF="$ROOT/tests/integration/rxe_vm_test.sh"

if [ "${1:-}" != "--inside" ]; then
    BUILD=$(cd "${1:-$ROOT/build}" 2>/dev/null && pwd) || { echo "skipped: no build directory ${1:-$ROOT/build}"; exit 77; }
    for f in gradwire gradwire-bench tests/worker_collectives tests/worker_faults tests/test_ib_live \
        tests/test_ib_p2p; do
        [ -x "$BUILD/$f" ] || { echo "skipped: $BUILD/$f is not built"; exit 77; }
    done
    # The transport selection must know GW_TRANSPORT=ib (transport/select.c).
    probe=$(GW_TRANSPORT=ib GW_RANK=0 GW_SIZE=1 "$BUILD/tests/worker_collectives" /nonexistent 0 ring float32 sum allreduce 2>&1)
    if echo "$probe" | grep -q "not available in this build"; then
        echo "skipped: this build does not offer GW_TRANSPORT=ib:"
        echo "$probe" | head -3
        exit 77
    fi
    timeout=${GW_RXE_VM_TIMEOUT:-450}
    "$ROOT/scripts/rxe-vm" --timeout "$timeout" -- "$SELF" --inside "$BUILD"
    rc=$?
    [ $rc -eq 77 ] && echo "skipped: scripts/rxe-vm cannot start a VM here (reason above)"
    exit $rc
fi

# ---- inside the VM ----------------------------------------------------------

BUILD=$2
T0=$(date +%s)
WORK=$(mktemp -d /tmp/rxe-test.XXXXXX)
passed=0
failed=0
failures=()

pass() {
    echo "PASS: $* ($(($(date +%s) - T0)) s)"
    passed=$((passed + 1))
}
fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
    failures+=("$*")
}

# The transport's tests that need the device (the other test_ib_* need no
# RDMA and run with the rest of the suite on the host); test_ib_p2p, the
# point-to-point API, runs here over ib.
for t in test_ib_live test_ib_p2p; do
    out=$(GW_TRANSPORT=ib timeout 300 "$BUILD/tests/$t" --jobs 1 --verbose=0 2>&1)
    rc=$?
    summary=$(echo "$out" | grep "Synthesis" | tail -1)
    if [ $rc -eq 0 ] && echo "$summary" | grep -q "Failing: 0 | Crashing: 0"; then
        if echo "$out" | grep -q "SKIP"; then
            fail "$t skipped tests on the device: $(echo "$out" | grep SKIP | head -1)"
        else
            pass "$t: ${summary#*Synthesis: }"
        fi
    else
        fail "$t (status $rc)"
        echo "$out" | tail -30
    fi
done

# Collectives under `gradwire launch`: NAME N CM QPS COUNTS DTYPES
collectives() {
    local name=$1 n=$2 cm=$3 qps=$4 counts=$5 dtypes=$6 colls=allreduce,broadcast,allgather
    local dir="$WORK/$name"
    mkdir -p "$dir"
    local out rc
    out=$(GW_TRANSPORT=ib GW_IB_CM=$cm GW_IB_QPS=$qps GW_TIMEOUT_MS=60000 \
        timeout 240 "$BUILD/gradwire" launch -n "$n" -- "$BUILD/tests/worker_collectives" "$dir" \
        "$counts" ring,tree,rd "$dtypes" sum,max "$colls" 2>&1)
    rc=$?
    if [ $rc -ne 0 ]; then
        fail "$name: launch status $rc"
        echo "$out" | tail -20
        return
    fi
    local r
    for r in $(seq 1 $((n - 1))); do
        if ! cmp -s "$dir/rank0" "$dir/rank$r"; then
            fail "$name: rank $r's results differ bitwise from rank 0's"
            return
        fi
    done
    if [ ! -s "$dir/rank0" ]; then
        fail "$name: no results written"
        return
    fi
    pass "$name: $(wc -l <"$dir/rank0") results, bitwise equal on $n ranks"
}

collectives "2 ranks, rdmacm" 2 rdmacm 1 "0,1,7,1023,70000" float32,int32
collectives "3 ranks, oob, 2 QPs (striped)" 3 oob 2 "0,7,200000" float32
collectives "4 ranks, rdmacm, 2 QPs" 4 rdmacm 2 "0,1,1023,70000" float32,int32

# The transport really is ib: the selection's INFO line says so.
out=$(GW_DEBUG=INFO GW_TRANSPORT=ib timeout 120 "$BUILD/gradwire" launch -n 2 -- \
    "$BUILD/tests/worker_collectives" "$WORK/sel" 1 ring float32 sum allreduce 2>&1)
if echo "$out" | grep -q "connected over ib"; then
    pass "GW_TRANSPORT=ib connects over ib ($(echo "$out" | grep -o 'using rxe0[^,]*' | head -1))"
else
    fail "GW_TRANSPORT=ib did not connect over ib"
    echo "$out" | tail -10
fi

# Faults: MODE N EXPECTED-STATUS
faults() {
    local mode=$1 n=$2 want=$3
    local start out rc
    start=$(date +%s)
    out=$(GW_TRANSPORT=ib GW_TIMEOUT_MS=120000 timeout 200 "$BUILD/gradwire" launch -n "$n" -- \
        "$BUILD/tests/worker_faults" "$mode" 2>&1)
    rc=$?
    local took=$(($(date +%s) - start))
    local r missing=""
    for r in $(seq 0 $((n - 1))); do
        case "$mode" in kill | killmid) [ "$r" = 1 ] && continue ;; esac
        echo "$out" | grep -q "rank $r: GW_ERR_" || missing="$missing $r"
    done
    if [ $rc -eq 124 ]; then
        fail "fault $mode: hung (killed after 200 s)"
    elif [ -n "$missing" ]; then
        fail "fault $mode: ranks$missing reported no error"
        echo "$out" | tail -15
    elif ! echo "$out" | grep -q "$want"; then
        fail "fault $mode: no $want"
        echo "$out" | tail -15
    else
        pass "fault $mode on $n ranks: $(echo "$out" | grep -o 'rank [0-9]*: GW_ERR_[A-Z_]*' | sort -u | tr '\n' ' ')in ${took} s"
    fi
}

faults count 3 GW_ERR_MISMATCH
GW_IB_CM=oob faults kill 3 GW_ERR_REMOTE
faults kill 3 GW_ERR_REMOTE
faults killmid 3 GW_ERR_

# p2p against perftest on the same device, side by side. No assertion on
# speed: the VM has no KVM and shares its host; the ratios only compare.
gid=${GW_RXE_GID_INDEX:-1}
perftest() { # TOOL ARGS...: server in the background, client against 127.0.0.1
    local tool=$1
    shift
    timeout 120 "$tool" -d rxe0 -x "$gid" -F "$@" >"$WORK/$tool.server" 2>&1 &
    local spid=$!
    sleep 1
    timeout 120 "$tool" -d rxe0 -x "$gid" -F "$@" 127.0.0.1 >"$WORK/$tool.client" 2>&1
    local rc=$?
    wait $spid
    return $rc
}
bench() { # NAME ARGS...
    local name=$1
    shift
    GW_TRANSPORT=ib timeout 240 "$BUILD/gradwire" launch -n 2 -- "$BUILD/gradwire-bench" p2p \
        --json "$WORK/$name.json" "$@" >"$WORK/$name.out" 2>&1
}
json_num() { # FILE KEY: the first value of KEY
    sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -1
}
BW_SIZE=1048576
if bench check -b 0 -e 1M -f 64 -n 3 -w 1 -c 1; then
    pass "gradwire-bench p2p over ib, checked: $(grep -o 'wrong bytes: [0-9]*' "$WORK/check.out")"
else
    fail "gradwire-bench p2p over ib, checked run"
    tail -10 "$WORK/check.out"
fi
ib_bw= ib_lat= ib_lat_min= gw_bw= gw_bibw= gw_lat= gw_lat_min=
perftest ib_write_bw -s $BW_SIZE -n 100 --report_gbits &&
    ib_bw=$(awk -v s=$BW_SIZE '$1 == s {print $4}' "$WORK/ib_write_bw.client")
bench bw -b $BW_SIZE -e $BW_SIZE -n 50 -w 5 -m uni,bidir -c 0 &&
    gw_bw=$(json_num "$WORK/bw.json" uni_GBps) && gw_bibw=$(json_num "$WORK/bw.json" bidir_GBps)
perftest ib_write_lat -s 8 -n 300 &&
    ib_lat=$(awk '$1 == 8 {print $5}' "$WORK/ib_write_lat.client") &&
    ib_lat_min=$(awk '$1 == 8 {print $3}' "$WORK/ib_write_lat.client")
# ib_write_lat busy-polls; so does gradwire here (it would sleep after 50 us).
GW_IB_SPIN_US=1000000 bench lat -b 8 -e 8 -n 300 -w 10 -m lat -c 0 &&
    gw_lat=$(json_num "$WORK/lat.json" p50) && gw_lat_min=$(json_num "$WORK/lat.json" min)
echo "== p2p vs perftest on rxe0, side by side (TCG VM: the figures compare, they do not measure hardware)"
if [ -n "$ib_bw" ] && [ -n "$gw_bw" ]; then
    awk -v g="$gw_bw" -v b="$gw_bibw" -v i="$ib_bw" -v s=$BW_SIZE 'BEGIN {
        printf "   bandwidth, %d-byte messages: gradwire %.4f GB/s (bidirectional %.4f), ib_write_bw %.4f GB/s (%.3f Gb/s): ratio %.2f\n",
            s, g, b, i / 8, i, g / (i / 8) }'
    pass "bandwidth compared with ib_write_bw"
else
    fail "bandwidth comparison (ib_write_bw: '${ib_bw}', gradwire: '${gw_bw}')"
    tail -5 "$WORK/ib_write_bw.client" "$WORK/bw.out"
fi
if [ -n "$ib_lat" ] && [ -n "$gw_lat" ]; then
    awk -v g="$gw_lat" -v i="$ib_lat" -v gm="$gw_lat_min" -v im="$ib_lat_min" 'BEGIN {
        printf "   latency, 8-byte messages, both busy-polling: gradwire p50 %.2f us, ib_write_lat typical %.2f us: ratio %.2f\n", g, i, g / i
        printf "   latency minimum (least disturbed by the host): gradwire %.2f us, ib_write_lat %.2f us: ratio %.2f\n", gm, im, gm / im }'
    pass "latency compared with ib_write_lat"
else
    fail "latency comparison (ib_write_lat: '${ib_lat}', gradwire: '${gw_lat}')"
    tail -5 "$WORK/ib_write_lat.client" "$WORK/lat.out"
fi

# Port down: the device's async event must fail the job, not leave it
# waiting. The link goes down once the benchmark has printed its first row.
out="$WORK/portdown.out"
GW_TRANSPORT=ib GW_TIMEOUT_MS=120000 timeout 150 "$BUILD/gradwire" launch -n 2 -- \
    "$BUILD/gradwire-bench" allreduce -b 8 -e 1G -f 2 -n 20 -w 1 -c 0 >"$out" 2>&1 &
bpid=$!
for _ in $(seq 600); do
    grep -qE '^\[0\] +8 ' "$out" && break
    kill -0 $bpid 2>/dev/null || break
    sleep 0.1
done
start=$(date +%s)
ip link set d0 down
wait $bpid
rc=$?
took=$(($(date +%s) - start))
ip link set d0 up
for _ in $(seq 100); do
    grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state && break
    sleep 0.1
done
if [ $rc -eq 124 ]; then
    fail "port down: the job hung (killed after 150 s)"
elif [ $rc -eq 0 ]; then
    fail "port down: the job succeeded with its link down"
elif grep -q "went down" "$out"; then
    pass "port down: $(grep -o 'port rxe0:1 went down[^:]*' "$out" | head -1), job failed after ${took} s"
else
    fail "port down: the job failed without naming the port"
    tail -8 "$out"
fi

echo "== $passed passed, $failed failed ($(($(date +%s) - T0)) s inside the VM)"
for f in "${failures[@]+"${failures[@]}"}"; do
    echo "   failed: $f"
done
[ $failed -eq 0 ]
