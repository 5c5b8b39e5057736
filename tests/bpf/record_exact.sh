# Nothing is lost or counted twice: every sample the BPF handler took is
# stored, across hundreds of table swaps (drains every 50 ms) and when the
# aggregation table is too small and samples spill to the ring buffer.
source "$TESTLIB"
require_bpf
"$ECPI" record -o "$TMP/db1" --drain-interval 0.05 --format json --report-file "$TMP/r1.json" -- sh -c "'$TESTPROGS/shares' 3 >/dev/null"
json_check "$TMP/r1.json" 'd["drains"] > 40'
json_check "$TMP/r1.json" 'd["events"][0]["taken"] > 1000 and d["events"][0]["samples"] + d["events"][0]["lost"] == d["events"][0]["taken"]'
json_check "$TMP/r1.json" 'd["events"][0]["lost"] == 0'
# A 64-entry table overflows under 200 processes: the overflow goes through
# the ring buffer and is still counted.
"$ECPI" record -o "$TMP/db2" --table-entries 64 --format json --report-file "$TMP/r2.json" -- sh -c "for i in \$(seq 100); do '$TESTPROGS/burn' 10; done"
json_check "$TMP/r2.json" 'd["events"][0]["spilled"] > 0'
json_check "$TMP/r2.json" 'd["events"][0]["samples"] + d["events"][0]["lost"] == d["events"][0]["taken"]'
"$ECPI" prof "$TMP/db2" --format json >"$TMP/p2.json"
json_check "$TMP/p2.json" 'sum(r["samples"]["cpu-clock"] for r in d["rows"]) == d["totals"]["cpu-clock"]["samples"]'
echo PASS
