#!/usr/bin/env bash
# The whole test suite: install dependencies, check the layout of the
# sources (.clang-format), build twice (optimised, and
# with AddressSanitizer + UndefinedBehaviorSanitizer), run every test in both;
# then a ThreadSanitizer build of the multi-threaded paths.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

# Layout first: a file that differs from .clang-format fails the suite before
# anything is built (scripts/format.sh fixes it).
./scripts/format.sh --check

run_suite() {
    local dir="$1"
    shift
    echo "=== build $dir ($*)"
    ./scripts/build.sh "$dir" "$@"
    echo "=== test $dir"
    (cd "$dir" && ctest --output-on-failure --timeout 1200)
}

start=$(date +%s)
run_suite build -DCMAKE_BUILD_TYPE=RelWithDebInfo
# detect_leaks: the library frees what it allocates; any leak is a bug.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGW_SANITIZE=ON
# ThreadSanitizer: the library, tools and workers (Criterion cannot run under
# it), tested by tests/integration/tsan_threads.sh with several threads on one
# communicator: progress thread, watchdog abort, trainer overlap.
run_suite build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGW_SANITIZE_THREAD=ON
echo "=== whole suite passed in $(( $(date +%s) - start )) s"
