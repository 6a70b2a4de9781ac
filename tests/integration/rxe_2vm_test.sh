#!/usr/bin/env bash
# rxe_2vm_test.sh - gradwire between two hosts over RDMA: two Soft-RoCE VMs
# (scripts/rxe-vm cluster up 2: rxevm0 at 198.18.2.1 and rxevm1 at
# 198.18.2.2, each with rxe0 on a virtio-net link between the two QEMU
# processes), booted once and used by every case. Each rank is started in
# its VM by hand (`rxe-vm cluster exec`) with GW_RANK, GW_SIZE, GW_ROOT
# (rank 0's VM) and a fresh GW_JOB_TOKEN per job, as a user without a
# launcher would; GW_TRANSPORT=auto throughout.
#
# Cases, placements and verbs connection modes:
#   - 2cm: 2 ranks, one per VM, rdma_cm: everything below;
#   - 4block: 4 ranks, two per VM, block placement (0,1 | 2,3), out of
#     band: everything below but p2p;
#   - 4alt: 4 ranks, two per VM, alternating (0,2 | 1,3), rdma_cm, so that
#     every ring neighbour is on the other host: the collectives and the plan;
#   - 2oob (not run by default: 4block covers out of band): 2 ranks, out of
#     band: the collectives, the plan and p2p.
# What runs:
#   - worker_collectives: allreduce with every algorithm (ring, tree, rd),
#     reduce, reduce-scatter, broadcast, allgather, barrier, in several
#     dtypes and ops, sizes from 0 to 1.2 MB (eager, rendezvous and, with
#     GW_IB_QPS=2, striped messages), each result checked exactly against
#     a serial reference and bitwise across ranks;
#   - the plan: GW_DEBUG=INFO must show every rank choosing shared memory
#     for the ranks in its VM and ib for those in the other, nothing else,
#     and the connection mode asked for;
#   - (2cm, 4block) worker_async order: gw_iallreduce calls completed out of order among
#     blocking ones, checked exactly;
#   - (2cm, 4block) worker_compress: gw_allreduce_compressed with every codec (its own
#     checks, and bitwise equal results on every rank);
#   - (2 ranks) gradwire-bench p2p, checked: point-to-point between hosts,
#     0 bytes to 1 MiB, every received byte compared.
#
# It takes about 6.5 minutes on a 2-core machine at load 11-13 (381 s,
# booting the VMs 57 s of it; 2026-12-01).
#
# Usage: rxe_2vm_test.sh [BUILD_DIR]   (default: ./build of the source tree);
# the output is also written to BUILD_DIR/rxe_2vm_test.log.
# Exit status: 0 all passed, 1 a check failed, 77 skipped (no VM possible
# here: QEMU, rdma-core or the VM kernel missing; scripts/install-deps.sh
# installs them), with the reason. GW_RXE_2VM_CASES (a comma list of the
# cases above and "mixed", 4 ranks with VM 1's RDMA device deleted, which
# must meet VM 0 over TCP; default 2cm,4block,4alt,mixed) selects cases;
# GW_RXE_2VM_CLUSTER=DIR runs them in the VMs of `rxe-vm cluster up 2`
# that printed DIR, and leaves them up (for working on the test; boot them
# with --ro of the source tree and of the build, or a rebuild is not seen:
# the VMs cache what they read through their view of this machine's root).
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM="$ROOT/scripts/rxe-vm"
BUILD=$(cd "${1:-$ROOT/build}" 2>/dev/null && pwd) || { echo "skipped: no build directory ${1:-$ROOT/build}"; exit 77; }
for f in gradwire-bench tests/worker_collectives tests/worker_async tests/worker_compress; do
    [ -x "$BUILD/$f" ] || { echo "skipped: $BUILD/$f is not built"; exit 77; }
done
CASES=${GW_RXE_2VM_CASES:-2cm,4block,4alt,mixed}

main() {
    T0=$(date +%s)
    passed=0
    failed=0
    failures=()
    pass() {
        echo "PASS: $* ($(($(date +%s) - T0)) s)"
        passed=$((passed + 1))
    }
    fail() {
        echo "FAIL: $*"
        failed=$((failed + 1))
        failures+=("$*")
    }

    # The VMs have their own empty /tmp: share the sources and the build so
    # that a checkout under /tmp works too.
    local cdir rc
    if [ -n "${GW_RXE_2VM_CLUSTER:-}" ]; then
        cdir=$GW_RXE_2VM_CLUSTER
        "$VM" cluster status --dir "$cdir" || { echo "FAIL: the VMs of $cdir are not up"; return 1; }
    else
        cdir=$("$VM" cluster up --no-install --lifetime 900 --ro "$ROOT" --ro "$BUILD" 2)
        rc=$?
        if [ $rc -eq 77 ]; then
            echo "skipped: scripts/rxe-vm cannot start VMs here (reason above)"
            return 77
        fi
        [ $rc -eq 0 ] || { echo "FAIL: the two VMs did not boot (rxe-vm cluster up: status $rc)"; return 1; }
        # shellcheck disable=SC2064
        trap "'$VM' cluster down --dir '$cdir'" EXIT
    fi
    export GW_RXE_CLUSTER=$cdir
    SHARED=$cdir/shared
    echo "   two VMs up in $(($(date +%s) - T0)) s"

    # job N PLACEMENT -- CMD ARG...: ranks 0..N-1, rank r in VM r*2/N
    # (block) or r%2 (alt); an argument @DIR@ becomes the job's directory
    # (seen by all ranks), where rank r's output goes to log<r>. Sets
    # JOB_DIR and JOB_FAILED (the ranks that exited non-zero, with status).
    JOB=0
    job() {
        local n=$1 place=$2 r vm
        shift 3
        JOB=$((JOB + 1))
        JOB_DIR=$SHARED/job$JOB
        mkdir -p "$JOB_DIR"
        local port=$((29600 + JOB)) token args=() a pids=()
        token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
        for a in "$@"; do args+=("${a//@DIR@/$JOB_DIR}"); done
        for r in $(seq 0 $((n - 1))); do
            if [ "$place" = block ]; then vm=$((r * 2 / n)); else vm=$((r % 2)); fi
            GW_RANK=$r GW_SIZE=$n GW_ROOT=198.18.2.1:$port GW_JOB_TOKEN=$token GW_TIMEOUT_MS=60000 \
                "$VM" cluster exec --timeout 200 "$vm" -- "${args[@]}" >"$JOB_DIR/log$r" 2>&1 &
            pids+=($!)
        done
        JOB_FAILED=
        for r in $(seq 0 $((n - 1))); do
            wait "${pids[$r]}" || JOB_FAILED="$JOB_FAILED $r($?)"
        done
    }
    show_logs() { # the tail of every rank's log
        local f
        for f in "$JOB_DIR"/log*; do
            echo "   --- ${f##*/}"
            tail -n 8 "$f" | sed 's/^/   /'
        done
    }
    same_results() { # N: rank files 0..N-1 in JOB_DIR exist and are bitwise equal
        local r
        [ -s "$JOB_DIR/rank0" ] || { echo "no results written"; return 1; }
        for r in $(seq 1 $(($1 - 1))); do
            cmp -s "$JOB_DIR/rank0" "$JOB_DIR/rank$r" || { echo "rank $r's results differ bitwise from rank 0's"; return 1; }
        done
    }
    # The plan rank r must log: shm to the ranks in its VM, ib to the others.
    expected_plan() { # N PLACEMENT R
        local n=$1 place=$2 r=$3 p mine vm_r vm_p shm=() ib=()
        for p in $(seq 0 $((n - 1))); do
            [ "$p" = "$r" ] && continue
            if [ "$place" = block ]; then vm_r=$((r * 2 / n)) vm_p=$((p * 2 / n)); else vm_r=$((r % 2)) vm_p=$((p % 2)); fi
            if [ "$vm_r" = "$vm_p" ]; then shm+=("$p"); else ib+=("$p"); fi
        done
        mine=
        [ ${#shm[@]} -gt 0 ] && mine="shm to rank$([ ${#shm[@]} -gt 1 ] && echo s) $(IFS=,; echo "${shm[*]}")"
        [ ${#ib[@]} -gt 0 ] && mine="$mine${mine:+; }ib to rank$([ ${#ib[@]} -gt 1 ] && echo s) $(IFS=,; echo "${ib[*]}")"
        echo "$mine"
    }

    # case NAME N PLACEMENT CM FULL (0: collectives and p2p only)
    run_case() {
        local name=$1 n=$2 place=$3 cm=$4 full=$5 r bad want got
        echo "== $name"
        export GW_IB_CM=$cm GW_TRANSPORT=auto
        # Collectives, checked; the plan and connection mode from the log.
        GW_DEBUG=INFO GW_IB_QPS=2 job "$n" "$place" -- "$BUILD/tests/worker_collectives" @DIR@ \
            0,7,4099,300000 all float32 sum all
        if [ -n "$JOB_FAILED" ]; then
            fail "$name: collectives: ranks$JOB_FAILED failed"
            show_logs
        elif ! bad=$(same_results "$n"); then
            fail "$name: collectives: $bad"
        else
            pass "$name: collectives: $(wc -l <"$JOB_DIR/rank0") results (allreduce ring/tree/rd, reduce, reduce_scatter, broadcast, allgather, barrier), exact and bitwise equal on $n ranks"
        fi
        bad=
        for r in $(seq 0 $((n - 1))); do
            want=$(expected_plan "$n" "$place" "$r")
            got=$(sed -n "s/.* select INFO rank $r: \(.*\)$/\1/p" "$JOB_DIR/log$r" | head -1)
            [ "$got" = "$want" ] || bad="$bad rank $r: '$got', not '$want';"
            if [ "$cm" = rdmacm ]; then want="connecting through the RDMA CM"; else want="connecting out of band via TCP"; fi
            grep -q "ib INFO using rxe0.*$want" "$JOB_DIR/log$r" || bad="$bad rank $r did not log '$want';"
        done
        if [ -n "$bad" ]; then
            fail "$name: GW_TRANSPORT=auto plan:$bad"
        else
            pass "$name: GW_TRANSPORT=auto chose shm inside each VM and ib between them, $cm ($(sed -n 's/.* select INFO \(rank 0: .*\)$/\1/p' "$JOB_DIR/log0" | head -1))"
        fi

        # What the compressed and non-blocking calls add does not depend on
        # the placement: they run in 2cm and 4block only.
        if [ "$full" = 1 ]; then
            job "$n" "$place" -- "$BUILD/tests/worker_async" order
            bad=
            for r in $(seq 0 $((n - 1))); do
                grep -q "rank $r: ok" "$JOB_DIR/log$r" || bad="$bad $r"
            done
            if [ -n "$JOB_FAILED$bad" ]; then
                fail "$name: gw_iallreduce: ranks$JOB_FAILED failed, ranks$bad did not say ok"
                show_logs
            else
                pass "$name: gw_iallreduce out of order among blocking calls, exact on $n ranks"
            fi

            job "$n" "$place" -- "$BUILD/tests/worker_compress" @DIR@ all 0,1,7,1001,4096
            if [ -n "$JOB_FAILED" ]; then
                fail "$name: compressed allreduce: ranks$JOB_FAILED failed"
                show_logs
            elif ! bad=$(same_results "$n"); then
                fail "$name: compressed allreduce: $bad"
            else
                pass "$name: compressed allreduce, every codec: $(wc -l <"$JOB_DIR/rank0") results, checked and bitwise equal on $n ranks"
            fi
        fi

        [ "$n" = 2 ] || return 0
        job 2 "$place" -- "$BUILD/gradwire-bench" p2p -b 0 -e 1M -f 64 -n 3 -w 1 -c 1
        got=$(grep -o 'wrong bytes: [0-9]*' "$JOB_DIR/log0" | head -1)
        if [ -n "$JOB_FAILED" ] || [ "$got" != "wrong bytes: 0" ]; then
            fail "$name: gradwire-bench p2p, checked: ranks$JOB_FAILED failed, '$got'"
            show_logs
        else
            pass "$name: point-to-point between the VMs, 0 B to 1 MiB, checked: $got"
        fi
    }

    case ",$CASES," in *,2cm,*) run_case "2 ranks, one per VM, rdma_cm" 2 block rdmacm 1 ;; esac
    case ",$CASES," in *,2oob,*) run_case "2 ranks, one per VM, out of band" 2 block oob 0 ;; esac
    case ",$CASES," in *,4block,*) run_case "4 ranks, two per VM (0,1 | 2,3), out of band" 4 block oob 1 ;; esac
    case ",$CASES," in *,4alt,*) run_case "4 ranks, two per VM (0,2 | 1,3), rdma_cm" 4 alt rdmacm 0 ;; esac

    # A cluster where one host has no RDMA (VM 1's rxe0 deleted for the
    # case): auto mode meets it over TCP, shm inside each VM.
    if case ",$CASES," in *,mixed,*) true ;; *) false ;; esac; then
        echo "== 4 ranks, two per VM, VM 1 without RDMA"
        "$VM" cluster exec --timeout 30 1 -- rdma link delete rxe0
        GW_DEBUG=INFO GW_TRANSPORT=auto job 4 block -- "$BUILD/tests/worker_collectives" @DIR@ \
            0,7,4099,300000 ring,tree float32 sum allreduce,broadcast,allgather
        local bad=
        if [ -n "$JOB_FAILED" ]; then
            fail "mixed fabrics: ranks$JOB_FAILED failed"
            show_logs
        elif ! bad=$(same_results 4); then
            fail "mixed fabrics: $bad"
        else
            for r in 0 1 2 3; do
                local want got
                if [ $r -lt 2 ]; then want="shm to rank $((1 - r)); tcp to ranks 2,3"; else want="shm to rank $((5 - r)); tcp to ranks 0,1"; fi
                got=$(sed -n "s/.* select INFO rank $r: \(.*\)$/\1/p" "$JOB_DIR/log$r" | head -1)
                [ "$got" = "$want" ] || bad="$bad rank $r: '$got', not '$want';"
            done
            if [ -n "$bad" ]; then
                fail "mixed fabrics: plan:$bad"
            else
                pass "mixed fabrics: VM 0 with RDMA and VM 1 without meet over TCP, shm inside each, $(wc -l <"$JOB_DIR/rank0") results exact and bitwise equal"
            fi
        fi
        "$VM" cluster exec --timeout 30 1 -- rdma link add rxe0 type rxe netdev eth0
    fi

    echo "== $passed passed, $failed failed ($(($(date +%s) - T0)) s with booting)"
    for f in "${failures[@]+"${failures[@]}"}"; do
        echo "   failed: $f"
    done
    [ $failed -eq 0 ] && [ $passed -gt 0 ]
}

set -o pipefail
main 2>&1 | tee "$BUILD/rxe_2vm_test.log"
exit "${PIPESTATUS[0]}"
