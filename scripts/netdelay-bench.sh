#!/usr/bin/env bash
# netdelay-bench.sh - what cluster.sh's user-space delay (gradwire-netdelay)
# costs: the goodput of one TCP stream between two emulated hosts over plain
# veths, through the relays with offload (the default) and without
# (--offload off), and the relays' CPU time during each transfer, side by
# side in one run (this machine is shared and noisy: compare within a run).
#
# usage: sudo scripts/netdelay-bench.sh [--bytes N] [--delay D]
#   --bytes N  bytes per transfer (default 2000000000)
#   --delay D  each host's delay through the relays (default 1ms)
# Needs root, iproute2, netcat-openbsd and build/gradwire-netdelay (or
# GW_NETDELAY). Uses the cluster prefix gwndb.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
C="$ROOT/scripts/cluster.sh"
P=gwndb
PORT=5001
bytes=2000000000
delay=1ms
while [ $# -gt 0 ]; do
    case "$1" in
        --bytes) bytes="$2"; shift 2 ;;
        --delay) delay="$2"; shift 2 ;;
        -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "netdelay-bench.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
relay=${GW_NETDELAY:-$ROOT/build/gradwire-netdelay}
[ -x "$relay" ] || { echo "netdelay-bench.sh: $relay not built (./scripts/build.sh build)" >&2; exit 1; }
trap '"$C" down --prefix "$P" >/dev/null 2>&1 || true; rm -f "${wrap:-}"' EXIT

# Clock ticks of CPU (user + system) used so far by the cluster's relays.
relay_ticks() {
    local f pid sum=0
    for f in /run/gradwire-cluster/"$P"/relay*.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        sum=$((sum + $(awk '{ print $14 + $15 }' "/proc/$pid/stat")))
    done
    echo "$sum"
}

# One transfer host 0 -> host 1: prints "MBIT SECONDS".
transfer() {
    local out srv k
    out=$(mktemp)
    # shellcheck disable=SC2016
    "$C" exec --prefix "$P" 1 bash -c 'nc -l 198.18.0.2 "$1" </dev/null | {
        dd bs=1 count=1 status=none of=/dev/null; date +%s.%N; wc -c; date +%s.%N; }' _ "$PORT" >"$out" &
    srv=$!
    for ((k = 0; k < 100; k++)); do
        "$C" exec --prefix "$P" 1 ss -ltn | grep -q ":$PORT " && break
        sleep 0.05
    done
    head -c "$bytes" /dev/zero | "$C" exec --prefix "$P" 0 nc -N 198.18.0.2 "$PORT"
    wait "$srv"
    awk 'NR == 1 { a = $1 } NR == 2 { n = $1 } NR == 3 { z = $1 }
        END { printf "%.0f %.3f\n", n * 8 / (z - a) / 1e6, z - a }' "$out"
    rm -f "$out"
}

hz=$(getconf CLK_TCK)
echo "# load before: $(cat /proc/loadavg)"
echo "# path                      goodput(Mbit/s)  relay CPU (s, both relays)  CPU s per GB"
run() { # NAME UP-ARGS...
    local name="$1" t0 t1 r secs
    shift
    "$C" up 2 --prefix "$P" "$@" >/dev/null
    "$C" exec --prefix "$P" 0 ping -n -q -c 2 -i 0.2 198.18.0.2 >/dev/null
    t0=$(relay_ticks)
    read -r r secs < <(transfer)
    t1=$(relay_ticks)
    awk -v n="$name" -v r="$r" -v c="$((t1 - t0))" -v hz="$hz" -v b="$bytes" -v s="$secs" \
        'BEGIN { printf "%-27s %15s  %8.2f (%3.0f%% of a core)  %12.2f\n", n, r, c / hz, 100 * c / hz / s, c / hz / (b / 1e9) }'
}
run "veth (no relay)"
run "relay, offload, $delay" --delay "$delay" --delay-mode user
wrap=$(mktemp /tmp/gwndb-nooff.XXXXXX)
printf '#!/bin/sh\nexec "%s" --offload off "$@"\n' "$relay" >"$wrap"
chmod +x "$wrap"
GW_NETDELAY=$wrap run "relay, no offload, $delay" --delay "$delay" --delay-mode user
echo "# load after: $(cat /proc/loadavg)"
