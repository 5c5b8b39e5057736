# The html export of a real -g recording in a real headless browser
# (Debian's chromium, driven over the DevTools protocol by
# flamegraph_browser.py): no console errors, hover and click-to-zoom work,
# search highlights; the screenshot is kept in $ECPI_TEST_ARTIFACTS (default
# <build>/test-artifacts) and its path printed.
source "$TESTLIB"
require_bpf
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || skip "chromium is not installed (scripts/install-deps.sh installs it)"
ARTIFACTS=${ECPI_TEST_ARTIFACTS:-$(dirname "$ECPI")/../test-artifacts}
mkdir -p "$ARTIFACTS"
"$ECPI" record -g -o "$TMP/db" -- sh -c "\"$TESTPROGS/shares\" 1 >/dev/null" 2>/dev/null
"$ECPI" export "$TMP/db" --format html -o "$TMP/flame.html"
grep -qE "https?://" "$TMP/flame.html" && fail "the page refers to the network"
cp "$TMP/flame.html" "$ARTIFACTS/export_html.html"
timeout 120 python3 "$(dirname "$TESTLIB")/flamegraph_browser.py" "$CHROMIUM" "$TMP/flame.html" share_sixty \
	"$ARTIFACTS/export_html.png" || fail "the flame graph page failed in chromium"
echo "screenshot: $(cd "$ARTIFACTS" && pwd)/export_html.png"
echo PASS
