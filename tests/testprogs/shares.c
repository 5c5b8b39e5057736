/* A workload whose CPU shares are known by construction: three functions with
 * identical loop bodies, called with trip counts in the ratio 60:30:10.
 * Usage: shares [seconds]   (default 3) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

#define SPIN_BODY(n)                                     \
	uint64_t x = sink + 1;                           \
	for (uint64_t i = 0; i < (n); i++)               \
		x = x * 6364136223846793005ull + 1442695040888963407ull; \
	sink = x;

__attribute__((noinline)) void share_sixty(uint64_t n) { SPIN_BODY(n) }
__attribute__((noinline)) void share_thirty(uint64_t n) { SPIN_BODY(n) }
__attribute__((noinline)) void share_ten(uint64_t n) { SPIN_BODY(n) }

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 3.0;
	double start = now();
	uint64_t rounds = 0;
	while (now() - start < seconds) {
		share_sixty(60000);
		share_thirty(30000);
		share_ten(10000);
		rounds++;
	}
	printf("shares: %llu rounds in %.2f s\n", (unsigned long long)rounds, now() - start);
	return 0;
}
