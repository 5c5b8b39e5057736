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

cc -O2 -g -o "$TMP/loops" "$bench/loops.c"
cp "$TMP/loops" "$TMP/loops2"
cc -O2 -o "$TMP/clock" "$bench/clock.c"
reps=20000
"$ECPI" record -q -F 10000 -o "$TMP/db" -- "$TMP/loops" "$reps" >/dev/null
# The same procedures in two images, for the name checks below.
"$ECPI" record -q -F 10000 -o "$TMP/db2" -- sh -c "'$TMP/loops' 3000 >/dev/null; '$TMP/loops2' 3000 >/dev/null"

# Cycles per sample as bench/accuracy.sh measures them: the clock rate x the
# unprofiled CPU time / the samples of the profiled run.
mhz=$("$TMP/clock")
cpu=$( { /usr/bin/time -f '%U %S' "$TMP/loops" "$reps" >/dev/null; } 2>&1 | tail -1 | awk '{print $1 + $2}')
samples=$("$ECPI" prof "$TMP/db" --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["cpu-clock"]["samples"])')
mhz=$(python3 -c "print(round($mhz * $cpu / ($samples * 100000e-9)))")

# JSON layout (docs/json-schema.md, ecpi.calc)
"$ECPI" calc --all "$TMP/db" --image "$TMP/loops" --cpu-mhz "$mhz" --format json >"$TMP/calc.json"
json_check "$TMP/calc.json" 'd["schema"] == "ecpi.calc" and d["version"] == 2 and d["event"] == "cpu-clock"'
json_check "$TMP/calc.json" 'd["cpu_mhz"] == '"$mhz"' and d["clock_source"] == "--cpu-mhz" and not d["hardware_cycles"]'
json_check "$TMP/calc.json" 'len(d["procedures"]) >= 5 and all(p["image"].endswith("/loops") for p in d["procedures"])'
json_check "$TMP/calc.json" 'all(set(["address", "samples", "executions", "cpi", "confidence"]) <= set(i) for p in d["procedures"] for i in p["instructions"])'
json_check "$TMP/calc.json" 'all(i["address"].startswith("0x") and i["confidence"] in ("low", "medium", "high") for p in d["procedures"] for i in p["instructions"])'
json_check "$TMP/calc.json" 'any("source" in i and i["source"]["file"].endswith("loops.c") for p in d["procedures"] for i in p["instructions"])'
json_check "$TMP/calc.json" 'all(e["executions"] >= 0 for p in d["procedures"] for e in p["edges"])'

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

# Accuracy against callgrind, weighted by samples (DCPI Figure 8's measure).
for r in 1 2; do
	valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$TMP/cg$r" "$TMP/loops" "$r" >/dev/null 2>&1
done
python3 "$bench/compare.py" rows loops "$TMP/calc.json" "$reps" "$TMP/cg1" 1 "$TMP/cg2" 2 >"$TMP/rows"
python3 - "$TMP/rows" <<'PY' || fail "accuracy below the floor"
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
def share(k, proc=None):
    sel = [r for r in rows if proc is None or r[1] == proc]
    total = sum(int(r[3]) for r in sel)
    good = sum(int(r[3]) for r in sel if float(r[5]) > 0 and abs(float(r[4]) / float(r[5]) - 1) <= k)
    return total, good / max(total, 1)
total, within2 = share(1.0)
poly_total, poly25 = share(0.25, "poly")
tenfold = share(9.0)[1]
print(f"{total} samples: within 100% {100 * within2:.0f}%, within 10x {100 * tenfold:.0f}%; "
      f"poly ({poly_total} samples) within 25% {100 * poly25:.0f}%")
# The floor, robust across x86-64 cores (docs/ACCURACY.md has the figures):
# poly is a multiply-free shift/sub/add dependency chain whose best case is
# the same on every core and which has no dynamic stalls, so its counts must
# be close (within 25%: between runs on this VM it has come out from
# exact to 16% low); the other kernels stall in ways the static model cannot know
# (L1 misses, 4K aliasing on Intel), but no estimate may be off by 10x, and
# most samples must be within a factor of two.
ok = total > 1000 and poly_total > 300 and poly25 >= 0.9 and tenfold >= 0.99 and within2 >= 0.5
sys.exit(0 if ok else 1)
PY
echo PASS
