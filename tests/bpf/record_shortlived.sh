# 200 short-lived processes: samples of processes that exit before a drain are
# still attributed (unknown share under 1%; the goal is 0.1%).
source "$TESTLIB"
require_bpf
db="$TMP/db"
"$ECPI" record -o "$db" --format json --report-file "$TMP/rec.json" -- sh -c "for i in \$(seq 200); do '$TESTPROGS/burn' 15; done"
json_check "$TMP/rec.json" 'd["events"][0]["samples"] > 1000'
"$ECPI" prof "$db" --format json >"$TMP/prof.json"
python3 - "$TMP/prof.json" <<'PY' || fail "unknown share too high or burn_cpu missing"
import json, sys
d = json.load(open(sys.argv[1]))
t = d["totals"]["cpu-clock"]
share = 100.0 * t["unknown"] / t["samples"]
print(f"unknown: {t['unknown']} of {t['samples']} samples = {share:.3f}%", file=sys.stderr)
assert share < 1.0
burn = sum(r["samples"]["cpu-clock"] for r in d["rows"] if r["procedure"] == "burn_cpu")
print(f"burn_cpu: {burn} samples", file=sys.stderr)
assert burn > 0.5 * t["samples"]
PY
echo PASS
