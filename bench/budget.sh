#!/usr/bin/env bash
# The overhead budget (issue 20), figures for docs/PERFORMANCE.md: what the
# daemon with its defaults costs the programs of a machine, against no
# profiler, and what it still collects.
#
# Usage: bash bench/budget.sh [ROUNDS] [SECONDS]          (as root, idle machine)
#
#   ROUNDS   interleaved rounds (default 6)
#   SECONDS  CPU-bound run length (default 10)
#
# Environment:
#   BUDGETS="0.5 1 2 5"   budgets to run (1 is the default and runs without
#                         the option, as a user starts the daemon)
#   SHORT=1000            short-lived processes per run of workload (b)
#   BUILD=<repo>/build    build tree; ECPI=... the binary
#   LOCK=/tmp/ecpi-quiet.lock   taken exclusively per round (other users of
#                         the machine wait; empty: no lock); a round holds it
#                         about 2 minutes (keep a hold under 10 minutes)
#   WORKLOADS="a b"       workloads to run (a: CPU-bound, b: short-lived,
#                         p: CPU-bound in paired slices, below)
#   SLICE_MS=200          workload p's slice length
#   DAEMON_ARGS=""        more daemon options, e.g. "-g" (call stacks by CFI)
#   HISTORY=""            the daemons' calibration history (default: one
#                         file for this run; none: each stands alone)
#   STATUS_LOG=""         a file to append each paired run's `ctl status`
#                         JSON to (one line: the calibration CPU by CPU)
#   RATES=""              fixed rates to run as well (`ecpi daemon -F HZ`,
#                         configuration fHZ; workload p only): the loss at a
#                         given rate, without a calibration, and the cost per
#                         sample it implies
#
# Every round runs each configuration once, rotated so that no configuration
# always runs first:
#   none     no profiler
#   none'    no profiler again: the spread between the two is the noise floor
#   bN       `ecpi daemon --overhead-budget N` (b1: `ecpi daemon`, the default)
# on two workloads:
#   (a) CPU-bound: bench/throughput.c on every CPU, iterations per wall
#       second, and iterations per CPU second of its workers (the program's
#       own time, which other processes and the host's steal time leave alone:
#       the budget's measure; see run_throughput);
#   (b) short-lived processes: SHORT runs of testprogs/burn (2 ms each), two
#       at a time, wall seconds;
#   (p) the CPU-bound loop again, SECS seconds on every CPU, with the daemon
#       running throughout and its sampling events switched off and on in
#       adjacent SLICE_MS slices (bench/budget_paired.c): the loss of the
#       program's own time within pairs of slices, where separate runs' 2-18%
#       differences on this VM cancel. Only the bN configurations run it.
# The loss of a configuration in a round is against the mean of that round's
# two unprofiled runs. Reported: median loss and its range over the rounds,
# the rate the calibration chose (issue 35: it may vary at most 2x between
# restarts), its measured cost per sample (median and the upper bound the
# rate was chosen from) and estimated overhead, the loss against the budget,
# and the samples per hour the daemon stored (whole machine).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
ECPI=${ECPI:-$BUILD/loader/ecpi}
THROUGHPUT=$BUILD/bench/ecpi_bench_throughput
PAIRED=$BUILD/bench/ecpi_bench_budget_paired
SLICE_MS=${SLICE_MS:-200}
BURN=$BUILD/testprogs/burn
ROUNDS=${1:-6}
SECS=${2:-10}
BUDGETS=${BUDGETS:-0.5 1 2 5}
SHORT=${SHORT:-1000}
LOCK=${LOCK-/tmp/ecpi-quiet.lock}
WORKLOADS=${WORKLOADS:-a b}
read -r -a DAEMON_EXTRA <<<"${DAEMON_ARGS:-}"

die() { echo "budget.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (the daemon loads BPF programs)"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer"
for b in "$ECPI" "$THROUGHPUT" "$BURN" "$PAIRED"; do
	[ -x "$b" ] || die "$b is missing; build first: cmake --build $BUILD -j2"
done

TMP=$(mktemp -d /tmp/ecpi-budget-bench.XXXXXX)
# The daemons of one run share a calibration history (they are restarts on
# one machine: each pools its calibration with the last few); HISTORY=none
# makes each calibration stand alone, HISTORY=FILE uses that file.
HISTORY=${HISTORY:-$TMP/calibrations}
DAEMON=""
cleanup() {
	[ -n "$DAEMON" ] && kill -TERM "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_daemon() { # DB CONFIG (bN: budget N%, fN: N Hz)
	local db=$1 config=$2 args=()
	case $config in
	f*) args=(-F "${config#f}") ;;
	b1) ;;
	b*) args=(--overhead-budget "${config#b}") ;;
	esac
	"$ECPI" daemon --db "$db" --exclude-self --calibration-history "$HISTORY" "${DAEMON_EXTRA[@]}" "${args[@]}" 2>>"$TMP/daemon.log" &
	DAEMON=$!
	for _ in $(seq 400); do
		"$ECPI" ctl --db "$db" status --format json >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	cat "$TMP/daemon.log" >&2
	die "the daemon did not start"
}
stop_daemon() {
	kill -TERM "$DAEMON"
	wait "$DAEMON" || true
	DAEMON=""
}
run_short() { # -> wall seconds of SHORT processes, two at a time
	local t0 t1
	t0=$(date +%s.%N)
	seq "$SHORT" | xargs -P2 -I{} "$BURN" 2 >/dev/null
	t1=$(date +%s.%N)
	python3 -c "print($t1 - $t0)"
}
# Workload (a): "wall,cpu": iterations per second of wall time (what a user
# sees, and what any other process on the machine also takes away) and
# iterations per CPU second of the workers (the program's own time: the
# kernel charges a sample's interrupt, handler and VM exit to the task it
# interrupts, while another process's time slices and the host's steal time,
# CONFIG_PARAVIRT_TIME_ACCOUNTING, are not the workers'). The budget is a
# share of a program's time, so the second is its measure; the first keeps
# the daemon's own CPU in view.
run_throughput() {
	local wall line
	wall=$("$THROUGHPUT" "$SECS" 2>"$TMP/throughput.err")
	line=$(grep -m1 '^# workers=' "$TMP/throughput.err") || die "ecpi_bench_throughput printed no CPU time: $(head -c 200 "$TMP/throughput.err")"
	python3 - "$wall" "$line" <<'PY'
import re, sys
m = re.search(r"cpu_seconds=([0-9.]+) iterations=([0-9.]+)", sys.argv[2])
print(f"{float(sys.argv[1])},{float(m.group(2)) / float(m.group(1))}")
PY
}
# Workload (p) under a fresh daemon: prints "median-loss status-json"; each
# pair's loss goes to $TMP/pairs.CONFIG for the pooled figure.
run_paired() { # CONFIG ROUND
	local config=$1 round=$2 db line status
	db="$TMP/$config.p.$round"
	start_daemon "$db" "$config"
	sleep 1
	if ! line=$("$PAIRED" "$DAEMON" "$SECS" "$SLICE_MS" 2>"$TMP/paired.err"); then
		stop_daemon
		die "ecpi_bench_budget_paired failed: $(tail -n 1 "$TMP/paired.err")"
	fi
	grep '^# pair ' "$TMP/paired.err" >>"$TMP/pairs.$config"
	status=$("$ECPI" ctl --db "$db" status --format json)
	if [ -n "${STATUS_LOG:-}" ]; then
		tr -d '\n' <<<"$status" >>"$STATUS_LOG"
		echo >>"$STATUS_LOG"
	fi
	stop_daemon
	rm -rf "$db"
	python3 - "$line" "$status" <<'PY'
import json, sys
f = dict(kv.split("=") for kv in sys.argv[1].split())
s = json.loads(sys.argv[2]).get("sampling", {})
cost = s.get("cost_per_sample_us", {})
out = {"hz": s.get("frequency_hz", 0), "cost_us": cost.get("median", 0), "cost_lo": cost.get("low", 0),
       "cost_hi": cost.get("high", 0), "bound_us": cost.get("upper_bound", 0), "pairs": cost.get("pairs", 0),
       "est_pct": s.get("estimated_overhead_percent", 0), "samples_per_hour": 0,
       "slice_pairs": int(f["pairs"]), "lower": float(f["lower"]), "upper": float(f["upper"]), "events": int(f["events"])}
print(f["median"], json.dumps(out, separators=(",", ":")))
PY
}
# One configuration on one workload: prints "value status-json-or-{}".
run_config() { # CONFIG WORKLOAD ROUND
	local config=$1 workload=$2 round=$3 value db
	if [ "$workload" = p ]; then
		run_paired "$config" "$round"
		return
	fi
	if [[ $config == none* ]]; then
		if [ "$workload" = a ]; then value=$(run_throughput); else value=$(run_short); fi
		echo "$value {}"
		return
	fi
	db="$TMP/$config.$workload.$round"
	start_daemon "$db" "$config"
	sleep 1
	"$ECPI" ctl --db "$db" flush >/dev/null
	local s0 s1 t0 t1
	s0=$("$ECPI" ctl --db "$db" status --format json)
	t0=$(date +%s.%N)
	if [ "$workload" = a ]; then value=$(run_throughput); else value=$(run_short); fi
	t1=$(date +%s.%N)
	"$ECPI" ctl --db "$db" flush >/dev/null
	s1=$("$ECPI" ctl --db "$db" status --format json)
	stop_daemon
	rm -rf "$db"
	python3 - "$value" "$s0" "$s1" "$t0" "$t1" <<'PY'
import json, sys
value, a, b = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
secs = float(sys.argv[5]) - float(sys.argv[4])
s = b.get("sampling", {})
cost = s.get("cost_per_sample_us", {})
out = {"hz": s.get("frequency_hz", 0), "cost_us": cost.get("median", 0), "cost_lo": cost.get("low", 0),
       "cost_hi": cost.get("high", 0), "bound_us": cost.get("upper_bound", 0), "pairs": cost.get("pairs", 0),
       "est_pct": s.get("estimated_overhead_percent", 0),
       "samples_per_hour": (b["events"][0]["samples"] - a["events"][0]["samples"]) / secs * 3600}
print(value, json.dumps(out, separators=(",", ":")))
PY
}

CONFIGS=(none none2)
for b in $BUDGETS; do CONFIGS+=("b$b"); done
for r in ${RATES:-}; do CONFIGS+=("f$r"); done
echo "# machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), kernel $(uname -r)"
echo "# $(date -u +%FT%TZ), $ROUNDS rounds, workloads $WORKLOADS ((a) $SECS s CPU-bound, (b) $SHORT short-lived processes); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$TMP/results"
for round in $(seq "$ROUNDS"); do
	n=${#CONFIGS[@]}
	order=()
	for k in $(seq 0 $((n - 1))); do order+=("${CONFIGS[$(((k + round) % n))]}"); done
	(
		[ -n "$LOCK" ] && flock -x -w 1200 9
		for workload in $WORKLOADS; do
			for config in "${order[@]}"; do
				[[ $workload == p && $config == none* ]] && continue
				[[ $workload != p && $config == f* ]] && continue
				read -r value info < <(run_config "$config" "$workload" "$round")
				if [ "$workload" = a ]; then
					echo "$round a $config ${value%,*} $info" >>"$TMP/results"
					echo "$round c $config ${value#*,} $info" >>"$TMP/results"
				else
					echo "$round $workload $config $value $info" >>"$TMP/results"
				fi
				echo "# round $round ($workload) $config: $value $info"
			done
		done
	) 9>"${LOCK:-/dev/null}"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$TMP/results" "$SECS" "$SHORT" "$TMP" "$SLICE_MS" <<'PY'
import json, math, os, statistics as st, sys
rows = [l.split(None, 4) for l in open(sys.argv[1]) if l.strip()]
secs, short = sys.argv[2], sys.argv[3]
def losses(workload, config):
    if workload == "p":
        return [float(x[3]) for x in rows if x[1] == "p" and x[2] == config]
    out = []
    for r in sorted({int(x[0]) for x in rows}):
        base = [float(x[3]) for x in rows if int(x[0]) == r and x[1] == workload and x[2] in ("none", "none2")]
        mine = [float(x[3]) for x in rows if int(x[0]) == r and x[1] == workload and x[2] == config]
        if len(base) != 2 or not mine: continue
        ref = st.mean(base)
        # (a) is a throughput (higher is better), (b) a wall time (lower is)
        out.append(100 * (1 - mine[0] / ref) if workload != "b" else 100 * (mine[0] / ref - 1))
    return out
def floor(workload):
    if workload == "p":
        return [0.0]
    out = []
    for r in sorted({int(x[0]) for x in rows}):
        v = {x[2]: float(x[3]) for x in rows if int(x[0]) == r and x[1] == workload and x[2] in ("none", "none2")}
        if len(v) == 2: out.append(100 * abs(v["none"] - v["none2"]) / st.mean(v.values()))
    return out
def median_interval(v):
    """The median and its 95% distribution-free interval (order statistics)."""
    v, n = sorted(v), len(v)
    cdf, r = 0.0, -1
    for k in range(n):
        pmf = math.comb(n, k) / 2 ** n
        if cdf + pmf > 0.025: break
        cdf, r = cdf + pmf, k
    r = max(r, 0)
    return st.median(v), v[r], v[n - 1 - r]
def paired_loss(c):
    """A configuration's pairs (workload p): all of them, their median and
    its interval, and the rounds' medians as text; None without pairs."""
    path = os.path.join(sys.argv[4], "pairs." + c)
    if not os.path.exists(path): return None
    pairs = [float(l.split()[-1]) for l in open(path) if l.startswith("# pair ")]
    m, lo, hi = median_interval(pairs)
    rounds = " ".join(f"{float(x[3]):+.2f}" for x in rows if x[1] == "p" and x[2] == c)
    return pairs, m, lo, hi, rounds
def print_paired(configs):
    print("  | budget | loss, median of all pairs [95% interval] | loss - budget | pairs | rounds' medians | rate chosen (Hz/CPU), median (min-max, max/min) | cost per sample (us, median) | upper bound (us) | estimated overhead |")
    print("  |---|---|---|---|---|---|---|---|---|")
    for c in configs:
        got = paired_loss(c)
        if not got: continue
        pairs, m, lo, hi, rounds = got
        info = [json.loads(x[4]) for x in rows if x[1] == "p" and x[2] == c]
        hz = [i["hz"] for i in info]
        med = lambda k: st.median(i.get(k, 0) for i in info)
        budget = float(c[1:])
        verdict = "at or under" if hi <= budget else ("over" if lo > budget else "not separable from")
        print(f"  | {c[1:]}%{' (default)' if c == 'b1' else ''} | {m:+.2f}% [{lo:+.2f} .. {hi:+.2f}] ({verdict} the budget) | {m - budget:+.2f} "
              f"| {len(pairs)} | {rounds} | {int(st.median(hz))} ({min(hz)}-{max(hz)}, {max(hz) / max(min(hz), 1):.2f}x) "
              f"| {med('cost_us'):.1f} | {med('bound_us'):.1f} | {med('est_pct'):.2f}% |")
configs = [c for c in dict.fromkeys(x[2] for x in rows) if c.startswith("b")]
configs.sort(key=lambda c: float(c[1:]))
rates = sorted((c for c in dict.fromkeys(x[2] for x in rows) if c.startswith("f")), key=lambda c: int(c[1:]))
def print_rates(rates):
    """Fixed rates (RATES): the loss, and the cost per sample it implies."""
    print("  fixed rates (`-F`), no calibration:")
    print("  | rate (Hz/CPU) | loss, median of all pairs [95% interval] | implied cost per sample (us) | rounds' medians |")
    print("  |---|---|---|---|")
    for c in rates:
        got = paired_loss(c)
        if not got: continue
        pairs, m, lo, hi, rounds = got
        hz = int(c[1:])
        print(f"  | {hz} | {m:+.2f}% [{lo:+.2f} .. {hi:+.2f}] | {m / 100 / hz * 1e6:.1f} [{lo / 100 / hz * 1e6:.1f} .. {hi / 100 / hz * 1e6:.1f}] | {rounds} |")
for workload, title in (("a", f"(a) CPU-bound, {secs} s on every CPU: throughput loss, iterations per wall second"),
                        ("c", f"(a) the same runs: loss of the program's own time, iterations per CPU second of the workers"),
                        ("b", f"(b) {short} short-lived processes, two at a time: wall-time increase"),
                        ("p", f"(p) CPU-bound, {secs} s on every CPU, the daemon's sampling switched off and on in paired {sys.argv[5]} ms slices: loss of the program's own time")):
    if not any(x[1] == workload for x in rows): continue
    f = floor(workload)
    print(title)
    if workload == "p":
        print_paired(configs)
        if rates: print_rates(rates)
        continue
    print(f"  noise floor (two unprofiled runs of a round differ by): median {st.median(f):.2f}%, max {max(f):.2f}%")
    print("  | budget | loss, median | loss - budget | range over rounds | rate chosen (Hz/CPU), median (min-max, max/min) | cost per sample (us, median [quartiles]) | upper bound (us) | estimated overhead | samples/hour stored |")
    print("  |---|---|---|---|---|---|---|---|---|")
    for c in configs:
        l = losses(workload, c)
        info = [json.loads(x[4]) for x in rows if x[1] == workload and x[2] == c]
        hz = [i["hz"] for i in info]
        med = lambda k: st.median(i.get(k, 0) for i in info)
        budget = float(c[1:])
        label = f"{c[1:]}%" + (" (default)" if c == "b1" else "")
        print(f"  | {label} | {st.median(l):+.2f}% | {st.median(l) - budget:+.2f} | {min(l):+.2f} .. {max(l):+.2f} "
              f"| {int(st.median(hz))} ({min(hz)}-{max(hz)}, {max(hz) / max(min(hz), 1):.2f}x) "
              f"| {med('cost_us'):.1f} [{med('cost_lo'):.1f}-{med('cost_hi'):.1f}] | {med('bound_us'):.1f} "
              f"| {med('est_pct'):.2f}% | {med('samples_per_hour'):,.0f} |")
    print("  rates chosen per round: " + "; ".join(
        f"{c[1:]}%: " + " ".join(str(json.loads(x[4])["hz"]) for x in rows if x[1] == workload and x[2] == c) for c in configs))
    if "b1" in configs:
        l = st.median(losses(workload, "b1"))
        verdict = "at or under the budget" if l <= 1 else ("over the budget, by less than the noise floor" if l - 1 <= st.median(f) else "over the budget, by more than the noise floor")
        print(f"  default 1% budget: median loss {l:+.2f}%, {verdict} (noise floor median {st.median(f):.2f}%)")
PY
