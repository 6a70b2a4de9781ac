#!/usr/bin/env bash
# gpu-check.sh - the checks of issue #19 item 5, on a machine with an NVIDIA
# GPU, in one run (a few minutes; well under 10):
#   1. build with CUDA (-DGW_CUDA=ON) into build-gpu/ (or DIR), for this
#      machine's GPU only (CMake's "native" architecture: a quick build);
#      or, with --prebuilt DIR, use the programs already built there (a
#      build from another machine: scripts/gpu-bundle.sh makes one);
#   2. every GPU kernel against the CPU's, and the throughput table
#      (tests/cuda/gpu_kernel_check.cu --bench): reductions against a
#      device-to-device copy at 64 MiB (target 80%), top-k of 1% of 64M floats;
#   3. torch.topk on the same size, where python3 has torch with CUDA;
#   4. device buffers (tests/cuda/gpu_device_check.c): every collective,
#      the compressed allreduce and point-to-point with cudaMalloc'd
#      buffers on 2 and 4 ranks of `gradwire launch`, each result checked;
#      allreduce of device buffers against host buffers, 1-256 MiB, on 2
#      and 4 ranks; and on one rank the staging pipeline against pinned
#      copies in both directions at once (target 80% at 64 MiB and up), with
#      the default GW_CUDA_CHUNK and 16 MiB.
# Every part prints one line "RESULT: <part>: PASS|FAIL|NOT RUN (<why>)";
# a part that cannot run here says NOT RUN with the reason, never PASS. The
# exit status is 0 only when every part ran and passed, 77 without a GPU,
# 1 otherwise. The figures come as Markdown tables for the README, with the
# machine's load.
#
#   scripts/gpu-check.sh [DIR]               build in DIR (build-gpu), then check
#   scripts/gpu-check.sh --prebuilt DIR      check DIR's programs
set -uo pipefail
cd "$(dirname "$0")/.."
prebuilt=0
if [ "${1:-}" = --prebuilt ]; then
    prebuilt=1
    shift
fi
dir="${1:-build-gpu}"
python=python3
command -v python3 >/dev/null || python=/usr/bin/python3
results=()
failed=0
notrun=0
result() { # part status why
    local line="RESULT: $1: $2${3:+ ($3)}"
    results+=("$line")
    echo "$line"
    case "$2" in FAIL) failed=1 ;; "NOT RUN") notrun=1 ;; esac
}
finish() {
    echo
    echo "== summary ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
    printf '%s\n' "${results[@]}"
    if [ "$failed" -ne 0 ]; then exit 1; fi
    if [ "$1" = skip ]; then exit 77; fi
    if [ "$notrun" -ne 0 ]; then echo "some parts did not run: see NOT RUN above"; exit 1; fi
    exit 0
}

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    why="no NVIDIA GPU or driver here (nvidia-smi -L failed)"
    for part in build kernels torch-topk device-buffers-2-ranks device-buffers-4-ranks \
        device-buffers-2-ranks-tcp staging; do
        result "$part" "NOT RUN" "$why"
    done
    finish skip
fi
nvidia-smi -L

# ---- 1. build ----------------------------------------------------------------------
mkdir -p "$dir"
t0=$(date +%s)
if [ "$prebuilt" -eq 1 ]; then
    missing=""
    for f in gradwire libgradwire-cuda.so tests/gpu_kernel_check tests/gpu_device_check; do
        [ -x "$dir/$f" ] || [ -f "$dir/$f" ] || missing="$missing $f"
    done
    if [ -n "$missing" ]; then
        result build FAIL "--prebuilt $dir lacks:$missing"
        finish run
    fi
    result build PASS "prebuilt in $dir"
elif cmake -S . -B "$dir" -DGW_WERROR=ON -DGW_CUDA=ON -DGW_CUDA_ARCHITECTURES=native \
        -DGW_BUILD_PYTHON=OFF >"$dir/configure.log" 2>&1 &&
    cmake --build "$dir" -j"$(nproc)" --target gpu_kernel_check gpu_device_check gradwire_cli \
        gradwire-cuda >"$dir/build.log" 2>&1; then
    result build PASS "$(($(date +%s) - t0)) s; logs $dir/configure.log, $dir/build.log"
else
    tail -30 "$dir/configure.log" "$dir/build.log" 2>/dev/null
    result build FAIL "see $dir/build.log"
    finish run
fi
"$dir/gradwire" info 2>&1 | sed -n '/cuda/,$p' | head -8

# ---- 2. kernels against the CPU, throughput ------------------------------------------
log="$dir/gpu_kernel_check.log"
timeout 240 "$dir/tests/gpu_kernel_check" --bench 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
case $rc in
0) result kernels PASS "every kernel as the CPU's; table above, log $log" ;;
77) result kernels "NOT RUN" "gpu_kernel_check found no device: $(grep SKIP "$log")" ;;
*) result kernels FAIL "exit $rc; FAIL lines in $log" ;;
esac
if grep -q 'MISSED' "$log"; then
    result reduce-80%-of-copy FAIL "$(grep -c MISSED "$log") reduction(s) below 80% of the copy rate"
elif [ "$rc" -eq 0 ]; then
    result reduce-80%-of-copy PASS "every reduction at 64 MiB at 80% or more of the copy rate"
fi

# ---- 3. torch.topk -------------------------------------------------------------------
if "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
        >/dev/null 2>&1; then
    "$python" - <<'PY' 2>&1 | tee "$dir/torch_topk.log"
import torch
n = 64 << 20
k = n // 100
x = torch.randn(n, device="cuda")
for _ in range(3):
    torch.topk(x.abs(), k, sorted=False)
torch.cuda.synchronize()
times = []
for _ in range(11):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    torch.topk(x.abs(), k, sorted=False)
    e.record()
    torch.cuda.synchronize()
    times.append(s.elapsed_time(e))
times.sort()
print(f"torch.topk(|x|, 1% of 64M floats, sorted=False): median {times[5]:.2f} ms "
      f"(min {times[0]:.2f}, max {times[-1]:.2f}), torch {torch.__version__}")
PY
    if grep -q 'median' "$dir/torch_topk.log"; then
        result torch-topk PASS "$(grep median "$dir/torch_topk.log")"
    else
        result torch-topk FAIL "see $dir/torch_topk.log"
    fi
else
    result torch-topk "NOT RUN" "$python has no torch with CUDA"
fi

# ---- 4. device buffers, staging --------------------------------------------------------
check="$dir/tests/gpu_device_check"
for run in 2 4 2:tcp; do
    n=${run%%:*} transport=${run#*:} name="device-buffers-${run%%:*}-ranks"
    [ "$transport" = "$run" ] && transport="" || name="$name-$transport"
    log="$dir/$name.log"
    if env ${transport:+GW_TRANSPORT=$transport} timeout 300 "$dir/gradwire" launch -n "$n" \
            --timeout 240 -- "$check" >"$log" 2>&1; then
        result "$name" PASS "$(grep -o 'PASS: .*' "$log")"
    else
        tail -40 "$log"
        result "$name" FAIL "log $log"
    fi
done
for n in 2 4; do
    log="$dir/device_bench_$n.log"
    if timeout 300 "$dir/gradwire" launch -n "$n" --timeout 240 -- "$check" --bench >"$log" 2>&1; then
        sed 's/^\[0\] //' "$log"
    else
        tail -20 "$log"
        result "device-bench-$n-ranks" FAIL "log $log"
    fi
done
staging_ok=1
for chunk in "" 16777216; do
    log="$dir/staging${chunk:+_$chunk}.log"
    if env ${chunk:+GW_CUDA_CHUNK=$chunk} timeout 300 "$dir/gradwire" launch -n 1 --timeout 240 -- \
            "$check" --bench >"$log" 2>&1; then
        sed -n 's/^\[0\] //; /^Staging/,$p' "$log"
        # The 64 MiB row and above: staged / both at 80% or more.
        if awk -F'|' '/Staging on one rank/ { staging = 1 }
                staging && /^\[0\] \| [0-9]+ MiB/ { mib = $2 + 0; pct = $7 + 0;
                if (mib >= 64 && pct < 80) bad = 1 } END { exit bad }' "$log"; then :; else
            staging_ok=0
        fi
    else
        tail -20 "$log"
        staging_ok=-1
    fi
done
case $staging_ok in
1) result staging PASS "the staged allreduce at 80% or more of pinned copies both ways, 64 MiB and up" ;;
0) result staging FAIL "below 80% of pinned copies both ways at 64 MiB or more (tables above)" ;;
*) result staging FAIL "a staging run failed (logs in $dir)" ;;
esac
finish run
