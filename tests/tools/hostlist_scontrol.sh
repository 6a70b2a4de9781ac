#!/usr/bin/env bash
# `gradwire hostlist EXPR` against Slurm's own `scontrol show hostnames
# EXPR` on hard cases (several bracket groups, zero padding that grows past
# its width, lists in brackets, repeats, separators, 65536-name ranges):
# the outputs must be byte for byte the same. scontrol needs a slurm.conf
# to start, not a running Slurm: a scratch one is written.
# Usage: hostlist_scontrol.sh GRADWIRE
set -euo pipefail
gradwire="$1"
command -v scontrol >/dev/null ||
    { echo "SKIP: scontrol is not installed (Debian package slurm-client; scripts/install-deps.sh installs it)"; exit 77; }
tmp=$(mktemp -d /tmp/gw-hostlist-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/slurm.conf" <<'CONF'
ClusterName=gwtest
SlurmctldHost=localhost
NodeName=localhost CPUs=1 State=UNKNOWN
PartitionName=all Nodes=localhost Default=YES
CONF
export SLURM_CONF="$tmp/slurm.conf"
cases=(
    'n1' 'a1,a1' 'a,,b,' 'a b' 'a-b' '[1-2]' 'n[5]' 'n[2-2]'
    'n[01-03],gpu[1-2]-ib[0-1]' 'n[1-2,5,7-8]' 'n[1-3]-[5-6]' 'n[1,3-4]x[2-3],m'
    'n[1-2][3-4]' 'a[1-2]-[3-4]-[5-6]' 'a[1-2]b[3]c[4-5]' 'a[1-3]b[1-2]c[1-2]' 'a[1-2]b[1-2]c[1-2]d[1-2]' 'rack[1-2]-n[01-02],gpu[1-2]-ib[0-1]'
    'n[098-101]' 'n[98-101]' 'n[1-003]' 'n[01-3]' 'n[007]' 'n[0001-0003,5]' 'n[8-11],x[009-011]'
    'n[1-2],n[2-3]' 'n-[1-2]' 'n[4294967295-4294967296]' 'node[0-9]-[00-15]'
    'n[1-65536]' 'n[00001-65536],m[0-65535]'
)
pass=0
for expr in "${cases[@]}"; do
    scontrol show hostnames "$expr" >"$tmp/want" 2>"$tmp/want.err" ||
        { echo "FAIL: scontrol refused '$expr': $(cat "$tmp/want.err")"; exit 1; }
    "$gradwire" hostlist "$expr" >"$tmp/got" 2>"$tmp/got.err" ||
        { echo "FAIL: gradwire hostlist '$expr': $(cat "$tmp/got.err")"; exit 1; }
    if ! cmp -s "$tmp/want" "$tmp/got"; then
        echo "FAIL: '$expr': gradwire hostlist differs from scontrol show hostnames:"
        diff "$tmp/want" "$tmp/got" | head -20
        exit 1
    fi
    pass=$((pass + 1))
done
# What scontrol refuses, gradwire refuses too (it also refuses a few that
# scontrol garbles, e.g. "n[1-2" -> "n]": hostlist.c lists them).
for expr in 'x[1-2]y' 'n[1-2]]' 'a[]' 'n[3-1]' 'n[a-b]' 'n[1-70000]'; do
    if "$gradwire" hostlist "$expr" >/dev/null 2>&1; then
        echo "FAIL: gradwire hostlist accepted '$expr'"
        exit 1
    fi
    pass=$((pass + 1))
done
echo "hostlist vs scontrol: $pass cases, all the same"
