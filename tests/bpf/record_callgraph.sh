# -g: stacks are recorded through the ring buffer and stored per event; the
# flat profile is still exact.
source "$TESTLIB"
require_bpf
"$ECPI" record -g -o "$TMP/db" --format json --report-file "$TMP/rec.json" -- sh -c "\"$TESTPROGS/shares\" 3 >/dev/null"
json_check "$TMP/rec.json" 'd["stack_samples"] > 1000'
json_check "$TMP/rec.json" 'd["events"][0]["lost"] == 0'
ls "$TMP"/db/epochs/*/stacks.cpu-clock.* >/dev/null || fail "no stack file written"
"$ECPI" prof "$TMP/db" --format json >"$TMP/prof.json"
json_check "$TMP/prof.json" 'd["rows"][0]["procedure"] == "share_sixty"'
echo PASS
