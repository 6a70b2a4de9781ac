# emulated_hosts.sh - sourced by the tests that run real launchers (Slurm,
# Open MPI, ssh) across scripts/cluster.sh's emulated hosts. It gives each
# host what a real node has and a namespace alone lacks, without touching
# the machine: a host name (nI) and an /etc/hosts that names every host by
# its 198.18.0.x address (so no DNS is ever asked), both only inside the
# mount and UTS namespaces of the processes started there.
#
#   eh_up PREFIX N DIR   bring up N hosts (namespaces PREFIX0..), write
#                        DIR/hosts; 1 and the cluster's output on failure
#   eh_in I CMD...       run CMD on host I: its network namespace, host name
#                        nI, DIR/hosts as /etc/hosts, and every file
#                        DIR/by-host/nI/F bind-mounted over DIR/F (per-host
#                        configuration); processes CMD starts inherit it all
#   eh_down              take the hosts down
#   eh_require WHAT TOOL...  exit 77 (skipped) saying why unless this runs as
#                        root, network namespaces can be made, and every
#                        TOOL is installed (WHAT: the packages to name)
EH_PREFIX=
EH_DIR=
EH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

eh_up() {
    EH_PREFIX=$1 EH_DIR=$3
    local n=$2 i
    "$EH_ROOT/scripts/cluster.sh" --prefix "$EH_PREFIX" up "$n" >"$EH_DIR/cluster.out" 2>&1 || {
        cat "$EH_DIR/cluster.out"
        return 1
    }
    {
        echo "127.0.0.1 localhost"
        for i in $(seq 0 $((n - 1))); do echo "198.18.0.$((i + 1)) n$i"; done
    } >"$EH_DIR/hosts"
    for i in $(seq 0 $((n - 1))); do mkdir -p "$EH_DIR/by-host/n$i"; done
}

eh_in() {
    local i=$1
    shift
    nsenter --net="/run/netns/$EH_PREFIX$i" unshare -m -u sh -c '
        mount --bind "$0/hosts" /etc/hosts || exit 1
        for f in "$0/by-host/n$1"/*; do
            [ -e "$f" ] || continue
            mount --bind "$f" "$0/${f##*/}" || exit 1
        done
        hostname "n$1" && shift 2 && exec "$@"' "$EH_DIR" "$i" x "$@"
}

eh_down() {
    [ -n "$EH_PREFIX" ] && "$EH_ROOT/scripts/cluster.sh" --prefix "$EH_PREFIX" down >/dev/null 2>&1
    EH_PREFIX=
}

eh_require() {
    local what=$1 t probe="gwehprobe$$x"
    shift
    [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
    for t in nsenter unshare "$@"; do
        command -v "$t" >/dev/null ||
            { echo "SKIP: $t is not installed ($what: scripts/install-deps.sh test)"; exit 77; }
    done
    ip netns add "$probe" 2>/dev/null || { echo "SKIP: cannot create network namespaces here"; exit 77; }
    ip netns del "$probe"
}
