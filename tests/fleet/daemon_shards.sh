# Two ClickHouse servers as two shards behind a Distributed table, three
# daemons (separate databases, hosts d1 d2 d3) pushing at once while a
# workload runs. Midway, daemon d3 is killed with -9 and shard 2 (where
# cityHash64('d3') sends its rows) is stopped; both come back. At the end
# `ecpi prof URL` equals the sum of the three local reports, sample for
# sample: nothing lost, nothing counted twice.
source "$(dirname "$0")/lib.sh"
require_bpf
require_clickhouse
export ECPI_CLICKHOUSE_USER=ecpi ECPI_CLICKHOUSE_PASSWORD_FILE="$TMP/ch-s1/ecpi.password"

# Ports first, so each server's config can list both shards; one password for both.
read -r _ tcp1 < <(bash "$CLICKHOUSE_LOCAL" ports "$TMP/ch-s1")
read -r _ tcp2 < <(bash "$CLICKHOUSE_LOCAL" ports "$TMP/ch-s2")
head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$TMP/ch-s1/ecpi.password"
cp "$TMP/ch-s1/ecpi.password" "$TMP/ch-s2/ecpi.password"
export ECPI_CH_SHARDS="127.0.0.1:$tcp1 127.0.0.1:$tcp2"
start_clickhouse s1
port1=$CH_PORT
start_clickhouse s2
port2=$CH_PORT
"$ECPI" push --init --to "http://127.0.0.1:$port1/ecpi" >/dev/null
"$ECPI" push --init --to "http://127.0.0.1:$port2/ecpi" >/dev/null
url="http://127.0.0.1:$port1/ecpi_all"
"$ECPI" push --init --to "$url" --cluster ecpi_fleet --shard-database ecpi >/dev/null
[ "$(ch_query s1 "SELECT cityHash64('d3') % 2")" = 1 ] || fail "d3 no longer hashes to shard 2: pick another name"

"$TESTPROGS/shares" 30 >/dev/null &
workload=$!
ECPI_TEST_PIDS+=("$workload")
declare -A pids
start_pusher() {  # start_pusher NAME
	"$ECPI" daemon --db "$TMP/$1.db" -F 199 --drain-interval 0.3 --push "$url" --host "$1" \
		--socket "$TMP/$1.sock" 2>>"$TMP/$1.log" &
	pids[$1]=$!
	ECPI_TEST_PIDS+=("${pids[$1]}")
}
for h in d1 d2 d3; do start_pusher "$h"; done
wait_for() {  # wait_for SECONDS CONDITION...
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.2
	done
}
has_rows() { [ "$(ch_query "$1" "SELECT count() FROM ecpi.samples WHERE host = '$2'")" -gt 0 ]; }
wait_for 30 has_rows s2 d3 || { cat "$TMP/d3.log" >&2; fail "d3's samples never reached shard 2"; }
wait_for 30 has_rows s1 d1 || { cat "$TMP/d1.log" >&2; fail "d1's samples never reached shard 1"; }

# The outage: d3 dies without a word, shard 2 stops; the others keep pushing.
kill -9 "${pids[d3]}"
bash "$CLICKHOUSE_LOCAL" stop "$TMP/ch-s2"
start_pusher d3
wait_for 30 grep -q "push failed" "$TMP/d3.log" || { cat "$TMP/d3.log" >&2; fail "d3 did not report that shard 2 is down"; }
sleep 1
[ "$(grep -c "push failed" "$TMP/d3.log")" -eq 1 ] || fail "the outage was logged more than once: $(grep -c "push failed" "$TMP/d3.log")"
ls "$TMP"/d3.db/push/*/*.batch >/dev/null 2>&1 || fail "d3 queued nothing while shard 2 was down"
start_clickhouse s2
wait_for 30 grep -q "push works again" "$TMP/d3.log" || { cat "$TMP/d3.log" >&2; fail "d3 did not resume pushing"; }

kill "$workload"
for h in d1 d2 d3; do kill -TERM "${pids[$h]}"; done
for h in d1 d2 d3; do wait "${pids[$h]}" || { cat "$TMP/$h.log" >&2; fail "daemon $h exited with an error"; }; done
for h in d1 d2 d3; do
	[ "$(ls "$TMP/$h.db/epochs")" = 00001 ] || fail "$h has more than one epoch"
	ls "$TMP"/$h.db/push/*/*.batch >/dev/null 2>&1 && fail "$h still has queued batches after a clean stop"
	"$ECPI" prof "$TMP/$h.db" --format json >"$TMP/$h.json"
done
"$ECPI" prof "$url" --format json >"$TMP/fleet.json"
diff <(sum_rows "$TMP/d1.json" "$TMP/d2.json" "$TMP/d3.json") <(sum_rows "$TMP/fleet.json") >"$TMP/diff.txt" ||
	{ head -20 "$TMP/diff.txt" >&2; fail "the fleet's samples differ from the three local databases'"; }
"$ECPI" prof "$url" --host d3 --format json >"$TMP/f3.json"
diff <(sum_rows "$TMP/d3.json") <(sum_rows "$TMP/f3.json") >/dev/null || fail "d3's fleet rows differ from its database"
[ "$(ch_query s2 "SELECT count() FROM ecpi.samples WHERE host != 'd3'")" = 0 ] || fail "shard 2 holds rows of other hosts"
total=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["cpu-clock"]["samples"])' "$TMP/fleet.json")
[ "$total" -gt 500 ] || fail "too few samples to mean anything: $total"
echo "fleet total $total samples from 3 daemons over 2 shards"
echo PASS
