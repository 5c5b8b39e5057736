# A program whose file name holds a newline and terminal escape sequences
# (issue 20, defect 3): text reports print the name with its control bytes
# escaped (no raw ESC reaches the terminal, no line is broken), and JSON
# keeps the name exact.
source "$TESTLIB"
require_bpf
evil=$'evil\n\033[31mRED\033[0m'
cp "$TESTPROGS/burn" "$TMP/$evil"
"$ECPI" record -q -F 4999 -o "$TMP/db" -- "$TMP/$evil" 600 >/dev/null
for report in "prof" "prof --by image" "stats" "calc burn_cpu" "calc --all --summary"; do
	# shellcheck disable=SC2086
	"$ECPI" $report "$TMP/db" >"$TMP/out.txt" 2>&1 || fail "ecpi $report failed"
	grep -q $'\033' "$TMP/out.txt" && fail "ecpi $report printed a raw escape byte"
	grep -qx 'RED.*' "$TMP/out.txt" && fail "ecpi $report broke a line at the name's newline"
	grep -qF 'evil\n\x1b[31mRED\x1b[0m' "$TMP/out.txt" || { cat "$TMP/out.txt" >&2; fail "ecpi $report does not show the name escaped"; }
done
"$ECPI" prof "$TMP/db" --by image --format json >"$TMP/prof.json"
python3 - "$TMP/prof.json" "$TMP/$evil" <<'PY' || fail "JSON does not keep the name exact"
import json, sys
d = json.load(open(sys.argv[1]))
assert any(r["image"] == sys.argv[2] for r in d["rows"]), [r["image"] for r in d["rows"]]
PY
echo PASS
