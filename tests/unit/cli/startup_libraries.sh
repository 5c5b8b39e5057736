# What ecpi loads before main(): libcurl (fleet/) and libdebuginfod
# (analyze/symbols/) are loaded at first use, not at start-up
# (include/ecpi/shared_library.h), so a command that does not reach
# ClickHouse or a debuginfod server never maps them, nor the TLS, HTTP/2,
# LDAP and Kerberos libraries they bring. No privileges needed.
source "$TESTLIB"
for args in "--help" "cachesim --help" "prof $TMP/missing"; do
	# shellcheck disable=SC2086 # the words of args are the command's
	LD_DEBUG=files LD_DEBUG_OUTPUT="$TMP/ld" "$ECPI" $args >/dev/null 2>&1 || true  # prof fails: no database
	loaded=$(cat "$TMP"/ld.* 2>/dev/null | sed -n 's/.*file=\([^ ]*\).*\[0\];  generating link map/\1/p' | sort -u)
	rm -f "$TMP"/ld.*
	[ -n "$loaded" ] || fail "LD_DEBUG=files named no library for ecpi $args (did the loader change its words?)"
	for lib in libcurl libdebuginfod libgnutls libssl libldap libkrb5; do
		! grep -q "^$lib" <<<"$loaded" || fail "ecpi $args loads $(grep "^$lib" <<<"$loaded" | head -1) at start-up"
	done
done
echo PASS
