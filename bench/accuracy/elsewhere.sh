#!/bin/bash
# bench/accuracy.sh's workloads recorded on another machine (one without
# valgrind or a compiler: a lent VM) and compared here, where callgrind
# counts the same binaries (their counts do not depend on the machine).
#
# (a list of workloads after DIR limits any step to them)
#   here:   bench/accuracy/elsewhere.sh build DIR     # compiles the workloads into DIR/bin (not sed: glibc differs)
#   there:  bench/accuracy/elsewhere.sh record DIR    # ECPI=... (default ecpi on PATH); DIR at the same path as here
#   here:   bench/accuracy/elsewhere.sh truth DIR     # callgrind counts and the effective clock, per workload
#           FROM=DIR OUT=/tmp/x [MACHINE=...] bash bench/accuracy.sh
# calc finds the binaries by the paths recorded, so DIR must be the same
# absolute path on both machines. Needs: there, root (perf events, BPF);
# here, valgrind, python3, bc and the C compiler.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mode=${1:?usage: elsewhere.sh build|record|truth DIR}
dir=${2:?usage: elsewhere.sh build|record|truth DIR}
# The harness's name:repetitions list, less sed.
specs=$(sed -n 's/^ALL="\(.*\)"$/\1/p' "$here/../accuracy.sh" | tr ' ' '\n' | grep -v '^sed:')
if [[ $# -gt 2 ]]; then
    specs=$(for spec in $specs; do if [[ " ${*:3} " == *" ${spec%%:*} "* ]]; then echo "$spec"; fi; done)
fi
mkdir -p "$dir/bin"
cd "$dir"
case $mode in
build)
    for spec in $specs; do
        name=${spec%%:*}
        src="$here/$name.c"
        [[ $name == wordfreq ]] && src="$here/../../tests/testprogs/pgo/wordfreq.c"
        ${CC:-gcc} -O2 -g -o "bin/$name" "$src"
    done
    ${CC:-gcc} -O2 -o bin/clock "$here/clock.c"
    ;;
record)
    ecpi=${ECPI:-ecpi}
    : > info.txt
    for spec in $specs; do
        name=${spec%%:*} reps=${spec##*:}
        rm -rf "$name.db"  # record adds an epoch to an existing database
        before=$(bin/clock)
        "$ecpi" record -q -F "${FREQ:-10000}" -o "$name.db" -- "$dir/bin/$name" "$reps" > /dev/null
        after=$(bin/clock)
        TIMEFORMAT='%U %S'
        cpu=$( { time "bin/$name" "$reps" > /dev/null; } 2>&1 | tail -1 | awk '{print $1 + $2}')
        echo "$name $reps $before $after $cpu" | tee -a info.txt
    done
    ;;
truth)
    ecpi=${ECPI:-$here/../../build/loader/ecpi}
    while read -r name reps before after cpu; do
        totals=$("$ecpi" prof "$name.db" --format json | python3 -c \
            'import json,sys; t=json.load(sys.stdin)["totals"]["cpu-clock"]; print(t["samples"], t["period"])')
        # The harness's effective clock: cycles per sample from the unprofiled CPU time.
        python3 -c "s, p = map(int, '$totals'.split()); print(round(($before + $after) / 2 * $cpu / (s * p * 1e-9)))" > "$name.mhz"
        for r in 1 2; do
            valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$name.cg$r" "bin/$name" "$r" \
                > /dev/null 2> "$name.cg$r.log"
        done
        echo "$name: effective $(cat "$name.mhz") MHz, callgrind done"
    done < info.txt
    ;;
*) echo "elsewhere.sh: unknown mode $mode (build, record or truth)" >&2; exit 2 ;;
esac
