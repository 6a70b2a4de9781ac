#!/bin/sh
# Fashion-MNIST: an elastic run that loses a rank in epoch 2 against an
# un-killed run with the same global batch, 4 ranks over shared memory.
# Prints the final test accuracy of both, their difference, and what the
# elastic run reported (the lost rank, the step, the time lost) and both
# training times.
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
GW_TEST_MARK=elastic-bench $LAUNCH --elastic -n 4 -- $TRAIN $ARGS --elastic --json "$T/el.json" > "$T/el.out" 2>&1 &
job=$!
while ! grep -q "epoch   1 " "$T/el.out"; do sleep 0.2; done
# Into epoch 2, a quarter of an epoch in: epoch 1's length from its
# samples/s in the trainer's report and Fashion-MNIST's 60,000 training
# images (a fixed 2 s landed in epoch 3 once an epoch took under 2 s).
rate=$(sed -n 's/.*epoch *1 .* \([0-9][0-9]*\) samples\/s.*/\1/p' "$T/el.out" | head -1)
epoch_s=$(awk -v r="${rate:-15000}" 'BEGIN { printf "%.2f", 60000 / r }')
sleep "$(awk -v e="$epoch_s" 'BEGIN { printf "%.2f", e / 4 }')"
for p in $(pgrep -f gradwire-train); do
    if tr '\0' '\n' < /proc/$p/environ | grep -qx GW_TEST_MARK=elastic-bench &&
        tr '\0' '\n' < /proc/$p/environ | grep -qx RANK=2; then
        kill -9 "$p"
    fi
done
wait $job
elastic_rc=$?
echo "load after: $(cat /proc/loadavg)"
acc() { grep "epoch *$E " "$1" | sed 's/.*test *\([0-9.]*\)%.*/\1/' | tail -1; }
train_s() { grep "node-hours" "$1" | sed 's/.*x \([0-9.]*\) s of training.*/\1/'; }
a=$(acc "$T/base.out")
b=$(acc "$T/el.out")
grep "lost rank" "$T/el.out"
grep -q "lost rank(s) 2 in step [0-9]* (epoch 2)" "$T/el.out" ||
    echo "warning: the loss did not land in epoch 2 (epoch 1 took $epoch_s s by its samples/s)"
echo "un-killed: test accuracy $a% after $E epochs, $(train_s "$T/base.out") s of training"
echo "elastic:   test accuracy $b% after $E epochs, $(train_s "$T/el.out") s of training"
awk -v a="$a" -v b="$b" 'BEGIN { printf "difference: %+.2f points\n", b - a }'
[ -n "$JSON" ] || exit 0
/usr/bin/python3 - "$T" "$E" "$BATCH" "$elastic_rc" <<'PY' || exit 1
import json, os, re, sys
t, epochs, batch, rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def run(name):
    try:
        rep = json.load(open(os.path.join(t, name + ".json")))
    except (OSError, ValueError):
        return None
    ep = rep.get("epochs") or [{}]
    return {"final_test_acc": rep.get("final_test_acc"), "final_loss": ep[-1].get("loss"),
            "train_s": rep.get("train_s"), "epochs": len(rep.get("epochs") or [])}
base, el = run("base"), run("el")
text = open(os.path.join(t, "el.out")).read()
m = re.search(r"lost rank\(s\) (\S+) in step (\d+) \(epoch (\d+)\); (\d+) rank\(s\) go .*?, ([0-9.]+) s lost", text)
lost = {"ranks": m.group(1), "step": int(m.group(2)), "epoch": int(m.group(3)), "survivors": int(m.group(4)),
        "lost_s": float(m.group(5))} if m else None
failures = []
if rc != 0 or not el:
    failures.append("the elastic run exited %d" % rc)
if not lost:
    failures.append("the elastic run reported no lost rank")
results = [dict(base, run="un-killed", ranks=4)] if base else []
if el:
    results.append(dict(el, run="elastic (rank 2 killed)", ranks=4))
json.dump({"benchmark": "elastic", "params": {"data": "fashion-mnist", "epochs": epochs, "global_batch": batch,
           "ranks": 4, "transport": "shm", "killed_rank": 2}, "ok": not failures, "failures": failures,
           "lost": lost, "results": results}, open(os.path.join(t, "data.json"), "w"), indent=1)
PY
"$ROOT/bench/run_header.py" finish "$T/header.json" "$T/data.json" "$JSON" || exit 1
