#!/bin/sh
# Fashion-MNIST: elastic runs that lose ranks in epoch 2 against an
# un-killed run with the same global batch, 4 ranks over shared memory:
# one that loses rank 2, and one that loses rank 0 and then rank 1, the
# shrunk job's rank 0 (each time the lowest survivor leads the others in
# its place: docs/design/failures.md, the succession). Prints the final
# test accuracy of each, the differences, what the elastic runs reported
# (the lost ranks, the steps, the time lost) and the training times.
# Usage: bench/train_elastic.sh [--json FILE] BUILD_DIR [EPOCHS] [BATCH]
#   --json FILE: both runs' accuracy, loss and training time and what the
#   elastic run reported, as JSON with the run header (bench/run_header.py;
#   scripts/results.sh elastic renders it).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CMDLINE=$(/usr/bin/python3 -c 'import shlex, sys; print(shlex.join(sys.argv[1:]))' "$0" "$@")
JSON=""
if [ "${1:-}" = --json ]; then
    JSON=${2:?--json needs a file}
    shift 2
fi
B=${1:?build dir}
E=${2:-15}
BATCH=${3:-128}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
[ -z "$JSON" ] || "$ROOT/bench/run_header.py" begin --command "$CMDLINE" >"$T/header.json" || exit 1
LAUNCH="$B/gradwire launch"
TRAIN="$B/optimizer/gradwire-train"
ARGS="--data fashion-mnist --epochs $E --batch $BATCH --no-progress"
export GW_TRANSPORT=shm
echo "load before: $(cat /proc/loadavg)"
$LAUNCH -n 4 -- $TRAIN $ARGS --json "$T/base.json" > "$T/base.out" 2>&1 || { cat "$T/base.out"; exit 1; }
# kill_rank MARK R: SIGKILL the rank started as RANK=R of the job MARK.
kill_rank() {
    for p in $(pgrep -f gradwire-train); do
        if tr '\0' '\n' < /proc/$p/environ | grep -qx "GW_TEST_MARK=$1" &&
            tr '\0' '\n' < /proc/$p/environ | grep -qx "RANK=$2"; then
            kill -9 "$p"
        fi
    done
}
# quarter OUT: sleep a quarter of an epoch, epoch 1's length from its
# samples/s in the trainer's report and Fashion-MNIST's 60,000 training
# images (a fixed 2 s landed in epoch 3 once an epoch took under 2 s).
quarter() {
    rate=$(sed -n 's/.*epoch *1 .* \([0-9][0-9]*\) samples\/s.*/\1/p' "$1" | head -1)
    epoch_s=$(awk -v r="${rate:-15000}" 'BEGIN { printf "%.2f", 60000 / r }')
    sleep "$(awk -v e="$epoch_s" 'BEGIN { printf "%.2f", e / 4 }')"
}
GW_TEST_MARK=elastic-bench $LAUNCH --elastic -n 4 -- $TRAIN $ARGS --elastic --json "$T/el.json" > "$T/el.out" 2>&1 &
job=$!
while ! grep -q "epoch   1 " "$T/el.out"; do sleep 0.2; done
quarter "$T/el.out" # into epoch 2, a quarter of an epoch in
kill_rank elastic-bench 2
wait $job
elastic_rc=$?
# Rank 0 a quarter into epoch 2, then, a quarter of an epoch after the
# survivors went on, rank 1 (their rank 0 by then).
GW_TEST_MARK=elastic-bench0 $LAUNCH --elastic -n 4 -- $TRAIN $ARGS --elastic --json "$T/el0.json" > "$T/el0.out" 2>&1 &
job=$!
while ! grep -q "epoch   1 " "$T/el0.out"; do sleep 0.2; done
quarter "$T/el0.out"
kill_rank elastic-bench0 0
while ! grep -q "lost rank" "$T/el0.out"; do sleep 0.1; done
quarter "$T/el0.out"
kill_rank elastic-bench0 1
wait $job
elastic0_rc=$?
echo "load after: $(cat /proc/loadavg)"
acc() { grep "epoch *$E " "$1" | sed 's/.*test *\([0-9.]*\)%.*/\1/' | tail -1; }
train_s() { grep "node-hours" "$1" | sed 's/.*x \([0-9.]*\) s of training.*/\1/'; }
a=$(acc "$T/base.out")
b=$(acc "$T/el.out")
c=$(acc "$T/el0.out")
grep "lost rank" "$T/el.out" "$T/el0.out"
grep -q "lost rank(s) 2 in step [0-9]* (epoch 2)" "$T/el.out" ||
    echo "warning: the loss did not land in epoch 2 (epoch 1 took $epoch_s s by its samples/s)"
echo "un-killed:             test accuracy $a% after $E epochs, $(train_s "$T/base.out") s of training"
echo "rank 2 lost:           test accuracy $b% after $E epochs, $(train_s "$T/el.out") s of training"
echo "rank 0, then 1 lost:   test accuracy $c% after $E epochs, $(train_s "$T/el0.out") s of training"
awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN { printf "differences: %+.2f and %+.2f points\n", b - a, c - a }'
[ -n "$JSON" ] || exit 0
/usr/bin/python3 - "$T" "$E" "$BATCH" "$elastic_rc" "$elastic0_rc" <<'PY' || exit 1
import json, os, re, sys
t, epochs, batch, rc, rc0 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def run(name):
    try:
        rep = json.load(open(os.path.join(t, name + ".json")))
    except (OSError, ValueError):
        return None
    ep = rep.get("epochs") or [{}]
    return {"final_test_acc": rep.get("final_test_acc"), "final_loss": ep[-1].get("loss"),
            "train_s": rep.get("train_s"), "epochs": len(rep.get("epochs") or [])}
LOST = re.compile(r"lost rank\(s\) (\S+) in step (\d+) \(epoch (\d+)\); (\d+) rank\(s\) go .*?, ([0-9.]+) s lost")
def losses(name):
    """What the elastic run reported, in order: the lost ranks (numbered in
    the communicator they were lost from), the step, the survivors."""
    return [{"ranks": m.group(1), "step": int(m.group(2)), "epoch": int(m.group(3)), "survivors": int(m.group(4)),
             "lost_s": float(m.group(5))} for m in LOST.finditer(open(os.path.join(t, name + ".out")).read())]
base, el, el0 = run("base"), run("el"), run("el0")
lost, lost0 = losses("el"), losses("el0")
failures = []
if rc != 0 or not el:
    failures.append("the elastic run losing rank 2 exited %d" % rc)
if not lost:
    failures.append("the elastic run losing rank 2 reported no lost rank")
if rc0 != 0 or not el0:
    failures.append("the elastic run losing rank 0 and then rank 1 exited %d" % rc0)
if [(x["ranks"], x["survivors"]) for x in lost0] != [("0", 3), ("0", 2)]:
    failures.append("the elastic run losing rank 0 and then rank 1 reported %s, not rank 0 of 4 and then "
                    "rank 0 of 3" % lost0)
results = [dict(base, run="un-killed", ranks=4)] if base else []
if el:
    results.append(dict(el, run="elastic (rank 2 killed)", ranks=4, lost=lost))
if el0:
    results.append(dict(el0, run="elastic (rank 0 killed, then rank 1)", ranks=4, lost=lost0))
json.dump({"benchmark": "elastic", "params": {"data": "fashion-mnist", "epochs": epochs, "global_batch": batch,
           "ranks": 4, "transport": "shm", "killed_rank": 2, "killed_ranks_then": [0, 1]},
           "ok": not failures, "failures": failures,
           "lost": lost[0] if lost else None, "results": results}, open(os.path.join(t, "data.json"), "w"), indent=1)
PY
"$ROOT/bench/run_header.py" finish "$T/header.json" "$T/data.json" "$JSON" || exit 1
