/* A program with known procedures, source lines and an inlined helper, for
 * the annotate, diff and export tests (tests/unit/symbols/annotate_test.cpp,
 * tests/golden/). Built -O2 -g with frame pointers. Lines the tests look for
 * carry a marker comment; the tests find their line numbers by the marker.
 * Usage: annotest [seconds]   (default 1) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

/* Always inlined: its code in hot_loop belongs to an inlined instance. */
static inline __attribute__((always_inline)) uint64_t mix(uint64_t x)
{
	return x * 6364136223846793005ull + 1442695040888963407ull; /* MARK_MIX */
}

__attribute__((noinline)) uint64_t hot_loop(uint64_t n)
{
	uint64_t x = sink;
	for (uint64_t i = 0; i < n; i++)
		x = mix(x) ^ (x >> 17); /* MARK_LOOP */
	sink = x;                        /* MARK_STORE */
	return x;
}

__attribute__((noinline)) uint64_t leaf_work(uint64_t n)
{
	uint64_t x = sink + 3;
	for (uint64_t i = 0; i < n; i++)
		x = (x << 7) ^ (x >> 3) ^ i; /* MARK_LEAF */
	sink = x;
	return x;
}

__attribute__((noinline)) uint64_t caller_a(uint64_t n)
{
	return leaf_work(n) + 1; /* MARK_CALL_A */
}

__attribute__((noinline)) uint64_t caller_b(uint64_t n)
{
	return leaf_work(n * 2) + 2; /* MARK_CALL_B */
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 1.0;
	double start = now();
	uint64_t acc = 0;
	while (now() - start < seconds) {
		acc += hot_loop(100000);
		acc += caller_a(20000);
		acc += caller_b(10000);
	}
	printf("annotest: %llu\n", (unsigned long long)(acc & 0xff));
	return 0;
}
