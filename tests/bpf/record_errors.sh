# Every refusal is one line naming the cause and what to do.
source "$TESTLIB"
require_bpf
# No hardware PMU here: the event is named with the alternative. (Where a PMU
# exists, the recording succeeds.)
if ! perf_ok=$("$ECPI" record -q -o "$TMP/hw" -e cycles -- true 2>"$TMP/hw.err"); then
	grep -q "'cycles'" "$TMP/hw.err" || fail "hardware event error does not name the event"
	grep -q "cpu-clock" "$TMP/hw.err" || fail "hardware event error does not say what to use"
	[ "$(wc -l <"$TMP/hw.err")" -eq 1 ] || fail "hardware event error is not one line"
fi
expect_exit 1 "no process with pid" "$ECPI" record -q -o "$TMP/db" -p 99999999 --duration 1
expect_exit 1 "cannot run 'ecpi-no-such-command'" "$ECPI" record -q -o "$TMP/db" -- ecpi-no-such-command
# Without privileges the missing capabilities are named.
if command -v setpriv >/dev/null; then
	expect_exit 1 "CAP_BPF and CAP_PERFMON" setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
		"$ECPI" record -q -o "$TMP/unpriv" -- true
fi
# A database path that is a file.
touch "$TMP/file"
expect_exit 1 "file" "$ECPI" record -q -o "$TMP/file" -- true
# The overhead budget chooses the rate; -F forces one; not both.
expect_exit 2 "not both" "$ECPI" record -F 99 --overhead-budget 1 -o "$TMP/b" -- true
expect_exit 2 "overhead-budget" "$ECPI" record --overhead-budget 0 -o "$TMP/b" -- true
"$ECPI" record --overhead-budget 2 --calibration-history "$TMP/calibrations" -o "$TMP/b" --report-file "$TMP/b.json" --format json -- "$TESTPROGS/burn" 300 >/dev/null
json_check "$TMP/b.json" '19 <= d["frequency_hz"] <= 4999 and d["overhead_budget"]["budget_percent"] == 2 and d["overhead_budget"]["cost_per_sample_us"]["median"] > 0'
json_check "$TMP/b.json" 'd["overhead_budget"]["estimated_overhead_percent"] <= 2.0001 or d["frequency_hz"] == 19'
echo PASS
