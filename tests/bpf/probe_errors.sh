# ecpi probe bad input: no such pid, a pattern matching nothing (with near
# matches), a stripped binary, an image the process does not have, usage
# errors, and a user without privileges.
source "$TESTLIB"
require_bpf
prog="$TESTPROGS/callpaths"
expect_exit 1 "no such process: 999999999" "$ECPI" probe -p 999999999 --func cp_target
expect_exit 1 "pattern 'cp_targte' matches no function; near matches: cp_target" \
	"$ECPI" probe --func cp_targte -- "$prog"
cp "$prog" "$TMP/stripped"
strip "$TMP/stripped"
expect_exit 1 "stripped \(no .symtab\)" "$ECPI" probe --func cp_target -- "$TMP/stripped"
expect_exit 1 "no image named 'libnothere'" "$ECPI" probe --func 'libnothere:f' -- "$prog"
expect_exit 1 "near matches: .*malloc" "$ECPI" probe --func 'libc.so.6:mallocc' -- "$prog"
expect_exit 2 "choose one target" "$ECPI" probe --func cp_target
expect_exit 2 "at least one function" "$ECPI" probe -- "$prog"
expect_exit 2 "--sample takes 1/N" "$ECPI" probe --func cp_target --sample 2/3 -- "$prog"
expect_exit 2 "needs a timer" "$ECPI" probe --func cp_target --metric count --rank variation -- "$prog"
# No output file left by a failed run.
expect_exit 1 "matches no function" "$ECPI" probe --func nothing_at_all -o "$TMP/db" -- "$prog"
[ ! -e "$TMP/db" ] || fail "a failed probe created its database"
expect_exit 1 "nodb" "$ECPI" paths "$TMP/nodb"
if command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
	expect_exit 1 "CAP_PERFMON|CAP_BPF" setpriv --reuid=nobody --regid=nogroup --clear-groups \
		"$ECPI" probe --func cp_target -- "$prog"
fi
echo PASS
