#!/usr/bin/env bash
# The store decoders' mutation fuzzer (tests/unit/store/fuzz_test.cpp) run for
# longer than `make test` gives it: SECONDS_BUDGET (default 600) per seed,
# over SEEDS (default "1 2 3"). Exits non-zero on the first crash, hang or
# failed check, printing the seed that reproduces it.
#   bench/fuzz_store.sh [build-dir]
set -euo pipefail
build=${1:-build}
bin="$build/tests/unit/store/ecpi_store_tests"
[ -x "$bin" ] || { echo "fuzz_store: $bin not built; run cmake --build $build first" >&2; exit 1; }
for seed in ${SEEDS:-1 2 3}; do
	echo "seed $seed, ${SECONDS_BUDGET:-600} s"
	ECPI_FUZZ_SEED=$seed ECPI_FUZZ_SECONDS=${SECONDS_BUDGET:-600} "$bin" --test-case='fuzz:*' --success=false \
		|| { echo "fuzz_store: failure with ECPI_FUZZ_SEED=$seed" >&2; exit 1; }
done
