#!/usr/bin/env bash
# The Debian packages (debian/): built from a clean copy of the checkout
# with dpkg-buildpackage -us -uc -b (debhelper), checked with lintian (no
# error), their contents checked (multiarch libdir, SONAME, symbols file,
# no RUNPATH, stripped binaries with -dbgsym packages, man pages, bash
# completion, a non-relocatable .pc), then installed into this root with
# dpkg -i and run from the installed files alone: a C program built with
# pkg-config and with CMake's find_package, a Python import and job, and
# `gradwire launch -n 2 gradwire-bench allreduce`. Purged at the end
# (also on failure).
#
# Built without the CUDA plugin (profile pkg.gradwire.nocuda): the plugin
# for all GPU architectures takes minutes to compile. GW_DEB_CUDA=1 builds
# it where the toolkit is (libgradwire-cuda0 is then checked as well).
# Usage: deb_test.sh [--build-only] SOURCE_DIR (--build-only: build the
# packages into GW_DEB_BUILD_DIR and stop; see below).
set -euo pipefail
build_only=0
if [ "${1:-}" = --build-only ]; then
    build_only=1
    shift
    [ -n "${GW_DEB_BUILD_DIR:-}" ] || { echo "deb_test: --build-only needs GW_DEB_BUILD_DIR" >&2; exit 2; }
fi
src=$(cd "$1" && pwd)
for tool in dpkg-buildpackage dh lintian dpkg-checkbuilddeps pkg-config cmake readelf; do
    command -v "$tool" >/dev/null ||
        { echo "SKIP: $tool is not installed (scripts/install-deps.sh installs the build dependencies, test lintian)"; exit 77; }
done
if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: the packages are installed into this root with dpkg -i, which needs root"
    exit 77
fi
missing=$(cd "$src" && dpkg-checkbuilddeps -Ppkg.gradwire.nocuda 2>&1 | sed -n 's/.*Unmet build dependencies: //p')
[ -z "$missing" ] || { echo "SKIP: build dependencies missing: $missing (scripts/install-deps.sh)"; exit 77; }
packages=(libgradwire0 libgradwire-dev gradwire-tools python3-gradwire libgradwire-cuda0)
for p in "${packages[@]}"; do
    if dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx 'installed\|half-installed\|unpacked\|config-files'; then
        echo "SKIP: $p is already installed here: the test would replace and purge it"
        exit 77
    fi
done
tmp="$(mktemp -d /tmp/gw-deb-XXXXXX)"
installed=0
cleanup() {
    if [ $installed -eq 1 ]; then
        dpkg --purge "${packages[@]}" >"$tmp/purge.log" 2>&1 || cat "$tmp/purge.log"
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The packages: built from a clean checkout, what git tracks (and new files
# not ignored), no build tree, into $pkgs. With GW_DEB_BUILD_DIR (the
# suite sets it: tests/CMakeLists.txt), they are built there under a lock,
# with a stamp of the sources' contents, and a later run with the same
# sources uses them: scripts/test.sh builds them in the background at the
# lowest priority (--build-only) while other tests run, and this test, run
# late, waits for that build (the lock) and checks its result.
sources_stamp() {
    if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
        (cd "$src" && git ls-files -co --exclude-standard -z | sort -z | xargs -0 sha1sum) | sha1sum
    else
        (cd "$src" && find . -path './build*' -prune -o -path './obj-*' -prune -o -type f -print0 |
            sort -z | xargs -0 sha1sum) | sha1sum
    fi
    echo "cuda=${GW_DEB_CUDA:-0}"
}
build_packages() { # DIR
    local dir=$1 start
    mkdir -p "$dir/gradwire"
    if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
        (cd "$src" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf - --) | tar -xf - -C "$dir/gradwire"
    else
        tar -C "$src" --exclude='./build*' --exclude=./obj-* -cf - . | tar -xf - -C "$dir/gradwire"
    fi
    local profile=-Ppkg.gradwire.nocuda
    [ "${GW_DEB_CUDA:-0}" = 1 ] && profile=""
    start=$(date +%s)
    (cd "$dir/gradwire" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" dpkg-buildpackage -us -uc -b $profile) \
        >"$dir/build.log" 2>&1 || { tail -60 "$dir/build.log"; return 1; }
    echo "deb test: dpkg-buildpackage took $(($(date +%s) - start)) s"
    # lintian's verdict belongs to the packages and is kept with them: in
    # the suite it is made in the background with the build (about 10 s
    # that the test, run alone at the end of its stage, no longer waits).
    local changes=("$dir"/gradwire_*.changes)
    [ -f "${changes[0]}" ] || { echo "dpkg-buildpackage made no .changes"; return 1; }
    lintian --tag-display-limit 0 "${changes[0]}" >"$dir/lintian.log" 2>&1 || true
}
if [ -n "${GW_DEB_BUILD_DIR:-}" ]; then
    pkgs=$GW_DEB_BUILD_DIR
    mkdir -p "$pkgs"
    exec 8>"$pkgs.lock"
    waited=$(date +%s)
    flock 8
    waited=$(($(date +%s) - waited))
    stamp=$(sources_stamp)
    if [ -f "$pkgs/stamp" ] && [ "$(cat "$pkgs/stamp")" = "$stamp" ]; then
        echo "deb test: packages of these sources already built in $pkgs (waited $waited s for them)"
    else
        find "$pkgs" -mindepth 1 -delete
        build_packages "$pkgs" || fail "dpkg-buildpackage"
        echo "$stamp" >"$pkgs/stamp"
    fi
    exec 8>&-
else
    pkgs=$tmp
    build_packages "$pkgs" || fail "dpkg-buildpackage"
fi
[ "$build_only" = 1 ] && exit 0
changes=("$pkgs"/gradwire_*.changes)
[ -f "${changes[0]}" ] || fail "dpkg-buildpackage made no .changes"

# lintian (run on the packages when they were built): no error. Warnings
# are listed (docs/guide/install.md says why each remains).
[ -f "$pkgs/lintian.log" ] || fail "no lintian report beside the packages"
grep -v '^N:\|running with root privileges' "$pkgs/lintian.log" | sed 's/^/  lintian: /' || true
! grep -q '^E:' "$pkgs/lintian.log" || fail "lintian reports errors"

deb() { echo "$pkgs/$1_"*"_$(dpkg --print-architecture).deb"; }
for p in libgradwire0 libgradwire-dev gradwire-tools python3-gradwire libgradwire0-dbgsym \
    gradwire-tools-dbgsym python3-gradwire-dbgsym; do
    [ -f "$(deb "$p")" ] || fail "no $p package"
done
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
x="$tmp/x"
for p in libgradwire0 libgradwire-dev gradwire-tools python3-gradwire; do
    dpkg-deb -x "$(deb "$p")" "$x"
done
[ -f "$x/usr/lib/$ma/libgradwire.so.0.1.0" ] || fail "libgradwire0 has no usr/lib/$ma/libgradwire.so.0.1.0"
readelf -d "$x/usr/lib/$ma/libgradwire.so.0.1.0" | grep -q 'SONAME.*\[libgradwire\.so\.0\]' ||
    fail "libgradwire's SONAME is not libgradwire.so.0"
# The symbols file (debian/symbols-from-map's (symver) pattern, expanded by
# dpkg-gensymbols): the version node and the API under it, since 0.1.0.
dpkg-deb --ctrl-tarfile "$(deb libgradwire0)" | tar -xOf - ./symbols >"$tmp/symbols" 2>/dev/null || true
grep -q '^ GRADWIRE_0@GRADWIRE_0 0\.1\.0$' "$tmp/symbols" && grep -q '^ gw_allreduce@GRADWIRE_0 0\.1\.0$' "$tmp/symbols" ||
    fail "libgradwire0's symbols file lacks the GRADWIRE_0 node: $(head -5 "$tmp/symbols")"
# Every ELF file: no RUNPATH or RPATH, and stripped (its debug info is in -dbgsym).
while IFS= read -r -d '' f; do
    head -c4 "$f" | grep -q 'ELF' || continue
    ! readelf -d "$f" 2>/dev/null | grep -q '(RUNPATH)\|(RPATH)' || fail "${f#"$x"} carries a RUNPATH"
    [[ "$f" == *.a ]] || ! readelf -S "$f" | grep -q '\.debug_info' || fail "${f#"$x"} is not stripped"
done < <(find "$x" -type f -print0)
for f in usr/share/man/man1/gradwire.1.gz usr/share/man/man1/gradwire-bench.1.gz usr/share/man/man7/gradwire.7.gz \
    usr/share/bash-completion/completions/gradwire usr/share/doc/gradwire-tools/copyright \
    usr/include/gradwire.h "usr/lib/$ma/libgradwire.a" "usr/lib/$ma/cmake/gradwire/gradwireConfig.cmake"; do
    [ -e "$x/$f" ] || fail "the packages lack /$f"
done
grep -qx 'prefix=/usr' "$x/usr/lib/$ma/pkgconfig/gradwire.pc" || fail "gradwire.pc does not name prefix=/usr"
ls "$x"/usr/lib/python3/dist-packages/gradwire/_core.cpython-3*.so >/dev/null || fail "python3-gradwire has no extension"
dpkg-deb -f "$(deb python3-gradwire)" Depends | grep -q 'python3 (>= 3' || fail "python3-gradwire does not depend on python3"

# Installed into this root, run from the installed files alone.
debs=()
for p in libgradwire0 libgradwire-dev gradwire-tools python3-gradwire; do debs+=("$(deb "$p")"); done
installed=1
dpkg -i "${debs[@]}" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i"; }
clean_env=(env -i PATH=/usr/bin:/bin HOME="$tmp" LANG=C.UTF-8)
cd "$tmp"
out=$("${clean_env[@]}" pkg-config --cflags --libs gradwire | xargs) # xargs: one space between words
[ "$out" = "-lgradwire" ] || fail "pkg-config --cflags --libs gradwire says '$out', not just -lgradwire (system paths dropped)"
"${clean_env[@]}" cc -std=c11 "$src/tests/install/consumer.c" -o "$tmp/consumer_pc" $out ||
    fail "consumer.c does not build against the installed package"
"${clean_env[@]}" cmake -S "$src/tests/install" -B "$tmp/cmake" >"$tmp/cmake.log" 2>&1 &&
    "${clean_env[@]}" cmake --build "$tmp/cmake" >>"$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log"; fail "consumer.c with find_package(gradwire)"; }
for exe in "$tmp/consumer_pc" "$tmp/cmake/consumer_cmake" "$tmp/cmake/consumer_static"; do
    "${clean_env[@]}" gradwire launch -n 2 --timeout 60 -- "$exe" >"$tmp/out" 2>&1 ||
        { cat "$tmp/out"; fail "$exe under the installed launcher"; }
    [ "$(grep -c "sum 3" "$tmp/out")" -eq 2 ] || { cat "$tmp/out"; fail "$exe printed no sum"; }
done
"${clean_env[@]}" gradwire launch -n 2 --timeout 60 -- gradwire-bench allreduce -b 8 -e 64K >"$tmp/out" 2>&1 ||
    { cat "$tmp/out"; fail "gradwire launch -n 2 gradwire-bench allreduce"; }
grep -q 'Wrong elements *: 0 OK' "$tmp/out" || { cat "$tmp/out"; fail "the installed benchmark's allreduce"; }
where=$("${clean_env[@]}" python3 -c 'import gradwire; print(gradwire.__file__)')
[ "$where" = /usr/lib/python3/dist-packages/gradwire/__init__.py ] || fail "python3 imports gradwire from $where"
cat >"$tmp/job.py" <<'PY'
import numpy as np, gradwire
with gradwire.Comm() as comm:
    x = np.full(8, comm.rank + 1.0)
    comm.allreduce(x)
    print("python sum %g" % x[0])
PY
"${clean_env[@]}" gradwire launch -n 2 --timeout 60 -- python3 "$tmp/job.py" >"$tmp/out" 2>&1 ||
    { cat "$tmp/out"; fail "the installed Python package on 2 ranks"; }
[ "$(grep -c 'python sum 3' "$tmp/out")" -eq 2 ] || { cat "$tmp/out"; fail "the installed Python package printed no sum"; }
"${clean_env[@]}" man -w gradwire-bench >/dev/null 2>&1 || ! command -v man >/dev/null ||
    fail "man finds no gradwire-bench page"

dpkg --purge "${packages[@]}" >"$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log"; fail "dpkg --purge"; }
installed=0
[ ! -e /usr/bin/gradwire ] && [ ! -e "/usr/lib/$ma/libgradwire.so.0" ] || fail "purging left the packages' files behind"
echo "deb test: 4 packages (+ dbgsym) built, lintian-clean, installed, run (C, CMake, Python, benchmark) and purged"
