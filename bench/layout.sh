#!/usr/bin/env bash
# Does ecpi layout's profile make BOLT's layout better, where BOLT's own
# no-LBR mode does not? (issue 17; Spike). The workload (bench/layout/
# gen_handlers.py: 1,600 handlers, every 10th hot, each with a common cheap
# path and a rare path that misses the cache) is built with -Wl,-q and laid
# out by llvm-bolt -reorder-blocks=ext-tsp -reorder-functions=hfsort
# -split-functions -split-all-cold from four profiles:
#   none      the binary as linked
#   nl        perf2bolt -nl from `perf record -e cpu-clock` (samples per block)
#   ecpi      ecpi layout from `ecpi record` (calc's execution estimates)
#   blocks    the same as block counts (ecpi layout --format bolt-blocks)
#   exact     BOLT's own instrumentation (exact counts, the upper bound)
# Each binary is measured with callgrind --collect-jumps=yes --dump-instr=yes
# (taken branches, exact; without --dump-instr callgrind keeps only jumps
# between source lines, and BOLT drops the line table), cachegrind (I1 misses) and its run time (median of
# ROUNDS, interleaved).
#   lld       the same source relinked by lld with --symbol-ordering-file from
#             `ecpi layout --format lld-order` (-ffunction-sections), no BOLT
# PIE=1 builds a position-independent executable (default: -no-pie).
# WORKLOAD=sqlite: SQLite's amalgamation (npm's better-sqlite3, fetched
# into ~/.cache/ecpi-bench, never committed) driven by
# bench/cachesim/sqlite_orders.c instead of the handlers.
# Usage (root): bash bench/layout.sh [REQUESTS=20000000] [ROUNDS=5]
# KEEP=DIR keeps the binaries, profiles and fdata files there (and compare.txt:
# where ecpi's fdata states edges otherwise than exact counts do).
set -euo pipefail
REQ=${1:-20000000}
ROUNDS=${2:-5}
SMALL=$((REQ / 10))
here=$(cd "$(dirname "$0")" && pwd)
ECPI=${ECPI:-$here/../build/loader/ecpi}
BOLT=$(command -v llvm-bolt-16 || command -v llvm-bolt) || { echo "bench/layout.sh: llvm-bolt is not installed (bolt-16)" >&2; exit 1; }
# perf2bolt dispatches on its own name: Debian's perf2bolt-16 link runs as llvm-bolt.
P2B=$(ls /usr/lib/llvm-16/bin/perf2bolt 2>/dev/null || command -v perf2bolt || true)
# -runtime-instrumentation-lib is a file name under llvm-bolt's library directory.
RT=$(ls /usr/lib/llvm-16/lib/libbolt_rt_instr.a 2>/dev/null || true)
BOLT_FLAGS=(-reorder-blocks=ext-tsp -reorder-functions=hfsort -split-functions -split-all-cold)
if [ -n "${KEEP:-}" ]; then
	mkdir -p "$KEEP"
	T=$(cd "$KEEP" && pwd)
else
	T=$(mktemp -d /tmp/ecpi-bench-layout.XXXXXX)
	trap 'rm -rf "$T"' EXIT
fi
echo "# $(date -u +%FT%TZ), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "${PIE:-0}" = 1 ]; then PIEFLAGS=(-fPIE -pie); else PIEFLAGS=(-fno-pie -no-pie); fi
CFLAGS=(-O2 -g "${PIEFLAGS[@]}" -ffunction-sections)
# The workload: its sources (C files or objects) and its arguments for the
# timed runs (BIG) and the valgrind runs (SMALL).
case "${WORKLOAD:-handlers}" in
handlers)
	python3 "$here/layout/gen_handlers.py" 1600 10 >"$T/handlers.c"
	SOURCES=("$T/handlers.c")
	BIG=("$REQ") SMALL_ARGS=("$SMALL")
	;;
sqlite)
	# SQLite's amalgamation from npm's better-sqlite3 (never committed),
	# driven by bench/cachesim/sqlite_orders.c: inserts, indexed lookups, a
	# join with grouping, a sort. REQUESTS scales the customers.
	cache=${ECPI_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ecpi-bench}/sqlite
	mkdir -p "$cache"
	if [ ! -s "$cache/sqlite3.c" ]; then
		command -v npm >/dev/null || { echo "bench/layout.sh: WORKLOAD=sqlite needs npm (apt-get install npm)" >&2; exit 1; }
		(cd "$T" && npm pack better-sqlite3 --silent >npm.log 2>&1) || { echo "bench/layout.sh: npm pack better-sqlite3 failed: $(tail -1 "$T/npm.log")" >&2; exit 1; }
		tar -xzf "$T"/better-sqlite3-*.tgz -C "$T" package/deps/sqlite3/sqlite3.c package/deps/sqlite3/sqlite3.h
		mv "$T/package/deps/sqlite3/sqlite3.c" "$T/package/deps/sqlite3/sqlite3.h" "$cache/"
	fi
	echo "# sqlite $(grep -m1 '#define SQLITE_VERSION ' "$cache/sqlite3.h" | awk '{print $3}')"
	cc "${CFLAGS[@]}" -DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION -c "$cache/sqlite3.c" -o "$T/sqlite3.o"
	cc "${CFLAGS[@]}" -I"$cache" -c "$here/cachesim/sqlite_orders.c" -o "$T/sqlite_orders.o"
	SOURCES=("$T/sqlite_orders.o" "$T/sqlite3.o" -lm)
	BIG=("$((REQ / 1000))" 8 "$((REQ / 200))") SMALL_ARGS=("$((SMALL / 1000))" 8 "$((SMALL / 200))")
	;;
*) echo "bench/layout.sh: WORKLOAD is handlers or sqlite" >&2; exit 2 ;;
esac
echo "# build: cc ${CFLAGS[*]} -Wl,-q; workload ${WORKLOAD:-handlers} ${BIG[*]}, valgrind runs ${SMALL_ARGS[*]}"
cc "${CFLAGS[@]}" -Wl,-q -o "$T/none" "${SOURCES[@]}"
want=$("$T/none" "${SMALL_ARGS[@]}")

"$ECPI" record -q -F 4999 -o "$T/ecpi.db" -- "$T/none" "${BIG[@]}" >/dev/null
"$ECPI" layout "$T/ecpi.db" --image none -o "$T/ecpi.fdata" 2>"$T/ecpi.log"
"$BOLT" "$T/none" -o "$T/ecpi" -data "$T/ecpi.fdata" "${BOLT_FLAGS[@]}" >"$T/ecpi.bolt.log" 2>&1
# The same estimates as block counts in BOLT's no-LBR format (BOLT infers the edges).
"$ECPI" layout "$T/ecpi.db" --image none --format bolt-blocks -o "$T/blocks.fdata" 2>>"$T/ecpi.log"
"$BOLT" "$T/none" -o "$T/blocks" -data "$T/blocks.fdata" "${BOLT_FLAGS[@]}" >"$T/blocks.bolt.log" 2>&1
configs="none ecpi blocks"
if command -v ld.lld >/dev/null || command -v ld.lld-16 >/dev/null; then
	"$ECPI" layout "$T/ecpi.db" --image none --format lld-order -o "$T/order.txt" 2>>"$T/ecpi.log"
	cc "${CFLAGS[@]}" -fuse-ld=lld -Wl,--symbol-ordering-file="$T/order.txt" \
		-Wl,--no-warn-symbol-ordering -o "$T/lld" "${SOURCES[@]}"
	configs="$configs lld"
fi
if [ -n "$P2B" ] && perf record -q -e cpu-clock -F 4999 -o "$T/perf.data" -- "$T/none" "${BIG[@]}" >/dev/null 2>"$T/perf.log" &&
	"$P2B" -nl -p "$T/perf.data" -o "$T/nl.fdata" "$T/none" >"$T/p2b.log" 2>&1 &&
	"$BOLT" "$T/none" -o "$T/nl" -data "$T/nl.fdata" "${BOLT_FLAGS[@]}" >"$T/nl.bolt.log" 2>&1; then
	configs="${configs/none /none nl }"
else
	echo "# perf2bolt -nl: not measured ($(tail -1 "$T/perf.log" "$T/p2b.log" 2>/dev/null | tr '\n' ' '))"
fi
"$BOLT" "$T/none" -instrument ${RT:+--runtime-instrumentation-lib=../lib/llvm-16/lib/libbolt_rt_instr.a} --instrumentation-file="$T/exact.fdata" \
	-o "$T/instr" >"$T/instr.log" 2>&1 || { tail -3 "$T/instr.log" >&2; exit 1; }
"$T/instr" "${BIG[@]}" >/dev/null
"$BOLT" "$T/none" -o "$T/exact" -data "$T/exact.fdata" "${BOLT_FLAGS[@]}" >"$T/exact.bolt.log" 2>&1
configs="$configs exact"

taken() {  # taken branches (jumps + taken conditional jumps) in a callgrind file
	python3 - "$1" <<'PY'
import sys
n = 0
for line in open(sys.argv[1]):
    if line.startswith("jump="):
        n += int(line[5:].split()[0])
    elif line.startswith("jcnd="):
        n += int(line[5:].split("/")[0])
print(n)
PY
}
declare -A TAKEN I1 TIMES
for c in $configs; do
	[ "$("$T/$c" "${SMALL_ARGS[@]}")" = "$want" ] || { echo "bench/layout.sh: $c prints something else" >&2; exit 1; }
	valgrind --tool=callgrind --collect-jumps=yes --dump-instr=yes --callgrind-out-file="$T/$c.cg" "$T/$c" "${SMALL_ARGS[@]}" >/dev/null 2>&1
	TAKEN[$c]=$(taken "$T/$c.cg")
	I1[$c]=$(valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file=/dev/null "$T/$c" "${SMALL_ARGS[@]}" 2>&1 >/dev/null |
		awk '/I1  misses:/ {gsub(",", "", $4); print $4}')
done
for r in $(seq "$ROUNDS"); do
	for c in $configs; do
		s=$(date +%s%N); "$T/$c" "${BIG[@]}" >/dev/null; e=$(date +%s%N)
		TIMES[$c]="${TIMES[$c]:-} $(( (e - s) / 1000000 ))"
	done
done
echo "| profile | taken branches (args: ${SMALL_ARGS[*]}) | vs none | I1 misses | run time, ms (args: ${BIG[*]}; median of $ROUNDS: all) |"
echo "|---|---|---|---|---|"
for c in $configs; do
	med=$(echo ${TIMES[$c]} | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	pct=$(python3 -c "print(f'{100 * (${TAKEN[$c]} / ${TAKEN[none]} - 1):+.1f}%')")
	echo "| $c | ${TAKEN[$c]} | $pct | ${I1[$c]} | $med (${TIMES[$c]# }) |"
done
echo "# ecpi layout: $(tail -1 "$T/ecpi.log")"
# Where ecpi's profile loses gain against exact counts (bench/layout/compare_fdata.py;
# the full report, by function and branch, is compare.txt in KEEP=DIR).
python3 "$here/layout/compare_fdata.py" "$T/none" "$T/ecpi.fdata" "$T/exact.fdata" --callgrind "$T/ecpi.cg" "$T/exact.cg" >"$T/compare.txt" &&
	sed -n '1,7p' "$T/compare.txt" || echo "# compare_fdata.py failed: see $T/compare.txt"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
