# shellcheck shell=bash
# slurm_cluster.sh - a real Slurm on the emulated hosts, for the tests that
# run srun (slurm_test.sh, slurm_nodename_test.sh). Sourced after
# emulated_hosts.sh's eh_up, with D (the test's directory) and NHOSTS set.
#
# sc_up CLUSTER NAME FIRST starts munged on a socket in $D with a fresh key,
# writes $D/slurm.conf (exported as SLURM_CONF: Slurm's tools never look a
# configuration up by DNS) for nodes NAME<FIRST> .. NAME<FIRST+NHOSTS-1> at
# 198.18.0.1 .. 198.18.0.NHOSTS, starts slurmctld on host 0 and one slurmd
# per host under its node name, and waits until every node is idle. On
# failure it prints one FAIL line saying which daemon, and returns 1.
# sc_stop stops every daemon it started (the caller then runs eh_down).

sc_stop() {
    local f
    for f in "$D"/run/*.pid "$D"/munge/munged.pid; do
        [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
    done
    sleep 0.5
    for f in "$D"/run/*.pid "$D"/munge/munged.pid; do
        [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
    done
}

sc_up() {
    local cluster=$1 name=$2 first=$3 i up=0
    local last=$((first + NHOSTS - 1))
    mkdir -p "$D"/{state,log,run,munge,spool}
    dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none
    chmod 0400 "$D/munge/munge.key"
    munged --force --socket="$D/munge/munge.sock" --key-file="$D/munge/munge.key" \
        --pid-file="$D/munge/munged.pid" --log-file="$D/munge/munged.log" \
        --seed-file="$D/munge/seed" || {
        echo "FAIL: munged did not start"
        return 1
    }
    cat >"$D/slurm.conf" <<CONF
ClusterName=$cluster
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
NodeName=${name}[$first-$last] NodeAddr=198.18.0.[1-$NHOSTS] CPUs=2 State=UNKNOWN
PartitionName=all Nodes=${name}[$first-$last] Default=YES MaxTime=INFINITE State=UP
CONF
    export SLURM_CONF="$D/slurm.conf"

    eh_in 0 slurmctld -f "$SLURM_CONF" || {
        echo "FAIL: slurmctld did not start"
        return 1
    }
    for i in $(seq 0 $((NHOSTS - 1))); do
        eh_in "$i" slurmd -f "$SLURM_CONF" -N "$name$((first + i))" || {
            echo "FAIL: slurmd $name$((first + i)) on n$i did not start"
            return 1
        }
    done
    for _ in $(seq 100); do
        up=$(eh_in 0 sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle$')
        [ "$up" -eq "$NHOSTS" ] && return 0
        sleep 0.2
    done
    echo "FAIL: only $up of $NHOSTS nodes came up idle"
    eh_in 0 sinfo -N 2>&1
    tail -n 5 "$D"/log/*.log
    return 1
}
