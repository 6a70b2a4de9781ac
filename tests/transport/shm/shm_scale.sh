#!/bin/bash
# shm_scale.sh - many ranks on one host over shared memory: the job
# succeeds, /dev/shm holds what the bound allows while it runs and nothing
# afterwards, also when every rank is SIGKILLed while it connects.
#
# Usage: shm_scale.sh BUILD_DIR [N] [CONNECT]
#   N ranks (default 32; 128 is the benchmark of issue 28, about a minute
#   on 2 cores), CONNECT lazy or eager (default eager: every pair gets its
#   segment, the most memory a job can take).
#
# Phase 1 runs worker_scale's "time" mode (a ring allreduce, then an
# alltoall, which connects every pair) with GW_TRANSPORT=shm under
# `gradwire launch -n N`, samples the bytes used in /dev/shm every 0.1 s,
# and prints one line:
#   shm_scale: n=N connect=C shm_before=B shm_max=M shm_after=A
#              rss_all_kb=MAX/MEAN shm_maps_all=MAX/MEAN wall_s=S
# and worker_scale's own "scale:" line. Phase 2 starts the same job and
# SIGKILLs its launcher while it connects, which SIGKILLs every rank,
# then checks /dev/shm again: shm_killed_after=K.
#
# It fails when the job fails, when a rank maps more than its bound
# (32 MiB of rings plus headers, or 64 KiB rings at the floor), or when
# /dev/shm is not back where it was after either phase. As root it runs in
# a private mount namespace with a tmpfs of its own on /dev/shm, so the
# figures are this job's alone; otherwise it measures the shared /dev/shm
# and says so.
set -u
BUILD=${1:?usage: shm_scale.sh BUILD_DIR [N] [CONNECT]}
N=${2:-32}
CONNECT=${3:-eager}
BUILD=$(cd "$BUILD" && pwd)
LAUNCHER=$BUILD/gradwire
WORKER=$BUILD/tests/worker_scale
for f in "$LAUNCHER" "$WORKER"; do
    [ -x "$f" ] || { echo "skipped: $f is not built"; exit 77; }
done

if [ "${GW_SHM_SCALE_INNER:-}" != 1 ]; then
    if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
        exec unshare -m --propagation private env GW_SHM_SCALE_INNER=1 \
            GW_SHM_SCALE_PRIVATE=1 "$0" "$@"
    fi
    echo "note: not root: measuring the shared /dev/shm (other jobs' use shows too)"
fi
if [ "${GW_SHM_SCALE_PRIVATE:-}" = 1 ]; then
    mount -t tmpfs -o size=8g,mode=1777 gwscale /dev/shm || exit 1
fi

used() { df -B1 --output=used /dev/shm | tail -1 | tr -d ' '; }

# The bytes used in /dev/shm, the most seen while $1 runs.
sample_max() {
    local pid=$1 max=0 u
    while kill -0 "$pid" 2>/dev/null; do
        u=$(used)
        [ "$u" -gt "$max" ] && max=$u
        sleep 0.1
    done
    echo "$max"
}

# Wait for /dev/shm to come back to $1 (a last reference may be dropped a
# moment after its process was reaped), at most 5 s.
settle() {
    local want=$1 u i
    for i in $(seq 50); do
        u=$(used)
        [ "$u" -le "$want" ] && break
        sleep 0.1
    done
    echo "$u"
}

fail=0
before=$(used)
out=$(mktemp)
start=$(date +%s.%N)
GW_TRANSPORT=shm GW_CONNECT=$CONNECT GW_NSOCKS=1 GW_TIMEOUT_MS=120000 \
    "$LAUNCHER" launch -n "$N" -- "$WORKER" time >"$out" 2>&1 &
job=$!
max=$(sample_max $job)
wait $job
rc=$?
wall=$(echo "$(date +%s.%N) - $start" | bc)
after=$(settle "$before")
scale=$(grep -o 'scale: .*' "$out")
if [ $rc -ne 0 ] || [ -z "$scale" ]; then
    echo "FAIL: $N ranks over shared memory exited $rc:"
    tail -30 "$out"
    fail=1
fi
rss=$(echo "$scale" | grep -o 'rss_all_kb=[0-9./]*' | cut -d= -f2)
maps=$(echo "$scale" | grep -o 'shm_maps_all=[0-9./]*' | cut -d= -f2)
echo "shm_scale: n=$N connect=$CONNECT shm_before=$before shm_max=$max shm_after=$after" \
    "rss_all_kb=$rss shm_maps_all=$maps wall_s=$(printf %.1f "$wall")"
echo "$scale"
if [ "$after" -gt "$before" ]; then
    echo "FAIL: /dev/shm holds $((after - before)) bytes more after the job than before"
    fail=1
fi
# What one rank may map: its peers' segments, each a 4 KiB header and two
# rings, the rings of all peers within 32 MiB or at the 64 KiB floor.
peers=$((N - 1))
ring=$((2 << 20))
while [ $ring -gt $((64 << 10)) ] && [ $((peers * 2 * ring)) -gt $((32 << 20)) ]; do
    ring=$((ring / 2))
done
bound=$((peers * (4096 + 2 * ring)))
if [ -n "${GW_SHM_SCALE_PRIVATE:-}" ] && [ "$CONNECT" = eager ] &&
    [ "$max" -gt $((bound * N / 2 + (N << 20))) ]; then
    echo "FAIL: /dev/shm reached $max bytes; $((N * (N - 1) / 2)) segments of" \
        "$((4096 + 2 * ring)) bytes make $((bound * N / 2))"
    fail=1
fi
rm -f "$out"

# Phase 2: every process of the job SIGKILLed while it connects.
before=$(used)
GW_TRANSPORT=shm GW_CONNECT=eager GW_NSOCKS=1 GW_TIMEOUT_MS=120000 \
    "$LAUNCHER" launch -n "$N" -- "$WORKER" time >/dev/null 2>&1 &
lpid=$!
# Until some segments exist (or 20 s), then a little longer.
for i in $(seq 200); do
    [ "$(used)" -gt "$before" ] && break
    sleep 0.1
done
during=$(used)
sleep 0.3
# The launcher's ranks die with it (it starts them with PR_SET_PDEATHSIG
# SIGKILL): the whole job is SIGKILLed, nobody cleans up.
ranks=$(pgrep -P "$lpid" | tr '\n' ' ')
kill -KILL "$lpid" 2>/dev/null
wait "$lpid" 2>/dev/null
for i in $(seq 100); do
    alive=0
    for r in $ranks; do kill -0 "$r" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
done
killed_after=$(settle "$before")
echo "shm_scale: killed n=$N: shm_before=$before shm_while_connecting=$during" \
    "shm_killed_after=$killed_after"
if [ "$during" -le "$before" ]; then
    echo "note: no segment seen before the kill: phase 2 tested little"
fi
if [ "$killed_after" -gt "$before" ]; then
    echo "FAIL: a SIGKILLed job left $((killed_after - before)) bytes in /dev/shm:"
    ls -la /dev/shm | head
    fail=1
fi
exit $fail
