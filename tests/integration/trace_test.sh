#!/usr/bin/env bash
# trace_test.sh - the timeline (GW_TRACE, collectives/comm/trace.c):
#   - `gradwire train --trace FILE` on 4 ranks: FILE is Chrome trace JSON
#     (Python's json reads it), mode 0600, with every rank's track (pid
#     0..3): its collectives, their waits and its compute spans, each with
#     a timestamp and a duration >= 0, and the offset of its clock from
#     rank 0's as measured through the bootstrap (within the round trip:
#     one host, one clock); rank 0 merged the ranks' files and removed
#     them;
#   - GW_TRACE=FILE under `gradwire launch` (worker_fr.c): the launcher
#     merges the 4 ranks' files the same way, counters of bytes in flight
#     included.
# Usage: trace_test.sh BUILD_DIR. Exit 0, or 1 with what failed.
set -uo pipefail
BUILD=$(cd "${1:?usage: trace_test.sh BUILD_DIR}" && pwd)
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

check() { # FILE WHAT CATEGORIES...: the merged trace's properties
    local f=$1 what=$2
    shift 2
    m=$(stat -c %a "$f" 2>/dev/null)
    [ "$m" = 600 ] || fail "$what: $f has mode ${m:-none}, not 600"
    ls "$f".rank-* >/dev/null 2>&1 && fail "$what: the ranks' files were left: $(ls "$f".rank-*)"
    $PY - "$f" "$what" "$@" <<'PYEOF' || failed=1
import collections, json, sys
f, what, cats = sys.argv[1], sys.argv[2], sys.argv[3:]
try:
    ev = json.load(open(f))["traceEvents"]
except Exception as e:
    print(f"FAIL: {what}: not JSON with traceEvents: {e}"); sys.exit(1)
ok = True
seen = collections.defaultdict(set)
for e in ev:
    if e["ph"] == "X":
        if not (isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and e["pid"] in range(4)):
            print(f"FAIL: {what}: bad span {e}"); ok = False
        seen[e["pid"]].add(e.get("cat"))
    elif e["ph"] == "C":
        seen[e["pid"]].add("counter")
# Each rank measured its clock against rank 0's through the bootstrap; on
# one host the clocks are one, so the offset is within the round trip.
offsets = {e["pid"]: e["args"] for e in ev if e["ph"] == "i" and e["name"] == "clock offset"}
if sorted(offsets) != [0, 1, 2, 3]:
    print(f"FAIL: {what}: clock offsets of ranks {sorted(offsets)}, not 0..3"); ok = False
for pid, a in offsets.items():
    if abs(a["offset_ns"]) > a["rtt_ns"] or not 0 < a["rtt_ns"] < 2e9:
        print(f"FAIL: {what}: rank {pid}'s clock offset {a} is beyond its round trip"); ok = False
for pid in range(4):
    missing = [c for c in cats if c not in seen[pid]]
    if missing:
        print(f"FAIL: {what}: rank {pid}'s track lacks {missing} (has {sorted(map(str, seen[pid]))})")
        ok = False
sys.exit(0 if ok else 1)
PYEOF
}

timeout 120 "$BUILD/gradwire" launch -n 4 -- "$BUILD/optimizer/gradwire-train" --data synthetic \
    --synthetic 512,128,16,4,0.1 --epochs 1 --no-progress --trace "$tmp/train.json" \
    >"$tmp/train.out" 2>&1 || fail "gradwire train --trace exited $?: $(tail -5 "$tmp/train.out")"
check "$tmp/train.json" "train --trace" collective wire compute

GW_TRACE="$tmp/launch.json" WORKER_FR_SECONDS=0.3 timeout 60 "$BUILD/gradwire" launch -n 4 -- \
    "$BUILD/tests/worker_fr" run >"$tmp/launch.out" 2>&1 || fail "launch exited $?: $(tail -5 "$tmp/launch.out")"
check "$tmp/launch.json" "GW_TRACE under launch" collective wire counter
grep -q "trace of 4 of 4 ranks" "$tmp/launch.out" || fail "launch did not say it merged 4 ranks"

[ $failed -eq 0 ] && echo "trace_test: all passed"
exit $failed
