#!/bin/bash
# bench/train_model_parallel.sh - the README's model-parallelism table:
# `gradwire train` on Fashion-MNIST (MLP 784-256-128-10, global batch 128,
# 5 epochs by default, seed 1) data parallel on 1 and 4 ranks, and with the
# model split: tensor parallel, pipeline parallel (GPipe, 4 micro-batches)
# and hybrids. One Markdown row per run from its JSON report: test accuracy,
# the largest rank's memory (parameters, gradients, momentum, activations),
# the pipeline bubble per stage against (K-1)/(M+K-1), training time.
#
# Usage: bench/train_model_parallel.sh [BUILD_DIR] [--epochs N]
# Needs the data set: ./scripts/install-deps.sh data. 8 runs: 48 s on 2 quiet
# cores (2026-12-04), about 10 minutes on busy ones.
set -euo pipefail

PROG=train_model_parallel.sh
HELP_LINES=2,12p
EPOCHS=5
# shellcheck source=bench/train_lib.sh
. "$(dirname "$0")/train_lib.sh"
train_args "$@"

# run NAME RANKS [train options]: one table row.
run() {
    local name="$1" n="$2"
    shift 2
    train_run "$name" "$n" "$@"
    /usr/bin/python3 - "$OUT/$name.json" "$name" "$n" "$*" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p = r.get("parallel")
mem = r.get("rank_memory_bytes", 0) / 2**20
if p and p["pipeline"] > 1:
    bub = " / ".join("%.0f%%" % (100 * b) for b in p["bubble_per_stage"])
    bub += " (theory %.0f%%)" % (100 * p["bubble_theory"])
else:
    bub = "-"
grid = "%d x %d x %d" % ((p["data"], p["pipeline"], p["tensor"]) if p else (r["world"], 1, 1))
print("| %s | %s | %s | %.2f%% | %.2f MiB | %s | %.1f s |" % (
    sys.argv[2], sys.argv[3], grid, 100 * r["final_test_acc"], mem, bub, r["train_s"]))
PY
}

echo "# gradwire $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%F), $EPOCHS epochs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| run | ranks | data x pipeline x tensor | test accuracy | memory, largest rank | bubble per stage | train time |"
echo "|---|---|---|---|---|---|---|"
run "data parallel" 1 --max-rank-memory 4G
run "data parallel" 4 --max-rank-memory 4G
run "tensor parallel" 4 --tensor-parallel 4
run "pipeline parallel" 3 --pipeline-parallel 3 --micro-batches 4
run "tensor x pipeline" 4 --tensor-parallel 2 --pipeline-parallel 2 --micro-batches 4
run "tensor x pipeline, 1F1B" 4 --tensor-parallel 2 --pipeline-parallel 2 --micro-batches 4 \
    --schedule 1f1b
run "data x tensor" 4 --tensor-parallel 2
run "data x pipeline" 4 --pipeline-parallel 2 --micro-batches 4
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
