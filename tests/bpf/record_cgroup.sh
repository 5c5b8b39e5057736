# --cgroup (record and daemon): a cgroup v2 directory is created, one
# process burns CPU inside it and another outside; only the one inside is
# profiled. Removing the cgroup under the daemon is logged once and does not
# stop it. The cgroup (and any cgroup2 mount made for it) is removed after.
source "$TESTLIB"
require_bpf
root=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
mounted=""
if [ -z "$root" ]; then
	root="$TMP/cgroup2"
	mkdir -p "$root"
	mount -t cgroup2 none "$root" 2>/dev/null || skip "no cgroup v2 hierarchy and none can be mounted"
	mounted=$root
fi
cg="$root/ecpi-test-${TMP##*.}"
mkdir "$cg" || skip "cannot create a cgroup under $root"
cleanup_cgroup() {
	# Its processes are ours: they go first, then the directory.
	for p in "${ECPI_TEST_PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for _ in $(seq 50); do rmdir "$cg" 2>/dev/null && break; sleep 0.1; done
	[ -n "$mounted" ] && umount "$mounted" 2>/dev/null || true
}
trap 'rc=$?; cleanup_cgroup; (exit $rc); ecpi_cleanup' EXIT

# Inside: burn (burn_cpu). Outside: spinner (spinner_parent_loop).
sh -c "echo \$\$ > '$cg/cgroup.procs' && exec '$TESTPROGS/burn' 8000" &
inside=$!
"$TESTPROGS/spinner" 4 >/dev/null &
outside=$!
ECPI_TEST_PIDS+=("$inside" "$outside")
sleep 0.3
grep -qx "$inside" "$cg/cgroup.procs" || fail "the test process did not join $cg"

"$ECPI" record -q -o "$TMP/rec.db" --cgroup "$cg" --duration 1.5
"$ECPI" prof "$TMP/rec.db" --format json >"$TMP/rec.json"
json_check "$TMP/rec.json" 'any(r["procedure"] == "burn_cpu" and r["samples"]["cpu-clock"] > 1000 for r in d["rows"])'
json_check "$TMP/rec.json" 'not any(r["procedure"] == "spinner_parent_loop" for r in d["rows"])'

# The daemon, the same way (and a cgroup path relative to the mount works too
# when the mount is /sys/fs/cgroup; the absolute path is what is tested here).
start_daemon "$TMP/daemon.db" --cgroup "$cg" --drain-interval 1 -F 999  # a fixed rate: the overhead budget's calibration is not what this tests
sleep 1
"$ECPI" ctl --db "$TMP/daemon.db" flush >/dev/null
# The cgroup goes away under the running daemon: it says so once and goes on.
kill "$inside" 2>/dev/null || true
wait "$inside" 2>/dev/null || true
for _ in $(seq 50); do rmdir "$cg" 2>/dev/null && break; sleep 0.1; done
[ ! -d "$cg" ] || fail "could not remove $cg for the test"
sleep 3
"$ECPI" ctl --db "$TMP/daemon.db" status >/dev/null || fail "the daemon stopped answering after its cgroup was removed"
[ "$(grep -c "cgroup $cg was removed" "$TMP/daemon.log")" -eq 1 ] ||
	{ cat "$TMP/daemon.log" >&2; fail "the removed cgroup was not logged exactly once"; }
stop_daemon
"$ECPI" prof "$TMP/daemon.db" --format json >"$TMP/daemon.json"
json_check "$TMP/daemon.json" 'any(r["procedure"] == "burn_cpu" for r in d["rows"])'
json_check "$TMP/daemon.json" 'not any(r["procedure"] == "spinner_parent_loop" for r in d["rows"])'

# A cgroup that does not exist: a one-line error naming it and what to give.
expect_exit 1 "cgroup v2 directory" "$ECPI" record -q -o "$TMP/none.db" --cgroup "$root/ecpi-no-such-cgroup" --duration 0.2
kill "$outside" 2>/dev/null || true
wait 2>/dev/null || true
echo PASS
