#!/bin/bash
# bench/train_accuracy.sh - training accuracy and cost: `gradwire train` on
# Fashion-MNIST (MLP 784-256-128-10, global batch 128, 15 epochs by
# default) on 1, 4 and 8 local ranks, and on 4 ranks with every codec.
# Prints one Markdown row per run from each run's own JSON report
# (final_test_acc), and the commit and date it measured.
#
# Usage: bench/train_accuracy.sh [BUILD_DIR] [--epochs N] [--codec-warmup-epochs W]
#                                 [--json FILE]
#   --codec-warmup-epochs W: the codec runs' dense epochs before the codec
#   takes over (gradwire train's own default is 1: a 1-epoch run with a
#   codec is then dense all along, so a short campaign passes 0).
#   --json FILE: every run's accuracy, loss and training time as JSON with
#   the run header (bench/run_header.py; scripts/results.sh train-accuracy
#   renders it).
# Needs the data set: ./scripts/install-deps.sh data. Takes 6 to 15
# minutes on 2 cores (9 runs; 346 s at load 2-5 on 2026-12-04).
set -euo pipefail

PROG=train_accuracy.sh
HELP_LINES=2,17p
EPOCHS=15
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CMDLINE=$(/usr/bin/python3 -c 'import shlex, sys; print(shlex.join(sys.argv[1:]))' "$0" "$@")
JSON=""
WARMUP=()
rest=()
while [ $# -gt 0 ]; do
    case "$1" in
    --json) JSON=${2:?--json needs a file}; shift 2 ;;
    --codec-warmup-epochs) WARMUP=(--codec-warmup-epochs "${2:?--codec-warmup-epochs needs a number}"); shift 2 ;;
    *) rest+=("$1"); shift ;;
    esac
done
# shellcheck source=bench/train_lib.sh
. "$(dirname "$0")/train_lib.sh"
train_args ${rest[@]+"${rest[@]}"}
[ -z "$JSON" ] || "$ROOT/bench/run_header.py" begin --command "$CMDLINE" >"$OUT/header.json"

# run NAME RANKS [train options]: prints the test accuracy in percent.
run() {
    local name="$1" n="$2"
    shift 2
    local codec=${2:-dense}
    [ "$codec" = dense ] || set -- "$@" ${WARMUP[@]+"${WARMUP[@]}"}
    train_run "$name" "$n" "$@"
    echo "$name $n $codec" >>"$OUT/runs"
    /usr/bin/python3 -c 'import json, sys; print("%.2f%%" % (100 * json.load(open(sys.argv[1]))["final_test_acc"]))' \
        "$OUT/$name.json"
}

echo "# gradwire $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%F), $EPOCHS epochs"
echo "| run | test accuracy |"
echo "|---|---|"
echo "| 1 rank | $(run r1 1) |"
echo "| 4 ranks (same global batch) | $(run r4 4) |"
echo "| 8 ranks (same global batch) | $(run r8 8) |"
echo "| 4 ranks fp16 / bf16 / int8 | $(run fp16 4 --codec fp16) / $(run bf16 4 --codec bf16) / $(run int8 4 --codec int8) |"
echo "| 4 ranks top-k 1% / PowerSGD r=4 / sign | $(run topk 4 --codec topk) / $(run powersgd 4 --codec powersgd) / $(run sign 4 --codec sign) |"
[ -n "$JSON" ] || exit 0
/usr/bin/python3 - "$OUT" "$EPOCHS" "${WARMUP[1]:-}" <<'PY'
import json, os, sys
out, epochs = sys.argv[1], int(sys.argv[2])
warmup = int(sys.argv[3]) if sys.argv[3] else None
results = []
for line in open(os.path.join(out, "runs")):
    name, ranks, codec = line.split()
    rep = json.load(open(os.path.join(out, name + ".json")))
    ep = rep.get("epochs") or [{}]
    results.append({"run": name, "ranks": int(ranks), "codec": codec, "final_test_acc": rep["final_test_acc"],
                    "final_loss": ep[-1].get("loss"), "train_s": rep["train_s"],
                    "samples_per_s": rep.get("samples_per_s")})
json.dump({"benchmark": "train-accuracy", "params": {"data": "fashion-mnist", "epochs": epochs,
           "global_batch": 128, "codec_warmup_epochs": warmup}, "ok": True, "results": results},
          open(os.path.join(out, "data.json"), "w"), indent=1)
PY
"$ROOT/bench/run_header.py" finish "$OUT/header.json" "$OUT/data.json" "$JSON"
