#!/usr/bin/env bash
# Build the libFuzzer targets of tests/fuzz with clang into a build directory
# of their own, replay the kept crash inputs (tests/fuzz/regressions/<target>/),
# then fuzz each target for a bounded time from its seed corpus
# (tests/fuzz/corpus/<target>/) and print, per target, executions, exec/s,
# coverage and corpus size. Fails if any target crashes, leaks, runs out of
# memory or time, or breaks one of its properties; the input is saved.
#
#   tests/fuzz/run_fuzz.sh [--seconds N] [--jobs N] [--build DIR] [--seeds] [TARGET...]
#     --seconds N  fuzzing time per target (default 15, or $GW_FUZZ_SECONDS)
#     --jobs N     targets fuzzed at once (default 1; 0: one per core); each
#                  target still gets its N seconds, on a core of its own
#     --build DIR  build directory (default build-fuzz in the source tree)
#     --seeds      rewrite the seed corpora with make_seeds first
#     --build-only build the targets and stop (scripts/test.sh builds them
#                  in the background this way; the build holds a lock, so
#                  a run that starts meanwhile waits for it, then finds the
#                  targets up to date)
#     TARGET       fuzz_tcp_wire, fuzz_env, ... (default: every fuzz_*.c)
#
# Exits 77 (ctest: skipped, with the reason) only when clang or its libFuzzer
# runtime is missing (Debian: clang and libclang-rt-14-dev, which
# scripts/install-deps.sh installs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
seconds=${GW_FUZZ_SECONDS:-15}
build="$src/build-fuzz"
seeds=0
build_only=0
jobs=1
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --seeds) seeds=1; shift ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    -*) echo "run_fuzz: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
    esac
done
case "$seconds" in
'' | *[!0-9]*) echo "run_fuzz: --seconds wants a whole number of seconds, not '$seconds'" >&2; exit 2 ;;
esac
case "$jobs" in
'' | *[!0-9]*) echo "run_fuzz: --jobs wants a whole number (0: one per core), not '$jobs'" >&2; exit 2 ;;
esac
[ "$jobs" -eq 0 ] && jobs=$(nproc)

cc=${GW_FUZZ_CC:-}
if [ -z "$cc" ]; then
    for c in clang clang-14 clang-15 clang-16; do
        if command -v "$c" >/dev/null; then cc=$c; break; fi
    done
fi
if [ -z "$cc" ]; then
    echo "run_fuzz: SKIP: clang is not installed (scripts/install-deps.sh installs it)"
    exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; return (int)(n & 0); }\n' >"$probe/p.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2>"$probe/err"; then
    echo "run_fuzz: SKIP: $cc cannot link libFuzzer with ASan/UBSan (libclang-rt-14-dev missing?):"
    sed 's/^/  /' "$probe/err" | head -5
    exit 77
fi

# Clang's warnings are not gcc's: this build is not where -Werror is enforced.
mkdir -p "$build"
exec 8>"$build/.run_fuzz.lock"
flock 8
CC="$cc" cmake -S "$src" -B "$build" -DGW_FUZZ=ON -DGW_BUILD_TESTS=OFF -DGW_WERROR=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$probe/cmake.log" 2>&1 || { cat "$probe/cmake.log"; exit 1; }
if ! cmake --build "$build" -j"$(nproc)" --target gw_fuzzers make_seeds >"$probe/build.log" 2>&1; then
    grep -E 'error|Error' "$probe/build.log" | head -30
    echo "run_fuzz: the build failed (log above)" >&2
    exit 1
fi
exec 8>&-
[ "$build_only" = 1 ] && exit 0
bin="$build/tests/fuzz"
if [ ${#targets[@]} -eq 0 ]; then
    for f in "$here"/fuzz_*.c; do targets+=("$(basename "$f" .c)"); done
fi
if [ "$seeds" = 1 ]; then
    "$bin/make_seeds" "$here/corpus"
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
art="$build/fuzz-artifacts"
rm -rf "$art" # so that what is there after a run is that run's
mkdir -p "$art"
# fuzz_one TARGET: replay its kept inputs, fuzz it, and leave its row of the
# table in $art/TARGET.row and, when it failed, what failed in
# $art/TARGET.failed (the targets run --jobs at a time, each on its own).
fuzz_one() {
    local t=$1 exe="$bin/$1" reg nreg=0 work log rc=0 execs rate last cov corp result crash
    # The kept crash inputs first: each must now pass.
    reg="$here/regressions/$t"
    if [ -d "$reg" ] && [ -n "$(ls -A "$reg")" ]; then
        nreg=$(find "$reg" -type f | wc -l)
        if ! "$exe" -timeout=10 "$reg"/* >"$art/$t.replay.log" 2>&1; then
            echo "run_fuzz: $t fails on a kept regression input again:" >&2
            grep -E 'Running:|ERROR|SUMMARY|property failed|runtime error' "$art/$t.replay.log" | head -20 >&2
            echo "$t (regression)" >>"$art/$t.failed"
        fi
    fi
    # Fuzz into a scratch corpus seeded from the committed one, which stays as it is.
    work="$build/fuzz-corpus/$t"
    mkdir -p "$work"
    log="$art/$t.log"
    "$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -close_fd_mask=2 -error_exitcode=99 \
        -print_final_stats=1 -artifact_prefix="$art/$t-" "$work" "$here/corpus/$t" \
        >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<<"$last")
    result=ok
    if [ "$rc" != 0 ]; then
        result="FAILED (rc $rc)"
        echo "$t" >>"$art/$t.failed"
        crash=$(grep -o "Test unit written to .*" "$log" | tail -1 | sed 's/Test unit written to //')
        # The report, replayed with stderr open so that the sanitizer's and
        # the property's messages show, written whole once it is complete.
        {
            echo "run_fuzz: $t failed; input saved as ${crash:-?}; the report:"
            if [ -n "$crash" ]; then
                "$exe" -timeout=10 "$crash" 2>&1 | grep -vE '^INFO:|^ *NEW_FUNC' | head -40 || true
            else
                tail -30 "$log"
            fi
        } >"$art/$t.report" 2>&1
        cat "$art/$t.report" >&2
    fi
    printf '%-22s %12s %10s %6s %14s %5s  %s\n' "$t" "${execs:-?}" "${rate:-?}" \
        "${cov:-?}" "${corp:-?}" "$nreg" "$result" >"$art/$t.row"
}

for t in "${targets[@]}"; do
    if [ ! -x "$bin/$t" ]; then
        echo "run_fuzz: no target $t (known: $(cd "$bin" && ls fuzz_* | tr '\n' ' '))" >&2
        exit 2
    fi
done
running=0
for t in "${targets[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    fuzz_one "$t" &
    running=$((running + 1))
done
wait
failed=()
rows=()
for t in "${targets[@]}"; do
    [ -f "$art/$t.failed" ] && mapfile -t -O "${#failed[@]}" failed <"$art/$t.failed"
    if [ -f "$art/$t.row" ]; then
        rows+=("$(cat "$art/$t.row")")
    else
        failed+=("$t (no result: its run stopped)")
        rows+=("$(printf '%-22s  no result: its run stopped' "$t")")
    fi
done

printf '\nfuzzing, %s s per target (clang %s, -fsanitize=fuzzer,address,undefined):\n' "$seconds" \
    "$("$cc" -dumpversion)"
printf '%-22s %12s %10s %6s %14s %5s  %s\n' target executions exec/s cov corpus/bytes kept result
for r in "${rows[@]}"; do echo "$r"; done
if [ ${#failed[@]} -gt 0 ]; then
    echo "run_fuzz: FAILED: ${failed[*]} (inputs and logs in $art)" >&2
    exit 1
fi
