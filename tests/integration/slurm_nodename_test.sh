#!/usr/bin/env bash
# slurm_nodename_test.sh - plain srun where Slurm's node names are not the
# host names: slurm.conf calls the two emulated hosts gwnode1 and gwnode2
# (NodeAddr their 198.18.0.x addresses) while their host names are n0 and
# n1, as a cluster with NodeName=localhost on host vm has it. Rank 0 is the
# first node's first task by SLURM_NODEID, whatever the names, and the
# others reach it by the first name of SLURM_STEP_NODELIST (here through the
# hosts' /etc/hosts, as a site's own names are; no DNS is asked).
# `srun -N 2 -n 4 gradwire-bench allreduce` with a token file: every element
# checked, the root the step's first name (it was refused: "rank 0 runs on
# n0, not on gwnode1"). test_launch_env checks the refusal of a rank 0 off
# node 0 (SLURM_NODEID), which srun's own distributions do not give.
#
# Usage: slurm_nodename_test.sh BUILD_DIR. Exit 0 passed, 1 failed, 77
# skipped (as slurm_test.sh, whose daemons' set-up this follows).
set -uo pipefail

BUILD=$(cd "${1:?usage: slurm_nodename_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NHOSTS=2
# shellcheck source=emulated_hosts.sh
. "$ROOT/tests/integration/emulated_hosts.sh"
# shellcheck source=slurm_cluster.sh
. "$ROOT/tests/integration/slurm_cluster.sh"

eh_require "Debian packages slurmctld, slurmd, munge, slurm-client" slurmctld slurmd munged srun sinfo

PREFIX="gwsn$$x"
D=$(mktemp -d "${TMPDIR:-/tmp}/gw-slurmname.XXXXXX")
chmod 0755 "$D"
failed=0
fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}
pass() { echo "PASS: $*"; }

stop_all() {
    sc_stop
    eh_down
    rm -rf "$D"
}
trap stop_all EXIT

eh_up "$PREFIX" "$NHOSTS" "$D" || {
    echo "FAIL: the emulated cluster did not come up"
    exit 1
}
# Slurm's names for the hosts, known to every host as a site's are.
for i in $(seq 1 $NHOSTS); do echo "198.18.0.$i gwnode$i" >>"$D/hosts"; done
sc_up gwnames gwnode 1 || exit 1

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$D/token"
chmod 0600 "$D/token"
clean=(env -i PATH="$PATH" HOME="${HOME:-/root}" SLURM_CONF="$SLURM_CONF"
    GW_JOB_TOKEN_FILE="$D/token" GW_DEBUG=INFO GW_DEBUG_SUBSYS=init
    ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"})
BENCH=("$BUILD/gradwire-bench" allreduce -b 8 -e 64K -f 8 -n 2 -w 1 -c 1)

# Plain srun on nodes whose Slurm names are not their host names.
eh_in 0 "${clean[@]}" timeout 60 srun -N 2 -n 4 "${BENCH[@]}" >"$D/plain.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "# Wrong elements       : 0 OK" "$D/plain.out" &&
    grep -q "bootstrap root gwnode1:[0-9]*: the first host of SLURM_STEP_NODELIST" "$D/plain.out"; then
    pass "srun -N 2 -n 4 on gwnode[1-2] (hosts n0, n1): root gwnode1 from the step, every element checked"
else
    fail "srun -N 2 -n 4 on nodes named unlike their hosts exited $rc"
    grep -E "ERROR|rank 0 runs" "$D/plain.out" | head -n 5
    tail -n 5 "$D/plain.out"
fi

echo "== $failed failed"
[ $failed -eq 0 ]
