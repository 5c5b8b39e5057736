# 2,000 short-lived processes keep the daemon's RSS under --max-memory and
# their samples attributed; --max-disk removes the oldest epochs, with a log line.
source "$TESTLIB"
require_bpf
db="$TMP/db"
start_daemon "$db" --drain-interval 1 --max-memory 64
peak=0
sh -c "for i in \$(seq 2000); do '$TESTPROGS/burn' 1; done" &
work=$!
ECPI_TEST_PIDS+=("$work")
while kill -0 "$work" 2>/dev/null; do
	rss=$("$ECPI" ctl --db "$db" status --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["rss_bytes"])')
	[ "$rss" -gt "$peak" ] && peak=$rss
	sleep 0.5
done
"$ECPI" ctl --db "$db" flush >/dev/null
"$ECPI" ctl --db "$db" status --format json >"$TMP/status.json"
echo "peak RSS during 2000 processes: $((peak / 1048576)) MB"
[ "$peak" -lt $((64 * 1048576)) ] || fail "RSS peaked at $peak bytes, over 64 MB"
json_check "$TMP/status.json" 'd["events"][0]["unknown_percent"] < 1.0'
"$ECPI" prof "$db" --format json >"$TMP/p.json"
json_check "$TMP/p.json" 'any(r["procedure"] == "burn_cpu" for r in d["rows"])'
"$ECPI" ctl --db "$db" epoch >/dev/null
stop_daemon

# Disk limit: the old epoch, made large, is removed first, and the log says so.
head -c 3000000 /dev/zero >"$db/epochs/00001/padding"
"$ECPI" ctl --db "$db" status >/dev/null 2>&1 && fail "a daemon is still running"
start_daemon "$db" --drain-interval 0.5 --max-disk 2
for _ in $(seq 40); do [ -d "$db/epochs/00001" ] || break; sleep 0.25; done
[ -d "$db/epochs/00001" ] && fail "the oldest epoch was not removed under --max-disk"
# The directory is renamed away first and its files deleted after; the log
# line follows the deletion.
for _ in $(seq 40); do grep -q "removed epoch 00001" "$TMP/daemon.log" && break; sleep 0.25; done
grep -q "removed epoch 00001" "$TMP/daemon.log" || fail "removal not logged"
[ -d "$db/epochs/00002" ] || fail "the current epoch was removed"
stop_daemon
echo PASS
