#!/usr/bin/env bash
# blame.sh - the README's Blame table, measured: each fault of
# tests/integration/worker_faults, a number of trials per transport, 4 ranks
# under `gradwire launch`, and for each: in how many trials every survivor's
# error names the rank at fault (gw_comm_culprit, or gw_comm_init_culprit
# for a failed join, as worker_faults prints it), and the range over the
# trials of the slowest survivor's time to its error (from the start of the
# call that failed, as worker_faults measures it: for `kill` that includes
# the time before the rank died).
#
#   bench/blame.sh [--build DIR] [--trials N] [MODE...]
#     MODE: killmid kill stop late chain absent connstop connkill gatherstop
#           (default: all); N scales the trials (default 1: the README's)
#
# A trial where a survivor prints nothing, or the launcher is killed by the
# time limit, counts as not named (and is listed). Exit status 0, or 2 for
# usage; the figures are a measurement, not a test (test_faults_tcp asserts).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build"
scale=1
modes=()
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build=$2; shift 2 ;;
        --trials) scale=$2; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "blame.sh: unknown option $1" >&2; exit 2 ;;
        *) modes+=("$1"); shift ;;
    esac
done
[ ${#modes[@]} -gt 0 ] || modes=(killmid kill stop late chain absent connstop connkill gatherstop)
launcher="$build/gradwire"
worker="$build/tests/worker_faults"
[ -x "$launcher" ] && [ -x "$worker" ] || { echo "blame.sh: build $build first (gradwire, tests/worker_faults)" >&2; exit 2; }

# MODE -> "victim trials timeout_ms transports"
spec() {
    case "$1" in
        killmid) echo "1 20 60000 tcp shm" ;;
        kill) echo "1 10 60000 tcp shm" ;;
        stop) echo "2 5 2000 tcp shm" ;;
        late) echo "2 5 2000 tcp shm" ;;
        chain) echo "2 3 8000 tcp shm" ;;
        absent) echo "3 3 2000 tcp shm" ;;
        connstop|connkill|gatherstop) echo "2 3 2000 tcp" ;;
        *) echo "" ;;
    esac
}

printf '%-10s %-4s %7s %18s %22s\n' mode tr trials "all name culprit" "slowest error (ms)"
for mode in "${modes[@]}"; do
    s=$(spec "$mode")
    [ -n "$s" ] || { echo "blame.sh: unknown mode $mode" >&2; exit 2; }
    read -r victim trials timeout transports <<<"$s"
    trials=$((trials * scale))
    for tr in $transports; do
        named=0
        lo="" hi=""
        misses=""
        for t in $(seq 1 "$trials"); do
            out=$(GW_TRANSPORT=$tr GW_TIMEOUT_MS=$timeout timeout 120 "$launcher" launch -n 4 -- \
                "$worker" "$mode" 2>/dev/null)
            # "[R] rank R: STATUS after T ms[ (init)], culprit K"
            read -r nsurv nok slow <<<"$(awk -v v="$victim" '
                match($0, /rank [0-9]+: GW_[A-Z_]+ after [0-9]+ ms( \(init\))?, culprit -?[0-9]+/) {
                    line = substr($0, RSTART, RLENGTH)
                    nw = split(line, w, /[ :,]+/)
                    r = w[2]; t = w[5]; k = w[nw]
                    if (r == v || seen[r]++) next
                    n++; if (k == v) ok++
                    if (t + 0 > slow) slow = t + 0
                }
                END { printf "%d %d %d\n", n, ok, slow }' <<<"$out")"
            if [ "$nsurv" = 3 ] && [ "$nok" = 3 ]; then
                named=$((named + 1))
            else
                misses="$misses $t($nok/$nsurv)"
            fi
            if [ "$nsurv" -gt 0 ]; then
                [ -z "$lo" ] || [ "$slow" -lt "$lo" ] && lo=$slow
                [ -z "$hi" ] || [ "$slow" -gt "$hi" ] && hi=$slow
            fi
        done
        printf '%-10s %-4s %7d %18s %22s%s\n' "$mode" "$tr" "$trials" "$named of $trials" \
            "${lo:-?}-${hi:-?}" "${misses:+  missed:$misses}"
    done
done
