#!/usr/bin/env bash
# The plain pointer chase (testprogs/stalls/chase.c: `p = next[p]` over 32 MiB,
# no extra instructions): every cycle of its loop lands after the load, so
# sample placement alone cannot tell how often it ran (DCPI 6.1). With the
# registers recorded, its loop's count must be measured within 10% of the
# truth and D-cache named as the cause of most of its stall; without them,
# calc must give a range that holds the truth, never a lone wrong number.
source "$TESTLIB"
require_bpf
command -v cc >/dev/null || skip "no C compiler"
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../testprogs/stalls" && pwd)
cc -O2 -g -o "$TMP/chase" "$src/chase.c"
steps=20000000

"$ECPI" record -q -F 4999 -o "$TMP/chase.db" -- "$TMP/chase" $steps >/dev/null
"$ECPI" calc chase "$TMP/chase.db" --no-lines --format json >"$TMP/chase.json"
"$ECPI" calc chase "$TMP/chase.db" --no-lines >"$TMP/chase.txt"
python3 - "$TMP/chase.json" $steps <<'PY' || fail "the chase's loop count is not measured within 10%"
import json, sys
d = json.load(open(sys.argv[1]))
truth = int(sys.argv[2])
p = d["procedures"][0]
loops = [l for l in p["loops"] if l["anchored"]]
assert loops, p["loops"]
l = max(loops, key=lambda l: l["samples"])
print(f"chase: loop at {l['header']} {l['iterations']:.4g} iterations ({l['iterations_min']:.4g}-{l['iterations_max']:.4g}), "
      f"truth {truth}, {l['pairs']['used']} pairs, induction {l['induction']} step {l['step']}")
assert abs(l["iterations"] / truth - 1) <= 0.10, l
# The stepping block's estimate is the anchor, rated measured.
step_block = [b for b in p["blocks"] if int(b["address"], 16) <= int(l["step_address"], 16)
              and int(l["step_address"], 16) < int(b["address"], 16) + 64 and b["confidence"] == "measured"]
assert step_block, "no block rated measured"
s = p["summary"]["dynamic"]
dyn = sum(v["max_percent"] for k, v in s.items() if k != "dcache") 
print(f"chase: D-cache {s['dcache']['min_percent']:.1f}% to {s['dcache']['max_percent']:.1f}%, "
      f"dynamic subtotal {p['summary']['subtotal_dynamic_percent']:.1f}%")
assert s["dcache"]["max_percent"] >= 0.5 * p["summary"]["subtotal_dynamic_percent"], s
PY
grep -q "measured: " "$TMP/chase.txt" || fail "the text report does not say the loop was measured"

# Without registers: a range that holds the truth, and D-cache not ruled out.
"$ECPI" record -q -F 4999 --registers off -o "$TMP/noregs.db" -- "$TMP/chase" $steps >/dev/null
"$ECPI" calc chase "$TMP/noregs.db" --no-lines --format json >"$TMP/noregs.json"
python3 - "$TMP/noregs.json" $steps <<'PY' || fail "without registers the chase's count is not an honest range"
import json, sys
d = json.load(open(sys.argv[1]))
truth = int(sys.argv[2])
p = d["procedures"][0]
hot = max(p["blocks"], key=lambda b: b["samples"])
print(f"chase without registers: hottest block {hot['executions_min']:.4g}-{hot['executions_max']:.4g} "
      f"(ranged {hot['ranged']}), truth {truth}")
assert hot["ranged"] and hot["executions_min"] <= truth <= hot["executions_max"], hot
assert p["ranged_samples"] >= 0.5 * p["samples"], p["ranged_samples"]
assert p["summary"]["dynamic"]["dcache"]["max_percent"] > 50, p["summary"]["dynamic"]["dcache"]
PY
echo "calc_chase: ok"
