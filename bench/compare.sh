#!/usr/bin/env bash
# compare.sh - gradwire's allreduce side by side with the peers users would
# otherwise pick (Gloo, Open MPI), on the same sizes, ranks and hosts, in one
# run, as DESIGN.md asks of every timing claim.
#
# Every library runs its nccl-tests-style driver (gradwire-bench allreduce,
# bench/peers/gloo_allreduce, bench/peers/mpi_allreduce: same flags, same
# timing method, same table), R times, the runs of the libraries interleaved
# (gradwire, then each peer, then gradwire again ...) so that a change in
# the machine's load hits all of them alike. For each size the table shows
# the median over the runs of each library's median time and busbw, and the
# ratio gradwire / peer of the busbws (> 1: gradwire is faster).
#
# Modes:
#   --emulated N --rate R  N emulated hosts (scripts/cluster.sh, needs root),
#                          one rank per host unless --ranks-per-host; peers:
#                          Gloo ring_chunked and halving_doubling, and Open
#                          MPI with btl tcp: mpirun runs on host 0 with a
#                          hostfile of the hosts and starts its daemons
#                          through an rsh agent that enters each host's
#                          namespaces, with the host names and /etc/hosts
#                          of tests/integration/emulated_hosts.sh (plain
#                          mpirun across namespaces fails: PMIx
#                          "Unreachable", as DESIGN.md says).
#   --local N              N ranks on this host over loopback TCP (gradwire
#                          with GW_TRANSPORT=tcp); peers: Gloo ring_chunked and
#                          halving_doubling, Open MPI with btl tcp and with vader
#                          (shared memory).
#
# The peer tcp_ring is no library: a few lines of Python stream, on every
# rank at once, the bytes a ring allreduce sends (2(n-1)/n S to the right
# neighbour, as much from the left one) over plain TCP, to show what the
# links and this machine can carry in that pattern at all; its "busbw" is
# the ceiling for any ring over TCP here.
set -euo pipefail

PROG=$(basename "$0")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# The command line as given, for the JSON's run header.
CMDLINE="$0$(printf ' %q' "$@")"

usage() {
    cat <<EOF
usage: $PROG --emulated N --rate R [options]
       $PROG --local N [options]

Run gradwire-bench allreduce and the peers' drivers on the same sizes and
ranks, R times each (interleaved), and print per size the median time and
busbw of every library and the ratio gradwire/peer of the busbws.

modes:
  --emulated N          N emulated hosts (network namespaces, needs root)
  --rate R              link rate of every host for --emulated: 2gbit, 800mbit
  --mtu M               link MTU for --emulated (default 1500; 9000 = jumbo
                        frames): TCP carries at most (M-52)/(M+14) of the rate
  --local N             N ranks on this host, over loopback TCP

options:
  -b, --minbytes S      smallest size (default 32M); K, M, G suffixes
  -e, --maxbytes S      largest size (default 64M); sizes double from -b to -e
  -r, --repeats R       runs of each library (default 5)
  -n, --iters N         timed iterations per size in each run (default 10)
  -w, --warmup N        warm-up iterations per size in each run (default 3)
  -d, --datatype T      float32 (default), float64 or int32
  -o, --op OP           sum (default), max or min
      --place P         in (default) or out: in-place or out-of-place figures
  -c, --check 0|1       check every result (default 1; 0 saves the drivers'
                        fill and check time on a busy machine)
      --ranks-per-host K   --emulated: K ranks per host (N*K ranks)
      --peers LIST      comma list of gloo_ring_chunked, gloo_halving_doubling,
                        mpi_tcp, mpi_vader, tcp_ring (raw TCP in the ring's
                        pattern, needs python3), or none (default: all the
                        mode allows and the build has, without tcp_ring)
      --gradwire-env "K=V ..."  extra environment for the gradwire runs only
                        (e.g. "GW_NSOCKS=2 GW_CHUNK_BYTES=262144")
      --variant "NAME K=V ..."  a gradwire column NAME run with that environment
                        (repeatable, for sweeps; replaces the plain gradwire
                        column; the first variant is the one ratios refer to;
                        LD_LIBRARY_PATH=DIR runs another build's library)
      --build DIR       build directory (default: $ROOT/build)
      --prefix NAME     cluster prefix for --emulated (default gwcmp<pid>x)
      --keep-cluster    leave the emulated cluster up at the end
      --raw DIR         keep every run's output in DIR
      --json FILE       also write the table as JSON, with the run header of
                        bench/run_header.py (scripts/results.sh renders it)
  -h, --help            this text

Every library checks its results (unless -c 0); a run with wrong elements or
a failure is reported and makes the script exit 1. The machine's load average
is printed before and after: on a shared machine, compare ratios measured in
one run, not figures from different runs.
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

mode=""
nhosts=0
rate=""
mtu=1500
minb=32M
maxb=64M
repeats=5
iters=10
warmup=3
dtype=float32
op=sum
place=in
check=1
rph=0
peers=""
gw_env=""
variants=()
build="$ROOT/build"
prefix="gwcmp$$x"
keep=0
raw=""
json=""

need() { [ $# -ge 2 ] || usage_error "$1 needs a value"; }

while [ $# -gt 0 ]; do
    case "$1" in
        --emulated) need "$@"; mode=emulated; nhosts="$2"; shift 2 ;;
        --local) need "$@"; mode=local; nhosts="$2"; shift 2 ;;
        --rate) need "$@"; rate="$2"; shift 2 ;;
        --mtu) need "$@"; mtu="$2"; shift 2 ;;
        -b|--minbytes) need "$@"; minb="$2"; shift 2 ;;
        -e|--maxbytes) need "$@"; maxb="$2"; shift 2 ;;
        -r|--repeats) need "$@"; repeats="$2"; shift 2 ;;
        -n|--iters) need "$@"; iters="$2"; shift 2 ;;
        -w|--warmup) need "$@"; warmup="$2"; shift 2 ;;
        -d|--datatype) need "$@"; dtype="$2"; shift 2 ;;
        -o|--op) need "$@"; op="$2"; shift 2 ;;
        --place) need "$@"; place="$2"; shift 2 ;;
        -c|--check) need "$@"; check="$2"; shift 2 ;;
        --ranks-per-host) need "$@"; rph="$2"; shift 2 ;;
        --peers) need "$@"; peers="$2"; shift 2 ;;
        --gradwire-env) need "$@"; gw_env="$2"; shift 2 ;;
        --variant) need "$@"; variants+=("$2"); shift 2 ;;
        --build) need "$@"; build="$2"; shift 2 ;;
        --prefix) need "$@"; prefix="$2"; shift 2 ;;
        --keep-cluster) keep=1; shift ;;
        --raw) need "$@"; raw="$2"; shift 2 ;;
        --json) need "$@"; json="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) usage_error "unknown argument '$1'" ;;
    esac
done

[ -n "$mode" ] || usage_error "give --emulated N --rate R or --local N"
[[ "$nhosts" =~ ^[0-9]+$ ]] && [ "$nhosts" -ge 1 ] || usage_error "the rank/host count must be a positive integer, not '$nhosts'"
for v in repeats iters warmup; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || usage_error "--$v wants a number, not '${!v}'"
done
[ "$repeats" -ge 1 ] && [ "$iters" -ge 1 ] || usage_error "--repeats and --iters must be at least 1"
[[ "$rph" =~ ^[0-9]+$ ]] || usage_error "--ranks-per-host wants a number, not '$rph'"
case "$place" in in|out) ;; *) usage_error "--place wants in or out, not '$place'" ;; esac
case "$check" in 0|1) ;; *) usage_error "--check wants 0 or 1, not '$check'" ;; esac
case "$dtype" in float32|float64|int32|float|double|int) ;; *) usage_error "--datatype: float32, float64 or int32 (what every driver has)" ;; esac
case "$op" in sum|max|min) ;; *) usage_error "--op: sum, max or min (what every driver has)" ;; esac
if [ "$mode" = emulated ]; then
    [ -n "$rate" ] || usage_error "--emulated needs --rate R (e.g. 2gbit)"
    [ "$(id -u)" -eq 0 ] || die "--emulated needs root (network namespaces and tc)"
else
    [ -z "$rate" ] || usage_error "--rate is for --emulated"
    [ "$rph" -eq 0 ] || usage_error "--ranks-per-host is for --emulated"
fi

LAUNCH="$build/gradwire"
BENCH="$build/gradwire-bench"
GLOO="$build/bench/peers/gloo_allreduce"
MPI="$build/bench/peers/mpi_allreduce"
[ -x "$LAUNCH" ] && [ -x "$BENCH" ] || die "no $LAUNCH or $BENCH: build first (cmake --build $build)"

# The peers this mode can run and this build has.
if [ -z "$peers" ]; then
    list=()
    [ -x "$GLOO" ] && list+=(gloo_ring_chunked gloo_halving_doubling)
    if [ -x "$MPI" ] && command -v mpirun >/dev/null; then
        list+=(mpi_tcp)
        [ "$mode" = local ] && list+=(mpi_vader)
    fi
    peers=$(IFS=,; echo "${list[*]-}")
elif [ "$peers" = none ]; then
    peers=""
fi
IFS=, read -r -a PEERS <<<"$peers"
for p in "${PEERS[@]+"${PEERS[@]}"}"; do
    case "$p" in
        gloo_ring_chunked|gloo_halving_doubling) [ -x "$GLOO" ] || die "$p: no $GLOO (install libgloo-dev and rebuild)" ;;
        mpi_tcp|mpi_vader)
            [ "$mode" = local ] || [ "$p" = mpi_tcp ] || die "$p: shared memory is for --local"
            [ -x "$MPI" ] && command -v mpirun >/dev/null || die "$p: no $MPI or mpirun (install libopenmpi-dev openmpi-bin and rebuild)" ;;
        tcp_ring) command -v python3 >/dev/null || die "tcp_ring needs python3" ;;
        *) usage_error "unknown peer '$p'" ;;
    esac
done

# gradwire's columns: NAME and its environment (after --gradwire-env).
[ ${#variants[@]} -gt 0 ] || variants=("gradwire")
VNAMES=()
declare -A VENV
for v in "${variants[@]}"; do
    read -r name rest <<<"$v"
    [[ "$name" =~ ^[A-Za-z0-9_.+-]+$ ]] || usage_error "--variant: bad name '$name' (letters, digits, _ . + -)"
    for kv in $rest; do
        [[ "$kv" =~ ^[A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*$ ]] || usage_error "--variant $name: '$kv' is not NAME=VALUE"
    done
    for p in "${PEERS[@]+"${PEERS[@]}"}" "${VNAMES[@]+"${VNAMES[@]}"}"; do
        [ "$p" != "$name" ] || usage_error "--variant: name '$name' is taken"
    done
    VNAMES+=("$name")
    VENV[$name]="$gw_env $rest"
done

nranks=$nhosts
[ "$mode" = local ] || [ "$rph" -eq 0 ] || nranks=$((nhosts * rph))

work=$(mktemp -d /tmp/gw-compare-XXXXXX)
cluster=0
cleanup() {
    local rc=$?
    if [ "$cluster" -eq 1 ] && [ "$keep" -eq 0 ]; then
        "$ROOT/scripts/cluster.sh" down --prefix "$prefix" >/dev/null 2>&1 || rc=1
    fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
[ -z "$raw" ] || mkdir -p "$raw"
[ -z "$json" ] || "$ROOT/bench/run_header.py" begin --command "$CMDLINE" >"$work/header.json" ||
    die "cannot write the run header"

if [ "$mode" = emulated ]; then
    cluster=1
    "$ROOT/scripts/cluster.sh" up "$nhosts" --prefix "$prefix" --rate "$rate" --mtu "$mtu" >/dev/null
    # Open MPI's way in: host names, /etc/hosts, an rsh agent, a hostfile.
    # shellcheck source=../tests/integration/emulated_hosts.sh
    . "$ROOT/tests/integration/emulated_hosts.sh"
    EH_PREFIX=$prefix EH_DIR=$work
    {
        echo "127.0.0.1 localhost"
        for ((h = 0; h < nhosts; h++)); do echo "198.18.0.$((h + 1)) n$h"; done
    } >"$work/hosts"
    for ((h = 0; h < nhosts; h++)); do
        mkdir -p "$work/by-host/n$h"
        echo "n$h slots=$([ "$rph" -eq 0 ] && echo 1 || echo "$rph")"
    done >"$work/hostfile"
    cat >"$work/agent.sh" <<AGENT
#!/usr/bin/env bash
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1
shift
. "$ROOT/tests/integration/emulated_hosts.sh"
EH_PREFIX="$prefix" EH_DIR="$work"
eh_in "\${host#n}" sh -c "\$*"
AGENT
    chmod +x "$work/agent.sh"
fi

common=(-b "$minb" -e "$maxb" -f 2 -n "$iters" -w "$warmup" -c "$check" -d "$dtype" -o "$op")
launch=("$LAUNCH" launch --no-prefix)
if [ "$mode" = emulated ]; then
    launch+=(--hosts "$prefix" -n "$nranks")
    [ "$rph" -eq 0 ] || launch+=(--ranks-per-host "$rph")
else
    launch+=(-n "$nranks")
fi

# Bytes of a size with an optional K, M or G suffix.
to_bytes() {
    local v="$1"
    [[ "$v" =~ ^([0-9]+)([KkMmGg]?)(i?B)?$ ]] || usage_error "bad size '$v'"
    case "${BASH_REMATCH[2]}" in
        K|k) echo $((BASH_REMATCH[1] << 10)) ;;
        M|m) echo $((BASH_REMATCH[1] << 20)) ;;
        G|g) echo $((BASH_REMATCH[1] << 30)) ;;
        *) echo "${BASH_REMATCH[1]}" ;;
    esac
}

cat >"$work/ring.py" <<'PY'
# Raw TCP ring: what the links carry in the allreduce ring's pattern, without
# any library: every rank streams 2(n-1)/n S bytes to its right neighbour
# while it receives as much from its left one, iters times per size. Each
# rank writes "size iteration seconds" lines to OUTDIR/ring.RANK.
import os, socket, sys, threading, time
rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
outdir, addr_file, minb, maxb, iters, warm = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
me = sys.argv[7]
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((me, 0)); ls.listen(1)
with open("%s.%d.tmp" % (addr_file, rank), "w") as f:
    f.write("%s %d\n" % (me, ls.getsockname()[1]))
os.rename("%s.%d.tmp" % (addr_file, rank), "%s.%d" % (addr_file, rank))
right = (rank + 1) % n
deadline = time.time() + 30
while not os.path.exists("%s.%d" % (addr_file, right)):
    if time.time() > deadline: sys.exit("no address from rank %d" % right)
    time.sleep(0.01)
h, p = open("%s.%d" % (addr_file, right)).read().split()
out = socket.create_connection((h, int(p)))
inc, _ = ls.accept()
for s in (out, inc):
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
sbuf = memoryview(bytearray(1 << 20)); rbuf = bytearray(1 << 20)
def send(nb):
    while nb > 0:
        nb -= out.send(sbuf[:min(nb, len(sbuf))])
def recv(nb):
    while nb > 0:
        k = inc.recv_into(rbuf, min(nb, len(rbuf)))
        if k == 0: raise SystemExit("peer closed")
        nb -= k
lines = []
size = minb
while size <= maxb:
    nb = 2 * (n - 1) * size // n
    for it in range(-warm, iters):
        t0 = time.perf_counter()
        th = threading.Thread(target=send, args=(nb,)); th.start(); recv(nb); th.join()
        if it >= 0: lines.append("%d %d %.9f" % (size, it, time.perf_counter() - t0))
    size *= 2
with open("%s/ring.%d" % (outdir, rank), "w") as f:
    f.write("\n".join(lines) + "\n")
PY

# The start of a `sh -c` script run as a rank: $a is the address the rank
# binds (its emulated host's own, on eth0, or loopback here); the script's
# first argument, the mode, is shifted away. The tcp ring and Gloo use it.
# shellcheck disable=SC2016
with_host_addr='a=127.0.0.1
if [ "$1" = emulated ]; then
    a=$(ip -4 -o addr show dev eth0 | awk "{print \$4}" | cut -d/ -f1)
fi
shift
'

# The raw TCP ring, printed as a table of the drivers' layout (both
# placements get the same time: median over iterations of the slowest rank).
run_ring() {
    local k="$1" out="$2" dir="$work/ring.$k"
    mkdir -p "$dir"
    # shellcheck disable=SC2016
    "${launch[@]}" -- sh -c "$with_host_addr"'exec python3 "$@" "$a"' _ "$mode" \
        "$work/ring.py" "$dir" "$dir/addr" \
        "$(to_bytes "$minb")" "$(to_bytes "$maxb")" "$iters" "$warmup" >"$out" 2>&1 || return 1
    cat "$dir"/ring.* | awk '
        { key = $1 SUBSEP $2; if (!(key in t) || $3 > t[key]) t[key] = $3; sizes[$1] = 1 }
        END {
            for (s in sizes) {
                m = 0
                for (key in t) { split(key, f, SUBSEP); if (f[1] == s) v[++m] = t[key] * 1e6 }
                for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
                med = m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
                printf "%12d  %12d  %8s  %6s  %6d  %7.1f  %6s  %6s  %6d  %7.1f  %6s  %6s  %6d\n",
                    s, s / 4, "bytes", "none", -1, med, "-", "-", 0, med, "-", "-", 0
            }
        }' >>"$out"
}

# run NAME: one run of one library; its table goes to $work/NAME.<k>.
run_lib() {
    local name="$1" k="$2" out="$work/$1.$2" store
    case "$name" in
        gloo_*)
            store="$work/store.$name.$k"
            mkdir -p "$store"
            # Gloo binds the address it is given.
            # shellcheck disable=SC2016
            "${launch[@]}" -- sh -c "$with_host_addr"'exec "$@" --hostname "$a"' _ "$mode" \
                "$GLOO" --store "$store" \
                --algo "${name#gloo_}" "${common[@]}" >"$out" 2>&1 ;;
        mpi_tcp|mpi_vader)
            local btl=tcp,self
            [ "$name" = mpi_tcp ] || btl=vader,self
            if [ "$mode" = emulated ]; then
                # By slot, as gradwire's --ranks-per-host places ranks; one
                # per host: the same as its round robin.
                eh_in 0 mpirun --allow-run-as-root --hostfile "$work/hostfile" -np "$nranks" \
                    --mca plm_rsh_agent "$work/agent.sh" --mca btl "$btl" \
                    --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
                    "$MPI" "${common[@]}" >"$out" 2>&1
            else
                # Loopback only: this host's other interfaces are not ours to use.
                mpirun --allow-run-as-root --oversubscribe -np "$nranks" --mca btl "$btl" \
                    --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
                    "$MPI" "${common[@]}" >"$out" 2>&1
            fi ;;
        tcp_ring) run_ring "$k" "$out" ;;
        *)
            # A gradwire variant. TCP forced: the comparison is of the
            # network path, even where shared memory could be used.
            # shellcheck disable=SC2086
            env GW_TRANSPORT=tcp ${VENV[$name]} "${launch[@]}" -- "$BENCH" allreduce \
                "${common[@]}" >"$out" 2>&1 ;;
    esac
}

# The table rows of a run: "size time(us) wrong" for the chosen placement.
# busbw is recomputed from the time below: the tables round it to 0.01.
rows() {
    awk -v p="$place" '$1 ~ /^[0-9]+$/ && NF >= 13 {
        if (p == "in") print $1, $10, $13; else print $1, $6, $9 }' "$1"
}

libs=("${VNAMES[@]}" "${PEERS[@]+"${PEERS[@]}"}")
failed=0
failures=()
echo "# $PROG: $mode, $nranks ranks$([ "$mode" = emulated ] && echo " on $nhosts hosts at $rate, MTU $mtu"), $dtype $op, sizes $minb..$maxb, $place-place, $repeats runs x $iters iterations"
for v in "${VNAMES[@]}"; do
    [ -z "${VENV[$v]// /}" ] || echo "# $v: ${VENV[$v]}"
done
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
for ((k = 1; k <= repeats; k++)); do
    for lib in "${libs[@]}"; do
        if ! run_lib "$lib" "$k"; then
            echo "# run $k of $lib failed:" >&2
            tail -n 20 "$work/$lib.$k" >&2
            failed=1
            failures+=("run $k of $lib failed: $(grep -i -m1 'error' "$work/$lib.$k" | tr -d '"\\' | cut -c1-160)")
        elif rows "$work/$lib.$k" | awk '$3 != "0" && $3 != "N/A" { bad = 1 } END { exit !bad }'; then
            echo "# run $k of $lib had wrong elements" >&2
            failed=1
            failures+=("run $k of $lib had wrong elements")
        fi
        [ -z "$raw" ] || cp "$work/$lib.$k" "$raw/$lib.$k"
    done
done
echo "# load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"

# Medians per library and size, then the table.
for lib in "${libs[@]}"; do
    for ((k = 1; k <= repeats; k++)); do
        [ -f "$work/$lib.$k" ] && rows "$work/$lib.$k" | sed "s/^/$lib /"
    done
done >"$work/rows"
awk -v libs="${libs[*]}" -v n="$nranks" '
    function median(list,   a, m, i, j, t) {
        m = split(list, a, " ")
        for (i = 2; i <= m; i++)
            for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
    }
    { key = $1 SUBSEP $2; t[key] = t[key] " " $3; sizes[$2] = 1 }
    END {
        nl = split(libs, L, " ")
        printf "#%11s", ""
        for (i = 1; i <= nl; i++) printf(i > 1 ? "  %-28s" : "  %-20s", L[i])
        printf "\n#%11s", "size(B)"
        for (i = 1; i <= nl; i++) {
            printf "  %10s  %8s", "time(us)", "busbw"
            if (i > 1) printf "  %6s", "ratio"
        }
        printf "\n"
        ns = 0
        for (s in sizes) S[++ns] = s + 0
        for (i = 2; i <= ns; i++)
            for (j = i; j > 1 && S[j - 1] > S[j]; j--) { x = S[j]; S[j] = S[j - 1]; S[j - 1] = x }
        for (q = 1; q <= ns; q++) {
            s = S[q]
            printf "%12d", s
            ref = -1
            for (i = 1; i <= nl; i++) {
                k = L[i] SUBSEP s
                if (!(k in t)) { printf "  %10s  %8s", "-", "-"; if (i > 1) printf "  %6s", "-"; continue }
                tm = median(t[k])
                b = tm > 0 ? s / tm / 1e3 * 2 * (n - 1) / n : 0
                if (i == 1) ref = b
                printf "  %10.1f  %8.4f", tm, b
                if (i > 1) {
                    if (ref > 0 && b > 0) printf "  %6.2f", ref / b; else printf "  %6s", "-"
                }
            }
            printf "\n"
        }
        printf "# time: median over runs of each run'"'"'s median time (us); busbw = size / time x\n"
        printf "# 2(n-1)/n in GB/s (1e9 B/s); ratio = %s busbw / that column'"'"'s (> 1: %s faster)\n", L[1], L[1]
    }' "$work/rows"
if [ "$mode" = emulated ]; then
    echo "# link rate $rate = $(awk -v r="$rate" 'BEGIN {
        v = r + 0; u = tolower(r); sub(/^[0-9]+/, "", u)
        m = (u == "gbit") ? 1e9 : (u == "mbit") ? 1e6 : (u == "kbit") ? 1e3 : 1
        printf "%.4f GB/s", v * m / 8e9 }') per direction per host; TCP over MTU $mtu carries at most $(awk -v m="$mtu" 'BEGIN { printf "%.1f%%", (m - 52) / (m + 14) * 100 }') of it"
fi
if [ -n "$json" ]; then
    # The same medians as the table, with min and max over the runs, under
    # the run header: what scripts/render_results.py draws.
    /usr/bin/python3 - "$work/rows" "$work/data.json" "$nranks" "${libs[@]}" <<PY || die "cannot write $json"
import json, statistics, sys
rows, out, n, libs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
t = {}
for line in open(rows):
    lib, size, us = line.split()[:3]
    t.setdefault(int(size), {}).setdefault(lib, []).append(float(us))
def busbw(s, us):
    return s / us / 1e3 * 2 * (n - 1) / n if us > 0 else None
results = []
for s in sorted(t):
    per = {}
    for lib, v in t[s].items():
        m = statistics.median(v)
        per[lib] = {"time_us": {"median": m, "min": min(v), "max": max(v)}, "busbw": busbw(s, m),
                    "runs": len(v)}
    results.append({"size": s, "libraries": per})
doc = {"benchmark": "compare", "collective": "allreduce", "mode": "$mode", "ranks": n,
       "hosts": $nhosts if "$mode" == "emulated" else 1, "rate": "$rate" or None,
       "mtu": $mtu if "$mode" == "emulated" else None, "dtype": "$dtype", "op": "$op",
       "place": "$place", "repeats": $repeats, "iters": $iters, "warmup": $warmup,
       "variants": {k: v.split() for k, v in [$(for v in "${VNAMES[@]}"; do printf '("%s", "%s"), ' "$v" "${VENV[$v]}"; done)]},
       "units": {"size": "bytes", "time": "us", "bandwidth": "GB/s (1e9 bytes/s)"},
       "method": "time: median over runs of each run's median time (max over ranks); "
                 "busbw = size / time x 2(n-1)/n",
       "libraries": libs, "reference": libs[0], "ok": $([ "$failed" -eq 0 ] && echo True || echo False),
       "failures": [$(for f in "${failures[@]+"${failures[@]}"}"; do printf '"%s", ' "$f"; done)],
       "results": results}
json.dump(doc, open(out, "w"), indent=1)
PY
    "$ROOT/bench/run_header.py" finish "$work/header.json" "$work/data.json" "$json" ||
        die "cannot write $json"
fi
exit "$failed"
