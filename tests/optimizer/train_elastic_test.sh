#!/bin/sh
# gradwire train --elastic under gradwire launch --elastic, on synthetic data
# (4 ranks, shared memory):
#   1. kill -9 of rank 2 in epoch 2: the job finishes with the others, rank 0
#      says which rank was lost and when, and the final test accuracy is
#      within 2 points of an un-killed run with the same global batch;
#   2. kill -9 of rank 1 while checkpoints are written at every step: the
#      survivors go on and checkpoint as 3 ranks; SIGTERM then stops them
#      (a checkpoint of the step they agree on), and that checkpoint
#      resumes on 2 ranks (--resume on another rank count), which trains
#      to the end without starting over.
# Usage: train_elastic_test.sh BUILD_DIR
set -u
B=${1:?build dir}
LAUNCH="$B/gradwire launch"
TRAIN="$B/optimizer/gradwire-train"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
COMMON="--data synthetic --synthetic 16000,2000,32,10,3 --batch 64 --epochs 4 --no-progress"
fail() { echo "FAIL: $*"; exit 1; }

# The pid of rank R of the job whose ranks carry GW_TEST_MARK=M.
rank_pid() {
    for p in $(pgrep -f gradwire-train); do
        if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "GW_TEST_MARK=$2" &&
            tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "RANK=$1"; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# Wait until FILE has a line matching PATTERN (at most 40 s).
wait_for() {
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 400 ] && return 1
        sleep 0.1
    done
}

final_acc() { grep "epoch   4" "$1" | sed 's/.*test *\([0-9.]*\)%.*/\1/' | tail -1; }

export GW_TRANSPORT=shm GW_TIMEOUT_MS=5000
# 1. Baseline, then the same run losing rank 2 in epoch 2.
$LAUNCH -n 4 -- $TRAIN $COMMON > "$T/base.out" 2>&1 || { cat "$T/base.out"; fail "baseline run"; }
GW_TEST_MARK=kill $LAUNCH --elastic -n 4 -- $TRAIN $COMMON --elastic > "$T/kill.out" 2>&1 &
job=$!
wait_for "$T/kill.out" "epoch   1" || { cat "$T/kill.out"; fail "no epoch 1"; }
pid=$(rank_pid 2 kill) || fail "rank 2 not found"
kill -9 "$pid"
wait $job
rc=$?
cat "$T/kill.out"
[ $rc -eq 0 ] || fail "the elastic run exited $rc"
grep -q "gradwire launch: rank 2 killed by signal SIGKILL; --elastic" "$T/kill.out" ||
    fail "the launcher did not say that it lost rank 2"
grep -q "lost rank(s) 2 in step .* 3 rank(s) go on" "$T/kill.out" ||
    fail "the trainer did not report the lost rank"
a=$(final_acc "$T/base.out")
b=$(final_acc "$T/kill.out")
[ -n "$a" ] && [ -n "$b" ] || fail "no final accuracy (base '$a', elastic '$b')"
echo "final test accuracy: un-killed $a%, rank 2 lost in epoch 2: $b%"
awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 2.0) }' ||
    fail "accuracy $b% is not within 2 points of $a%"

# 2. Checkpoints at every step; rank 1 dies among them.
C="$T/ckpt"
GW_TEST_MARK=ckpt $LAUNCH --elastic -n 4 -- $TRAIN $COMMON --elastic --checkpoint-dir "$C" \
    --checkpoint-every 1 > "$T/ckpt.out" 2>&1 &
job=$!
wait_for "$T/ckpt.out" "epoch   1" || { cat "$T/ckpt.out"; fail "no epoch 1 (checkpoints)"; }
pid=$(rank_pid 1 ckpt) || fail "rank 1 not found"
kill -9 "$pid"
wait_for "$T/ckpt.out" "lost rank(s) 1 in step" || { cat "$T/ckpt.out"; fail "rank 1's loss not reported"; }
sleep 1
kill -TERM $job
wait $job
tail -8 "$T/ckpt.out"
grep -q "SIGTERM: checkpointing" "$T/ckpt.out" || fail "the survivors did not checkpoint on SIGTERM"
step=$(printf '%08d' "$(cat "$C/latest")")
ls "$C"
for r in 0 1 2; do
    [ -f "$C/ckpt-$step-rank$r.gwc" ] || fail "the latest checkpoint ($step) has no file of rank $r"
done
$LAUNCH -n 2 -- $TRAIN $COMMON --elastic --checkpoint-dir "$C" --resume > "$T/resume.out" 2>&1
rc=$?
cat "$T/resume.out"
[ $rc -eq 0 ] || fail "resume on 2 ranks exited $rc"
grep -q "resuming a checkpoint of 3 ranks on 2" "$T/resume.out" || fail "no re-sharded resume"
grep -q "epoch   4" "$T/resume.out" || fail "the resumed run did not train to the end"
grep -q "epoch   1 " "$T/resume.out" && fail "the resumed run started over"
echo "PASS"
