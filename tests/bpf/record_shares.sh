# Three functions with known CPU shares (60/30/10 by trip count): each
# measured share must be within 2 points; the command's exit status passes through.
source "$TESTLIB"
require_bpf
db="$TMP/db"
"$ECPI" record -q -o "$db" -- "$TESTPROGS/shares" 4 >/dev/null
"$ECPI" prof "$db" --format json >"$TMP/prof.json"
python3 - "$TMP/prof.json" <<'PY' || fail "shares outside tolerance"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "ecpi.prof", d["schema"]
rows = {r["procedure"]: r["samples"]["cpu-clock"] for r in d["rows"] if r["image"].endswith("/shares")}
want = {"share_sixty": 60, "share_thirty": 30, "share_ten": 10}
total = sum(rows.get(f, 0) for f in want)
all_samples = d["totals"]["cpu-clock"]["samples"]
print(f"samples: {all_samples}, in the three functions: {total}", file=sys.stderr)
assert total > 2000, f"too few samples: {total}"
assert total >= 0.9 * all_samples, "the three functions should hold at least 90% of the samples"
for f, w in want.items():
    got = 100.0 * rows.get(f, 0) / total
    print(f"{f}: {got:.2f}% (want {w} +- 2)", file=sys.stderr)
    assert abs(got - w) <= 2.0, f"{f}: {got:.2f}% vs {w}%"
PY
# The command's exit status is ecpi's.
rc=0
"$ECPI" record -q -o "$TMP/db2" -- sh -c 'exit 3' || rc=$?
[ "$rc" -eq 3 ] || fail "record returned $rc, the command returned 3"
echo PASS
