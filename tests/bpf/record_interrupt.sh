# Ctrl-C (SIGINT) or SIGTERM in the middle of a recording leaves a readable
# database holding what was sampled.
source "$TESTLIB"
require_bpf
"$TESTPROGS/shares" 20 >/dev/null &
ECPI_TEST_PIDS+=("$!")
for sig in INT TERM; do
	db="$TMP/db-$sig"
	"$ECPI" record -q -o "$db" -a &
	rec=$!
	sleep 2.5
	kill -"$sig" "$rec"
	rc=0
	wait "$rec" || rc=$?
	[ "$rc" -eq 0 ] || fail "record exited $rc after SIG$sig"
	"$ECPI" prof "$db" --format json >"$TMP/prof.json"
	json_check "$TMP/prof.json" 'd["totals"]["cpu-clock"]["samples"] > 1000'
	json_check "$TMP/prof.json" 'any(r["procedure"] == "share_sixty" for r in d["rows"])'
done
# Interrupting `record -- COMMAND` ends the command too.
"$ECPI" record -q -o "$TMP/db-cmd" -- "$TESTPROGS/spinner" 60 >/dev/null &
rec=$!
sleep 2
kill -INT "$rec"
wait "$rec" || true
pgrep -f "spinner 60" >/dev/null && fail "the profiled command outlived the interrupted recording"
"$ECPI" prof "$TMP/db-cmd" --format json >"$TMP/prof.json"
json_check "$TMP/prof.json" 'any(r["procedure"] == "spinner_parent_loop" for r in d["rows"])'
echo PASS
