#!/usr/bin/env bash
# The CUDA part's build switch and what it may link (README: CUDA device
# buffers): libgradwire.so never needs a CUDA library (only the plugin
# libgradwire-cuda.so does, and it exports one function); configuring with
# -DGW_CUDA=ON where no toolkit is found fails naming the toolkit, AUTO
# then configures without the plugin, and a bad value is refused. "No
# toolkit" is made with CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit, since this
# machine has one.
# Usage: cuda_build_test.sh SOURCE_DIR LIBGRADWIRE [PLUGIN]
set -uo pipefail
src="$1"
lib="$2"
plugin="${3:-}"
command -v readelf >/dev/null || { echo "SKIP: readelf (binutils) is not installed"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
if readelf -d "$lib" | grep -Ei 'NEEDED.*(cuda|cublas|nccl)'; then
    fail "$lib links a CUDA library: the CUDA part must stay in the plugin"
fi
if [ -n "$plugin" ] && [ -f "$plugin" ]; then
    readelf -d "$plugin" | grep -q 'NEEDED.*libcudart' || fail "$plugin does not link libcudart"
    exported=$(nm -D --defined-only "$plugin" | awk '$2 == "T" { print $3 }')
    [ "$exported" = "gw_cuda_plugin_open" ] || fail "$plugin exports: $exported"
fi
tmp=$(mktemp -d /tmp/gw-cudabuild-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if cmake -S "$src" -B "$tmp/on" -DGW_CUDA=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON \
    -DGW_BUILD_TESTS=OFF -DGW_BUILD_PYTHON=OFF >"$tmp/on.log" 2>&1; then
    fail "GW_CUDA=ON configured without a CUDA toolkit"
fi
grep -q "GW_CUDA=ON but no CUDA toolkit was found" "$tmp/on.log" ||
    { cat "$tmp/on.log"; fail "GW_CUDA=ON without a toolkit did not say why"; }
cmake -S "$src" -B "$tmp/auto" -DGW_CUDA=AUTO -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON \
    -DGW_BUILD_TESTS=OFF -DGW_BUILD_PYTHON=OFF >"$tmp/auto.log" 2>&1 ||
    { cat "$tmp/auto.log"; fail "GW_CUDA=AUTO without a toolkit did not configure"; }
grep -q "built without the CUDA plugin" "$tmp/auto.log" || fail "AUTO did not say it left CUDA out"
if cmake -S "$src" -B "$tmp/bad" -DGW_CUDA=maybe >"$tmp/bad.log" 2>&1; then
    fail "GW_CUDA=maybe was accepted"
fi
grep -q "GW_CUDA must be AUTO, ON or OFF" "$tmp/bad.log" || fail "GW_CUDA=maybe: no clear error"
# The Release+GW_WERROR builds, with and without CUDA, are scripts/test.sh's
# own (its optimised stage is Release with the plugin, its TSan stage
# Release without): building them again here cost CI minutes. On a machine
# whose suite is not test.sh's, GW_CUDA_BUILD_TEST_RELEASE=1 builds them here.
release="left to scripts/test.sh's Release stages (GW_CUDA_BUILD_TEST_RELEASE=1 builds it here)"
if [ "${GW_CUDA_BUILD_TEST_RELEASE:-0}" != 0 ]; then
    cuda=OFF targets="gradwire gradwire_cli"
    if cmake -S "$src" -B "$tmp/probe" -DGW_CUDA=ON -DGW_BUILD_TESTS=OFF -DGW_BUILD_PYTHON=OFF \
        >"$tmp/probe.log" 2>&1; then
        cuda=ON targets="$targets gradwire-cuda"
    fi
    rm -rf "$tmp/probe"
    cmake -S "$src" -B "$tmp/rel" -DCMAKE_BUILD_TYPE=Release -DGW_WERROR=ON -DGW_CUDA=$cuda \
        -DGW_CUDA_ARCHITECTURES=90-real -DGW_BUILD_TESTS=OFF -DGW_BUILD_PYTHON=OFF \
        >"$tmp/rel.log" 2>&1 || { tail -30 "$tmp/rel.log"; fail "Release+GW_WERROR (GW_CUDA=$cuda) did not configure"; }
    # shellcheck disable=SC2086 # targets is a list
    cmake --build "$tmp/rel" -j"${GW_BUILD_JOBS:-2}" --target $targets >"$tmp/rel-build.log" 2>&1 ||
        { grep -E 'error|warning' "$tmp/rel-build.log" | head -30; fail "the Release+GW_WERROR build (GW_CUDA=$cuda) failed"; }
    release="Release+GW_WERROR builds (GW_CUDA=$cuda)"
fi
echo "PASS: libgradwire links no CUDA library; GW_CUDA=ON fails without a toolkit, AUTO leaves it out; $release"
