#!/usr/bin/env bash
# What an ecpi command costs before it does anything: the CPU time (perf
# stat task-clock, RUNS runs, ROUNDS interleaved rounds) of `--help` and
# `cachesim --help` for each ecpi given, and where it goes: stub programs
# that do nothing but link the shared libraries the first ecpi names
# (all of them; without libcurl and libdebuginfod, which fleet/ and
# analyze/symbols/ now load at first use; without Capstone too; none), so
# the dynamic loader's share per group of libraries is measured apart from
# ecpi's own start (static initialisers, CLI11's command table).
# Start-up is part of every cachesim run's "simulation time" (issue 32,
# docs/CACHESIM.md "Start-up").
#
# Usage: flock -x -w 1200 /work/quiet.lock bash bench/startup.sh ECPI [ECPI...]
# Environment: RUNS (30), ROUNDS (3)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bash bench/startup.sh ECPI [ECPI...]" >&2; exit 2; }
command -v perf >/dev/null || { echo "bench/startup.sh: perf is not installed (linux-perf)" >&2; exit 1; }
command -v cc >/dev/null || { echo "bench/startup.sh: cc is not installed (gcc)" >&2; exit 1; }
RUNS=${RUNS:-30}
ROUNDS=${ROUNDS:-3}
T=$(mktemp -d /tmp/ecpi-bench-startup.XXXXXX)
trap 'rm -rf "$T"' EXIT

echo "# $(date -u +%FT%TZ), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), $(ldd --version | head -1)"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# Stubs: main() { return 0; } linked (--no-as-needed) against groups of the first ecpi's libraries.
mapfile -t needed < <(readelf -d "$1" | sed -n 's/.*(NEEDED).*\[lib\([^]]*\)\.so.*\]/\1/p')
stub() {  # stub NAME LIB...: T/NAME linked against -lLIB...
	local name=$1
	shift
	echo 'int main(void) { return 0; }' >"$T/stub.c"
	cc -o "$T/$name" "$T/stub.c" -Wl,--no-as-needed $(printf -- '-l%s ' "$@")
}
keep=()
for l in "${needed[@]}"; do [[ $l == curl || $l == debuginfod ]] || keep+=("$l"); done
nocs=()
for l in "${keep[@]}"; do [ "$l" = capstone ] || nocs+=("$l"); done
stub stub_all "${needed[@]}"
stub stub_no_curl_debuginfod "${keep[@]}"
stub stub_no_curl_debuginfod_capstone "${nocs[@]}"
stub stub_none c
echo "# $1 names: ${needed[*]}"

objects() { ldd "$1" | grep -c '=>\|ld-linux' || true; }
task_ms() {  # task_ms CMD...: mean task-clock in ms over RUNS runs
	perf stat -r "$RUNS" -x, -e task-clock -- "$@" 2>&1 >/dev/null | awk -F, '$3 == "task-clock" { print $1 }'
}
declare -A ms
for r in $(seq "$ROUNDS"); do
	for s in stub_all stub_no_curl_debuginfod stub_no_curl_debuginfod_capstone stub_none; do
		ms["$s"]+="$(task_ms "$T/$s") "
	done
	for e in "$@"; do
		ms["$e --help"]+="$(task_ms "$e" --help) "
		ms["$e cachesim --help"]+="$(task_ms "$e" cachesim --help) "
	done
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| what | objects loaded | task-clock ms, mean of $RUNS runs, each of $ROUNDS rounds | median |"
echo "|---|---:|---|---:|"
row() {  # row LABEL OBJECTS KEY
	local v
	v=$(tr ' ' '\n' <<<"${ms[$3]}" | grep . | sort -g)
	printf '| %s | %s | %s | %s |\n' "$1" "$2" "$(tr '\n' ' ' <<<"$v" | xargs)" "$(sed -n "$(( (ROUNDS + 1) / 2 ))p" <<<"$v")"
}
for s in stub_all stub_no_curl_debuginfod stub_no_curl_debuginfod_capstone stub_none; do
	row "$s" "$(objects "$T/$s")" "$s"
done
for e in "$@"; do
	row "\`$e --help\`" "$(objects "$e")" "$e --help"
	row "\`$e cachesim --help\`" "$(objects "$e")" "$e cachesim --help"
done
