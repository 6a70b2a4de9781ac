#!/usr/bin/env bash
# gpu-check.sh - the checks of issue #19 item 5, on a machine with an NVIDIA
# GPU, in one run (a few minutes; well under 10):
#   1. build with CUDA (-DGW_CUDA=ON) into build-gpu/ (or $1), for this
#      machine's GPU only (CMake's "native" architecture: a quick build);
#   2. every GPU kernel against the CPU's, and the throughput table
#      (tests/cuda/gpu_kernel_check.cu --bench): reductions against a
#      device-to-device copy at 64 MiB (target 80%), top-k of 1% of 64M floats;
#   3. torch.topk on the same size, where /usr/bin/python3 has torch with CUDA;
#   4. collectives with device buffers on 2 and 4 ranks (gradwire launch) and
#      the staging throughput against pinned PCIe copies, where this tree has
#      them (the CUDA plumbing's part of the issue).
# Every part prints one line "RESULT: <part>: PASS|FAIL|NOT RUN (<why>)";
# a part that cannot run here says NOT RUN with the reason, never PASS. The
# exit status is 0 only when every part ran and passed, 77 without a GPU,
# 1 otherwise. The figures come as Markdown tables for the README, with the
# machine's load.
set -uo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build-gpu}"
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
    for part in build kernels torch-topk collectives-2-ranks collectives-4-ranks staging; do
        result "$part" "NOT RUN" "$why"
    done
    finish skip
fi
nvidia-smi -L

# ---- 1. build ----------------------------------------------------------------------
mkdir -p "$dir"
t0=$(date +%s)
if cmake -S . -B "$dir" -DGW_WERROR=ON -DGW_CUDA=ON -DGW_CUDA_ARCHITECTURES=native \
        -DGW_BUILD_PYTHON=OFF >"$dir/configure.log" 2>&1 &&
    cmake --build "$dir" -j"$(nproc)" --target gpu_kernel_check gradwire_cli gradwire-bench \
        >"$dir/build.log" 2>&1; then
    result build PASS "$(($(date +%s) - t0)) s; logs $dir/configure.log, $dir/build.log"
else
    tail -30 "$dir/configure.log" "$dir/build.log" 2>/dev/null
    result build FAIL "see $dir/build.log"
    finish run
fi

# ---- 2. kernels against the CPU, throughput ------------------------------------------
log="$dir/gpu_kernel_check.log"
timeout 300 "$dir/tests/gpu_kernel_check" --bench 2>&1 | tee "$log"
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
if /usr/bin/python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
        >/dev/null 2>&1; then
    /usr/bin/python3 - <<'PY' 2>&1 | tee "$dir/torch_topk.log"
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
    result torch-topk "NOT RUN" "/usr/bin/python3 has no torch with CUDA"
fi

# ---- 4. collectives with device buffers, staging ---------------------------------------
# The device-buffer API and its benchmark options belong to the CUDA
# plumbing (another branch of issue #19). This part runs them once they are
# in the tree: gradwire-bench allreduce --device (device buffers) and
# gradwire-bench staging (the staging pipeline against pinned copies).
bench="$dir/gradwire-bench"
if "$bench" allreduce --help 2>&1 | grep -q -- '--device'; then
    for n in 2 4; do
        if timeout 120 "$dir/gradwire" launch -n "$n" -- "$bench" allreduce --device cuda \
                -b 8 -e 64M -f 8 2>&1 | tee "$dir/device_allreduce_$n.log"; then
            result "collectives-$n-ranks" PASS "log $dir/device_allreduce_$n.log"
        else
            result "collectives-$n-ranks" FAIL "log $dir/device_allreduce_$n.log"
        fi
    done
else
    for n in 2 4; do
        result "collectives-$n-ranks" "NOT RUN" \
            "this tree has no device-buffer collectives (gradwire-bench allreduce has no --device)"
    done
fi
if "$bench" --help 2>&1 | grep -q '^  staging'; then
    if timeout 120 "$bench" staging 2>&1 | tee "$dir/staging.log"; then
        result staging PASS "log $dir/staging.log"
    else
        result staging FAIL "log $dir/staging.log"
    fi
else
    result staging "NOT RUN" "this tree has no staging pipeline benchmark (gradwire-bench staging)"
fi
finish run
