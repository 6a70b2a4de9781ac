#!/usr/bin/env bash
# The Python package's tests, run by ctest (tests/CMakeLists.txt):
#   run.sh api N TRANSPORT   tests/python/api_test.py on N ranks (gradwire launch)
#   run.sh gil N TRANSPORT   tests/python/gil_test.py on N ranks
#   run.sh fault N TRANSPORT tests/python/fault_test.py (its own launcher)
#   run.sh install           the package imports and runs from `cmake --install` into a prefix
#   run.sh torch N MODE [TRANSPORT]  tests/python/torch_test.py MODE (ops, ddp, hooks, errors)
#                            on N ranks: the torch.distributed backend against gloo in one job
#   run.sh parity N [TRANSPORT]      tests/python/torch_parity_test.py on N ranks: gradwire as
#                            the default group where it used to differ from gloo (issue 29)
#   run.sh suite BACKEND [NAME...]   torch's own distributed test base (torch_suite.py) on
#                            BACKEND (gloo, gradwire), the tests in torch_suite.list or those
#                            named; results in $GW_PY_SUITE_OUT (default: a temporary file);
#                            skipped unless GW_PY_TORCH_SUITE=1 (ctest -L torch_suite)
#   run.sh torchfault N MODE [INIT]  tests/python/torch_fault_test.py (its own launcher):
#                            init methods and new_group, a killed or stalled rank
#   run.sh quorum TRANSPORT  tests/python/quorum_test.py (its own launcher): the torchft-style
#                            quorum example (python/examples/torch_quorum.py), a replica
#                            killed and replaced mid-run, against an unbroken run
# with the build directory, the interpreter the package was built for and
# GW_SANITIZE in GW_PY_BUILD, GW_PY_PYTHON and GW_PY_SANITIZE. Exits 77
# (skipped) with the reason when the interpreter or numpy is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kind="$1"
n="${2:-2}"
transport="${3:-auto}"
build="${GW_PY_BUILD:?}"
py="${GW_PY_PYTHON:-/usr/bin/python3}"

if [ ! -x "$py" ]; then
    echo "SKIP: $py is not installed (the package is built for it)"
    exit 77
fi
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "SKIP: numpy is not installed for $py (scripts/install-deps.sh test installs python3-numpy)"
    exit 77
fi
if [ "${GW_PY_SANITIZE:-OFF}" = "ON" ]; then
    # The extension and the library are instrumented, the interpreter is
    # not: the sanitizer runtime must be loaded first. Python's own
    # allocations at exit are not this project's leaks: detect_leaks=0
    # goes last, where it wins over the suite's detect_leaks=1
    # (scripts/test.sh; the last of repeated options is the one taken).
    # libstdc++ with it: ASan finds the real __cxa_throw when it starts,
    # and torch throws (without it, ASan stops at torch's first exception:
    # "CHECK failed: ... real___cxa_throw"). UBSan's runtime only where the
    # build links it (GW_SANITIZE_UB_RUNTIME; by default its checks trap
    # and need none).
    LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libstdc++.so)"
    if ldd "$GW_PY_BUILD/libgradwire.so" 2>/dev/null | grep -q libubsan; then
        LD_PRELOAD="$LD_PRELOAD:$(gcc -print-file-name=libubsan.so)"
    fi
    export LD_PRELOAD
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
case "$kind" in
torch | torchfault | parity | suite | quorum)
    if ! "$py" -c 'import torch.distributed' 2>/dev/null; then
        echo "SKIP: torch is not installed for $py (scripts/install-deps.sh test installs python3-torch)"
        exit 77
    fi
    ;;
esac
out="$(mktemp /tmp/gw-py-XXXXXX)"
GW_PY_STORE_DIR="$(mktemp -d /tmp/gw-py-store-XXXXXX)" # api_test's Comm.from_store
export GW_PY_STORE_DIR
trap 'rm -rf "$out" "$GW_PY_STORE_DIR" "${tmp:-}"' EXIT

case "$kind" in
api)
    status=0
    PYTHONPATH="$build/python" GW_TRANSPORT="$transport" "$build/gradwire" launch -n "$n" --timeout 240 -- \
        "$py" "$here/api_test.py" >"$out" 2>&1 || status=$?
    grep -v ' gradwire [a-z]* \(WARN\|ERROR\|INFO\) ' "$out" || true
    [ "$status" -eq 0 ] || { echo "FAIL: the job exited with status $status"; exit 1; }
    good=$(grep -c 'python api: [0-9]* passed, 0 failed' "$out" || true)
    [ "$good" -eq "$n" ] || { echo "FAIL: $good of $n ranks passed"; exit 1; }
    culprits=$(grep -o 'mismatch culprit .*' "$out" | sort -u | wc -l)
    [ "$culprits" -eq 1 ] || { echo "FAIL: the ranks blamed different ranks for the mismatch"; exit 1; }
    ;;
gil)
    PYTHONPATH="$build/python" GW_TRANSPORT="$transport" "$build/gradwire" launch -n "$n" --timeout 120 -- \
        "$py" "$here/gil_test.py"
    ;;
fault)
    PYTHONPATH="$build/python" "$py" "$here/fault_test.py" "$n" "$transport"
    ;;
torch)
    mode="${3:?torch N MODE}"
    status=0
    # gloo's rendezvous (the default group) on a free loopback port.
    port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    PYTHONPATH="$build/python" GW_TRANSPORT="${4:-auto}" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" "$build/gradwire" launch -n "$n" --timeout 240 -- \
        "$py" -W ignore::UserWarning "$here/torch_test.py" "$mode" >"$out" 2>&1 || status=$?
    grep -v ' gradwire [a-z]* \(WARN\|ERROR\|INFO\) ' "$out" || true
    [ "$status" -eq 0 ] || { echo "FAIL: the job exited with status $status"; exit 1; }
    good=$(grep -c "torch $mode: [0-9]* passed, 0 failed" "$out" || true)
    [ "$good" -eq "$n" ] || { echo "FAIL: $good of $n ranks passed"; exit 1; }
    if [ "$mode" = errors ]; then
        culprits=$(grep -o 'mismatch raised .* culprit [0-9]*' "$out" | sort -u | wc -l)
        [ "$culprits" -eq 1 ] || { echo "FAIL: the ranks raised differently for the mismatch"; exit 1; }
    fi
    ;;
torchfault)
    PYTHONPATH="$build/python" "$py" -W ignore::UserWarning "$here/torch_fault_test.py" "$n" "$3" "${4:-env}"
    ;;
quorum)
    PYTHONPATH="$build/python" "$py" -W ignore::UserWarning "$here/quorum_test.py" "${2:-auto}"
    ;;
parity)
    status=0
    port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    PYTHONPATH="$build/python" GW_TRANSPORT="$transport" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" "$build/gradwire" launch -n "$n" --timeout 120 -- \
        "$py" -W ignore::UserWarning "$here/torch_parity_test.py" >"$out" 2>&1 || status=$?
    grep -v ' gradwire [a-z]* \(WARN\|ERROR\|INFO\) ' "$out" || true
    [ "$status" -eq 0 ] || { echo "FAIL: the job exited with status $status"; exit 1; }
    good=$(grep -c "torch parity: [0-9]* passed, 0 failed" "$out" || true)
    [ "$good" -eq "$n" ] || { echo "FAIL: $good of $n ranks passed"; exit 1; }
    ;;
suite)
    if [ "${GW_PY_TORCH_SUITE:-0}" != 1 ]; then
        echo "SKIP: torch's distributed test base takes about 40 minutes on 2 cores: GW_PY_TORCH_SUITE=1 runs it"
        exit 77
    fi
    backend="$2"
    shift 2
    names=("$@")
    [ ${#names[@]} -gt 0 ] || mapfile -t names < <(grep -v '^#' "$here/torch_suite.list")
    results="${GW_PY_SUITE_OUT:-$out.tsv}"
    tmp="$(mktemp -d /tmp/gw-py-suite-XXXXXX)"
    (cd "$tmp" && PYTHONPATH="$build/python" WORLD_SIZE="${GW_PY_SUITE_RANKS:-3}" "$py" -W ignore \
        "$here/torch_suite.py" "$backend" "$results" "${names[@]}" >"$out" 2>&1) || true
    grep -v '^INFO:\|^ERROR:torch\|^WARNING:' "$out" | tail -n 5
    cat "$results"
    ! grep -q $'\t\(fail\|error\)\t' "$results" || { echo "FAIL: tests above failed on $backend"; exit 1; }
    ;;
install)
    tmp="$(mktemp -d /tmp/gw-py-install-XXXXXX)"
    prefix="$tmp/prefix"
    cmake --install "$build" --prefix "$prefix" >/dev/null
    site="$prefix/lib/python3/dist-packages"
    test -f "$site/gradwire/__init__.py" || { echo "FAIL: no gradwire package under $site"; exit 1; }
    # Nothing from the build tree: the installed module finds the installed
    # library by its RUNPATH.
    unset LD_LIBRARY_PATH PYTHONPATH
    cd "$tmp"
    cat >"$tmp/job.py" <<'PY'
import os, sys
import numpy as np
import gradwire
prefix = sys.argv[1]
assert gradwire.__file__.startswith(prefix), gradwire.__file__
assert gradwire._core.__file__.startswith(prefix), gradwire._core.__file__
with gradwire.Comm() as comm:
    x = np.full(100, comm.rank + 1, dtype=np.float64)
    comm.allreduce(x)
    assert np.all(x == comm.size * (comm.size + 1) / 2), x[:3]
    print("installed gradwire %s: sum %g over %d ranks" % (gradwire.__version__, x[0], comm.size))
PY
    PYTHONPATH="$site" "$prefix/bin/gradwire" launch -n 3 --timeout 60 -- "$py" "$tmp/job.py" "$prefix" >"$out" 2>&1 ||
        { cat "$out"; echo "FAIL: the installed package did not run"; exit 1; }
    cat "$out"
    [ "$(grep -c 'sum 6 over 3 ranks' "$out")" -eq 3 ] || { echo "FAIL: not every rank printed its sum"; exit 1; }
    echo "python install test: passed"
    ;;
*)
    echo "usage: run.sh api|gil|fault|install [N TRANSPORT] | torch N MODE | torchfault N MODE [INIT] | parity N | suite BACKEND [NAME...]" >&2
    exit 2
    ;;
esac
