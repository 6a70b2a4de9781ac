#!/usr/bin/env bash
# criterion_ctest.sh EXE [ARGS...] - runs one Criterion test executable for
# ctest and turns "every test passed, but some were skipped" into exit 77,
# which tests/CMakeLists.txt declares as SKIP_RETURN_CODE, so that ctest
# says "Skipped" instead of "Passed".
#
# Criterion itself exits 0 when tests skip (even when all of them do, with
# "Tested: 0"), and ctest's SKIP_REGULAR_EXPRESSION would also mark a failing
# run as skipped, so the decision is taken here: a failure stays a failure,
# whatever else the output says. Each skipped test is printed on a line
# "gw-skip: SUITE::NAME: REASON", which scripts/test.sh collects from ctest's
# log to list the skips at the end of the suite.
set -uo pipefail
exe="$1"
shift
out=$(mktemp "${TMPDIR:-/tmp}/gw-criterion.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
# --verbose is what makes Criterion print a "[SKIP] suite::name: reason" line.
"$exe" --verbose "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
    # 77 is reserved for "skipped": a crash that happened to exit 77 must
    # still be reported as a failure.
    [ "$rc" -eq 77 ] && rc=1
    exit "$rc"
fi
if ! grep -q 'Synthesis: Tested:' "$out"; then
    echo "gw-fail: $(basename "$exe") exited 0 without Criterion's synthesis line"
    exit 1
fi
skips=$(sed -n 's/^\[SKIP\] \(.*\)$/\1/p' "$out")
if [ -n "$skips" ]; then
    echo "$skips" | sed 's/^/gw-skip: /'
    echo "$(basename "$exe"): $(echo "$skips" | wc -l) test(s) skipped: reported to ctest as Skipped"
    exit 77
fi
exit 0
