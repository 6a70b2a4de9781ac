#!/usr/bin/env bash
# fr_test.sh - the flight recorder, end to end (worker_fr.c, 4 ranks under
# gradwire launch, GW_FR_DUMP):
#   - stop: rank 2 is stopped (SIGSTOP) in the middle of a large
#     allreduce. Every rank writes DIR/rank-N.json, mode 0600 (rank 2 once
#     it is woken), each a JSON dump whose newest entry is that allreduce,
#     running, with the step it waits in; the referee's verdict says where
#     every rank was ("ranks 0,1,3 are in allreduce #S ...; rank 2 did not
#     answer"); `gradwire fr DIR` shows each rank in #S and the waits.
#   - abort: rank 2 calls abort() in the middle of it: its dump comes from
#     the fatal-signal handler (why "SIGABRT"), the call still running.
#   - splitstop: the same stop in a communicator made by gw_comm_split:
#     its ranks dump it as rank-N.comm-X.json, and `gradwire fr DIR`
#     reports it in a section of its own.
#   - GW_FR_ENTRIES=0: no recorder, no dump.
#   - `gradwire fr` refuses a corrupt dump, naming the file.
# Usage: fr_test.sh BUILD_DIR. Exit 0, or 1 with what failed.
set -uo pipefail
BUILD=$(cd "${1:?usage: fr_test.sh BUILD_DIR}" && pwd)
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

run() { # MODE DIR [ENV...]: 4 ranks of worker_fr, output in $tmp/MODE.out
    local mode=$1 dir=$2
    shift 2
    env GW_FR_DUMP="$dir" GW_TIMEOUT_MS=1500 GW_TRANSPORT=shm "$@" \
        timeout 60 "$BUILD/gradwire" launch -n 4 -- "$BUILD/tests/worker_fr" "$mode" \
        >"$tmp/$mode.out" 2>&1
}

# ---- stop ------------------------------------------------------------------
run stop "$tmp/stop"
rc=$?
[ $rc -eq 0 ] || fail "stop: the job exited $rc (want 0: every rank failed cleanly)"
for r in 0 1 2 3; do
    f="$tmp/stop/rank-$r.json"
    [ -f "$f" ] || { fail "stop: rank $r wrote no dump"; continue; }
    m=$(stat -c %a "$f")
    [ "$m" = 600 ] || fail "stop: $f has mode $m, not 600"
done
m=$(stat -c %a "$tmp/stop" 2>/dev/null)
[ "$m" = 700 ] || fail "stop: the dump directory has mode $m, not 700"
# Every dump's newest call is the same running allreduce, in a step that
# waits; the verdict places ranks 0, 1 and 3 in it and rank 2 nowhere.
$PY - "$tmp/stop" "$tmp/stop.out" <<'EOF' || failed=1
import json, re, sys
d, out = sys.argv[1], open(sys.argv[2]).read()
seqs = set()
ok = True
for r in range(4):
    try:
        j = json.load(open(f"{d}/rank-{r}.json"))
    except Exception as e:
        print(f"FAIL: rank {r}'s dump is not JSON: {e}"); ok = False; continue
    e = j["entries"][-1]
    if (j["rank"], j["size"]) != (r, 4) or e["kind"] != "allreduce" or e["state"] != "running" \
            or e["step"] < 1 or e["step_state"] != "started" or e["bytes"] != 8 << 20:
        print(f"FAIL: rank {r}'s newest entry is not a running 8 MiB allreduce waiting in a step: {e}")
        ok = False
    if [x["seq"] for x in j["entries"][:5]] != [1, 2, 3, 4, 5] or j["done"] < 5:
        print(f"FAIL: rank {r} did not record the 5 small allreduces first: {j['entries']}"); ok = False
    seqs.add(e["seq"])
if len(seqs) != 1:
    print(f"FAIL: the ranks' dumps name different calls: {seqs}"); ok = False
m = re.search(r"referee blames rank 2 .*; where: (.*)", out)
if not m:
    print("FAIL: no verdict with where the ranks were:\n" + out); sys.exit(1)
where = m.group(1)
placed = set()
for g in re.finditer(r"ranks? ([\d,]+) (?:is|are) in allreduce #(\d+)", where):
    if seqs and int(g.group(2)) not in seqs:
        print(f"FAIL: the verdict places ranks {g.group(1)} in #{g.group(2)}, the dumps in {seqs}"); ok = False
    placed |= {int(x) for x in g.group(1).split(",")}
if placed != {0, 1, 3} or "rank 2 did not answer" not in where:
    print(f"FAIL: the verdict does not place ranks 0, 1, 3 and name rank 2 silent: {where}"); ok = False
# Every rank's error quotes the verdict's account, at least its start.
for r in (0, 1, 3):
    if not re.search(rf"^\[{r}\] .*ERROR collective #\d+ failed .*where: ranks? ", out, re.M):
        print(f"FAIL: rank {r}'s error does not quote where the ranks were"); ok = False
sys.exit(0 if ok else 1)
EOF
"$BUILD/gradwire" fr "$tmp/stop" >"$tmp/fr.out" 2>&1 || fail "gradwire fr exited $?: $(cat "$tmp/fr.out")"
for r in 0 1 2 3; do
    grep -Eq "^$r +timeout +[0-9]+ +allreduce #[0-9]+ .*running for .*, step [0-9]+ started, waiting for rank" "$tmp/fr.out" ||
        fail "gradwire fr does not show rank $r waiting in the allreduce: $(cat "$tmp/fr.out")"
done
grep -q "^waits: .*1 -> " "$tmp/fr.out" || fail "gradwire fr shows no waits: $(cat "$tmp/fr.out")"

# ---- splitstop: dumps of a communicator made by gw_comm_split ----------------
# The job splits into halves (0,1 | 2,3) and rank 2 stops in the second
# half's allreduce: both of its ranks dump that communicator
# (rank-N.comm-X.json, its own rank numbers), and `gradwire fr` reports it
# in a section of its own, which shows rank 1 (the job's rank 3) waiting
# for rank 0 (the job's rank 2) in the half's first large allreduce. The
# first half runs until the fault fails the job (8 s at most), so that the
# referee, the job's rank 0, is there to judge.
run splitstop "$tmp/split" WORKER_FR_SECONDS=8
rc=$?
[ $rc -eq 0 ] || fail "splitstop: the job exited $rc (want 0): $(cat "$tmp/splitstop.out")"
stopped=$($PY - "$tmp/split" <<'EOF'
import glob, json, sys
for f in sorted(glob.glob(f"{sys.argv[1]}/rank-1.comm-*.json")):
    j = json.load(open(f))
    e = j["entries"][-1]
    if j["size"] == 2 and j["done"] == 0 and e["seq"] == 1 and e["state"] == "running" \
            and e["step_peer"] == 0:
        print(j["comm"])
EOF
)
if [ -z "$stopped" ]; then
    fail "splitstop: no communicator's rank 1 shows it waiting for rank 0 in its first call: $(ls "$tmp/split")"
else
    for r in 0 1; do
        f="$tmp/split/rank-$r.comm-$stopped.json"
        [ -f "$f" ] || { fail "splitstop: no $f"; continue; }
        m=$(stat -c %a "$f")
        [ "$m" = 600 ] || fail "splitstop: $f has mode $m, not 600"
    done
    "$BUILD/gradwire" fr "$tmp/split" >"$tmp/frsplit.out" 2>&1 ||
        fail "gradwire fr on the split job exited $?: $(cat "$tmp/frsplit.out")"
    awk -v id="$stopped" '/^== communicator / { inside = ($3 == id) } inside' \
        "$tmp/frsplit.out" >"$tmp/frsec.out"
    grep -q "made by gw_comm_split" "$tmp/frsec.out" &&
        grep -q "dumps in .*: 2 of 2 ranks" "$tmp/frsec.out" &&
        grep -Eq "^1 +timeout +0 +allreduce #1 .*waiting for rank 0" "$tmp/frsec.out" ||
        fail "gradwire fr does not report communicator $stopped with rank 1 waiting for rank 0: $(cat "$tmp/frsplit.out")"
fi

# ---- abort: the fatal-signal path --------------------------------------------
run abort "$tmp/abort"
$PY - "$tmp/abort/rank-2.json" <<'EOF' || fail "abort: $(cat "$tmp/abort.out")"
import json, sys
j = json.load(open(sys.argv[1]))
e = j["entries"][-1]
ok = j["why"] == "SIGABRT" and e["kind"] == "allreduce" and e["state"] == "running"
if not ok:
    print(f"FAIL: rank 2's dump after abort(): why {j['why']}, newest {e}")
sys.exit(0 if ok else 1)
EOF
m=$(stat -c %a "$tmp/abort/rank-2.json" 2>/dev/null)
[ "$m" = 600 ] || fail "abort: rank-2.json has mode $m, not 600"

# ---- off -----------------------------------------------------------------
run stop "$tmp/off" GW_FR_ENTRIES=0
[ -z "$(ls -A "$tmp/off" 2>/dev/null)" ] || fail "GW_FR_ENTRIES=0 still wrote $(ls "$tmp/off")"

# ---- a corrupt dump is refused by name ------------------------------------------
cp -r "$tmp/stop" "$tmp/bad"
head -c 300 "$tmp/stop/rank-1.json" >"$tmp/bad/rank-1.json"
"$BUILD/gradwire" fr "$tmp/bad" >"$tmp/bad.out" 2>&1 && fail "gradwire fr accepted a cut dump"
grep -q "rank-1.json: not a readable dump" "$tmp/bad.out" ||
    fail "gradwire fr did not name the cut dump: $(cat "$tmp/bad.out")"

[ $failed -eq 0 ] && echo "fr_test: all passed"
exit $failed
