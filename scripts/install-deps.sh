#!/usr/bin/env bash
# Install what gradwire needs to build and test, from Debian 12 packages.
# Idempotent and quick when everything is present (no apt-get update then).
#   scripts/install-deps.sh          build and test dependencies
#   scripts/install-deps.sh peers    also Open MPI and Gloo, for bench/peers
#   scripts/install-deps.sh data     also Fashion-MNIST, for the trainer's benchmarks
set -euo pipefail

PACKAGES=(build-essential cmake pkg-config libcriterion-dev libopenblas-dev zlib1g-dev
          libibverbs-dev librdmacm-dev iproute2 iputils-ping netcat-openbsd gnuplot-nox)
for group in "$@"; do
    case "$group" in
    peers) PACKAGES+=(libopenmpi-dev openmpi-bin libgloo-dev) ;;
    data) PACKAGES+=(dataset-fashion-mnist) ;;
    *) echo "install-deps: unknown group '$group' (known: peers, data)" >&2; exit 2 ;;
    esac
done

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all packages present"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
