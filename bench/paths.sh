#!/usr/bin/env bash
# Variational path profiling (issue 19; VPP: shared/papers/
# variational-path-profiling.txt): `ecpi paths record` and `ecpi paths
# --branch` on programs built with `clang -O2 $(ecpi flags paths)`.
#
#   orders     tests/testprogs/paths/orders.c, REQUESTS requests, recorded at
#              --sample 1/20 with the default customer table (128 MB) and with
#              CUSTOMERS=2048 (the table fits the cache): the cold-customer
#              path's ranks by variation and by time; then the fix, timed on
#              the plain build (ROUNDS interleaved runs of each table, medians
#              of the program's own `loop X s`) against the path's estimated
#              net variation.
#   overhead   orders alone (plain build), built with the flags but not
#              recorded, and `ecpi paths record --no-save` at 1/1, 1/10,
#              1/100 (ROUNDS interleaved, medians of `loop X s`).
#   distortion bench/paths/chain.c: one path per iteration, a dependent chain
#              of 16, 64 or 256 multiplications; its basetime and mean under
#              --sample 1/10 against the plain build's time per iteration.
#   ablation   tests/testprogs/paths/channels.c (issue 31's three-path loop:
#              A a dependent multiply/xor/shift chain, 4 of 6 turns; B one
#              load that misses 1 in 4, 1 of 6; C trivial): the plain build
#              and builds with each path's work removed, with all removed,
#              and with each path's work alone (the other two removed),
#              ABLATION_ROUNDS (7) interleaved rounds, medians: what each path
#              costs, by two designs (removing it from the whole; adding it
#              to the loop alone; one more turn of it in each round of the
#              whole program: what one more occurrence costs in its mix). Then `ecpi paths record --sample 1/10` of the
#              `flags paths --inline` build (span fit) and of the out-of-line
#              build (stamps) at seeds 1-5: fitted/stamped mean per path
#              against ablation, and A's rank by time. And the inline build's
#              cost: idle, and recording at 1/10, against the plain build.
#   reader     what recording the inline channels build at --sample 1/10
#              costs and where: the plain build, the inline build idle and
#              recorded, ABLATION_ROUNDS interleaved rounds, medians of the
#              loop time, the CPU seconds of ecpi and the program together
#              (/usr/bin/time), and the seconds the program waited for ring
#              space (ecpi's reader behind); and the same recording read by
#              bench/paths/null_reader.c, which discards the records unread
#              (the runtime's own cost) or reads them without decoding.
#   breakdown  where the inline build's recording cost at 1/10 lies: channels
#              linked with runtimes built from the working tree by
#              bench/paths/build_runtime.sh, one part turned off in each (no
#              stamped bursts, no span records written into the ring, neither),
#              recorded by ecpi; the whole runtime recorded by ecpi and by
#              null_reader discard (no reader's work on the other CPU); the
#              plain build and the inline build idle. ABLATION_ROUNDS
#              interleaved rounds (the order reversed every other round),
#              medians of each run over the plain run of its round.
#              BREAKDOWN_REV: the commit whose runtime/ the variants are built
#              from (default: the working tree); BEFORE_RUNTIME: also the
#              whole of that runtime, recorded by ecpi.
#   sqlite     SQLite's amalgamation (npm's better-sqlite3, fetched into a
#              cache directory, never into the tree) driven by
#              bench/cachesim/sqlite_orders.c with two inputs (A, B) and A
#              again with another seed: top 10 by variation with source lines,
#              overlap with the top 10 by time, `--compare` across inputs.
# Timed parts run under flock -x on /tmp/ecpi-quiet.lock (each under ten
# minutes) and print the load average beside them.
#
# Usage: bash bench/paths.sh [PART...]   (default: orders overhead distortion ablation sqlite)
# Environment: ECPI (default build/loader/ecpi), REQUESTS (20000000), ROUNDS (5),
#   OVERHEAD_REQUESTS (5000000), ABLATION_ROUNDS (7), CHANNEL_ROUNDS (2000000), SQLITE_SAMPLE (1/100),
#   SQLITE_INLINE (1: SQLite built with `flags paths --inline`, timed by the span fit),
#   ABLATION_FENCE (1: channels built with -DFENCE_TURNS), BEFORE_RUNTIME (a directory holding another
#   build's runtime/ecpi_rt_paths_inline.o and libecpi_rt.a, as bench/paths/build_runtime.sh REV DIR
#   makes them: the reader part runs channels linked with it too, idle and recorded, interleaved), ECPI_QUIET_LOCK (the lock file timed parts
#   take exclusively; default /tmp/ecpi-quiet.lock), OUT (keep the reports there; default a
#   temporary directory), ECPI_BENCH_CACHE (SQLite's sources and objects;
#   default ~/.cache/ecpi-bench).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ECPI=${ECPI:-$here/../build/loader/ecpi}
REQUESTS=${REQUESTS:-20000000}
OVERHEAD_REQUESTS=${OVERHEAD_REQUESTS:-5000000}
ROUNDS=${ROUNDS:-5}
CACHE_DIR=${ECPI_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ecpi-bench}
LOCK=${ECPI_QUIET_LOCK:-/tmp/ecpi-quiet.lock}
SMALL_TABLE=2048
ORDERS_SAMPLE=1/20
CHAIN_ITERATIONS=(16:20000000 64:5000000 256:1250000)
SQLITE_A=(20000 8 50000)
SQLITE_B=(4000 40 200000)
SQLITE_SAMPLE=${SQLITE_SAMPLE:-1/100}
SQLITE_INLINE=${SQLITE_INLINE:-1}
ABLATION_ROUNDS=${ABLATION_ROUNDS:-7}
CHANNEL_ROUNDS=${CHANNEL_ROUNDS:-2000000}
ABLATIONS=(whole:"" no_a:-DWITHOUT_DIGEST no_b:-DWITHOUT_LOOKUP no_c:-DWITHOUT_HEARTBEAT
	none:"-DWITHOUT_DIGEST -DWITHOUT_LOOKUP -DWITHOUT_HEARTBEAT"
	only_a:"-DWITHOUT_LOOKUP -DWITHOUT_HEARTBEAT" only_b:"-DWITHOUT_DIGEST -DWITHOUT_HEARTBEAT"
	only_c:"-DWITHOUT_DIGEST -DWITHOUT_LOOKUP"
	plus_a:-DEXTRA_DIGEST plus_b:-DEXTRA_LOOKUP plus_c:-DEXTRA_HEARTBEAT)
# ABLATION_FENCE=1: every channels build ends each turn with an lfence
# (-DFENCE_TURNS): no overlap between turns.
CHANNELS_DEFS=$([ "${ABLATION_FENCE:-0}" = 1 ] && echo -DFENCE_TURNS || true)

for tool in clang python3; do
	command -v $tool >/dev/null || { echo "bench/paths.sh: $tool is not installed (scripts/install-deps.sh --test)" >&2; exit 1; }
done
[ -x "$ECPI" ] || { echo "bench/paths.sh: $ECPI is not built (make, or set ECPI)" >&2; exit 1; }
PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(orders overhead distortion ablation sqlite)
for p in "${PARTS[@]}"; do
	case $p in orders | overhead | distortion | ablation | reader | breakdown | sqlite) ;; *) echo "bench/paths.sh: unknown part '$p' (orders overhead distortion ablation reader breakdown sqlite)" >&2; exit 2 ;; esac
done
T=$(mktemp -d /tmp/ecpi-bench-paths.XXXXXX)
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; else OUT=$T/out; mkdir -p "$OUT"; fi
OUT=$(cd "$OUT" && pwd)
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
exec 9>>"$LOCK"

echo "# $(date -u +%FT%TZ), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
echo "# $(clang --version | head -1), ecpi $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
PATHS_FLAGS=$("$ECPI" flags paths)
PATHS_COMPILE=$("$ECPI" flags paths --compile)
INLINE_FLAGS=$("$ECPI" flags paths --inline)
INLINE_COMPILE=$("$ECPI" flags paths --inline --compile)
load() { cut -d' ' -f1-3 /proc/loadavg; }
loop_seconds() { sed -n 's/.*loop \([0-9.]*\) s.*/\1/p' | head -1; }

# --- builds (shared lock: other engineers may build at the same time) ---
flock -s 9
clang -O2 -g -o "$T/orders.plain" "$here/../tests/testprogs/paths/orders.c" -lm
clang -O2 $PATHS_FLAGS -o "$T/orders.paths" "$here/../tests/testprogs/paths/orders.c" -lm
clang -O2 -g -o "$T/chain.plain" "$here/paths/chain.c"
clang -O2 $PATHS_FLAGS -o "$T/chain.paths" "$here/paths/chain.c"
CHANNELS_SOURCE=$here/../tests/testprogs/paths/channels.c
for spec in "${ABLATIONS[@]}"; do
	clang -O2 -g $CHANNELS_DEFS ${spec#*:} -o "$T/channels.${spec%%:*}" "$CHANNELS_SOURCE"
done
clang -O2 $CHANNELS_DEFS $INLINE_FLAGS -o "$T/channels.inline" "$CHANNELS_SOURCE"
clang -O2 $CHANNELS_DEFS $PATHS_FLAGS -o "$T/channels.paths" "$CHANNELS_SOURCE"
if [ -n "${BEFORE_RUNTIME:-}" ]; then
	rt_dir=$(dirname "$(echo "$INLINE_FLAGS" | tr ' ' '\n' | grep 'ecpi_rt_paths_inline.o$')")
	clang -O2 $CHANNELS_DEFS ${INLINE_FLAGS//$rt_dir/$BEFORE_RUNTIME} -o "$T/channels.inline_before" "$CHANNELS_SOURCE"
fi
clang -O2 -o "$T/null_reader" "$here/paths/null_reader.c"
# breakdown: the runtime with one part turned off (runtime/rt_spans.c).
BREAKDOWN_VARIANTS=(full:"" nobursts:-DECPI_RT_BENCH_NO_BURSTS norecords:-DECPI_RT_BENCH_NO_SPAN_RECORDS
	neither:"-DECPI_RT_BENCH_NO_BURSTS -DECPI_RT_BENCH_NO_SPAN_RECORDS")
if [[ " ${PARTS[*]} " == *" breakdown "* ]]; then
	rt_dir=$(dirname "$(echo "$INLINE_FLAGS" | tr ' ' '\n' | grep 'ecpi_rt_paths_inline.o$')")
	for spec in "${BREAKDOWN_VARIANTS[@]}"; do
		bash "$here/paths/build_runtime.sh" "${BREAKDOWN_REV:-worktree}" "$T/rt.${spec%%:*}" ${spec#*:} >/dev/null
		clang -O2 $CHANNELS_DEFS ${INLINE_FLAGS//$rt_dir/$T/rt.${spec%%:*}} -o "$T/channels.${spec%%:*}" "$CHANNELS_SOURCE"
	done
fi
flock -u 9
cp "$T/orders.paths" "$T/chain.paths" "$T/channels.inline" "$T/channels.paths" "$OUT/"  # the reports name these images; keep them for source lines

# --- 1. orders: ranks, then the fix ---
part_orders() {
	local r
	flock -x 9
	echo "# orders: recording $REQUESTS requests at --sample $ORDERS_SAMPLE under flock -x, load $(load)"
	rm -rf "$OUT/orders.db" "$OUT/orders_small.db"
	"$ECPI" paths record -o "$OUT/orders.db" --sample $ORDERS_SAMPLE --seed 1 -- "$OUT/orders.paths" "$REQUESTS" >"$OUT/orders.record.txt"
	"$ECPI" paths record -o "$OUT/orders_small.db" --sample $ORDERS_SAMPLE --seed 1 -- "$OUT/orders.paths" "$REQUESTS" $SMALL_TABLE >"$OUT/orders_small.record.txt"
	echo "# orders: the fix, $ROUNDS interleaved runs of the plain build, load $(load)"
	rm -f "$OUT/orders.fix.times"
	for r in $(seq "$ROUNDS"); do
		echo "default $("$T/orders.plain" "$REQUESTS" | loop_seconds)" >>"$OUT/orders.fix.times"
		echo "small $("$T/orders.plain" "$REQUESTS" $SMALL_TABLE | loop_seconds)" >>"$OUT/orders.fix.times"
	done
	echo "# orders: done, load $(load)"
	flock -u 9
	"$ECPI" paths "$OUT/orders.db" --branch --limit 100000 --format json >"$OUT/orders.json"
	"$ECPI" paths "$OUT/orders_small.db" --branch --limit 100000 --format json >"$OUT/orders_small.json"
	"$ECPI" paths "$OUT/orders.db" --branch --limit 8 >"$OUT/orders.txt"
}

# --- 2. overhead of recording ---
part_overhead() {
	local r s
	flock -x 9
	echo "# overhead: $OVERHEAD_REQUESTS requests, $ROUNDS interleaved rounds under flock -x, load $(load)"
	rm -f "$OUT/overhead.times"
	for r in $(seq "$ROUNDS"); do
		echo "alone $("$T/orders.plain" "$OVERHEAD_REQUESTS" | loop_seconds)" >>"$OUT/overhead.times"
		echo "instrumented $("$T/orders.paths" "$OVERHEAD_REQUESTS" | loop_seconds)" >>"$OUT/overhead.times"
		for s in 1 10 100; do
			echo "1/$s $("$ECPI" paths record --no-save --sample 1/$s --seed "$r" --limit 1 -- "$T/orders.paths" "$OVERHEAD_REQUESTS" | loop_seconds)" >>"$OUT/overhead.times"
		done
	done
	echo "# overhead: done, load $(load)"
	flock -u 9
}

# --- 3. distortion of a path of known cost ---
part_distortion() {
	local r spec n it
	flock -x 9
	echo "# distortion: chain at ${CHAIN_ITERATIONS[*]} (steps:iterations), $ROUNDS rounds under flock -x, load $(load)"
	rm -f "$OUT/chain.times"
	for r in $(seq "$ROUNDS"); do
		for spec in "${CHAIN_ITERATIONS[@]}"; do
			n=${spec%%:*} it=${spec##*:}
			echo "$n plain $("$T/chain.plain" "$n" "$it" | loop_seconds) $it" >>"$OUT/chain.times"
			echo "$n instrumented $("$T/chain.paths" "$n" "$it" | loop_seconds) $it" >>"$OUT/chain.times"
			if [ "$r" = 1 ]; then
				rm -rf "$OUT/chain$n.db"
				"$ECPI" paths record -o "$OUT/chain$n.db" --sample 1/10 --seed 1 -- "$OUT/chain.paths" "$n" "$it" >"$OUT/chain$n.record.txt"
			fi
		done
	done
	echo "# distortion: done, load $(load)"
	flock -u 9
	for spec in "${CHAIN_ITERATIONS[@]}"; do
		n=${spec%%:*}
		"$ECPI" paths "$OUT/chain$n.db" --branch --limit 100000 --procedure "chain$n" --format json >"$OUT/chain$n.json"
	done
}

# --- 4. ablation: what each of three paths costs, against what ecpi says ---
part_ablation() {
	local r spec seed
	flock -x 9
	echo "# ablation: channels $CHANNEL_ROUNDS rounds, $ABLATION_ROUNDS interleaved rounds under flock -x, load $(load)"
	rm -f "$OUT/ablation.times"
	for r in $(seq "$ABLATION_ROUNDS"); do
		for spec in "${ABLATIONS[@]}"; do
			echo "${spec%%:*} $("$T/channels.${spec%%:*}" "$CHANNEL_ROUNDS" | loop_seconds)" >>"$OUT/ablation.times"
		done
		echo "inline_idle $("$T/channels.inline" "$CHANNEL_ROUNDS" | loop_seconds)" >>"$OUT/ablation.times"
		echo "inline_1/10 $("$ECPI" paths record --no-save --sample 1/10 --seed "$r" --limit 1 -- "$T/channels.inline" "$CHANNEL_ROUNDS" | loop_seconds)" >>"$OUT/ablation.times"
		echo "stamped_1/10 $("$ECPI" paths record --no-save --sample 1/10 --seed "$r" --limit 1 -- "$T/channels.paths" "$CHANNEL_ROUNDS" | loop_seconds)" >>"$OUT/ablation.times"
	done
	echo "# ablation: recordings at seeds 1-5, load $(load)"
	for seed in 1 2 3 4 5; do
		rm -rf "$OUT/ablation_inline_$seed.db" "$OUT/ablation_stamped_$seed.db"
		"$ECPI" paths record -o "$OUT/ablation_inline_$seed.db" --sample 1/10 --seed "$seed" -- "$OUT/channels.inline" "$CHANNEL_ROUNDS" >/dev/null
		"$ECPI" paths record -o "$OUT/ablation_stamped_$seed.db" --sample 1/10 --seed "$seed" -- "$OUT/channels.paths" "$CHANNEL_ROUNDS" >/dev/null
	done
	echo "# ablation: done, load $(load)"
	flock -u 9
	for seed in 1 2 3 4 5; do
		for kind in inline stamped; do
			"$ECPI" paths "$OUT/ablation_${kind}_$seed.db" --branch --limit 0 --procedure poll --format json >"$OUT/ablation_${kind}_$seed.json"
		done
	done
	"$ECPI" paths "$OUT/ablation_inline_1.db" --branch --rank time --limit 6 --procedure poll >"$OUT/ablation_inline_1.txt"
}

# --- 5. reader: the inline build's recording cost at 1/10 ---
# One configuration's runs in a round: LABEL_idle (not recorded) and
# LABEL_1/10 (loop seconds, CPU seconds of ecpi and the program, seconds
# waited for ring space).
reader_runs() {
	local label=$1 binary=$2 seed=$3
	echo "${label}_idle $("$binary" "$CHANNEL_ROUNDS" | loop_seconds)" >>"$OUT/reader.times"
	/usr/bin/time -f "%U %S" -o "$T/reader.cpu" "$ECPI" paths record --no-save --sample 1/10 --seed "$seed" --limit 1 \
		-- "$binary" "$CHANNEL_ROUNDS" >"$T/reader.txt"
	echo "${label}_1/10 $(loop_seconds <"$T/reader.txt") $(awk '{print $1 + $2}' "$T/reader.cpu") \
$(sed -n 's/.*waited \([0-9.]*\) s.*/\1/p' "$T/reader.txt" | head -1 | grep . || echo 0)" >>"$OUT/reader.times"
}

part_reader() {
	local r
	flock -x 9
	echo "# reader: channels $CHANNEL_ROUNDS rounds, $ABLATION_ROUNDS interleaved rounds under flock -x, load $(load)"
	rm -f "$OUT/reader.times"
	for r in $(seq "$ABLATION_ROUNDS"); do
		echo "plain $("$T/channels.whole" "$CHANNEL_ROUNDS" | loop_seconds)" >>"$OUT/reader.times"
		# BEFORE_RUNTIME: the same runs of channels linked with another
		# runtime (a before/after in one hold), first in every other round
		# (a drift within a round weighs on both alike).
		if [ -n "${BEFORE_RUNTIME:-}" ] && [ $((r % 2)) = 0 ]; then
			reader_runs before "$T/channels.inline_before" "$r"
			reader_runs inline "$T/channels.inline" "$r"
		else
			reader_runs inline "$T/channels.inline" "$r"
			[ -z "${BEFORE_RUNTIME:-}" ] || reader_runs before "$T/channels.inline_before" "$r"
		fi
		# The same recording with a reader that discards the records unread,
		# and one that reads them without decoding (bench/paths/null_reader.c).
		echo "discard $("$T/null_reader" discard 4096 $((4096 * 9)) "$r" -- "$T/channels.inline" "$CHANNEL_ROUNDS" | loop_seconds)" >>"$OUT/reader.times"
		echo "touch $("$T/null_reader" touch 4096 $((4096 * 9)) "$r" -- "$T/channels.inline" "$CHANNEL_ROUNDS" | loop_seconds)" >>"$OUT/reader.times"
	done
	echo "# reader: done, load $(load)"
	flock -u 9
}

# --- 6. breakdown: the recording cost at 1/10 by part ---
breakdown_run() {
	local config=$1 seed=$2
	case $config in
	plain) "$T/channels.whole" "$CHANNEL_ROUNDS" ;;
	idle) "$T/channels.full" "$CHANNEL_ROUNDS" ;;
	full_discard) "$T/null_reader" discard 4096 $((4096 * 9)) "$seed" -- "$T/channels.full" "$CHANNEL_ROUNDS" ;;
	*) "$ECPI" paths record --no-save --sample 1/10 --seed "$seed" --limit 1 -- "$T/channels.${config%_ecpi}" "$CHANNEL_ROUNDS" ;;
	esac | loop_seconds
}

part_breakdown() {
	local r c configs=(plain idle full_ecpi full_discard nobursts_ecpi norecords_ecpi neither_ecpi) order
	[ -z "${BEFORE_RUNTIME:-}" ] || configs+=(inline_before_ecpi)
	flock -x 9
	echo "# breakdown: channels $CHANNEL_ROUNDS rounds, $ABLATION_ROUNDS interleaved rounds under flock -x, load $(load)"
	rm -f "$OUT/breakdown.times"
	for r in $(seq "$ABLATION_ROUNDS"); do
		order=("${configs[@]}")
		[ $((r % 2)) = 1 ] || order=($(printf '%s\n' "${configs[@]}" | tac))
		for c in "${order[@]}"; do
			echo "$c $(breakdown_run "$c" "$r") $r" >>"$OUT/breakdown.times"
		done
	done
	echo "# breakdown: done, load $(load)"
	flock -u 9
}

# --- 7. SQLite ---
# The amalgamation from npm's better-sqlite3, compiled once per version and
# flags into CACHE_DIR (as bench/cachesim.sh does). Fails with a line when
# it cannot.
SQLITE_DEFS="-DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION"
fetch_sqlite() {
	local dir=$CACHE_DIR/sqlite key
	mkdir -p "$dir"
	if [ ! -s "$dir/sqlite3.c" ] || [ ! -s "$dir/sqlite3.h" ]; then
		command -v npm >/dev/null || { echo "# sqlite: npm is not installed; skipped" >&2; return 1; }
		(cd "$T" && npm pack better-sqlite3 --silent >npm.log 2>&1) || { echo "# sqlite: npm pack better-sqlite3 failed: $(tail -1 "$T/npm.log")" >&2; return 1; }
		tar -xzf "$T"/better-sqlite3-*.tgz -C "$T" package/deps/sqlite3/sqlite3.c package/deps/sqlite3/sqlite3.h
		mv "$T/package/deps/sqlite3/sqlite3.c" "$T/package/deps/sqlite3/sqlite3.h" "$dir/"
		echo "$(basename "$T"/better-sqlite3-*.tgz .tgz)" >"$dir/from"
	fi
	# --inline: full LTO, the object is bitcode and the callback is inlined at the link.
	local compile=$PATHS_COMPILE link=$PATHS_FLAGS
	[ "$SQLITE_INLINE" = 1 ] && compile=$INLINE_COMPILE link=$INLINE_FLAGS
	key=$(echo "$(clang --version | head -1) $compile $SQLITE_DEFS" | md5sum | cut -c1-8)
	if [ ! -s "$dir/sqlite3.paths-$key.o" ]; then
		clang -O2 $compile $SQLITE_DEFS -c "$dir/sqlite3.c" -o "$T/sqlite3.paths.o"
		mv "$T/sqlite3.paths.o" "$dir/sqlite3.paths-$key.o"
	fi
	clang -O2 $link -I"$dir" -o "$OUT/sqlite.paths" "$here/cachesim/sqlite_orders.c" "$dir/sqlite3.paths-$key.o" -lm
	echo "# sqlite: $(grep -m1 '#define SQLITE_VERSION ' "$dir/sqlite3.h" | awk '{print $3}') from $(cat "$dir/from" 2>/dev/null || echo npm)"
}

part_sqlite() {
	local name
	flock -s 9
	if ! fetch_sqlite; then flock -u 9; return 0; fi
	flock -u 9
	flock -x 9
	echo "# sqlite: A = ${SQLITE_A[*]}, B = ${SQLITE_B[*]} (customers, orders per customer, lookups), --sample $SQLITE_SAMPLE under flock -x, load $(load)"
	rm -rf "$OUT"/sqlite_*.db
	"$ECPI" paths record -o "$OUT/sqlite_A.db" --sample "$SQLITE_SAMPLE" --seed 1 -- "$OUT/sqlite.paths" "${SQLITE_A[@]}" >"$OUT/sqlite_A.record.txt"
	"$ECPI" paths record -o "$OUT/sqlite_A2.db" --sample "$SQLITE_SAMPLE" --seed 2 -- "$OUT/sqlite.paths" "${SQLITE_A[@]}" >"$OUT/sqlite_A2.record.txt"
	"$ECPI" paths record -o "$OUT/sqlite_B.db" --sample "$SQLITE_SAMPLE" --seed 3 -- "$OUT/sqlite.paths" "${SQLITE_B[@]}" >"$OUT/sqlite_B.record.txt"
	echo "# sqlite: done, load $(load)"
	flock -u 9
	for name in A A2 B; do
		"$ECPI" paths "$OUT/sqlite_$name.db" --branch --limit 100000 --format json >"$OUT/sqlite_$name.json"
	done
	"$ECPI" paths "$OUT/sqlite_A.db" --branch --limit 10 >"$OUT/sqlite_A.txt"
	"$ECPI" paths "$OUT/sqlite_A.db" --branch --limit 10 --compare "$OUT/sqlite_B.db" --compare-top 10 --format json >"$OUT/sqlite_AB.json"
	"$ECPI" paths "$OUT/sqlite_A.db" --branch --limit 10 --compare "$OUT/sqlite_A2.db" --compare-top 10 --format json >"$OUT/sqlite_AA2.json"
	"$ECPI" paths "$OUT/sqlite_B.db" --branch --limit 10 --compare "$OUT/sqlite_A.db" --compare-top 10 --format json >"$OUT/sqlite_BA.json"
}

for p in "${PARTS[@]}"; do
	"part_$p"
done
echo "# load average at end: $(load)"
SMALL_TABLE=$SMALL_TABLE CHANNELS_SOURCE="$CHANNELS_SOURCE" ORDERS_SOURCE="$here/../tests/testprogs/paths/orders.c" \
	python3 "$here/paths/tables.py" "$OUT" "${PARTS[@]}"
