# A report of a database whose newest epoch has no samples yet (a daemon's
# just after `ctl epoch`) says so and names the epoch that has data, instead
# of printing an empty table without a word (issue 20, defect 6).
source "$TESTLIB"
require_bpf
"$ECPI" record -q -F 999 -o "$TMP/db" -- "$TESTPROGS/burn" 300 >/dev/null
mkdir "$TMP/db/epochs/00002"   # what `ecpi ctl epoch` leaves until the next merge
"$ECPI" prof "$TMP/db" >"$TMP/out.txt" 2>"$TMP/err.txt"
grep -q "the newest epoch 00002 of $TMP/db holds no samples yet; epoch 00001 has data (--epoch 1)" "$TMP/err.txt" ||
	{ cat "$TMP/err.txt" >&2; fail "prof did not say that the newest epoch is empty"; }
"$ECPI" prof "$TMP/db" --epoch 1 --format json >"$TMP/p.json" 2>"$TMP/err2.txt"
json_check "$TMP/p.json" 'd["epoch"] == "00001" and len(d["rows"]) > 0'
[ -s "$TMP/err2.txt" ] && fail "a note although an epoch was chosen: $(cat "$TMP/err2.txt")"
echo PASS
