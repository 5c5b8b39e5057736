# -p on an already running process: its samples and those of a child it
# forks during the recording are kept; other processes are not.
source "$TESTLIB"
require_bpf
"$TESTPROGS/spinner" 8 --fork >"$TMP/spinner.out" &
pid=$!
ECPI_TEST_PIDS+=("$pid")
for _ in $(seq 50); do grep -q ready "$TMP/spinner.out" 2>/dev/null && break; sleep 0.1; done
# Something else busy on the machine that must not show up.
"$TESTPROGS/shares" 4 >/dev/null &
ECPI_TEST_PIDS+=("$!")
"$ECPI" record -q -o "$TMP/db" -p "$pid" --duration 3
"$ECPI" prof "$TMP/db" --format json >"$TMP/prof.json"
json_check "$TMP/prof.json" 'any(r["procedure"] == "spinner_parent_loop" for r in d["rows"])'
json_check "$TMP/prof.json" 'any(r["procedure"] == "spinner_child_loop" for r in d["rows"])'
json_check "$TMP/prof.json" 'not any(r["procedure"].startswith("share_") for r in d["rows"])'
kill "$pid" 2>/dev/null || true
echo PASS
