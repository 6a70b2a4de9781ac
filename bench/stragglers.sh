#!/usr/bin/env bash
# stragglers.sh - what --straggler balance buys, as a benchmark: the
# measurement of tests/optimizer/straggler_hosts.sh (which judges the
# behaviour; this records the speeds). N emulated hosts (scripts/cluster.sh,
# 1 Gbit/s links), one gradwire-train rank on each, and host SLOW's rank
# confined by a CPU quota (a cgroup: cpu.max under v2, cpu.cfs_quota_us
# under v1) as a slow node would be. The same seeded job runs twice, with
# --straggler none and --straggler balance, and the JSON keeps each rank's
# batch share, median and p90 step, compute and wait times, each run's wait
# share, time per epoch and final loss, from the trainer's own reports.
#
#   bench/stragglers.sh [--build DIR] [--hosts N] [--quota PCT] [--epochs E]
#                       [--samples S] [--batch B] --json FILE
#   defaults: build, 3 hosts, 5% of one CPU for the last host, 2 epochs of
#   46080 synthetic samples (600 features, 5 classes) in global batches
#   of 3840, rebalanced every 3 steps (the test's task: compute far above
#   communication, so the quota slows the rank's compute).
# Needs root, network namespaces and a writable cpu cgroup: exits 77
# (skipped) saying which is missing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CMDLINE=$(/usr/bin/python3 -c 'import shlex, sys; print(shlex.join(sys.argv[1:]))' "$0" "$@")
build=build N=3 QUOTA=5 EPOCHS=2 SAMPLES=46080 BATCH=3840 json=""
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=${2:?}; shift 2 ;;
    --hosts) N=${2:?}; shift 2 ;;
    --quota) QUOTA=${2:?}; shift 2 ;;
    --epochs) EPOCHS=${2:?}; shift 2 ;;
    --samples) SAMPLES=${2:?}; shift 2 ;;
    --batch) BATCH=${2:?}; shift 2 ;;
    --json) json=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "stragglers.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[ -n "$json" ] || { echo "stragglers.sh: --json FILE is required" >&2; exit 2; }
for v in "$N" "$QUOTA" "$EPOCHS" "$SAMPLES" "$BATCH"; do
    case "$v" in '' | *[!0-9]* | 0) echo "stragglers.sh: '$v' is not a positive number" >&2; exit 2 ;; esac
done
[ "$N" -ge 2 ] || { echo "stragglers.sh: --hosts wants at least 2" >&2; exit 2; }
TRAIN=$(cd "$build" && pwd)/optimizer/gradwire-train
SLOW=$((N - 1))
ARGS=(--data synthetic --synthetic "$SAMPLES,600,128,5,4" --hidden "256,256" --batch "$BATCH" --lr 0.15
    --lr-ref-batch "$BATCH" --epochs "$EPOCHS" --balance-every 3)

[ "$(id -u)" -eq 0 ] || { echo "skipped: needs root (network namespaces, cgroups)"; exit 77; }
[ -x "$TRAIN" ] || { echo "stragglers.sh: $TRAIN is not built" >&2; exit 1; }
probe="gwsbprobe$$x"
ip netns add "$probe" 2>/dev/null || { echo "skipped: cannot create network namespaces here"; exit 77; }
ip netns del "$probe"

CG=
PERIOD=20000
QUOTA_US=$((PERIOD * QUOTA / 100))
[ "$QUOTA_US" -ge 1000 ] || QUOTA_US=1000
if grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    CG=/sys/fs/cgroup/gwsbench$$
    mkdir "$CG" && echo "$QUOTA_US $PERIOD" >"$CG/cpu.max" || CG=
elif [ -w /sys/fs/cgroup/cpu ] && [ -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    CG=/sys/fs/cgroup/cpu/gwsbench$$
    mkdir "$CG" && echo "$PERIOD" >"$CG/cpu.cfs_period_us" &&
        echo "$QUOTA_US" >"$CG/cpu.cfs_quota_us" || CG=
fi
[ -n "$CG" ] || { echo "skipped: no writable cpu cgroup (v2 cpu.max or v1 cpu.cfs_quota_us)"; exit 77; }

PREFIX=gwsb$$x
WORK=$(mktemp -d /tmp/gwsbench.XXXXXX)
cleanup() {
    "$ROOT/scripts/cluster.sh" --prefix "$PREFIX" down >/dev/null 2>&1 || true
    rmdir "$CG" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
"$ROOT/bench/run_header.py" begin --command "$CMDLINE" >"$WORK/header.json"
"$ROOT/scripts/cluster.sh" --prefix "$PREFIX" up "$N" --rate 1gbit >"$WORK/cluster.out" 2>&1 || {
    cat "$WORK/cluster.out" >&2
    echo "stragglers.sh: cannot bring up $N emulated hosts" >&2
    exit 1
}

# One job: rank i on host i; the slow host's rank enters the cgroup before
# it starts (its threads and OpenBLAS's with it).
job() {
    local tag=$1 port=$2 r pids=() rc=0 token
    shift 2
    token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    for r in $(seq 0 $((N - 1))); do
        local cmd=(ip netns exec "$PREFIX$r" env "GW_RANK=$r" "GW_SIZE=$N"
            "GW_ROOT=198.18.0.1:$port" "GW_JOB_TOKEN=$token" GW_TIMEOUT_MS=120000
            "$TRAIN" "${ARGS[@]}" --no-progress "$@")
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
        tail -n 20 "$WORK/$tag".*.log >&2
        echo "stragglers.sh: the $tag job failed" >&2
        exit 1
    fi
    grep -A$((N + 2)) "stragglers" "$WORK/$tag.0.log" || true
}

echo "host $SLOW at $QUOTA_US us of CPU per $PERIOD us; load $(cat /proc/loadavg)"
echo "options: ${ARGS[*]}"
job none 29821 --straggler none
job balance 29822 --straggler balance

/usr/bin/python3 - "$WORK" "$SLOW" "$N" "$QUOTA" "${ARGS[*]}" <<'PY'
import json, os, sys
work, slow, n, quota, args = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
results = []
for mode in ("none", "balance"):
    rep = json.load(open(os.path.join(work, mode + ".json")))
    s = rep["stragglers"]
    results.append({"straggler": mode, "slowest_rank": s.get("slowest_rank"), "wait_share": s["wait_share"],
                    "epoch_s": rep["train_s"] / len(rep["epochs"]), "final_loss": rep["epochs"][-1]["loss"],
                    "ranks": [{k: r.get(k) for k in ("rank", "batch", "step_median_s", "step_p90_s",
                                                     "compute_median_s", "compute_p90_s", "wait_median_s",
                                                     "wait_p90_s", "wait_share")} for r in s["ranks"]]})
json.dump({"benchmark": "stragglers", "params": {"hosts": n, "slow_rank": slow, "cpu_quota_pct": quota,
           "rate": "1gbit", "train": args}, "ok": True, "results": results},
          open(os.path.join(work, "data.json"), "w"), indent=1)
PY
"$ROOT/bench/run_header.py" finish "$WORK/header.json" "$WORK/data.json" "$json"
