#!/usr/bin/env bash
# cluster.sh - an emulated cluster of hosts on one machine, for gradwire's
# integration tests and benchmarks.
#
# Each host is a network namespace NAME<i> with one interface, eth0, holding
# 198.18.0.<i+1>/24 (RFC 2544's benchmarking range, so no real network is
# ever addressed). Every eth0 is one end of a veth pair whose other end, h<i>,
# is a port of the bridge br0, which lives in its own namespace NAME-br. All
# commands address these namespaces by name (ip -n, tc -n, ip netns exec), so
# the root namespace's links, addresses, routes and firewall are never
# touched: not even a transient interface is created there.
#
# Shaping, per host i (the README has the measured effect):
#   - rate: tbf on the host's egress (eth0 in NAME<i>) and on its ingress (h<i>
#     in NAME-br, the bridge port that sends to host i), so both directions
#     of the host's link are limited.
#   - delay, on the host's egress, so the round trip between hosts i and j
#     is delay(i) + delay(j); two ways (--delay-mode, default auto: netem
#     where the kernel has it, else user; 'up' and 'status' say which):
#     - netem: the netem qdisc as eth0's root, with the tbf as its child
#       when there is a rate too. Needs the kernel's netem qdisc, which the
#       kernel of our build and CI machines (6.18 "-fc") lacks.
#     - user: a host with a delay gets, instead of the veth pair, two TAP
#       devices and a relay process between them, gradwire-netdelay
#       (tools/dev/netdelay.c, built into build/; GW_NETDELAY names another
#       one). The relay runs in NAME-br and creates both TAPs there: h<i>,
#       made a bridge port, and e<i>, then moved into NAME<i> and renamed
#       eth0 (a TAP keeps its relay's file across namespaces). It holds each
#       frame the host sends for the delay and passes the other direction
#       at once, with TSO offload (64 KiB segments cross as one frame). Its
#       queue holds 2x the delay at the rate (20 Gbit/s when unlimited), at
#       least 4 MiB, at most 1 GiB; a frame finding it full is dropped and
#       counted (status shows the relay's counters). It runs at SCHED_FIFO
#       priority 1, so that a busy machine's scheduling does not add to the
#       delay (on a machine at a load of 8 on 2 cores, normal priority made
#       frames late by 0.08-3.8 ms on average, up to 127 ms). The tbf and the loss
#       filter stay on eth0 and h<i> as with veths: the tbf serialises
#       before the delay, the filter sees what the relay hands the bridge.
#       A TAP's file pins only the namespace it was opened in, NAME-br, so
#       'down' (which stops the relays by their pidfiles under the state
#       directory, then deletes the namespaces) leaves nothing behind; a
#       relay also exits when its devices vanish.
#   - loss: a classic-BPF filter on the bridge's ingress from the host (h<i>
#     in NAME-br) drops packets at random by redirecting them to a device
#     that discards everything. It is done there, not in the host, because
#     a packet dropped in the sender's own qdisc is reported to the sender
#     (TCP just sends it again at once), which is not what a lossy link does.
set -euo pipefail

PROG=$(basename "$0")
readonly PROG
readonly ADDR_NET=198.18.0
readonly MAX_HOSTS=254
# Rates are sized against a full Ethernet frame as tc counts it (1500 bytes
# of IP packet plus the 14-byte Ethernet header).
readonly FRAME_BYTES=1514
# tbf's bucket holds 1 ms of traffic at the rate, and at least two frames:
# tbf drops a packet bigger than its bucket, and a bucket much bigger than
# a millisecond lets bursts go through at the veth's speed.
readonly BURST_MS=1
# (FRAME_BYTES grows with --mtu: LINK_FRAME below.)
# tbf's queue holds 20 ms of traffic at the rate, and at least 256 KiB: four
# 64 KiB GSO packets (veth passes TCP segments of up to 64 KiB, which tbf
# cuts into frames). TCP's small-queue limit lets one socket keep two such
# packets (their truesize, a little over 128 KiB) in the qdisc, so a queue
# of exactly two dropped on the sender's own egress, like no real NIC does,
# and one stream at 20 Mbit/s stalled on retransmission timeouts (86% of
# the rate, 1325 drops in 8 transfers). Four leaves room for a retransmit.
readonly QUEUE_MS=20
readonly QUEUE_MIN=262144
# netem's queue (in packets) must hold everything sent during the delay, or
# netem itself drops; it is sized for 4x the rate (100 Gbit/s when the rate
# is unlimited), counting full frames, and at least 1000 packets.
readonly NETEM_UNLIMITED_BITS=100000000000
readonly NETEM_LIMIT_MIN=1000
readonly DELAY_MAX_US=10000000
# Link MTU bounds: IPv4's minimum, and the jumbo frames HPC Ethernet uses.
readonly MTU_MIN=576
readonly MTU_MAX=9216
# The discarding device in NAME-br that lost packets are sent to.
readonly BLACKHOLE=blackhole
# The user-space delay's queue (see the top): 2x the bytes sent during the
# delay at the rate, or at NETDELAY_UNLIMITED_BITS (about what one relay
# carries here, with room) when unlimited; at least 4 MiB, at most 1 GiB.
readonly NETDELAY_UNLIMITED_BITS=20000000000
readonly NETDELAY_LIMIT_MIN=$((4 << 20))
readonly NETDELAY_LIMIT_MAX=$((1 << 30))
ROOT=$(cd "$(dirname "$0")/.." && pwd)
readonly ROOT
# Per-cluster state (the relays' pidfiles, counters and logs; the delay
# mode), removed by 'down'.
STATE_ROOT=${GW_CLUSTER_STATE:-/run/gradwire-cluster}

PREFIX=${GW_CLUSTER_PREFIX:-gwh}
LINK_FRAME=$FRAME_BYTES # the largest frame on a link: --mtu + 14

usage() {
    cat <<EOF
usage: $PROG [--prefix NAME] COMMAND [ARGS]

Emulated cluster: N hosts as network namespaces NAME0..NAME<N-1> on a bridge
in namespace NAME-br, host i at 198.18.0.<i+1>/24 on its eth0. Needs root.

commands:
  up N [--rate R] [--delay D] [--loss L] [--mtu M] [--delay-mode MODE]
       [--host I:KEY=VALUE[,KEY=VALUE...]]... [--link I-J:KEY=VALUE[,...]]...
        Create N hosts (1..$MAX_HOSTS), replacing any cluster with this prefix.
        --mtu M    MTU of every link, $MTU_MIN..$MTU_MAX (default 1500; 9000
                   for jumbo frames as HPC Ethernet fabrics use them). At a
                   shaped rate, TCP can carry at most (MTU-52)/(MTU+14) of
                   it: 95.6% at 1500, 99.3% at 9000 (tc counts the 14-byte
                   Ethernet header, TCP/IP take 52 bytes of every packet)
        --rate R   tbf rate limit on each host's egress and ingress, in
                   bit/s: 50mbit, 1gbit, 800kbit, 1000000bit (default none)
        --delay D  delay on each host's egress: 20ms, 500us, 1s
                   (default none); the round trip from i to j is
                   delay(i) + delay(j)
        --delay-mode auto|netem|user
                   how: netem (the kernel's netem qdisc), user (a relay
                   process, gradwire-netdelay, between two TAP devices for
                   each host with a delay: for kernels without netem), or
                   auto (default): netem where the kernel has it, else user
        --loss L   random loss of the packets each host sends, in percent:
                   1, 0.5%, 100% (default none); 100% cuts the host off
        --host I:rate=R,delay=D,loss=L
                   override any of them for host I (repeatable); 'none'
                   (or 0) removes a setting, e.g. --host 2:rate=none
        --link I-J:rate=R,loss=L
                   shape only the traffic between hosts I and J, both ways
                   (repeatable): a bad cable rather than a bad host. The
                   rate is an HTB class for the peer on each end's egress
                   (inside the host's own rate, if it has one); the loss a
                   BPF filter on each end's bridge port that drops packets
                   to the peer. Not with a netem delay on either host
  down          Remove the cluster: namespaces, bridge, veths. Processes
                still running in its namespaces are killed first. Succeeds
                when nothing is there.
  exec I CMD... Run CMD in host I (ip netns exec NAME<I> CMD...).
  addr I        Print host I's address.
  status        List hosts, addresses, qdiscs, the delay mode and the
                relays' counters (exit 1 when not up).

options (before or after COMMAND, before I for exec):
  --prefix NAME  namespace name prefix (default gwh, or \$GW_CLUSTER_PREFIX):
                 letters, digits, '_' and '-', starting with a letter and not
                 ending with a digit (so that NAME<i> of two clusters never
                 collide), at most 32 characters
  -h, --help     this text

environment:
  GW_CLUSTER_PREFIX  default prefix
  GW_CLUSTER_SLOW    seconds to pause after each host during 'up' (for tests
                     that interrupt 'up' midway)
  GW_NETDELAY        the gradwire-netdelay program for --delay-mode user
                     (default: build/gradwire-netdelay of this tree, else
                     gradwire-netdelay on PATH)
  GW_CLUSTER_STATE   where clusters keep their state (default
                     /run/gradwire-cluster; PREFIX/ below it)
EOF
}

die() {
    echo "$PROG: error: $*" >&2
    exit 1
}

usage_error() {
    echo "$PROG: error: $*" >&2
    echo "run '$PROG --help' for usage" >&2
    exit 2
}

check_prefix() {
    local p="$1"
    if ! [[ "$p" =~ ^[A-Za-z][A-Za-z0-9_-]{0,31}$ ]] || [[ "$p" =~ [0-9]$ ]]; then
        usage_error "bad prefix '$p': use letters, digits, '_' or '-', start with a letter, do not end with a digit, at most 32 characters"
    fi
}

need_root_tools() {
    [ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces and tc need CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    command -v ip >/dev/null || die "'ip' not found: install Debian package iproute2"
    command -v tc >/dev/null || die "'tc' not found: install Debian package iproute2"
}

host_ns() { echo "${PREFIX}$1"; }
state_dir() { echo "${STATE_ROOT}/${PREFIX}"; }
bridge_ns() { echo "${PREFIX}-br"; }
host_addr() { echo "${ADDR_NET}.$(($1 + 1))"; }

# The namespaces of this cluster, hosts in numeric order, then the bridge.
# Prefixes never end with a digit, so another cluster's names cannot match.
cluster_namespaces() {
    local names
    names=$(ip netns list 2>/dev/null | awk '{print $1}') || true
    {
        grep -E "^${PREFIX}[0-9]+\$" <<<"$names" | sed "s/^${PREFIX}//" | sort -n | sed "s/^/${PREFIX}/"
        grep -Fx "$(bridge_ns)" <<<"$names"
    } || true
}

ns_exists() {
    ip netns list 2>/dev/null | awk '{print $1}' | grep -Fxq "$1"
}

check_index() {
    local i="$1"
    [[ "$i" =~ ^[0-9]{1,3}$ ]] || usage_error "host index '$i' is not a number in 0..$((MAX_HOSTS - 1))"
    [ "$i" -lt "$MAX_HOSTS" ] || usage_error "host index $i out of range (0..$((MAX_HOSTS - 1)))"
    ns_exists "$(host_ns "$((10#$i))")" || die "host $i not found: no namespace $(host_ns "$((10#$i))") (is cluster '$PREFIX' up?)"
}

# --- value parsing ---------------------------------------------------------

# Prints the rate in bit/s, 0 for none. tc's "bps" units are bytes per
# second, an easy slip, so only the unambiguous *bit forms are accepted.
parse_rate() {
    local v="${1,,}" what="$2" n unit
    if [ "$v" = none ] || [ "$v" = 0 ]; then
        echo 0
        return
    fi
    [[ "$v" =~ ^([0-9]+)(bit|kbit|mbit|gbit)$ ]] ||
        usage_error "bad $what '$1': use an integer with bit, kbit, mbit or gbit (e.g. 50mbit), or none"
    n=$((10#${BASH_REMATCH[1]}))
    unit=${BASH_REMATCH[2]}
    case "$unit" in
        bit) ;;
        kbit) n=$((n * 1000)) ;;
        mbit) n=$((n * 1000000)) ;;
        gbit) n=$((n * 1000000000)) ;;
    esac
    [ "$n" -ge 8000 ] || usage_error "$what '$1' is below 8kbit, too slow for a useful link"
    [ "$n" -le 400000000000 ] || usage_error "$what '$1' is above 400gbit"
    echo "$n"
}

# Prints the delay in microseconds, 0 for none.
parse_delay() {
    local v="${1,,}" what="$2" n
    if [ "$v" = none ] || [ "$v" = 0 ]; then
        echo 0
        return
    fi
    [[ "$v" =~ ^([0-9]+)(us|ms|s)$ ]] ||
        usage_error "bad $what '$1': use an integer with us, ms or s (e.g. 20ms), or none"
    n=$((10#${BASH_REMATCH[1]}))
    case "${BASH_REMATCH[2]}" in
        us) ;;
        ms) n=$((n * 1000)) ;;
        s) n=$((n * 1000000)) ;;
    esac
    [ "$n" -le "$DELAY_MAX_US" ] || usage_error "$what '$1' is above 10s"
    echo "$n"
}

# Prints the loss as a threshold out of 2^32 for the BPF filter, which drops
# a packet when a random 32-bit number is below it; 0 for none.
parse_loss() {
    local v="$1" what="$2"
    if [ "$v" = none ]; then
        echo 0
        return
    fi
    [[ "$v" =~ ^([0-9]{1,3}(\.[0-9]{1,6})?)%?$ ]] ||
        usage_error "bad $what '$1': use a percentage such as 1, 0.5% or 100%, or none"
    awk -v x="${BASH_REMATCH[1]}" 'BEGIN { exit !(x <= 100) }' || usage_error "$what '$1' is above 100%"
    awk -v x="${BASH_REMATCH[1]}" 'BEGIN { printf "%.0f\n", x / 100 * 4294967296 }'
}

# --- shaping -----------------------------------------------------------------

max() { if [ "$1" -gt "$2" ]; then echo "$1"; else echo "$2"; fi; }

# tbf arguments for a rate in bit/s; see BURST_* and QUEUE_* above.
tbf_args() {
    local bits="$1" bytes_per_s burst queue
    bytes_per_s=$((bits / 8))
    burst=$(max $((bytes_per_s * BURST_MS / 1000)) $((2 * LINK_FRAME)))
    queue=$(max $((bytes_per_s * QUEUE_MS / 1000)) "$QUEUE_MIN")
    echo "rate ${bits}bit burst $burst limit $((burst + queue))"
}

netdelay_limit() {
    local bits="$1" delay_us="$2" bytes
    [ "$bits" -gt 0 ] || bits=$NETDELAY_UNLIMITED_BITS
    bytes=$((2 * (bits / 8) * delay_us / 1000000))
    bytes=$(max "$bytes" "$NETDELAY_LIMIT_MIN")
    [ "$bytes" -le "$NETDELAY_LIMIT_MAX" ] || bytes=$NETDELAY_LIMIT_MAX
    echo "$bytes"
}

# The relay program for --delay-mode user, or nothing.
find_netdelay() {
    if [ -n "${GW_NETDELAY:-}" ]; then
        [ -x "$GW_NETDELAY" ] && echo "$GW_NETDELAY"
        return 0
    fi
    if [ -x "$ROOT/build/gradwire-netdelay" ]; then
        echo "$ROOT/build/gradwire-netdelay"
    else
        command -v gradwire-netdelay || true
    fi
}

netem_limit() {
    local bits="$1" delay_us="$2" bytes_in_flight
    [ "$bits" -gt 0 ] || bits=$NETEM_UNLIMITED_BITS
    bytes_in_flight=$((bits * delay_us / 8000000))
    max $((4 * bytes_in_flight / LINK_FRAME)) "$NETEM_LIMIT_MIN"
}

# Classic BPF (tcpdump -ddd format) matching a packet when a random 32-bit
# number is below the threshold: ld rand (SKF_AD_OFF + SKF_AD_RANDOM);
# jge threshold, skip 1; ret -1 (match); ret 0 (no match).
loss_bytecode() {
    local threshold="$1"
    if [ "$threshold" -ge 4294967296 ]; then
        echo "1,6 0 0 4294967295"
    else
        echo "4,32 0 0 4294963256,53 1 0 $threshold,6 0 0 4294967295,6 0 0 0"
    fi
}

# Probe a qdisc kind on the bridge namespace's loopback, to fail with a
# clear message rather than tc's "Specified qdisc kind is unknown".
have_netem() {
    local br
    br=$(bridge_ns)
    tc -n "$br" qdisc add dev lo root handle 1: netem delay 1ms 2>/dev/null || return 1
    tc -n "$br" qdisc del dev lo root 2>/dev/null || true
}

# The device lost packets are sent to: an ifb (which exists in every Debian
# kernel) whose only queue holds 0 bytes, so it discards all it is given,
# silently. A device that is down would discard too, but the kernel logs
# every redirect to it.
make_blackhole() {
    local br
    br=$(bridge_ns)
    ip -n "$br" link add "$BLACKHOLE" type ifb ||
        die "loss needs an ifb device (kernel option CONFIG_IFB)"
    ip -n "$br" link set "$BLACKHOLE" up
    tc -n "$br" qdisc replace dev "$BLACKHOLE" root bfifo limit 0
}

# Shape host i: see the comment at the top. Word splitting of tbf_args is
# intended.
shape_host() {
    local i="$1" bits="$2" delay_us="$3" loss="$4" ns br
    ns=$(host_ns "$i")
    br=$(bridge_ns)
    # In user mode the relay holds the delay: only tbf here.
    [ "$DELAY_MODE" = netem ] || delay_us=0
    if [ "$delay_us" -gt 0 ]; then
        # netem first, then tbf: a packet waits out its delay, then is
        # serialised at the rate. The other order (tbf root, netem child)
        # was measured at ~70% of the rate where this order gives ~92%, the
        # same as tbf alone: tbf then wastes tokens waiting for netem.
        tc -n "$ns" qdisc replace dev eth0 root handle 1: netem \
            limit "$(netem_limit "$bits" "$delay_us")" delay "${delay_us}us"
        if [ "$bits" -gt 0 ]; then
            # shellcheck disable=SC2046
            tc -n "$ns" qdisc add dev eth0 parent 1:1 handle 10: tbf $(tbf_args "$bits")
        fi
    elif [ "$bits" -gt 0 ]; then
        # shellcheck disable=SC2046
        tc -n "$ns" qdisc replace dev eth0 root handle 1: tbf $(tbf_args "$bits")
    fi
    if [ "$bits" -gt 0 ]; then
        # shellcheck disable=SC2046
        tc -n "$br" qdisc replace dev "h$i" root handle 1: tbf $(tbf_args "$bits")
    fi
    if [ "$loss" -gt 0 ]; then
        # The host's TCP would otherwise hand the veth segments of up to
        # 64 KiB, and the filter would drop ~44 packets at once.
        ip -n "$ns" link set dev eth0 gso_max_segs 1
        tc -n "$br" qdisc add dev "h$i" handle ffff: ingress
        tc -n "$br" filter add dev "h$i" parent ffff: protocol all prio 1 \
            bpf bytecode "$(loss_bytecode "$loss")" \
            action mirred egress redirect dev "$BLACKHOLE"
    fi
}

# Per-link shaping (--link), host i's side: egress classes for its shaped
# peers, and loss towards them. peers: "J:BITS:LOSS ..." (BITS or LOSS 0:
# none). HTB replaces the host's root tbf: a parent class at the host's
# rate (or unlimited), a default class for all other traffic, one class
# per shaped peer (minor 0x100 + J) picked by the destination address.
readonly HTB_UNLIMITED_BITS=100000000000
shape_links() {
    local i="$1" host_bits="$2" peers="$3" ns br total spec j bits loss minor any_rate=0
    ns=$(host_ns "$i")
    br=$(bridge_ns)
    for spec in $peers; do
        IFS=: read -r j bits loss <<<"$spec"
        [ "$bits" -eq 0 ] || any_rate=1
    done
    if [ $any_rate -eq 1 ]; then
        total=$host_bits
        [ "$total" -gt 0 ] || total=$HTB_UNLIMITED_BITS
        # The host's tbf (handle 1:, another kind) goes: replace cannot
        # change a qdisc's kind.
        tc -n "$ns" qdisc del dev eth0 root 2>/dev/null || true
        tc -n "$ns" qdisc add dev eth0 root handle 1: htb default 2
        tc -n "$ns" class add dev eth0 parent 1: classid 1:1 htb rate "${total}bit" \
            ceil "${total}bit" quantum "$LINK_FRAME"
        tc -n "$ns" class add dev eth0 parent 1:1 classid 1:2 htb rate "${total}bit" \
            ceil "${total}bit" quantum "$LINK_FRAME"
        for spec in $peers; do
            IFS=: read -r j bits loss <<<"$spec"
            [ "$bits" -gt 0 ] || continue
            [ "$host_bits" -eq 0 ] || [ "$bits" -le "$host_bits" ] || bits=$host_bits
            minor=$(printf '%x' $((0x100 + j)))
            tc -n "$ns" class add dev eth0 parent 1:1 classid "1:$minor" htb rate "${bits}bit" \
                ceil "${bits}bit" quantum "$LINK_FRAME"
            tc -n "$ns" qdisc add dev eth0 parent "1:$minor" bfifo \
                limit "$(max $((bits / 8 * QUEUE_MS / 1000)) "$QUEUE_MIN")"
            tc -n "$ns" filter add dev eth0 parent 1: protocol ip prio 1 u32 \
                match ip dst "$(host_addr "$j")/32" flowid "1:$minor"
        done
    fi
    for spec in $peers; do
        IFS=: read -r j bits loss <<<"$spec"
        [ "$loss" -gt 0 ] || continue
        ip -n "$ns" link set dev eth0 gso_max_segs 1
        tc -n "$br" qdisc add dev "h$i" handle ffff: ingress 2>/dev/null || true
        tc -n "$br" filter add dev "h$i" parent ffff: protocol ip prio 2 \
            bpf bytecode "$(link_loss_bytecode "$(host_addr "$j")" "$loss")" \
            action mirred egress redirect dev "$BLACKHOLE"
    done
}

# Classic BPF for an IPv4 packet at a bridge port's ingress (cls_bpf puts
# the Ethernet header back in front there, so the IP header starts at 14):
# its destination (ld [30]) is dst, and a random number is below the
# threshold (as loss_bytecode): ret -1, else ret 0.
link_loss_bytecode() {
    local dst="$1" threshold="$2" a b c d ip
    IFS=. read -r a b c d <<<"$dst"
    ip=$(((a << 24) | (b << 16) | (c << 8) | d))
    if [ "$threshold" -ge 4294967296 ]; then
        echo "4,32 0 0 30,21 0 1 $ip,6 0 0 4294967295,6 0 0 0"
    else
        echo "6,32 0 0 30,21 0 3 $ip,32 0 0 4294963256,53 1 0 $threshold,6 0 0 4294967295,6 0 0 0"
    fi
}

# --- down ----------------------------------------------------------------------

# Kill what still runs in a namespace: such a process keeps the namespace
# (and its half of a veth pair) alive after 'ip netns del'.
kill_ns_pids() {
    local ns="$1" pids tries
    pids=$(ip netns pids "$ns" 2>/dev/null) || return 0
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    for tries in 1 2 3 4 5 6 7 8 9 10; do
        pids=$(ip netns pids "$ns" 2>/dev/null) || return 0
        [ -n "$pids" ] || return 0
        sleep 0.1
    done
    echo "$PROG: killing processes left in $ns after $tries tries: $pids" >&2
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
}

# Whether pid $1 is a running gradwire-netdelay (comm is cut to 15
# characters; a zombie, which nobody may have reaped yet, is not running).
relay_alive() {
    local stat
    [[ "$1" =~ ^[0-9]+$ ]] || return 1
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    [[ "$stat" =~ ^$1\ \(gradwire-netdel\)\ [^Z] ]]
}

# Stop this cluster's relays (user-space delay) by their pidfiles: each
# holds its TAPs' files, which keep NAME-br alive. A pid is signalled only
# while it is still a gradwire-netdelay.
stop_relays() {
    local f pid tries left
    for f in "$(state_dir)"/relay*.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f" 2>/dev/null) || continue
        relay_alive "$pid" || continue
        kill -TERM "$pid" 2>/dev/null || true
        for ((tries = 0; tries < 50; tries++)); do
            relay_alive "$pid" || break
            sleep 0.02
        done
        if relay_alive "$pid"; then
            echo "$PROG: relay $pid ($f) ignored SIGTERM; killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    left=$(state_dir)
    rm -rf "$left"
}

do_down() {
    local ns left
    stop_relays
    for ns in $(cluster_namespaces); do
        kill_ns_pids "$ns"
        # Deleting a namespace deletes its interfaces, and deleting one end
        # of a veth pair deletes the other, so this removes veths and bridge.
        ip netns del "$ns" 2>/dev/null || true
    done
    left=$(cluster_namespaces)
    [ -z "$left" ] || die "could not remove namespace(s): $(echo "$left" | tr '\n' ' ')"
}

cmd_down() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --prefix) [ $# -ge 2 ] || usage_error "--prefix needs a value"; PREFIX="$2"; shift 2 ;;
            -h|--help) usage; exit 0 ;;
            *) usage_error "down: unexpected argument '$1'" ;;
        esac
    done
    check_prefix "$PREFIX"
    need_root_tools
    do_down
}

# --- up --------------------------------------------------------------------------

UP_DONE=0

on_up_exit() {
    local rc=$?
    set +e
    if [ "$UP_DONE" -ne 1 ]; then
        echo "$PROG: up failed or was interrupted; removing what it created" >&2
        do_down
        [ "$rc" -ne 0 ] || rc=1
    fi
    exit "$rc"
}

# Namespaces get no IPv6, so a host has no address other than its 198.18 one
# and sends nothing (router solicitations, MLD) besides what it is asked to.
ns_init() {
    local ns="$1"
    ip netns add "$ns"
    if [ -d /proc/sys/net/ipv6 ]; then
        ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 \
            net.ipv6.conf.default.disable_ipv6=1 >/dev/null
    fi
    ip -n "$ns" link set lo up
}

# Host i with a delay in user mode: TAPs and the relay instead of a veth
# pair (see the top). The relay creates both devices in the bridge
# namespace before it goes to the background, so they exist when it
# returns.
make_relayed_link() {
    local i="$1" bits="$2" delay_us="$3" ns br st
    ns=$(host_ns "$i")
    br=$(bridge_ns)
    st=$(state_dir)
    ip netns exec "$br" "$NETDELAY" --host-tap "e$i" --bridge-tap "h$i" \
        --delay-us "$delay_us" --limit "$(netdelay_limit "$bits" "$delay_us")" \
        --daemon --realtime --pidfile "$st/relay$i.pid" --stats "$st/relay$i.stats" --log "$st/relay$i.log"
    ip -n "$br" link set "e$i" netns "$ns"
    ip -n "$ns" link set "e$i" name eth0
}

DELAY_MODE=none
NETDELAY=""

cmd_up() {
    local n="" rate="none" delay="none" loss="none" mtu=1500 overrides=() links=() spec mode=auto
    while [ $# -gt 0 ]; do
        case "$1" in
            --prefix|--rate|--delay|--loss|--mtu|--host|--link|--delay-mode)
                [ $# -ge 2 ] || usage_error "$1 needs a value"
                case "$1" in
                    --delay-mode) mode="$2" ;;
                    --prefix) PREFIX="$2" ;;
                    --rate) rate="$2" ;;
                    --delay) delay="$2" ;;
                    --loss) loss="$2" ;;
                    --mtu) mtu="$2" ;;
                    --host) overrides+=("$2") ;;
                    --link) links+=("$2") ;;
                esac
                shift 2 ;;
            -h|--help) usage; exit 0 ;;
            -*) usage_error "up: unknown option '$1'" ;;
            *)
                [ -z "$n" ] || usage_error "up: unexpected argument '$1'"
                n="$1"; shift ;;
        esac
    done
    [ -n "$n" ] || usage_error "up: missing host count N"
    if ! [[ "$n" =~ ^[0-9]{1,3}$ ]] || [ "$((10#$n))" -lt 1 ] || [ "$((10#$n))" -gt "$MAX_HOSTS" ]; then
        usage_error "up: host count '$n' must be 1..$MAX_HOSTS"
    fi
    n=$((10#$n))
    if ! [[ "$mtu" =~ ^[0-9]{3,4}$ ]] || [ "$((10#$mtu))" -lt "$MTU_MIN" ] || [ "$((10#$mtu))" -gt "$MTU_MAX" ]; then
        usage_error "up: --mtu '$mtu' must be a number in $MTU_MIN..$MTU_MAX"
    fi
    mtu=$((10#$mtu))
    LINK_FRAME=$((mtu + 14))
    case "$mode" in
        auto | netem | user) ;;
        *) usage_error "up: --delay-mode '$mode' must be auto, netem or user" ;;
    esac
    check_prefix "$PREFIX"

    # Per-host settings, the defaults overridden by --host.
    local bits=() delays=() losses=() i def_bits def_delay def_loss
    def_bits=$(parse_rate "$rate" --rate)
    def_delay=$(parse_delay "$delay" --delay)
    def_loss=$(parse_loss "$loss" --loss)
    for ((i = 0; i < n; i++)); do
        bits[i]=$def_bits
        delays[i]=$def_delay
        losses[i]=$def_loss
    done
    for spec in "${overrides[@]+"${overrides[@]}"}"; do
        local idx kvs kv setting key val
        [[ "$spec" =~ ^([0-9]{1,3}):(.+)$ ]] || usage_error "bad --host '$spec': use I:rate=R,delay=D,loss=L"
        idx=$((10#${BASH_REMATCH[1]}))
        kvs=${BASH_REMATCH[2]}
        [ "$idx" -lt "$n" ] || usage_error "--host '$spec': host $idx does not exist (N=$n)"
        IFS=, read -r -a kv <<<"$kvs"
        for setting in "${kv[@]}"; do
            [[ "$setting" =~ ^([a-z]+)=(.+)$ ]] || usage_error "bad --host setting '$setting': use rate=R, delay=D or loss=L"
            key=${BASH_REMATCH[1]}
            val=${BASH_REMATCH[2]}
            case "$key" in
                rate) bits[idx]=$(parse_rate "$val" "host $idx rate") ;;
                delay) delays[idx]=$(parse_delay "$val" "host $idx delay") ;;
                loss) losses[idx]=$(parse_loss "$val" "host $idx loss") ;;
                *) usage_error "bad --host key '$key': use rate, delay or loss" ;;
            esac
        done
    done

    # Per-link settings: peers[i] lists "J:BITS:LOSS" for each shaped link.
    local peers=() link_desc=() a b lbits lloss
    for ((i = 0; i < n; i++)); do peers[i]=""; done
    for spec in "${links[@]+"${links[@]}"}"; do
        [[ "$spec" =~ ^([0-9]{1,3})-([0-9]{1,3}):(.+)$ ]] || usage_error "bad --link '$spec': use I-J:rate=R,loss=L"
        a=$((10#${BASH_REMATCH[1]}))
        b=$((10#${BASH_REMATCH[2]}))
        kvs=${BASH_REMATCH[3]}
        { [ "$a" -lt "$n" ] && [ "$b" -lt "$n" ]; } || usage_error "--link '$spec': host $(max "$a" "$b") does not exist (N=$n)"
        [ "$a" -ne "$b" ] || usage_error "--link '$spec': a link joins two different hosts"
        [[ "${peers[a]} " != *" $b:"* ]] || usage_error "--link '$spec': the link $a-$b is given twice"
        lbits=0
        lloss=0
        IFS=, read -r -a kv <<<"$kvs"
        for setting in "${kv[@]}"; do
            [[ "$setting" =~ ^([a-z]+)=(.+)$ ]] || usage_error "bad --link setting '$setting': use rate=R or loss=L"
            key=${BASH_REMATCH[1]}
            val=${BASH_REMATCH[2]}
            case "$key" in
                rate) lbits=$(parse_rate "$val" "link $a-$b rate") ;;
                loss) lloss=$(parse_loss "$val" "link $a-$b loss") ;;
                delay) usage_error "--link '$spec': a delay per link is not supported (delay is per host: --host I:delay=D)" ;;
                *) usage_error "bad --link key '$key': use rate or loss" ;;
            esac
        done
        peers[a]+=" $b:$lbits:$lloss"
        peers[b]+=" $a:$lbits:$lloss"
        link_desc+=("link $a-$b: rate ${lbits}bit, loss threshold $lloss")
    done

    need_root_tools
    do_down

    set -E
    trap 'echo "$PROG: command failed: $BASH_COMMAND" >&2' ERR
    trap on_up_exit EXIT
    trap 'exit 129' HUP
    trap 'exit 130' INT
    trap 'exit 143' TERM

    local br ns
    br=$(bridge_ns)
    ns_init "$br"
    ip -n "$br" link add br0 type bridge stp_state 0
    ip -n "$br" link set br0 up
    local why_user=""
    for ((i = 0; i < n; i++)); do
        [ "${delays[i]}" -gt 0 ] || continue
        if [ "$mode" != user ] && have_netem; then
            DELAY_MODE=netem
        elif [ "$mode" = netem ]; then
            die "--delay-mode netem needs the netem qdisc (kernel option CONFIG_NET_SCH_NETEM, module sch_netem), which kernel $(uname -r) lacks; --delay-mode user (the default auto's fallback) works without it"
        else
            if [ "$mode" = user ]; then
                why_user="--delay-mode user"
            else
                why_user="kernel $(uname -r) has no netem qdisc"
            fi
            NETDELAY=$(find_netdelay)
            [ -n "$NETDELAY" ] ||
                die "--delay needs the netem qdisc, which kernel $(uname -r) lacks, or the user-space relay gradwire-netdelay, which is not built: run ./scripts/build.sh build, or set GW_NETDELAY to it${GW_NETDELAY:+ (GW_NETDELAY=$GW_NETDELAY is not an executable)}"
            [ -c /dev/net/tun ] ||
                die "--delay-mode user needs /dev/net/tun (kernel option CONFIG_TUN), which is missing here"
            DELAY_MODE=user
        fi
        break
    done
    for ((i = 0; i < n; i++)); do
        if [ -n "${peers[i]}" ] && [ "$DELAY_MODE" = netem ] && [ "${delays[i]}" -gt 0 ]; then
            die "--link on host $i, which has a netem delay: not supported (use --delay-mode user)"
        fi
    done
    mkdir -p "$(state_dir)"
    echo "$DELAY_MODE" >"$(state_dir)/delay-mode"
    : >"$(state_dir)/links"
    [ ${#link_desc[@]} -eq 0 ] || printf '%s\n' "${link_desc[@]}" >"$(state_dir)/links"
    local link_loss=0
    for ((i = 0; i < n; i++)); do
        for spec in ${peers[i]}; do
            [ "${spec##*:}" -eq 0 ] || link_loss=1
        done
    done
    for ((i = 0; i < n; i++)); do
        if [ "${losses[i]}" -gt 0 ] || [ $link_loss -eq 1 ]; then
            make_blackhole
            break
        fi
    done
    for ((i = 0; i < n; i++)); do
        ns=$(host_ns "$i")
        ns_init "$ns"
        if [ "$DELAY_MODE" = user ] && [ "${delays[i]}" -gt 0 ]; then
            make_relayed_link "$i" "${bits[i]}" "${delays[i]}"
        else
            # Both ends are created directly in their namespaces.
            ip -n "$ns" link add eth0 type veth peer name "h$i" netns "$br"
        fi
        ip -n "$ns" link set eth0 mtu "$mtu"
        ip -n "$br" link set "h$i" mtu "$mtu"
        ip -n "$br" link set "h$i" master br0
        ip -n "$br" link set "h$i" up
        ip -n "$ns" addr add "$(host_addr "$i")/24" dev eth0
        ip -n "$ns" link set eth0 up
        shape_host "$i" "${bits[i]}" "${delays[i]}" "${losses[i]}"
        [ -z "${peers[i]}" ] || shape_links "$i" "${bits[i]}" "${peers[i]}"
        if [ -n "${GW_CLUSTER_SLOW:-}" ]; then
            # In the background, so that a signal's trap runs at once.
            sleep "$GW_CLUSTER_SLOW" &
            wait $!
        fi
    done
    UP_DONE=1
    trap - ERR EXIT HUP INT TERM
    local how=""
    case "$DELAY_MODE" in
        netem) how="; delay by netem" ;;
        user) how="; delay by user-space relays, $NETDELAY ($why_user)" ;;
    esac
    echo "$PROG: cluster '$PREFIX' up: $n host(s), $(host_addr 0)..$(host_addr $((n - 1)))$how"
}

# --- exec, addr, status ----------------------------------------------------------

cmd_exec() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --prefix) [ $# -ge 2 ] || usage_error "--prefix needs a value"; PREFIX="$2"; shift 2 ;;
            -h|--help) usage; exit 0 ;;
            *) break ;;
        esac
    done
    [ $# -ge 2 ] || usage_error "exec: usage: exec I CMD..."
    check_prefix "$PREFIX"
    need_root_tools
    check_index "$1"
    local ns
    ns=$(host_ns "$((10#$1))")
    shift
    exec ip netns exec "$ns" "$@"
}

cmd_addr() {
    local i=""
    while [ $# -gt 0 ]; do
        case "$1" in
            --prefix) [ $# -ge 2 ] || usage_error "--prefix needs a value"; PREFIX="$2"; shift 2 ;;
            -h|--help) usage; exit 0 ;;
            *) [ -z "$i" ] || usage_error "addr: unexpected argument '$1'"; i="$1"; shift ;;
        esac
    done
    [ -n "$i" ] || usage_error "addr: missing host index"
    check_prefix "$PREFIX"
    need_root_tools
    check_index "$i"
    # Read back from the host rather than computed, so a host that lost its
    # address is reported, not papered over.
    local a
    a=$(ip -n "$(host_ns "$((10#$i))")" -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -n1)
    [ -n "$a" ] || die "host $i has no IPv4 address on eth0"
    echo "$a"
}

# Prints "  loss: P%" when host i has a loss filter, read back from the
# filter's bytecode (see loss_bytecode).
loss_status() {
    local i="$1"
    { tc -n "$(bridge_ns)" filter show dev "h$i" ingress 2>/dev/null |
        grep -o "bytecode '[^']*'" || true; } | awk '{
        c = $0
        to = ":   " # the host loss; a link loss names its peer
        if (match(c, /^bytecode .[0-9]+,32 0 0 30,21 0 [0-9]+ [0-9]+/)) {
            split(substr(c, RSTART, RLENGTH), f, /[ ,]/)
            ip = f[length(f)] + 0
            to = sprintf(" to %d.%d.%d.%d:", int(ip / 16777216), int(ip / 65536) % 256,
                         int(ip / 256) % 256, ip % 256)
        }
        if (c !~ /53 1 0 [0-9]+/) { printf "  loss%s 100%%\n", to; next }
        match(c, /53 1 0 [0-9]+/)
        split(substr(c, RSTART, RLENGTH), f, " ")
        printf "  loss%s %.4g%%\n", to, f[4] / 4294967296 * 100
    }'
}

# Prints host i's relay counters (user-space delay), fresh: the relay
# rewrites its stats file on SIGUSR1.
relay_status() {
    local i="$1" st f pid
    st=$(state_dir)
    f="$st/relay$i.stats"
    [ -f "$st/relay$i.pid" ] || return 0
    pid=$(cat "$st/relay$i.pid" 2>/dev/null) || true
    if ! relay_alive "$pid"; then
        echo "  delay:   relay not running (pidfile $st/relay$i.pid: '$pid'); see $st/relay$i.log"
        return 0
    fi
    local old tries
    old=$(sed -n 's/^seq=//p' "$f" 2>/dev/null) || true
    kill -USR1 "$pid" 2>/dev/null || true
    for ((tries = 0; tries < 50; tries++)); do
        [ "$(sed -n 's/^seq=//p' "$f" 2>/dev/null)" = "$old" ] || break
        sleep 0.01
    done
    awk -F= -v pid="$pid" '{ v[$1] = $2 } END {
        printf "  delay:   %gms egress, user-space relay pid %s (offload %s): %s frames, %s dropped (queue full, limit %s bytes, max queued %s bytes), late by mean %s us, max %s us\n",
            v["delay_us"] / 1000, pid, v["offload"], v["egress_frames"], v["egress_dropped_full"], v["limit_bytes"],
            v["egress_queued_max_bytes"], v["egress_late_mean_us"], v["egress_late_max_us"]
        printf "  ingress relay: %s frames, write errors %s egress, %s ingress\n",
            v["ingress_frames"], v["egress_write_errors"], v["ingress_write_errors"]
    }' "$f"
}

cmd_status() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --prefix) [ $# -ge 2 ] || usage_error "--prefix needs a value"; PREFIX="$2"; shift 2 ;;
            -h|--help) usage; exit 0 ;;
            *) usage_error "status: unexpected argument '$1'" ;;
        esac
    done
    check_prefix "$PREFIX"
    need_root_tools
    local names br ns i a state
    names=$(cluster_namespaces)
    if [ -z "$names" ]; then
        echo "cluster '$PREFIX': not up"
        exit 1
    fi
    br=$(bridge_ns)
    if ! grep -Fxq "$br" <<<"$names"; then
        echo "cluster '$PREFIX': bridge namespace $br missing (partial cluster; run down)"
    fi
    local mode
    mode=$(cat "$(state_dir)/delay-mode" 2>/dev/null) || mode="unknown (no state in $(state_dir))"
    echo "cluster '$PREFIX': delay mode $mode"
    [ ! -s "$(state_dir)/links" ] || sed 's/^/  /' "$(state_dir)/links"
    for ns in $names; do
        [ "$ns" != "$br" ] || continue
        i=${ns#"$PREFIX"}
        a=$(ip -n "$ns" -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}' | head -n1)
        state=$(ip -n "$ns" -br link show dev eth0 2>/dev/null | awk '{print $2}')
        echo "host $i  ns $ns  eth0 ${a:-(no address)} ${state:-(missing)}"
        tc -n "$ns" qdisc show dev eth0 2>/dev/null | sed 's/^/  egress:  /'
        tc -n "$br" qdisc show dev "h$i" 2>/dev/null | grep -v ingress | sed 's/^/  ingress: /'
        loss_status "$i"
        relay_status "$i"
    done
}

main() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --prefix) [ $# -ge 2 ] || usage_error "--prefix needs a value"; PREFIX="$2"; shift 2 ;;
            -h|--help|help) usage; exit 0 ;;
            *) break ;;
        esac
    done
    [ $# -gt 0 ] || usage_error "missing command"
    local cmd="$1"
    shift
    case "$cmd" in
        up) cmd_up "$@" ;;
        down) cmd_down "$@" ;;
        exec) cmd_exec "$@" ;;
        addr) cmd_addr "$@" ;;
        status) cmd_status "$@" ;;
        *) usage_error "unknown command '$cmd'" ;;
    esac
}

main "$@"
