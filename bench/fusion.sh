#!/usr/bin/env bash
# fusion.sh - tensor fusion: T allreduces of B bytes fused (gw_allreduce_many,
# torch's all_reduce_coalesced on a gradwire group) against the same calls
# one by one and against torch gloo's allreduce_coalesced, interleaved in
# one job on N ranks of this host (bench/fusion.py says how it times).
#
#   bench/fusion.sh [--ranks N] [--tensors T] [--bytes B] [--iters I] [--json FILE] [BUILD]
#
# BUILD is the build directory (default build; needs gradwire and the
# Python package). Defaults: 2 ranks, 64 tensors of 4096 bytes, 30
# iterations. --json FILE: the figures with the run header
# (bench/run_header.py; scripts/results.sh fusion renders them). The load
# before and after is printed with the table. Exits 77 (skipped) without
# torch.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CMDLINE=$(/usr/bin/python3 -c 'import shlex, sys; print(shlex.join(sys.argv[1:]))' "$0" "$@")
ranks=2 tensors=64 bytes=4096 iters=30 json="" build="$ROOT/build"
while [ $# -gt 0 ]; do
    case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --tensors) tensors="$2"; shift 2 ;;
    --bytes) bytes="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fusion.sh: unknown option '$1'" >&2; exit 2 ;;
    *) build="$1"; shift ;;
    esac
done
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "skipped: $py has no torch (python3-torch)"
    exit 77
fi
work=$(mktemp -d /tmp/gw-fusion-XXXXXX)
trap 'rm -rf "$work"' EXIT
"$ROOT/bench/run_header.py" begin --command "$CMDLINE" --ranks "$ranks" >"$work/header.json"
echo "# load before: $(cat /proc/loadavg)"
GLOO_SOCKET_IFNAME=lo "$build/gradwire" launch --no-prefix -n "$ranks" -- \
    env PYTHONPATH="$build/python" "$py" -W ignore::UserWarning "$ROOT/bench/fusion.py" \
    --tensors "$tensors" --bytes "$bytes" --iters "$iters" --json "$work/data.json"
echo "# load after: $(cat /proc/loadavg)"
if [ -n "$json" ]; then
    "$ROOT/bench/run_header.py" finish "$work/header.json" "$work/data.json" "$json"
fi
