# The Debian package (`make package`, cmake/package.cmake) and a plain
# `cmake --install`: unpacked into a throwaway root, the binary runs, finds
# its runtime where `ecpi flags` looks, and the systemd unit names it.
source "$TESTLIB"
: "${BUILD_DIR:?BUILD_DIR must be the build tree}"
command -v cpack >/dev/null || skip "cpack not found (cmake)"
command -v dpkg-deb >/dev/null || skip "dpkg-deb not found (dpkg)"

# 1. The package, built from this build tree.
(cd "$TMP" && cpack -G DEB --config "$BUILD_DIR/CPackConfig.cmake" -B "$TMP/pkg" >"$TMP/cpack.log" 2>&1) ||
	{ cat "$TMP/cpack.log" >&2; fail "cpack could not build the package"; }
deb=$(ls "$TMP"/pkg/ecpi_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || fail "cpack made no ecpi_*.deb (log: $(tail -3 "$TMP/cpack.log"))"

# Depends: the Debian runtime packages of the libraries ecpi links, and of
# the two it loads at first use (libcurl4, libdebuginfod1).
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libbpf1 libdw1 libelf1 libcapstone4 libcurl4 libdebuginfod1; do
	grep -q "$lib" <<<"$depends" || fail "Depends lacks $lib: $depends"
done

# 2. Unpacked into a root of its own: the unit, the binary, the runtime.
dpkg -x "$deb" "$TMP/root"
unit=$(find "$TMP/root" -path '*/systemd/system/ecpi-daemon.service' | head -1)
[ -n "$unit" ] || fail "the package installs no ecpi-daemon.service unit"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
binary=${exec_start%% *}
[ -x "$TMP/root$binary" ] || fail "the unit's ExecStart names $binary, which the package does not install"
grep -q -- "daemon --db /var/lib/ecpi" <<<"$exec_start" || fail "the unit does not run the daemon: $exec_start"
grep -q '^WantedBy=multi-user.target' "$unit" || fail "the unit has no [Install] section"
prefix=$(dirname "$(dirname "$binary")")  # /usr (or the prefix the build was configured with)
ls "$TMP/root$prefix"/share/doc/ecpi/README.md "$TMP/root$prefix"/share/doc/ecpi/docs/*.md >/dev/null ||
	fail "the package lacks its docs under $prefix/share/doc/ecpi"
check_installed() {  # ROOT BINARY: the binary runs and finds its runtime under ROOT
	local root=$1 bin=$2
	"$bin" --version | grep -q '^ecpi ' || fail "$bin --version: $("$bin" --version 2>&1)"
	local link
	link=$("$bin" flags memtrace --link) || fail "$bin flags memtrace failed"
	local archive
	archive=$(grep -o '[^ ]*libecpi_rt\.a' <<<"$link")
	[ -n "$archive" ] && [ -f "$archive" ] || fail "$bin flags memtrace names no runtime archive that exists: $link"
	case "$archive" in "$root"/*) ;; *) fail "$bin uses a runtime outside its install ($archive)" ;; esac
	local inline
	inline=$("$bin" flags memtrace --inline --link)
	grep -q "$root[^ ]*ecpi_rt_inline\.o" <<<"$inline" || fail "$bin flags memtrace --inline: no inline runtime under $root: $inline"
}
check_installed "$TMP/root" "$TMP/root$binary"

# 3. `cmake --install build --prefix P` lays out the same tree.
cmake --install "$BUILD_DIR" --prefix "$TMP/prefix" >"$TMP/install.log" 2>&1 ||
	{ cat "$TMP/install.log" >&2; fail "cmake --install failed"; }
check_installed "$TMP/prefix" "$TMP/prefix/bin/ecpi"
[ -f "$TMP/prefix/include/ecpi/ecpi_rt_abi.h" ] || fail "cmake --install put no runtime header in include/ecpi"
echo PASS
