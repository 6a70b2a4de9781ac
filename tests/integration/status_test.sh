#!/usr/bin/env bash
# status_test.sh - `gradwire status` against a running 4-rank job
# (worker_fr.c run, under gradwire launch with a known job token):
#   - --json answers within a second with every rank known, in an
#     allreduce, collectives done, and bytes sent to and received from its
#     peers; the table form names the lagging ranks (none here, or some);
#   - a wrong job token gets no status (exit 1, nothing on stdout, the
#     authentication named), nor does a client that forges its proof
#     (rank 0 answers REJECT), and the job goes on;
#   - the job, queried meanwhile, ends well.
# Usage: status_test.sh BUILD_DIR. Exit 0, or 1 with what failed.
set -uo pipefail
BUILD=$(cd "${1:?usage: status_test.sh BUILD_DIR}" && pwd)
PY=/usr/bin/python3
tmp=$(mktemp -d)
job=
trap '[ -n "$job" ] && kill "$job" 2>/dev/null; rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
export GW_JOB_TOKEN=status-test-token-0123456789

WORKER_FR_SECONDS=4 timeout 60 "$BUILD/gradwire" launch -n 4 -- "$BUILD/tests/worker_fr" run \
    >"$tmp/job.out" 2>&1 &
job=$!
root=
for _ in $(seq 100); do
    root=$(sed -n 's/^\[0\] root: //p' "$tmp/job.out")
    [ -n "$root" ] && break
    sleep 0.1
done
[ -n "$root" ] || { echo "FAIL: the job never started: $(cat "$tmp/job.out")"; exit 1; }
sleep 0.8 # every rank has pulsed by now (every 250 ms while it calls collectives)

t0=$(date +%s%N)
"$BUILD/gradwire" status --root "$root" --json >"$tmp/s.json" 2>"$tmp/s.err" ||
    fail "gradwire status exited $?: $(cat "$tmp/s.err")"
ms=$((($(date +%s%N) - t0) / 1000000))
[ $ms -lt 1000 ] || fail "gradwire status took $ms ms (want < 1 s)"
$PY - "$tmp/s.json" <<'PYEOF' || failed=1
import json, sys
s = json.load(open(sys.argv[1]))
ok = s["size"] == 4 and len(s["ranks"]) == 4 and isinstance(s["lagging"], list)
for r in s["ranks"]:
    peers = {p["peer"] for p in r["peers"] if p["sent"] > 0 and p["recv"] > 0}
    if not (r["known"] and r["op"] == "allreduce" and r["done"] >= 5 and r["seq"] >= 6
            and r["for_s"] >= 0 and r["age_s"] < 1 and r["bytes_sent"] > 0
            and peers and r["rank"] not in peers and peers <= set(range(4))):
        print(f"FAIL: rank {r['rank']}: {r}"); ok = False
if not (s["size"] == 4 and len(s["ranks"]) == 4):
    print(f"FAIL: not 4 ranks: {s}")
sys.exit(0 if ok else 1)
PYEOF
"$BUILD/gradwire" status --root "$root" >"$tmp/s.txt" 2>&1 || fail "table form exited $?"
grep -q "^lagging:" "$tmp/s.txt" && grep -q "^3 " "$tmp/s.txt" ||
    fail "the table lacks rank 3 or the lagging line: $(cat "$tmp/s.txt")"

GW_JOB_TOKEN=not-the-job-token-0123456789 "$BUILD/gradwire" status --root "$root" --json \
    >"$tmp/w.out" 2>"$tmp/w.err" && fail "a wrong token got an answer"
[ -s "$tmp/w.out" ] && fail "a wrong token got a status: $(cat "$tmp/w.out")"
grep -q "authentication" "$tmp/w.err" || fail "the wrong token's error: $(cat "$tmp/w.err")"

# A client that skips checking rank 0's proof and answers with a forged
# one: rank 0 itself must refuse it (REJECT, type 4), never send STATUS.
$PY - "$root" <<'PYEOF' || fail "rank 0 answered a forged proof"
import os, socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=5)
def msg(t, payload): return b"GWBS" + struct.pack(">HHI", 5, t, len(payload)) + payload
def recv_msg():
    h = b""
    while len(h) < 12:
        c = s.recv(12 - len(h))
        if not c: return None, b""
        h += c
    t, n = struct.unpack(">HI", h[6:12])
    body = b""
    while len(body) < n:
        c = s.recv(n - len(body))
        if not c: break
        body += c
    return t, body
s.sendall(msg(19, os.urandom(32)))           # STATUS_ASK
t, _ = recv_msg()
if t != 2: print(f"FAIL: no CHALLENGE but type {t}"); sys.exit(1)
s.sendall(msg(3, os.urandom(32)))            # RESPONSE with a forged proof
t, body = recv_msg()
if t != 4: print(f"FAIL: a forged proof got type {t} ({len(body)} bytes), not a REJECT"); sys.exit(1)
PYEOF

wait "$job"
rc=$?
job=
[ $rc -eq 0 ] || fail "the job, queried meanwhile, exited $rc: $(tail -5 "$tmp/job.out")"
grep -q "refused a process .* asking for the job's status" "$tmp/job.out" ||
    fail "rank 0 did not log the refused query"
grep -q "refused a status query from .*: its proof does not match" "$tmp/job.out" ||
    fail "rank 0 did not log the forged proof"
[ $failed -eq 0 ] && echo "status_test: all passed"
exit $failed
