#!/bin/bash
# Per-call cost of `ecpi probe` (docs/PERFORMANCE.md, "ecpi probe"): a
# counter probe and a timer probe with the full call path (frame pointers,
# and DWARF unwinding of a build without them), against a bare uprobe and
# a bare uprobe+uretprobe pair running empty BPF programs, and against
# bpftrace and bcc's funclatency on the same function when installed.
# Cost per call = (ns/call probed - ns/call unprobed), median of RUNS runs.
# Then (MODE net alone) times net of the probe (issue 31): bench_fn made to
# take about 100 ns, 1 us and 10 us per call, its uninstrumented time (the
# program's own clock, unprobed) against the mean `ecpi probe --metric wall`
# reports, medians of NET_ROUNDS interleaved rounds (docs/PROBE.md). Rows
# within the probe's noise report on-CPU time from stack samples (the
# reported figure is then the samples'; the line after each size says how
# many rounds).
# Usage: bench/probe_overhead.sh [ECPI] [CALLS] [RUNS] [all|net]    (root)
#        NET_ROUNDS=N (default 7), NET_KEEP=FILE (keep the rounds' figures there)
# "noise": rounds within the probe's noise; "held": rounds whose reported
# figure's own 95% range (the stack samples' count, or the subtraction's
# noise) holds that round's unprobed time; "range": the ranges' medians.
set -euo pipefail
ECPI=${1:-build/loader/ecpi}
CALLS=${2:-500000}
RUNS=${3:-5}
MODE=${4:-all}
NET_ROUNDS=${NET_ROUNDS:-7}
[ "$(id -u)" -eq 0 ] || { echo "needs root (uprobes, BPF)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O1 -g -fno-inline -fno-omit-frame-pointer -o "$tmp/fp" "$here/probe_overhead.c"
cc -O1 -g -fno-inline -fomit-frame-pointer -o "$tmp/nofp" "$here/probe_overhead.c"

echo "machine: $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) CPUs"
echo "kernel:  $(uname -r)"
echo "calls per run: $CALLS, runs: $RUNS (median)"
[ "$MODE" = net ] || [ "$MODE" = all ] || { echo "MODE is all or net, not '$MODE'" >&2; exit 2; }

# ns/call of one run of BIN under the probe command "$@" (empty: unprobed).
one_run() {
	local bin=$1
	shift
	if [ $# -eq 0 ]; then
		"$bin" "$CALLS" | awk '{print $1}'
	else
		"$@" -- "$bin" "$CALLS" 2>/dev/null | grep 'ns/call' | awk '{print $1}'
	fi
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
measure() {
	local bin=$1
	shift
	for _ in $(seq "$RUNS"); do one_run "$bin" "$@"; done | median
}
# The kernel's BPF statistics give the probe programs' own run time, which
# wall-clock figures on a busy or virtualized machine (where the uprobe trap
# dominates and varies) cannot resolve.
stats_was=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -qw kernel.bpf_stats_enabled=1
trap 'sysctl -qw kernel.bpf_stats_enabled=$stats_was; rm -rf "$tmp"' EXIT
# BPF ns per call (entry + exit programs) of one ecpi run.
bpf_ns() {
	local bin=$1
	shift
	"$ECPI" probe -q --no-stdin --func bench_fn --format json --report-file "$tmp/r.json" "$@" -- "$bin" "$CALLS" >/dev/null 2>&1
	python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["counters"]
e = c.get("bpf_entry_run_ns", 0) / max(1, c.get("bpf_entry_runs", 1))
x = c.get("bpf_exit_run_ns", 0) / max(1, c.get("bpf_exit_runs", 1))
print("%.0f %.0f" % (e, x))' "$tmp/r.json"
}
overhead_figures() {
base_fp=$(measure "$tmp/fp")
base_nofp=$(measure "$tmp/nofp")
printf "%-46s %10s %12s\n" "case" "ns/call" "cost/call"
row() {  # name base value
	awk -v n="$1" -v b="$2" -v v="$3" 'BEGIN {printf "%-46s %10.1f %10.1f ns\n", n, v, v - b}'
}
row "unprobed (frame pointers)" "$base_fp" "$base_fp"
P="$ECPI probe -q --no-stdin --func bench_fn --report-file /dev/null"
bare=$(measure "$tmp/fp" $P --bare --metric count)
row "bare uprobe, empty BPF program" "$base_fp" "$bare"
bare_pair=$(measure "$tmp/fp" $P --bare --metric count,wall)
row "bare uprobe+uretprobe, empty BPF programs" "$base_fp" "$bare_pair"
counter=$(measure "$tmp/fp" $P --metric count)
row "ecpi counter probe, fp call path" "$base_fp" "$counter"
timer=$(measure "$tmp/fp" $P --metric count,wall,cpu,blocked)
row "ecpi timer probe, fp call path" "$base_fp" "$timer"
sampled=$(measure "$tmp/fp" $P --metric count,wall,cpu,blocked --sample 1/100)
row "ecpi timer probe, fp path, --sample 1/100" "$base_fp" "$sampled"
row "unprobed (no frame pointers)" "$base_nofp" "$base_nofp"
dwarf=$(measure "$tmp/nofp" $P --metric count,wall,cpu,blocked --unwind dwarf)
row "ecpi timer probe, DWARF call path" "$base_nofp" "$dwarf"
awk -v t="$timer" -v p="$bare_pair" -v b="$base_fp" \
	'BEGIN {printf "wall clock: timer probe (fp path) / bare uprobe+uretprobe: %.2fx (target <= 1.5x)\n", (t - b) / (p - b)}'
echo "BPF run time per call (kernel.bpf_stats_enabled), entry + exit program:"
read -r ce cx < <(bpf_ns "$tmp/fp" --metric count)
read -r te tx < <(bpf_ns "$tmp/fp" --metric count,wall,cpu,blocked)
read -r se sx < <(bpf_ns "$tmp/fp" --metric count,wall,cpu,blocked --sample 1/100)
read -r de dx < <(bpf_ns "$tmp/nofp" --metric count,wall,cpu,blocked --unwind dwarf)
printf "  counter, fp path (6 frames):   %5d ns entry\n" "$ce"
printf "  timer, fp path:                %5d ns entry + %5d ns exit\n" "$te" "$tx"
printf "  timer, fp path, --sample 1/100: %4d ns entry + %5d ns exit\n" "$se" "$sx"
printf "  timer, DWARF (8 KiB stack copy): %3d ns entry + %5d ns exit\n" "$de" "$dx"
awk -v p="$bare_pair" -v b="$base_fp" -v e="$te" -v x="$tx" \
	'BEGIN {printf "timer probe (fp path) = bare pair + its BPF time: %.2fx the bare uprobe+uretprobe pair (target <= 1.5x)\n", (p - b + e + x) / (p - b)}'

if command -v bpftrace >/dev/null; then
	bt=$(for _ in $(seq "$RUNS"); do
		bpftrace -q -e "uprobe:$tmp/fp:bench_fn { @s[ustack] = count(); @t[tid] = nsecs; }
		               uretprobe:$tmp/fp:bench_fn /@t[tid]/ { @l = hist(nsecs - @t[tid]); delete(@t[tid]); }" \
			-c "$tmp/fp $CALLS" 2>/dev/null | grep 'ns/call' | awk '{print $1}'
	done | median)
	row "bpftrace ustack count + latency hist" "$base_fp" "$bt"
else
	echo "bpftrace: not installed"
fi
fl=$(command -v funclatency-bpfcc || command -v funclatency || true)
if [ -n "$fl" ]; then
	# bcc compiles its BPF program at start (seconds): the target waits
	# 12 s before its calls, and the row counts only if funclatency said
	# "Tracing" before that.
	start=$(date +%s.%N)
	"$tmp/fp" "$CALLS" 12000 >"$tmp/fl.out" &
	pid=$!
	"$fl" -p "$pid" "$tmp/fp:bench_fn" >"$tmp/fl.log" 2>&1 &
	flpid=$!
	for _ in $(seq 240); do grep -q Tracing "$tmp/fl.log" && break; sleep 0.05; done
	attached=$(echo "$(date +%s.%N) - $start" | bc)
	wait "$pid"
	kill -INT "$flpid" 2>/dev/null || true
	wait "$flpid" 2>/dev/null || true
	if grep -q Tracing "$tmp/fl.log" && [ "$(echo "$attached < 11" | bc)" = 1 ]; then
		row "bcc funclatency (attached after $(printf %.1f "$attached") s)" "$base_fp" "$(awk '{print $1}' "$tmp/fl.out")"
	else
		echo "bcc funclatency: did not attach within 11 s; no figure ($(grep -m1 -i 'unable\|error\|failed' "$tmp/fl.log" || tail -1 "$tmp/fl.log"))"
	fi
else
	echo "bcc funclatency: not installed"
fi
}

# One net-of-probe round of bench_fn with WORK xorshift rounds: prints the
# unprobed wall and on-CPU ns/call, then per timer (wall, cpu) the reported
# (net) mean, the mean as measured and whether it was within the noise, and
# the probe's self and pair cost for bench_fn's kind of first instruction,
# and per timer the reported figure's 95% range (the samples' count, or the
# subtraction's noise).
net_round() {
	local work=$1 calls=$2
	"$tmp/fp" "$calls" 0 "$work" | awk '{printf "%s %s ", $1, $(NF-2)}'
	"$ECPI" probe -q --no-stdin --func bench_fn --metric count,wall,cpu --format json --report-file "$tmp/net.json" \
		-- "$tmp/fp" "$calls" 0 "$work" >/dev/null 2>&1
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); f=d["functions"][0]
c=d["probe_cost"]["stepped" if f["entry_stepped"] else "emulated"]
t=f["paths"][0]["timers"]
def shown(n): return n["samples_mean_ns"] if n.get("method") == "stack samples" else n["mean_ns"]
def rng(n): return (n["samples_low_ns"], n["samples_high_ns"]) if n.get("method") == "stack samples" else (n["low_ns"], n["high_ns"])
print(" ".join("%.1f %.1f %d" % (shown(t[k]["net"]), t[k]["mean_ns"], t[k]["net"]["within_noise"]) for k in ("wall", "cpu")),
      "%.1f %.1f %d" % (c["self_wall_ns"], c["pair_ns"], f["entry_stepped"]),
      int(t["cpu"]["net"].get("method") == "stack samples"), f["paths"][0].get("stack_samples", 0),
      int(t["wall"]["net"].get("method") == "stack samples"),
      " ".join("%.1f %.1f" % rng(t[k]["net"]) for k in ("wall", "cpu")))' "$tmp/net.json"
}
net_figures() {
	# Work rounds per ns, from unprobed runs' CPU time; sizes of about 100 ns, 1 us, 10 us.
	local per_round
	per_round=$(for _ in 1 2 3; do "$tmp/fp" 20000 0 1000 | awk '{print $(NF-2) / 1000}'; done | median)
	echo
	echo "net of the probe: bench_fn vs its unprobed time, medians of $NET_ROUNDS interleaved rounds ($(printf %.2f "$per_round") ns per work round on-CPU)"
	echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	local sizes=(100 1000 10000) calls=(500000 200000 10000) works=()
	for s in "${sizes[@]}"; do works+=("$(awk -v s="$s" -v r="$per_round" 'BEGIN {printf "%d", s / r}')"); done
	for ((r = 0; r < NET_ROUNDS; r++)); do
		for i in 0 1 2; do echo "$i $(net_round "${works[$i]}" "${calls[$i]}")"; done
	done >"$tmp/net.rounds"
	[ -z "${NET_KEEP:-}" ] || cp "$tmp/net.rounds" "$NET_KEEP"
	echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
	printf "%-7s %-5s %6s %11s %11s %8s %12s %7s %5s %5s %15s  %s\n" "size" "timer" "work" "unprobed" "reported" "error" "as measured" "" "noise" "held" "range (median)" "goal"
	for i in 0 1 2; do
		awk -v i="$i" -v size="${sizes[$i]}" -v work="${works[$i]}" '
		function median(a, n,   j, k, t) {
			for (j = 2; j <= n; j++) { t = a[j]; for (k = j - 1; k >= 1 && a[k] > t; k--) a[k + 1] = a[k]; a[k + 1] = t }
			return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		}
		function row(name, b, t, m, within, held, lo, hi,   goal, err) {
			goal = size == 100 ? 25 : size == 10000 ? 5 : 0
			err = 100 * (t - b) / b
			printf "%-7s %-5s %6d %8.1f ns %8.1f ns %+7.1f%% %9.0f ns %6.1fx %2d/%d %2d/%d %7.1f-%-7.1f  %s\n", size " ns", name, work, b, t, err, m, m / b,
				within, n, held, n, lo, hi, goal ? sprintf("within %d%%: %s", goal, (err < goal && err > -goal) ? "yes" : "no") : ""
		}
		$1 == i { n++; bw[n] = $2; bc[n] = $3; nw[n] = $4; rw[n] = $5; ww += $6; nc[n] = $7; rc[n] = $8; wc += $9
		          self[n] = $10; pair[n] = $11; stepped = $12; fromsamples += $13; samples[n] = $14; wallsamples += $15
		          lw[n] = $16; hw[n] = $17; lc[n] = $18; hc[n] = $19
		          # does the round'"'"'s own 95% range hold its unprobed time?
		          heldw += ($2 >= $16 && $2 <= $17); heldc += ($3 >= $18 && $3 <= $19) }
		END {
			row("wall", median(bw, n), median(nw, n), median(rw, n), ww, heldw, median(lw, n), median(hw, n))
			row("cpu", median(bc, n), median(nc, n), median(rc, n), wc, heldc, median(lc, n), median(hc, n))
			printf "%-7s cpu: %d of %d rounds from stack samples, wall: %d (median %d samples a run)\n", size " ns", fromsamples, n, wallsamples, median(samples, n)
			if (i == 2) printf "probe cost per call of bench_fn (first instruction %s; medians of the runs'"'"' calibrations): %.0f ns inside the call, %.0f ns to its callers\n", stepped ? "single-stepped" : "emulated", median(self, n), median(pair, n)
		}' "$tmp/net.rounds"
	done
}

[ "$MODE" = all ] && overhead_figures
net_figures
