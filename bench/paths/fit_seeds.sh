#!/usr/bin/env bash
# Two or more ecpi builds' span fits of channels' three paths, seed by seed,
# interleaved with the ablation builds in one hold (issue 31): for judging
# a change to the fit on a VM whose speed moves between holds.
#
#   ECPIS="old=/path/to/ecpi new=build/loader/ecpi" [SEEDS=10] [OUT=dir] bash bench/paths/fit_seeds.sh
#
# Per seed: the plain channels build and its ablations (A, B, C removed, all
# removed) once each, then each ecpi's `paths record --sample 1/10 --seed S`
# of the same inline build (linked with the first ecpi's runtime). Then
# bench/paths/fit_seeds.py: ablation's means (medians over the seeds' runs)
# against each build's fitted means (median, range, seeds within 15%).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${ECPIS:?ECPIS=\"LABEL=ECPI ...\" names the builds to compare}"
SEEDS=${SEEDS:-10}
ROUNDS=2000000  # channels rounds a run: about 0.2 s, as bench/paths.sh times them
OUT=${OUT:-$(mktemp -d /tmp/ecpi-fit-seeds.XXXXXX)}
mkdir -p "$OUT"
read -r -a builds <<<"$ECPIS"
first=${builds[0]#*=}
SOURCE=$here/../../tests/testprogs/paths/channels.c
declare -A DEFS=([whole]="" [no_a]=-DWITHOUT_DIGEST [no_b]=-DWITHOUT_LOOKUP [no_c]=-DWITHOUT_HEARTBEAT
	[none]="-DWITHOUT_DIGEST -DWITHOUT_LOOKUP -DWITHOUT_HEARTBEAT")
for b in "${!DEFS[@]}"; do clang -O2 ${DEFS[$b]} -o "$OUT/channels.$b" "$SOURCE"; done
clang -O2 $("$first" flags paths --inline) -o "$OUT/channels.inline" "$SOURCE"
loop_seconds() { sed -n 's/.*loop \([0-9.]*\) s.*/\1/p' | head -1; }
rm -f "$OUT/ablation.times"
echo "# $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg), $SEEDS seeds: ${builds[*]}"
for seed in $(seq "$SEEDS"); do
	for b in whole no_a no_b no_c none; do echo "$b $("$OUT/channels.$b" "$ROUNDS" | loop_seconds)" >>"$OUT/ablation.times"; done
	for spec in "${builds[@]}"; do
		label=${spec%%=*} ecpi=${spec#*=}
		rm -rf "$OUT/$label.$seed.db"
		"$ecpi" paths record -o "$OUT/$label.$seed.db" --sample 1/10 --seed "$seed" -- "$OUT/channels.inline" "$ROUNDS" >/dev/null
		"$ecpi" paths "$OUT/$label.$seed.db" --branch --limit 0 --procedure poll --format json >"$OUT/$label.$seed.json"
	done
done
echo "# done, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$here/fit_seeds.py" "$OUT" "$SOURCE" "$ROUNDS" "${builds[@]%%=*}"
