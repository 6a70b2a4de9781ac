#!/usr/bin/env bash
# rxe_vm_test.sh - the InfiniBand verbs transport on the real kernel verbs
# stack: Soft-RoCE (rdma_rxe) in a QEMU VM started by scripts/rxe-vm, which
# runs this same script inside with --inside. There it runs, over rxe0:
#   - the transport's device tests (test_ib_live): messages between
#     transports over rxe0 (sizes, striping, eager messages, mismatches,
#     abort, goodbye, the registration cache and its invalidation of
#     remapped memory), the point-to-point API over ib (test_ib_p2p), the
#     out-of-band set-up with strangers at its port (test_ib_oob), and the
#     rdmacm set-up with impostors that know the job id but not the token
#     (test_ib_cm), pairs connected on first use (test_ib_lazy), and forged,
#     replayed and unanswered knocks and a flood of strangers (test_ib_knock);
#   - allreduce (ring, tree, recursive doubling), broadcast and allgather on
#     2, 3 and 4 ranks under `gradwire launch` with GW_TRANSPORT=ib, both
#     connection modes, one and several QPs per peer; results checked
#     against a serial reference and bitwise across ranks;
#   - fault cases: a mismatched count, a peer killed between collectives and
#     one killed in the middle of one (the survivors get an error naming
#     the dead rank, none hangs), and the port going down under a running job (async event);
#   - multi-rail: a second device, rxe1 on d1, added for this part only:
#     the rails' live tests (test_ib_rails), the tagged point-to-point
#     calls (test_ib_p2p's), collectives on 2 and 4 ranks
#     with GW_IB_HCA=rxe0,rxe1 (two rails each), and rxe1's link going down
#     under a running job (it fails naming the rail, never hangs);
#   - the registration cache end to end: repeated allreduces on the same
#     buffers register them once (and, as a control, again every time with
#     GW_IB_REG_CACHE=0);
#   - gradwire-bench p2p side by side with perftest's ib_write_bw and
#     ib_write_lat on the same device, reporting the ratios, and failing
#     when gradwire's bandwidth is below the target of issue 4, 0.90 x
#     ib_write_bw, beyond the noise of the paired rounds (see below; the VM
#     runs without KVM, so the figures compare the two on the same device,
#     they do not measure hardware).
#
# The unit tests of the transport that need no RDMA (test_ib_hca, _wire,
# _mr_cache, _load) and the fallback to TCP (test_select) run on the host
# with the rest of the suite.
#
# Usage: rxe_vm_test.sh [BUILD_DIR]   (default: ./build of the source tree);
# the output is also written to BUILD_DIR/rxe_vm_test.log.
# Exit status: 0 all passed, 1 a check failed, 77 skipped (no VM possible
# here: QEMU, rdma-core, perftest or the VM kernel missing; install them
# with scripts/install-deps.sh), with the reason.
# GW_RXE_VM_TIMEOUT limits the part inside the VM (default 720 s; booting
# and shutting down add well under a minute; the whole test takes 4 to 8
# minutes on a 2-core machine, a sanitized build 3 to 4.5); GW_RXE_ROUNDS sets
# the rounds of the latency comparison and the least of the bandwidth
# comparison (default 5), GW_RXE_ROUNDS_MAX the most of the latter (15). A
# build with the sanitizers skips the comparisons with perftest.
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SELF="$ROOT/tests/integration/rxe_vm_test.sh"

if [ "${1:-}" != "--inside" ]; then
    BUILD=$(cd "${1:-$ROOT/build}" 2>/dev/null && pwd) || { echo "skipped: no build directory ${1:-$ROOT/build}"; exit 77; }
    for f in gradwire gradwire-bench tests/worker_collectives tests/worker_faults tests/test_ib_live \
        tests/test_ib_p2p tests/test_ib_oob tests/test_ib_cm tests/test_ib_lazy tests/test_ib_knock \
        tests/test_ib_rails; do
        [ -x "$BUILD/$f" ] || { echo "skipped: $BUILD/$f is not built"; exit 77; }
    done
    timeout=${GW_RXE_VM_TIMEOUT:-720}
    # A build with the sanitizers runs everything but the comparison with
    # perftest, whose figures would only measure the instrumentation.
    kind=plain
    grep -q '^GW_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && kind=sanitized
    # Packages are installed by scripts/install-deps.sh, not by a test:
    # without them the test skips, saying what is missing. The results also
    # go to the build directory, for CI to keep.
    set -o pipefail
    # The VM has its own empty /tmp: the sources (this script) and the build
    # are shared explicitly, so a checkout under /tmp works too.
    cd "$BUILD" || exit 1
    "$ROOT/scripts/rxe-vm" --no-install --timeout "$timeout" --ro "$ROOT" --ro "$BUILD" -- \
        "$SELF" --inside "$BUILD" "$kind" 2>&1 |
        tee "$BUILD/rxe_vm_test.log"
    rc=$?
    [ $rc -eq 77 ] && echo "skipped: scripts/rxe-vm cannot start a VM here (reason above)"
    exit $rc
fi

# ---- inside the VM ----------------------------------------------------------

BUILD=$2
KIND=${3:-plain}
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
# point-to-point API, runs here over ib. Two at a time, in two lines of
# three (each test's own cases one at a time): the strangers, lazy pairs
# and knocks of the second line mostly wait on their timeouts while the
# first moves data, on the VM's two CPUs; every port is the kernel's
# choice, so the two never meet. Their results are read in this order.
# (Lines of equal length, live, lazy and cm beside p2p, knock and oob,
# would take 5 s less.)
# A test binary still running after 300 s is stuck (each case has its own
# Criterion timeout, and ASan's run of all of test_ib_live takes 30-75 s):
# before it is killed, the kernel's and gdb's stacks of every thread of
# its processes go into its output, so that a hang seen once in CI says
# where it was (one was: test_ib_live silent after exchange_oob, not seen
# again in a dozen runs beside the second line).
stacks() { # PATTERN: every thread's kernel and user stacks of matching processes
    local p t
    for p in $(pgrep -f "$1"); do
        echo "== process $p: $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null)"
        for t in /proc/$p/task/*; do
            echo "-- thread ${t##*/} ($(cat $t/comm 2>/dev/null)): state $(awk '{print $3}' $t/stat 2>/dev/null), in $(cat $t/wchan 2>/dev/null)"
            sed 's/^/   /' $t/stack 2>/dev/null | head -12
        done
        command -v gdb >/dev/null &&
            timeout 60 gdb -p "$p" -batch -ex "thread apply all bt 20" 2>&1 |
            grep -E '^(Thread|#)' | head -120
    done
}
# A forked Criterion child deadlocked in the sanitizer allocator's lock,
# recognised while it happens (a sanitized build only). GCC 12's ASan takes
# no allocator lock around fork(), and a runner thread that held one at the
# fork left the child waiting forever (CI met it in test_ib_live, then in
# test_ib_oob twice in a row); tests/support/asan_fork.c now takes those
# locks around every fork of a test binary, and this stays as the backstop
# for a runtime where it cannot find them: a child of the runner with one
# thread (fork copies only the caller's), asleep on a futex, that used no
# CPU time over the last check (10 s), and whose stack gdb shows in the
# allocator's lock: its pid goes into STUCK (status 0). cpu_seen (one
# run's) remembers each child's CPU time; both are globals, as a subshell
# would lose them.
declare -A cpu_seen
STUCK=""
asan_fork_deadlock() { # RUNNER_PID
    local c cpu
    for c in $(pgrep -P "$1"); do
        cpu=$(awk '{print $14 + $15}' "/proc/$c/stat" 2>/dev/null) || continue
        [ -n "$cpu" ] || continue
        if [ "${cpu_seen[$c]:-}" = "$cpu" ] && [ "$(ls "/proc/$c/task" 2>/dev/null | wc -l)" = 1 ] &&
            grep -q '^futex' "/proc/$c/wchan" 2>/dev/null && command -v gdb >/dev/null &&
            timeout 60 gdb -p "$c" -batch -ex bt 2>/dev/null | grep -q 'SizeClassAllocator\|sanitizer::Mutex::Lock'; then
            STUCK=$c
            return 0
        fi
        cpu_seen[$c]=$cpu
    done
    return 1
}
ib_test() { # NAME [RETRY]: its output and status in $WORK/NAME.out and .rc
    local pid k rc stuck=""
    cpu_seen=()
    STUCK=""
    GW_TRANSPORT=ib "$BUILD/tests/$1" --jobs 1 --verbose=0 >"$WORK/$1.out" 2>&1 &
    pid=$!
    for k in $(seq 600); do
        kill -0 $pid 2>/dev/null || break
        if [ "$KIND" = sanitized ] && [ $((k % 20)) = 0 ] && asan_fork_deadlock $pid; then
            stuck=$STUCK
            break
        fi
        sleep 0.5
    done
    if kill -0 $pid 2>/dev/null; then
        if [ -n "$stuck" ]; then
            echo "== $1: its forked Criterion child $stuck is deadlocked in the sanitizer's allocator lock (GCC 12's ASan takes none around fork()): the stacks" >>"$WORK/$1.out"
        else
            echo "== $1 still running after 300 s: the stacks of its threads" >>"$WORK/$1.out"
        fi
        stacks "tests/$1" >>"$WORK/$1.out" 2>&1
        pkill -KILL -f "tests/$1"
        wait $pid
        rc=124
    else
        wait $pid
        rc=$?
    fi
    # That deadlock is the toolchain's, not the code under test's: the
    # binary runs once more, from the start, and its first run's stacks
    # are kept (NAME.deadlock) and said. A hang of any other kind fails.
    if [ -n "$stuck" ] && [ -z "${2:-}" ]; then
        mv "$WORK/$1.out" "$WORK/$1.deadlock"
        echo "NOTE: $1 ran again: a forked Criterion child deadlocked in ASan's allocator lock (stacks: $(grep -c . "$WORK/$1.deadlock") lines kept)"
        ib_test "$1" retry
        return
    fi
    echo $rc >"$WORK/$1.rc"
}
(for t in test_ib_live test_ib_p2p test_ib_cm; do ib_test $t; done) &
(for t in test_ib_oob test_ib_lazy test_ib_knock; do ib_test $t; done) &
wait
for t in test_ib_live test_ib_p2p test_ib_oob test_ib_cm test_ib_lazy test_ib_knock; do
    out=$(cat "$WORK/$t.out" 2>/dev/null)
    rc=$(cat "$WORK/$t.rc" 2>/dev/null || echo "no status")
    summary=$(echo "$out" | grep "Synthesis" | tail -1)
    if [ "$rc" = 0 ] && echo "$summary" | grep -q "Failing: 0 | Crashing: 0"; then
        if echo "$out" | grep -q "SKIP"; then
            fail "$t skipped tests on the device: $(echo "$out" | grep SKIP | head -1)"
        else
            pass "$t: ${summary#*Synthesis: }"
        fi
    else
        fail "$t (status $rc)"
        if [ "$rc" = 124 ]; then
            echo "$out" | sed -n '/still running after/,$p' | head -250
            echo "$out" | sed '/still running after/,$d' | tail -30
        else
            # What failed first (a leak report after a failed case can
            # fill the tail), then the tail.
            echo "$out" | grep -E 'check failed|\[FAIL\]|Assertion|[Tt]imed out|crashed' | head -20
            echo "$out" | tail -30
        fi
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

# A GID index the device does not have, or an unused one, fails at creation
# naming the device, port, index and the usable indices (#13 item 5; it was
# "[::]:0 belongs to no device").
for bad in 200 1000; do
    out=$(GW_TRANSPORT=ib GW_IB_GID_INDEX=$bad GW_TIMEOUT_MS=20000 timeout 60 "$BUILD/gradwire" \
        launch -n 2 -- "$BUILD/tests/worker_collectives" "$WORK/gid$bad" 1 ring float32 sum \
        allreduce 2>&1)
    rc=$?
    if [ $rc -ne 0 ] && echo "$out" | grep -q "GW_IB_GID_INDEX=$bad: rxe0 port 1 has no GID at index $bad" &&
        echo "$out" | grep -q "usable indices: .*::ffff:"; then
        pass "GW_IB_GID_INDEX=$bad refused: $(echo "$out" | grep -o "GW_IB_GID_INDEX=$bad: [^;]*" | head -1)"
    else
        fail "GW_IB_GID_INDEX=$bad: status $rc without the device, port and usable indices"
        echo "$out" | tail -8
    fi
done

# Host sanity on a real RDMA port (#14): gradwire info sees rxe0 and would
# use it; gradwire check reports the port and its routable GID per host and
# measures the pair over ib.
GW_TRANSPORT=ib "$BUILD/gradwire" info --json >"$WORK/info.json" 2>"$WORK/info.err"
rc=$?
if why=$(/usr/bin/python3 - "$WORK/info.json" <<'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
ib = [f for f in d["findings"] if f["section"] == "transport" and f["name"] == "ib"]
assert any(f["verdict"] == "ok" for f in ib), ib
assert any("using rxe0:1" in f["text"] for f in ib), ib
ports = [p for p in d["rdma_ports"] if p["device"] == "rxe0" and p["port"] == 1]
assert ports and ports[0]["state"] == "ACTIVE" and ports[0]["link_layer"] == "Ethernet", d["rdma_ports"]
assert any(g["type"] == "RoCE v2" and g["gid"].endswith("ffff:c612:0001") for g in ports[0]["gids"]), ports
PY
) && [ $rc -eq 0 ]; then
    pass "gradwire info: ib usable on rxe0:1, its RoCE v2 GID listed"
else
    fail "gradwire info on the rxe device (status $rc): $why"
    tail -5 "$WORK/info.err"
fi
# --no-node: on one host the node checks are only reported, and this case
# is about the link over ib (the VM's slow memory needs no measuring).
out=$(GW_TRANSPORT=ib GW_TIMEOUT_MS=60000 timeout 180 "$BUILD/gradwire" launch -n 2 -- \
    "$BUILD/gradwire" check --quick --no-node --json "$WORK/check.json" 2>&1)
rc=$?
if why=$(/usr/bin/python3 - "$WORK/check.json" <<'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verdict"] == "PASS" and d["transport"] == "ib", (d["verdict"], d["transport"])
h = d["hosts"][0]
assert h["transport"] == "ib", h
assert "rxe0/1 ACTIVE Ethernet gid 0000:0000:0000:0000:0000:ffff:c612:0001" in h["rdma"], h["rdma"]
assert d["links"] and all(l["transport"].startswith("ib") and l["measured"] for l in d["links"]), d["links"]
PY
) && [ $rc -eq 0 ]; then
    pass "gradwire check over ib: PASS, rxe0/1 and its routable GID in the host record"
else
    fail "gradwire check over ib (status $rc): $why"
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
    local r missing="" misnamed=""
    for r in $(seq 0 $((n - 1))); do
        case "$mode" in kill | killmid) [ "$r" = 1 ] && continue ;; esac
        echo "$out" | grep -q "rank $r: GW_ERR_" || missing="$missing $r"
        # The dead rank 1 is named by every survivor (gw_comm_culprit).
        case "$mode" in kill | killmid)
            echo "$out" | grep -q "rank $r: GW_ERR_.*, culprit 1$" || misnamed="$misnamed $r" ;;
        esac
    done
    if [ $rc -eq 124 ]; then
        fail "fault $mode: hung (killed after 200 s)"
    elif [ -n "$missing" ]; then
        fail "fault $mode: ranks$missing reported no error"
        echo "$out" | tail -15
    elif [ -n "$misnamed" ]; then
        fail "fault $mode: ranks$misnamed do not name the dead rank 1"
        echo "$out" | grep -E "culprit|ERROR" | tail -15
    elif ! echo "$out" | grep -q "$want"; then
        fail "fault $mode: no $want"
        echo "$out" | tail -15
    else
        pass "fault $mode on $n ranks: $(echo "$out" | grep -o 'rank [0-9]*: GW_ERR_[A-Z_]*.*culprit [0-9-]*' | sed 's/ after [0-9]* ms//' | sort -u | tr '\n' ' ')in ${took} s"
    fi
}

faults count 3 GW_ERR_MISMATCH
GW_IB_CM=oob faults kill 3 GW_ERR_REMOTE
faults kill 3 GW_ERR_REMOTE
faults killmid 3 GW_ERR_

# The registration cache, end to end: allreduces on the same buffers find
# their registrations again, so the number of registrations does not grow
# with the number of calls (each rank's close prints its figures at INFO).
# The same with GW_IB_REG_CACHE=0 must register again for every call, or
# the check could not tell the difference. (With the cache, one or two
# registrations more or less are timing: a small receive registers its
# buffer only when it writes a CTS entry, which it skips when the message
# comes eagerly first.)
reg_figures() { # ITERS [ENV...]: "registrations hits" summed over the ranks
    local iters=$1 log="$WORK/regcache-$1-$#.log"
    shift
    env GW_TRANSPORT=ib GW_DEBUG=INFO "$@" timeout 120 "$BUILD/gradwire" launch -n 2 -- \
        "$BUILD/gradwire-bench" allreduce -b 1M -e 1M -n "$iters" -w 1 -c 0 >"$log" 2>&1
    echo "exit status $?" >>"$log"
    sed -n 's/.*registration cache: \([0-9]*\) hits, [0-9]* misses, \([0-9]*\) registrations.*/\2 \1/p' "$log" |
        awk '{r += $1; h += $2; n++} END {if (n == 2) print r, h}'
}
few=$(reg_figures 3)
many=$(reg_figures 15)
off_few=$(reg_figures 3 GW_IB_REG_CACHE=0)
off_many=$(reg_figures 15 GW_IB_REG_CACHE=0)
if [ -z "$few" ] || [ -z "$many" ] || [ -z "$off_few" ] || [ -z "$off_many" ]; then
    fail "registration cache: no figures from the ranks ('$few' '$many' '$off_few' '$off_many')"
    for f in "$WORK"/regcache-*.log; do # what the jobs printed, for the one that said nothing
        grep -q "registration cache:" "$f" && continue
        echo "--- $f (last 30 lines)"
        tail -n 30 "$f"
    done
else
    read -r few_r few_h <<<"$few"
    read -r many_r many_h <<<"$many"
    grow=$((many_r - few_r)) grow_off=$((${off_many% *} - ${off_few% *}))
    if [ $grow_off -lt 12 ]; then
        fail "registration cache: the check cannot tell: without the cache ${off_few% *} registrations for 3+1 allreduces and ${off_many% *} for 15+1"
    elif [ $grow -gt 2 ] || [ "$many_h" -le "$few_h" ]; then
        fail "registration cache: $few_r registrations for 3+1 allreduces but $many_r for 15+1 (hits $few_h and $many_h)"
    else
        pass "registration cache: $few_r registrations for 3+1 allreduces of 1 MiB, $many_r for 15+1 ($many_h hits); without it ${off_few% *} and ${off_many% *}"
    fi
fi

# p2p against perftest on the same device, side by side. The VM runs
# without KVM on a shared 2-core host and its speed follows the host's load
# from one second to the next: single rounds of the same program vary by 2x
# and more (log-sd 0.35 of a gradwire / ib_write_bw pair over 134 pairs,
# 2026-12-01), and the level moves between runs. So the rounds alternate,
# perftest, gradwire, perftest, gradwire, ..., perftest, and each gradwire
# round is judged against the geometric mean of the perftest rounds either
# side of it (what drifts between them cancels); the verdict is on the
# geometric mean of those ratios with its 95% confidence interval, against
# BW_TARGET (0.90, issue 4's target). The rounds go on from GW_RXE_ROUNDS
# (default 5) until the interval lies wholly above or below the target, or
# GW_RXE_ROUNDS_MAX (default 15) are done. The test fails when gradwire is
# below the target beyond the noise (the whole interval under 0.90); an
# interval that still straddles the target after the last round is
# reported as such and passes: the measurement cannot tell. Simulated from
# the measured pairs, a gradwire at 1.0x perftest fails 1-2% of runs, one at
# the target 9-11%, one at 0.78x 58%, at 0.71x 83%, at 0.64x 97%. At least
# half of the rounds must give both figures, or the test fails. The best
# round of each (the least disturbed by the host) is printed next to it.
gid=${GW_RXE_GID_INDEX:-1}
PT_PORT=18515
perftest() { # TOOL ARGS...: server in the background, client against 127.0.0.1
    local tool=$1
    shift
    PT_PORT=$((PT_PORT + 1))
    timeout 120 "$tool" -d rxe0 -x "$gid" -F -p $PT_PORT "$@" >"$WORK/$tool.server" 2>&1 &
    local spid=$! i
    # The client gives up at once when nobody listens yet: wait for the server.
    for i in $(seq 100); do
        ss -ltn 2>/dev/null | grep -q ":$PT_PORT " && break
        sleep 0.1
    done
    timeout 120 "$tool" -d rxe0 -x "$gid" -F -p $PT_PORT "$@" 127.0.0.1 >"$WORK/$tool.client" 2>&1
    local rc=$?
    wait $spid || rc=1
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
ib_gbps() { # the average of the size's line of an ib_write_bw client, MiB/s -> GB/s
    awk -v s="$1" '$1 == s {printf "%.6f", $4 * 1048576 / 1e9}' "$WORK/ib_write_bw.client"
}
median() { sort -g | awk '{v[NR] = $1} END {if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }

if bench check -b 0 -e 1M -f 64 -n 3 -w 1 -c 1; then
    pass "gradwire-bench p2p over ib, checked: $(grep -o 'wrong bytes: [0-9]*' "$WORK/check.out")"
else
    fail "gradwire-bench p2p over ib, checked run"
    tail -n 10 "$WORK/check.out"
fi

if [ "$KIND" = sanitized ]; then
    echo "   (no comparison with perftest in a build with the sanitizers: its figures would measure the instrumentation)"
else
    BW_SIZE=1048576
    BW_ITERS=50
    # Messages in flight: perftest keeps min(tx-depth 128, iterations) writes
    # outstanding; gradwire a window of 16 (gradwire-bench p2p -W).
    BW_WINDOW=16
    BW_TARGET=0.90
    ROUNDS=${GW_RXE_ROUNDS:-5}
    ROUNDS_MAX=${GW_RXE_ROUNDS_MAX:-15}
    [ "$ROUNDS_MAX" -lt "$ROUNDS" ] && ROUNDS_MAX=$ROUNDS
    ratios=() ib_all=() gw_all=()
    ib_round() { # sets ib_next (in this shell: perftest() counts its ports here)
        ib_next=
        perftest ib_write_bw -s $BW_SIZE -n $BW_ITERS && ib_next=$(ib_gbps $BW_SIZE)
    }
    ib_round
    ib_prev=$ib_next bw_state=unclear bw_stats= round=0
    [ -n "$ib_prev" ] && ib_all+=("$ib_prev")
    while [ $round -lt "$ROUNDS_MAX" ]; do
        round=$((round + 1))
        gw=
        bench "bw$round" -b $BW_SIZE -e $BW_SIZE -n $BW_ITERS -w 2 -W $BW_WINDOW -m uni -c 0 &&
            gw=$(json_num "$WORK/bw$round.json" uni_GBps)
        ib_round
        [ -n "$ib_next" ] && ib_all+=("$ib_next")
        if [ -z "$ib_prev" ] || [ -z "$ib_next" ] || [ -z "$gw" ]; then
            echo "   round $round: no figure (ib_write_bw before and after: '$ib_prev' '$ib_next', gradwire: '$gw')"
            tail -n 5 "$WORK/ib_write_bw.client" "$WORK/bw$round.out"
        else
            gw_all+=("$gw")
            ratios+=("$(awk -v g="$gw" -v a="$ib_prev" -v b="$ib_next" 'BEGIN {print g / sqrt(a * b)}')")
            echo "   bandwidth round $round, $BW_SIZE-byte messages: ib_write_bw $ib_prev and $ib_next GB/s, gradwire $gw GB/s: ratio ${ratios[-1]}"
        fi
        [ -n "$ib_next" ] && ib_prev=$ib_next
        [ $round -lt "$ROUNDS" ] || [ ${#ratios[@]} -lt 2 ] && continue
        # geometric mean, its 95% interval (normal approximation on the logs)
        bw_stats=$(printf '%s\n' "${ratios[@]}" | awk -v t=$BW_TARGET '{l = log($1); s += l; q += l * l; n++}
            END {m = s / n; v = (q - n * m * m) / (n - 1); se = sqrt(v > 0 ? v : 0) / sqrt(n)
                 lo = exp(m - 1.96 * se); hi = exp(m + 1.96 * se)
                 printf "%.3f %.3f %.3f %s\n", exp(m), lo, hi, (lo >= t ? "met" : hi < t ? "below" : "unclear")}')
        bw_state=${bw_stats##* }
        [ "$bw_state" != unclear ] && break
    done
    ib_bi= gw_bi=
    perftest ib_write_bw -b -s $BW_SIZE -n $BW_ITERS && ib_bi=$(ib_gbps $BW_SIZE)
    bench bidir -b $BW_SIZE -e $BW_SIZE -n $BW_ITERS -w 2 -W $BW_WINDOW -m bidir -c 0 &&
        gw_bi=$(json_num "$WORK/bidir.json" bidir_GBps)

    # Latency in alternating rounds too. ib_write_lat busy-polls; so does
    # gradwire here (by default it sleeps after polling for 50 us).
    lat_ib=() lat_ib_min=() lat_gw=() lat_gw_min=()
    for round in $(seq "$ROUNDS"); do
        if perftest ib_write_lat -s 8 -n 300; then
            v=$(awk '$1 == 8 {print $5}' "$WORK/ib_write_lat.client")
            m=$(awk '$1 == 8 {print $3}' "$WORK/ib_write_lat.client")
            [ -n "$v" ] && [ -n "$m" ] && lat_ib+=("$v") && lat_ib_min+=("$m")
        fi
        if GW_IB_SPIN_US=1000000 bench "lat$round" -b 8 -e 8 -n 300 -w 10 -m lat -c 0; then
            v=$(json_num "$WORK/lat$round.json" p50)
            m=$(json_num "$WORK/lat$round.json" min)
            [ -n "$v" ] && [ -n "$m" ] && lat_gw+=("$v") && lat_gw_min+=("$m")
        fi
    done
    best() { sort -g | head -1; }

    echo "== p2p vs perftest on rxe0, side by side (TCG VM: the figures compare, they do not measure hardware)"
    if [ ${#ratios[@]} -gt 0 ]; then
        ib_best=$(printf '%s\n' "${ib_all[@]}" | sort -g | tail -1)
        gw_best=$(printf '%s\n' "${gw_all[@]}" | sort -g | tail -1)
        read -r gmean glo ghi _ <<<"${bw_stats:-0 0 0 unclear}"
        awk -v s=$BW_SIZE -v n=${#ratios[@]} -v ib="$ib_best" -v gw="$gw_best" -v t="$BW_TARGET" \
            -v g="$gmean" -v lo="$glo" -v hi="$ghi" -v st="$bw_state" -v med="$(printf '%s\n' "${ratios[@]}" | median)" \
            -v ibm="$(printf '%s\n' "${ib_all[@]}" | median)" -v gwm="$(printf '%s\n' "${gw_all[@]}" | median)" 'BEGIN {
            printf "   bandwidth, %d-byte messages, %d gradwire rounds between perftest rounds: median ib_write_bw %.4f GB/s, gradwire %.4f GB/s\n", s, n, ibm, gwm
            r = (ib > 0 ? gw / ib : 0)
            printf "   bandwidth ratio gradwire / ib_write_bw: geometric mean %.2f (95%% interval %.2f-%.2f), median %.2f, best against best %.2f (%.4f / %.4f GB/s)\n", g, lo, hi, med, r, gw, ib
            printf "   target of issue 4, gradwire >= %.2f x ib_write_bw: %s\n", t, (st == "met" ? "met" : st == "below" ? "NOT met" : (g >= t ? "met (the interval reaches below it)" : "not demonstrably missed (the interval reaches it)")) }'
        if [ $((2 * ${#ratios[@]})) -lt "$round" ]; then
            fail "bandwidth comparison: only ${#ratios[@]} of $round rounds gave all figures"
        elif [ "$bw_state" = below ]; then
            fail "bandwidth: gradwire is below the target $BW_TARGET x ib_write_bw: geometric mean $gmean, 95% interval $glo-$ghi over ${#ratios[@]} rounds"
        elif [ "$bw_state" = met ]; then
            pass "bandwidth: geometric mean ratio $gmean to ib_write_bw (95% interval $glo-$ghi, ${#ratios[@]} rounds) meets the target $BW_TARGET"
        else
            pass "bandwidth: geometric mean ratio $gmean to ib_write_bw, 95% interval $glo-$ghi over ${#ratios[@]} rounds: not below the target $BW_TARGET beyond the noise"
        fi
    else
        fail "bandwidth comparison: no round gave both figures"
    fi
    if [ -n "$ib_bi" ] && [ -n "$gw_bi" ]; then
        awk -v g="$gw_bi" -v i="$ib_bi" 'BEGIN {
            printf "   bidirectional (both directions summed): ib_write_bw -b %.4f GB/s, gradwire %.4f GB/s: ratio %.2f\n", i, g, (i > 0 ? g / i : 0) }'
    else
        echo "   bidirectional: no figure (ib_write_bw -b: '$ib_bi', gradwire: '$gw_bi')"
    fi
    if [ ${#lat_ib[@]} -gt 0 ] && [ ${#lat_gw[@]} -gt 0 ]; then
        awk -v g="$(printf '%s\n' "${lat_gw[@]}" | best)" -v i="$(printf '%s\n' "${lat_ib[@]}" | best)" \
            -v gm="$(printf '%s\n' "${lat_gw_min[@]}" | best)" -v im="$(printf '%s\n' "${lat_ib_min[@]}" | best)" \
            -v n="$ROUNDS" 'BEGIN {
            printf "   latency, 8-byte messages, both busy-polling, best of %d rounds: gradwire p50 %.2f us, ib_write_lat typical %.2f us: ratio %.2f\n", n, g, i, g / i
            printf "   latency minimum (least disturbed by the host): gradwire %.2f us, ib_write_lat %.2f us: ratio %.2f\n", gm, im, gm / im }'
        echo "   (every round: ib_write_lat typical ${lat_ib[*]} us; gradwire p50 ${lat_gw[*]} us)"
        pass "latency compared with ib_write_lat"
    else
        fail "latency comparison (ib_write_lat: '${lat_ib[*]}', gradwire: '${lat_gw[*]}')"
        tail -n 5 "$WORK/ib_write_lat.client" "$WORK/lat$ROUNDS.out"
    fi
fi

# Multi-rail (transport/ib/ib_rails.c): a second Soft-RoCE device, rxe1 on
# a dummy d1 at 198.18.1.1, for this part only (the cases above see rxe0
# alone). Its live tests, collectives with GW_IB_HCA naming both devices
# (every rank two rails; messages of 128 KiB and more cut across them),
# and rxe1's link going down under a running job: the job fails naming
# the rail, within the timeout, never hangs.
# port_active DEV: wait (10 s at most) until DEV's port 1 is ACTIVE.
port_active() {
    for _ in $(seq 100); do
        grep -q ACTIVE "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
# port_down NAME NETDEV DEV [VAR=VALUE...]: a 2-rank allreduce benchmark
# over ib (with the variables given); once it has printed its first row,
# NETDEV goes down, and with it DEV's port: the device's async event must
# fail the job naming the port, not leave it waiting. NETDEV stays down.
port_down() {
    local name=$1 netdev=$2 dev=$3 out="$WORK/down-$3.out" bpid rc start took
    shift 3
    env GW_TRANSPORT=ib GW_TIMEOUT_MS=120000 "$@" timeout 150 "$BUILD/gradwire" launch -n 2 -- \
        "$BUILD/gradwire-bench" allreduce -b 8 -e 1G -f 2 -n 20 -w 1 -c 0 >"$out" 2>&1 &
    bpid=$!
    for _ in $(seq 600); do
        grep -qE '^\[0\] +8 ' "$out" && break
        kill -0 $bpid 2>/dev/null || break
        sleep 0.1
    done
    start=$(date +%s)
    ip link set "$netdev" down
    wait $bpid
    rc=$?
    took=$(($(date +%s) - start))
    if [ $rc -eq 124 ]; then
        fail "$name: the job hung (killed after 150 s)"
    elif [ $rc -eq 0 ]; then
        fail "$name: the job succeeded with $netdev down"
    elif grep -q "$dev:1 went down" "$out"; then
        pass "$name: $(grep -o "port $dev:1 went down[^:]*" "$out" | head -1), job failed after ${took} s"
    else
        fail "$name: the job failed without naming the port $dev:1"
        tail -8 "$out"
    fi
}
rails_up() {
    ip link add d1 type dummy && ip addr add 198.18.1.1/24 dev d1 && ip link set d1 up &&
        rdma link add rxe1 type rxe netdev d1 && port_active rxe1
}
if ! rails_up; then
    fail "multi-rail: the second device rxe1 did not come up ($(cat /sys/class/infiniband/rxe1/ports/1/state 2>/dev/null))"
else
    ib_test test_ib_rails
    rc=$(cat "$WORK/test_ib_rails.rc")
    summary=$(grep "Synthesis" "$WORK/test_ib_rails.out" | tail -1)
    if [ "$rc" = 0 ] && echo "$summary" | grep -q "Failing: 0 | Crashing: 0" &&
        ! grep -q SKIP "$WORK/test_ib_rails.out"; then
        pass "test_ib_rails: ${summary#*Synthesis: }"
    else
        fail "test_ib_rails (status $rc)"
        tail -30 "$WORK/test_ib_rails.out"
    fi
    # Tagged messages over two rails (each goes whole over one: a 400 KB
    # one would otherwise be cut, and the receiver's peek see a part).
    GW_IB_HCA=rxe0,rxe1 GW_DEBUG=INFO GW_TRANSPORT=ib timeout 300 "$BUILD/tests/test_ib_p2p" \
        --jobs 1 --verbose=0 --filter 'p2p_api/tagged*' >"$WORK/tagged_rails.out" 2>&1
    rc=$?
    summary=$(grep "Synthesis" "$WORK/tagged_rails.out" | tail -1)
    if [ $rc -eq 0 ] && echo "$summary" | grep -q "Failing: 0 | Crashing: 0" &&
        grep -q "2 rails: rxe0:1, rxe1:1" "$WORK/tagged_rails.out"; then
        pass "tagged messages over 2 rails: ${summary#*Synthesis: }"
    else
        fail "tagged messages over 2 rails (status $rc)"
        grep -v ' INFO ' "$WORK/tagged_rails.out" | tail -30
    fi
    GW_IB_HCA=rxe0,rxe1 collectives "2 ranks, 2 rails, rdmacm" 2 rdmacm 1 "0,1,1023,200000" float32
    # Out of band, several QPs per rail, 4 ranks (also the single rail's
    # oob and striping, which had a 3-rank case of their own).
    GW_IB_HCA=rxe0,rxe1 collectives "4 ranks, 2 rails, oob, 2 QPs" 4 oob 2 "0,7,200000" float32
    out=$(GW_DEBUG=INFO GW_TRANSPORT=ib GW_IB_HCA=rxe0,rxe1 timeout 120 "$BUILD/gradwire" launch -n 2 -- \
        "$BUILD/tests/worker_collectives" "$WORK/rails_sel" 1 ring float32 sum allreduce 2>&1)
    if echo "$out" | grep -q "2 rails: rxe0:1, rxe1:1"; then
        pass "GW_IB_HCA=rxe0,rxe1: $(echo "$out" | grep -o '2 rails: rxe0:1, rxe1:1[^;]*' | head -1)"
    else
        fail "GW_IB_HCA=rxe0,rxe1 did not give two rails"
        echo "$out" | grep -i "rail\|ERROR" | head -5
    fi
    port_down "rail down" d1 rxe1 GW_IB_HCA=rxe0,rxe1
fi
rdma link delete rxe1 2>/dev/null
ip link del d1 2>/dev/null

# Port down: the device's async event must fail the job, not leave it
# waiting. The link goes down once the benchmark has printed its first row.
port_down "port down" d0 rxe0
ip link set d0 up
port_active rxe0

echo "== $passed passed, $failed failed ($(($(date +%s) - T0)) s inside the VM)"
for f in "${failures[@]+"${failures[@]}"}"; do
    echo "   failed: $f"
done
[ $failed -eq 0 ]
