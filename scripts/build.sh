#!/usr/bin/env bash
# Configure and build gradwire into build/ (or $1), warnings as errors.
# Extra arguments go to cmake, e.g. scripts/build.sh build-asan -DGW_SANITIZE=ON
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build}"
shift || true
cmake -S . -B "$dir" -DGW_WERROR=ON "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
