#!/usr/bin/env bash
# ssh_launch_test.sh - `gradwire launch --hostfile` over real ssh across 4
# emulated hosts: an sshd in every host (scripts/cluster.sh namespaces, host
# names and /etc/hosts from emulated_hosts.sh), keys made for the test, the
# launcher on the first host as a user types it:
#   gradwire launch --hostfile hosts --ssh "ssh -F config" -- gradwire-bench ...
#   - 8 ranks from "n0 slots=2", "n1 slots=2", "n2:2", "n3 slots=2": every
#     element checked, ranks 2h and 2h+1 on host h, shm inside a host and
#     TCP between hosts, the job authenticated;
#   - the job token is on no process's command line on any host while the
#     job runs (it travels on ssh's standard input);
#   - a rank that exits early (rank 5, on n2) is named by all 7 survivors;
#   - SIGTERM to the launcher ends every remote rank within seconds (no
#     orphans left on the hosts);
#   - a hostfile asking for more slots than -n, a bad line, a host without
#     sshd: clear errors.
#
# Usage: ssh_launch_test.sh BUILD_DIR. Exit 0 passed, 1 failed, 77 skipped
# (not root, no network namespaces, or no sshd: openssh-server).
set -uo pipefail

BUILD=$(cd "${1:?usage: ssh_launch_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NHOSTS=4
# shellcheck source=emulated_hosts.sh
. "$ROOT/tests/integration/emulated_hosts.sh"

eh_require "openssh-server, openssh-client" /usr/sbin/sshd ssh ssh-keygen

D=$(mktemp -d "${TMPDIR:-/tmp}/gw-ssh.XXXXXX")
chmod 0755 "$D"
made_privsep=0
cleanup() {
    local f
    for f in "$D"/run/*.pid; do
        [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
    done
    eh_down
    [ $made_privsep -eq 1 ] && rmdir /run/sshd 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT
failed=0
fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}
pass() { echo "PASS: $*"; }

eh_up "gwssh$$x" "$NHOSTS" "$D" || { echo "FAIL: the emulated cluster did not come up"; exit 1; }
mkdir -p "$D/run"
# sshd's privilege separation directory, as the package's service makes it.
[ -d /run/sshd ] || { mkdir -p /run/sshd && made_privsep=1; }
ssh-keygen -q -t ed25519 -N '' -f "$D/host_key" || exit 1
ssh-keygen -q -t ed25519 -N '' -f "$D/id" || exit 1
cp "$D/id.pub" "$D/authorized_keys"
cat >"$D/sshd_config" <<EOF
HostKey $D/host_key
AuthorizedKeysFile $D/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
X11Forwarding no
LogLevel ERROR
EOF
cat >"$D/ssh_config" <<EOF
Host *
    User root
    IdentityFile $D/id
    IdentitiesOnly yes
    UserKnownHostsFile /dev/null
    StrictHostKeyChecking no
    BatchMode yes
    LogLevel ERROR
    ConnectTimeout 10
EOF
for i in $(seq 0 $((NHOSTS - 1))); do
    eh_in "$i" /usr/sbin/sshd -f "$D/sshd_config" -o "PidFile=$D/run/sshd-n$i.pid" ||
        { echo "FAIL: sshd on n$i did not start"; exit 1; }
done
for i in $(seq 0 $((NHOSTS - 1))); do
    ok=0
    for _ in $(seq 50); do
        [ "$(eh_in 0 ssh -F "$D/ssh_config" "n$i" hostname 2>/dev/null)" = "n$i" ] && { ok=1; break; }
        sleep 0.2
    done
    [ $ok -eq 1 ] || { echo "FAIL: ssh to n$i does not work"; eh_in 0 ssh -F "$D/ssh_config" "n$i" true; exit 1; }
done
pass "sshd on $NHOSTS hosts, ssh from n0 to each"

printf 'n0 slots=2\n# a comment\nn1 slots=2\nn2:2\n\nn3 slots=2   # trailing\n' >"$D/hostfile"
SSH="ssh -F $D/ssh_config -T"
clean=(env -i PATH="$PATH" HOME="${HOME:-/root}"
    LSAN_OPTIONS="suppressions=$ROOT/tests/support/lsan_pmix.supp"
    ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"})
launch() { # OUT [ENV...] -- LAUNCH-ARGS...
    local out=$1
    shift
    local envs=()
    while [ "$1" != -- ]; do
        envs+=("$1")
        shift
    done
    shift
    eh_in 0 "${clean[@]}" "${envs[@]}" timeout 150 "$BUILD/gradwire" launch --timeout 120 \
        --hostfile "$D/hostfile" --ssh "$SSH" "$@" >"$out" 2>&1
}

# 1. A checked allreduce on 8 ranks; the token never on a command line.
# Up to 512 KiB: what is judged is where the ranks ran and how they met;
# up to 4 MiB, 40 times each, took 11 s of the suite's time alone.
secret="gw-test-secret-$$-$RANDOM$RANDOM"
out="$D/bench.out"
launch "$out" GW_DEBUG=INFO GW_DEBUG_SUBSYS=init,bootstrap GW_JOB_TOKEN="$secret" -- \
    "$BUILD/gradwire-bench" allreduce -b 8 -e 512K -f 8 -n 20 -w 1 -c 1 &
lpid=$!
seen=0
while kill -0 $lpid 2>/dev/null; do
    for c in /proc/[0-9]*/cmdline; do
        tr '\0' ' ' 2>/dev/null <"$c" | grep -q "$secret" && seen=1
    done
    sleep 0.1
done
wait $lpid
rc=$?
if [ $rc -ne 0 ]; then
    fail "launch --hostfile (8 ranks) exited $rc"
    tail -n 20 "$out"
elif ! grep -q "# Wrong elements       : 0 OK" "$out" || ! grep -q "ranks: 8  transport: shm+tcp" "$out"; then
    fail "launch --hostfile: no checked result on 8 ranks over shm+tcp"
    tail -n 20 "$out"
elif grep -q "unauthenticated" "$out"; then
    fail "launch --hostfile: the job ran unauthenticated"
elif [ $seen -eq 1 ]; then
    fail "launch --hostfile: the job token was on a command line"
else
    where=ok
    for r in $(seq 0 7); do
        h=$(sed -n "s/^\[$r\] \(n[0-9]\):[0-9]*:$r .*connected over.*/\1/p" "$out" | head -1)
        [ "$h" = "n$((r / 2))" ] || where="rank $r on '$h', not n$((r / 2))"
    done
    if [ "$where" = ok ]; then
        pass "launch --hostfile over ssh: 8 ranks checked, two per host, authenticated, the token on no command line"
    else
        fail "launch --hostfile: $where"
    fi
fi

# 2. A rank that exits early: the survivors name it.
out="$D/dead.out"
launch "$out" GW_TIMEOUT_MS=20000 GW_FAULT_RANK=5 -- "$BUILD/tests/worker_faults" kill
named=$(grep -c "rank [0-7]: GW_ERR_[A-Z_]*.*culprit 5$" "$out")
if [ "$named" -eq 7 ]; then
    pass "a rank that exits under launch --hostfile: all 7 survivors name rank 5"
else
    fail "a rank that exits under launch --hostfile: $named of 7 survivors name rank 5"
    grep -E "rank [0-7]:|ERROR|launch" "$out" | head -n 12
fi

# 3. SIGTERM to the launcher: no rank outlives it on any host.
out="$D/term.out"
marker=$((7000 + RANDOM % 1000))
launch "$out" -- "$BUILD/gradwire-bench" allreduce -b 1M -e 1M -n 1000000 -w "$marker" &
lpid=$!
for _ in $(seq 100); do
    [ "$(pgrep -fc "gradwire-bench allreduce -b 1M -e 1M -n 1000000 -w $marker")" -ge 8 ] && break
    sleep 0.2
done
running=$(pgrep -fc "gradwire-bench allreduce -b 1M -e 1M -n 1000000 -w $marker")
pkill -TERM -f "gradwire launch --timeout 120 --hostfile $D/hostfile" 2>/dev/null
wait $lpid
left=8
for _ in $(seq 50); do
    left=$(pgrep -fc "gradwire-bench allreduce -b 1M -e 1M -n 1000000 -w $marker")
    [ "$left" -eq 0 ] && break
    sleep 0.2
done
if [ "$running" -lt 8 ]; then
    fail "SIGTERM: only $running of 8 ranks were seen running"
    tail -n 10 "$out"
elif [ "$left" -ne 0 ]; then
    fail "SIGTERM to the launcher: $left ranks still run 10 s later"
    pkill -KILL -f "gradwire-bench allreduce -b 1M -e 1M -n 1000000 -w $marker"
else
    pass "SIGTERM to the launcher: all 8 remote ranks ended"
fi

# 4. Errors that say what is wrong.
out="$D/err.out"
launch "$out" -- -n 9 /bin/true
grep -q "has 8 slots" "$out" && pass "-n 9 with 8 slots: $(head -1 "$out")" ||
    { fail "-n 9 with 8 slots was not refused clearly"; cat "$out"; }
printf 'n0 slots=two\n' >"$D/hostfile"
launch "$out" -- /bin/true
grep -q "hostfile:1: slots= wants a number" "$out" && pass "a bad hostfile line: $(head -1 "$out")" ||
    { fail "a bad hostfile line was not refused clearly"; cat "$out"; }
printf 'n0\n198.18.0.250\n' >"$D/hostfile"
launch "$out" -- /bin/true
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ]; then
    pass "a host without sshd: exit $rc, $(grep -m1 -iE 'ssh|rank 1' "$out")"
else
    fail "a host without sshd: exit $rc"
    cat "$out"
fi

echo "== $failed failed"
[ $failed -eq 0 ]
