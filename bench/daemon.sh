#!/usr/bin/env bash
# Daemon benchmark (issue: always-on profiling), figures for docs/PERFORMANCE.md.
#
# Usage: bash bench/daemon.sh [REPS] [SECONDS]          (as root, idle machine)
#
# With `ecpi daemon` at 4999 Hz per CPU (default drain interval, 5 s):
#  (a) a CPU-bound workload reporting its own throughput: alone, under an
#      empty BPF handler at the same rate (the VM's own sampling cost), and
#      under the daemon; the daemon's cost is the excess over the empty
#      handler. Also the longest pause: 10 ms windows of a CPU loop while the
#      daemon drains and merges (slowest window / median window).
#  (b) many short-lived processes (like a parallel build): wall time of
#      2,000 processes run 2 at a time, alone / empty handler / daemon; the
#      daemon's RSS average and peak.
#  (c) an idle system: the daemon's CPU and disk growth.
# Per-sample figures: daemon CPU per sample, BPF handler ns per sample
# (kernel.bpf_stats_enabled), disk bytes per hour.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
ECPI=${ECPI:-$BUILD/loader/ecpi}
THROUGHPUT=$BUILD/bench/ecpi_bench_throughput
EMPTY=$BUILD/bench/ecpi_bench_empty_handler
PAUSE=$BUILD/bench/ecpi_bench_pause
BURN=$BUILD/testprogs/burn
REPS=${1:-3}
SECS=${2:-10}
FREQ=4999

[ "$(id -u)" -eq 0 ] || { echo "daemon.sh: run as root (the daemon loads BPF programs)" >&2; exit 1; }
for b in "$ECPI" "$THROUGHPUT" "$EMPTY" "$PAUSE" "$BURN"; do
	[ -x "$b" ] || { echo "daemon.sh: $b is missing; build first: cmake --build $BUILD -j" >&2; exit 1; }
done

TMP=$(mktemp -d /tmp/ecpi-daemon-bench.XXXXXX)
OLD_STATS=$(sysctl -n kernel.bpf_stats_enabled)
BG=()
cleanup() {
	for p in "${BG[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	sysctl -qw kernel.bpf_stats_enabled="$OLD_STATS"
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
sysctl -qw kernel.bpf_stats_enabled=1

echo "# machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), kernel $(uname -r)"
echo "# ecpi daemon at $FREQ Hz per CPU, $REPS repetitions of $SECS s, $(date -u +%FT%TZ)"

DAEMON=""
start_daemon() { # DB [ARGS...]
	local db=$1
	shift
	"$ECPI" daemon --db "$db" --exclude-self "$@" 2>>"$TMP/daemon.log" &
	DAEMON=$!
	BG+=("$DAEMON")
	for _ in $(seq 400); do
		"$ECPI" ctl --db "$db" status --format json >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "daemon.sh: the daemon did not start; log:" >&2
	cat "$TMP/daemon.log" >&2
	exit 1
}
stop_daemon() {
	kill -TERM "$DAEMON"
	wait "$DAEMON" || true
}
status() { "$ECPI" ctl --db "$1" status --format json; }
proc_cpu_s() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
start_empty() {
	"$EMPTY" "$FREQ" 100000 >/dev/null 2>&1 &
	EMPTY_PID=$!
	BG+=("$EMPTY_PID")
	sleep 0.5
}
stop_empty() {
	kill -INT "$EMPTY_PID"
	wait "$EMPTY_PID" 2>/dev/null || true
}

stats() { # name values... -> "name mean sd"
	python3 -c '
import statistics, sys
v = [float(x) for x in sys.argv[2:]]
print(sys.argv[1], statistics.mean(v), statistics.stdev(v) if len(v) > 1 else 0.0)' "$@"
}

# ---- (a) CPU-bound throughput -------------------------------------------------
alone=() empty=() daemon=()
dcpu=0 dsamples=0 bpf_ns=0 bpf_cnt=0 disk_per_run=()
for rep in $(seq "$REPS"); do
	alone+=("$("$THROUGHPUT" "$SECS" 2>/dev/null)")
	start_empty
	empty+=("$("$THROUGHPUT" "$SECS" 2>/dev/null)")
	stop_empty
	db="$TMP/a$rep"
	start_daemon "$db"
	sleep 1
	s0=$(status "$db")
	c0=$(proc_cpu_s "$DAEMON")
	daemon+=("$("$THROUGHPUT" "$SECS" 2>/dev/null)")
	c1=$(proc_cpu_s "$DAEMON")
	"$ECPI" ctl --db "$db" flush >/dev/null
	s1=$(status "$db")
	read -r ds bn bc disk < <(python3 -c '
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(b["events"][0]["samples"] - a["events"][0]["samples"],
      b["bpf_run_time_ns"] - a["bpf_run_time_ns"], b["bpf_run_count"] - a["bpf_run_count"], b["disk_bytes"])' "$s0" "$s1")
	dcpu=$(python3 -c "print($dcpu + $c1 - $c0)")
	dsamples=$((dsamples + ds))
	bpf_ns=$((bpf_ns + bn))
	bpf_cnt=$((bpf_cnt + bc))
	disk_per_run+=("$disk")
	stop_daemon
	echo "# (a) rep $rep: alone ${alone[-1]}, empty handler ${empty[-1]}, daemon ${daemon[-1]} it/s"
done
python3 - "$SECS" "$dcpu" "$dsamples" "$bpf_ns" "$bpf_cnt" "${#alone[@]}" "${alone[@]}" "${empty[@]}" "${daemon[@]}" "${disk_per_run[@]}" <<'PY'
import statistics as st, sys
secs, dcpu, dsamples, bpf_ns, bpf_cnt, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
v = [float(x) for x in sys.argv[7:]]
alone, empty, daemon, disk = v[:n], v[n:2*n], v[2*n:3*n], v[3*n:4*n]
def loss(xs): return [100 * (1 - x / st.mean(alone)) for x in xs]
le, ld = loss(empty), loss(daemon)
sd = lambda xs: st.stdev(xs) if len(xs) > 1 else 0.0
print(f"(a) CPU-bound throughput, mean of {n}:")
print(f"    alone          {st.mean(alone):14.0f} it/s (sd {sd(alone) / st.mean(alone) * 100:.2f}%)")
print(f"    empty handler  {st.mean(empty):14.0f} it/s  loss {st.mean(le):5.2f}% (sd {sd(le):.2f})")
print(f"    ecpi daemon    {st.mean(daemon):14.0f} it/s  loss {st.mean(ld):5.2f}% (sd {sd(ld):.2f})  excess over empty handler {st.mean(ld) - st.mean(le):+.2f} points")
if dsamples:
    print(f"    daemon CPU per sample: {dcpu / dsamples * 1e6:.2f} us ({dcpu:.2f} s for {dsamples} samples)")
if bpf_cnt:
    print(f"    BPF handler: {bpf_ns / bpf_cnt:.0f} ns per sample ({bpf_cnt} runs)")
per_hour = st.mean(disk) / (secs + 1) * 3600
print(f"    disk: {st.mean(disk):.0f} bytes after {secs + 1:.0f} s; linear extrapolation {per_hour / 1e6:.2f} MB/hour, {per_hour * 24 / 1e6:.1f} MB/day (an upper bound: merges of the same pcs do not grow files)")
PY

# ---- longest pause while draining and merging ---------------------------------
PAUSE_SECS=$((SECS * 2))
start_empty
base_pause=$("$PAUSE" "$PAUSE_SECS")
stop_empty
start_daemon "$TMP/pause"
daemon_pause=$("$PAUSE" "$PAUSE_SECS")
stop_daemon
echo "(pause) 10 ms windows over $PAUSE_SECS s (drains and merges every 5 s):"
echo "    empty handler: $base_pause"
echo "    ecpi daemon:   $daemon_pause"

# ---- (b) short-lived processes ------------------------------------------------
run_many() { # -> wall seconds of 2000 processes, 2 at a time
	local t0 t1
	t0=$(date +%s.%N)
	seq 2000 | xargs -P2 -I{} "$BURN" 2
	t1=$(date +%s.%N)
	python3 -c "print($t1 - $t0)"
}
b_alone=() b_empty=() b_daemon=() rss_all=()
for rep in $(seq "$REPS"); do
	b_alone+=("$(run_many)")
	start_empty
	b_empty+=("$(run_many)")
	stop_empty
	start_daemon "$TMP/b$rep"
	sleep 1
	( while kill -0 "$DAEMON" 2>/dev/null; do rss_kb "$DAEMON"; sleep 0.2; done ) >"$TMP/rss$rep" &
	sampler=$!
	c0=$(proc_cpu_s "$DAEMON")
	b_daemon+=("$(run_many)")
	c1=$(proc_cpu_s "$DAEMON")
	echo "# (b) rep $rep: daemon CPU during the run: $(python3 -c "print(round($c1 - $c0, 2))") s"
	"$ECPI" ctl --db "$TMP/b$rep" flush >/dev/null  # "samples" counts what drains have stored
	"$ECPI" ctl --db "$TMP/b$rep" status --format json >"$TMP/bstatus$rep"
	stop_daemon
	wait "$sampler" 2>/dev/null || true
	rss_all+=("$TMP/rss$rep")
	echo "# (b) rep $rep: alone ${b_alone[-1]} s, empty handler ${b_empty[-1]} s, daemon ${b_daemon[-1]} s"
done
python3 - "$REPS" "${b_alone[@]}" "${b_empty[@]}" "${b_daemon[@]}" "${rss_all[@]}" <<'PY'
import json, statistics as st, sys
n = int(sys.argv[1]); v = sys.argv[2:]
alone, empty, daemon = [float(x) for x in v[:n]], [float(x) for x in v[n:2*n]], [float(x) for x in v[2*n:3*n]]
rss = [int(x) for f in v[3*n:] for x in open(f).read().split() if x.isdigit() and int(x) > 0]
def loss(xs): return [100 * (x / st.mean(alone) - 1) for x in xs]
le, ld = loss(empty), loss(daemon)
sd = lambda xs: st.stdev(xs) if len(xs) > 1 else 0.0
print(f"(b) 2000 short-lived processes, 2 at a time, mean of {n}:")
print(f"    alone          {st.mean(alone):6.2f} s")
print(f"    empty handler  {st.mean(empty):6.2f} s  slowdown {st.mean(le):5.2f}% (sd {sd(le):.2f})")
print(f"    ecpi daemon    {st.mean(daemon):6.2f} s  slowdown {st.mean(ld):5.2f}% (sd {sd(ld):.2f})  excess over empty handler {st.mean(ld) - st.mean(le):+.2f} points")
if rss:
    print(f"    daemon RSS: average {st.mean(rss) / 1024:.1f} MB, peak {max(rss) / 1024:.1f} MB ({len(rss)} readings)")
PY
for rep in $(seq "$REPS"); do
	python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["events"][0]; print("    rep %s: unknown %.3f%% of %d samples" % (sys.argv[2], e["unknown_percent"], e["samples"]))' "$TMP/bstatus$rep" "$rep"
done

# ---- (c) idle ------------------------------------------------------------------
IDLE=$((SECS * 3))
start_daemon "$TMP/idle"
c0=$(proc_cpu_s "$DAEMON")
sleep "$IDLE"
c1=$(proc_cpu_s "$DAEMON")
"$ECPI" ctl --db "$TMP/idle" flush >/dev/null
s=$(status "$TMP/idle")
stop_daemon
python3 - "$IDLE" "$c0" "$c1" "$s" <<'PY'
import json, sys
idle, c0, c1, s = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
e = s["events"][0]
print(f"(c) idle system, {idle:.0f} s: daemon CPU {100 * (c1 - c0) / idle:.2f}% of one CPU, "
      f"{e['samples']} samples, RSS {s['rss_bytes'] / 2**20:.1f} MB, disk {s['disk_bytes']} bytes")
PY
