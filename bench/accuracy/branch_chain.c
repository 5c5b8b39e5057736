/* Cycles per iteration of a loop with a chain of data-dependent branches
 * (issue 36), branchy.c's classify() itself (included): a three-way `if / else if / else` on a random 32-bit value
 * (taken 1/16, 3/16 and 12/16 of the time) and a branch-free odd count,
 * over 8192 values (in L1/L2), timed unsampled with the add-chain clock.
 * `random` gives the branches their unpredictable outcomes, new values for
 * each timed pass (the same 8192 values again and again, Zen 5's predictor
 * learned them: 2.0 cycles, as fast as `one way`); `one way` runs
 * the same code on values that all take the common way (a predictor learns
 * it), so the difference is what the mispredictions cost; the machine
 * model's best case for the loop is neither. Prints the median of 7
 * interleaved rounds of each. Used by docs/MACHINE_MODEL.md to check what
 * a profile's samples say a loop iteration costs against the time it takes. */
#define BRANCHY_NO_MAIN
#pragma GCC diagnostic ignored "-Wunused-variable" /* branchy.c's main uses the rest */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "branchy.c" /* its classify(), timed here as the profile saw it */
#include "microbench.h"

#define ROUNDS 7
#define PASSES 2000

static uint32_t values[N];

static void fill_values(int one_way, uint32_t seed)
{
	for (int i = 0; i < N; i++) {
		seed = seed * 1103515245u + 12345u;
		values[i] = one_way ? (seed >> 8) | (1u << 23) : seed >> 8;
	}
}

/* Cycles per iteration of one timed round at the clock measured beside it. */
static double round_cycles(int one_way, long *sink)
{
	double mhz = add_chain_mhz(), s = 0;
	for (int p = 0; p < PASSES; p++) {
		fill_values(one_way, 12345u + (uint32_t)p);  /* new values: no pattern to learn */
		double a = cpu_seconds();
		*sink += classify(values, N);
		s += cpu_seconds() - a;
	}
	return s * mhz * 1e6 / ((double)PASSES * N);
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(void)
{
	double random_cycles[ROUNDS], one_way_cycles[ROUNDS];
	long sink = 0;
	for (int r = 0; r < ROUNDS; r++) {
		random_cycles[r] = round_cycles(0, &sink);
		one_way_cycles[r] = round_cycles(1, &sink);
	}
	qsort(random_cycles, ROUNDS, sizeof(double), by_value);
	qsort(one_way_cycles, ROUNDS, sizeof(double), by_value);
	printf("branch chain, random values   %.2f cycles per iteration (%.2f-%.2f)\n", random_cycles[ROUNDS / 2],
	       random_cycles[0], random_cycles[ROUNDS - 1]);
	printf("branch chain, one way         %.2f cycles per iteration (%.2f-%.2f)\n", one_way_cycles[ROUNDS / 2],
	       one_way_cycles[0], one_way_cycles[ROUNDS - 1]);
	return sink == 42 ? 1 : 0;
}
