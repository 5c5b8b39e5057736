#!/usr/bin/env bash
# Profile-guided optimization from ecpi's counts (issue 33): how much of
# clang's instrumented PGO gain an AutoFDO profile from `ecpi export --format
# afdo` brings, with cpu-clock samples only (no LBR).
#
# Programs: SQLite's amalgamation (npm's better-sqlite3, fetched into a cache
# directory by bench/sqlite_source.sh) driven by bench/cachesim/sqlite_orders.c
# (inserts in a transaction, indexed lookups, a join with grouping, a sort),
# and the bundled word counter tests/testprogs/pgo/wordfreq.c. Each is built
# with clang -O2 three ways:
#   plain   -O2 -g -fdebug-info-for-profiling (the build ecpi records)
#   instr   -fprofile-instr-generate, trained on the workload, then -fprofile-instr-use
#   ecpi    `ecpi record -F 4999` of the plain build, `ecpi export --format afdo`,
#           then -fprofile-sample-use (with -g -fdebug-info-for-profiling)
# Training and timing use the same workload, as the issue's measurement did.
#
# Usage:
#   bash bench/pgo.sh build            # compile, train, record, export (shared lock: CPU, no timing)
#   bash bench/pgo.sh time [RUNS=7]    # interleaved timed runs (take the exclusive lock)
# e.g.  flock -s /work/quiet.lock bash bench/pgo.sh build
#       flock -x -w 1200 /work/quiet.lock bash bench/pgo.sh time 7
# Environment: ECPI (default build/loader/ecpi), ECPI_BENCH_CACHE (SQLite's
# sources; default ~/.cache/ecpi-bench), PGO_DIR (the builds; default
# CACHE/pgo), PROGRAMS (default "sqlite wordfreq").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ECPI=${ECPI:-$here/../build/loader/ecpi}
CACHE_DIR=${ECPI_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ecpi-bench}
PGO_DIR=${PGO_DIR:-$CACHE_DIR/pgo}
PROGRAMS=${PROGRAMS:-sqlite wordfreq}
MODE=${1:-}
RUNS=${2:-7}
source "$here/sqlite_source.sh"

for tool in clang llvm-profdata python3; do
	command -v $tool >/dev/null || { echo "bench/pgo.sh: $tool is not installed (scripts/install-deps.sh --test)" >&2; exit 1; }
done
T=$(mktemp -d /tmp/ecpi-bench-pgo.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$PGO_DIR"

declare -A ARGS=([sqlite]="20000 8 50000" [wordfreq]="40")

# sources PROGRAM: the compiler's inputs (driver and library together, so
# every build applies its flags to both).
sources() {
	case $1 in
	sqlite)
		local dir
		dir=$(sqlite_source "$CACHE_DIR" "$T") || return 1
		echo "-I$dir -DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION $here/cachesim/sqlite_orders.c $dir/sqlite3.c -lm"
		;;
	wordfreq) echo "$here/../tests/testprogs/pgo/wordfreq.c" ;;
	esac
}

# fresh FILE SOURCES...: FILE exists and is newer than every .c among SOURCES
# (SQLite's builds take minutes: the plain and instrumented ones are kept).
fresh() {
	local f=$1 s
	shift
	[ -x "$f" ] || return 1
	for s in "$@"; do
		case $s in *.c) [ "$f" -nt "$s" ] || return 1 ;; esac
	done
}

build() {
	local p=$1 src out=$PGO_DIR/$1
	src=$(sources "$p") || return 1
	# shellcheck disable=SC2086
	{
		fresh "$out.plain" $src || clang -O2 -g -fdebug-info-for-profiling -o "$out.plain" $src
		if ! fresh "$out.instr" $src; then
			clang -O2 -fprofile-instr-generate -o "$out.instr-gen" $src
			rm -f "$T"/*.profraw
			LLVM_PROFILE_FILE="$T/$p-%p.profraw" "$out.instr-gen" ${ARGS[$p]} >/dev/null 2>&1
			llvm-profdata merge -o "$out.profdata" "$T"/*.profraw
			clang -O2 -fprofile-instr-use="$out.profdata" -o "$out.instr" $src
		fi
		rm -rf "$out.db"
		"$ECPI" record -q -F 4999 -o "$out.db" -- "$out.plain" ${ARGS[$p]} >/dev/null 2>&1
		"$ECPI" export "$out.db" --format afdo --image "$out.plain" -o "$out.afdo"
		clang -O2 -g -fdebug-info-for-profiling -fprofile-sample-use="$out.afdo" -o "$out.ecpi" $src
	}
	# Every build prints the same answer.
	local want
	want=$("$out.plain" ${ARGS[$p]} 2>/dev/null | md5sum)
	for v in instr ecpi; do
		[ "$("$out.$v" ${ARGS[$p]} 2>/dev/null | md5sum)" = "$want" ] || { echo "bench/pgo.sh: $p.$v prints something else" >&2; return 1; }
	done
	echo "# $p: built; profile $(wc -l <"$out.afdo") lines, $(grep -c '^[^ ]' "$out.afdo") functions"
}

# seconds BINARY ARGS...: wall-clock seconds of one run.
seconds() {
	local start end
	start=$(date +%s.%N)
	"$@" >/dev/null 2>&1
	end=$(date +%s.%N)
	python3 -c "print(f'{$end - $start:.4f}')"
}

time_runs() {
	local p=$1 out=$PGO_DIR/$1
	for v in plain instr ecpi; do : >"$T/$p.$v"; done
	for _ in $(seq "$RUNS"); do
		for v in plain instr ecpi; do
			# shellcheck disable=SC2086
			seconds "$out.$v" ${ARGS[$p]} >>"$T/$p.$v"
		done
	done
	python3 - "$p" "$T/$p.plain" "$T/$p.instr" "$T/$p.ecpi" <<'PY'
import statistics, sys
name = sys.argv[1]
plain, instr, ecpi = (statistics.median(float(x) for x in open(f)) for f in sys.argv[2:5])
share = (plain - ecpi) / (plain - instr) if plain != instr else float("nan")
print(f"| {name} | {plain:.3f} | {instr:.3f} ({(plain - instr) / plain:+.1%}) | {ecpi:.3f} ({(plain - ecpi) / plain:+.1%}) | {share:.0%} |")
PY
}

echo "# $(uname -n) $(uname -r), $(nproc) CPUs, $(clang --version | head -1)"
case $MODE in
build) for p in $PROGRAMS; do build "$p"; done ;;
time)
	echo "# medians of $RUNS interleaved runs (seconds, wall clock); gain against plain"
	echo "| program | plain | instrumented PGO | ecpi AutoFDO | share of PGO's gain |"
	echo "|---|---|---|---|---|"
	for p in $PROGRAMS; do time_runs "$p"; done
	;;
*) echo "usage: bash bench/pgo.sh build | time [RUNS]" >&2; exit 2 ;;
esac
