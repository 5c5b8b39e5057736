#!/usr/bin/env bash
# What register snapshots (ecpi record --registers, issue 21) cost per sample:
# BPF handler time (kernel.bpf_stats_enabled), loader CPU, bytes on disk per
# snapshot, and the CPU-bound workload's throughput, with snapshots off, on
# every sample, and on one sample in 16. Configurations are interleaved.
#
# Usage (root): bash bench/registers.sh [ROUNDS=6] [SECONDS=5] [BUILD=build]
# Prints one line per run and a summary table (mean ± sd over rounds).
set -euo pipefail
ROUNDS=${1:-6}
SECONDS_PER_RUN=${2:-5}
BUILD=${3:-build}
ECPI=$BUILD/loader/ecpi
WORKLOAD=$BUILD/bench/ecpi_bench_throughput
die() { echo "bench/registers.sh: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "needs root (BPF, kernel.bpf_stats_enabled)"
for b in "$ECPI" "$WORKLOAD"; do
	[[ -x $b ]] || die "$b not found: cmake --build $BUILD --target ecpi ecpi_bench_throughput"
done
TMP=$(mktemp -d /tmp/ecpi-bench-registers.XXXXXX)
OLD_STATS=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() { sysctl -qw kernel.bpf_stats_enabled="$OLD_STATS"; rm -rf "$TMP"; }
trap cleanup EXIT
sysctl -qw kernel.bpf_stats_enabled=1

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %5s %14s %9s %10s %11s %11s %13s\n' config round iterations/s samples snapshots bpf_ns/smp loader_us/smp disk_B/snapshot
for round in $(seq "$ROUNDS"); do
	for cfg in off 16 1; do
		db=$TMP/$cfg.$round.db
		# The workload's throughput goes to a file of its own, never into
		# the report's stream.
		"$ECPI" record -F 4999 --registers "$cfg" -o "$db" --format json --report-file "$TMP/report.json" -- \
			sh -c "exec '$WORKLOAD' $SECONDS_PER_RUN >'$TMP/tput'" 2>"$TMP/err" ||
			{ cat "$TMP/err" >&2; die "record failed"; }
		tput=$(head -1 "$TMP/tput")
		reg_bytes=$(find "$db" -name 'registers.*.reg' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
		python3 - "$TMP/report.json" "$cfg" "$round" "$tput" "$reg_bytes" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
cfg, rnd, tput, reg_bytes = sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
e = d["events"][0]
samples, snaps = e["taken"], e["registers"]
bpf = d.get("bpf_run_time_ns", 0) / max(d.get("bpf_run_count", 0), 1)
loader = d["loader_cpu_seconds"] * 1e6 / max(samples, 1)
per_snap = reg_bytes / snaps if snaps else 0
print(f"{cfg:<8} {rnd:>5} {tput:14.0f} {samples:9d} {snaps:10d} {bpf:11.0f} {loader:11.2f} {per_snap:13.1f}")
PY
	done
done | tee "$TMP/runs.txt"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$TMP/runs.txt" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith(("#", "config"))]
by = {}
for r in rows:
    by.setdefault(r[0], []).append([float(x) for x in r[2:]])
def ms(vals):
    return f"{st.mean(vals):,.1f} ± {st.stdev(vals) if len(vals) > 1 else 0:,.1f}"
base = st.mean(v[0] for v in by["off"])
print("\n| --registers | iterations/s | vs off | BPF ns per sample | loader µs per sample | snapshots | bytes per snapshot on disk |")
print("|---|---|---|---|---|---|---|")
for cfg in ("off", "16", "1"):
    v = by[cfg]
    tp = [x[0] for x in v]
    print(f"| {cfg} | {ms(tp)} | {100 * (st.mean(tp) / base - 1):+.2f}% | {ms([x[3] for x in v])} | "
          f"{ms([x[4] for x in v])} | {st.mean(x[2] for x in v):,.0f} | {ms([x[5] for x in v]) if cfg != 'off' else '—'} |")
PY
