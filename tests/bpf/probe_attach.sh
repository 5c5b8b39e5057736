# ecpi probe -p on an already running process: add a probe, remove it, add
# another through standard input; the target keeps running and its output
# is unchanged. Then the target exits while probed: the results so far are
# kept and printed.
source "$TESTLIB"
require_bpf
"$TESTPROGS/callpaths" --loop 20 >"$TMP/target.out" &
pid=$!
ECPI_TEST_PIDS+=("$pid")
for _ in $(seq 50); do grep -q ready "$TMP/target.out" 2>/dev/null && break; sleep 0.1; done
{
	sleep 1
	echo "add cp_target"
	sleep 1
	echo "remove cp_target"
	sleep 0.5
	echo "add cp_site_b"
	echo "add no_such_function_here"
	echo "list"
	sleep 1
} | "$ECPI" probe -p "$pid" --func cp_site_a --metric count,wall --duration 4.5 --interval 1 --format json \
	--report-file "$TMP/probe.json" >/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; fail "ecpi probe -p failed"; }
kill -0 "$pid" 2>/dev/null || fail "the target died under probes"
grep -q "added cp_target" "$TMP/err" || { cat "$TMP/err" >&2; fail "add not acknowledged"; }
grep -q "removed 1 probe of 'cp_target'" "$TMP/err" || { cat "$TMP/err" >&2; fail "remove not acknowledged"; }
grep -q "added cp_site_b" "$TMP/err" || { cat "$TMP/err" >&2; fail "second add not acknowledged"; }
grep -q "error: pattern 'no_such_function_here' matches no function" "$TMP/err" || { cat "$TMP/err" >&2; fail "bad add not reported"; }
grep -q "cp_target .* removed" "$TMP/err" || { cat "$TMP/err" >&2; fail "list lacks the removed probe"; }
json_check "$TMP/probe.json" '[f["symbol"] for f in d["functions"]] == ["cp_site_a", "cp_target", "cp_site_b"]'
json_check "$TMP/probe.json" 'd["functions"][0]["calls"] > 50 and not d["functions"][0]["removed"]'
# cp_target ran 20 times a round while probed (about 1 s): whole rounds, kept after removal.
json_check "$TMP/probe.json" 'd["functions"][1]["removed"] and d["functions"][1]["calls"] >= 100'
json_check "$TMP/probe.json" 'd["functions"][2]["calls"] > 10 and not d["functions"][1]["unmatched"]'
json_check "$TMP/probe.json" 'all(not p["truncated"] for f in d["functions"] for p in f["paths"])'
# The target's output is unchanged: consecutive rounds, same sum.
python3 - "$TMP/target.out" <<'PY' || fail "target output changed under probes"
import sys
lines = open(sys.argv[1]).read().splitlines()
assert lines[0] == "ready"
rounds = [l for l in lines[1:] if l.strip()]
for i, l in enumerate(rounds[:-1], 1):  # the last line may be cut by the read
    assert l == f"round {i} sum 23", (i, l)
assert len(rounds) > 100, len(rounds)
PY

# The target exits while probed: results so far are kept and printed.
"$ECPI" probe -p "$pid" --func cp_target --format json --report-file "$TMP/exit.json" -o "$TMP/db" \
	--no-stdin >/dev/null 2>"$TMP/exit.err" &
probe=$!
ECPI_TEST_PIDS+=("$probe")
sleep 1.5
kill "$pid"
rc=0
wait "$probe" || rc=$?
[ "$rc" -eq 0 ] || { cat "$TMP/exit.err" >&2; fail "ecpi probe exited $rc when its target exited"; }
grep -q "process $pid exited; its results so far follow" "$TMP/exit.err" || { cat "$TMP/exit.err" >&2; fail "no exit note"; }
json_check "$TMP/exit.json" 'd["target_exited"] and d["final"] and d["functions"][0]["calls"] >= 20'
"$ECPI" paths "$TMP/db" --format json >"$TMP/saved.json"
json_check "$TMP/saved.json" 'd["target_exited"] and d["functions"][0]["calls"] >= 20'
echo PASS
