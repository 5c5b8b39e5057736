#!/usr/bin/env bash
# Builds the runtime of another commit for bench/paths.sh's BEFORE_RUNTIME:
# runtime/ as of REV (git archive, no checkout), compiled as
# runtime/CMakeLists.txt compiles it (libecpi_rt.a with cc, the inline
# paths callback as clang bitcode), into DIR.
#
#   bash bench/paths/build_runtime.sh REV DIR
set -euo pipefail
[ $# = 2 ] || { echo "usage: bash bench/paths/build_runtime.sh REV DIR" >&2; exit 2; }
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
rev=$1 dir=$(mkdir -p "$2" && cd "$2" && pwd)
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git -C "$top" archive "$rev" runtime | tar -x -C "$src"
cd "$src/runtime"
clang -O2 -g0 -flto -fPIC -std=gnu11 -Wall -Wextra -Werror -fno-sanitize=all -fno-stack-protector -I. \
	-c rt_paths_inline.c -o "$dir/ecpi_rt_paths_inline.o"
objects=()
for f in rt_core rt_memtrace rt_paths rt_spans rt_malloc; do
	cc -std=gnu11 -fPIC -O2 -g0 -Wall -Wextra -Werror -fno-sanitize=all -fno-stack-protector -fno-omit-frame-pointer \
		-c "$f.c" -o "$src/$f.o"
	objects+=("$src/$f.o")
done
rm -f "$dir/libecpi_rt.a"
ar rcs "$dir/libecpi_rt.a" "${objects[@]}"
echo "$dir: runtime of $(git -C "$top" rev-parse --short "$rev")"
