#!/usr/bin/env bash
# results.sh - measure the campaigns behind docs/results and render the pages.
#
# Every figure in the documentation comes from here: each campaign runs a
# benchmark script of bench/ that writes JSON with a run header (commit,
# date, host, cores, load at start and end, command, peers' versions:
# bench/run_header.py) into docs/results/data/CAMPAIGN.json, and
# scripts/render_results.py turns that JSON into docs/results/CAMPAIGN.md
# and its PNG plots (gnuplot). Nobody types a figure; history is git's.
#
#   scripts/results.sh [options] [CAMPAIGN...]   (default: every wired one)
#     --list          the campaigns, what each runs and what each needs
#     --render-only   render the committed JSON again, run nothing
#     --build DIR     build directory (default: ./build; needs gradwire,
#                     gradwire-bench and the peer drivers of bench/peers)
#     --data DIR      where the JSON goes (default docs/results/data)
#     --out DIR       where pages and plots go (default docs/results)
# Before each campaign it waits, at most GW_RESULTS_SETTLE_S seconds (120),
# for the 1-minute load average to fall below the cores (settle, below).
# Exit status: 0, 1 when a campaign failed (the others still run), 2 usage.
set -uo pipefail

PROG=results.sh
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# Paths relative to the repository root (where the campaigns run), so that
# the command in a page's run header holds no one's home directory.
build=build
data=docs/results/data
out=docs/results
render_only=0
list=0

# name|needs|command (run from the repository root; $B is the build
# directory, $J the JSON file). needs: "-", "root" (network namespaces,
# cgroups) or "vm" (scripts/rxe-vm boots QEMU VMs). A campaign whose
# command exits 77 could not run here (it says why): it is skipped and its
# committed JSON stays. The parameters are small, so that every campaign
# finishes in minutes on a 2-core machine; the scripts' own defaults
# measure more. The comparisons name their peers: left to its default,
# compare.sh runs the peers the build has, and a build without them
# (configured before `scripts/install-deps.sh peers`) would replace a page
# of ratios with gradwire alone; named, a missing peer fails the campaign
# and its committed page stays.
CAMPAIGNS=(
    'compare-local|-|bench/compare.sh --local 4 -b 16K -e 16M -r 3 -n 8 -w 2 --peers gloo_ring_chunked,gloo_halving_doubling,mpi_tcp,mpi_vader --build "$B" --json "$J"'
    'shm|-|bench/compare.sh --local 4 -b 16K -e 64M -r 3 -n 8 -w 2 --variant "gradwire GW_TRANSPORT=shm" --peers mpi_vader --build "$B" --json "$J"'
    'sweep|-|bench/sweep.sh -n 4 -b 4K -e 16M -f 4 --iters 20 --reps 3 --build "$B" --json "$J"'
    'compression|-|"$B/gradwire" launch -n 4 -- "$B/gradwire-bench" compress -b 256K -e 16M -f 4 -n 5 -w 1 --solo_iters 0 --json "$J"'
    'compare-emulated|root|bench/compare.sh --emulated 4 --rate 2gbit -b 64K -e 16M -r 2 -n 5 -w 2 --peers gloo_ring_chunked,gloo_halving_doubling,mpi_tcp --build "$B" --json "$J"'
    'scale|-|bench/scale.sh --json "$J" "$B" "4 8 16 32" 1'
    'train-accuracy|-|bench/train_accuracy.sh "$B" --epochs 1 --codec-warmup-epochs 0 --json "$J"'
    'elastic|-|bench/train_elastic.sh --json "$J" "$B" 2 128'
    'zero|-|bench/train_zero.sh "$B" --epochs 1 --json "$J"'
    'stragglers|root|bench/stragglers.sh --build "$B" --epochs 1 --json "$J"'
    'fusion|-|bench/fusion.sh --ranks 2 --iters 30 --json "$J" "$B"'
    'pytorch|-|python/bench/torch_compare.sh --local 4 --json "$J" "$B" -- allreduce --sizes 1K,16K,256K,1M,4M --reps 3 --budget 0.1'
    'acceptance|root|bench/acceptance.sh --build "$B" --hosts "3 6" --rate 1gbit --json "$J"'
    'flight-recorder|-|bench/compare.sh --local 2 -b 8 -e 1K -r 7 -n 5000 -w 500 --peers none --variant "fr-off GW_TRANSPORT=shm GW_FR_ENTRIES=0" --variant "fr-on GW_TRANSPORT=shm GW_FR_ENTRIES=256" --build "$B" --json "$J"'
    'torch-suite|-|python/bench/torch_suite.sh "$B" --json "$J"'
    'latency|-|bench/latency.sh -b 8 -e 64K -n 300 -w 30 --reps 2 --build "$B" --json "$J"'
    'soft-roce|vm|bench/soft_roce.sh --build "$B" --rounds 3 --sizes "262144 1048576" --mib 2 --json "$J"'
)
NOT_WIRED=()

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --list) list=1; shift ;;
        --render-only) render_only=1; shift ;;
        --build) [ $# -ge 2 ] || { echo "$PROG: --build needs a directory" >&2; exit 2; }; build=$(realpath -m "$2"); shift 2 ;;
        --data) [ $# -ge 2 ] || { echo "$PROG: --data needs a directory" >&2; exit 2; }; data=$(realpath -m "$2"); shift 2 ;;
        --out) [ $# -ge 2 ] || { echo "$PROG: --out needs a directory" >&2; exit 2; }; out=$(realpath -m "$2"); shift 2 ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "$PROG: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) break ;;
    esac
done

cd "$ROOT" || exit 1
field() { cut -d'|' -f"$2" <<<"$1"; }

if [ "$list" -eq 1 ]; then
    for c in "${CAMPAIGNS[@]}"; do
        needs=$(field "$c" 2)
        printf '%-18s wired%s: %s\n' "$(field "$c" 1)" "$([ "$needs" = - ] || echo " (needs $needs)")" \
            "$(field "$c" 3)"
    done
    for c in ${NOT_WIRED[@]+"${NOT_WIRED[@]}"}; do
        printf '%-18s not wired yet: %s\n' "$(field "$c" 1)" "$(field "$c" 2)"
    done
    exit 0
fi

# Rendering into the repository's own pages also writes the README's
# headline results (scripts/render_results.py --readme).
readme=()
[ "$out" = docs/results ] && readme=(--readme README.md)

# The campaigns asked for: each must be a wired one.
want=("$@")
if [ ${#want[@]} -eq 0 ]; then
    if [ "$render_only" -eq 1 ]; then
        exec /usr/bin/python3 scripts/render_results.py --data "$data" --out "$out" "${readme[@]}"
    fi
    for c in "${CAMPAIGNS[@]}"; do want+=("$(field "$c" 1)"); done
fi
sel=()
for w in "${want[@]}"; do
    found=""
    for c in "${CAMPAIGNS[@]}"; do [ "$(field "$c" 1)" = "$w" ] && found=$c; done
    if [ -z "$found" ]; then
        for c in ${NOT_WIRED[@]+"${NOT_WIRED[@]}"}; do
            [ "$(field "$c" 1)" = "$w" ] && { echo "$PROG: campaign '$w' is not wired yet: $(field "$c" 2)" >&2; exit 2; }
        done
        echo "$PROG: no campaign '$w' (see --list)" >&2
        exit 2
    fi
    sel+=("$found")
done

if [ "$render_only" -eq 1 ]; then
    names=()
    for c in "${sel[@]}"; do names+=("$(field "$c" 1)"); done
    exec /usr/bin/python3 scripts/render_results.py --data "$data" --out "$out" "${readme[@]}" "${names[@]}"
fi

# settle: wait, at most GW_RESULTS_SETTLE_S seconds (default 120), until
# the 1-minute load average is below the cores. A campaign's run header
# records the load average at its start as what else was running, and a
# page whose start load exceeds the cores says its figures are indicative
# only; straight after a campaign of 4 ranks on 2 cores, the average
# still holds that campaign's ranks for a minute, though nothing runs. A
# machine that stays busy does not settle: the campaign then starts anyway
# and its page says so.
settle() {
    local cores limit=${GW_RESULTS_SETTLE_S:-120} waited=0 l
    cores=$(getconf _NPROCESSORS_ONLN)
    [[ "$limit" =~ ^[0-9]+$ ]] || { echo "$PROG: GW_RESULTS_SETTLE_S must be a number of seconds, not '$limit'" >&2; exit 2; }
    while :; do
        l=$(cut -d' ' -f1 /proc/loadavg)
        awk -v l="$l" -v c="$cores" 'BEGIN { exit !(l < c) }' && break
        if [ "$waited" -ge "$limit" ]; then
            echo "$PROG: the load average is still $l on $cores cores after ${waited} s: measuring anyway (the page will say the machine was busy)" >&2
            break
        fi
        sleep 5
        waited=$((waited + 5))
    done
    [ "$waited" -gt 0 ] && echo "$PROG: waited ${waited} s for the load average to settle (now $l on $cores cores)" >&2
    return 0
}

mkdir -p "$data"
failed=0
for c in "${sel[@]}"; do
    name=$(field "$c" 1) needs=$(field "$c" 2) cmd=$(field "$c" 3)
    if [ "$needs" = root ] && [ "$(id -u)" -ne 0 ]; then
        echo "$PROG: $name: skipped: needs root (network namespaces); its committed JSON stays" >&2
        continue
    fi
    settle
    # The committed JSON is kept aside: a run that writes none gets it back.
    json="$data/$name.json"
    keep="$data/.$name.json.keep"
    rm -f "$keep"
    [ -f "$json" ] && mv "$json" "$keep"
    t0=$(date +%s)
    echo "== $name: $cmd" >&2
    B=$build J=$json bash -c "$cmd"
    rc=$?
    t1=$(date +%s)
    echo "== $name: exit $rc after $((t1 - t0)) s" >&2
    if [ "$rc" -eq 77 ]; then
        rm -f "$json"
        [ -f "$keep" ] && mv "$keep" "$json"
        echo "$PROG: $name: skipped here (its output says why); its committed JSON stays" >&2
        continue
    fi
    if [ -s "$json" ] && /usr/bin/python3 bench/run_header.py check "$json"; then
        # A run that finished with wrong elements still wrote its JSON
        # ("ok": false); the page says so.
        rm -f "$keep"
        /usr/bin/python3 scripts/render_results.py --data "$data" --out "$out" "${readme[@]}" "$name" || failed=1
    else
        rm -f "$json"
        [ -f "$keep" ] && mv "$keep" "$json"
        echo "$PROG: $name: no JSON written; the committed page stays" >&2
        failed=1
    fi
    [ "$rc" -eq 0 ] || failed=1
done
exit "$failed"
