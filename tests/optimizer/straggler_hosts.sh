#!/usr/bin/env bash
# straggler_hosts.sh - a straggler for real: 3 emulated hosts
# (scripts/cluster.sh, 1 Gbit/s links), one gradwire-train rank on each,
# and host 2's rank confined by a CPU quota (a cgroup: cpu.max under cgroup
# v2, cpu.cfs_quota_us under v1), so that it computes more slowly as a
# slow node would. Two runs of the same job, without mitigation and with
# --straggler balance, and the reports must:
#   - unmitigated: name rank 2 the slowest, and the other ranks' typical
#     (median) wait per step must exceed rank 2's: they wait for it;
#   - balanced: give rank 2 a smaller share of the global batch (the shares
#     still adding up to it), halve the other ranks' median wait per step,
#     and end within 0.06 of the unmitigated final loss. Both runs are
#     seeded and a balanced step's samples do not depend on the split
#     (straggler.c), so the two losses are fixed numbers per task and differ
#     only by the sample order.
#
# What is judged must hold on any machine of the kind, idle or loaded, so
# the slowdown must dominate whatever the CPU's speed. A CPU quota slows
# whatever the rank does with its CPU, in proportion: its compute and its
# share of the allreduce alike. So the task is chosen for compute far
# above communication: a large batch per rank (1,280 samples) on a small
# model (about 0.1 M parameters), about ten times the CPU of the allreduce
# (the learning rate is that of the earlier 384-sample batch, 0.15),
# and the quota (5% of a CPU in 20 ms periods) is fine-grained against a
# step. With 128 samples per rank, as before, a fast CPU's compute fitted
# in one period's quota and the throttling fell on the allreduce instead:
# the other ranks then waited for rank 2's communication, not its compute,
# and the run's wait share was 0.10 where the test asked for 0.15. The
# run's overall wait share, the time per epoch and their ratios between
# the runs are printed, never judged: they are speeds (bench/ measures
# them).
# Prints the per-rank table of both runs (the README's Stragglers table).
#
#   straggler_hosts.sh BUILD_DIR
#   environment: GW_STRAG_QUOTA (percent of one CPU for host 2, default 5),
#   GW_STRAG_ARGS (the training options, default a small synthetic task)
#
# Needs root, network namespaces and a writable cpu cgroup: exits 77
# (skipped) saying which is missing.
set -euo pipefail

BUILD=$(cd "${1:?usage: straggler_hosts.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TRAIN=$BUILD/optimizer/gradwire-train
QUOTA=${GW_STRAG_QUOTA:-5}
# The same task under the sanitizers: the compute is OpenBLAS's, which they
# do not instrument, and with half the samples the two runs' losses were
# still apart by more than the sample order explains (0.07 after 12 steps).
SAMPLES=46080
BATCH=3840
ARGS=${GW_STRAG_ARGS:---data synthetic --synthetic $SAMPLES,600,128,5,4 --hidden 256,256 --batch $BATCH --lr 0.15 --lr-ref-batch $BATCH --epochs 2 --balance-every 3}
N=3
SLOW=2

[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (network namespaces, cgroups)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed (reads the JSON reports)"; exit 77; }
[ -x "$TRAIN" ] || { echo "FAIL: $TRAIN is not built"; exit 1; }
probe="gwstragprobe$$x"
ip netns add "$probe" 2>/dev/null || { echo "SKIP: cannot create network namespaces here"; exit 77; }
ip netns del "$probe"

# The CPU quota: a cgroup of our own, v2 where its cpu controller is
# enabled, else v1's cpu hierarchy: 20 ms periods, the quota at least the
# kernel's minimum of 1 ms.
CG=
PERIOD=${GW_STRAG_PERIOD_US:-20000}
QUOTA_US=$((PERIOD * QUOTA / 100))
[ "$QUOTA_US" -ge 1000 ] || QUOTA_US=1000
if grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    CG=/sys/fs/cgroup/gwstrag$$
    mkdir "$CG" && echo "$QUOTA_US $PERIOD" >"$CG/cpu.max" || CG=
elif [ -w /sys/fs/cgroup/cpu ] && [ -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    CG=/sys/fs/cgroup/cpu/gwstrag$$
    mkdir "$CG" && echo "$PERIOD" >"$CG/cpu.cfs_period_us" &&
        echo "$QUOTA_US" >"$CG/cpu.cfs_quota_us" || CG=
fi
[ -n "$CG" ] || { echo "SKIP: no writable cpu cgroup (v2 cpu.max or v1 cpu.cfs_quota_us)"; exit 77; }

PREFIX=gwstrag$$x
WORK=$(mktemp -d /tmp/gwstrag.XXXXXX)
cleanup() {
    "$ROOT/scripts/cluster.sh" --prefix "$PREFIX" down >/dev/null 2>&1 || true
    rmdir "$CG" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
"$ROOT/scripts/cluster.sh" --prefix "$PREFIX" up $N --rate 1gbit >"$WORK/cluster.out" 2>&1 || {
    cat "$WORK/cluster.out"
    echo "FAIL: cannot bring up $N emulated hosts"
    exit 1
}

# One job: rank i on host i; the slow host's rank enters the cgroup before
# it starts (its threads and OpenBLAS's with it).
job() {
    local tag=$1 port=$2 r pids=() rc=0 token
    shift 2
    token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    for r in $(seq 0 $((N - 1))); do
        local cmd=(ip netns exec "$PREFIX$r" env GW_RANK=$r GW_SIZE=$N
            GW_ROOT=198.18.0.1:$port GW_JOB_TOKEN=$token GW_TIMEOUT_MS=120000
            "$TRAIN" $ARGS --no-progress "$@")
        [ "$r" -eq 0 ] && cmd+=(--json "$WORK/$tag.json")
        if [ "$r" -eq $SLOW ]; then
            sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG" "${cmd[@]}" >"$WORK/$tag.$r.log" 2>&1 &
        else
            "${cmd[@]}" >"$WORK/$tag.$r.log" 2>&1 &
        fi
        pids+=($!)
    done
    for r in $(seq 0 $((N - 1))); do wait "${pids[$r]}" || rc=1; done
    if [ $rc -ne 0 ]; then
        tail -n 20 "$WORK/$tag".*.log
        echo "FAIL: the $tag job failed"
        exit 1
    fi
    grep -A$((N + 2)) "stragglers" "$WORK/$tag.0.log" || true
}

echo "host $SLOW at $QUOTA_US us of CPU per $PERIOD us; load $(cat /proc/loadavg)"
echo "options: $ARGS"
job plain 29811 --straggler none
job balance 29812 --straggler balance

python3 - "$WORK/plain.json" "$WORK/balance.json" "$SLOW" "$BATCH" <<'EOF'
import json, sys
plain, bal = (json.load(open(p)) for p in sys.argv[1:3])
slow, batch = int(sys.argv[3]), int(sys.argv[4])
fails = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)
sp, sb = plain["stragglers"], bal["stragglers"]
fast = [r for r in range(len(sp["ranks"])) if r != slow]
wait = lambda rep, r: rep["stragglers"]["ranks"][r]["wait_median_s"]
check(sp["slowest_rank"] == slow, f"unmitigated: slowest rank {sp['slowest_rank']} (host {slow} is slowed)")
for r in fast:
    check(wait(plain, r) > wait(plain, slow),
          f"unmitigated: rank {r} waits {1e3*wait(plain, r):.1f} ms a step, more than rank {slow}'s {1e3*wait(plain, slow):.1f} ms")
shares = [r["batch"] for r in sb["ranks"]]
check(sum(shares) == batch and shares[slow] < batch // len(shares),
      f"balanced shares {shares}: host {slow}'s below {batch // len(shares)}, sum {batch}")
for r in fast:
    check(wait(bal, r) < 0.5 * wait(plain, r),
          f"balanced: rank {r}'s median wait {1e3*wait(bal, r):.1f} ms < half of {1e3*wait(plain, r):.1f} ms")
lp, lb = plain["epochs"][-1]["loss"], bal["epochs"][-1]["loss"]
check(abs(lp - lb) <= 0.06, f"final loss {lb:.4f} balanced, {lp:.4f} without (within 0.06)")
print(f"wait share (not judged): {sp['wait_share']:.3f} without, {sb['wait_share']:.3f} balanced")
print(f"time per epoch: {plain['train_s'] / len(plain['epochs']):.2f} s without, "
      f"{bal['train_s'] / len(bal['epochs']):.2f} s balanced")
print("| run | rank | batch | step med/p90 ms | compute med/p90 ms | wait med/p90 ms | wait beyond slowest |")
print("|---|---|---|---|---|---|---|")
for name, rep in (("none", plain), ("balance", bal)):
    for r in rep["stragglers"]["ranks"]:
        print(f"| {name} | {r['rank']}{' (slowed)' if r['rank'] == slow else ''} | {r['batch']} | "
              f"{1e3*r['step_median_s']:.1f} / {1e3*r['step_p90_s']:.1f} | "
              f"{1e3*r['compute_median_s']:.1f} / {1e3*r['compute_p90_s']:.1f} | "
              f"{1e3*r['wait_median_s']:.1f} / {1e3*r['wait_p90_s']:.1f} | {100*r['wait_share']:.1f}% |")
    s = rep["stragglers"]
    print(f"| {name} | run | | {rep['train_s'] / len(rep['epochs']):.2f} s/epoch | | "
          f"wait share {100*s['wait_share']:.1f}% | final loss {rep['epochs'][-1]['loss']:.4f} |")
sys.exit(1 if fails else 0)
EOF
