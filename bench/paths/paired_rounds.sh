#!/usr/bin/env bash
# Interleaved, paired rounds of programs that print "loop X s" (channels,
# orders, chain; issue 31): each round runs every configuration once, the
# order reversed every other round (a drift within a round weighs on all
# alike), and the table gives each configuration's loop time over the
# first configuration's in the same round (median, quartiles). Take the
# exclusive quiet lock around it: every figure is a time.
#
#   ROUNDS=21 bash bench/paths/paired_rounds.sh 'plain=./plain 2000000' 'idle=./inline 2000000' ...
#
# Each argument is LABEL=COMMAND (run by bash -c; its stdout must hold the
# loop line). Environment: ROUNDS (21), KEEP (a file to keep the raw times in).
set -euo pipefail
ROUNDS=${ROUNDS:-21}
[ $# -ge 2 ] || { echo "usage: ROUNDS=N bash bench/paths/paired_rounds.sh LABEL=COMMAND LABEL=COMMAND..." >&2; exit 2; }
times=$(mktemp /tmp/ecpi-paired-rounds.XXXXXX)
trap 'rm -f "$times"' EXIT
labels=() commands=()
for spec in "$@"; do
	labels+=("${spec%%=*}") commands+=("${spec#*=}")
done
echo "# $(date -u +%FT%TZ), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
	order=$(seq 0 $(($# - 1)))
	[ $((r % 2)) = 1 ] || order=$(seq $(($# - 1)) -1 0)
	for i in $order; do
		loop=$(bash -c "${commands[$i]}" | sed -n 's/.*loop \([0-9.]*\) s.*/\1/p' | head -1)
		[ -n "$loop" ] || { echo "bench/paths/paired_rounds.sh: '${commands[$i]}' printed no 'loop X s' line" >&2; exit 1; }
		echo "$r ${labels[$i]} $loop" >>"$times"
	done
done
echo "# done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "${KEEP:-}" ] || cp "$times" "$KEEP"
python3 - "$times" "${labels[@]}" <<'PY'
import collections, statistics, sys
rounds = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, label, loop = line.split()
    rounds[r][label] = float(loop)
labels = sys.argv[2:]
def q(v):
    v = sorted(v)
    return f"{statistics.median(v):.3f} ({v[len(v) // 4]:.3f}-{v[(3 * len(v)) // 4]:.3f})"
print(f"| configuration | loop s, median (quartiles) | ÷ {labels[0]}, paired per round |\n|---|---:|---:|")
for label in labels:
    loops = [rounds[r][label] for r in rounds]
    ratios = [rounds[r][label] / rounds[r][labels[0]] for r in rounds]
    print(f"| {label} | {q(loops)} | {q(ratios)} |")
PY
