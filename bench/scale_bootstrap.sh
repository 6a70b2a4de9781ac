#!/bin/sh
# bench/scale_bootstrap.sh - the bootstrap all-gather over the star and
# over the ring at 8..64 ranks on one host (README "Scale"), beside
# bench/scale.sh and with its worker: for each size and path, `gradwire
# launch -n N` runs tests/worker_scale time over TCP with lazy
# connections, GW_BOOTSTRAP_RING_MIN=2 forcing the ring and N + 1 keeping
# the star whatever the default (256). Rank 0 logs at INFO how long
# its all-gather took and how many bytes it sent; the worker reports the
# creation time of the rank that started last and the slowest rank's.
# Prints one line per run, then the medians.
#
# Usage: bench/scale_bootstrap.sh [BUILD_DIR] [SIZES] [REPEATS]
#   defaults: build "8 16 32 64" 3. Prints the machine load first and last.
set -eu
build=${1:-build}
sizes=${2:-"8 16 32 64"}
repeats=${3:-3}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load: $(cat /proc/loadavg)"
for n in $sizes; do
    for path in star ring; do
        if [ "$path" = ring ]; then min=2; else min=$((n + 1)); fi
        i=0
        while [ "$i" -lt "$repeats" ]; do
            log=$(GW_BOOTSTRAP_RING_MIN=$min GW_DEBUG=INFO GW_DEBUG_SUBSYS=bootstrap \
                GW_TRANSPORT=tcp GW_CONNECT=lazy GW_TIMEOUT_MS=60000 \
                "$build/gradwire" launch -n "$n" -- "$build/tests/worker_scale" time 2>&1) || true
            # "... over the ring took 6 ms; rank 0 sent 2517 bytes"
            ag=$(printf '%s\n' "$log" | sed -n 's/.*over the \([a-z]*\) took \([0-9]*\) ms; rank 0 sent \([0-9]*\) bytes.*/\1 \2 \3/p' | head -n 1)
            sc=$(printf '%s\n' "$log" | sed -n 's/.*scale: n=[0-9]* .* init_ms=\([0-9.]*\) last_init_ms=\([0-9.]*\) .*/\1 \2/p' | head -n 1)
            if [ -z "$ag" ] || [ -z "$sc" ]; then
                echo "n=$n $path FAILED"
            else
                echo "n=$n $path $ag $sc" | tee -a "$out" |
                    awk '{printf "n=%d asked=%s took=%s gather_ms=%s rank0_sent=%s init_ms(max)=%s last_init_ms=%s\n", substr($1,3), $2, $3, $4, $5, $6, $7}'
            fi
            i=$((i + 1))
        done
    done
done
echo "load: $(cat /proc/loadavg)"
echo "medians (ranks, path, rank 0's all-gather ms, bytes rank 0 sent, creation of the last rank ms, slowest rank's creation ms):"
for n in $sizes; do
    for path in star ring; do
        for col in 4 5 7 6; do
            grep "^n=$n $path " "$out" | awk -v c=$col '{print $c}' | sort -n |
                awk '{v[NR]=$1} END {if (NR) printf "%s ", (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; else printf "- "}'
        done | awk -v n="$n" -v p="$path" '{printf "%d %s %s %s %s %s\n", n, p, $1, $2, $3, $4}'
    done
done
