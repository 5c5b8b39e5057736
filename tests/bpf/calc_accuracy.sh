# ecpi calc end to end (root): a workload is profiled and analyzed; the JSON
# and text layouts are checked, names that match several procedures or none
# are errors that say so, and the estimated execution counts are compared
# with callgrind's exact counts against a floor well below the figures in
# docs/ACCURACY.md (bench/accuracy.sh), so that regressions fail.
source "$TESTLIB"
require_bpf
command -v valgrind >/dev/null || skip "valgrind is not installed (callgrind gives the true counts)"
command -v cc >/dev/null || skip "no C compiler"
bench=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../bench/accuracy" && pwd)

# -DCLOCK_REFERENCE adds two kernels to the benchmark's loops: a register add
# chain that retires one add per cycle on every x86-64 core (the run's own
# clock) and a multiply-add chain whose best case is the same on every core.
# -DCALL_LOOP adds a loop around a call, whose samples land after the call.
cc -O2 -g -DCLOCK_REFERENCE -DCALL_LOOP -o "$TMP/loops" "$bench/loops.c"
cp "$TMP/loops" "$TMP/loops2"
reps=20000
"$ECPI" record -q -F 10000 -o "$TMP/db" -- "$TMP/loops" "$reps" >/dev/null
# The same procedures in two images, for the name checks below.
"$ECPI" record -q -F 10000 -o "$TMP/db2" -- sh -c "'$TMP/loops' 3000 >/dev/null; '$TMP/loops2' 3000 >/dev/null"

# Cycles per sample from the profiled run itself: clock_reference executes
# 8 x 2048 dependent adds, i.e. that many cycles, per repetition. A clock rate
# measured in another run (bench/accuracy.sh) is off by whatever changed
# between the runs: on a shared VM the same work has taken from 0.42 to 0.64 s
# of CPU time in consecutive runs, and the timer interrupts' cost varies.
ref=$("$ECPI" prof "$TMP/db" --format json | python3 -c 'import json,sys; print(sum(r["samples"]["cpu-clock"] for r in json.load(sys.stdin)["rows"] if r["procedure"] == "clock_reference"))')
[ "$ref" -gt 300 ] || fail "only $ref samples in clock_reference"
mhz=$(python3 -c "print(round(8 * 2048 * $reps / ($ref * 100e-6) / 1e6))")

# JSON layout (docs/json-schema.md, ecpi.calc)
"$ECPI" calc --all "$TMP/db" --image "$TMP/loops" --cpu-mhz "$mhz" --format json >"$TMP/loops.calc.json"
json_check "$TMP/loops.calc.json" 'd["schema"] == "ecpi.calc" and d["version"] == 2 and d["event"] == "cpu-clock"'
json_check "$TMP/loops.calc.json" 'd["cpu_mhz"] == '"$mhz"' and d["clock_source"] == "--cpu-mhz" and not d["hardware_cycles"]'
json_check "$TMP/loops.calc.json" 'len(d["procedures"]) >= 5 and all(p["image"].endswith("/loops") for p in d["procedures"])'
json_check "$TMP/loops.calc.json" 'all(set(["address", "samples", "executions", "cpi", "confidence"]) <= set(i) for p in d["procedures"] for i in p["instructions"])'
json_check "$TMP/loops.calc.json" 'all(i["address"].startswith("0x") and i["confidence"] in ("low", "medium", "high", "measured") for p in d["procedures"] for i in p["instructions"])'
json_check "$TMP/loops.calc.json" 'any("source" in i and i["source"]["file"].endswith("loops.c") for p in d["procedures"] for i in p["instructions"])'
json_check "$TMP/loops.calc.json" 'all(e["executions"] >= 0 for p in d["procedures"] for e in p["edges"])'

# Text layout: DCPI Figure 2's block headers and columns.
"$ECPI" calc poly "$TMP/db" --cpu-mhz "$mhz" >"$TMP/poly.txt"
grep -q '^\*\*\* Best-case' "$TMP/poly.txt" || fail "no best-case line"
grep -q '^\*\*\* Actual' "$TMP/poly.txt" || fail "no actual line"
grep -q 'Executions' "$TMP/poly.txt" || fail "no column header"
grep -q 'loops.c:[0-9]' "$TMP/poly.txt" || fail "no source lines"
grep -q 'cpu-clock' "$TMP/poly.txt" || fail "the clock assumption is not stated"

# Names: several matches list the candidates; no match says so.
expect_exit 1 'matches 2 sampled procedures' "$ECPI" calc poly "$TMP/db2"
"$ECPI" calc poly "$TMP/db2" --image loops2 --summary >/dev/null || fail "--image does not pick one of the two"
expect_exit 1 'has no cpu-clock samples' "$ECPI" calc no_such_procedure "$TMP/db"
expect_exit 2 'PROCEDURE or --all' "$ECPI" calc "$TMP/db" --all no_such_procedure

truth_rows "$bench" loops "$reps"
cat >"$TMP/floor.py" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
def samples_where(ok, proc=None):
    # (samples, share of them whose est / true satisfies ok), over proc's rows or all
    sel = [r for r in rows if proc is None or r[1] == proc]
    total = sum(int(r[3]) for r in sel)
    good = sum(int(r[3]) for r in sel if float(r[5]) > 0 and ok(float(r[4]) / float(r[5])))
    return total, good / max(total, 1)
def share(k, proc=None):
    return samples_where(lambda ratio: abs(ratio - 1) <= k, proc)
def within_factor(f, proc=None):
    # est / true in [1/f, f]: an estimate of 0 is not within any factor
    return samples_where(lambda ratio: 1 / f <= ratio <= f, proc)
total, within2 = within_factor(2)
tenfold = within_factor(10)[1]
mul_total, mul25 = share(0.25, "mulchain")
ref_total, ref25 = share(0.25, "clock_reference")
poly_total, poly25 = share(0.25, "poly")
call_total, call10x = within_factor(10, "call_loop")
print(f"{total} samples: within 2x {100 * within2:.0f}%, within 10x {100 * tenfold:.0f}%; "
      f"within 25%: mulchain {100 * mul25:.0f}% of {mul_total}, clock_reference {100 * ref25:.0f}% of {ref_total}, "
      f"poly {100 * poly25:.0f}% of {poly_total}; call_loop within 10x {100 * call10x:.0f}% of {call_total}")
# The floor, robust across x86-64 cores and a busy host (docs/ACCURACY.md has
# the figures): mulchain and clock_reference are latency-bound chains whose
# best case is the same on every core and which have no dynamic stalls, so
# their counts must be close. poly is reported but not held to it: its three
# instructions per cycle depend on the core's width and on what the SMT
# sibling runs (on a shared Zen 4 it has come out from exact to 28% high).
# The other kernels stall in ways the static model cannot know (L1 misses,
# 4K aliasing on Intel), but almost no estimate may be off by 10x either way
# (97% of samples; seen 99.6-100% on Zen 5, where a sample or two on a block
# gives a coarse count), and most samples must be within a factor of two
# (seen 81-100%; bits, 2x low on Zen 5, sits at the edge). Both checks were
# one-sided before, so an estimate of 0 passed them. call_loop's samples sit
# after its call, where the model times nothing: estimated from the rest they
# came out 1000x low; now from the block's cycles, at least the model's cost of
# a call (x86_64-zen5: within a few percent; a model without it: about 4x high).
# A count calc states as a range ("the samples cannot decide") is judged by
# its range: off only when the range excludes the truth. Seen on an Intel
# Xeon host (generic model): call_loop's samples land in twice_leaf, a
# two-instruction leaf whose 540 samples give 0.56-163 M calls around a true
# 82 M; the point estimate is the range's low end (issue 36 asks for better).
off10, ranged_held = {}, 0
for r in rows:
    est, true, lo, hi = float(r[4]), float(r[5]), float(r[7]), float(r[8])
    if hi > lo and lo <= true <= hi:
        ranged_held += int(r[3])
        continue
    if not (true > 0 and 0.1 <= est / true <= 10):
        off10[r[1]] = off10.get(r[1], 0) + int(r[3])
print("samples off by more than 10x, per procedure:", off10, f"(ranged counts holding the truth: {ranged_held} samples)")
tenfold = 1 - sum(off10.values()) / max(total, 1)  # the floor below: point estimates, or ranges that hold the truth
within2 = sum(int(r[3]) for r in rows
              if (float(r[8]) > float(r[7]) and float(r[7]) <= float(r[5]) <= float(r[8]))
              or (float(r[5]) > 0 and 0.5 <= float(r[4]) / float(r[5]) <= 2)) / max(total, 1)
print(f"within 2x or on a range holding the truth: {100 * within2:.1f}%")
print(f"within 10x or on a range holding the truth: {100 * tenfold:.1f}%")
ok = (total > 1000 and mul_total > 300 and mul25 >= 0.9 and ref_total > 300 and ref25 >= 0.9
      and call_total > 300 and call10x >= 0.9 and tenfold >= 0.97 and within2 >= 0.5)
sys.exit(0 if ok else 1)
PY
# A shared VM's clock can change between the run's phases (the clock
# reference and the chains run at different times): one more recording of
# the same binary, against the same callgrind counts, before failing.
if ! python3 "$TMP/floor.py" "$TMP/loops.rows" >"$TMP/floor.txt"; then
	echo "first recording: $(tr '\n' ' ' <"$TMP/floor.txt") (load $(cut -d' ' -f1-3 /proc/loadavg)); recording again" >&2
	"$ECPI" record -q -F 10000 -o "$TMP/again.db" -- "$TMP/loops" "$reps" >/dev/null
	ref=$("$ECPI" prof "$TMP/again.db" --format json | python3 -c 'import json,sys; print(sum(r["samples"]["cpu-clock"] for r in json.load(sys.stdin)["rows"] if r["procedure"] == "clock_reference"))')
	mhz=$(python3 -c "print(round(8 * 2048 * $reps / ($ref * 100e-6) / 1e6))")
	"$ECPI" calc --all "$TMP/again.db" --image "$TMP/loops" --cpu-mhz "$mhz" --format json >"$TMP/loops.calc.json"
	python3 "$bench/compare.py" rows loops "$TMP/loops.calc.json" "$reps" "$TMP/loops.cg1" 1 "$TMP/loops.cg2" 2 >"$TMP/loops.rows"
	python3 "$TMP/floor.py" "$TMP/loops.rows" >"$TMP/floor.txt" || fail "accuracy below the floor: $(tr '\n' ' ' <"$TMP/floor.txt")"
fi
cat "$TMP/floor.txt" >&2

# A switch-dispatched interpreter (jump tables): the block that loads the
# opcode and the block that jumps through the table run equally often, but
# samples cross between them; estimated apart they came out 0.37x and 3.27x
# (about half of the samples off by more than 3x on Zen 4), estimated
# together where they contradict the flow, 1.13x (1-10% off by 3x in three
# runs). The floor holds most samples within 3x.
cc -O2 -g -o "$TMP/interp" "$bench/interp.c"
ireps=2000
"$ECPI" record -q -F 10000 -o "$TMP/idb" -- "$TMP/interp" "$ireps" >/dev/null
"$ECPI" calc --all "$TMP/idb" --image "$TMP/interp" --format json >"$TMP/interp.calc.json"
truth_rows "$bench" interp "$ireps"
python3 - "$TMP/interp.rows" <<'PY' || fail "interp: too many estimates off by more than 3x"
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
total = sum(int(r[3]) for r in rows)
# As above: a count stated as a range is judged by whether the range holds the truth.
within3 = sum(int(r[3]) for r in rows
              if (float(r[8]) > float(r[7]) and float(r[7]) <= float(r[5]) <= float(r[8]))
              or (float(r[5]) > 0 and 1 / 3 <= float(r[4]) / float(r[5]) <= 3))
print(f"interp: {total} samples, within 3x {100 * within3 / max(total, 1):.0f}%")
sys.exit(0 if total > 1000 and within3 >= 0.75 * total else 1)
PY
echo PASS
