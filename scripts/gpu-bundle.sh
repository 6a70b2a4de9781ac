#!/usr/bin/env bash
# gpu-bundle.sh BUILD OUT - the programs scripts/gpu-check.sh runs, copied
# from a build made here (GW_CUDA on) into OUT with the shared libraries
# they need that a CUDA machine may lack (OpenBLAS and its Fortran
# runtime; not glibc, the C++ runtime or CUDA's own), stripped, so that
# `scripts/gpu-check.sh --prebuilt OUT` runs on a GPU machine where the
# project cannot be configured (no OpenBLAS headers there, say). OUT/env.sh
# sets LD_LIBRARY_PATH for them, with the CUDA libraries where the
# toolkit or PyTorch's wheels keep them.
set -euo pipefail
build=${1:?usage: gpu-bundle.sh BUILD OUT}
out=${2:?usage: gpu-bundle.sh BUILD OUT}
rm -rf "$out"
mkdir -p "$out/tests" "$out/lib"
cp -L "$build/gradwire" "$build/libgradwire.so.0" "$build/libgradwire-cuda.so" "$out/"
cp -L "$build/tests/gpu_kernel_check" "$build/tests/gpu_device_check" "$out/tests/"
for f in "$out"/gradwire "$out"/*.so* "$out"/tests/*; do
    ldd "$f" | awk '$3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
    libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | libgcc_s.so* | libstdc++.so* | \
        ld-linux*) ;;
    libcuda* | libcublas* | libgradwire*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
    esac
done
strip --strip-unneeded "$out"/gradwire "$out"/*.so* "$out"/tests/* "$out"/lib/* 2>/dev/null || true
cat >"$out/env.sh" <<'SH'
# . env.sh - the bundle's libraries, then CUDA's wherever this machine keeps them.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cudalibs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
    $(python3 -c 'import nvidia, os; p = os.path.dirname(nvidia.__file__); print(" ".join(os.path.join(p, d, "lib") for d in sorted(os.listdir(p))))' 2>/dev/null); do
    [ -d "$d" ] && cudalibs="$cudalibs:$d"
done
export LD_LIBRARY_PATH="$here:$here/lib$cudalibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GW_CUDA_PLUGIN="$here/libgradwire-cuda.so"
SH
du -sh "$out"
