# A process in another mount namespace: its binary is read through
# /proc/PID/root while it runs and cached by build id in the database, so the
# report still names its functions after the namespace (and file) are gone.
source "$TESTLIB"
require_bpf
command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
mkdir -p "$TMP/host-view"
"$ECPI" record -q -o "$TMP/db" -- unshare --mount --propagation private sh -c "
	mount -t tmpfs ecpi-test '$TMP/host-view' &&
	cp '$TESTPROGS/shares' '$TMP/host-view/containerized' &&
	'$TMP/host-view/containerized' 2 >/dev/null"
[ -e "$TMP/host-view/containerized" ] && fail "the test binary leaked out of its mount namespace"
"$ECPI" prof "$TMP/db" --format json >"$TMP/prof.json"
json_check "$TMP/prof.json" 'any(r["procedure"] == "share_sixty" and r["image"].endswith("/containerized") for r in d["rows"])'
ls "$TMP"/db/images/*/* >/dev/null || fail "no binary cached in the database"
echo PASS
