#!/bin/bash
# The microbenchmarks behind the machine model's figures (docs/MACHINE_MODEL.md):
# the clock (a register add chain), what calls and locked operations cost, how
# short loops overlap and what a loop of several blocks with data-dependent
# branches costs (branch_chain). Each prints cycles of the add-chain clock;
# pinned to one CPU. x86-64 and a C compiler; no root needed.
#
# Usage: bench/machine_model.sh        CC=gcc|clang (default gcc)   CPU=n (default 0)
set -euo pipefail
here=$(cd "$(dirname "$0")/accuracy" && pwd)
CC=${CC:-gcc}
CPU=${CPU:-0}
tmp=$(mktemp -d /tmp/ecpi-machine-model.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
echo "machine model microbenchmarks: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), CPU $CPU"
for name in clock latency call_return locked loop_overlap branch_chain; do
    "$CC" -O2 -o "$tmp/$name" "$here/$name.c"
    echo "== $name"
    taskset -c "$CPU" "$tmp/$name"
done
