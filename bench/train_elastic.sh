#!/bin/sh
# Fashion-MNIST: an elastic run that loses a rank in epoch 2 against an
# un-killed run with the same global batch, 4 ranks over shared memory.
# Prints the final test accuracy of both, their difference, and what the
# elastic run reported (the lost rank, the step, the time lost) and both
# training times.
# Usage: bench/train_elastic.sh BUILD_DIR [EPOCHS] [BATCH]
set -u
B=${1:?build dir}
E=${2:-15}
BATCH=${3:-128}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
LAUNCH="$B/gradwire launch"
TRAIN="$B/optimizer/gradwire-train"
ARGS="--data fashion-mnist --epochs $E --batch $BATCH --no-progress"
export GW_TRANSPORT=shm
echo "load before: $(cat /proc/loadavg)"
$LAUNCH -n 4 -- $TRAIN $ARGS > "$T/base.out" 2>&1 || { cat "$T/base.out"; exit 1; }
GW_TEST_MARK=elastic-bench $LAUNCH --elastic -n 4 -- $TRAIN $ARGS --elastic > "$T/el.out" 2>&1 &
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
