#!/usr/bin/env bash
# cluster_selftest.sh - tests scripts/cluster.sh itself: brings up emulated
# hosts, checks that they reach each other, that rate limits, loss and delay
# really apply, that 'up' replaces a cluster, that an interrupted or killed
# 'up' leaves nothing behind once 'down' has run, and that the root network
# namespace is left exactly as it was.
#
# The delay is netem's where the kernel has it and the user-space relays'
# (gradwire-netdelay, GW_NETDELAY or build/) where it has not: round trips
# within 40-46 ms for 20 ms each way, one host's delay alone, delay with
# rate, loss and jumbo frames, and (relays) 1000 pings at 500/s all back in
# order with nothing dropped.
#
# Needs root, iproute2, iputils-ping and netcat-openbsd. Exits 77 (skipped,
# as ctest's SKIP_RETURN_CODE) when they are missing, 1 when a check failed,
# 77 as well when a check could not run here, 0 otherwise. The last line is
# "N passed, N failed, N skipped".
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

# Whether this kernel has the netem qdisc (probed in a namespace of our own).
have_netem_here() {
    local ns="${P}-netem" ok=1
    ip netns add "$ns" 2>/dev/null || return 1
    tc -n "$ns" qdisc add dev lo root netem delay 1ms 2>/dev/null || ok=0
    ip netns del "$ns"
    [ "$ok" -eq 1 ]
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
    # First one reply, so that both neighbour entries exist: a lost ARP
    # request is retried only after a second, which alone would lose the
    # ~200 pings sent meanwhile (CI once measured 75.5% for a 30% loss).
    # WARMUP tries (default 10; 0 where every packet is lost anyway).
    local k
    for k in $(seq 1 "${4:-10}"); do
        "$CLUSTER" exec --prefix "$P" "$1" ping -n -q -c 1 -W 1 "$2" >/dev/null 2>&1 && break
    done
    { "$CLUSTER" exec --prefix "$P" "$1" ping -n -q -c "$3" -i 0.005 -W 1 "$2" 2>/dev/null || true; } |
        awk '/packet loss/ { for (i = 1; i <= NF; i++) if ($i ~ /%$/) { sub("%", "", $i); print $i } }'
}

# Succeeds when host SRC gets at least one reply to an unfragmentable
# 9000-byte ping (8972 bytes of payload) to ADDR. ping stops at the first
# reply (-c 1 with a deadline, -w), up to 100 tries in 10 s. It also stops
# at the first error, and a neighbour lookup that fails (three ARP
# requests a second apart, none answered) is one: 3 s and out, with not
# one echo request sent. So up to 5 runs of ping, each starting a fresh
# lookup; a packet too big to pass fails all five.
jumbo_ping() {
    local k out
    for k in 1 2 3 4 5; do
        out=$("$CLUSTER" exec --prefix "$P" "$1" ping -n -c 1 -w 10 -i 0.1 -M "do" -s 8972 "$2" 2>/dev/null || true)
        grep -q 'bytes from' <<<"$out" && return 0
    done
    return 1
}

# Prints the goodput in Mbit/s of BYTES sent from host SRC to host DST over
# one TCP connection. The receiver times from its first byte to the end of
# the stream, so that starting processes is not counted (nor is the
# sender's finishing, which says nothing: its socket buffer may still hold
# megabytes). With SKIP (a multiple of 64 KiB), the clock starts only after
# SKIP bytes, so that TCP's slow start is not counted. Prints nothing when
# the transfer failed.
goodput_mbit() {
    local src="$1" dst="$2" bytes="$3" skip="${4:-0}" addr out server k
    addr=$("$CLUSTER" addr --prefix "$P" "$dst")
    out=$(mktemp)
    # shellcheck disable=SC2016
    timeout 60 "$CLUSTER" exec --prefix "$P" "$dst" bash -c '
        nc -l "$1" "$2" </dev/null | {
            if [ "$3" -gt 0 ]; then
                dd bs=65536 count=$(($3 / 65536)) iflag=fullblock status=none of=/dev/null
            else
                dd bs=1 count=1 status=none of=/dev/null
            fi
            date +%s.%N
            wc -c
            date +%s.%N
        }' _ "$addr" "$PORT" "$skip" >"$out" &
    server=$!
    for ((k = 0; k < 100; k++)); do
        "$CLUSTER" exec --prefix "$P" "$dst" ss -ltn | grep -q ":$PORT " && break
        sleep 0.05
    done
    head -c "$bytes" /dev/zero | timeout 60 "$CLUSTER" exec --prefix "$P" "$src" nc -N "$addr" "$PORT" || true
    wait "$server" || true
    # Lines: time of the first byte, bytes after it, time of the end.
    awk -v want="$((bytes - (skip > 0 ? skip : 1)))" 'NR == 1 { a = $1 } NR == 2 { n = $1 } NR == 3 { z = $1 }
        END { if (n == want && z > a) printf "%.2f\n", n * 8 / (z - a) / 1e6 }' "$out"
    rm -f "$out"
}

# check_goodput WHAT NOMINAL LOW HIGH SRC DST BYTES [SKIP]: check_rate on
# goodput_mbit SRC DST BYTES SKIP, measured up to three times: the first
# inside the window passes. A shaper that is wrong (too fast, too slow, not
# there) is outside on every try; a transfer slowed by the machine (the
# suite's other work on 2 cores: 68-89% seen in CI runs that pass alone)
# is not. When all tries miss, the load and the busiest processes are
# printed, for whoever reads the log.
check_goodput() {
    local what="$1" want="$2" low="$3" high="$4" src="$5" dst="$6" bytes="$7" skip="${8:-0}"
    local got tries="" k
    for k in 1 2 3; do
        got=$(goodput_mbit "$src" "$dst" "$bytes" "$skip")
        tries+="${got:-failed} "
        if [ -n "$got" ] && awk -v g="$got" -v w="$want" -v lo="$low" -v hi="$high" \
            'BEGIN { p = 100 * g / w; exit !(p >= lo && p <= hi) }'; then
            check_rate "$what (try $k)" "$got" "$want" "$low" "$high"
            return
        fi
    done
    check_rate "$what (3 tries: ${tries% })" "$got" "$want" "$low" "$high"
    echo "   load: $(cat /proc/loadavg); busiest processes:"
    ps -eo pcpu,cls,rtprio,etime,args --sort=-pcpu | head -6 | cut -c1-160 | sed 's/^/   /'
    # With a user-space delay, the relays' own account (frames, drops, how
    # late they wrote) says whether they or the machine held the stream back.
    "$CLUSTER" status --prefix "$P" 2>/dev/null | grep -E 'delay:|tbf' | cut -c1-300 | sed 's/^/   /' || true
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
check_goodput "host 0 -> host 1 at 50mbit" 50 93 97 0 1 12500000
check_goodput "host 2 -> host 0, host 2's egress at 20mbit" 20 93 97 2 0 5000000
# A real NIC pushes back on the sender instead of dropping its own packets:
# the shaper's queue must hold what one TCP stream keeps in it.
drops=$("$CLUSTER" exec --prefix "$P" 2 tc -s qdisc show dev eth0 | awk '/dropped/ { sub(",", "", $7); print $7; exit }')
check "host 2's egress shaper dropped none of one stream's packets (dropped ${drops:-?})" test "${drops:-x}" = 0
check_goodput "host 0 -> host 2, host 2's ingress at 20mbit" 20 93 97 0 2 5000000

# --- up again on the same prefix replaces the cluster; loss; jumbo frames ---------
if "$CLUSTER" up 3 --prefix "$P" --mtu 9000 --host 1:loss=30 --host 2:loss=100%; then
    pass "up again with loss and --mtu 9000"
else
    fail "up again with loss and --mtu 9000"
fi
mtu=$("$CLUSTER" exec --prefix "$P" 0 cat /sys/class/net/eth0/mtu || true)
check "host 0's eth0 has MTU 9000 (got '$mtu')" test "$mtu" = 9000
# Host 1 loses 30% of what it sends: each echo reply, and each answer to
# host 0's neighbour lookup. A lookup fails when all three answers are
# lost (0.3^3, one run in 37), which ended ping with nothing sent; CI saw
# it once. jumbo_ping starts again after a failed lookup: five all fail
# about once in 7e7 runs.
check "host 0 -> host 1: a 9000-byte packet passes unfragmented (host 1 loses 30%: any of up to 100, 5 lookups)" \
    jumbo_ping 0 198.18.0.2
egress=$("$CLUSTER" exec --prefix "$P" 0 tc qdisc show dev eth0 || true)
check "the old cluster's tbf is gone" test -n "$egress" -a -z "$(grep tbf <<<"$egress")"
l=$(ping_loss_pct 0 198.18.0.2 200)
check "host 0 -> host 1 (30% loss): ping loss $l% is in 15..45" \
    awk -v l="${l:-x}" 'BEGIN { exit !(l ~ /^[0-9.]+$/ && l >= 15 && l <= 45) }'
l=$(ping_loss_pct 0 198.18.0.3 20 0)
check "host 2 at 100% loss: ping loss $l%" test "${l:-x}" = 100
l=$(ping_loss_pct 1 198.18.0.1 200)
check "host 1 (30% loss) -> host 0: ping loss $l% is in 15..45" \
    awk -v l="${l:-x}" 'BEGIN { exit !(l ~ /^[0-9.]+$/ && l >= 15 && l <= 45) }'

# --- per link: a bad cable between two good hosts ---------------------------------
expect_usage_error "a link from a host to itself" up 3 --prefix "$P" --link 1-1:rate=1mbit
expect_usage_error "a link to a host that does not exist" up 3 --prefix "$P" --link 0-3:rate=1mbit
expect_usage_error "a delay per link" up 3 --prefix "$P" --link 0-1:delay=5ms
expect_usage_error "a link given twice" up 3 --prefix "$P" --link 0-1:rate=1mbit --link 1-0:loss=1
expect_usage_error "a bad link key" up 3 --prefix "$P" --link 0-1:speed=1mbit
if "$CLUSTER" up 3 --prefix "$P" --link 0-1:rate=20mbit --link 0-2:loss=30; then
    pass "up 3 --link 0-1:rate=20mbit --link 0-2:loss=30"
else
    fail "up 3 with per-link shaping"
fi
# HTB (not tbf) shapes a link: 92-96% of the rate here under load, so the
# window is 88..98%; a link left unshaped gives 100 times the rate, a wrong
# rate (half, double) falls far outside.
check_goodput "host 0 -> host 1 over link 0-1 at 20mbit" 20 88 98 0 1 5000000
check_goodput "host 1 -> host 0 over link 0-1 at 20mbit" 20 88 98 1 0 5000000
# The same hosts' other links are not slowed: well above 5x the link's rate.
for pair in "1 2" "2 1"; do
    set -- $pair
    g=$(goodput_mbit "$1" "$2" 25000000)
    check "host $1 -> host $2, no link shaping: $g Mbit/s, above 100" \
        awk -v g="${g:-0}" 'BEGIN { exit !(g > 100) }'
done
# 30% each way on link 0-2: a ping and its reply both cross it, so 1 - 0.7^2
# = 51% of pings are lost; none between the other hosts.
l=$(ping_loss_pct 0 198.18.0.3 300)
check "host 0 <-> host 2 (link 0-2 at 30% each way): ping loss $l% is in 36..66" \
    awk -v l="${l:-x}" 'BEGIN { exit !(l ~ /^[0-9.]+$/ && l >= 36 && l <= 66) }'
for pair in "0 198.18.0.2" "1 198.18.0.3" "2 198.18.0.2"; do
    set -- $pair
    l=$(ping_loss_pct "$1" "$2" 200)
    check "host $1 -> $2, a link without loss: ping loss $l%" test "${l:-x}" = 0
done
status=$("$CLUSTER" status --prefix "$P" || true)
check "status lists the shaped links" grep -q "link 0-1: rate 20000000bit" <<<"$status"
# A link inside a host's own rate: the link's class under the host's.
if "$CLUSTER" up 3 --prefix "$P" --rate 100mbit --link 0-1:rate=20mbit; then
    pass "up 3 --rate 100mbit --link 0-1:rate=20mbit"
else
    fail "up 3 with a host rate and a link rate"
fi
check_goodput "host 0 -> host 1, link 0-1 at 20mbit inside 100mbit hosts" 20 88 98 0 1 5000000
check_goodput "host 0 -> host 2, the host's 100mbit" 100 88 98 0 2 12500000

# --- delay ------------------------------------------------------------------------
# netem where the kernel has it, else the user-space relays (--delay-mode
# auto); the round trip between hosts i and j is delay(i) + delay(j).
expect_usage_error "an unknown delay mode" up 2 --prefix "$P" --delay 1ms --delay-mode kernel

# rtt_ok WHAT MIN_MS LOW HIGH: ping's minimum round trip within LOW..HIGH ms.
rtt_ok() {
    local what="$1" r="$2" lo="$3" hi="$4"
    if awk -v r="${r:-x}" -v lo="$lo" -v hi="$hi" 'BEGIN { exit !(r ~ /^[0-9.]+$/ && r >= lo && r <= hi) }'; then
        pass "$what: min RTT $r ms, want $lo..$hi"
    else
        fail "$what: min RTT ${r:-(no reply)} ms, want $lo..$hi"
    fi
}

# relay_counter I KEY: host I's relay counter KEY as the last `status` had
# the relays write them (status asks every relay to rewrite its counters:
# call it once, then read each relay's).
relay_counter() {
    sed -n "s/^$2=//p" "/run/gradwire-cluster/$P/relay$1.stats" 2>/dev/null
}

mode=""
pids=""
if out=$("$CLUSTER" up 3 --prefix "$P" --delay 20ms --host 2:rate=50mbit 2>&1); then
    pass "up 3 --delay 20ms --host 2:rate=50mbit ($(tail -n1 <<<"$out"))"
    mode=$("$CLUSTER" status --prefix "$P" | sed -n "s/^cluster '$P': delay mode //p")
    if have_netem_here; then want_mode=netem; else want_mode=user; fi
    check "status says delay mode $want_mode (got '$mode')" test "$mode" = "$want_mode"
    # The first ping also waits for ARP (a round trip of its own).
    "$CLUSTER" exec --prefix "$P" 0 ping -n -q -c 1 -W 3 198.18.0.2 >/dev/null 2>&1 || true
    "$CLUSTER" exec --prefix "$P" 2 ping -n -q -c 1 -W 3 198.18.0.1 >/dev/null 2>&1 || true
    rtt_ok "RTT 0 <-> 1 with 20ms each way" "$(ping_min_ms 0 198.18.0.2 10)" 40 46
    rtt_ok "RTT 2 <-> 0 with 20ms each way and host 2 at 50mbit" "$(ping_min_ms 2 198.18.0.1 10)" 40 46
    # 4 seconds' worth, timed after the first 1 s (6.25 MB): slow start over
    # 40 ms of round trip takes a few of them (Cubic's HyStart leaves it
    # early when the shaper's queue builds up), and cost 3-5% of a
    # transfer timed from its first byte. The window starts at 90%, not 93%:
    # this machine gives 95.5-95.7%, but CI's (kernel 6.18.44, another
    # build of it) gave 91.8%, 92.7% and 92.1% in three tries at load 1-2
    # (2026-12-02, the ASan stage), not explained yet; a relay or shaper 10%
    # off is still outside.
    check_goodput "host 2 -> host 0 at 50mbit with 40 ms RTT (timed after 1 s)" 50 90 97 \
        2 0 25000000 6291456
    if [ "$mode" = user ]; then
        # 1000 echo requests 2 ms apart (500 per second, 20 ms of delay:
        # ten in flight in each relay): every reply, in order, none twice.
        flood=$("$CLUSTER" exec --prefix "$P" 0 ping -n -c 1000 -i 0.002 -W 2 198.18.0.2 2>&1 || true)
        seqs=$(grep -o 'icmp_seq=[0-9]*' <<<"$flood" | cut -d= -f2 | tr '\n' ' ')
        want_seqs=$(seq 1 1000 | tr '\n' ' ')
        if [ "$seqs" = "$want_seqs" ] && ! grep -q DUP <<<"$flood"; then
            pass "1000 pings 2 ms apart through two 20 ms relays: all 1000 replies, in order"
        else
            fail "1000 pings through the relays: $(grep -c 'icmp_seq=' <<<"$flood") replies, in order: $(awk '{ for (k = 1; k <= NF; k++) { if ($k <= last) bad = 1; last = $k } } END { print bad ? "no" : "yes" }' <<<"$seqs"); $(tail -n2 <<<"$flood" | head -n1)"
        fi
        "$CLUSTER" status --prefix "$P" >/dev/null 2>&1 || true
        for i in 0 1 2; do
            d=$(relay_counter "$i" egress_dropped_full)
            e=$(relay_counter "$i" egress_write_errors)
            check "host $i's relay dropped no frame (queue full: ${d:-?}, write errors: ${e:-?})" \
                test "${d:-x}" = 0 -a "${e:-x}" = 0
        done
        pids=$(cat "/run/gradwire-cluster/$P"/relay*.pid 2>/dev/null | tr '\n' ' ')
    fi
else
    fail "up 3 --delay 20ms: $out"
fi

if out=$("$CLUSTER" up 3 --prefix "$P" --host 2:delay=10ms 2>&1); then
    pass "up 3 --host 2:delay=10ms"
    "$CLUSTER" exec --prefix "$P" 0 ping -n -q -c 1 -W 3 198.18.0.3 >/dev/null 2>&1 || true
    rtt_ok "RTT 0 <-> 2, only host 2 delayed by 10ms" "$(ping_min_ms 0 198.18.0.3 10)" 10 13
    rtt_ok "RTT 0 <-> 1, neither delayed" "$(ping_min_ms 0 198.18.0.2 10)" 0 2
    relays=(/run/gradwire-cluster/"$P"/relay*.pid)
    [ -e "${relays[0]}" ] || relays=()
    check "only host 2 has a relay (${relays[*]})" test "${#relays[@]}" = "$([ "$mode" = user ] && echo 1 || echo 0)"
else
    fail "up 3 --host 2:delay=10ms: $out"
fi
if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    # (A relay nobody has reaped yet is a zombie, not running.)
    left=$(ps -o pid=,stat= -p ${pids// /,} 2>/dev/null | awk '$2 !~ /^Z/ { printf "%s ", $1 }' || true)
    check "the replaced cluster's relays exited (pids ${pids}left: '${left}')" test -z "$left"
fi

# Loss and jumbo frames with a delay.
if out=$("$CLUSTER" up 3 --prefix "$P" --mtu 9000 --delay 2ms --host 1:loss=30 2>&1); then
    pass "up 3 --mtu 9000 --delay 2ms --host 1:loss=30"
    check "host 0 -> host 2 with delay: a 9000-byte packet passes unfragmented" \
        jumbo_ping 0 198.18.0.3
    l=$(ping_loss_pct 1 198.18.0.1 200)
    check "host 1 (30% loss, 2ms delay) -> host 0: ping loss $l% is in 15..45" \
        awk -v l="${l:-x}" 'BEGIN { exit !(l ~ /^[0-9.]+$/ && l >= 15 && l <= 45) }'
else
    fail "up 3 --mtu 9000 --delay 2ms --host 1:loss=30: $out"
fi
if have_netem_here; then
    # The relays where netem would be the default.
    if "$CLUSTER" up 2 --prefix "$P" --delay 5ms --delay-mode user >/dev/null 2>&1; then
        "$CLUSTER" exec --prefix "$P" 0 ping -n -q -c 1 -W 3 198.18.0.2 >/dev/null 2>&1 || true
        rtt_ok "--delay-mode user: RTT 0 <-> 1 with 5ms each way" "$(ping_min_ms 0 198.18.0.2 10)" 10 13
    else
        fail "up 2 --delay 5ms --delay-mode user"
    fi
else
    expect_usage_error "--delay-mode netem where the kernel has no netem" up 2 --prefix "$P" --delay 1ms --delay-mode netem
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
# A check that could not run here makes the whole
# test skipped (77) rather than passed, so that ctest and scripts/test.sh
# show that part as untested.
[ ${#skipped[@]} -eq 0 ] || exit 77
