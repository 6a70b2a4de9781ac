#!/usr/bin/env bash
# status_hosts_test.sh - `gradwire status` against a 16-rank job on 4
# emulated hosts (scripts/cluster.sh: network namespaces on a bridge, 4
# ranks on each, started by `gradwire launch --hosts`), asked from another
# host of the cluster as an operator's shell would:
#   - --json knows all 16 ranks, each in an allreduce, with collectives
#     done and bytes sent to and received from peers on other hosts;
#   - the table form has a line for every rank and the lagging line;
#   - the query neither stops nor fails the job, which ends well.
# How fast the answer comes is not judged here (the machine's speed): the
# client's own --timeout-ms bounds it, and status_test.sh covers the rest
# of the protocol (wrong tokens, forged proofs) on one host.
# Needs root and network namespaces; exits 77 (skipped) with the reason
# otherwise.
# Usage: status_hosts_test.sh BUILD_DIR. Exit 0, or 1 with what failed.
set -uo pipefail
BUILD=$(cd "${1:?usage: status_hosts_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
[ "$(id -u)" -eq 0 ] || { echo "skipped: needs root for network namespaces"; exit 77; }
ip netns list >/dev/null 2>&1 || { echo "skipped: no network namespaces here (ip netns)"; exit 77; }

PREFIX=gwsth$$x
tmp=$(mktemp -d)
job=
cleanup() {
    [ -n "$job" ] && kill "$job" 2>/dev/null
    "$ROOT/scripts/cluster.sh" --prefix "$PREFIX" down >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

"$ROOT/scripts/cluster.sh" --prefix "$PREFIX" up 4 >"$tmp/cluster.out" 2>&1 || {
    cat "$tmp/cluster.out"
    echo "FAIL: cannot bring up 4 emulated hosts"
    exit 1
}
export GW_JOB_TOKEN=status-hosts-token-0123456789
# Long enough to be asked twice on a loaded machine; the worker's large
# allreduces pulse to rank 0 every 250 ms.
WORKER_FR_SECONDS=12 timeout 120 "$BUILD/gradwire" launch --hosts "$PREFIX" -n 16 \
    --ranks-per-host 4 -- "$BUILD/tests/worker_fr" run >"$tmp/job.out" 2>&1 &
job=$!
root=
for _ in $(seq 300); do
    root=$(sed -n 's/^\[ *0\] root: //p' "$tmp/job.out")
    [ -n "$root" ] && break
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
done
[ -n "$root" ] || { echo "FAIL: the job never started: $(cat "$tmp/job.out")"; exit 1; }
sleep 1.5 # every rank has pulsed by now

# From host 3, which holds ranks 12-15 but not the root.
ask() { ip netns exec "${PREFIX}3" "$BUILD/gradwire" status --root "$root" --timeout-ms 10000 "$@"; }
ask --json >"$tmp/s.json" 2>"$tmp/s.err" || fail "gradwire status --json exited $?: $(cat "$tmp/s.err")"
$PY - "$tmp/s.json" <<'PYEOF' || failed=1
import json, sys
s = json.load(open(sys.argv[1]))
ok = True
if not (s["size"] == 16 and len(s["ranks"]) == 16 and isinstance(s["lagging"], list)):
    print(f"FAIL: not 16 ranks: size {s.get('size')}, {len(s.get('ranks', []))} ranks"); ok = False
for r in s["ranks"]:
    host = r["rank"] // 4
    remote = {p["peer"] for p in r["peers"]
              if p["sent"] > 0 and p["recv"] > 0 and p["peer"] // 4 != host}
    if not (r["known"] and r["op"] == "allreduce" and r["done"] >= 1
            and r["bytes_sent"] > 0 and remote and r["rank"] not in remote
            and remote <= set(range(16))):
        print(f"FAIL: rank {r['rank']}: {r}"); ok = False
sys.exit(0 if ok else 1)
PYEOF
ask >"$tmp/s.txt" 2>&1 || fail "the table form exited $?: $(cat "$tmp/s.txt")"
grep -q "^lagging:" "$tmp/s.txt" || fail "the table lacks the lagging line: $(cat "$tmp/s.txt")"
for r in $(seq 0 15); do
    grep -q "^$r " "$tmp/s.txt" || fail "the table lacks rank $r: $(cat "$tmp/s.txt")"
done

wait "$job"
rc=$?
job=
[ $rc -eq 0 ] || fail "the job, queried meanwhile, exited $rc: $(tail -5 "$tmp/job.out")"
[ "$(grep -c ': GW_OK after' "$tmp/job.out")" -eq 16 ] ||
    fail "not every rank ended well: $(grep -v ': GW_OK after' "$tmp/job.out" | tail -5)"
[ $failed -eq 0 ] && echo "status_hosts_test: all passed"
exit $failed
