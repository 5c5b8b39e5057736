/* chain: a loop whose every iteration is one acyclic path of known cost,
 * a dependent chain of STEPS 64-bit multiplications (bench/paths.sh, part
 * 3: how much `ecpi paths record` distorts the time of a path).
 *
 *   chain STEPS ITERATIONS     (STEPS: 16, 64 or 256)
 *
 * The empty asm after each multiplication keeps the value in a register
 * and stops clang from reassociating the chain (x*m*m*m... into powers of
 * m by squaring), so each step waits for the one before: the iteration
 * costs STEPS times the multiply latency plus the loop's branch. Prints
 * the loop's wall time and the time per iteration. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define STEP                                                                                                           \
	x *= m;                                                                                                        \
	__asm__ volatile("" : "+r"(x));
#define STEP4 STEP STEP STEP STEP
#define STEP16 STEP4 STEP4 STEP4 STEP4
#define STEP64 STEP16 STEP16 STEP16 STEP16
#define STEP256 STEP64 STEP64 STEP64 STEP64

static double seconds_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) static uint64_t chain16(uint64_t x, uint64_t m, long iterations)
{
	for (long i = 0; i < iterations; i++) {
		STEP16
	}
	return x;
}

__attribute__((noinline)) static uint64_t chain64(uint64_t x, uint64_t m, long iterations)
{
	for (long i = 0; i < iterations; i++) {
		STEP64
	}
	return x;
}

__attribute__((noinline)) static uint64_t chain256(uint64_t x, uint64_t m, long iterations)
{
	for (long i = 0; i < iterations; i++) {
		STEP256
	}
	return x;
}

int main(int argc, char **argv)
{
	long steps = argc > 1 ? atol(argv[1]) : 64;
	long iterations = argc > 2 ? atol(argv[2]) : 1000000;
	if ((steps != 16 && steps != 64 && steps != 256) || iterations <= 0) {
		fprintf(stderr, "usage: chain STEPS(16|64|256) ITERATIONS>0\n");
		return 2;
	}
	/* The multiplier comes from the arguments so nothing is folded. */
	uint64_t m = 0x9E3779B97F4A7C15ULL ^ (uint64_t)iterations, x = (uint64_t)steps | 1;
	double started = seconds_now();
	x = steps == 16 ? chain16(x, m, iterations) : steps == 64 ? chain64(x, m, iterations) : chain256(x, m, iterations);
	double elapsed = seconds_now() - started;
	printf("chain: %ld steps, %ld iterations, result %016llx, loop %.3f s, %.3f ns per iteration\n", steps, iterations,
	       (unsigned long long)x, elapsed, elapsed * 1e9 / (double)iterations);
	return 0;
}
