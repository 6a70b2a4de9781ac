#!/bin/bash
# bench/train_zero.sh - ZeRO's memory and accuracy: `gradwire train` on
# Fashion-MNIST (MLP 784-256-128-10, global batch 128, 15 epochs by
# default) with plain data parallelism, --zero 1 and --zero 2, on 2 and 4
# local ranks. Prints one Markdown row per run from each run's own JSON
# report: the final test accuracy and the bytes rank 0 holds for its
# parameters, gradients and momentum (the report's "memory").
#
# Usage: bench/train_zero.sh [BUILD_DIR] [--epochs N] [--json FILE]
#   --json FILE: every run's accuracy, loss, training time and memory as
#   JSON with the run header (bench/run_header.py; scripts/results.sh zero
#   renders it).
# Needs the data set: ./scripts/install-deps.sh data. 6 runs.
set -euo pipefail

PROG=train_zero.sh
HELP_LINES=2,13p
EPOCHS=15
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CMDLINE=$(/usr/bin/python3 -c 'import shlex, sys; print(shlex.join(sys.argv[1:]))' "$0" "$@")
JSON=""
rest=()
while [ $# -gt 0 ]; do
    case "$1" in
    --json) JSON=${2:?--json needs a file}; shift 2 ;;
    *) rest+=("$1"); shift ;;
    esac
done
# shellcheck source=bench/train_lib.sh
. "$(dirname "$0")/train_lib.sh"
train_args ${rest[@]+"${rest[@]}"}
[ -z "$JSON" ] || "$ROOT/bench/run_header.py" begin --command "$CMDLINE" >"$OUT/header.json"

# row NAME RANKS ZERO: one run, one Markdown row.
row() {
    local name="$1" n="$2" zero="$3"
    train_run "$name" "$n" --zero "$zero"
    echo "$name $n $zero" >>"$OUT/runs"
    /usr/bin/python3 - "$OUT/$name.json" "$n" "$zero" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
m = rep["memory"]
print("| %s ranks | %s | %.2f%% | %d | %d | %d |" % (sys.argv[2], "plain" if sys.argv[3] == "0" else "--zero " + sys.argv[3],
      100 * rep["final_test_acc"], m["params"], m["grads"], m["optimizer"]))
PY
}

echo "# gradwire $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%F), $EPOCHS epochs"
echo "| ranks | run | test accuracy | parameters (B) | gradients (B) | momentum (B) |"
echo "|---|---|---:|---:|---:|---:|"
for n in 2 4; do
    for z in 0 1 2; do
        row "r${n}z$z" "$n" "$z"
    done
done
[ -n "$JSON" ] || exit 0
/usr/bin/python3 - "$OUT" "$EPOCHS" <<'PY'
import json, os, sys
out, epochs = sys.argv[1], int(sys.argv[2])
results = []
for line in open(os.path.join(out, "runs")):
    name, ranks, zero = line.split()
    rep = json.load(open(os.path.join(out, name + ".json")))
    ep = rep.get("epochs") or [{}]
    m = rep["memory"]
    results.append({"run": name, "ranks": int(ranks), "zero": int(zero),
                    "final_test_acc": rep["final_test_acc"], "final_loss": ep[-1].get("loss"),
                    "train_s": rep["train_s"], "params_bytes": m["params"],
                    "grads_bytes": m["grads"], "optimizer_bytes": m["optimizer"]})
json.dump({"benchmark": "zero", "params": {"data": "fashion-mnist", "epochs": epochs,
           "global_batch": 128, "bucket_kb": 256}, "ok": True, "results": results},
          open(os.path.join(out, "data.json"), "w"), indent=1)
PY
"$ROOT/bench/run_header.py" finish "$OUT/header.json" "$OUT/data.json" "$JSON"
