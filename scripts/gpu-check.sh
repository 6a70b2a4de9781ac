#!/usr/bin/env bash
# gpu-check.sh - the checks of issues #19 and #31 (item 5) on a machine with
# an NVIDIA GPU, as one prepared run inside a total time budget
# (GW_GPU_CHECK_BUDGET_S, default 780 s: well under the 15 minutes a lent
# GPU machine gives; each part gets a timeout from what is left, and a part
# that no longer fits says NOT RUN (time budget)). In order of importance:
#   1. build with CUDA (-DGW_CUDA=ON) into build-gpu/ (or DIR), for this
#      machine's GPU only (CMake's "native" architecture: a quick build);
#      or, with --prebuilt DIR, use the programs already built there (a
#      build from another machine: scripts/gpu-bundle.sh makes one);
#   2. every GPU kernel against the CPU's, and the throughput table
#      (tests/cuda/gpu_kernel_check.cu --bench): reductions against a
#      device-to-device copy at 64 MiB (target 80%), top-k of 1% of 64M floats;
#   3. device buffers (tests/cuda/gpu_device_check.c): every collective,
#      the compressed allreduce and point-to-point with cudaMalloc'd
#      buffers on 2 and 4 ranks of `gradwire launch`, each result checked
#      (the reductions run on the GPU: device_reduce.c);
#   4. allreduce of device buffers against host buffers, 1-256 MiB, on 2
#      and 4 ranks, with the host CPU time per call (getrusage); then on 2
#      ranks the same with GW_CUDA_REDUCE=host (the CPU reducing, the path
#      before the kernels): targets, from 16 MiB, device within 1.2x of the
#      host buffers' time, and its host CPU time at most a third of the
#      CPU-reduction path's;
#   5. torch.distributed's gloo against gradwire on the same CUDA tensors,
#      1-256 MiB, 2 and 4 ranks (bench/device_vs_gloo.py, torch 2.x with
#      CUDA): target, from 1 MiB, gradwire's busbw at least 1.5x gloo's;
#      the JSON goes next to the logs for the results pages;
#   6. the torch backend's tests on CUDA tensors (tests/python/torch_test.py
#      ops with GW_TEST_DEVICE=cuda: torch 2.x makes every tensor on the GPU);
#   7. torch.topk on the same size as the kernel table, where python3 has
#      torch with CUDA; and on one rank the staging pipeline against pinned
#      copies in both directions at once (target 80% at 64 MiB and up).
# Every part prints one line "RESULT: <part>: PASS|FAIL|NOT RUN (<why>)";
# a part that cannot run here says NOT RUN with the reason, never PASS. The
# exit status is 0 only when every part ran and passed, 77 without a GPU,
# 1 otherwise. The figures come as Markdown tables, with the machine's load.
#
#   scripts/gpu-check.sh [DIR]               build in DIR (build-gpu), then check
#   scripts/gpu-check.sh --prebuilt DIR      check DIR's programs
#   scripts/gpu-check.sh --dry-run [...]     print the plan and each command; run nothing
set -uo pipefail
cd "$(dirname "$0")/.."
prebuilt=0
dry=0
while [ $# -gt 0 ]; do
    case "$1" in
    --prebuilt) prebuilt=1 ;;
    --dry-run) dry=1 ;;
    *) break ;;
    esac
    shift
done
budget=${GW_GPU_CHECK_BUDGET_S:-780}
dir="${1:-build-gpu}"
exec 3>&1 # the dry run's lines, whatever a part's output is redirected to
logs="$dir"
if [ "$dry" -eq 1 ]; then # the dry run's redirections go to a scratch folder
    logs=$(mktemp -d /tmp/gw-gpu-check-dry-XXXXXX)
    trap 'rm -rf "$logs"' EXIT
fi
start=$(date +%s)
left() { echo $((budget - ($(date +%s) - start))); }
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

parts="build kernels device-buffers-2-ranks device-buffers-4-ranks device-buffers-2-ranks-tcp
device-bench-2-ranks device-bench-4-ranks device-time-within-1.2x cpu-time-third
gloo-2-ranks gloo-4-ranks gloo-1.5x torch-cuda torch-topk staging"
# run PART MAX_S CMD...: CMD with a timeout of MAX_S or what the budget has
# left (less 20 s for the summary); a part that cannot get 30 s is NOT RUN.
# Under --dry-run it prints the command instead.
run() {
    local part=$1 max=$2
    shift 2
    if [ "$dry" -eq 1 ]; then
        echo "would run [$part, at most ${max} s]: $*" >&3
        return 0
    fi
    local t=$(($(left) - 20))
    [ "$t" -gt "$max" ] && t=$max
    if [ "$t" -lt 30 ]; then
        echo "$part: not started, $(left) s of the ${budget} s budget left"
        return 124
    fi
    timeout "$t" "$@"
}
if [ "$dry" -eq 1 ]; then
    echo "gpu-check dry run: budget ${budget} s; parts in order:" $parts
    echo "would check: nvidia-smi -L; build into $dir (prebuilt: $prebuilt)"
elif ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    why="no NVIDIA GPU or driver here (nvidia-smi -L failed)"
    for part in $parts; do
        result "$part" "NOT RUN" "$why"
    done
    echo "(scripts/gpu-check.sh --dry-run prints what a GPU machine would run)"
    finish skip
else
    nvidia-smi -L
fi

# ---- 1. build ----------------------------------------------------------------------
[ "$dry" -eq 1 ] || mkdir -p "$dir"
t0=$(date +%s)
if [ "$prebuilt" -eq 1 ]; then
    missing=""
    for f in gradwire libgradwire-cuda.so tests/gpu_kernel_check tests/gpu_device_check; do
        [ -x "$dir/$f" ] || [ -f "$dir/$f" ] || missing="$missing $f"
    done
    if [ "$dry" -eq 1 ]; then
        echo "would use the programs in $dir (missing now:${missing:- none})"
    elif [ -n "$missing" ]; then
        result build FAIL "--prebuilt $dir lacks:$missing"
        finish run
    else
        result build PASS "prebuilt in $dir"
    fi
elif run build 420 cmake -S . -B "$dir" -DGW_WERROR=ON -DGW_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
        -DGW_CUDA_ARCHITECTURES=native >"$logs/configure.log" 2>&1 &&
    run build 420 cmake --build "$dir" -j"$(nproc)" --target gpu_kernel_check gpu_device_check \
        gradwire_cli gradwire-cuda >"$logs/build.log" 2>&1; then
    [ "$dry" -eq 1 ] || result build PASS "$(($(date +%s) - t0)) s; logs $logs/configure.log, $logs/build.log"
    # The Python package for parts 5 and 6 (their failure to build is theirs).
    run build-python 200 cmake --build "$dir" -j"$(nproc)" --target gradwire_python \
        >"$logs/build-python.log" 2>&1 || echo "the Python package did not build: $logs/build-python.log"
else
    tail -30 "$logs/configure.log" "$logs/build.log" 2>/dev/null
    result build FAIL "see $logs/build.log"
    finish run
fi
[ "$dry" -eq 1 ] || "$dir/gradwire" info 2>&1 | sed -n '/cuda/,$p' | head -8

# ---- 2. kernels against the CPU, throughput ------------------------------------------
log="$logs/gpu_kernel_check.log"
run kernels 180 "$dir/tests/gpu_kernel_check" --bench 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$dry" -eq 0 ]; then
    case $rc in
    0) result kernels PASS "every kernel as the CPU's; table above, log $log" ;;
    77) result kernels "NOT RUN" "gpu_kernel_check found no device: $(grep SKIP "$log")" ;;
    124) result kernels "NOT RUN" "time budget" ;;
    *) result kernels FAIL "exit $rc; FAIL lines in $log" ;;
    esac
    if grep -q 'MISSED' "$log"; then
        result reduce-80%-of-copy FAIL "$(grep -c MISSED "$log") reduction(s) below 80% of the copy rate"
    elif [ "$rc" -eq 0 ]; then
        result reduce-80%-of-copy PASS "every reduction at 64 MiB at 80% or more of the copy rate"
    fi
fi

# ---- 3. device buffers: every collective on 2 and 4 ranks ------------------------------
check="$dir/tests/gpu_device_check"
for r in 2 4 2:tcp; do
    n=${r%%:*} transport=${r#*:} name="device-buffers-${r%%:*}-ranks"
    [ "$transport" = "$r" ] && transport="" || name="$name-$transport"
    log="$logs/$name.log"
    run "$name" 150 env ${transport:+GW_TRANSPORT=$transport} "$dir/gradwire" launch -n "$n" \
        --timeout 140 -- "$check" >"$log" 2>&1
    rc=$?
    [ "$dry" -eq 1 ] && continue
    case $rc in
    0) result "$name" PASS "$(grep -o 'PASS: .*' "$log")" ;;
    124) result "$name" "NOT RUN" "time budget" ;;
    *) tail -40 "$log"; result "$name" FAIL "log $log" ;;
    esac
done

# ---- 4. device against host buffers, host CPU time, GW_CUDA_REDUCE=host -------------------
# Columns of gpu_device_check --bench's table: | size | host | device |
# device/host | CPU host | CPU device |; fields 2.. after splitting on '|'.
for r in 2 4 2:host; do
    n=${r%%:*} where=${r#*:} name="device-bench-${r%%:*}-ranks"
    [ "$where" = "$r" ] && where="" || name="$name-cpu-reduce"
    log="$logs/$name.log"
    run "$name" 150 env ${where:+GW_CUDA_REDUCE=$where} "$dir/gradwire" launch -n "$n" \
        --timeout 140 -- "$check" --bench >"$log" 2>&1
    rc=$?
    [ "$dry" -eq 1 ] && continue
    case $rc in
    0) sed 's/^\[0\] //' "$log"; [ -z "$where" ] && result "$name" PASS "table above" ;;
    124) result "$name" "NOT RUN" "time budget" ;;
    *) tail -20 "$log"; result "$name" FAIL "log $log" ;;
    esac
done
if [ "$dry" -eq 0 ]; then
    rows() { sed -n 's/^\[0\] //; /^| [0-9]* MiB/p' "$1" 2>/dev/null; }
    b2="$logs/device-bench-2-ranks.log" b4="$logs/device-bench-4-ranks.log"
    if [ -n "$(rows "$b2")" ]; then
        # Device within 1.2x of host buffers' time from 16 MiB, on 2 and 4 ranks.
        slow=$( (rows "$b2"; rows "$b4") | awk -F'|' '$2 + 0 >= 16 && $5 + 0 > 1.2 { print $2 "(" $5 ")" }' | tr '\n' ' ')
        [ -z "$slow" ] && result device-time-within-1.2x PASS "every size from 16 MiB" ||
            result device-time-within-1.2x FAIL "device/host time above 1.2 at:$slow"
    else
        result device-time-within-1.2x "NOT RUN" "no device bench table"
    fi
    bh="$logs/device-bench-2-ranks-cpu-reduce.log"
    if [ -n "$(rows "$b2")" ] && [ -n "$(rows "$bh")" ]; then
        # Host CPU per allreduce of device buffers (column 7), GPU against CPU reduction.
        verdict=$(join -t'|' <(rows "$b2" | awk -F'|' '{ print $2 "|" $7 + 0 }' | sort) \
            <(rows "$bh" | awk -F'|' '{ print $2 "|" $7 + 0 }' | sort) |
            awk -F'|' '{ printf "%s %.0f/%.0f us; ", $1, $2, $3; if ($1 + 0 >= 16 && $2 * 3 > $3) bad = 1 }
                END { exit bad }')
        [ $? -eq 0 ] && result cpu-time-third PASS "GPU/CPU reduction host CPU per call: $verdict" ||
            result cpu-time-third FAIL "not at most a third from 16 MiB: $verdict"
    else
        result cpu-time-third "NOT RUN" "a device bench (GW_CUDA_REDUCE device or host) did not run"
    fi
fi

# ---- 5. gloo against gradwire on the same CUDA tensors --------------------------------------
if [ "$dry" -eq 1 ] || "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() and int(torch.__version__.split(".")[0]) >= 2 else 1)' \
        >/dev/null 2>&1; then
    for n in 2 4; do
        log="$logs/gloo-$n-ranks.log"
        PYTHONPATH="$dir/python${PYTHONPATH:+:$PYTHONPATH}" run "gloo-$n-ranks" 150 "$python" \
            bench/device_vs_gloo.py --ranks "$n" --device cuda --json "$logs/gloo-$n-ranks.json" >"$log" 2>&1
        rc=$?
        [ "$dry" -eq 1 ] && continue
        cat "$log"
        case $rc in
        0) result "gloo-$n-ranks" PASS "table above; $logs/gloo-$n-ranks.json" ;;
        124) result "gloo-$n-ranks" "NOT RUN" "time budget" ;;
        *) result "gloo-$n-ranks" FAIL "log $log" ;;
        esac
    done
    if [ "$dry" -eq 0 ]; then
        low=$(cat "$logs"/gloo-[24]-ranks.log 2>/dev/null | awk -F'|' '/^\| [0-9]+ MiB/ && $2 + 0 >= 1 {
            if ($5 ~ /-/ || $5 + 0 < 1.5) printf "%s(%s) ", $2, $5 }')
        [ -z "$low" ] && grep -q 'MiB' "$logs"/gloo-2-ranks.log 2>/dev/null &&
            result gloo-1.5x PASS "gradwire's busbw at least 1.5x gloo's from 1 MiB" ||
            result gloo-1.5x FAIL "below 1.5x gloo's busbw (or no time) at: ${low:-no table}"
    fi
else
    for part in gloo-2-ranks gloo-4-ranks gloo-1.5x; do
        result "$part" "NOT RUN" "$python has no torch 2.x with CUDA"
    done
fi

# ---- 6. the torch backend's tests on CUDA tensors -----------------------------------------
if [ "$dry" -eq 1 ] || "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() and int(torch.__version__.split(".")[0]) >= 2 else 1)' \
        >/dev/null 2>&1; then
    log="$logs/torch-cuda.log"
    GW_TEST_DEVICE=cuda PYTHONPATH="$dir/python${PYTHONPATH:+:$PYTHONPATH}" run torch-cuda 120 \
        "$dir/gradwire" launch -n 2 --timeout 110 -- "$python" tests/python/torch_test.py ops >"$log" 2>&1
    rc=$?
    if [ "$dry" -eq 0 ]; then
        case $rc in
        0) result torch-cuda PASS "tests/python/torch_test.py ops on CUDA tensors, 2 ranks" ;;
        124) result torch-cuda "NOT RUN" "time budget" ;;
        *) tail -20 "$log"; result torch-cuda FAIL "log $log" ;;
        esac
    fi
else
    result torch-cuda "NOT RUN" "$python has no torch 2.x with CUDA"
fi

# ---- 7. torch.topk, staging against pinned copies -----------------------------------------
if [ "$dry" -eq 1 ]; then
    echo "would run [torch-topk, at most 60 s]: $python - (torch.topk of 1% of 64M floats, 11 times)"
elif "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
        >/dev/null 2>&1 && [ "$(left)" -gt 90 ]; then
    timeout 60 "$python" - <<'PY' 2>&1 | tee "$logs/torch_topk.log"
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
    if grep -q 'median' "$logs/torch_topk.log"; then
        result torch-topk PASS "$(grep median "$logs/torch_topk.log")"
    else
        result torch-topk FAIL "see $logs/torch_topk.log"
    fi
else
    result torch-topk "NOT RUN" "$python has no torch with CUDA, or the time budget is spent"
fi
staging_ok=1
for chunk in "" 16777216; do
    log="$logs/staging${chunk:+_$chunk}.log"
    run staging 120 env ${chunk:+GW_CUDA_CHUNK=$chunk} "$dir/gradwire" launch -n 1 --timeout 110 -- \
        "$check" --bench >"$log" 2>&1
    rc=$?
    [ "$dry" -eq 1 ] && continue
    if [ "$rc" -eq 0 ]; then
        sed -n 's/^\[0\] //; /^Staging/,$p' "$log"
        # The 64 MiB row and above: staged / both at 80% or more.
        if awk -F'|' '/Staging on one rank/ { staging = 1 }
                staging && /^\[0\] \| [0-9]+ MiB/ { mib = $2 + 0; pct = $7 + 0;
                if (mib >= 64 && pct < 80) bad = 1 } END { exit bad }' "$log"; then :; else
            staging_ok=0
        fi
    elif [ "$rc" -eq 124 ]; then
        staging_ok=-2
    else
        tail -20 "$log"
        staging_ok=-1
    fi
done
if [ "$dry" -eq 1 ]; then
    echo "dry run: nothing was run; $(($(date +%s) - start)) s"
    exit 0
fi
case $staging_ok in
1) result staging PASS "the staged allreduce at 80% or more of pinned copies both ways, 64 MiB and up" ;;
0) result staging FAIL "below 80% of pinned copies both ways at 64 MiB or more (tables above)" ;;
-2) result staging "NOT RUN" "time budget" ;;
*) result staging FAIL "a staging run failed (logs in $dir)" ;;
esac
finish run
