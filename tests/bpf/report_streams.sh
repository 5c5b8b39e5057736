# A verb that runs a COMMAND never mixes its report with the command's own
# output (issue 20): the command's standard output is its own, the report
# goes to standard error (as `perf stat`) or to --report-file, and JSON parses.
source "$TESTLIB"
require_bpf
prog="$TESTPROGS/callpaths"
printer="echo first line of the program; '$TESTPROGS/burn' 200; echo last line of the program"

"$ECPI" record -q -o "$TMP/db" --format json -- sh -c "$printer" >"$TMP/out" 2>"$TMP/err"
[ "$(cat "$TMP/out")" = "$(printf 'first line of the program\nlast line of the program')" ] ||
	fail "record: the program's output is not its own: $(cat "$TMP/out")"
json_check "$TMP/err" 'd["schema"] == "ecpi.record"'
"$ECPI" record -q -o "$TMP/db2" --format json --report-file "$TMP/rec.json" -- sh -c "$printer" >"$TMP/out2" 2>"$TMP/err2"
json_check "$TMP/rec.json" 'd["schema"] == "ecpi.record" and d["events"][0]["samples"] > 0'
[ -s "$TMP/err2" ] && fail "record wrote to stderr although the report went to a file: $(cat "$TMP/err2")"
[ "$(wc -l <"$TMP/out2")" -eq 2 ] || fail "record --report-file: the program's output is not its own"

# probe: the program prints its results; the JSON goes to stderr.
"$ECPI" probe -q --func cp_target --format json -- "$prog" >"$TMP/pout" 2>"$TMP/perr" ||
	{ cat "$TMP/perr" >&2; fail "probe failed"; }
"$prog" >"$TMP/alone" 2>/dev/null
cmp -s "$TMP/pout" "$TMP/alone" || fail "probe: the program's standard output differs from its output alone"
json_check "$TMP/perr" 'd["schema"] == "ecpi.probe"'
echo PASS
