#!/usr/bin/env bash
# cluster_selftest.sh - tests scripts/cluster.sh itself: brings up emulated
# hosts, checks that they reach each other, that rate limits, loss and delay
# really apply, that 'up' replaces a cluster, that an interrupted or killed
# 'up' leaves nothing behind once 'down' has run, and that the root network
# namespace is left exactly as it was.
#
# Needs root, iproute2, iputils-ping and netcat-openbsd. Exits 77 (skipped,
# as ctest's SKIP_RETURN_CODE) when they are missing, 1 when a check failed,
# 77 as well when a check could not run here (the delay without netem), 0
# otherwise. The last line is "N passed, N failed, N skipped".
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CLUSTER="$ROOT/scripts/cluster.sh"
unset GW_CLUSTER_PREFIX GW_CLUSTER_SLOW
# Prefixes unique to this run; they end with a letter, as cluster.sh wants.
P="gwst$$x"
P2="gwst$$y"
PORT=5001

passed=0
failed=0
skipped=()

pass() {
    echo "PASS: $*"
    passed=$((passed + 1))
}

fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}

skip() {
    echo "SKIP: $*"
    skipped+=("$*")
}

# check DESCRIPTION CMD...: passes when CMD succeeds.
check() {
    local what="$1"
    shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}

prereq() {
    local missing=()
    [ "$(id -u)" -eq 0 ] || { echo "SKIP: cluster_selftest needs root"; exit 77; }
    command -v ip >/dev/null || missing+=(iproute2)
    command -v tc >/dev/null || missing+=(iproute2)
    command -v ss >/dev/null || missing+=(iproute2)
    command -v ping >/dev/null || missing+=(iputils-ping)
    # Only OpenBSD's netcat has -N (shut down the socket at end of input).
    if ! command -v nc >/dev/null || ! nc -h 2>&1 | grep -q -- '-N'; then
        missing+=(netcat-openbsd)
    fi
    if [ ${#missing[@]} -gt 0 ]; then
        echo "SKIP: cluster_selftest needs Debian packages: ${missing[*]}"
        exit 77
    fi
    if ! ip netns add "${P}-probe" 2>/dev/null; then
        echo "SKIP: cannot create network namespaces here"
        exit 77
    fi
    ip netns del "${P}-probe"
}

finished=0

cleanup() {
    local rc=$?
    if [ "$finished" -ne 1 ]; then
        echo "FAIL: the test stopped early (exit status $rc)"
        echo "$passed passed, $((failed + 1)) failed"
    fi
    "$CLUSTER" down --prefix "$P" >/dev/null 2>&1 || true
    "$CLUSTER" down --prefix "$P2" >/dev/null 2>&1 || true
}

# Everything in the root namespace that cluster.sh must never change.
# IPv6 route lifetimes count down, so they are cut out.
root_snapshot() {
    ip -br link | awk '{print $1, $3}'
    ip -br addr
    ip rule
    ip -4 route show table all
    ip -6 route show table all | sed 's/ expires [0-9]*sec//'
    if command -v iptables-save >/dev/null; then iptables-save | grep -v '^#'; fi
    if command -v nft >/dev/null; then nft list ruleset; fi
}

ns_left() {
    ip netns list | awk '{print $1}' | grep -E "^${1}([0-9]+|-br)\$" || true
}

# Milliseconds of ping's minimum round trip, or empty.
# ping exits non-zero when replies are missing, which is what some checks
# want to see, hence the "|| true".
ping_min_ms() {
    { "$CLUSTER" exec --prefix "$P" "$1" ping -n -q -c "$3" -i 0.2 -W 2 "$2" 2>/dev/null || true; } |
        awk -F'[/ =]+' '/^rtt/ {print $6}'
}

ping_loss_pct() {
    { "$CLUSTER" exec --prefix "$P" "$1" ping -n -q -c "$3" -i 0.005 -W 1 "$2" 2>/dev/null || true; } |
        awk '/packet loss/ { for (i = 1; i <= NF; i++) if ($i ~ /%$/) { sub("%", "", $i); print $i } }'
}

# Prints the goodput in Mbit/s of BYTES sent from host SRC to host DST over
# one TCP connection. The receiver times from its first byte to the end of
# the stream, so that starting processes is not counted (nor is the
# sender's finishing, which says nothing: its socket buffer may still hold
# megabytes). Prints nothing when the transfer failed.
goodput_mbit() {
    local src="$1" dst="$2" bytes="$3" addr out server k
    addr=$("$CLUSTER" addr --prefix "$P" "$dst")
    out=$(mktemp)
    # shellcheck disable=SC2016
    timeout 60 "$CLUSTER" exec --prefix "$P" "$dst" bash -c '
        nc -l "$1" "$2" </dev/null | {
            dd bs=1 count=1 status=none of=/dev/null
            date +%s.%N
            wc -c
            date +%s.%N
        }' _ "$addr" "$PORT" >"$out" &
    server=$!
    for ((k = 0; k < 100; k++)); do
        "$CLUSTER" exec --prefix "$P" "$dst" ss -ltn | grep -q ":$PORT " && break
        sleep 0.05
    done
    head -c "$bytes" /dev/zero | timeout 60 "$CLUSTER" exec --prefix "$P" "$src" nc -N "$addr" "$PORT" || true
    wait "$server" || true
    # Lines: time of the first byte, bytes after it, time of the end.
    awk -v want="$((bytes - 1))" 'NR == 1 { a = $1 } NR == 2 { n = $1 } NR == 3 { z = $1 }
        END { if (n == want && z > a) printf "%.2f\n", n * 8 / (z - a) / 1e6 }' "$out"
    rm -f "$out"
}

# check_rate WHAT MEASURED NOMINAL [LOW HIGH]: the goodput of one TCP stream
# within LOW%..HIGH% of the nominal rate, 93%..97% unless given: the README's
# measured 93-96% around the 1448/1514 = 95.6% that one stream can get
# through tbf, with one point above for the timing of the measurement itself
# (runs here gave 95.1-95.7%). A shaper that lets through 10% too much or
# too little fails here.
check_rate() {
    local what="$1" got="$2" want="$3" low="${4:-93}" high="${5:-97}"
    if [ -z "$got" ]; then
        fail "$what: the transfer did not complete"
        return
    fi
    local pct
    pct=$(awk -v g="$got" -v w="$want" 'BEGIN { printf "%.1f", 100 * g / w }')
    if awk -v p="$pct" -v lo="$low" -v hi="$high" 'BEGIN { exit !(p >= lo && p <= hi) }'; then
        pass "$what: $got Mbit/s of $want ($pct%, want $low%..$high%)"
    else
        fail "$what: $got Mbit/s of $want ($pct%), want $low%..$high% of $want"
    fi
}

expect_usage_error() {
    local what="$1" out
    shift
    if out=$("$CLUSTER" "$@" 2>&1); then
        fail "$what: accepted"
    elif grep -q "error:" <<<"$out"; then
        pass "$what: rejected ($(head -n1 <<<"$out"))"
    else
        fail "$what: failed without an error message: $out"
    fi
}

prereq
trap cleanup EXIT
start=$(date +%s)
before=$(root_snapshot)

# --- input checking ----------------------------------------------------------
expect_usage_error "up 0" up 0 --prefix "$P"
expect_usage_error "rate in bytes" up 2 --prefix "$P" --rate 50mbps
expect_usage_error "prefix ending in a digit" up 2 --prefix gwst1
expect_usage_error "override of a missing host" up 2 --prefix "$P" --host 5:rate=1mbit
expect_usage_error "loss above 100%" up 2 --prefix "$P" --loss 101
expect_usage_error "mtu below IPv4's minimum" up 2 --prefix "$P" --mtu 100
expect_usage_error "mtu not a number" up 2 --prefix "$P" --mtu jumbo
expect_usage_error "addr when not up" addr 0 --prefix "$P"
check "nothing created by rejected commands" test -z "$(ns_left "$P")"

# --- 3 hosts, 50 Mbit/s, host 2 at 20 Mbit/s ----------------------------------
if "$CLUSTER" up 3 --prefix "$P" --rate 50mbit --host 2:rate=20mbit; then
    pass "up 3 --rate 50mbit --host 2:rate=20mbit"
else
    fail "up 3"
    finished=1
    echo "$passed passed, $failed failed"
    exit 1
fi

for i in 0 1 2; do
    a=$("$CLUSTER" addr --prefix "$P" "$i" || true)
    check "addr $i is 198.18.0.$((i + 1)) (got '$a')" test "$a" = "198.18.0.$((i + 1))"
done
addrs=$("$CLUSTER" exec --prefix "$P" 0 ip -o addr show | awk '{print $4}' | sort | tr '\n' ' ')
check "host 0 has only 127.0.0.1 and its 198.18 address (got $addrs)" \
    test "$addrs" = "127.0.0.1/8 198.18.0.1/24 "
for i in 0 1 2; do
    for j in 0 1 2; do
        [ "$i" -ne "$j" ] || continue
        check "host $i pings host $j" \
            test -n "$(ping_min_ms "$i" "198.18.0.$((j + 1))" 2)"
    done
done
status=$("$CLUSTER" status --prefix "$P" || true)
check "status shows a 20Mbit tbf on host 2" grep -q "tbf.*rate 20Mbit" <<<"$status"

# 2 seconds' worth at the nominal rate.
check_rate "host 0 -> host 1 at 50mbit" "$(goodput_mbit 0 1 12500000)" 50
check_rate "host 2 -> host 0, host 2's egress at 20mbit" "$(goodput_mbit 2 0 5000000)" 20
# A real NIC pushes back on the sender instead of dropping its own packets:
# the shaper's queue must hold what one TCP stream keeps in it.
drops=$("$CLUSTER" exec --prefix "$P" 2 tc -s qdisc show dev eth0 | awk '/dropped/ { sub(",", "", $7); print $7; exit }')
check "host 2's egress shaper dropped none of one stream's packets (dropped ${drops:-?})" test "${drops:-x}" = 0
check_rate "host 0 -> host 2, host 2's ingress at 20mbit" "$(goodput_mbit 0 2 5000000)" 20

# --- up again on the same prefix replaces the cluster; loss; jumbo frames ---------
if "$CLUSTER" up 3 --prefix "$P" --mtu 9000 --host 1:loss=30 --host 2:loss=100%; then
    pass "up again with loss and --mtu 9000"
else
    fail "up again with loss and --mtu 9000"
fi
mtu=$("$CLUSTER" exec --prefix "$P" 0 cat /sys/class/net/eth0/mtu || true)
check "host 0's eth0 has MTU 9000 (got '$mtu')" test "$mtu" = 9000
check "host 0 -> host 1: a 9000-byte packet passes unfragmented (host 1 loses 30%: any of 10)" \
    test -n "$("$CLUSTER" exec --prefix "$P" 0 ping -n -c 10 -i 0.1 -W 1 -M do -s 8972 198.18.0.2 2>/dev/null | grep -c 'bytes from' | grep -v '^0$')"
egress=$("$CLUSTER" exec --prefix "$P" 0 tc qdisc show dev eth0 || true)
check "the old cluster's tbf is gone" test -n "$egress" -a -z "$(grep tbf <<<"$egress")"
l=$(ping_loss_pct 0 198.18.0.2 200)
check "host 0 -> host 1 (30% loss): ping loss $l% is in 15..45" \
    awk -v l="${l:-x}" 'BEGIN { exit !(l ~ /^[0-9.]+$/ && l >= 15 && l <= 45) }'
l=$(ping_loss_pct 0 198.18.0.3 20)
check "host 2 at 100% loss: ping loss $l%" test "${l:-x}" = 100
l=$(ping_loss_pct 1 198.18.0.1 200)
check "host 1 (30% loss) -> host 0: ping loss $l% is in 15..45" \
    awk -v l="${l:-x}" 'BEGIN { exit !(l ~ /^[0-9.]+$/ && l >= 15 && l <= 45) }'

# --- delay (needs netem) --------------------------------------------------------------
if out=$("$CLUSTER" up 3 --prefix "$P" --delay 20ms --host 2:rate=50mbit 2>&1); then
    pass "up 3 --delay 20ms"
    rtt=$(ping_min_ms 0 198.18.0.2 5)
    check "RTT 0 <-> 1 with 20ms each way is >= 40 ms (min $rtt ms)" \
        awk -v r="${rtt:-x}" 'BEGIN { exit !(r ~ /^[0-9.]+$/ && r >= 40) }'
    rtt=$(ping_min_ms 2 198.18.0.1 5)
    check "RTT 2 <-> 0 with delay and rate is >= 40 ms (min $rtt ms)" \
        awk -v r="${rtt:-x}" 'BEGIN { exit !(r ~ /^[0-9.]+$/ && r >= 40) }'
    # With 40 ms of round trip the stream's window, not tbf, may hold it back
    # at first: this check has its own lower bound (not measured on our
    # build machines, whose kernel has no netem; see the README).
    check_rate "host 2 -> host 0 at 50mbit with 40 ms RTT" "$(goodput_mbit 2 0 12500000)" 50 80 96
elif grep -q "needs the netem qdisc" <<<"$out"; then
    skip "delay: this kernel has no netem qdisc ($(uname -r))"
    check "nothing left after the refused up" test -z "$(ns_left "$P")"
else
    fail "up 3 --delay 20ms: $out"
fi

# --- down ---------------------------------------------------------------------------
check "down" "$CLUSTER" down --prefix "$P"
check "no namespace left after down" test -z "$(ns_left "$P")"
check "down again succeeds" "$CLUSTER" down --prefix "$P"

# --- interrupted and killed up ------------------------------------------------------
wait_for_ns() {
    local tries
    for ((tries = 0; tries < 100; tries++)); do
        ! ip netns list | awk '{print $1}' | grep -Fxq "$1" || return 0
        sleep 0.05
    done
    return 1
}

GW_CLUSTER_SLOW=0.5 "$CLUSTER" up 4 --prefix "$P2" --rate 10mbit --loss 1 >/dev/null 2>&1 &
up_pid=$!
if wait_for_ns "${P2}1"; then
    kill -TERM "$up_pid"
    wait "$up_pid" && rc=0 || rc=$?
    check "up stopped by SIGTERM exits non-zero (rc $rc)" test "$rc" -ne 0
    check "up's trap removed what it made" test -z "$(ns_left "$P2")"
else
    fail "up 4 never created ${P2}1"
    kill -KILL "$up_pid" 2>/dev/null || true
fi

GW_CLUSTER_SLOW=0.5 "$CLUSTER" up 4 --prefix "$P2" --rate 10mbit --loss 1 >/dev/null 2>&1 &
up_pid=$!
if wait_for_ns "${P2}1"; then
    kill -KILL "$up_pid"
    { wait "$up_pid"; } 2>/dev/null || true
    check "a killed up leaves a partial cluster ($(ns_left "$P2" | tr '\n' ' '))" test -n "$(ns_left "$P2")"
    check "down after a killed up" "$CLUSTER" down --prefix "$P2"
    check "nothing left after down" test -z "$(ns_left "$P2")"
else
    fail "up 4 never created ${P2}1"
    kill -KILL "$up_pid" 2>/dev/null || true
fi

after=$(root_snapshot)
if [ "$before" = "$after" ]; then
    pass "root namespace links, addresses, rules, routes and firewall unchanged"
else
    fail "root namespace changed:"
    diff <(echo "$before") <(echo "$after") || true
fi

echo "took $(($(date +%s) - start)) s"
for s in "${skipped[@]+"${skipped[@]}"}"; do
    echo "skipped: $s"
done
finished=1
echo "$passed passed, $failed failed, ${#skipped[@]} skipped"
[ "$failed" -eq 0 ] || exit 1
# A check that could not run here (the delay, without netem) makes the whole
# test skipped (77) rather than passed, so that ctest and scripts/test.sh
# show that part as untested.
[ ${#skipped[@]} -eq 0 ] || exit 77
