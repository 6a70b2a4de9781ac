#!/usr/bin/env bash
# The direct allreduce (collectives/allreduce_direct.c) over real shared
# memory, and the copy path taken when the kernel refuses cross-memory
# attach (process_vm_readv), both checked by worker_collectives against its
# exact serial reference (in and out of place), with all ranks' result
# hashes equal.
#
#   direct    2-5 ranks, counts around each threshold: the small form's
#             16 KiB and the 64 KiB piece, odd counts, counts below the
#             rank count, 0; through the rings (the transport's default,
#             single copy from 8 MiB) and with single copy from 64 KiB
#             (GW_SHM_DIRECT_MIN=65536), so that the pieces take both paths.
#   refused   3 ranks run as user nobody, rank 1 from an execute-only copy
#             of the worker, which makes it non-dumpable: the kernel then
#             refuses every peer's process_vm_readv of rank 1 (EPERM),
#             for real, not through a switch. Ranks 0 and 2 must say so in
#             one WARN line naming rank 1, rank 1 must not (it may read
#             them), and the results must still be exact. The same run
#             with a readable copy (a control) must not warn at all. Both
#             with pairs connected at creation (GW_CONNECT=eager) and on
#             first use (lazy).
#             Needs root (to become nobody); skipped otherwise.
# Usage: shm_direct_test.sh BUILD_DIR [direct|refused]
set -euo pipefail
build="$1"
what="${2:-direct}"
worker="$build/tests/worker_collectives"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; [ -f "$tmp/log" ] && tail -40 "$tmp/log"; exit 1; }

agree() { # DIR N: every rank's file equals rank 0's, and is not empty
    local d="$1" n="$2" r
    [ -s "$d/rank0" ] || fail "rank 0 wrote no results in $d"
    for ((r = 1; r < n; r++)); do
        cmp -s "$d/rank0" "$d/rank$r" || fail "rank $r's results differ from rank 0's ($d)"
    done
}

if [ "$what" = direct ]; then
    counts=0,1,3,4095,4096,4097,16383,16384,16385,65537,262147
    # Every dtype with every op once (3 ranks, the default threshold); the
    # other runs move the pieces' boundaries, which depend on the element
    # size (1, 2, 4, 8 bytes) and not on the op, so they take one dtype of
    # each size, both half-precision formats, and two ops.
    for min in "" 65536; do # "": the transport's default
        for n in 2 3 4 5; do
            dtypes="int8,float16,bfloat16,float32,float64" ops="sum,max"
            [ "$n.$min" = 3. ] && dtypes=all ops=all
            out="$tmp/n$n-${min:-default}"
            mkdir -p "$out"
            env ${min:+GW_SHM_DIRECT_MIN=$min} GW_TRANSPORT=shm \
                timeout 300 "$build/gradwire" launch -n "$n" -- "$worker" "$out" \
                "$counts" direct "$dtypes" "$ops" allreduce >"$tmp/log" 2>&1 ||
                fail "$n ranks: worker_collectives exited $?"
            agree "$out" "$n"
            lines=$(wc -l <"$out/rank0")
            [ "$lines" -ge 100 ] || fail "$n ranks: only $lines results"
            echo "ok: direct allreduce, $n ranks, single copy from ${min:-the default}, $lines exact results, all ranks agree"
        done
    done
    # Auto picks it on one host over shared memory, and not over TCP.
    for tr in shm tcp; do
        GW_TRANSPORT=$tr GW_DEBUG=INFO GW_DEBUG_SUBSYS=coll timeout 120 "$build/gradwire" launch \
            -n 3 -- "$build/gradwire-bench" allreduce -b 8 -e 8 -n 2 -w 1 >"$tmp/log" 2>&1 ||
            fail "auto over $tr: gradwire-bench exited $?"
        grep -q "# Wrong elements       : 0 OK" "$tmp/log" || fail "auto over $tr: no checked result"
        picked=$(grep -c "gw_allreduce of .* on 3 ranks: direct algorithm (the cost model" \
            "$tmp/log" || true)
        want=3
        [ "$tr" = shm ] || want=0
        [ "$picked" = "$want" ] || fail "auto over $tr: $picked of 3 ranks picked direct (want $want)"
    done
    echo "ok: auto picks direct on one host over shared memory, not over TCP"
    exit 0
fi

[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to run the ranks as user nobody"; exit 77; }
id nobody >/dev/null 2>&1 || { echo "SKIP: no user nobody"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is missing"; exit 77; }
if ! setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups test -x "$worker"; then
    echo "SKIP: user nobody cannot run $worker (a parent directory is not searchable)"
    exit 77
fi
chmod 755 "$tmp"
cp "$worker" "$tmp/worker_hidden"
chmod 0711 "$tmp/worker_hidden" # executable, not readable: exec makes the process non-dumpable
cat >"$tmp/rank_wrapper" <<WRAP
#!/bin/sh
if [ "\$GW_RANK" = 1 ] && [ "\$HIDE_RANK1" = 1 ]; then exec "$tmp/worker_hidden" "\$@"; fi
exec "$worker" "\$@"
WRAP
chmod 755 "$tmp/rank_wrapper"
counts=0,7,16385,65537,262147
# One dtype of each element size and two ops: whether a peer may read a
# rank in place does not depend on what the elements are.
# Single copy from 64 KiB (the default, 8 MiB, is above every message
# here), so that the control run's pieces really are read in place.
run() { # OUTDIR HIDE CONNECT
    mkdir -p "$1" && chmod 777 "$1"
    HIDE_RANK1="$2" GW_CONNECT="$3" GW_TRANSPORT=shm GW_DEBUG=INFO GW_DEBUG_SUBSYS=shm \
        GW_SHM_DIRECT_MIN=65536 \
        timeout 300 setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
        "$build/gradwire" launch -n 3 -- "$tmp/rank_wrapper" "$1" "$counts" direct,ring \
        int8,float16,float32,float64 sum,max allreduce >"$tmp/log" 2>&1
}
count() { grep -c "$1" "$tmp/log" || true; }
# Pairs connected at creation (eager): one line per rank says how many
# peers read it in place, one WARN per refused rank names all its peers.
# On first use (lazy, the default): a line per pair as it comes up, and a
# WARN for the first peer refused.
for mode in eager lazy; do
    run "$tmp/control-$mode" 0 $mode || fail "$mode: control run as nobody exited $?"
    agree "$tmp/control-$mode" 3
    [ "$(count 'refuses cross-memory attach')" = 0 ] ||
        fail "$mode: the control run (every rank dumpable) says cross-memory attach is refused"
    if [ $mode = eager ]; then
        [ "$(count '2 of them read our large messages in place')" = 3 ] ||
            fail "eager control: single copy is not in use between every pair of dumpable ranks"
    else
        [ "$(count 'connected to rank [0-2] in [0-9]* ms (it reads our large messages in place)')" = 6 ] ||
            fail "lazy control: not every rank said that its 2 peers read it in place"
    fi
    echo "ok: $mode, as nobody, every rank dumpable: single copy in use, no warning"

    run "$tmp/refused-$mode" 1 $mode || fail "$mode: run with rank 1 non-dumpable exited $?"
    agree "$tmp/refused-$mode" 3
    cp "$tmp/log" "$tmp/refused-$mode.log"
    if [ $mode = eager ]; then
        want="the kernel refuses cross-memory attach to 1 of 2 peers (ranks 1; process_vm_readv: Operation not permitted)"
    else
        want="the kernel refuses cross-memory attach to rank 1 (process_vm_readv: Operation not permitted)"
    fi
    [ "$(grep -c "^\[[02]\].*$want" "$tmp/log" || true)" = 2 ] ||
        fail "$mode: not both of ranks 0 and 2 said the kernel refuses to let them read rank 1"
    [ "$(count 'refuses cross-memory attach')" = 2 ] ||
        fail "$mode: a rank warned more than once, or rank 1 warned too"
    if [ $mode = eager ]; then
        grep -q "^\[1\].*0 of them read our large messages in place" "$tmp/log" ||
            fail "eager: rank 1's large messages are still read in place"
    else
        [ "$(grep -c '^\[1\].*connected to rank [02] in [0-9]* ms (rings only' "$tmp/log" || true)" = 2 ] ||
            fail "lazy: rank 1's large messages are still read in place"
        [ "$(grep -c '^\[[02]\].*connected to rank 1 in [0-9]* ms (it reads our large' "$tmp/log" || true)" = 2 ] ||
            fail "lazy: rank 1 (which may read the others) does not read ranks 0 and 2 in place"
    fi
    cmp -s "$tmp/control-$mode/rank0" "$tmp/refused-$mode/rank0" ||
        fail "$mode: results with the copy path differ from those with single copy"
    echo "ok: $mode, rank 1 non-dumpable: ranks 0 and 2 warn once naming it, results exact and identical"
    grep -m1 "refuses cross-memory attach" "$tmp/refused-$mode.log"
done
