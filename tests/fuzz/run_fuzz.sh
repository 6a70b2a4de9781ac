#!/usr/bin/env bash
# Build the libFuzzer targets of tests/fuzz with clang into a build directory
# of their own, replay the kept crash inputs (tests/fuzz/regressions/<target>/),
# then fuzz each target for a bounded time from its seed corpus
# (tests/fuzz/corpus/<target>/) and print, per target, executions, exec/s,
# coverage and corpus size. Fails if any target crashes, leaks, runs out of
# memory or time, or breaks one of its properties; the input is saved.
#
#   tests/fuzz/run_fuzz.sh [--seconds N] [--build DIR] [--seeds] [TARGET...]
#     --seconds N  fuzzing time per target (default 15, or $GW_FUZZ_SECONDS)
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
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --seeds) seeds=1; shift ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    -*) echo "run_fuzz: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
    esac
done
case "$seconds" in
'' | *[!0-9]*) echo "run_fuzz: --seconds wants a whole number of seconds, not '$seconds'" >&2; exit 2 ;;
esac

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
failed=()
rows=()
for t in "${targets[@]}"; do
    exe="$bin/$t"
    if [ ! -x "$exe" ]; then
        echo "run_fuzz: no target $t (known: $(cd "$bin" && ls fuzz_* | tr '\n' ' '))" >&2
        exit 2
    fi
    # The kept crash inputs first: each must now pass.
    reg="$here/regressions/$t"
    nreg=0
    if [ -d "$reg" ] && [ -n "$(ls -A "$reg")" ]; then
        nreg=$(find "$reg" -type f | wc -l)
        if ! "$exe" -timeout=10 "$reg"/* >"$art/$t.replay.log" 2>&1; then
            echo "run_fuzz: $t fails on a kept regression input again:" >&2
            grep -E 'Running:|ERROR|SUMMARY|property failed|runtime error' "$art/$t.replay.log" | head -20 >&2
            failed+=("$t (regression)")
        fi
    fi
    # Fuzz into a scratch corpus seeded from the committed one, which stays as it is.
    work="$build/fuzz-corpus/$t"
    mkdir -p "$work"
    log="$art/$t.log"
    rc=0
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
        failed+=("$t")
        crash=$(grep -o "Test unit written to .*" "$log" | tail -1 | sed 's/Test unit written to //')
        echo "run_fuzz: $t failed; input saved as ${crash:-?}; the report:" >&2
        # Replayed with stderr open, so that the sanitizer's and the
        # property's messages show.
        if [ -n "$crash" ]; then
            "$exe" -timeout=10 "$crash" 2>&1 | grep -vE '^INFO:|^ *NEW_FUNC' | head -40 >&2 || true
        else
            tail -30 "$log" >&2
        fi
    fi
    rows+=("$(printf '%-22s %12s %10s %6s %14s %5s  %s' "$t" "${execs:-?}" "${rate:-?}" \
        "${cov:-?}" "${corp:-?}" "$nreg" "$result")")
done

printf '\nfuzzing, %s s per target (clang %s, -fsanitize=fuzzer,address,undefined):\n' "$seconds" \
    "$("$cc" -dumpversion)"
printf '%-22s %12s %10s %6s %14s %5s  %s\n' target executions exec/s cov corpus/bytes kept result
for r in "${rows[@]}"; do echo "$r"; done
if [ ${#failed[@]} -gt 0 ]; then
    echo "run_fuzz: FAILED: ${failed[*]} (inputs and logs in $art)" >&2
    exit 1
fi
