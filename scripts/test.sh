#!/usr/bin/env bash
# The whole test suite: install dependencies, check the layout of the
# sources (.clang-format), build twice (optimised, and with
# AddressSanitizer + UndefinedBehaviorSanitizer), run every test in the
# optimised build and, in the sanitized one, what the sanitizers add over it
# (tests/CMakeLists.txt: GW_OPTIMISED_ONLY); then a ThreadSanitizer build of
# the multi-threaded paths.
#
# It ends, passed or failed, with the list of every test that ctest reported
# as skipped in every stage, each with the reason the test gave, and, when a
# stage failed, the lines each failed test printed about its failure. In CI
# (CI or GW_CI set and not "0" or "false"), where the suite runs as root with
# the Soft-RoCE VM available, a skip fails the suite, except a GPU test, a
# test of the CUDA plugin in the stages built without it, and the verbs
# tests that need an RDMA device on the host (their reason says "run under
# scripts/rxe-vm") when rxe_vm_test, which runs them in the VM,
# passed in the sanitized stage (the one stage that runs it: see
# tests/CMakeLists.txt).
#
# Each stage runs ctest with one job per core (GW_TEST_JOBS overrides):
# tests/CMakeLists.txt says which tests share the cores and which run alone.
set -euo pipefail
cd "$(dirname "$0")/.."

skips=$(mktemp "${TMPDIR:-/tmp}/gw-skips.XXXXXX")
in_ci=0
case "${GW_CI:-${CI:-}}" in "" | 0 | false) ;; *) in_ci=1 ;; esac

# list_skips DIR: append "DIR: TEST: REASON" to $skips for every test the
# last ctest run in DIR reported as skipped. The reasons are the lines the
# tests print: "gw-skip: " (tests/support/criterion_ctest.sh, one per
# Criterion test), "skipped: " or "SKIP: " (the script tests).
list_skips() {
    local dir="$1" name log="$1/Testing/Temporary/LastTest.log"
    for name in $(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$dir/ctest.out"); do
        local why
        why=$(awk -v t="$name" '
            $0 ~ "^[0-9]+/[0-9]+ Testing: " t "$" { inside = 1; next }
            inside && /^<end of output>/ { exit }
            inside && /^(gw-skip|skipped): / { sub(/^(gw-skip|skipped): /, ""); print; found = 1 }
            inside && /^SKIP: / { sub(/^SKIP: /, ""); alt = alt $0 "\n" }
            END { if (!found) printf "%s", alt }' "$log")
        [ -n "$why" ] || why="(the test printed no reason)"
        while IFS= read -r line; do
            [ -n "$line" ] && printf '%s: %s: %s\n' "$dir" "$name" "$line" >>"$skips"
        done <<<"$why"
    done
}

# A skip CI may accept: see the opening comment.
allowed_in_ci() { # DIR TEST REASON
    case "$3" in
    *GPU* | *gpu*) return 0 ;;
    *"no CUDA part in this build"*)
        # The sanitizer stages build without CUDA on purpose (below); the
        # optimised stage builds the plugin and must run what it can of it.
        [ "$1" != build ] && return 0
        return 1
        ;;
    *"run under scripts/rxe-vm"*)
        # An explicit status: a bare return in a trap handler (this runs
        # in the EXIT trap) would return the status from before the trap.
        if grep -Eq '^[[:space:]]*[0-9]+/[0-9]+ Test +#[0-9]+: rxe_vm_test \.+ +Passed' \
            build-asan/ctest.out 2>/dev/null; then
            return 0
        fi
        return 1
        ;;
    esac
    return 1
}

# report_failures: for every test a stage's ctest reported failed, the lines
# of its output that say what failed (FAIL, Assertion, error), at most 12
# each, so that the end of the suite's output, which is what a CI page
# shows, says why and not only which.
report_failures() {
    local dir name log
    for dir in build build-asan build-tsan; do
        [ -f "$dir/ctest.out" ] || continue
        log="$dir/Testing/Temporary/LastTest.log"
        for name in $(sed -n '/^The following tests FAILED:/,$ s/^[[:space:]]*[0-9]* - \([^ ]*\) (.*)$/\1/p' \
            "$dir/ctest.out"); do
            echo "=== failed: $dir: $name"
            [ -f "$log" ] || continue
            awk -v t="$name" '
                $0 ~ "^[0-9]+/[0-9]+ Testing: " t "$" { inside = 1; next }
                inside && /^<end of output>/ { exit }
                inside && /FAIL|Assertion|[Ee]rror|failed|timed out|hung/ && n < 12 {
                    print "   " substr($0, 1, 300); n++ }' "$log"
        done
    done
}

report_skips() {
    local rc=$? bad=0 dir name why
    echo "=== skipped tests, every stage, with the reasons they gave"
    if [ -s "$skips" ]; then
        sed 's/^/   /' "$skips"
    else
        echo "   none"
    fi
    if [ $in_ci -eq 1 ]; then
        while IFS= read -r line; do
            dir=${line%%: *}
            name=${line#*: }
            why=${name#*: }
            name=${name%%: *}
            if ! allowed_in_ci "$dir" "$name" "$why"; then
                echo "=== CI: $dir: $name may not skip here: $why"
                bad=1
            fi
        done <"$skips"
    fi
    rm -f "$skips"
    [ $rc -ne 0 ] && report_failures
    if [ $rc -eq 0 ] && [ $bad -ne 0 ]; then
        echo "=== the suite fails: in CI nothing but GPU tests may skip"
        exit 1
    fi
    exit $rc
}
trap report_skips EXIT

./scripts/install-deps.sh test

# Layout first: a file that differs from .clang-format fails the suite before
# anything is built (scripts/format.sh fixes it).
./scripts/format.sh --check

run_suite() {
    local dir="$1" rc=0 t0 t1
    shift
    t0=$(date +%s)
    echo "=== build $dir ($*)"
    ./scripts/build.sh "$dir" "$@"
    t1=$(date +%s)
    echo "=== test $dir (built in $((t1 - t0)) s)"
    (cd "$dir" && ctest --output-on-failure --timeout 1200 -j"$jobs") 2>&1 | tee "$dir/ctest.out" || rc=$?
    list_skips "$dir"
    echo "=== $dir: tests took $(($(date +%s) - t1)) s"
    return $rc
}

jobs=${GW_TEST_JOBS:-$(nproc)}
start=$(date +%s)
# The optimised stage is a Release build with the CUDA plugin, and the TSan
# stage a Release build without it: with -Werror (scripts/build.sh), the two
# are the Release builds that must pass with and without CUDA, built once.
run_suite build -DCMAKE_BUILD_TYPE=Release
# The sanitizer stages build without the CUDA plugin (GW_CUDA=OFF): the
# optimised stage built it, with every kernel architecture, and ran what a
# machine without a GPU can run of it; so the suite also proves that the
# project builds, warnings as errors, without CUDA. The sanitized stage runs
# what the sanitizers add over the optimised one (tests/CMakeLists.txt,
# GW_OPTIMISED_ONLY).
# detect_leaks: the library frees what it allocates; any leak is a bug.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGW_SANITIZE=ON -DGW_CUDA=OFF
# ThreadSanitizer: the library, tools and workers (Criterion cannot run under
# it), tested by tests/integration/tsan_threads.sh with several threads on one
# communicator: progress thread, watchdog abort, trainer overlap.
run_suite build-tsan -DCMAKE_BUILD_TYPE=Release -DGW_SANITIZE_THREAD=ON -DGW_CUDA=OFF
echo "=== whole suite passed in $(( $(date +%s) - start )) s"
