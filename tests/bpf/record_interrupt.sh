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
# Interrupting `record -- COMMAND` ends the command too, with the signal ecpi
# received: `kill -INT` exits 130 as Ctrl-C would, SIGTERM 143 (issue 34).
for sig in INT TERM; do
	"$ECPI" record -q -o "$TMP/db-cmd-$sig" -- "$TESTPROGS/spinner" 60 >/dev/null &
	rec=$!
	sleep 2
	kill -"$sig" "$rec"
	rc=0
	wait "$rec" || rc=$?
	want=$((128 + $(kill -l "$sig")))
	[ "$rc" -eq "$want" ] || fail "record -- COMMAND exited $rc after SIG$sig (want $want, as the command ends by SIG$sig)"
	pgrep -f "spinner 60" >/dev/null && fail "the profiled command outlived the interrupted recording"
	"$ECPI" prof "$TMP/db-cmd-$sig" --format json >"$TMP/prof.json"
	json_check "$TMP/prof.json" 'any(r["procedure"] == "spinner_parent_loop" for r in d["rows"])'
done
echo PASS
