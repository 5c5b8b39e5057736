#!/usr/bin/env bash
# The BPF handler's time per sample (bench/unwind.sh's depth part) for
# several builds or options in interleaved rounds, each round in a rotated
# order, with the median (min-max) per configuration: on a shared machine
# one run's figure swings 2-3x, so compare only medians of runs taken side
# by side. A time: take the exclusive lock on a shared machine.
#
# Usage: bash bench/unwind_rounds.sh ROUNDS SECONDS CONFIG...   (as root)
#
#   CONFIG  LABEL=ECPI_BINARY:MODE[:RECORD_ARGS], MODE cfi or fp, e.g.
#           head=build/loader/ecpi:cfi  noregs=build/loader/ecpi:cfi:--registers=off
# Environment: DEPTHS="30", SHAPES="recursion chain", HZ=999 (as bench/unwind.sh).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: bench/unwind_rounds.sh ROUNDS SECONDS LABEL=ECPI:MODE[:ARGS]..." >&2; exit 2; }
ROUNDS=$1 SECS=$2
shift 2
HERE=$(cd "$(dirname "$0")/.." && pwd)
DEPTHS=${DEPTHS:-30}
SHAPES=${SHAPES:-recursion chain}
OUT=$(mktemp /tmp/ecpi-unwind-rounds.XXXXXX)
trap 'rm -f "$OUT"' EXIT
configs=("$@")
for ((r = 0; r < ROUNDS; r++)); do
	n=${#configs[@]}
	for ((i = 0; i < n; i++)); do
		c=${configs[$(((i + r) % n))]}
		label=${c%%=*} rest=${c#*=}
		IFS=: read -r ecpi mode args <<<"$rest"
		PARTS=depth DEPTHS="$DEPTHS" SHAPES="$SHAPES" MODES="$mode" ECPI="$ecpi" RECORD_ARGS="${args:-}" \
			bash "$HERE/bench/unwind.sh" "$SECS" |
			awk -v label="$label" -v round="$r" -F' *[|] *' \
				'$4 ~ /ns over/ { split($4, a, " "); print label, $1, $2, round, a[1], a[4] }' | tee -a "$OUT"
	done
done
echo
echo "config shape depth: handler ns per sample, median (min-max) of runs; samples per run, median"
python3 - "$OUT" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    label, shape, depth, _, ns, samples = line.split()
    runs.setdefault((label, shape, depth), []).append((float(ns), int(samples)))
for (label, shape, depth), v in sorted(runs.items(), key=lambda kv: (kv[0][1], int(kv[0][2]), kv[0][0])):
    ns = [x for x, _ in v]
    print(f"{label:12} {shape:9} {depth:>4}: {statistics.median(ns):6.0f} ns ({min(ns):.0f}-{max(ns):.0f}), "
          f"{len(ns)} runs, {statistics.median([s for _, s in v]):.0f} samples")
PY
