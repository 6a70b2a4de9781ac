#!/usr/bin/env bash
# mpirun_hosts_test.sh - gradwire under Open MPI's mpirun across 4 emulated
# hosts (scripts/cluster.sh, with host names and /etc/hosts from
# emulated_hosts.sh), no GW_* variable set but GW_DEBUG: mpirun runs on the
# first host with a hostfile of n0..n3 (2 slots each) and starts its daemons
# through an rsh agent that enters the host's namespaces (what ssh does on a
# real cluster); gw_comm_init_env takes rank, size, the root and rank 0's
# token from PMIx. Checked: every element of gradwire-bench allreduce on 8
# ranks, ranks 2h and 2h+1 on host h, shared memory inside a host and TCP
# between hosts, every rank joined through PMIx with one root on the first
# host's 198.18.0.1.
#
# Usage: mpirun_hosts_test.sh BUILD_DIR. Exit 0 passed, 1 failed, 77 skipped
# (not root, no network namespaces, or no mpirun: openmpi-bin).
set -uo pipefail

BUILD=$(cd "${1:?usage: mpirun_hosts_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NHOSTS=4
# shellcheck source=emulated_hosts.sh
. "$ROOT/tests/integration/emulated_hosts.sh"

eh_require "openmpi-bin" mpirun

D=$(mktemp -d "${TMPDIR:-/tmp}/gw-mpirun.XXXXXX")
trap 'eh_down; rm -rf "$D"' EXIT
eh_up "gwmp$$x" "$NHOSTS" "$D" || { echo "FAIL: the emulated cluster did not come up"; exit 1; }

# The rsh agent: mpirun calls it as `AGENT [OPTIONS] HOST COMMAND WORDS...`,
# the words making one shell command line, as ssh would pass them.
cat >"$D/agent.sh" <<AGENT
#!/usr/bin/env bash
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1
shift
. "$ROOT/tests/integration/emulated_hosts.sh"
EH_PREFIX="gwmp$$x" EH_DIR="$D"
eh_in "\${host#n}" sh -c "\$*"
AGENT
chmod +x "$D/agent.sh"
for i in $(seq 0 $((NHOSTS - 1))); do echo "n$i slots=2"; done >"$D/hostfile"

mpi=(mpirun --allow-run-as-root --hostfile "$D/hostfile" -np 8 --mca plm_rsh_agent "$D/agent.sh"
    --mca oob_tcp_if_include eth0 --mca btl self -x GW_DEBUG=INFO -x GW_DEBUG_SUBSYS=init
    -x LSAN_OPTIONS ${ASAN_OPTIONS:+-x ASAN_OPTIONS} ${UBSAN_OPTIONS:+-x UBSAN_OPTIONS})
clean=(env -i PATH="$PATH" HOME="${HOME:-/root}" GW_DEBUG=INFO GW_DEBUG_SUBSYS=init
    LSAN_OPTIONS="suppressions=$ROOT/tests/support/lsan_pmix.supp"
    ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"})
out="$D/bench.out"
eh_in 0 "${clean[@]}" timeout 180 "${mpi[@]}" "$BUILD/gradwire-bench" allreduce -b 8 -e 4M -f 8 \
    -n 3 -w 1 -c 1 >"$out" 2>&1
rc=$?
fail() {
    echo "FAIL: $*"
    tail -n 25 "$out"
    exit 1
}
[ $rc -eq 0 ] || fail "mpirun -np 8 across $NHOSTS hosts exited $rc"
grep -q "# Wrong elements       : 0 OK" "$out" || fail "no checked result"
grep -q "# ranks: 8  transport: shm+tcp" "$out" || fail "not 8 ranks over shm+tcp"
n=$(grep -c "PMIx (namespace [^)]*): rank [0-7] of 8, bootstrap root 198.18.0.1:[0-9]*, job token from rank 0" "$out")
[ "$n" -eq 8 ] || fail "$n of 8 ranks joined through PMIx with a root on the first host"
for r in $(seq 0 7); do
    h=$(sed -n "s/^\(n[0-9]\):[0-9]*:-1 .*PMIx (namespace [^)]*): rank $r of 8.*/\1/p" "$out" | head -1)
    [ "$h" = "n$((r / 2))" ] || fail "rank $r ran on '$h', not n$((r / 2))"
done
echo "PASS: mpirun -np 8 across $NHOSTS emulated hosts (rsh agent into each), no GW_* variable but GW_DEBUG: 8 ranks checked, two per host, root $(grep -o 'bootstrap root 198.18.0.1:[0-9]*' "$out" | head -1 | cut -d' ' -f3), rank 0's token through PMIx"
