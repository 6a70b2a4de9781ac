#!/usr/bin/env bash
# coll_algos_test.sh - every algorithm of allgather, reduce-scatter and
# reduce (collectives/tuning_coll.c), forced one at a time through a tuning
# file (GW_TUNING_FILE, "allgather = direct"), over real processes and both
# local transports, on 2, 3, 4, 5 and 8 ranks: worker_collectives checks
# every result against its exact serial reference, in and out of place, and
# every rank must end with the same hashes. Each run's log must say the
# algorithm came from the tuning file. A tuning file naming an algorithm a
# kind does not have must fail the job at creation, naming the line.
#
# Usage: coll_algos_test.sh BUILD_DIR
# GW_COLL_ALGOS_RANKS (default "2 3 4 5 8") narrows the rank counts: the
# sanitized build runs 3 and 4 (an odd count, and the blocks' splits).
set -euo pipefail
build=$(cd "${1:?usage: coll_algos_test.sh BUILD_DIR}" && pwd)
worker="$build/tests/worker_collectives"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; [ -f "$tmp/log" ] && tail -30 "$tmp/log"; exit 1; }

# Counts around the block splits: 0, fewer elements than ranks, odd counts,
# and one large enough to stream through several chunks (GW_CHUNK_BYTES).
counts=0,1,3,17,1023,70001
runs=0
for kind in allgather reduce_scatter reduce; do
    case $kind in
    allgather) algos="ring rd direct" ;;
    reduce_scatter) algos="ring direct" ;;
    reduce) algos="tree ring" ;;
    esac
    for algo in $algos; do
        printf 'gradwire-tuning 1\n%s = %s\n' "$kind" "$algo" >"$tmp/tune"
        for tr in shm tcp; do
            for n in ${GW_COLL_ALGOS_RANKS:-2 3 4 5 8}; do
                # 8 ranks over TCP only: shm's 8 would add time, not paths.
                [ "$n" = 8 ] && [ "$tr" = shm ] && continue
                out="$tmp/$kind-$algo-$tr-$n"
                mkdir -p "$out"
                GW_TUNING_FILE="$tmp/tune" GW_TRANSPORT=$tr GW_CHUNK_BYTES=8192 \
                    GW_DEBUG=INFO GW_DEBUG_SUBSYS=coll GW_TIMEOUT_MS=60000 \
                    timeout 300 "$build/gradwire" launch -n "$n" -- "$worker" "$out" "$counts" \
                    ring int8,float16,float32,float64 sum,max "$kind" >"$tmp/log" 2>&1 ||
                    fail "$kind = $algo over $tr on $n ranks: worker_collectives exited $?"
                for ((r = 1; r < n; r++)); do
                    cmp -s "$out/rank0" "$out/rank$r" ||
                        fail "$kind = $algo over $tr on $n ranks: rank $r's results differ from rank 0's"
                done
                # allgather writes a hash per call (every rank holds the same);
                # reduce-scatter and reduce are checked by each rank alone.
                [ "$kind" != allgather ] || [ -s "$out/rank0" ] ||
                    fail "$kind = $algo over $tr on $n ranks: no results"
                fn=gw_$kind
                said=$(grep -c "$fn of .* on $n ranks: $algo algorithm (set by the tuning file)" \
                    "$tmp/log" || true)
                [ "$said" -ge 1 ] ||
                    fail "$kind = $algo over $tr on $n ranks: no rank logged that the tuning file chose $algo"
                runs=$((runs + 1))
            done
        done
        echo "ok: $kind = $algo: exact on ${GW_COLL_ALGOS_RANKS:-2 3 4 5 8} ranks (8 over tcp only), all ranks agree"
    done
done

# An algorithm the kind does not have: refused at creation, naming the line.
printf 'gradwire-tuning 1\n# broadcasts have one algorithm\nbroadcast = ring\n' >"$tmp/tune"
if GW_TUNING_FILE="$tmp/tune" GW_TRANSPORT=tcp timeout 120 "$build/gradwire" launch -n 2 -- \
    "$worker" "$tmp/bad" 1 ring float32 sum broadcast >"$tmp/log" 2>&1; then
    fail "a tuning file forcing broadcast = ring was accepted"
fi
grep -q 'line 3: broadcast has no algorithm "ring" (it has: auto, tree)' "$tmp/log" ||
    fail "the refusal of broadcast = ring does not name the line and the choices"
echo "ok: broadcast = ring refused at creation, naming line 3 and the algorithms broadcast has"
echo "$runs runs passed"
