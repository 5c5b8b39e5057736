/* Burns CPU for a number of milliseconds, then exits: a short-lived process.
 * Usage: burn [milliseconds]   (default 20) */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

__attribute__((noinline)) void burn_cpu(double ms)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	uint64_t x = 1;
	for (;;) {
		for (int i = 0; i < 10000; i++)
			x = x * 6364136223846793005ull + 1;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
		if ((t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) / 1e6 >= ms)
			break;
	}
	sink = x;
}

int main(int argc, char **argv)
{
	burn_cpu(argc > 1 ? atof(argv[1]) : 20.0);
	return 0;
}
