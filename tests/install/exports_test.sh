#!/usr/bin/env bash
# libgradwire.so exports exactly the public API: every function gradwire.h
# declares with GW_API, and nothing else (no gw__ internals, no resolvers of
# run-time dispatched kernels, no helper of a dependency), each under the
# version node GRADWIRE_0 (scripts/libgradwire.map).
# Usage: exports_test.sh LIBRARY HEADER
set -euo pipefail
lib="$1"
header="$2"
command -v nm >/dev/null || { echo "SKIP: nm (binutils) is not installed"; exit 77; }
tmp=$(mktemp -d /tmp/gw-exports-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# Defined dynamic symbols, the version node's own absolute symbol left out.
nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' | sort >"$tmp/exported"
sed 's/@.*//' "$tmp/exported" | sort -u >"$tmp/names"
grep -o 'GW_API[^(]*\bgw_[a-z0-9_]*[[:space:]]*(' "$header" |
    grep -o 'gw_[a-z0-9_]*[[:space:]]*($' | tr -d ' (' | sort -u >"$tmp/declared"
fail=0
if ! [ -s "$tmp/declared" ]; then
    echo "FAIL: found no GW_API declarations in $header"
    exit 1
fi
extra=$(comm -23 "$tmp/names" "$tmp/declared")
missing=$(comm -13 "$tmp/names" "$tmp/declared")
if [ -n "$extra" ]; then
    echo "FAIL: exported but not declared in gradwire.h:"
    sed 's/^/   /' <<<"$extra"
    fail=1
fi
if [ -n "$missing" ]; then
    echo "FAIL: declared in gradwire.h but not exported:"
    sed 's/^/   /' <<<"$missing"
    fail=1
fi
unversioned=$(grep -v '@@GRADWIRE_0$' "$tmp/exported" || true)
if [ -n "$unversioned" ]; then
    echo "FAIL: exported without the version node GRADWIRE_0:"
    sed 's/^/   /' <<<"$unversioned"
    fail=1
fi
[ $fail -eq 0 ] || exit 1
echo "exports test: $(wc -l <"$tmp/declared") functions exported, all declared, nothing else"
