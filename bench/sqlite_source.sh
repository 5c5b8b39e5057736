# SQLite's amalgamation from npm's better-sqlite3, fetched once into a cache
# directory (never into the tree). Source this file, then
#   sqlite_source CACHE_DIR TMP_DIR   -> prints the directory holding sqlite3.c and sqlite3.h
# Fails with a one-line reason on stderr when npm or the fetch is missing.
# The same layout as bench/cachesim.sh's cache (CACHE_DIR/sqlite), so either
# script reuses what the other fetched.
sqlite_source() {
	local dir=$1/sqlite tmp=$2
	mkdir -p "$dir"
	if [ ! -s "$dir/sqlite3.c" ] || [ ! -s "$dir/sqlite3.h" ]; then
		command -v npm >/dev/null || { echo "sqlite: npm is not installed" >&2; return 1; }
		(cd "$tmp" && npm pack better-sqlite3 --silent >npm.log 2>&1) ||
			{ echo "sqlite: npm pack better-sqlite3 failed: $(tail -1 "$tmp/npm.log")" >&2; return 1; }
		tar -xzf "$tmp"/better-sqlite3-*.tgz -C "$tmp" package/deps/sqlite3/sqlite3.c package/deps/sqlite3/sqlite3.h
		mv "$tmp/package/deps/sqlite3/sqlite3.c" "$tmp/package/deps/sqlite3/sqlite3.h" "$dir/"
		basename "$tmp"/better-sqlite3-*.tgz .tgz >"$dir/from"
	fi
	echo "$dir"
}
