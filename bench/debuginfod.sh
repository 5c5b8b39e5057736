#!/usr/bin/env bash
# debuginfod (issue 30, item 2): the time `ecpi prof` takes on a profile of a
# stripped binary when its debug file is fetched from a debuginfod server
# (first fetch, cache empty), when it is in libdebuginfod's cache (second
# run), and offline (--no-debuginfod: names from .eh_frame). The server is
# elfutils' debuginfod on a loopback port, serving the -g build of ecpi
# itself (a debug file of realistic size); the profile is made without BPF
# (tests/golden/mkdb) with samples on a few of ecpi's functions, so no root
# is needed. Each figure is the median of RUNS runs.
#
# Usage: bash bench/debuginfod.sh [BUILD=build] [RUNS=5]
set -euo pipefail
BUILD=${1:-build}
RUNS=${2:-5}
ECPI=$BUILD/loader/ecpi
MKDB=$BUILD/tests/golden/ecpi_golden_mkdb
die() { echo "bench/debuginfod.sh: $*" >&2; exit 1; }
[[ -x $ECPI ]] || die "$ECPI not found: cmake --build $BUILD --target ecpi"
[[ -x $MKDB ]] || die "$MKDB not found: cmake --build $BUILD --target ecpi_golden_mkdb"
command -v debuginfod >/dev/null || die "debuginfod not found: scripts/install-deps.sh --test"
TMP=$(mktemp -d /tmp/ecpi-bench-debuginfod.XXXXXX)
SERVER=""
cleanup() {
	[[ -n $SERVER ]] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# ecpi: $ECPI ($(git -C "$(dirname "$ECPI")" rev-parse --short HEAD 2>/dev/null || echo '?'))"
mkdir -p "$TMP/served" "$TMP/image"
cp "$ECPI" "$TMP/served/ecpi"
objcopy --strip-all "$ECPI" "$TMP/image/ecpi"
BID=$(readelf -n "$TMP/image/ecpi" | awk '/Build ID/ {print $3}')
echo "# debug file: $(du -h "$TMP/served/ecpi" | cut -f1) (build id $BID); stripped image: $(du -h "$TMP/image/ecpi" | cut -f1)"

# A profile of the stripped copy: samples on main and four more functions.
python3 - "$TMP/image/ecpi" "$ECPI" >"$TMP/spec.json" <<'PY'
import json, subprocess, sys
image, full = sys.argv[1], sys.argv[2]
nm = subprocess.run(["nm", "--defined-only", full], capture_output=True, text=True, check=True).stdout
funcs = [(int(l.split()[0], 16), l.split()[2]) for l in nm.splitlines() if len(l.split()) == 3 and l.split()[1] in "tT"]
chosen = [f for f in funcs if f[1] == "main"] + [f for f in funcs if f[1] != "main"][:: max(1, len(funcs) // 4)][:4]
samples = [{"pid": 1, "address": addr, "count": 100} for addr, _ in chosen]
print(json.dumps({"epochs": [{"profiles": [{"image": image, "build_id_of": image, "event": "cpu-clock",
                                             "period": 1000000, "samples": samples}]}]}))
PY
"$MKDB" "$TMP/spec.json" "$TMP/db" >/dev/null

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
debuginfod -F "$TMP/served" -p "$PORT" -d "$TMP/index.sqlite" >/dev/null 2>"$TMP/server.log" &
SERVER=$!
for _ in $(seq 1 300); do
	curl -sf -o /dev/null "http://127.0.0.1:$PORT/buildid/$BID/debuginfo" -r 0-0 && break
	sleep 0.1
done
curl -sf -o /dev/null "http://127.0.0.1:$PORT/buildid/$BID/debuginfo" -r 0-0 || die "debuginfod did not serve $BID: $(cat "$TMP/server.log")"
export DEBUGINFOD_URLS=http://127.0.0.1:$PORT

# One `ecpi prof`, its wall time in ms on stdout; checks that main got its name (or not).
prof_ms() {  # CACHE WANT_MAIN(yes|no) [ARGS...]
	local cache=$1 want=$2
	shift 2
	local start end
	start=$(date +%s%N)
	DEBUGINFOD_CACHE_PATH=$cache "$ECPI" prof "$TMP/db" --format json "$@" >"$TMP/out.json" 2>"$TMP/err"
	end=$(date +%s%N)
	if grep -q '"procedure": *"main"' "$TMP/out.json"; then got=yes; else got=no; fi
	[[ $got == "$want" ]] || die "main named: $got, expected $want: $(cat "$TMP/err")"
	echo $(((end - start) / 1000000))
}
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

first=() cached=() offline=()
for i in $(seq 1 "$RUNS"); do
	first+=("$(prof_ms "$TMP/cache.$i" yes)")
	cached+=("$(prof_ms "$TMP/cache.$i" yes)")
	offline+=("$(prof_ms "$TMP/cache.none" no --no-debuginfod)")
done
printf '%-34s %s\n' case "median_ms (runs)"
printf '%-34s %s (%s)\n' "first fetch (empty cache)" "$(printf '%s\n' "${first[@]}" | median)" "${first[*]}"
printf '%-34s %s (%s)\n' "cached (second run)" "$(printf '%s\n' "${cached[@]}" | median)" "${cached[*]}"
printf '%-34s %s (%s)\n' "--no-debuginfod (.eh_frame names)" "$(printf '%s\n' "${offline[@]}" | median)" "${offline[*]}"
