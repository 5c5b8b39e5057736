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
echo PASS
