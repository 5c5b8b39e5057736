# One ClickHouse server, two recorded databases pushed as two hosts: the
# fleet's reports equal the local ones summed, sample for sample; pushing
# again adds nothing; a batch whose acknowledgement was lost is recognized
# on retry; credentials never leave their file; a read-only user can read
# but not push; the schema is required and versioned.
source "$(dirname "$0")/lib.sh"
require_bpf
require_clickhouse
start_clickhouse one
url="http://127.0.0.1:$CH_PORT/ecpi"
export ECPI_CLICKHOUSE_USER=ecpi ECPI_CLICKHOUSE_PASSWORD_FILE="$TMP/ch-one/ecpi.password"
password=$(cat "$ECPI_CLICKHOUSE_PASSWORD_FILE")

"$ECPI" record -q -o "$TMP/a.db" -- "$TESTPROGS/shares" 1 >/dev/null
"$ECPI" record -q -o "$TMP/b.db" -- "$TESTPROGS/burn" 1 >/dev/null 2>&1 || "$ECPI" record -q -o "$TMP/b.db" -- "$TESTPROGS/shares" 1 >/dev/null

# No schema yet: the error names the command that creates it.
expect_exit 1 "ecpi push --init" "$ECPI" push "$TMP/a.db" --to "$url" --host a
"$ECPI" push --init --to "$url" >/dev/null
"$ECPI" push --init --to "$url" >/dev/null  # idempotent
"$ECPI" push "$TMP/a.db" --to "$url" --host a --format json >"$TMP/push1.json" 2>"$TMP/push.err"
json_check "$TMP/push1.json" 'd["batches_sent"] == 1 and d["samples_sent"] > 1000 and d["batches_pending"] == 0'
"$ECPI" push "$TMP/b.db" --to "$url" --host b >/dev/null 2>>"$TMP/push.err"
"$ECPI" push "$TMP/a.db" --to "$url" --host a --format json >"$TMP/push2.json" 2>>"$TMP/push.err"
json_check "$TMP/push2.json" 'd["batches_sent"] == 0 and d["samples_sent"] == 0'

# The fleet's report is the sum of the local ones.
"$ECPI" prof "$TMP/a.db" --format json >"$TMP/la.json"
"$ECPI" prof "$TMP/b.db" --format json >"$TMP/lb.json"
"$ECPI" prof "$url" --format json >"$TMP/fleet.json" 2>>"$TMP/push.err"
diff <(sum_rows "$TMP/la.json" "$TMP/lb.json") <(sum_rows "$TMP/fleet.json") || fail "fleet prof differs from the sum of the local ones"
"$ECPI" prof "$url" --host a --format json >"$TMP/fa.json"
diff <(sum_rows "$TMP/la.json") <(sum_rows "$TMP/fa.json") || fail "fleet prof --host a differs from a's local prof"
json_check "$TMP/fleet.json" 'd["totals"]["cpu-clock"]["samples"] == sum(r["samples"]["cpu-clock"] for r in d["rows"])'
# The hourly rollup (whole-hour filters) and the samples (any other) agree.
"$ECPI" prof "$url" --since @1 --format json >"$TMP/raw.json"
diff <(sum_rows "$TMP/fleet.json") <(sum_rows "$TMP/raw.json") || fail "the hourly rollup differs from the samples"
[ "$(ch_query one "SELECT sum(samples) FROM ecpi.procedures_hourly")" -gt 0 ] || fail "the rollup is empty"
"$ECPI" prof "$url" --limit 2 --format json >"$TMP/top2.json"
json_check "$TMP/top2.json" 'len(d["rows"]) == 2'
"$ECPI" prof "$url" --until 2000-01-01 --format json >"$TMP/none.json"
json_check "$TMP/none.json" 'd["rows"] == []'

# stats of one fleet: one set per host; diff of two hosts; export of the fleet.
"$ECPI" stats "$url" --format json >"$TMP/stats.json"
json_check "$TMP/stats.json" '[s["label"] for s in d["sets"]] == ["a", "b"]'
"$ECPI" diff "$url?host=a" "$url?host=b" --format json >"$TMP/diff.json"
json_check "$TMP/diff.json" 'd["a"]["samples"] > 0 and d["b"]["samples"] > 0 and "host a" in d["a"]["epoch"]'
"$ECPI" export "$url" --format json -o "$TMP/export.json"
python3 - "$TMP/export.json" "$TMP/fleet.json" <<'PY' || fail "export total differs from prof total"
import json, sys
e, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert e["totals"]["cpu-clock"]["samples"] == p["totals"]["cpu-clock"]["samples"], (e["totals"], p["totals"])
PY

# A lost acknowledgement: the server is down while a batch is cut, the
# batch is copied aside, sent when the server is back, then put back as if
# its removal had never happened: the retry finds it there and adds nothing.
bash "$CLICKHOUSE_LOCAL" stop "$TMP/ch-one"
"$ECPI" record -q -o "$TMP/a.db" -- "$TESTPROGS/shares" 1 >/dev/null
expect_exit 1 "cannot reach ClickHouse.*queued" "$ECPI" push "$TMP/a.db" --to "$url" --host a
batch=$(ls "$TMP"/a.db/push/*/*.batch)
[ "$(echo "$batch" | wc -l)" -eq 1 ] || fail "expected one queued batch, got: $batch"
cp "$batch" "$TMP/saved.batch"
start_clickhouse one
"$ECPI" push "$TMP/a.db" --to "$url" --host a --format json >"$TMP/push3.json"
json_check "$TMP/push3.json" 'd["batches_sent"] == 1 and d["batches_already_there"] == 0'
"$ECPI" prof "$url" --format json >"$TMP/after.json"
cp "$TMP/saved.batch" "$batch"
"$ECPI" push "$TMP/a.db" --to "$url" --host a --format json >"$TMP/push4.json"
json_check "$TMP/push4.json" 'd["batches_sent"] == 1 and d["batches_already_there"] == 1'
"$ECPI" prof "$url" --format json >"$TMP/again.json"
diff <(sum_rows "$TMP/after.json") <(sum_rows "$TMP/again.json") || fail "a retried batch was counted twice"
"$ECPI" prof "$TMP/a.db" --format json >"$TMP/la2.json"
diff <(sum_rows "$TMP/la2.json" "$TMP/lb.json") <(sum_rows "$TMP/again.json") || fail "fleet differs from local after the outage"

# A full backlog: new samples are not queued but wait in the database, and
# go out (in full, once) when there is room again.
bash "$CLICKHOUSE_LOCAL" stop "$TMP/ch-one"
"$ECPI" record -q -o "$TMP/b.db" -- "$TESTPROGS/shares" 1 >/dev/null
expect_exit 1 "cannot reach ClickHouse" "$ECPI" push "$TMP/b.db" --to "$url" --host b --push-backlog 0
grep -q "push backlog is full" "$TMP/err" || fail "a full backlog was not reported"
ls "$TMP"/b.db/push/*/*.batch >/dev/null 2>&1 && fail "a batch was queued past the backlog limit"
start_clickhouse one
"$ECPI" push "$TMP/b.db" --to "$url" --host b >/dev/null
"$ECPI" prof "$TMP/b.db" --format json >"$TMP/lb.json"
"$ECPI" prof "$url" --format json >"$TMP/again.json"
diff <(sum_rows "$TMP/la2.json" "$TMP/lb.json") <(sum_rows "$TMP/again.json") || fail "fleet differs from local after a full backlog"

# Credentials: never on the command line, never in messages.
expect_exit 2 "password in the ClickHouse URL" "$ECPI" prof "http://ecpi:$password@127.0.0.1:$CH_PORT/ecpi"
grep -qF "$password" "$TMP/err" && fail "the password appeared in an error message"
grep -qF "$password" "$TMP/push.err" && fail "the password appeared in push's output"
ECPI_CLICKHOUSE_PASSWORD_FILE="$TMP/nope" expect_exit 1 "password file" "$ECPI" prof "$url"
ECPI_CLICKHOUSE_PASSWORD=wrong ECPI_CLICKHOUSE_PASSWORD_FILE= expect_exit 1 "answered HTTP" "$ECPI" prof "$url"
grep -q wrong "$TMP/err" && fail "a wrong password was echoed"

# A read-only user reads the fleet but cannot push.
ECPI_CLICKHOUSE_USER=reader ECPI_CLICKHOUSE_PASSWORD_FILE="$TMP/ch-one/reader.password" \
	"$ECPI" prof "$url" --format json >"$TMP/reader.json"
diff <(sum_rows "$TMP/again.json") <(sum_rows "$TMP/reader.json") || fail "the reader sees other rows"
"$ECPI" record -q -o "$TMP/c.db" -- "$TESTPROGS/shares" 1 >/dev/null
ECPI_CLICKHOUSE_USER=reader ECPI_CLICKHOUSE_PASSWORD_FILE="$TMP/ch-one/reader.password" \
	expect_exit 1 "readonly|read.only" "$ECPI" push "$TMP/c.db" --to "$url" --host c

# Idle samples (issue 20) reach the fleet apart from the shares: a whole-
# system recording of a machine with an idle CPU, pushed as host i.
"$ECPI" record -q -a -F 499 --duration 1 -o "$TMP/i.db" 2>/dev/null &
"$TESTPROGS/burn" 800 >/dev/null
wait $! || fail "record -a failed"
"$ECPI" push "$TMP/i.db" --to "$url" --host i >/dev/null 2>>"$TMP/push.err" || fail "push of the idle recording failed"
"$ECPI" prof "$TMP/i.db" --format json >"$TMP/li.json"
"$ECPI" prof "$url" --host i --format json >"$TMP/fi.json"
python3 - "$TMP/li.json" "$TMP/fi.json" <<'PY' || fail "the fleet's idle count differs from the local one"
import json, sys
l, f = (json.load(open(p))["totals"]["cpu-clock"] for p in sys.argv[1:3])
assert f.get("idle", 0) == l.get("idle", 0) and f["samples"] == l["samples"], (l, f)
PY
"$ECPI" prof "$url" --host i >"$TMP/fi.txt"
if [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["cpu-clock"].get("idle", 0))' "$TMP/li.json")" -gt 0 ]; then
	grep "Idle samples, kept apart: [0-9]* samples found a CPU idle" "$TMP/fi.txt" >/dev/null || fail "fleet prof does not name the idle samples"
fi

# A version 1 schema (before events.idle): pushes are refused, naming the
# upgrade; `push --init` upgrades it in place and pushes go through.
old_url="http://127.0.0.1:$CH_PORT/ecpiold"
ch_query one "CREATE DATABASE ecpiold" >/dev/null
ch_query one "CREATE TABLE ecpiold.events (date Date, time DateTime, host String, event String, period UInt64, samples UInt64, lost UInt64, batch UInt64) ENGINE = MergeTree() PARTITION BY toYYYYMM(date) ORDER BY (host, time, event)" >/dev/null
ch_query one "CREATE TABLE ecpiold.schema_version (version UInt32, installed DateTime, layout String) ENGINE = TinyLog" >/dev/null
ch_query one "INSERT INTO ecpiold.schema_version VALUES (1, now(), 'local')" >/dev/null
expect_exit 1 "schema version 1, older than this ecpi's .*push --init" "$ECPI" push "$TMP/i.db" --to "$old_url" --host i
"$ECPI" push --init --to "$old_url" >/dev/null || fail "push --init did not upgrade a version 1 schema"
"$ECPI" push "$TMP/i.db" --to "$old_url" --host i >/dev/null 2>>"$TMP/push.err" || fail "push after the upgrade failed"
"$ECPI" prof "$old_url" --format json >"$TMP/oi.json"
python3 - "$TMP/li.json" "$TMP/oi.json" <<'PY' || fail "the upgraded schema reads back otherwise"
import json, sys
l, f = (json.load(open(p))["totals"]["cpu-clock"] for p in sys.argv[1:3])
assert f.get("idle", 0) == l.get("idle", 0) and f["samples"] == l["samples"], (l, f)
PY

# https to a plain HTTP port fails in one line (TLS is attempted, never silently dropped).
expect_exit 1 "ClickHouse at https://127.0.0.1" "$ECPI" prof "https://127.0.0.1:$CH_PORT/ecpi"
# A newer schema is refused by name.
ch_query one "INSERT INTO ecpi.schema_version VALUES (99, now(), 'future')"
expect_exit 1 "schema version 99, newer than this ecpi supports" "$ECPI" prof "$url"
# Filters without a URL are a usage error.
expect_exit 2 "filter a ClickHouse URL" "$ECPI" prof "$TMP/a.db" --host a
echo PASS
