/* A periodic workload in lock step with a 4999 Hz sampler: it runs alias_first
 * for the first half of every 200040 ns period and alias_second for the other
 * half. A fixed sampling period of exactly 200040 ns sees one phase only;
 * a randomized one sees both equally (DCPI 4.1.1).
 * Usage: alias [seconds] [period_ns] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static uint64_t period = 200040;

__attribute__((noinline)) uint64_t alias_first(uint64_t t)
{
	while ((t % period) < period / 2)
		t = now_ns();
	return t;
}

__attribute__((noinline)) uint64_t alias_second(uint64_t t)
{
	while ((t % period) >= period / 2)
		t = now_ns();
	return t;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 3.0;
	if (argc > 2)
		period = strtoull(argv[2], NULL, 10);
	uint64_t end = now_ns() + (uint64_t)(seconds * 1e9), t = now_ns();
	while (t < end) {
		t = alias_first(t);
		t = alias_second(t);
	}
	return 0;
}
