#!/usr/bin/env bash
# Disk growth of `ecpi daemon` under a steady CPU-bound workload (issue:
# always-on profiling, target under 20 MB per day of workload (a)).
#
# Usage: bash bench/daemon_disk.sh [SECONDS] [INTERVAL]   (as root; default 600 and 60)
#        bash bench/daemon_disk.sh churn short|hour         (issue 37: write amplification)
#
# churn: about 50 new processes a second (sh -c loops starting short-lived
# programs, as a build or CI machine does) beside one CPU-bound worker, in a
# cgroup of their own; the daemon (-F 999, --drain-interval 2, the figures of
# issue 37) profiles that cgroup, once without and once with -g. `short` runs
# 180 s per configuration, `hour` 3600 s. Per configuration it prints the
# database's size, its growth per day (slope over the second half), the
# bytes the daemon wrote (its own count, `ctl status` disk_written_bytes, and
# the kernel's /proc/PID/io write_bytes) and their ratio to the bytes kept,
# the processes named in the epoch and the samples stored.
#
# The workload (bench/throughput.c, one worker) runs in a cgroup v2 directory
# of its own and the daemon (4999 Hz, default 5 s drains) profiles only that
# cgroup, so whatever else runs on the machine does not add to the store.
# Every INTERVAL seconds: `ecpi ctl flush`, then the database's size (the
# status's disk_bytes). The store merges a pc it has seen into its existing
# record, so the size levels off once the workload's pcs are all in; the
# figure for a day is the slope over the second half of the run, times a day.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
ECPI=${ECPI:-$BUILD/loader/ecpi}
THROUGHPUT=$BUILD/bench/ecpi_bench_throughput
MODE=steady
if [ "${1:-}" = churn ]; then
	MODE=churn
	case "${2:-short}" in
	short) SECS=180 STEP=30 ;;
	hour) SECS=3600 STEP=300 ;;
	*) echo "daemon_disk.sh: churn short|hour" >&2; exit 2 ;;
	esac
else
	SECS=${1:-600}
	STEP=${2:-60}
fi
[ "$(id -u)" -eq 0 ] || { echo "daemon_disk.sh: run as root" >&2; exit 1; }
for b in "$ECPI" "$THROUGHPUT"; do
	[ -x "$b" ] || { echo "daemon_disk.sh: $b is missing; build first: cmake --build $BUILD -j" >&2; exit 1; }
done
root=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
[ -n "$root" ] || { echo "daemon_disk.sh: no cgroup v2 hierarchy mounted (mount -t cgroup2 none /sys/fs/cgroup/unified)" >&2; exit 1; }
TMP=$(mktemp -d /tmp/ecpi-disk-bench.XXXXXX)
cg="$root/ecpi-disk-bench-${TMP##*.}"
mkdir "$cg"
PIDS=()
cleanup() {
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for _ in $(seq 50); do
		for sub in "$cg"/run*; do [ -d "$sub" ] && rmdir "$sub" 2>/dev/null; done
		rmdir "$cg" 2>/dev/null && break
		sleep 0.1
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# churn_run FLAGS...: one soak; prints a row of figures.
churn_run() {
	local db="$TMP/db$#" log="$TMP/daemon$#.log" cgc="$cg/run$#"
	mkdir "$cgc"
	sh -c "echo \$\$ > '$cgc/cgroup.procs' && exec '$THROUGHPUT' $((SECS + 30)) 1" >/dev/null 2>&1 &
	local worker=$!
	PIDS+=("$worker")
	# Five loops, each starting about 10 processes a second (sh, then a
	# short program): about 50 new processes a second in all.
	local loops=()
	for k in 1 2 3 4 5; do
		sh -c "echo \$\$ > '$cgc/cgroup.procs'; end=\$((\$(date +%s) + $SECS + 30)); while [ \$(date +%s) -lt \$end ]; do sh -c 'ls / >/dev/null; cat /proc/self/stat >/dev/null' --churn-$k; sleep 0.085; done" >/dev/null 2>&1 &
		loops+=($!)
		PIDS+=($!)
	done
	"$ECPI" daemon --db "$db" --cgroup "$cgc" -F 999 --drain-interval 2 "$@" 2>"$log" &
	local daemon=$!
	PIDS+=("$daemon")
	for _ in $(seq 100); do "$ECPI" ctl --db "$db" status >/dev/null 2>&1 && break; sleep 0.1; done
	local t0 forks0 rows=()
	t0=$(date +%s)
	forks0=$(awk '/^processes/ {print $2}' /proc/stat)
	for ((t = STEP; t <= SECS; t += STEP)); do
		sleep $((t0 + t - $(date +%s)))
		rows+=("$t:$("$ECPI" ctl --db "$db" status --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["disk_bytes"])')")
	done
	local forks=$(( $(awk '/^processes/ {print $2}' /proc/stat) - forks0 ))
	"$ECPI" ctl --db "$db" status --format json >"$TMP/status.json"
	local io_written
	io_written=$(awk '/^write_bytes/ {print $2}' "/proc/$daemon/io")
	kill -TERM "$daemon"
	wait "$daemon" || true
	kill "$worker" "${loops[@]}" 2>/dev/null || true
	wait "$worker" "${loops[@]}" 2>/dev/null || true
	"$ECPI" export "$db" --format json -o "$TMP/export.json" 2>/dev/null || true
	python3 - "$TMP/status.json" "$TMP/export.json" "$db" "$io_written" "$forks" "$SECS" "${*:-none}" "${rows[@]}" <<'PY'
import json, os, sys
status = json.load(open(sys.argv[1]))
try:
    export = json.load(open(sys.argv[2]))
except Exception:
    export = {"processes": {}, "totals": {}}
db, io_written, forks, secs, flags = sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
rows = [tuple(int(x) for x in r.split(":")) for r in sys.argv[8:]]
half = [r for r in rows if r[0] >= rows[-1][0] / 2]
(t1, b1), (t2, b2) = half[0], half[-1]
per_day = (b2 - b1) / (t2 - t1) * 86400 if t2 > t1 else 0
kept = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(db) for f in fs
           if os.path.isfile(os.path.join(d, f)) and not f.endswith(".sock"))
written = status["disk_written_bytes"]
procs = export.get("processes", {})
named = sum(1 for p in procs.values() if p.get("cmdline"))
samples = sum(t.get("samples", 0) for t in export.get("totals", {}).values())
print(f"| {flags} | {secs} s | {forks / secs:.0f}/s | {kept:,} | {per_day / 1e6:.1f} MB | {written:,} | "
      f"{written / kept:.2f} | {io_written:,} ({io_written / kept:.2f}) | {len(procs):,} ({named:,} with a command line) | "
      f"{samples:,} | {status.get('disk_compactions', 0)} |")
PY
}

if [ "$MODE" = churn ]; then
	echo "# machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), kernel $(uname -r)"
	echo "# churn soak, $SECS s per configuration, $(date -u +%FT%TZ); daemon -F 999 --drain-interval 2 --cgroup"
	echo "| flags | run | new processes | database (bytes) | growth per day | written (daemon's count) | written per byte kept | kernel write_bytes (per byte kept) | processes named | samples | compactions |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
	churn_run
	churn_run -g
	exit 0
fi

echo "# machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), kernel $(uname -r)"
echo "# ecpi daemon at 4999 Hz on cgroup $cg, workload: ecpi_bench_throughput, 1 worker, $SECS s, $(date -u +%FT%TZ)"
sh -c "echo \$\$ > '$cg/cgroup.procs' && exec '$THROUGHPUT' $((SECS + 30)) 1" >/dev/null 2>&1 &
PIDS+=($!)
"$ECPI" daemon --db "$TMP/db" --cgroup "$cg" 2>"$TMP/daemon.log" &
DAEMON=$!
PIDS+=("$DAEMON")
for _ in $(seq 400); do "$ECPI" ctl --db "$TMP/db" status >/dev/null 2>&1 && break; sleep 0.1; done
t0=$(date +%s)
echo "seconds bytes samples"
rows=()
for ((t = STEP; t <= SECS; t += STEP)); do
	sleep $((t0 + t - $(date +%s)))
	"$ECPI" ctl --db "$TMP/db" flush >/dev/null
	read -r bytes samples < <("$ECPI" ctl --db "$TMP/db" status --format json |
		python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["disk_bytes"], sum(e["samples"] for e in d["events"]))')
	echo "$t $bytes $samples"
	rows+=("$t:$bytes")
done
kill -TERM "$DAEMON"
wait "$DAEMON" || true
python3 - "${rows[@]}" <<'PY'
import sys
rows = [tuple(int(x) for x in r.split(":")) for r in sys.argv[1:]]
half = [r for r in rows if r[0] >= rows[-1][0] / 2]
(t1, b1), (t2, b2) = half[0], half[-1]
slope = (b2 - b1) / (t2 - t1) if t2 > t1 else 0.0
print(f"size after {rows[0][0]} s: {rows[0][1]} bytes; after {t2} s: {b2} bytes")
print(f"growth over the second half ({t1}-{t2} s): {b2 - b1} bytes, {slope:.1f} bytes/s = {slope * 86400 / 1e6:.2f} MB/day")
PY
