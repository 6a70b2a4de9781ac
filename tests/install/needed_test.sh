#!/usr/bin/env bash
# libgradwire.so links libc and libm and nothing else (libpthread and libdl,
# parts of glibc, are allowed): verbs, PMIx and the CUDA plugin are opened
# with dlopen when a job needs them, and PowerSGD's products are the
# project's own kernels (collectives/compress/psgd_gemm.c), so loading the
# library into a torch process starts no second BLAS. (The build tree's
# library carries CMake's placeholder RUNPATH, rewritten at install: the
# installed files' search paths are tests/install/deb_test.sh's to check.)
# Usage: needed_test.sh LIBRARY
set -euo pipefail
lib="$1"
command -v readelf >/dev/null || { echo "SKIP: readelf (binutils) is not installed"; exit 77; }
dyn=$(readelf -d "$lib")
needed=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<<"$dyn" | sort)
[ -n "$needed" ] || { echo "FAIL: readelf -d $lib lists no NEEDED entry"; exit 1; }
fail=0
while read -r so; do
    case "$so" in
    libc.so.6 | libm.so.6 | libpthread.so.0 | libdl.so.2 | ld-linux*.so.*) ;;
    *) echo "FAIL: $lib needs $so (allowed: libc, libm, libpthread, libdl; others by dlopen)"; fail=1 ;;
    esac
done <<<"$needed"
grep -q 'libc\.so\.6' <<<"$needed" || { echo "FAIL: $lib does not need libc.so.6"; fail=1; }
[ $fail -eq 0 ] || exit 1
echo "needed test: $(basename "$lib") needs only $(tr '\n' ' ' <<<"$needed")"
