# Argument errors: exit 2 and a message; help exits 0. No privileges needed.
source "$TESTLIB"
expect_exit 2 "subcommand" "$ECPI"
expect_exit 2 "choose one target" "$ECPI" record -a -p 1
expect_exit 2 "between 1 and 100000" "$ECPI" record -F 0 -- true
expect_exit 2 "unknown event 'bogus'" "$ECPI" record -e bogus -- true
expect_exit 2 "by" "$ECPI" prof --by function
expect_exit 2 "unknown format xml \(text or json\)" "$ECPI" prof --format xml
# Help names the choices plainly, never CLI11's internals (issue 34, defect 8).
for verb in prof stats diff annotate calc; do
	help=$("$ECPI" "$verb" --help)
	grep -q -- "--format text|json" <<<"$help" || fail "$verb --help does not show --format text|json"
	! grep -q "ENUM\|->" <<<"$help" || fail "$verb --help shows CLI11 internals: $(grep 'ENUM\|->' <<<"$help")"
done
expect_exit 2 "nosuch" "$ECPI" nosuch
expect_exit 1 "not an ecpi database" "$ECPI" prof "$TMP/missing"
"$ECPI" --help >/dev/null || fail "--help failed"
"$ECPI" record --help | grep -- "--no-randomize" >/dev/null || fail "record --help lacks options"
"$ECPI" prof --help | grep -- "--by" >/dev/null || fail "prof --help lacks options"
"$ECPI" --version | grep "ecpi" >/dev/null || fail "--version"
for verb in stats diff annotate export; do
	"$ECPI" "$verb" --help | grep -- "--event" >/dev/null || fail "$verb --help lacks options"
done
expect_exit 2 "by" "$ECPI" stats db --by function
expect_exit 2 "format" "$ECPI" export db --format xml
expect_exit 2 "required" "$ECPI" diff onlyone
expect_exit 2 "required" "$ECPI" annotate
expect_exit 1 "not an ecpi database" "$ECPI" stats "$TMP/missing"
echo PASS
