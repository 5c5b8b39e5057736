#!/usr/bin/env bash
# Fleet benchmark (issue 22), figures for docs/FLEET.md.
#
# Usage: bash bench/fleet.sh [HOSTS] [ROWS_PER_HOST_MINUTE] [DAEMON_SECONDS]   (as root)
#
# Starts a private ClickHouse server (scripts/clickhouse-local.sh) and:
#  setup (not timed): a synthetic database of 200,000 sampled instructions in
#      real libraries' functions (bench/fleet_synth.cpp), and one simulated
#      day of HOSTS hosts (default 100) generated inside ClickHouse: one push
#      per host per minute, ROWS_PER_HOST_MINUTE (default 300) rows each, a
#      procedure rank drawn log-uniformly from 1..5000 (Zipf-like), 50
#      images, 64 addresses per procedure, counts uniform 1..20, one event
#      row per push;
#  (1) push rate: `ecpi push` of the synthetic database into an empty
#      database, rows per second (3 runs);
#  (2) bytes per sample and per row in ClickHouse (compressed parts on disk)
#      against the local store's .prof files, for the synthetic database and
#      for the daemon's real one from (4);
#  (3) query time of the fleet-wide top-20 procedures for the simulated day
#      (`ecpi prof URL --since DAY --until DAY+1 --limit 20`, 3 runs);
#  (4) the daemon's CPU and peak RSS over DAEMON_SECONDS (default 60) at 4999
#      Hz while a CPU-bound workload runs, without and with --push.
# The script holds /tmp/ecpi-quiet.lock shared during setup and exclusively
# for the timed part (about 3 minutes with the defaults); ECPI_BENCH_LOCK=
# (empty) turns that off.
set -euo pipefail
LOCK=${ECPI_BENCH_LOCK-/tmp/ecpi-quiet.lock}
if [ -n "$LOCK" ]; then
	exec 9>>"$LOCK"
	flock -s 9
fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
ECPI=${ECPI:-$BUILD/loader/ecpi}
SYNTH=$BUILD/bench/ecpi_bench_fleet_synth
SHARES=$BUILD/testprogs/shares
HOSTS=${1:-100}
ROWS=${2:-300}
DSECS=${3:-60}
CH="$ROOT/scripts/clickhouse-local.sh"

[ "$(id -u)" -eq 0 ] || { echo "fleet.sh: run as root (the daemon loads BPF programs)" >&2; exit 1; }
for b in "$ECPI" "$SYNTH" "$SHARES"; do
	[ -x "$b" ] || { echo "fleet.sh: $b is missing; build first: cmake --build $BUILD -j" >&2; exit 1; }
done
TMP=$(mktemp -d /tmp/ecpi-fleet-bench.XXXXXX)
BG=()
cleanup() {
	for p in "${BG[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	bash "$CH" stop "$TMP/ch" || true
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$(bash "$CH" start "$TMP/ch")
export ECPI_CLICKHOUSE_USER=ecpi ECPI_CLICKHOUSE_PASSWORD_FILE="$TMP/ch/ecpi.password"
URL="http://127.0.0.1:$port"
q() { curl -fsS -H "X-ClickHouse-User: ecpi" -H "X-ClickHouse-Key: $(cat "$ECPI_CLICKHOUSE_PASSWORD_FILE")" "$URL/" --data-binary "$1"; }
now() { date +%s.%N; }
secs() { python3 -c "print(round($2 - $1, 3))"; }

echo "# machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), kernel $(uname -r)"
echo "# ClickHouse $(q 'SELECT version()'), $(date -u +%FT%TZ), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- setup -----------------------------------------------------------------------
libs=()
for l in libLLVM-16.so.1 libLLVM-15.so.1 libcrypto.so.3 libstdc++.so.6 libc.so.6; do
	[ -f "/usr/lib/x86_64-linux-gnu/$l" ] && libs+=("/usr/lib/x86_64-linux-gnu/$l")
done
echo "# synthetic database: $("$SYNTH" "$TMP/synth.db" 200000 "${libs[@]}") ($(printf '%s ' "${libs[@]##*/}"))"
"$ECPI" push --init --to "$URL/sim" >/dev/null
day=1763942400  # 2025-11-24 00:00:00 UTC
t0=$(now)
q "INSERT INTO sim.samples SELECT toDate(toDateTime($day + m * 60)), toDateTime($day + m * 60), concat('web', toString(h)),
   'cpu-clock', lower(hex(cityHash64(toString(img)))), concat('/usr/lib/app/lib', toString(img), '.so'),
   concat('proc_', toString(img), '_', toString(p)), 4096 + p * 256 + (cityHash64(number, 2) % 64) * 4,
   1 + cityHash64(number, 3) % 20, toUInt64(h * 10000 + m)
   FROM (SELECT number, intDiv(number, 1440 * $ROWS) AS h, intDiv(number % (1440 * $ROWS), $ROWS) AS m,
         toUInt32(pow(5000, (cityHash64(number, 1) % 100000) / 100000.0)) AS p, p % 50 AS img
         FROM system.numbers LIMIT $((HOSTS * 1440 * ROWS)))"
q "INSERT INTO sim.events SELECT date, time, host, event, 200000, sum(samples), 0, any(batch) FROM sim.samples
   GROUP BY date, time, host, event"
echo "# simulated day: $(q "SELECT count(), uniqExact(host), sum(samples) FROM sim.samples" | tr '\t' ' ') (rows hosts samples), generated in $(secs "$t0" "$(now)") s, $(q "SELECT count() FROM system.parts WHERE database = 'sim' AND table = 'samples' AND active") parts"
[ -n "$LOCK" ] && flock -x 9
echo "# load average before the timed part (machine held): $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- (1) push rate -------------------------------------------------------------------
rates=()
for r in 1 2 3; do
	rm -rf "$TMP/push.db" && cp -a "$TMP/synth.db" "$TMP/push.db"
	"$ECPI" push --init --to "$URL/push$r" >/dev/null
	t0=$(now)
	"$ECPI" push "$TMP/push.db" --to "$URL/push$r" --host synth >/dev/null
	t=$(secs "$t0" "$(now)")
	n=$(q "SELECT count() FROM push$r.samples")
	rates+=("$(python3 -c "print(round($n / $t))")")
	echo "# (1) run $r: $n rows in $t s"
done
echo "(1) push rate (cut + symbolize + gzip + HTTP + insert), 3 runs: ${rates[*]} rows/s"

# ---- (2) bytes ----------------------------------------------------------------------------
bytes_report() {  # LABEL DATABASE HOST LOCAL_DB
	local on_disk rows samples local_bytes local_offsets
	read -r on_disk rows < <(q "SELECT sum(bytes_on_disk), sum(rows) FROM system.parts WHERE database = '$2' AND table = 'samples' AND active")
	samples=$(q "SELECT sum(samples) FROM $2.samples WHERE host = '$3'")
	local_bytes=$(find "$4/epochs" -name '*.prof' -printf '%s\n' | awk '{s += $1} END {print s}')
	python3 - "$1" "$on_disk" "$rows" "$samples" "$local_bytes" <<'PY'
import sys
label, disk, rows, samples, local = sys.argv[1], *map(int, sys.argv[2:])
print(f"(2) {label}: ClickHouse {disk} bytes for {rows} rows, {samples} samples: {disk / rows:.2f} bytes/row, "
      f"{disk / samples:.3f} bytes/sample; local .prof files {local} bytes: {local / samples:.3f} bytes/sample "
      f"(ClickHouse / local = {disk / local:.1f}x)")
PY
}
bytes_report "synthetic database (one push)" push1 synth "$TMP/synth.db"

# ---- (3) fleet-wide top procedures for one day -----------------------------------------
# Whole-hour filters read the hourly rollup; one second off the hour makes
# the same report read the samples themselves.
for how in rollup samples; do
	since=@$day
	[ "$how" = samples ] && since=@$((day - 1))
	for r in 1 2 3; do
		t0=$(now)
		"$ECPI" prof "$URL/sim" --since "$since" --until @$((day + 86400)) --limit 20 --format json >"$TMP/top-$how.json"
		echo "# (3) $how, run $r: $(secs "$t0" "$(now)") s"
	done
done
cmp -s <(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"])' "$TMP/top-rollup.json") \
	<(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"])' "$TMP/top-samples.json") ||
	echo "(3) WARNING: the rollup and the samples gave different rows"
python3 - "$TMP/top-rollup.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"(3) top 20 rows returned, {d['totals']['cpu-clock']['samples']} samples; hottest {d['rows'][0]['procedure']} {d['rows'][0]['percent']:.2f}%")
PY
echo "# rollup: $(q "SELECT count() FROM sim.procedures_hourly") rows before merges, $(q "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = 'sim' AND table = 'procedures_hourly' AND active") bytes"

# ---- (4) daemon CPU and RSS with and without --push -------------------------------------
"$ECPI" push --init --to "$URL/daemon" >/dev/null
daemon_run() {  # LABEL DB ARGS... -> "cpu_s rss_peak_kb samples"
	local label=$1 db=$2
	shift 2
	"$SHARES" $((DSECS + 5)) >/dev/null &
	local w=$!
	BG+=("$w")
	"$ECPI" daemon --db "$db" --exclude-self "$@" 2>>"$TMP/daemon.log" &
	local d=$!
	BG+=("$d")
	sleep "$DSECS"
	local cpu hwm
	cpu=$(awk '{print ($14 + $15) / 100}' "/proc/$d/stat")
	hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$d/status")
	kill -TERM "$d"
	wait "$d" || true
	kill "$w" 2>/dev/null || true
	wait "$w" 2>/dev/null || true
	local samples
	samples=$("$ECPI" prof "$db" --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["cpu-clock"]["samples"])')
	echo "(4) $label: daemon CPU $cpu s over $DSECS s ($(python3 -c "print(round(100 * $cpu / $DSECS, 2))")% of one CPU), peak RSS $((hwm / 1024)) MB, $samples samples"
}
daemon_run "without --push" "$TMP/d0.db"
daemon_run "with --push   " "$TMP/d1.db" --push "$URL/daemon" --host real
echo "# pushes: $(q "SELECT count() FROM daemon.events WHERE host = 'real'") event rows, $(q "SELECT uniqExact(batch) FROM daemon.samples") batches"
bytes_report "daemon's real database (a push after each 5 s merge)" daemon real "$TMP/d1.db"
grep -E "push (failed|works)" "$TMP/daemon.log" || true
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "$LOCK" ] && flock -u 9
true
