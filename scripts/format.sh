#!/usr/bin/env bash
# Layout of every C and C++ file, as .clang-format says (clang-format 14,
# Debian 12's package).
#   scripts/format.sh           rewrite the files in place
#   scripts/format.sh --check   change nothing; list the files that differ
#                               and exit 1 if any does (scripts/test.sh, CI)
set -euo pipefail
cd "$(dirname "$0")/.."

mode=fix
case "${1:-}" in
"") ;;
--check) mode=check ;;
*) echo "usage: scripts/format.sh [--check]" >&2; exit 2 ;;
esac

if ! command -v clang-format >/dev/null; then
    echo "format: clang-format is not installed (scripts/install-deps.sh installs it)" >&2
    exit 2
fi

# The tracked files in a checkout; every source file below the tree otherwise
# (an unpacked release tarball). Build directories are never formatted.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files -- '*.c' '*.h' '*.cc')
else
    mapfile -t files < <(find . -path './build*' -prune -o -type f \
        \( -name '*.c' -o -name '*.h' -o -name '*.cc' \) -print | sort)
fi

if [ "$mode" = fix ]; then
    clang-format -i -- "${files[@]}"
    exit 0
fi

# One clang-format for every file (a process per file took minutes of CI on
# a loaded machine): each difference is reported as "FILE:LINE:COL: error:
# code should be clang-formatted", from which the files are listed.
bad=()
out=$(clang-format --dry-run --Werror -- "${files[@]}" 2>&1) && status=0 || status=$?
if [ $status -ne 0 ]; then
    mapfile -t bad < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' <<<"$out" | sort -u)
    # Anything else clang-format said (an unreadable file, a bad
    # .clang-format) fails the check too, in its own words.
    if [ ${#bad[@]} -eq 0 ]; then
        echo "format: clang-format failed (status $status):" >&2
        printf '%s\n' "$out" | head -20 >&2
        exit 1
    fi
fi
if [ ${#bad[@]} -gt 0 ]; then
    echo "format: ${#bad[@]} file(s) differ from .clang-format ($(clang-format --version)):" >&2
    printf '  %s\n' "${bad[@]}" >&2
    echo "format: run scripts/format.sh to fix them" >&2
    exit 1
fi
echo "format: ${#files[@]} files follow .clang-format"
