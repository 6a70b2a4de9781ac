#!/usr/bin/env bash
# slurm_test.sh - gradwire under a real Slurm across emulated hosts: munge,
# slurmctld and one slurmd per host of a 4-host scripts/cluster.sh cluster,
# each daemon in its host's network namespace, all started here and stopped
# on exit. srun launches gradwire-bench with no GW_* variable set:
#   - `srun -N 4 -n 8`, no GW_* variable at all: refused on every rank
#     (no job token), saying how to set one; with GW_INSECURE=1 only: rank,
#     size and the root from Slurm's variables (the first host of
#     SLURM_STEP_NODELIST, a port from the job and step ids), every element
#     checked, shared memory inside each host and TCP between them; the job
#     says that anyone who reaches a port gets in;
#   - the same with GW_JOB_TOKEN_FILE (a 0600 file): authenticated, and
#     (GW_DEBUG=INFO) ranks 0-1 on n0 ... 6-7 on n3;
#   - `srun --mpi=pmix -N 4 -n 8`, no GW_* variable: checked, authenticated;
#     again with GW_DEBUG: everything from PMIx, rank 0's token on every
#     rank, the same placement;
#   - a job whose rank 5 exits at once (worker_faults): the survivors get
#     an error naming rank 5 within the timeout, none hangs.
#
# How the hosts are made (no DNS, nothing outside the test's directory
# changed): every daemon runs on its host as emulated_hosts.sh's eh_in
# starts it (host name nI, an /etc/hosts naming n0..n3 by their 198.18.0.x
# addresses), with mpi.conf setting PMIx's client directory per host (the
# hosts share one /tmp, where Slurm's PMIx plugin would otherwise make the
# same directory for every host's step). Processes slurmd starts inherit
# its namespaces.
# munged runs on a socket in the test's directory with a fresh key.
#
# Usage: slurm_test.sh BUILD_DIR. Exit 0 passed, 1 failed, 77 skipped (not
# root, no network namespaces, or Slurm's daemons not installed:
# scripts/install-deps.sh test installs slurmd, slurmctld and munge).
set -uo pipefail

BUILD=$(cd "${1:?usage: slurm_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NHOSTS=4
# shellcheck source=emulated_hosts.sh
. "$ROOT/tests/integration/emulated_hosts.sh"
# shellcheck source=slurm_cluster.sh
. "$ROOT/tests/integration/slurm_cluster.sh"

eh_require "Debian packages slurmctld, slurmd, munge, slurm-client" slurmctld slurmd munged srun sinfo
compgen -G "/usr/lib/*/slurm-wlm/mpi_pmix.so" >/dev/null ||
    { echo "SKIP: Slurm's PMIx plugin is not installed (slurm-wlm-basic-plugins)"; exit 77; }

PREFIX="gwsl$$x"
D=$(mktemp -d "${TMPDIR:-/tmp}/gw-slurm.XXXXXX")
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
mkdir -p "$D"/{pmix,spool}
for i in $(seq 0 $((NHOSTS - 1))); do
    mkdir -p "$D/pmix/n$i" "$D/spool/n$i"
    echo "PMIxCliTmpDirBase=$D/pmix/n$i" >"$D/by-host/n$i/mpi.conf"
done
touch "$D/mpi.conf"
inhost() { eh_in "$@"; }

sc_up gwtest n 0 || exit 1
pass "slurmctld and $NHOSTS slurmd up: $(inhost 0 sinfo -h -o '%D nodes %T in partition %P')"

# The environment of every job: nothing of gradwire's.
clean=(env -i PATH="$PATH" HOME="${HOME:-/root}" SLURM_CONF="$SLURM_CONF"
    LSAN_OPTIONS="suppressions=$ROOT/tests/support/lsan_pmix.supp"
    ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"})
BENCH=("$BUILD/gradwire-bench" allreduce -b 8 -e 4M -f 8 -n 3 -w 1 -c 1)

# bench NAME [ENV...] -- SRUN-ARGS: srun from host 0, output in $D/NAME.out
job() {
    local name=$1
    shift
    local envs=()
    while [ "$1" != -- ]; do
        envs+=("$1")
        shift
    done
    shift
    inhost 0 "${clean[@]}" "${envs[@]}" timeout 120 srun "$@" >"$D/$name.out" 2>&1
}
# The INFO lines the checks read (where each rank runs, how it joined).
INFO=(GW_DEBUG=INFO GW_DEBUG_SUBSYS=init,bootstrap)

checked() { # NAME [placement]: every element checked, 8 ranks, placement by host
    local out="$D/$1.out" r h
    grep -q "# Wrong elements       : 0 OK" "$out" || { echo "no checked result"; return 1; }
    grep -q "# ranks: 8  transport: shm+tcp" "$out" || { echo "not 8 ranks over shm+tcp"; return 1; }
    [ -n "${2:-}" ] || return 0
    for r in $(seq 0 7); do
        h=$(sed -n "s/^\(n[0-9]\):[0-9]*:$r .*connected over.*/\1/p" "$out" | head -1)
        [ "$h" = "n$((r / 2))" ] || { echo "rank $r on '$h', not n$((r / 2))"; return 1; }
    done
}

# No token at all: refused on every rank, saying how to give one.
if job plain -- -N "$NHOSTS" -n 8 "${BENCH[@]}"; then
    fail "srun -N 4 -n 8, no GW_* variable at all: the job ran without a token"
elif grep -q "no job token: a job of 8 ranks" "$D/plain.out" && grep -q "GW_JOB_TOKEN_FILE" "$D/plain.out"; then
    pass "srun -N 4 -n 8, no GW_* variable at all: refused, saying how to set a token"
else
    fail "srun -N 4 -n 8 without a token: no refusal naming GW_JOB_TOKEN"
    tail -n 20 "$D/plain.out"
fi
# GW_INSECURE=1 asks for it: it runs, and says what that means.
if job insecure GW_INSECURE=1 -- -N "$NHOSTS" -n 8 "${BENCH[@]}"; then
    if why=$(checked insecure); then
        if grep -q "GW_INSECURE=1 and no job token: .* anyone who can reach its ports" "$D/insecure.out"; then
            pass "srun -N 4 -n 8 with GW_INSECURE=1 only: root and ranks from Slurm, 8 ranks over shm+tcp checked, says anyone who reaches a port gets in"
        else
            fail "srun -N 4 -n 8 with GW_INSECURE=1: no warning that the job runs without a token"
        fi
    else
        fail "srun -N 4 -n 8 with GW_INSECURE=1: $why"
        tail -n 20 "$D/insecure.out"
    fi
else
    fail "srun -N 4 -n 8 GW_INSECURE=1 gradwire-bench allreduce exited $?"
    tail -n 20 "$D/insecure.out"
fi

# The token from a file only root can read, named by GW_JOB_TOKEN_FILE.
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$D/token"
chmod 0600 "$D/token"
if job token "${INFO[@]}" GW_JOB_TOKEN_FILE="$D/token" -- -N "$NHOSTS" -n 8 "${BENCH[@]}" &&
    why=$(checked token placement); then
    if grep -q "unauthenticated" "$D/token.out"; then
        fail "srun with GW_JOB_TOKEN_FILE: the job still says it is unauthenticated"
    else
        pass "srun -N 4 -n 8 with GW_JOB_TOKEN_FILE: authenticated, 8 ranks checked, ranks 2h and 2h+1 on host h"
    fi
else
    fail "srun with GW_JOB_TOKEN_FILE: ${why:-exited}"
    tail -n 20 "$D/token.out"
fi

# PMIx with no GW_* variable at all: the job is checked and authenticated
# (rank 0's token through PMIx: no warning); then with GW_DEBUG for the
# INFO lines that say how every rank joined.
if job pmix0 -- --mpi=pmix -N "$NHOSTS" -n 8 "${BENCH[@]}" && why=$(checked pmix0); then
    if grep -q "unauthenticated" "$D/pmix0.out"; then
        fail "srun --mpi=pmix, no GW_* variable: the job ran unauthenticated"
    else
        pass "srun --mpi=pmix -N 4 -n 8, no GW_* variable at all: 8 ranks checked, authenticated"
    fi
else
    fail "srun --mpi=pmix -N 4 -n 8, no GW_* variable: ${why:-exited}"
    tail -n 20 "$D/pmix0.out"
fi
if job pmix "${INFO[@]}" -- --mpi=pmix -N "$NHOSTS" -n 8 "${BENCH[@]}" &&
    why=$(checked pmix placement); then
    n=$(grep -c "PMIx (namespace slurm.pmix[^)]*): rank [0-7] of 8, bootstrap root 198.18.0.1:[0-9]*, job token from rank 0" "$D/pmix.out")
    if [ "$n" -eq 8 ]; then
        pass "srun --mpi=pmix -N 4 -n 8, no GW_* variable but GW_DEBUG: rank, size, root and rank 0's token from PMIx on every rank, two ranks per host"
    else
        fail "srun --mpi=pmix: $n of 8 ranks joined through PMIx"
        grep PMIx "$D/pmix.out" | head
    fi
else
    fail "srun --mpi=pmix -N 4 -n 8: ${why:-exited}"
    tail -n 20 "$D/pmix.out"
    grep -h "error" "$D"/log/slurmd-*.log | tail -n 5
fi

# A rank that dies: rank 5 (on n2) exits during the first collective; the
# other seven fail naming it, within the timeout, and srun returns.
start=$(date +%s)
job dead GW_JOB_TOKEN_FILE="$D/token" GW_TIMEOUT_MS=20000 GW_FAULT_RANK=5 -- -N "$NHOSTS" -n 8 --kill-on-bad-exit=0 \
    "$BUILD/tests/worker_faults" kill
rc=$?
took=$(($(date +%s) - start))
named=$(grep -c "rank [0-7]: GW_ERR_[A-Z_]*.*culprit 5$" "$D/dead.out")
if [ $rc -eq 124 ]; then
    fail "a dead rank under srun: the job hung (killed after 120 s)"
elif [ "$named" -ne 7 ]; then
    fail "a dead rank under srun: $named of 7 survivors name rank 5"
    grep -E "rank [0-7]:|ERROR" "$D/dead.out" | head -n 12
else
    pass "a dead rank under srun: all 7 survivors name rank 5, in ${took} s"
fi

echo "== $failed failed"
[ $failed -eq 0 ]
