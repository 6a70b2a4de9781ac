#!/usr/bin/env bash
# rxe_2vm_test.sh - gradwire between two hosts over RDMA: two Soft-RoCE VMs
# (scripts/rxe-vm cluster up --rails 2 2: rxevm0 at 198.18.2.1 and rxevm1
# at 198.18.2.2, each with rxe0 on a virtio-net link between the two QEMU
# processes, and rxe1 on a second link, 198.18.3.x), booted once and used
# by every case; the cases use rxe0 alone (GW_IB_HCA=rxe0) but 2cm and
# raildown, which use both rails (multi-rail, transport/ib/ib_rails.c). Each rank is started in
# its VM by hand (`rxe-vm cluster exec`) with GW_RANK, GW_SIZE, GW_ROOT
# (rank 0's VM) and a fresh GW_JOB_TOKEN per job, as a user without a
# launcher would; GW_TRANSPORT=auto throughout.
#
# Cases, placements and verbs connection modes:
#   - 2cm: 2 ranks, one per VM, rdma_cm, two rails (every rank must say
#     so, and VM 0's rxe1 must have sent packets): everything below;
#   - 4block: 4 ranks, two per VM, block placement (0,1 | 2,3), out of
#     band: everything below but p2p and the compressed allreduce;
#   - 4alt (not run by default: 2cm and 4block cover its code, and CI's
#     time is better spent elsewhere): 4 ranks, two per VM, alternating
#     (0,2 | 1,3), rdma_cm, so that every ring neighbour is on the other
#     host: the collectives and the plan;
#   - 2oob (not run by default: 4block covers out of band): 2 ranks, out of
#     band: the collectives, the plan and p2p.
# What runs:
#   - worker_collectives: allreduce with every algorithm (ring, tree, rd),
#     reduce, reduce-scatter, broadcast, allgather, barrier, in several
#     dtypes and ops, sizes from 0 to 1.2 MB on 2 ranks, 280 KB on 4
#     (eager, rendezvous and, with GW_IB_QPS=2, striped messages; see
#     run_case), each result checked exactly against
#     a serial reference and bitwise across ranks;
#   - the plan: GW_DEBUG=INFO must show every rank choosing shared memory
#     for the ranks in its VM and ib for those in the other, nothing else,
#     and the connection mode asked for;
#   - (2cm, 4block) worker_async order: gw_iallreduce calls completed out of order among
#     blocking ones, checked exactly;
#   - (2cm) worker_compress: gw_allreduce_compressed with every codec (its own
#     checks, and bitwise equal results on every rank);
#   - (2 ranks) gradwire-bench p2p, checked: point-to-point between hosts,
#     0 bytes to 1 MiB, every received byte compared.
# Then, in the same VMs: "train" (two epochs of gradwire-train on 4 ranks,
# two per VM, equal bit for bit to the same run over TCP; "train2" adds
# the 2-rank run), "faults" (a rank
# SIGKILLed, a QP forced into error: every survivor fails naming the rank
# at fault within GW_TIMEOUT_MS and a slack), "perf" (rxe_2vm_perf.sh:
# the bandwidth target against ib_write_bw; not run by default: it judges
# the machine's speed, which belongs to the results campaign "soft-roce",
# bench/soft_roce.sh, not to a test), "mixed" (below), "raildown" (VM 1's
# second link taken down under a two-rail job: both ranks fail naming rank
# 1, rank 1 naming its port rxe1:1; it leaves that link down) and, last,
# "linkdown" (VM 1's link taken down; it leaves the link down).
#
# The cases before "train" took about 6.5 minutes on a 2-core machine at
# load 11-13 (381 s, booting the VMs 57 s of it; 2026-12-01), with 4alt
# and the 2-rank training run, which CI no longer runs.
#
# Usage: rxe_2vm_test.sh [BUILD_DIR]   (default: ./build of the source tree);
# the output is also written to BUILD_DIR/rxe_2vm_test.log.
# Exit status: 0 all passed, 1 a check failed, 77 skipped (no VM possible
# here: QEMU, rdma-core or the VM kernel missing; scripts/install-deps.sh
# installs them), with the reason. GW_RXE_2VM_CASES (a comma list of the
# cases above and "mixed", 4 ranks with VM 1's RDMA device deleted, which
# must meet VM 0 over TCP; default 2cm,4block,train,faults,mixed,raildown,
# linkdown)
# selects cases;
# GW_RXE_2VM_CLUSTER=DIR runs them in the VMs of `rxe-vm cluster up 2`
# that printed DIR, and leaves them up (for working on the test; boot them
# with --ro of the source tree and of the build, or a rebuild is not seen:
# the VMs cache what they read through their view of this machine's root).
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM="$ROOT/scripts/rxe-vm"
BUILD=$(cd "${1:-$ROOT/build}" 2>/dev/null && pwd) || { echo "skipped: no build directory ${1:-$ROOT/build}"; exit 77; }
for f in gradwire-bench tests/worker_collectives tests/worker_async tests/worker_compress tests/worker_trial optimizer/gradwire-train; do
    [ -x "$BUILD/$f" ] || { echo "skipped: $BUILD/$f is not built"; exit 77; }
done
CASES=${GW_RXE_2VM_CASES:-2cm,4block,train,faults,mixed,raildown,linkdown}

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
        cdir=$("$VM" cluster up --no-install --lifetime 2700 --rails 2 --ro "$ROOT" --ro "$BUILD" 2)
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
    # Every VM has two rails, rxe0 on eth0 and rxe1 on eth1, each on a link
    # of its own; a case uses rxe0 alone unless it names both.
    export GW_IB_HCA=rxe0
    echo "   two VMs up in $(($(date +%s) - T0)) s"

    # job N PLACEMENT -- CMD ARG...: ranks 0..N-1, rank r in VM r*2/N
    # (block) or r%2 (alt); an argument @DIR@ becomes the job's directory
    # (seen by all ranks), where rank r's output goes to log<r>. Sets
    # JOB_DIR and JOB_FAILED (the ranks that exited non-zero, with status).
    # job_start and job_wait are its halves, for the fault cases, which
    # act on the running job in between (JOB_PIDS, JOB_N); JOB_TIMEOUT_MS
    # (default 60000) is the job's GW_TIMEOUT_MS, and RANK_ENV_<r>="VAR=V
    # ..." adds variables to rank r's environment alone.
    JOB=0
    job_start() {
        local n=$1 place=$2 r vm e
        shift 3
        JOB=$((JOB + 1))
        JOB_DIR=$SHARED/job$JOB
        JOB_N=$n
        mkdir -p "$JOB_DIR"
        local port=$((29600 + JOB)) token args=() a
        token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
        for a in "$@"; do args+=("${a//@DIR@/$JOB_DIR}"); done
        JOB_PIDS=()
        for r in $(seq 0 $((n - 1))); do
            if [ "$place" = block ]; then vm=$((r * 2 / n)); else vm=$((r % 2)); fi
            e=RANK_ENV_$r
            # shellcheck disable=SC2086 # the rank's variables, one word each
            env ${!e:-} GW_RANK=$r GW_SIZE=$n GW_ROOT=198.18.2.1:$port GW_JOB_TOKEN=$token \
                GW_TIMEOUT_MS=${JOB_TIMEOUT_MS:-60000} \
                "$VM" cluster exec --timeout 200 "$vm" -- "${args[@]}" >"$JOB_DIR/log$r" 2>&1 &
            JOB_PIDS+=($!)
        done
    }
    job_wait() {
        local r
        JOB_FAILED=
        for r in $(seq 0 $((JOB_N - 1))); do
            wait "${JOB_PIDS[$r]}" || JOB_FAILED="$JOB_FAILED $r($?)"
        done
    }
    job() {
        job_start "$@"
        job_wait
    }
    show_logs() { # every rank's first ERROR line (the cause) and its log's tail
        local f
        for f in "$JOB_DIR"/log*; do
            echo "   --- ${f##*/}"
            grep -m1 ' ERROR ' "$f" | sed 's/^/   first error: /'
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

    rxe1_sent() { # VM: packets rxe1 of VM sent so far
        "$VM" cluster exec --timeout 30 "$1" -- cat /sys/class/infiniband/rxe1/ports/1/hw_counters/sent_pkts
    }

    # case NAME N PLACEMENT CM FULL (0: collectives and p2p only; 1: and
    # gw_iallreduce; 2: and the compressed allreduce); with GW_IB_HCA
    # naming both devices, every rank has two rails: each rank must say so,
    # and rxe1 must carry packets.
    run_case() {
        local name=$1 n=$2 place=$3 cm=$4 full=$5 r bad want got sent0
        echo "== $name"
        export GW_IB_CM=$cm GW_TRANSPORT=auto
        local rails=1
        [ "$GW_IB_HCA" = rxe0,rxe1 ] && rails=2 sent0=$(rxe1_sent 0)
        # Collectives, checked; the plan and connection mode from the log.
        # Sizes: 0, eager (7), rendezvous (4099) and striped over the two
        # QPs (parts of at least 128 KiB): 140000 floats (560 KB) on 2
        # ranks, where the ring's chunks (280 KB) are striped too; 70000
        # (280 KB) on 4, where whole messages (broadcast, reduce, the tree)
        # are and the ring's chunks (70 KB) are not. The VMs' CPUs are
        # emulated (TCG), and Soft-RoCE computes every packet's CRC on
        # them: 300000 on 4 ranks took 89 s of the test's 280 on CI's two
        # cores, for the same paths, and on 2 ranks 17 s a job against 10
        # s for 140000.
        local sizes=0,7,4099,140000
        [ "$n" -gt 2 ] && sizes=0,7,4099,70000
        GW_DEBUG=INFO GW_IB_QPS=2 job "$n" "$place" -- "$BUILD/tests/worker_collectives" @DIR@ \
            "$sizes" all float32 sum all
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
            [ $rails = 1 ] || grep -q "ib INFO 2 rails: rxe0:1, rxe1:1" "$JOB_DIR/log$r" ||
                bad="$bad rank $r did not log its 2 rails;"
        done
        if [ $rails = 2 ]; then
            got=$(rxe1_sent 0)
            [ -n "$got" ] && [ -n "$sent0" ] && [ $((got - sent0)) -gt 1000 ] ||
                bad="$bad VM 0's rxe1 sent $((${got:-0} - ${sent0:-0})) packets during the collectives;"
        fi
        if [ -n "$bad" ]; then
            fail "$name: GW_TRANSPORT=auto plan:$bad"
        else
            pass "$name: GW_TRANSPORT=auto chose shm inside each VM and ib between them, $cm ($(sed -n 's/.* select INFO \(rank 0: .*\)$/\1/p' "$JOB_DIR/log0" | head -1))$([ $rails = 2 ] && echo ", 2 rails, VM 0's rxe1 sent $((got - sent0)) packets")"
        fi

        # What the compressed and non-blocking calls add does not depend on
        # the placement: they run in 2cm and 4block only, the compressed
        # allreduce in 2cm only (its codecs and algorithm are the same over
        # any transport, and test_compress_tcp runs them on 4 ranks; over
        # verbs they add the messages 2cm sends).
        if [ "$full" -ge 1 ]; then
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

        fi
        if [ "$full" -ge 2 ]; then
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

    # 2cm over two rails (multi-rail between hosts, transport/ib/ib_rails.c):
    # messages of 128 KiB and more cut across rxe0 and rxe1, smaller ones
    # dealt to them in turn; the other cases run on rxe0 alone.
    case ",$CASES," in *,2cm,*) GW_IB_HCA=rxe0,rxe1 run_case "2 ranks, one per VM, rdma_cm, two rails" 2 block rdmacm 2 ;; esac
    case ",$CASES," in *,2oob,*) run_case "2 ranks, one per VM, out of band" 2 block oob 0 ;; esac
    case ",$CASES," in *,4block,*) run_case "4 ranks, two per VM (0,1 | 2,3), out of band" 4 block oob 1 ;; esac
    case ",$CASES," in *,4alt,*) run_case "4 ranks, two per VM (0,2 | 1,3), rdma_cm" 4 alt rdmacm 0 ;; esac

    # Two epochs of `gradwire train` over verbs between the VMs, and the
    # same run with GW_TRANSPORT=tcp in the same VMs: the trainer is
    # deterministic across transports (the algorithms, hence the order of
    # every addition, do not depend on the transport; seen on shm against
    # tcp too), so the final weights must be equal bit for bit, and so the
    # reported loss and accuracy. Both runs inside the VMs: the VMs' CPU
    # (QEMU's qemu64, OpenBLAS's Prescott kernels) rounds a matrix product
    # differently from this machine's.
    run_train() { # N PLACEMENT
        local n=$1 place=$2 tr bad= r want got
        echo "== gradwire train, $n ranks ($place placement): verbs against tcp"
        for tr in auto tcp; do
            GW_DEBUG=INFO GW_TRANSPORT=$tr GW_IB_CM=rdmacm job "$n" "$place" -- \
                "$BUILD/optimizer/gradwire-train" --data synthetic --synthetic 1200,400,32,10,1.5 \
                --hidden 32,16 --batch 48 --lr 0.1 --epochs 2 --bucket-kb 2 --seed 3 \
                --save-weights @DIR@/weights.bin --json @DIR@/train.json --no-progress
            if [ -n "$JOB_FAILED" ]; then
                fail "train, $n ranks, GW_TRANSPORT=$tr: ranks$JOB_FAILED failed"
                show_logs
                return
            fi
            eval "TRAIN_$tr=\$JOB_DIR"
        done
        # The verbs run really was over verbs between the VMs.
        for r in $(seq 0 $((n - 1))); do
            want=$(expected_plan "$n" "$place" "$r")
            got=$(sed -n "s/.* select INFO rank $r: \(.*\)$/\1/p" "$TRAIN_auto/log$r" | head -1)
            [ "$got" = "$want" ] || bad="$bad rank $r's plan '$got', not '$want';"
        done
        final() { # DIR: "loss L test_acc A" of the last epoch in DIR/train.json
            sed -n 's/.*"epoch": 2, "loss": \([0-9.e+-]*\),.*"test_acc": \([0-9.e+-]*\),.*/loss \1 test_acc \2/p' "$1/train.json"
        }
        local fa ft
        fa=$(final "$TRAIN_auto") ft=$(final "$TRAIN_tcp")
        [ -n "$fa" ] || bad="$bad no epoch 2 in the verbs run's report;"
        [ "$fa" = "$ft" ] || bad="$bad verbs run: '$fa', tcp run: '$ft';"
        cmp -s "$TRAIN_auto/weights.bin" "$TRAIN_tcp/weights.bin" ||
            bad="$bad the final weights differ between verbs and tcp;"
        # It learned something: 10 classes, chance is 10%.
        awk -v a="${fa##* }" 'BEGIN {exit !(a >= 0.5)}' || bad="$bad test accuracy ${fa##* } after 2 epochs;"
        if [ -n "$bad" ]; then
            fail "train, $n ranks:$bad"
        else
            pass "train, $n ranks ($place): 2 epochs over verbs between the VMs equal to the tcp run bit for bit (weights; $fa)"
        fi
    }

    # Faults between the hosts, each on a fresh job of worker_trial (checked
    # collectives in a loop until one fails) with GW_TIMEOUT_MS=30000 (it
    # bounds the join too, and at load 27 a rank took more than 10 s to
    # reach the root in the other VM): every
    # rank still running must end with an error, no wrong result, naming
    # the rank at fault (gw_comm_culprit, as the TCP fault tests check it),
    # within GW_TIMEOUT_MS and a slack for the loaded VMs (FAULT_SLACK_S),
    # measured here from the fault to the end of the job.
    FAULT_TIMEOUT_MS=30000 FAULT_SLACK_S=20
    fault_ready() { # wait until every rank of the job said it joined
        local r t p alive
        for t in $(seq 600); do
            sleep 0.5
            alive=0
            for p in "${JOB_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
            [ "$alive" = 1 ] || return 1
            for r in $(seq 0 $((JOB_N - 1))); do
                grep -q '^GWTRIAL ready' "$JOB_DIR/log$r" 2>/dev/null || continue 2
            done
            sleep 1.5 # into the collectives
            return 0
        done
        return 1
    }
    # fault_check NAME CULPRIT T0 SURVIVORS...: waits for the end lines of
    # the ranks that survived (the time their error came back is when the
    # last of them appeared here), then for the job's processes, and
    # checks the lines.
    fault_check() {
        local name=$1 culprit=$2 t0=$3 r line bad= took= t alive p
        shift 3
        local bound=1
        [ -n "$t0" ] || { bound=0; t0=$(date +%s); }
        for t in $(seq $(((FAULT_TIMEOUT_MS / 1000 + FAULT_SLACK_S + 60) * 4))); do
            alive=0
            for p in "${JOB_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
            for r in "$@"; do
                grep -q '^GWTRIAL end' "$JOB_DIR/log$r" 2>/dev/null || { [ "$alive" = 1 ] && { sleep 0.25; continue 2; }; }
            done
            took=$(($(date +%s) - t0))
            break
        done
        local exited
        if [ -n "${FAULT_LEAVE_RUNNING:-}" ]; then
            exited="left to the VMs' shutdown"
        else
            job_wait
            exited="exited $(($(date +%s) - t0)) s after it"
        fi
        for r in "$@"; do
            line=$(grep '^GWTRIAL end' "$JOB_DIR/log$r" | head -1)
            case "$line" in
            '') bad="$bad rank $r printed no end line;" ;;
            *" status=GW_OK "*) bad="$bad rank $r ended without an error: $line;" ;;
            *" culprit=$culprit "*) ;;
            *) bad="$bad rank $r blames another rank than $culprit: $line;" ;;
            esac
            case "$line" in *" wrong=0 "* | '') ;; *) bad="$bad rank $r got wrong results: $line;" ;; esac
        done
        [ "$bound" = 0 ] || { [ -n "$took" ] && [ "$took" -le $((FAULT_TIMEOUT_MS / 1000 + FAULT_SLACK_S)) ]; } ||
            bad="$bad the survivors' errors came ${took:-never} s after the fault (GW_TIMEOUT_MS $FAULT_TIMEOUT_MS, slack $FAULT_SLACK_S s);"
        if [ -n "$bad" ]; then
            fail "$name:$bad"
            show_logs
        else
            local when="$took s after the fault, $exited"
            [ "$bound" = 1 ] || when="their failing calls took $(for r in "$@"; do sed -n 's/^GWTRIAL end.* call_ms=\([0-9]*\).*/\1/p' "$JOB_DIR/log$r"; done | paste -sd, -) ms"
            pass "$name: ranks $* failed naming rank $culprit, $when ($(for r in "$@"; do grep '^GWTRIAL end' "$JOB_DIR/log$r" | sed 's/.*\(status=[^ ]*\).*/\1/'; done | sort | uniq -c | sed 's/^ *\([0-9]*\) /\1x /' | paste -sd, -))"
        fi
    }
    run_faults() {
        local t0 pid r ms
        echo "== faults between the VMs (GW_TIMEOUT_MS=$FAULT_TIMEOUT_MS)"
        export JOB_TIMEOUT_MS=$FAULT_TIMEOUT_MS GW_TRIAL_MAX_MS=120000
        # 1. Rank 2 (in VM 1, beside rank 3 on shared memory) is SIGKILLed
        # from outside in the middle of the collectives, as a crash or the
        # OOM killer would; rdma_cm.
        GW_IB_CM=rdmacm job_start 4 block -- bash -c 'echo $$ >"$0/pid$GW_RANK"; exec "$@"' @DIR@ \
            "$BUILD/tests/worker_trial"
        if fault_ready; then
            pid=$(cat "$JOB_DIR/pid2")
            t0=$(date +%s)
            "$VM" cluster exec --timeout 30 1 -- kill -KILL "$pid"
            fault_check "a rank SIGKILLed during the collectives (4 ranks, rank 2 in VM 1)" 2 "$t0" 0 1 3
            case "$JOB_FAILED" in *" 2(137)"*) ;; *) fail "SIGKILL: rank 2 did not die of it (exits:$JOB_FAILED)" ;; esac
        else
            job_wait
            fail "SIGKILL: the job did not form"
            show_logs
        fi

        # 2. A QP forced into the error state (GW_IB_TEST_QP_ERROR, a
        # test-only hook: after 40 messages rank 1 moves its QP to rank 0
        # into IBV_QPS_ERR, as a NIC does on a fatal QP error, and the
        # work requests on it complete flushed); out of band. The moment
        # is not known here: the bound is on each rank's failing call
        # (call_ms).
        RANK_ENV_1="GW_IB_TEST_QP_ERROR=40" GW_IB_CM=oob job_start 2 block -- "$BUILD/tests/worker_trial"
        fault_check "a QP forced into the error state (2 ranks, rank 1's QP to rank 0)" 1 "" 0 1
        grep -q 'GW_IB_TEST_QP_ERROR.*moved into the error state' "$JOB_DIR/log1" ||
            fail "QP error: rank 1 did not force its QP into the error state"
        for r in 0 1; do
            ms=$(sed -n 's/^GWTRIAL end.* call_ms=\([0-9]*\).*/\1/p' "$JOB_DIR/log$r")
            [ -n "$ms" ] && [ "$ms" -le $((FAULT_TIMEOUT_MS + FAULT_SLACK_S * 1000)) ] ||
                fail "QP error: rank $r's failing call took '$ms' ms"
        done
        unset JOB_TIMEOUT_MS GW_TRIAL_MAX_MS
    }

    # 3. VM 1's link taken down (`ip link set eth0 down` inside it: rxe0's
    # port goes down with it) in the middle of the collectives; rdma_cm.
    # Rank 1 sees its own port fail and names itself, rank 0 stops hearing
    # from rank 1 and names it. This case runs last and leaves the link
    # down: in Debian's 6.1 kernel, with the link up again the RDMA CM
    # between the VMs no longer connected (60 s; out-of-band verbs did),
    # and deleting rxe0 to add it afresh panicked the kernel
    # (rxe_skb_tx_dtor).
    # Rank 0 finds rank 1 gone only by the timeout, so this job's
    # GW_TIMEOUT_MS is 10 s, and the join keeps the 30 s it needs
    # (GW_JOIN_TIMEOUT_MS; the other cases find their faults at once).
    run_linkdown() {
        local t0 FAULT_TIMEOUT_MS=10000
        echo "== VM 1's link down (GW_TIMEOUT_MS=$FAULT_TIMEOUT_MS)"
        export JOB_TIMEOUT_MS=$FAULT_TIMEOUT_MS GW_TRIAL_MAX_MS=120000
        export RANK_ENV_0="GW_JOIN_TIMEOUT_MS=30000" RANK_ENV_1="GW_JOIN_TIMEOUT_MS=30000"
        GW_IB_CM=rdmacm job_start 2 block -- "$BUILD/tests/worker_trial"
        if fault_ready; then
            t0=$(date +%s)
            "$VM" cluster exec --timeout 30 1 -- ip link set eth0 down
            # Once both ranks have reported, their exit is not waited for:
            # closing a verbs QP whose peer's link is down blocks in the
            # VMs' kernel (rdma_rxe's QP teardown, about 52 s in Debian's
            # 6.1, seen with strace in ibv_destroy_qp after the error was
            # reported), which is not gradwire's to judge; the VMs' shutdown
            # ends them, as this case runs last.
            FAULT_LEAVE_RUNNING=1 fault_check "VM 1's link down during the collectives (2 ranks, one per VM)" 1 "$t0" 0 1
        else
            job_wait
            fail "link down: the job did not form"
            show_logs
        fi
        unset JOB_TIMEOUT_MS GW_TRIAL_MAX_MS RANK_ENV_0 RANK_ENV_1
    }

    # 4. A rail lost: a job of 2 ranks, one per VM, over two rails; VM 1's
    # eth1 is taken down (rxe1's port goes down with it) in the middle of
    # the collectives. Rank 1's rail 1 fails at once, naming its port, and
    # its abort reaches rank 0 over rail 0: both fail naming rank 1, well
    # within the timeout; the job does not go on over one rail. Like the
    # link down below it leaves eth1 down (the same kernel), and runs
    # before it.
    run_raildown() {
        local t0
        echo "== VM 1's second rail down (GW_TIMEOUT_MS=$FAULT_TIMEOUT_MS)"
        export JOB_TIMEOUT_MS=$FAULT_TIMEOUT_MS GW_TRIAL_MAX_MS=120000
        GW_IB_HCA=rxe0,rxe1 GW_IB_CM=rdmacm job_start 2 block -- "$BUILD/tests/worker_trial"
        if fault_ready; then
            t0=$(date +%s)
            "$VM" cluster exec --timeout 30 1 -- ip link set eth1 down
            FAULT_LEAVE_RUNNING=1 fault_check "VM 1's rail rxe1 down during the collectives (2 ranks, one per VM, two rails)" 1 "$t0" 0 1
            grep -q "rxe1:1 went down" "$JOB_DIR/log1" ||
                fail "rail down: rank 1 did not name its port rxe1:1 ($(grep -m1 ' ERROR ' "$JOB_DIR/log1"))"
        else
            job_wait
            fail "rail down: the job did not form"
            show_logs
        fi
        unset JOB_TIMEOUT_MS GW_TRIAL_MAX_MS
    }

    # 4 ranks, two per VM: shared memory inside each VM and verbs between
    # them in one run (GW_RXE_2VM_CASES=train2 adds the 2-rank run).
    case ",$CASES," in *,train2,*) run_train 2 block ;; esac
    case ",$CASES," in *,train,*) run_train 4 block ;; esac
    case ",$CASES," in *,faults,*) run_faults ;; esac

    # gradwire-bench p2p against perftest between the VMs
    # (rxe_2vm_perf.sh in these VMs, 3 rounds of 4 MiB, bandwidth only:
    # GW_RXE_PERF_LATENCY=1 adds the latency rounds): the bandwidth
    # target, the median of the paired ratios at 1 MiB and 2 MiB >= 0.95,
    # is judged.
    if case ",$CASES," in *,perf,*) true ;; *) false ;; esac; then
        echo "== gradwire-bench p2p against perftest between the VMs"
        GW_RXE_PERF_LATENCY=${GW_RXE_PERF_LATENCY:-0} GW_RXE_PERF_MIB=${GW_RXE_PERF_MIB:-4} \
            GW_RXE_2VM_CLUSTER=$cdir "$ROOT/tests/integration/rxe_2vm_perf.sh" "$BUILD" "${GW_RXE_PERF_ROUNDS:-3}" 2>&1 |
            tee "$SHARED/perf.log" | sed 's/^/   /'
        rc=${PIPESTATUS[0]}
        local got
        got=$(grep '^PASS: bandwidth\|^FAIL: bandwidth' "$SHARED/perf.log" | paste -sd ';' -)
        case $rc in
        0) pass "perftest parity: $got" ;;
        2) fail "perftest parity: $got" ;;
        *) fail "perftest parity: rxe_2vm_perf.sh failed (status $rc)" ;;
        esac
    fi

    # A cluster where one host has no RDMA (VM 1's rxe0 deleted for the
    # case): auto mode meets it over TCP, shm inside each VM.
    if case ",$CASES," in *,mixed,*) true ;; *) false ;; esac; then
        echo "== 4 ranks, two per VM, VM 1 without RDMA"
        "$VM" cluster exec --timeout 30 1 -- rdma link delete rxe0
        "$VM" cluster exec --timeout 30 1 -- rdma link delete rxe1
        # The sizes of the 4-rank case (run_case): the plan and TCP
        # between the VMs are what this case is for.
        GW_DEBUG=INFO GW_TRANSPORT=auto job 4 block -- "$BUILD/tests/worker_collectives" @DIR@ \
            0,7,4099,70000 ring,tree float32 sum allreduce,broadcast,allgather
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
                # The fall back is never silent: one WARN per rank naming
                # the peers it reaches over TCP for want of RDMA on one end.
                if [ $r -lt 2 ]; then
                    want="peers on other hosts without ib, which this rank has (their logs say why): tcp to ranks 2,3"
                else
                    want="this rank has no ib (GW_DEBUG=INFO says why), which these peers on other hosts have: tcp to ranks 0,1"
                fi
                got=$(sed -n "s/.* select WARN rank $r falls back to a slower transport for some pairs: \(.*\)$/\1/p" "$JOB_DIR/log$r")
                [ "$got" = "$want" ] || bad="$bad rank $r's warning: '$got', not once '$want';"
            done
            if [ -n "$bad" ]; then
                fail "mixed fabrics: plan:$bad"
            else
                pass "mixed fabrics: VM 0 with RDMA and VM 1 without meet over TCP, shm inside each, one WARN per rank naming its TCP peers, $(wc -l <"$JOB_DIR/rank0") results exact and bitwise equal"
            fi
        fi
        "$VM" cluster exec --timeout 30 1 -- rdma link add rxe0 type rxe netdev eth0
        "$VM" cluster exec --timeout 30 1 -- rdma link add rxe1 type rxe netdev eth1
    fi

    case ",$CASES," in *,raildown,*) run_raildown ;; esac
    case ",$CASES," in *,linkdown,*) run_linkdown ;; esac

    echo "== $passed passed, $failed failed ($(($(date +%s) - T0)) s with booting)"
    for f in "${failures[@]+"${failures[@]}"}"; do
        echo "   failed: $f"
    done
    [ $failed -eq 0 ] && [ $passed -gt 0 ]
}

set -o pipefail
main 2>&1 | tee "$BUILD/rxe_2vm_test.log"
exit "${PIPESTATUS[0]}"
