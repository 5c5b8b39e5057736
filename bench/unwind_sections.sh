#!/usr/bin/env bash
# Where the CFI handler's time goes, by section (issue 29, docs/UNWIND.md):
# runs ecpi_bench_unwind_depth under a recording made by an ecpi built with
# bench/unwind_sections.py's timing sections, reads their per-CPU sums
# (map prof_ns) just before the recording ends, and prints each per walked
# sample, the whole handler's time per sample (p10, median, p90 of its
# histogram), then its mean (kernel.bpf_stats_enabled). A time:
# take the exclusive lock on a shared machine.
#
# Usage: bash bench/unwind_sections.sh ECPI_WITH_SECTIONS [SECONDS] [SHAPE:DEPTH...]   (as root)
#   e.g. python3 bench/unwind_sections.py && cmake --build build --target ecpi &&
#        cp build/loader/ecpi /tmp/ecpi-sections && git checkout bpf/sampler.bpf.c &&
#        bash bench/unwind_sections.sh /tmp/ecpi-sections 3 chain:30 recursion:30
# Environment: BUILD=<repo>/build (for bench/ecpi_bench_unwind_depth), RECORD_ARGS,
# AB_LABELS="A's name|B's name" for an --ab build's two halves.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bench/unwind_sections.sh ECPI [SECONDS] [SHAPE:DEPTH...]" >&2; exit 2; }
ECPI=$1 SECS=${2:-3}
shift $(($# >= 2 ? 2 : 1))
CASES=("${@:-chain:30}")
HERE=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$HERE/build}
command -v bpftool >/dev/null || { echo "bench/unwind_sections.sh: needs bpftool" >&2; exit 1; }
W=$(mktemp -d /tmp/ecpi-unwind-sections.XXXXXX)
old=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -q kernel.bpf_stats_enabled="$old"; rm -rf "$W"' EXIT
sysctl -q kernel.bpf_stats_enabled=1
for c in "${CASES[@]}"; do
	shape=${c%%:*} depth=${c##*:}
	"$ECPI" record --call-graph cfi -F 999 ${RECORD_ARGS:-} -o "$W/db-$shape-$depth" --format json \
		--report-file "$W/$shape-$depth.json" -- "$BUILD/bench/ecpi_bench_unwind_depth" "$depth" "$SECS" "$shape" \
		>/dev/null 2>&1 &
	pid=$!
	sleep "$(python3 -c "print(max(0.5, $SECS - 0.6))")"
	echo "== $shape, $depth frames"
	bpftool map dump name prof_ns -j | python3 -c '
import json, sys
def number(v):
    return v if isinstance(v, int) else int.from_bytes(bytes(int(x, 16) for x in v), "little")
sums = {number(e["key"]): sum(number(v["value"]) for v in e.get("values", [])) for e in json.load(sys.stdin)}
n = sums.get(0, 0) or 1
names = ["samples walked", "entry", "registers (own ring)", "walk setup", "walk",
         "ring record (+regs)", "frames", "row-cache lookups", "row-cache hits", "window reads",
         "window read time", "cache-served lookups", "searched lookups", "searches"]
if sums.get(15):  # unwind_sections.py --ab: 12, 13: window reads and walked samples of the B half
    names[12:14] = ["window reads, B", "samples walked, B"]
for k, name in enumerate(names):
    unit = "ns" if k in (1, 2, 3, 4, 5, 10, 11) or (k == 12 and not sums.get(15)) else ""
    print(f"  {name:20} {sums.get(k, 0) / n:8.1f} {unit}" if k else f"  {name:20} {sums.get(0, 0):8d}")
if sums.get(15) and 0 < sums.get(13, 0) < n:
    a, b = sums.get(9, 0) - sums.get(12, 0), sums.get(12, 0)
    print(f"  window reads a walked sample: A {a / (n - sums[13]):.2f}, B {b / sums[13]:.2f}")'
	bpftool map dump name prof_hist -j | python3 -c '
import json, sys
def number(v):
    return v if isinstance(v, int) else int.from_bytes(bytes(int(x, 16) for x in v), "little")
h = {number(e["key"]): sum(number(v["value"]) for v in e.get("values", [])) for e in json.load(sys.stdin)}
def line(h, label):
    n = sum(h.values())
    def quantile(q):
        seen = 0
        for k in sorted(h):
            seen += h[k]
            if seen >= q * n:
                return f"{10 * k}" if k < 1000 else ">10000"
    print(f"  {label}: p10 {quantile(0.1)}, median {quantile(0.5)}, p90 {quantile(0.9)} ns of {n}" if n else "  no histogram")
second = {k - 1001: v for k, v in h.items() if k > 1000}
if sum(second.values()):  # unwind_sections.py --ab: the other half of the samples
    a, b = sys.argv[1].split("|")
    line({k: v for k, v in h.items() if k <= 1000}, f"per sample, A ({a})")
    line(second, f"per sample, B ({b})")
else:
    line(h, "per sample (10 ns buckets)")' "${AB_LABELS:-windows from the last extent|512-byte windows}"
	# the memo of the last stack's frames: walks that joined it, frames replayed
	bpftool map dump name memo_stats -j 2>/dev/null | python3 -c '
import json, sys
def number(v):
    return v if isinstance(v, int) else int.from_bytes(bytes(int(x, 16) for x in v), "little")
s = {number(e["key"]): sum(number(v["value"]) for v in e.get("values", [])) for e in json.load(sys.stdin)}
print(f"  memo: {s.get(0, 0)} walks joined it, {s.get(1, 0)} frames replayed")' || true
	wait "$pid" || true
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
n, t = d.get("bpf_run_count", 0), d.get("bpf_run_time_ns", 0)
print(f"  whole handler        {t / n:8.0f} ns over {n} samples" if n else "  no bpf stats")' "$W/$shape-$depth.json"
done
