#!/bin/sh
# gradwire train --elastic under gradwire launch --elastic, on synthetic data
# (4 ranks, shared memory):
#   1. kill -9 of rank 2 in epoch 2: the others go on, rank 0 says which
#      rank was lost and when; a replacement started then joins in the
#      middle of an epoch (--grow-every 7), the job finishes on 4 ranks with
#      the same weights and shuffle state, and the final test accuracy is
#      within 2 points of an un-killed run with the same global batch (at
#      most 2 below it: within_2, here and in every case);
#   1b. kill -9 of ranks 1 and 3 at once in epoch 2: the other two go on
#      together and finish within 2 points of the un-killed run, and the
#      cost line counts 4 nodes before the loss and 2 after it;
#   2. kill -9 of rank 1 while checkpoints are written at every step: the
#      survivors go on and checkpoint as 3 ranks; SIGTERM then stops them
#      (a checkpoint of the step they agree on), and that checkpoint
#      resumes on 2 ranks (--resume on another rank count), which trains
#      to the end without starting over;
#   3. kill -9 of rank 2 in epoch 1, and a replacement started at once with
#      `gradwire train --elastic --join` (GW_ROOT and GW_JOB_TOKEN of the
#      job): the survivors shrink to 3, the replacement joins at the start
#      of the next epoch they reach (epoch 1 again when the kill landed in
#      its first step and they rolled back to it), the job finishes on 4
#      ranks, rank 0 says who
#      joined, and the final test accuracy is within 2 points of the
#      un-killed run.
#   4. with a codec (PowerSGD, one epoch of dense warm-up): kill -9 of
#      ranks 1 and 3 in epoch 2, the two others roll their codec states
#      back with the weights and go on; a replacement joins mid-epoch and
#      takes rank 0's codec state with a zero residual (its own epochs,
#      on 3 ranks, are shorter than the job's were on 4: it must take the
#      job's warm-up, or its states load nothing and its steps' signatures
#      differ); the job finishes on 3 ranks with the same weights, within
#      2 points of an un-killed run with the codec;
#   5. --async (2 servers, 3 workers): kill -9 of server 1 and worker 2
#      (rank 4) at once in epoch 2: the survivors shrink, server 1's shard
#      comes from the freshest worker copy (its momentum from zero: the
#      weights they go on from are worth epoch 1's), the
#      updates made and those left add up to the run's; a replacement
#      started with --async --elastic --join at once is admitted as a third
#      worker at the next update rank 0 serves, and the updates add up
#      again; the final weights are within 2 points of an un-killed
#      asynchronous run;
#   0. (first) --join and --grow-every without --elastic are refused, and a
#      joiner that finds no job gives up after --join-wait, naming the root.
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

# The value of variable V in the environment of process P.
env_of() { tr '\0' '\n' < /proc/$1/environ | sed -n "s/^$2=//p"; }

final_acc() { grep "epoch   4" "$1" | sed 's/.*test *\([0-9.]*\)%.*/\1/' | tail -1; }

# within_2 BASE GOT WHAT: fail unless the final accuracy GOT (of the run
# WHAT describes) is at most 2 points below the un-killed run's BASE. What
# is judged is that the loss cost no accuracy; a run that ends higher
# passes (with the codec an elastic run once ended 2.45 points above its
# un-killed one, 59.65% against 57.20%: these short runs' own spread).
within_2() {
    [ -n "$1" ] && [ -n "$2" ] || fail "no final accuracy ($3: un-killed '$1', this run '$2')"
    echo "final test accuracy, $3: $2% (un-killed: $1%)"
    awk -v a="$1" -v b="$2" 'BEGIN { exit !(a - b <= 2.0) }' ||
        fail "accuracy $2% is more than 2 points below $1% ($3)"
}

export GW_TRANSPORT=shm GW_TIMEOUT_MS=5000
# 0. --join is refused without --elastic, and a joiner with no job to join
#    gives up after --join-wait, naming the root.
$TRAIN $COMMON --join > "$T/refuse.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "\-\-join is for a job started with --elastic" "$T/refuse.out" ||
    { cat "$T/refuse.out"; fail "--join without --elastic: exit $rc"; }
$TRAIN $COMMON --grow-every 7 > "$T/refuse2.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "\-\-grow-every is for a job started with --elastic" "$T/refuse2.out" ||
    { cat "$T/refuse2.out"; fail "--grow-every without --elastic: exit $rc"; }
GW_ROOT=127.0.0.1:1 GW_JOB_TOKEN=no-such-job-token $TRAIN $COMMON --elastic --join --join-wait 1 > "$T/nojob.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "root 127.0.0.1:1" "$T/nojob.out" && grep -q "GW_ERR_TIMEOUT" "$T/nojob.out" ||
    { cat "$T/nojob.out"; fail "a joiner without a job: exit $rc"; }
# 1. Baseline, then the same run losing rank 2 in epoch 2.
$LAUNCH -n 4 -- $TRAIN $COMMON > "$T/base.out" 2>&1 || { cat "$T/base.out"; fail "baseline run"; }
# The kills must land in a running epoch 2 on any machine: an epoch of
# this model takes a fifth of a second on an idle one, less than the time
# to find a rank's pid on a loaded one (the test once found the job gone).
# Rank 0, which no run kills, sleeps 200 us per sample of its share
# (GW_TRAIN_TEST_SLOW), so every epoch lasts at least 0.8 s; the sleep
# changes no result, and the accuracy is compared with the unslowed base.
SLOW0=0:200
# The ranks admit joiners every 7 steps (--grow-every 7), which no epoch
# start is a multiple of (250 steps an epoch): a replacement started once
# the loss is reported joins in the middle of an epoch.
GROW="--grow-every 7"
GW_TRAIN_TEST_SLOW=$SLOW0 GW_TEST_MARK=kill $LAUNCH --elastic -n 4 -- $TRAIN $COMMON --elastic $GROW > "$T/kill.out" 2>&1 &
job=$!
wait_for "$T/kill.out" "epoch   1" || { cat "$T/kill.out"; fail "no epoch 1"; }
pid=$(rank_pid 2 kill) && pid0=$(rank_pid 0 kill) || fail "ranks 0 and 2 not found"
root=$(env_of "$pid0" GW_ROOT)
token=$(env_of "$pid0" GW_JOB_TOKEN)
kill -9 "$pid"
wait_for "$T/kill.out" "lost rank(s) 2 in step" || { cat "$T/kill.out"; fail "rank 2's loss not reported"; }
GW_ROOT=$root GW_JOB_TOKEN=$token $TRAIN $COMMON --elastic $GROW --join --join-wait 30 > "$T/kjoin.out" 2>&1
jrc=$?
wait $job
rc=$?
cat "$T/kill.out" "$T/kjoin.out"
[ $rc -eq 0 ] || fail "the elastic run exited $rc"
[ $jrc -eq 0 ] || fail "the replacement (--grow-every) exited $jrc"
grep -q "gradwire launch: rank 2 killed by signal SIGKILL; --elastic" "$T/kill.out" ||
    fail "the launcher did not say that it lost rank 2"
grep -q "lost rank(s) 2 in step .* 3 rank(s) go on" "$T/kill.out" ||
    fail "the trainer did not report the lost rank"
grep -q "rank(s) 3 joined at step [0-9]* (step [0-9]* of epoch [234]); 4 rank(s) go on" "$T/kill.out" ||
    fail "rank 0 did not say that rank 3 joined in the middle of an epoch"
grep -q "rank 3 of 4 joined at step [0-9]* (step [0-9]* of epoch" "$T/kjoin.out" ||
    fail "the replacement did not join in the middle of an epoch"
grep -q "the 4 replicas hold the same weights" "$T/kill.out" ||
    fail "the mid-epoch replacement's weights or shuffle are not the others'"
base=$(final_acc "$T/base.out")
within_2 "$base" "$(final_acc "$T/kill.out")" "rank 2 lost in epoch 2 and replaced mid-epoch"

# 1b. Two ranks lost at once (1 and 3, in epoch 2): the two others agree on
#     who is left, finish on 2 ranks, and stay within 2 points.
GW_TRAIN_TEST_SLOW=$SLOW0 GW_TEST_MARK=kill2 $LAUNCH --elastic -n 4 -- $TRAIN $COMMON --elastic > "$T/kill2.out" 2>&1 &
job=$!
wait_for "$T/kill2.out" "epoch   1" || { cat "$T/kill2.out"; fail "no epoch 1 (two killed)"; }
pid1=$(rank_pid 1 kill2) && pid3=$(rank_pid 3 kill2) || fail "ranks 1 and 3 not found"
kill -9 "$pid1" "$pid3"
wait $job
rc=$?
cat "$T/kill2.out"
[ $rc -eq 0 ] || fail "the elastic run losing two ranks exited $rc"
grep -q "lost rank(s) 1,3 in step .* 2 rank(s) go on" "$T/kill2.out" ||
    fail "the trainer did not report ranks 1 and 3 lost together"
within_2 "$base" "$(final_acc "$T/kill2.out")" "ranks 1 and 3 lost in epoch 2"
# The cost counts 4 nodes until the loss and 2 after it, not 4 throughout.
mean=$(sed -n 's/.*node-hours (4 node(s) at the start, 2 at the end, \([0-9.]*\) on average.*/\1/p' "$T/kill2.out")
[ -n "$mean" ] && awk -v m="$mean" 'BEGIN { exit !(m > 2 && m < 4) }' ||
    fail "the cost line does not count the nodes each part of the run had (mean '$mean')"

# 4. A codec: ranks 1 and 3 lost in epoch 2, one replacement mid-epoch.
CODEC="--codec powersgd --codec-warmup-epochs 1"
$LAUNCH -n 4 -- $TRAIN $COMMON $CODEC > "$T/cbase.out" 2>&1 || { cat "$T/cbase.out"; fail "baseline run with a codec"; }
GW_TRAIN_TEST_SLOW=$SLOW0 GW_TEST_MARK=codec $LAUNCH --elastic -n 4 -- $TRAIN $COMMON $CODEC --elastic $GROW > "$T/codec.out" 2>&1 &
job=$!
wait_for "$T/codec.out" "epoch   1" || { cat "$T/codec.out"; fail "no epoch 1 (codec)"; }
pid1=$(rank_pid 1 codec) && pid3=$(rank_pid 3 codec) && pid0=$(rank_pid 0 codec) || fail "ranks 0, 1 and 3 not found (codec)"
root=$(env_of "$pid0" GW_ROOT)
token=$(env_of "$pid0" GW_JOB_TOKEN)
kill -9 "$pid1" "$pid3"
wait_for "$T/codec.out" "lost rank(s) 1,3 in step" || { cat "$T/codec.out"; fail "ranks 1 and 3's loss not reported (codec)"; }
GW_ROOT=$root GW_JOB_TOKEN=$token $TRAIN $COMMON $CODEC --elastic $GROW --join --join-wait 30 > "$T/cjoin.out" 2>&1
jrc=$?
wait $job
rc=$?
cat "$T/codec.out" "$T/cjoin.out"
[ $rc -eq 0 ] || fail "the elastic run with a codec exited $rc"
[ $jrc -eq 0 ] || fail "the replacement with a codec exited $jrc"
back=$(sed -n 's/.*2 rank(s) go on from step \([0-9]*\) .*/\1/p' "$T/codec.out")
grep -q "codec powersgd: each survivor's codec state (error-feedback residual, step $back) rolled back with the weights" "$T/codec.out" ||
    fail "the survivors' codec states are not said to be back at step '$back', where they go on from"
grep -q "rank(s) 2 joined at step [0-9]* (step [0-9]* of epoch [234]); 3 rank(s) go on (global batch 64, 22-21 per rank)" "$T/codec.out" ||
    fail "rank 0 did not say that rank 2 joined mid-epoch (codec)"
grep -q "rank 2 of 3 joined at step .*the codec state of rank 0 with a zero residual" "$T/cjoin.out" ||
    fail "the replacement did not take rank 0's codec state"
grep -q "the 3 replicas hold the same weights" "$T/codec.out" ||
    fail "the replicas differ after a roll-back and a join with a codec"
within_2 "$(final_acc "$T/cbase.out")" "$(final_acc "$T/codec.out")" \
    "PowerSGD, ranks 1 and 3 lost in epoch 2, one replaced mid-epoch"

# 5. Parameter servers: a server and a worker lost at once.
ASYNC="--data synthetic --synthetic 16000,2000,32,10,3 --batch 60 --epochs 4 --no-progress --async --servers 2"
async_acc() { sed -n 's/.*final weights (assembled from the servers): test accuracy \([0-9.]*\)%.*/\1/p' "$1" | tail -1; }
$LAUNCH -n 5 -- $TRAIN $ASYNC > "$T/abase.out" 2>&1 || { cat "$T/abase.out"; fail "asynchronous baseline run"; }
$TRAIN $ASYNC --elastic --grow-every 5 > "$T/agrow.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "\-\-grow-every is for synchronous --elastic training" "$T/agrow.out" ||
    { cat "$T/agrow.out"; fail "--async --elastic --grow-every: exit $rc"; }
# Worker 0 (rank 2) sleeps 200 us a sample, and the others wait for it at
# the staleness bound: the run lasts long enough to be killed in, and for
# the replacement to start and be admitted after the kill (three epochs).
GW_TRAIN_TEST_SLOW=2:200 GW_TEST_MARK=async $LAUNCH --elastic -n 5 -- $TRAIN $ASYNC --elastic > "$T/async.out" 2>&1 &
job=$!
wait_for "$T/async.out" "epoch   1" || { cat "$T/async.out"; fail "no epoch 1 (async)"; }
pid0=$(rank_pid 0 async) && pid1=$(rank_pid 1 async) && pid4=$(rank_pid 4 async) ||
    fail "ranks 0, 1 and 4 not found (async)"
root=$(env_of "$pid0" GW_ROOT)
token=$(env_of "$pid0" GW_JOB_TOKEN)
kill -9 "$pid1" "$pid4"
GW_ROOT=$root GW_JOB_TOKEN=$token $TRAIN $ASYNC --elastic --join --join-wait 30 > "$T/ajoin.out" 2>&1
jrc=$?
wait $job
rc=$?
grep -v "WARN communicator aborted by the application" "$T/async.out"
cat "$T/ajoin.out"
[ $rc -eq 0 ] || fail "the asynchronous elastic run exited $rc"
[ $jrc -eq 0 ] || fail "the asynchronous replacement exited $jrc"
line=$(grep "lost rank(s) 1,4 after [0-9]* updates; 1 server(s) and 2 worker(s) go on with [0-9]* updates left" "$T/async.out") ||
    fail "rank 0 did not report ranks 1 and 4 lost (async)"
echo "$line" | grep -q "1 lost server shard(s) taken from the freshest worker copy, their momentum restarted at zero" ||
    fail "server 1's shard is not said to come from a worker"
# The weights they go on from are worth what epoch 1's were (at least, less
# 10 points): a lost shard left at zero instead gave 9.8%. The lost server's
# shard comes from a worker's last pull, up to the staleness bound behind
# the other server's: alone on the machine the recovered weights were 0.1,
# 1.6 and 4.4 points below epoch 1's, and a CI-like run with the quiet pass
# four at a time gave 6.05 (50.15% against 56.20%), which failed a 5-point
# bound; 10 points is still 35 above what the bug this guards against left.
e1=$(grep "epoch   1 " "$T/async.out" | sed 's/.*test *\([0-9.]*\)%.*/\1/' | head -1)
from=$(echo "$line" | sed 's/.* from weights at \([0-9.]*\)% test accuracy.*/\1/')
[ -n "$e1" ] && [ -n "$from" ] || fail "no accuracy of epoch 1 ('$e1') or of the recovered weights ('$from')"
awk -v e="$e1" -v f="$from" 'BEGIN { exit !(f >= e - 10) }' ||
    fail "the survivors went on from weights at $from%, where epoch 1's were at $e1%"
made=$(echo "$line" | sed 's/.* after \([0-9]*\) updates.*/\1/')
left=$(echo "$line" | sed 's/.* go on with \([0-9]*\) updates left.*/\1/')
# 16000 samples over 3 workers, 20 a step: 266 steps an epoch, 4 epochs.
[ $((made + left)) -eq 3192 ] || fail "updates made ($made) and left ($left) do not add up to the run's 3192"
# The replacement: admitted after the shrink, as worker 2 of 3 (rank 3 of
# 4), with its share of the updates left.
line=$(grep "admitted rank(s) 3 after [0-9]* updates; 1 server(s) and 3 worker(s) go on with [0-9]* updates left (20 samples per update)" "$T/async.out") ||
    fail "rank 0 did not report the replacement admitted as rank 3 (async)"
shrunk=$made
made=$(echo "$line" | sed 's/.* after \([0-9]*\) updates.*/\1/')
left=$(echo "$line" | sed 's/.* go on with \([0-9]*\) updates left.*/\1/')
[ $((made + left)) -eq 3192 ] || fail "at the grow, updates made ($made) and left ($left) do not add up to 3192"
[ "$made" -ge "$shrunk" ] || fail "the grow counts $made updates made, fewer than the shrink's $shrunk"
grep -q "rank 3 of 4 (worker 2 of 3) after $made updates, with [0-9]* of the $left updates left" "$T/ajoin.out" ||
    fail "the replacement did not say where it joined (async)"
# The staleness bound held in both phases (the moment a failure woke a
# server counts for nothing: a dead worker's clock stands still).
gap=$(sed -n 's/.*largest clock gap between workers \([0-9]*\) (bound 4).*/\1/p' "$T/async.out")
[ -n "$gap" ] && [ "$gap" -le 4 ] || fail "largest clock gap '$gap' over the bound of 4 (async)"
within_2 "$(async_acc "$T/abase.out")" "$(async_acc "$T/async.out")" \
    "parameter servers, a server and a worker lost in epoch 2"

# 3. Rank 2 dies in epoch 1; a replacement joins the shrunk job.
# Rank 2 sleeps 100 us a sample (GW_TRAIN_TEST_SLOW), so that epoch 1 lasts
# long enough to be killed in (the rank that is 2 later sleeps too).
GW_TRAIN_TEST_SLOW=2:100 GW_TEST_MARK=join $LAUNCH --elastic -n 4 -- $TRAIN $COMMON --elastic \
    > "$T/join.out" 2>&1 &
job=$!
# The pids first, so that the kill follows the start of training at once:
# an epoch takes a few tenths of a second here.
i=0
until pid=$(rank_pid 2 join) && pid0=$(rank_pid 0 join); do
    i=$((i + 1))
    [ $i -gt 400 ] && { cat "$T/join.out"; fail "ranks 0 and 2 not found (join)"; }
    sleep 0.1
done
root=$(env_of "$pid0" GW_ROOT)
token=$(env_of "$pid0" GW_JOB_TOKEN)
i=0
while ! grep -q "gradwire-train: 4 rank(s)" "$T/join.out" 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt 2000 ] && { cat "$T/join.out"; fail "no start (join)"; }
    sleep 0.02
done
kill -9 "$pid"
GW_TRAIN_TEST_SLOW=2:100 GW_ROOT=$root GW_JOB_TOKEN=$token $TRAIN $COMMON --elastic --join --join-wait 30 \
    > "$T/joiner.out" 2>&1
jrc=$?
wait $job
rc=$?
cat "$T/join.out"
cat "$T/joiner.out"
[ $rc -eq 0 ] || fail "the elastic run with a replacement exited $rc"
[ $jrc -eq 0 ] || fail "the replacement exited $jrc"
grep -q "lost rank(s) 2 in step [0-9]* (epoch 1); 3 rank(s) go on" "$T/join.out" ||
    fail "the trainer did not report rank 2 lost in epoch 1"
# The start of the next epoch, or of epoch 1 when the survivors rolled back
# to it (a kill in the first step): they grow where they resume.
grep -q "rank(s) 3 joined at the start of epoch [1234]; 4 rank(s) go on (global batch 64, 16 per rank)" \
    "$T/join.out" || fail "rank 0 did not say that rank 3 joined"
grep -q "rank 3 of 4 joined at the start of epoch" "$T/joiner.out" || fail "the replacement did not join"
grep -q "the 4 replicas hold the same weights" "$T/join.out" ||
    fail "the replacement's weights are not the others'"
lost=$(sed -n 's/.*lost rank(s) 2 in step [0-9]* (epoch \([0-9]*\)).*/\1/p' "$T/join.out")
within_2 "$base" "$(final_acc "$T/join.out")" "rank 2 lost in epoch $lost and replaced"

# 2. Checkpoints at every step; rank 1 dies among them.
C="$T/ckpt"
GW_TRAIN_TEST_SLOW=$SLOW0 GW_TEST_MARK=ckpt $LAUNCH --elastic -n 4 -- $TRAIN $COMMON --elastic --checkpoint-dir "$C" \
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
