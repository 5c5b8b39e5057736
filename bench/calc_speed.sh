#!/usr/bin/env bash
# Speed of `ecpi calc --all` (issue: DCPI took about 3 minutes for 26 MB of
# executables; target under 10 s for the same amount of code on one core).
# Profiles clang compiling a file (clang's code lives in libLLVM and
# libclang-cpp, over 100 MB of shared libraries), then times `ecpi calc --all
# --unsampled --summary` over every procedure of the chosen image, sampled or
# not, pinned to one CPU. Prints the code bytes analyzed, the seconds and the
# MB per second. Needs root (recording) and clang.
#
# Usage: bash bench/calc_speed.sh [IMAGE]   (default libLLVM-14.so.1)
#   ECPI=path/to/ecpi (default build/loader/ecpi)   REPS=3
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ECPI=${ECPI:-$here/../build/loader/ecpi}
IMAGE=${1:-libLLVM-14.so.1}
REPS=${REPS:-3}
command -v clang >/dev/null || { echo "calc_speed.sh: clang is not installed" >&2; exit 1; }
tmp=$(mktemp -d /tmp/ecpi-calc-speed.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$ECPI" record -q -o "$tmp/db" -- sh -c "for f in '$here'/accuracy/*.c; do clang -O2 -c -o '$tmp/x.o' \$f; done"
echo "ecpi calc --all speed: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), image $IMAGE"
for r in $(seq "$REPS"); do
	start=$(date +%s.%N)
	taskset -c 0 "$ECPI" calc --all "$tmp/db" --image "$IMAGE" --unsampled --summary --no-lines --format json \
		> "$tmp/calc.json"
	end=$(date +%s.%N)
	python3 - "$tmp/calc.json" "$start" "$end" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
wall = float(sys.argv[3]) - float(sys.argv[2])
mb = d["analyzed_bytes"] / 1e6
sampled = sum(1 for p in d["procedures"] if p["samples"] > 0)
print(f"  {len(d['procedures'])} procedures ({sampled} sampled), {mb:.1f} MB of code: "
      f"analysis {d['analysis_seconds']:.2f} s, command {wall:.2f} s wall, "
      f"{mb / d['analysis_seconds']:.1f} MB/s; 26 MB would take {26 / mb * wall:.1f} s")
PY
done
