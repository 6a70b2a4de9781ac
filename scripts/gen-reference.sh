#!/bin/sh
# gen-reference.sh - regenerate the generated reference pages from the code:
#   docs/reference/environment.md  from the registry of variables
#                                  (common/env_registry.def)
#   docs/reference/errors.md       from GW_STATUS_MAP (include/gradwire.h)
# both printed by `gradwire info`, which this builds first.
# Usage: scripts/gen-reference.sh [BUILD_DIR]   (default: build)
# test_info fails when a committed page differs from what this writes.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" --target gradwire_cli >/dev/null
mkdir -p "$root/docs/reference"
for page in environment:--env-markdown errors:--errors-markdown; do
    name=${page%%:*}
    out=$root/docs/reference/$name.md
    "$build/gradwire" info "${page#*:}" > "$out.tmp"
    mv "$out.tmp" "$out"
    echo "wrote docs/reference/$name.md"
done
