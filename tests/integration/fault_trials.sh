#!/usr/bin/env bash
# fault_trials.sh - the bounded fault-injection run of CI: scripts/fault-trials
# over SETTINGS (shm,tcp or hosts) with a fixed seed, asserting that no trial
# hung, no collective returned a wrong result and every survivor of every
# trial got a clean error (--require-clean). Which rank the survivors blame
# is reported, not asserted (README, Reliability).
#
# Before the trials it checks the checker: one trial whose ranks wait ten
# minutes (GW_TIMEOUT_MS=600000) for a stopped rank must come out as a hang,
# and must leave nothing behind; otherwise the driver could not see a hang
# and its "0 hangs" would mean nothing.
#
# Usage: fault_trials.sh BUILD_DIR SETTINGS
# GW_FAULT_TRIALS (default 12 per setting: each signal and phase 3 times)
# and GW_FAULT_SEED (default 12) change the run. Exit status: 0 passed,
# 1 failed, 77 skipped (no /usr/bin/python3; hosts: not root, or no network
# namespaces), with the reason.
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:?usage: fault_trials.sh BUILD_DIR SETTINGS}" && pwd)
SETTINGS=${2:?usage: fault_trials.sh BUILD_DIR SETTINGS}
TRIALS=${GW_FAULT_TRIALS:-12}
SEED=${GW_FAULT_SEED:-12}
DRIVER="$ROOT/scripts/fault-trials"

skip() {
    echo "skipped: $*"
    exit 77
}

[ -x /usr/bin/python3 ] || skip "scripts/fault-trials needs /usr/bin/python3 (Debian package python3)"
[ -x "$BUILD/tests/worker_trial" ] || skip "$BUILD/tests/worker_trial is not built"
case ",$SETTINGS," in
*,hosts,*)
    [ "$(id -u)" -eq 0 ] || skip "emulated hosts need root (network namespaces and tc)"
    for tool in ip tc nsenter; do
        command -v $tool >/dev/null || skip "emulated hosts need $tool (iproute2, util-linux)"
    done
    ip netns add "gwftprobe$$x" 2>/dev/null && ip netns del "gwftprobe$$x" ||
        skip "cannot create network namespaces here"
    ;;
esac

# A sanitized build is several times slower: more slack before a hang.
margin=3000
grep -q '^GW_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && margin=10000

failed=0
# What this run left: worker processes of this build with this run's tag in
# their environment (the driver's ranks inherit it), and the namespaces of
# this run's drivers (gwft<driver's pid>h...). Another run of this test,
# which the suite may run at the same time (shm,tcp beside hosts in the
# quiet pass), has workers and namespaces of its own, which are not ours
# to count.
export FAULT_TRIALS_TAG="fault_trials.sh.$$"
drivers=()
leftovers() {
    local p exe d
    for p in /proc/[0-9]*; do
        exe=$(readlink "$p/exe" 2>/dev/null) || continue
        [ "$exe" = "$BUILD/tests/worker_trial" ] || continue
        tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "FAULT_TRIALS_TAG=$FAULT_TRIALS_TAG" &&
            echo "process ${p#/proc/}"
    done
    for d in "${drivers[@]}"; do
        ip netns list 2>/dev/null | grep -o "^gwft${d}h[^ ]*" | sed 's/^/namespace /'
    done
}
before=$(leftovers)

first=${SETTINGS%%,*}
echo "== control: a stopped rank that the ranks wait 10 minutes for must be a hang ($first)"
control=$(mktemp)
"$DRIVER" --setting "$first" --trials 1 --seed 1 --signals STOP --phases loop \
    --timeout-ms 1000 --grace-ms 0 --margin-ms 2000 --env GW_TIMEOUT_MS=600000 --build "$BUILD" \
    >"$control" 2>&1 &
drivers+=($!)
wait $!
rc=$?
out=$(cat "$control")
rm -f "$control"
echo "$out"
if [ $rc -eq 1 ] && echo "$out" | grep -q 'HANG'; then
    echo "PASS: the hang was seen and reported (exit 1)"
else
    echo "FAIL: the driver did not report the hang (exit $rc)"
    failed=1
fi

echo "== $TRIALS trials per setting over $SETTINGS, seed $SEED"
"$DRIVER" --setting "$SETTINGS" --trials "$TRIALS" --seed "$SEED" --timeout-ms 1500 \
    --margin-ms "$margin" --require-clean --build "$BUILD" --json "$BUILD/fault_trials_${SETTINGS//,/_}.json" &
drivers+=($!)
wait $!
rc=$?
if [ $rc -eq 0 ]; then
    echo "PASS: no hangs, no wrong results, every survivor got a clean error"
else
    echo "FAIL: scripts/fault-trials exited $rc (see the trials marked above)"
    failed=1
fi

after=$(leftovers)
if [ "$after" != "$before" ]; then
    echo "FAIL: left behind: $(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')"
    failed=1
fi
exit $failed
