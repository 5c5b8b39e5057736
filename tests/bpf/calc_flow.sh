# ecpi calc's counts on the branch-chain and switch loops of issue 36
# (bench/accuracy/chain.c and dispatch.c, plain C, gcc -O2), against
# callgrind's exact counts. Both loops are measured by register progress
# (chain's counter is stepped in each of its two latches), the switch's
# cases split by the jump table's index on register snapshots, the
# else-if's branch decided by `test al, imm8` on them, and the branches'
# odds taken from the executions after each snapshot's own (later_odds.h:
# the snapshots before chain's first branch went the odd way 13% more often
# than it does). Held to: dispatch and chain within 10% on 90% of their
# samples (issue 36's goal). With calcflow2's ecpi (main at bc67074) this
# test saw 43% and 53%. In bench/accuracy.sh, main at 9bd6c0d gave chain
# 43%, 100% and 76% within 10% on three recordings, calcflow5 100% on all
# three. Counts that rest on register progress do not depend on the clock
# rate calc assumes.
source "$TESTLIB"
require_bpf
command -v valgrind >/dev/null || skip "valgrind is not installed (callgrind gives the true counts)"
command -v cc >/dev/null || skip "no C compiler"
bench=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../bench/accuracy" && pwd)

check() {
	local name=$1 reps=$2 proc=$3
	cc -O2 -g -o "$TMP/$name" "$bench/$name.c"
	"$ECPI" record -q -F 10000 -o "$TMP/$name.db" -- "$TMP/$name" "$reps" >/dev/null
	"$ECPI" calc --all "$TMP/$name.db" --image "$TMP/$name" --format json --no-lines >"$TMP/$name.calc.json"
	truth_rows "$bench" "$name" "$reps"
	json_check "$TMP/$name.calc.json" 'all(l["anchored"] for p in d["procedures"] if p["name"] == "'"$proc"'" for l in p["loops"])'
}

share_within() {  # ROWS PROC K: share of PROC's samples whose estimate is within K of the truth
	python3 - "$1" "$2" "$3" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.split("\t")[1] == sys.argv[2]]
total = sum(int(r[3]) for r in rows)
good = sum(int(r[3]) for r in rows if float(r[5]) > 0 and abs(float(r[4]) / float(r[5]) - 1) <= float(sys.argv[3]))
print(round(100 * good / max(total, 1)))
PY
}

check dispatch 200 execute
json_check "$TMP/dispatch.calc.json" 'any(w["anchored"] and len(w["cases"]) == 8 for p in d["procedures"] for w in p["switches"])'
got=$(share_within "$TMP/dispatch.rows" execute 0.10)
echo "dispatch: ${got}% of execute's samples within 10%"
[ "$got" -ge 90 ] || fail "dispatch: only ${got}% of execute's samples within 10% of callgrind (want 90%)"

check chain 300 tally
json_check "$TMP/chain.calc.json" 'sum(b["anchored"] for p in d["procedures"] if p["name"] == "tally" for b in p["branches"]) >= 2'
got=$(share_within "$TMP/chain.rows" tally 0.10)
echo "chain: ${got}% of tally's samples within 10%"
[ "$got" -ge 90 ] || fail "chain: only ${got}% of tally's samples within 10% of callgrind (want 90%)"
# wordfreq's scan loop (tests/testprogs/pgo/wordfreq.c, register progress on
# rbx) ends a word on some iterations only, and the odds of its branch on
# the snapshots are time-weighted (0.875x to 1.096x on five recordings);
# `words++` in rdx, which the end of a word alone steps and the call to
# grow() keeps across by a spill and reload, counts those ends (loops.h,
# BlockCounter). Held to 5% of callgrind at the counted block.
wordfreq_src=$(cd "$bench/../../tests/testprogs/pgo" && pwd)/wordfreq.c
cc -O2 -g -o "$TMP/wordfreq" "$wordfreq_src"
"$ECPI" record -q -F 10000 -o "$TMP/wordfreq.db" -- "$TMP/wordfreq" 150 >/dev/null
"$ECPI" calc --all "$TMP/wordfreq.db" --image "$TMP/wordfreq" --format json --no-lines >"$TMP/wordfreq.calc.json"
truth_rows "$bench" wordfreq 150
got=$(python3 - "$TMP/wordfreq.calc.json" "$TMP/wordfreq.rows" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
counters = [c for p in d["procedures"] if p["name"] == "count_words" for l in p["loops"] for c in l.get("counters", [])]
if not counters:
    print("none")
    sys.exit()
c = counters[0]
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[2]) if l.split("\t")[1] == "count_words"]
block = int(c["block"], 16)
mine = [r for r in rows if int(r[2], 16) >= block and abs(float(r[4]) - c["executions"]) <= 1e-6 * c["executions"]]
print("unsampled" if not mine else f"{float(mine[0][4]) / float(mine[0][5]):.3f}")
PY
)
echo "wordfreq: count_words' counted block at ${got}x callgrind's count"
[ "$got" != none ] || fail "wordfreq: no block of count_words' scan loop was counted by a register (rdx counts the words)"
[ "$got" != unsampled ] || fail "wordfreq: count_words' counted block took no sample (record longer)"
python3 -c "import sys; sys.exit(0 if abs(float('$got') - 1) <= 0.05 else 1)" ||
	fail "wordfreq: count_words' counted block at ${got}x callgrind's count (want within 5%)"

# calls.c's `caller` loop calls square and clamp directly and one of three
# leaves through `table[i % 3](i)`. The snapshots before that call decide
# its targets (call_odds.h), each known code that leaves rbx alone, so the
# loop is measured by register progress on rbx as one with direct calls,
# and each leaf's entries are its direct calls plus its share of the table
# call's (calc.cpp, add_table_call). Without it the loop and its leaves came
# from the region's samples over its best case: 2.86x on a Zen 3 host.
check calls 600 caller
for proc in caller clamp twice square; do
	got=$(share_within "$TMP/calls.rows" "$proc" 0.10)
	echo "calls: ${got}% of ${proc}'s samples within 10%"
	[ "$got" -ge 90 ] || fail "calls: only ${got}% of ${proc}'s samples within 10% of callgrind (want 90%)"
done
echo PASS
