# kill -9 at random moments while the daemon merges every 0.2 s: after each
# restart every file still decodes, the epoch continues, and counts never go down.
source "$TESTLIB"
require_bpf
db="$TMP/db"
"$TESTPROGS/shares" 600 >/dev/null &
ECPI_TEST_PIDS+=("$!")
prev=0
rounds=${ECPI_CRASH_ROUNDS:-12}
for i in $(seq "$rounds"); do
	start_daemon "$db" --drain-interval 0.2 -F 4999  # a fixed rate: enough samples in 12 short lives
	sleep "0.$((RANDOM % 9 + 2))"
	kill -9 "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null || true
	"$ECPI" prof "$db" --format json >"$TMP/p.json" 2>"$TMP/p.err" || { cat "$TMP/p.err"; fail "prof failed after kill -9 (round $i)"; }
	# A file that does not decode is reported by path in the warnings.
	json_check "$TMP/p.json" 'not any("/epochs/" in w for w in d["warnings"])'
	now=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(r["samples"]["cpu-clock"] for r in d["rows"]))' "$TMP/p.json")
	[ "$now" -ge "$prev" ] || fail "samples went down from $prev to $now after kill -9 (round $i)"
	prev=$now
done
[ "$(ls "$db/epochs")" = "00001" ] || fail "a restart did not continue the same epoch: $(ls "$db/epochs")"
ls "$db"/epochs/00001/.tmp-* 2>/dev/null && echo "note: temporary files left by killed merges (ignored by readers)"
[ "$prev" -gt 1000 ] || fail "too few samples survived: $prev"
echo "samples after $rounds kill -9 rounds: $prev"
echo PASS
