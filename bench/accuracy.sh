#!/bin/bash
# Accuracy of `ecpi calc` execution counts against the truth (DCPI 6.2,
# Figure 8). Each workload is profiled natively with `ecpi record` and run
# under `valgrind --tool=callgrind --dump-instr=yes`, which counts every
# instruction exactly; bench/accuracy/compare.py extrapolates callgrind's
# counts to the profiled run and prints the histogram. Not a test: it takes a
# few minutes and its figures go to docs/ACCURACY.md (tests/bpf/calc_accuracy.sh
# keeps a looser floor).
#
# Usage: bench/accuracy.sh [WORKLOAD...]     (default: all)
#   ECPI=path/to/ecpi  (default build/loader/ecpi)   OUT=dir  (default /tmp/ecpi-accuracy)
#   FREQ=samples/s (default 10000)   CC=gcc|clang   MHZ=clock rate (default: measured)
#   MACHINE=model (default auto: the built-in model matching this CPU)   REUSE=1: re-analyze the last run's profiles
#   CHASE_LATENCY=MIB:NS:LOW:HIGH,...: calc --chase-latency (a pointer chase's time per step by working set, for
#     recordings made before ecpi record measured it; default: as recorded)
#   FROM=dir: re-analyze the recordings stored in dir (an earlier run's OUT: its profiles, binaries, callgrind
#     counts and clocks, left untouched) with this $ECPI, writing the analysis to OUT; compare two builds
#     on the same recordings with two OUTs:  FROM=/tmp/ecpi-accuracy OUT=/tmp/before ECPI=old bench/accuracy.sh
# Needs root (perf events + BPF), valgrind, python3 and a C compiler; the
# real-program workload (sed, whose hot code is glibc's regex engine) needs
# libc6-dbg for glibc's symbols.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
ECPI=${ECPI:-$here/../build/loader/ecpi}
OUT=${OUT:-/tmp/ecpi-accuracy}
FREQ=${FREQ:-10000}
CC=${CC:-gcc}
MACHINE=${MACHINE:-auto}
# name:native repetitions (callgrind runs 1 and 2 repetitions)
# wordfreq is the PGO test program (tests/testprogs/pgo/wordfreq.c): its hot
# loop calls grow() 9 times in 16 M words (a loop with rare calls); 300
# rounds give its rarer branch enough snapshots to split the loop.
# jsonq is the program that decides issue 33's PGO goal (tests/testprogs/pgo/
# jsonq.c: a JSON order log of 20,000 orders parsed ROUNDS times into a tree
# and queried; nothing in it marked for the compiler or for calc).
ALL="loops:80000 branchy:16000 chase:10 interp:6000 calls:3000 sed:20 chain:300 dispatch:200 wordfreq:300 jsonq:300"
want=${*:-loops branchy chase interp calls sed chain dispatch wordfreq jsonq}

if [[ -n ${FROM:-} ]]; then
    FROM=$(cd "$FROM" && pwd)
    [[ $FROM != "$(mkdir -p "$OUT" && cd "$OUT" && pwd)" ]] || { echo "FROM and OUT must differ (FROM is left untouched)" >&2; exit 2; }
    REUSE=1
fi
SRC=${FROM:-$OUT}  # where the recordings are
mkdir -p "$OUT/bin"
echo "ecpi calc accuracy: $(uname -n), kernel $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "  $(nproc) CPUs, /proc/cpuinfo clock $(grep -m1 'cpu MHz' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') MHz, sampling at $FREQ Hz, $CC, model $MACHINE"

$CC -O2 -o "$OUT/bin/clock" "$here/accuracy/clock.c"
rows=()
for spec in $ALL; do
    name=${spec%%:*}
    reps=${spec##*:}
    [[ " $want " == *" $name "* ]] || continue
    db="$SRC/$name.db"
    [[ -n ${REUSE:-} ]] || rm -rf "$db"
    if [[ -n ${FROM:-} && ! -f "$FROM/$name.mhz" ]]; then
        echo "  $name: skipped (no recording in $FROM)"
        continue
    fi
    if [[ $name == sed ]]; then
        # A real program from a Debian package: sed's hot code is glibc's
        # regex engine (symbols and lines from libc6-dbg).
        if ! ls /usr/lib/debug/.build-id >/dev/null 2>&1; then
            echo "  sed: skipped (install libc6-dbg for glibc's symbols)"
            continue
        fi
        python3 - "$OUT/text.txt" <<'EOF'
import random, sys
random.seed(1)
words = ['alpha', 'beta', 'gamma', 'delta', 'eps', 'zeta', 'eta', 'theta']
with open(sys.argv[1], 'w') as f:
    for i in range(10000):
        f.write(' '.join(random.choice(words) + str(random.randint(0, 999)) for _ in range(8)) + '\n')
EOF
        cat > "$OUT/bin/sed-runs" <<EOF
#!/bin/sh
# Runs sed \$1 times on the same input.
i=0
while [ \$i -lt \$1 ]; do sed -E 's/([a-z]+)([0-9]+)/\\2\\1/g' "$OUT/text.txt" > /dev/null; i=\$((i + 1)); done
EOF
        chmod +x "$OUT/bin/sed-runs"
        prog=("$OUT/bin/sed-runs")
        image=libc.so.6
    else
        src="$here/accuracy/$name.c"
        [[ $name == wordfreq || $name == jsonq ]] && src="$here/../tests/testprogs/pgo/$name.c"
        [[ -n ${REUSE:-} ]] || $CC -O2 -g -o "$OUT/bin/$name" "$src"
        prog=("$SRC/bin/$name")
        image="$SRC/bin/$name"
    fi
    if [[ -n ${REUSE:-} && -f "$SRC/$name.mhz" ]]; then
        # REUSE=1 or FROM: keep the profiles and callgrind counts of that run; only re-analyze.
        mhz=$(cat "$SRC/$name.mhz")
        secs=0
    else
    if [[ -n ${MHZ:-} ]]; then
        mhz=$MHZ
    else
        mhz=$("$OUT/bin/clock")
    fi
    start=$(date +%s.%N)
    "$ECPI" record -q -F "$FREQ" -o "$db" -- "${prog[@]}" "$reps" > /dev/null
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    if [[ -z ${MHZ:-} ]]; then mhz=$(( (mhz + $("$OUT/bin/clock")) / 2 )); fi
    # Each sample also pays for its own interrupt (in a VM, a timer exit), so a
    # sample period holds fewer of the program's cycles than period x clock.
    # Cycles per sample, measured: the clock x the unprofiled CPU time / the
    # profiled run's samples (for the profiled processes), as an effective MHz.
    cpu=$( { /usr/bin/time -f '%U %S' "${prog[@]}" "$reps" > /dev/null; } 2>&1 | tail -1 | awk '{print $1 + $2}')
    samples=$("$ECPI" prof "$db" --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["cpu-clock"]["samples"])')
    period_ns=$("$ECPI" prof "$db" --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["cpu-clock"]["period"])')
    raw_mhz=$mhz
    mhz=$(python3 -c "print(round($mhz * $cpu / ($samples * $period_ns * 1e-9)))")
    for r in 1 2; do
        [[ $name == sed && $r == 2 ]] && continue  # one run per repetition: counts are proportional
        if [[ $name == sed ]]; then
            valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$OUT/$name.cg$r" \
                sed -E 's/([a-z]+)([0-9]+)/\2\1/g' "$OUT/text.txt" > /dev/null 2> "$OUT/$name.cg$r.log"
        else
            valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$OUT/$name.cg$r" \
                "${prog[@]}" "$r" > /dev/null 2> "$OUT/$name.cg$r.log"
        fi
    done
    echo "$mhz" > "$OUT/$name.mhz"
    fi
    if [[ $name == sed ]]; then cg2="$SRC/$name.cg1"; else cg2="$SRC/$name.cg2"; fi
    chase=()
    [[ -z ${CHASE_LATENCY:-} ]] || chase=(--chase-latency "$CHASE_LATENCY")
    "$ECPI" calc --all "$db" --image "$image" --machine "$MACHINE" --cpu-mhz "$mhz" "${chase[@]}" --format json \
        --no-lines > "$OUT/$name.calc.json"
    "$ECPI" calc --all "$db" --image "$image" --machine "$MACHINE" "${chase[@]}" --format json --no-lines \
        > "$OUT/$name.calc-recorded-clock.json"
    python3 "$here/accuracy/compare.py" rows "$name" "$OUT/$name.calc.json" "$reps" "$SRC/$name.cg1" 1 "$cg2" 2 \
        > "$OUT/$name.rows"
    python3 "$here/accuracy/compare.py" rows "$name" "$OUT/$name.calc-recorded-clock.json" "$reps" "$SRC/$name.cg1" 1 \
        "$cg2" 2 > "$OUT/$name.recorded.rows"
    printf '  %-8s %6s reps, %5.1f s profiled, clock %s MHz, %s s CPU unprofiled, %s samples: effective %s MHz\n' \
        "$name" "$reps" "$secs" "${raw_mhz:-?}" "${cpu:-?}" "${samples:-?}" "$mhz"
    rows+=("$OUT/$name")
done
echo
echo "### With the measured clock rate (--cpu-mhz)"
python3 "$here/accuracy/compare.py" report "${rows[@]/%/.rows}"
echo
echo "### With the clock rate recorded in the epoch (measured by ecpi record where the epoch has it, else /proc/cpuinfo)"
python3 "$here/accuracy/compare.py" report "${rows[@]/%/.recorded.rows}" | sed -n '/all workloads/,/confidence of all/p'
echo
echo "### Per procedure (issue 36: within 5%/10%, ranges holding the truth, range width, flow violations; measured clock)"
python3 "$here/accuracy/compare.py" procedures "${rows[@]}"
