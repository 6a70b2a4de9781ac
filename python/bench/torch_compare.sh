#!/usr/bin/env bash
# torch_compare.sh - python/bench/torch_compare.py (torch.distributed
# all_reduce or DDP, backend gradwire against gloo, interleaved in one job)
# on N ranks of this host, or on N emulated hosts (scripts/cluster.sh, one
# rank per host, each link shaped to RATE; needs root).
#
#   python/bench/torch_compare.sh --local N [--json FILE] [BUILD] -- allreduce|ddp [torch_compare.py options]
#   python/bench/torch_compare.sh --emulated N --rate R [--mtu M] [--json FILE] [BUILD] -- allreduce|ddp [options]
#
# BUILD is the build directory (default build). gloo binds the rank's own
# address (GLOO_SOCKET_IFNAME: lo here, eth0 on an emulated host); gradwire
# takes the transport it picks (shm on one host, tcp across hosts). The
# machine's load before and after is printed with the table. --mtu sets the
# emulated links' MTU (default 1500; 9000 lets one TCP stream carry more of
# the shaped rate, as bench/compare.sh's emulated runs do). --json FILE
# (allreduce): the runs as JSON with the run header (bench/run_header.py;
# scripts/results.sh pytorch renders it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CMDLINE=$(/usr/bin/python3 -c 'import shlex, sys; print(shlex.join(sys.argv[1:]))' "$0" "$@")
mode="" n=0 rate="" mtu=1500 build="$ROOT/build" json=""
while [ $# -gt 0 ]; do
    case "$1" in
    --local) mode=local n="$2"; shift 2 ;;
    --emulated) mode=emulated n="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --mtu) mtu="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    --) shift; break ;;
    *) build="$1"; shift ;;
    esac
done
[ -n "$mode" ] && [ $# -ge 1 ] || { sed -n '2,18p' "$0" >&2; exit 2; }
py=/usr/bin/python3
work=""
if [ -n "$json" ]; then
    [ "$1" = allreduce ] || { echo "--json is for the allreduce mode" >&2; exit 2; }
    work=$(mktemp -d /tmp/gw-torchcmp-XXXXXX)
    trap 'rm -rf "$work"' EXIT
    "$ROOT/bench/run_header.py" begin --command "$CMDLINE" >"$work/header.json"
    set -- "$@" --json "$work/data.json"
fi
prog=(env PYTHONPATH="$build/python" "$py" -W ignore::UserWarning "$ROOT/python/bench/torch_compare.py" "$@")
echo "# load before: $(cat /proc/loadavg)"
if [ "$mode" = local ]; then
    GLOO_SOCKET_IFNAME=lo "$build/gradwire" launch --no-prefix -n "$n" -- "${prog[@]}"
else
    [ -n "$rate" ] || { echo "--emulated needs --rate R (e.g. 2gbit)" >&2; exit 2; }
    [ "$(id -u)" -eq 0 ] || { echo "--emulated needs root (network namespaces and tc)" >&2; exit 2; }
    prefix="gwtc$$x"
    trap '"$ROOT/scripts/cluster.sh" down --prefix "$prefix" >/dev/null 2>&1 || true; [ -z "$work" ] || rm -rf "$work"' EXIT
    "$ROOT/scripts/cluster.sh" up "$n" --prefix "$prefix" --rate "$rate" --mtu "$mtu" >/dev/null
    if [ "$mtu" = 1500 ]; then
        echo "# $n emulated hosts at $rate (MTU 1500: TCP carries at most 95.6% of it)"
    else
        echo "# $n emulated hosts at $rate, MTU $mtu"
    fi
    case "$rate" in *gbit) gbit=${rate%gbit} ;; *mbit) gbit=$(awk "BEGIN{print ${rate%mbit}/1000}") ;; *) gbit=0 ;; esac
    [ "$1" != allreduce ] || prog+=(--link-gbit "$gbit")
    GLOO_SOCKET_IFNAME=eth0 "$build/gradwire" launch --no-prefix --hosts "$prefix" -n "$n" -- "${prog[@]}"
fi
echo "# load after: $(cat /proc/loadavg)"
if [ -n "$json" ]; then
    "$ROOT/bench/run_header.py" finish "$work/header.json" "$work/data.json" "$json"
fi
