#!/usr/bin/env bash
# Profile-guided optimization from ecpi's counts (issue 33): how much of
# clang's instrumented PGO gain an AutoFDO profile from `ecpi export --format
# afdo` brings, with cpu-clock samples only (no LBR).
#
# Programs: SQLite's amalgamation (npm's better-sqlite3, fetched into a cache
# directory by bench/sqlite_source.sh) driven by bench/cachesim/sqlite_orders.c
# (inserts in a transaction, indexed lookups, a join with grouping, a sort),
# the bundled word counter tests/testprogs/pgo/wordfreq.c and the JSON order log
# tests/testprogs/pgo/jsonq.c (parse into a tree, query it; the bundled program
# whose gain a profile of exact counts carries: docs/PGO.md, "jsonq"). Each is built
# with clang -O2 four ways:
#   plain   -O2 -g -fdebug-info-for-profiling (the build ecpi records)
#   instr   -fprofile-instr-generate, trained on the workload, then -fprofile-instr-use
#   ecpi    `ecpi record -F 4999` of the plain build, `ecpi export --format afdo`,
#           then -fprofile-sample-use (with -g -fdebug-info-for-profiling, -Wl,-q)
#   bolt    the ecpi build recorded again, `ecpi layout` (BOLT's fdata), then
#           llvm-bolt -reorder-blocks=ext-tsp -reorder-functions=hfsort -split-functions
#   daemon  a daemon's whole-system epoch instead of a one-shot record: `ecpi
#           daemon --exclude-self $DAEMON_FLAGS` (no stacks: its default)
#           samples the machine while the plain build runs DAEMON_RUNS times
#           (default 3), then `ecpi export` of that epoch and
#           -fprofile-sample-use. DAEMON_FLAGS defaults to -F 1700
#           --registers 10: 1700 Hz is the rate the daemon's 1% overhead budget
#           chose on this VM when it calibrated on a quiet machine
#           (calibrating while other work runs, as the build step holds only
#           the shared lock, gave 19 Hz once); one register snapshot in ten
#           gives calc its loop and branch anchors (the daemon keeps none by
#           default, and its profiles then sat about 1.4x further from exact
#           counts' shape: docs/PGO.md; until 2026-11-29 this variant had none).
#           DAEMON_FLAGS= leaves the rate to the budget and keeps no registers.
# Training and timing use the same workload, as the issue's measurement did.
#
# Usage:
#   bash bench/pgo.sh build            # compile, train, record, export (shared lock: CPU, no timing)
#   bash bench/pgo.sh daemon           # (re)build only the daemon variant (shared lock)
#   bash bench/pgo.sh extra            # the accurate and f20k builds (build_extra; shared lock)
#   bash bench/pgo.sh exact            # a profile from exact counts (callgrind; build_exact) and
#                                      # ecpi's compared with it (PGO_DIR/PROGRAM.compare)
#   bash bench/pgo.sh screen           # plain, instr and exact builds only (no ecpi): is a program's
#                                      # PGO gain one a sample profile can carry? (then
#                                      # VARIANTS="plain instr exact" bench/pgo.sh time)
#   bash bench/pgo.sh now              # the stored recording exported with this ecpi (build_now;
#                                      # NOW=NAME names the variant, default now)
#   bash bench/pgo.sh time [ROUNDS=7]  # ROUNDS rounds per program, each running every build once
#                                      # in a shuffled order, appended to PGO_DIR/times
#                                      # (exclusive lock; one hold per call), then the table
#   bash bench/pgo.sh report           # the table from every round in PGO_DIR/times: medians,
#                                      # paired gains (within each round, against plain) and
#                                      # shares of instrumented PGO's gain, each paired figure
#                                      # with a 95% bootstrap interval; by CPU time (the
#                                      # child's user + system seconds) and by wall clock;
#                                      # then every build against REFERENCE (default exact,
#                                      # where timed): paired gain and share differences,
#                                      # told apart when the interval leaves out 0; and
#                                      # the shares per hold
#   bash bench/pgo.sh reset            # forget the rounds (after a rebuild)
# e.g.  nice -n 10 flock -s /work/quiet.lock bash bench/pgo.sh build
#       flock -x -w 1200 /work/quiet.lock bash bench/pgo.sh time 4   # twice: 8 rounds
# Environment: ECPI (default build/loader/ecpi), ECPI_BENCH_CACHE (SQLite's
# sources; default ~/.cache/ecpi-bench), PGO_DIR (the builds; default
# CACHE/pgo), PROGRAMS (default "sqlite wordfreq jsonq"), DAEMON_RUNS, DAEMON_FLAGS,
# NOW (build_now's variant name), REFERENCE (the report's reference build).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ECPI=${ECPI:-$here/../build/loader/ecpi}
CACHE_DIR=${ECPI_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ecpi-bench}
PGO_DIR=${PGO_DIR:-$CACHE_DIR/pgo}
PROGRAMS=${PROGRAMS:-sqlite wordfreq jsonq}
MODE=${1:-}
RUNS=${2:-7}
source "$here/sqlite_source.sh"

for tool in clang llvm-profdata python3; do
	command -v $tool >/dev/null || { echo "bench/pgo.sh: $tool is not installed (scripts/install-deps.sh --test)" >&2; exit 1; }
done
BOLT=$(command -v llvm-bolt-16 || command -v llvm-bolt || ls /usr/lib/llvm-16/bin/llvm-bolt 2>/dev/null) ||
	{ echo "bench/pgo.sh: llvm-bolt is not installed (bolt-16)" >&2; exit 1; }
VARIANTS=${VARIANTS:-plain instr ecpi bolt daemon}
DAEMON_RUNS=${DAEMON_RUNS:-3}
DAEMON_FLAGS=${DAEMON_FLAGS--F 1700 --registers 10}
T=$(mktemp -d /tmp/ecpi-bench-pgo.XXXXXX)
daemon_pid=""
trap '[ -z "$daemon_pid" ] || { kill -TERM "$daemon_pid"; wait "$daemon_pid"; } 2>/dev/null; rm -rf "$T"' EXIT
mkdir -p "$PGO_DIR"

# jsonq: the second program (PROGRAMS=jsonq). stackvm, records and checksums:
# the other bundled programs screened for a second program (bench/pgo.sh screen; docs/PGO.md, "A second program").
declare -A ARGS=([sqlite]="20000 8 50000" [wordfreq]="40" [jsonq]="100 5000" [stackvm]="600" [records]="3000000"
	[checksums]="400")

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
	jsonq) echo "$here/../tests/testprogs/pgo/jsonq.c" ;;
	stackvm) echo "$here/../tests/testprogs/pgo/stackvm.c" ;;
	records) echo "$here/../tests/testprogs/layout/records.c" ;;
	checksums) echo "$here/../tests/testprogs/pgo/checksums/"{crc32,adler32,main}.c ;;
	*) echo "bench/pgo.sh: unknown program $1 (sqlite, wordfreq, jsonq, stackvm, records, checksums)" >&2; return 1 ;;
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
	build_base "$p" || return 1
	# shellcheck disable=SC2086
	{
		rm -rf "$out.db"
		"$ECPI" record -q -F 4999 -o "$out.db" -- "$out.plain" ${ARGS[$p]} >/dev/null 2>&1
		"$ECPI" export "$out.db" --format afdo --image "$out.plain" -o "$out.afdo"
		clang -O2 -g -fdebug-info-for-profiling -fprofile-sample-use="$out.afdo" -Wl,-q -o "$out.ecpi" $src
		rm -rf "$out.ecpi.db"
		"$ECPI" record -q -F 4999 -o "$out.ecpi.db" -- "$out.ecpi" ${ARGS[$p]} >/dev/null 2>&1
		"$ECPI" layout "$out.ecpi.db" --image "$out.ecpi" -o "$out.fdata"
		"$BOLT" "$out.ecpi" -o "$out.bolt" -data "$out.fdata" -reorder-blocks=ext-tsp -reorder-functions=hfsort \
			-split-functions -split-all-cold >"$out.bolt.log" 2>&1 || { tail -3 "$out.bolt.log" >&2; return 1; }
	}
	build_daemon "$p" || return 1
	# Every build prints the same answer.
	local v
	for v in instr ecpi bolt daemon; do check_same "$p" "$v" || return 1; done
	echo "# $p: built; profile $(wc -l <"$out.afdo") lines, $(grep -c '^[^ ]' "$out.afdo") functions"
}

# build_base PROGRAM: the plain build (the one ecpi records) and the
# instrumented PGO build, trained on the timed workload; both kept while
# newer than their sources.
build_base() {
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
	}
	check_same "$p" instr
}

# build_extra PROGRAM: two builds that test a cause of the gap to
# instrumented PGO (time them with VARIANTS="... accurate f20k"):
#   accurate  ecpi's profile (PROGRAM.afdo) with -fprofile-sample-accurate
#             (functions without samples are cold)
#   f20k      a record at -F 19999 instead of 4999 (4x the samples)
build_extra() {
	local p=$1 src out=$PGO_DIR/$1
	src=$(sources "$p") || return 1
	[ -s "$out.afdo" ] || { echo "bench/pgo.sh: no $out.afdo: run bench/pgo.sh build first" >&2; return 1; }
	rm -rf "$out.f20k.db"
	# shellcheck disable=SC2086
	{
		clang -O2 -g -fdebug-info-for-profiling -fprofile-sample-use="$out.afdo" -fprofile-sample-accurate -Wl,-q \
			-o "$out.accurate" $src
		"$ECPI" record -q -F 19999 -o "$out.f20k.db" -- "$out.plain" ${ARGS[$p]} >/dev/null 2>&1
		"$ECPI" export "$out.f20k.db" --format afdo --image "$out.plain" -o "$out.f20k.afdo"
		clang -O2 -g -fdebug-info-for-profiling -fprofile-sample-use="$out.f20k.afdo" -Wl,-q -o "$out.f20k" $src
	}
	local v
	for v in accurate f20k; do check_same "$p" "$v" || return 1; done
	echo "# $p: accurate and f20k built"
}

# build_now PROGRAM: the stored recording (PROGRAM.db) exported again with
# this ecpi (PROGRAM.$NOW.afdo) and built (PROGRAM.$NOW): the writer's and
# calc's changes measured on the same samples; compared with the exact
# profile where there is one (PROGRAM.$NOW.compare).
build_now() {
	local p=$1 src out=$PGO_DIR/$1 now=${NOW:-now}
	src=$(sources "$p") || return 1
	[ -d "$out.db" ] || { echo "bench/pgo.sh: no $out.db: run bench/pgo.sh build first" >&2; return 1; }
	"$ECPI" export "$out.db" --format afdo --image "$out.plain" -o "$out.$now.afdo"
	# shellcheck disable=SC2086
	clang -O2 -g -fdebug-info-for-profiling -fprofile-sample-use="$out.$now.afdo" -Wl,-q -o "$out.$now" $src
	check_same "$p" "$now" || return 1
	[ ! -s "$out.exact.afdo" ] ||
		python3 "$here/pgo/compare_afdo.py" "$out.$now.afdo" "$out.exact.afdo" >"$out.$now.compare"
	echo "# $p: $now built from $out.db"
}

# build_exact PROGRAM: the format's ceiling, a profile from exact counts:
# callgrind's executions of every instruction and its calls of the plain
# build, placed on lines by llvm-symbolizer with the writer's rules
# (bench/pgo/exact_afdo.py), then -fprofile-sample-use (PROGRAM.exact), and
# ecpi's profile compared with it (bench/pgo/compare_afdo.py: PROGRAM.compare).
build_exact() {
	local p=$1 src out=$PGO_DIR/$1
	command -v valgrind >/dev/null || { echo "bench/pgo.sh: valgrind is not installed (scripts/install-deps.sh)" >&2; return 1; }
	src=$(sources "$p") || return 1
	# valgrind 3.19 stops at clang 14's DWARF 5: callgrind runs a copy without it (same addresses).
	objcopy --strip-debug "$out.plain" "$T/$p.nodebug"
	# shellcheck disable=SC2086
	valgrind --tool=callgrind --dump-instr=yes --compress-strings=no --compress-pos=no \
		--callgrind-out-file="$T/$p.callgrind" "$T/$p.nodebug" ${ARGS[$p]} >/dev/null 2>"$out.callgrind.log"
	python3 "$here/pgo/exact_afdo.py" "$T/$p.callgrind" "$out.plain" "$p.nodebug" >"$out.exact.afdo"
	# shellcheck disable=SC2086
	clang -O2 -g -fdebug-info-for-profiling -fprofile-sample-use="$out.exact.afdo" -Wl,-q -o "$out.exact" $src
	check_same "$p" exact || return 1
	[ -s "$out.afdo" ] || { echo "# $p: exact built (no ecpi profile to compare it with)"; return 0; }
	python3 "$here/pgo/compare_afdo.py" "$out.afdo" "$out.exact.afdo" >"$out.compare"
	echo "# $p: exact built; $(head -1 "$out.compare")"
}

# check_same PROGRAM VARIANT: the build prints what the plain one prints.
check_same() {
	local out=$PGO_DIR/$1
	# shellcheck disable=SC2086
	[ "$("$out.$2" ${ARGS[$1]} 2>/dev/null | md5sum)" = "$("$out.plain" ${ARGS[$1]} 2>/dev/null | md5sum)" ] ||
		{ echo "bench/pgo.sh: $1.$2 prints something else" >&2; return 1; }
}

# build_daemon PROGRAM: the daemon variant. A fresh database, so that its
# newest epoch is the one the workload ran in (the export reads the newest);
# the daemon's log says the rate it chose.
build_daemon() {
	local p=$1 src out=$PGO_DIR/$1 db=$PGO_DIR/$1.daemon.db
	src=$(sources "$p") || return 1
	rm -rf "$db"
	# shellcheck disable=SC2086
	"$ECPI" daemon --db "$db" --exclude-self $DAEMON_FLAGS >"$out.daemon.log" 2>&1 &
	daemon_pid=$!
	# Ready once it answers (after calibrating its overhead budget: seconds).
	for _ in $(seq 300); do
		"$ECPI" ctl status --db "$db" >"$T/status" 2>/dev/null && break
		kill -0 "$daemon_pid" 2>/dev/null || { cat "$out.daemon.log" >&2; return 1; }
		sleep 0.2
	done
	for _ in $(seq "$DAEMON_RUNS"); do
		# shellcheck disable=SC2086
		"$out.plain" ${ARGS[$p]} >/dev/null 2>&1
	done
	"$ECPI" ctl flush --db "$db" >/dev/null
	"$ECPI" ctl status --db "$db" >>"$out.daemon.log"
	kill -TERM "$daemon_pid"
	wait "$daemon_pid" || true
	daemon_pid=""
	"$ECPI" export "$db" --format afdo --image "$out.plain" -o "$out.daemon.afdo"
	# shellcheck disable=SC2086
	clang -O2 -g -fdebug-info-for-profiling -fprofile-sample-use="$out.daemon.afdo" -o "$out.daemon" $src
	echo "# $p: daemon variant built; $(sed -n 's/^sampling: *//p' "$T/status" | head -1); epochs: $(ls "$db/epochs" | tr '\n' ' ')"
}

# time_rounds PROGRAM: RUNS rounds of every variant, each round in a fresh
# shuffled order (bench/pgo/rounds.py), appended to PGO_DIR/times: one line
# per run, PROGRAM VARIANT WALL CPU ROUND.
time_rounds() {
	local p=$1 out=$PGO_DIR/$1 v
	for v in $VARIANTS; do
		[ -x "$out.$v" ] || { echo "bench/pgo.sh: no $out.$v: run bench/pgo.sh build (or daemon) first" >&2; return 1; }
	done
	# shellcheck disable=SC2086
	VARIANTS=$VARIANTS python3 "$here/pgo/rounds.py" "$PGO_DIR/times" "$p" "$RUNS" "$p-$(date +%s)" "$PGO_DIR" ${ARGS[$p]}
}

# report: per program, medians and paired gains with 95% bootstrap
# intervals over the rounds in PGO_DIR/times (bench/pgo/report.py), by CPU
# time and by wall clock.
report() {
	local metric
	for metric in cpu wall; do
		# shellcheck disable=SC2086
		VARIANTS=$VARIANTS python3 "$here/pgo/report.py" "$PGO_DIR/times" $metric $PROGRAMS
	done
}

echo "# $(uname -n) $(uname -r), $(nproc) CPUs, $(clang --version | head -1)"
case $MODE in
build) for p in $PROGRAMS; do build "$p"; done ;;
daemon) for p in $PROGRAMS; do build_daemon "$p"; done ;;
extra) for p in $PROGRAMS; do build_extra "$p"; done ;;
exact) for p in $PROGRAMS; do build_exact "$p"; done ;;
screen) for p in $PROGRAMS; do build_base "$p" && build_exact "$p"; done ;;
now) for p in $PROGRAMS; do build_now "$p"; done ;;
time | report | reset)
	[ "$MODE" = reset ] && { rm -f "$PGO_DIR/times"; exit 0; }
	if [ "$MODE" = time ]; then for p in $PROGRAMS; do time_rounds "$p"; done; fi
	report
	;;
*) echo "usage: bash bench/pgo.sh build | daemon | extra | exact | screen | now | time [ROUNDS] | report | reset" >&2; exit 2 ;;
esac
