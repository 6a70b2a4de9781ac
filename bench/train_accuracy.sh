#!/bin/bash
# bench/train_accuracy.sh - the README's accuracy table: `gradwire train` on
# Fashion-MNIST (MLP 784-256-128-10, global batch 128, 15 epochs by
# default) on 1, 4 and 8 local ranks, and on 4 ranks with every codec.
# Prints one Markdown row per run from each run's own JSON report
# (final_test_acc), and the commit and date it measured.
#
# Usage: bench/train_accuracy.sh [BUILD_DIR] [--epochs N]
# Needs the data set: ./scripts/install-deps.sh data. Takes 6 to 15
# minutes on 2 cores (9 runs; 346 s at load 2-5 on 2026-12-04).
set -euo pipefail

PROG=train_accuracy.sh
HELP_LINES=2,11p
EPOCHS=15
# shellcheck source=bench/train_lib.sh
. "$(dirname "$0")/train_lib.sh"
train_args "$@"

# run NAME RANKS [train options]: prints the test accuracy in percent.
run() {
    local name="$1" n="$2"
    shift 2
    train_run "$name" "$n" "$@"
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
