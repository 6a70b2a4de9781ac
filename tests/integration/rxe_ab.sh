#!/usr/bin/env bash
# rxe_ab.sh - the point-to-point bandwidth of two builds of gradwire and of
# perftest's ib_write_bw in one Soft-RoCE VM (scripts/rxe-vm), in rounds
# that run all three, in an order that rotates from one round to the next
# (perftest-A-B, A-B-perftest, B-perftest-A), so that neither build is
# always the one next to perftest or the first after it. The measurement is
# rxe_vm_test's (50 messages of 1 MiB, gradwire-bench p2p -W 16, 2 warm-up
# messages). It prints every round and the medians and geometric means of
# A / ib_write_bw, B / ib_write_bw and B / A.
#
# Made to tell whether a change moved the bandwidth or the host did: on the
# 2-core TCG VM single rounds vary by 2x with the host's load, so only many
# rounds of both builds side by side can.
#
# Usage: rxe_ab.sh BUILD_A BUILD_B [ROUNDS]   (default 15 rounds); e.g. the
# build of an older commit against this one:
#   git worktree add /tmp/old 9c22bf3 && (cd /tmp/old && scripts/build.sh)
#   tests/integration/rxe_ab.sh /tmp/old/build build 15
# Exit status: 0, or 77 when no VM can be had here (scripts/rxe-vm's).
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SELF="$ROOT/tests/integration/rxe_ab.sh"

if [ "${1:-}" != "--inside" ]; then
    [ $# -ge 2 ] || { sed -n '2,22p' "$0"; exit 2; }
    A=$(cd "$1" && pwd) && B=$(cd "$2" && pwd) || exit 2
    for b in "$A" "$B"; do
        for f in gradwire gradwire-bench; do
            [ -x "$b/$f" ] || { echo "rxe_ab: $b/$f is not built" >&2; exit 2; }
        done
    done
    rounds=${3:-15}
    cd "$ROOT" || exit 2
    exec "$ROOT/scripts/rxe-vm" --no-install --timeout $((60 + 40 * rounds)) --ro "$ROOT" --ro "$A" \
        --ro "$B" -- "$SELF" --inside "$A" "$B" "$rounds"
fi

A=$2 B=$3 ROUNDS=$4
WORK=$(mktemp -d /tmp/rxe-ab.XXXXXX)
gid=${GW_RXE_GID_INDEX:-1}
PT_PORT=18515
ib_bw() { # ib = the GB/s of one ib_write_bw run, or nothing (in this shell: it counts ports)
    ib=
    PT_PORT=$((PT_PORT + 1))
    timeout 120 ib_write_bw -d rxe0 -x "$gid" -F -p $PT_PORT -s 1048576 -n 50 >"$WORK/server" 2>&1 &
    local spid=$! i
    for i in $(seq 100); do
        ss -ltn 2>/dev/null | grep -q ":$PT_PORT " && break
        sleep 0.1
    done
    timeout 120 ib_write_bw -d rxe0 -x "$gid" -F -p $PT_PORT -s 1048576 -n 50 127.0.0.1 \
        >"$WORK/client" 2>&1
    wait $spid
    ib=$(awk '$1 == 1048576 {printf "%.6f", $4 * 1048576 / 1e9}' "$WORK/client")
}
gw_bw() { # BUILD: the GB/s of one gradwire-bench p2p run, or nothing
    GW_TRANSPORT=ib timeout 240 "$1/gradwire" launch -n 2 -- "$1/gradwire-bench" p2p \
        --json "$WORK/bw.json" -b 1048576 -e 1048576 -n 50 -w 2 -W 16 -m uni -c 0 \
        >"$WORK/bw.out" 2>&1 && sed -n 's/.*"uni_GBps": \([0-9.e+-]*\).*/\1/p' "$WORK/bw.json" | head -1
}
echo "A = $A"
echo "B = $B"
for r in $(seq "$ROUNDS"); do
    ib= a= b=
    case $((r % 3)) in
    0) ib_bw; a=$(gw_bw "$A") b=$(gw_bw "$B") ;;
    1) a=$(gw_bw "$A") b=$(gw_bw "$B"); ib_bw ;;
    2) b=$(gw_bw "$B"); ib_bw; a=$(gw_bw "$A") ;;
    esac
    echo "round $r: ib_write_bw ${ib:-?} GB/s, A ${a:-?} GB/s, B ${b:-?} GB/s"
    [ -n "$ib" ] && [ -n "$a" ] && [ -n "$b" ] && echo "$ib $a $b" >>"$WORK/rounds"
done
[ -s "$WORK/rounds" ] || { echo "no round gave all three figures"; exit 1; }
awk 'function med(v, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
                                     return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
    { n++; ib[n] = $1; a[n] = $2; b[n] = $3; ra[n] = $2 / $1; rb[n] = $3 / $1; rab[n] = $3 / $2
      la += log(ra[n]); lb += log(rb[n]); lab += log(rab[n]) }
    END {
        printf "%d rounds: median ib_write_bw %.4f GB/s, A %.4f GB/s, B %.4f GB/s\n", n, med(ib, n), med(a, n), med(b, n)
        printf "A / ib_write_bw: median %.2f, geometric mean %.2f\n", med(ra, n), exp(la / n)
        printf "B / ib_write_bw: median %.2f, geometric mean %.2f\n", med(rb, n), exp(lb / n)
        printf "B / A:           median %.2f, geometric mean %.2f\n", med(rab, n), exp(lab / n) }' "$WORK/rounds"
