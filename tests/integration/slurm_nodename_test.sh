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
    local f
    for f in "$D"/run/*.pid "$D"/munge/munged.pid; do
        [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
    done
    sleep 0.5
    for f in "$D"/run/*.pid "$D"/munge/munged.pid; do
        [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
    done
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
mkdir -p "$D"/{state,log,run,munge,spool}

dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none
chmod 0400 "$D/munge/munge.key"
munged --force --socket="$D/munge/munge.sock" --key-file="$D/munge/munge.key" \
    --pid-file="$D/munge/munged.pid" --log-file="$D/munge/munged.log" \
    --seed-file="$D/munge/seed" || {
    echo "FAIL: munged did not start"
    exit 1
}

cat >"$D/slurm.conf" <<EOF
ClusterName=gwnames
SlurmctldHost=n0(198.18.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$D/munge/munge.sock
CredType=cred/munge
MailProg=/bin/true
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=5
NodeName=gwnode[1-$NHOSTS] NodeAddr=198.18.0.[1-$NHOSTS] CPUs=2 State=UNKNOWN
PartitionName=all Nodes=gwnode[1-$NHOSTS] Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$D/slurm.conf"

eh_in 0 slurmctld -f "$SLURM_CONF" || { echo "FAIL: slurmctld did not start"; exit 1; }
for i in $(seq 0 $((NHOSTS - 1))); do
    eh_in "$i" slurmd -f "$SLURM_CONF" -N "gwnode$((i + 1))" ||
        { echo "FAIL: slurmd gwnode$((i + 1)) on n$i did not start"; exit 1; }
done
up=0
for _ in $(seq 100); do
    up=$(eh_in 0 sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle$')
    [ "$up" -eq "$NHOSTS" ] && break
    sleep 0.2
done
if [ "$up" -ne "$NHOSTS" ]; then
    echo "FAIL: only $up of $NHOSTS nodes came up idle"
    eh_in 0 sinfo -N 2>&1
    tail -n 5 "$D"/log/*.log
    exit 1
fi

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
