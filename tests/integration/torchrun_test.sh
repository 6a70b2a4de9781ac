#!/usr/bin/env bash
# torchrun_test.sh - gradwire under torchrun's elastic agent (Debian's
# python3-torch), no GW_* variable: gw_comm_init_env takes RANK, WORLD_SIZE,
# MASTER_ADDR and MASTER_PORT from it.
#   - static rendezvous (torchrun's default, --master-port): the agent holds
#     its own TCPStore on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True),
#     so gradwire's root must take the port above; 4 ranks, every element
#     checked;
#   - c10d rendezvous: MASTER_PORT is free for gradwire's root; the same.
# Each runs twice: through torchrun's own command line, as
# `python3 -m gradwire.torchrun` (python/gradwire/torchrun.py: torchrun's
# main after repairing its --redirects/--tee parsing, which fails on Python
# 3.11 with "'NoneType' object has no attribute 'get'"), and through the
# agent's API (torch_elastic.py). A last case checks that repair: the
# Std.from_str that torchrun parses its defaults with gives real members.
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
# free_port: a port P with P and P + 1 both free (static rendezvous puts
# gradwire's root on P + 1), below the kernel's ephemeral range, so that
# no outgoing connection of a test running beside this one takes P + 1
# between this check and the root's bind (a port from bind(0) is in that
# range, and once its P + 1 was: "Address already in use").
free_port() {
    $PY - <<'PORTS'
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
# Below the ephemeral range where it leaves room (Debian's starts at 32768);
# else anywhere, still with both ports checked free.
first, end = (10000, low - 2) if low - 2 > 10000 else (1024, 65534)
for _ in range(200):
    p = random.randrange(first, end)
    socks = []
    try:
        for q in (p, p + 1):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", q))
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(p)
    break
else:
    raise SystemExit("torchrun_test: no two free ports in a row in %d..%d" % (first, end))
PORTS
}
clean=(env -i PATH="$PATH" HOME="${HOME:-/root}"
    ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"}
    ${LD_PRELOAD:+LD_PRELOAD="$LD_PRELOAD"})
for how in torchrun api; do
for backend in static c10d; do
    port=$(free_port)
    if [ $how = torchrun ]; then
        # torchrun's own command line, as the docs give it.
        if [ $backend = static ]; then
            launcher=(-m gradwire.torchrun --nproc_per_node 4 --master_addr 127.0.0.1 --master_port "$port")
        else
            launcher=(-m gradwire.torchrun --nproc_per_node 4 --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$port")
        fi
        launcher+=(--max_restarts 0 --monitor_interval 0.2 --no_python)
    else
        launcher=("$HERE/torch_elastic.py" "$backend" "$port" 4)
    fi
    # gradwire-bench joins through gw_comm_init_env, which needs a job
    # token: every rank inherits the one exported before torchrun.
    "${clean[@]}" PYTHONPATH="$BUILD/python" GW_JOB_TOKEN="torchrun-test-$$-$RANDOM$RANDOM" GW_DEBUG=INFO \
        GW_DEBUG_SUBSYS=init timeout 180 $PY "${launcher[@]}" \
        "$BUILD/gradwire-bench" allreduce -b 8 -e 4M -f 8 -n 3 -w 1 -c 1 >"$out" 2>&1
    rc=$?
    want=$port
    [ $backend = static ] && want=$((port + 1))
    if [ $rc -ne 0 ]; then
        echo "FAIL: $how, $backend rendezvous: exit $rc"
        tail -n 20 "$out"
        failed=$((failed + 1))
    elif ! grep -q "# Wrong elements       : 0 OK" "$out" || ! grep -q "# ranks: 4 " "$out"; then
        echo "FAIL: $how, $backend rendezvous: no checked result on 4 ranks"
        tail -n 20 "$out"
        failed=$((failed + 1))
    elif [ $backend = static ] && ! grep -q "torchrun's agent holds its store on MASTER_PORT=$port: the bootstrap root takes port $want" "$out"; then
        echo "FAIL: $how, static rendezvous: the root did not move off the agent's port $port"
        grep -i "root\|store" "$out" | head -5
        failed=$((failed + 1))
    else
        [ $backend = static ] && where="port $want, above the agent's store" || where="MASTER_PORT"
        echo "PASS: $how, $backend rendezvous: 4 ranks checked, gradwire's root on $where"
    fi
done
done
# The repair itself: after it, torchrun's parser gives members for "0" and
# "3" and for a mapping (each was None on Python 3.11 before it).
if PYTHONPATH="$BUILD/python" $PY -c '
from gradwire.torchrun import repair_std
from torch.distributed.elastic.multiprocessing.api import Std
needed = repair_std()
assert Std.from_str("0") is Std.NONE and Std.from_str("3") is Std.ALL, "from_str(0) is %r" % (Std.from_str("0"),)
assert Std.from_str("0:3,1:0") == {0: Std.ALL, 1: Std.NONE}
print("repair needed: %s" % needed)'; then
    echo "PASS: torchrun's --redirects/--tee parsing gives Std members"
else
    echo "FAIL: torchrun's --redirects/--tee parsing"
    failed=$((failed + 1))
fi
[ $failed -eq 0 ]
