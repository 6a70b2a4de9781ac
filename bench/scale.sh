#!/bin/sh
# bench/scale.sh - the cost of creating a communicator at 8..64 ranks on
# one host (README "Scale"): for each size, transport and connection mode,
# `gradwire launch -n N` runs tests/worker_scale time, which reports the
# maximum over the ranks of the time from before gw_comm_init to the end
# of the first collective (a ring allreduce) and after an alltoall, and
# the file descriptors and resident memory per rank (max/mean).
#
# Usage: bench/scale.sh [BUILD_DIR] [SIZES] [REPEATS]
#   defaults: build "8 16 32 64" 3. Prints the machine load first.
#   GW_SCALE_TRANSPORTS: the GW_TRANSPORT values to run (default "tcp auto";
#   "ib" in a Soft-RoCE VM: scripts/rxe-vm -- bench/scale.sh ...).
set -eu
build=${1:-build}
sizes=${2:-"8 16 32 64"}
repeats=${3:-3}
echo "load: $(cat /proc/loadavg)"
for n in $sizes; do
    for tr in ${GW_SCALE_TRANSPORTS:-tcp auto}; do
        for mode in eager lazy; do
            i=0
            while [ "$i" -lt "$repeats" ]; do
                line=$(GW_TRANSPORT=$tr GW_CONNECT=$mode GW_TIMEOUT_MS=60000 \
                    "$build/gradwire" launch -n "$n" -- "$build/tests/worker_scale" time 2>&1 |
                    grep 'scale:' | sed 's/^\[0\] //') || line="FAILED"
                echo "GW_TRANSPORT=$tr GW_CONNECT=$mode $line"
                i=$((i + 1))
            done
        done
    done
done
echo "load: $(cat /proc/loadavg)"
