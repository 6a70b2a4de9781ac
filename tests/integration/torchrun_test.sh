#!/usr/bin/env bash
# torchrun_test.sh - gradwire under torchrun's elastic agent (Debian's
# python3-torch), no GW_* variable: gw_comm_init_env takes RANK, WORLD_SIZE,
# MASTER_ADDR and MASTER_PORT from it.
#   - static rendezvous (torchrun's default, --master-port): the agent holds
#     its own TCPStore on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True),
#     so gradwire's root must take the port above; 4 ranks, every element
#     checked;
#   - c10d rendezvous: MASTER_PORT is free for gradwire's root; the same.
# torch_elastic.py says why the agent is driven through its API.
# Usage: torchrun_test.sh BUILD_DIR. Exit 0, 1 failed, 77 skipped (no torch
# for /usr/bin/python3: python3-torch, scripts/install-deps.sh test).
set -uo pipefail
BUILD=$(cd "${1:?usage: torchrun_test.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
[ -x $PY ] && $PY -c "import torch.distributed.launcher.api" 2>/dev/null ||
    { echo "SKIP: no torch for $PY (Debian package python3-torch: scripts/install-deps.sh test)"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
failed=0
free_port() { $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
clean=(env -i PATH="$PATH" HOME="${HOME:-/root}"
    ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"}
    ${LD_PRELOAD:+LD_PRELOAD="$LD_PRELOAD"})
for backend in static c10d; do
    port=$(free_port)
    # gradwire-bench joins through gw_comm_init_env, which needs a job
    # token: every rank inherits the one exported before torchrun.
    "${clean[@]}" GW_JOB_TOKEN="torchrun-test-$$-$RANDOM$RANDOM" GW_DEBUG=INFO GW_DEBUG_SUBSYS=init \
        timeout 180 $PY "$HERE/torch_elastic.py" \
        "$backend" "$port" 4 "$BUILD/gradwire-bench" allreduce -b 8 -e 4M -f 8 -n 3 -w 1 -c 1 \
        >"$out" 2>&1
    rc=$?
    want=$port
    [ $backend = static ] && want=$((port + 1))
    if [ $rc -ne 0 ]; then
        echo "FAIL: $backend rendezvous: exit $rc"
        tail -n 20 "$out"
        failed=$((failed + 1))
    elif ! grep -q "# Wrong elements       : 0 OK" "$out" || ! grep -q "# ranks: 4 " "$out"; then
        echo "FAIL: $backend rendezvous: no checked result on 4 ranks"
        tail -n 20 "$out"
        failed=$((failed + 1))
    elif [ $backend = static ] && ! grep -q "torchrun's agent holds its store on MASTER_PORT=$port: the bootstrap root takes port $want" "$out"; then
        echo "FAIL: static rendezvous: the root did not move off the agent's port $port"
        grep -i "root\|store" "$out" | head -5
        failed=$((failed + 1))
    else
        [ $backend = static ] && where="port $want, above the agent's store" || where="MASTER_PORT"
        echo "PASS: torchrun's agent, $backend rendezvous: 4 ranks checked, gradwire's root on $where"
    fi
done
[ $failed -eq 0 ]
