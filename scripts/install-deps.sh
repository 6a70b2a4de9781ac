#!/usr/bin/env bash
# Install what gradwire needs, from Debian 12 packages, by group.
# Idempotent and quick when everything is present (no apt-get update then).
#   scripts/install-deps.sh          what building needs (the README's first command)
#   scripts/install-deps.sh format   also clang-format (scripts/format.sh; scripts/test.sh asks for it first)
#   scripts/install-deps.sh test     also what the test suite needs (scripts/test.sh asks for it
#                                    while it builds)
#   scripts/install-deps.sh peers    also Open MPI and Gloo, for bench/peers
#   scripts/install-deps.sh data     also Fashion-MNIST, for the trainer's benchmarks
#
# The test group includes the Soft-RoCE VM of the verbs transport's test
# (tests/integration/rxe_vm_test.sh, through scripts/rxe-vm): QEMU,
# busybox-static for its initramfs, and rdma-core, the verbs providers,
# perftest and the rdmacm utilities, which run inside the VM from this
# machine's root file system. The VM's kernel (Debian's 6.1 package, which
# has rdma_rxe, about 470 MB with its cache) is downloaded with `apt-get
# download` and unpacked into scripts/rxe-vm's cache (GW_RXE_VM_CACHE,
# default ~/.cache/gradwire/rxe-vm): it is never installed on this machine.
# clang and libclang-rt-14-dev (its libFuzzer and sanitizer runtimes) build
# the fuzz targets of tests/fuzz; slurm-client's scontrol is what `gradwire
# hostlist` is compared with; Open MPI's mpirun starts the PMIx bootstrap's
# test; slurmctld, slurmd and munge make the real Slurm of slurm_test, and
# openssh-server the sshds of ssh_launch_test (the packages' services are
# not started: the tests start their own daemons);
# clang-format checks the layout of the sources; python3-dev builds the
# Python package (python/) for /usr/bin/python3, python3-numpy runs its
# tests (tests/python) and python3-torch (CPU, 1.13) their torch tensors;
# python3-sphinx, python3-myst-parser (Markdown pages), python3-breathe with
# doxygen (the C API from include/gradwire.h) and furo (the theme) build the
# documentation (scripts/docs.sh, the docs_build test); python3-venv,
# python3-pip and python3-wheel build and install the wheel (wheel_test),
# lintian checks the Debian packages (deb_test).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# Building: the Build-Depends of debian/control (the one list of what the
# build needs: CMake, the libraries the programs link, the verbs and PMIx
# headers, Python's headers and setuptools, Sphinx for the man pages,
# debhelper), plus the compiler and Criterion (the tests are built with the
# tree; the packages are built without them).
build_depends() { # CONTROL: the package names of its Build-Depends
    sed -n '/^Build-Depends:/,/^[A-Za-z-]*:/{/^Build-Depends:/{s/^Build-Depends://;p;d};/^[A-Za-z-]*:/d;p}' "$1" |
        sed 's/#.*//' | tr ',' '\n' |
        sed 's/|.*//; s/[[:space:]]*[([<].*//; s/^[[:space:]]*//; s/[[:space:]]*$//' | grep -v '^$'
}
mapfile -t BUILD_DEPENDS < <(build_depends "$here/../debian/control")
[ ${#BUILD_DEPENDS[@]} -gt 0 ] || { echo "install-deps: no Build-Depends in debian/control" >&2; exit 1; }
PACKAGES=(build-essential libcriterion-dev "${BUILD_DEPENDS[@]}")
TEST_PACKAGES=(clang-format iproute2 iputils-ping netcat-openbsd gnuplot-nox
               qemu-system-x86 busybox-static cpio rdma-core ibverbs-providers ibverbs-utils
               perftest librdmacm1 rdmacm-utils clang libclang-rt-14-dev slurm-client
               openmpi-bin slurmctld slurmd munge openssh-server openssh-client python3-dev
               python3-numpy python3-torch python3-venv python3-pip python3-wheel lintian
               python3-sphinx python3-myst-parser python3-breathe doxygen furo gdb)
want_vm=0
for group in "$@"; do
    case "$group" in
    format) PACKAGES+=(clang-format) ;;
    test) PACKAGES+=("${TEST_PACKAGES[@]}"); want_vm=1 ;;
    peers) PACKAGES+=(libopenmpi-dev openmpi-bin libgloo-dev) ;;
    data) PACKAGES+=(dataset-fashion-mnist) ;;
    *) echo "install-deps: unknown group '$group' (known: format, test, peers, data)" >&2; exit 2 ;;
    esac
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
updated=0

# Installed, or provided by an installed package (Build-Depends names virtual
# packages: debhelper-compat, dh-sequence-python3).
provided=$(dpkg-query -W -f='${db:Status-Status} ${Provides}\n' 2>/dev/null |
    sed -n 's/^installed //p' | tr ',' '\n' | sed 's/(.*//; s/^[[:space:]]*//; s/[[:space:]]*$//')
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        grep -qx -- "$p" <<<"$provided" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all packages present"
else
    echo "install-deps: installing ${missing[*]}"
    $SUDO apt-get update -q
    updated=1
    # Packages with services (slurmd, slurmctld, munge) must not start them:
    # the tests start their own daemons. Where no policy says so already,
    # one that refuses every start is in place for the install.
    policy=/usr/sbin/policy-rc.d
    made_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
        $SUDO chmod 0755 "$policy"
        made_policy=1
    fi
    rc=0
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" || rc=$?
    [ $made_policy -eq 0 ] || $SUDO rm -f "$policy"
    [ $rc -eq 0 ] || exit $rc
fi

# The VM kernel and initramfs (quick when they are cached). apt-get download
# needs the package lists, which a fresh system has not fetched yet.
if [ $want_vm -eq 1 ] && ! "$here/rxe-vm" --prepare --no-install 2>/dev/null; then
    if [ "$updated" = 0 ]; then
        $SUDO apt-get update -q
    fi
    "$here/rxe-vm" --prepare ||
        echo "install-deps: the Soft-RoCE VM cannot be prepared here (see above): its test will be skipped" >&2
fi
