#!/usr/bin/env bash
# ecpi cachesim against cachegrind, sampled against full, and its speed
# (issue 18, "Checks"; MemSpy: shared/papers/trace-sampling-memspy.txt).
#
# The bundled programs of tests/testprogs/cachesim (streaming, random within
# a cache level, pointer chasing, a matrix transpose, a hot small table, a
# chained hash table) and SQLite's amalgamation (fetched with `npm pack
# better-sqlite3` into a cache directory, never into the tree) driven by
# bench/cachesim/sqlite_orders.c are built twice with clang -O2: plainly and
# with `ecpi flags memtrace`. For each:
#   a. full simulation (--sample 1/1) against cachegrind on the plain build,
#      same geometry (L1d misses vs D1 misses; also D1 misses at the
#      program's own source lines, which is all the instrumentation sees);
#   b. --sample 1/10 with SEEDS seeds against the full simulation: miss-rate
#      errors per level, how often the reported bound holds the error, and
#      whether the top procedures and objects keep their order;
#   c. wall time (median of ROUNDS, interleaved, under flock -x on
#      /tmp/ecpi-quiet.lock): the program alone, built with the flags but not
#      simulated, 1/1, 1/10, 1/100, each also with --sets 1/8; and, for tree
#      and sqlite, perf's split of the time between the program and ecpi;
# `bash bench/cachesim.sh combined [PROGRAM...]` checks the default
# settings (combined sampling, MemSpy 7.3: time sampling for the L1d, set
# sampling for the L2) against full simulation: every level's local and
# global miss rate, worst of SEEDS (5 here unless set) seeds, the bound,
# and the simulation time (each run's wall time minus the instrumented
# program's own, uncontrolled, medians of ROUNDS interleaved rounds under
# flock -x), full simulation's over the default's, and time sampling alone
# (--set-levels none, the default before issue 32) for comparison. With
# BASELINE=/path/to/other/ecpi each round also times that ecpi's default
# run on the program built against its runtime, and that build uncontrolled
# (labels "base default", "base uncontrolled"): a before/after column.
# `bash bench/cachesim.sh windows [PROGRAM...]` measures only the window
# length: the full simulation, then 1/SAMPLE with SEEDS seeds at each length
# of WINDOWS (no cachegrind, no timing; the errors do not depend on load).
# `bash bench/cachesim.sh groups [PROGRAM...]` scores ways of choosing the
# sampled groups of sets (MemSpy 7.3's "non-representative sets"): one full
# simulation per program saves its trace, ecpi_bench_set_groups replays it
# into each group's counts, and cachesim/groups.py scores every scheme of
# choice from them (no timing; GROUPS_TOOL: default build/bench/ecpi_bench_set_groups).
# `bash bench/cachesim.sh speed [PROGRAM...]` times only (part c, without
# --sets unless SETS_TOO=1); with BASELINE=/path/to/other/ecpi each program
# is also built against that ecpi's runtime and every configuration is timed
# with both, interleaved in each round, for a before/after comparison on one
# host under one load. With INLINE=1 each program is also built with
# `ecpi flags memtrace --inline` (callbacks inlined by LTO; ld.lld) and
# timed beside the out-of-line build (labels "inline 1/10" and so on);
# SQLite's inline link takes minutes and is cached like its objects.
# Caches: L1d 48 KiB 12-way, L2 1 MiB 8-way, 64-byte lines (this host's, as
# sysconf reports them), for ecpi and cachegrind alike.
#
# Usage: bash bench/cachesim.sh [windows|speed|combined|groups] [PROGRAM...]   (default: all, then sqlite)
# Environment: ECPI (default build/loader/ecpi), ROUNDS (3), SEEDS (10; 5 in the combined mode),
#   WINDOWS (lengths for the windows mode; default 10000 30000 100000 300000),
#   SAMPLE (its sampling rate 1/SAMPLE; default 10),
#   BASELINE (speed and combined modes, above), SETS_TOO, INLINE (speed mode, above),
#   DEFAULT_OPTS (combined mode: options added to the "default" runs, accuracy and
#   timed, e.g. "--sets 1/8", to try a setting before it becomes the default; with
#   BASELINE=$ECPI the "base default" rows are the same ecpi without them),
#   BASELINE_OPTS (combined mode: options added to the "base default" runs, e.g.
#   "--sets 1/8" to compare two builds at one setting),
#   CPU (combined mode: also ecpi's own CPU time, perf stat --no-inherit, per run into OUT/PROGRAM.cpu;
#   the combined mode with BASELINE also times the other ecpi's full simulation, "base full"),
#   OUT (keep the reports there; default a temporary directory),
#   ECPI_BENCH_CACHE (SQLite's sources and objects; default ~/.cache/ecpi-bench).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ECPI=${ECPI:-$here/../build/loader/ecpi}
ROUNDS=${ROUNDS:-3}
USER_SEEDS=${SEEDS:-}
SEEDS=${SEEDS:-10}
CACHE_DIR=${ECPI_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ecpi-bench}
LOCK=/tmp/ecpi-quiet.lock
SRC=$here/../tests/testprogs/cachesim
CACHE_SPECS=(L1d=48k:12:64 L2=1m:8:64)
CACHES=(--cache "${CACHE_SPECS[0]}" --cache "${CACHE_SPECS[1]}")
CG_CACHES=(--D1=49152,12,64 --LL=1048576,8,64 --I1=32768,8,64)
SETS=1/8

for tool in clang valgrind python3; do
	command -v $tool >/dev/null || { echo "bench/cachesim.sh: $tool is not installed (scripts/install-deps.sh --test)" >&2; exit 1; }
done
[ -x "$ECPI" ] || { echo "bench/cachesim.sh: $ECPI is not built (make, or set ECPI)" >&2; exit 1; }
T=$(mktemp -d /tmp/ecpi-bench-cachesim.XXXXXX)
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; else OUT=$T/out; mkdir -p "$OUT"; fi
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
exec 9>>"$LOCK"

# Sizes: each program makes 25-90 M references and runs for tenths of a
# second alone, so a full simulation takes seconds and cachegrind a minute.
declare -A ARGS=(
	[stream]="2000000 8" [bloom]="1000000" [tree]="200000"
	[transpose]="2048" [crc]="8388608 4" [hashtable]="300000"
	[sqlite]="10000 8 20000"
)
MODE=all
case "${1:-}" in windows | speed | combined | groups) MODE=$1; shift ;; esac
GROUPS_TOOL=${GROUPS_TOOL:-$here/../build/bench/ecpi_bench_set_groups}
[ $MODE != groups ] || [ -x "$GROUPS_TOOL" ] || { echo "bench/cachesim.sh: $GROUPS_TOOL is not built (cmake --build build --target ecpi_bench_set_groups)" >&2; exit 1; }
[ $MODE != combined ] && [ $MODE != groups ] || SEEDS=${USER_SEEDS:-5}  # the issue's "worst of 5 seeds"
BASELINE=${BASELINE:-}
[ -z "$BASELINE" ] || [ $MODE = speed ] || [ $MODE = combined ] || { echo "bench/cachesim.sh: BASELINE is for the speed and combined modes" >&2; exit 2; }
[ -z "$BASELINE" ] || [ -x "$BASELINE" ] || { echo "bench/cachesim.sh: BASELINE $BASELINE is not executable" >&2; exit 1; }
WINDOWS=${WINDOWS:-10000 30000 100000 300000}
SAMPLE=${SAMPLE:-10}
PROGRAMS=("$@")
[ ${#PROGRAMS[@]} -gt 0 ] || PROGRAMS=(stream bloom tree transpose crc hashtable sqlite)

echo "# $(date -u +%FT%TZ), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
echo "# $(clang --version | head -1), $(valgrind --version), ecpi $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
MEMTRACE=$("$ECPI" flags memtrace)
MEMTRACE_COMPILE=$("$ECPI" flags memtrace --compile)
[ -z "$BASELINE" ] || BASE_MEMTRACE=$("$BASELINE" flags memtrace)
INLINE=${INLINE:-}
CPU=${CPU:-}
[ -z "$CPU" ] || command -v perf >/dev/null || { echo "bench/cachesim.sh: CPU=1 needs perf (linux-perf)" >&2; exit 1; }
read -ra DEFAULT_OPTS <<<"${DEFAULT_OPTS:-}"
read -ra BASELINE_OPTS <<<"${BASELINE_OPTS:-}"
[ ${#BASELINE_OPTS[@]} -eq 0 ] || { [ $MODE = combined ] && [ -n "$BASELINE" ]; } || { echo "bench/cachesim.sh: BASELINE_OPTS is for the combined mode with BASELINE" >&2; exit 2; }
[ ${#DEFAULT_OPTS[@]} -eq 0 ] || [ $MODE = combined ] || { echo "bench/cachesim.sh: DEFAULT_OPTS is for the combined mode" >&2; exit 2; }
[ -z "$INLINE" ] || [ $MODE = speed ] || { echo "bench/cachesim.sh: INLINE is for the speed mode" >&2; exit 2; }
if [ -n "$INLINE" ]; then
	INLINE_MEMTRACE=$("$ECPI" flags memtrace --inline) || exit 1
	INLINE_COMPILE=$("$ECPI" flags memtrace --inline --compile)
fi

# SQLite's amalgamation from npm's better-sqlite3, compiled once per version
# and flags into CACHE_DIR. Prints nothing and fails when it cannot. The
# plain build carries DWARF 4: valgrind 3.19 gives up on clang 14's DWARF 5
# for sqlite3.c ("Possibly corrupted debuginfo file").
SQLITE_DEFS="-DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION"
fetch_sqlite() {
	local dir=$CACHE_DIR/sqlite
	mkdir -p "$dir"
	if [ ! -s "$dir/sqlite3.c" ] || [ ! -s "$dir/sqlite3.h" ]; then
		command -v npm >/dev/null || { echo "# sqlite: npm is not installed; skipped" >&2; return 1; }
		(cd "$T" && npm pack better-sqlite3 --silent >npm.log 2>&1) || { echo "# sqlite: npm pack better-sqlite3 failed: $(tail -1 "$T/npm.log")" >&2; return 1; }
		tar -xzf "$T"/better-sqlite3-*.tgz -C "$T" package/deps/sqlite3/sqlite3.c package/deps/sqlite3/sqlite3.h
		mv "$T/package/deps/sqlite3/sqlite3.c" "$T/package/deps/sqlite3/sqlite3.h" "$dir/"
		echo "$(basename "$T"/better-sqlite3-*.tgz .tgz)" >"$dir/from"
	fi
	local key
	key=$(echo "$(clang --version | head -1) $MEMTRACE_COMPILE $SQLITE_DEFS" | md5sum | cut -c1-8)
	[ -s "$dir/sqlite3.plain-$key.o" ] || clang -O2 -gdwarf-4 $SQLITE_DEFS -c "$dir/sqlite3.c" -o "$dir/sqlite3.plain-$key.o"
	[ -s "$dir/sqlite3.memtrace-$key.o" ] || clang -O2 $MEMTRACE_COMPILE $SQLITE_DEFS -c "$dir/sqlite3.c" -o "$dir/sqlite3.memtrace-$key.o"
	local drv=$here/cachesim/sqlite_orders.c
	clang -O2 -gdwarf-4 -I"$dir" -o "$T/sqlite.plain" "$drv" "$dir/sqlite3.plain-$key.o" -lm
	clang -O2 $MEMTRACE -I"$dir" -o "$T/sqlite.mt" "$drv" "$dir/sqlite3.memtrace-$key.o" -lm
	# (The baseline's compile flags must be the same for this object to serve it.)
	[ -z "$BASELINE" ] || clang -O2 $BASE_MEMTRACE -I"$dir" -o "$T/sqlite.base.mt" "$drv" "$dir/sqlite3.memtrace-$key.o" -lm
	if [ -n "$INLINE" ]; then
		# LTO bitcode, then a link that inlines the callbacks into all of
		# SQLite (minutes): both cached, the link by everything it reads.
		local ikey lkey
		ikey=$(echo "$(clang --version | head -1) $INLINE_COMPILE $SQLITE_DEFS" | md5sum | cut -c1-8)
		[ -s "$dir/sqlite3.inline-$ikey.o" ] || clang -O2 $INLINE_COMPILE $SQLITE_DEFS -c "$dir/sqlite3.c" -o "$dir/sqlite3.inline-$ikey.o"
		lkey=$( { echo "$ikey $INLINE_MEMTRACE" | sed 's|/[^ ]*/||g'; cat "$drv" $(echo "$INLINE_MEMTRACE" | grep -o '/[^ ]*\.[ao]\b'); } | md5sum | cut -c1-8)
		[ -s "$dir/sqlite.inline-$lkey" ] || clang -O2 $INLINE_MEMTRACE -I"$dir" -o "$dir/sqlite.inline-$lkey" "$drv" "$dir/sqlite3.inline-$ikey.o" -lm
		cp "$dir/sqlite.inline-$lkey" "$T/sqlite.inl"
	fi
	echo "sqlite3.c sqlite_orders.c" >"$OUT/sqlite.cgsrc"
	echo "# sqlite: $(grep -m1 '#define SQLITE_VERSION ' "$dir/sqlite3.h" | awk '{print $3}') from $(cat "$dir/from" 2>/dev/null || echo npm)"
}

build() {  # build PROGRAM: $T/PROGRAM.plain and $T/PROGRAM.mt
	local p=$1
	if [ "$p" = sqlite ]; then fetch_sqlite; return; fi
	clang -O2 -gdwarf-4 -o "$T/$p.plain" "$SRC/$p.c"
	clang -O2 $MEMTRACE -o "$T/$p.mt" "$SRC/$p.c"
	[ -z "$BASELINE" ] || clang -O2 $BASE_MEMTRACE -o "$T/$p.base.mt" "$SRC/$p.c"
	[ -z "$INLINE" ] || clang -O2 $INLINE_MEMTRACE -o "$T/$p.inl" "$SRC/$p.c"
	echo "$p.c" >"$OUT/$p.cgsrc"
}

accuracy() {  # accuracy PROGRAM: cachegrind, full, SEEDS sampled runs
	local p=$1 args
	read -ra args <<<"${ARGS[$p]}"
	valgrind --tool=cachegrind --cache-sim=yes "${CG_CACHES[@]}" --cachegrind-out-file="$OUT/$p.cg" \
		"$T/$p.plain" "${args[@]}" >/dev/null 2>"$OUT/$p.cg.log" ||
		{ echo "# $p: cachegrind failed: $(tail -2 "$OUT/$p.cg.log" | head -1)" >&2; rm -f "$OUT/$p.cg"; }
	"$ECPI" cachesim --sample 1/1 --seed 1 "${CACHES[@]}" --format json -o "$OUT/$p.full.json" -- "$T/$p.mt" "${args[@]}" >/dev/null
	for seed in $(seq "$SEEDS"); do
		"$ECPI" cachesim --sample 1/10 --seed "$seed" "${CACHES[@]}" --format json -o "$OUT/$p.s$seed.json" -- "$T/$p.mt" "${args[@]}" >/dev/null
	done
}

# Window length (MemSpy 6.1 and 6.3): more, shorter windows sample a
# program's phases more evenly; longer ones leave fewer references of
# unknown outcome in the larger cache. SEEDS seeds at 1/SAMPLE per length.
windows() {
	local p=$1 args w seed
	read -ra args <<<"${ARGS[$p]}"
	"$ECPI" cachesim --sample 1/1 --seed 1 "${CACHES[@]}" --format json -o "$OUT/$p.full.json" -- "$T/$p.mt" "${args[@]}" >/dev/null
	for w in $WINDOWS; do
		for seed in $(seq "$SEEDS"); do
			"$ECPI" cachesim --sample 1/$SAMPLE --window "$w" --seed "$seed" "${CACHES[@]}" --format json \
				-o "$OUT/$p.w$w.s$seed.json" -- "$T/$p.mt" "${args[@]}" >/dev/null
		done
	done
}

# Where the time goes: perf's split by process and library at 1/1 and 1/10.
PERF_PROGRAMS=" tree sqlite "
where_time_goes() {
	local p=$1 args s
	read -ra args <<<"${ARGS[$p]}"
	command -v perf >/dev/null || { echo "# $p: perf is not installed; no profile" >&2; return 0; }
	for s in 1 10; do
		perf record -q -e cpu-clock -F 999 -o "$T/perf.data" -- \
			"$ECPI" cachesim --sample 1/$s --seed 1 "${CACHES[@]}" -o /dev/null -- "$T/$p.mt" "${args[@]}" >/dev/null 2>&1 || { echo "# $p: perf record failed" >&2; return 0; }
		# (Whole reports into files first: head closing a pipe would stop the script under pipefail.)
		perf report -i "$T/perf.data" --no-children --sort comm,dso >"$T/perf.dso" 2>/dev/null || true
		perf report -i "$T/perf.data" --no-children --sort comm,sym >"$T/perf.sym" 2>/dev/null || true
		{
			echo "### $p, --sample 1/$s: cpu-clock samples by process and object, then the top symbols"
			echo '```'
			grep '%' "$T/perf.dso" | grep -v '^#' | head -6 || true
			echo
			grep '%' "$T/perf.sym" | grep -v '^#' | head -10 | cut -c1-120 || true
			echo '```'
		} >>"$OUT/perf.md"
	done
}

now_ns() { date +%s%N; }
timed() {  # timed PROGRAM CONFIG CMD...: appends "CONFIG SECONDS" to OUT/PROGRAM.times
	local p=$1 c=$2
	shift 2
	local s e
	s=$(now_ns)
	if [ -n "$CPU" ] && { [ "$1" = "$ECPI" ] || [ "$1" = "$BASELINE" ]; }; then
		# CPU=1: ecpi's own CPU time too (single-threaded; --no-inherit leaves the program out).
		perf stat --no-inherit -x, -e task-clock -o "$T/cpu.csv" -- "$@" >/dev/null
		e=$(now_ns)
		echo "$c $(awk -F, '$3 == "task-clock" { print $1 }' "$T/cpu.csv")" >>"$OUT/$p.cpu"
	else
		"$@" >/dev/null
		e=$(now_ns)
	fi
	echo "$c $(( (e - s) / 1000000000 )).$(printf %03d $(( (e - s) / 1000000 % 1000 )))" >>"$OUT/$p.times"
}

timing_lock() {  # timing_lock PROGRAM: fresh times and cpu files, the exclusive lock
	rm -f "$OUT/$1.times" "$OUT/$1.cpu"
	flock -x 9
	echo "# $1: timing under flock -x, load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

timed_programs() {  # timed_programs PROGRAM ARGS...: the plain build, then the instrumented one uncontrolled
	local p=$1
	shift
	timed "$p" alone "$T/$p.plain" "$@"
	timed "$p" uncontrolled "$T/$p.mt" "$@"
}

speed() {  # speed PROGRAM: ROUNDS interleaved rounds of every configuration
	local p=$1 args r
	read -ra args <<<"${ARGS[$p]}"
	timing_lock "$p"
	for r in $(seq "$ROUNDS"); do
		timed_programs "$p" "${args[@]}"
		for s in 1 10 100; do
			timed "$p" "1/$s" "$ECPI" cachesim --sample 1/$s --seed "$r" "${CACHES[@]}" --format json -o "$OUT/$p.t.1_$s.json" -- "$T/$p.mt" "${args[@]}"
			timed "$p" "1/$s+sets" "$ECPI" cachesim --sample 1/$s --sets $SETS --seed "$r" "${CACHES[@]}" --format json \
				-o "$OUT/$p.t.1_$s+sets.json" -- "$T/$p.mt" "${args[@]}"
		done
	done
	flock -u 9
}

# The speed mode: ROUNDS interleaved rounds; with BASELINE, each simulated
# configuration runs with both ecpis in turn (labels "base 1/10" and so on).
speed_only() {
	local p=$1 args r s v
	read -ra args <<<"${ARGS[$p]}"
	local sets=("")
	[ -z "${SETS_TOO:-}" ] || sets+=("--sets $SETS")
	local variants=(new)
	[ -z "$BASELINE" ] || variants+=(base)
	[ -z "$INLINE" ] || variants+=(inline)
	rm -f "$OUT/$p.times"
	flock -x 9
	echo "# $p: timing under flock -x, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	for r in $(seq "$ROUNDS"); do
		timed "$p" alone "$T/$p.plain" "${args[@]}"
		for v in "${variants[@]}"; do
			local e=$ECPI prog=$T/$p.mt label=""
			[ $v != base ] || { e=$BASELINE; prog=$T/$p.base.mt; label="base "; }
			[ $v != inline ] || { prog=$T/$p.inl; label="inline "; }
			timed "$p" "${label}uncontrolled" "$prog" "${args[@]}"
			for s in 1 10 100; do
				local x
				for x in "${sets[@]}"; do
					# shellcheck disable=SC2086
					timed "$p" "${label}1/$s${x:++sets}" "$e" cachesim --sample 1/$s $x --seed "$r" "${CACHES[@]}" --format json \
						-o "$OUT/$p.$v.t.1_$s.json" -- "$prog" "${args[@]}"
				done
			done
		done
	done
	echo "# $p: load average after timing $(cut -d' ' -f1-3 /proc/loadavg)"
	flock -u 9
	python3 - "$OUT/$p.times" "$p" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    c, t = line.rsplit(' ', 1)
    rows.setdefault(c, []).append(float(t))
med = {c: statistics.median(v) for c, v in rows.items()}
print(f"| {sys.argv[2]} | config | median s (of {len(rows['alone'])}) | / alone | 1/1 / this |")
for c in rows:
    base = next((b for b in ('base ', 'inline ') if c.startswith(b)), '')
    full = med.get(base + '1/1' + ('+sets' if c.endswith('+sets') else ''))
    print(f"| | {c} | {med[c]:.3f} | {med[c] / med['alone']:.2f}x | " + (f"{full / med[c]:.2f}x |" if full and '1/' in c else "|"))
PY
}

# The default settings against full simulation: accuracy with SEEDS seeds
# (outside the timing lock; errors do not depend on load), then ROUNDS
# interleaved timed rounds of the program alone, uncontrolled, full and
# default (seed = round).
combined() {
	local p=$1 args r seed
	read -ra args <<<"${ARGS[$p]}"
	"$ECPI" cachesim --sample 1/1 --seed 1 "${CACHES[@]}" --format json -o "$OUT/$p.full.json" -- "$T/$p.mt" "${args[@]}" >/dev/null
	for seed in $(seq "$SEEDS"); do
		"$ECPI" cachesim --seed "$seed" "${DEFAULT_OPTS[@]}" "${CACHES[@]}" --format json -o "$OUT/$p.d$seed.json" -- "$T/$p.mt" "${args[@]}" >/dev/null
	done
	flock -u 9
	timing_lock "$p"
	for r in $(seq "$ROUNDS"); do
		timed_programs "$p" "${args[@]}"
		timed "$p" full "$ECPI" cachesim --sample 1/1 --seed "$r" "${CACHES[@]}" --format json -o /dev/null -- "$T/$p.mt" "${args[@]}"
		timed "$p" default "$ECPI" cachesim --seed "$r" "${DEFAULT_OPTS[@]}" "${CACHES[@]}" --format json -o /dev/null -- "$T/$p.mt" "${args[@]}"
		timed "$p" time-only "$ECPI" cachesim --set-levels none --seed "$r" "${CACHES[@]}" --format json -o /dev/null -- "$T/$p.mt" "${args[@]}"
		[ -z "$BASELINE" ] || timed "$p" "base uncontrolled" "$T/$p.base.mt" "${args[@]}"
		[ -z "$BASELINE" ] || timed "$p" "base default" "$BASELINE" cachesim --seed "$r" "${BASELINE_OPTS[@]}" "${CACHES[@]}" --format json -o /dev/null -- "$T/$p.base.mt" "${args[@]}"
		[ -z "$BASELINE" ] || timed "$p" "base full" "$BASELINE" cachesim --sample 1/1 --seed "$r" "${CACHES[@]}" --format json -o /dev/null -- "$T/$p.base.mt" "${args[@]}"
	done
	echo "# $p: load average after timing $(cut -d' ' -f1-3 /proc/loadavg)"
}

# Each group of sets' counts from one full simulation's trace (the trace,
# 16 bytes a reference, is deleted at once: SQLite's is about 7 GB).
groups() {
	local p=$1 args
	read -ra args <<<"${ARGS[$p]}"
	"$ECPI" cachesim --sample 1/1 --seed 1 "${CACHES[@]}" --format json -o "$OUT/$p.full.json" --write-trace "$T/$p.trace" \
		-- "$T/$p.mt" "${args[@]}" >/dev/null
	"$GROUPS_TOOL" "$T/$p.trace" "${CACHE_SPECS[@]}" >"$OUT/$p.groups.tsv"
	rm -f "$T/$p.trace"
}

DONE=()
for p in "${PROGRAMS[@]}"; do
	[ -n "${ARGS[$p]:-}" ] || { echo "bench/cachesim.sh: unknown program '$p' (${!ARGS[*]})" >&2; exit 2; }
	flock -s 9
	if ! build "$p"; then flock -u 9; continue; fi
	if [ $MODE = speed ]; then
		flock -u 9
		speed_only "$p"
		DONE+=("$p")
		continue
	fi
	if [ $MODE = combined ] || [ $MODE = windows ] || [ $MODE = groups ]; then
		if [ $MODE = groups ]; then
			echo "# $p ${ARGS[$p]}: full simulation with its trace, each group of sets' counts"
		elif [ $MODE = combined ]; then
			echo "# $p ${ARGS[$p]}: full simulation, $SEEDS runs at the default settings${DEFAULT_OPTS[*]:+ plus ${DEFAULT_OPTS[*]}}, $ROUNDS timed rounds"
		else
			echo "# $p ${ARGS[$p]}: full simulation, $SEEDS runs at 1/$SAMPLE at each window of $WINDOWS"
		fi
		$MODE "$p"
		flock -u 9
		DONE+=("$p")
		continue
	fi
	echo "# $p ${ARGS[$p]}: cachegrind, full simulation, $SEEDS sampled runs"
	accuracy "$p"
	[[ $PERF_PROGRAMS == *" $p "* ]] && where_time_goes "$p"
	flock -u 9
	speed "$p"
	DONE+=("$p")
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ $MODE != speed ] || exit 0
if [ $MODE = combined ]; then
	SEEDS=$SEEDS python3 "$here/cachesim/combined.py" "$OUT" "${DONE[@]}"
	exit 0
fi
if [ $MODE = groups ]; then
	SEEDS=$SEEDS python3 "$here/cachesim/groups.py" "$OUT" "${DONE[@]}"
	exit 0
fi
if [ $MODE = windows ]; then
	TABLE=windows SEEDS=$SEEDS python3 "$here/cachesim/tables.py" "$OUT" "${DONE[@]}"
	exit 0
fi
SEEDS=$SEEDS SETS_LABEL="sets $SETS" python3 "$here/cachesim/tables.py" "$OUT" "${DONE[@]}"
[ ! -s "$OUT/perf.md" ] || { echo; echo "### Where the time goes"; echo; cat "$OUT/perf.md"; }
