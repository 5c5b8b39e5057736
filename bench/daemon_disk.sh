#!/usr/bin/env bash
# Disk growth of `ecpi daemon` under a steady CPU-bound workload (issue:
# always-on profiling, target under 20 MB per day of workload (a)).
#
# Usage: bash bench/daemon_disk.sh [SECONDS] [INTERVAL]   (as root; default 600 and 60)
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
SECS=${1:-600}
STEP=${2:-60}
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
	for _ in $(seq 50); do rmdir "$cg" 2>/dev/null && break; sleep 0.1; done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "# machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), kernel $(uname -r)"
echo "# ecpi daemon at 4999 Hz on cgroup $cg, workload: ecpi_bench_throughput, 1 worker, $SECS s, $(date -u +%FT%TZ)"
sh -c "echo \$\$ > '$cg/cgroup.procs' && exec '$THROUGHPUT' $((SECS + 30)) 1" >/dev/null 2>&1 &
PIDS+=($!)
"$ECPI" daemon --db "$TMP/db" --cgroup "$cg" 2>"$TMP/daemon.log" &
DAEMON=$!
PIDS+=("$DAEMON")
for _ in $(seq 100); do "$ECPI" ctl --db "$TMP/db" status >/dev/null 2>&1 && break; sleep 0.1; done
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
