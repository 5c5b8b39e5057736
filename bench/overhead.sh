#!/usr/bin/env bash
# Overhead of ecpi record on a CPU-bound workload, against an empty-handler
# baseline and perf record at the same frequency. See docs/PERFORMANCE.md.
#
# Usage: bash bench/overhead.sh [REPS] [SECONDS]          (as root)
#
#   REPS     repetitions (default 5, or $REPS)
#   SECONDS  workload duration per run (default 10, or $DURATION)
#
# Environment:
#   FREQ=4999            sampling frequency of every configuration
#   CONFIGS="alone empty ecpi ecpi-g perf perf-g"   configurations, in run order
#   BUILD=<repo>/build   build tree (ecpi in loader/, benchmarks in bench/)
#   ECPI=... PERF=...    binaries to use
#   QUIET_BUSY_PCT=5     before each run, wait until the CPUs are idle (busy
#   QUIET_WINDOW=3       below this over QUIET_WINDOW seconds, no perf_event
#                        BPF program loaded)
#   QUIET_TIMEOUT=180    ... for at most this many seconds, then run anyway
#   FOREIGN_MAX_PCT=1.5   redo a run if other processes used more than this
#                        share of the CPUs during it ...
#   KEEP_RUNS=FILE       also save the raw per-run data (JSON lines) there
#   MAX_ATTEMPTS=6       ... at most this many times; a run still disturbed
#                        then is listed but left out of the statistics
#
# Each repetition runs every configuration once, in the same order
# (interleaved), so slow drift of the machine affects them all alike:
#   alone   the workload alone
#   empty   an empty BPF program on cpu-clock at FREQ on every CPU
#   ecpi    ecpi record -a -F FREQ
#   ecpi-g  ecpi record -a -F FREQ -g
#   perf    perf record -a -F FREQ -e cpu-clock
#   perf-g  perf record -a -F FREQ -e cpu-clock -g
set -u
set -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
REPS=${1:-${REPS:-5}}
DURATION=${2:-${DURATION:-10}}
FREQ=${FREQ:-4999}
CONFIGS=${CONFIGS:-alone empty ecpi ecpi-g perf perf-g}
BUILD=${BUILD:-$ROOT/build}
ECPI=${ECPI:-$BUILD/loader/ecpi}
WORKLOAD=${WORKLOAD:-$BUILD/bench/ecpi_bench_throughput}
EMPTY=${EMPTY:-$BUILD/bench/ecpi_bench_empty_handler}
PERF=${PERF:-$(command -v perf || echo /usr/bin/perf)}
QUIET_BUSY_PCT=${QUIET_BUSY_PCT:-5}
QUIET_TIMEOUT=${QUIET_TIMEOUT:-180}
QUIET_WINDOW=${QUIET_WINDOW:-3}
FOREIGN_MAX_PCT=${FOREIGN_MAX_PCT:-1.5}
MAX_ATTEMPTS=${MAX_ATTEMPTS:-6}
REPORT="python3 $HERE/overhead_report.py"
NPROC=$(nproc)
TCK=$(getconf CLK_TCK)
# The profilers run longer than the workload; they are stopped with SIGINT
# right after it (this is only a safety net).
PROFILER_SECONDS=$(awk -v s="$DURATION" 'BEGIN { print s + 30 }')

die() { echo "overhead.sh: $*" >&2; exit 1; }
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "REPS must be a positive integer"
[[ $DURATION =~ ^[0-9]+([.][0-9]+)?$ ]] || die "SECONDS must be a number"
[[ $(id -u) -eq 0 ]] || die "must run as root (BPF and system-wide perf events)"
for b in "$ECPI" "$WORKLOAD" "$EMPTY"; do
  [[ -x $b ]] || die "$b not found: cmake --build $BUILD --target ecpi ecpi_bench_throughput ecpi_bench_empty_handler"
done
command -v python3 >/dev/null || die "python3 is needed for the report"
command -v bpftool >/dev/null || die "bpftool is needed"
if [[ " $CONFIGS " == *" perf"* && ! -x $PERF ]]; then
  echo "overhead.sh: perf not found (apt-get install linux-perf); skipping the perf configurations" >&2
  CONFIGS=$(tr ' ' '\n' <<<"$CONFIGS" | grep -v '^perf' | tr '\n' ' ')
fi
[[ " $CONFIGS " == *" alone "* && " $CONFIGS " == *" empty "* ]] || die "CONFIGS must include alone and empty"

# --- cleanup: no process, BPF program, sysctl change or file left behind ---
TMP=$(mktemp -d /tmp/ecpi-bench.XXXXXX)
OLD_BPF_STATS=$(sysctl -n kernel.bpf_stats_enabled)
PIDS=()
cleanup() {
  local p c kids
  for p in "${PIDS[@]}"; do
    if kill -0 "$p" 2>/dev/null; then
      kids=$(pgrep -P "$p")  # perf's `sleep`, the workload's workers
      kill -INT "$p" 2>/dev/null
      kill -TERM "$p" 2>/dev/null  # the workload (SIGINT may be ignored in a background job)
      for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$p" 2>/dev/null
      wait "$p" 2>/dev/null
      for c in $kids; do kill -KILL "$c" 2>/dev/null; done
    fi
  done
  PIDS=()
  sysctl -q -w kernel.bpf_stats_enabled="$OLD_BPF_STATS" >/dev/null 2>&1
  rm -rf "$TMP"
}
trap 'cleanup' EXIT
trap 'echo "overhead.sh: interrupted, cleaning up" >&2; exit 130' INT TERM
track() { PIDS+=("$1"); }
untrack() {
  local p keep=()
  for p in "${PIDS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
  PIDS=("${keep[@]+"${keep[@]}"}")
}

# --- /proc/stat helpers ---
# Prints "busy_user_system total" in ticks summed over all CPUs: busy counts
# user+nice+system (not irq/softirq/steal, which the sampling itself causes).
cpu_ticks() {
  awk '$1 == "cpu" { print $2 + $3 + $4, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat
}
# utime + stime of a live process, in ticks (0 if gone).
proc_ticks() {
  awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0
}
perf_event_progs() {
  bpftool prog show 2>/dev/null | grep -c ': perf_event ' || true
}

# Waits until the machine is idle: busy below QUIET_BUSY_PCT over
# QUIET_WINDOW seconds and no BPF program of type perf_event loaded (someone
# else profiling). Autogroups make nice values useless against other
# sessions' jobs, so waiting (and redoing disturbed runs) is what we can do.
wait_quiet() {
  local start=$SECONDS a b busy progs
  while :; do
    a=$(cpu_ticks); sleep "$QUIET_WINDOW"; b=$(cpu_ticks)
    busy=$(awk -v a="$a" -v b="$b" 'BEGIN { split(a, x); split(b, y); t = y[2] - x[2];
             print (t > 0 ? 100 * (y[1] - x[1]) / t : 0) }')
    progs=$(perf_event_progs)
    if awk -v v="$busy" -v m="$QUIET_BUSY_PCT" 'BEGIN { exit !(v < m) }' && [[ $progs -eq 0 ]]; then
      return 0
    fi
    if (( SECONDS - start >= QUIET_TIMEOUT )); then
      echo "  (machine not quiet after ${QUIET_TIMEOUT}s: busy ${busy}%, ${progs} perf_event BPF programs; running anyway)" >&2
      return 0
    fi
  done
}

# Waits until the profiler $1 has attached: at least NPROC fds of kind $2
# ("bpf_link" or "[perf_event]"), or the line "ready" in file $2, then a
# settling delay. Returns 1 if it died or did not get there in 20 s.
wait_attached() {
  local pid=$1 kind=$2 n
  for _ in $(seq 200); do
    kill -0 "$pid" 2>/dev/null || return 1
    if [[ -f $kind ]]; then
      n=0; grep -qx ready "$kind" && n=$NPROC
    else
      n=$(ls -l "/proc/$pid/fd" 2>/dev/null | grep -cF "anon_inode:$kind" || true)
    fi
    if (( n >= NPROC )); then sleep 0.5; return 0; fi
    sleep 0.1
  done
  return 1
}

# Stops a profiler with SIGINT and waits for it (KILL after 60 s).
stop_profiler() {
  local pid=$1
  kill -INT "$pid" 2>/dev/null
  for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  local rc=$?
  untrack "$pid"
  return $rc
}

# --- one run: sets RUN_THROUGHPUT, RUN_FOREIGN and RUN_EXTRA (args for the report) ---
run_once() {
  local cfg=$1 tag=$2 prof_pid="" ready_kind="" db="" out
  out="$TMP/$tag"
  mkdir -p "$out"
  RUN_EXTRA=()
  case $cfg in
    alone) ;;
    empty)
      "$EMPTY" "$FREQ" "$PROFILER_SECONDS" >"$out/empty.out" 2>"$out/empty.err" & prof_pid=$!
      ready_kind="$out/empty.out" ;;
    ecpi|ecpi-g)
      db="$out/db"
      local g=(); [[ $cfg == ecpi-g ]] && g=(-g)
      "$ECPI" record -a -F "$FREQ" "${g[@]}" --duration "$PROFILER_SECONDS" -q -o "$db" --format json \
        >"$out/ecpi.json" 2>"$out/ecpi.err" & prof_pid=$!
      ready_kind=bpf_link ;;
    perf|perf-g)
      local g=(); [[ $cfg == perf-g ]] && g=(-g)
      # -B -N: no build-id collection after the recording (it does not
      # change the cost while recording; perf 6.1 crashes in it with -g on
      # newer kernels: "assertion failed at util/build-id.c", stack smashing).
      "$PERF" record -a -F "$FREQ" -e cpu-clock "${g[@]}" -B -N -o "$out/perf.data" -- sleep "$PROFILER_SECONDS" \
        >"$out/perf.out" 2>"$out/perf.err" & prof_pid=$!
      ready_kind="[perf_event]" ;;
    *) die "unknown configuration $cfg" ;;
  esac
  if [[ -n $prof_pid ]]; then
    track "$prof_pid"
    if ! wait_attached "$prof_pid" "$ready_kind"; then
      echo "overhead.sh: $cfg did not attach:" >&2
      cat "$out"/*.err >&2
      exit 1
    fi
    if [[ $cfg == perf* ]]; then
      # perf enables its events when its child execs: wait for `sleep`.
      for _ in $(seq 100); do pgrep -P "$prof_pid" -x sleep >/dev/null && break; sleep 0.05; done
      sleep 0.2
    fi
  fi

  local t0 t1 p0=0 p1=0
  [[ -n $prof_pid ]] && p0=$(proc_ticks "$prof_pid")
  t0=$(cpu_ticks)
  "$WORKLOAD" "$DURATION" "$NPROC" >"$out/workload.out" 2>"$out/workload.err" &
  local wpid=$!
  track "$wpid"
  wait "$wpid" || { cat "$out/workload.err" >&2; die "workload failed"; }
  untrack "$wpid"
  t1=$(cpu_ticks)
  [[ -n $prof_pid ]] && p1=$(proc_ticks "$prof_pid")

  if [[ -n $prof_pid ]]; then
    stop_profiler "$prof_pid"
    local rc=$?
    # ecpi and the empty handler exit 0 when interrupted; perf exits with
    # the status of its `sleep`, which it ends with SIGTERM (143).
    if [[ $cfg != perf* && $rc -ne 0 ]] ||
       [[ $cfg == perf* ]] && ! grep -q 'Captured and wrote' "$out/perf.err"; then
      echo "overhead.sh: $cfg exited with status $rc:" >&2
      cat "$out"/*.err >&2
      exit 1
    fi
  fi

  RUN_THROUGHPUT=$(cat "$out/workload.out")
  local wl_cpu
  wl_cpu=$(sed -n 's/.*cpu_seconds=\([0-9.]*\).*/\1/p' "$out/workload.err")
  RUN_WL_CPU=$wl_cpu
  RUN_ITERATIONS=$(sed -n 's/.*iterations=\([0-9]*\).*/\1/p' "$out/workload.err")
  RUN_PROF_CPU=$(awk -v p="$((p1 - p0))" -v tck="$TCK" 'BEGIN { printf "%.2f", p / tck }')
  # Share of all CPU time used by processes other than the workload and the
  # profiler while the workload ran.
  RUN_FOREIGN=$(awk -v a="$t0" -v b="$t1" -v w="$wl_cpu" -v tck="$TCK" -v p="$((p1 - p0))" \
    'BEGIN { split(a, x); split(b, y); t = y[2] - x[2]; f = (y[1] - x[1]) - w * tck - p;
             if (f < 0) f = 0; printf "%.2f", (t > 0 ? 100 * f / t : 0) }')
  case $cfg in
    ecpi*) RUN_EXTRA=(--ecpi-json "$out/ecpi.json" --db "$db") ;;
    perf*)
      "$PERF" report --stats -i "$out/perf.data" >"$out/perf.stats" 2>/dev/null
      RUN_EXTRA=(--perf-log "$out/perf.stats" --perf-data "$out/perf.data") ;;
  esac
}

# --- main ---
echo "== machine"
echo "nproc:      $NPROC"
echo "model name: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo "kernel:     $(uname -r)"
echo "ecpi:       $ECPI"
[[ " $CONFIGS " == *" perf"* ]] && echo "perf:       $("$PERF" --version 2>&1)"
echo "pmu:        $(ls /sys/bus/event_source/devices | tr '\n' ' ')"
echo
echo "== settings"
echo "repetitions $REPS, workload $DURATION s with $NPROC workers, frequency $FREQ Hz, configurations: $CONFIGS"
echo "a run is redone when other processes use more than $FOREIGN_MAX_PCT% of the CPUs (at most $MAX_ATTEMPTS attempts)"
echo "kernel.bpf_stats_enabled was $OLD_BPF_STATS; set to 1 for the empty and ecpi runs"
echo

RUNS="$TMP/runs.jsonl"
: >"$RUNS"
echo "== runs (throughput in iterations/s; foreign = CPU share used by other processes)"
for rep in $(seq "$REPS"); do
  for cfg in $CONFIGS; do
    attempt=1
    while :; do
      wait_quiet
      # BPF run-time statistics (for ecpi's bpf_run_time_ns) cost two clock
      # reads per handler run; the empty baseline pays them too.
      if [[ $cfg == ecpi* || $cfg == empty ]]; then sysctl -q -w kernel.bpf_stats_enabled=1; fi
      run_once "$cfg" "r$rep-$cfg-a$attempt"
      sysctl -q -w kernel.bpf_stats_enabled="$OLD_BPF_STATS"
      if awk -v f="$RUN_FOREIGN" -v m="$FOREIGN_MAX_PCT" 'BEGIN { exit !(f > m) }' && (( attempt < MAX_ATTEMPTS )); then
        printf 'rep %d %-7s %14s  foreign %5.1f%%  (disturbed, redoing)\n' "$rep" "$cfg" "$RUN_THROUGHPUT" "$RUN_FOREIGN"
        rm -rf "$TMP/r$rep-$cfg-a$attempt"
        attempt=$((attempt + 1))
        continue
      fi
      break
    done
    disturbed=0
    awk -v f="$RUN_FOREIGN" -v m="$FOREIGN_MAX_PCT" 'BEGIN { exit !(f > m) }' && disturbed=1
    printf 'rep %d %-7s %14s  foreign %5.1f%%%s\n' "$rep" "$cfg" "$RUN_THROUGHPUT" "$RUN_FOREIGN" \
      "$( ((disturbed)) && echo '  (still disturbed: left out of the statistics)')"
    $REPORT run --rep "$rep" --config "$cfg" --throughput "$RUN_THROUGHPUT" --foreign "$RUN_FOREIGN" \
      --workload-cpu "$RUN_WL_CPU" --iterations "$RUN_ITERATIONS" --profiler-cpu "$RUN_PROF_CPU" \
      --attempts "$attempt" --disturbed "$disturbed" "${RUN_EXTRA[@]+"${RUN_EXTRA[@]}"}" >>"$RUNS" ||
      die "recording the run failed"
    rm -rf "$TMP/r$rep-$cfg-a$attempt"
  done
done
echo

echo "== results"
$REPORT report "$RUNS" alone empty
[[ -n ${KEEP_RUNS:-} ]] && cp "$RUNS" "$KEEP_RUNS"  # raw per-run data (JSON lines)
if [[ $(perf_event_progs) -ne 0 ]]; then
  echo "note: perf_event BPF programs are still loaded (someone else's?):"
  bpftool prog show | grep ': perf_event '
fi
