# Shared helpers for the shell tests. Source it; it sets TMP (removed on exit)
# and checks that no BPF program or process of ours is left behind.
set -euo pipefail

: "${ECPI:?ECPI must point to the ecpi binary}"
TMP=$(mktemp -d /tmp/ecpi-test.XXXXXX)
# Every process this test starts inherits the mark, so the leftover check
# below finds ours and not those of another ecpi running on the machine.
export ECPI_TEST_MARK="$TMP"
ECPI_TEST_PIDS=()

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }

ecpi_cleanup() {
	local rc=$?
	for p in "${ECPI_TEST_PIDS[@]:-}"; do
		[ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	rm -rf "$TMP"
	if [ "$rc" -eq 0 ] && [ "$(id -u)" -eq 0 ]; then
		local p
		for p in $(pgrep -x ecpi || true); do
			# (a process may exit between pgrep and this read: not ours to report)
			if { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -xF "ECPI_TEST_MARK=$TMP" >/dev/null; then
				echo "FAIL: ecpi process $p (holding its BPF programs and perf events) outlived the test" >&2
				exit 1
			fi
		done
		if ls /sys/fs/bpf 2>/dev/null | grep ecpi >/dev/null; then
			echo "FAIL: ecpi objects are pinned under /sys/fs/bpf after the test" >&2
			exit 1
		fi
	fi
	exit "$rc"
}
trap ecpi_cleanup EXIT

require_bpf() {
	[ "$(id -u)" -eq 0 ] || skip "needs root (CAP_BPF and CAP_PERFMON) to load BPF programs"
	[ -r /sys/kernel/btf/vmlinux ] || skip "kernel has no BTF (/sys/kernel/btf/vmlinux)"
}

# json_check FILE PYTHON-EXPR: evaluates EXPR with `d` bound to the JSON
# document; fails with the expression when it is false.
json_check() {
	python3 - "$1" "$2" <<'PY' || fail "json check failed: $2 (on $1)"
import json, sys
d = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2])
if not ok:
    print(json.dumps(d, indent=1)[:3000], file=sys.stderr)
    sys.exit(1)
PY
}

# expect_exit CODE PATTERN CMD...: runs CMD, requires exit CODE and PATTERN in stderr.
expect_exit() {
	local want=$1 pattern=$2
	shift 2
	local rc=0
	"$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
	[ "$rc" -eq "$want" ] || { cat "$TMP/err" >&2; fail "'$*' exited $rc, expected $want"; }
	grep -qE -- "$pattern" "$TMP/err" || { cat "$TMP/err" >&2; fail "'$*' stderr lacks /$pattern/"; }
	[ "$(wc -l <"$TMP/err")" -ge 1 ] || fail "no error message"
}

# start_daemon DB ARGS...: starts `ecpi daemon` in the background, waits for
# its control socket; sets DAEMON_PID. The budget's calibration history is
# the test's own (nothing is left under /run).
start_daemon() {
	local db=$1
	shift
	"$ECPI" daemon --db "$db" --calibration-history "$TMP/calibrations" "$@" 2>>"$TMP/daemon.log" &
	DAEMON_PID=$!
	ECPI_TEST_PIDS+=("$DAEMON_PID")
	for _ in $(seq 400); do
		"$ECPI" ctl --db "$db" status --format json >/dev/null 2>&1 && return 0
		kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$TMP/daemon.log" >&2; fail "daemon exited at start"; }
		sleep 0.1
	done
	fail "daemon did not answer on its control socket"
}

stop_daemon() {
	kill -TERM "$DAEMON_PID"
	local rc=0
	wait "$DAEMON_PID" || rc=$?
	[ "$rc" -eq 0 ] || { cat "$TMP/daemon.log" >&2; fail "daemon exited $rc on SIGTERM"; }
}

# truth_rows BENCH NAME REPS: $TMP/NAME run under callgrind with 1 and 2
# repetitions, compared with $TMP/NAME.calc.json for REPS repetitions
# (BENCH/compare.py rows, bench/accuracy) into $TMP/NAME.rows.
truth_rows() {
	local bench=$1 name=$2 reps=$3 r
	for r in 1 2; do
		valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$TMP/$name.cg$r" "$TMP/$name" "$r" \
			>/dev/null 2>&1
	done
	python3 "$bench/compare.py" rows "$name" "$TMP/$name.calc.json" "$reps" "$TMP/$name.cg1" 1 "$TMP/$name.cg2" 2 \
		>"$TMP/$name.rows"
}
