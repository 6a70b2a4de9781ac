#!/usr/bin/env bash
# check_node_test.sh - `gradwire check` names a host slowed by a CPU limit:
# four emulated hosts (scripts/cluster.sh, network namespaces), one rank
# each, the rank of host 2 put into a cgroup held to 2% of one CPU (a CFS
# quota of 2 ms per 100 ms period) before it starts the check. Not 10%: on
# this 2-core machine at a load of 6.6, a healthy host measured alone got
# little more than that (its triad at 12% of the idle machine's), and a
# host held to 10% measured 57-74% of the healthy ones; held to 2% it
# measured 5% (memory) and 7.5% (GEMM) of them. Its node checks then run
# far slower than the others' however loaded the machine is, so:
#   - host 2's memory and GEMM checks FAIL and so does host 2, naming them,
#     after it was measured a second time (as every suspect is);
#   - no other host's memory or GEMM check FAILs (judged at
#     --node-fraction 0.15: the slowed host measured 2-7% of the others; a
#     healthy host on this machine, busy with other work, once measured 39%
#     of them even when measured twice, as a suspect is);
#   - the JSON's node section and the JUnit node suite say the same, and a
#     GPU, absent here, SKIPs with its reason;
#   - the check exits 1 (FAIL).
# The emulated hosts share this machine's CPUs, which the check reports as
# oversubscribed and would not FAIL a node on; the test passes
# --judge-oversubscribed, as test_check does. The network part is kept
# small (a rank at 2% of a CPU makes every round wait for it).
# Needs root, ip and tc (namespaces) and a cgroup CPU controller (v2's
# cpu.max or v1's cpu.cfs_quota_us): exits 77 with the reason otherwise.
# Usage: check_node_test.sh BUILD_DIR SOURCE_DIR. Exit 0, 1 with what
# failed, or 77.
set -uo pipefail
BUILD=$(cd "${1:?usage: check_node_test.sh BUILD_DIR SOURCE_DIR}" && pwd)
SRC=$(cd "${2:?usage: check_node_test.sh BUILD_DIR SOURCE_DIR}" && pwd)
PY=/usr/bin/python3
skip() { echo "skipped: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "emulated hosts and cgroups need root"
command -v ip >/dev/null && command -v tc >/dev/null || skip "needs ip and tc (iproute2)"
[ -x "$PY" ] || skip "the reports are checked with $PY, which is not installed"
ip netns add "gwnprobe$$" >/dev/null 2>&1 && ip netns del "gwnprobe$$" ||
    skip "cannot create network namespaces here"

# The cgroup: v2 where its cpu controller can be enabled, else v1's cpu.
cg=
procs=
v2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
if [ -n "$v2" ] && grep -qw cpu "$v2/cgroup.controllers" 2>/dev/null &&
    { grep -qw cpu "$v2/cgroup.subtree_control" ||
        echo +cpu >"$v2/cgroup.subtree_control"; } 2>/dev/null &&
    mkdir "$v2/gwnode$$" 2>/dev/null; then
    cg="$v2/gwnode$$"
    echo "2000 100000" >"$cg/cpu.max" || { rmdir "$cg"; skip "cannot set cpu.max in $cg"; }
    procs="$cg/cgroup.procs"
else
    v1=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/ { print $2; exit }' /proc/mounts)
    [ -n "$v1" ] && mkdir "$v1/gwnode$$" 2>/dev/null ||
        skip "no cgroup CPU controller to limit a host with (v2 cpu.max or v1 cpu)"
    cg="$v1/gwnode$$"
    { echo 100000 >"$cg/cpu.cfs_period_us" && echo 2000 >"$cg/cpu.cfs_quota_us"; } ||
        { rmdir "$cg"; skip "cannot set a CFS quota in $cg"; }
    procs="$cg/cgroup.procs"
fi

tmp=$(mktemp -d)
prefix="gwn$$k"
cleanup() {
    "$SRC/scripts/cluster.sh" down --prefix "$prefix" >/dev/null 2>&1
    # The cgroup is empty once its rank has exited; remove it then.
    for _ in $(seq 50); do rmdir "$cg" 2>/dev/null && break; sleep 0.1; done
    rm -rf "$tmp"
}
trap cleanup EXIT
"$SRC/scripts/cluster.sh" up 4 --prefix "$prefix" >"$tmp/up.out" 2>&1 ||
    { echo "FAIL: cluster.sh up: $(cat "$tmp/up.out")"; exit 1; }

# Rank 2 (on host 2: rank r runs on host r mod 4) says its pid and waits
# while this script puts it into the cgroup (from here: the rank's view of
# /sys is its namespace's), then becomes the check (exec keeps its pid, so
# every thread it starts is in the cgroup too). The other ranks start at
# once and wait for it in the job's bootstrap.
export GWN_DIR="$tmp"
timeout 150 "$BUILD/gradwire" launch --hosts "$prefix" -n 4 --timeout 140 -- \
    sh -c 'if [ "$GW_RANK" = 2 ]; then echo $$ >"$GWN_DIR/pid.tmp" &&
        mv "$GWN_DIR/pid.tmp" "$GWN_DIR/pid"; while [ ! -e "$GWN_DIR/go" ]; do sleep 0.05; done; fi
        exec "$@"' sh \
    "$BUILD/gradwire-check" --quick --timeout 60 --judge-oversubscribed \
    --node-size 8M --gemm-size 512 --node-time 0.3 --node-fraction 0.15 \
    --lat-iters 10 --bw-iters 2 --bw-size 64K --coll-size 256K --coll-iters 1 --no-retest \
    --json "$tmp/c.json" --junit "$tmp/c.xml" >"$tmp/c.out" 2>&1 &
job=$!
for _ in $(seq 200); do [ -e "$tmp/pid" ] && break; sleep 0.05; done
[ -e "$tmp/pid" ] || { echo "FAIL: rank 2 never started"; kill "$job"; wait "$job"; cat "$tmp/c.out"; exit 1; }
echo "$(cat "$tmp/pid")" >"$procs" || { kill "$job"; wait "$job"; skip "cannot move a process into $cg"; }
touch "$tmp/go"
wait "$job"
rc=$?
[ $rc = 1 ] || { echo "FAIL: the check exited $rc, not 1 (FAIL):"; cat "$tmp/c.out"; exit 1; }

$PY - "$tmp/c.json" "$tmp/c.xml" <<'PYEOF' || { echo "--- the check's output:"; cat "$tmp/c.out"; exit 1; }
import json, sys, xml.etree.ElementTree as ET
d = json.load(open(sys.argv[1]))
x = ET.parse(sys.argv[2]).getroot()
ok = True
def fail(msg):
    global ok
    print("FAIL:", msg); ok = False
slow = [h for h in d["hosts"] if 2 in h["ranks"]][0]
node = {h["name"]: h for h in d["node"]["hosts"]}
if not d["node"]["run"] or len(node) != 4:
    fail(f"the node checks did not run on 4 hosts: {d['node']}")
if slow["verdict"] != "FAIL" or "memory bandwidth" not in (slow["cause"] or ""):
    fail(f"the slowed host {slow['name']} is not named: {slow['verdict']}: {slow['cause']}")
if not node[slow["name"]]["measured_twice"]:
    fail(f"the slowed host, a suspect, was not measured again: {node[slow['name']]}")
for name, h in node.items():
    for check in ("memory", "gemm"):
        v = h[check]["verdict"]
        if name == slow["name"] and v != "FAIL":
            fail(f"slowed host {name}: {check} {v}: {h[check]['cause']}")
        if name != slow["name"] and v == "FAIL":
            fail(f"healthy host {name}: {check} FAIL: {h[check]['cause']}")
    if h["gpu"]["present"] is False and (h["gpu"]["verdict"] != "SKIP" or not h["gpu"]["why_not"]):
        fail(f"host {name}: no GPU, but not SKIP with a reason: {h['gpu']}")
suite = [s for s in x.findall("testsuite") if s.get("name") == "node"]
if len(suite) != 1 or len(suite[0].findall("testcase")) != 16:
    fail("the JUnit report has no node suite of 16 testcases")
else:
    failed = {c.get("name") for c in suite[0].findall("testcase") if c.find("failure") is not None}
    for check in ("memory", "gemm"):
        if not any(n.startswith(check + " ") and n.endswith(" " + slow["name"]) for n in failed):
            fail(f"JUnit: no {check} failure for {slow['name']}: {failed}")
    if any(not n.endswith(" " + slow["name"]) for n in failed):
        fail(f"JUnit: node failures beyond the slowed host: {failed}")
m = node[slow["name"]]["memory"]
print(f"slowed host {slow['name']}: memory {m['triad_GBps']} GB/s against {m['reference']}; "
      f"gemm {node[slow['name']]['gemm']['sgemm_GFLOPps']} GFLOP/s against "
      f"{node[slow['name']]['gemm']['reference']}")
sys.exit(0 if ok else 1)
PYEOF
echo "check node test: the host held to 2% of a CPU FAILs its node checks, alone"
