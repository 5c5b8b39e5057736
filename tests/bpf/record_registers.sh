# Register snapshots (ecpi record --registers, issue 21): by default every
# user-mode sample of a command keeps its registers, one in N with
# --registers N, none with off; nothing is lost, prof counts what was stored,
# and a bad value is a usage error. (That the snapshots hold the program's
# real registers is checked by calc_chase: a loop count measured from them.)
source "$TESTLIB"
require_bpf

# Default for a command: every user-mode sample.
"$ECPI" record -F 4999 -o "$TMP/all.db" --format json --report-file "$TMP/all.json" -- "$TESTPROGS/burn" 1500 >/dev/null
json_check "$TMP/all.json" 'd["events"][0]["samples"] > 2000'
json_check "$TMP/all.json" 'd["events"][0]["registers_lost"] == 0'
# Kernel-mode samples keep none; a CPU-bound loop is nearly all user mode.
json_check "$TMP/all.json" '0.9 * d["events"][0]["samples"] <= d["events"][0]["registers"] <= d["events"][0]["samples"]'
"$ECPI" prof "$TMP/all.db" --format json >"$TMP/all.prof.json"
stored=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["events"][0]["registers"])' "$TMP/all.json")
json_check "$TMP/all.prof.json" 'd["totals"]["cpu-clock"]["register_snapshots"] == {"stored": '"$stored"', "every": 1, "lost": 0}'
"$ECPI" prof "$TMP/all.db" | grep -E "^    Register snapshots: $stored \(one sample in 1\), lost 0$" >/dev/null ||
	fail "prof's header does not count the register snapshots"

# With -g (the CFI walk) a sample's registers travel in its stack's ring
# record (ABI 8): as many kept, none lost, and the stack samples all there.
"$ECPI" record -g -F 4999 -o "$TMP/g.db" --format json --report-file "$TMP/g.json" -- "$TESTPROGS/burn" 1500 >/dev/null
json_check "$TMP/g.json" 'd["events"][0]["samples"] > 2000 and d["events"][0]["registers_lost"] == 0'
json_check "$TMP/g.json" '0.9 * d["events"][0]["samples"] <= d["events"][0]["registers"] <= d["events"][0]["samples"]'
"$ECPI" prof "$TMP/g.db" --format json >"$TMP/g.prof.json"
stored=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["events"][0]["registers"])' "$TMP/g.json")
json_check "$TMP/g.prof.json" 'd["totals"]["cpu-clock"]["register_snapshots"] == {"stored": '"$stored"', "every": 1, "lost": 0}'
# --registers 4 with -g: one in four, through the same combined record.
"$ECPI" record -g -F 4999 --registers 4 -o "$TMP/g4.db" --format json --report-file "$TMP/g4.json" -- "$TESTPROGS/burn" 1500 >/dev/null
json_check "$TMP/g4.json" '0.2 * d["events"][0]["samples"] <= d["events"][0]["registers"] <= 0.3 * d["events"][0]["samples"]'

# One in four (per CPU).
"$ECPI" record -F 4999 --registers 4 -o "$TMP/quarter.db" --format json --report-file "$TMP/quarter.json" -- "$TESTPROGS/burn" 1500 >/dev/null
json_check "$TMP/quarter.json" '0.2 * d["events"][0]["samples"] <= d["events"][0]["registers"] <= 0.3 * d["events"][0]["samples"]'
"$ECPI" prof "$TMP/quarter.db" --format json >"$TMP/quarter.prof.json"
json_check "$TMP/quarter.prof.json" 'd["totals"]["cpu-clock"]["register_snapshots"]["every"] == 4'

# Off: none kept, none reported.
"$ECPI" record -F 4999 --registers off -o "$TMP/off.db" --format json --report-file "$TMP/off.json" -- "$TESTPROGS/burn" 300 >/dev/null
json_check "$TMP/off.json" 'd["events"][0]["registers"] == 0 and d["events"][0]["samples"] > 0'
"$ECPI" prof "$TMP/off.db" --format json >"$TMP/off.prof.json"
json_check "$TMP/off.prof.json" '"register_snapshots" not in d["totals"]["cpu-clock"]'
ls "$TMP/off.db"/epochs/*/ | grep "\.reg$" >/dev/null && fail "--registers off wrote a register file"

expect_exit 2 "--registers takes N" "$ECPI" record --registers often -o "$TMP/bad.db" -- true
echo PASS
