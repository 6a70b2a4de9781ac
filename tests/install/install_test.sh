#!/usr/bin/env bash
# Install gradwire into a temporary prefix and build a program against it the
# two ways users do: CMake's find_package and pkg-config. Then run the result
# on 3 ranks with the installed launcher.
# Usage: install_test.sh SOURCE_DIR BUILD_DIR [SANITIZE]
# SANITIZE=ON: the library was built with ASan+UBSan, so the consumers must be
# too (their link needs the sanitizer runtimes).
set -euo pipefail
src="$1"
build="$2"
san_flags=""
if [ "${3:-OFF}" = "ON" ]; then
    san_flags="-fsanitize=address,undefined"
fi
tmp="$(mktemp -d /tmp/gw-install-XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/include/gradwire.h"
test -x "$prefix/bin/gradwire"
# CMake consumer, shared and static.
cmake -S "$src/tests/install" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="$san_flags" -DCMAKE_EXE_LINKER_FLAGS="$san_flags" >/dev/null
cmake --build "$tmp/cmake" >/dev/null
# pkg-config consumer. gradwire.pc names the configured prefix (it is not
# relocatable, so that pkg-config drops the system paths): an install moved
# elsewhere is reached by redefining the prefix.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/$(gcc -print-multiarch)/pkgconfig"
pc=(pkg-config --define-variable=prefix="$prefix")
"${pc[@]}" --exists gradwire
cc -std=c11 $san_flags "$src/tests/install/consumer.c" -o "$tmp/consumer_pc" $("${pc[@]}" --cflags --libs gradwire) \
    -Wl,-rpath,"$("${pc[@]}" --variable=libdir gradwire)"
# No LD_LIBRARY_PATH: the installed launcher finds the installed library by
# its RUNPATH ($ORIGIN/../lib), the consumers by theirs.
unset LD_LIBRARY_PATH
for tool in gradwire gradwire-bench gradwire-train; do
    "$prefix/bin/$tool" --help >"$tmp/out" 2>&1 || { cat "$tmp/out"; echo "FAIL: installed $tool does not start"; exit 1; }
done
for exe in "$tmp/cmake/consumer_cmake" "$tmp/cmake/consumer_static" "$tmp/consumer_pc"; do
    "$prefix/bin/gradwire" launch -n 3 --timeout 60 -- "$exe" >"$tmp/out" 2>&1 || { cat "$tmp/out"; echo "FAIL: $exe"; exit 1; }
    grep -q "sum 6" "$tmp/out" || { cat "$tmp/out"; echo "FAIL: $exe printed no sum"; exit 1; }
done
echo "install test: 3 passed, 0 failed"
