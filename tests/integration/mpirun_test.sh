#!/usr/bin/env bash
# gradwire under Open MPI's mpirun with no GW_* (nor torchrun) variable in
# the environment: gw_comm_init_env learns rank, size, the bootstrap root
# and a random job token through PMIx (collectives/comm/launch_pmix.c), and
# gradwire-bench allreduce checks every element on 4 ranks. A token the
# user exported is kept instead. mpirun's own daemons are kept on loopback.
# Usage: mpirun_test.sh BUILD_DIR
set -euo pipefail
build="$1"
command -v mpirun >/dev/null ||
    { echo "SKIP: mpirun is not installed (Debian package openmpi-bin; scripts/install-deps.sh test)"; exit 77; }
mpi=(mpirun --oversubscribe --mca oob_tcp_if_include lo --mca btl self,vader)
[ "$(id -u)" -ne 0 ] || mpi+=(--allow-run-as-root)
# In the sanitizer build, libpmix's own few bytes kept until exit are not
# gradwire's leak (tests/support/lsan_pmix.supp).
here=$(cd "$(dirname "$0")" && pwd)
clean=(env -i PATH="$PATH" HOME="${HOME:-/root}" TMPDIR="${TMPDIR:-/tmp}"
    LSAN_OPTIONS="suppressions=$here/../support/lsan_pmix.supp")
mpi+=(-x LSAN_OPTIONS)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }

"${clean[@]}" "${mpi[@]}" -np 4 -x GW_DEBUG=INFO -x GW_DEBUG_SUBSYS=init \
    "$build/gradwire-bench" allreduce -b 8 -e 1M -f 32 -n 3 -w 1 >"$out" 2>&1 ||
    fail "mpirun -np 4 gradwire-bench allreduce exited $?"
grep -q "# Wrong elements       : 0 OK" "$out" || fail "no checked result"
n=$(grep -c "PMIx (namespace .*): rank [0-3] of 4, bootstrap root 127.0.0.1:[0-9]*, job token from rank 0" "$out" || true)
[ "$n" = 4 ] || fail "$n of 4 ranks say they joined through PMIx with rank 0's token"
[ "$(grep -o 'bootstrap root [0-9.:]*' "$out" | sort -u | wc -l)" = 1 ] || fail "the ranks disagree on the root"
echo "ok: mpirun -np 4, no GW_* variables: rank, size, root and token from PMIx"

# A token exported by the user wins over rank 0's.
"${clean[@]}" GW_JOB_TOKEN=the-users-secret "${mpi[@]}" -np 2 -x GW_JOB_TOKEN -x GW_DEBUG=INFO \
    -x GW_DEBUG_SUBSYS=init "$build/gradwire-bench" barrier -n 5 >"$out" 2>&1 ||
    fail "mpirun -np 2 with GW_JOB_TOKEN exited $?"
n=$(grep -c "GW_JOB_TOKEN from the environment" "$out" || true)
[ "$n" = 2 ] || fail "$n of 2 ranks kept the exported GW_JOB_TOKEN"
echo "ok: an exported GW_JOB_TOKEN is kept"
