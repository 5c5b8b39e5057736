#!/usr/bin/env bash
# Builds the runtime of another commit for bench/paths.sh's BEFORE_RUNTIME:
# runtime/ as of REV (git archive, no checkout), compiled as
# runtime/CMakeLists.txt compiles it (libecpi_rt.a with cc, the inline
# paths callback as clang bitcode), into DIR. REV "worktree": the working
# tree's runtime/, uncommitted changes included. DEFINE...: -D flags added
# to every compile (bench/paths.sh breakdown: -DECPI_RT_BENCH_NO_BURSTS,
# -DECPI_RT_BENCH_NO_SPAN_RECORDS; runtime/rt_spans.c).
#
#   bash bench/paths/build_runtime.sh REV DIR [DEFINE...]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bash bench/paths/build_runtime.sh REV DIR [DEFINE...]" >&2; exit 2; }
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
rev=$1 dir=$(mkdir -p "$2" && cd "$2" && pwd)
shift 2
defines=("$@")
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
if [ "$rev" = worktree ]; then
	cp -r "$top/runtime" "$src/"
else
	git -C "$top" archive "$rev" runtime | tar -x -C "$src"
fi
cd "$src/runtime"
clang -O2 -g0 -flto -fPIC -std=gnu11 -Wall -Wextra -Werror -fno-sanitize=all -fno-stack-protector -I. "${defines[@]}" \
	-c rt_paths_inline.c -o "$dir/ecpi_rt_paths_inline.o"
objects=()
for f in rt_core rt_memtrace rt_paths rt_spans rt_malloc; do
	cc -std=gnu11 -fPIC -O2 -g0 -Wall -Wextra -Werror -fno-sanitize=all -fno-stack-protector -fno-omit-frame-pointer \
		"${defines[@]}" -c "$f.c" -o "$src/$f.o"
	objects+=("$src/$f.o")
done
rm -f "$dir/libecpi_rt.a"
ar rcs "$dir/libecpi_rt.a" "${objects[@]}"
echo "$dir: runtime of $([ "$rev" = worktree ] && echo "the working tree" || git -C "$top" rev-parse --short "$rev") ${defines[*]}"
