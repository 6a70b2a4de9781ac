#!/usr/bin/env bash
# tsan_threads.sh BUILD_DIR - the ThreadSanitizer build's test (ctest
# tsan_threads, registered when GW_SANITIZE_THREAD=ON): real ranks of the
# programs in which several threads use one communicator, each under
# ThreadSanitizer, which must report nothing:
#   - the progress thread of non-blocking collectives, with blocking calls
#     and out-of-order completion (worker_async order), and every
#     non-blocking collective pending at once (worker_async every);
#   - gw_comm_abort from a watchdog thread while the main thread is inside a
#     blocking collective (worker_async abort);
#   - non-blocking compressed allreduces of every codec (worker_compress
#     --async);
#   - sub-communicators sharing their root's progress thread and transport,
#     non-blocking calls on a child and its parent in flight together
#     (worker_split all);
#   - a communicator and its dup or split driven by two threads at once,
#     which is refused (worker_threads);
#   - the trainer, whose backward overlaps gw_iallreduce and
#     gw_iallreduce_compressed;
#   - the parameter server's threads (one per worker), and with --elastic
#     their aborts of every link when a worker dies, and the next phase.
# Criterion cannot run under ThreadSanitizer, hence a script.
set -u
BUILD=${1:?usage: tsan_threads.sh BUILD_DIR}
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
export GW_TIMEOUT_MS=120000 OPENBLAS_NUM_THREADS=1
WORK=$(mktemp -d /tmp/gw-tsan.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
failed=0

verdict() { # NAME RC OUT [WHY]: passed when RC is 0, OUT holds no report and WHY is empty
    local name=$1 rc=$2 out=$3 why=${4:-}
    if [ "$rc" -eq 0 ] && [ -z "$why" ] && ! grep -q "WARNING: ThreadSanitizer" "$out"; then
        echo "PASS: $name"
    else
        echo "FAIL: $name (exit status $rc${why:+; $why})"
        grep -A40 "WARNING: ThreadSanitizer" "$out" | head -80
        tail -n 20 "$out"
        failed=$((failed + 1))
    fi
}

check() { # NAME COMMAND...
    local name=$1
    shift
    timeout 600 "$@" >"$WORK/out" 2>&1
    verdict "$name" $? "$WORK/out"
}

L="$BUILD/gradwire"
for n in 2 3; do
    check "non-blocking collectives, $n ranks" "$L" launch -n $n -- "$BUILD/tests/worker_async" order
    check "gw_comm_abort from a watchdog thread, $n ranks" "$L" launch -n $n -- "$BUILD/tests/worker_async" abort
    check "every non-blocking collective pending at once, $n ranks" "$L" launch -n $n -- \
        "$BUILD/tests/worker_async" every
done
check "sub-communicators on one progress thread, 4 ranks" "$L" launch -n 4 -- \
    "$BUILD/tests/worker_split" all
mkdir -p "$WORK/cz"
# A communicator and its dup (or split) driven by two threads at once,
# which is refused (gradwire.h): the refusal itself must race with nothing.
check "a dup driven from a second thread, refused, 2 ranks" "$L" launch -n 2 -- \
    "$BUILD/tests/worker_threads" dup 300
check "a split driven from a second thread, crossed, refused, 3 ranks" "$L" launch -n 3 -- \
    "$BUILD/tests/worker_threads" split 300 cross
check "non-blocking compressed allreduce, every codec, 3 ranks" env GW_CHUNK_BYTES=4096 \
    "$L" launch -n 3 -- "$BUILD/tests/worker_compress" --async "$WORK/cz" all 0,1,7,1001,4096 3
check "trainer, overlapped dense buckets, 2 ranks" "$L" launch -n 2 -- "$BUILD/gradwire" train \
    --data synthetic --steps 30 --no-progress
check "trainer, overlapped top-k buckets, 2 ranks" "$L" launch -n 2 -- "$BUILD/gradwire" train \
    --data synthetic --steps 30 --codec topk --codec-warmup-epochs 0 --no-progress
# The parameter server: a thread per worker on each server, and with
# --elastic their aborts of every link when a worker is lost (SIGKILLed
# here once training runs), then the next phase's threads.
check "trainer, parameter server (1 server, 2 workers), 3 ranks" "$L" launch -n 3 -- \
    "$BUILD/optimizer/gradwire-train" --data synthetic --steps 30 --async --no-progress
GW_TRAIN_TEST_SLOW=1:300 GW_TSAN_MARK=$$ "$L" launch --elastic -n 4 -- "$BUILD/optimizer/gradwire-train" \
    --data synthetic --synthetic 4000,500,16,4,2 --batch 30 --epochs 3 --async --elastic \
    --no-progress >"$WORK/ps.out" 2>&1 &
job=$!
victim=
for _ in $(seq 1200); do # the rank 3 of this job, once it trains (at most 120 s)
    if grep -q "parameter-server SGD" "$WORK/ps.out" 2>/dev/null; then
        for p in $(pgrep -f optimizer/gradwire-train); do
            if tr '\0' '\n' </proc/"$p"/environ 2>/dev/null | grep -qx "GW_TSAN_MARK=$$" &&
                tr '\0' '\n' </proc/"$p"/environ 2>/dev/null | grep -qx "RANK=3"; then
                victim=$p
            fi
        done
        [ -n "$victim" ] && break
    fi
    sleep 0.1
done
sleep 1
[ -n "$victim" ] && kill -9 "$victim"
timeout 600 tail --pid="$job" -f /dev/null
wait "$job"
rc=$?
why=
[ -n "$victim" ] || why="rank 3 not found to kill"
[ -n "$why" ] || grep -q "lost rank(s) 3 after" "$WORK/ps.out" || why="rank 3's loss not reported"
verdict "parameter server, a worker SIGKILLed, --elastic, 4 ranks" $rc "$WORK/ps.out" "$why"
[ $failed -eq 0 ] && echo "== all passed under ThreadSanitizer" || echo "== $failed failed"
exit $((failed > 0))
