# Where a probed function's time is within the probe's own noise, ecpi
# probe gives its on-CPU time from stack samples (issue 31 item 2): the
# target's user-mode samples whose stack holds the function under that
# path, times the period, over the probe's exact calls. symtab_lookup
# takes about 80 ns a call on the CPU (the median of three unprobed runs),
# against a probe of hundreds of ns; as measured it reads 7x that. Its
# samples hold neither trap (kernel mode) nor the timer interrupts held off
# during the entry trap (they land on its first instruction, before its
# frame is set up), but the lookup's own code runs slower between traps:
# on the VM of docs/PROBE.md the samples read 1.7-2.0x its unprobed time,
# on CI's host 3.2x (its traps dearer: 938 ns a call as measured), on an
# AMD VM 6.0x (3,000 ns as measured). That slowdown grows with the trap's
# cost, so the upper bound is relative to the time as measured, not to the
# unprobed time. The check: at least 0.75x (samples missed:
# hash_name and strcmp, which set no frame pointer, hide the lookup's
# frame; counting only the samples with the lookup's frame read 0.3x), at
# most half the time as measured (the traps' own time is not in the
# samples: a sampler that counted it would read the measured time); a row
# within the noise reports that figure and says so.
source "$TESTLIB"
require_bpf
prog="$TESTPROGS/symtab"
rounds=100
for i in 1 2 3; do "$prog" "$rounds" >"$TMP/base$i"; done
"$ECPI" probe -q --no-stdin --func symtab_lookup --metric count,cpu --format json \
	--report-file "$TMP/probe.json" -- "$prog" "$rounds" >"$TMP/out" 2>"$TMP/err" ||
	{ cat "$TMP/err" >&2; fail "ecpi probe exited $?"; }
python3 - "$TMP/probe.json" "$TMP"/base1 "$TMP"/base2 "$TMP"/base3 <<'PY' || fail "the stack-sample time is not the lookup's own"
import json, re, statistics, sys
d = json.load(open(sys.argv[1]))
truth = statistics.median(float(re.search(r"lookup [0-9.]+ ns/call, ([0-9.]+) ns/call on-CPU", open(f).read()).group(1))
                          for f in sys.argv[2:])
period = d.get("stack_sample_period_ns", 0)
assert period > 0, "the report has no stack-sampling period"
f = next(f for f in d["functions"] if f["symbol"] == "symtab_lookup")
paths = [p for p in f["paths"] if "lookup_phase" in [fr["symbol"] for fr in p["frames"]]]
assert len(paths) == 1, [[fr["symbol"] for fr in p["frames"]] for p in f["paths"]]
p = paths[0]
samples = p.get("stack_samples", 0)
by_samples = samples * period / p["calls"]
net = p["timers"]["cpu"]["net"]
print(f"symtab_lookup: unprobed {truth:.0f} ns/call on-CPU; {samples} samples of {period} ns over {p['calls']} calls: "
      f"{by_samples:.0f} ns/call ({by_samples / truth:.2f}x); as measured {p['timers']['cpu']['mean_ns']} ns, "
      f"subtraction {net['mean_ns']:.0f} ns ({net['method']}); counters {d['counters']}", file=sys.stderr)
assert 0.75 * truth <= by_samples <= p["timers"]["cpu"]["mean_ns"] / 2, (by_samples, truth)
if net["within_noise"]:
    assert net["method"] == "stack samples" and abs(net["samples_mean_ns"] - by_samples) < 1e-6 * by_samples + 1e-9, net
else:
    assert net["method"] == "subtraction", net
PY
"$ECPI" probe -q --no-stdin --func symtab_lookup --metric count,wall,cpu --report-file "$TMP/probe.txt" -- "$prog" 20 >/dev/null 2>&1 ||
	fail "ecpi probe (text) failed"
grep -q "s a mean within it taken from stack samples" "$TMP/probe.txt" ||
	{ cat "$TMP/probe.txt" >&2; fail "the text report does not say that it samples stacks"; }
! grep -q "\[\*cpu within the probe's noise" "$TMP/probe.txt" ||
	{ cat "$TMP/probe.txt" >&2; fail "an on-CPU row within the noise gives a range instead of its stack samples"; }
# The wall row within the noise: not its net mean (a figure several times
# the function's time) but the samples' on-CPU figure (issue 31).
! grep -q "\[\*wall within the probe's noise" "$TMP/probe.txt" ||
	{ cat "$TMP/probe.txt" >&2; fail "a wall row within the noise gives its net mean instead of its stack samples"; }
