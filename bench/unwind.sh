#!/usr/bin/env bash
# Call-stack completeness (issue 29), figures for docs/UNWIND.md: the share
# of samples whose user stack reaches the thread's root, with `ecpi record -g`
# (CFI in the BPF handler) beside `perf record --call-graph dwarf` (stack
# copies unwound afterwards) on the same workloads, and ecpi's BPF handler
# time per sample with CFI and with frame pointers only.
#
# Usage: bash bench/unwind.sh [SECONDS]        (as root)
#
#   SECONDS  length of each workload (default 4)
#
# Environment: BUILD=<repo>/build (build tree), ECPI=... the binary, HZ=999,
#   PARTS="roots depth system" (which parts to run: completeness, handler
#   time by depth (a time: take the exclusive lock), whole-system tables);
#   for the depth part: DEPTHS="10 30 100", MODES="cfi fp" and
#   SHAPES="recursion chain" (one function calling itself, or a chain of
#   distinct functions: ecpi_bench_unwind_depth's two shapes), RECORD_ARGS
#   (more options for its recordings, e.g. "--registers off": a recorded
#   command keeps every sample's registers by default, part of the handler).
#
# Workloads (Debian's own binaries, built without frame pointers):
#   xz      xz -9 -T1 of 48 MB of text
#   gzip    gzip -9 of the same
#   sort    sort --parallel=2 of 4 M random lines (threads)
#   python3 /usr/bin/python3 building and sorting dicts
#   unwindme  testprogs/unwindme (qsort callback, 60-deep recursion, a thread)
#   sigwork   testprogs/sigwork (a SIGALRM handler that checksums state)
# Reached the root, per tool:
#   ecpi (cfi)   the handler's count: the CFI walk reached a row whose return
#                address is undefined (_start, clone3); prof's "call stacks" line
#   ecpi (names) / perf   the stack holds __libc_start_call_main,
#                __libc_start_main, start_thread or clone3 (same rule for both)
# Then the BPF handler's time per sample at 10, 30 and 100 frames (CFI and
# frame pointers), and the unwind tables of a whole-system recording (their
# kernel memory; the second recording loads them from the disk cache).
set -euo pipefail
SECONDS_RUN=${1:-4}
HERE=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$HERE/build}
ECPI=${ECPI:-$BUILD/loader/ecpi}
HZ=${HZ:-999}
PARTS=${PARTS:-roots depth system}
DEPTHS=${DEPTHS:-10 30 100}
MODES=${MODES:-cfi fp}
SHAPES=${SHAPES:-recursion chain}
part() { [[ " $PARTS " == *" $1 "* ]]; }
[ "$(id -u)" -eq 0 ] || { echo "bench/unwind.sh: run as root (BPF and perf)" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench/unwind.sh: perf is not installed" >&2; exit 1; }
W=$(mktemp -d /tmp/ecpi-unwind.XXXXXX)
trap 'rm -rf "$W"' EXIT

# Inputs: text that compresses and sorts slowly enough (the completeness part only).
part roots && /usr/bin/python3 - "$W" <<'PY'
import random, sys
random.seed(29)
words = ["".join(random.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(random.randint(3, 9))) for _ in range(5000)]
with open(sys.argv[1] + "/text", "w") as f:
    for _ in range(4_000_000):
        f.write(" ".join(random.choice(words) for _ in range(2)) + "\n")
PY
cat > "$W/work.py" <<'PY'
import sys, time
end = time.monotonic() + float(sys.argv[1])
def build(n):
    return [{"k": (i * 7919) % n, "v": str(i)} for i in range(n)]
while time.monotonic() < end:
    rows = sorted(build(20000), key=lambda r: r["k"])
PY

workload() {  # name -> command
	case $1 in
	xz) echo "timeout $SECONDS_RUN xz -9 -T1 -c $W/text" ;;
	gzip) echo "timeout $SECONDS_RUN sh -c 'while :; do gzip -9 -c $W/text; done'" ;;
	sort) echo "timeout $SECONDS_RUN sh -c 'while :; do sort --parallel=2 -S 200M $W/text; done'" ;;
	python3) echo "/usr/bin/python3 $W/work.py $SECONDS_RUN" ;;
	unwindme) echo "$BUILD/testprogs/unwindme $SECONDS_RUN" ;;
	sigwork) echo "$BUILD/testprogs/sigwork $SECONDS_RUN" ;;
	esac
}

# Share of stacks holding a root frame, from "frames... count" lines.
root_share_folded() {
	python3 -c '
import sys, re
roots = re.compile(r"(^|;)(__libc_start_call_main|__libc_start_main[^;]*|start_thread|[^;]*clone3)(;|$)")
tot = hit = 0
for line in open(sys.argv[1]):
    stack, n = line.rstrip("\n").rsplit(" ", 1)
    tot += int(n); hit += int(n) if roots.search(stack) else 0
print(f"{100.0 * hit / tot:.1f}% of {tot}" if tot else "no samples")' "$1"
}

# perf script -> the same "frames count" lines (one per sample).
perf_folded() {
	perf script -i "$1" -F ip,sym 2>/dev/null | python3 -c '
import sys
stack = []
for line in sys.stdin:
    s = line.strip()
    if not s:
        if stack: print(";".join(reversed(stack)) + " 1")
        stack = []
        continue
    parts = s.split(None, 1)  # "ip symbol[+off] [(inlined)]"
    stack.append(parts[1].replace(" (inlined)", "") if len(parts) > 1 else "?")
if stack: print(";".join(reversed(stack)) + " 1")'
}

part roots && printf "%-9s | %-30s | %-16s | %-16s | %s\n" workload "ecpi -g (cfi): reached root" "ecpi (names)" "perf dwarf" "ecpi cut reasons"
for name in xz gzip sort python3 unwindme sigwork; do
	part roots || break
	cmd=$(workload $name)
	"$ECPI" record -g -F "$HZ" -q -o "$W/db-$name" -- sh -c "$cmd >/dev/null" 2>/dev/null || true
	"$ECPI" prof "$W/db-$name" --format json >"$W/prof-$name.json"
	cfi=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["totals"]["cpu-clock"]["call_stacks"]
cuts = ", ".join(f"{k} {v}" for k, v in d["ends"].items() if k != "root" and v)
share, walks = 100 * d["root_share"], d["walks"]
print(f"{share:.1f}% of {walks}|{cuts or chr(45)}")' "$W/prof-$name.json")
	"$ECPI" export "$W/db-$name" --format folded -o "$W/ecpi-$name.folded"
	: >"$W/perf-$name.folded"
	if perf record -q --call-graph dwarf -F "$HZ" -o "$W/perf-$name.data" -- sh -c "$cmd >/dev/null" 2>/dev/null ||
		[ -s "$W/perf-$name.data" ]; then
		perf_folded "$W/perf-$name.data" >"$W/perf-$name.folded" || true
	fi
	printf "%-9s | %-30s | %-16s | %-16s | %s\n" "$name" "${cfi%%|*}" "$(root_share_folded "$W/ecpi-$name.folded")" \
		"$(root_share_folded "$W/perf-$name.folded")" "${cfi#*|}"
done

# BPF handler time per sample (kernel.bpf_stats_enabled) at fixed user
# stack depths: ecpi_bench_unwind_depth calls down to DEPTH frames (counting
# _start and libc's two; one function recursing, or a chain of distinct
# functions) and burns CPU at the bottom, built with frame
# pointers so that --call-graph fp walks the same frames. The figure is the
# whole handler (kernel stack, walk, ring-buffer record) over every sample.
part depth && old=$(sysctl -n kernel.bpf_stats_enabled) && sysctl -q kernel.bpf_stats_enabled=1
part depth && printf "\n%-9s | %-6s | %-5s | %s\n" shape depth mode "handler time per sample"
for shape in $SHAPES; do
	for depth in $DEPTHS; do
		for mode in $MODES; do
			part depth || break 3
			"$ECPI" record --call-graph $mode -F "$HZ" ${RECORD_ARGS:-} -o "$W/depth-$mode-$depth" --format json \
				--report-file "$W/depth-$mode-$depth.json" -- "$BUILD/bench/ecpi_bench_unwind_depth" "$depth" \
				"$SECONDS_RUN" "$shape" >/dev/null 2>&1 || true
			printf "%-9s | %-6s | %-5s | %s\n" "$shape" "$depth" "$mode" "$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
n, t = d.get("bpf_run_count", 0), d.get("bpf_run_time_ns", 0)
print(f"{t / n:.0f} ns over {n} samples" if n else "no bpf stats")' "$W/depth-$mode-$depth.json")"
		done
	done
done
part depth && sysctl -q kernel.bpf_stats_enabled="$old"

# Kernel-locked memory of the unwind tables of a whole-system recording:
# every process on the machine, for SECONDS (record's JSON report,
# unwind_tables). Tables are cached in DB/unwind: a second recording into the
# same database loads them from disk instead of building them.
for run in first second; do
	part system || break
	"$ECPI" record -a -g -F 99 --duration "$SECONDS_RUN" -o "$W/system" --format json \
		--report-file "$W/system-$run.json" >/dev/null 2>&1 || true
	python3 -c '
import json, sys
u = json.load(open(sys.argv[1])).get("unwind_tables", {})
mib = u.get("locked_bytes", 0) / 2**20
c = ", ".join(f"{k[6:]} {v:.0f}" for k, v in sorted(u.items()) if k.startswith("cache."))
r = ", ".join(f"{k[8:]} {v:.0f}" for k, v in sorted(u.items()) if k.startswith("refused."))
tables, rows, procs, built = (u.get(k, 0) for k in ("tables", "rows", "processes", "build_s"))
print(f"whole system ({sys.argv[2]} recording): {tables:.0f} tables, {rows:.0f} rows, {mib:.1f} MiB locked, "
      f"{procs:.0f} processes, built in {built:.2f} s; cache: {c or chr(45)}; refused: {r or chr(45)}")' "$W/system-$run.json" $run
done
